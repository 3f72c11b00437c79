"""PostgreSQL ``pg_stat_database`` as psql prints it: one or many snapshots of every database's counters.

Raw input, aligned (psql's default; ``SELECT now() AS snapshot_time, * FROM pg_stat_database``, cut here)::

             snapshot_time         | datid |  datname  | numbackends | xact_commit | xact_rollback | blks_read | blks_hit | ... | stats_reset
    -------------------------------+-------+-----------+-------------+-------------+---------------+-----------+----------+-----+-------------
     2026-12-04 19:29:07.106463+00 |     0 |           |           0 |           0 |             0 |       222 |      484 | ... |
     2026-12-04 19:29:07.106463+00 | 16384 | bench     |           0 |       15677 |             0 |    333052 |   321242 | ... |
    (5 rows)

or the same with ``psql -A`` (any one-character ``-F``), ``psql --csv`` or ``COPY (...) TO STDOUT WITH CSV
HEADER`` (``kit.psql_tables``). A member may hold several snapshots (a loop), each a table with its header.
The header must name ``datname``, ``blks_read`` and ``blks_hit``; any other column of the view may be
left out, and columns the view does not have are ignored (kept in a note).

A snapshot's time is its time column (``snapshot_time``, ``now``, ``ts``, ``time``, ``timestamp``,
``clock_timestamp``, ``current_timestamp``: the first row's value), else a time line written just
before the table (``date``, ISO 8601, epoch seconds), else null. psql prints ``timestamptz`` with its
offset (``+00``); a time without one is read in ``--tz`` and the inventory says so.

Output table ``pg_stat_database`` (one row per snapshot and database; schema in ``tables/parsed.py``)::

    snapshot Int32, ts Datetime, datid Int64, datname String (null: the shared objects' row, datid 0),
    numbackends, xact_commit, xact_rollback, blks_read, blks_hit, tup_returned ... deadlocks,
    checksum_failures (Int64), checksum_last_failure Datetime, blk_read_time_ms, blk_write_time_ms,
    session_time_ms, active_time_ms, idle_in_transaction_time_ms (Float64: the view's ms),
    sessions ... sessions_killed (Int64), stats_reset Datetime, source, line (of the row)

``records`` is the number of snapshots. A cell that is not a number where one is expected is left
null with a warning; a row with more or fewer cells than its header is skipped with one. psql's
expanded layout (``\\x``) and ``-At`` (no header) are not read.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.psql_tables import PsqlTable, read_tables
from dbdiag.parsers.kit.times import zone_or_utc
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PG_STAT_DATABASE, PG_STAT_DATABASE_SCHEMA, conform

REQUIRED = ("datname", "blks_read", "blks_hit")
TIME_COLUMNS = ("snapshot_time", "now", "ts", "time", "timestamp", "clock_timestamp", "current_timestamp",
                "statement_timestamp", "sampled_at", "collected_at")
# the view's column -> the table's ("blk_read_time" -> "blk_read_time_ms": the view's times are milliseconds)
VIEW_COLUMNS = {name.removesuffix("_ms"): name for name in PG_STAT_DATABASE_SCHEMA if name not in ("snapshot", "ts", "source", "line")}
TIME_VALUES = ("stats_reset", "checksum_last_failure")
TEXT_COLUMNS = ("datname", *TIME_VALUES)
# A header row: column names only, between separators (aligned " a | b", -A "a|b", CSV "a,b" or '"a","b"').
_HEADER_LINE_RE = lazy_compile(r'^[ \t"]*[a-z_][a-z0-9_]*"?(?:[ \t]*[|,\t;][ \t"]*[a-z_][a-z0-9_]*"?)+[ \t]*\r?$', re.MULTILINE)


def _header_ok(names: list[str]) -> bool:
    return all(name in names for name in REQUIRED)


def _time(text: str | None, tz: str) -> tuple[datetime | None, bool]:
    """A psql timestamp ("2026-12-04 19:29:07.106463+00") as UTC, and whether ``tz`` was applied (no offset).

    >>> _time("2026-12-04 19:29:07.106463+00", "UTC")
    (datetime.datetime(2026, 12, 4, 19, 29, 7, 106463, tzinfo=datetime.timezone.utc), False)
    >>> _time("2026-12-04 20:29:07", "Europe/Paris")[0].hour, _time("yesterday", "UTC")
    (19, (None, False))
    """
    if text is None:
        return None, False
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None, False
    if when.tzinfo is None:
        return when.replace(tzinfo=zone_or_utc(tz)).astimezone(timezone.utc), True
    return when.astimezone(timezone.utc), False


def _snapshot_time(table: PsqlTable, tz: str) -> tuple[datetime | None, bool]:
    """Its time column's first value, else the time line before it."""
    at = next((table.names.index(n) for n in TIME_COLUMNS if n in table.names), None)
    if at is None:
        return table.time, table.time_zone_applied
    return _time(table.rows[0][1][at] if table.rows else None, tz)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    tables = read_tables(text, _header_ok, ctx.tz, warnings)
    if not tables:
        raise ParseError("no pg_stat_database table (a header naming datname, blks_read and blks_hit) found")
    if not any(table.rows for table in tables):
        raise ParseError("pg_stat_database header found but no database rows")
    cells: dict[str, list] = {name: [] for name in ("snapshot", "ts", "line", *VIEW_COLUMNS.values())}
    zones_applied: list[bool] = []
    stamps: list[datetime] = []
    for snapshot, table in enumerate(tables):
        when, applied = _snapshot_time(table, ctx.tz)
        zones_applied.append(applied)
        stamps += [when] if when is not None else []
        if table.footer is not None and table.footer != len(table.rows):
            warnings.append(ParseWarning(table.line, f"footer says {table.footer} rows but {len(table.rows)} were read"))
        at = {VIEW_COLUMNS[n]: i for i, n in enumerate(table.names) if n in VIEW_COLUMNS}
        for line, row in table.rows:
            cells["snapshot"].append(snapshot)
            cells["ts"].append(when)
            cells["line"].append(line)
            for column in VIEW_COLUMNS.values():
                cells[column].append(row[at[column]] if column in at else None)
    for column in TIME_VALUES:
        read = [_time(value, ctx.tz) for value in cells[column]]
        cells[column] = [when for when, _ in read]
        zones_applied += [applied for _, applied in read]
    raw = pl.DataFrame(cells, schema={name: pl.String for name in cells} | {
        "snapshot": pl.Int32, "line": pl.Int64, **{c: PG_STAT_DATABASE_SCHEMA[c] for c in ("ts", *TIME_VALUES)}})
    numbers = [c for c in VIEW_COLUMNS.values() if c not in TEXT_COLUMNS]
    frame = raw.with_columns(pl.col(c).cast(PG_STAT_DATABASE_SCHEMA[c], strict=False) for c in numbers)
    for column in numbers:
        bad = raw.filter(pl.col(column).is_not_null() & frame[column].is_null())
        for line, value in bad.select("line", column).head(max(MAX_WARNINGS - len(warnings), 0)).iter_rows():
            warnings.append(ParseWarning(line, f"{column}: {value[:40]!r} is not a number; left null"))
    frame = conform(PG_STAT_DATABASE, frame.with_columns(pl.lit(ctx.source).alias("source")))
    names = {n for table in tables for n in table.names}
    ignored = sorted(names - set(VIEW_COLUMNS) - set(TIME_COLUMNS))
    notes = [f"layout: {', '.join(sorted({t.layout for t in tables}))}; {len(tables)} snapshot(s) of "
             f"{frame['datname'].drop_nulls().n_unique()} database(s)"]
    if not stamps:
        notes.append("the snapshots carry no time (no now() column, no time line before them): no rates")
    if any(zones_applied):
        notes.append(f"times have no zone; read as {ctx.tz} (--tz)")
    if ignored:
        notes.append(f"columns not read: {', '.join(ignored)}")
    warnings.sort(key=lambda w: w.line or 0)
    return ParseResult(tables={PG_STAT_DATABASE: frame}, records=len(tables), warnings=warnings, notes=notes,
                       time_range=(min(stamps), max(stamps)) if stamps else None)


def detect(head: str, name: str) -> float:
    """A header row naming datname, blks_read and blks_hit (a sentence naming them is not one)."""
    for match in _HEADER_LINE_RE.finditer(head):
        names = set(re.split(r'[\s|,;"]+', match.group(0)))
        if all(n in names for n in REQUIRED):
            return 0.95
    return 0.0


SPEC = ParserSpec(
    kind="postgresql-stat-database",
    description="PostgreSQL pg_stat_database as psql prints it (aligned, -A, CSV): per-database counters, one or many snapshots",
    detect=detect,
    parse=parse,
)
