"""Counter snapshots: a member that repeats a table of cumulative counters (``/proc/interrupts``,
``/proc/softirqs``, numastat, sysfs node files, ``/proc/vmstat``), each snapshot dated by the time
line written before it.

``read_counter_snapshots`` reads the per-CPU tables (a ``CPU0 CPU1 ...`` header, then one
``label: count count ...`` row per line); ``long_frame`` explodes them to one row per (row, CPU);
``counter_result`` and ``snapshot_result`` make the ParseResult with the time range of the snapshots.

>>> rows = read_counter_snapshots("   CPU0  CPU1\\n 25:  3  4  PCI-MSI\\n", "UTC", "irq", re.compile(r"\\d+"), str.isdigit)
>>> rows.label, rows.counts, rows.cpus, rows.tail
(['25'], ['3', '4'], [0, 1], ['  PCI-MSI'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from functools import cache
from typing import Callable

import polars as pl

from dbdiag.parsers.base import ParseResult, ParseWarning
from dbdiag.parsers.kit.times import UTC_NAMES, parse_time_line, zone_or_utc
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS, more_not_listed
from dbdiag.patterns import lazy_compile
from dbdiag.tables import UTC_TIME, conform

HEADER_RE = lazy_compile(r"^\s*CPU\d+(?:\s+CPU\d+)*\s*$", re.ASCII)
HEADER_DETECT_RE = lazy_compile(r"^[ \t]*CPU\d+(?:[ \t]+CPU\d+)*[ \t]*$", re.MULTILINE)
# "  25:", "NMI:", "IPI0:2768808080" (no blank after the colon on arm64), "I/O:" (s390)
ROW_RE = lazy_compile(r"^\s*([^\s:]+):(.*)$")


@cache
def _counts_re(ncpu: int) -> re.Pattern[str]:
    """Leading counts, at most one per CPU column; a count is digits followed by a blank or the end."""
    return re.compile(r"(?:\s*\d+(?!\S)){1,%d}" % max(ncpu, 1), re.ASCII)


@dataclass
class CounterRows:
    """Counters read from a member, row-level; ``counts``/``cpus`` are flat, ``lengths`` per row."""

    snapshot: list[int] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    counts: list[str] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    snapshot_ts: list[datetime | None] = field(default_factory=list)
    snapshot_cpus: list[list[int]] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_warnings: int = 0

    def warn(self, line: int | None, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(line, reason))
        else:
            self.dropped_warnings += 1


def read_counter_snapshots(
    text: str,
    tz: str,
    what: str,
    row_ok: re.Pattern[str],
    expects_all_counts: Callable[[str], bool],
) -> CounterRows:
    """Split a member into snapshots (each begins with a ``CPU0 CPU1 ...`` header) and read the rows.

    ``row_ok`` filters row labels (softirq names or IRQ labels). ``expects_all_counts(label)``
    says whether a row with fewer counts than CPU columns deserves a warning (``ERR:`` is fine).
    One Python step per line; counts stay strings in one flat list and are cast by polars.
    """
    out = CounterRows()
    cpus_now: list[int] | None = None
    ncpu = 0
    counts_re = _counts_re(1)
    pending_ts: datetime | None = None
    pending_ts_line = 0
    zone_applied = False
    seen: set[str] = set()
    snap = -1
    lines = text.split("\n")
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if HEADER_RE.match(line):
            try:
                cpus_now = [int(tok[3:]) for tok in line.split()]
            except ValueError:  # pragma: no cover - the regex guarantees digits
                continue
            if len(set(cpus_now)) != len(cpus_now):
                out.warn(number, "header lists a CPU twice; snapshot skipped")
                cpus_now = None
                continue
            ncpu = len(cpus_now)
            counts_re = _counts_re(ncpu)
            snap += 1
            out.snapshot_ts.append(pending_ts)
            out.snapshot_cpus.append(cpus_now)
            pending_ts = None
            seen = set()
            continue
        when = parse_time_line(line, tz)
        if when is not None:
            if pending_ts is not None:
                out.warn(pending_ts_line, "time line not followed by a snapshot; ignored")
            pending_ts, pending_ts_line = when[0], number
            zone_applied = zone_applied or when[1]
            continue
        m = ROW_RE.match(line)
        if m is None or not row_ok.match(m.group(1)):
            out.warn(number, f"not a {what} line; skipped: {line.strip()[:60]!r}")
            continue
        if cpus_now is None:
            out.warn(number, f"{what} row before any CPU header line; skipped")
            continue
        label, body = m.group(1), m.group(2)
        cm = counts_re.match(body)
        if cm is None:
            out.warn(number, f"{label}: no numeric counts; row skipped")
            continue
        if label in seen:
            out.warn(number, f"{label}: second row with this label in snapshot {snap}; skipped")
            continue
        seen.add(label)
        values = cm.group(0).split()
        k = len(values)
        if k < ncpu and expects_all_counts(label):
            out.warn(number, f"{label}: {k} counts for {ncpu} CPU columns; kept the first {k}")
        out.snapshot.append(snap)
        out.line.append(number)
        out.label.append(label)
        out.tail.append(body[cm.end():])
        out.lengths.append(k)
        out.counts.extend(values)
        out.cpus.extend(cpus_now[:k] if k < ncpu else cpus_now)
    if pending_ts is not None:
        out.warn(pending_ts_line, "time line after the last snapshot ignored (a time line dates the snapshot after it)")
    if zone_applied:
        known = not isinstance(zone_or_utc(tz), timezone) or tz.upper() in UTC_NAMES
        out.notes.append(f"snapshot times have no zone; read as {tz if known else f'UTC ({tz!r} is not a known zone)'}")
    _note_cpu_columns(out)
    return out


def _note_cpu_columns(out: CounterRows) -> None:
    distinct = {tuple(c) for c in out.snapshot_cpus}
    for cpus in sorted(distinct):
        if list(cpus) != list(range(len(cpus))):
            out.notes.append(
                f"CPU columns are not 0..{len(cpus) - 1} ({len(cpus)} columns, up to CPU{max(cpus)}): "
                "offline or hot-unplugged CPUs are absent"
            )
            break
    if len(distinct) > 1:
        out.notes.append(f"the set of CPU columns changes between snapshots ({len(distinct)} different headers)")


def long_frame(rows: CounterRows, row_columns: dict[str, list], schema_table: str, source: str) -> pl.DataFrame:
    """Explode row-level columns to one row per (row, CPU) and cast to the declared schema."""
    n = len(rows.lengths)
    meta = pl.DataFrame(
        {
            "snapshot": rows.snapshot,
            "ts": [rows.snapshot_ts[s] for s in rows.snapshot],
            "__n": rows.lengths,
            **row_columns,
        },
        schema_overrides={"snapshot": pl.Int32, "ts": UTC_TIME, "__n": pl.Int64},
    )
    idx = pl.Series("__i", range(n), dtype=pl.Int64).repeat_by(pl.Series(rows.lengths, dtype=pl.Int64)).explode()
    frame = meta.select(pl.exclude("__n").gather(idx)) if n else meta.drop("__n")
    frame = frame.with_columns(
        pl.Series("cpu", rows.cpus, dtype=pl.Int32),
        pl.Series("count", rows.counts, dtype=pl.String).cast(pl.Int64, strict=False),
        pl.lit(source, dtype=pl.String).alias("source"),
    )
    return conform(schema_table, frame)


def counter_result(rows: CounterRows, frame: pl.DataFrame, table: str) -> ParseResult:
    """The result of ``read_counter_snapshots`` + ``long_frame``: warnings in line order, counts too big said."""
    warnings = sorted(rows.warnings, key=lambda w: (w.line is None, w.line or 0))
    if rows.dropped_warnings:
        warnings.append(more_not_listed(rows.dropped_warnings))
    overflow = frame.filter(pl.col("count").is_null()).height
    if overflow:
        warnings.append(ParseWarning(None, f"{overflow} counts too large for Int64; left null"))
    stamps = [t for t in rows.snapshot_ts if t is not None]
    return ParseResult(
        tables={table: frame},
        records=len(rows.snapshot_ts),
        warnings=warnings,
        notes=list(rows.notes),
        time_range=(min(stamps), max(stamps)) if stamps else None,
    )


def snapshot_result(
    table: str,
    frame: pl.DataFrame,
    snapshots: set[int],
    snapshot_ts: dict[int, datetime],
    warnings: list[ParseWarning],
    dropped: int,
    notes: list[str],
) -> ParseResult:
    """The result of a member read as numbered snapshots (numastat, sysfs node files, /proc/vmstat).

    ``records`` counts ``snapshots``; the time range spans the time lines of those that have one
    (``snapshot_ts``); ``dropped`` warnings past MAX_WARNINGS are counted in one last warning.
    """
    if dropped:
        warnings = [*warnings, more_not_listed(dropped)]
    stamps = [snapshot_ts[s] for s in snapshots if s in snapshot_ts]
    return ParseResult(
        tables={table: conform(table, frame)},
        records=len(snapshots),
        warnings=warnings,
        notes=notes,
        time_range=(min(stamps), max(stamps)) if stamps else None,
    )

