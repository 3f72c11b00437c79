"""zip captures, read through ``zipfile`` in central-directory order; when the central directory
is unusable (a cut download, a damaged entry, a name ``zipfile`` cannot decode), in file order
from the local headers (``zip_local_scan``). Part of ``dbdiag.capture``.
"""

from __future__ import annotations

import lzma
import stat
import struct
import zipfile
import zlib
from typing import BinaryIO, Callable, Iterator

from dbdiag import zip_local_scan
from dbdiag.capture_members import (
    RATIO_CHECK_FLOOR_BYTES,
    CaptureError,
    Entry,
    Inventory,
    Limits,
    Member,
    Rejected,
    collect,
    mode_reason,
)

_ZIP_FLAG_ENCRYPTED = 0x1
_ZIP_FLAG_UTF8 = 0x800
# What zipfile raises on a central directory or entry header it cannot make sense of: besides
# BadZipFile, an entry needing a newer version is NotImplementedError, short fields struct.error...
_ZIP_HEADER_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile,
    OSError,
    EOFError,
    ValueError,
    struct.error,
    zlib.error,
    lzma.LZMAError,
    IndexError,
    KeyError,
    OverflowError,
)


def read_zip(raw: BinaryIO, display: str, limits: Limits) -> tuple[list[Member], str | None]:
    """Read the zip's entries in central-directory order; without a usable central directory (cut,
    damaged, or a name zipfile cannot decode), in file order from the local headers."""
    try:
        archive = zipfile.ZipFile(raw)
    except (*_ZIP_HEADER_ERRORS, NotImplementedError) as exc:
        return _read_zip_by_local_headers(raw, display, limits, f"{type(exc).__name__}: {exc}")
    with archive:
        infos = archive.infolist()
        inventory = Inventory(limits)
        entries = (_zip_entry(archive, info, limits) for info in infos)
        partial = collect(entries, inventory, len(infos))
    return inventory.members, partial


def _read_zip_by_local_headers(raw: BinaryIO, display: str, limits: Limits, why: str) -> tuple[list[Member], str | None]:
    inventory = Inventory(limits)
    stop: str | None = None

    def entries() -> Iterator[Entry]:
        nonlocal stop
        try:
            for local in zip_local_scan.scan(raw, limits.max_member_bytes):
                entry = _zip_entry_fields(local.info, limits, lambda local=local: _open_local_entry(raw, local))
                entry.name = local.name.decode("utf-8", "surrogateescape")
                yield entry
        except zip_local_scan.ScanStop as exc:
            stop = str(exc)

    partial = collect(entries(), inventory, None)
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
        raise Rejected(f"unsupported zip compression method {local.info.compress_type}", lost=False) from None
    except _ZIP_HEADER_ERRORS as exc:
        raise Rejected(f"corrupt zip entry: {exc}") from None


def _zip_entry(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: Limits) -> Entry:
    entry = _zip_entry_fields(info, limits, lambda: _open_zip_member(archive, info))
    entry.name = _zip_raw_name(info)
    return entry


def _zip_entry_fields(info: zipfile.ZipInfo, limits: Limits, opener: Callable[[], BinaryIO]) -> Entry:
    """The checks common to central-directory and local-header entries (the caller sets the name)."""
    entry = Entry(
        info.filename,
        size=info.file_size,
        stored_size=info.compress_size,
        stored_compressed=info.compress_type != zipfile.ZIP_STORED,
    )
    mode = info.external_attr >> 16
    if info.filename.endswith("/") or stat.S_ISDIR(mode):  # ZipInfo.is_dir() fails on an empty name
        entry.is_dir = True
    elif stat.S_IFMT(mode) not in (0, stat.S_IFREG):
        entry.skip = mode_reason(mode)
    elif info.flag_bits & _ZIP_FLAG_ENCRYPTED:
        entry.skip = "encrypted zip entry (not read)"
    elif (
        entry.stored_compressed
        and info.file_size > RATIO_CHECK_FLOOR_BYTES
        and info.file_size > limits.max_ratio * info.compress_size
    ):
        entry.skip, entry.lost = f"decompression ratio above {limits.max_ratio:g}:1 (bomb?)", True
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
        raise Rejected(f"unsupported zip compression method {info.compress_type}", lost=False) from None
    except _ZIP_HEADER_ERRORS as exc:
        raise Rejected(f"corrupt zip entry: {exc}") from None
