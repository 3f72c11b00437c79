"""Does a zstd stream end where a frame ends? python-zstandard's stream reader returns what it
decoded of a cut stream and then a clean end, with no error; a cut ``.tar.zst`` or ``.log.zst``
would pass for whole. ``FrameTracker`` follows the frame structure of the compressed bytes as they
are read (headers and block sizes only, never the data) so that the end can be checked.

Frame layout (RFC 8878): magic ``28 b5 2f fd``, a descriptor byte, optional window / dictionary /
content-size fields, blocks of a 3-byte header (last flag, type, size) each, an optional 4-byte
checksum; skippable frames (magic ``5? 2a 4d 18``) carry their length after the magic.

    >>> import zstandard
    >>> whole = zstandard.compress(b"x" * 1000)
    >>> tracker = FrameTracker(); tracker.feed(whole); tracker.complete()
    True
    >>> tracker = FrameTracker(); tracker.feed(whole[:-3]); tracker.complete()
    False
"""

from __future__ import annotations

from typing import BinaryIO

ZSTD_MAGIC = 0xFD2FB528
SKIPPABLE_MAGIC_MASK = 0xFFFFFFF0
SKIPPABLE_MAGIC = 0x184D2A50
BLOCK_TYPE_RLE = 1
BLOCK_TYPE_RESERVED = 3
_DICT_ID_BYTES = (0, 1, 2, 4)
_CONTENT_SIZE_BYTES = (0, 2, 4, 8)  # index 0 means 1 byte when the frame is a single segment


class FrameTracker:
    """A small state machine over the compressed bytes: where in which frame the stream is."""

    def __init__(self) -> None:
        self._state = "magic"
        self._needed = 4  # bytes the current state's header needs
        self._header = b""
        self._skip_bytes = 0
        self._checksum = False
        self._frames = 0
        self.error: str | None = None

    def feed(self, data: bytes) -> None:
        position = 0
        while position < len(data) and self.error is None:
            if self._skip_bytes:
                step = min(self._skip_bytes, len(data) - position)
                self._skip_bytes -= step
                position += step
                continue
            take = data[position : position + self._needed - len(self._header)]
            self._header += take
            position += len(take)
            if len(self._header) == self._needed:
                header, self._header = self._header, b""
                self._advance(header)

    def complete(self) -> bool:
        """True when at least one frame was read and the stream stops between frames."""
        return self.error is None and self._frames > 0 and self._state == "magic" and not self._header and not self._skip_bytes

    def _expect(self, state: str, needed: int, skip_bytes: int = 0) -> None:
        self._state, self._needed, self._skip_bytes = state, needed, skip_bytes

    def _advance(self, header: bytes) -> None:
        value = int.from_bytes(header, "little")
        if self._state == "magic":
            if value == ZSTD_MAGIC:
                self._expect("descriptor", 1)
            elif value & SKIPPABLE_MAGIC_MASK == SKIPPABLE_MAGIC:
                self._expect("skippable size", 4)
            else:
                self.error = f"not a zstd frame (magic {value:#010x})"
        elif self._state == "skippable size":
            self._frames += 1
            self._expect("magic", 4, skip_bytes=value)
        elif self._state == "descriptor":
            single_segment = bool(value & 0x20)
            self._checksum = bool(value & 0x04)
            content_size = _CONTENT_SIZE_BYTES[value >> 6] or (1 if single_segment else 0)
            rest = (0 if single_segment else 1) + _DICT_ID_BYTES[value & 0x03] + content_size
            self._expect("block", 3, skip_bytes=rest)
        elif self._state == "block":
            last, block_type, size = value & 1, (value >> 1) & 3, value >> 3
            if block_type == BLOCK_TYPE_RESERVED:
                self.error = "reserved zstd block type"
                return
            data_bytes = 1 if block_type == BLOCK_TYPE_RLE else size
            if not last:
                self._expect("block", 3, skip_bytes=data_bytes)
                return
            self._frames += 1
            self._expect("magic", 4, skip_bytes=data_bytes + (4 if self._checksum else 0))


class CheckedSource:
    """A compressed source whose bytes go through a ``FrameTracker``; at its end, a stream cut inside
    a frame raises ``EOFError`` (what gzip, bz2 and lzma raise for a cut stream)."""

    def __init__(self, source: BinaryIO) -> None:
        self._source = source
        self._tracker = FrameTracker()

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        if data:
            self._tracker.feed(data)
        elif not self._tracker.complete():
            raise EOFError(self._tracker.error or "zstd stream ends inside a frame")
        return data

    def close(self) -> None:
        self._source.close()
