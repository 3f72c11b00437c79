"""Safe reading of a capture: archive, directory or single file -> members in memory, bounded.

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

Example::

    >>> cap = read_capture(Path("capture.tar.gz"))            # doctest: +SKIP
    >>> [(m.path, m.size, m.skipped) for m in cap.members]     # doctest: +SKIP
    [('db/slow.log', 18234, None), ('etc', 0, 'symbolic link (not followed)')]
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from dbdiag import zip_local_scan
from dbdiag.zstd_frames import CheckedSource

try:  # optional: .zst members and .tar.zst captures are read only when it is installed
    import zstandard
except ImportError:
    zstandard = None

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

READ_CHUNK_BYTES = 1 * MiB
# Small members may legitimately compress far better than 250:1 (a log of identical lines).
RATIO_CHECK_FLOOR_BYTES = 1 * MiB
# A compressed archive may always decompress to this much, however small it is.
ARCHIVE_RATIO_FLOOR_BYTES = 64 * MiB
# pax / GNU long-name headers are read whole by tarfile; real ones are a few hundred bytes (a path
# is at most 4 KiB, xattrs and ACLs a few KiB more). A larger one is skipped over, never parsed.
TAR_METADATA_CAP_BYTES = 64 * KiB
# tarfile reads a chain of metadata headers by recursion: one per header.
TAR_METADATA_CHAIN_CAP = 32
# Longer member names are not held (10,000 names of 100 KB would be 1 GB): the member is skipped.
MEMBER_NAME_CAP_CHARS = 4096
TAR_BLOCK_BYTES = tarfile.BLOCKSIZE
# tarfile's stream reads (default 10 KiB): larger ones make skipping past big members cheaper.
TAR_STREAM_READ_BYTES = 256 * KiB
SNIFF_INPUT_CAP_BYTES = 4 * MiB
SNIFF_INPUT_CHUNK_BYTES = 64 * KiB

SUMMARY_PATH = "…"

_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_ZIP_FLAG_ENCRYPTED = 0x1
_ZIP_FLAG_UTF8 = 0x800
_TAR_METADATA_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
_TAR_CONTAINER_OF_CODEC = {None: "tar", "gzip": "tar.gz", "bzip2": "tar.bz2", "xz": "tar.xz", "zstd": "tar.zst"}
_WINDOWS_DRIVE = re.compile(r"^[A-Za-z]:")
_PATH_SEPARATORS = re.compile(r"[/\\]")

# Errors a decompressing reader (or a zip entry reader) raises on bad data. gzip.BadGzipFile and
# bz2's "Invalid data stream" are OSError; EOFError means the stream ends early.
_DATA_ERRORS: tuple[type[BaseException], ...] = (
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
)
if zstandard is not None:
    _DATA_ERRORS += (zstandard.ZstdError,)
# What tarfile raises, beyond TarError, on headers it cannot make sense of (a pax GNU.sparse.map
# that is not numbers, a sparse map cut short, a bad number field...).
_CORRUPT_HEADER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    IndexError,
    KeyError,
    OverflowError,
    RecursionError,
    UnicodeError,
)


@dataclass(frozen=True)
class Limits:
    """Bounds on what reading a capture may cost. ``max_members`` counts every entry examined."""

    max_members: int = 10_000
    max_member_bytes: int = 2 * GiB
    max_total_bytes: int = 8 * GiB
    max_ratio: float = 250.0


@dataclass(frozen=True)
class Member:
    """One entry of the capture: its content, or why it was not read."""

    path: str
    data: bytes | None
    size: int
    skipped: str | None
    compression: str | None


@dataclass
class Capture:
    """What was read from the path the user gave, in archive order (directories: sorted by path)."""

    source: str
    container: str
    members: list[Member]
    partial: str | None = None


class CaptureError(Exception):
    """Input unusable as a whole: not found, unreadable, not an archive it claims to be... one-line message naming the file and reason."""


# ---------------------------------------------------------------------------------------------
# Public entry point


def read_capture(path: Path, limits: Limits = Limits()) -> Capture:
    """Read a capture (tar[.gz|.bz2|.xz], zip, directory or single file) into memory, bounded."""
    path = Path(path)
    display = printable_name(str(path))
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise CaptureError(f"{display}: {_os_reason(exc)}") from None
    if stat.S_ISDIR(mode):
        members, partial = _read_directory(path, display, limits)
        return Capture(str(path), "directory", members, partial)
    try:
        raw = _open_regular_file(str(path), follow_symlinks=True)
    except OSError as exc:
        raise CaptureError(f"{display}: {_os_reason(exc)}") from None
    except _NotRegularFile as exc:
        raise CaptureError(f"{display}: not a regular file or directory ({exc.reason})") from None
    with raw:
        file_bytes = os.fstat(raw.fileno()).st_size
        container, codec = _identify(raw, display)
        raw.seek(0)
        if container == "zip":
            members, partial = _read_zip(raw, display, limits)
        elif container == "file":
            members, partial = _read_single_file(path, raw, file_bytes, limits)
        else:
            members, partial = _read_tar(raw, codec, file_bytes, limits)
    return Capture(str(path), container, members, partial)


def printable_name(name: str) -> str:
    """Show a name from an archive or file system safely: non-UTF-8 bytes and control/format
    characters become backslash escapes (``caf\\xe9.log``, ``a\\nb``), everything else is kept."""
    try:
        raw = name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # lone surrogates that do not stand for bytes
        raw = name.encode("utf-8", "backslashreplace")
    text = raw.decode("utf-8", "backslashreplace")
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


# ---------------------------------------------------------------------------------------------
# Container identification


def _identify(raw: BinaryIO, display: str) -> tuple[str, str | None]:
    """Return (container, codec of the whole file) from magic bytes; the name plays no part."""
    head = raw.read(TAR_BLOCK_BYTES)
    if head.startswith(_ZIP_MAGICS):
        return "zip", None
    codec = _codec_of(head)
    if codec is None:
        return ("tar" if _is_tar_header(head) else "file"), None
    raw.seek(0)
    inner_head = _decompressed_head(raw, codec, display)
    if _is_tar_header(inner_head):
        return _TAR_CONTAINER_OF_CODEC[codec], codec
    return "file", codec


def _codec_of(head: bytes) -> str | None:
    """Compression format from the first bytes, or None for data that is not compressed."""
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"BZh") and head[3:4].isdigit() and head[3:4] != b"0":
        return "bzip2"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    return None


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
    decompressor = _new_decompressor(codec)
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


def _new_decompressor(codec: str):
    """A one-shot decompressor object with ``decompress(data, max_length)`` and ``eof``."""
    if codec == "gzip":
        return zlib.decompressobj(wbits=31)
    if codec == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def _zstd_head(raw: BinaryIO, display: str) -> bytes:
    """First block of a zstd stream (needs the optional zstandard package)."""
    if zstandard is None:
        raise CaptureError(f"{display}: zstd-compressed; install the 'zstandard' package to read it")
    reader = zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)
    head = b""
    try:
        while len(head) < TAR_BLOCK_BYTES:
            chunk = reader.read(TAR_BLOCK_BYTES - len(head))
            if not chunk:
                break
            head += chunk
    except (zstandard.ZstdError, OSError) as exc:
        raise CaptureError(f"{display}: not a readable zstd stream: {exc}") from None
    return head


def _open_decompressed(codec: str, source: BinaryIO) -> BinaryIO:
    """A file-like reader of the decompressed stream whose ``read(n)`` returns at most n bytes.
    Multi-stream files (concatenated gzip members, pbzip2 output) are read to the end."""
    if codec == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")
    if codec == "bzip2":
        return bz2.BZ2File(source, mode="rb")
    if codec == "xz":
        return lzma.LZMAFile(source, mode="rb")
    checked = CheckedSource(source)  # zstandard's reader ends a cut stream silently
    return zstandard.ZstdDecompressor().stream_reader(checked, read_across_frames=True, closefd=False)


# ---------------------------------------------------------------------------------------------
# Reading one member, whatever the container


class _Rejected(Exception):
    """A member that will not be read; ``too_large`` lets the caller pick member vs total cap."""

    def __init__(self, reason: str, compression: str | None = None, *, too_large: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.compression = compression
        self.too_large = too_large


@dataclass
class _Entry:
    """One entry as a container lists it, before the common checks and reading.

    ``size`` is the declared content size (checked against the caps before reading);
    ``stored_size`` the bytes as stored, the base of decompression ratios.
    """

    name: str
    size: int = 0
    stored_size: int = 0
    is_dir: bool = False
    skip: str | None = None
    opener: Callable[[], BinaryIO] | None = None
    stored_compressed: bool = False  # the container itself compressed the data (zip deflate...)
    opened: bool = False

    def open(self) -> BinaryIO:
        self.opened = True
        return self.opener()


@dataclass
class _Inventory:
    """Members collected so far and the byte budget they used."""

    limits: Limits
    members: list[Member] = field(default_factory=list)
    bytes_read: int = 0
    total_cap_hit: bool = False

    def bytes_left(self) -> int:
        return max(self.limits.max_total_bytes - self.bytes_read, 0)

    def add(self, member: Member) -> None:
        self.members.append(member)
        if member.data is not None:
            self.bytes_read += len(member.data)


def _collect(entries: Iterator[_Entry], inventory: _Inventory, total_entries: int | None) -> str | None:
    """Turn entries into members under the caps; return the ``partial`` reason, if any."""
    limits = inventory.limits
    for index, entry in enumerate(entries):
        if index >= limits.max_members:
            count = f"{total_entries - index} more" if total_entries is not None else "further"
            reason = f"{count} members not read: cap of {limits.max_members} members"
            inventory.add(Member(SUMMARY_PATH, None, 0, reason, None))
            return f"member cap of {limits.max_members} reached; later members not read"
        member = _member_of(entry, inventory)
        if member is not None:
            inventory.add(member)
        if inventory.total_cap_hit:
            return (
                f"total size cap of {_format_bytes(limits.max_total_bytes)} reached after "
                f"{len(inventory.members)} members; later members not read"
            )
    return None


def _member_of(entry: _Entry, inventory: _Inventory) -> Member | None:
    """Apply path, type and size checks to one entry, then read it; None for directories."""
    limits = inventory.limits
    if len(entry.name) > MEMBER_NAME_CAP_CHARS:
        shown = printable_name(entry.name[:200]) + "…"
        return Member(shown, None, entry.size, f"name longer than {MEMBER_NAME_CAP_CHARS} characters (not read)", None)
    path, unsafe = _safe_path(entry.name)
    if unsafe is not None:
        return Member(path, None, entry.size, unsafe, None)
    if entry.is_dir:
        return None
    if entry.skip is not None:
        return Member(path, None, entry.size, entry.skip, None)
    if entry.size > limits.max_member_bytes:
        return Member(path, None, entry.size, _member_cap_reason(limits), None)
    if entry.size > inventory.bytes_left():
        inventory.total_cap_hit = True
        return Member(path, None, entry.size, _total_cap_reason(limits), None)
    budget_bytes = min(limits.max_member_bytes, inventory.bytes_left())
    try:
        data, codec = _read_entry(entry, budget_bytes, limits.max_ratio)
    except _Rejected as rejected:
        reason = rejected.reason
        if rejected.too_large:
            total_is_binding = budget_bytes < limits.max_member_bytes
            inventory.total_cap_hit = total_is_binding
            reason = _total_cap_reason(limits) if total_is_binding else _member_cap_reason(limits)
        return Member(path, None, entry.size, reason, rejected.compression)
    except (_ArchiveStop, tarfile.TarError, *_CORRUPT_HEADER_ERRORS) as exc:
        # The archive broke while this member was being read: the member is listed, then the
        # archive stops (the caller words the reason).
        raise _BrokenInsideMember(exc, Member(path, None, entry.size, _inside_member_reason(exc), None)) from exc
    return Member(path, data, len(data), None, codec)


def _read_entry(entry: _Entry, budget_bytes: int, max_ratio: float) -> tuple[bytes, str | None]:
    """Open the entry and read it through, decompressing .gz/.bz2/.xz/.zst members found by magic."""
    stream = entry.open()
    try:
        codec = _codec_of(_peek(stream, 6))
        if codec == "zstd" and zstandard is None:
            raise _Rejected("zstd-compressed member; install the 'zstandard' package to read it", codec)
        reader = _open_decompressed(codec, stream) if codec else stream
        ratio_base = entry.stored_size if (codec or entry.stored_compressed) else None
        try:
            return _read_bounded(reader, budget_bytes, ratio_base, max_ratio, codec), codec
        except _DATA_ERRORS as exc:
            raise _Rejected(_data_error_reason(exc, codec), codec) from None
    finally:
        stream.close()


def _read_bounded(
    reader: BinaryIO, budget_bytes: int, ratio_base_bytes: int | None, max_ratio: float, codec: str | None
) -> bytes:
    """Read to the end in chunks; stop as soon as the size budget or the ratio is exceeded."""
    if ratio_base_bytes is None:
        # Stored data cannot be a bomb: one read of at most budget + 1 bytes (no chunk copies).
        data = reader.read(budget_bytes + 1)
        if len(data) > budget_bytes:
            raise _Rejected("too large", codec, too_large=True)
        return data
    chunks: list[bytes] = []
    total_bytes = 0
    while True:
        chunk = reader.read(READ_CHUNK_BYTES)
        if not chunk:
            return b"".join(chunks)
        total_bytes += len(chunk)
        if total_bytes > budget_bytes:
            raise _Rejected("too large", codec, too_large=True)
        if (
            ratio_base_bytes is not None
            and total_bytes > RATIO_CHECK_FLOOR_BYTES
            and total_bytes > max_ratio * ratio_base_bytes
        ):
            raise _Rejected(f"decompression ratio above {max_ratio:g}:1 (bomb?)", codec)
        chunks.append(chunk)


def _peek(stream: BinaryIO, size: int) -> bytes:
    """The first bytes of a buffered stream without consuming them."""
    try:
        return stream.peek(size)[:size]
    except _DATA_ERRORS as exc:
        raise _Rejected(_data_error_reason(exc, None)) from None


def _data_error_reason(exc: BaseException, codec: str | None) -> str:
    """Skip reason for a read that failed on bad data."""
    if isinstance(exc, EOFError):
        return f"truncated {codec} data (stream ends early)" if codec else "truncated data (stream ends early)"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, zipfile.BadZipFile):
        return f"corrupt zip entry: {detail}"
    if codec is not None:
        return f"corrupt {codec} data: {detail}"
    return f"unreadable: {detail}"


def _safe_path(name: str) -> tuple[str, str | None]:
    """('/'-separated printable path, reason it is unsafe or None). Backslashes count as
    separators for the checks, since Windows tools write them in zip names."""
    if name.startswith(("/", "\\")) or _WINDOWS_DRIVE.match(name):
        return printable_name(name), "absolute path"
    if ".." in _PATH_SEPARATORS.split(name):
        return printable_name(name), "path has '..'"
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if not parts:
        return printable_name(name), "empty path"
    return printable_name("/".join(parts)), None


def _mode_reason(mode: int) -> str:
    """Why an entry with this st_mode is not read."""
    if stat.S_ISLNK(mode):
        return "symbolic link (not followed)"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISFIFO(mode):
        return "FIFO"
    if stat.S_ISSOCK(mode):
        return "socket"
    return f"not a regular file (mode {stat.S_IFMT(mode):#o})"


def _member_cap_reason(limits: Limits) -> str:
    return f"member larger than {_format_bytes(limits.max_member_bytes)} cap"


def _total_cap_reason(limits: Limits) -> str:
    return f"not read: total size cap of {_format_bytes(limits.max_total_bytes)} reached"


def _format_bytes(size_bytes: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{int(size_bytes)} bytes"


def _os_reason(exc: OSError) -> str:
    """'No such file or directory' -> 'no such file or directory'."""
    return (exc.strerror or str(exc)).lower()


# ---------------------------------------------------------------------------------------------
# tar (plain or compressed), read as a stream


class _ArchiveStop(Exception):
    """The archive cannot be read further; members read so far are kept."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _ArchiveOverBudget(_ArchiveStop):
    """The decompressed archive grew past what its size allows (ratio) or past what we skip."""


class _BrokenInsideMember(Exception):
    """The archive stopped while ``member`` was being read."""

    def __init__(self, cause: BaseException, member: Member) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.member = member


def _inside_member_reason(exc: BaseException) -> str:
    if isinstance(exc, _ArchiveOverBudget):
        return f"not read: {exc.reason}"
    return "archive truncated or corrupt inside this member"


def _archive_partial(cause: BaseException, stream_error: str | None, members_read: int) -> str:
    """``Capture.partial`` for an archive that stopped early."""
    if isinstance(cause, _ArchiveOverBudget):
        return f"archive reading stopped after {members_read} members: {cause.reason}"
    # A failure of the decompressed stream surfaces in tarfile as a short read; name the cause.
    if stream_error:
        reason = stream_error
    elif isinstance(cause, _ArchiveStop):
        reason = cause.reason
    elif isinstance(cause, _CORRUPT_HEADER_ERRORS):
        reason = f"corrupt header ({type(cause).__name__}: {str(cause)[:200]})"
    else:
        reason = str(cause)
    return f"archive truncated or corrupt after {members_read} members: {reason}"


class _ArchiveStream:
    """The (decompressed) byte stream tarfile reads, bounded by the whole-archive ratio.

    ``budget_bytes`` bounds the bytes delivered, minus the data of members we chose to skip
    (``excuse``): skipping a bomb member still costs its decompression, so that is bounded
    separately, by ``max_total_bytes``.

    A decompression error is kept in ``error`` and the stream then looks ended: tarfile reads
    ahead, so raising at once would lose members that are complete before the damage.
    """

    def __init__(self, source: BinaryIO, codec: str | None, budget_bytes: float | None, limits: Limits) -> None:
        self._read_step = getattr(source, "read1", source.read)
        self._codec = codec
        self._budget_bytes = budget_bytes
        self._limits = limits
        self.delivered_bytes = 0
        self.excused_bytes = 0
        self.error: str | None = None

    def read(self, size: int = -1) -> bytes:
        if self.error is not None:
            return b""
        try:
            # read1: one decompression step, so an error costs no data already decompressed.
            data = self._read_step(size)
        except _DATA_ERRORS as exc:
            self.error = _data_error_reason(exc, self._codec or "tar")
            return b""
        self.delivered_bytes += len(data)
        if self._budget_bytes is not None and self.delivered_bytes - self.excused_bytes > self._budget_bytes:
            raise _ArchiveOverBudget(
                f"archive decompresses to more than {self._limits.max_ratio:g}:1 of its size (bomb?)"
            )
        return data

    def excuse(self, size_bytes: int) -> None:
        """Do not count the data of a skipped member against the ratio budget."""
        self.excused_bytes += size_bytes
        if self._budget_bytes is not None and self.excused_bytes > self._limits.max_total_bytes:
            raise _ArchiveOverBudget(
                f"more than {_format_bytes(self._limits.max_total_bytes)} of skipped member data to decompress past"
            )


def _read_tar(raw: BinaryIO, codec: str | None, file_bytes: int, limits: Limits) -> tuple[list[Member], str | None]:
    """Stream the tar; stop cleanly at truncation, corruption, a cap or a bomb."""
    header_errors: list[tarfile.HeaderError] = []
    if codec is None:
        stream = _ArchiveStream(raw, None, None, limits)
        compressed_bytes = None
    else:
        budget_bytes = max(limits.max_ratio * file_bytes, ARCHIVE_RATIO_FLOOR_BYTES)
        stream = _ArchiveStream(_open_decompressed(codec, raw), codec, budget_bytes, limits)
        compressed_bytes = file_bytes
    inventory = _Inventory(limits)
    try:
        archive = tarfile.open(
            fileobj=stream,
            mode="r|",
            bufsize=TAR_STREAM_READ_BYTES,
            tarinfo=_checked_tarinfo_class(header_errors),
            encoding="utf-8",
            errors="surrogateescape",
        )
        partial = _collect(_tar_entries(archive, stream, compressed_bytes, limits), inventory, None)
        problem = _tar_end_problem(header_errors) if partial is None else None
        if problem is None and partial is None and codec is not None:
            problem = _stream_end_problem(stream)
        if problem is not None:
            partial = _archive_partial(_ArchiveStop(problem), stream.error, len(inventory.members))
    except _BrokenInsideMember as broken:
        partial = _archive_partial(broken.cause, stream.error, len(inventory.members))
        inventory.add(broken.member)
    except (_ArchiveStop, tarfile.TarError, *_CORRUPT_HEADER_ERRORS) as exc:
        partial = _archive_partial(exc, stream.error, len(inventory.members))
    return inventory.members, partial


def _stream_end_problem(stream: _ArchiveStream) -> str | None:
    """tarfile stops at the end-of-archive marker; the compressed stream must end cleanly after it
    (a cut .tar.gz whose tar part is whole is still a damaged file: say so)."""
    if stream.error is not None:
        return None  # already the reason
    while stream.read(TAR_STREAM_READ_BYTES):
        pass  # bounded: the stream's ratio budget stops a bomb hidden after the marker
    if stream.error is not None:
        return f"compressed stream damaged after the end-of-archive marker ({stream.error})"
    return None


def _tar_entries(
    archive: tarfile.TarFile, stream: _ArchiveStream, compressed_bytes: int | None, limits: Limits
) -> Iterator[_Entry]:
    """Entries in archive order; the data of entries not opened is excused from the ratio budget."""
    while (info := archive.next()) is not None:
        entry = _tar_entry(archive, info, compressed_bytes, limits)
        yield entry
        oversized_header = getattr(info, "oversized_header", False)
        if not entry.opened and not oversized_header and (info.isreg() or info.type not in tarfile.SUPPORTED_TYPES):
            stream.excuse(info.size)


def _tar_entry(archive: tarfile.TarFile, info: tarfile.TarInfo, compressed_bytes: int | None, limits: Limits) -> _Entry:
    entry = _Entry(info.name, size=info.size, stored_size=info.size)
    if getattr(info, "oversized_header", False):
        entry.skip = (
            f"tar extended header of {_format_bytes(info.size)} skipped (cap {_format_bytes(TAR_METADATA_CAP_BYTES)}); "
            "the next member keeps its short name"
        )
    elif info.isdir():
        entry.is_dir = True
    elif not info.isreg():
        entry.skip = _tar_type_reason(info)
    elif (
        compressed_bytes is not None
        and info.size > ARCHIVE_RATIO_FLOOR_BYTES
        and info.size > limits.max_ratio * compressed_bytes
    ):
        entry.skip = f"decompression ratio above {limits.max_ratio:g}:1 (bomb?)"
    else:
        if info.issparse():
            # The holes of a sparse member read as zeros: bound them like decompressed data.
            entry.stored_size = sum(size for _, size in info.sparse or ())
            entry.stored_compressed = True
        entry.opener = lambda: archive.extractfile(info)
    return entry


def _tar_type_reason(info: tarfile.TarInfo) -> str:
    if info.issym():
        return "symbolic link (not followed)"
    if info.islnk():
        return "hard link (not followed)"
    if info.ischr():
        return "character device"
    if info.isblk():
        return "block device"
    if info.isfifo():
        return "FIFO"
    return f"unsupported tar entry type {printable_name(info.type.decode('latin-1'))!r}"


def _tar_end_problem(header_errors: list[tarfile.HeaderError]) -> str | None:
    """Why the header scan ended, unless it was the end-of-archive marker."""
    if not header_errors or isinstance(header_errors[-1], tarfile.EOFHeaderError):
        return None
    last = header_errors[-1]
    if isinstance(last, tarfile.EmptyHeaderError):
        return "no end-of-archive marker (archive cut short?)"
    if isinstance(last, tarfile.TruncatedHeaderError):
        return "truncated header"
    return f"invalid header: {last}"


def _checked_tarinfo_class(header_errors: list[tarfile.HeaderError]) -> type[tarfile.TarInfo]:
    """A TarInfo that records why the header scan stopped (tarfile ends silently on a bad or
    missing header) and refuses metadata headers that tarfile would read whole into memory."""

    chain_depth = [0]  # metadata headers being read, one inside the other (tarfile recurses)

    class _CheckedTarInfo(tarfile.TarInfo):
        @classmethod
        def frombuf(cls, buf, encoding, errors):
            info = super().frombuf(buf, encoding, errors)
            if info.type in _TAR_METADATA_TYPES and info.size > TAR_METADATA_CAP_BYTES:
                # An unknown type: tarfile skips its data like a member's, and we list it as skipped.
                info.type = b"\x7f"
                info.oversized_header = True
            return info

        @classmethod
        def fromtarfile(cls, tarfile_):
            chain_depth[0] += 1
            try:
                if chain_depth[0] > TAR_METADATA_CHAIN_CAP:
                    raise _ArchiveStop(f"more than {TAR_METADATA_CHAIN_CAP} extended headers in a row")
                return super().fromtarfile(tarfile_)
            except tarfile.HeaderError as exc:
                header_errors.append(exc)
                raise
            finally:
                chain_depth[0] -= 1

    return _CheckedTarInfo


# ---------------------------------------------------------------------------------------------
# zip


def _read_zip(raw: BinaryIO, display: str, limits: Limits) -> tuple[list[Member], str | None]:
    """Read the zip's entries in central-directory order; without a usable central directory (cut,
    damaged, or a name zipfile cannot decode), in file order from the local headers."""
    try:
        archive = zipfile.ZipFile(raw)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, UnicodeDecodeError, struct.error) as exc:
        return _read_zip_by_local_headers(raw, display, limits, f"{type(exc).__name__}: {exc}")
    with archive:
        infos = archive.infolist()
        inventory = _Inventory(limits)
        entries = (_zip_entry(archive, info, limits) for info in infos)
        partial = _collect(entries, inventory, len(infos))
    return inventory.members, partial


def _read_zip_by_local_headers(raw: BinaryIO, display: str, limits: Limits, why: str) -> tuple[list[Member], str | None]:
    inventory = _Inventory(limits)
    stop: str | None = None

    def entries() -> Iterator[_Entry]:
        nonlocal stop
        try:
            for local in zip_local_scan.scan(raw, limits.max_member_bytes):
                entry = _zip_entry_fields(local.info, limits, lambda local=local: _open_local_entry(raw, local))
                entry.name = local.name.decode("utf-8", "surrogateescape")
                yield entry
        except zip_local_scan.ScanStop as exc:
            stop = str(exc)

    partial = _collect(entries(), inventory, None)
    if not inventory.members and stop is not None:
        raise CaptureError(f"{display}: not a readable zip archive: {why}; {stop}")
    reason = f"zip central directory unusable ({why[:200]}); {len(inventory.members)} entries read from their local headers"
    if stop is not None:
        reason += f", then {stop}"
    return inventory.members, partial or reason


def _open_local_entry(raw: BinaryIO, local: zip_local_scan.LocalEntry) -> BinaryIO:
    try:
        return zip_local_scan.open_entry(raw, local)
    except NotImplementedError:
        raise _Rejected(f"unsupported zip compression method {local.info.compress_type}") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise _Rejected(f"corrupt zip entry: {exc}") from None


def _zip_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits) -> _Entry:
    entry = _zip_entry_fields(info, limits, lambda: _open_zip_member(archive, info))
    entry.name = _zip_raw_name(info)
    return entry


def _zip_entry_fields(info: zipfile.ZipInfo, limits: Limits, opener: Callable[[], BinaryIO]) -> _Entry:
    """The checks common to central-directory and local-header entries (the caller sets the name)."""
    entry = _Entry(
        info.filename,
        size=info.file_size,
        stored_size=info.compress_size,
        stored_compressed=info.compress_type != zipfile.ZIP_STORED,
    )
    mode = info.external_attr >> 16
    if info.filename.endswith("/") or stat.S_ISDIR(mode):  # ZipInfo.is_dir() fails on an empty name
        entry.is_dir = True
    elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        entry.skip = _mode_reason(mode)
    elif info.flag_bits & _ZIP_FLAG_ENCRYPTED:
        entry.skip = "encrypted zip entry (not read)"
    elif (
        entry.stored_compressed
        and info.file_size > RATIO_CHECK_FLOOR_BYTES
        and info.file_size > limits.max_ratio * info.compress_size
    ):
        entry.skip = f"decompression ratio above {limits.max_ratio:g}:1 (bomb?)"
    else:
        entry.opener = opener
    return entry


def _zip_raw_name(info: zipfile.ZipInfo) -> str:
    """The entry name as bytes-in-a-str (surrogateescape), like tarfile's: zipfile decodes
    names without the UTF-8 flag as cp437, which turns non-UTF-8 bytes into wrong letters."""
    if info.flag_bits & _ZIP_FLAG_UTF8:
        return info.filename
    return info.filename.encode("cp437").decode("utf-8", "surrogateescape")


def _open_zip_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> BinaryIO:
    try:
        return archive.open(info)
    except NotImplementedError:
        raise _Rejected(f"unsupported zip compression method {info.compress_type}") from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error, lzma.LZMAError) as exc:
        raise _Rejected(f"corrupt zip entry: {exc}") from None


# ---------------------------------------------------------------------------------------------
# Directory and single file


class _NotRegularFile(Exception):
    def __init__(self, mode: int) -> None:
        super().__init__(_mode_reason(mode))
        self.reason = _mode_reason(mode)


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
    entry = _Entry(path.name or str(path), size=file_bytes, stored_size=file_bytes, opener=lambda: raw)
    inventory = _Inventory(limits)
    partial = _collect(iter([entry]), inventory, 1)
    return inventory.members, partial


def _read_directory(root: Path, display: str, limits: Limits) -> tuple[list[Member], str | None]:
    """Walk the directory without following symlinks; member paths are relative to it."""
    try:
        top_entries = _sorted_entries(str(root))
    except OSError as exc:
        raise CaptureError(f"{display}: {_os_reason(exc)}") from None
    inventory = _Inventory(limits)
    partial = _collect(_directory_entries(top_entries), inventory, None)
    return inventory.members, partial


def _sorted_entries(directory: str) -> list[os.DirEntry]:
    with os.scandir(directory) as listing:
        return sorted(listing, key=lambda entry: entry.name)


def _directory_entries(top_entries: list[os.DirEntry]) -> Iterator[_Entry]:
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
            yield _Entry(relative, skip=f"unreadable: {_os_reason(exc)}")
            continue
        if not is_dir:
            yield _directory_file_entry(dir_entry, relative)
            continue
        try:
            children = _sorted_entries(dir_entry.path)
        except OSError as exc:
            yield _Entry(relative, skip=f"directory not readable: {_os_reason(exc)}")
            continue
        yield _Entry(relative, is_dir=True)
        stack.append((relative + "/", iter(children)))


def _directory_file_entry(dir_entry: os.DirEntry, relative: str) -> _Entry:
    try:
        status = dir_entry.stat(follow_symlinks=False)
    except OSError as exc:
        return _Entry(relative, skip=f"unreadable: {_os_reason(exc)}")
    if not stat.S_ISREG(status.st_mode):
        return _Entry(relative, skip=_mode_reason(status.st_mode))
    return _Entry(
        relative,
        size=status.st_size,
        stored_size=status.st_size,
        opener=lambda: _open_directory_file(dir_entry.path),
    )


def _open_directory_file(path: str) -> BinaryIO:
    try:
        return _open_regular_file(path, follow_symlinks=False)
    except _NotRegularFile as exc:
        raise _Rejected(exc.reason) from None
    except OSError as exc:
        raise _Rejected(f"unreadable: {_os_reason(exc)}") from None
