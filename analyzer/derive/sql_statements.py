"""The working statements and how statements are keyed: what every SQL rule reads first.

Input: ``fingerprinted_statement`` (one row per statement, ``statement_class`` "work" or "sleep") and
``public_plan_node``. Output:

- ``working_statement``: the statements whose class is work (a sleep is no DB time), in log order;
  the same frame (no copy) when all work; empty when all sleep.
- ``statement_layout``: one row, ``one_source`` (statements and plan nodes come from one source:
  ``stmt_id`` alone keys a statement) and ``numbered`` (also each ``stmt_id`` is its row number in
  ``working_statement``: a statement is found by position, nothing is hashed).
"""

from __future__ import annotations

from typing import Any, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.sql import WORK
from dbdiag.statement_keys import rows_where, single_source


def working_statements(frame: pl.DataFrame | None) -> pl.DataFrame | None:
    if frame is None or frame.height == 0 or "statement_class" not in frame.columns:
        return frame
    working = frame["statement_class"] == WORK
    return frame if working.all() else rows_where(frame, working)  # no copy in the usual case


def statement_layout(working: pl.DataFrame | None, nodes: pl.DataFrame | None) -> pl.DataFrame:
    frames = [frame for frame in (working, nodes) if frame is not None]
    one_source = single_source(*frames)
    numbered = (
        working is not None
        and one_source
        and bool(working.select(pl.col("stmt_id").eq_missing(pl.int_range(pl.len(), dtype=pl.Int64)).all()).item())
    )
    return pl.DataFrame({"one_source": [one_source], "numbered": [numbered]}, schema=t.STATEMENT_LAYOUT_SCHEMA)


def derive_statements(view: Mapping[str, Any]) -> dict[str, Any]:
    """``working_statement`` (when statements were read) and ``statement_layout``."""
    statements = view.get(t.FINGERPRINTED_STATEMENT)
    nodes = view.get(t.PUBLIC_PLAN_NODE)
    working = working_statements(statements)
    nodes = nodes if nodes is not None and nodes.height else None
    return {t.WORKING_STATEMENT: working, t.STATEMENT_LAYOUT: statement_layout(working, nodes)}
