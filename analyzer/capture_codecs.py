"""Compression formats of captures and their members, found by magic bytes: gzip, bzip2, xz, and
zstd when the optional ``zstandard`` package is importable. Part of ``dbdiag.capture``.

>>> codec_of(b"\\x1f\\x8b\\x08\\x00"), codec_of(b"BZh9"), codec_of(b"plain text")
('gzip', 'bzip2', None)
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import zipfile
import zlib
from typing import BinaryIO

from dbdiag.zstd_frames import CheckedSource

try:  # optional: .zst members and .tar.zst captures are read only when it is installed
    import zstandard
except ImportError:
    zstandard = None

# Errors a decompressing reader (or a zip entry reader) raises on bad data. gzip.BadGzipFile and
# bz2's "Invalid data stream" are OSError; EOFError means the stream ends early.
DATA_ERRORS: tuple[type[BaseException], ...] = (
    EOFError,
    OSError,
    zlib.error,
    lzma.LZMAError,
    zipfile.BadZipFile,
)
if zstandard is not None:
    DATA_ERRORS += (zstandard.ZstdError,)


def codec_of(head: bytes) -> str | None:
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


def zstd_available() -> bool:
    return zstandard is not None


def new_decompressor(codec: str):
    """A one-shot decompressor object with ``decompress(data, max_length)`` and ``eof`` (not zstd)."""
    if codec == "gzip":
        return zlib.decompressobj(wbits=31)
    if codec == "bzip2":
        return bz2.BZ2Decompressor()
    return lzma.LZMADecompressor()


def zstd_reader(raw: BinaryIO) -> BinaryIO:
    """A reader of the zstd stream in ``raw`` across frames (needs ``zstandard``)."""
    return zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True, closefd=False)


def open_decompressed(codec: str, source: BinaryIO) -> BinaryIO:
    """A file-like reader of the decompressed stream whose ``read(n)`` returns at most n bytes.
    Multi-stream files (concatenated gzip members, pbzip2 output) are read to the end."""
    if codec == "gzip":
        return gzip.GzipFile(fileobj=source, mode="rb")
    if codec == "bzip2":
        return bz2.BZ2File(source, mode="rb")
    if codec == "xz":
        return lzma.LZMAFile(source, mode="rb")
    return zstd_reader(CheckedSource(source))  # CheckedSource: zstandard's reader ends a cut stream silently


def data_error_reason(exc: BaseException, codec: str | None) -> str:
    """Skip reason for a read that failed on bad data (or on the device: EIO is an OSError)."""
    if isinstance(exc, EOFError):
        return f"truncated {codec} data (stream ends early)" if codec else "truncated data (stream ends early)"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, zipfile.BadZipFile):
        return f"corrupt zip entry: {detail}"
    if codec is not None:
        return f"corrupt {codec} data: {detail}"
    if isinstance(exc, OSError):
        return f"unreadable: {detail}"
    return f"corrupt data: {detail}"
