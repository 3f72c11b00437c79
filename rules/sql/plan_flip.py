"""One statement executed with two or more plans, one of them much slower.

What it detects:
    A SQL fingerprint that ran with different execution plans during the capture — TiDB
    ``Plan_digest``, the MariaDB ``# explain:`` signature, or the PostgreSQL auto_explain plan
    shape without costs — where one plan is many times slower than another and the slow one
    cost real database time.

Why it matters:
    The same statement with the same data should take the same time. When the optimizer
    switches plans (statistics taken while a queue table was empty, a histogram gone stale, an
    index dropped or made invisible), latency jumps by orders of magnitude without any change
    in the application. In the field case behind this rule, a producer-queue query went from
    an index on ``flow_id`` at 62 ms to an index on ``status`` at 38 s on every TiDB instance
    once statistics said ``status = 1`` matched no rows.

How it is detected:
    Input: ``statement`` rows with a plan key (Plan_digest, else the plan signature) and a
    duration. Per fingerprint, every plan with at least MIN_PLAN_CALLS = 1 execution is
    compared by median latency. It fires when the slowest plan's median is at least
    SLOWDOWN_FACTOR = 10 times the fastest plan's median and the time it lost — the sum over
    the slow plan's executions of (duration - fast median) — is at least MIN_LOST_S = 1 s and
    at least MIN_LOST_SHARE_PCT = 1% of all statement time. Critical when the loss is at least
    CRITICAL_SHARE_PCT = 10% of statement time.

Remediation:
    Pin the good plan and stop the statistics that caused the flip from coming back: TiDB
    ``CREATE GLOBAL BINDING ... USING ... /*+ USE_INDEX(t, idx) */`` and ``LOCK STATS t`` (after
    ``ANALYZE TABLE t`` on representative data); MySQL/MariaDB an index hint or optimizer hint,
    ``ALTER TABLE t ALTER INDEX idx VISIBLE`` (MySQL) or ``... NOT IGNORED`` (MariaDB) if the good
    index was set aside, and ``ANALYZE TABLE``; PostgreSQL ``ANALYZE t`` and a higher statistics target on the column.

References:
    TiDB docs "SQL Plan Management (SPM)" (CREATE BINDING), "Lock statistics" (LOCK STATS),
    "identify-slow-queries" (Plan_digest); MySQL 8.0 manual "Optimizer Hints", "Invisible
    Indexes"; PostgreSQL manual "ANALYZE", "auto_explain".
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql.common import db_time_s, plan_nodes_of, seconds, short_plan, short_sql, statement_evidence, statements

RULE_ID = "plan-flip"

MIN_PLAN_CALLS = 1
SLOWDOWN_FACTOR = 10.0
MIN_LOST_S = 1.0
MIN_LOST_SHARE_PCT = 1.0
CRITICAL_SHARE_PCT = 10.0

_TIMED_WITH_PLAN = pl.col("plan_key").is_not_null() & pl.col("query_time_s").is_not_null()


def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    total_s = db_time_s(everything) or 1.0
    # The columns the measures need; the other per-plan numbers are computed only for a finding.
    frame = everything.select("fp_id", "plan_key", "query_time_s").filter(_TIMED_WITH_PLAN)
    per_plan = frame.group_by("fp_id", "plan_key").agg(
        pl.len().alias("calls"),
        pl.col("query_time_s").median().alias("median_s"),
        pl.col("query_time_s").alias("runs"),  # in log order (the order within a group is kept): no second split
    ).filter(pl.col("calls") >= MIN_PLAN_CALLS)
    multi = per_plan.filter(pl.len().over("fp_id") >= 2)
    if multi.height == 0:
        return Verdict(measured=f"{frame['fp_id'].n_unique()} fingerprint(s) with a plan key; none ran with two plans")
    # Per fingerprint its plans from fast to slow (plan_key: equal medians in a stable order).
    per_class = (
        multi.sort("median_s", "plan_key")
        .group_by("fp_id", maintain_order=True)
        .agg(
            pl.len().alias("plans"),
            pl.col("median_s").first().alias("fast_s"),
            pl.col("median_s").last().alias("slow_s"),
            pl.col("runs").last(),  # the slow plan's
        )
    )
    flipped = []
    measured = []
    for index, (fp_id, plans, fast_s, slow_s) in enumerate(per_class.drop("runs").iter_rows()):
        ratio = slow_s / fast_s if fast_s else float("inf")
        lost_s = float((per_class["runs"][index] - fast_s).clip(lower_bound=0).sum())
        lost_pct = 100.0 * lost_s / total_s
        measured.append(f"{fp_id}: {plans} plans, slowest {ratio:,.0f}x the fastest, {seconds(lost_s)} lost")
        if ratio >= SLOWDOWN_FACTOR and lost_s >= MIN_LOST_S and lost_pct >= MIN_LOST_SHARE_PCT:
            flipped.append((fp_id, ratio, lost_s, lost_pct))
    findings = []
    if flipped:
        timed = everything.filter(_TIMED_WITH_PLAN)
        all_plans = _plans(timed)
        for fp_id, ratio, lost_s, lost_pct in flipped:
            plans = all_plans.filter(pl.col("fp_id").eq_missing(fp_id)).sort("median_s", "plan_key")
            fast, slow = plans.row(0, named=True), plans.row(-1, named=True)
            findings.append(_finding(inp, timed, fp_id, plans, fast, slow, ratio, lost_s, lost_pct))
    return Verdict(findings=findings, measured="; ".join(sorted(measured)[:6]))


def _plans(frame: pl.DataFrame) -> pl.DataFrame:
    """Per (fingerprint, plan) of the timed statements with a plan key: calls, latencies, when and where seen."""
    return frame.group_by("fp_id", "plan_key").agg(
        pl.len().alias("calls"),
        pl.col("query_time_s").median().alias("median_s"),
        pl.col("query_time_s").mean().alias("avg_s"),
        pl.col("query_time_s").max().alias("max_s"),
        pl.col("query_time_s").sum().alias("total_s"),
        pl.col("end_ts").min().alias("first_seen"),
        pl.col("end_ts").max().alias("last_seen"),
        pl.col("instance").drop_nulls().n_unique().alias("instances"),
        pl.col("query_time_s").alias("runs"),  # as in check(): the same aggregation, the same numbers
    ).filter(pl.col("calls") >= MIN_PLAN_CALLS).drop("runs")


def _finding(inp: RuleInput, frame: pl.DataFrame, fp_id: str, plans: pl.DataFrame, fast: dict, slow: dict, ratio: float, lost_s: float, lost_pct: float) -> Finding:
    runs = frame.filter(pl.col("fp_id") == fp_id)
    sample = runs.sort("query_time_s", descending=True).row(0, named=True)
    fast_sample = runs.filter(pl.col("plan_key") == fast["plan_key"]).row(0, named=True)
    slow_sample = runs.filter(pl.col("plan_key") == slow["plan_key"]).row(0, named=True)
    engine = sample["engine"] or "mysql"
    switched = slow["first_seen"] is not None and fast["first_seen"] is not None and slow["first_seen"] > fast["first_seen"]
    when = f"; the slow plan first appears at {slow['first_seen']:%Y-%m-%d %H:%M:%S} UTC" if switched and slow["first_seen"] else ""
    instances = f" on {slow['instances']} instance(s)" if slow["instances"] else ""
    fast_index = _index_of(inp, fast_sample)
    plan_rows = tuple(
        (
            _short_key(row["plan_key"]),
            row["calls"],
            seconds(row["median_s"]),
            seconds(row["avg_s"]),
            seconds(row["max_s"]),
            seconds(row["total_s"]),
            f"{row['first_seen']:%H:%M:%S}" if row["first_seen"] else None,
            f"{row['last_seen']:%H:%M:%S}" if row["last_seen"] else None,
            row["instances"] or None,
        )
        for row in plans.iter_rows(named=True)
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        severity=Severity.CRITICAL if lost_pct >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"Plan flip: one statement {ratio:,.0f}x slower with another plan "
            f"({seconds(fast['median_s'])} -> {seconds(slow['median_s'])} median){instances}; threshold {SLOWDOWN_FACTOR:.0f}x"
        ),
        subject=f"fingerprint {fp_id}",
        impact={
            "share_pct": round(lost_pct, 1),
            "lost_db_time_s": round(lost_s, 3),
            "description": (
                f"{slow['calls']} execution(s) with the slow plan lost {seconds(lost_s)} of database time "
                f"({lost_pct:.1f}% of all statement time) against the fast plan's median{when}"
            ),
            "slowdown": round(ratio, 1),
        },
        evidence=(
            statement_evidence(inp, sample["sample_sql"]),
            Evidence(
                title="Plans of this statement",
                columns=("plan", "calls", "median", "avg", "max", "total", "first seen", "last seen", "instances"),
                rows=plan_rows,
            ),
            Evidence(title=f"Fast plan ({_short_key(fast['plan_key'])})", text=short_plan(fast_sample["plan"]) or fast["plan_key"]),
            Evidence(title=f"Slow plan ({_short_key(slow['plan_key'])})", text=short_plan(slow_sample["plan"]) or slow["plan_key"]),
        ),
        remediation=_remediation(engine, sample["sample_sql"], fast_index, fast_sample.get("plan_digest")),
        sources=(f"{slow_sample['source']}:{slow_sample['line']}", f"{fast_sample['source']}:{fast_sample['line']}"),
    )


def _short_key(key: str | None) -> str:
    """Digests are shortened to 16 hex digits; plan signatures are kept readable (they name the indexes)."""
    text = key or ""
    limit = 16 if text and all(c in "0123456789abcdefABCDEF" for c in text) else 120
    return text[:limit] + ("…" if len(text) > limit else "")


def _index_of(inp: RuleInput, statement: dict) -> tuple[str | None, str | None]:
    """(table, index) the fast plan used, from its plan nodes, else TiDB's Index_names."""
    plan = plan_nodes_of(inp, statement["source"], statement["stmt_id"])
    nodes = plan.filter(pl.col("index_name").is_not_null())
    if nodes.height:
        # A PostgreSQL Bitmap Index Scan names no table: its Bitmap Heap Scan parent does.
        tables = plan["relation"].drop_nulls()
        return nodes["relation"][0] or (tables[0] if tables.len() else None), nodes["index_name"][0]
    names = statement.get("index_names") or ""
    match = re.search(r"([\w$]+):([\w$]+)", names)
    return (match.group(1), match.group(2)) if match else (None, None)


def _remediation(engine: str, sql: str, fast_index: tuple[str | None, str | None], fast_plan_digest: str | None) -> str:
    table, index = fast_index
    table_text, index_text = table or "<table>", index or "<index of the fast plan>"
    statement = short_sql(sql).rstrip().rstrip(";")
    hinted = re.sub(r"(?i)^\s*select\b", f"SELECT /*+ USE_INDEX({table_text}, {index_text}) */", statement, count=1)
    if engine == "tidb":
        from_history = (
            [f"  CREATE GLOBAL BINDING FROM HISTORY USING PLAN DIGEST '{fast_plan_digest}';   -- v6.5+: the fast plan as it ran",
             "or, with a representative value in place of each ?:"]
            if fast_plan_digest
            else []
        )
        return "\n".join(
            [
                "Pin the fast plan for every instance, then keep the statistics that caused the flip from returning:",
                *from_history,
                f"  CREATE GLOBAL BINDING FOR {statement}",
                f"  USING {hinted};",
                f"  ANALYZE TABLE {table_text};      -- when the table holds representative data",
                f"  LOCK STATS {table_text};         -- so auto-analyze cannot retake them while the queue is empty",
                "Check: SHOW GLOBAL BINDINGS; then the slow log's Plan_digest for this Digest should be the fast one only.",
            ]
        )
    if engine == "postgresql":
        return "\n".join(
            [
                f"Refresh the statistics the planner used: ANALYZE {table_text};",
                f"If estimates stay off, raise the column's target: ALTER TABLE {table_text} ALTER COLUMN <column> SET STATISTICS 1000; ANALYZE {table_text};",
                f"With pg_hint_plan installed the plan can be pinned: /*+ IndexScan({table_text} {index_text}) */",
            ]
        )
    if engine == "mariadb":
        return "\n".join(
            [
                f"If the good index was set aside: ALTER TABLE {table_text} ALTER INDEX {index_text} NOT IGNORED;   (MariaDB 10.6+)",
                f"Refresh the statistics: ANALYZE TABLE {table_text} PERSISTENT FOR ALL;",
                f"Pin the plan in the statement: ... FROM {table_text} FORCE INDEX ({index_text}) ...",
            ]
        )
    return "\n".join(
        [
            f"If the good index was made invisible: ALTER TABLE {table_text} ALTER INDEX {index_text} VISIBLE;   (MySQL 8.0+)",
            f"Refresh the statistics: ANALYZE TABLE {table_text};",
            f"Pin the plan in the statement: ... FROM {table_text} FORCE INDEX ({index_text}) ...  or MySQL 8: SELECT /*+ INDEX({table_text} {index_text}) */ ...",
        ]
    )


RULE = Rule(
    id=RULE_ID,
    title="One statement executed with several plans, one much slower",
    area="sql",
    requires=((t.STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
