"""PostgreSQL settings as psql prints ``SHOW ALL`` or ``SELECT name, setting, unit FROM pg_settings``.

Raw input, any of::

                      name                  |  setting  |            description             <- aligned
    ----------------------------------------+-----------+------------------------------------     (also
     shared_buffers                         | 128MB     | Sets the number of shared memory ...   wrapped)
    (354 rows)

    name|setting|unit                       <- psql -A (header and footer) or -At (neither)
    shared_buffers|16384|8kB

    name,setting,unit,category,...          <- psql --csv, COPY ... WITH CSV HEADER
    shared_buffers,16384,8kB,Resource Usage / Memory,...

Columns are found by their header names (``name``, ``setting``, ``unit``; others are ignored). Without
a header (-At) the columns are name|setting|third, the third read as ``unit`` when every third field
looks like one ("8kB", "ms", "") and as a description otherwise. Aligned multi-line values (``+`` at
the cell's edge) keep their newlines; wrapped cells (``.`` at the edges) are joined.

Output table ``db_setting`` (one row per setting; ``records`` is their number)::

    engine "postgresql", kind "variable", name String, value String (SHOW ALL shows "128MB",
    pg_settings shows "16384" with unit "8kB"), unit String (null when absent or empty), source String
"""

from __future__ import annotations

import csv
import io

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.psql_tables import FOOTER_RE, RULE_RE, column_spans
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import DB_SETTING, conform

_ALIGNED_HEADER_RE = lazy_compile(r"^\s*name\s*\|\s*setting\s*(?:\|.*)?$")
_UNALIGNED_HEADER_RE = lazy_compile(r"^name\|setting(?:\|[a-z_]+)*$")
_CSV_HEADER_RE = lazy_compile(r"^name,setting(?:,[a-z_]+)*$")
_NAME_RE = lazy_compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
_UNIT_RE = lazy_compile(r"^(?:\d*(?:B|kB|MB|GB|TB)|us|ms|s|min|h|d)?$")
_KNOWN_PREFIXES = (
    "allow_", "application_name", "archive_", "array_nulls", "authentication_timeout", "autovacuum",
    "backend_flush_after", "backslash_quote", "bgwriter_", "block_size", "bonjour", "checkpoint_", "client_",
    "cluster_name", "commit_", "config_file", "cpu_", "data_directory", "datestyle", "deadlock_timeout",
    "default_", "effective_", "enable_", "fsync", "full_page_writes", "hot_standby", "lc_", "listen_addresses",
    "log_", "maintenance_work_mem", "max_", "min_wal_size", "port", "random_page_cost", "search_path",
    "shared_buffers", "shared_preload_libraries", "synchronous_commit", "temp_buffers", "timezone", "track_",
    "unix_socket_", "vacuum_", "wal_", "work_mem",
)


def _row(name: str, value: str, unit: str | None) -> tuple[str, str, str | None]:
    return name, value, (unit or None)


def _aligned(lines: list[str], start: int, warnings: list[ParseWarning]) -> tuple[list, int | None]:
    """Rows of an aligned/wrapped table whose header is ``lines[start]`` and rule ``lines[start + 1]``."""
    header, rule = lines[start], lines[start + 1]
    spans = column_spans(rule)
    names = [header[s:e].strip() for s, e in spans]
    unit_at = names.index("unit") if "unit" in names else None
    rows: list[list] = []  # [values, right-edge markers, line]
    footer = None
    for number in range(start + 2, len(lines)):
        line = lines[number]
        m = FOOTER_RE.match(line.strip())
        if m:
            footer = int(m.group(1))
            break
        if not line.strip():
            continue
        cells = [line[s:e] if e is not None else line[s:] for s, e in spans]
        texts, marks = [], []
        for cell, (s, e) in zip(cells, spans):
            width = (e if e is not None else len(rule)) - s
            # psql marks a cell's edge: "+" the value goes on after a newline, "." it was wrapped
            if len(cell) >= width and cell[width - 1] in "+.":
                body, mark = cell[1:width - 1], cell[width - 1]
            else:
                body, mark = (cell[1:-1] if e is not None else cell[1:]), ""
            texts.append(body if mark == "." else body.rstrip())  # a wrapped chunk fills its cell exactly
            marks.append(mark)
        if texts[0] == "" and rows:
            values, previous_marks, _ = rows[-1]
            for i, text in enumerate(texts):
                mark = previous_marks[i]
                if mark == "+":
                    values[i] += "\n" + text
                elif mark == "." or text:
                    values[i] += text
                previous_marks[i] = marks[i]
            continue
        if not _NAME_RE.match(texts[0]) or len(line) < spans[-1][0] - 1:
            if len(warnings) < MAX_WARNINGS:
                warnings.append(ParseWarning(number + 1, f"not a name | setting row; skipped: {line[:60]!r}"))
            continue
        rows.append([texts, marks, number + 1])
    out = [_row(v[0], v[1], v[unit_at] if unit_at is not None else None) for v, _m, _n in rows]
    return out, footer


def _unaligned(lines: list[str], header: list[str] | None, warnings: list[ParseWarning]) -> tuple[list, int | None]:
    if header is None:
        thirds = [line.split("|", 1)[1].rsplit("|", 1)[1] for line in lines if line.count("|") >= 2]
        header = ["name", "setting", "unit" if thirds and all(_UNIT_RE.match(t) for t in thirds) else "description"]
    unit_at = header.index("unit") if "unit" in header else None
    rows, footer = [], None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        m = FOOTER_RE.match(line.strip())
        if m:
            footer = int(m.group(1))
            continue
        name, sep, rest = line.partition("|")
        if not sep or not _NAME_RE.match(name):
            if len(warnings) < MAX_WARNINGS:
                warnings.append(ParseWarning(number, f"not a name|setting line; skipped: {line[:60]!r}"))
            continue
        if len(header) == 3:
            fields = [name, *rest.rsplit("|", 1)] if "|" in rest else [name, rest, ""]
        else:
            fields = [name, *rest.split("|")]
        if len(fields) != len(header):
            warnings.append(ParseWarning(number, f"{len(fields)} fields where the header has {len(header)}"))
            fields = (fields + [""] * len(header))[: len(header)]
        rows.append(_row(fields[0], fields[1], fields[unit_at] if unit_at is not None else None))
    return rows, footer


def _csv(text: str, warnings: list[ParseWarning]) -> list:
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader)
    unit_at = header.index("unit") if "unit" in header else None
    rows = []
    for fields in reader:
        if not fields:
            continue
        if len(fields) != len(header) or not _NAME_RE.match(fields[0]):
            if len(warnings) < MAX_WARNINGS:
                warnings.append(ParseWarning(reader.line_num, f"not a pg_settings CSV row; skipped: {fields[:2]!r}"))
            continue
        rows.append(_row(fields[0], fields[1], fields[unit_at] if unit_at is not None else None))
    return rows


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    lines = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise ParseError("empty: no psql SHOW ALL / pg_settings output")
    footer = None
    if _CSV_HEADER_RE.match(lines[first]):
        layout = "csv"
        try:
            rows = _csv("\n".join(lines[first:]), warnings)
        except csv.Error as exc:
            raise ParseError(f"pg_settings CSV cannot be read: {exc}") from exc
    elif _ALIGNED_HEADER_RE.match(lines[first]) and first + 1 < len(lines) and RULE_RE.match(lines[first + 1]):
        layout = "aligned"
        rows, footer = _aligned(lines, first, warnings)
    elif _UNALIGNED_HEADER_RE.match(lines[first]):
        layout = "unaligned"
        rows, footer = _unaligned(lines[first + 1:], lines[first].split("|"), warnings)
    else:
        layout = "unaligned, no header"
        rows, footer = _unaligned(lines, None, warnings)
    if not rows:
        raise ParseError("no name/setting rows (psql SHOW ALL / pg_settings) found")
    if footer is not None and footer != len(rows):
        warnings.append(ParseWarning(None, f"footer says {footer} rows but {len(rows)} were read"))
    frame = pl.DataFrame(rows, schema={"name": pl.String, "value": pl.String, "unit": pl.String}, orient="row")
    frame = frame.with_columns(
        pl.lit("postgresql").alias("engine"), pl.lit("variable").alias("kind"), pl.lit(ctx.source).alias("source")
    )
    table = conform(DB_SETTING, frame)
    return ParseResult(tables={DB_SETTING: table}, records=table.height, warnings=warnings,
                       notes=[f"layout: {layout}"])


def detect(head: str, name: str) -> float:
    lines = [line.rstrip("\r") for line in head.split("\n")]
    first = next((line for line in lines if line.strip()), "")
    if _CSV_HEADER_RE.match(first) or _UNALIGNED_HEADER_RE.match(first):
        return 0.95
    if _ALIGNED_HEADER_RE.match(first):
        following = lines[lines.index(first) + 1] if lines.index(first) + 1 < len(lines) else ""
        return 0.95 if RULE_RE.match(following) else 0.3
    body = [line for line in lines[:-1] if line.strip()]
    if len(body) < 5:
        return 0.0
    names = [line.split("|", 1)[0] for line in body if "|" in line]
    names = [n for n in names if _NAME_RE.match(n)]
    if len(names) < 0.9 * len(body):
        return 0.0
    known = sum(n.startswith(_KNOWN_PREFIXES) for n in names)
    return 0.8 if known >= 3 and known >= 0.2 * len(names) else 0.0


SPEC = ParserSpec(
    kind="postgresql-settings",
    description="PostgreSQL SHOW ALL / pg_settings as psql prints them (aligned, wrapped, -A, -At, CSV)",
    detect=detect,
    parse=parse,
)
