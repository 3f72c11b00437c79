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
every statement is used (:func:`~dbdiag.derive.time_db_side.log_completeness`; with the count a load test
sent, when it tells, so that a sampled log is not taken for a whole one).

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
from dbdiag.derive.sql import is_sleep
from dbdiag.derive.time_db_side import log_completeness
from dbdiag.derive.time_user_side import statements_sent
from dbdiag.vocabulary.metrics import FAMILIES, INTERNAL_SQL_LABELS_RE

QUANTILES = {"p50_ms": 0.50, "p80_ms": 0.80, "p99_ms": 0.99}
MAX_RESOLUTION_MS = 1.0  # coarser timestamps cannot measure gaps of OLTP round trips (0.05-5 ms)
IDLE_BUCKETS = FAMILIES["tidb_server_conn_idle_duration_seconds"].series("bucket")
SQL_BUCKETS = FAMILIES["tidb_server_handle_query_duration_seconds"].series("bucket")
INTERNAL_SQL_RE = INTERNAL_SQL_LABELS_RE

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
_FLAG_BITS = {"_begin": 1, "_end": 2, "_ac_off": 4, "_ac_on": 8}

_BEFORE_ALL = -(2**63)  # where a sort puts nulls (first), as an Int64
_CONNECTION_HASH = pl.struct("source", pl.col("instance").fill_null("").alias("_instance"), "conn_id").hash()

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
    def last_is_one(value: pl.Expr) -> pl.Expr:
        return (value.forward_fill().over(by) == 1).fill_null(False)

    flagged = statements.with_columns(_flag_code(statements["sql"]).alias("_code"))
    return flagged.with_columns(_state_after(pl.col("_code"), last_is_one)).drop("_code")


def sql_flags(sql: pl.Series) -> pl.DataFrame:
    """Per statement: ``_begin`` (opens a transaction), ``_end`` (closes one), ``_ac_off``, ``_ac_on`` (sets autocommit).

    >>> sql_flags(pl.Series(["/* app */ begin", "COMMIT AND CHAIN", "set autocommit = 0", "SELECT 1", None])).rows()
    [(True, False, False, False), (False, False, False, False), (False, False, True, False),
     (False, False, False, False), (False, False, False, False)]
    """
    return _flag_code(sql).to_frame("_code").select(_flags(pl.col("_code")))


def _flag_code(sql: pl.Series) -> pl.Series:
    """:func:`sql_flags` as the bits of one Int8 per statement (:data:`_FLAG_BITS`): one column to build and move."""
    # Every marker starts as CANDIDATE_RE says: the regexes run only on the (few) statements that do
    sql = sql.cast(pl.String)
    candidates = sql.str.contains(CANDIDATE_RE).fill_null(False).arg_true()
    texts = sql.gather(candidates)
    distinct = texts.unique()
    if 2 * distinct.len() < texts.len():  # mostly the same few texts (BEGIN, COMMIT...): the regexes run once per text
        bits = texts.replace_strict(distinct, _marker_bits(distinct), return_dtype=pl.Int8)
    else:
        bits = _marker_bits(texts)
    return pl.zeros(sql.len(), pl.Int8, eager=True).scatter(candidates, bits)


def _marker_bits(texts: pl.Series) -> pl.Series:
    """The flag bits of non-null SQL texts, read on their first 200 characters (which hold any leading comment and the
    keyword: cheap on long SQL)."""
    text = pl.col("sql").str.slice(0, 200)
    flags = (
        text.str.contains(BEGIN_RE),
        text.str.contains(END_RE) & ~text.str.contains(NOT_END_RE),
        text.str.contains(AUTOCOMMIT_OFF_RE),
        text.str.contains(AUTOCOMMIT_ON_RE),
    )
    bits = pl.sum_horizontal(flag.cast(pl.Int8) * bit for flag, bit in zip(flags, _FLAG_BITS.values())).cast(pl.Int8)
    return texts.to_frame("sql").select(bits).to_series()


def _flags(code: pl.Expr) -> list[pl.Expr]:
    """The flags of :func:`sql_flags` from the bits of ``code``."""
    return [((code & bit) != 0).alias(name) for name, bit in _FLAG_BITS.items()]


def _state_after(code: pl.Expr, fill: Callable[[pl.Expr], pl.Expr], autocommit_off: bool = True) -> pl.Expr:
    """``in_txn_after`` from the flag bits ``code``.

    ``fill(value)``: whether the last non-null ``value`` (1 / 0 / null as a when/then chain) so far in each connection
    is 1. ``autocommit_off``: whether any statement may set autocommit off (without one, BEGIN...COMMIT decide alone).
    """
    begin, end, ac_off, ac_on = _flags(code)
    one, zero = pl.lit(1, pl.Int8), pl.lit(0, pl.Int8)
    explicit = fill(pl.when(begin).then(one).when(end | ac_on).then(zero))
    if not autocommit_off:
        return explicit.alias("in_txn_after")
    manual = fill(pl.when(ac_off).then(one).when(ac_on).then(zero))
    return (explicit | (manual & ~end & ~ac_off)).alias("in_txn_after")


def resolution_us(column: pl.Series, finest_us: int = 1) -> int:
    """The coarsest unit (1 s, 1 ms, 1 µs) every non-null timestamp is a whole multiple of, in µs; ``finest_us`` when
    no unit coarser than it is (``resolution_us(a, resolution_us(b))`` is the coarser of two columns' resolutions).

    >>> from datetime import datetime, timezone
    >>> resolution_us(pl.Series([datetime(2024, 1, 1, 0, 0, 1, 250_000, tzinfo=timezone.utc)]))
    1000
    """
    epoch = column.drop_nulls().dt.epoch("us")
    for unit in _RESOLUTIONS_US:
        if unit <= finest_us:
            return finest_us
        # the first values first: a finer column mostly fails there, without a pass over all of them
        if (epoch.head(1000) % unit == 0).all() and (epoch % unit == 0).all():
            return unit
    return finest_us


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
    end_ts = pl.col("end_ts")
    if statements["end_ts"].has_nulls():  # computed for every row: only when some row needs it
        duration = pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round().cast(pl.Int64))
        end_ts = pl.coalesce(end_ts, pl.col("start_ts") + duration)
    # the columns first: a filter of the whole table would copy every column (plans, SQL texts...);
    # a statement that only sleeps is not SQL latency: its time joins the gap around it
    frame = statements.lazy().filter(
        pl.col("conn_id").is_not_null() & pl.col("start_ts").is_not_null() & ~pl.col("is_internal").fill_null(False)
        & ~is_sleep(pl.col("sql"))
    ).select(
        "stmt_id", "source", "instance", "conn_id", "start_ts", end_ts.alias("end_ts"), "query_time_s", "txn_id", "sql",
    ).collect()
    if not frame.height:
        return None
    # read in the frame, not as a Series: a column a parser filled with one value stays that value (it is then O(1)),
    # where frame["source"] would write it out on every row
    sources = frame.select(pl.col("source").unique(maintain_order=True)).to_series().to_list()
    resolution = resolution_us(frame["start_ts"], resolution_us(frame["end_ts"]))
    metric: dict[str, Any] = {
        "in_txn": _empty_stats(), "not_in_txn": _empty_stats(),
        "sql_latency": _stats(frame["query_time_s"] * 1000.0),
        "source": sources, "method": "statements", "resolution_ms": resolution / 1000.0,
        "method_detail": "", "unavailable_reason": None, "notes": [],
    }
    timed = frame.filter(pl.col("query_time_s").is_not_null())
    complete, why = log_completeness(timed, expected=statements_sent(tables)) if timed.height else (False, "no statement durations")
    if not complete:
        metric["unavailable_reason"] = why
        metric["method_detail"] = "statements per connection; the log does not hold every statement"
        return metric
    with_txn_ids = frame.height - frame["txn_id"].null_count()
    one_instance = len(sources) == 1 and frame.select(pl.col("instance").n_unique()).item() == 1
    ordered, connections = _in_execution_order(frame, one_instance, with_txn_ids > 0)
    same_conn = pl.col("_conn").shift(-1) == pl.col("_conn")  # rows of a connection are contiguous once ordered
    in_txn = pl.col("in_txn_after")
    if with_txn_ids:
        txn = pl.col("txn_id")
        in_txn = in_txn | (txn.is_not_null() & (txn == pl.when(same_conn).then(txn.shift(-1)))).fill_null(False)
    # null after the last statement of a connection
    gap_ms = (pl.when(same_conn).then(pl.col("start_ts").shift(-1)) - pl.col("end_ts")).dt.total_microseconds() / 1000.0
    gaps = ordered.select(gap_ms.alias("gap_ms"), in_txn.alias("in_txn"))
    tolerance_ms = resolution / 1000.0
    kept = gaps["gap_ms"] >= -tolerance_ms  # null or false: no gap, or an overlap
    rows = {"in_txn": kept & gaps["in_txn"], "not_in_txn": kept & ~gaps["in_txn"]}
    overlapping = (gaps["gap_ms"] < -tolerance_ms).sum()
    if overlapping:
        metric["notes"].append(f"{overlapping:,} gaps dropped: the next statement started more than the resolution before the previous ended")
    metric["method_detail"] = (
        f"statements per connection ({connections:,} connections, {frame.height:,} statements): "
        "gap = next start - previous end; in a transaction from BEGIN/COMMIT/autocommit in the SQL text"
        + (f" and shared transaction ids ({with_txn_ids:,} statements carry one)" if with_txn_ids else "")
    )
    if resolution / 1000.0 > MAX_RESOLUTION_MS:
        metric["in_txn"], metric["not_in_txn"] = (_empty_stats(rows[key].sum()) for key in ("in_txn", "not_in_txn"))
        metric["unavailable_reason"] = (
            f"statement times in {', '.join(sources)} have a resolution of {resolution / 1e6:g} s (the log's times "
            "fall on whole seconds: a slow log without microsecond # Time lines), too coarse for gaps between statements; "
            "gaps are counted but their percentiles not reported"
        )
        return metric
    for key in ("in_txn", "not_in_txn"):
        raw_ms = gaps["gap_ms"].filter(rows[key])
        metric[key] = _stats(raw_ms.clip(lower_bound=0.0), raw_ms)
    if resolution >= 1000:
        metric["notes"].append(
            f"timestamps have {resolution / 1000:g} ms resolution: each gap carries up to ±{resolution / 1000:g} ms of "
            "rounding (truncated times at both ends), so percentiles under that are at the noise level; the mean "
            "(taken before negative gaps are clamped to 0) is not biased by it"
        )
    return metric


def _in_execution_order(frame: pl.DataFrame, one_instance: bool, with_txn_ids: bool) -> tuple[pl.DataFrame, int]:
    """(``_conn``, ``start_ts``, ``end_ts``, ``in_txn_after`` (and ``txn_id`` when ``with_txn_ids``) sorted by
    connection, ``end_ts`` and ``stmt_id``; the number of connections). ``one_instance``: whether ``source`` and
    ``instance`` are the same on every row.

    The SQL text is read for its flags before the rows are moved and is not carried (moving it is most of the cost).
    A log is written as statements end, so each connection's rows are mostly in that order already: the rows are
    grouped by connection keeping the log order (cheap), and sorted on the keys only when a connection's are not in
    order (a sort of rows already grouped is several times cheaper than one of rows in log order).
    """
    # one 64-bit key per connection: grouping on it is much cheaper than on strings, and on conn_id alone (when it is
    # enough) cheaper than on (source, instance, conn_id): hashing one string is ~10x cheaper than a struct of three
    key = pl.col("conn_id").hash() if one_instance else _CONNECTION_HASH
    per_conn = frame.select(key.alias("_key")).with_row_index("_row").group_by("_key").agg("_row")
    # connections in the order of their (source, instance, conn_id) hash (taken on a row of each): the order in
    # which the statistics sum the gaps, which the last digit of a mean can depend on
    first_rows = frame.select("source", "instance", "conn_id")[per_conn["_row"].list.first()]
    per_conn = per_conn.with_columns(first_rows.select(_CONNECTION_HASH.alias("_conn"))).sort("_conn")
    rows = per_conn.explode("_row")
    # stmt_id numbers a source's statements in log order: when it never decreases over the frame (one source), the
    # log order of a connection's rows is their stmt_id order, and stmt_id need not be moved nor looked at.
    # Starts in whole seconds (MariaDB stamps the start's second; end = start + Query_time) order nothing within
    # a second: there the log order, the order the statements ended in, is the only order there is.
    if resolution_us(frame["start_ts"]) >= 1_000_000:
        keys = ["stmt_id"]
    else:
        keys = ["end_ts"] if frame["stmt_id"].is_sorted() else ["end_ts", "stmt_id"]
    carried = [k for k in keys if k != "end_ts"]
    columns = ["start_ts", *carried] + (["txn_id"] if with_txn_ids else [])
    ordered = frame.select("end_ts", *columns).with_columns(_flag_code(frame["sql"]).alias("_code"))[rows["_row"]]
    ordered = ordered.with_columns(rows["_conn"])
    if not _in_order(ordered, keys):
        ordered = ordered.sort("_conn", *keys, maintain_order=True)
    first = (pl.col("_conn") != pl.col("_conn").shift(1)).fill_null(True)

    def last_is_one(value: pl.Expr) -> pl.Expr:
        # -1 at a connection's first row when ``value`` is null there: one forward fill over the whole frame then
        # stays within each connection
        return value.when(first).then(pl.lit(-1, pl.Int8)).forward_fill() == 1

    autocommit_off = bool(((ordered["_code"] & _FLAG_BITS["_ac_off"]) != 0).any())
    state = _state_after(pl.col("_code"), last_is_one, autocommit_off)
    return ordered.with_columns(state).drop("_code", *carried), per_conn.height


def _in_order(rows: pl.DataFrame, keys: list[str]) -> bool:
    """Whether ``keys`` (compared in turn, nulls first) never decrease within a connection (``_conn``) of ``rows``."""
    earlier, tied = pl.lit(False), pl.lit(True)
    for key in keys:
        value = pl.col(key).to_physical().fill_null(_BEFORE_ALL)
        earlier, tied = earlier | (tied & (value < value.shift(1))), tied & (value == value.shift(1))
    return not rows.select((earlier & (pl.col("_conn") == pl.col("_conn").shift(1))).any()).item()


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
