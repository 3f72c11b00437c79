"""Number helpers shared by parsers of unrelated formats."""

from __future__ import annotations

import polars as pl


def true_divide(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """IEEE division; polars multiplies by the reciprocal (1300000 / 1e9 = 0.0013000000000000002).

    >>> frame = pl.DataFrame({"n": [1300000.0, None, 52000000.0], "d": [1e9, 1e9, 1e9]})
    >>> frame.select(true_divide(pl.col("n"), pl.col("d"))).to_series().to_list()
    [0.0013, None, 0.052]
    """

    def divide(pair: pl.Series) -> pl.Series:
        top, bottom = pair.struct.field("n").cast(pl.Float64), pair.struct.field("d").cast(pl.Float64)
        quotient = pl.Series(top.to_numpy() / bottom.to_numpy(), dtype=pl.Float64)
        return quotient.zip_with(top.is_not_null() & bottom.is_not_null(), pl.Series([None] * len(top), dtype=pl.Float64))

    return pl.struct(n=numerator, d=denominator).map_batches(divide, return_dtype=pl.Float64)
