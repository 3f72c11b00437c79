"""What the SQL rules share: reading the fingerprinted statements, formatting SQL evidence."""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence
from dbdiag.rules.base import RuleInput, Skip
from dbdiag.units import short_sample

PLAN_EVIDENCE_LINES = 40


def statements(inp: RuleInput) -> pl.DataFrame:
    """The fingerprinted statements that work (derived ``working_statement``: sleep statements are not DB time).
    Rules read SQL only from ``sample_sql``, and judge plans on ``exec_time_s`` (lock wait left out)."""
    frame = inp.table(t.WORKING_STATEMENT, keep_empty=True)
    if frame is None or frame.height == 0:
        raise Skip("no SQL statements were read from the capture" if frame is None else "the capture's SQL statements only sleep")
    return frame


def working_statements(inp: RuleInput) -> pl.DataFrame | None:
    """:func:`statements` without the Skip: None when no statement was read (for rules outside SQL)."""
    return inp.table(t.WORKING_STATEMENT, keep_empty=True)


def statement_evidence(inp: RuleInput, sql: str | None, title: str = "Statement") -> Evidence:
    """The statement as evidence, saying whether its literals were replaced."""
    shown = (inp.metric(t.SQL_SUMMARY_METRIC) or {}).get("literals_shown", False)
    return Evidence(title=title if shown else f"{title} (literals replaced)", text=short_sql(sql))


def db_time_s(frame: pl.DataFrame) -> float:
    """DB time: the statements' query time, lock waits included."""
    return float(frame["query_time_s"].fill_null(0.0).sum())


def exec_time_column(frame: pl.DataFrame) -> str:
    """``exec_time_s`` (query time minus lock wait) when ``frame`` has it, else ``query_time_s``."""
    return "exec_time_s" if "exec_time_s" in frame.columns else "query_time_s"


def plan_nodes_of(inp: RuleInput, source: str, stmt_id: int) -> pl.DataFrame:
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    if nodes is None:
        return pl.DataFrame(schema=t.PUBLIC_PLAN_NODE_SCHEMA)
    return nodes.filter(pl.col("source") == source, pl.col("stmt_id") == stmt_id).sort("node_id")


def from_one_source(inp: RuleInput) -> bool:
    """Whether the statements and plan nodes all come from one source (the usual case; derived ``statement_layout``).

    Then ``stmt_id`` alone keys a statement in any frame taken from them: pass it as ``one_source`` to
    :func:`join_statements` and :func:`has_statement`, which need not compare the source of every row again.
    """
    layout = inp.table(t.STATEMENT_LAYOUT)
    return bool(layout["one_source"][0]) if layout is not None else False


def statements_numbered(inp: RuleInput) -> bool:
    """Whether the statements and plan nodes come from one source and each statement's ``stmt_id`` is its row
    number in :func:`statements` (derived ``statement_layout``).

    Then a statement is found by its position: pass it as ``numbered`` to :func:`has_statement` with
    :func:`statements` as the frame, or ``gather`` a statement column by ``stmt_id``.
    """
    layout = inp.table(t.STATEMENT_LAYOUT)
    return bool(layout["numbered"][0]) if layout is not None else False


def timed_full_scan_executions(inp: RuleInput) -> pl.DataFrame:
    """The timed statements that scanned a whole table (derived ``full_scan``; full-table-scan and
    or-without-index-merge read it); Skip as :func:`statements` when none works."""
    statements(inp)
    scans = inp.table(t.FULL_SCAN, keep_empty=True)
    return scans if scans is not None else t.empty(t.FULL_SCAN)


def short_sql(sql: str | None) -> str:
    return short_sample(sql)


def short_plan(plan: str | None) -> str:
    lines = (plan or "").splitlines()
    if len(lines) <= PLAN_EVIDENCE_LINES:
        return "\n".join(lines)
    return "\n".join(lines[:PLAN_EVIDENCE_LINES] + [f"… {len(lines) - PLAN_EVIDENCE_LINES} more lines"])


def where(frame_row: dict) -> str:
    return f"{frame_row['source']}:{frame_row['line']}"
