"""Keys of statements across frames: joins and lookups on (source, stmt_id) made cheap.

Shared by the SQL derivations and the SQL rules. ``stmt_id`` is a record number within its source
(the parsers number the records of a log in order), so the pair keys a statement in the fingerprinted
statements, their plan nodes and any frame taken from them.
"""

from __future__ import annotations

import polars as pl

_STATEMENT_STRIDE = 1 << 40  # stmt_id is a record number within its source


def single_source(*frames: pl.DataFrame) -> bool:
    first = next((frame["source"][0] for frame in frames if frame.height), None)
    return first is not None and all(frame["source"].eq_missing(first).all() for frame in frames)


def statement_key(*frames: pl.DataFrame, one_source: bool = False) -> pl.Expr | None:
    """One Int64 per (source, stmt_id), the same in all ``frames`` (None if stmt_id is out of range).

    Hashing the source text of every row makes two-column joins several times slower than
    joins on one integer: the pair is packed into one (source number x stride + stmt_id).
    ``one_source``: the caller knows that all rows have the same source (the ``one_source`` of ``statement_layout``).
    """
    if one_source or single_source(*frames):
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
    source (the ``numbered`` of ``statement_layout``): the rows of ``others`` are marked by position, nothing is hashed.
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
