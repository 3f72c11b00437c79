"""``/proc/diskstats``: every block device's cumulative I/O counters, one or many snapshots (``cat`` before
and after a run, or pt-stalk's ``<prefix>-diskstats``: a ``TS <epoch> <date>`` line before each of a loop's reads).

Raw input (kernel 5.5+; 4.18-5.4 print 4 fields fewer, older kernels 11 after the name)::

    TS 1796595848.300819136 2026-12-06 22:24:08
       7       0 loop0 1716 0 56218 242 155301 88771 2513848 6589051 0 137480 6602006 14 0 14680120 0 87423 12711
     254       0 vda 81361 11021 5835942 50807 514212 71958 21446926 135662 0 42952 196972 18312 23 5253800 1926 165735 8576

Output table ``disk_count`` (one row per snapshot and device; see ``dbdiag.tables``): snapshot, ts (the
time line above it, zone-less ones read in ``ctx.tz``), device, reads, read_sectors, read_ms, writes,
write_sectors, write_ms, in_flight, io_ms, weighted_io_ms, discards, discard_ms, flushes, flush_ms (null
where the kernel does not print them), source, line. A snapshot starts at a time line, or where a device
already seen comes again. Partitions (``sda1``, ``nvme0n1p2``) are kept: derive compares like with like.
``records`` is the number of snapshots.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.timed_snapshots import SnapshotClock
from dbdiag.parsers.kit.times import check_tz, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import DISK_COUNT, conform

MAX_DIGITS = 18  # an Int64 holds every 18-digit number; the kernel's counters are 64-bit unsigned
_ROW_RE = lazy_compile(r"^\s*(\d+)\s+(\d+)\s+([A-Za-z]\S*)((?:\s+\d+){11,20})\s*$")
# the values after the name, in the kernel's order: columns kept (None: read but not kept)
FIELDS = ("reads", None, "read_sectors", "read_ms", "writes", None, "write_sectors", "write_ms", "in_flight", "io_ms",
          "weighted_io_ms", "discards", None, None, "discard_ms", "flushes", "flush_ms")


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    rows: list[dict[str, object]] = []
    clock = SnapshotClock(tz)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _ROW_RE.match(line)
        if match is None:
            if not clock.time_line(line):
                warnings.append(ParseWarning(number, f"not a /proc/diskstats line: {line.strip()[:60]!r}"))
            continue
        snapshot, when = clock.place(match.group(3))
        row: dict[str, object] = {"snapshot": snapshot, "ts": when, "device": match.group(3), "line": number}
        for name, value in zip(FIELDS, match.group(4).split()):
            if name is None:
                continue
            if len(value) > MAX_DIGITS:
                warnings.append(ParseWarning(number, f"{match.group(3)} {name}: {value[:24]} is past any counter: left empty"))
                continue
            row[name] = int(value)
        rows.append(row)
    if not rows:
        raise ParseError("no /proc/diskstats lines (major minor device and 11 to 20 counters) found")
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.lit(ctx.source).alias("source"))
    notes = [zone_note(tz)] if clock.zoned else []
    return ParseResult(tables={DISK_COUNT: conform(DISK_COUNT, frame)}, records=clock.snapshot + 1, warnings=cap_warnings(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = [line for line in head.splitlines()[:40] if line.strip()]
    rows = sum(bool(_ROW_RE.match(line)) for line in lines)
    if rows < 2:
        return 0.0
    return 0.9 if rows >= 0.8 * len(lines) else 0.5


SPEC = ParserSpec(
    kind="proc-diskstats",
    description="/proc/diskstats: per-device cumulative I/O counters (one or many snapshots, pt-stalk's -diskstats)",
    detect=detect,
    parse=parse,
)
