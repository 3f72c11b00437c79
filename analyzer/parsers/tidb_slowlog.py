"""TiDB slow query log (``tidb-slow.log``, ``tidb_slow_query.log``), TiDB v3 to v8.

TiDB writes one entry per statement when the statement ends, so ``# Time:`` is the END time::

    # Time: 2019-08-14T09:26:59.487776265+08:00
    # Txn_start_ts: 410450924122144769
    # User@Host: root[root] @ localhost [127.0.0.1]
    # Conn_ID: 3086
    # Query_time: 1.527627037
    # Parse_time: 0.000054933
    # Process_time: 0.07 Wait_time: 0.002 Backoff_time: 0.002 Request_count: 1 Total_keys: 131073 Process_keys: 131072
    # DB: test
    # Index_names: [t:idx_a]
    # Is_internal: false
    # Digest: 50a2e32d2abbd6c1764b1b7f2058d428ef2712b029282b776beb9506a365c0f1
    # Stats: t:pseudo
    # Mem_max: 525211
    # Prepared: false
    # Plan_from_cache: false
    # Result_rows: 0
    # Succ: true
    # Plan: tidb_decode_plan('ZJAwCTMyXzcJMAkyMAlkYXRh...')
    # Plan_digest: e5f9d9746c756438a13c75ba3eedf601eecf555cdb7ad327d7092bdd041a83e7
    use test;
    insert into t select * from t;

Older logs (v3) have ``# User: root@127.0.0.1`` and a bare ``# Request_count:`` line; the time
may be in the old layout ``2019-08-14-09:26:59.487 +0800``. A line may carry several
``Key: value`` pairs. The SQL follows the ``#`` lines (``use db;`` lines before it are dropped)
and may span lines; it is kept as logged, trailing ``;`` included, as TiDB's SLOW_QUERY table does.

Output ``statement`` (engine ``tidb``; one row per entry; ``line`` = the ``# Time:`` line):

    end_ts = Time, start_ts = Time - Query_time (both UTC; a zone-less Time is read in --tz),
    query_time_s, lock_time_s = LockKeys_time (or Lock_keys_time), process_time_s, wait_time_s,
    backoff_time_s, rows_examined = Process_keys (live keys the coprocessors read; Total_keys,
    which also counts old MVCC versions, when Process_keys is absent), rows_sent = Result_rows,
    user / client_host from User@Host (the host name part, as TiDB's own reader takes it),
    db = DB (else the ``use`` line), conn_id = Conn_ID, txn_id = Txn_start_ts (null when 0:
    no transaction), digest, plan_digest, stats_info = Stats, index_names = Index_names,
    prepared, plan_from_cache, is_internal, success = Succ, mem_max_bytes = Mem_max, sql,
    plan = the decoded plan text, plan_signature, full_scan (from the plan: any TableFullScan,
    or a v3 TableScan over ``range:[-inf,+inf]``; null when there is no readable plan).

Output ``plan_node``: one row per operator of each decoded ``tidb_decode_plan`` payload (base64
of a snappy block of tab-separated rows ``depth, type-code_id, task, estRows, operator info,
actRows, execution info, memory, disk``): node_type = operator name without ``_N``
(TableFullScan, IndexRangeScan, ...), relation / index_name from the access object
(``table:t, index:idx(a)``), est_rows, actual_rows (TiDB's actRows: total over all loops),
loops (from ``loops:N`` in the execution info), filter = the condition of Selection nodes.
v3.0 numbered operator types differently (HashLeftJoin/HashRightJoin); a plan is read with the
v3 table when a cop task is encoded without a store type (``1``, later ``1_0``), or when it has
only root tasks and the entry has no Plan_digest (added in v4). ``Binary_plan`` (protobuf) is not
decoded; a plan that cannot be decoded stays encoded in ``plan`` with a warning (Plan_digest
still identifies it).
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as T
from dbdiag.native.lazy import np
from dbdiag.parsers._tidb_fields import parse_times, start_from_end, typed_measures
from dbdiag.parsers._tidb_plans import (
    MAX_PLAN_TEXT_BYTES,
    checked_plan_rows,
    decode_plan_payloads,
    encoded_plan_rows,
    plan_tables,
    render_plans,
)
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning, decode_text
from dbdiag.parsers.kit.times import check_tz, zone_note
from dbdiag.parsers.kit.warning_caps import HIDDEN, MAX_WARNINGS, cap_warnings, row_warnings
from dbdiag.patterns import lazy_compile

# Chunks of about this many characters, cut at entry starts, bound the per-line frames.
CHUNK_CHARS = 32 * 1024 * 1024
START_PREFIX = "# Time:"
# Lines whose value is free text (spaces, JSON, SQL): read whole, never searched for pairs.
FREE_TEXT_KEYS = (
    "Time", "User@Host", "User", "Prev_stmt", "Plan", "Binary_plan", "Warnings",
    "Session_connect_attrs", "Stats", "Index_names", "Index_ids",
)
# Statement columns read from free-text lines: column -> line key.
WHOLE_LINE_FIELDS = {
    "time_raw": "Time",
    "user_host": "User@Host",
    "user_at": "User",
    "stats_info": "Stats",
    "index_names": "Index_names",
    "plan_raw": "Plan",
    "binary_plan_raw": "Binary_plan",
}
# Statement columns read from ``Key: value`` pairs, wherever the pair sits on a line.
PAIR_FIELDS = {
    "txn_raw": "Txn_start_ts",
    "conn_id": "Conn_ID",
    "query_time_raw": "Query_time",
    "process_time_raw": "Process_time",
    "wait_time_raw": "Wait_time",
    "backoff_time_raw": "Backoff_time",
    "lock_keys_raw": "LockKeys_time",
    "lock_keys2_raw": "Lock_keys_time",
    "total_keys_raw": "Total_keys",
    "process_keys_raw": "Process_keys",
    "result_rows_raw": "Result_rows",
    "db": "DB",
    "is_internal_raw": "Is_internal",
    "digest": "Digest",
    "mem_max_raw": "Mem_max",
    "prepared_raw": "Prepared",
    "plan_from_cache_raw": "Plan_from_cache",
    "succ_raw": "Succ",
    "plan_digest": "Plan_digest",
}
USE_LINE_RE = r"(?i)^use\s+`?([^`;\s]+)`?\s*;\s*$"
PLAN_PAYLOAD_RE = r"tidb_decode_plan\('([^']*)'\)"
PLAN_DISCARDED = "[discard]"  # what TiDB logs instead of a plan over its size limit
# Detection: lines only TiDB writes (MySQL/Percona slow logs share ``# Time:`` and Query_time).
DETECT_TIME_RE = lazy_compile(r"^# Time: \d{4}-\d{2}-\d{2}[T-]\d{2}:\d{2}:\d{2}", re.MULTILINE)
DETECT_MARKER_RE = lazy_compile(
    r"^# (Txn_start_ts|Conn_ID|Digest|Plan_digest|Is_internal|Num_cop_tasks|Cop_proc_avg|"
    r"Cop_wait_avg|Index_names|Index_ids|Stats|Mem_max|Succ|Plan|Binary_plan|Wait_TS|KV_total|"
    r"Plan_from_cache|Prepared|Compile_time|Optimize_time|Process_time|Request_count):",
    re.MULTILINE,
)


def _chunks(text: str) -> list[str]:
    """Cut ``text`` into pieces of about CHUNK_CHARS that each start at an entry start."""
    pieces, start = [], 0
    while len(text) - start > CHUNK_CHARS:
        cut = text.find("\n" + START_PREFIX, start + CHUNK_CHARS)
        if cut < 0:
            break
        pieces.append(text[start : cut + 1])
        start = cut + 1
    pieces.append(text[start:])
    return pieces


def _lines(chunk: str, first_line: int) -> pl.DataFrame:
    """One row per line: number, text, entry number (0 = before the first entry), line kind."""
    text = pl.col("t").str.split("\n").explode()
    lines = pl.DataFrame({"t": [chunk]}, schema={"t": pl.String}).select(
        (text.str.strip_suffix("\r") if "\r" in chunk else text).alias("text")
    )
    lines = lines.with_row_index("line", offset=first_line).with_columns(pl.col("line").cast(pl.Int64))
    is_header = pl.col("text").str.starts_with("# ")
    is_start = pl.col("text").str.starts_with(START_PREFIX)
    # SQL starts at the first non-# line of an entry; anything after it (even "# ...") is SQL.
    # Entries are contiguous, so "a text line since the entry began" is a running count compared
    # with its value at the entry's first line (cheaper than a window per entry).
    lines = lines.with_columns(
        rec=is_start.cum_sum().cast(pl.Int64),
        texts_so_far=(~is_header & (pl.col("text").str.strip_chars() != "")).cum_sum(),
    )
    at_entry_start = pl.when(is_start).then(pl.col("texts_so_far")).forward_fill().fill_null(0)
    sql_started = pl.col("texts_so_far") > at_entry_start
    return lines.with_columns(body=sql_started, header=is_header & ~sql_started).drop("texts_so_far")


def _header_fields(lines: pl.DataFrame) -> pl.DataFrame:
    """Per entry: ``line`` of its ``# Time:`` and the raw text of every field the statement needs."""
    wanted = {**WHOLE_LINE_FIELDS, **PAIR_FIELDS}
    head = lines.filter(pl.col("header") & (pl.col("rec") > 0)).select(
        "rec", "text", key=pl.col("text").str.extract(r"^# ([A-Za-z0-9_@.]+):", 1)
    )
    # slicing after "# Key:" is much faster than a (.*) capture on long plan lines
    value = pl.col("text").str.slice(pl.col("key").str.len_chars() + 3).str.strip_prefix(" ")
    first_pairs = head.filter(pl.col("key").is_in(list(wanted.values()))).select(
        "rec", "key",
        value=pl.when(pl.col("key").is_in(FREE_TEXT_KEYS)).then(value).otherwise(value.str.extract(r"^(\S*)", 1)),
    )
    # Only lines with a second ``Key: value`` are searched again (Process_time, Cop_*, Rewrite_time...).
    later_pairs = (
        head.filter(pl.col("key").is_not_null() & ~pl.col("key").is_in(FREE_TEXT_KEYS))
        .with_columns(value=value)
        .filter(pl.col("value").str.contains(": ", literal=True))
        .select("rec", pair=pl.col("value").str.extract_all(r"\s[A-Za-z_]+: \S*"))
        .explode("pair")
        .select("rec", pl.col("pair").str.extract_groups(r"^\s(?P<key>[A-Za-z_]+): (?P<value>\S*)$"))
        .unnest("pair")
        .filter(pl.col("key").is_in(list(wanted.values())))
    )
    values = pl.concat([first_pairs, later_pairs]).group_by("rec", "key").agg(pl.col("value").first())
    entries = lines.filter(pl.col("text").str.starts_with(START_PREFIX)).select("rec", "line")
    wide = entries.join(
        values.pivot(on="key", index="rec", values="value") if values.height else values.select("rec"),
        on="rec", how="left",
    )
    return wide.select(
        "rec", "line",
        *[(pl.col(key) if key in wide.columns else pl.lit(None, pl.String)).alias(col) for col, key in wanted.items()],
    )


# "SELECT ... WHERE id = ? [arguments: (1, "a")];" -> "SELECT ... WHERE id = ?;"
PREPARED_ARGUMENTS_RE = r"(?s)\s*\[arguments: .*\];?\s*$"


def _sql_text(lines: pl.DataFrame) -> pl.DataFrame:
    """Per entry: the SQL (leading ``use db;`` lines dropped) and the db of the last ``use``."""
    body = lines.filter(pl.col("body") & (pl.col("rec") > 0)).with_columns(
        use_db=pl.col("text").str.extract(USE_LINE_RE, 1)
    )
    sql_line = pl.col("use_db").is_null() & (pl.col("text").str.strip_chars() != "")
    before_sql = sql_line.cum_sum().over("rec") == 0
    has_sql = sql_line.any().over("rec")
    body = body.with_columns(drop=before_sql & has_sql & pl.col("use_db").is_not_null())
    return body.group_by("rec", maintain_order=True).agg(
        sql=pl.col("text").filter(~pl.col("drop")).str.join("\n").str.strip_chars()
        # TiDB appends the values of prepared statements; they are data, not part of the statement.
        .str.replace(PREPARED_ARGUMENTS_RE, ";"),
        use_db=pl.col("use_db").filter(pl.col("drop")).last(),
    )


def _preamble_warnings(lines: pl.DataFrame) -> list[ParseWarning]:
    junk = lines.filter((pl.col("rec") == 0) & (pl.col("text").str.strip_chars() != ""))
    if junk.is_empty():
        return []
    first = junk.row(0, named=True)
    return [ParseWarning(first["line"], f"{junk.height} line(s) before the first '# Time:' entry skipped")]


def _statements(fields: pl.DataFrame, sql: pl.DataFrame, tz: str) -> pl.DataFrame:
    df = fields.join(sql, on="rec", how="left")
    # "# DB:" with nothing after it means no value
    df = df.with_columns(pl.when(pl.col(c).str.strip_chars() != "").then(pl.col(c)).alias(c) for c in (*WHOLE_LINE_FIELDS, *PAIR_FIELDS))
    end_ts, zoned = parse_times(pl.col("time_raw"), tz)
    num = lambda c: pl.col(c).cast(pl.Float64, strict=False)  # noqa: E731
    user_host = pl.col("user_host").str.extract_groups(r"^\s*(?P<u>[^\[@]*?)\s*(?:\[[^\]]*\])?\s*@\s*(?P<h>[^\[]*?)\s*(?:\[(?P<ip>[^\]]*)\])?\s*$")
    user_at = pl.col("user_at").str.extract_groups(r"^\s*(?P<u>[^@]*)@(?P<h>.*?)\s*$")
    host = pl.when(user_host.struct.field("h") != "").then(user_host.struct.field("h")).otherwise(user_host.struct.field("ip"))
    return df.with_columns(
        **typed_measures(),
        end_ts=end_ts,
        zoned=zoned,
        lock_time_s=pl.coalesce(num("lock_keys_raw"), num("lock_keys2_raw")),
        user=pl.coalesce(user_host.struct.field("u"), user_at.struct.field("u")),
        client_host=pl.coalesce(host, user_at.struct.field("h")),
        db=pl.coalesce(pl.col("db"), pl.col("use_db")),
        stats_info=pl.col("stats_info").str.strip_chars(),
        index_names=pl.col("index_names").str.strip_chars(),
        engine=pl.lit("tidb"),
    ).with_columns(start_ts=start_from_end(pl.col("end_ts"), pl.col("query_time_s")))


def _entry_warnings(st: pl.DataFrame, limit: int | None = MAX_WARNINGS) -> list[list[ParseWarning]]:
    """The warnings about entries, one list per kind of fault."""
    no_time = st.filter(pl.col("end_ts").is_null()).select("line", "time_raw")
    bad_qt = st.filter(pl.col("query_time_s").is_null()).select("line", "query_time_raw")
    no_sql = st.filter(pl.col("sql").is_null() | (pl.col("sql") == "")).select("line", "sql")
    return [
        row_warnings(no_time, lambda v: f"unreadable time {str(v)[:40]!r}; entry kept without times", limit),
        row_warnings(bad_qt, lambda v: f"{'no Query_time' if v is None else f'unreadable Query_time {v[:30]!r}'}; entry kept", limit),
        row_warnings(no_sql, lambda _: "entry has no SQL text (file cut short?); kept without sql", limit),
    ]


def _plan_notes(discarded: int, binary_only: int) -> list[str]:
    notes = []
    if discarded:
        notes.append(f"{discarded} plan(s) logged as [discard] by TiDB (over its plan size limit)")
    if binary_only:
        notes.append(f"{binary_only} entr(ies) carry only a Binary_plan (protobuf), not decoded; kept encoded in plan")
    return notes


def _plans(
    st: pl.DataFrame, source: str, limit: int | None = MAX_WARNINGS
) -> tuple[pl.DataFrame, pl.DataFrame, list[list[ParseWarning]], list[str]]:
    """Decode the entries' plans: (plan_node rows, per-statement plan columns, warnings, notes)."""
    with_plan = st.filter(pl.col("plan_raw").is_not_null()).select(
        "stmt_id", "line", "plan_raw", pl.col("plan_raw").str.extract(PLAN_PAYLOAD_RE, 1).alias("payload"),
        legacy_hint=pl.col("plan_digest").is_null(),
    )
    with_plan = with_plan.with_columns(
        pl.select(decode_plan_payloads(with_plan["payload"])).to_series(),
        discarded=pl.col("payload") == PLAN_DISCARDED,
    )
    failed = with_plan.filter(pl.col("encoded").is_null() & ~pl.col("discarded").fill_null(False))
    warnings = row_warnings(
        failed.select("line", "plan_raw"),
        lambda raw: f"plan not decodable or over {MAX_PLAN_TEXT_BYTES >> 20} MiB decoded ({str(raw)[:40]!r}...); kept encoded, Plan_digest identifies it",
        limit,
    )
    discarded = with_plan["discarded"].fill_null(False).sum()
    binary_only = st.filter(pl.col("plan_raw").is_null() & pl.col("binary_plan_raw").is_not_null()).height
    rows = encoded_plan_rows(with_plan.filter(pl.col("encoded").is_not_null()))
    rows, bound_warnings = checked_plan_rows(rows, with_plan.select("stmt_id", "line"), limit)
    nodes, shape = plan_tables(rows, source)
    per_statement = render_plans(rows).join(shape, on="stmt_id", how="left")
    return nodes, per_statement, [warnings, bound_warnings], _plan_notes(discarded, binary_only)


def _parse_chunk(chunk: str, first_line: int, tz: str) -> tuple[pl.DataFrame, list[ParseWarning]]:
    lines = _lines(chunk, first_line)
    warnings = _preamble_warnings(lines)
    fields = _header_fields(lines)
    return _statements(fields, _sql_text(lines), tz), warnings


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings = [tz_warning] if tz_warning else []
    parts, first_line = [], 1
    for chunk in _chunks(text.lstrip("\ufeff")):
        statements, chunk_warnings = _parse_chunk(chunk, first_line, tz)
        parts.append(statements)
        warnings += chunk_warnings
        first_line += chunk.count("\n")
        ctx.report_bytes(len(chunk))  # characters: bytes for the ASCII of a slow log
    st = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame()
    if st.is_empty():
        raise ParseError("no TiDB slow log entry ('# Time:' line followed by '# ...' fields) found")
    st = st.with_row_index("stmt_id").with_columns(pl.col("stmt_id").cast(pl.Int64), source=pl.lit(ctx.source))
    warnings += [w for kind in _entry_warnings(st) for w in kind]
    nodes, plan_cols, plan_warnings, notes = _plans(st, ctx.source)
    warnings += [w for kind in plan_warnings for w in kind]
    st = st.join(plan_cols, on="stmt_id", how="left").with_columns(
        plan=pl.coalesce(pl.col("plan"), pl.col("plan_raw"), pl.col("binary_plan_raw"))
    ).sort("stmt_id")
    if st.filter(pl.col("end_ts").is_not_null() & ~pl.col("zoned")).height:
        notes.append(zone_note(tz))
    instance = instance_from_path(ctx.source)
    if instance:
        st = st.with_columns(instance=pl.lit(instance))
        notes.append(f"instance {instance} taken from the file's folder name")
    statement = T.conform(T.STATEMENT, st)
    return ParseResult(
        tables={T.STATEMENT: statement, T.PLAN_NODE: nodes},
        records=statement.height,
        warnings=cap_warnings(warnings),
        notes=notes,
        time_range=_time_range(statement),
    )


_INSTANCE_IN_PATH = lazy_compile(
    r"(?:^|/)(?:tidb[-_])?(\d{1,3}(?:\.\d{1,3}){3}(?:[-_:]\d{2,5})?)(?=/|$)"  # tidb-10.0.1.5/, 10.0.1.5-4000/
    r"|(?:^|/)tidb[-_](\d{2,5})(?=/|$)"  # tiup diag's tidb-4000/
)


def instance_from_path(source: str) -> str | None:
    """The TiDB instance a slow log belongs to, when its folder says (tiup diag and hand captures do).

    >>> instance_from_path("capture/db/tidb-10.20.1.11/tidb_slow_query.log")
    '10.20.1.11'
    >>> instance_from_path("diag/10.0.1.5/tidb-4000/log/tidb_slow_query.log")
    '10.0.1.5:4000'
    >>> instance_from_path("slow.log") is None
    True
    """
    folders = source.rsplit("/", 1)[0] if "/" in source else ""
    address = port = None
    for match in _INSTANCE_IN_PATH.finditer(folders + "/"):
        address = match.group(1) or address
        port = match.group(2) or port
    if address and port and ":" not in address:
        return f"{address}:{port}"
    return address or (f"port {port}" if port else None)


def _time_range(statement: pl.DataFrame) -> tuple[object, object] | None:
    start, end = statement["start_ts"].min(), statement["end_ts"].max()
    return (start, end) if start is not None and end is not None else None


def detect(head: str, name: str) -> float:
    markers = {m.group(1) for m in DETECT_MARKER_RE.finditer(head)}
    timed = DETECT_TIME_RE.search(head) is not None
    tidb_only = markers & {"Txn_start_ts", "Conn_ID", "Digest", "Plan_digest", "Is_internal", "Num_cop_tasks",
                           "Cop_proc_avg", "Cop_wait_avg", "Index_names", "Index_ids", "Succ", "Plan", "Binary_plan",
                           "Wait_TS", "KV_total", "Plan_from_cache", "Mem_max", "Stats"}
    if timed and len(tidb_only) >= 2:
        return 0.95
    if timed and tidb_only:
        return 0.8
    if len(tidb_only) >= 3:  # a head that starts inside an entry
        return 0.7
    if timed and "tidb" in name.lower():
        return 0.6
    return 0.0


BOUNDARY = "# Time: (dbdiag: the next file of the batch starts below)"  # a START_PREFIX line: ends an entry


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse`` of each member's text (all in one zone), in one parse: the texts are joined, each
    after a ``BOUNDARY`` line, whose entry takes what its file has before its first ``# Time:`` (as
    the lines before the first entry of a single file); stmt_id, source, instance, warnings and
    their caps, notes and time range are each member's own, line numbers too."""
    tz, tz_warning = check_tz(members[0][1].tz if members else "UTC")
    texts = [decode_text(data).lstrip("\ufeff") for data, _ in members]
    starts = np.zeros(len(texts), dtype=np.int64)  # per file, the line its own line numbers count from
    parts, line = [], 0
    for index, text in enumerate(texts):
        if index:
            parts.append(BOUNDARY)
            line += 1
            starts[index] = line
        parts.append(text.removesuffix("\n"))
        line += text.removesuffix("\n").count("\n") + 1
    lines = _lines("\n".join(parts), 1)
    boundary = np.zeros(lines.height, dtype=bool)
    boundary[starts[1:] - 1] = True  # line numbers from 1, one row each
    rec = lines["rec"].to_numpy()
    in_boundary = np.zeros(int(rec.max()) + 1 if rec.size else 1, dtype=bool)
    in_boundary[rec[boundary]] = True
    lines = lines.with_columns(
        rec=pl.when(pl.Series(in_boundary[rec])).then(0).otherwise(pl.col("rec")),
        text=pl.when(pl.Series(boundary)).then(pl.lit("")).otherwise(pl.col("text")),
    )
    of = lambda line_numbers: np.searchsorted(starts, line_numbers, side="right") - 1  # noqa: E731
    warnings: list[list[ParseWarning]] = [[tz_warning] if tz_warning else [] for _ in members]
    junk = lines.filter((pl.col("rec") == 0) & (pl.col("text").str.strip_chars() != ""))
    for file, (first, count) in _first_and_count(of(junk["line"].to_numpy()), junk["line"].to_numpy()).items():
        warnings[file].append(ParseWarning(first - int(starts[file]), f"{count} line(s) before the first '# Time:' entry skipped"))
    st = _statements(_header_fields(lines), _sql_text(lines), tz)
    file = of(st["line"].to_numpy())
    sources = pl.Series([ctx.source for _, ctx in members], dtype=pl.String)
    st = st.with_row_index("stmt_id").with_columns(
        pl.col("stmt_id").cast(pl.Int64), source=sources.gather(pl.Series(file)), file=pl.Series(file)
    )
    for kind in _entry_warnings(st, None):
        _per_file(kind, of, starts, warnings)
    nodes, plan_cols, plan_warnings, _ = _plans(st, "", None)
    for kind in plan_warnings:
        _per_file(kind, of, starts, warnings)
    st = st.join(plan_cols, on="stmt_id", how="left").with_columns(
        plan=pl.coalesce(pl.col("plan"), pl.col("plan_raw"), pl.col("binary_plan_raw"))
    ).sort("stmt_id")
    first_row = np.searchsorted(file, np.arange(len(members)))
    counts = np.bincount(file, minlength=len(members))
    instances = [instance_from_path(ctx.source) for _, ctx in members]
    st = st.with_columns(
        line=pl.col("line") - pl.Series(starts[file]),
        stmt_id=pl.col("stmt_id") - pl.Series(first_row[file]),
        instance=pl.Series(instances, dtype=pl.String).gather(pl.Series(file)),
    )
    if not nodes["stmt_id"].is_sorted():
        nodes = nodes.sort("stmt_id", maintain_order=True)  # each file's nodes together
    node_file = file[nodes["stmt_id"].to_numpy()]
    nodes = nodes.with_columns(
        stmt_id=pl.col("stmt_id") - pl.Series(first_row[node_file]), source=sources.gather(pl.Series(node_file))
    )
    per_file = st.group_by("file").agg(
        discarded=pl.col("plan_raw").str.extract(PLAN_PAYLOAD_RE, 1).eq(PLAN_DISCARDED).fill_null(False).sum(),
        binary_only=(pl.col("plan_raw").is_null() & pl.col("binary_plan_raw").is_not_null()).sum(),
        zone_less=(pl.col("end_ts").is_not_null() & ~pl.col("zoned")).sum(),
    )
    notes = {f: _plan_notes(d, b) + ([zone_note(tz)] if z else []) for f, d, b, z in per_file.iter_rows()}
    statement = T.conform(T.STATEMENT, st)
    node_counts = np.bincount(node_file, minlength=len(members))
    results: list[ParseResult | ParseError] = []
    for f in range(len(members)):
        if not counts[f]:
            results.append(ParseError("no TiDB slow log entry ('# Time:' line followed by '# ...' fields) found"))
            continue
        mine = statement.slice(int(first_row[f]), int(counts[f]))
        instance = [f"instance {instances[f]} taken from the file's folder name"] if instances[f] else []
        results.append(ParseResult(
            tables={T.STATEMENT: mine, T.PLAN_NODE: nodes.slice(int(np.searchsorted(node_file, f)), int(node_counts[f]))},
            records=mine.height,
            warnings=cap_warnings(warnings[f]),
            notes=notes[f] + instance,
            time_range=_time_range(mine),
        ))
    return results


def _first_and_count(file: np.ndarray, line: np.ndarray) -> dict[int, tuple[int, int]]:
    """Per file among ``file`` (sorted), its first ``line`` and how many."""
    found: dict[int, tuple[int, int]] = {}
    for f, at in zip(file.tolist(), line.tolist()):
        first, count = found.get(f, (at, 0))
        found[f] = (first, count + 1)
    return found


def _per_file(kind: list[ParseWarning], of, starts: np.ndarray, warnings: list[list[ParseWarning]]) -> None:
    """Warnings of one kind (all with lines, in line order) into their files: the first MAX_WARNINGS
    of each file, then HIDDEN placeholders (``row_warnings``, per file)."""
    shown: dict[int, int] = {}
    files = of(np.array([w.line for w in kind], dtype=np.int64)) if kind else []
    for warning, f in zip(kind, files):
        shown[f] = shown.get(f, 0) + 1
        own = ParseWarning(warning.line - int(starts[f]), warning.reason)
        warnings[f].append(own if shown[f] <= MAX_WARNINGS else HIDDEN)


SPEC = ParserSpec(
    kind="tidb-slowlog",
    description="TiDB slow query log (v3-v8): statements with their decoded plans",
    detect=detect,
    parse=parse,
    parse_batch=parse_batch,
)
