"""The DB side of the time account: the statement log (when complete), statement summaries or exporter
counters of DB time -> a :class:`~dbdiag.derive.time_sides.Side` (see :mod:`dbdiag.derive.time_accounting`)."""

from __future__ import annotations


import polars as pl

from dbdiag import tables as t
from dbdiag.derive.histogram import counter_deltas
from dbdiag.derive.sql import is_sleep
from dbdiag.derive.time_sides import COMPLETE_LOG_MAX_MIN_S, COMPLETE_LOG_MIN_SHARE, DB_TIME_COUNTERS, QPS_ONLY_COUNTERS, THRESHOLD_SETTINGS, Side
from dbdiag.derive.time_user_side import statements_sent

def db_side(tables: dict[str, pl.DataFrame], notes: list[str]) -> tuple[Side | None, str]:
    reasons: list[str] = []
    statements = tables.get(t.STATEMENT)
    if statements is not None:
        timed = db_statements(statements)
        if timed.height:
            complete, why = log_completeness(timed, threshold_settings(tables), statements_sent(tables))
            if complete:
                return _from_statements(timed), ""
            reasons.append(why)
            notes.append(why)
        else:
            reasons.append("the statement log has no durations")
    metrics = tables.get(t.METRIC_SAMPLE)
    if metrics is not None:
        side = _from_db_metrics(metrics)
        if side is not None:
            return side, ""
    summary = _from_statement_summary(tables.get(t.STATEMENT_SUMMARY))
    if summary is not None:
        return summary, ""
    if metrics is not None:
        qps_only = [m for m in QPS_ONLY_COUNTERS if metrics.filter(pl.col("metric") == m).height]
        if qps_only:
            reasons.append(
                f"{qps_only[0]} gives the DB's QPS but no latency: DB time needs a latency source as well "
                "(a slow log with long_query_time=0, or mysqld_exporter --collect.perf_schema.eventsstatements)"
            )
    if not reasons:
        reasons.append(
            "no DB time: no statement log with durations, no DB-time counter (" + ", ".join(c.metric for c in DB_TIME_COUNTERS) + ")"
        )
    return None, "; ".join(reasons)


def db_statements(statements: pl.DataFrame) -> pl.DataFrame:
    """The statements whose durations are DB time: timed, placed, not the server's own.

    The one place time accounting chooses statements: a statement that only sleeps (``SELECT SLEEP(2)``,
    ``pg_sleep``) is not work and is left out here.
    """
    return statements.filter(
        pl.col("query_time_s").is_not_null() & pl.col("start_ts").is_not_null() & ~pl.col("is_internal").fill_null(False)
        & ~is_sleep(pl.col("sql"))
    )


def log_completeness(statements: pl.DataFrame, settings: dict[str, str] | None = None,
                     expected: int | None = None) -> tuple[bool, str]:
    """Does the statement log hold every statement? (answer, why), decided from the data.

    A log with a duration threshold (slow log) has no statement shorter than it, and a log of
    every statement always has sub-millisecond ones. When the count the load test sent is
    known, the log must hold at least :data:`COMPLETE_LOG_MIN_SHARE` of it (sampling such as
    ``log_slow_rate_limit`` or ``log_statement_sample_rate`` drops statements at any duration).
    """
    smallest = statements["query_time_s"].min()
    # an expression: statements["source"] would write out the column polars keeps as one repeated value
    sources = ", ".join(statements.select(pl.col("source").unique(maintain_order=True)).to_series().to_list())
    told = "".join(f"; {name} = {value}" for name, value in (settings or {}).items())
    if smallest is None:
        return False, f"{sources}: no statement durations"
    if smallest > COMPLETE_LOG_MAX_MIN_S:
        return False, (
            f"{sources} is a slow log: its shortest statement took {smallest * 1000:.3f} ms (a log of every statement "
            f"has some under {COMPLETE_LOG_MAX_MIN_S * 1000:g} ms){told}; the statements under its threshold are "
            "missing, so it is not used as DB time"
        )
    if expected and statements.height < COMPLETE_LOG_MIN_SHARE * expected:
        return False, (
            f"{sources} holds {statements.height:,} statements where the load test sent {expected:,}: the log is "
            f"sampled or filtered{told}, so it is not used as DB time"
        )
    return True, f"{sources}: shortest statement {smallest * 1000:.3f} ms{told}"


def threshold_settings(tables: dict[str, pl.DataFrame]) -> dict[str, str]:
    settings = tables.get(t.DB_SETTING)
    if settings is None:
        return {}
    rows = settings.filter(pl.col("name").str.to_lowercase().is_in(THRESHOLD_SETTINGS) & (pl.col("kind") != "status"))
    return {row["name"].lower(): row["value"] for row in rows.iter_rows(named=True)}


def _from_statements(statements: pl.DataFrame) -> Side:
    events = statements.select(
        pl.col("start_ts").alias("ts"), pl.col("query_time_s").alias("seconds"), "source", pl.lit(1.0).alias("weight"),
        "conn_id", pl.coalesce("end_ts", "start_ts").alias("end_ts"),
    )
    return Side("db", "statement-log", events=events,
                coverage=(events["ts"].min(), events["end_ts"].max()))


def _from_statement_summary(summary: pl.DataFrame | None) -> Side | None:
    """TiDB statements summary rows: each row's ``sum_latency_s`` between its first and last execution."""
    if summary is None:
        return None
    rows = summary.filter(pl.col("sum_latency_s").is_not_null() & pl.col("first_seen").is_not_null())
    if not rows.height:
        return None
    events = rows.select(
        pl.col("first_seen").alias("ts"), pl.col("sum_latency_s").alias("seconds"), "source", pl.lit(1.0).alias("weight"),
        pl.coalesce("last_seen", "first_seen").alias("end_ts"),
    )
    return Side("db", "statement-summary", events=events, what="Σ sum_latency of statement digests (statements summary)",
                coverage=(events["ts"].min(), events["end_ts"].max()))


def _from_db_metrics(metrics: pl.DataFrame) -> Side | None:
    for counter in DB_TIME_COUNTERS:
        series = metrics.filter(pl.col("metric") == counter.metric)
        if counter.exclude_labels_re:
            series = series.filter(~pl.col("labels").str.contains(counter.exclude_labels_re))
        if series.group_by("source", "labels").len()["len"].max() is None:
            continue
        deltas = counter_deltas(series)
        if not deltas.height:
            continue
        events = deltas.select(
            pl.col("start_ts").alias("ts"), pl.col("delta").alias("seconds"), "source", pl.col("delta").alias("weight"),
            pl.col("ts").alias("end_ts"),
        )
        return Side("db", "db-time-metric", events=events, what=counter.kind, coverage=(series["ts"].min(), series["ts"].max()), counter=counter)
    return None
