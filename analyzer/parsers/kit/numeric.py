"""Number helpers shared by parsers of unrelated formats."""

from __future__ import annotations

import polars as pl


def true_divide(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """IEEE division; polars multiplies by the reciprocal of a literal divisor (1300000 / 1e9 =
    0.0013000000000000002), so the divisor is made a column first (``+ 0.0`` per row). No Python
    function inside the expression: one run on polars' threads needs the GIL, and with the derive
    and rule stages' threads that deadlocked (a thread holding the GIL waits for polars, polars for it).

    >>> frame = pl.DataFrame({"n": [1300000.0, None, 52000000.0, float("inf")], "d": [1e9, 1e9, 1e9, 1e9]})
    >>> frame.select(true_divide(pl.col("n"), pl.lit(1e9))).to_series().to_list()
    [0.0013, None, 0.052, inf]
    """
    top = numerator.cast(pl.Float64)
    return top / (denominator.cast(pl.Float64) + top.is_null().cast(pl.Float64) * 0.0)
