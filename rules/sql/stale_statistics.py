"""Optimizer statistics missing, outdated or wrong on tables that costly statements read.

What it detects:
    Tables whose statistics misled the optimizer for statements that cost real time:
    - TiDB: the slow log's ``Stats:`` line says a table was planned with ``pseudo`` statistics
      (none collected, or discarded as outdated), or its modify count since the last ANALYZE is
      large against its row count (``t:<version>[<rows>;<modified>]``, TiDB 7.x);
    - PostgreSQL (auto_explain with ANALYZE), MariaDB (``# explain:`` with ``r_rows``), TiDB
      (``actRows``): a plan node that reads a table — a scan, or a table input of a join — whose
      estimated rows are 100 times off the actual rows, or an index scan whose filter removed 100
      times more rows than the planner expected the index to return.

Why it matters:
    The optimizer picks indexes, join order and join methods from row estimates. Estimates off
    by orders of magnitude give plans that are orders of magnitude slower: a nested loop over
    what was thought to be 10 rows and is 1,000,000, the wrong index for a status column whose
    histogram was taken while a queue table was empty. Statistics go stale when a table changes
    faster than (auto-)analyze runs, or when they were taken at an unrepresentative moment.

How it is detected:
    Inputs: ``statement`` rows (fingerprinted; TiDB ``stats_info``) and ``plan_node`` rows with
    estimated and actual rows. Statements of the system schemas and TiDB internal statements are
    left out.
    - TiDB pseudo: a ``<table>:pseudo`` entry in ``Stats``.
    - TiDB outdated: modified rows >= OUTDATED_MODIFY_RATIO = 0.8 x the table's rows (TiDB's own
      ``tidb_pseudo_estimate_ratio`` default) and >= OUTDATED_MIN_MODIFIED_ROWS = 1,000.
    - Misestimate: on a plan node that reads a table (a scan, a MariaDB table access, or the
      direct input of a join), max(estimated, actual) / max(min(estimated, actual), 1) >=
      MISESTIMATE_FACTOR = 100, the rows compared as the engine reports them (PostgreSQL and
      MariaDB per loop, TiDB in total); nodes where both are below MIN_NODE_ROWS = 100 are
      ignored (with estimates counted from 1 row, a node under 100 rows cannot be 100x off
      anyway). For PostgreSQL index scans, rows removed by filter count too: (actual + removed)
      against the estimate, with the same factor — the planner chose the index expecting few
      rows, and its filter then threw most of them away. TiDB nodes below an IndexJoin or Apply
      are not judged: there estRows counts per lookup while actRows is a total.
    Per table, the statements showing any of these must total at least MIN_AFFECTED_S = 1 s and
    at least MIN_AFFECTED_SHARE_PCT = 1% of all statement time. One finding per table, at most
    MAX_FINDINGS = 5; critical from CRITICAL_SHARE_PCT = 25% of statement time.
    The cause: the last change on the table (derived ``change`` table: DDL, ANALYZE, a bulk
    change) before its first misled statement, and the statistics collection before a bulk change
    (the one it made stale). Then the time is measured from each misled fingerprint's own runs,
    all of them (a logged plan or not): calls after the change x (median after - median before),
    each side bounded by the neighbouring changes on the table, summed over the fingerprints; the
    rule judges the larger of that and the misled statements' own time. Without a change in the
    capture, the same step is taken at the first misled statement. Without runs on both sides the
    time is that of the statements that used the bad statistics, not time proven lost because of
    them.

Remediation:
    Led by the change the capture shows (its ``file:line``); then collect statistics on representative data: TiDB ``ANALYZE TABLE t``, and ``LOCK STATS t``
    when the table is a queue whose statistics go bad while it is empty; PostgreSQL ``ANALYZE t``
    and, for skewed columns, ``ALTER TABLE t ALTER COLUMN c SET STATISTICS 1000``; MariaDB
    ``ANALYZE TABLE t PERSISTENT FOR COLUMNS (c) INDEXES (i)`` with ``histogram_size``; MySQL
    ``ANALYZE TABLE t UPDATE HISTOGRAM ON c``. Then make sure automatic analyze keeps up
    (TiDB ``tidb_auto_analyze_ratio`` and time window, PostgreSQL
    ``autovacuum_analyze_scale_factor``).

References:
    TiDB docs "Introduction to Statistics" (pseudo statistics, LOCK STATS, auto analyze),
    "identify-slow-queries" (Stats field), system variable ``tidb_pseudo_estimate_ratio``;
    PostgreSQL manual "Statistics Used by the Planner", "ANALYZE", "auto_explain"; MariaDB KB
    "ANALYZE Statement", "Engine-Independent Table Statistics", "Histogram-Based Statistics";
    MySQL 8.0 manual "Optimizer Statistics" (histograms).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.sql import cause as cause_module
from dbdiag.rules.sql.common import db_time_s, short_sql, statements
from dbdiag.rules.sql.stale_statistics_remedies import filter_columns, remediation, where_columns
from dbdiag.rules.sql.stale_statistics_signals import (  # noqa: F401 - the thresholds the docs quote live with the signals
    MIN_NODE_ROWS,
    MISESTIMATE_FACTOR,
    OUTDATED_MIN_MODIFIED_ROWS,
    OUTDATED_MODIFY_RATIO,
    SYSTEM_SCHEMAS,
    TIDB_LOOKUP_JOINS,
    candidates,
    estimated_nodes,
    measured_none,
    misestimate_signals,
    stats_signals,
    user_statement_among,
    user_statements,
)
from dbdiag.units import seconds

RULE_ID = "stale-statistics"

MIN_AFFECTED_S = 1.0
MIN_AFFECTED_SHARE_PCT = 1.0
CRITICAL_SHARE_PCT = 25.0
MAX_FINDINGS = 5
MAX_FINGERPRINTS_SHOWN = 5
MAX_NODES_SHOWN = 8
MAX_CAUSE_TABLES = 20



def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    total_s = db_time_s(everything) or 1.0
    estimated = estimated_nodes(inp)
    suspects = estimated.filter(pl.col("could_be_off")) if estimated is not None else None
    # Only the statements with a Stats line or a suspect plan node can show a signal: they alone are
    # judged (internal? system schema?) and copied, as all later steps join on them.
    frame = user_statements(candidates(inp, everything, suspects))
    stats = stats_signals(frame)
    misestimates = None
    if estimated is not None and user_statement_among(inp, everything, estimated):
        misestimates = misestimate_signals(inp, frame, suspects)
    if stats is None and misestimates is None:
        left_out = everything.height - user_statements(everything).height
        note = f" ({left_out:,} internal or system-schema statement(s) left out)" if left_out else ""
        raise Skip(
            f"no TiDB Stats line and no plan with both estimated and actual rows on user statements{note} "
            "(PostgreSQL auto_explain.log_analyze, MariaDB log_slow_verbosity=explain, TiDB decoded plans)"
        )
    signals = pl.concat([s for s in (stats, misestimates) if s is not None], how="diagonal_relaxed")
    if signals.height == 0:
        return Verdict(measured=measured_none(frame, stats, misestimates))
    affected = (
        signals.select("table", "source", "stmt_id").unique()
        .join(frame.select("source", "stmt_id", "fp_id", "query_time_s", "engine"), on=["source", "stmt_id"], how="inner")
    )
    per_table = (
        affected.group_by("table")
        .agg(
            pl.len().alias("statements"),
            pl.col("query_time_s").fill_null(0.0).sum().alias("affected_s"),
            pl.col("fp_id").n_unique().alias("fingerprints"),
            pl.col("engine").drop_nulls().mode().sort().first().alias("engine"),
        )
        .with_columns((100.0 * pl.col("affected_s") / total_s).alias("share_pct"))
        .sort("affected_s", descending=True)
    )
    top = per_table.row(0, named=True)
    measured = (
        f"{per_table.height} table(s) with pseudo/outdated statistics or 100x misestimates; heaviest {top['table']}: "
        f"{top['statements']:,} statement(s), {seconds(top['affected_s'])}, {top['share_pct']:.1f}% of statement time "
        f"(fires from {MIN_AFFECTED_S:.0f} s and {MIN_AFFECTED_SHARE_PCT:.0f}%)"
    )
    causes = {row["table"]: _cause_and_step(inp, everything, affected, row["table"]) for row in per_table.head(MAX_CAUSE_TABLES).iter_rows(named=True)}
    per_table = per_table.with_columns(
        pl.max_horizontal(
            pl.col("affected_s"), pl.col("table").replace_strict({k: v.lost_s for k, v in causes.items()}, default=0.0, return_dtype=pl.Float64)
        ).alias("judged_s")
    ).with_columns((100.0 * pl.col("judged_s") / total_s).alias("judged_pct"))
    heavy = per_table.filter(pl.col("judged_s") >= MIN_AFFECTED_S, pl.col("judged_pct") >= MIN_AFFECTED_SHARE_PCT).sort(
        "judged_s", descending=True
    ).head(MAX_FINDINGS)
    findings = [_finding(frame, signals, affected, row, causes.get(row["table"]), total_s) for row in heavy.iter_rows(named=True)]
    return Verdict(findings=findings, measured=measured)


@dataclass(frozen=True)
class TableCause:
    """The last change on a table before its first misled statement, and the step of each misled fingerprint there."""

    cause: dict | None
    collected: dict | None  # the statistics collection a bulk change made stale
    steps: tuple[tuple[str, cause_module.Step], ...]  # (fp_id, step), heaviest loss first
    changes: pl.DataFrame | None
    first_misled: dict | None = None  # the first statement planned on the bad statistics
    fixed_by: dict | None = None  # statistics collected later in the capture, after which the statements ran fast

    @property
    def lost_s(self) -> float:
        return sum(found.lost_s or 0.0 for _, found in self.steps)

    @property
    def measured(self) -> bool:
        return any(found.lost_s is not None for _, found in self.steps)


def _cause_and_step(inp: RuleInput, everything: pl.DataFrame, affected: pl.DataFrame, table: str) -> TableCause:
    """The cause on ``table`` and the step of each misled fingerprint there; without a cause, the step at the
    first misled statement (the statistics went wrong at some moment the capture does not show)."""
    misled = affected.filter(pl.col("table") == table)
    fps = misled["fp_id"].unique().to_list()
    runs = everything.filter(pl.col("fp_id").is_in(fps)).select("fp_id", "source", "stmt_id", "line", "start_ts", "end_ts", "query_time_s")
    first = runs.join(misled.select("source", "stmt_id"), on=["source", "stmt_id"], how="semi").sort(
        pl.coalesce("start_ts", "end_ts"), "source", "line", nulls_last=True
    ).row(0, named=True)
    changes = cause_module.table_changes(inp)
    mine = cause_module.on_tables(changes, {table.lower()}) if changes is not None else None
    cause = cause_module.last_change_before(mine, first) if mine is not None and mine.height else None
    if cause is None:
        point = cause_module.at_run(first)
        steps = [(fp_id, cause_module.step(group, point, None, None)) for (fp_id,), group in runs.group_by("fp_id")]
        steps.sort(key=lambda pair: (-(pair[1].lost_s or 0.0), pair[0]))
        return TableCause(None, None, tuple(steps), mine, first)
    previous, following = cause_module.neighbours(mine, cause)
    steps = [(fp_id, cause_module.step(group, cause, previous, following)) for (fp_id,), group in runs.group_by("fp_id")]
    steps.sort(key=lambda pair: (-(pair[1].lost_s or 0.0), pair[0]))
    collected = cause_module.statistics_before(mine, cause)
    if not any(found.lost_s is not None for _, found in steps):
        fixed = _fixed_by(runs, mine, cause)
        if fixed is not None:
            fix, fix_steps = fixed
            return TableCause(cause, collected, fix_steps, mine, first, fixed_by=fix)
    return TableCause(cause, collected, tuple(steps), mine, first)


def _step_fields(found: TableCause) -> dict:
    """The heaviest fingerprint's runs before and after the change the step is measured at: the cause, or
    the statistics collection that fixed the plans (``step_at``), its runs before it the slow ones."""
    top = found.steps[0][1]
    if found.fixed_by is None:
        return {**cause_module.step_numbers(top), "step_at": "cause"}
    return {
        "calls_before": top.calls_after, "median_before_s": round(top.median_after_s, 6),
        "calls_after": top.calls_before, "median_after_s": round(top.median_before_s, 6),
        "step_at": "fix", "fixed_by": cause_module.cause_summary(found.fixed_by),
    }


def _fixed_by(runs: pl.DataFrame, mine: pl.DataFrame, cause: dict) -> tuple[dict, tuple[tuple[str, cause_module.Step], ...]] | None:
    """The first statistics collection on the table after ``cause`` with runs on both sides, and the cost
    of the stale statistics until then: runs before it x (median before - median after), per fingerprint
    (the mirror of a step at a cause: the slow side comes first)."""
    later = [
        c for c in mine.iter_rows(named=True)
        if c["kind"] == "statistics" and cause_module.change_before({"source": c["source"], "line": c["line"], "start_ts": c["ts"]}, cause)
    ]
    for fix in later:
        steps = []
        for (fp_id,), group in runs.group_by("fp_id"):
            at_fix = cause_module.step(group, fix, None, None)
            mirrored = cause_module.Step(
                calls_before=at_fix.calls_after, median_before_s=at_fix.median_after_s,
                calls_after=at_fix.calls_before, median_after_s=at_fix.median_before_s,
                after_s=float(group.filter(cause_module.before(fix))["query_time_s"].drop_nulls().sum()),
            )
            steps.append((fp_id, mirrored))
        if any(found.lost_s is not None for _, found in steps):
            steps.sort(key=lambda pair: (-(pair[1].lost_s or 0.0), pair[0]))
            return fix, tuple(steps)
    return None


def _finding(frame: pl.DataFrame, signals: pl.DataFrame, affected: pl.DataFrame, row: dict, found: TableCause | None, total_s: float) -> Finding:
    table, engine, share = row["table"], row["engine"], row["share_pct"]
    mine = signals.filter(pl.col("table") == table)
    kinds = set(mine["kind"].unique().to_list())
    rows = affected.filter(pl.col("table") == table)
    by_class = (
        rows.group_by("fp_id")
        .agg(pl.len().alias("statements"), pl.col("query_time_s").fill_null(0.0).sum().alias("time_s"))
        .sort("time_s", descending=True)
    )
    samples = frame.join(rows.select("source", "stmt_id"), on=["source", "stmt_id"], how="semi").sort("query_time_s", descending=True, nulls_last=True)
    worst = samples.row(0, named=True)
    nodes = mine.filter(pl.col("kind").is_in(["misestimate", "filter"]))
    columns = filter_columns(nodes, engine) or where_columns(worst, table)
    index = nodes["index_name"].drop_nulls().first() if nodes.height and "index_name" in nodes.columns else None
    what = _what(kinds)
    evidence = [
        Evidence(
            title=f"Statements that used these statistics ({row['statements']:,}, {seconds(row['affected_s'])})",
            columns=("fingerprint id", "statements", "time", "share of statement time %", "sample"),
            rows=tuple(
                (
                    c["fp_id"],
                    c["statements"],
                    seconds(c["time_s"]),
                    round(share * c["time_s"] / row["affected_s"], 1) if row["affected_s"] else 0.0,
                    short_sql(samples.filter(pl.col("fp_id") == c["fp_id"])["sample_sql"].first())[:200],
                )
                for c in by_class.head(MAX_FINGERPRINTS_SHOWN).iter_rows(named=True)
            ),
        ),
    ]
    stats_rows = mine.filter(pl.col("kind").is_in(["pseudo", "outdated"]))
    if stats_rows.height:
        summary = stats_rows.group_by("kind").agg(
            pl.len().alias("statements"), pl.col("rows").drop_nulls().last().alias("rows"), pl.col("modified").drop_nulls().last().alias("modified")
        ).sort("kind", descending=True)
        evidence.append(
            Evidence(
                title=f"TiDB Stats line for {table}",
                columns=("state", "statements", "table rows (realtime)", "modified since ANALYZE"),
                rows=tuple((s["kind"], s["statements"], s["rows"], s["modified"]) for s in summary.iter_rows(named=True)),
            )
        )
    if nodes.height:
        shape = ["node_type", "index_name", "est_rows", "actual_rows", "loops", "rows_removed_by_filter", "filter"]
        shown = (
            nodes.group_by(shape)
            .agg(pl.len().alias("statements"), pl.col("factor").max())
            .sort(["factor", "statements", "node_type", "index_name", "est_rows"], descending=[True, True, False, False, False], nulls_last=True)
            .head(MAX_NODES_SHOWN)
        )
        evidence.append(
            Evidence(
                title=f"Plan nodes on {table} with estimates {MISESTIMATE_FACTOR:.0f}x or more off (worst first)",
                columns=("node", "index", "estimated rows", "actual rows", "loops", "removed by filter", "off by", "filter", "statements"),
                rows=tuple(
                    (n["node_type"], n["index_name"], n["est_rows"], n["actual_rows"], n["loops"], n["rows_removed_by_filter"], f"{n['factor']:,.0f}x", n["filter"], n["statements"])
                    for n in shown.iter_rows(named=True)
                ),
            )
        )
    worst_factor = float(nodes["factor"].max()) if nodes.height else None
    observed = _observed(kinds, stats_rows, worst_factor)
    cause = found.cause if found else None
    measured = found is not None and found.measured
    cost_s = found.lost_s if measured else row["affected_s"]
    cost_pct = 100.0 * cost_s / total_s if total_s else 0.0
    if cause:
        evidence[1:1] = cause_module.cause_evidence(cause, found.steps[0][1] if found.steps else None, found.changes)
        if len(found.steps) > 1:
            evidence.insert(1, Evidence(
                title="Step of each misled statement at the change (all its runs)",
                columns=("fingerprint id", "calls before", "median before", "calls after", "median after", "lost"),
                rows=tuple((fp, s.calls_before, seconds(s.median_before_s), s.calls_after, seconds(s.median_after_s), seconds(s.lost_s))
                           for fp, s in found.steps[:MAX_FINGERPRINTS_SHOWN]),
            ))
    after = f" after {cause_module.label(cause)} at {cause['ts']:%H:%M:%S} UTC ({cause_module.where(cause)})" if cause and cause["ts"] else ""
    if measured and found.fixed_by is not None:
        top_fp, top = found.steps[0]
        cost_text = (
            f"the statements misled on {table} ran {seconds(cost_s)} ({cost_pct:.1f}% of statement time) longer than after "
            f"{cause_module.label(found.fixed_by)} ({cause_module.where(found.fixed_by)}) gave the planner fresh statistics, "
            f"all runs counted (logged plan or not); heaviest, fingerprint {top_fp}: {top.calls_after:,} run(s) at "
            f"{seconds(top.median_after_s)} median before it, {top.calls_before:,} at {seconds(top.median_before_s)} after."
        )
    elif measured:
        top_fp, top = found.steps[0]
        cost_text = (
            f"the statements misled on {table} lost {seconds(cost_s)} ({cost_pct:.1f}% of statement time) against their own runs "
            f"before {'the change' if cause else _first_misled_text(found.first_misled)}, all runs counted (logged plan or not); "
            f"heaviest, fingerprint {top_fp}: {cause_module.step_text(top)}."
        )
    else:
        cost_text = f"they took {seconds(row['affected_s'])} ({share:.1f}% of statement time). How much of it a correct plan saves is not in the log."
    cause_text = f" Cause: the last change on {table} before the first misled statement, {cause_module.describe(cause)}." if cause else ""
    if found is not None and found.collected:
        cause_text += f" The statistics the planner used were collected before it: {cause_module.describe(found.collected)}."
    title_cost = f"{seconds(cost_s)} lost, {cost_pct:.1f}% of database time" if measured else f"statements holding {share:.1f}% of database time ({seconds(row['affected_s'])})"
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.CRITICAL if cost_pct >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"Stale statistics on {table}{after}: {observed}, {title_cost}; threshold: pseudo, outdated or "
            f"{MISESTIMATE_FACTOR:.0f}x off, and {MIN_AFFECTED_SHARE_PCT:.0f}% of time"
        ),
        subject=f"table {table}",
        impact={
            "share_pct": round(cost_pct, 1),
            "db_time_s": round(cost_s, 3),
            "share_of_db_time": round(cost_s / total_s, 4) if total_s else None,
            "description": (
                f"{row['statements']:,} statement(s) of {row['fingerprints']} fingerprint(s) were planned with {what} on {table}; "
                f"{cost_text}{cause_text}"
            ),
            "statements": row["statements"],
            "fingerprints": by_class["fp_id"].head(MAX_FINGERPRINTS_SHOWN).to_list(),
            "max_misestimate": round(worst_factor, 1) if worst_factor else None,
            **({"affected_db_time_s": round(row["affected_s"], 3)} if measured else {}),
            **(_step_fields(found) if measured else {}),
            **({"cause": cause_module.cause_summary(cause)} if cause else {}),
        },
        objects=tuple(f"fingerprint {fp}" for fp in by_class["fp_id"].to_list()),  # links the flips these statistics explain
        evidence=tuple(evidence),
        remediation=remediation(engine, table, columns, index, kinds, cause, found.changes if found else None, worst["sample_sql"]),
        sources=tuple(([cause_module.where(cause)] if cause else []) + [f"{s['source']}:{s['line']}" for s in samples.head(3).iter_rows(named=True)]),
    )


def _first_misled_text(first: dict | None) -> str:
    """``the first misled statement (db/slow.log:120, 10:00:43)``: where the step is taken when the capture shows no change."""
    if not first:
        return "the first misled statement"
    when = first["start_ts"] or first["end_ts"]
    return f"the first misled statement ({first['source']}:{first['line']}{f', {when:%H:%M:%S}' if when else ''})"


def _observed(kinds: set[str], stats_rows: pl.DataFrame, worst_factor: float | None) -> str:
    """The short, numeric form of what was seen, for the title."""
    parts = []
    if "pseudo" in kinds:
        parts.append("pseudo statistics")
    if "outdated" in kinds:
        latest = stats_rows.filter(pl.col("kind") == "outdated").row(-1, named=True)
        parts.append(f"outdated statistics ({latest['modified']:,} rows modified, {latest['rows']:,} in the table)")
    if worst_factor is not None:
        parts.append(f"estimates up to {worst_factor:,.0f}x off")
    return ", ".join(parts)


def _what(kinds: set[str]) -> str:
    parts = []
    if "pseudo" in kinds:
        parts.append("pseudo statistics (none collected, or discarded as outdated)")
    if "outdated" in kinds:
        parts.append(f"outdated statistics (modified rows >= {OUTDATED_MODIFY_RATIO:.0%} of the table)")
    if "misestimate" in kinds:
        parts.append(f"row estimates {MISESTIMATE_FACTOR:.0f}x or more off")
    if "filter" in kinds:
        parts.append(f"an index expected to return {MISESTIMATE_FACTOR:.0f}x fewer rows than its filter then removed")
    return " and ".join(parts)


RULE = Rule(
    id=RULE_ID,
    title="Optimizer statistics missing, outdated or far from the data",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
