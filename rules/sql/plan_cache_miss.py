"""TiDB prepared statements planned again instead of served from the plan cache.

What it detects:
    TiDB executions of prepared statements (slow log ``Prepared: true``) that were not served
    from the prepared plan cache (``Plan_from_cache: false``), when they are a large share of the
    prepared executions.

Why it matters:
    Prepared statements exist so that the server parses and optimizes a statement once and then
    only executes it. On a miss TiDB optimizes again: compile time (often milliseconds, more for
    joins and wide tables) is added to every execution and TiDB spends CPU on planning instead
    of executing. Misses also mean plans can change between executions. Typical causes: the
    cache is off or too small for the number of statements a session prepares, the client
    prepares a statement for every execution or closes connections, or the statement is not
    cacheable (sub-queries, some functions, partitioned tables, IndexMerge plans in several
    versions).

How it is detected:
    Input: TiDB ``statement`` rows (internal statements left out) with ``prepared`` and
    ``plan_from_cache``. Hit ratio = executions served from the cache / prepared executions.
    Judged from MIN_PREPARED_EXECUTIONS = 100 prepared executions; fires when the hit ratio is
    below MIN_HIT_RATIO_PCT = 80%. Always a warning: the compile time a miss costs is not in the
    statement table. The evidence lists the fingerprints with the most misses (at most
    MAX_FINGERPRINTS_SHOWN = 10) and, for each, what the log suggests: never served from the
    cache (likely not cacheable: sub-query, user variable, a function TiDB does not cache,
    partitioned table, IndexMerge plan) or served sometimes (evictions, or statements prepared
    again by new sessions). The slow log holds only executions above
    ``tidb_slow_log_threshold``, and misses are slower than hits: the ratio over all executions is
    usually higher — statements_summary's PLAN_CACHE_HITS gives it.

Remediation:
    Make sure the cache is on and large enough (``tidb_enable_prepared_plan_cache``,
    ``tidb_prepared_plan_cache_size``, from v7.1 ``tidb_session_plan_cache_size``); find why a
    statement is not cached with ``SHOW WARNINGS`` after its ``EXECUTE``; keep prepared
    statements and connections alive on the client (JDBC ``useServerPrepStmts=true`` and
    ``cachePrepStmts=true``); for statements sent as text, ``tidb_enable_non_prepared_plan_cache``
    (v7.0+). With the TiDB version in the capture (``engine_version``) only the variable of that
    version is printed; without it, both, with the version that separates them.

References:
    TiDB docs "SQL Prepared Execution Plan Cache" (limitations, SHOW WARNINGS diagnostics),
    "SQL Non-Prepared Execution Plan Cache", "Best Practices for Developing Java Applications
    with TiDB" (useServerPrepStmts, cachePrepStmts), "identify-slow-queries" (Prepared,
    Plan_from_cache), "Statement Summary Tables" (PLAN_CACHE_HITS).
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.sql.common import exec_time_column, short_sql, statements
from dbdiag.units import seconds
from dbdiag.versions import at_least

RULE_ID = "plan-cache-miss"

MIN_PREPARED_EXECUTIONS = 100
MIN_HIT_RATIO_PCT = 80.0
MAX_FINGERPRINTS_SHOWN = 10
SQL_SAMPLE_CHARS = 160
# TiDB versions that changed the remedy (TiDB docs "System Variables": tidb_session_plan_cache_size is new in
# v7.1.0, replacing tidb_prepared_plan_cache_size; "SQL Non-Prepared Execution Plan Cache": v7.0.0)
SESSION_PLAN_CACHE_VERSION = (7, 1)
NON_PREPARED_CACHE_VERSION = (7, 0)

# Functions whose result depends on the session or the moment: TiDB does not cache plans of
# statements that call the first group, and non-deterministic ones make plans unsafe to share.
_UNCACHEABLE_FUNCTIONS = r"(?i)\b(database|schema|current_user|current_role|user|session_user|system_user|connection_id|last_insert_id|row_count|found_rows|version|rand|uuid|sysdate)\s*\("
_SUBQUERY = r"(?i)\(\s*select\b"
_USER_VARIABLE = r"(?:^|[^@\w])@[A-Za-z_]"
_TIME = "exec_time_s"


def check(inp: RuleInput) -> Verdict:
    frame = statements(inp)
    all_tidb = frame.filter(pl.col("engine") == "tidb")
    tidb = all_tidb.filter(~pl.col("is_internal").fill_null(False))
    if tidb.height == 0:
        internal = f" ({all_tidb.height:,} internal ones left out)" if all_tidb.height else ""
        raise Skip(f"no TiDB user statements{internal}: the plan cache is judged from the TiDB slow log's Prepared and Plan_from_cache fields")
    if tidb["prepared"].null_count() == tidb.height:
        raise Skip("the TiDB statements carry no Prepared field (TiDB slow log before v3.0.5, or an export without it)")
    prepared = tidb.filter(pl.col("prepared").fill_null(False))
    executions = prepared.height
    if executions < MIN_PREPARED_EXECUTIONS:
        return Verdict(
            measured=f"{executions:,} prepared execution(s) among {tidb.height:,} TiDB statements; the hit ratio is judged from {MIN_PREPARED_EXECUTIONS}"
        )
    hits = int(prepared["plan_from_cache"].fill_null(False).sum())
    ratio_pct = 100.0 * hits / executions
    measured = f"plan cache hit ratio {ratio_pct:.1f}% over {executions:,} prepared executions (fires below {MIN_HIT_RATIO_PCT:.0f}%)"
    if ratio_pct >= MIN_HIT_RATIO_PCT:
        return Verdict(measured=measured)
    return Verdict(findings=[_finding(prepared, tidb.height, hits, ratio_pct, inp.metric(t.ENGINE_VERSION_METRIC))], measured=measured)


def _per_fingerprint(prepared: pl.DataFrame) -> pl.DataFrame:
    hit = pl.col("plan_from_cache").fill_null(False)
    if _TIME not in prepared.columns:
        prepared = prepared.with_columns(pl.col("query_time_s").alias(_TIME))
    return (
        prepared.group_by("fp_id")
        .agg(
            pl.len().alias("executions"),
            hit.sum().alias("hits"),
            pl.col(_TIME).filter(~hit).mean().alias("miss_avg_s"),  # execution time: lock wait is not the plan's
            pl.col(_TIME).filter(hit).mean().alias("hit_avg_s"),
            pl.col(_TIME).filter(~hit).sum().alias("miss_time_s"),
            pl.col("sample_sql").first().alias("sample_sql"),
            pl.col("plan").fill_null("").str.contains("IndexMerge").any().alias("index_merge"),
            pl.col("plan").fill_null("").str.contains(r"partition:").any().alias("partitioned"),
            pl.col("conn_id").drop_nulls().n_unique().alias("sessions"),
        )
        .with_columns((pl.col("executions") - pl.col("hits")).alias("misses"))
        .with_columns((100.0 * pl.col("hits") / pl.col("executions")).alias("hit_pct"))
        .sort(["misses", "fp_id"], descending=[True, False])
    )


def likely_reason(row: dict) -> str:
    """What the log suggests about one fingerprint's misses."""
    if row["hits"] > 0:
        return "served from the cache sometimes: evicted (cache too small) or prepared again by new sessions"
    sql = row["sample_sql"] or ""
    causes = []
    if re.search(_SUBQUERY, sql):
        causes.append("sub-query")
    if (function := re.search(_UNCACHEABLE_FUNCTIONS, sql)) is not None:
        causes.append(f"function {function.group(1).lower()}()")
    if re.search(_USER_VARIABLE, sql):
        causes.append("user variable")
    if row["partitioned"]:
        causes.append("partitioned table")
    if row["index_merge"]:
        causes.append("IndexMerge plan")
    found = ", ".join(causes) if causes else "no cause visible in the SQL: SHOW WARNINGS after EXECUTE tells"
    return f"never served from the cache: likely not cacheable ({found})"


def _finding(prepared: pl.DataFrame, tidb_statements: int, hits: int, ratio_pct: float, version: dict | None = None) -> Finding:
    executions = prepared.height
    misses = executions - hits
    per_class = _per_fingerprint(prepared)
    shown = per_class.filter(pl.col("misses") > 0).head(MAX_FINGERPRINTS_SHOWN)
    miss_time_s = float(prepared.filter(~pl.col("plan_from_cache").fill_null(False))[exec_time_column(prepared)].fill_null(0.0).sum())
    never = per_class.filter(pl.col("hits") == 0, pl.col("misses") > 0)
    rows = tuple(
        (
            r["fp_id"],
            r["executions"],
            r["hits"],
            r["misses"],
            round(r["hit_pct"], 1),
            seconds(r["miss_avg_s"]),
            seconds(r["hit_avg_s"]),
            likely_reason(r),
            short_sql(r["sample_sql"])[:SQL_SAMPLE_CHARS],
        )
        for r in shown.iter_rows(named=True)
    )
    worst = prepared.filter(pl.col("fp_id") == shown["fp_id"][0], ~pl.col("plan_from_cache").fill_null(False)).head(3) if shown.height else prepared.head(0)
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.WARNING,
        title=f"Plan cache hit ratio {ratio_pct:.1f}% over {executions:,} prepared executions; threshold {MIN_HIT_RATIO_PCT:.0f}%",
        subject="TiDB prepared plan cache",
        impact={
            "hit_ratio_pct": round(ratio_pct, 1),
            "prepared_executions": executions,
            "misses": misses,
            "miss_time_s": round(miss_time_s, 3),
            "description": (
                f"{misses:,} of {executions:,} logged prepared executions were optimized again instead of taken from the plan cache "
                f"({per_class.filter(pl.col('misses') > 0).height} fingerprint(s), {never.height} never served from it); "
                "each miss adds compile time, which the slow log's Compile_time shows per execution"
            ),
        },
        evidence=(
            Evidence(
                title="Prepared executions in the slow log",
                columns=("prepared executions", "from the plan cache", "missed", "hit ratio %", "threshold %", "time of missed executions", "other TiDB statements"),
                rows=((executions, hits, misses, round(ratio_pct, 1), MIN_HIT_RATIO_PCT, seconds(miss_time_s), tidb_statements - executions),),
            ),
            Evidence(
                title="Fingerprints with the most misses",
                columns=("fingerprint id", "executions", "hits", "misses", "hit %", "avg when missed", "avg when hit", "what the log suggests", "statement"),
                rows=rows,
            ),
            Evidence(
                title="What the slow log cannot show",
                text=(
                    "The slow log holds only executions slower than tidb_slow_log_threshold, and a miss is slower than a hit, "
                    "so the ratio over all executions is usually higher. For the full picture: "
                    "SELECT digest_text, exec_count, plan_cache_hits FROM information_schema.cluster_statements_summary "
                    "ORDER BY exec_count - plan_cache_hits DESC LIMIT 10;"
                ),
            ),
        ),
        remediation=_remediation(never, version),
        sources=tuple(f"{r['source']}:{r['line']}" for r in worst.iter_rows(named=True)),
    )


def _remediation(never: pl.DataFrame, version: dict | None = None) -> str:
    """``version``: the ``engine_version`` metric; the cache size variable and the non-prepared cache follow it."""
    never_ids = ", ".join(never["fp_id"].head(5).to_list())
    session_cache = at_least(version, "tidb", SESSION_PLAN_CACHE_VERSION)
    size = {True: "SET GLOBAL tidb_session_plan_cache_size = 200;",
            False: "SET GLOBAL tidb_prepared_plan_cache_size = 200;",
            None: "SET GLOBAL tidb_session_plan_cache_size = 200;  (v7.1+; before: tidb_prepared_plan_cache_size)"}[session_cache]
    lines = [
        "1. Check the cache is on and large enough for the statements a session prepares:",
        "   SHOW VARIABLES LIKE 'tidb_enable_prepared_plan_cache';   SET GLOBAL tidb_enable_prepared_plan_cache = ON;",
        f"   SHOW VARIABLES LIKE 'tidb_%plan_cache_size';   {size}",
        "2. Find why a statement is not cached: PREPARE and EXECUTE it in a session, then SHOW WARNINGS; TiDB names the reason "
        "('skip prepared plan-cache: ...'): sub-queries, user variables, functions such as database() or last_insert_id(), "
        "partitioned tables, IndexMerge plans, ? in ORDER BY/GROUP BY.",
    ]
    if never_ids:
        lines.append(f"   Start with the fingerprints never served from the cache: {never_ids}.")
    lines += [
        "3. The cache is per session: the client must reuse server-side prepared statements and connections "
        "(JDBC: useServerPrepStmts=true&cachePrepStmts=true&prepStmtCacheSize=250&prepStmtCacheSqlLimit=2048; a connection pool, no PREPARE per execution).",
        *(() if at_least(version, "tidb", NON_PREPARED_CACHE_VERSION) is False else (
            "4. Statements sent as plain text can use the non-prepared cache (v7.0+): SET GLOBAL tidb_enable_non_prepared_plan_cache = ON;",)),
        "Check: Grafana TiDB > Executor > 'Queries Using Plan Cache OPS', or the statements_summary query in the evidence.",
    ]
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="TiDB prepared statements miss the plan cache",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
