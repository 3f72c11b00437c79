"""The vectorised fingerprint's bookkeeping: rows grouped by their zeroed text, classes numbered, keys finished.

Input: a polars Series of statement texts; output: each row's class number and each class's text
(see :func:`dbdiag.sqlnorm.fingerprint_classes`).
"""

from __future__ import annotations

import polars as pl

from dbdiag.arrow_capsule import series as arrow_series
from dbdiag.distinct import numbered
from dbdiag.sqlnorm_regex import _ASC_TRIGGER, _LIMIT, _UNION_TRIGGER, _apply_expr, _matches_expr, _tail


def _zeroed_groups(sql: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(each element's group, each group's text): the elements whose texts are the same once every digit is ``0``.

    Groups are numbered from 0 in first-seen order; null elements have a group whose text is null.
    """
    # Zeroing every text first costs about as much as finding the distinct texts first where a text
    # repeats 4.5 times on average (sysbench), and less where it repeats 1.6 times (pgbench)
    return numbered(_zero_digits(sql))


def _classes_of(group: pl.Series, fp_of_group: pl.Series, rows: pl.Series, fp_of_rows: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(class number of each element, fingerprint of each class), numbered in first-seen order.

    An element's fingerprint is its group's (``group`` numbers them in first-seen order), except for
    the elements ``rows`` whose ``fp_of_rows`` is not null.
    """
    names = pl.concat([fp_of_group, fp_of_rows]).drop_nulls().unique(maintain_order=True)
    own = _numbered(fp_of_rows, names)
    if own.null_count() == own.len():  # groups are numbered in first-seen order: so are their classes
        numbers, names = _in_first_seen_order(_numbered(fp_of_group, names), names)
        return numbers.gather(group), names
    numbers = _numbered(fp_of_group, names).gather(group).scatter(rows.filter(own.is_not_null()), own.drop_nulls())
    return _in_first_seen_order(numbers, names)


def _numbered(fingerprints: pl.Series, names: pl.Series) -> pl.Series:
    """Each fingerprint's position in ``names`` (nulls stay null)."""
    return fingerprints.replace_strict(names, pl.int_range(names.len(), dtype=pl.Int64, eager=True), default=None, return_dtype=pl.Int64)


def _in_first_seen_order(numbers: pl.Series, names: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(numbers, names) renumbered in the order the elements first have them; names no element has are left out."""
    seen = numbers.gather(numbers.arg_unique()).drop_nulls()
    renumbered = pl.repeat(None, names.len(), dtype=pl.Int64, eager=True)
    renumbered.scatter(seen, pl.int_range(seen.len(), dtype=pl.Int64, eager=True))
    return renumbered.gather(numbers).alias("class"), names.gather(seen).alias("fingerprint")


_BIG = 20_000  # rows from which zeroing digits byte-wise beats a regex (and pyarrow is worth loading)
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")


def _zero_digits(texts: pl.Series) -> pl.Series:
    """Every ASCII digit replaced by ``0`` (same lengths; nulls stay null)."""
    if texts.len() < _BIG:
        return texts.str.replace_all("[1-9]", "0")
    import pyarrow as pa

    arrow = texts.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    validity, offsets, data = arrow.buffers()
    zeroed = pa.py_buffer(data.to_pybytes().translate(_ZERO_DIGITS) if data is not None else b"")
    array = pa.LargeStringArray.from_buffers(len(arrow), offsets, zeroed, validity, arrow.null_count, arrow.offset)
    return arrow_series(array, texts.name)


def _finish(frame: pl.DataFrame, scalar) -> pl.Series:
    """The fingerprint of each distinct key, in order.

    ``frame`` has ``key``, ``fp`` (regex steps done, tail not) and ``redo`` (``scalar(key)``
    must be computed in Python instead). The tail's Python-only steps run on the keys whose
    text contains their trigger, the vectorised LIMIT step on the others.
    """
    tail_needed = _matches_expr(_UNION_TRIGGER, pl.col("fp")) | _matches_expr(_ASC_TRIGGER, pl.col("fp"))
    frame = frame.with_columns(_apply_expr((_LIMIT,), pl.col("fp")).alias("limited"), tail_needed.alias("tail"))
    todo = frame.filter(pl.col("redo") | pl.col("tail")).select("key", "fp", "redo")
    if todo.is_empty():
        return frame["limited"]
    python = [scalar(key) if redo else _tail(fp) for key, fp, redo in todo.iter_rows()]
    done = todo.select("key", pl.Series("python", python, dtype=pl.String))
    return (
        frame.join(done, on="key", how="left", maintain_order="left")
        .select(pl.coalesce("python", "limited"))
        .to_series()
    )
