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
# SLOW_QUERY and statements_summary have about a hundred columns; polars gives every column of the
# first line a schema field (tens of KB each), so a header of a million fields took 1.9 GB.
MAX_EXPORT_COLUMNS = 1000


def _header_line(text: str) -> tuple[str, int]:
    """The first non-blank line (BOM and CR removed) and where the rows after it start."""
    start = 1 if text.startswith("\ufeff") else 0
    while True:
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        if line.strip() or end < 0:
            return line.rstrip("\r"), len(text) if end < 0 else end + 1
        start = end + 1


def header_names(head: str) -> tuple[str, list[str]]:
    """(separator, lower-case column names) of the first non-blank line; at most one name past
    ``MAX_EXPORT_COLUMNS``, so that a header too wide is seen without splitting all of it."""
    first, _ = _header_line(head)
    separator = "\t" if "\t" in first else ","
    names = first.split(separator, MAX_EXPORT_COLUMNS)[:MAX_EXPORT_COLUMNS + 1]
    return separator, [name.strip().strip('"').strip().lower() for name in names]


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
    """Every column as String, named in lower case (a repeated name: its first column); TSV (``mysql
    -B``) cells unescaped, CRs removed. Fields past the header's are dropped.

    polars is given a header of placeholder names as wide as the real one, so that a first row
    wider than the header cannot widen the schema (polars sizes it from the first line).
    """
    _, names = header_names(text)
    if len(names) > MAX_EXPORT_COLUMNS:
        raise ParseError(f"header has more than {MAX_EXPORT_COLUMNS} columns: not an export of a SQL table")
    _, rows_start = _header_line(text)
    placeholders = [f"c{index}" for index in range(len(names))]
    first_of_name: dict[str, int] = {}
    for index, name in enumerate(names):
        first_of_name.setdefault(name, index)
    tab = separator == "\t"
    try:
        frame = pl.read_csv(
            io.StringIO(separator.join(placeholders) + "\n" + text[rows_start:]),
            separator=separator,
            has_header=True,
            infer_schema=False,
            quote_char=None if tab else '"',
            truncate_ragged_lines=True,
            null_values=list(NULL_WORDS),
            columns=sorted(first_of_name.values()),
        )
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as error:
        raise ParseError(f"CSV not readable: {str(error).splitlines()[0][:120]}") from None
    frame = frame.select(pl.col(placeholders[index]).alias(name) for name, index in first_of_name.items())
    if tab:
        frame = frame.with_columns(unescape_mysql_batch(pl.col(c)) for c in frame.columns)
    return frame.with_columns(pl.col(c).str.strip_suffix("\r") for c in frame.columns)
