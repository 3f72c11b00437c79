"""``/proc/pressure/{cpu,memory,io}`` (pressure stall information, kernel 4.20+), one or many snapshots.

Raw input (``cat /proc/pressure/memory`` after a ``TS <epoch> <date>`` line; ``grep . /proc/pressure/*``
prefixes each line with its file)::

    TS 1796596876.618277939 2026-12-06 22:41:16
    some avg10=2.25 avg60=1.77 avg300=0.48 total=1695986
    full avg10=1.85 avg60=1.59 avg300=0.43 total=1557601

Output table ``pressure`` (one row per snapshot, resource and kind; see ``dbdiag.tables``): snapshot, ts,
resource (``cpu``/``memory``/``io`` from the ``/proc/pressure/<resource>:`` prefix, else from the member's
name, else null), kind (``some``/``full``), avg10_pct, avg60_pct, avg300_pct, total_us, source, line. A
snapshot starts at a time line or where a (resource, kind) already seen comes again. ``records`` is the
number of snapshots.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.timed_snapshots import SnapshotClock
from dbdiag.parsers.kit.times import check_tz, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PRESSURE, conform

_LINE_RE = lazy_compile(
    r"^(?:(?:/proc/pressure/)?(cpu|memory|io):)?(some|full) avg10=(\d+\.\d+) avg60=(\d+\.\d+) avg300=(\d+\.\d+) total=(\d+)\s*$"
)
RESOURCES = ("memory", "cpu", "io")
MAX_DIGITS = 18  # an Int64 holds every 18-digit number


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    named = next((r for r in RESOURCES if r in ctx.source.rsplit("/", 1)[-1].lower()), None)
    rows: list[dict[str, object]] = []
    clock = SnapshotClock(tz)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        match = _LINE_RE.match(line.strip())
        if match is None:
            if not clock.time_line(line):
                warnings.append(ParseWarning(number, f"not a pressure line: {line.strip()[:60]!r}"))
            continue
        resource, kind = match.group(1) or named, match.group(2)
        if len(match.group(6)) > MAX_DIGITS:
            warnings.append(ParseWarning(number, f"total={match.group(6)[:24]} is past any counter: line skipped"))
            continue
        snapshot, when = clock.place((resource, kind))
        rows.append({"snapshot": snapshot, "ts": when, "resource": resource, "kind": kind, "avg10_pct": float(match.group(3)),
                     "avg60_pct": float(match.group(4)), "avg300_pct": float(match.group(5)), "total_us": int(match.group(6)),
                     "line": number})
    if not rows:
        raise ParseError("no pressure lines (some avg10=... avg60=... avg300=... total=...) found")
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.lit(ctx.source).alias("source"))
    notes = [zone_note(tz)] if clock.zoned else []
    if any(row["resource"] is None for row in rows):
        notes.append("the resource (cpu, memory, io) is neither on the lines nor in the file's name: not judged")
    return ParseResult(tables={PRESSURE: conform(PRESSURE, frame)}, records=clock.snapshot + 1, warnings=cap_warnings(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = [line.strip() for line in head.splitlines()[:20] if line.strip()]
    matched = sum(bool(_LINE_RE.match(line)) for line in lines)
    return 0.9 if matched >= 1 and matched >= len(lines) - 2 else 0.0


SPEC = ParserSpec(
    kind="proc-pressure",
    description="/proc/pressure/{cpu,memory,io}: pressure stall information (PSI), one or many snapshots",
    detect=detect,
    parse=parse,
)
