"""Members of ``name value`` counter lines printed once per snapshot (``/proc/vmstat``, ``/proc/stat``),
with optional time lines before a snapshot (``TS 1700000000.123 ...``, an ISO time, ``date`` output).

``read_counter_lines(text, ctx, table, what, counter_pattern, quiet_pattern)`` -> the ``ParseResult``
of a table (snapshot, ts, counter, value, source): ``counter_pattern`` captures the name and the value
of a counter line; a line it does not match is a time line, a known line to pass over
(``quiet_pattern``, e.g. /proc/stat's ``cpu`` rows), or a warning (the first MAX_WARNINGS of them).
The k-th time a counter name appears is snapshot k (the kernel prints each once per snapshot).
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParseWarning
from dbdiag.parsers.kit.snapshots import snapshot_result
from dbdiag.parsers.kit.times import parse_time_line
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.tables import UTC_TIME

TIME_CANDIDATE_PATTERN = r"^(?:TS\s+)?\d{9,11}(?:[.\s]|\r?$)|^\d{4}-\d{2}-\d{2}[T ]|^[A-Z][a-z]{2}[ ,]"


def read_counter_lines(text: str, ctx: ParseContext, table: str, what: str, counter_pattern: str,
                       quiet_pattern: str | None = None) -> ParseResult:
    lines = pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1)
    parts = lines.with_columns(
        pl.col("text").str.extract(counter_pattern, 1).alias("counter"),
        pl.col("text").str.extract(counter_pattern, 2).alias("raw"),
    )
    counters = parts.filter(pl.col("counter").is_not_null())
    if counters.height == 0:
        raise ParseError(f"no {what} lines ('name value') found")
    others = parts.filter(pl.col("counter").is_null() & (pl.col("text").str.strip_chars() != ""))
    if quiet_pattern is not None:
        others = others.filter(~pl.col("text").str.contains(quiet_pattern))
    warnings: list[ParseWarning] = []
    zone_applied = False
    time_lines: list[tuple[int, object]] = []
    candidates = others.filter(pl.col("text").str.len_chars() <= 80).filter(
        pl.col("text").str.contains(TIME_CANDIDATE_PATTERN)
    )
    for number, line in candidates.select("line", "text").iter_rows():
        when = parse_time_line(line.rstrip("\r"), ctx.tz)
        if when is not None:
            time_lines.append((number, when[0]))
            zone_applied = zone_applied or when[1]
    time_numbers = {n for n, _ in time_lines}
    unknown = others.filter(~pl.col("line").is_in(list(time_numbers)))
    for number, line in unknown.head(MAX_WARNINGS).select("line", "text").iter_rows():
        warnings.append(ParseWarning(number, f"not a {what} line; skipped: {line.strip()[:60]!r}"))
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
    return snapshot_result(table, frame, set(bounds["snapshot"]), stamps, warnings, dropped, notes)
