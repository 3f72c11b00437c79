"""Statements -> fingerprinted statements and the top-SQL profile (what pt-query-digest prints, per engine).

Input: the ``statement`` table (all engines). Outputs:

- derived table ``statements``: the statement rows plus ``fingerprint``, ``fp_id`` (pt-query-digest's
  checksum scheme), ``plan_key`` (Plan_digest, else plan signature), ``sample_sql`` (the SQL with
  literals replaced unless ``show_literals``), ``statement_class`` ("sleep" for a statement that only
  sleeps, see :data:`SLEEP_RE`; else "work") and ``exec_time_s`` (``query_time_s`` minus the lock wait
  ``lock_time_s``, at least 0: the time the statement worked; every SQL rule judges plans on it).
  Rules read SQL only from ``sample_sql``.
- ``metrics.sql_profile``: a list, heaviest fingerprint first, each with ``fingerprint``, ``calls``,
  ``total_time_s`` (fixed names), latency percentiles, share of DB time, rows, lock time, execution
  time, first/last seen, per-plan breakdown and the worst sample. Sleep statements are not in it:
  DB time, percentiles and shares count work only; ``metrics.sql_summary.sleep`` counts them apart.
- chart data for latency over time of the top fingerprints.

>>> frame = pl.DataFrame({"sql": ["DO SLEEP(2)", "select pg_sleep_for('1 s')", "SELECT sleep(1) FROM t", "SELECT BENCHMARK(9, 1)"]})
>>> frame.select(is_sleep(pl.col("sql"))).to_series().to_list()
[True, True, False, False]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from dbdiag import redact_text, sqlnorm
from dbdiag import tables as t
from dbdiag.derive.statement_targets import target_tables
from dbdiag.distinct import numbered
from dbdiag.units import short_sample
from dbdiag.vocabulary.dialects import DEFAULT_SQLNORM_DIALECT, SQLNORM_DIALECT_OF_ENGINE

PROFILE_LIMIT = 50
# Statements longer than this are fingerprinted (and sampled) on their first FINGERPRINT_MAX_BYTES:
# a class of its own, named with CUT_NOTE and counted in metrics.sql_summary.statements_cut.
FINGERPRINT_MAX_BYTES = 4 * 1024 * 1024
CUT_NOTE = f" ... [statement cut at {FINGERPRINT_MAX_BYTES // (1024 * 1024)} MB for fingerprinting]"
TIMELINE_TOP = 5
TIMELINE_BUCKETS = 60

# A statement that does nothing but wait: MySQL/MariaDB ``SELECT SLEEP(n)`` / ``DO SLEEP(n)``, PostgreSQL
# ``pg_sleep``/``pg_sleep_for``/``pg_sleep_until``, SQL Server ``WAITFOR DELAY``/``TIME``; text or
# fingerprint. A sleep inside a statement that reads tables (``... WHERE SLEEP(1)``) is work: it holds
# that statement's locks. ``BENCHMARK(n, expr)`` is work too: it burns CPU on the server.
SLEEP_RE = (
    r"(?i)^\s*(?:(?:select|do)\s+(?:pg_)?sleep(?:_for|_until)?\s*\([^()]*\)(?:\s*(?:as\s+)?\w+)?(?:\s+from\s+dual)?"
    r"|waitfor\s+(?:delay|time)\s+\S+)\s*;?\s*$"
)
SLEEP, WORK = "sleep", "work"


def is_sleep(sql: pl.Expr) -> pl.Expr:
    """Whether each statement text (or fingerprint) only sleeps (:data:`SLEEP_RE`); null text is not sleep.

    For the steps that read the parsed ``statement`` table (time accounting, idle gaps): filter with
    ``~is_sleep(pl.col("sql"))`` to count work only, as the derived ``statements`` do.
    """
    return sql.str.contains(SLEEP_RE).fill_null(False)


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
    return _fingerprinted(statements, options, _engines(statements)).drop(CLASS, PLAN)


def _engines(statements: pl.DataFrame) -> pl.Series:
    """The distinct engines, in first-seen order (by a comparison when all rows have the first one)."""
    engine = statements["engine"]
    if engine.len() and engine.null_count() == 0 and (engine == engine[0]).all():
        return engine.head(1)
    return engine.unique(maintain_order=True)


def _fingerprinted(statements: pl.DataFrame, options: SqlOptions, engines: pl.Series) -> pl.DataFrame:
    """:func:`fingerprinted` with the ``CLASS`` and ``PLAN`` columns kept (the metrics group by them)."""
    if engines.len() <= 1:
        groups = [(engines[0] if engines.len() else None, statements)]
    else:
        groups = [(engine, group) for (engine,), group in statements.group_by("engine", maintain_order=True)]
    parts, n_classes = [], 0
    for engine, group in groups:
        dialect = SQLNORM_DIALECT_OF_ENGINE.get(engine or "", DEFAULT_SQLNORM_DIALECT)
        code, names, ids = _class_codes(group["sql"].fill_null(""), dialect)
        sleeps = names.to_frame("fingerprint").select(is_sleep(pl.col("fingerprint"))).to_series()  # once per class
        parts.append(group.with_columns(
            names.gather(code).alias("fingerprint"), ids.gather(code).alias("fp_id"),
            (code + n_classes).alias(CLASS), pl.lit(dialect).alias("dialect"),
            pl.when(sleeps.gather(code)).then(pl.lit(SLEEP)).otherwise(pl.lit(WORK)).alias("statement_class"),
        ))
        n_classes += names.len()
    frame = pl.concat(parts, how="vertical_relaxed") if parts else statements
    if len(parts) > 1:  # dialects may share a fingerprint: number the classes by fp_id
        frame = frame.with_columns(pl.col("fp_id").rank("dense").cast(pl.Int64).sub(1).alias(CLASS))
    frame = _with_plans(frame.with_columns(
        pl.coalesce(pl.col("plan_digest"), pl.col("plan_signature")).alias("plan_key"), _exec_time().alias("exec_time_s"),
        target_tables(pl.col("sql")),  # from each statement's own text: the sample below is one per fingerprint
    ))
    if options.show_literals:
        return frame.with_columns(_cut_sql(pl.col("sql")).alias("sample_sql")).drop("dialect")
    return _redacted(frame).drop("dialect")


def _exec_time() -> pl.Expr:
    """Query time minus lock wait (null lock time: none known), never below 0; null without a query time."""
    return (pl.col("query_time_s") - pl.col("lock_time_s").fill_null(0.0)).clip(lower_bound=0.0)


def _too_long(sql: pl.Expr) -> pl.Expr:
    return sql.str.len_bytes() > FINGERPRINT_MAX_BYTES


def _cut_sql(sql: pl.Expr) -> pl.Expr:
    """``sql`` cut to its first FINGERPRINT_MAX_BYTES (about: characters are not split) and CUT_NOTE where it is longer."""
    return pl.when(_too_long(sql)).then(sql.str.slice(0, FINGERPRINT_MAX_BYTES) + CUT_NOTE).otherwise(sql)


def _cut_text(sql: str) -> tuple[str, str]:
    """(``sql`` or its first FINGERPRINT_MAX_BYTES characters, CUT_NOTE or "")."""
    if len(sql) <= FINGERPRINT_MAX_BYTES // 4 or len(sql.encode("utf-8", "surrogatepass")) <= FINGERPRINT_MAX_BYTES:
        return sql, ""
    return sql[:FINGERPRINT_MAX_BYTES], CUT_NOTE


# While deriving, groups are numbered: grouping by a number spares hashing the texts again.
CLASS = "_class"  # the row's fp_id as a number from 0
PLAN = "_plan"  # the row's (class, plan_key) pair as a number from 0; null for a row without plan and plan_key


def _with_plans(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` (with ``CLASS``) and its ``PLAN`` column."""
    rows = frame.select(pl.col("plan_key").is_not_null() | pl.col("plan").is_not_null()).to_series().arg_true()
    numbers, _ = numbered(frame.select(CLASS, "plan_key")[rows].select(pl.struct(pl.all())).to_series())
    return frame.with_columns(pl.repeat(None, frame.height, dtype=pl.Int64, eager=True).scatter(rows, numbers).alias(PLAN))


def _classes(texts: pl.Series, dialect: str) -> pl.DataFrame:
    """``fingerprint`` and ``fp_id`` of each text (see ``_class_codes``)."""
    code, names, ids = _class_codes(texts, dialect)
    return pl.DataFrame({"fingerprint": names.gather(code), "fp_id": ids.gather(code)})


def _class_codes(texts: pl.Series, dialect: str) -> tuple[pl.Series, pl.Series, pl.Series]:
    """(each text's class number, each class's fingerprint, each class's fp_id).

    Big logs repeat the same few classes: ``fingerprint_classes`` gives each row its class number
    without a fingerprint text per row, and the ids are computed once per class.
    """
    if texts.len() == 0:
        empty = pl.Series([], dtype=pl.String)
        return pl.Series([], dtype=pl.Int64), empty, empty
    cut = texts.to_frame("sql").select(_too_long(pl.col("sql"))).to_series()
    if cut.any():  # the long ones are classed on their beginning, apart from the statements that end there
        texts = texts.to_frame("sql").select(pl.when(cut).then(pl.col("sql").str.slice(0, FINGERPRINT_MAX_BYTES)).otherwise(pl.col("sql"))).to_series()
    class_of_text, names = sqlnorm.fingerprint_classes(texts, dialect)
    if cut.any():
        class_of_text, kept = numbered(class_of_text + cut.cast(pl.Int64) * names.len())
        names = pl.concat([names, names + CUT_NOTE]).gather(kept)
    ids = pl.Series([sqlnorm.fingerprint_id(name) for name in names.to_list()], dtype=pl.String)
    return class_of_text, names, ids


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
        [_redacted_sample(sql or "", dialect) for sql, dialect in samples.select("sql", "dialect").iter_rows()],
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
        frame.select(PLAN, "query_time_s").with_row_index("row").filter(has_plan).group_by(PLAN).agg(SLOWEST.alias("slowest"))
    )
    plans = frame["plan"].gather(groups["slowest"])
    public = pl.Series([sqlnorm.redact_plan(plan) for plan in plans.to_list()], dtype=pl.String)
    public_of_group = pl.repeat(None, frame[PLAN].max() + 1, dtype=pl.String, eager=True).scatter(groups[PLAN], public)
    return frame.with_columns(pl.when(has_plan).then(public_of_group.gather(frame[PLAN])).alias("plan"))


def _redacted_sample(sql: str, dialect: str) -> str:
    """``sql`` with its literals replaced, cut like its fingerprint (a literal the cut splits is replaced to the end)."""
    kept, note = _cut_text(sql)
    return sqlnorm.redact_literals(kept, dialect) + note


def public_plan_nodes(nodes: pl.DataFrame, options: SqlOptions) -> pl.DataFrame:
    """Plan nodes whose filter/condition text has its literals replaced (unless ``show_literals``)."""
    if options.show_literals or nodes.height == 0:
        return nodes
    filters = nodes["filter"]
    distinct = filters.drop_nulls().unique()
    redacted = pl.Series([sqlnorm.redact_plan_filter(text) for text in distinct.to_list()], dtype=pl.String)
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


_LATENCY = [expr.meta.output_name() for expr in _latency_aggregations()]


def sql_profile(statements: pl.DataFrame) -> list[dict[str, Any]]:
    """Per fingerprint, heaviest first (by total time), at most PROFILE_LIMIT entries."""
    return _profile(_numbered(statements))[0]


def _numbered(statements: pl.DataFrame) -> pl.DataFrame:
    """The fingerprinted statements with ``CLASS`` (numbered by fp_id) and ``PLAN``, unless they have them."""
    if CLASS in statements.columns:
        return statements
    return _with_plans(statements.with_columns(pl.col("fp_id").rank("dense").cast(pl.Int64).sub(1).alias(CLASS)))


def _profile(statements: pl.DataFrame) -> tuple[list[dict[str, Any]], list[int]]:
    """(:func:`sql_profile`, the class number of each of its entries)."""
    timed = _timed(statements)
    if timed.height == 0:
        return [], []
    db_time_s = float(timed["query_time_s"].sum()) or 1.0
    per_class = (
        timed.with_row_index("row")
        .group_by(CLASS)
        .agg(
            pl.col("fp_id").first(),
            pl.col("fingerprint").first(),
            *_latency_aggregations(),
            pl.col("rows_examined").sum().alias("rows_examined"),
            pl.col("rows_sent").sum().alias("rows_sent"),
            pl.col("rows_affected").sum().alias("rows_affected"),
            pl.col("lock_time_s").sum().alias("lock_time_s"),
            pl.col("exec_time_s").sum().alias("exec_time_s"),
            pl.col("digest").drop_nulls().first().alias("engine_digest"),
            pl.col("full_scan").fill_null(False).sum().alias("full_scans"),
            (~pl.col("success").fill_null(True)).sum().alias("errors"),
            SLOWEST.alias("worst_row"),
        )
        .with_columns((100.0 * pl.col("total_time_s") / db_time_s).alias("share_of_db_time_pct"))
        .sort("total_time_s", "fp_id", descending=[True, False])  # fp_id: ties in a stable order
    )
    n_classes, per_class = per_class.height, per_class.head(PROFILE_LIMIT)
    top = timed.filter(pl.col(CLASS).is_in(per_class[CLASS].to_list())) if n_classes > per_class.height else timed
    columns = per_class.columns
    after = columns.index("exec_time_s") + 1
    for column, name, limit in (("engine", "engines", None), ("db", "dbs", 5), ("user", "users", 5)):
        per_class = _with_names(per_class, top, column, name, limit)
    per_class = per_class.select(*columns[:after], "engines", "dbs", "users", *columns[after:])
    worst = timed.select("sample_sql", "query_time_s", "end_ts", "source", "line")[per_class["worst_row"]]
    plans = (
        top.select(CLASS, PLAN, "plan_key", "query_time_s", "end_ts", pl.col("plan").is_not_null().alias("has_plan"))
        .with_row_index("row")
        .filter(pl.col("plan_key").is_not_null())
        .group_by(PLAN)
        .agg(
            pl.col(CLASS).first(),
            pl.col("plan_key").first(),
            *_latency_aggregations(),
            pl.col("row").get(pl.col("has_plan").arg_max()).alias("plan_row"),  # the first with a plan, if any
        )
        .sort(CLASS, "first_seen", "plan_key")  # plan_key: ties in a stable order
    )
    plans = plans.select(CLASS, "plan_key", *_LATENCY, top["plan"].gather(plans["plan_row"]).alias("plan"))
    plans_by_class: dict[int, list[dict[str, Any]]] = {}
    for plan in plans.to_dicts():
        plans_by_class.setdefault(plan.pop(CLASS), []).append(plan)
    profile = []
    for row, sample in zip(per_class.drop("worst_row").to_dicts(), worst.to_dicts()):
        number = row.pop(CLASS)
        row["worst_sample"] = {
            "sql": short_sample(sample["sample_sql"]),
            "query_time_s": sample["query_time_s"],
            "at": sample["end_ts"],
            "where": f"{sample['source']}:{sample['line']}",
        }
        row["plans"] = plans_by_class.get(number, [])
        profile.append(row)
    return profile, per_class[CLASS].to_list()


def _with_names(per_class: pl.DataFrame, timed: pl.DataFrame, column: str, name: str, limit: int | None) -> pl.DataFrame:
    """``per_class`` and, as ``name``, each class's sorted distinct non-null values of ``column`` (the first ``limit``)."""
    values = timed[column]
    if values.len() and values.null_count() == 0 and (values == values[0]).all():  # one engine, one user: no grouping
        return per_class.with_columns(pl.Series(name, [[values[0]]] * per_class.height, dtype=pl.List(pl.String)))
    # from the distinct (class, value) pairs: cheaper than a unique() in each group of the whole frame
    distinct = pl.col(column).drop_nulls().sort()
    distinct = distinct if limit is None else distinct.head(limit)
    names = timed.group_by(CLASS, column).agg().group_by(CLASS).agg(distinct.alias(name))
    return per_class.join(names, on=CLASS, how="left", maintain_order="left")


def _timed(statements: pl.DataFrame) -> pl.DataFrame:
    """The working statements with a query time (without copying the frame when all are): sleep is not DB time."""
    working = statements["statement_class"] == WORK
    if statements["query_time_s"].null_count() == 0 and working.all():
        return statements
    return statements.filter(pl.col("query_time_s").is_not_null() & working)


def latency_timeline(statements: pl.DataFrame, fp_ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """p50/p99 and calls per time bucket for the given fingerprints (for the report's line charts)."""
    frame = _numbered(statements)
    classes = frame.filter(pl.col("fp_id").is_in(fp_ids)).group_by(CLASS).agg(pl.col("fp_id").first())
    return _timeline(frame, dict(zip(classes[CLASS], classes["fp_id"])))


def _timeline(statements: pl.DataFrame, fp_id_of_class: dict[int, str]) -> dict[str, list[dict[str, Any]]]:
    timed = statements.select(CLASS, "end_ts", "query_time_s", "statement_class").filter(
        pl.col("query_time_s").is_not_null(), pl.col("end_ts").is_not_null(), pl.col(CLASS).is_in(list(fp_id_of_class)),
        pl.col("statement_class") == WORK,
    ).drop("statement_class")
    if timed.height == 0:
        return {}
    at_us = timed["end_ts"].dt.epoch("us")
    start_us, end_us = at_us.min(), at_us.max()
    span_s = max((end_us - start_us) / 1e6, 1.0)
    bucket_us = max(1, int(span_s // TIMELINE_BUCKETS) + 1) * 1_000_000
    # Buckets start at multiples of their length since the epoch (dt.truncate's); one number per
    # (class, bucket): grouping by it costs half what grouping by the pair does.
    first, count = start_us // bucket_us, end_us // bucket_us - start_us // bucket_us + 1
    key = pl.col(CLASS) * count + at_us // bucket_us - first
    bucketed = (
        timed.group_by(key.alias("key"))
        .agg(
            pl.len().alias("calls"),
            pl.col("query_time_s").quantile(0.5, "linear").alias("p50_s"),
            pl.col("query_time_s").quantile(0.99, "linear").alias("p99_s"),
        )
        .select(
            (pl.col("key") // count).replace_strict(fp_id_of_class, return_dtype=pl.String).alias("fp_id"),
            ((pl.col("key") % count + first) * bucket_us).cast(timed["end_ts"].dtype).alias("bucket"),
            "calls",
            "p50_s",
            "p99_s",
        )
        .sort("fp_id", "bucket")
    )
    timeline: dict[str, list[dict[str, Any]]] = {}
    for bucket in bucketed.to_dicts():
        timeline.setdefault(bucket.pop("fp_id"), []).append(bucket)
    return timeline


def derive_sql(tables: dict[str, pl.DataFrame], options: SqlOptions) -> tuple[pl.DataFrame | None, dict[str, Any]]:
    statements = tables.get(t.STATEMENT)
    if statements is None or statements.height == 0:
        return None, {}
    statements = with_logged_lock_waits(statements, tables.get(t.LOCK_WAIT))
    engines = _engines(statements)
    frame = _fingerprinted(statements, options, engines)
    profile, classes = _profile(frame)
    top = {number: row["fp_id"] for number, row in zip(classes[:TIMELINE_TOP], profile)}
    metrics = {
        "sql_profile": profile,
        "sql_summary": _summary(frame, options, engines),
        "sql_timeline": _timeline(frame, top),
    }
    return frame.drop(CLASS, PLAN), metrics


def _summary(frame: pl.DataFrame, options: SqlOptions, engines: pl.Series) -> dict[str, Any]:
    timed = _timed(frame)
    cut = int(frame["fingerprint"].str.ends_with(CUT_NOTE).sum())
    return {
        "statements": frame.height,
        "timed_statements": timed.height,
        "fingerprints": frame[CLASS].max() + 1,  # classes are numbered from 0 without gaps
        "db_time_s": float(timed["query_time_s"].sum()) if timed.height else 0.0,
        "lock_time_s": float(timed["lock_time_s"].fill_null(0.0).sum()) if timed.height else 0.0,
        "exec_time_s": float(timed["exec_time_s"].sum()) if timed.height else 0.0,
        "sleep": _sleep_summary(frame),
        "engines": sorted(engines.drop_nulls().to_list()),
        "first_seen": frame["end_ts"].min(),
        "last_seen": frame["end_ts"].max(),
        "literals": "shown (--show-literals)" if options.show_literals else "replaced by placeholders",
        "literals_shown": options.show_literals,
        # only when some were: what an ordinary log gives is unchanged
        **({"statements_cut": cut, "statements_cut_at_bytes": FINGERPRINT_MAX_BYTES} if cut else {}),
    }


def _sleep_summary(frame: pl.DataFrame) -> dict[str, Any]:
    """The sleep statements, counted apart from DB time: how many, their time, their fingerprints (heaviest first)."""
    sleeping = frame.filter(pl.col("statement_class") == SLEEP)
    per_class = (
        sleeping.group_by("fp_id").agg(pl.col("fingerprint").first(), pl.len().alias("calls"), pl.col("query_time_s").sum().alias("time_s"))
        .sort("time_s", "fp_id", descending=[True, False])
    )
    return {
        "statements": sleeping.height,
        "time_s": float(sleeping["query_time_s"].fill_null(0.0).sum()),
        "fingerprints": per_class.head(PROFILE_LIMIT).to_dicts(),
    }


def with_logged_lock_waits(statements: pl.DataFrame, waits: pl.DataFrame | None) -> pl.DataFrame:
    """``statements`` whose ``lock_time_s`` includes the waits a log wrote apart (PostgreSQL ``log_lock_waits``).

    Each "acquired ... after N ms" entry belongs to the first statement of the same source and connection
    that ends at or after it (the statement that waited, then ran); its lock time is capped at its query time.
    """
    if waits is None or waits.height == 0:
        return statements
    acquired = waits.filter(pl.col("kind") == "acquired", pl.col("ts").is_not_null(), pl.col("wait_s").is_not_null())
    if acquired.height == 0:
        return statements
    rows = (
        statements.select("source", "conn_id", "end_ts", "query_time_s").with_row_index("_row")
        .filter(pl.col("conn_id").is_in(acquired["conn_id"].unique().implode()), pl.col("end_ts").is_not_null(), pl.col("query_time_s").is_not_null())
        .sort("end_ts")
    )
    matched = (
        acquired.select("source", "conn_id", "ts", "wait_s").sort("ts")
        .join_asof(rows, left_on="ts", right_on="end_ts", by=["source", "conn_id"], strategy="forward", check_sortedness=False)  # both sorted above
        .filter(pl.col("_row").is_not_null())
        .group_by("_row").agg(pl.col("wait_s").sum(), pl.col("query_time_s").first())
    )
    if matched.height == 0:
        return statements
    known = statements["lock_time_s"].gather(matched["_row"]).fill_null(0.0)
    locked = pl.select(pl.min_horizontal(known + matched["wait_s"], matched["query_time_s"])).to_series()
    return statements.with_columns(statements["lock_time_s"].scatter(matched["_row"], locked).alias("lock_time_s"))


def public_lock_waits(waits: pl.DataFrame, show_literals: bool) -> pl.DataFrame:
    """The ``lock_wait`` rows with the literals of their statement and DETAIL replaced (unless ``show_literals``)."""
    if show_literals or waits.height == 0:
        return waits
    statements = pl.Series([None if sql is None else sqlnorm.redact_literals(sql, "postgresql") for sql in waits["statement"].to_list()], dtype=pl.String)
    details = pl.Series([None if text is None else redact_text.redact_log_line(text, "postgresql") for text in waits["detail"].to_list()], dtype=pl.String)
    return waits.with_columns(statements.alias("statement"), details.alias("detail"))
