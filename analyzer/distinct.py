"""Numbering the elements of a column by their distinct values, fast and exactly.

Big logs repeat the same texts (header lines, statements, plan keys) many times: the elements are
matched to their first-seen equal by a 64-bit hash, and the match is checked, so that a hash
collision (two different values with one hash) can never merge them: then the values themselves
are matched.
"""

from __future__ import annotations

import polars as pl


def numbered(values: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(each element's number among the distinct values, from 0 in first-seen order; the distinct values).

    Nulls are one value too. Works on any dtype polars hashes, structs included (several columns).

    >>> numbers, distinct = numbered(pl.Series(["b", "a", "b", None, "a"]))
    >>> numbers.to_list(), distinct.to_list()
    ([0, 1, 0, 2, 1], ['b', 'a', None])
    """
    for keys in (values.hash(), values):
        first = keys.arg_unique()
        numbering = keys.gather(first).to_frame("key").with_row_index("number")
        # a join finds each element's number faster than replace_strict (measured on 0.5 M rows)
        numbers = keys.to_frame("key").join(numbering, on="key", how="left", maintain_order="left", nulls_equal=True)["number"]
        distinct = values.gather(first)
        if distinct.gather(numbers).equals(values):
            break
    return numbers.cast(pl.Int64).rename(""), distinct
