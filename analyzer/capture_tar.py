"""tar captures (plain, .tar.gz, .tar.bz2, .tar.xz, .tar.zst), read as one stream through
``tarfile`` in ``r|`` mode: nothing seeks, nothing is extracted. Part of ``dbdiag.capture``.

A damaged archive keeps the members before the damage; the reason it stopped goes to
``Capture.partial``, e.g. ``archive truncated or corrupt after 12 members: truncated gzip data``.
"""

from __future__ import annotations

import tarfile
from typing import BinaryIO, Iterator

from dbdiag.capture_codecs import DATA_ERRORS, data_error_reason, open_decompressed
from dbdiag.capture_members import (
    CORRUPT_HEADER_ERRORS,
    KiB,
    MiB,
    ArchiveOverBudget,
    ArchiveStop,
    BrokenInsideMember,
    Entry,
    Inventory,
    Limits,
    Member,
    collect,
    format_bytes,
    printable_name,
)
from dbdiag.capture_tar_headers import TAR_METADATA_CAP_BYTES, checked_tarinfo_class

# A compressed archive may always decompress to this much, however small it is.
ARCHIVE_RATIO_FLOOR_BYTES = 64 * MiB
# tarfile's stream reads (default 10 KiB): larger ones make skipping past big members cheaper.
TAR_STREAM_READ_BYTES = 256 * KiB


def _archive_partial(cause: BaseException, stream_error: str | None, members_read: int) -> str:
    """``Capture.partial`` for an archive that stopped early."""
    if isinstance(cause, ArchiveOverBudget):
        return f"archive reading stopped after {members_read} members: {cause.reason}"
    # A failure of the decompressed stream surfaces in tarfile as a short read; name the cause.
    if stream_error:
        reason = stream_error
    elif isinstance(cause, ArchiveStop):
        reason = cause.reason
    elif isinstance(cause, CORRUPT_HEADER_ERRORS):
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
        except DATA_ERRORS as exc:
            self.error = data_error_reason(exc, self._codec or "tar")
            return b""
        self.delivered_bytes += len(data)
        if self._budget_bytes is not None and self.delivered_bytes - self.excused_bytes > self._budget_bytes:
            raise ArchiveOverBudget(
                f"archive decompresses to more than {self._limits.max_ratio:g}:1 of its size (bomb?)"
            )
        return data

    def excuse(self, size_bytes: int) -> None:
        """Do not count the data of a skipped member against the ratio budget."""
        self.excused_bytes += size_bytes
        if self._budget_bytes is not None and self.excused_bytes > self._limits.max_total_bytes:
            raise ArchiveOverBudget(
                f"more than {format_bytes(self._limits.max_total_bytes)} of skipped member data to decompress past"
            )


def read_tar(raw: BinaryIO, codec: str | None, file_bytes: int, limits: Limits) -> tuple[list[Member], str | None]:
    """Stream the tar; stop cleanly at truncation, corruption, a cap or a bomb."""
    header_errors: list[tarfile.HeaderError] = []
    if codec is None:
        stream = _ArchiveStream(raw, None, None, limits)
        compressed_bytes = None
    else:
        budget_bytes = max(limits.max_ratio * file_bytes, ARCHIVE_RATIO_FLOOR_BYTES)
        stream = _ArchiveStream(open_decompressed(codec, raw), codec, budget_bytes, limits)
        compressed_bytes = file_bytes
    inventory = Inventory(limits)
    try:
        archive = tarfile.open(
            fileobj=stream,
            mode="r|",
            bufsize=TAR_STREAM_READ_BYTES,
            tarinfo=checked_tarinfo_class(header_errors),
            encoding="utf-8",
            errors="surrogateescape",
        )
        partial = collect(_tar_entries(archive, stream, compressed_bytes, limits), inventory, None)
        problem = _tar_end_problem(header_errors, archive) if partial is None else None
        if problem is None and partial is None and codec is not None:
            problem = _stream_end_problem(stream)
        if problem is not None:
            partial = _archive_partial(ArchiveStop(problem), stream.error, len(inventory.members))
    except BrokenInsideMember as broken:
        partial = _archive_partial(broken.cause, stream.error, len(inventory.members))
        inventory.add(broken.member)
    except (ArchiveStop, tarfile.TarError, *CORRUPT_HEADER_ERRORS) as exc:
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
) -> Iterator[Entry]:
    """Entries in archive order; the data of entries not opened is excused from the ratio budget."""
    while (info := archive.next()) is not None:
        archive.members.clear()  # a stream's TarFile keeps every header read; nothing here needs them
        stored_bytes = max(archive.offset - info.offset_data, 0)  # not info.size: a sparse member's is expanded
        entry = _tar_entry(archive, info, compressed_bytes, limits)
        yield entry
        oversized_header = getattr(info, "oversized_header", False)
        if not entry.opened and not oversized_header and (info.isreg() or info.type not in tarfile.SUPPORTED_TYPES):
            stream.excuse(stored_bytes)


def _tar_entry(archive: tarfile.TarFile, info: tarfile.TarInfo, compressed_bytes: int | None, limits: Limits) -> Entry:
    entry = Entry(info.name, size=info.size, stored_size=info.size)
    if getattr(info, "corrupt_header", None) is not None:
        entry.skip, entry.lost = info.corrupt_header, True
    elif getattr(info, "oversized_header", False):
        entry.skip = (
            f"tar extended header of {format_bytes(info.size)} skipped (cap {format_bytes(TAR_METADATA_CAP_BYTES)}); "
            "the next member keeps its short name"
        )
        entry.lost = True
    elif info.isdir():
        entry.is_dir = True
    elif not info.isreg():
        entry.skip = _tar_type_reason(info)
    elif (
        compressed_bytes is not None
        and info.size > ARCHIVE_RATIO_FLOOR_BYTES
        and info.size > limits.max_ratio * compressed_bytes
    ):
        entry.skip, entry.lost = f"decompression ratio above {limits.max_ratio:g}:1 (bomb?)", True
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


def _tar_end_problem(header_errors: list[tarfile.HeaderError], archive: tarfile.TarFile) -> str | None:
    """Why the header scan ended, unless it was the end-of-archive marker: two zero blocks, of
    which tarfile reads the first (every tar writer pads further, to 10 KiB)."""
    if not header_errors:
        return None
    last = header_errors[-1]
    if isinstance(last, tarfile.EOFHeaderError):
        if len(archive.fileobj.read(tarfile.BLOCKSIZE)) < tarfile.BLOCKSIZE:
            return "end-of-archive marker cut short"
        return None
    if isinstance(last, tarfile.EmptyHeaderError):
        return "no end-of-archive marker (archive cut short?)"
    if isinstance(last, tarfile.TruncatedHeaderError):
        return "truncated header"
    return f"invalid header: {last}"
