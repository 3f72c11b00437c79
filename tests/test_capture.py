"""Safe capture reading: every container kind, and every hostile input we know of.

Each test builds its input under ``tmp_path`` (hostile ones through ``tests/hostile.py``) and
asserts exact outcomes: member paths, data, skip reasons, ``partial``.
"""

from __future__ import annotations

import builtins
import bz2
import gzip
import io
import lzma
import os
import tarfile
import zlib
from pathlib import Path

import pytest

from dbdiag import capture_members
from dbdiag.capture import Capture, CaptureError, Limits, Member, read_capture
from hostile import (
    HOSTILE_KINDS,
    MiB,
    OK_LOG,
    ZERO_MIB,
    build_hostile,
    gzip_repeated,
    random_bytes,
    tar_bytes,
    tar_file,
    truncated_tar_gz_whole,
    zip_bytes,
)

SLOW_LOG = b"# Time: 2024-01-01T00:00:00Z\n# Query_time: 2.5  Lock_time: 0.0\nSELECT * FROM t;\n" * 50
MPSTAT = b"Linux 6.1 (db1)\t01/01/2024\t_x86_64_\t(2 CPU)\n\n12:00:01 AM  CPU  %usr\n12:00:02 AM  all  10.0\n"
ROTATED = b"# Time: 2023-12-31T23:59:59Z\nSELECT 2;\n" * 20

# What a well-formed capture holds: path -> bytes as stored ("db/slow.log.1.gz" is gzip).
CAPTURE_FILES = {
    "db/slow.log": SLOW_LOG,
    "db/slow.log.1.gz": gzip.compress(ROTATED, mtime=0),
    "os/mpstat.txt": MPSTAT,
}
# What read_capture must return for it: (path, data, compression), in archive order.
EXPECTED_MEMBERS = [
    ("db/slow.log", SLOW_LOG, None),
    ("db/slow.log.1.gz", ROTATED, "gzip"),
    ("os/mpstat.txt", MPSTAT, None),
]


def outcome(capture: Capture) -> list[tuple[str, bytes | None, str | None]]:
    return [(m.path, m.data, m.compression) for m in capture.members]


def skips(capture: Capture) -> dict[str, str | None]:
    return {m.path: m.skipped for m in capture.members}


def write_tar(path: Path, mode: str) -> Path:
    with tarfile.open(path, mode) as archive:
        directory = tarfile.TarInfo("./db")
        directory.type = tarfile.DIRTYPE  # directory entries are ignored, not listed
        archive.addfile(directory)
        for name, data in CAPTURE_FILES.items():
            info = tarfile.TarInfo(f"./{name}")  # "./" prefix as `tar czf x.tgz .` writes it
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


# ---------------------------------------------------------------------------------------------
# Well-formed captures of every kind


@pytest.mark.parametrize(
    ("file_name", "mode", "container"),
    [
        ("capture.tar", "w", "tar"),
        ("capture.tar.gz", "w:gz", "tar.gz"),
        ("capture.tgz", "w:gz", "tar.gz"),
        ("capture.tar.bz2", "w:bz2", "tar.bz2"),
        ("capture.tar.xz", "w:xz", "tar.xz"),
    ],
)
def test_reads_tar_of_each_compression(tmp_path: Path, file_name: str, mode: str, container: str) -> None:
    capture = read_capture(write_tar(tmp_path / file_name, mode))
    assert capture.container == container
    assert capture.source == str(tmp_path / file_name)
    assert outcome(capture) == EXPECTED_MEMBERS
    assert [m.skipped for m in capture.members] == [None, None, None]
    assert [m.size for m in capture.members] == [len(SLOW_LOG), len(ROTATED), len(MPSTAT)]
    assert capture.partial is None


def test_container_is_decided_by_content_not_name(tmp_path: Path) -> None:
    tgz = write_tar(tmp_path / "a.tar.gz", "w:gz")
    renamed = tmp_path / "capture.zip"
    renamed.write_bytes(tgz.read_bytes())
    capture = read_capture(renamed)
    assert capture.container == "tar.gz"
    assert outcome(capture) == EXPECTED_MEMBERS


def test_reads_zip(tmp_path: Path) -> None:
    path = tmp_path / "capture.zip"
    path.write_bytes(zip_bytes([("db/", b""), *CAPTURE_FILES.items()]))
    capture = read_capture(path)
    assert capture.container == "zip"
    assert outcome(capture) == EXPECTED_MEMBERS
    assert capture.partial is None


def test_reads_directory_sorted_relative(tmp_path: Path) -> None:
    root = tmp_path / "capture"
    for name, data in reversed(CAPTURE_FILES.items()):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    (root / "empty-dir").mkdir()
    capture = read_capture(root)
    assert capture.container == "directory"
    assert outcome(capture) == EXPECTED_MEMBERS
    assert capture.partial is None


def test_reads_single_plain_file(tmp_path: Path) -> None:
    path = tmp_path / "slow.log"
    path.write_bytes(SLOW_LOG)
    capture = read_capture(path)
    assert capture.container == "file"
    assert outcome(capture) == [("slow.log", SLOW_LOG, None)]


@pytest.mark.parametrize(
    ("suffix", "compress", "codec"),
    [
        (".gz", lambda data: gzip.compress(data, mtime=0), "gzip"),
        (".bz2", bz2.compress, "bzip2"),
        (".xz", lzma.compress, "xz"),
    ],
)
def test_reads_single_compressed_file_through(tmp_path: Path, suffix: str, compress, codec: str) -> None:
    path = tmp_path / f"slow.log{suffix}"
    path.write_bytes(compress(SLOW_LOG))
    capture = read_capture(path)
    assert capture.container == "file"
    assert outcome(capture) == [(f"slow.log{suffix}", SLOW_LOG, codec)]
    assert capture.members[0].size == len(SLOW_LOG)


def test_reads_concatenated_gzip_members_to_the_end(tmp_path: Path) -> None:
    path = tmp_path / "slow.log.gz"
    path.write_bytes(gzip.compress(b"first\n") + gzip.compress(b"second\n"))
    assert outcome(read_capture(path)) == [("slow.log.gz", b"first\nsecond\n", "gzip")]


def test_zstd_member_needs_zstandard(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard", reason="zstandard not installed: .zst support is optional")
    path = tmp_path / "slow.log.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(SLOW_LOG))
    assert outcome(read_capture(path)) == [("slow.log.zst", SLOW_LOG, "zstd")]


def test_zstd_archive_without_zstandard_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbdiag import capture_codecs

    monkeypatch.setattr(capture_codecs, "zstandard", None)
    path = tmp_path / "capture.tar.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 100)
    with pytest.raises(CaptureError, match=r"capture\.tar\.zst: zstd-compressed; install the 'zstandard' package"):
        read_capture(path)
    member = tmp_path / "with-zst.tar"
    member.write_bytes(tar_bytes([tar_file("slow.log.zst", b"\x28\xb5\x2f\xfd" + b"\x00" * 100), tar_file("ok.log", OK_LOG)]))
    assert skips(read_capture(member)) == {
        "slow.log.zst": "zstd-compressed member; install the 'zstandard' package to read it",
        "ok.log": None,
    }


# ---------------------------------------------------------------------------------------------
# Inputs unusable as a whole, and degenerate ones


def test_missing_path_is_one_line_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.tar.gz"
    with pytest.raises(CaptureError) as error:
        read_capture(missing)
    assert str(error.value) == f"{missing}: no such file or directory"


def test_permission_denied_is_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Tests may run as root, where chmod 000 does not deny: make the open itself fail.
    path = tmp_path / "locked.tar.gz"
    path.write_bytes(b"x")
    real_open = os.open

    def denying_open(target, flags, *args, **kwargs):
        if os.fspath(target) == str(path):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(target, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denying_open)
    with pytest.raises(CaptureError) as error:
        read_capture(path)
    assert str(error.value) == f"{path}: permission denied"


def test_fifo_as_capture_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "capture.tar.gz"
    os.mkfifo(path)
    with pytest.raises(CaptureError, match=r"capture\.tar\.gz: not a regular file or directory \(FIFO\)"):
        read_capture(path)


def test_empty_file_is_one_empty_member(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("empty-file", tmp_path))
    assert capture.container == "file"
    assert capture.members == [Member("empty.log", b"", 0, None, None)]
    assert capture.partial is None


def test_text_named_tar_gz_is_a_single_file(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("text-named-tar-gz", tmp_path))
    assert capture.container == "file"
    assert capture.members == [Member("capture.tar.gz", OK_LOG, len(OK_LOG), None, None)]


def test_gzip_magic_with_garbage_is_capture_error(tmp_path: Path) -> None:
    path = build_hostile("garbage-gzip", tmp_path)
    with pytest.raises(CaptureError, match=rf"^{path}: not a readable gzip stream: .*invalid block type"):
        read_capture(path)


def test_truncated_zip_is_read_from_its_local_headers(tmp_path: Path) -> None:
    data = zip_bytes(CAPTURE_FILES.items())
    cut = data.index(b"PK\x01\x02") + 10  # the central directory is cut: zipfile refuses the file
    path = tmp_path / "capture.zip"
    path.write_bytes(data[:cut])
    capture = read_capture(path)
    assert outcome(capture) == EXPECTED_MEMBERS
    assert capture.partial.startswith("zip central directory unusable (BadZipFile: File is not a zip file); 3 entries")


def test_zip_cut_inside_a_member_keeps_the_members_before(tmp_path: Path) -> None:
    data = zip_bytes(CAPTURE_FILES.items())
    last = data.rindex(b"PK\x03\x04")
    path = tmp_path / "capture.zip"
    path.write_bytes(data[: last + 40])
    capture = read_capture(path)
    assert [m.path for m in capture.members if m.data is not None] == ["db/slow.log", "db/slow.log.1.gz"]
    assert "local header at byte" in capture.partial


def test_zip_that_is_only_garbage_after_the_magic_is_capture_error(tmp_path: Path) -> None:
    path = tmp_path / "capture.zip"
    path.write_bytes(b"PK\x03\x04" + bytes(10))
    with pytest.raises(CaptureError, match=rf"^{path}: not a readable zip archive: "):
        read_capture(path)


# ---------------------------------------------------------------------------------------------
# Paths, links and special files


def test_tar_path_traversal_is_skipped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("traversal", tmp_path))
    assert skips(capture) == {
        "../../etc/passwd": "path has '..'",
        "db/../../x.log": "path has '..'",
        "ok.log": None,
    }
    assert [m.data for m in capture.members] == [None, None, OK_LOG]


def test_tar_absolute_path_is_skipped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("absolute", tmp_path))
    assert skips(capture) == {"/etc/passwd": "absolute path", "ok.log": None}


def test_tar_links_are_not_followed(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("links", tmp_path))
    assert skips(capture) == {
        "etc": "symbolic link (not followed)",
        "etc/passwd": None,  # a plain member: its bytes stay in memory, nothing is written
        "shadow.log": "symbolic link (not followed)",
        "passwd.log": "hard link (not followed)",
        "ok.log": None,
    }
    assert capture.members[1].data == b"in memory only\n"


def test_tar_devices_and_fifo_are_skipped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("devices", tmp_path))
    assert skips(capture) == {
        "dev/zero": "character device",
        "dev/sda": "block device",
        "pipe.log": "FIFO",
        "ok.log": None,
    }


def test_directory_symlink_loops_and_fifo_are_skipped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("hostile-directory", tmp_path))
    assert capture.container == "directory"
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("a", "symbolic link (not followed)"),
        ("b", "symbolic link (not followed)"),
        ("db/slow.log", None),
        ("etc", "symbolic link (not followed)"),
        ("fifo.log", "FIFO"),
        ("loop", "symbolic link (not followed)"),
        ("out", "symbolic link (not followed)"),
        ("zz.log", None),
    ]
    assert capture.members[2].data == OK_LOG


def test_zip_links_traversal_encryption_and_bomb_are_skipped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("hostile-zip", tmp_path))
    assert capture.container == "zip"
    assert skips(capture) == {
        "link.log": "symbolic link (not followed)",
        "../evil.log": "path has '..'",
        "/abs.log": "absolute path",
        "secret.log": "encrypted zip entry (not read)",
        "bomb.log": "decompression ratio above 250:1 (bomb?)",
        "ok.log": None,
    }
    assert capture.members[-1].data == OK_LOG


def test_non_utf8_tar_names_are_escaped(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("non-utf8-names", tmp_path))
    assert outcome(capture) == [
        ("caf\\xe9.log", b"latin-1 name\n", None),
        ("\\xff\\xfe/x.log", b"binary dir name\n", None),
        ("ok.log", OK_LOG, None),
    ]


def test_non_utf8_zip_names_are_escaped(tmp_path: Path) -> None:
    # zipfile sets the UTF-8 flag for any non-ASCII name, so write a placeholder and patch the
    # raw bytes in (same length; names are not covered by the CRC).
    data = zip_bytes([("cafX.log", b"latin-1\n"), ("\u00e9t\u00e9.log", b"utf-8\n")])
    path = tmp_path / "names.zip"
    path.write_bytes(data.replace(b"cafX.log", b"caf\xe9.log"))
    assert outcome(read_capture(path)) == [("caf\\xe9.log", b"latin-1\n", None), ("\u00e9t\u00e9.log", b"utf-8\n", None)]


def test_windows_style_zip_names_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "windows.zip"
    path.write_bytes(zip_bytes([("..\\evil.log", b"x"), ("C:/win.log", b"x"), ("logs\\ok.log", b"x")]))
    assert skips(read_capture(path)) == {
        "..\\evil.log": "path has '..'",
        "C:/win.log": "absolute path",
        "logs\\ok.log": None,
    }


def test_zip_flagged_utf8_with_invalid_name_is_read_from_local_headers(tmp_path: Path) -> None:
    # zipfile decodes flagged names strictly while opening the archive and refuses the whole zip;
    # the local headers still give every entry, the bad name shown escaped.
    data = zip_bytes([("ok.log", OK_LOG), ("\u00e9X.log", b"x")])
    path = tmp_path / "bad-name.zip"
    path.write_bytes(data.replace("\u00e9".encode(), b"\xff\xfe"))
    capture = read_capture(path)
    assert outcome(capture) == [("ok.log", OK_LOG, None), ("\\xff\\xfeX.log", b"x", None)]
    assert "UnicodeDecodeError" in capture.partial


def test_html_and_control_characters_in_names(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("html-name", tmp_path))
    # HTML is kept verbatim (the report escapes it); control characters are escaped here.
    assert [m.path for m in capture.members] == ["<script>alert(1)</script>.log", "evil\\n\\x1b[31mred.log"]
    assert capture.members[0].data == OK_LOG


# ---------------------------------------------------------------------------------------------
# Bombs and caps


def test_gzip_bomb_member_default_limits(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("gzip-bomb-member", tmp_path))
    bomb, after = capture.members
    assert (bomb.path, bomb.data, bomb.compression) == ("zeros.log.gz", None, "gzip")
    assert bomb.skipped == "decompression ratio above 250:1 (bomb?)"
    assert (after.path, after.data) == ("after.log", OK_LOG)
    assert capture.partial is None


def test_xz_bomb_member_default_limits(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("xz-bomb-member", tmp_path))
    assert [(m.path, m.skipped, m.compression) for m in capture.members] == [
        ("zeros.log.xz", "decompression ratio above 250:1 (bomb?)", "xz"),
        ("after.log", None, None),
    ]


def test_bzip2_bomb_single_file(tmp_path: Path) -> None:
    path = tmp_path / "zeros.log.bz2"
    path.write_bytes(bz2.compress(bytes(16 * MiB)))
    capture = read_capture(path)
    assert capture.container == "file"
    assert capture.members == [
        Member("zeros.log.bz2", None, path.stat().st_size, "decompression ratio above 250:1 (bomb?)", "bzip2", lost=True)
    ]


def test_small_member_with_high_ratio_is_read(tmp_path: Path) -> None:
    # 512 KiB of zeros compresses ~1000:1 but stays under the 1 MiB floor of the ratio check.
    path = tmp_path / "zeros.log.gz"
    path.write_bytes(gzip_repeated([(bytes(512 * 1024), 1)]))
    assert outcome(read_capture(path)) == [("zeros.log.gz", bytes(512 * 1024), "gzip")]


def test_bomb_member_inside_tar_gz_is_skipped_and_rest_read(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("gzip-bomb-archive", tmp_path))
    assert capture.container == "tar.gz"
    assert [(m.path, m.size, m.skipped) for m in capture.members] == [
        ("zeros.bin", 300 * MiB, "decompression ratio above 250:1 (bomb?)"),
        ("after.log", len(OK_LOG), None),
    ]
    assert capture.partial is None


def test_whole_archive_ratio_stops_the_stream(tmp_path: Path) -> None:
    # Three 40 MiB members of zeros: none alone passes the 64 MiB floor, together they do.
    entries = []
    for index in range(3):
        header = tar_file(f"zeros{index}.bin")[0]
        header.size = 40 * MiB
        entries += [(header.tobuf(tarfile.GNU_FORMAT), 1), (ZERO_MIB, 40)]
    path = tmp_path / "zeros.tar.gz"
    path.write_bytes(gzip_repeated([*entries, (bytes(2 * tarfile.BLOCKSIZE), 1)]))
    capture = read_capture(path)
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("zeros0.bin", None),
        ("zeros1.bin", "not read: archive decompresses to more than 250:1 of its size (bomb?)"),
    ]
    assert capture.members[0].data == bytes(40 * MiB)
    assert capture.partial == (
        "archive reading stopped after 1 members: archive decompresses to more than 250:1 of its size (bomb?)"
    )


def test_member_size_cap(tmp_path: Path) -> None:
    text = b"".join(b"%08d SELECT * FROM t WHERE id = %d;\n" % (i, i * 7919) for i in range(60_000))
    assert len(text) > 2 * MiB
    path = tmp_path / "capture.tar"
    path.write_bytes(tar_bytes([
        tar_file("big.log", text),
        tar_file("big.log.gz", gzip.compress(text, mtime=0)),  # small declared size, large inside
        tar_file("ok.log", OK_LOG),
    ]))
    capture = read_capture(path, Limits(max_member_bytes=1 * MiB))
    assert [(m.path, m.skipped, m.compression) for m in capture.members] == [
        ("big.log", "member larger than 1.0 MiB cap; --max-member-size raises it", None),
        ("big.log.gz", "member larger than 1.0 MiB cap; --max-member-size raises it", "gzip"),
        ("ok.log", None, None),
    ]
    assert capture.partial is None
    admitted = read_capture(path, Limits(max_member_bytes=4 * MiB))  # the option admits them
    assert [(m.path, m.skipped, m.size) for m in admitted.members] == [
        ("big.log", None, len(text)), ("big.log.gz", None, len(text)), ("ok.log", None, len(OK_LOG)),
    ]


def test_a_file_given_as_it_is_is_bounded_by_memory_not_by_the_archive_cap(tmp_path: Path, monkeypatch) -> None:
    text = b"".join(b"%08d SELECT * FROM t WHERE id = %d;\n" % (i, i * 7919) for i in range(60_000))
    path = tmp_path / "slow.log"
    path.write_bytes(text)
    capture = read_capture(path, Limits(max_member_bytes=1 * MiB))  # an archive member's cap does not apply
    assert [(m.path, m.skipped, m.size) for m in capture.members] == [("slow.log", None, len(text))]
    monkeypatch.setattr(capture_members, "memory_budget_bytes", lambda: 1 * MiB)
    capture = read_capture(path)
    assert capture.members[0].data is None and capture.members[0].lost
    assert capture.members[0].skipped == (
        "larger than the 1.0 MiB this machine's memory can analyze (RAM / 3.5); --max-member-size raises it"
    )
    assert read_capture(path, Limits(files_bytes=4 * MiB)).members[0].size == len(text)


def test_a_directory_is_bounded_by_memory_for_its_files_together(tmp_path: Path, monkeypatch) -> None:
    for i in range(4):
        (tmp_path / f"part{i}.log").write_bytes(bytes(400 * 1024))
    monkeypatch.setattr(capture_members, "memory_budget_bytes", lambda: 1 * MiB)
    capture = read_capture(tmp_path, Limits(max_total_bytes=1))  # the archive total does not apply either
    assert [(m.path, m.skipped) for m in capture.members][:2] == [("part0.log", None), ("part1.log", None)]
    assert capture.members[2].skipped.startswith("not read: the 1.0 MiB this machine's memory can analyze")
    assert capture.partial == "memory budget of 1.0 MiB reached after 3 members; later members not read; --max-total-size raises it"
    assert all(m.skipped is None for m in read_capture(tmp_path, Limits(files_bytes=2 * MiB)).members)


def test_total_size_cap_stops_reading(tmp_path: Path) -> None:
    path = tmp_path / "capture.tar"
    path.write_bytes(tar_bytes([tar_file(f"part{i}.log", bytes(400 * 1024)) for i in range(4)]))
    capture = read_capture(path, Limits(max_total_bytes=1 * MiB))
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("part0.log", None),
        ("part1.log", None),
        ("part2.log", "not read: total size cap of 1.0 MiB reached; --max-total-size raises it"),
    ]
    assert capture.partial == "total size cap of 1.0 MiB reached after 3 members; later members not read; --max-total-size raises it"


def test_100k_empty_members_stop_at_the_cap(tmp_path: Path) -> None:
    capture = read_capture(build_hostile("many-members", tmp_path))
    assert len(capture.members) == 10_001
    assert capture.members[0] == Member("m000000.log", b"", 0, None, None)
    assert capture.members[9_999].path == "m009999.log"
    assert capture.members[-1] == Member("…", None, 0, "further members not read: cap of 10000 members", None, lost=True)
    assert capture.partial == "member cap of 10000 reached; later members not read"


def test_zip_member_cap_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "many.zip"
    path.write_bytes(zip_bytes([(f"f{i:02d}.log", b"x") for i in range(30)]))
    capture = read_capture(path, Limits(max_members=10))
    assert [m.path for m in capture.members] == [f"f{i:02d}.log" for i in range(10)] + ["…"]
    assert capture.members[-1].skipped == "20 more members not read: cap of 10 members"
    assert capture.partial == "member cap of 10 reached; later members not read"


def test_exactly_cap_members_is_not_partial(tmp_path: Path) -> None:
    path = tmp_path / "ten.tar"
    path.write_bytes(tar_bytes([tar_file(f"f{i}.log", b"x") for i in range(10)]))
    capture = read_capture(path, Limits(max_members=10))
    assert len(capture.members) == 10
    assert capture.partial is None


def test_oversized_pax_header_is_skipped_and_the_archive_goes_on(tmp_path: Path) -> None:
    info, data = tar_file("ok.log", OK_LOG)
    huge, huge_data = tar_file("huge.log", b"x")
    huge.pax_headers = {"comment": "x" * (2 * MiB)}
    after, after_data = tar_file("after.log", OK_LOG)
    path = tmp_path / "pax.tar"
    path.write_bytes(tar_bytes([(info, data), (huge, huge_data), (after, after_data)], format=tarfile.PAX_FORMAT))
    capture = read_capture(path)
    skipped = "tar extended header of 2.0 MiB skipped (cap 64.0 KiB); the next member keeps its short name"
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("ok.log", None), ("@PaxHeader", skipped), ("huge.log", None), ("after.log", None)]
    assert capture.partial is None


# ---------------------------------------------------------------------------------------------
# Truncated and corrupt archives


def test_truncated_tar_gz_keeps_members_before_the_cut(tmp_path: Path) -> None:
    path = build_hostile("truncated-tar-gz", tmp_path)
    # Oracle: how many tar bytes the cut gzip still yields; each member is 512 + 64 KiB.
    available = len(zlib.decompressobj(wbits=31).decompress(path.read_bytes()))
    member_bytes = tarfile.BLOCKSIZE + 64 * 1024
    complete = available // member_bytes
    assert 1 <= complete < 8
    capture = read_capture(path)
    expected = [(f"part{i}.bin", random_bytes(64 * 1024, seed=i), None) for i in range(complete)]
    assert outcome(capture)[:complete] == expected
    if available - complete * member_bytes >= tarfile.BLOCKSIZE:  # the next header made it
        assert skips(capture)[f"part{complete}.bin"] == "archive truncated or corrupt inside this member"
        assert len(capture.members) == complete + 1
    else:
        assert len(capture.members) == complete
    assert capture.partial == (
        f"archive truncated or corrupt after {complete} members: truncated gzip data (stream ends early)"
    )


def test_whole_tar_gz_used_for_truncation_reads_fully(tmp_path: Path) -> None:
    path = tmp_path / "whole.tar.gz"
    path.write_bytes(truncated_tar_gz_whole())
    capture = read_capture(path)
    assert [m.path for m in capture.members] == [f"part{i}.bin" for i in range(8)]
    assert capture.partial is None


PLAIN_PARTS = [tar_file(f"p{i}.bin", random_bytes(3000, seed=i)) for i in range(4)]
PLAIN_MEMBER_BYTES = 512 + 3072  # header + 3000 bytes padded to blocks


def test_plain_tar_cut_inside_member_data(tmp_path: Path) -> None:
    path = tmp_path / "cut.tar"
    path.write_bytes(tar_bytes(PLAIN_PARTS)[: 2 * PLAIN_MEMBER_BYTES + 1000])
    capture = read_capture(path)
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("p0.bin", None),
        ("p1.bin", None),
        ("p2.bin", "archive truncated or corrupt inside this member"),
    ]
    assert capture.partial == "archive truncated or corrupt after 2 members: unexpected end of data"


def test_plain_tar_cut_between_members(tmp_path: Path) -> None:
    path = tmp_path / "cut.tar"
    path.write_bytes(tar_bytes(PLAIN_PARTS)[: PLAIN_MEMBER_BYTES])
    capture = read_capture(path)
    assert [(m.path, m.skipped) for m in capture.members] == [("p0.bin", None)]
    assert capture.partial == (
        "archive truncated or corrupt after 1 members: no end-of-archive marker (archive cut short?)"
    )


def test_plain_tar_with_corrupt_header(tmp_path: Path) -> None:
    data = bytearray(tar_bytes(PLAIN_PARTS))
    data[2 * PLAIN_MEMBER_BYTES : 2 * PLAIN_MEMBER_BYTES + 100] = b"\xaa" * 100  # p2's header
    path = tmp_path / "corrupt.tar"
    path.write_bytes(bytes(data))
    capture = read_capture(path)
    assert [m.path for m in capture.members] == ["p0.bin", "p1.bin"]
    assert capture.partial == "archive truncated or corrupt after 2 members: invalid header: bad checksum"


def test_corrupt_gzip_member_is_skipped_rest_read(tmp_path: Path) -> None:
    good = gzip.compress(SLOW_LOG, mtime=0)
    path = tmp_path / "capture.tar"
    path.write_bytes(tar_bytes([
        tar_file("bad.log.gz", b"\x1f\x8b\x08\x00" + b"\xff" * 100),
        tar_file("cut.log.gz", good[: len(good) // 2]),
        tar_file("ok.log", OK_LOG),
    ]))
    capture = read_capture(path)
    assert [(m.path, m.compression) for m in capture.members] == [
        ("bad.log.gz", "gzip"),
        ("cut.log.gz", "gzip"),
        ("ok.log", None),
    ]
    assert capture.members[0].skipped.startswith("corrupt gzip data: ")
    assert capture.members[1].skipped == "truncated gzip data (stream ends early)"
    assert capture.members[2].data == OK_LOG
    assert capture.partial is None


# ---------------------------------------------------------------------------------------------
# Reading never writes


def _tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    state = {}
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            status = os.lstat(os.path.join(directory, name))
            state[os.path.relpath(os.path.join(directory, name), root)] = (
                status.st_mode,
                status.st_size,
                status.st_mtime_ns,
            )
    return state


def test_reading_any_hostile_capture_never_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    paths = {kind: build_hostile(kind, inputs) for kind in HOSTILE_KINDS}
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    before = _tree_state(tmp_path)

    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    real_os_open, real_open = os.open, builtins.open

    def read_only_os_open(target, flags, *args, **kwargs):
        assert not flags & write_flags, f"os.open({target!r}) for writing"
        return real_os_open(target, flags, *args, **kwargs)

    def read_only_open(file, mode="r", *args, **kwargs):
        assert not set(mode) & set("wax+"), f"open({file!r}, {mode!r}) for writing"
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only_os_open)
    monkeypatch.setattr(builtins, "open", read_only_open)
    for kind, path in paths.items():
        if kind == "garbage-gzip":
            with pytest.raises(CaptureError):
                read_capture(path)
        else:
            assert read_capture(path).members, kind
    monkeypatch.undo()
    assert _tree_state(tmp_path) == before
    assert os.listdir(workdir) == []
