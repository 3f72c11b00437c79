"""Statements -> fingerprinted statements and the top-SQL profile (what pt-query-digest prints, per engine).

Input: the ``statement`` table (all engines). Outputs:

- derived table ``statements``: the statement rows plus ``fingerprint``, ``fp_id`` (pt-query-digest's
  checksum scheme), ``plan_key`` (Plan_digest, else plan signature) and ``sample_sql`` (the SQL with
  literals replaced unless ``show_literals``). Rules read SQL only from ``sample_sql``.
- ``metrics.sql_profile``: a list, heaviest fingerprint first, each with ``fingerprint``, ``calls``,
  ``total_time_s`` (fixed names), latency percentiles, share of DB time, rows, lock time, first/last
  seen, per-plan breakdown and the worst sample.
- chart data for latency over time of the top fingerprints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dbdiag import sqlnorm
from dbdiag import tables as t

DIALECT_OF_ENGINE = {"mysql": "mysql", "mariadb": "mysql", "percona": "mysql", "tidb": "tidb", "postgresql": "postgresql"}
PROFILE_LIMIT = 50
TIMELINE_TOP = 5
TIMELINE_BUCKETS = 60


@dataclass(frozen=True)
class SqlOptions:
    show_literals: bool = False


def fingerprinted(statements: pl.DataFrame, options: SqlOptions) -> pl.DataFrame:
    """Add fingerprint, fp_id, plan_key and sample_sql; fingerprints are computed per engine dialect.

    Unless ``show_literals``, ``sql`` and ``plan`` are replaced by their redacted forms here, so
    that nothing downstream (rules, metrics, report) can show a literal by accident.
    """
    parts = []
    for (engine,), group in statements.group_by("engine", maintain_order=True):
        dialect = DIALECT_OF_ENGINE.get(engine or "", "mysql")
        sql = group["sql"].fill_null("")
        fingerprints = sqlnorm.fingerprint_series(sql, dialect)
        samples = sql if options.show_literals else sqlnorm.redact_series(sql, dialect)
        parts.append(group.with_columns(fingerprints.alias("fingerprint"), samples.alias("sample_sql")))
    frame = pl.concat(parts, how="vertical_relaxed") if parts else statements
    if not options.show_literals:
        frame = frame.with_columns(pl.col("sample_sql").alias("sql"), redacted_plans(frame["plan"]))
    unique_fingerprints = frame["fingerprint"].unique()
    ids = pl.DataFrame(
        {"fingerprint": unique_fingerprints, "fp_id": [sqlnorm.fingerprint_id(f) for f in unique_fingerprints.to_list()]}
    )
    return frame.join(ids, on="fingerprint", how="left").with_columns(
        pl.coalesce(pl.col("plan_digest"), pl.col("plan_signature")).alias("plan_key")
    )


def redacted_plans(plans: pl.Series) -> pl.Series:
    """Plans with their compared values replaced, computed once per distinct plan text."""
    distinct = plans.drop_nulls().unique()
    if distinct.len() == 0:
        return plans.alias("plan")
    redacted = pl.Series([sqlnorm.redact_plan(text) for text in distinct.to_list()], dtype=pl.String)
    return plans.replace_strict(distinct, redacted, default=None, return_dtype=pl.String).alias("plan")


def public_plan_nodes(nodes: pl.DataFrame, options: SqlOptions) -> pl.DataFrame:
    """Plan nodes whose filter/condition text has its literals replaced (unless ``show_literals``)."""
    if options.show_literals or nodes.height == 0:
        return nodes
    filters = nodes["filter"]
    distinct = filters.drop_nulls().unique()
    redacted = pl.Series([sqlnorm.redact_plan(text) for text in distinct.to_list()], dtype=pl.String)
    return nodes.with_columns(filters.replace_strict(distinct, redacted, default=None, return_dtype=pl.String).alias("filter"))


def _latency_aggregations() -> list[pl.Expr]:
    q = pl.col("query_time_s")
    return [
        pl.len().alias("calls"),
        q.sum().alias("total_time_s"),
        q.mean().alias("avg_time_s"),
        q.quantile(0.5, "linear").alias("p50_s"),
        q.quantile(0.95, "linear").alias("p95_s"),
        q.quantile(0.99, "linear").alias("p99_s"),
        q.max().alias("max_s"),
        pl.col("end_ts").min().alias("first_seen"),
        pl.col("end_ts").max().alias("last_seen"),
    ]


def sql_profile(statements: pl.DataFrame) -> list[dict[str, Any]]:
    """Per fingerprint, heaviest first (by total time), at most PROFILE_LIMIT entries."""
    timed = statements.filter(pl.col("query_time_s").is_not_null())
    if timed.height == 0:
        return []
    db_time_s = float(timed["query_time_s"].sum()) or 1.0
    per_class = (
        timed.group_by("fp_id", "fingerprint")
        .agg(
            *_latency_aggregations(),
            pl.col("rows_examined").sum().alias("rows_examined"),
            pl.col("rows_sent").sum().alias("rows_sent"),
            pl.col("rows_affected").sum().alias("rows_affected"),
            pl.col("lock_time_s").sum().alias("lock_time_s"),
            pl.col("engine").drop_nulls().unique().sort().alias("engines"),
            pl.col("db").drop_nulls().unique().sort().head(5).alias("dbs"),
            pl.col("user").drop_nulls().unique().sort().head(5).alias("users"),
            pl.col("digest").drop_nulls().first().alias("engine_digest"),
            pl.col("full_scan").fill_null(False).sum().alias("full_scans"),
            (~pl.col("success").fill_null(True)).sum().alias("errors"),
        )
        .with_columns((100.0 * pl.col("total_time_s") / db_time_s).alias("share_of_db_time_pct"))
        .sort("total_time_s", descending=True)
        .head(PROFILE_LIMIT)
    )
    worst = (
        timed.sort("query_time_s", descending=True)
        .group_by("fp_id", maintain_order=True)
        .first()
        .select("fp_id", "sample_sql", "query_time_s", "end_ts", "source", "line")
    )
    plans = (
        timed.filter(pl.col("plan_key").is_not_null())
        .group_by("fp_id", "plan_key")
        .agg(*_latency_aggregations(), pl.col("plan").drop_nulls().first().alias("plan"))
        .sort("fp_id", "first_seen")
    )
    plans_by_class = {fp_id: group.drop("fp_id").to_dicts() for (fp_id,), group in plans.group_by("fp_id")}
    worst_by_class = {row["fp_id"]: row for row in worst.to_dicts()}
    profile = []
    for row in per_class.to_dicts():
        sample = worst_by_class.get(row["fp_id"], {})
        row["worst_sample"] = {
            "sql": sample.get("sample_sql"),
            "query_time_s": sample.get("query_time_s"),
            "at": sample.get("end_ts"),
            "where": f"{sample.get('source')}:{sample.get('line')}" if sample else None,
        }
        row["plans"] = plans_by_class.get(row["fp_id"], [])
        profile.append(row)
    return profile


def latency_timeline(statements: pl.DataFrame, fp_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """p50/p99 and calls per time bucket for the given fingerprints (for the report's line charts)."""
    timed = statements.filter(pl.col("query_time_s").is_not_null(), pl.col("end_ts").is_not_null(), pl.col("fp_id").is_in(fp_ids))
    if timed.height == 0:
        return {}
    start, end = timed["end_ts"].min(), timed["end_ts"].max()
    span_s = max((end - start).total_seconds(), 1.0)
    bucket_s = max(1, int(span_s // TIMELINE_BUCKETS) + 1)
    bucketed = (
        timed.with_columns(pl.col("end_ts").dt.truncate(f"{bucket_s}s").alias("bucket"))
        .group_by("fp_id", "bucket")
        .agg(
            pl.len().alias("calls"),
            pl.col("query_time_s").quantile(0.5, "linear").alias("p50_s"),
            pl.col("query_time_s").quantile(0.99, "linear").alias("p99_s"),
        )
        .sort("fp_id", "bucket")
    )
    return {fp_id: group.drop("fp_id").to_dicts() for (fp_id,), group in bucketed.group_by("fp_id", maintain_order=True)}


def derive_sql(tables: dict[str, pl.DataFrame], options: SqlOptions) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    statements = tables.get(t.STATEMENT)
    if statements is None or statements.height == 0:
        return None, {}
    frame = fingerprinted(statements, options)
    profile = sql_profile(frame)
    top_ids = [row["fp_id"] for row in profile[:TIMELINE_TOP]]
    metrics = {
        "sql_profile": profile,
        "sql_summary": _summary(frame, options),
        "sql_timeline": latency_timeline(frame, top_ids),
    }
    return frame, metrics


def _summary(frame: pl.DataFrame, options: SqlOptions) -> dict[str, Any]:
    timed = frame.filter(pl.col("query_time_s").is_not_null())
    return {
        "statements": frame.height,
        "timed_statements": timed.height,
        "fingerprints": frame["fp_id"].n_unique(),
        "db_time_s": float(timed["query_time_s"].sum()) if timed.height else 0.0,
        "engines": sorted(e for e in frame["engine"].drop_nulls().unique().to_list()),
        "first_seen": frame["end_ts"].min(),
        "last_seen": frame["end_ts"].max(),
        "literals": "shown (--show-literals)" if options.show_literals else "replaced by placeholders",
        "literals_shown": options.show_literals,
    }
