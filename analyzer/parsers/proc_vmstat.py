"""``/proc/vmstat``: every kernel VM counter, one or many snapshots (``cat /proc/vmstat`` in a loop,
pt-stalk's ``procvmstat`` with ``TS`` lines).

Raw input (a time line such as ``TS 1700000000.123 2023-11-14 22:13:20``, an ISO time or
``date`` output may precede a snapshot)::

    nr_free_pages 944094
    numa_hit 6192709
    numa_local 6192709
    numa_pte_updates 0
    numa_hint_faults 0
    numa_hint_faults_local 0
    numa_pages_migrated 0
    pgmigrate_success 0
    thp_fault_alloc 0

Output table ``vmstat_count`` (one row per snapshot and counter):

    snapshot  Int32     0, 1, ...: the k-th time a counter name appears is snapshot k
    ts        Datetime  time line written before the snapshot, else null
    counter   String    name as the kernel prints it
    value     Int64     value (cumulative since boot for event counters, current for nr_*)
    source    String    member path

``records`` is the number of snapshots. The ``vmstat`` command (``procs ---memory---`` columns)
and ``vmstat -s`` are other formats and are not read here. Lines are matched with one
vectorised regex over the member; only lines that are not counters are looked at one by one
(time lines, or warnings for the first few unknown ones).
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.snapshots import snapshot_result
from dbdiag.parsers.kit.times import parse_time_line
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import UTC_TIME, VMSTAT_COUNT

_COUNTER_PATTERN = r"^([a-z][a-z0-9_]*) (-?\d+)\r?$"
_TIME_CANDIDATE_PATTERN = r"^(?:TS\s+)?\d{9,11}(?:[.\s]|\r?$)|^\d{4}-\d{2}-\d{2}[T ]|^[A-Z][a-z]{2}[ ,]"


def parse(text: str, ctx: ParseContext) -> ParseResult:
    lines = pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1)
    parts = lines.with_columns(
        pl.col("text").str.extract(_COUNTER_PATTERN, 1).alias("counter"),
        pl.col("text").str.extract(_COUNTER_PATTERN, 2).alias("raw"),
    )
    counters = parts.filter(pl.col("counter").is_not_null())
    if counters.height == 0:
        raise ParseError("no /proc/vmstat lines ('name value') found")
    others = parts.filter(pl.col("counter").is_null() & (pl.col("text").str.strip_chars() != ""))
    warnings: list[ParseWarning] = []
    dropped = 0
    zone_applied = False
    time_lines: list[tuple[int, object]] = []
    candidates = others.filter(pl.col("text").str.len_chars() <= 80).filter(
        pl.col("text").str.contains(_TIME_CANDIDATE_PATTERN)
    )
    for number, line in candidates.select("line", "text").iter_rows():
        when = parse_time_line(line.rstrip("\r"), ctx.tz)
        if when is not None:
            time_lines.append((number, when[0]))
            zone_applied = zone_applied or when[1]
    time_numbers = {n for n, _ in time_lines}
    unknown = others.filter(~pl.col("line").is_in(list(time_numbers)))
    for number, line in unknown.head(MAX_WARNINGS).select("line", "text").iter_rows():
        warnings.append(ParseWarning(number, f"not a /proc/vmstat line; skipped: {line.strip()[:60]!r}"))
    dropped = max(unknown.height - MAX_WARNINGS, 0)

    # The kernel prints each counter once per snapshot: the k-th occurrence belongs to snapshot k.
    counters = counters.with_columns(
        pl.int_range(pl.len(), dtype=pl.Int32).over("counter").alias("snapshot"),
        pl.col("raw").cast(pl.Int64, strict=False).alias("value"),
    )
    bounds = counters.group_by("snapshot").agg(pl.col("line").min().alias("first"), pl.col("line").max().alias("last"))
    bounds = bounds.sort("snapshot")
    stamps: dict[int, object] = {}
    previous_last = 0
    for snapshot, first, last in bounds.iter_rows():
        before = [when for number, when in time_lines if previous_last < number < first]
        if before:
            stamps[snapshot] = before[-1]
        previous_last = last
    interleaved = bounds.filter(pl.col("first") < pl.col("last").shift(1)).height
    if interleaved:
        warnings.append(ParseWarning(None, f"{interleaved} snapshot(s) overlap the one before: a counter is "
                                           "missing or repeated inside a snapshot; rows were numbered by occurrence"))
    overflow = counters.filter(pl.col("value").is_null()).height
    if overflow:
        warnings.append(ParseWarning(None, f"{overflow} values too large for Int64; left null"))
    frame = counters.sort("line").select(
        "snapshot",
        pl.col("snapshot").replace_strict(stamps, default=None, return_dtype=UTC_TIME).alias("ts"),
        "counter",
        "value",
        pl.lit(ctx.source, dtype=pl.String).alias("source"),
    )
    notes = [f"snapshot times have no zone; read as {ctx.tz}"] if zone_applied else []
    return snapshot_result(VMSTAT_COUNT, frame, set(bounds["snapshot"]), stamps, warnings, dropped, notes)


_LINE_DETECT_RE = lazy_compile(r"^[a-z][a-z0-9_]* \d+$", re.MULTILINE)
_VMSTAT_ONLY_DETECT_RE = lazy_compile(
    r"^(?:nr_free_pages|nr_inactive_anon|nr_active_anon|nr_inactive_file|nr_active_file|nr_dirty|nr_writeback|"
    r"nr_mapped|nr_anon_pages|nr_slab_reclaimable|pgpgin|pgpgout|pswpin|pswpout|pgalloc_normal|pgfree|pgfault|"
    r"pgmajfault|numa_interleave|numa_local|numa_other|numa_hint_faults|pgmigrate_success|thp_fault_alloc|"
    r"nr_zone_inactive_anon|nr_dirty_threshold) \d+$",
    re.MULTILINE,
)


def detect(head: str, name: str) -> float:
    known = len(_VMSTAT_ONLY_DETECT_RE.findall(head))
    lines = len(_LINE_DETECT_RE.findall(head))
    if known >= 3 and lines >= 10:
        return 0.95
    if known >= 2 and lines >= 3:
        return 0.8
    if lines >= 10 and "vmstat" in name.lower():
        return 0.6
    return 0.0


SPEC = ParserSpec(
    kind="proc-vmstat",
    description="/proc/vmstat: kernel VM and NUMA counters (one or many snapshots)",
    detect=detect,
    parse=parse,
)
