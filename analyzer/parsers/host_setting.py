"""Shared by the host configuration parsers: the ``host_setting`` frame and the member's base name.

>>> frame([("thp", None, "enabled", "madvise", "always madvise never")], "os/thp_enabled.txt").row(0)
('thp', None, 'enabled', 'madvise', 'always madvise never', 'os/thp_enabled.txt')
>>> base_name("capture/os/nvme0n1-scheduler.txt")
'nvme0n1-scheduler.txt'
"""

from __future__ import annotations

import polars as pl

from dbdiag.tables import HOST_SETTING, HOST_SETTING_SCHEMA

Row = tuple[str, str | None, str, str | None, str | None]  # category, subject, name, value, choices


def frame(rows: list[Row], source: str) -> pl.DataFrame:
    """A ``host_setting`` table from (category, subject, name, value, choices) rows, all from ``source``."""
    columns = [c for c in HOST_SETTING_SCHEMA if c != "source"]
    data = pl.DataFrame(rows, schema={c: HOST_SETTING_SCHEMA[c] for c in columns}, orient="row")
    return data.with_columns(pl.lit(source, dtype=pl.String).alias("source")).select(
        [pl.col(c).cast(t) for c, t in HOST_SETTING_SCHEMA.items()]
    )


def base_name(source: str) -> str:
    """The last path component of a member path (the name hint parsers may use for attribution)."""
    return source.replace("\\", "/").rsplit("/", 1)[-1]


TABLE = HOST_SETTING
