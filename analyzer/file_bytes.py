"""A big plain file of the capture, read in windows when a parser asks, never held whole in memory.

A directory's file or a file given as it is, uncompressed and at least ``Limits.stream_file_bytes``
long, becomes ``Member.data = FileBytes(...)`` instead of its bytes. It answers what parsers and
detection ask of bytes (``len``, slices, ``find``) with ``os.pread`` on a descriptor of its own, so a
parser that reads pieces (``ParserSpec.reads_file_bytes``: ``perf script``) holds one piece per
thread, not the file; the pipeline reads the whole file (``read_all``) for any other parser.

Why not ``mmap``: a file cut shorter while it is mapped (a log rotated with ``copytruncate``) kills
the process with SIGBUS on the next page read; ``pread`` returns fewer bytes. The length is the size
when the capture was read: bytes written after it are not read, and a file cut shorter reads as
what is left (its last piece ends early).

    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as f:
    ...     _ = f.write(b"a\\n\\nb\\n\\nc\\n"); f.flush()
    ...     data = FileBytes.open(f.name, 9)
    ...     len(data), data[0:4], data.find(b"\\n\\n", 2), data.newlines_before(6), data.read_all()
    (9, b'a\\n\\nb', 4, 4, b'a\\n\\nb\\n\\nc\\n')
"""

from __future__ import annotations

import io
import os
import weakref

# Bytes read per pread when searching or counting: large enough that a search costs few system calls,
# small beside a parser's pieces (16 MB).
WINDOW_BYTES = 4 * 1024 * 1024


class FileBytes:
    """The first ``size`` bytes of a file, read on demand (module docstring)."""

    def __init__(self, fd: int, size: int, name: str) -> None:
        self._fd = fd
        self._size = size
        self.name = name
        self._newlines = (0, 0)  # (offset, newlines before it): pieces ask in file order
        weakref.finalize(self, os.close, fd)

    @classmethod
    def open(cls, path: str, size: int) -> FileBytes:
        return cls(os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), size, path)

    @classmethod
    def of_descriptor(cls, fd: int, size: int, name: str) -> FileBytes:
        """Over a duplicate of ``fd`` (an open file of the capture), which the caller may close."""
        return cls(os.dup(fd), size, name)

    def __len__(self) -> int:
        return self._size

    def __bool__(self) -> bool:
        return self._size > 0

    def __getitem__(self, item: slice) -> bytes:
        if not isinstance(item, slice) or item.step not in (None, 1):
            raise TypeError("FileBytes reads contiguous slices only")
        start, stop, _ = item.indices(self._size)
        return self._read(start, stop)

    def _read(self, start: int, stop: int) -> bytes:
        if stop <= start:
            return b""
        parts = []
        while start < stop:  # pread may return less than asked (signals, big reads)
            chunk = os.pread(self._fd, stop - start, start)
            if not chunk:  # the file is shorter than it was: what is left
                break
            parts.append(chunk)
            start += len(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def find(self, sub: bytes, start: int = 0, end: int | None = None) -> int:
        """``bytes.find``: the first offset of ``sub`` in [start, end), or -1; read a window at a time."""
        end = self._size if end is None else min(end, self._size)
        overlap = max(len(sub) - 1, 0)
        window_bytes = max(WINDOW_BYTES, 2 * len(sub))  # each window moves on by at least len(sub) + 1
        at = max(start, 0)
        while at < end:
            stop = min(at + window_bytes, end)
            window = self._read(at, stop)
            found = window.find(sub)
            if found >= 0:
                return at + found
            if len(window) < stop - at or stop >= end:
                return -1
            at = stop - overlap
        return -1

    def newlines_before(self, offset: int) -> int:
        """How many line breaks precede ``offset`` (continuing from the last offset asked, when before it)."""
        known_offset, known = self._newlines
        if offset < known_offset:
            known_offset, known = 0, 0
        at = known_offset
        while at < offset:
            stop = min(at + WINDOW_BYTES, offset)
            window = self._read(at, stop)
            known += window.count(b"\n")
            if len(window) < stop - at:
                break
            at = stop
        self._newlines = (offset, known)
        return known

    def __bytes__(self) -> bytes:
        """``bytes(data)`` is the whole file, as for a member read up front (``bytes(b)`` of a ``bytes`` is ``b``)."""
        return self.read_all()

    def read_all(self) -> bytes:
        """The whole file as bytes (for a parser that reads a member whole)."""
        # A buffered read fills one bytes object of the size asked, whatever one read call returns (Linux
        # stops each at 2 GiB): no second copy, as joining preads would make.
        with io.open(os.dup(self._fd), "rb", closefd=True) as file:
            file.seek(0)
            return file.read(self._size)
