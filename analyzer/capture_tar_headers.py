"""A ``tarfile.TarInfo`` that survives hostile headers. Part of ``dbdiag.capture``.

tarfile trusts its headers: it reads pax and GNU long-name headers whole, follows a chain of them
by recursion (one frame per header), and parses sparse maps and pax numbers with ``int()`` and
indexing that raise ValueError / IndexError on garbage, or grow a list as long as the archive.
The class below bounds all of these. A header that cannot be trusted costs its own member only:
the member is marked (``corrupt_header``, the skip reason) and the stream stays in step, since
tarfile places the next header by the member's ustar size, which was read before the damage::

    corrupt tar header: GNU.sparse.map is not a list of numbers (not read)

Only a header cut by the end of the data stops the archive (``ArchiveStop``).
"""

from __future__ import annotations

import tarfile

from dbdiag.capture_members import ArchiveStop, KiB
from dbdiag.patterns import lazy_compile

# pax / GNU long-name headers are read whole by tarfile; real ones are a few hundred bytes (a path
# is at most 4 KiB, xattrs and ACLs a few KiB more). A larger one is skipped over, never parsed.
TAR_METADATA_CAP_BYTES = 64 * KiB
# tarfile reads a chain of metadata headers by recursion: one per header. Past this depth the rest
# of the chain is read in a loop and dropped.
TAR_METADATA_CHAIN_CAP = 32
# Regions of one sparse member (each a list entry while its map is held).
SPARSE_REGIONS_CAP = 65_536
_TAR_METADATA_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)
# pax records tarfile converts with int() unchecked (the other number fields fall back to 0).
_PAX_SIZE_KEYS = ("size", "GNU.sparse.size", "GNU.sparse.realsize")
_DECIMAL = lazy_compile(r"[0-9]{1,19}")
_DECIMAL_BYTES = lazy_compile(rb"[0-9]{1,19}")
# A pax record: "<length> <keyword>=<value>\n"; the shortest is "5 x=\n".
_PAX_LENGTH_PREFIX = lazy_compile(rb"([0-9]{1,20}) ")
_PAX_RECORD_MIN_BYTES = 5
_OLD_GNU_REGIONS_PER_BLOCK = 21
_OLD_GNU_ISEXTENDED_AT = 504


def mark_corrupt(info: tarfile.TarInfo, problem: str) -> None:
    """Record the first reason this member's header cannot be trusted."""
    if getattr(info, "corrupt_header", None) is None:
        info.corrupt_header = f"corrupt tar header: {problem} (not read)"


def checked_tarinfo_class(header_errors: list[tarfile.HeaderError]) -> type[tarfile.TarInfo]:
    """A TarInfo that records why the header scan stopped (tarfile ends silently on a bad or
    missing header), refuses metadata headers that tarfile would read whole into memory, and
    marks members whose headers are corrupt instead of raising."""

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
                    return cls._past_metadata_chain(tarfile_)
                return super().fromtarfile(tarfile_)
            except tarfile.HeaderError as exc:
                header_errors.append(exc)
                raise
            finally:
                chain_depth[0] -= 1

        @classmethod
        def _past_metadata_chain(cls, tarfile_):
            """Drop the rest of a metadata chain, one header at a time (no recursion), and
            return the member it ends with, marked: its name and attributes are unknown."""
            while True:
                info = cls.frombuf(tarfile_.fileobj.read(tarfile.BLOCKSIZE), tarfile_.encoding, tarfile_.errors)
                info.offset = tarfile_.fileobj.tell() - tarfile.BLOCKSIZE
                if info.type not in _TAR_METADATA_TYPES:
                    break
                tarfile_.fileobj.read(info._block(info.size))  # at most the cap: frombuf retyped larger ones
            info = info._proc_member(tarfile_)
            mark_corrupt(info, f"more than {TAR_METADATA_CHAIN_CAP} extended headers in a row")
            return info

        def _proc_pax(self, tarfile_):
            """Check the records before tarfile parses them. tarfile's lax parser (3.11 before
            3.11.10) drops a malformed record and every one after it; its strict parser (3.11.10,
            and Debian's 3.11.2 with the fix) raises, which ends the archive. Here a malformed
            header costs the member it describes on both, and the archive goes on."""
            stream = tarfile_.fileobj
            records = stream.read(self._block(self.size))
            problem = pax_records_problem(records)
            if problem is None:
                tarfile_.fileobj = _Replay(records, stream)  # tarfile reads the records itself
                try:
                    return super()._proc_pax(tarfile_)
                finally:
                    tarfile_.fileobj = stream
            try:
                described = self.fromtarfile(tarfile_)
            except tarfile.HeaderError as exc:  # as tarfile says a header after a pax header is bad
                raise tarfile.SubsequentHeaderError(str(exc)) from None
            mark_corrupt(described, problem)
            return described

        def _apply_pax_info(self, pax_headers, encoding, errors):
            for key in _PAX_SIZE_KEYS:
                value = pax_headers.get(key)
                if value is not None and not _DECIMAL.fullmatch(value):
                    mark_corrupt(self, f"{key} {value[:40]!r} is not a number")
                    # gone from the dict, tarfile places the next header by the ustar size
                    del pax_headers[key]
            super()._apply_pax_info(pax_headers, encoding, errors)

        def _proc_sparse(self, tarfile_):
            """Old GNU sparse member (type S): regions in the header, then in extension blocks
            while each says another follows. Read to the last one (so the stream stays in step),
            holding at most the cap."""
            regions, extended, real_size = self._sparse_structs
            del self._sparse_structs
            while extended:
                block = tarfile_.fileobj.read(tarfile.BLOCKSIZE)
                if len(block) < tarfile.BLOCKSIZE:
                    raise ArchiveStop("sparse map cut short")
                if len(regions) <= SPARSE_REGIONS_CAP:
                    regions += _old_gnu_regions(block)
                extended = bool(block[_OLD_GNU_ISEXTENDED_AT])
            if len(regions) > SPARSE_REGIONS_CAP:
                mark_corrupt(self, f"sparse map of more than {SPARSE_REGIONS_CAP} regions")
                regions = []
            self.sparse = regions
            self.offset_data = tarfile_.fileobj.tell()
            tarfile_.offset = self.offset_data + self._block(self.size)
            self.size = real_size
            return self

        def _proc_gnusparse_01(self, next, pax_headers):
            numbers = pax_headers["GNU.sparse.map"].split(",")
            if not all(_DECIMAL.fullmatch(number) for number in numbers):
                mark_corrupt(next, "GNU.sparse.map is not a list of numbers")
                next.sparse = []
            elif len(numbers) > 2 * SPARSE_REGIONS_CAP:
                mark_corrupt(next, f"GNU.sparse.map of more than {SPARSE_REGIONS_CAP} regions")
                next.sparse = []
            else:
                super()._proc_gnusparse_01(next, pax_headers)

        def _proc_gnusparse_10(self, next, pax_headers, tarfile_):
            problem, regions = _read_sparse_10_map(tarfile_.fileobj, next.size)
            next.sparse = regions
            if problem is not None:
                mark_corrupt(next, problem)
            else:
                next.offset_data = tarfile_.fileobj.tell()

    return _CheckedTarInfo


class _Replay:
    """The stream tarfile reads, with bytes already read from it put back in front."""

    def __init__(self, pending: bytes, stream) -> None:
        self._pending = pending
        self._stream = stream

    def read(self, size: int) -> bytes:
        head, self._pending = self._pending[:size], self._pending[size:]
        if len(head) < size:
            head += self._stream.read(size - len(head))
        return head

    def tell(self) -> int:
        return self._stream.tell() - len(self._pending)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)  # anything else tarfile may use is the stream's own


def pax_records_problem(records: bytes) -> str | None:
    """Why a pax header's records are malformed, by the rules of tarfile's strict parser, or None.

    Each record is ``<length> <keyword>=<value>\\n``, the length counting the whole record;
    a NUL ends them (the padding of the block)::

    >>> pax_records_problem(b"19 comment=aaaaaaa\\n" + bytes(13)) is None
    True
    >>> pax_records_problem(b"20 comment=aaaaaaa\\n" + bytes(13))
    'pax record at byte 0 does not end where its length says'
    """
    position = 0
    while position < len(records) and records[position] != 0:
        match = _PAX_LENGTH_PREFIX.match(records, position)
        if match is None:
            return f"pax record at byte {position} does not start with its length"
        length = int(match.group(1))
        if length < _PAX_RECORD_MIN_BYTES or position + length > len(records):
            return f"pax record at byte {position} states an impossible length ({length})"
        last = position + length - 1
        keyword, equals, _ = records[match.end() : last].partition(b"=")
        if not keyword or not equals or records[last] != 0x0A:
            return f"pax record at byte {position} does not end where its length says"
        position += length
    return None


def _old_gnu_regions(block: bytes) -> list[tuple[int, int]]:
    """The (offset, size) regions of an old GNU sparse extension block, as tarfile reads them."""
    regions = []
    for index in range(_OLD_GNU_REGIONS_PER_BLOCK):
        field = block[24 * index : 24 * index + 24]
        try:
            offset, size = tarfile.nti(field[:12]), tarfile.nti(field[12:])
        except tarfile.InvalidHeaderError:
            break
        if offset > 0 and size > 0:  # as tarfile's (which also drops offset 0), and never negative
            regions.append((offset, size))
    return regions


def _read_sparse_10_map(fileobj, stored_bytes: int) -> tuple[str | None, list[tuple[int, int]]]:
    """(problem or None, regions) of a GNU sparse 1.0 map, which opens the member's data::

        2\n0\n512\n4096\n512\n   (a count, then offset and size of each region; padded to a block)

    Read a block at a time, never past the member's stored data."""
    numbers: list[int] = []
    wanted: int | None = None
    pending = b""
    read_bytes = 0
    while wanted is None or len(numbers) < wanted:
        if b"\n" not in pending:
            if read_bytes >= stored_bytes:
                return "GNU sparse 1.0 map longer than its member", []
            block = fileobj.read(tarfile.BLOCKSIZE)
            if len(block) < tarfile.BLOCKSIZE:
                raise ArchiveStop("sparse map cut short")
            read_bytes += len(block)
            pending += block
            continue
        line, pending = pending.split(b"\n", 1)
        if not _DECIMAL_BYTES.fullmatch(line):
            return "GNU sparse 1.0 map is not numbers", []
        if wanted is None:
            if int(line) > SPARSE_REGIONS_CAP:
                return f"GNU sparse 1.0 map of more than {SPARSE_REGIONS_CAP} regions", []
            wanted = 2 * int(line)
        else:
            numbers.append(int(line))
    return None, list(zip(numbers[::2], numbers[1::2]))
