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
    parts, n_classes = [], 0
    for engine, group in groups:
        dialect = DIALECT_OF_ENGINE.get(engine or "", "mysql")
        code, names, ids = _class_codes(group["sql"].fill_null(""), dialect)
        parts.append(group.with_columns(
            names.gather(code).alias("fingerprint"), ids.gather(code).alias("fp_id"),
            (code + n_classes).alias(CLASS), pl.lit(dialect).alias("dialect"),
        ))
        n_classes += names.len()
    frame = pl.concat(parts, how="vertical_relaxed") if parts else statements
    if len(parts) > 1:  # dialects may share a fingerprint: number the classes by fp_id
        frame = frame.with_columns(pl.col("fp_id").rank("dense").cast(pl.Int64).sub(1).alias(CLASS))
    frame = frame.with_columns(pl.coalesce(pl.col("plan_digest"), pl.col("plan_signature")).alias("plan_key"))
    if options.show_literals or CLASS not in frame.columns:
        return frame.with_columns(pl.col("sql").alias("sample_sql")).drop("dialect", CLASS, strict=False)
    return _redacted(frame).drop("dialect", CLASS)


CLASS = "_class"  # while fingerprinting: the row's fp_id as a number from 0


def _classes(texts: pl.Series, dialect: str) -> pl.DataFrame:
    """``fingerprint`` and ``fp_id`` of each text (see ``_class_codes``)."""
    code, names, ids = _class_codes(texts, dialect)
    return pl.DataFrame({"fingerprint": names.gather(code), "fp_id": ids.gather(code)})


def _class_codes(texts: pl.Series, dialect: str) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(each text's class number, each class's fingerprint, each class's fp_id), computed once per
    distinct text.

    Big logs repeat the same texts many times, and even distinct texts share a few classes:
    the rows are matched to their distinct text by a 64-bit hash (checked: every row equals the
    text it was matched to, else by the text itself), and the ids computed per class.
    """
    if texts.len() == 0:
        empty = pl.Series([], dtype=pl.String)
        return pl.Series([], dtype=pl.Int64), empty, empty
    text_code, distinct = _distinct(texts.hash(), texts)
    if not distinct.gather(text_code).equals(texts):  # a hash collision: match by text instead
        text_code, distinct = _distinct(texts, texts)
    class_of_text, names = sqlnorm.fingerprint_classes(distinct, dialect)
    ids = pl.Series([sqlnorm.fingerprint_id(name) for name in names.to_list()], dtype=pl.String)
    return class_of_text.gather(text_code), names, ids


def _distinct(keys: pl.Series, values: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(for each row the number of its distinct key, in first-seen order; the value of each key's first row)."""
    first = keys.is_first_distinct().arg_true()
    numbered = pl.DataFrame({"key": keys.gather(first), "number": pl.int_range(first.len(), dtype=pl.Int64, eager=True)})
    # a join finds each row's number faster than replace_strict (measured on 0.5 M rows)
    numbers = keys.to_frame("key").join(numbered, on="key", how="left", maintain_order="left")["number"]
    return numbers, values.gather(first)


SLOWEST = pl.col("row").get(pl.col("query_time_s").fill_null(-1.0).arg_max())


def _slowest_per(frame: pl.DataFrame, keys: list[str], columns: list[str]) -> pl.DataFrame:
    """The slowest row of each group (its keys and ``columns``), without sorting the big text columns."""
    picks = frame.select(*keys, "query_time_s").with_row_index("row").group_by(keys).agg(SLOWEST)
    return frame.select(*keys, *columns)[picks["row"].sort()]


def _redacted(frame: pl.DataFrame) -> pl.DataFrame:
    # Rows reach their class's values by a gather on the class number: joins would copy every text.
    samples = _slowest_per(frame.select(CLASS, "query_time_s", "sql", "dialect"), [CLASS], ["sql", "dialect"])
    redacted = pl.Series(
        "sample_sql",
        [sqlnorm.redact_literals(sql or "", dialect) for sql, dialect in samples.select("sql", "dialect").iter_rows()],
        dtype=pl.String,
    )
    sample_of_class = pl.zeros(samples.height, pl.Int64, eager=True).scatter(
        samples[CLASS], pl.int_range(samples.height, dtype=pl.Int64, eager=True)
    )
    sample_sql = redacted.gather(sample_of_class.gather(frame[CLASS]))
    frame = frame.with_columns(sample_sql.alias("sql"), sample_sql)
    has_plan = frame["plan"].is_not_null()
    if not has_plan.any():
        return frame
    # one group per (class, plan_key): the slowest row's plan, redacted, stands for the group's rows
    groups = (
        frame.select(CLASS, "plan_key", "query_time_s")
        .with_row_index("row")
        .filter(has_plan)
        .group_by(CLASS, "plan_key")
        .agg(pl.col("row"), SLOWEST.alias("slowest"))
    )
    plans = frame["plan"].gather(groups["slowest"])
    public = pl.Series([sqlnorm.redact_plan(plan) for plan in plans.to_list()], dtype=pl.String)
    members = groups.select("row", group=pl.int_range(pl.len(), dtype=pl.Int64)).explode("row")
    public_plan = public.gather(pl.zeros(frame.height, pl.Int64, eager=True).scatter(members["row"], members["group"]))
    return frame.with_columns(pl.when(has_plan).then(public_plan).alias("plan"))


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
            pl.col("digest").drop_nulls().first().alias("engine_digest"),
            pl.col("full_scan").fill_null(False).sum().alias("full_scans"),
            (~pl.col("success").fill_null(True)).sum().alias("errors"),
        )
        .with_columns((100.0 * pl.col("total_time_s") / db_time_s).alias("share_of_db_time_pct"))
        .sort("total_time_s", descending=True)
        .head(PROFILE_LIMIT)
    )
    columns = per_class.columns
    after = columns.index("lock_time_s") + 1
    for names in (_names_per_class(timed, "engine", "engines"), _names_per_class(timed, "db", "dbs", 5), _names_per_class(timed, "user", "users", 5)):
        per_class = per_class.join(names, on="fp_id", how="left", maintain_order="left")
    per_class = per_class.select(*columns[:after], "engines", "dbs", "users", *columns[after:])
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


def _names_per_class(timed: pl.DataFrame, column: str, name: str, limit: int | None = None) -> pl.DataFrame:
    """fp_id and the sorted distinct non-null values of ``column`` (the first ``limit``), from the distinct
    (fp_id, value) pairs: cheaper than a unique() in each group of the whole frame."""
    values = pl.col(column).drop_nulls().sort()
    return timed.group_by("fp_id", column).agg().group_by("fp_id").agg((values if limit is None else values.head(limit)).alias(name))


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
