"""``full_scan``: the timed working statements that scanned a whole table, by any signal.

Input: ``working_statement`` (with ``query_time_s``, ``rows_examined``, ``rows_sent``,
``rows_affected``, ``full_scan``, ``engine``), ``public_plan_node`` and ``statement_layout``.
A statement scanned a whole table when (thresholds in ``tables``: FULL_SCAN_MIN_ROWS = 10,000,
FULL_SCAN_EXAMINED_PER_RETURNED = 100):

- a full-scan plan node (``TableFullScan``, ``Seq Scan``, ``ALL``) read at least FULL_SCAN_MIN_ROWS
  rows (or an unknown number): ``scan_by_plan``, with the biggest such node's table, type and rows;
- no plan was logged and the log's Full_scan flag is set: ``scan_by_flag``;
- no plan was logged and rows examined >= FULL_SCAN_MIN_ROWS and >= 100 x rows returned: ``scan_by_rows``.

Used by full-table-scan and or-without-index-merge (computed once here, not in each rule).
"""

from __future__ import annotations

from typing import Any, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.statement_keys import has_statement, join_statements, rows_where


def derive_full_scans(view: Mapping[str, Any]) -> dict[str, Any]:
    """``full_scan`` of the timed working statements (none when no statement works)."""
    everything = view.get(t.WORKING_STATEMENT)
    if everything is None or everything.height == 0:
        return {}
    layout = view[t.STATEMENT_LAYOUT].row(0, named=True)
    nodes = view.get(t.PUBLIC_PLAN_NODE)
    nodes = nodes if nodes is not None and nodes.height else None
    if everything["query_time_s"].null_count() == 0:  # the usual case: no copy of the whole table
        return {t.FULL_SCAN: full_scan_executions(everything, nodes, layout["one_source"], numbered=layout["numbered"])}
    return {t.FULL_SCAN: full_scan_executions(everything.filter(pl.col("query_time_s").is_not_null()), nodes, layout["one_source"])}


# The statement columns the full-scan rules read: the other texts of the statements are not copied.
SCAN_COLUMNS = (
    "source", "stmt_id", "line", "fp_id", "engine", "query_time_s", "exec_time_s", "rows_examined", "rows_sent", "rows_affected",
    "sample_sql", "plan", "index_names",
)


def full_scan_executions(frame: pl.DataFrame, nodes: pl.DataFrame | None, one_source: bool = False, numbered: bool = False) -> pl.DataFrame:
    """The rows of ``frame`` that scanned a whole table by any signal (in ``frame``'s order), with the SCAN_COLUMNS
    and scan_by_plan / scan_by_flag / scan_by_rows and the biggest full-scan node's table, type and rows.

    The signals are computed on the statement keys and counts, the rows taken once the (usually few)
    scanning ones are known: copying the whole frame would copy its SQL and plan texts, row by row.
    ``nodes``: the plan nodes (None when none); ``one_source``, ``numbered``: see ``statement_layout`` (``numbered``:
    ``frame`` is the working statements themselves, rows found by position).
    """
    per_statement = _full_scan_nodes(frame, nodes, one_source, numbered)
    returned = (pl.col("rows_sent").fill_null(0) + pl.col("rows_affected").fill_null(0)).clip(lower_bound=1)
    examined = pl.col("rows_examined").fill_null(0)
    # A logged plan shows the access paths: the flag and the examined/returned ratio only stand in without one.
    unplanned = pl.lit(~has_statement(frame, nodes, one_source, numbered)) if nodes is not None else pl.lit(True)
    by_plan = pl.lit(False)
    if per_statement is not None:
        by_plan = pl.lit(has_statement(frame, per_statement.filter(pl.col("scan_by_plan")), one_source, numbered))
    signals = frame.select(
        by_plan.alias("scan_by_plan"),
        # The log's Full_scan flag stands in only without a plan: with one, the plan's nodes decide
        # (a flagged INSERT ... SELECT from a sequence generator reads no table worth an index).
        (pl.col("full_scan").fill_null(False) & unplanned).alias("scan_by_flag"),
        (unplanned & (examined >= t.FULL_SCAN_MIN_ROWS) & (examined >= t.FULL_SCAN_EXAMINED_PER_RETURNED * returned)).alias("scan_by_rows"),
    )
    scanning = signals.select(pl.any_horizontal(pl.all())).to_series()
    columns = [pl.col("exec_time_s" if "exec_time_s" in frame.columns else "query_time_s").alias(name) if name == "exec_time_s" else pl.col(name) for name in SCAN_COLUMNS]
    scans, signals = rows_where(frame.select(columns), scanning), rows_where(signals, scanning)
    if per_statement is None:
        found = scans.select(
            pl.repeat(None, scans.height, dtype=pl.String).alias("scan_table"),
            pl.repeat(None, scans.height, dtype=pl.String).alias("scan_node"),
            pl.repeat(None, scans.height, dtype=pl.Float64).alias("scan_rows"),
        )
    else:
        found = join_statements(scans.select("source", "stmt_id"), per_statement.drop("small_scans_only"), one_source=one_source)
    return pl.concat(
        [scans, signals.select("scan_by_plan"), found.select("scan_table", "scan_node", "scan_rows"), signals.select("scan_by_flag", "scan_by_rows")],
        how="horizontal",
    )


def _full_scan_nodes(frame: pl.DataFrame, nodes: pl.DataFrame | None, one_source: bool, numbered: bool) -> pl.DataFrame | None:
    """Per statement with full-scan plan nodes: whether one is big, and the biggest one (``numbered``: see :func:`full_scan_executions`)."""
    if nodes is None:
        return None
    columns = ("source", "stmt_id", "node_type", "relation", "est_rows", "actual_rows", "loops", "rows_removed_by_filter")
    scan_nodes = rows_where(nodes.select(columns), nodes["node_type"].is_in(t.FULL_SCAN_NODE_TYPES))
    if numbered:  # each node's statement engine by position
        keyed = rows_where(scan_nodes, scan_nodes["stmt_id"].is_between(0, frame.height - 1).fill_null(False))
        keyed = keyed.with_columns(frame["engine"].gather(keyed["stmt_id"]))
    else:
        engines = frame.select("source", "stmt_id", "engine")
        # The join builds on the statements with such nodes only, not on all of them.
        engines = rows_where(engines, has_statement(engines, scan_nodes, one_source=one_source))
        keyed = join_statements(scan_nodes, engines, how="inner", one_source=one_source)
    if keyed.height == 0:
        return None
    read = pl.coalesce(pl.col("actual_rows"), pl.col("est_rows"))
    loops = pl.col("loops").fill_null(1.0)
    rows_read = (
        pl.when(pl.col("engine") == "tidb").then(read)  # TiDB's actRows is already a total
        .when(pl.col("engine") == "postgresql").then((read + pl.col("rows_removed_by_filter").fill_null(0.0)) * loops)
        .otherwise(read * loops)  # MariaDB r_rows is read before the attached condition, per loop
    )
    keyed = keyed.with_columns(rows_read.alias("rows_read"))
    big = pl.col("rows_read").is_null() | (pl.col("rows_read") >= t.FULL_SCAN_MIN_ROWS)
    return (
        keyed.sort("rows_read", descending=True, nulls_last=True)
        .group_by("source", "stmt_id")
        .agg(
            big.any().alias("scan_by_plan"),
            (~big).all().alias("small_scans_only"),
            pl.col("relation").first().alias("scan_table"),
            pl.col("node_type").first().alias("scan_node"),
            pl.col("rows_read").first().alias("scan_rows"),
        )
    )
