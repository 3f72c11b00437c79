"""What the SQL rules share: reading the fingerprinted statements, formatting SQL evidence."""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.sql import WORK, short_sample
from dbdiag.findings import Evidence
from dbdiag.units import seconds  # noqa: F401 - re-exported for the SQL rules
from dbdiag.rules.base import RuleInput, Skip

PLAN_EVIDENCE_LINES = 40


def statements(inp: RuleInput) -> pl.DataFrame:
    """The fingerprinted statements (derived) that work: sleep statements are not DB time (computed once for
    all rules). Rules read SQL only from ``sample_sql``, and judge plans on ``exec_time_s`` (lock wait left out)."""
    frame = inp.shared(_working)
    if frame is None or frame.height == 0:
        raise Skip("no SQL statements were read from the capture" if frame is None else "the capture's SQL statements only sleep")
    return frame


def working_statements(inp: RuleInput) -> pl.DataFrame | None:
    """:func:`statements` without the Skip: None when no statement was read (for rules outside SQL)."""
    return inp.shared(_working)


def _working(inp: RuleInput) -> pl.DataFrame | None:
    frame = inp.derived.get("statements")
    if frame is None or frame.height == 0 or "statement_class" not in frame.columns:
        return frame
    working = frame["statement_class"] == WORK
    return frame if working.all() else rows_where(frame, working)  # no copy in the usual case


def statement_evidence(inp: RuleInput, sql: str | None, title: str = "Statement") -> Evidence:
    """The statement as evidence, saying whether its literals were replaced."""
    shown = inp.metrics.get("sql_summary", {}).get("literals_shown", False)
    return Evidence(title=title if shown else f"{title} (literals replaced)", text=short_sql(sql))


def db_time_s(frame: pl.DataFrame) -> float:
    """DB time: the statements' query time, lock waits included."""
    return float(frame["query_time_s"].fill_null(0.0).sum())


def exec_time_column(frame: pl.DataFrame) -> str:
    """``exec_time_s`` (query time minus lock wait) when ``frame`` has it, else ``query_time_s``."""
    return "exec_time_s" if "exec_time_s" in frame.columns else "query_time_s"


def plan_nodes_of(inp: RuleInput, source: str, stmt_id: int) -> pl.DataFrame:
    nodes = inp.table(t.PLAN_NODE)
    if nodes is None:
        return pl.DataFrame(schema=t.PLAN_NODE_SCHEMA)
    return nodes.filter(pl.col("source") == source, pl.col("stmt_id") == stmt_id).sort("node_id")


_STATEMENT_STRIDE = 1 << 40  # stmt_id is a record number within its source


def from_one_source(inp: RuleInput) -> bool:
    """Whether the statements and plan nodes all come from one source (the usual case), computed once for all rules.

    Then ``stmt_id`` alone keys a statement in any frame taken from them: pass it as ``one_source`` to
    :func:`join_statements` and :func:`has_statement`, which need not compare the source of every row again.
    """
    return inp.shared(_one_source)


def _one_source(inp: RuleInput) -> bool:
    frames = [frame for frame in (inp.shared(_working), inp.table(t.PLAN_NODE)) if frame is not None]
    return _single_source(*frames)


def statements_numbered(inp: RuleInput) -> bool:
    """Whether the statements and plan nodes come from one source and each statement's ``stmt_id`` is its row
    number in :func:`statements` (the parsers number the records of a log in order), computed once for all rules.

    Then a statement is found by its position: pass it as ``numbered`` to :func:`has_statement` with
    :func:`statements` as the frame, or ``gather`` a statement column by ``stmt_id``.
    """
    return inp.shared(_numbered)


def _numbered(inp: RuleInput) -> bool:
    frame = inp.shared(_working)  # the frame statements() gives: positions must be its rows
    if frame is None or not from_one_source(inp):
        return False
    return bool(frame.select(pl.col("stmt_id").eq_missing(pl.int_range(pl.len(), dtype=pl.Int64)).all()).item())


def _single_source(*frames: pl.DataFrame) -> bool:
    first = next((frame["source"][0] for frame in frames if frame.height), None)
    return first is not None and all(frame["source"].eq_missing(first).all() for frame in frames)


def statement_key(*frames: pl.DataFrame, one_source: bool = False) -> pl.Expr | None:
    """One Int64 per (source, stmt_id), the same in all ``frames`` (None if stmt_id is out of range).

    Hashing the source text of every row makes two-column joins several times slower than
    joins on one integer: the pair is packed into one (source number x stride + stmt_id).
    ``one_source``: the caller knows that all rows have the same source (see :func:`from_one_source`).
    """
    if one_source or _single_source(*frames):
        return pl.col("stmt_id").alias("_statement")  # one source (the usual case): the id is the key
    sources = pl.concat([frame["source"].unique() for frame in frames]).drop_nulls().unique().sort()
    for frame in frames:
        low, high = frame["stmt_id"].min(), frame["stmt_id"].max()
        if (low is not None and low < 0) or (high is not None and high >= _STATEMENT_STRIDE):
            return None
    number = pl.col("source").replace_strict(sources, pl.int_range(sources.len(), eager=True), default=None, return_dtype=pl.Int64)
    return (number * _STATEMENT_STRIDE + pl.col("stmt_id")).alias("_statement")


def join_statements(left: pl.DataFrame, right: pl.DataFrame, how: str = "left", one_source: bool = False) -> pl.DataFrame:
    """``left`` joined with ``right`` on (source, stmt_id), in ``left``'s order (``one_source``: see :func:`statement_key`).

    A semi join is ``left``'s rows that :func:`has_statement` finds in ``right``: no copy at all when every row is.
    """
    if how == "semi":
        return rows_where(left, has_statement(left, right, one_source=one_source))
    key = statement_key(left, right, one_source=one_source)
    if key is None:
        return left.join(right, on=["source", "stmt_id"], how=how, maintain_order="left")
    joined = left.with_columns(key).join(right.with_columns(key).drop("source", "stmt_id"), on="_statement", how=how, maintain_order="left")
    return joined.drop("_statement")


def has_statement(frame: pl.DataFrame, others: pl.DataFrame, one_source: bool = False, numbered: bool = False) -> pl.Series:
    """Per row of ``frame``: whether ``others`` has a row with its (source, stmt_id) (``one_source``: see :func:`statement_key`).

    ``numbered``: the caller knows that ``frame``'s stmt_id is its row number and that all rows have the same
    source (see :func:`statements_numbered`): the rows of ``others`` are marked by position, nothing is hashed.
    """
    if others.height == 0:
        return pl.repeat(False, frame.height, eager=True)
    if numbered:
        ids = others["stmt_id"]
        return pl.repeat(False, frame.height, eager=True).scatter(ids.filter(ids.is_between(0, frame.height - 1)), True)
    key = statement_key(frame, others, one_source=one_source)
    if key is None:
        found = others.select("source", "stmt_id").unique().with_columns(pl.lit(True).alias("found"))
        joined = frame.select("source", "stmt_id").join(found, on=["source", "stmt_id"], how="left", maintain_order="left")
        return joined["found"].fill_null(False)
    return frame.select(key.is_in(others.select(key).to_series().implode()).fill_null(False)).to_series()


def rows_where(frame: pl.DataFrame, keep: pl.Series) -> pl.DataFrame:
    """``frame.filter(keep)`` (``keep`` without nulls) without its costs on wide frames: no copy when every row is
    kept, else a gather of the kept rows (a filter of a few rows out of a frame of texts takes several times longer)."""
    if keep.all():
        return frame
    return frame[keep.arg_true()]


def short_sql(sql: str | None) -> str:
    return short_sample(sql)


def short_plan(plan: str | None) -> str:
    lines = (plan or "").splitlines()
    if len(lines) <= PLAN_EVIDENCE_LINES:
        return "\n".join(lines)
    return "\n".join(lines[:PLAN_EVIDENCE_LINES] + [f"… {len(lines) - PLAN_EVIDENCE_LINES} more lines"])


def where(frame_row: dict) -> str:
    return f"{frame_row['source']}:{frame_row['line']}"
