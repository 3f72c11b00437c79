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

import re
from dataclasses import dataclass

import polars as pl

from dbdiag import sqlnorm
from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.sql import cause as cause_module
from dbdiag.rules.sql.common import (
    db_time_s,
    from_one_source,
    has_statement,
    join_statements,
    rows_where,
    seconds,
    short_sql,
    statements,
    statements_numbered,
)
from dbdiag.rules.sql.full_table_scan import MYSQL_FAMILY, sqlnorm_dialect, suggest_index

RULE_ID = "stale-statistics"

OUTDATED_MODIFY_RATIO = 0.8
OUTDATED_MIN_MODIFIED_ROWS = 1_000
MISESTIMATE_FACTOR = 100.0
MIN_NODE_ROWS = 100.0
MIN_AFFECTED_S = 1.0
MIN_AFFECTED_SHARE_PCT = 1.0
CRITICAL_SHARE_PCT = 25.0
MAX_FINDINGS = 5
MAX_FINGERPRINTS_SHOWN = 5
MAX_NODES_SHOWN = 8
MAX_CAUSE_TABLES = 20

SYSTEM_SCHEMAS = ("information_schema", "performance_schema", "metrics_schema", "mysql", "pg_catalog", "sys")
_SYSTEM_SQL = r"(?i)\b(?:" + "|".join(SYSTEM_SCHEMAS) + r")\s*\.|\bpg_catalog\b|\bpg_stat"
_JOIN_NODE = r"(?i)join|nested loop|apply"
TIDB_LOOKUP_JOINS = ("IndexJoin", "IndexHashJoin", "IndexMergeJoin", "Apply")
_STATS_ITEM = r"^([^:\[\]]+):(pseudo|\d+)(?:\[(-?\d+);(-?\d+)\])?"


def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    total_s = db_time_s(everything) or 1.0
    estimated = _estimated_nodes(inp)
    suspects = estimated.filter(pl.col("could_be_off")) if estimated is not None else None
    # Only the statements with a Stats line or a suspect plan node can show a signal: they alone are
    # judged (internal? system schema?) and copied, as all later steps join on them.
    frame = _user_statements(_candidates(inp, everything, suspects))
    stats = _stats_signals(frame)
    misestimates = None
    if estimated is not None and _user_statement_among(inp, everything, estimated):
        misestimates = _misestimate_signals(inp, frame, suspects)
    if stats is None and misestimates is None:
        left_out = everything.height - _user_statements(everything).height
        note = f" ({left_out:,} internal or system-schema statement(s) left out)" if left_out else ""
        raise Skip(
            f"no TiDB Stats line and no plan with both estimated and actual rows on user statements{note} "
            "(PostgreSQL auto_explain.log_analyze, MariaDB log_slow_verbosity=explain, TiDB decoded plans)"
        )
    signals = pl.concat([s for s in (stats, misestimates) if s is not None], how="diagonal_relaxed")
    if signals.height == 0:
        return Verdict(measured=_measured_none(frame, stats, misestimates))
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


# The statement columns this rule reads: filtering them is much cheaper than filtering the whole table.
_READ = ("source", "stmt_id", "line", "fp_id", "query_time_s", "engine", "sample_sql", "stats_info")
_JUDGED = ("db", "is_internal")  # read to leave internal and system-schema statements out


def _estimated_nodes(inp: RuleInput) -> pl.DataFrame | None:
    """source, stmt_id of the plan nodes with both estimated and actual rows, and ``could_be_off``: whether the
    node's own numbers can make it a signal (by_rows / by_filter of :func:`_misestimate_signals`, less their
    conditions on engine, node type and parent); None without plan nodes."""
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    if nodes is None:
        return None
    est, act = pl.col("est_rows"), pl.col("actual_rows")
    removed = pl.col("rows_removed_by_filter")
    read_through_index = act + removed.fill_null(0.0)
    factor = pl.max_horizontal(est, act) / pl.max_horizontal(pl.min_horizontal(est, act), pl.lit(1.0))
    could_be_off = ((pl.max_horizontal(est, act) >= MIN_NODE_ROWS) & (factor >= MISESTIMATE_FACTOR)) | (
        removed.is_not_null()
        & (read_through_index >= MIN_NODE_ROWS)
        & (read_through_index / pl.max_horizontal(est, pl.lit(1.0)) >= MISESTIMATE_FACTOR)
    )
    estimated = nodes.select("source", "stmt_id", "est_rows", "actual_rows", "rows_removed_by_filter").filter(
        est.is_not_null(), act.is_not_null()
    )
    return estimated.select("source", "stmt_id", could_be_off.alias("could_be_off"))  # on these rows only: nulls make it slow


def _candidates(inp: RuleInput, everything: pl.DataFrame, nodes: pl.DataFrame | None) -> pl.DataFrame:
    """The statements with a TiDB Stats line or one of the plan ``nodes`` (the columns in _READ and _JUDGED)."""
    possible = everything["stats_info"].is_not_null()
    if nodes is not None and nodes.height:
        possible = possible | has_statement(everything, nodes, from_one_source(inp), statements_numbered(inp))
    return rows_where(everything.select(*_READ, *_JUDGED), possible)


def _user_statement_among(inp: RuleInput, everything: pl.DataFrame, nodes: pl.DataFrame) -> bool:
    """Whether a user statement has one of the plan ``nodes``: the statements of the first nodes are judged
    first (one of them usually is one), all of them only when none is."""
    for some in (nodes.head(100), nodes):
        found = has_statement(everything, some, from_one_source(inp), statements_numbered(inp))
        statements_of_nodes = rows_where(everything.select(*_READ, *_JUDGED), found)
        if _user_statements(statements_of_nodes).height:
            return True
        if some.height == nodes.height:
            break
    return False


def _user_statements(frame: pl.DataFrame) -> pl.DataFrame:
    """The statements that are not internal and do not read system schemas (the columns in _READ)."""
    # sample_sql repeats (one text per fingerprint unless literals are shown): each text is searched once.
    texts = frame["sample_sql"].fill_null("").unique()
    system_texts = texts.filter(texts.str.contains(_SYSTEM_SQL))
    dbs = frame["db"].drop_nulls().unique()  # a few names: each lower-cased once ("" is no system schema)
    system_dbs = dbs.filter(dbs.str.to_lowercase().is_in(SYSTEM_SCHEMAS))
    system = pl.lit(False)
    if system_dbs.len():
        system = system | pl.col("db").fill_null("").is_in(system_dbs.implode())
    if system_texts.len():
        system = system | pl.col("sample_sql").fill_null("").is_in(system_texts.implode())
    keep = frame.select(~pl.col("is_internal").fill_null(False) & ~system).to_series()
    read = frame.select(_READ)
    return read if keep.all(ignore_nulls=False) else read.filter(keep)  # usually all: no copy at all


def _measured_none(frame: pl.DataFrame, stats: pl.DataFrame | None, misestimates: pl.DataFrame | None) -> str:
    parts = []
    if stats is not None:
        parts.append(f"{frame.filter(pl.col('stats_info').is_not_null()).height:,} statement(s) with TiDB Stats, no pseudo or outdated table")
    if misestimates is not None:
        parts.append(f"no table-reading plan node with estimates {MISESTIMATE_FACTOR:.0f}x off")
    return "; ".join(parts)


def _stats_signals(frame: pl.DataFrame) -> pl.DataFrame | None:
    """TiDB ``Stats`` entries that are pseudo or outdated: table, source, stmt_id, kind, rows, modified."""
    # most logs have no Stats line: the null test first, on the column's validity only
    with_stats = frame.filter(pl.col("stats_info").is_not_null()).filter(pl.col("stats_info").str.strip_chars() != "")
    if with_stats.height == 0:
        return None
    # Column/index load states in brackets hold commas too; those pieces do not match _STATS_ITEM.
    items = (
        with_stats.select("source", "stmt_id", pl.col("stats_info").str.split(",").alias("item"))
        .explode("item")
        .with_columns(pl.col("item").str.strip_chars().str.extract_groups(_STATS_ITEM).alias("parts"))
        .unnest("parts")
        .rename({"1": "table_raw", "2": "version", "3": "rows", "4": "modified"})
        .filter(pl.col("table_raw").is_not_null())
        .with_columns(
            pl.col("table_raw").str.strip_chars().str.split(" ").list.first().alias("table"),
            pl.col("rows").cast(pl.Int64, strict=False),
            pl.col("modified").cast(pl.Int64, strict=False),
        )
    )
    pseudo = pl.col("version") == "pseudo"
    outdated = (
        (pl.col("modified") >= OUTDATED_MIN_MODIFIED_ROWS)
        & (pl.col("modified") >= OUTDATED_MODIFY_RATIO * pl.col("rows"))
    ).fill_null(False)
    return items.filter(pseudo | outdated).select(
        "table",
        "source",
        "stmt_id",
        pl.when(pseudo).then(pl.lit("pseudo")).otherwise(pl.lit("outdated")).alias("kind"),
        "rows",
        "modified",
    )


def _misestimate_signals(inp: RuleInput, frame: pl.DataFrame, suspects: pl.DataFrame) -> pl.DataFrame:
    """Plan nodes reading a table whose estimate is MISESTIMATE_FACTOR off, of the statements in ``frame``.

    ``suspects``: the plan nodes whose own numbers can make them a signal (see :func:`_estimated_nodes`); the
    parent lookups below are for their few plans only.
    """
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    est, act = pl.col("est_rows"), pl.col("actual_rows")
    removed = pl.col("rows_removed_by_filter")
    read_through_index = act + removed.fill_null(0.0)
    factor = pl.max_horizontal(est, act) / pl.max_horizontal(pl.min_horizontal(est, act), pl.lit(1.0))
    one_source = from_one_source(inp)
    plans = suspects.select("source", "stmt_id").unique()
    keyed = join_statements(
        join_statements(nodes, plans, how="semi", one_source=one_source), frame.select("source", "stmt_id", "engine"), how="inner",
        one_source=one_source,
    )
    keyed = _under_tidb_lookup_join(_with_parent(keyed)).filter(
        pl.col("est_rows").is_not_null(), pl.col("actual_rows").is_not_null(), ~pl.col("under_lookup_join")
    )
    is_scan = pl.col("node_type").str.contains("Scan")
    is_index_scan = is_scan & pl.col("node_type").str.contains("(?i)index|bitmap heap")
    reads_table = is_scan | pl.col("engine").is_in(MYSQL_FAMILY) | pl.col("parent_type").fill_null("").str.contains(_JOIN_NODE)
    filter_factor = read_through_index / pl.max_horizontal(est, pl.lit(1.0))
    judged = keyed.with_columns(
        factor.alias("factor"),
        pl.when(is_index_scan & removed.is_not_null() & (pl.col("engine") == "postgresql")).then(filter_factor).alias("filter_factor"),
        pl.coalesce(pl.col("relation"), pl.col("parent_relation")).alias("table"),
    ).filter(pl.col("table").is_not_null(), reads_table)
    big = pl.max_horizontal(est, act) >= MIN_NODE_ROWS
    by_rows = big & (pl.col("factor") >= MISESTIMATE_FACTOR)
    by_filter = (read_through_index >= MIN_NODE_ROWS) & (pl.col("filter_factor").fill_null(0.0) >= MISESTIMATE_FACTOR)
    return judged.filter(by_rows | by_filter).select(
        "table",
        "source",
        "stmt_id",
        pl.when(by_rows).then(pl.lit("misestimate")).otherwise(pl.lit("filter")).alias("kind"),
        "node_type",
        "index_name",
        "est_rows",
        "actual_rows",
        "loops",
        "rows_removed_by_filter",
        "filter",
        pl.max_horizontal(pl.col("factor"), pl.col("filter_factor").fill_null(0.0)).alias("factor"),
        "engine",
    )


def _with_parent(nodes: pl.DataFrame) -> pl.DataFrame:
    """Each node's parent type and table: the nearest earlier node of the same plan one level up (plans are depth-first)."""
    ordered = nodes.sort("node_id")
    parents = ordered.select(
        "source",
        "stmt_id",
        pl.col("node_id").alias("parent_id"),
        (pl.col("depth") + 1).alias("depth"),
        pl.col("node_type").alias("parent_type"),
        pl.col("relation").alias("parent_relation"),
    ).sort("parent_id")
    return ordered.join_asof(
        parents,
        left_on="node_id",
        right_on="parent_id",
        by=["source", "stmt_id", "depth"],
        strategy="backward",
        check_sortedness=False,
        coalesce=False,
    ).drop("depth_right", strict=False)


def _under_tidb_lookup_join(nodes: pl.DataFrame) -> pl.DataFrame:
    """Flag TiDB nodes below an IndexJoin/Apply: there estRows counts per lookup while actRows is a total."""
    flagged = (pl.col("engine") == "tidb") & pl.col("parent_type").is_in(TIDB_LOOKUP_JOINS).fill_null(False)
    nodes = nodes.with_columns(flagged.alias("under_lookup_join"))
    if not nodes["under_lookup_join"].any():
        return nodes
    keys = ["source", "stmt_id"]
    for _ in range(int(nodes["depth"].max() or 0)):
        inherited = nodes.select(*keys, pl.col("node_id").alias("parent_id"), pl.col("under_lookup_join").alias("parent_flag"))
        nodes = nodes.join(inherited, on=[*keys, "parent_id"], how="left").with_columns(
            (pl.col("under_lookup_join") | pl.col("parent_flag").fill_null(False)).alias("under_lookup_join")
        ).drop("parent_flag")
    return nodes


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
    columns = _filter_columns(nodes, engine) or _where_columns(worst, table)
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
        remediation=_remediation(engine, table, columns, index, kinds, cause, found.changes if found else None, worst["sample_sql"]),
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


def _filter_columns(nodes: pl.DataFrame, engine: str | None) -> list[str]:
    """Column names in the misestimated nodes' filter text (PostgreSQL ``(status = 1)``, TiDB ``eq(test.t.status, 1)``)."""
    from sqlglot import exp

    names: list[str] = []
    for text in nodes["filter"].drop_nulls().unique(maintain_order=True).to_list() if nodes.height else []:
        tree = sqlnorm.parse_statement(text, sqlnorm_dialect(engine))
        if tree is None:
            continue  # too long, too deep or unreadable: the other filters are still read
        try:
            columns = [column.name for column in tree.find_all(exp.Column) if column.name]
        except sqlnorm.tree_errors():
            continue
        names += [name for name in dict.fromkeys(columns) if name not in names]
    return names


def _where_columns(statement: dict, table: str) -> list[str]:
    suggestion = suggest_index(statement["sample_sql"], statement["engine"], table)
    return list(suggestion.columns) if suggestion else []


def _remediation(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str], cause: dict | None = None,
                 changes: pl.DataFrame | None = None, sample_sql: str | None = None) -> str:
    text = _remediation_steps(engine, table, columns, index, kinds)
    if cause is None:
        return text
    undo = cause_module.undo(engine, cause, changes if changes is not None else pl.DataFrame(), sample_sql)
    lead = f"The plans went wrong after {cause_module.label(cause)} ({cause_module.where(cause)})."
    if undo and not all("Collect statistics" in line for line in undo):
        return "\n".join([lead, *undo, text])
    return "\n".join([f"{lead} Step 1 collects statistics on the data as it is now.", text])


def _remediation_steps(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str]) -> str:
    """The numbered steps; steps that need a column are left out when none is known (no placeholder to fill in)."""
    steps = _steps(engine, table, columns, index, kinds).splitlines()
    numbers = iter(range(1, len(steps) + 1))
    return "\n".join(re.sub(r"^\d+\. ", lambda _: f"{next(numbers)}. ", line) for line in steps)


def _steps(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str]) -> str:
    if engine == "tidb":
        lines = [
            f"1. Collect statistics while {table} holds representative data: ANALYZE TABLE {table};",
            f"2. Check them: SHOW STATS_META WHERE table_name = '{table}';  SHOW STATS_HEALTHY WHERE table_name = '{table}';",
            f"3. If {table} is a queue (filled and drained), statistics taken while it is empty mislead every plan: after step 1, "
            f"LOCK STATS {table};  (TiDB 6.5+) so auto-analyze cannot retake them at the wrong moment.",
            "4. Make sure auto-analyze keeps up: SHOW VARIABLES LIKE 'tidb_enable_auto_analyze'; SHOW VARIABLES LIKE 'tidb_auto_analyze%';"
            " (tidb_auto_analyze_ratio, default 0.5; tidb_auto_analyze_start_time / end_time window).",
        ]
        if "pseudo" in kinds:
            lines.append(f"Pseudo statistics mean the optimizer guessed: SHOW ANALYZE STATUS WHERE table_name = '{table}'; shows whether analyze ever ran or failed.")
        return "\n".join(lines)
    if engine == "postgresql":
        targets = " ".join(f"ALTER TABLE {table} ALTER COLUMN {c} SET STATISTICS 1000;" for c in columns)
        lines = [
            f"1. Refresh the statistics: ANALYZE {table};",
            *([f"2. If estimates stay off for skewed columns, sample more: {targets} ANALYZE {table};"] if columns else []),
            f"3. Keep them fresh on a fast-changing table: ALTER TABLE {table} SET (autovacuum_analyze_scale_factor = 0.02);",
        ]
        if len(columns) > 1:
            lines.append(
                f"4. The filter combines correlated columns: CREATE STATISTICS {table}_{'_'.join(columns[:3])}_stats (dependencies, ndistinct, mcv) "
                f"ON {', '.join(columns[:3])} FROM {table}; ANALYZE {table};"
            )
        lines.append("Check with EXPLAIN (ANALYZE) that estimated and actual rows now agree within 10x.")
        return "\n".join(lines)
    if engine == "mariadb":
        indexes = f" INDEXES ({index})" if index else ""
        persistent = f"FOR COLUMNS ({', '.join(columns)}){indexes}" if columns else "FOR ALL"
        return "\n".join(
            [
                f"1. Collect engine-independent statistics with histograms: ANALYZE TABLE {table} PERSISTENT {persistent};",
                "2. Make histograms precise enough: SET GLOBAL histogram_size = 254; (and histogram_type = DOUBLE_PREC_HB, or JSON_HB on 10.8+);"
                " SET GLOBAL use_stat_tables = 'preferably_for_queries';",
                f"3. Refresh InnoDB statistics too: ANALYZE TABLE {table};",
                "Check with ANALYZE FORMAT=JSON <statement> that rows and r_rows now agree within 10x.",
            ]
        )
    return "\n".join(
        [
            f"1. Refresh the statistics: ANALYZE TABLE {table};",
            *([f"2. For skewed columns (MySQL 8.0+): ANALYZE TABLE {table} UPDATE HISTOGRAM ON {', '.join(columns)} WITH 1024 BUCKETS;"] if columns else []),
            f"3. Sample more pages if estimates stay off: ALTER TABLE {table} STATS_SAMPLE_PAGES = 200; ANALYZE TABLE {table};",
            "Check with EXPLAIN ANALYZE that estimated and actual rows now agree within 10x.",
        ]
    )


RULE = Rule(
    id=RULE_ID,
    title="Optimizer statistics missing, outdated or far from the data",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
