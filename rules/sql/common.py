"""What the SQL rules share: reading the fingerprinted statements, formatting SQL evidence."""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence
from dbdiag.units import seconds  # noqa: F401 - re-exported for the SQL rules
from dbdiag.rules.base import RuleInput, Skip

SQL_EVIDENCE_CHARS = 2000
PLAN_EVIDENCE_LINES = 40


def statements(inp: RuleInput) -> pl.DataFrame:
    """The fingerprinted statements (derived); rules read SQL only from ``sample_sql``."""
    frame = inp.derived.get("statements")
    if frame is None or frame.height == 0:
        raise Skip("no SQL statements were read from the capture")
    return frame


def statement_evidence(inp: RuleInput, sql: str | None, title: str = "Statement") -> Evidence:
    """The statement as evidence, saying whether its literals were replaced."""
    shown = inp.metrics.get("sql_summary", {}).get("literals_shown", False)
    return Evidence(title=title if shown else f"{title} (literals replaced)", text=short_sql(sql))


def db_time_s(frame: pl.DataFrame) -> float:
    return float(frame["query_time_s"].fill_null(0.0).sum())


def plan_nodes_of(inp: RuleInput, source: str, stmt_id: int) -> pl.DataFrame:
    nodes = inp.table(t.PLAN_NODE)
    if nodes is None:
        return pl.DataFrame(schema=t.PLAN_NODE_SCHEMA)
    return nodes.filter(pl.col("source") == source, pl.col("stmt_id") == stmt_id).sort("node_id")


def short_sql(sql: str | None) -> str:
    text = " ".join((sql or "").split())
    return text if len(text) <= SQL_EVIDENCE_CHARS else text[: SQL_EVIDENCE_CHARS - 1] + "…"


def short_plan(plan: str | None) -> str:
    lines = (plan or "").splitlines()
    if len(lines) <= PLAN_EVIDENCE_LINES:
        return "\n".join(lines)
    return "\n".join(lines[:PLAN_EVIDENCE_LINES] + [f"… {len(lines) - PLAN_EVIDENCE_LINES} more lines"])


def where(frame_row: dict) -> str:
    return f"{frame_row['source']}:{frame_row['line']}"
