"""CSV / TSV exports of TiDB's ``information_schema.(CLUSTER_)SLOW_QUERY`` table.

Sample input (a header row with the table's column names, any case, then one row per slow
statement; CSV with double quotes around fields holding commas or newlines, or the TSV of
``mysql -B -e 'select * from information_schema.cluster_slow_query'`` with ``\\n``/``\\t``
escapes and ``NULL``)::

    INSTANCE,Time,Txn_start_ts,User,Host,Conn_ID,Query_time,...,Process_time,Wait_time,Backoff_time,LockKeys_time,Request_count,Total_keys,Process_keys,...,DB,Index_names,Is_internal,Digest,Stats,...,Mem_max,...,Result_rows,...,Prepared,Succ,...,Plan_from_cache,Plan_from_binding,Plan,Plan_digest,...,Prev_stmt,Query
    10.0.1.7:10080,2021-12-19 23:49:47.802016,0,root,127.0.0.1,7,0.000153,...,"	id	task	estRows	operator info ...
    	Projection_4	root	1	...",9a2a...,...,SELECT count(*) FROM INFORMATION_SCHEMA.CLUSTER_SLOW_QUERY;

Output ``statement`` (engine ``tidb``), with the same meanings as the slow log (the table is the
slow log, parsed by TiDB): end_ts = Time (the statement END; the table shows it in the session
time zone with no offset, so a zone-less Time is read in --tz, said in a note), start_ts =
Time - Query_time, instance = INSTANCE, conn_id = Conn_ID, txn_id = Txn_start_ts (null when
0), user = User, client_host = Host, db = DB, query_time_s, lock_time_s = LockKeys_time,
process_time_s, wait_time_s, backoff_time_s, rows_examined = Process_keys (else Total_keys),
rows_sent = Result_rows, mem_max_bytes = Mem_max, digest, plan_digest, stats_info = Stats,
index_names, prepared, plan_from_cache, is_internal, success = Succ, plan (the decoded text
plan the table shows), plan_signature, full_scan, sql = Query; ``line`` is the 1-based data row.
``plan_node`` comes from the text plan (see ``tidb_slowlog.text_plan_rows``).

Not read: a CSV of an aggregate over the table (``Digest,Plan_Digest,avg_process_time,last_time``)
holds no statements; it is recognised so that the inventory says so, and refused.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers._tidb_fields import parse_times, start_from_end, typed_measures
from dbdiag.parsers._tidb_plans import statements_with_text_plans
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.kit.times import check_tz, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings, row_warnings
from dbdiag.parsers.sql_table_export import header_names, read_export

# statement column -> table column (lower case)
COLUMNS = {
    "instance": "instance",
    "time_raw": "time",
    "txn_raw": "txn_start_ts",
    "user": "user",
    "client_host": "host",
    "conn_id": "conn_id",
    "query_time_raw": "query_time",
    "process_time_raw": "process_time",
    "wait_time_raw": "wait_time",
    "backoff_time_raw": "backoff_time",
    "lock_keys_raw": "lockkeys_time",
    "total_keys_raw": "total_keys",
    "process_keys_raw": "process_keys",
    "result_rows_raw": "result_rows",
    "db": "db",
    "index_names": "index_names",
    "is_internal_raw": "is_internal",
    "digest": "digest",
    "stats_info": "stats",
    "mem_max_raw": "mem_max",
    "prepared_raw": "prepared",
    "succ_raw": "succ",
    "plan_from_cache_raw": "plan_from_cache",
    "plan": "plan",
    "plan_digest": "plan_digest",
    "sql": "query",
}
AGGREGATE_COLUMNS = {"digest", "plan_digest", "avg_process_time"}


def _is_table(names: list[str]) -> bool:
    return {"time", "query_time"} <= set(names) and bool({"digest", "conn_id", "txn_start_ts", "query"} & set(names))


def parse(text: str, ctx: ParseContext) -> ParseResult:
    separator, names = header_names(text)
    if AGGREGATE_COLUMNS <= set(names) and "query_time" not in names:
        raise ParseError(
            "aggregate over slow_query (avg_process_time per Digest and Plan_Digest), not statements: "
            "nothing per statement to read"
        )
    if not _is_table(names):
        raise ParseError("header has no SLOW_QUERY columns (Time, Query_time and Digest/Conn_ID/Query)")
    tz, tz_warning = check_tz(ctx.tz)
    warnings = [tz_warning] if tz_warning else []
    frame = read_export(text, separator)
    if frame.is_empty():
        raise ParseError("SLOW_QUERY export has a header but no rows")
    raw = frame.select(
        (pl.col(name) if name in frame.columns else pl.lit(None, pl.String)).alias(column) for column, name in COLUMNS.items()
    )
    end_ts, zoned = parse_times(pl.col("time_raw"), tz)
    st = raw.with_row_index("stmt_id").with_columns(
        pl.col("stmt_id").cast(pl.Int64),
        **typed_measures(),
        line=pl.col("stmt_id").cast(pl.Int64) + 1,
        engine=pl.lit("tidb"),
        end_ts=end_ts,
        zoned=zoned,
        lock_time_s=pl.col("lock_keys_raw").cast(pl.Float64, strict=False),
        plan=pl.when(pl.col("plan").str.strip_chars() != "").then(pl.col("plan")),
        source=pl.lit(ctx.source),
    ).with_columns(
        pl.col(c).replace("", None) for c in ("user", "client_host", "db", "instance", "index_names", "stats_info", "digest", "plan_digest")
    ).with_columns(start_ts=start_from_end(pl.col("end_ts"), pl.col("query_time_s")))
    warnings += row_warnings(
        st.filter(pl.col("end_ts").is_null()).select("line", "time_raw"),
        lambda value: f"unreadable Time {str(value)[:40]!r}; statement kept without times",
    )
    notes = [zone_note(tz)] if st.filter(pl.col("end_ts").is_not_null() & ~pl.col("zoned")).height else []
    return statements_with_text_plans(st, ctx.source, cap_warnings(warnings), notes)


def detect(head: str, name: str) -> float:
    _, names = header_names(head)
    if _is_table(names):
        return 0.95 if "instance" in names else 0.9
    if AGGREGATE_COLUMNS <= set(names) and "exec_count" not in names:  # exec_count: a statements summary
        return 0.6  # recognised only to be refused with the reason
    return 0.0


SPEC = ParserSpec(
    kind="tidb-slow-query-table",
    description="CSV/TSV export of information_schema.(cluster_)slow_query: statements with text plans",
    detect=detect,
    parse=parse,
)
