"""The contract every parser follows.

A parser is a pure function from one capture member's text to named polars tables plus
warnings. It never opens files, reads the clock or the environment: the pipeline hands it
the decoded text and the member's path (used only for `source` columns and warnings).

Each parser module exposes one ``SPEC = ParserSpec(...)``:

- ``kind``: stable kebab-case name shown in the inventory (``mpstat-text``, ``proc-softirqs``).
- ``detect(head, name) -> float``: confidence 0..1 that this member is of this kind, from the
  first bytes (``head`` is at most ``DETECT_HEAD_BYTES``, decoded). ``name`` is the member's
  base name, a hint only: content must be enough on its own (> 0.5) for the usual layouts.
- ``parse(text, ctx) -> ParseResult`` with ``ctx`` a ``ParseContext`` (member path for
  ``source`` columns, the time zone to apply to zone-less times).

Table names and their columns are listed in ``analyzer/tables/parsed.py``; parsers only produce
tables declared there, so that derive/rules code can rely on names and dtypes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

import polars as pl

DETECT_HEAD_BYTES = 8192


@dataclass(frozen=True)
class ParseWarning:
    """Something a parser skipped or could not interpret: where, and why."""

    line: int | None
    reason: str

    def as_text(self) -> str:
        return f"line {self.line}: {self.reason}" if self.line is not None else self.reason


@dataclass
class ParseResult:
    """What one parser produced from one member.

    ``tables`` maps a table name from ``analyzer/tables/parsed.py`` to its rows from this member.
    ``records`` is the count a person would expect (intervals, snapshots, statements...).
    ``notes`` are facts worth showing in the inventory that are not problems
    (e.g. "times have no zone; read as UTC").
    """

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    records: int = 0
    warnings: list[ParseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    time_range: tuple[object, object] | None = None


@dataclass(frozen=True)
class ParseContext:
    """What a parser may know besides the text: where it came from, the zone for naive times, and
    ``ref_time``, a time at or after the capture was taken (the manifest's ``taken_at``) for stamps
    without a year (syslog ``May 14 10:00:01``); None when the capture does not say."""

    source: str
    tz: str = "UTC"
    ref_time: datetime | None = None
    # told how many bytes of the member are done, piece after piece, by the parsers that read big logs
    # in pieces (for the progress line; called from their worker threads); None: nobody listens
    on_bytes: Callable[[int], None] | None = field(default=None, compare=False, repr=False)

    def report_bytes(self, done_bytes: int) -> None:
        if self.on_bytes is not None:
            self.on_bytes(done_bytes)


def decode_text(data: bytes) -> str:
    """A member's bytes as the text ``parse`` receives: UTF-8 that cannot fail, CRLF read as LF
    (a lone CR stays: it may sit inside SQL literals). For ``parse_batch``, which receives bytes."""
    text = data.decode("utf-8", "backslashreplace")
    # looking for one character is a memchr; looking for two is ten times slower on a big log
    return text.replace("\r\n", "\n") if "\r" in text else text


class ParseError(ValueError):
    """The member looked like this kind but cannot be read at all; message names the reason."""


@dataclass(frozen=True)
class ParserSpec:
    kind: str
    description: str
    detect: Callable[[str, str], float]
    parse: Callable[[str, ParseContext], ParseResult]
    # Optional: the same parse from the member's raw bytes, for inputs big enough that a decoded
    # copy costs (slow logs); it must read the bytes exactly as ``pipeline.decode`` would.
    parse_bytes: Callable[[bytes, ParseContext], ParseResult] | None = None
    # Optional: ``parse_bytes`` of the bytes in a one-item list, which it empties: a parser that reads a
    # big log in pieces lets the bytes go once the pieces are read, before it puts the tables together
    # (the pipeline holds them nowhere else: a 200 MB log's bytes are not in memory beside its tables).
    parse_bytes_owned: Callable[[list[bytes], ParseContext], ParseResult] | None = None
    # Optional: ``parse_bytes`` of many small members of this kind at once, each member's result (or
    # the ParseError it would raise) in order, as if each was parsed alone: the pipeline hands small
    # members to it together, so that thousands of them cost one parse's fixed cost, not one each.
    # The contexts share one zone and reference time.
    parse_batch: Callable[[list[tuple[bytes, ParseContext]]], list[ParseResult | ParseError]] | None = None
    # Whether ``parse_bytes`` also takes a ``dbdiag.file_bytes.FileBytes`` (a big plain file read on demand:
    # len, slices, find) and reads it in pieces; for other parsers the pipeline reads such a file whole first.
    reads_file_bytes: bool = False
