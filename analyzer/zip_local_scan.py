"""Entries of a zip found by walking its local file headers, front to back: the way to read a zip
whose central directory is gone (a cut download), damaged, or unreadable by ``zipfile`` (a name
flagged UTF-8 that is not). The data is then read by ``zipfile.ZipExtFile`` as usual (CRC checked).

A local header (APPNOTE 4.3.7)::

    50 4b 03 04  version(2) flags(2) method(2) time(2) date(2) crc(4) csize(4) usize(4)
    name_len(2) extra_len(2) name extra  data  [data descriptor: (50 4b 07 08) crc csize usize]

When flag bit 3 is set the sizes come after the data: a deflated entry's end is found by inflating
it (output thrown away, bounded); a stored one cannot be delimited and ends the scan.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterator

LOCAL_MAGIC = b"PK\x03\x04"
CENTRAL_MAGICS = (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06")
DESCRIPTOR_MAGIC = b"PK\x07\x08"
LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")
FLAG_DATA_DESCRIPTOR = 0x08
ZIP64_EXTRA_ID = 0x0001
ZIP64_MARK = 0xFFFFFFFF
INFLATE_CHUNK_BYTES = 64 * 1024


@dataclass(frozen=True)
class LocalEntry:
    name: bytes
    info: zipfile.ZipInfo  # sizes, method, CRC, flags: what ZipExtFile needs
    data_offset: int


class ScanStop(Exception):
    """Why the walk ended before a central directory (the entries before it are kept)."""


def scan(raw: BinaryIO, max_inflate_bytes: int) -> Iterator[LocalEntry]:
    """Yield entries in file order; raise ``ScanStop`` when the bytes stop making sense."""
    offset = 0
    while True:
        raw.seek(offset)
        head = raw.read(LOCAL_HEADER.size)
        if head[:4] in CENTRAL_MAGICS or not head:
            return
        if len(head) < LOCAL_HEADER.size or head[:4] != LOCAL_MAGIC:
            raise ScanStop(f"no local header at byte {offset}")
        _, _, flags, method, time, date, crc, csize, usize, name_len, extra_len = LOCAL_HEADER.unpack(head)
        name = raw.read(name_len)
        extra = raw.read(extra_len)
        if len(name) < name_len or len(extra) < extra_len:
            raise ScanStop(f"local header at byte {offset} cut short")
        csize, usize = _zip64_sizes(extra, csize, usize)
        data_offset = offset + LOCAL_HEADER.size + name_len + extra_len
        if flags & FLAG_DATA_DESCRIPTOR:
            csize, crc, usize, after = _sizes_after_data(raw, data_offset, method, max_inflate_bytes)
        else:
            after = data_offset + csize
        info = zipfile.ZipInfo(name.decode("utf-8", "surrogateescape"))
        info.flag_bits, info.compress_type, info.CRC = flags, method, crc
        info.compress_size, info.file_size = csize, usize
        info.date_time = _date_time(date, time)
        yield LocalEntry(name, info, data_offset)
        offset = after


def open_entry(raw: BinaryIO, entry: LocalEntry) -> BinaryIO:
    """A reader of the entry's data (decompressed, CRC checked at the end)."""
    raw.seek(entry.data_offset)
    return zipfile.ZipExtFile(raw, "r", entry.info, None, False)


def _zip64_sizes(extra: bytes, csize: int, usize: int) -> tuple[int, int]:
    position = 0
    while position + 4 <= len(extra):
        kind, size = struct.unpack_from("<HH", extra, position)
        body = extra[position + 4 : position + 4 + size]
        if kind == ZIP64_EXTRA_ID:
            values = [struct.unpack_from("<Q", body, i)[0] for i in range(0, len(body) - 7, 8)]
            if usize == ZIP64_MARK and values:
                usize = values.pop(0)
            if csize == ZIP64_MARK and values:
                csize = values.pop(0)
        position += 4 + size
    return csize, usize


def _sizes_after_data(raw: BinaryIO, data_offset: int, method: int, max_inflate_bytes: int) -> tuple[int, int, int, int]:
    """(compressed size, CRC, size, offset after the descriptor) of an entry with a data descriptor."""
    if method != zipfile.ZIP_DEFLATED:
        raise ScanStop(f"entry at byte {data_offset} has its sizes after stored data: its end cannot be found")
    inflater = zlib.decompressobj(-15)
    raw.seek(data_offset)
    consumed = inflated = 0
    while not inflater.eof:
        chunk = raw.read(INFLATE_CHUNK_BYTES)
        if not chunk:
            raise ScanStop(f"deflated entry at byte {data_offset} cut short")
        try:
            inflated += len(inflater.decompress(chunk, max_inflate_bytes))
        except zlib.error as error:
            raise ScanStop(f"corrupt deflate data at byte {data_offset}: {error}") from None
        if inflated > max_inflate_bytes or inflater.unconsumed_tail:
            raise ScanStop(f"deflated entry at byte {data_offset} larger than the member cap")
        consumed += len(chunk) - len(inflater.unused_data)
    after = data_offset + consumed
    raw.seek(after)
    descriptor = raw.read(24)
    body = descriptor[4:] if descriptor[:4] == DESCRIPTOR_MAGIC else descriptor
    skip = 4 if descriptor[:4] == DESCRIPTOR_MAGIC else 0
    if len(body) < 12:
        raise ScanStop(f"data descriptor at byte {after} cut short")
    crc, csize, usize = struct.unpack_from("<III", body)
    return consumed, crc, usize, after + skip + 12


def _date_time(date: int, time: int) -> tuple[int, int, int, int, int, int]:
    return (
        1980 + (date >> 9),
        max(1, (date >> 5) & 0xF),
        max(1, date & 0x1F),
        min(time >> 11, 23),
        min((time >> 5) & 0x3F, 59),
        min((time & 0x1F) * 2, 59),
    )
