"""Hand-built statements and plan nodes for the SQL rule tests, fingerprinted the way the pipeline does it."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Iterable

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import DERIVATIONS, derive_all
from dbdiag.rules.base import RuleInput

START = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)
SOURCE = "db/slow.log"
LINES_PER_ENTRY = 20


def run(sql: str, query_time_s: float, count: int = 1, **fields) -> list[dict]:
    """``count`` executions of one statement; ``fields`` are statement columns (engine defaults to tidb)."""
    return [{"sql": sql, "query_time_s": query_time_s, "engine": "tidb", **fields} for _ in range(count)]


def filler(total_s: float, count: int = 10, engine: str = "tidb") -> list[dict]:
    """Cheap indexed point lookups adding ``total_s`` of statement time in ``count`` executions."""
    return run("SELECT name FROM accounts WHERE id = 42", total_s / count, count, engine=engine, rows_examined=1, rows_sent=1)


def statement_table(rows: Iterable[dict]) -> pl.DataFrame:
    """Rows -> ``statement``: stmt_id, line, end_ts and source filled in entry order unless given."""
    filled = []
    for index, row in enumerate(rows):
        filled.append(
            {
                "stmt_id": index,
                "line": 1 + index * LINES_PER_ENTRY,
                "source": SOURCE,
                "end_ts": START + timedelta(seconds=index),
                **row,
            }
        )
    return t.conform(t.STATEMENT, pl.DataFrame(filled, infer_schema_length=None))


def node_table(rows: Iterable[dict]) -> pl.DataFrame:
    """Rows -> ``plan_node``; node_id and depth default to the row's place in its statement's plan."""
    rows = list(rows)
    counters: dict[int, int] = {}
    filled = []
    for row in rows:
        node_id = counters.get(row["stmt_id"], 0)
        counters[row["stmt_id"]] = node_id + 1
        filled.append({"node_id": node_id, "depth": node_id, "source": SOURCE, **row})
    return t.conform(t.PLAN_NODE, pl.DataFrame(filled, infer_schema_length=None))


def plan_for(stmt_ids: Iterable[int], nodes: list[dict]) -> list[dict]:
    """The same plan (``nodes``, without stmt_id) for each statement id (= its place in the rows list)."""
    return [{"stmt_id": stmt_id, **node} for stmt_id in stmt_ids for node in nodes]


def sql_input(rows: Iterable[dict], nodes: Iterable[dict] | pl.DataFrame = ()) -> RuleInput:
    statement = rows if isinstance(rows, pl.DataFrame) else statement_table(rows)
    tables = {t.STATEMENT: statement}
    node_frame = nodes if isinstance(nodes, pl.DataFrame) else (node_table(nodes) if nodes else None)
    if node_frame is not None:
        tables[t.PLAN_NODE] = node_frame
    return RuleInput(tables=tables, derived=sql_derived(tables), metrics={})


SQL_DERIVATIONS = ("sql", "plan_nodes", "statements", "full_scans")


def sql_derived(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The derived SQL tables of ``tables`` (fingerprinted statements, public plan nodes, working statements, full scans)."""
    return derive_all(tables, derivations=tuple(d for d in DERIVATIONS if d.name in SQL_DERIVATIONS)).tables


def fp_id_of(inp: RuleInput, sql_prefix: str) -> str:
    frame = inp.table(t.FINGERPRINTED_STATEMENT)
    return frame.filter(pl.col("sql").str.starts_with(sql_prefix))["fp_id"][0]
