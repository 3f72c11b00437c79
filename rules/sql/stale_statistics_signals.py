"""stale-statistics, the signals: statements whose logged statistics are pseudo or outdated, and plan nodes
whose estimated rows are MISESTIMATE_FACTOR off the actual ones (thresholds in :mod:`.stale_statistics`'s docstring)."""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.base import RuleInput
from dbdiag.rules.sql.common import from_one_source, statements_numbered
from dbdiag.statement_keys import has_statement, join_statements, rows_where
from dbdiag.vocabulary.dialects import MYSQL_FAMILY

OUTDATED_MODIFY_RATIO = 0.8
OUTDATED_MIN_MODIFIED_ROWS = 1_000
MISESTIMATE_FACTOR = 100.0
MIN_NODE_ROWS = 100.0
SYSTEM_SCHEMAS = ("information_schema", "performance_schema", "metrics_schema", "mysql", "pg_catalog", "sys")
_SYSTEM_SQL = r"(?i)\b(?:" + "|".join(SYSTEM_SCHEMAS) + r")\s*\.|\bpg_catalog\b|\bpg_stat"
_JOIN_NODE = r"(?i)join|nested loop|apply"
TIDB_LOOKUP_JOINS = ("IndexJoin", "IndexHashJoin", "IndexMergeJoin", "Apply")
_STATS_ITEM = r"^([^:\[\]]+):(pseudo|\d+)(?:\[(-?\d+);(-?\d+)\])?"


# The statement columns this rule reads: filtering them is much cheaper than filtering the whole table.
_READ = ("source", "stmt_id", "line", "fp_id", "query_time_s", "engine", "sample_sql", "stats_info")
_JUDGED = ("db", "is_internal")  # read to leave internal and system-schema statements out


def estimated_nodes(inp: RuleInput) -> pl.DataFrame | None:
    """source, stmt_id of the plan nodes with both estimated and actual rows, and ``could_be_off``: whether the
    node's own numbers can make it a signal (by_rows / by_filter of :func:`misestimate_signals`, less their
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


def candidates(inp: RuleInput, everything: pl.DataFrame, nodes: pl.DataFrame | None) -> pl.DataFrame:
    """The statements with a TiDB Stats line or one of the plan ``nodes`` (the columns in _READ and _JUDGED)."""
    possible = everything["stats_info"].is_not_null()
    if nodes is not None and nodes.height:
        possible = possible | has_statement(everything, nodes, from_one_source(inp), statements_numbered(inp))
    return rows_where(everything.select(*_READ, *_JUDGED), possible)


def user_statement_among(inp: RuleInput, everything: pl.DataFrame, nodes: pl.DataFrame) -> bool:
    """Whether a user statement has one of the plan ``nodes``: the statements of the first nodes are judged
    first (one of them usually is one), all of them only when none is."""
    for some in (nodes.head(100), nodes):
        found = has_statement(everything, some, from_one_source(inp), statements_numbered(inp))
        statements_of_nodes = rows_where(everything.select(*_READ, *_JUDGED), found)
        if user_statements(statements_of_nodes).height:
            return True
        if some.height == nodes.height:
            break
    return False


def user_statements(frame: pl.DataFrame) -> pl.DataFrame:
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


def measured_none(frame: pl.DataFrame, stats: pl.DataFrame | None, misestimates: pl.DataFrame | None) -> str:
    parts = []
    if stats is not None:
        parts.append(f"{frame.filter(pl.col('stats_info').is_not_null()).height:,} statement(s) with TiDB Stats, no pseudo or outdated table")
    if misestimates is not None:
        parts.append(f"no table-reading plan node with estimates {MISESTIMATE_FACTOR:.0f}x off")
    return "; ".join(parts)


def stats_signals(frame: pl.DataFrame) -> pl.DataFrame | None:
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


def misestimate_signals(inp: RuleInput, frame: pl.DataFrame, suspects: pl.DataFrame) -> pl.DataFrame:
    """Plan nodes reading a table whose estimate is MISESTIMATE_FACTOR off, of the statements in ``frame``.

    ``suspects``: the plan nodes whose own numbers can make them a signal (see :func:`estimated_nodes`); the
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
