"""Shared by the parsers of exported SQL tables (TiDB ``SLOW_QUERY``, ``statements_summary``): reading the export.

An export is a header row with the table's column names, then one row per table row: either CSV
(double quotes around fields holding the separator or newlines) or the TSV of ``mysql -B -e
'select ...'`` (no quoting, ``\\n``/``\\t``/``\\\\`` escapes, ``NULL`` for SQL NULL)::

    INSTANCE	Time	Query_time	Query
    10.0.1.7:10080	2021-12-19 23:49:47.802016	0.000153	select 1;\\nselect 2;

>>> header_names("INSTANCE\\tTime\\tQuery_time\\n10.0.1.7:10080\\t...")
('\\t', ['instance', 'time', 'query_time'])
>>> read_export('a,"B"\\nx\\\\ny,NULL\\n', ",").rows()
[('x\\\\ny', None)]
>>> read_export("a\\tB\\nx\\\\ny\\tNULL\\n", "\\t").rows()
[('x\\ny', None)]
"""

from __future__ import annotations

import io

import polars as pl

from dbdiag.parsers.base import ParseError

NULL_WORDS = ("NULL", "\\N")


def header_names(head: str) -> tuple[str, list[str]]:
    """(separator, lower-case column names) of the first non-blank line."""
    first = next((line for line in head.lstrip("\ufeff").split("\n") if line.strip()), "")
    separator = "\t" if "\t" in first else ","
    return separator, [name.strip().strip('"').strip().lower() for name in first.rstrip("\r").split(separator)]


def unescape_mysql_batch(expr: pl.Expr) -> pl.Expr:
    """``mysql -B`` escapes: ``\\n``, ``\\t``, ``\\r``, ``\\0`` and ``\\\\``."""
    placeholder = "\x00\x01"  # stands for an escaped backslash while the others are replaced
    return (
        expr.str.replace_all("\\\\", placeholder, literal=True)
        .str.replace_all("\\n", "\n", literal=True)
        .str.replace_all("\\t", "\t", literal=True)
        .str.replace_all("\\r", "\r", literal=True)
        .str.replace_all("\\0", "", literal=True)
        .str.replace_all(placeholder, "\\", literal=True)
    )


def read_export(text: str, separator: str) -> pl.DataFrame:
    """Every column as String, named in lower case; TSV (``mysql -B``) cells unescaped, CRs removed."""
    tab = separator == "\t"
    try:
        frame = pl.read_csv(
            io.StringIO(text.lstrip("\ufeff")),
            separator=separator,
            has_header=True,
            infer_schema=False,
            quote_char=None if tab else '"',
            truncate_ragged_lines=True,
            null_values=list(NULL_WORDS),
        )
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as error:
        raise ParseError(f"CSV not readable: {str(error).splitlines()[0][:120]}") from None
    frame = frame.rename({c: c.strip().strip('"').strip().lower() for c in frame.columns})
    if tab:
        frame = frame.with_columns(unescape_mysql_batch(pl.col(c)) for c in frame.columns)
    return frame.with_columns(pl.col(c).str.strip_suffix("\r") for c in frame.columns)
