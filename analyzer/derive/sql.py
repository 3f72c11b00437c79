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

    Unless ``show_literals``, ``sql`` and ``plan`` are replaced here, so that nothing downstream
    (rules, metrics, report) can show a literal by accident: ``sql`` and ``sample_sql`` become the
    redacted text of the fingerprint's slowest execution, ``plan`` the redacted plan of the
    slowest execution with the same plan. Redacting a few hundred representatives instead of
    every row is what keeps a 200 MB log fast.
    """
    engines = statements["engine"].unique(maintain_order=True)
    if engines.len() <= 1:
        groups = [(engines[0] if engines.len() else None, statements)]
    else:
        groups = [(engine, group) for (engine,), group in statements.group_by("engine", maintain_order=True)]
    parts = []
    for engine, group in groups:
        dialect = DIALECT_OF_ENGINE.get(engine or "", "mysql")
        classes = _classes(group["sql"].fill_null(""), dialect)
        parts.append(group.hstack(classes).with_columns(pl.lit(dialect).alias("dialect")))
    frame = pl.concat(parts, how="vertical_relaxed") if parts else statements
    frame = frame.with_columns(pl.coalesce(pl.col("plan_digest"), pl.col("plan_signature")).alias("plan_key"))
    if options.show_literals:
        return frame.with_columns(pl.col("sql").alias("sample_sql")).drop("dialect")
    return _redacted(frame).drop("dialect")


def _classes(texts: pl.Series, dialect: str) -> pl.DataFrame:
    """``fingerprint`` and ``fp_id`` of each text, computed once per distinct text.

    Big logs repeat the same texts many times, and even distinct texts share a few classes:
    the rows are matched to their distinct text by a 64-bit hash (checked: as many distinct
    hashes as texts, else by the text itself), and the ids computed per class.
    """
    hashes = texts.hash()
    first = hashes.is_first_distinct()
    distinct = pl.DataFrame({"key": hashes.filter(first), "text": texts.filter(first)})
    rows = hashes.alias("key").to_frame()
    if distinct.height != texts.n_unique():  # a hash collision: match by text instead
        distinct = pl.DataFrame({"key": texts.unique(maintain_order=True)}).with_columns(pl.col("key").alias("text"))
        rows = texts.alias("key").to_frame()
    distinct = distinct.with_columns(sqlnorm.fingerprint_series(distinct["text"], dialect).alias("fingerprint"))
    names = distinct["fingerprint"].unique()
    ids = pl.DataFrame({"fingerprint": names, "fp_id": [sqlnorm.fingerprint_id(name) for name in names.to_list()]})
    per_text = distinct.join(ids, on="fingerprint", how="left").select("key", "fingerprint", "fp_id")
    return rows.join(per_text, on="key", how="left", maintain_order="left").drop("key")


def _slowest_per(frame: pl.DataFrame, keys: list[str], columns: list[str]) -> pl.DataFrame:
    """The slowest row of each group (its keys and ``columns``), without sorting the big text columns."""
    picks = (
        frame.select(*keys, "query_time_s")
        .with_row_index("row")
        .group_by(keys)
        .agg(pl.col("row").get(pl.col("query_time_s").fill_null(-1.0).arg_max()))
    )
    return frame.select(*keys, *columns)[picks["row"].sort()]


def _redacted(frame: pl.DataFrame) -> pl.DataFrame:
    # The joins run on the key columns only: joining the whole frame would copy every text.
    samples = _slowest_per(frame.select("fp_id", "query_time_s", "sql", "dialect"), ["fp_id"], ["sql", "dialect"])
    samples = samples.with_columns(
        pl.Series("sample_sql", [sqlnorm.redact_literals(sql or "", dialect) for sql, dialect in samples.select("sql", "dialect").iter_rows()], dtype=pl.String)
    ).select("fp_id", "sample_sql")
    sample_sql = frame.select("fp_id").join(samples, on="fp_id", how="left", maintain_order="left")["sample_sql"]
    frame = frame.with_columns(sample_sql.alias("sql"), sample_sql)
    with_plan = frame.select("fp_id", "plan_key", "query_time_s", "plan").filter(pl.col("plan").is_not_null())
    if with_plan.height == 0:
        return frame
    plans = _slowest_per(with_plan, ["fp_id", "plan_key"], ["plan"])
    plans = plans.with_columns(pl.Series("public_plan", [sqlnorm.redact_plan(p) for p in plans["plan"].to_list()], dtype=pl.String)).drop("plan")
    public_plan = frame.select("fp_id", "plan_key").join(
        plans, on=["fp_id", "plan_key"], how="left", nulls_equal=True, maintain_order="left"
    )["public_plan"]
    return frame.with_columns(pl.when(pl.col("plan").is_not_null()).then(public_plan).alias("plan"))


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
    timed = _timed(statements)
    if timed.height == 0:
        return []
    db_time_s = float(timed["query_time_s"].sum()) or 1.0
    per_class = (
        timed.group_by("fp_id")  # one fingerprint per fp_id: grouping by the long text too costs time
        .agg(
            pl.col("fingerprint").first(),
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
    worst = _slowest_per(timed, ["fp_id"], ["sample_sql", "query_time_s", "end_ts", "source", "line"])
    plans = (
        timed.select("fp_id", "plan_key", "query_time_s", "end_ts", "plan")
        .filter(pl.col("plan_key").is_not_null())
        .group_by("fp_id", "plan_key")
        .agg(*_latency_aggregations(), pl.col("plan").drop_nulls().first().alias("plan"))
        .sort("fp_id", "first_seen", "plan_key")  # plan_key: ties in a stable order
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


def _timed(statements: pl.DataFrame) -> pl.DataFrame:
    """The statements with a query time (without copying the frame when all have one)."""
    if statements["query_time_s"].null_count() == 0:
        return statements
    return statements.filter(pl.col("query_time_s").is_not_null())


def latency_timeline(statements: pl.DataFrame, fp_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """p50/p99 and calls per time bucket for the given fingerprints (for the report's line charts)."""
    timed = statements.select("fp_id", "end_ts", "query_time_s").filter(
        pl.col("query_time_s").is_not_null(), pl.col("end_ts").is_not_null(), pl.col("fp_id").is_in(fp_ids)
    )
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
    timed = _timed(frame)
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
