"""Members of a capture, whatever the container: the checks every entry passes (path, type, size
caps, decompression ratio) and the bounded read. Part of ``dbdiag.capture``; containers list their
entries as ``Entry`` objects and ``collect`` turns them into ``Member`` objects.

>>> safe_path("db/./slow.log"), safe_path("../etc/passwd")
(('db/slow.log', None), ('../etc/passwd', "path has '..'"))
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from dataclasses import dataclass, field, replace
from typing import BinaryIO, Callable, Iterator

from dbdiag.capture_codecs import DATA_ERRORS, codec_of, data_error_reason, open_decompressed, zstd_available
from dbdiag.file_bytes import FileBytes
from dbdiag.patterns import lazy_compile

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

READ_CHUNK_BYTES = 1 * MiB
# Small members may legitimately compress far better than 250:1 (a log of identical lines).
RATIO_CHECK_FLOOR_BYTES = 1 * MiB
# Longer member names are not held (10,000 names of 100 KB would be 1 GB): the member is skipped.
MEMBER_NAME_CAP_CHARS = 4096
SUMMARY_PATH = "…"

_WINDOWS_DRIVE = lazy_compile(r"^[A-Za-z]:")
_PATH_SEPARATORS = lazy_compile(r"[/\\]")
# What tarfile raises, beyond TarError, on headers it cannot make sense of (a pax GNU.sparse.map
# that is not numbers, a sparse map cut short, a bad number field...).
CORRUPT_HEADER_ERRORS: tuple[type[BaseException], ...] = (
    ValueError,
    IndexError,
    KeyError,
    OverflowError,
    RecursionError,
    UnicodeError,
)

@dataclass(frozen=True)
class Limits:
    """Bounds on what reading a capture may cost. ``max_members`` counts every entry examined.

    ``max_member_bytes`` and ``max_total_bytes`` guard against archive bombs: they apply to the
    members of an archive (``--max-member-size``, ``--max-total-size``). A file given as it is, or the
    files of a directory, are the user's own: they are bounded only by what the analysis can hold in
    memory, ``files_bytes`` for the file or the directory's files together (None: ``memory_budget_bytes()``).
    """

    max_members: int = 10_000
    max_member_bytes: int = 2 * GiB
    max_total_bytes: int = 8 * GiB
    max_ratio: float = 250.0
    files_bytes: int | None = None
    memory_bound: bool = False  # the byte caps are the memory budget of ``for_files`` (words the skips)
    # A plain (uncompressed) file of the system this long or longer is not read here: its member is a
    # ``FileBytes`` that parsers read in pieces (``dbdiag.file_bytes``).
    stream_file_bytes: int = 256 * 1024 * 1024

    def for_files(self) -> Limits:
        """The limits of a file given as it is or of a directory's files: one byte budget, the memory's."""
        budget = self.files_bytes if self.files_bytes is not None else memory_budget_bytes()
        return replace(self, max_member_bytes=budget, max_total_bytes=budget, memory_bound=self.files_bytes is None)


# What an analysis holds per byte of input at its peak, beyond the ~190 MB every run takes (issue 14):
# measured 1.4x on a 2.26 GB MariaDB slow log (3.47 GB peak), 3.5x on a 37 MB PostgreSQL log (319 MB);
# kept at the worst kind. A file larger than RAM / this would be killed for memory half-way, so it is
# skipped with the option that admits it.
MEMORY_PER_INPUT_BYTE = 3.5


def memory_budget_bytes() -> int:
    """The most input one analysis can hold on this machine: physical memory / MEMORY_PER_INPUT_BYTE."""
    try:
        ram_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # no sysconf names (not Linux): the archive cap's size
        return Limits().max_member_bytes
    return int(ram_bytes / MEMORY_PER_INPUT_BYTE)


@dataclass(frozen=True)
class Member:
    """One entry of the capture: its content, or why it was not read. ``lost``: the reason is a
    safety cap, damage or a failed read, so the capture is partial (a link or a device skipped is
    not data lost)."""

    path: str
    data: bytes | FileBytes | None  # FileBytes: a big plain file, read when parsed
    size: int
    skipped: str | None
    compression: str | None
    lost: bool = False


@dataclass
class Capture:
    """What was read from the path the user gave, in archive order (directories: sorted by path)."""

    source: str
    container: str
    members: list[Member]
    partial: str | None = None


class CaptureError(Exception):
    """Input unusable as a whole: not found, unreadable, not an archive it claims to be... one-line message naming the file and reason."""



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



class Rejected(Exception):
    """A member that will not be read; ``too_large`` lets the caller pick member vs total cap;
    ``lost`` (``Member.lost``): false for what is not data lost (a file that is not a regular one,
    a format this installation does not read)."""

    def __init__(self, reason: str, compression: str | None = None, *, too_large: bool = False, lost: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.compression = compression
        self.too_large = too_large
        self.lost = lost


@dataclass
class Entry:
    """One entry as a container lists it, before the common checks and reading.

    ``size`` is the declared content size (checked against the caps before reading);
    ``stored_size`` the bytes as stored, the base of decompression ratios.
    """

    name: str
    size: int = 0
    stored_size: int = 0
    is_dir: bool = False
    skip: str | None = None
    lost: bool = False  # ``skip`` is for a cap, damage or a failed read (``Member.lost``)
    opener: Callable[[], BinaryIO] | None = None
    stored_compressed: bool = False  # the container itself compressed the data (zip deflate...)
    opened: bool = False

    def open(self) -> BinaryIO:
        self.opened = True
        return self.opener()


@dataclass
class ReadWatch:
    """How far reading has got, for a progress line polled from another thread: the offset of the
    capture file being read (``fd``, an archive or a single file), else the bytes of the directory's
    members read so far."""

    total_bytes: int | None = None
    done_bytes: int = 0
    fd: int | None = None

    def done(self) -> int:
        fd = self.fd
        if fd is not None:
            try:
                return os.lseek(fd, 0, os.SEEK_CUR)
            except OSError:  # closed between the check and the call: reading is over
                return self.done_bytes
        return self.done_bytes


@dataclass
class Inventory:
    """Members collected so far and the byte budget they used."""

    limits: Limits
    members: list[Member] = field(default_factory=list)
    bytes_read: int = 0
    total_cap_hit: bool = False
    watch: ReadWatch | None = None

    def bytes_left(self) -> int:
        return max(self.limits.max_total_bytes - self.bytes_read, 0)

    def add(self, member: Member) -> None:
        self.members.append(member)
        if member.data is not None:
            self.bytes_read += len(member.data)
            if self.watch is not None:
                self.watch.done_bytes += member.size


def collect(entries: Iterator[Entry], inventory: Inventory, total_entries: int | None) -> str | None:
    """Turn entries into members under the caps; return the ``partial`` reason, if any."""
    limits = inventory.limits
    for index, entry in enumerate(entries):
        if index >= limits.max_members:
            count = f"{total_entries - index} more" if total_entries is not None else "further"
            reason = f"{count} members not read: cap of {limits.max_members} members"
            inventory.add(Member(SUMMARY_PATH, None, 0, reason, None, lost=True))
            return f"member cap of {limits.max_members} reached; later members not read"
        member = member_of(entry, inventory)
        if member is not None:
            inventory.add(member)
        if inventory.total_cap_hit:
            cap = "memory budget" if limits.memory_bound else "total size cap"
            return (
                f"{cap} of {format_bytes(limits.max_total_bytes)} reached after "
                f"{len(inventory.members)} members; later members not read; --max-total-size raises it"
            )
    return None


def member_of(entry: Entry, inventory: Inventory) -> Member | None:
    """Apply path, type and size checks to one entry, then read it; None for directories."""
    limits = inventory.limits
    if len(entry.name) > MEMBER_NAME_CAP_CHARS:
        shown = printable_name(entry.name[:200]) + "…"
        reason = f"name longer than {MEMBER_NAME_CAP_CHARS} characters (not read)"
        return Member(shown, None, entry.size, reason, None, lost=True)
    path, unsafe = safe_path(entry.name)
    if unsafe is not None:
        return Member(path, None, entry.size, unsafe, None)
    if entry.is_dir:
        return None
    if entry.skip is not None:
        return Member(path, None, entry.size, entry.skip, None, lost=entry.lost)
    if entry.size > limits.max_member_bytes:
        return Member(path, None, entry.size, member_cap_reason(limits), None, lost=True)
    if entry.size > inventory.bytes_left():
        inventory.total_cap_hit = True
        return Member(path, None, entry.size, total_cap_reason(limits), None, lost=True)
    budget_bytes = min(limits.max_member_bytes, inventory.bytes_left())
    try:
        data, codec = read_entry(entry, budget_bytes, limits.max_ratio, limits.stream_file_bytes)
    except Rejected as rejected:
        reason = rejected.reason
        if rejected.too_large:
            total_is_binding = budget_bytes < limits.max_member_bytes
            inventory.total_cap_hit = total_is_binding
            reason = total_cap_reason(limits) if total_is_binding else member_cap_reason(limits)
        return Member(path, None, entry.size, reason, rejected.compression, lost=rejected.lost)
    except (ArchiveStop, tarfile.TarError, *CORRUPT_HEADER_ERRORS) as exc:
        # The archive broke while this member was being read: the member is listed, then the
        # archive stops (the caller words the reason).
        raise BrokenInsideMember(exc, Member(path, None, entry.size, inside_member_reason(exc), None, lost=True)) from exc
    return Member(path, data, len(data), None, codec)


def read_entry(entry: Entry, budget_bytes: int, max_ratio: float, stream_bytes: int | None = None) -> tuple[bytes | FileBytes, str | None]:
    """Open the entry and read it through, decompressing .gz/.bz2/.xz/.zst members found by magic; a plain
    file of the system of ``stream_bytes`` or more is left to be read when parsed (``FileBytes``)."""
    stream = entry.open()
    try:
        codec = codec_of(_peek(stream, 6))
        if codec == "zstd" and not zstd_available():
            raise Rejected("zstd-compressed member; install the 'zstandard' package to read it", codec, lost=False)
        reader = open_decompressed(codec, stream) if codec else stream
        ratio_base = entry.stored_size if (codec or entry.stored_compressed) else None
        if stream_bytes is not None and ratio_base is None and entry.size >= stream_bytes and _is_os_file(reader):
            if entry.size > budget_bytes:
                raise Rejected("too large", codec, too_large=True)
            return FileBytes.of_descriptor(reader.fileno(), entry.size, entry.name), codec
        try:
            return _read_bounded(reader, budget_bytes, ratio_base, max_ratio, codec, entry.size), codec
        except DATA_ERRORS as exc:
            raise Rejected(data_error_reason(exc, codec), codec) from None
    finally:
        stream.close()


def _read_bounded(
    reader: BinaryIO,
    budget_bytes: int,
    ratio_base_bytes: int | None,
    max_ratio: float,
    codec: str | None,
    declared_bytes: int,
) -> bytes:
    """Read to the end in chunks; stop as soon as the size budget or the ratio is exceeded."""
    # The chunks go into one growing buffer, handed out without a copy at the end: a list joined at
    # the end held every member twice (a 205 MB log in a tar.gz peaked 200 MB above the same log alone).
    content = io.BytesIO()
    if ratio_base_bytes is None and _is_os_file(reader):
        # Stored data cannot be a bomb: one read of the declared size and a byte more (no chunk
        # copies; Python allocates a read's whole size first, so never the budget's 2 GiB). More
        # than declared (a log still growing, a size of 0) is read on in chunks. Only from a file
        # of the system: tarfile and gzip join their own chunks for one big read (twice the member).
        data = reader.read(min(declared_bytes, budget_bytes) + 1)
        if len(data) <= declared_bytes:
            return data
        content.write(data)
        del data
    total_bytes = content.tell()
    if total_bytes > budget_bytes:
        raise Rejected("too large", codec, too_large=True)
    while True:
        chunk = reader.read(READ_CHUNK_BYTES)
        if not chunk:
            return content.getvalue()
        total_bytes += len(chunk)
        if total_bytes > budget_bytes:
            raise Rejected("too large", codec, too_large=True)
        if (
            ratio_base_bytes is not None
            and total_bytes > RATIO_CHECK_FLOOR_BYTES
            and total_bytes > max_ratio * ratio_base_bytes
        ):
            raise Rejected(f"decompression ratio above {max_ratio:g}:1 (bomb?)", codec)
        content.write(chunk)


def _is_os_file(reader: BinaryIO) -> bool:
    """Whether ``reader`` reads a file of the system itself (not a member of an archive, not a decompressor)."""
    try:
        reader.fileno()
    except (OSError, AttributeError, ValueError):  # io.UnsupportedOperation is an OSError and a ValueError
        return False
    return True


def _peek(stream: BinaryIO, size: int) -> bytes:
    """The first bytes of a buffered stream without consuming them."""
    try:
        return stream.peek(size)[:size]
    except DATA_ERRORS as exc:
        raise Rejected(data_error_reason(exc, None)) from None


def safe_path(name: str) -> tuple[str, str | None]:
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


def mode_reason(mode: int) -> str:
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


def member_cap_reason(limits: Limits) -> str:
    if limits.memory_bound:
        return f"larger than the {format_bytes(limits.max_member_bytes)} this machine's memory can analyze (RAM / {MEMORY_PER_INPUT_BYTE:g}); --max-member-size raises it"
    return f"member larger than {format_bytes(limits.max_member_bytes)} cap; --max-member-size raises it"


def total_cap_reason(limits: Limits) -> str:
    if limits.memory_bound:
        return f"not read: the {format_bytes(limits.max_total_bytes)} this machine's memory can analyze (RAM / {MEMORY_PER_INPUT_BYTE:g}) is used; --max-total-size raises it"
    return f"not read: total size cap of {format_bytes(limits.max_total_bytes)} reached; --max-total-size raises it"


def format_bytes(size_bytes: float) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{int(size_bytes)} bytes"


def os_reason(exc: OSError) -> str:
    """'No such file or directory' -> 'no such file or directory'."""
    return (exc.strerror or str(exc)).lower()



class ArchiveStop(Exception):
    """The archive cannot be read further; members read so far are kept."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class ArchiveOverBudget(ArchiveStop):
    """The decompressed archive grew past what its size allows (ratio) or past what we skip."""


class BrokenInsideMember(Exception):
    """The archive stopped while ``member`` was being read."""

    def __init__(self, cause: BaseException, member: Member) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.member = member


def inside_member_reason(exc: BaseException) -> str:
    if isinstance(exc, ArchiveOverBudget):
        return f"not read: {exc.reason}"
    return "archive truncated or corrupt inside this member"


