"""Hostile captures for tests: each builder writes one input under a directory and returns its path.

Use ``build_hostile(kind, directory)``; ``HOSTILE_KINDS`` lists the kinds. Everything is built in
memory or under the given directory (pytest's ``tmp_path``), with no network and in well under a
second each, except the bombs (a few tenths of a second: they are built from pre-deflated blocks,
see ``gzip_repeated``). What each kind contains is in its builder's docstring; the outcomes that
``dbdiag.capture.read_capture`` must produce are asserted in ``tests/test_capture.py``.

The lower-level helpers (``tar_bytes``, ``tar_file``, ``gzip_repeated``, ``empty_members_tar``,
``zip_bytes``) are importable for tests that need a variation.
"""

from __future__ import annotations

import io
import lzma
import os
import random
import stat
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Callable, Iterable

MiB = 1024 * 1024
ZERO_MIB = bytes(MiB)

# A small member dbdiag recognises by content (a /proc/softirqs snapshot), whatever its name,
# so that end-to-end runs on hostile captures have something real to read.
OK_LOG = (
    b"                    CPU0       CPU1       \n"
    b"          HI:          0          0\n"
    b"       TIMER:        532       1084\n"
    b"      NET_RX:          2          0\n"
)


# ---------------------------------------------------------------------------------------------
# Helpers


def tar_file(name: str, data: bytes = b"", *, type: bytes = tarfile.REGTYPE, linkname: str = "") -> tuple[tarfile.TarInfo, bytes]:
    """One tar entry: (header, data). Names may carry surrogate escapes for non-UTF-8 bytes."""
    info = tarfile.TarInfo(name)
    info.type = type
    info.linkname = linkname
    info.size = len(data) if type in (tarfile.REGTYPE, tarfile.AREGTYPE) else 0
    info.mode = 0o644
    return info, data


def tar_bytes(entries: Iterable[tuple[tarfile.TarInfo, bytes]], *, format: int = tarfile.GNU_FORMAT) -> bytes:
    """A complete tar (with end-of-archive marker). GNU format writes names as raw bytes."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=format, encoding="utf-8", errors="surrogateescape") as archive:
        for info, data in entries:
            archive.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return buffer.getvalue()


# A small mpstat -P ALL report dbdiag reads as "mpstat-text": the good member beside a bad one.
GOOD_MPSTAT = (
    b"Linux 6.1.0 (db1) \t2024-05-14 \t_x86_64_\t(2 CPU)\n\n"
    b"10:00:00     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
    b"10:00:01     all    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
    b"10:00:01       0    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
    b"10:00:01       1    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
)
BLOCK = tarfile.BLOCKSIZE


def padded(data: bytes) -> bytes:
    """Data padded with NULs to whole tar blocks."""
    return data + bytes(-len(data) % BLOCK)


def ustar_header(name: str, type: bytes, size: int) -> bytes:
    """One raw ustar header block (no data)."""
    info = tarfile.TarInfo(name)
    info.type, info.size = type, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def raw_member(name: str, data: bytes) -> bytes:
    """A regular member as raw blocks: header, data padded to a block."""
    return ustar_header(name, tarfile.REGTYPE, len(data)) + padded(data)


def pax_header(records: dict[str, str]) -> bytes:
    """A pax extended header (``x``) with these records, as raw blocks, e.g. ``{"path": "a.log"}``."""
    body = b""
    for key, value in records.items():
        record = f" {key}={value}\n".encode()
        length = len(record) + 1
        while len(str(length)) + len(record) != length:
            length += 1
        body += str(length).encode() + record
    return ustar_header("pax", tarfile.XHDTYPE, len(body)) + padded(body)


def gnu_sparse_header(name: str, regions: list[tuple[int, int]], real_size: int, *, extended: bool = False) -> bytes:
    """An old-GNU sparse header (type ``S``) with up to four (offset, size) regions; ``extended``
    announces an extension block of more regions after it. Its size field is the stored data."""
    header = bytearray(ustar_header(name, tarfile.GNUTYPE_SPARSE, sum(size for _, size in regions)))
    octal = lambda number: (b"%011o" % number) + b"\0"  # noqa: E731
    for index, (offset, size) in enumerate(regions[:4]):
        header[386 + 24 * index : 410 + 24 * index] = octal(offset) + octal(size)
    header[482] = 1 if extended else 0
    header[483:495] = octal(real_size)
    header[148:156] = b" " * 8
    header[148:156] = b"%06o\0 " % sum(header)
    return bytes(header)


def gzip_repeated(pieces: Iterable[tuple[bytes, int]]) -> bytes:
    """A gzip stream of each chunk repeated ``count`` times, in milliseconds even for GiBs.

    Each distinct chunk is deflated once from a fresh state and ended with a full flush (byte
    aligned, no back-references across it), so its compressed bytes can simply be repeated.
    Zeros compress about 1000:1 this way.
    """
    parts = [b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"]  # magic, deflate, no flags, mtime 0, OS unknown
    crc = 0
    size_bytes = 0
    for chunk, count in pieces:
        compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
        parts.append((compressor.compress(chunk) + compressor.flush(zlib.Z_FULL_FLUSH)) * count)
        for _ in range(count):
            crc = zlib.crc32(chunk, crc)
        size_bytes += len(chunk) * count
    parts.append(b"\x03\x00")  # final, empty fixed-Huffman block
    parts.append(struct.pack("<II", crc, size_bytes & 0xFFFFFFFF))
    return b"".join(parts)


def gzip_zeros(size_mib: int) -> bytes:
    return gzip_repeated([(ZERO_MIB, size_mib)])


def empty_members_tar(count: int) -> bytes:
    """A plain tar of ``count`` empty regular files m000000.log, m000001.log... built directly
    from a header template (tarfile would take seconds for 100,000 headers)."""
    template = bytearray(tarfile.TarInfo("x").tobuf(tarfile.USTAR_FORMAT))
    template[0:100] = bytes(100)
    template[148:156] = b" " * 8
    base_checksum = sum(template)
    blocks = []
    for index in range(count):
        name = b"m%06d.log" % index
        block = bytearray(template)
        block[0 : len(name)] = name
        block[148:156] = b"%06o\x00 " % (base_checksum + sum(name))
        blocks.append(bytes(block))
    return b"".join(blocks) + bytes(2 * tarfile.BLOCKSIZE)


def zip_bytes(entries: Iterable[tuple[zipfile.ZipInfo | str, bytes]], *, compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for info, data in entries:
            archive.writestr(info, data, compress_type=compression)
    return buffer.getvalue()


def patch_zip_central_flags(data: bytes, name: bytes, flag_bits: int) -> bytes:
    """OR ``flag_bits`` into the central-directory general-purpose flags of entry ``name``
    (zipfile cannot write the encrypted flag)."""
    patched = bytearray(data)
    position = patched.find(b"PK\x01\x02")
    while position >= 0:
        name_length = struct.unpack_from("<H", patched, position + 28)[0]
        if bytes(patched[position + 46 : position + 46 + name_length]) == name:
            flags = struct.unpack_from("<H", patched, position + 8)[0]
            struct.pack_into("<H", patched, position + 8, flags | flag_bits)
        position = patched.find(b"PK\x01\x02", position + 4)
    return bytes(patched)


def random_bytes(size: int, seed: int) -> bytes:
    """Incompressible, reproducible data."""
    return random.Random(seed).randbytes(size)


def _write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------
# Builders: (directory) -> path of the hostile capture


def traversal_tar(directory: Path) -> Path:
    """tar: ``../../etc/passwd`` and ``db/../../x.log`` (path has '..'), ``ok.log``."""
    return _write(directory, "traversal.tar", tar_bytes([
        tar_file("../../etc/passwd", b"root:x:0:0\n"),
        tar_file("db/../../x.log", b"x\n"),
        tar_file("ok.log", OK_LOG),
    ]))


def absolute_tar(directory: Path) -> Path:
    """tar: ``/etc/passwd`` (absolute path), ``ok.log``."""
    return _write(directory, "absolute.tar", tar_bytes([
        tar_file("/etc/passwd", b"root:x:0:0\n"),
        tar_file("ok.log", OK_LOG),
    ]))


def links_tar(directory: Path) -> Path:
    """tar: symlink ``etc`` -> /etc, then file ``etc/passwd`` (the classic link-then-write),
    symlink ``shadow.log`` -> ../../../etc/shadow, hard link ``passwd.log`` -> /etc/passwd, ``ok.log``."""
    return _write(directory, "links.tar", tar_bytes([
        tar_file("etc", type=tarfile.SYMTYPE, linkname="/etc"),
        tar_file("etc/passwd", b"in memory only\n"),
        tar_file("shadow.log", type=tarfile.SYMTYPE, linkname="../../../etc/shadow"),
        tar_file("passwd.log", type=tarfile.LNKTYPE, linkname="/etc/passwd"),
        tar_file("ok.log", OK_LOG),
    ]))


def devices_tar(directory: Path) -> Path:
    """tar: character device ``dev/zero``, block device ``dev/sda``, FIFO ``pipe.log``, ``ok.log``."""
    char_device = tar_file("dev/zero", type=tarfile.CHRTYPE)
    char_device[0].devmajor, char_device[0].devminor = 1, 5
    block_device = tar_file("dev/sda", type=tarfile.BLKTYPE)
    block_device[0].devmajor, block_device[0].devminor = 8, 0
    return _write(directory, "devices.tar", tar_bytes([
        char_device,
        block_device,
        tar_file("pipe.log", type=tarfile.FIFOTYPE),
        tar_file("ok.log", OK_LOG),
    ]))


def gzip_bomb_member_tar(directory: Path) -> Path:
    """plain tar: ``zeros.log.gz`` (300 MiB of zeros gzipped, ~0.3 MiB: ratio ~1000:1), ``after.log``."""
    return _write(directory, "gzip-bomb-member.tar", tar_bytes([
        tar_file("zeros.log.gz", gzip_zeros(300)),
        tar_file("after.log", OK_LOG),
    ]))


def xz_bomb_member_tar(directory: Path) -> Path:
    """plain tar: ``zeros.log.xz`` (32 MiB of zeros, xz: ratio ~6000:1), ``after.log``."""
    return _write(directory, "xz-bomb-member.tar", tar_bytes([
        tar_file("zeros.log.xz", lzma.compress(bytes(32 * MiB), preset=0)),
        tar_file("after.log", OK_LOG),
    ]))


def gzip_bomb_archive(directory: Path) -> Path:
    """tar.gz (~0.3 MiB) whose member ``zeros.bin`` declares 300 MiB of zeros (over 250x the
    archive), then ``after.log``: the member is skipped, the rest is read."""
    header = tar_file("zeros.bin")[0]
    header.size = 300 * MiB
    after = tar_bytes([tar_file("after.log", OK_LOG)])
    tar_head = header.tobuf(tarfile.GNU_FORMAT)
    return _write(directory, "gzip-bomb-archive.tar.gz", gzip_repeated([(tar_head, 1), (ZERO_MIB, 300), (after, 1)]))


def truncated_tar_gz(directory: Path) -> Path:
    """tar.gz of eight 64 KiB incompressible members ``part0.bin``..``part7.bin``, cut in half."""
    whole = truncated_tar_gz_whole()
    return _write(directory, "truncated.tar.gz", whole[: len(whole) // 2])


def truncated_tar_gz_whole() -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for index in range(8):
            data = random_bytes(64 * 1024, seed=index)
            info = tarfile.TarInfo(f"part{index}.bin")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def many_members_tar(directory: Path) -> Path:
    """plain tar of 100,000 empty members (cap is 10,000)."""
    return _write(directory, "many-members.tar", empty_members_tar(100_000))


def non_utf8_names_tar(directory: Path) -> Path:
    """tar (GNU, raw bytes): ``caf\\xe9.log`` (latin-1), ``\\xff\\xfe/x.log``, ``ok.log``."""
    return _write(directory, "non-utf8.tar", tar_bytes([
        tar_file("caf\udce9.log", b"latin-1 name\n"),
        tar_file("\udcff\udcfe/x.log", b"binary dir name\n"),
        tar_file("ok.log", OK_LOG),
    ]))


def html_name_tar(directory: Path) -> Path:
    """tar: ``<script>alert(1)</script>.log`` and a name with a newline and an ANSI escape."""
    return _write(directory, "html-name.tar", tar_bytes([
        tar_file("<script>alert(1)</script>.log", OK_LOG),
        tar_file("evil\n\x1b[31mred.log", b"x\n"),
    ]))


def empty_file(directory: Path) -> Path:
    """an empty file ``empty.log``: a valid capture of one empty member."""
    return _write(directory, "empty.log", b"")


def text_named_tar_gz(directory: Path) -> Path:
    """a plain text slow log named ``capture.tar.gz``: a single file, whatever its name says."""
    return _write(directory, "capture.tar.gz", OK_LOG)


def garbage_gzip(directory: Path) -> Path:
    """``broken.tar.gz``: gzip magic followed by bytes that are not deflate data."""
    return _write(directory, "broken.tar.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 200)


def hostile_zip(directory: Path) -> Path:
    """zip: symlink ``link.log`` -> /etc/passwd, ``../evil.log``, ``/abs.log``, encrypted
    ``secret.log``, ``bomb.log`` (16 MiB of zeros deflated, ~1000:1), ``ok.log``."""
    symlink = zipfile.ZipInfo("link.log")
    symlink.external_attr = (stat.S_IFLNK | 0o777) << 16
    data = zip_bytes([
        (symlink, b"/etc/passwd"),
        ("../evil.log", b"x\n"),
        ("/abs.log", b"x\n"),
        ("secret.log", b"secret\n"),
        ("bomb.log", bytes(16 * MiB)),
        ("ok.log", OK_LOG),
    ])
    return _write(directory, "hostile.zip", patch_zip_central_flags(data, b"secret.log", 0x1))


def hostile_directory(directory: Path) -> Path:
    """directory: ``a`` <-> ``b`` symlink loop, ``loop`` -> ., ``out`` -> /etc/passwd,
    ``etc`` -> /etc, FIFO ``fifo.log``, regular ``db/slow.log`` and ``zz.log``."""
    root = directory / "hostile-dir"
    (root / "db").mkdir(parents=True)
    (root / "db" / "slow.log").write_bytes(OK_LOG)
    (root / "zz.log").write_bytes(b"last\n")
    os.symlink("b", root / "a")
    os.symlink("a", root / "b")
    os.symlink(".", root / "loop")
    os.symlink("/etc/passwd", root / "out")
    os.symlink("/etc", root / "etc")
    os.mkfifo(root / "fifo.log")
    return root


_BUILDERS: dict[str, Callable[[Path], Path]] = {
    "traversal": traversal_tar,
    "absolute": absolute_tar,
    "links": links_tar,
    "devices": devices_tar,
    "gzip-bomb-member": gzip_bomb_member_tar,
    "xz-bomb-member": xz_bomb_member_tar,
    "gzip-bomb-archive": gzip_bomb_archive,
    "truncated-tar-gz": truncated_tar_gz,
    "many-members": many_members_tar,
    "non-utf8-names": non_utf8_names_tar,
    "html-name": html_name_tar,
    "empty-file": empty_file,
    "text-named-tar-gz": text_named_tar_gz,
    "garbage-gzip": garbage_gzip,
    "hostile-zip": hostile_zip,
    "hostile-directory": hostile_directory,
}

HOSTILE_KINDS: tuple[str, ...] = tuple(_BUILDERS)


def build_hostile(kind: str, directory: Path) -> Path:
    """Write the hostile capture ``kind`` under ``directory`` and return its path."""
    return _BUILDERS[kind](directory)
