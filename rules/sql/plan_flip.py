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
    duration; the derived ``change`` table (DDL, statistics collection, bulk changes seen in the
    capture). Per fingerprint, every plan with at least MIN_PLAN_CALLS = 1 execution is compared
    by median latency, among the plans that read the same tables (the relations of their plan
    nodes: a fingerprint writes ``sbtest1`` and ``sbtest3`` alike, and a plan of sbtest3 says
    nothing of sbtest1; plans whose nodes name no table are one set): the slowest and the fastest
    plan of each such set, the set where they are furthest apart. When the slow plan's median is
    at least SLOWDOWN_FACTOR = 10 times the fast plan's, the switch is located: the fingerprint's
    first run with the slow plan after a run with the fast one. The cause is the last change on a table the statement reads (its plan
    nodes' relations and its SQL's tables) between those two runs. The time lost is then measured
    from all the fingerprint's runs, with a logged plan or not (auto_explain may sample): calls
    after the change x (median after - median before), each side bounded by the neighbouring
    changes on the same tables. Without a cause, the same step is taken at the switch when no
    fast-plan run follows it; when the plans interleave (parameter-dependent plans), the time lost
    is the sum over the slow plan's executions of (duration - fast median). It fires when that
    loss is at least MIN_LOST_S = 1 s and at least MIN_LOST_SHARE_PCT = 1% of all statement time.
    Critical when the loss is at least CRITICAL_SHARE_PCT = 10% of statement time.

Remediation:
    First undo the change the capture shows, on the capture's engine: MariaDB 10.6+ ``ALTER
    TABLE t ALTER INDEX i NOT IGNORED`` (an IGNORED index cannot be forced, so no FORCE INDEX);
    MySQL 8.0 / TiDB ``ALTER TABLE t ALTER INDEX i VISIBLE``; a dropped index recreated from its
    own definition when the capture created it (PostgreSQL ``CREATE INDEX CONCURRENTLY``, MySQL
    and MariaDB ``ALTER TABLE t ADD INDEX``), else on the statement's WHERE columns; after a bulk
    change or an ANALYZE on unrepresentative data, statistics collected again (PostgreSQL
    ``ANALYZE t``, MariaDB ``ANALYZE TABLE t PERSISTENT FOR ALL``, MySQL ``ANALYZE TABLE t``,
    TiDB ``ANALYZE TABLE t`` then ``LOCK STATS t``). Without a cause, pin the good plan and stop
    the statistics that caused the flip from coming back: TiDB ``CREATE GLOBAL BINDING ... USING
    ... /*+ USE_INDEX(t, idx) */`` and ``LOCK STATS t``; MySQL/MariaDB an index hint and
    ``ANALYZE TABLE``; PostgreSQL ``ANALYZE t`` and a higher statistics target on the column.
    Checks: MariaDB ``ANALYZE FORMAT=JSON`` (MariaDB has no EXPLAIN ANALYZE), MySQL 8.0.18+
    ``EXPLAIN ANALYZE``, PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)``.

References:
    TiDB docs "SQL Plan Management (SPM)" (CREATE BINDING), "LOCK STATS"
    (docs.pingcap.com/tidb/stable/sql-statement-lock-stats), "Invisible Indexes",
    "identify-slow-queries" (Plan_digest); MySQL 8.0 manual "Optimizer Hints", "Invisible
    Indexes" (ALTER TABLE ... ALTER INDEX ... VISIBLE); MariaDB KB "Ignored Indexes" (10.6+),
    "ANALYZE Statement"; PostgreSQL manual "CREATE INDEX" (CONCURRENTLY), "ANALYZE", "auto_explain".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql import cause as cause_module
from dbdiag.rules.sql.common import db_time_s, plan_nodes_of, short_plan, short_sql, statement_evidence, statements
from dbdiag.rules.sql.full_table_scan import suggest_index
from dbdiag.units import seconds

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
    timed = everything.lazy().filter(_TIMED_WITH_PLAN)  # lazy: each use reads only its columns and rows
    all_plans = None
    row_of = {(fp, key): row for row, (fp, key) in enumerate(per_plan.select("fp_id", "plan_key").iter_rows())}
    for index, (fp_id, plans, fast_s, slow_s) in enumerate(per_class.drop("runs").iter_rows()):
        ratio = slow_s / fast_s if fast_s else float("inf")
        runs = per_class["runs"][index]
        switch = pair = None
        if ratio >= SLOWDOWN_FACTOR:  # against the fastest plan of all: within one table set no pair is further apart
            all_plans = _plans(timed) if all_plans is None else all_plans
            ranked = all_plans.filter(pl.col("fp_id").eq_missing(fp_id)).sort("median_s", "plan_key")
            pair = _comparable_pair(inp, timed, fp_id, ranked)
            if pair is None:
                fast_s = None
            else:
                fast_s, runs = pair[0]["median_s"], per_plan["runs"][row_of[(fp_id, pair[1]["plan_key"])]]
                ratio = pair[1]["median_s"] / fast_s if fast_s else float("inf")
        lost_s = float((runs - fast_s).clip(lower_bound=0).sum()) if fast_s is not None else 0.0
        if pair is not None and ratio >= SLOWDOWN_FACTOR:
            switch = _switch(inp, everything, fp_id, *pair)
            if switch.step is not None and switch.step.lost_s is not None:
                lost_s = switch.step.lost_s  # every run counts, logged plan or not
        lost_pct = 100.0 * lost_s / total_s
        if fast_s is None:
            measured.append(f"{fp_id}: {plans} plans, none slower on the same tables (each table ran one plan)")
        else:
            against = "the fastest on its tables" if pair is not None else "the fastest"
            measured.append(f"{fp_id}: {plans} plans, slowest {ratio:,.0f}x {against}, {seconds(lost_s)} lost")
        if ratio >= SLOWDOWN_FACTOR and lost_s >= MIN_LOST_S and lost_pct >= MIN_LOST_SHARE_PCT:
            flipped.append((fp_id, pair, ratio, lost_s, lost_pct, switch))
    findings = []
    for fp_id, (fast, slow), ratio, lost_s, lost_pct, switch in flipped:
        plans = all_plans.filter(pl.col("fp_id").eq_missing(fp_id)).sort("median_s", "plan_key")
        findings.append(_finding(inp, timed, fp_id, plans, fast, slow, ratio, lost_s, lost_pct, switch, total_s))
    return Verdict(findings=findings, measured="; ".join(sorted(measured)[:6]))


@dataclass(frozen=True)
class Switch:
    """Where the fingerprint went from the fast plan to the slow one: the change before it and the step there."""

    cause: dict | None  # the last change on a table it reads between its last fast-plan run and its first slow-plan run
    step: cause_module.Step | None  # at the cause, else at the first slow-plan run when the plans do not interleave
    changes: pl.DataFrame | None  # the changes on its tables


_RUN_COLUMNS = ("source", "stmt_id", "line", "start_ts", "end_ts", "query_time_s", "plan_key")


def _switch(inp: RuleInput, everything: pl.DataFrame, fp_id: str, fast: dict, slow: dict) -> Switch:
    runs = everything.filter(pl.col("fp_id") == fp_id).select(*_RUN_COLUMNS, "sample_sql", "engine")
    ordered = runs.sort(pl.coalesce("start_ts", "end_ts"), "source", "line", nulls_last=True)
    slow_runs = ordered.filter(pl.col("plan_key") == slow["plan_key"])
    if not slow_runs.height:
        return Switch(None, None, None)
    first_slow = slow_runs.row(0, named=True)
    at_first_slow = cause_module.at_run(first_slow)
    fast_runs = ordered.filter(pl.col("plan_key") == fast["plan_key"])
    fast_before = fast_runs.filter(cause_module.before(at_first_slow))
    if not fast_before.height:
        return Switch(None, None, None)  # the slow plan came first: nothing to undo
    sample = runs.row(0, named=True)
    changes = cause_module.table_changes(inp)
    mine = None
    if changes is not None:
        names = cause_module.tables_read(inp, runs, sample["sample_sql"], sample["engine"])
        mine = cause_module.on_tables(changes, names)
        # After a fast run, before the first slow one: statistics take a moment to reach every server
        # (TiDB's stats lease), so fast runs may still follow the change.
        cause = cause_module.last_change_before(mine, first_slow, after=fast_before.row(0, named=True)) if mine.height else None
        if cause is not None:
            previous, following = cause_module.neighbours(mine, cause)
            return Switch(cause, cause_module.step(runs, cause, previous, following), mine)
    clean = fast_runs.filter(~cause_module.before(at_first_slow)).height == 0  # no fast run after the switch
    return Switch(None, cause_module.step(runs, at_first_slow, None, None) if clean else None, mine)


def _comparable_pair(inp: RuleInput, timed: pl.LazyFrame, fp_id: str, ranked: pl.DataFrame) -> tuple[dict, dict] | None:
    """The (fast, slow) plans of the fingerprint furthest apart among plans that read the same tables (rows of
    ``ranked``, fastest first); None when no two plans read the same tables (each table kept its plan: no flip).

    A fingerprint spans tables whose names differ in digits (``sbtest1`` .. ``sbtest4`` are all ``sbtest?``):
    a plan of sbtest3 says nothing of what sbtest1's statements lost. Plans whose nodes name no table (a TiDB
    digest alone) are compared with each other, as one set."""
    groups: dict[frozenset[str], list[dict]] = {}
    for row in ranked.iter_rows(named=True):
        groups.setdefault(_plan_tables(inp, timed, fp_id, row["plan_key"]), []).append(row)
    pairs = [(rows[0], rows[-1]) for rows in groups.values() if len(rows) >= 2]
    if not pairs:
        return None
    return max(pairs, key=lambda pair: pair[1]["median_s"] / pair[0]["median_s"] if pair[0]["median_s"] else float("inf"))


def _plan_tables(inp: RuleInput, timed: pl.LazyFrame, fp_id: str, plan_key: str) -> frozenset[str]:
    """The relations of the plan nodes of one statement that ran with ``plan_key`` (empty: none logged)."""
    sample = timed.filter(pl.col("fp_id") == fp_id, pl.col("plan_key") == plan_key).select("source", "stmt_id").head(1).collect()
    if not sample.height:
        return frozenset()
    nodes = plan_nodes_of(inp, sample["source"][0], sample["stmt_id"][0])
    return frozenset(nodes["relation"].drop_nulls().to_list())


def _plans(frame: pl.LazyFrame) -> pl.DataFrame:
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
    ).filter(pl.col("calls") >= MIN_PLAN_CALLS).drop("runs").collect()


def _finding(inp: RuleInput, timed: pl.LazyFrame, fp_id: str, plans: pl.DataFrame, fast: dict, slow: dict, ratio: float, lost_s: float,
             lost_pct: float, switch: Switch | None, total_s: float) -> Finding:
    runs = timed.filter(pl.col("fp_id") == fp_id).collect()
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
    cause = switch.cause if switch else None
    found_step = switch.step if switch else None
    recovered = (
        slow["last_seen"] is not None and fast["first_seen"] is not None and fast["first_seen"] > slow["last_seen"]
    )
    fixed_by = ""
    if recovered:
        first_fast = runs.filter(pl.col("plan_key") == fast["plan_key"]).sort("end_ts").row(0, named=True)
        last_slow = runs.filter(pl.col("plan_key") == slow["plan_key"]).sort("end_ts").row(-1, named=True)
        changes = cause_module.table_changes(inp)
        names = cause_module.tables_read(inp, runs, sample["sample_sql"], sample["engine"])
        mine = cause_module.on_tables(changes, names) if changes is not None else None
        fix = cause_module.last_change_before(mine, first_fast, after=last_slow) if mine is not None and mine.height else None
        fixed_by = f" after {cause_module.label(fix)} ({cause_module.where(fix)})" if fix else ""
    after = f" after {cause_module.label(cause)} at {cause['ts']:%H:%M:%S} UTC ({cause_module.where(cause)})" if cause and cause["ts"] else ""
    how = (
        f"; {found_step.calls_after:,} run(s) after the {'change' if cause else 'switch'} against {found_step.calls_before:,} before "
        f"(all runs, logged plan or not): {cause_module.step_text(found_step)}"
        if found_step is not None and found_step.lost_s is not None
        else f"; {slow['calls']} execution(s) with the slow plan against the fast plan's median"
    )
    cause_text = f". Cause: the last change on its table before the flip, {cause_module.describe(cause)}" if cause else ""
    collected = cause_module.statistics_before(switch.changes, cause) if cause and switch and switch.changes is not None else None
    if collected:
        cause_text += f"; the statistics the planner still used were collected before it: {cause_module.describe(collected)}"
    evidence = [
        statement_evidence(inp, sample["sample_sql"]),
        Evidence(
            title="Plans of this statement",
            columns=("plan", "calls", "median", "avg", "max", "total", "first seen", "last seen", "instances"),
            rows=plan_rows,
        ),
        Evidence(title=f"Fast plan ({_short_key(fast['plan_key'])})", text=short_plan(fast_sample["plan"]) or fast["plan_key"]),
        Evidence(title=f"Slow plan ({_short_key(slow['plan_key'])})", text=short_plan(slow_sample["plan"]) or slow["plan_key"]),
    ]
    if cause:
        evidence[1:1] = cause_module.cause_evidence(cause, found_step, switch.changes if switch and switch.changes is not None else pl.DataFrame())
    undo = cause_module.undo(engine, cause, switch.changes, sample["sample_sql"]) if cause and switch and switch.changes is not None else []
    fallback_table = _only_table(inp, runs, sample)
    return Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        # the slow plan ran first and the fast one took over for good: the capture holds the fix, not the flip
        severity=Severity.INFO if recovered else Severity.CRITICAL if lost_pct >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"Plan flip{after}: one statement {ratio:,.0f}x slower with another plan "
            f"({seconds(fast['median_s'])} to {seconds(slow['median_s'])}: each plan's median){instances}; threshold {SLOWDOWN_FACTOR:.0f}x"
            if not recovered else
            f"Plan recovered{fixed_by}: one statement ran {ratio:,.0f}x slower with its earlier plan "
            f"({seconds(slow['median_s'])}, then {seconds(fast['median_s'])} median){instances} until {slow['last_seen']:%H:%M:%S} UTC"
        ),
        subject=f"fingerprint {fp_id}",
        impact={
            "share_pct": round(lost_pct, 1),
            "lost_db_time_s": round(lost_s, 3),
            "db_time_s": round(lost_s, 3),
            "share_of_db_time": round(lost_s / total_s, 4) if total_s else None,
            "description": (
                f"The flip lost {seconds(lost_s)} of database time ({lost_pct:.1f}% of all statement time){how}{when}{cause_text}"
            ),
            "slowdown": round(ratio, 1),
            **(cause_module.step_numbers(found_step) if found_step is not None and found_step.lost_s is not None else {}),
            **({"cause": cause_module.cause_summary(cause)} if cause else {}),
        },
        objects=tuple(f"table {name}" for name in sorted(cause_module.tables_read(inp, runs, sample["sample_sql"], sample["engine"]))),
        evidence=tuple(evidence),
        remediation=(
            f"Already fixed within the capture{fixed_by}: the fast plan ran from then on. If it comes back, the same steps apply:\n"
            if recovered else ""
        ) + _remediation(engine, sample["sample_sql"], fast_index, fast_sample.get("plan_digest"), undo,
                         cause["action"] if cause else None, fallback_table),
        sources=tuple(
            ([cause_module.where(cause)] if cause else [])
            + [f"{slow_sample['source']}:{slow_sample['line']}", f"{fast_sample['source']}:{fast_sample['line']}"]
        ),
    )


def _only_table(inp: RuleInput, runs: pl.DataFrame, sample: dict) -> str | None:
    """The one table the statement reads (for remedies when the fast plan names none)."""
    names = cause_module.tables_read(inp, runs, sample["sample_sql"], sample["engine"])
    return next(iter(names)) if len(names) == 1 else None


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


def _remediation(engine: str, sql: str, fast_index: tuple[str | None, str | None], fast_plan_digest: str | None,
                 undo: list[str] | None = None, cause_action: str | None = None, fallback_table: str | None = None) -> str:
    table, index = fast_index
    table = table or fallback_table
    table_text, index_text = table or "<table>", index or "<index of the fast plan>"
    statement = short_sql(sql).rstrip().rstrip(";")
    hinted = re.sub(r"(?i)^\s*select\b", f"SELECT /*+ USE_INDEX({table_text}, {index_text}) */", statement, count=1)
    lead = list(undo or [])
    if engine == "tidb":
        from_history = (
            [f"  CREATE GLOBAL BINDING FROM HISTORY USING PLAN DIGEST '{fast_plan_digest}';   -- v6.5+: the fast plan as it ran",
             "or, with a representative value in place of each ?:"]
            if fast_plan_digest
            else []
        )
        return "\n".join(
            [
                *lead,
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
        if lead:
            return "\n".join([*lead, "Check with EXPLAIN (ANALYZE, BUFFERS) on the statement that the fast plan is back."])
        suggestion = suggest_index(sql, engine, table) if table else None
        column = suggestion.columns[0] if suggestion else None
        lines = [f"Refresh the statistics the planner used: ANALYZE {table_text};"]
        if column:
            lines.append(f"If estimates stay off, raise the column's target: ALTER TABLE {table_text} ALTER COLUMN {column} SET STATISTICS 1000; ANALYZE {table_text};")
        if index:
            lines.append(f"With pg_hint_plan installed the plan can be pinned with the hint IndexScan({table_text} {index}) in a comment before the statement.")
        return "\n".join(lines)
    if engine == "mariadb":
        if lead:
            # FORCE INDEX cannot use an IGNORED index, and MariaDB has no EXPLAIN ANALYZE: ANALYZE FORMAT=JSON shows r_rows.
            return "\n".join([*lead, f"Check with ANALYZE FORMAT=JSON on the statement that the plan uses {index_text} again (rows close to r_rows)."])
        return "\n".join(
            [
                f"If the good index was set aside: ALTER TABLE {table_text} ALTER INDEX {index_text} NOT IGNORED;   (MariaDB 10.6+)",
                f"Refresh the statistics: ANALYZE TABLE {table_text} PERSISTENT FOR ALL;",
                f"Pin the plan in the statement: ... FROM {table_text} FORCE INDEX ({index_text}) ...",
            ]
        )
    if lead:
        return "\n".join([*lead, f"Check with EXPLAIN ANALYZE (MySQL 8.0.18+) on the statement that the plan uses {index_text} again."])
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
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
