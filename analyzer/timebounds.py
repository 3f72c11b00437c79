"""The times dbdiag reads: from 1970 (the epoch) up to 2200. A time outside is a corrupt field.

Python's datetimes stop at year 9999 and window arithmetic adds to them, so a sample 8,000 years out
or a log line of year 9999 ended the run with an OverflowError in the timeline. Each parse result
goes through ``within_time_bounds`` (in the pipeline): rows with such a time are dropped with a
warning naming their line, and derive never sees them.

>>> import polars as pl
>>> from datetime import datetime
>>> from dbdiag.parsers.base import ParseResult
>>> frame = pl.DataFrame({"ts": [datetime(2024, 5, 14), datetime(9999, 1, 1), None], "line": [1, 2, 3]})
>>> result = within_time_bounds(ParseResult(tables={"x": frame}, time_range=(datetime(2024, 5, 14), datetime(9999, 1, 1))))
>>> result.tables["x"]["line"].to_list(), [w.as_text() for w in result.warnings]
([1, 3], ['line 2: time 9999-01-01 00:00:00 out of range (1970 to 2200): x row dropped'])
>>> result.time_range
(datetime.datetime(2024, 5, 14, 0, 0), datetime.datetime(2024, 5, 14, 0, 0))
"""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl

from dbdiag.parsers.base import ParseResult, ParseWarning

MIN_TIME = datetime(1970, 1, 1, tzinfo=timezone.utc)
MAX_TIME = datetime(2200, 1, 1, tzinfo=timezone.utc)
MAX_EPOCH_S = int((MAX_TIME - MIN_TIME).total_seconds())
BOUNDS_TEXT = f"{MIN_TIME.year} to {MAX_TIME.year}"
MAX_LINES_NAMED = 5  # warnings naming a line, per table; the rest are counted


def inside(column: pl.Expr) -> pl.Expr:
    """True where a Datetime (any unit, zoned or not) lies in [MIN_TIME, MAX_TIME); null stays null."""
    return column.dt.epoch("s").is_between(0, MAX_EPOCH_S, closed="left")


def epoch_inside(seconds: pl.Expr) -> pl.Expr:
    """``inside`` for epoch seconds, before they are made a Datetime."""
    return seconds.is_between(0, MAX_EPOCH_S, closed="left")


def within_time_bounds(result: ParseResult) -> ParseResult:
    """``result`` without the rows whose times fall outside the bounds (a warning for each, with its
    line when the table has one), and its time range taken again from what is left when it fell outside."""
    dropped_any = False
    for name, frame in list(result.tables.items()):
        columns = [c for c, dtype in frame.schema.items() if isinstance(dtype, pl.Datetime)]
        if not columns or frame.is_empty():
            continue
        outside = frame.select(pl.any_horizontal(inside(pl.col(c)).not_().fill_null(False) for c in columns).alias("outside"))
        mask = outside["outside"]
        count = int(mask.sum())
        if not count:
            continue
        dropped_any = True
        result.warnings.extend(_warnings(name, frame.filter(mask), columns, count))
        result.tables[name] = frame.filter(~mask)
    if dropped_any or not _range_inside(result.time_range):
        result.time_range = _time_range(result)
    return result


def _warnings(name: str, dropped: pl.DataFrame, columns: list[str], count: int) -> list[ParseWarning]:
    named = dropped.head(MAX_LINES_NAMED)
    lines = named["line"].to_list() if "line" in named.columns else [None] * named.height
    first_out = named.select(
        pl.coalesce(pl.when(inside(pl.col(c)).not_().fill_null(False)).then(pl.col(c).dt.to_string("%Y-%m-%d %H:%M:%S")) for c in columns)
    ).to_series().to_list()
    out = [
        ParseWarning(line, f"time {stamp} out of range ({BOUNDS_TEXT}): {name} row dropped")
        for line, stamp in zip(lines, first_out)
    ]
    if count > len(out):
        out.append(ParseWarning(None, f"{count - len(out)} more {name} row(s) with a time out of range ({BOUNDS_TEXT}) dropped"))
    return out


def _range_inside(time_range: tuple[object, object] | None) -> bool:
    if time_range is None:
        return True
    return all(not isinstance(end, datetime) or MIN_TIME <= _as_utc(end) < MAX_TIME for end in time_range)


def _as_utc(moment: datetime) -> datetime:
    """Naive times are compared as UTC (the bounds are a century wide: a zone does not matter)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _time_range(result: ParseResult) -> tuple[object, object] | None:
    """The earliest and latest time left in any table (None when there is none)."""
    firsts, lasts = [], []
    for frame in result.tables.values():
        for column, dtype in frame.schema.items():
            if isinstance(dtype, pl.Datetime) and frame.height:
                series = frame[column].drop_nulls()
                if series.len():
                    firsts.append(series.min())
                    lasts.append(series.max())
    if not firsts:
        return None
    return min(firsts, key=_as_utc), max(lasts, key=_as_utc)
