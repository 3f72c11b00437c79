"""Connection idle gaps: how long each connection sat between two statements, inside a transaction and not.

``metrics.idle_gaps`` (names fixed by issue 5): ``in_txn``, ``not_in_txn`` and ``sql_latency``, each
``{count, p50_ms, p80_ms, p99_ms}`` (and ``mean_ms``); plus ``source`` (the members used), ``method``
("statements" or "metrics", with ``method_detail`` in words), ``resolution_ms`` (the timestamp
resolution the gaps are measured with) and ``unavailable_reason`` (why gap percentiles are null).
A long in-transaction idle next to short SQL means the application holds transactions open while
it does something else (round trips, client CPU, a slow service call): locks and snapshots are held
meanwhile.

**From statements** (the ``statement`` table; internal statements left out). Per connection
(``source``, ``instance``, ``conn_id``), statements in the order they finished (``end_ts``, then log
order: the order a connection ran them, even with 1-second log times), the gap after a statement
is ``next.start_ts - end_ts``. Negative gaps no larger than the timestamp resolution are rounding
and become 0; larger ones (an id reused by two sessions at once) are dropped and counted in a note.
Gaps spanning a reconnection that reuses the same id (a PostgreSQL pid) are not told apart.

A gap is in a transaction when the statements on both sides share a transaction id (TiDB
``Txn_start_ts``, PostgreSQL ``%v``/``%x``, InnoDB trx id), or when the SQL text left a transaction
open: ``BEGIN``/``START TRANSACTION`` open one, ``COMMIT``/``ROLLBACK``/``END``/``ABORT`` (not ``TO
SAVEPOINT``, not ``AND CHAIN``) close it, a nested ``BEGIN`` changes nothing (the state is open or
not, not a depth), and after ``SET autocommit=0`` every statement but a COMMIT/ROLLBACK leaves one
open until ``SET autocommit=1``. The state is a forward fill per connection (no Python loop).
Statements the log did not hold (a slow log with a threshold) would make gaps up: only a log of
every statement is used (:func:`~dbdiag.derive.time_accounting.log_completeness`).

**Resolution.** The gap resolution is the coarsest of ``start_ts`` and ``end_ts`` (one of them is
often derived from the other and a duration, which gives it digits it does not have): 1 s when all
values fall on whole seconds (MariaDB/MySQL slow logs without microsecond ``# Time:``), 1 ms on
whole milliseconds (PostgreSQL ``%m``), else 1 µs. Above :data:`MAX_RESOLUTION_MS` the gap
percentiles are not reported (``unavailable_reason`` says why); counts and SQL latency still are.

**From metrics** (TiDB): the increases over the capture of ``tidb_server_conn_idle_duration_seconds_bucket``
(label ``in_txn`` "1"/"0") and of ``tidb_server_handle_query_duration_seconds_bucket`` (without
``sql_type="internal"``), summed over instances, and percentiles by
:func:`~dbdiag.derive.histogram.histogram_quantile`; a single sample per series is taken as the
count since the server started. Used when the statements cannot give gaps at
:data:`MAX_RESOLUTION_MS` or better.

Percentiles of statements are linear-interpolated (``quantile(..., "linear")``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.histogram import counter_deltas, histogram_quantile, label_value
from dbdiag.derive.time_accounting import log_completeness

QUANTILES = {"p50_ms": 0.50, "p80_ms": 0.80, "p99_ms": 0.99}
MAX_RESOLUTION_MS = 1.0  # coarser timestamps cannot measure gaps of OLTP round trips (0.05-5 ms)
IDLE_BUCKETS = "tidb_server_conn_idle_duration_seconds_bucket"
SQL_BUCKETS = "tidb_server_handle_query_duration_seconds_bucket"
INTERNAL_SQL_RE = r"(?:^|,)sql_type=internal(?:,|$)"

# SQL text markers (after leading blanks and /* */ comments), matched case-insensitively.
_LEAD = r"(?is)^\s*(?:/\*.*?\*/\s*)*"
BEGIN_RE = _LEAD + r"(?:BEGIN|START\s+TRANSACTION)\b"
END_RE = _LEAD + r"(?:COMMIT|ROLLBACK|END|ABORT)\b"
NOT_END_RE = _LEAD + r"(?:ROLLBACK(?:\s+(?:WORK|TRANSACTION))?\s+TO\b|(?:COMMIT|ROLLBACK|END|ABORT)\b[^;]*\bAND\s+CHAIN\b)"
_AUTOCOMMIT = _LEAD + r"SET\s+(?:(?:SESSION|LOCAL)\s+|@@(?:SESSION\.|LOCAL\.)?)?autocommit\s*(?:=|\bTO\b)\s*'?"
AUTOCOMMIT_OFF_RE = _AUTOCOMMIT + r"(?:0|OFF|FALSE)\b"
AUTOCOMMIT_ON_RE = _AUTOCOMMIT + r"(?:1|ON|TRUE)\b"

# What every marker starts with (a superset: the regexes above decide).
CANDIDATE_RE = r"(?i)^\s*(?:/\*|BEGIN|START|SET|COMMIT|ROLLBACK|END|ABORT)"
_FLAGS = ("_begin", "_end", "_ac_off", "_ac_on")

# Up to this many connections, sorting each one's rows on its own is 2-3x cheaper than one sort of all rows on the
# connection hash; with many more it is several times dearer (measured on 0.6 M statements).
FEW_CONNECTIONS = 1_000

_RESOLUTIONS_US = (1_000_000, 1_000, 1)
CONNECTION_KEY = ("source", "_instance", "conn_id")


def idle_gaps(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """``metrics.idle_gaps`` from statements (preferred when fine-grained) or TiDB histograms; None when neither."""
    from_statements = _from_statements(tables.get(t.STATEMENT), tables)
    if from_statements is not None and from_statements["unavailable_reason"] is None:
        return from_statements
    from_metrics = _from_metrics(tables.get(t.METRIC_SAMPLE))
    if from_metrics is not None:
        if from_statements is not None:
            from_metrics["notes"].append(f"statements not used for gaps: {from_statements['unavailable_reason']}")
        return from_metrics
    return from_statements


def transaction_state(statements: pl.DataFrame, by: str | tuple[str, ...] = CONNECTION_KEY) -> pl.DataFrame:
    """Add ``in_txn_after``: whether the connection is inside a transaction after each statement.

    ``statements`` must be sorted in execution order per connection and hold ``sql`` and the
    connection key column(s) ``by``.

    >>> frame = pl.DataFrame({"source": "s", "_instance": "", "conn_id": "1",
    ...     "sql": ["SELECT 1", "BEGIN", "begin", "UPDATE t SET a=1", "COMMIT", "SELECT 2",
    ...             "SET autocommit=0", "SELECT 3", "ROLLBACK TO SAVEPOINT a", "COMMIT", "SET autocommit=1", "SELECT 4"]})
    >>> transaction_state(frame)["in_txn_after"].to_list()
    [False, True, True, True, False, False, False, True, True, False, False, False]
    """
    flagged = statements.with_columns(sql_flags(statements["sql"]))
    return _with_state(flagged, lambda name: pl.col(name).forward_fill().over(by)).drop(_FLAGS)


def sql_flags(sql: pl.Series) -> pl.DataFrame:
    """Per statement: ``_begin`` (opens a transaction), ``_end`` (closes one), ``_ac_off``, ``_ac_on`` (sets autocommit).

    >>> sql_flags(pl.Series(["/* app */ begin", "COMMIT AND CHAIN", "set autocommit = 0", "SELECT 1", None])).rows()
    [(True, False, False, False), (False, False, False, False), (False, False, True, False),
     (False, False, False, False), (False, False, False, False)]
    """
    # Every marker starts with a comment or one of these words: the regexes run only on the (few) statements that do,
    # on their first 200 characters (which hold any leading comment and the keyword: cheap on long SQL).
    sql = sql.cast(pl.String)
    candidates = sql.str.contains(CANDIDATE_RE).fill_null(False).arg_true()
    text = sql.gather(candidates).fill_null("").str.slice(0, 200).to_frame("sql")
    flags = text.select(
        pl.col("sql").str.contains(BEGIN_RE).alias("_begin"),
        (pl.col("sql").str.contains(END_RE) & ~pl.col("sql").str.contains(NOT_END_RE)).alias("_end"),
        pl.col("sql").str.contains(AUTOCOMMIT_OFF_RE).alias("_ac_off"),
        pl.col("sql").str.contains(AUTOCOMMIT_ON_RE).alias("_ac_on"),
    )
    return pl.DataFrame([pl.repeat(False, sql.len(), eager=True).alias(name).scatter(candidates, flags[name]) for name in _FLAGS])


def _with_state(flagged: pl.DataFrame, fill: Callable[[str], pl.Expr]) -> pl.DataFrame:
    """``in_txn_after`` from the flag columns; ``fill(name)`` forward-fills a column within each connection."""
    begin, end, ac_off, ac_on = (pl.col(name) for name in _FLAGS)
    opened = pl.when(begin).then(pl.lit(True)).when(end | ac_on).then(pl.lit(False)).otherwise(None).alias("_explicit")
    manual = pl.when(ac_off).then(pl.lit(True)).when(ac_on).then(pl.lit(False)).otherwise(None).alias("_manual")
    state = flagged.with_columns(opened, manual)
    state = state.with_columns(fill("_explicit"), fill("_manual"))
    explicit, manual_on = pl.col("_explicit").fill_null(False), pl.col("_manual").fill_null(False)
    return state.with_columns((explicit | (manual_on & ~end & ~ac_off)).alias("in_txn_after")).drop("_explicit", "_manual")


def resolution_us(column: pl.Series) -> int:
    """The coarsest unit (1 s, 1 ms, 1 µs) every non-null timestamp is a whole multiple of, in µs.

    >>> from datetime import datetime, timezone
    >>> resolution_us(pl.Series([datetime(2024, 1, 1, 0, 0, 1, 250_000, tzinfo=timezone.utc)]))
    1000
    """
    epoch = column.drop_nulls().dt.epoch("us")
    for unit in _RESOLUTIONS_US:
        if (epoch % unit == 0).all():
            return unit
    return 1


def _empty_stats(count: int = 0) -> dict[str, Any]:
    return {"count": count, **{name: None for name in QUANTILES}, "mean_ms": None}


def _stats(values_ms: pl.Series, raw_ms: pl.Series | None = None) -> dict[str, Any]:
    """Percentiles of ``values_ms``; the mean of ``raw_ms`` (the gaps before negatives were clamped)."""
    values = values_ms.drop_nulls()
    if not values.len():
        return _empty_stats()
    mean = (raw_ms if raw_ms is not None else values).mean()
    ordered = values.sort()  # sorted once: each quantile is then a lookup, not a selection over the whole series
    return {
        "count": values.len(),
        **{name: round(float(ordered.quantile(q, "linear")), 4) for name, q in QUANTILES.items()},
        "mean_ms": round(float(mean), 4) if mean is not None else None,
    }


def _from_statements(statements: pl.DataFrame | None, tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    if statements is None:
        return None
    # the columns first: a filter of the whole table would copy every column (plans, SQL texts...)
    frame = statements.lazy().filter(
        pl.col("conn_id").is_not_null() & pl.col("start_ts").is_not_null() & ~pl.col("is_internal").fill_null(False)
    ).select(
        "stmt_id", "source", pl.col("instance").fill_null("").alias("_instance"), "conn_id", "start_ts",
        pl.coalesce("end_ts", pl.col("start_ts") + pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round().cast(pl.Int64))).alias("end_ts"),
        "query_time_s", "txn_id", "sql",
    ).collect()
    if not frame.height:
        return None
    sources = frame["source"].unique(maintain_order=True).to_list()
    resolution = max(resolution_us(frame["start_ts"]), resolution_us(frame["end_ts"]))
    metric: dict[str, Any] = {
        "in_txn": _empty_stats(), "not_in_txn": _empty_stats(),
        "sql_latency": _stats(frame["query_time_s"] * 1000.0),
        "source": sources, "method": "statements", "resolution_ms": resolution / 1000.0,
        "method_detail": "", "unavailable_reason": None, "notes": [],
    }
    timed = frame.filter(pl.col("query_time_s").is_not_null())
    complete, why = log_completeness(timed) if timed.height else (False, "no statement durations")
    if not complete:
        metric["unavailable_reason"] = why
        metric["method_detail"] = "statements per connection; the log does not hold every statement"
        return metric
    ordered = _in_execution_order(frame)
    txn = pl.col("txn_id")
    same_conn = pl.col("_conn").shift(-1) == pl.col("_conn")  # rows of a connection are contiguous once ordered
    next_start, next_txn = pl.when(same_conn).then(pl.col("start_ts").shift(-1)), pl.when(same_conn).then(txn.shift(-1))
    # only the two columns the statistics read go through the filters
    gaps = ordered.select(
        ((next_start - pl.col("end_ts")).dt.total_microseconds() / 1000.0).alias("gap_ms"),
        (pl.col("in_txn_after") | (txn.is_not_null() & (txn == next_txn)).fill_null(False)).alias("in_txn"),
        next_start.is_not_null().alias("_followed"),
    ).filter("_followed").drop("_followed")
    overlapping = gaps.filter(pl.col("gap_ms") < -resolution / 1000.0).height
    gaps = gaps.filter(pl.col("gap_ms") >= -resolution / 1000.0).with_columns(
        pl.col("gap_ms").alias("raw_gap_ms"), pl.col("gap_ms").clip(lower_bound=0.0)
    )
    if overlapping:
        metric["notes"].append(f"{overlapping:,} gaps dropped: the next statement started more than the resolution before the previous ended")
    with_txn_ids = frame["txn_id"].drop_nulls().len()
    metric["method_detail"] = (
        f"statements per connection ({frame['conn_id'].n_unique():,} connections, {frame.height:,} statements): "
        "gap = next start - previous end; in a transaction from BEGIN/COMMIT/autocommit in the SQL text"
        + (f" and shared transaction ids ({with_txn_ids:,} statements carry one)" if with_txn_ids else "")
    )
    in_txn, not_in_txn = gaps.filter(pl.col("in_txn")), gaps.filter(~pl.col("in_txn"))
    if resolution / 1000.0 > MAX_RESOLUTION_MS:
        metric["in_txn"], metric["not_in_txn"] = _empty_stats(in_txn.height), _empty_stats(not_in_txn.height)
        metric["unavailable_reason"] = (
            f"statement times in {', '.join(sources)} have a resolution of {resolution / 1e6:g} s (the log's times "
            "fall on whole seconds: a slow log without microsecond # Time lines), too coarse for gaps between statements; "
            "gaps are counted but their percentiles not reported"
        )
        return metric
    metric["in_txn"], metric["not_in_txn"] = (_stats(g["gap_ms"], g["raw_gap_ms"]) for g in (in_txn, not_in_txn))
    if resolution >= 1000:
        metric["notes"].append(
            f"timestamps have {resolution / 1000:g} ms resolution: each gap carries up to ±{resolution / 1000:g} ms of "
            "rounding (truncated times at both ends), so percentiles under that are at the noise level; the mean "
            "(taken before negative gaps are clamped to 0) is not biased by it"
        )
    return metric


def _in_execution_order(frame: pl.DataFrame) -> pl.DataFrame:
    """``_conn``, ``start_ts``, ``end_ts``, ``txn_id``, ``in_txn_after``, sorted by connection, ``end_ts`` and ``stmt_id``.

    The SQL text is read for its flags before the sort and is not carried through it (moving it is most of the
    cost); (source, stmt_id) is unique, so the order is the one the three keys define, however it is sorted.
    """
    # one 64-bit key per connection: sorting and comparing it is much cheaper than three strings
    keyed = frame.select(pl.struct(CONNECTION_KEY).hash().alias("_conn"), "end_ts", "stmt_id").with_row_index("_row")
    if keyed["_conn"].n_unique() <= FEW_CONNECTIONS:
        per_conn = keyed.group_by("_conn").agg(pl.col("_row").sort_by("end_ts", "stmt_id", maintain_order=True))
        ordered_rows = per_conn.sort("_conn").explode("_row")
    else:
        by_key = keyed.sort("stmt_id", maintain_order=True).sort("end_ts", maintain_order=True)
        ordered_rows = by_key.sort("_conn", maintain_order=True)
    flagged = pl.concat([frame.select("start_ts", "end_ts", "txn_id"), sql_flags(frame["sql"])], how="horizontal")
    ordered = flagged[ordered_rows["_row"]].with_columns(ordered_rows["_conn"])
    first = pl.col("_conn") != pl.col("_conn").shift(1)

    def fill(name: str) -> pl.Expr:
        # 1 / 0 / null, with -1 at a connection's first row when null: one forward fill over the frame stays per connection
        code = pl.when(pl.col(name)).then(pl.lit(1, pl.Int8)).when(pl.col(name).is_not_null()).then(pl.lit(0, pl.Int8))
        code = code.when(first.fill_null(True)).then(pl.lit(-1, pl.Int8))
        return code.otherwise(None).forward_fill().eq(1).alias(name)

    return _with_state(ordered, fill).drop(_FLAGS)


def _from_metrics(metrics: pl.DataFrame | None) -> dict[str, Any] | None:
    if metrics is None:
        return None
    idle = metrics.filter(pl.col("metric") == IDLE_BUCKETS)
    if not idle.height:
        return None
    sql = metrics.filter((pl.col("metric") == SQL_BUCKETS) & ~pl.col("labels").str.contains(INTERNAL_SQL_RE))
    idle_buckets, idle_how = _bucket_totals(idle, "in_txn")
    sql_buckets, _ = _bucket_totals(sql, None)
    stats = {
        key: _histogram_stats(idle_buckets.filter(pl.col("in_txn") == flag)) for key, flag in (("in_txn", "1"), ("not_in_txn", "0"))
    }
    return {
        **stats,
        "sql_latency": _histogram_stats(sql_buckets),
        "source": pl.concat([idle["source"], sql["source"]]).unique(maintain_order=True).to_list(),
        "method": "metrics",
        "method_detail": (
            f"TiDB histograms {IDLE_BUCKETS} (in_txn 1/0) and {SQL_BUCKETS} (sql_type != internal), {idle_how}, "
            "summed over instances; percentiles interpolated within buckets (histogram_quantile)"
        ),
        "resolution_ms": None,
        "unavailable_reason": None,
        "notes": [],
    }


def _bucket_totals(samples: pl.DataFrame, split: str | None) -> tuple[pl.DataFrame, str]:
    """Per ``le`` (and ``split`` label): the count over the capture, summed over series."""
    series_sizes = samples.group_by("source", "labels").len()["len"]
    if series_sizes.len() and series_sizes.min() >= 2:
        counts, how = counter_deltas(samples).rename({"delta": "count"}), "increase over the capture"
    else:
        counts = samples.filter(pl.col("value").is_finite()).sort("ts").group_by("source", "labels").last().rename({"value": "count"})
        how = "counts since the server started (one sample per series)"
    keys = [label_value("le")] + ([label_value(split)] if split else [])
    totals = (
        counts.with_columns(keys)
        .filter(pl.col("le").is_not_null())
        .with_columns(pl.col("le").str.replace(r"^\+?Inf$", "inf").cast(pl.Float64, strict=False))
        .group_by(["le"] + ([split] if split else []))
        .agg(pl.col("count").sum())
    )
    return totals, how


def _histogram_stats(buckets: pl.DataFrame) -> dict[str, Any]:
    pairs = [(le, count) for le, count in buckets.select("le", "count").drop_nulls().iter_rows()]
    total = max((count for le, count in pairs if le == float("inf")), default=0)
    result: dict[str, Any] = {"count": int(round(total))}
    for name, q in QUANTILES.items():
        value = histogram_quantile(pairs, q)
        result[name] = round(value * 1000.0, 4) if value is not None else None
    return result
