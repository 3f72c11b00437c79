"""``vmstat`` (procps 3.3-4.x: ``vmstat 1``, ``-w`` wide, ``-t`` with a timestamp column; pt-stalk's ``-vmstat``).

Raw input (``vmstat -w -t 1``; without ``-w`` the columns are narrower, without ``-t`` the timestamp is absent)::

    --procs-- -----------------------memory---------------------- ---swap-- -----io---- -system-- ----------cpu---------- -----timestamp-----
       r    b         swpd         free         buff        cache   si   so    bi    bo   in   cs  us  sy  id  wa  st  gu                 UTC
       5    0            0     20850280        16680      2473136    0    0   554  2364  958 12010  27  12  57   3   0   0 2026-12-06 22:39:40

Output table ``vmstat_sample`` (one row per data line; see ``dbdiag.tables``): sample (a header starts a
block: vmstat repeats it every screen), ts (the ``-t`` column, read in the zone its header names, else in
``ctx.tz``), runnable, blocked, the memory columns in KiB (vmstat's default unit: ``-S M`` prints no marker, so
a capture taken with it reads 1024 times too small), si/so (KiB/s), bi/bo (blocks/s), in, cs, the CPU
percentages, source, line. The first line of a run is the average since boot: derive leaves it out.
``records`` is the number of data lines.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.times import check_tz, parse_time_line, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import VMSTAT_SAMPLE, conform

MAX_DIGITS = 18  # an Int64 holds every 18-digit number
_GROUPS_RE = lazy_compile(r"^\s*-*procs-*\s+-+memory-+\s+-+swap-+")
_COLUMNS = {"r": "runnable", "b": "blocked", "swpd": "swap_used_kb", "free": "free_kb", "buff": "buffers_kb", "cache": "cache_kb",
            "si": "swap_in_kb_per_s", "so": "swap_out_kb_per_s", "bi": "blocks_in_per_s", "bo": "blocks_out_per_s",
            "in": "interrupts_per_s", "cs": "context_switches_per_s", "us": "user_pct", "sy": "system_pct", "id": "idle_pct",
            "wa": "iowait_pct", "st": "steal_pct"}


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    rows: list[dict[str, object]] = []
    names: list[str] | None = None
    zone, sample, zoned = None, -1, False
    for number, line in enumerate(text.splitlines(), 1):
        cells = line.split()
        if not cells:
            continue
        if _GROUPS_RE.match(line):
            names = None
            continue
        if cells[:2] == ["r", "b"]:
            zone = cells[-1] if cells[-1][:1].isupper() else None  # -t: the zone of the timestamp column
            names = [c for c in cells if not c[:1].isupper()]
            sample += 1
            continue
        if names is None:
            continue
        values, stamp = cells[:len(names)], cells[len(names):]
        if len(values) < len(names) or not all(v.isdigit() for v in values):
            warnings.append(ParseWarning(number, f"not a vmstat line under {len(names)} columns: line skipped"))
            continue
        row: dict[str, object] = {"sample": sample, "line": number}
        for name, value in zip(names, values):
            if name not in _COLUMNS:
                continue
            if len(value) > MAX_DIGITS:
                warnings.append(ParseWarning(number, f"{name}: {value[:24]} is past any counter: left empty"))
                continue
            row[_COLUMNS[name]] = int(value)
        if stamp:
            read = parse_time_line(" ".join(stamp) + (f" {zone}" if zone in ("UTC", "GMT") else ""), tz)
            if read is not None:
                row["ts"], applied = read
                zoned = zoned or applied
        rows.append(row)
    if not rows:
        raise ParseError("no vmstat lines (an 'r b swpd free ...' header and its rows) found")
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.lit(ctx.source).alias("source"))
    notes = [zone_note(tz)] if zoned else []
    return ParseResult(tables={VMSTAT_SAMPLE: conform(VMSTAT_SAMPLE, frame)}, records=len(rows), warnings=cap_warnings(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = head.splitlines()
    has_header = any(line.split()[:6] == ["r", "b", "swpd", "free", "buff", "cache"] for line in lines[:40] if line.strip())
    if not has_header:
        return 0.0
    return 0.9 if any(_GROUPS_RE.match(line) for line in lines[:40]) else 0.7


SPEC = ParserSpec(
    kind="vmstat",
    description="vmstat (procps): run queue, memory, swap in/out, I/O and CPU per interval",
    detect=detect,
    parse=parse,
)
