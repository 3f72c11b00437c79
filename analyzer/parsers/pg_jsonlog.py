"""PostgreSQL jsonlog (``log_destination = 'jsonlog'``, PostgreSQL 15+) and CloudNativePG's JSON
wrapping of csvlog records -> ``statement`` and ``plan_node`` rows.

Sample input (one JSON object per line; absent keys mean empty)::

    {"timestamp":"2026-11-29 20:47:58.244 UTC","user":"postgres","dbname":"bench","pid":31868,
     "remote_host":"[local]","session_id":"6b0c8f7e.7c7c","line_num":1,"ps":"SELECT","vxid":"3/45","txid":0,
     "error_severity":"LOG","message":"duration: 11.192 ms  plan:\\nQuery Text: SELECT ...","query_id":-3125346135688813602}
    {"level":"info","ts":1669575482.09,"logger":"postgres","msg":"record","logging_pod":"pg-1",
     "record":{"log_time":"2022-11-27 18:58:02.004 UTC","user_name":"postgres","process_id":"599",
     "session_id":"6383b339.257","error_severity":"LOG","message":"duration: 0.097 ms  statement: ;"}}

jsonlog keys used: timestamp, user, dbname, pid, remote_host, session_id, vxid, txid, error_severity,
state_code, message, context, statement (the failed statement of an ERROR), application_name,
query_id. CloudNativePG ``record`` objects use the csvlog column names (log_time, user_name, ...,
query); its other lines (operator messages) are counted in a note. Statement rules and output
columns: see ``pg_messages``; plans: ``pg_explain``.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers import pg_batch
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning, decode_text
from dbdiag.parsers.kit.lines import split_lines

JSONLOG_KEYS = {
    "timestamp": "ts_text", "user": "user", "dbname": "db", "pid": "pid", "remote_host": "host",
    "session_id": "session", "vxid": "vxid", "txid": "xid", "error_severity": "sev", "state_code": "sqlstate",
    "message": "message", "context": "context", "statement": "statement", "application_name": "app",
    "query_id": "query_id", "detail": "detail",
}
CNPG_KEYS = {
    "log_time": "ts_text", "user_name": "user", "database_name": "db", "process_id": "pid",
    "connection_from": "host", "session_id": "session", "virtual_transaction_id": "vxid",
    "transaction_id": "xid", "error_severity": "sev", "sql_state_code": "sqlstate", "message": "message",
    "context": "context", "query": "statement", "application_name": "app", "query_id": "query_id", "detail": "detail",
}


def _decode(objects: pl.DataFrame, keys: dict[str, str], wrapped: bool) -> pl.DataFrame:
    """The wanted keys as strings; json_decode in one pass, or key by key when a line is not valid JSON."""
    inner = pl.Struct({key: pl.String for key in keys})
    dtype = pl.Struct({"record": inner}) if wrapped else inner
    try:
        decoded = objects.with_columns(pl.col("text").str.json_decode(dtype).alias("json")).unnest("json")
        if wrapped:
            decoded = decoded.unnest("record")
        return decoded.rename({key: name for key, name in keys.items()})
    except pl.exceptions.PolarsError:
        base = "$.record." if wrapped else "$."
        return objects.with_columns(
            pl.col("text").str.json_path_match(f"{base}{key}").alias(name) for key, name in keys.items()
        )


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, warnings = M.safe_tz(ctx.tz)
    records, notes, line_count = _records(text, tz, warnings)
    return pg_batch.results_of_records([(records, line_count)], [ctx.source], [notes], [warnings])[0]


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse`` of each member, the statements of all made in one pass (``pg_batch``)."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    read, at = [], []
    for index, (data, ctx) in enumerate(members):
        tz, warnings = M.safe_tz(ctx.tz)
        try:
            records, notes, line_count = _records(decode_text(data), tz, warnings)
        except ParseError as error:
            results[index] = error
            continue
        read.append(((records, line_count), ctx.source, notes, warnings))
        at.append(index)
    if read:
        logs, sources, notes_each, warnings_each = (list(column) for column in zip(*read))
        for index, result in zip(at, pg_batch.results_of_records(logs, sources, notes_each, warnings_each)):
            results[index] = result
    return results  # type: ignore[return-value]


def _records(text: str, tz: str, warnings: list[ParseWarning]) -> tuple[pl.DataFrame, list[str], int]:
    """The record frame of a jsonlog, its notes and its line count (``warnings`` gets the lines
    skipped); ParseError when it is none."""
    if not text or text.isspace():  # isspace stops at the first visible character
        raise ParseError("empty jsonlog")
    lines = split_lines(text[:-1] if text.endswith("\n") else text)
    stripped = pl.col("text").str.strip_chars()
    objects = lines.filter(stripped.str.starts_with("{") & stripped.str.ends_with("}"))
    if objects.is_empty():
        raise ParseError("no JSON object lines: not a jsonlog")
    wrapped = bool(objects["text"].head(1000).str.contains('"record":{', literal=True).any())
    keys = CNPG_KEYS if wrapped else JSONLOG_KEYS
    fields = _decode(objects, keys, wrapped).with_columns((pl.col("idx") + 1).alias("line"))
    entries = fields.filter(pl.col("sev").is_not_null() & pl.col("message").is_not_null())
    if entries.is_empty():
        raise ParseError("JSON lines carry no PostgreSQL entry (no error_severity/message keys)")
    records, notes = M.records_from_fields(entries, tz)
    notes = [("CloudNativePG JSON records" if wrapped else "jsonlog") + f": {entries.height} entries"] + notes
    others = lines.height - entries.height - int((lines["text"].str.strip_chars() == "").sum())
    if others:
        first = lines.join(entries.select("idx"), on="idx", how="anti").filter(stripped != "").row(0, named=True)
        what = "operator or other JSON lines" if wrapped else "lines that are not jsonlog entries"
        warnings.append(ParseWarning(int(first["idx"]) + 1, f"{others} {what} skipped, first: {first['text'][:60]!r}"))
    return records, notes, lines.height


def detect(head: str, name: str) -> float:
    lines = [line for line in head.split("\n") if line.strip()][:50]
    if not lines or not lines[0].lstrip().startswith("{"):
        return 0.0
    native = sum(1 for line in lines if '"error_severity"' in line and ('"timestamp"' in line or '"log_time"' in line))
    if native:
        return 0.95
    if any('"logger":"postgres"' in line or '"msg":"record"' in line for line in lines):
        return 0.7
    return 0.0


SPEC = ParserSpec(
    kind="postgresql-jsonlog",
    description="PostgreSQL jsonlog (15+) and CloudNativePG JSON records: statements, errors, auto_explain plans",
    detect=detect,
    parse=parse,
    parse_batch=parse_batch,
)

