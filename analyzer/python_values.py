"""Python functions applied to column values in the calling thread, never inside a polars expression.

A Python function inside an expression (``map_elements``...) runs on polars' threads and needs the GIL
there; with the derive and rule stages' threads that deadlocked (``tests/test_no_python_udfs.py``). Here
the function sees each distinct value once and the result is mapped back by polars::

    >>> mapped(pl.Series(["eth0-rx-0", None, "eth0-rx-0"]), lambda name: name.split("-")[0], pl.String).to_list()
    ['eth0', None, 'eth0']
    >>> rows_in(pl.DataFrame({"source": ["a", "b", None], "run": [1, 2, 1]}), ("source", "run"), {("b", 2), (None, 1)}).to_list()
    [False, True, True]
"""

from __future__ import annotations

from typing import Any, Callable, Collection

import polars as pl


def mapped(values: pl.Series, function: Callable[[Any], Any], dtype: pl.DataType) -> pl.Series:
    """``function`` of each value (a null stays null), called once per distinct value."""
    table = {value: function(value) for value in values.drop_nulls().unique().to_list()}
    if not table:
        return pl.Series(values.name, [None] * values.len(), dtype=dtype)
    return values.replace_strict(table, default=None, return_dtype=dtype)


def rows_in(frame: pl.DataFrame, columns: tuple[str, ...], keys: Collection[tuple]) -> pl.Series:
    """Whether each row's values of ``columns`` (a tuple, nulls as None) are one of ``keys``."""
    wanted = set(keys)
    return pl.Series([row in wanted for row in frame.select(columns).iter_rows()], dtype=pl.Boolean)
