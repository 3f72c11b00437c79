"""TiDB slow log, SLOW_QUERY table export and dashboard JSON parsers: corpus goldens, values, hostile cases."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import cramjam
import polars as pl
import pytest
from conftest import CORPUS

from dbdiag import tables as T
from dbdiag.detect import detect as detect_member
from dbdiag.parsers import PARSERS as REGISTRY
from dbdiag.parsers import tidb_cluster_slow_query, tidb_dashboard, tidb_slowlog
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError

PARSERS = {
    "tidb-slowlog": tidb_slowlog.SPEC,
    "tidb-slow-query-table": tidb_cluster_slow_query.SPEC,
    "tidb-dashboard-slow-query": tidb_dashboard.SPEC,
}
DIR = "slowlog-tidb"
PARSED = {  # corpus file -> the parser that reads it
    "diag__tidb_slow_query.log": "tidb-slowlog",
    "dm__tidb-slow.log": "tidb-slowlog",
    "pingcap-docs__identify-slow-queries_usage-example.log": "tidb-slowlog",
    "tidb-dashboard__slow-query-detail.json": "tidb-dashboard-slow-query",
    "tidb-dashboard__statement-slow-query-list.json": "tidb-dashboard-slow-query",
}
AGGREGATE_CSV = "diag__avg_process_time_by_plan.csv"  # recognised, refused: no statements in it
YAML_FIXTURE = "tidb-dashboard__CLUSTER_SLOW_QUERY.yml"  # a test fixture of dashboard's, not an export


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _text(name: str) -> str:
    return (CORPUS / DIR / name).read_bytes().decode("utf-8", "backslashreplace")


def _parse(kind: str, text: str, source: str = "test", tz: str = "UTC"):
    return PARSERS[kind].parse(text, ParseContext(source=source, tz=tz))


def _rows(result, table: str = T.STATEMENT) -> list[dict]:
    return result.tables[table].rows(named=True)


# ---- corpus: goldens, coverage, refusals, detection -------------------------------------------


def test_every_corpus_file_is_covered(corpus: Path) -> None:
    assert {p.name for p in (corpus / DIR).iterdir()} == set(PARSED) | {AGGREGATE_CSV, YAML_FIXTURE}


def test_aggregate_csv_is_recognised_and_refused_with_the_reason() -> None:
    text = _text(AGGREGATE_CSV)
    detection = detect_member(text.encode(), "member", REGISTRY)
    assert detection.spec is tidb_cluster_slow_query.SPEC
    with pytest.raises(ParseError, match=r"^aggregate over slow_query .*not statements"):
        _parse("tidb-slow-query-table", text)


def test_yaml_fixture_is_not_recognised() -> None:
    text = _text(YAML_FIXTURE)
    assert all(spec.detect(text[:DETECT_HEAD_BYTES], "member") < 0.5 for spec in PARSERS.values())
    with pytest.raises(ParseError, match="no TiDB slow log entry"):
        _parse("tidb-slowlog", text)
    with pytest.raises(ParseError, match="not JSON"):
        _parse("tidb-dashboard-slow-query", text)


@pytest.mark.parametrize("name", sorted(PARSED))
def test_detect_picks_the_tidb_parser_over_the_whole_registry(name: str) -> None:
    data = (CORPUS / DIR / name).read_bytes()
    detection = detect_member(data, "member", REGISTRY)  # neutral name: content decides
    assert detection.spec is PARSERS[PARSED[name]], detection
    head = data[:DETECT_HEAD_BYTES].decode("utf-8", "backslashreplace")
    assert all(spec.detect(head, "member") < 0.5 for kind, spec in PARSERS.items() if kind != PARSED[name])


def test_slowlog_detect_confidence_is_high() -> None:
    for name in ("diag__tidb_slow_query.log", "dm__tidb-slow.log", "pingcap-docs__identify-slow-queries_usage-example.log"):
        assert tidb_slowlog.detect(_text(name)[:DETECT_HEAD_BYTES], "member") >= 0.9
    mysql = "# Time: 2019-08-14T09:26:59.487776Z\n# User@Host: root[root] @ localhost []  Id: 8\n# Query_time: 1.5  Lock_time: 0.0 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1;\nselect 1;\n"
    assert tidb_slowlog.detect(mysql, "slow.log") < 0.5


# ---- values read off the corpus files ---------------------------------------------------------


def test_pingcap_docs_example_values() -> None:
    result = _parse("tidb-slowlog", _text("pingcap-docs__identify-slow-queries_usage-example.log"))
    (st,) = _rows(result)
    assert st["engine"] == "tidb"
    assert st["conn_id"] == "3086"
    assert st["txn_id"] == "410450924122144769"
    assert st["query_time_s"] == 1.527627037
    assert st["end_ts"] == _utc(2019, 8, 14, 1, 26, 59, 487776)  # 09:26:59.487776265+08:00
    assert st["start_ts"] == st["end_ts"] - timedelta(microseconds=1_527_627)
    assert ":pseudo" in st["stats_info"] and st["stats_info"] == "t:pseudo"
    assert st["success"] is True and st["prepared"] is False and st["plan_from_cache"] is False
    assert st["is_internal"] is False
    assert st["digest"] == "50a2e32d2abbd6c1764b1b7f2058d428ef2712b029282b776beb9506a365c0f1"
    assert (st["user"], st["client_host"], st["db"]) == ("root", "localhost", "test")
    assert st["rows_examined"] == 131072  # Process_keys, not Total_keys (131073)
    assert st["process_time_s"] == 0.07 and st["mem_max_bytes"] == 525211
    assert st["sql"] == "insert into t select * from t;"  # the `use test;` line is not the statement
    assert st["line"] == 1
    # v3.0 plan: cop task "1" without store type, type code 32 = TableReader in v3.0's numbering
    nodes = _rows(result, T.PLAN_NODE)
    assert [(n["node_type"], n["depth"], n["relation"]) for n in nodes] == [("TableReader", 0, None), ("TableScan", 1, "t")]
    assert [n["est_rows"] for n in nodes] == [20.0, 20.0]
    assert st["full_scan"] is True  # range:[-inf,+inf]
    assert st["plan_signature"] == "TableReader>TableScan(t)"
    assert st["plan"].splitlines()[1:] == ["\tTableReader_7\troot\t20\tdata:TableScan_6", "\t└─TableScan_6\tcop\t20\ttable:t, range:[-inf,+inf], keep order:false, stats:pseudo"]


def test_diag_v5_log_values() -> None:
    result = _parse("tidb-slowlog", _text("diag__tidb_slow_query.log"))
    rows = _rows(result)
    assert result.records == 5 and not result.warnings
    assert [r["sql"] for r in rows] == ["select sleep(2);", "select sleep(2);", "select sleep(1);", "select sleep(3);", "select sleep(1);"]
    assert [r["line"] for r in rows] == [1, 26, 51, 76, 101]
    assert {r["conn_id"] for r in rows} == {"172311"} and {r["client_host"] for r in rows} == {"10.43.0.0"}
    assert all(r["txn_id"] is None for r in rows)  # Txn_start_ts: 0 = no transaction
    assert rows[0]["end_ts"] == _utc(2021, 11, 15, 10, 2, 26, 991204)
    assert rows[3]["query_time_s"] == 3.000747003
    assert {r["plan_digest"] for r in rows} == {"a55eaee1d30304ad05500afbbfff1409ce22376e0f062c0d06ff34b8ed9c2b47"}
    assert all(r["full_scan"] is False and r["plan_signature"] == "Projection>TableDual" for r in rows)
    nodes = result.tables[T.PLAN_NODE]
    assert nodes.height == 10
    assert nodes.filter(pl.col("stmt_id") == 0).select("node_id", "node_type", "actual_rows", "loops").rows() == [
        (0, "Projection", 1.0, 2.0), (1, "TableDual", 1.0, 2.0)]
    assert rows[0]["plan"].splitlines()[0] == "\tid\ttask\testRows\toperator info\tactRows\texecution info\tmemory\tdisk"


def test_dm_v3_internal_entries_without_plans() -> None:
    result = _parse("tidb-slowlog", _text("dm__tidb-slow.log"))
    rows = _rows(result)
    assert [r["stats_info"] for r in rows] == ["GLOBAL_VARIABLES:pseudo", "bind_info:pseudo"]
    assert all(r["is_internal"] is True and r["user"] is None and r["conn_id"] is None for r in rows)
    assert [r["mem_max_bytes"] for r in rows] == [9248, 124]
    assert all(r["plan"] is None and r["full_scan"] is None for r in rows)
    assert rows[1]["sql"].startswith("select original_sql, bind_sql") and rows[1]["line"] == 14
    assert result.tables[T.PLAN_NODE].is_empty()


def test_dashboard_detail_values() -> None:
    result = _parse("tidb-dashboard-slow-query", _text("tidb-dashboard__slow-query-detail.json"))
    (st,) = _rows(result)
    assert st["end_ts"] == _utc(2023, 7, 25, 8, 11, 48, 823209)  # timestamp 1690272708.823209
    assert st["start_ts"] == st["end_ts"] - timedelta(microseconds=1_515_152)
    assert (st["instance"], st["conn_id"], st["user"], st["client_host"]) == ("127.0.0.1:10080", "5414958427354957035", "root", "127.0.0.1")
    assert st["db"] is None and st["txn_id"] is None and st["index_names"] is None
    assert st["prepared"] is True and st["success"] is True and st["is_internal"] is False
    assert st["mem_max_bytes"] == 220680
    assert st["sql"].endswith('[arguments: ("memory", "cpu")];')
    assert st["plan_signature"] == "Sort>Projection>HashAgg>Selection>MemTableScan(CLUSTER_LOAD)"
    assert st["full_scan"] is False
    nodes = _rows(result, T.PLAN_NODE)
    assert [(n["node_type"], n["depth"]) for n in nodes] == [
        ("Sort", 0), ("Projection", 1), ("HashAgg", 2), ("Selection", 3), ("MemTableScan", 4)]
    scan = nodes[-1]
    assert (scan["relation"], scan["est_rows"], scan["actual_rows"], scan["loops"]) == ("CLUSTER_LOAD", 10000.0, 1193.0, 3.0)
    assert nodes[3]["filter"] == 'in(Column#3, "memory", "cpu")'


def test_dashboard_list_reads_unrequested_fields_as_unknown() -> None:
    result = _parse("tidb-dashboard-slow-query", _text("tidb-dashboard__statement-slow-query-list.json"))
    rows = _rows(result)
    assert result.records == 15
    assert rows[0]["query_time_s"] == 17.356576616 and rows[0]["mem_max_bytes"] == 3415
    assert rows[0]["conn_id"] == "3483529913724674023"
    assert all(r["success"] is None and r["user"] is None for r in rows)  # 0 / "" in every row: not selected
    assert any("success" in n and "unknown" in n for n in result.notes)
    assert len({r["digest"] for r in rows}) == 1


# ---- slow log: constructed entries ------------------------------------------------------------


def encode_plan(rows: list[str]) -> str:
    """A ``tidb_decode_plan`` payload as TiDB writes it: base64 of a raw snappy block."""
    block = bytes(cramjam.snappy.compress_raw("".join(r + "\n" for r in rows).encode()))
    return base64.b64encode(block).decode()


INDEX_LOOKUP = [  # v5+: IndexLookUp(30) > IndexRangeScan(47, cop[tikv]) + TableRowIDScan(45)
    "0\t30_10\t0\t10.00\t\t8\ttime:2.1ms, loops:2\t12 KB\tN/A",
    "1\t47_8\t1_0\t10.00\ttable:orders, index:idx_status(status), range:[1,1], keep order:false\t8\ttime:1ms, loops:1\tN/A\tN/A",
    "1\t45_9\t1_0\t10.00\ttable:orders, keep order:false\t8\ttime:1ms, loops:1\tN/A\tN/A",
]
FULL_SCAN = [  # TableReader(31) > Selection(1) > TableFullScan(43) on TiFlash (store 1)
    "0\t31_7\t0\t3.00\tdata:Selection_6\t250000\ttime:1.2s, loops:245\t1.1 MB\tN/A",
    "1\t1_6\t1_1\t3.00\teq(shop.orders.note, \"x\")\t250000\ttime:1.1s, loops:250\tN/A\tN/A",
    "2\t43_5\t1_1\t10000.00\ttable:orders, keep order:false, stats:pseudo\t1000000\ttime:1s, loops:1000\tN/A\tN/A",
]


def entry(time: str = "2024-05-01T10:00:05.5+02:00", plan: list[str] | None = None, plan_digest: str | None = "pd1",
          sql: str = "select * from orders where status = 1;", extra: str = "") -> str:
    lines = [
        f"# Time: {time}",
        "# Txn_start_ts: 449535464523120641",
        "# User@Host: app[app] @ 10.0.0.9 [10.0.0.9]",
        "# Conn_ID: 42",
        "# Query_time: 0.5",
        "# Cop_time: 0.4 Process_time: 0.3 Wait_time: 0.02 Backoff_time: 0.01 LockKeys_time: 0.005 Request_count: 3 Total_keys: 900 Process_keys: 800",
        "# DB: shop",
        "# Index_names: [orders:idx_status]",
        "# Is_internal: false",
        "# Digest: d1",
        "# Stats: orders:449535463212400642",
        "# Mem_max: 2048",
        "# Prepared: true",
        "# Plan_from_cache: true",
        "# Result_rows: 8",
        "# Succ: false",
    ]
    if extra:
        lines.append(extra)
    if plan is not None:
        lines.append(f"# Plan: tidb_decode_plan('{encode_plan(plan)}')")
    if plan_digest:
        lines.append(f"# Plan_digest: {plan_digest}")
    return "\n".join(lines) + "\n" + sql + "\n"


def test_constructed_entry_fields_and_modern_plan() -> None:
    result = _parse("tidb-slowlog", entry(plan=INDEX_LOOKUP) + entry(plan=FULL_SCAN, sql="select * from orders where note = 'x';"))
    first, second = _rows(result)
    assert first["end_ts"] == _utc(2024, 5, 1, 8, 0, 5, 500000) and first["start_ts"] == _utc(2024, 5, 1, 8, 0, 5)
    assert (first["process_time_s"], first["wait_time_s"], first["backoff_time_s"], first["lock_time_s"]) == (0.3, 0.02, 0.01, 0.005)
    assert (first["rows_examined"], first["rows_sent"], first["mem_max_bytes"]) == (800, 8, 2048)
    assert (first["user"], first["client_host"], first["db"], first["conn_id"]) == ("app", "10.0.0.9", "shop", "42")
    assert (first["prepared"], first["plan_from_cache"], first["success"]) == (True, True, False)
    assert first["index_names"] == "[orders:idx_status]" and first["stats_info"] == "orders:449535463212400642"
    assert first["plan_signature"] == "IndexLookUp>IndexRangeScan(orders.idx_status)>TableRowIDScan(orders)"
    assert first["full_scan"] is False
    assert second["plan_signature"] == "TableReader>Selection>TableFullScan(orders)"
    assert second["full_scan"] is True
    assert "\t  └─TableFullScan_5\tcop[tiflash]\t10000.00" in second["plan"]  # 2 x depth: "  └─"
    assert "\t└─IndexRangeScan_8\tcop[tikv]\t10.00" in first["plan"]
    nodes = result.tables[T.PLAN_NODE]
    scan = nodes.filter(pl.col("node_type") == "TableFullScan").row(0, named=True)
    assert (scan["stmt_id"], scan["depth"], scan["relation"], scan["est_rows"], scan["actual_rows"], scan["loops"]) == (1, 2, "orders", 10000.0, 1_000_000.0, 1000.0)
    assert nodes.filter(pl.col("node_type") == "Selection")["filter"].to_list() == ['eq(shop.orders.note, "x")']
    rng = nodes.filter(pl.col("node_type") == "IndexRangeScan").row(0, named=True)
    assert (rng["relation"], rng["index_name"]) == ("orders", "idx_status")


def test_type_table_follows_the_tidb_version() -> None:
    point_get_v3 = ["0\t37_1\t0\t1\ttable:t, handle:1"]  # v3.0: 37 = Point_Get (no Plan_digest in v3 logs)
    point_get_v4 = ["0\t36_1\t0\t1.00\ttable:t, handle:1\t1\ttime:1ms, loops:2\tN/A\tN/A"]
    old = _rows(_parse("tidb-slowlog", entry(plan=point_get_v3, plan_digest=None)), T.PLAN_NODE)
    new = _rows(_parse("tidb-slowlog", entry(plan=point_get_v4)), T.PLAN_NODE)
    assert old[0]["node_type"] == new[0]["node_type"] == "Point_Get"
    unknown = _rows(_parse("tidb-slowlog", entry(plan=["0\t99_1\t0\t1\t"])), T.PLAN_NODE)
    assert unknown[0]["node_type"] == "UnknownPlanID99"


def test_pairs_inside_free_text_lines_are_not_read() -> None:
    warning = '# Warnings: [{"Level":"Warning","Message":"x Query_time: 99 Process_keys: 7"}]'
    prev = "# Prev_stmt: select 1 Process_time: 42"
    text = entry(extra=warning + "\n" + prev).replace("# Query_time: 0.5\n", "")
    (st,) = _rows(_parse("tidb-slowlog", text))
    assert st["query_time_s"] is None and st["rows_examined"] == 800 and st["process_time_s"] == 0.3


def test_empty_values_are_null() -> None:
    text = entry().replace("# DB: shop", "# DB: ").replace("# Index_names: [orders:idx_status]", "# Index_names:").replace(
        "# Succ: false", "# Succ: false\n# Plan: ")
    result = _parse("tidb-slowlog", text)
    (st,) = _rows(result)
    assert (st["db"], st["index_names"], st["plan"]) == (None, None, None) and not result.warnings


def test_old_layouts_user_line_and_time_format() -> None:
    text = entry(time="2019-08-14-09:26:59.487776265 +0800").replace(
        "# User@Host: app[app] @ 10.0.0.9 [10.0.0.9]", "# User: root@127.0.0.1")
    (st,) = _rows(_parse("tidb-slowlog", text))
    assert st["end_ts"] == _utc(2019, 8, 14, 1, 26, 59, 487776)
    assert (st["user"], st["client_host"]) == ("root", "127.0.0.1")


def test_zone_less_and_utc_times() -> None:
    naive = _parse("tidb-slowlog", entry(time="2024-05-01 10:00:05.5"), tz="Europe/Berlin")
    assert _rows(naive)[0]["end_ts"] == _utc(2024, 5, 1, 8, 0, 5, 500000)
    assert "times have no zone; read as Europe/Berlin (--tz)" in naive.notes
    zulu = _parse("tidb-slowlog", entry(time="2024-05-01T08:00:05.5Z"), tz="Europe/Berlin")
    assert _rows(zulu)[0]["end_ts"] == _utc(2024, 5, 1, 8, 0, 5, 500000) and not zulu.notes
    bad_tz = _parse("tidb-slowlog", entry(time="2024-05-01 10:00:05"), tz="Mars/Olympus")
    assert any("unknown time zone" in w.reason for w in bad_tz.warnings)


def test_sql_multi_line_use_lines_and_hash_lines_inside_sql() -> None:
    sql = "use `shop`;\nselect a,\n# not a field: a comment line inside the SQL\n  b from t\nwhere c = '\\xff';"
    text = entry(sql=sql).replace("# DB: shop\n", "")
    st = _rows(_parse("tidb-slowlog", text))[0]
    assert st["sql"] == "select a,\n# not a field: a comment line inside the SQL\n  b from t\nwhere c = '\\xff';"
    assert st["db"] == "shop"  # from the use line when there is no # DB
    only_use = _rows(_parse("tidb-slowlog", entry(sql="use shop;")))[0]
    assert only_use["sql"] == "use shop;"  # a statement that is itself a USE is kept


# ---- slow log: hostile input ------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "garbage\nmore garbage\n", "# Query_time: 1\nselect 1;\n", "\x00\x01binary"])
def test_nothing_readable_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError, match="no TiDB slow log entry"):
        _parse("tidb-slowlog", text)


def test_crlf_gives_the_same_result() -> None:
    text = _text("diag__tidb_slow_query.log")
    lf, crlf = _parse("tidb-slowlog", text), _parse("tidb-slowlog", text.replace("\n", "\r\n"))
    assert lf.tables[T.STATEMENT].equals(crlf.tables[T.STATEMENT])
    assert lf.tables[T.PLAN_NODE].equals(crlf.tables[T.PLAN_NODE])


def test_truncated_last_entry_is_kept_with_warnings() -> None:
    whole = entry(plan=INDEX_LOOKUP)
    cut = whole[: whole.index("# Plan:") + 40]  # the file ends inside the plan line
    result = _parse("tidb-slowlog", entry() + cut)
    rows = _rows(result)
    assert result.records == 2 and rows[1]["sql"] is None
    reasons = [(w.line, w.reason) for w in result.warnings]
    assert (19, "entry has no SQL text (file cut short?); kept without sql") in reasons
    assert any(line == 19 and "plan not decodable" in reason for line, reason in reasons)
    assert rows[1]["plan"].startswith("tidb_decode_plan('") and rows[1]["full_scan"] is None


def test_undecodable_discarded_and_binary_plans() -> None:
    bad_base64 = entry().replace("# Succ: false", "# Succ: false\n# Plan: tidb_decode_plan('@@not base64@@')")
    not_snappy = entry().replace("# Succ: false", "# Succ: false\n# Plan: tidb_decode_plan('" + base64.b64encode(b"\xff\xff\xff\xffjunk").decode() + "')")
    discarded = entry().replace("# Succ: false", "# Succ: false\n# Plan: tidb_decode_plan('[discard]')")
    binary = entry().replace("# Succ: false", "# Succ: false\n# Binary_plan: tidb_decode_binary_plan('AAAA')")
    result = _parse("tidb-slowlog", bad_base64 + not_snappy + discarded + binary)
    assert [w.line for w in result.warnings if "plan not decodable" in w.reason] == [1, 20]
    assert any("[discard]" in n for n in result.notes) and any("Binary_plan" in n for n in result.notes)
    plans = [r["plan"] for r in _rows(result)]
    assert plans[0] == "tidb_decode_plan('@@not base64@@')"
    assert plans[3] == "tidb_decode_binary_plan('AAAA')"
    assert result.tables[T.PLAN_NODE].is_empty()


def test_junk_before_the_first_entry_and_bad_values() -> None:
    text = "tail of a rotated file;\n" + entry(time="yesterday").replace("# Query_time: 0.5", "# Query_time: fast")
    result = _parse("tidb-slowlog", text)
    (st,) = _rows(result)
    reasons = [(w.line, w.reason) for w in result.warnings]
    assert (1, "1 line(s) before the first '# Time:' entry skipped") in reasons
    assert (2, "unreadable time 'yesterday'; entry kept without times") in reasons
    assert (2, "unreadable Query_time 'fast'; entry kept") in reasons
    assert st["end_ts"] is None and st["query_time_s"] is None and st["line"] == 2
    assert result.notes == []  # an unreadable time is a warning, not a zone-less one


def test_chunked_reading_gives_the_same_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text("diag__tidb_slow_query.log") * 40 + _text("pingcap-docs__identify-slow-queries_usage-example.log")
    whole = _parse("tidb-slowlog", text)
    monkeypatch.setattr(tidb_slowlog, "CHUNK_CHARS", 3000)
    chunked = _parse("tidb-slowlog", text)
    assert whole.records == chunked.records == 201
    assert whole.tables[T.STATEMENT].equals(chunked.tables[T.STATEMENT])
    assert whole.tables[T.PLAN_NODE].equals(chunked.tables[T.PLAN_NODE])
    assert _rows(chunked)[-1]["line"] == 40 * 125 + 1


def test_many_bad_lines_cap_the_warnings() -> None:
    result = _parse("tidb-slowlog", "".join(entry(sql="") for _ in range(80)))
    assert len(result.warnings) == 51 and result.warnings[-1].reason == "30 more warnings not shown"


# ---- SLOW_QUERY table exports (CSV / TSV) -----------------------------------------------------


def _table_columns() -> list[str]:
    """The CLUSTER_SLOW_QUERY column names, in order, from the dashboard's YAML fixture."""
    first_row = _text(YAML_FIXTURE).split("\n- ")[0]
    return re.findall(r"^(?:- |  )(\w+):", first_row, re.MULTILINE)


def _table_rows() -> list[dict[str, str]]:
    plan = json.loads(_text("tidb-dashboard__slow-query-detail.json"))["plan"]
    base = {c: "0" for c in _table_columns()}
    base.update(INSTANCE="10.0.1.7:10080", Time="2021-12-19 23:49:47.802016", Txn_start_ts="429772398236418049",
                User="root", Host="10.0.1.2", Conn_ID="7", Query_time="1.5", DB="test", Index_names="",
                Digest="911916530273cbddb6cee664f22d8f9d1ddf457ca0b6baeb28d3fad06b376a07", Stats="t:pseudo",
                Process_keys="12", Total_keys="20", Mem_max="4096", Result_rows="3", Succ="1", Prepared="0",
                Plan=plan, Plan_digest="e5f9d974", Query="SELECT a,\n\tb FROM t WHERE c = 'x,y';")
    second = dict(base, Time="2021-12-19 23:49:48.5", Query_time="0.25", Conn_ID="8", Plan="", Succ="0", Txn_start_ts="0")
    return [base, second]


def _csv(rows: list[dict[str, str]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=_table_columns(), lineterminator="\r\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _mysql_batch(rows: list[dict[str, str]]) -> str:
    escape = lambda v: v.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t")  # noqa: E731
    columns = _table_columns()
    return "\t".join(columns) + "\n" + "".join("\t".join(escape(r[c]) for c in columns) + "\n" for r in rows)


def test_table_csv_values() -> None:
    assert len(_table_columns()) == 76
    result = _parse("tidb-slow-query-table", _csv(_table_rows()), tz="Asia/Shanghai")
    first, second = _rows(result)
    assert result.notes == ["times have no zone; read as Asia/Shanghai (--tz)"]
    assert first["end_ts"] == _utc(2021, 12, 19, 15, 49, 47, 802016)
    assert first["start_ts"] == _utc(2021, 12, 19, 15, 49, 46, 302016)
    assert (first["instance"], first["conn_id"], first["txn_id"], first["user"], first["client_host"]) == (
        "10.0.1.7:10080", "7", "429772398236418049", "root", "10.0.1.2")
    assert (first["rows_examined"], first["rows_sent"], first["mem_max_bytes"]) == (12, 3, 4096)
    assert (first["success"], first["prepared"], second["success"], second["txn_id"]) == (True, False, False, None)
    assert first["sql"] == "SELECT a,\n\tb FROM t WHERE c = 'x,y';" and first["index_names"] is None
    assert first["plan_signature"] == "Sort>Projection>HashAgg>Selection>MemTableScan(CLUSTER_LOAD)"
    assert second["plan"] is None and second["plan_signature"] is None and second["full_scan"] is None
    assert result.tables[T.PLAN_NODE]["node_type"].to_list() == ["Sort", "Projection", "HashAgg", "Selection", "MemTableScan"]
    assert [r["line"] for r in (first, second)] == [1, 2]


def test_table_tsv_from_mysql_batch_reads_like_the_csv() -> None:
    rows = _table_rows()
    as_csv = _parse("tidb-slow-query-table", _csv(rows))
    as_tsv = _parse("tidb-slow-query-table", _mysql_batch(rows))
    assert as_tsv.tables[T.STATEMENT].equals(as_csv.tables[T.STATEMENT])
    assert as_tsv.tables[T.PLAN_NODE].equals(as_csv.tables[T.PLAN_NODE])


def test_table_columns_match_case_insensitively_and_null_words() -> None:
    text = "instance,TIME,query_time,DIGEST,conn_id,QUERY\nNULL,2024-05-01T10:00:00+02:00,2.5,d,NULL,select 1;\n"
    assert tidb_cluster_slow_query.detect(text, "x") > 0.5
    (st,) = _rows(_parse("tidb-slow-query-table", text))
    assert (st["instance"], st["conn_id"], st["end_ts"], st["query_time_s"]) == (None, None, _utc(2024, 5, 1, 8, 0), 2.5)


def test_table_hostile() -> None:
    header = ",".join(_table_columns()) + "\n"
    with pytest.raises(ParseError, match="header but no rows"):
        _parse("tidb-slow-query-table", header)
    with pytest.raises(ParseError, match="no SLOW_QUERY columns"):
        _parse("tidb-slow-query-table", "a,b,c\n1,2,3\n")
    with pytest.raises(ParseError, match="CSV not readable"):  # an unterminated quote swallows the rest
        _parse("tidb-slow-query-table", 'Time,Query_time,Digest,Query\n2024-05-01 10:00:00,1,d,"select 1;\n')
    ragged = "Time,Query_time,Digest,Query\n2024-05-01 10:00:00,1,d,select 1;\nnot a time,x\n"
    result = _parse("tidb-slow-query-table", ragged)
    assert result.records == 2
    assert [(w.line, w.reason) for w in result.warnings] == [(2, "unreadable Time 'not a time'; statement kept without times")]


# ---- dashboard JSON: hostile input ------------------------------------------------------------


def test_dashboard_hostile() -> None:
    with pytest.raises(ParseError, match="not JSON"):
        _parse("tidb-dashboard-slow-query", '{"digest": "x", "query_time": ')
    with pytest.raises(ParseError, match="no slow query object"):
        _parse("tidb-dashboard-slow-query", '{"status": "ok"}')
    mixed = json.dumps([{"digest": "a", "query_time": 1.5, "timestamp": 1700000000, "success": 1}, 5, {"digest": "b", "query_time": 0.5, "timestamp": None, "success": 0}])
    result = _parse("tidb-dashboard-slow-query", mixed)
    assert result.records == 2
    assert [(w.line, w.reason) for w in result.warnings] == [
        (2, "item is not a slow query object; skipped"), (3, "no readable timestamp; statement kept without times")]
    assert [r["success"] for r in _rows(result)] == [True, False]
    assert tidb_dashboard.detect('{"status": "ok", "data": []}', "x") < 0.5
    summary = '[{"digest": "d", "digest_text": "select ?", "plan_digest": "p", "instance": "i", "exec_count": 3}]'
    assert tidb_dashboard.detect(summary, "statements.json") < 0.5  # statement summary, not slow queries
    with pytest.raises(ParseError, match="no slow query object"):
        _parse("tidb-dashboard-slow-query", summary)


def test_prepared_arguments_are_not_part_of_the_statement():
    text = (CORPUS / "slowlog-tidb" / "pingcap-docs__identify-slow-queries_usage-example.log").read_text(encoding="utf-8")
    with_arguments = text.replace("insert into t select * from t;", 'select * from t where a = ? and b = ? [arguments: (42, "6228480001")];')
    result = tidb_slowlog.SPEC.parse(with_arguments, ParseContext(source="tidb_slow_query.log"))
    assert result.tables["statement"]["sql"].to_list() == ["select * from t where a = ? and b = ?;"]

