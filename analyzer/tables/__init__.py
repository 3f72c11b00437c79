"""Names and schemas of the tables parsers and derive produce; the one place derive and rules look them up.

The parsed tables are declared in :mod:`dbdiag.tables.parsed`, the derived ones (and the metric keys) in
:mod:`dbdiag.tables.derived`; both are read from here (``from dbdiag import tables as t``).

Tables are long ("tidy"): one row per observation, units in column names. Every table has
a ``source`` column (the member path, for evidence). When several members produce the same
table the pipeline concatenates them (``diagonal_relaxed``) in capture order.

Times are ``Datetime("us", "UTC")``. A CPU number of ``-1`` stands for mpstat's ``all`` row.
"""

from __future__ import annotations

import polars as pl

from dbdiag.tables.derived import *  # noqa: F403 - every derived name, read as t.NAME
from dbdiag.tables.derived import DERIVED_SCHEMAS
from dbdiag.tables.parsed import *  # noqa: F403 - every parsed name, read as t.NAME
from dbdiag.tables.parsed import HOST_FACT_SCHEMA, SCHEMAS


def schema_of(table: str) -> dict[str, pl.DataType]:
    """The declared columns of a parsed or derived table."""
    return SCHEMAS[table] if table in SCHEMAS else DERIVED_SCHEMAS[table]


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the declared schema of ``table``."""
    return pl.DataFrame(schema=schema_of(table))


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Cast ``frame`` to the declared schema: missing columns become nulls, extra ones are dropped."""
    schema = schema_of(table)
    columns = [
        (pl.col(name).cast(dtype) if name in frame.columns else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in schema.items()
    ]
    return frame.select(columns)


def host_fact_frame(pairs: list[tuple[str, str]], source: str) -> pl.DataFrame:
    """A ``host_fact`` table from (key, value) pairs, in their order, all from ``source``."""
    return pl.DataFrame(
        {"key": [k for k, _ in pairs], "value": [v for _, v in pairs], "source": [source] * len(pairs)},
        schema=HOST_FACT_SCHEMA,
    )
