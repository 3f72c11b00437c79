"""Result tables as psql prints them, for the parsers of PostgreSQL views saved by hand.

Three layouts, each a header row of column names and one row per result row::

     datid |  datname  | blks_read | blks_hit       <- aligned (psql's default): a rule under the header,
    -------+-----------+-----------+----------        cells cut at its "+", "(N rows)" after the last row
         5 | postgres  |       429 |     1271
    (1 row)

    datid|datname|blks_read|blks_hit               <- psql -A (any one-character -F: "|", ",", tab, ";");
    5|postgres|429|1271                               -At has no header and is not read here
    (1 row)

    datid,datname,blks_read,blks_hit               <- psql --csv, COPY ... TO STDOUT WITH CSV HEADER
    5,postgres,429,1271                               (quoted fields; -A -F, reads the same)

``read_tables`` finds every table of a member whose header ``header_ok`` accepts (a loop of snapshots
gives several), with the line of the header and the time line written just before it, if any (``date``,
ISO 8601, epoch seconds: ``kit.times.parse_time_line``). Cells are text, stripped; an empty cell is None
(psql prints NULL as nothing).

>>> [t.rows for t in read_tables(" a | b\\n---+---\\n 1 | \\n(1 row)\\n", lambda names: "a" in names, "UTC")]
[[(3, ['1', None])]]
>>> t = read_tables('a,b\\n"x,y",2\\n', lambda names: "a" in names, "UTC")[0]
>>> t.layout, t.names, t.rows
('csv', ['a', 'b'], [(2, ['x,y', '2'])])
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from datetime import datetime
from typing import Callable

from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.times import parse_time_line
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile

RULE_RE = lazy_compile(r"^-+(?:\+-+)*$")  # the line under an aligned header
FOOTER_RE = lazy_compile(r"^\((\d+) rows?\)$")
NAME_RE = lazy_compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEPARATORS = ("|", ",", "\t", ";")  # psql -A -F: the ones people use


def column_spans(rule: str) -> list[tuple[int, int | None]]:
    """Where each column of an aligned table lies, from the rule under its header ("-----+----").

    >>> column_spans("---+----+--")
    [(0, 3), (4, 8), (9, None)]
    """
    spans, begin = [], 0
    for i, ch in enumerate(rule):
        if ch == "+":
            spans.append((begin, i))
            begin = i + 1
    spans.append((begin, None))
    return spans


@dataclass
class PsqlTable:
    """One result table: its layout ("aligned", "unaligned", "csv"), column names (lower case), rows as
    (line number, cells), the footer's row count when printed, and the time line before its header."""

    layout: str
    names: list[str]
    line: int
    time: datetime | None = None
    time_zone_applied: bool = False
    rows: list[tuple[int, list[str | None]]] = field(default_factory=list)
    footer: int | None = None


def _cell(text: str) -> str | None:
    text = text.strip()
    return text or None


def _header(line: str, following: str) -> tuple[str, list[str], str | None] | None:
    """(layout, names, separator) when ``line`` is the header of a table, else None."""
    if RULE_RE.match(following.strip()) and following.strip().count("+") == line.count("|"):
        names = [part.strip().lower() for part in line.split("|")]
        return ("aligned", names, None) if all(NAME_RE.match(n) for n in names) else None
    for separator in SEPARATORS:
        if separator in line:
            names = [part.strip().strip('"').lower() for part in line.split(separator)]
            if len(names) > 1 and all(NAME_RE.match(n) for n in names):
                return ("csv" if separator == "," else "unaligned"), names, separator
    return None


def read_tables(text: str, header_ok: Callable[[list[str]], bool], tz: str,
                warnings: list[ParseWarning] | None = None) -> list[PsqlTable]:
    """Every table of ``text`` whose header ``header_ok`` accepts, in order (module docstring).

    A row whose number of cells is not the header's is skipped with a warning (at most
    ``MAX_WARNINGS``); lines outside tables are skipped silently: psql's echo, ``\\timing`` lines."""
    warnings = warnings if warnings is not None else []
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    tables: list[PsqlTable] = []
    current: PsqlTable | None = None
    spans: list[tuple[int, int | None]] = []
    separator: str | None = None
    pending: tuple[datetime, bool] | None = None
    index = 0
    while index < len(lines):
        line, number = lines[index], index + 1
        following = lines[index + 1] if index + 1 < len(lines) else ""
        index += 1
        if current is not None:
            footer = FOOTER_RE.match(line.strip())
            if footer:
                current.footer, current = int(footer.group(1)), None
                continue
            if not line.strip():
                current = None
                continue
            if current.layout == "aligned":  # cut at the bars; at the rule's columns when a value holds one
                fits = line.count("|") == len(spans) - 1 or len(line.rstrip()) >= (spans[-1][0] or 0)
                parts = line.split("|") if line.count("|") == len(spans) - 1 else [line[s:e] for s, e in spans]
                cells = [_cell(part) for part in parts]
            elif current.layout == "csv":
                cells = [value if value != "" else None for value in next(csv.reader([line]))]
                fits = len(cells) == len(current.names)
            else:
                cells = [_cell(part) for part in line.split(separator)]
                fits = len(cells) == len(current.names)
            if fits:
                current.rows.append((number, cells))
                continue
            if len(warnings) < MAX_WARNINGS:
                warnings.append(ParseWarning(number, f"{len(cells)} cells where the header has {len(current.names)}; row skipped"))
            continue
        if not line.strip():
            continue
        found = _header(line, following)
        if found is None:  # a time line dates the next table; other lines (psql's echo) are passed over
            pending = parse_time_line(line, tz) or pending
            continue
        layout, names, separator = found
        if not header_ok(names):
            pending = None
            continue
        current = PsqlTable(layout, names, number, pending[0] if pending else None, bool(pending and pending[1]))
        tables.append(current)
        pending = None
        if layout == "aligned":
            spans = column_spans(following.rstrip())
            index += 1  # the rule
    return tables
