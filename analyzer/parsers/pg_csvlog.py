"""PostgreSQL csvlog (``log_destination = 'csvlog'``) -> ``statement`` and ``plan_node`` rows.

Sample input (PostgreSQL 14+, 26 columns; fields may hold newlines and doubled quotes)::

    2021-01-21 16:12:51.400 CET,"aaaa","aaaa",77553,"127.0.0.1:45908",60099770.12ef1,1644,"UPDATE",
      2021-01-21 16:02:08 CET,10/5684,136179,LOG,00000,"duration: 36.388 ms  execute <unnamed>: update t set
      data=$1 where id=$2","parameters: $1 = '\\x2550', $2 = '157'",,,,,,,,"PostgreSQL JDBC Driver"
    "2026-05-16 05:20:03.994 UTC","health_user","health_db",1002,"192.0.2.20:54322",00000002.000003ea,2,"idle",
      "2026-05-16 05:20:00 UTC",2/2,0,ERROR,22012,"division by zero",,,,,,"SELECT 1/0;",,,"psql","client backend",,0

Columns by position: log_time, user_name, database_name, process_id, connection_from, session_id,
session_line_num, command_tag, session_start_time, virtual_transaction_id, transaction_id,
error_severity, sql_state_code, message, detail, hint, internal_query, internal_query_pos, context,
query, query_pos, location, application_name (PostgreSQL 9.0+: 23 columns; 8.4 has 22), backend_type
(13: 24), leader_pid and query_id (14+: 26). The ``query`` column is the failed statement of an
ERROR. Statement rules and output columns: see ``pg_messages``; plans: ``pg_explain``.
"""

from __future__ import annotations

import io

import polars as pl

from dbdiag.parsers import pg_batch
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, decode_text
from dbdiag.patterns import lazy_compile

CSV_COLUMNS = (
    "log_time", "user_name", "database_name", "process_id", "connection_from", "session_id", "session_line_num",
    "command_tag", "session_start_time", "virtual_transaction_id", "transaction_id", "error_severity",
    "sql_state_code", "message", "detail", "hint", "internal_query", "internal_query_pos", "context", "query",
    "query_pos", "location", "application_name", "backend_type", "leader_pid", "query_id",
)
TO_RECORD = {
    "log_time": "ts_text", "user_name": "user", "database_name": "db", "process_id": "pid",
    "connection_from": "host", "session_id": "session", "virtual_transaction_id": "vxid",
    "transaction_id": "xid", "error_severity": "sev", "sql_state_code": "sqlstate", "message": "message",
    "context": "context", "query": "statement", "application_name": "app", "query_id": "query_id",
}
VERSIONS = {22: "PostgreSQL 8.4", 23: "PostgreSQL 9.0-12", 24: "PostgreSQL 13", 26: "PostgreSQL 14+"}
# The first record sets the width of every row; a line of 64 K commas made 64 K columns (5 s of work)
MAX_COLUMNS = 64
_CSV_MARK_RE = lazy_compile(r'[",\n]')
LINE_RE = lazy_compile(
    r'(?m)^"?\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?(?: [^,"]*)?"?,.*?,'
    r'(?:LOG|ERROR|FATAL|PANIC|WARNING|NOTICE|INFO|DEBUG\d?),[0-9A-Z]{5},'
)


def first_record_width(text: str, limit: int) -> int:
    """Fields of the first CSV record (quotes may hold commas and newlines), counted up to ``limit + 1``.

    >>> first_record_width('a,"b,""c""\\n",d\\ne,f', 64)
    3
    """
    fields, quoted = 1, False
    for mark in _CSV_MARK_RE.finditer(text):
        if mark.group() == '"':
            quoted = not quoted
        elif quoted:
            continue
        elif mark.group() == "\n" or fields > limit:
            break
        else:
            fields += 1
    return fields


def _read(text: str) -> pl.DataFrame:
    if first_record_width(text, MAX_COLUMNS) > MAX_COLUMNS:
        raise ParseError(f"csvlog rows have over {MAX_COLUMNS} columns; PostgreSQL writes 22 to 26")
    try:
        frame = pl.read_csv(
            io.BytesIO(text.encode("utf-8", "surrogatepass")),
            has_header=False, infer_schema=False, quote_char='"', truncate_ragged_lines=True,
        )
    except pl.exceptions.PolarsError as error:
        raise ParseError(f"csvlog could not be read as CSV: {str(error).splitlines()[0][:200]}") from error
    if frame.width < 14:
        raise ParseError(f"csvlog rows have {frame.width} columns; PostgreSQL writes 22 to 26")
    names = list(CSV_COLUMNS[: frame.width]) + [f"extra_{i}" for i in range(frame.width - len(CSV_COLUMNS))]
    return frame.rename(dict(zip(frame.columns, names)))


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, warnings = M.safe_tz(ctx.tz)
    records, notes = _records(text, tz)
    return pg_batch.results_of_records([(records, text.count("\n") + 1)], [ctx.source], [notes], [warnings])[0]


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse`` of each member, the statements of all made in one pass (``pg_batch``)."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    read, at = [], []
    for index, (data, ctx) in enumerate(members):
        text = decode_text(data)
        tz, warnings = M.safe_tz(ctx.tz)
        try:
            records, notes = _records(text, tz)
        except ParseError as error:
            results[index] = error
            continue
        read.append(((records, text.count("\n") + 1), ctx.source, notes, warnings))
        at.append(index)
    if read:
        logs, sources, notes_each, warnings_each = (list(column) for column in zip(*read))
        for index, result in zip(at, pg_batch.results_of_records(logs, sources, notes_each, warnings_each)):
            results[index] = result
    return results  # type: ignore[return-value]


def _records(text: str, tz: str) -> tuple[pl.DataFrame, list[str]]:
    """The record frame of a csvlog and its notes (column set, zones); ParseError when it is none."""
    if not text or text.isspace():  # isspace stops at the first visible character
        raise ParseError("empty csvlog")
    frame = _read(text)
    newlines = pl.sum_horizontal(pl.col(c).fill_null("").str.count_matches("\n", literal=True) for c in frame.columns)
    fields = frame.with_row_index("idx").with_columns(
        pl.col("idx").cast(pl.Int64),
        (1 + (newlines + 1).cum_sum() - (newlines + 1)).cast(pl.Int64).alias("line"),
    ).filter(pl.col("error_severity").is_not_null() & pl.col("log_time").is_not_null())
    fields = fields.select("idx", "line", *[pl.col(c).alias(TO_RECORD[c]) for c in TO_RECORD if c in fields.columns])
    records, notes = M.records_from_fields(fields, tz)
    version = VERSIONS.get(frame.width, f"{frame.width} columns: not a PostgreSQL column set, read by position")
    return records, [f"csvlog with {frame.width} columns ({version})"] + notes


def detect(head: str, name: str) -> float:
    hits = len(LINE_RE.findall(head))
    if hits >= 1 and ("duration: " in head or '"' in head):
        return 0.95 if hits >= 2 or name.endswith(".csv") else 0.9
    return 0.0


SPEC = ParserSpec(
    kind="postgresql-csvlog",
    description="PostgreSQL csvlog (22-26 columns): statements, errors, auto_explain plans",
    detect=detect,
    parse=parse,
    parse_batch=parse_batch,
)
