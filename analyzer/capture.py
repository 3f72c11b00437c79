"""Safe reading of a capture: archive, directory or single file -> members in memory, bounded (a big plain
file of the system is left on disk, read when parsed: ``dbdiag.file_bytes``).

A capture is whatever someone collected on a sick server: usually a ``.tar.gz``, sometimes a
``.zip``, a directory, or a lone ``slow.log(.gz)``. Captures are untrusted input, so:

- The container is decided by magic bytes, never by the name (a text file named ``x.tar.gz``
  is a single file; a gzip that holds no tar is a single compressed file).
- Nothing is extracted or written anywhere: members are read into memory through ``tarfile``
  in streaming mode (``r|``), ``zipfile`` or ``os.scandir``; tarfile's and zipfile's
  methods that write members to disk are never called.
- Only regular files are read. Links, devices, FIFOs, sockets, absolute paths and ``..``
  components are listed with the reason they were skipped; directories are not listed.
- Everything is bounded (see ``Limits``): entries examined, bytes per member, bytes in total,
  decompression ratio of compressed members (``.gz .bz2 .xz``, ``.zst`` when ``zstandard`` is
  importable, detected by magic) and of whole compressed archives.
- A truncated or corrupt archive keeps what was read before the damage and says so in
  ``Capture.partial``; ``CaptureError`` is raised only when the input is unusable as a whole.

This module identifies the container and reads directories and single files; the parts are
``capture_members`` (the checks and bounded read every entry goes through), ``capture_codecs``,
``capture_tar`` with ``capture_tar_headers``, and ``capture_zip`` with ``zip_local_scan``.

Example::

    >>> cap = read_capture(Path("capture.tar.gz"))            # doctest: +SKIP
    >>> [(m.path, m.size, m.skipped) for m in cap.members]     # doctest: +SKIP
    [('db/slow.log', 18234, None), ('etc', 0, 'symbolic link (not followed)')]
"""

from __future__ import annotations

import lzma
import os
import stat
import tarfile
import zlib
from pathlib import Path
from typing import BinaryIO, Iterator

from dbdiag import capture_codecs
from dbdiag.capture_codecs import codec_of, new_decompressor
from dbdiag.capture_members import (
    MEMBER_NAME_CAP_CHARS,
    Capture,
    CaptureError,
    Entry,
    Inventory,
    Limits,
    Member,
    ReadWatch,
    Rejected,
    collect,
    mode_reason,
    os_reason,
    printable_name,
)
from dbdiag.capture_tar import read_tar
from dbdiag.capture_zip import read_zip

__all__ = ["MEMBER_NAME_CAP_CHARS", "Capture", "CaptureError", "Limits", "Member", "ReadWatch", "printable_name", "read_capture"]

TAR_BLOCK_BYTES = tarfile.BLOCKSIZE
SNIFF_INPUT_CAP_BYTES = 4 * 1024 * 1024
SNIFF_INPUT_CHUNK_BYTES = 64 * 1024

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_TAR_CONTAINER_OF_CODEC = {None: "tar", "gzip": "tar.gz", "bzip2": "tar.bz2", "xz": "tar.xz", "zstd": "tar.zst"}


# ---------------------------------------------------------------------------------------------
# Public entry point



def read_capture(path: Path, limits: Limits = Limits(), watch: ReadWatch | None = None) -> Capture:
    """Read a capture (tar[.gz|.bz2|.xz], zip, directory or single file) into memory, bounded.

    ``watch``: filled as reading goes, for a progress line in another thread (``ReadWatch``)."""
    path = Path(path)
    display = printable_name(str(path))
    watch = watch if watch is not None else ReadWatch()
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise CaptureError(f"{display}: {os_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        members, partial = _read_directory(path, display, limits.for_files(), watch)
        return Capture(str(path), "directory", members, partial)
    try:
        raw = _open_regular_file(str(path), follow_symlinks=True)
    except OSError as exc:
        raise CaptureError(f"{display}: {os_reason(exc)}") from None
    except _NotRegularFile as exc:
        raise CaptureError(f"{display}: not a regular file or directory ({exc.reason})") from None
    with raw:
        file_bytes = os.fstat(raw.fileno()).st_size
        watch.total_bytes, watch.fd = file_bytes, raw.fileno()
        try:
            container, codec = _identify(raw, display)
            raw.seek(0)
            if container == "zip":
                members, partial = read_zip(raw, display, limits)
            elif container == "file":
                members, partial = _read_single_file(path, raw, file_bytes, limits.for_files())
            else:
                members, partial = read_tar(raw, codec, file_bytes, limits)
        finally:
            watch.fd, watch.done_bytes = None, file_bytes  # before the close: a closed number may be reused
    return Capture(str(path), container, members, partial)



# ---------------------------------------------------------------------------------------------
# Container identification


def _identify(raw: BinaryIO, display: str) -> tuple[str, str | None]:
    """Return (container, codec of the whole file) from magic bytes; the name plays no part."""
    head = raw.read(TAR_BLOCK_BYTES)
    if head.startswith(_ZIP_MAGICS):
        return "zip", None
    codec = codec_of(head)
    if codec is None:
        return ("tar" if _is_tar_header(head) else "file"), None
    raw.seek(0)
    inner_head = _decompressed_head(raw, codec, display)
    if _is_tar_header(inner_head):
        return _TAR_CONTAINER_OF_CODEC[codec], codec
    return "file", codec


def _is_tar_header(block: bytes) -> bool:
    """True when the block is a valid tar header (checksum verified; all-zero blocks are not)."""
    if len(block) < TAR_BLOCK_BYTES:
        return False
    try:
        tarfile.TarInfo.frombuf(block[:TAR_BLOCK_BYTES], "utf-8", "surrogateescape")
    except tarfile.HeaderError:
        return False
    return True


def _decompressed_head(raw: BinaryIO, codec: str, display: str) -> bytes:
    """First block of the decompressed stream; CaptureError when the very first bytes are bad."""
    if codec == "zstd":
        return _zstd_head(raw, display)
    decompressor = new_decompressor(codec)
    head = b""
    fed_bytes = 0
    try:
        while len(head) < TAR_BLOCK_BYTES and fed_bytes < SNIFF_INPUT_CAP_BYTES and not decompressor.eof:
            chunk = raw.read(SNIFF_INPUT_CHUNK_BYTES)
            if not chunk:
                break
            fed_bytes += len(chunk)
            head += decompressor.decompress(chunk, TAR_BLOCK_BYTES - len(head))
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        raise CaptureError(f"{display}: not a readable {codec} stream: {exc}") from None
    return head


def _zstd_head(raw: BinaryIO, display: str) -> bytes:
    """First block of a zstd stream (needs the optional zstandard package)."""
    if not capture_codecs.zstd_available():
        raise CaptureError(f"{display}: zstd-compressed; install the 'zstandard' package to read it")
    reader = capture_codecs.zstd_reader(raw)
    head = b""
    try:
        while len(head) < TAR_BLOCK_BYTES:
            chunk = reader.read(TAR_BLOCK_BYTES - len(head))
            if not chunk:
                break
            head += chunk
    except capture_codecs.DATA_ERRORS as exc:
        raise CaptureError(f"{display}: not a readable zstd stream: {exc}") from None
    return head


# ---------------------------------------------------------------------------------------------
# Directory and single file


class _NotRegularFile(Exception):
    def __init__(self, mode: int) -> None:
        super().__init__(mode_reason(mode))
        self.reason = mode_reason(mode)


def _open_regular_file(path: str, *, follow_symlinks: bool) -> BinaryIO:
    """Open read-only without blocking on a FIFO and (unless asked) without following a
    symlink swapped in since the directory was listed; refuse anything but a regular file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise _NotRegularFile(mode)
    return os.fdopen(fd, "rb")


def _read_single_file(path: Path, raw: BinaryIO, file_bytes: int, limits: Limits) -> tuple[list[Member], str | None]:
    """A lone file is a capture of one member named by its base name (read through if compressed)."""
    entry = Entry(path.name or str(path), size=file_bytes, stored_size=file_bytes, opener=lambda: raw)
    inventory = Inventory(limits)
    partial = collect(iter([entry]), inventory, 1)
    return inventory.members, partial


def _read_directory(root: Path, display: str, limits: Limits, watch: ReadWatch) -> tuple[list[Member], str | None]:
    """Walk the directory without following symlinks; member paths are relative to it."""
    try:
        top_entries = _sorted_entries(str(root))
    except OSError as exc:
        raise CaptureError(f"{display}: {os_reason(exc)}") from None
    inventory = Inventory(limits, watch=watch)
    partial = collect(_directory_entries(top_entries), inventory, None)
    return inventory.members, partial


def _sorted_entries(directory: str) -> list[os.DirEntry]:
    with os.scandir(directory) as listing:
        return sorted(listing, key=lambda entry: entry.name)


def _directory_entries(top_entries: list[os.DirEntry]) -> Iterator[Entry]:
    """Depth-first, each directory's entries sorted by name (so paths come sorted by component);
    an explicit stack, since captures can nest deeper than the recursion limit."""
    stack: list[tuple[str, Iterator[os.DirEntry]]] = [("", iter(top_entries))]
    while stack:
        prefix, listing = stack[-1]
        dir_entry = next(listing, None)
        if dir_entry is None:
            stack.pop()
            continue
        relative = prefix + dir_entry.name
        try:
            is_dir = dir_entry.is_dir(follow_symlinks=False)
        except OSError as exc:
            yield Entry(relative, skip=f"unreadable: {os_reason(exc)}", lost=True)
            continue
        if not is_dir:
            yield _directory_file_entry(dir_entry, relative)
            continue
        try:
            children = _sorted_entries(dir_entry.path)
        except OSError as exc:
            yield Entry(relative, skip=f"directory not readable: {os_reason(exc)}", lost=True)
            continue
        yield Entry(relative, is_dir=True)
        stack.append((relative + "/", iter(children)))


def _directory_file_entry(dir_entry: os.DirEntry, relative: str) -> Entry:
    try:
        status = dir_entry.stat(follow_symlinks=False)
    except OSError as exc:
        return Entry(relative, skip=f"unreadable: {os_reason(exc)}", lost=True)
    if not stat.S_ISREG(status.st_mode):
        return Entry(relative, skip=mode_reason(status.st_mode))
    return Entry(
        relative,
        size=status.st_size,
        stored_size=status.st_size,
        opener=lambda: _open_directory_file(dir_entry.path),
    )


def _open_directory_file(path: str) -> BinaryIO:
    try:
        return _open_regular_file(path, follow_symlinks=False)
    except _NotRegularFile as exc:
        raise Rejected(exc.reason, lost=False) from None
    except OSError as exc:
        raise Rejected(f"unreadable: {os_reason(exc)}") from None
