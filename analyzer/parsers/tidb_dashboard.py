"""TiDB Dashboard slow-query JSON: the detail API response (one object) or the list API response.

Sample input (``/api/slow_query/detail``; the list API returns a list of such objects)::

    {
      "digest": "877ddf60c6084ae30353cc484f375e5159c231f0d9363213d1d1cc2ffbd272ce",
      "query": "SELECT ... [arguments: (\\"memory\\", \\"cpu\\")];",
      "instance": "127.0.0.1:10080",
      "db": "",
      "connection_id": "5414958427354957035",
      "success": 1,
      "timestamp": 1690272708.823209,
      "query_time": 1.51515176,
      "process_time": 0, "wait_time": 0, "backoff_time": 0, "lock_keys_time": 0,
      "memory_max": 220680,
      "txn_start_ts": "0",
      "plan": "\\tid  \\ttask\\testRows\\toperator info ...\\n\\tSort_7  \\troot\\t8000 ...",
      "is_internal": 0, "index_names": "", "stats": "", "prepared": 1, "plan_from_cache": 0,
      "user": "root", "host": "127.0.0.1", "process_keys": 0, "total_keys": 0, ...
    }

``timestamp`` is the slow log's Time (the statement END) in epoch seconds, so end_ts =
timestamp and start_ts = timestamp - query_time. Output ``statement`` (engine ``tidb``):
query_time_s, lock_time_s = lock_keys_time, process_time_s, wait_time_s, backoff_time_s,
rows_examined = process_keys (else total_keys), rows_sent = result_rows when present,
user, client_host = host, db, conn_id = connection_id, txn_id = txn_start_ts (null when 0),
instance, digest, plan_digest (when present), plan (the text plan), plan_signature, full_scan,
stats_info = stats, index_names, prepared, plan_from_cache, is_internal, success, mem_max_bytes =
memory_max, sql = query; ``line`` is the object's 1-based position in the list. Empty strings
are null. The list API fills the columns it was not asked for with 0 or "": in a list, a field
that is 0/empty in every object is read as unknown (null), and a note names those fields.
``plan_node`` comes from the text plan (see ``tidb_slowlog.text_plan_rows``).
"""

from __future__ import annotations

import json
import re

import polars as pl

from dbdiag.parsers._tidb_fields import RAW_MEASURES, start_from_end, typed_measures
from dbdiag.parsers._tidb_plans import statements_with_text_plans
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import json_text
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

# typed_measures' raw fields under the names this parser gives them (see FIELDS)
DASHBOARD_MEASURES = {
    **RAW_MEASURES,
    "query_time": "query_time_s",
    "process_time": "process_time_s",
    "wait_time": "wait_time_s",
    "backoff_time": "backoff_time_s",
    "process_keys": "process_keys",
    "total_keys": "total_keys",
    "result_rows": "rows_sent",
    "mem_max": "mem_max_bytes",
    "txn": "txn_id",
    "prepared": "prepared",
    "plan_from_cache": "plan_from_cache",
    "is_internal": "is_internal",
    "succ": "success",
}

# statement column -> dashboard keys, first present wins
FIELDS = {
    "timestamp": ("timestamp",),
    "query_time_s": ("query_time",),
    "lock_time_s": ("lock_keys_time",),
    "process_time_s": ("process_time",),
    "wait_time_s": ("wait_time",),
    "backoff_time_s": ("backoff_time",),
    "process_keys": ("process_keys",),
    "total_keys": ("total_keys",),
    "rows_sent": ("result_rows",),
    "user": ("user",),
    "client_host": ("host",),
    "db": ("db",),
    "conn_id": ("connection_id",),
    "txn_id": ("txn_start_ts",),
    "instance": ("instance",),
    "digest": ("digest",),
    "plan_digest": ("plan_digest",),
    "plan": ("plan",),
    "stats_info": ("stats",),
    "index_names": ("index_names",),
    "prepared": ("prepared",),
    "plan_from_cache": ("plan_from_cache",),
    "is_internal": ("is_internal",),
    "success": ("success",),
    "mem_max_bytes": ("memory_max",),
    "sql": ("query",),
}
KNOWN_KEYS = {"digest", "query", "query_time", "timestamp", "connection_id", "plan_digest", "instance",
              "memory_max", "txn_start_ts", "parse_time", "compile_time", "is_internal", "plan"}
KEY_RE = lazy_compile(r'"([a-z_]+)"\s*:')


def _text(value: object) -> str | None:
    """JSON scalar -> text; null, "" and containers (lists, objects) -> None."""
    if value is None or isinstance(value, (list, dict)):
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    return text if text != "" else None


def _objects(text: str) -> tuple[list[dict], list[int], bool, list[ParseWarning]]:
    """The slow-query objects of the response, their 1-based positions, whether it was a list,
    and warnings for skipped items."""
    try:
        data = json_text.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(f"not JSON ({error.msg} at line {error.lineno})") from None
    is_list = isinstance(data, list)
    items = data if is_list else [data]
    objects, positions, warnings = [], [], []
    for position, item in enumerate(items, start=1):
        if isinstance(item, dict) and ({"query_time", "timestamp"} & item.keys()):
            objects.append(item)
            positions.append(position)
        else:
            warnings.append(ParseWarning(position, "item is not a slow query object; skipped"))
    if not objects:
        raise ParseError("JSON has no slow query object (no object with query_time or timestamp)")
    return objects, positions, is_list, warnings


def _columns(objects: list[dict]) -> tuple[dict[str, list[str | None]], dict[str, str]]:
    """Statement column -> values, and statement column -> the dashboard key it came from."""
    columns, sources = {}, {}
    for column, keys in FIELDS.items():
        key = next((k for k in keys if any(k in o for o in objects)), None)
        columns[column] = [_text(o.get(key)) if key else None for o in objects]
        if key:
            sources[column] = key
    return columns, sources


def _unselected(columns: dict[str, list[str | None]], sources: dict[str, str]) -> list[str]:
    """Columns present but zero or empty in every object: the list API did not select them."""
    zero = {None, "0", "0.0"}
    return [c for c in sources if c not in ("timestamp", "sql") and all(v in zero for v in columns[c])]


def parse(text: str, ctx: ParseContext) -> ParseResult:
    objects, positions, is_list, warnings = _objects(text.lstrip("\ufeff"))
    columns, sources = _columns(objects)
    notes = []
    if is_list:
        unknown = _unselected(columns, sources)
        for column in unknown:
            columns[column] = [None] * len(objects)
        if unknown:
            notes.append(
                "list response: fields 0 or empty in every row read as unknown (the list API fills "
                f"unrequested columns with 0): {', '.join(sources[c] for c in unknown)}"
            )
    raw = pl.DataFrame(columns, schema={c: pl.String for c in columns})
    num = lambda c: pl.col(c).cast(pl.Float64, strict=False)  # noqa: E731
    end_ts = (num("timestamp") * 1e6).round(0).cast(pl.Int64, strict=False).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    st = raw.with_row_index("stmt_id").with_columns(
        pl.col("stmt_id").cast(pl.Int64),
        line=pl.Series(positions, dtype=pl.Int64),
        engine=pl.lit("tidb"),
        end_ts=end_ts,
        lock_time_s=num("lock_time_s"),
        source=pl.lit(ctx.source),
    ).with_columns(
        **typed_measures(DASHBOARD_MEASURES, counts_may_be_decimal=True),
    ).with_columns(start_ts=start_from_end(pl.col("end_ts"), pl.col("query_time_s")))
    for (line,) in st.filter(pl.col("end_ts").is_null()).sort("stmt_id").select("line").iter_rows():
        warnings.append(ParseWarning(line, "no readable timestamp; statement kept without times"))
    return statements_with_text_plans(st, ctx.source, cap_warnings(warnings), notes)


def detect(head: str, name: str) -> float:
    stripped = head.lstrip("\ufeff \t\r\n")
    if not stripped.startswith(("{", "[")):
        return 0.0
    keys = set(KEY_RE.findall(stripped[:4096])) & KNOWN_KEYS
    # statement-summary JSON shares digest/plan_digest/instance, never these
    if len(keys) >= 3 and keys & {"query_time", "timestamp", "connection_id"}:
        return 0.9
    # a long first query can push the other keys out of the head
    if {"digest", "query"} <= keys and re.match(r'[\[\s]*\{\s*"digest"\s*:\s*"[0-9a-f]{64}"', stripped):
        return 0.7
    return 0.0


SPEC = ParserSpec(
    kind="tidb-dashboard-slow-query",
    description="TiDB Dashboard slow-query JSON (detail object or list): statements with text plans",
    detect=detect,
    parse=parse,
)
