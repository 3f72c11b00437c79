"""Dashboard and proxy parsers: Prometheus JSON, TiDB Dashboard metrics, Grafana CSV, TiDB statement
summaries, HAProxy show stat. Corpus and fixture goldens, hand-checked values, detection, hostile cases."""

from __future__ import annotations

import importlib.util
import math
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from conftest import CORPUS, REPO, corpus_present

from dbdiag import tables as T
from dbdiag.detect import detect as detect_member
from dbdiag.parsers import PARSERS as REGISTRY
from dbdiag.parsers import grafana_csv, haproxy_stat, prometheus_json, tidb_dashboard_metrics, tidb_statements
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError

MINE = {
    spec.kind: spec
    for spec in (prometheus_json.SPEC, tidb_dashboard_metrics.SPEC, grafana_csv.SPEC, tidb_statements.SPEC, haproxy_stat.SPEC)
}
# the registry with these parsers, whether or not the lead has added them yet
ALL_SPECS = tuple(s for s in REGISTRY if s.kind not in MINE) + tuple(MINE.values())
FIXTURES = REPO / "fixtures" / "dashboards"
INPUTS = {  # path relative to the corpus or the repo -> kind
    "corpus:prometheus/grafana__range_missing.result.json": "prometheus-json",
    "corpus:prometheus/grafana__range_nan.result.json": "prometheus-json",
    "corpus:prometheus/grafana__range_simple.result.json": "prometheus-json",
    "corpus:prometheus/tidb-dashboard__metrics-data-cpu-usage.json": "tidb-dashboard-metrics",
    "corpus:haproxy/datadog__mock_data.csv": "haproxy-stat",
    "corpus:haproxy/telegraf__sample_output.csv": "haproxy-stat",
    "fixture:grafana-10__query-duration-p99-data-as-joinbyfield.csv": "grafana-csv",
    "fixture:grafana-10__connection-count-data-as-joinbyfield.csv": "grafana-csv",
    "fixture:grafana-10__statement-ops-data.csv": "grafana-csv",
    "fixture:grafana-6__graph-export-series-as-rows.csv": "grafana-csv",
    "fixture:grafana-6__graph-export-series-as-columns.csv": "grafana-csv",
    "fixture:haproxy-2.6__show_stat_ts.csv": "haproxy-stat",
    "fixture:haproxy-2.6__show_stat_date.csv": "haproxy-stat",
    "fixture:haproxy-2.6__show_stat_plain.csv": "haproxy-stat",
    "fixture:tidb-statements__cluster_statements_summary_history.tsv": "tidb-dashboard-statements",
    "fixture:tidb-statements__statements_summary_dumpling.csv": "tidb-dashboard-statements",
    "fixture:tidb-dashboard__statements_list.json": "tidb-dashboard-statements",
    "fixture:tidb-dashboard__statements_export.csv": "tidb-dashboard-statements",
}
TZ = "Asia/Shanghai"  # zone-less fixture times are read in it (+08:00, no DST)


def _path(key: str) -> Path:
    where, name = key.split(":", 1)
    return (CORPUS if where == "corpus" else FIXTURES) / name


def _text(key: str) -> str:
    return _path(key).read_bytes().decode("utf-8", "backslashreplace")


def _lf_only(key: str) -> bool:
    """No CRLF in the input; read at collection, so a corpus input without the corpus is kept (it skips when read)."""
    if key.startswith("corpus:") and not corpus_present():
        return True
    return "\r\n" not in _text(key)


def _parse(kind: str, text: str, source: str = "test", tz: str = TZ):
    return MINE[kind].parse(text, ParseContext(source=source, tz=tz))


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _rows(result, table: str) -> list[dict]:
    return result.tables[table].rows(named=True)


# ---- goldens, coverage, detection ----------------------------------------------------------------


@pytest.mark.parametrize("key", sorted(k for k in INPUTS if _lf_only(k)))
def test_crlf_line_ends_read_the_same(key: str) -> None:
    text = _text(key)
    lf, crlf = _parse(INPUTS[key], text), _parse(INPUTS[key], text.replace("\n", "\r\n"))
    for name, frame in lf.tables.items():
        assert crlf.tables[name].equals(frame), name
    assert crlf.notes == lf.notes and crlf.records == lf.records


def test_every_corpus_file_and_fixture_is_covered() -> None:
    corpus = {f"corpus:{d}/{p.name}" for d in ("prometheus", "haproxy") for p in (CORPUS / d).iterdir()}
    data = {f"fixture:{p.name}" for p in FIXTURES.iterdir() if p.suffix in (".csv", ".json", ".tsv")}
    assert corpus | data == set(INPUTS)


@pytest.mark.parametrize("key", sorted(INPUTS))
def test_detect_picks_the_parser_over_the_whole_registry(key: str) -> None:
    data = _path(key).read_bytes()
    detection = detect_member(data, "member", ALL_SPECS)  # neutral name: content decides
    assert detection.spec is MINE[INPUTS[key]], detection
    head = data[:DETECT_HEAD_BYTES].decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    assert all(spec.detect(head, "member") <= 0.5 for kind, spec in MINE.items() if kind != INPUTS[key])


# ---- Prometheus JSON -----------------------------------------------------------------------------


def test_prometheus_nan_values_kept() -> None:
    result = _parse("prometheus-json", _text("corpus:prometheus/grafana__range_nan.result.json"), source="metrics/range_nan.result.json")
    rows = _rows(result, T.METRIC_SAMPLE)
    assert len(rows) == 3 and all(math.isnan(r["value"]) for r in rows)
    assert {r["metric"] for r in rows} == {"range_nan"}  # no __name__: the file name up to its first dot
    assert rows[0]["labels"] == "handler=/api/v1/query_range,job=prometheus"
    assert [r["ts"] for r in rows] == [_utc(2022, 1, 11, 8, 25, s) for s in (30, 31, 32)]  # 1641889530..532
    diag = "monitor/metrics/10.0.1.9-9090/prometheus_http_requests_total_2022-01-11T16:25:00+08:00_2022-01-11T17:25:00+08:00.json"
    named = _parse("prometheus-json", _text("corpus:prometheus/grafana__range_nan.result.json"), source=diag)
    assert set(named.tables[T.METRIC_SAMPLE]["metric"]) == {"prometheus_http_requests_total"}


def test_prometheus_two_series_and_a_value_at_a_time() -> None:
    result = _parse("prometheus-json", _text("corpus:prometheus/grafana__range_simple.result.json"))
    frame = result.tables[T.METRIC_SAMPLE]
    assert frame.select("metric", "labels").unique().height == 2 and result.notes[0] == "2 series, 5 samples"
    at = frame.filter(pl.col("labels").str.starts_with("code=400") & (pl.col("ts") == _utc(2022, 1, 11, 8, 25, 32, 123000)))
    assert at["value"].to_list() == [76.0]  # [1641889532.123, "76"]
    assert at["labels"][0] == "code=400,handler=/api/v1/query_range,job=prometheus"
    assert at["metric"][0] == "prometheus_http_requests_total" and at["instance"][0] is None


def test_prometheus_missing_steps_stay_absent() -> None:
    result = _parse("prometheus-json", _text("corpus:prometheus/grafana__range_missing.result.json"))
    assert result.tables[T.METRIC_SAMPLE]["ts"].dt.second().to_list() == [33, 34, 37]
    assert result.tables[T.METRIC_SAMPLE]["value"].to_list() == [21.0, 32.0, 43.0]


def test_prometheus_millisecond_timestamps_detected_and_noted() -> None:
    text = '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"up"},"values":[[1715680800000,"1"],[1715680815000,"0"]]}]}}'
    result = _parse("prometheus-json", text)
    assert result.tables[T.METRIC_SAMPLE]["ts"].to_list() == [_utc(2024, 5, 14, 10, 0), _utc(2024, 5, 14, 10, 0, 15)]
    assert any("milliseconds" in n for n in result.notes)
    seconds = _parse("prometheus-json", text.replace("000,", ","))
    assert not any("milliseconds" in n for n in seconds.notes)


def test_prometheus_inf_labels_vector_scalar_list_and_bare_data() -> None:
    vector = (
        '{"resultType":"vector","result":[{"metric":{"__name__":"tidb_server_handle_query_duration_seconds_bucket",'
        '"instance":"tidb-0:10080","le":"+Inf","sql_type":"Select"},"value":[1715680800.5,"+Inf"]},'
        '{"metric":{"le":"0.001"},"value":[1715680800.5,"-Inf"]}]}'
    )
    scalar = '{"status":"success","data":{"resultType":"scalar","result":[1715680800,"42"]}}'
    text = f'[{{"status":"success","data":{vector}}}, {scalar}]'
    result = _parse("prometheus-json", text, source="diag/metrics/tidb_server_handle_query_duration_seconds_bucket.json")
    rows = _rows(result, T.METRIC_SAMPLE)
    assert [r["value"] for r in rows] == [math.inf, -math.inf, 42.0]
    assert rows[0]["labels"] == "instance=tidb-0:10080,le=+Inf,sql_type=Select" and rows[0]["instance"] == "tidb-0:10080"
    assert [r["metric"] for r in rows] == ["tidb_server_handle_query_duration_seconds_bucket"] * 3
    assert rows[0]["ts"] == _utc(2024, 5, 14, 10, 0, 0, 500000)
    bare = _parse("prometheus-json", vector)
    assert bare.records == 2


def test_prometheus_error_response_raises_with_the_error_text() -> None:
    text = '{"status":"error","errorType":"bad_data","error":"parse error at char 5: unexpected \\"}\\""}'
    assert prometheus_json.detect(text, "member") > 0.5
    with pytest.raises(ParseError, match=r'^Prometheus bad_data: parse error at char 5: unexpected "}"'):
        _parse("prometheus-json", text)
    ok = '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up"},"value":[1,"1"]}]}}'
    mixed = _parse("prometheus-json", f"[{text}, {ok}]")
    assert mixed.records == 1 and any("bad_data" in w.reason for w in mixed.warnings)


@pytest.mark.parametrize(
    "text, reason",
    [
        ("", "not JSON"),
        ('{"status":"success","data":{"resultType":"matrix","result":[{"metric":{}', "not JSON"),
        ("[" * 100000 + "]" * 100000, "nested deeper than|no Prometheus response"),
        ('{"status":"success","data":[1,2]}', "no Prometheus response"),
        ("\x00\x01binary\xff", "not JSON"),
    ],
)
def test_prometheus_hostile_raise_parse_error(text: str, reason: str) -> None:
    with pytest.raises(ParseError, match=reason):
        _parse("prometheus-json", text)


def test_prometheus_bad_samples_are_warnings() -> None:
    text = (
        '{"status":"success","data":{"resultType":"matrix","result":['
        '{"metric":{"__name__":"a"},"values":[[1700000000,"1"],[1700000001],["x","2"],[1700000002,"abc"],[1700000003,"4"]]},'
        '"not a series", {"metric":{"__name__":"b"},"histograms":[[1700000000,{"count":"1"}]]}]}}'
    )
    result = _parse("prometheus-json", text)
    assert result.tables[T.METRIC_SAMPLE]["value"].to_list() == [1.0, 4.0]
    reasons = " | ".join(w.reason for w in result.warnings)
    assert "not [time" in reasons and "not a series" in reasons and "native histogram" in reasons
    assert "2 samples with an unreadable time or value" in reasons


# ---- TiDB Dashboard metrics ----------------------------------------------------------------------


def test_tidb_dashboard_metrics_values() -> None:
    result = _parse("tidb-dashboard-metrics", _text("corpus:prometheus/tidb-dashboard__metrics-data-cpu-usage.json"))
    frame = result.tables[T.METRIC_SAMPLE]
    assert result.records == 125 and frame.select("instance").unique().height == 5  # 5 series x 25 samples
    first = frame.row(0, named=True)
    assert first["metric"] == 'irate(process_cpu_seconds_total{ job="tidb",}[1m])'
    assert first["labels"] == "instance=tidb-810cad05/172.18.3.6:10080,job=tidb"  # the empty legend labels dropped
    assert first["ts"] == _utc(2024, 12, 14, 15, 7, 27) and first["value"] == 0.03933333333358557  # 1734188847
    assert frame["ts"].max() == _utc(2024, 12, 14, 16, 7, 27)  # 1734192447
    assert prometheus_json.detect(_text("corpus:prometheus/tidb-dashboard__metrics-data-cpu-usage.json")[:DETECT_HEAD_BYTES], "m") == 0.0


def test_tidb_dashboard_metrics_hostile() -> None:
    with pytest.raises(ParseError, match="no \"data\" list"):
        _parse("tidb-dashboard-metrics", '{"status":"success","data":{"resultType":"matrix","result":[]}}')
    with pytest.raises(ParseError, match="no query with a result list"):
        _parse("tidb-dashboard-metrics", '{"status":"success","data":[{"expr":"up"}]}')
    result = _parse("tidb-dashboard-metrics", '{"data":[{"expr":"up","result":[{"metric":{},"values":[{"timestamp":1,"value":"1"},{"v":2},7]}]}]}')
    assert result.records == 1 and "2 samples without timestamp/value" in result.warnings[0].reason


# ---- Grafana CSV ---------------------------------------------------------------------------------


def test_grafana_joined_formatted_local_times_and_units() -> None:
    result = _parse("grafana-csv", _text("fixture:grafana-10__query-duration-p99-data-as-joinbyfield.csv"))
    frame = result.tables[T.METRIC_SAMPLE]
    assert result.records == 11  # 6 rows x 2 series, one empty cell (a missing step)
    assert frame.select("metric").unique().height == 2
    assert "times have no zone; read as Asia/Shanghai (--tz)" in result.notes
    tidb0 = frame.filter(pl.col("metric") == "tidb-0:10080")
    assert tidb0["ts"][0] == _utc(2024, 5, 14, 2, 0)  # 2024-05-14 10:00:00 at +08:00
    assert tidb0["value"].to_list() == pytest.approx([0.0125, 0.0131, 0.0118, 0.012, 0.00095], rel=1e-12)  # 12.5 ms ... 950 µs
    assert _utc(2024, 5, 14, 2, 0, 30) not in tidb0["ts"].to_list()
    tidb1 = frame.filter(pl.col("metric") == "tidb-1:10080")["value"].to_list()
    assert tidb1 == pytest.approx([1.02, 0.98, 1.25, 2.5, 0.85, 1.1], rel=1e-12)  # "980 ms" -> 0.98
    assert "series 'tidb-1:10080': values printed in s, ms; converted to s" in result.notes
    utc = _parse("grafana-csv", _text("fixture:grafana-10__query-duration-p99-data-as-joinbyfield.csv"), tz="UTC")
    assert utc.tables[T.METRIC_SAMPLE]["ts"][0] == _utc(2024, 5, 14, 10, 0)


def test_grafana_short_unit_scales_and_percent() -> None:
    result = _parse("grafana-csv", _text("fixture:grafana-10__connection-count-data-as-joinbyfield.csv"))
    assert result.tables[T.METRIC_SAMPLE].filter(pl.col("metric") == "tidb-1:10080")["value"].to_list() == [980.0, 1010.0, 1500.0]
    percent = _parse("grafana-csv", '"Time","CPU"\r\n2024-05-14 10:00:00,35.2%\r\n2024-05-14 10:00:15,40%\r\n\r\n')
    assert percent.tables[T.METRIC_SAMPLE]["value"].to_list() == [35.2, 40.0]
    assert "series 'CPU': unit % (kept)" in percent.notes
    grouped = _parse("grafana-csv", '"Time","rows"\r\n1715680800000,"1,234,567.5"\r\n1715680815000,2 year\r\n')
    assert grouped.tables[T.METRIC_SAMPLE]["value"].to_list() == [1234567.5, 63072000.0]
    mixed = _parse("grafana-csv", '"Time","x"\r\n1715680800000,1 ms\r\n1715680815000,2 MiB\r\n')
    assert any("mixes units" in w.reason for w in mixed.warnings)


def test_grafana_raw_epoch_ms_prometheus_name_and_nan() -> None:
    result = _parse("grafana-csv", _text("fixture:grafana-10__statement-ops-data.csv"))
    rows = _rows(result, T.METRIC_SAMPLE)
    assert rows[0]["metric"] == "tidb_executor_statement_total"
    assert rows[0]["labels"] == "instance=tidb-0:10080,job=tidb,type=Select" and rows[0]["instance"] == "tidb-0:10080"
    assert rows[0]["ts"] == _utc(2024, 5, 14, 10, 0) and rows[0]["value"] == 1234.5  # 1715680800000
    assert math.isnan(rows[2]["value"]) and len(rows) == 4
    assert not any("zone" in n for n in result.notes)


def test_grafana_6_series_as_rows_and_columns() -> None:
    rows = _parse("grafana-csv", _text("fixture:grafana-6__graph-export-series-as-rows.csv"))
    frame = rows.tables[T.METRIC_SAMPLE]
    assert rows.notes[0] == "series per row: 2 series, 4 samples"  # the "null" point dropped
    assert frame.filter(pl.col("metric") == "tidb-1 p99")["value"].to_list() == [1.02, 0.98]
    assert frame["ts"][0] == _utc(2024, 5, 14, 8, 0)  # 10:00:00+02:00
    columns = _parse("grafana-csv", _text("fixture:grafana-6__graph-export-series-as-columns.csv"))
    insert = columns.tables[T.METRIC_SAMPLE].filter(pl.col("metric") == "Insert")
    assert insert["value"].to_list() == [300.0, 310.0] and insert["ts"][1] == _utc(2024, 5, 14, 8, 0, 30)


def test_grafana_hostile() -> None:
    with pytest.raises(ParseError, match="no Grafana CSV header"):
        _parse("grafana-csv", "timeStamp,elapsed,label\n1,2,3\n")
    with pytest.raises(ParseError, match="no readable time/value"):
        _parse("grafana-csv", '"Time","a"\r\n\r\n')
    result = _parse("grafana-csv", '"Time","a"\r\nyesterday,1\r\n1715680800000,abc\r\n1715680815000,2\r\n' + "x" * 200000 + ",3\r\n")
    assert result.tables[T.METRIC_SAMPLE]["value"].to_list() == [2.0]
    reasons = [w.reason for w in result.warnings]
    assert any("unreadable time 'yesterday'" in r for r in reasons) and any("not a number 'abc'" in r for r in reasons)
    formula = _parse("grafana-csv", "\"Series\";\"Time\";\"Value\"\r\n\"'-errors\";\"2024-05-14T10:00:00+02:00\";1")
    assert formula.tables[T.METRIC_SAMPLE]["metric"].to_list() == ["-errors"]


# ---- TiDB statement summaries --------------------------------------------------------------------


def test_statement_fixtures_match_their_generator() -> None:
    spec = importlib.util.spec_from_file_location("make_tidb_statements", FIXTURES / "make_tidb_statements.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    assert _text("fixture:tidb-statements__cluster_statements_summary_history.tsv") == make.mysql_batch(make.ROWS, make.COLUMNS)
    assert _text("fixture:tidb-dashboard__statements_list.json") == make.dashboard_list()
    assert _text("fixture:tidb-dashboard__statements_export.csv") == make.dashboard_export()


def test_statements_summary_history_tsv() -> None:
    result = _parse("tidb-dashboard-statements", _text("fixture:tidb-statements__cluster_statements_summary_history.tsv"))
    rows = _rows(result, T.STATEMENT_SUMMARY)
    assert len(rows) == 3
    first = rows[0]
    assert (first["instance"], first["exec_count"], first["schema_name"]) == ("10.0.1.5:10080", 120000, "sbtest")
    assert first["sum_latency_s"] == 156.0 and first["avg_latency_s"] == 0.0013  # 156000000000 / 1300000 ns
    assert first["max_latency_s"] == 0.048 and first["min_latency_s"] == 0.00021 and first["avg_rows_examined"] == 1.0
    assert first["first_seen"] == _utc(2024, 5, 14, 2, 0, 1) and first["last_seen"] == _utc(2024, 5, 14, 2, 29, 59)
    assert first["digest_text"] == "select * from `sbtest1` where `id` = ?"
    assert rows[2]["avg_rows_examined"] == 2.0 and rows[2]["sum_latency_s"] == 114.0
    assert "times have no zone; read as Asia/Shanghai (--tz)" in result.notes
    assert sum(r["exec_count"] for r in rows) == 268000


def test_statements_dumpling_csv_and_dashboard_exports() -> None:
    dumpling = _rows(_parse("tidb-dashboard-statements", _text("fixture:tidb-statements__statements_summary_dumpling.csv")), T.STATEMENT_SUMMARY)
    assert [r["instance"] for r in dumpling] == [None, None] and [r["exec_count"] for r in dumpling] == [120000, 30000]
    listed = _parse("tidb-dashboard-statements", _text("fixture:tidb-dashboard__statements_list.json"))
    rows = _rows(listed, T.STATEMENT_SUMMARY)
    assert [r["exec_count"] for r in rows] == [238000, 30000]  # grouped over instances by the Dashboard
    assert rows[0]["sum_latency_s"] == pytest.approx(315.3) and rows[0]["first_seen"] is None and rows[0]["avg_rows_examined"] is None
    assert listed.notes[0].startswith("list response: fields 0 or empty in every row read as unknown")
    exported = _parse("tidb-dashboard-statements", _text("fixture:tidb-dashboard__statements_export.csv"))
    rows = _rows(exported, T.STATEMENT_SUMMARY)
    assert rows[1]["plan_digest"] == "6b2d5e8f1a4c7e0b3d6f9a2c5e8b1d4f7a0c3e6b9d2f5a8c1e4b7d0f3a6c9e2b"
    assert rows[0]["first_seen"] is None and any("without year" in n for n in exported.notes)
    assert rows[0]["max_latency_s"] == 0.052


def test_statements_detail_object_epoch_seen_and_hostile() -> None:
    detail = '{"digest":"ab","digest_text":"select ?","exec_count":"x","sum_latency":1,"first_seen":1715680931,"last_seen":1715680990}'
    result = _parse("tidb-dashboard-statements", detail)
    row = _rows(result, T.STATEMENT_SUMMARY)[0]
    assert row["first_seen"] == _utc(2024, 5, 14, 10, 2, 11) and row["exec_count"] is None
    assert "EXEC_COUNT 'x' is not an integer" in result.warnings[0].reason
    with pytest.raises(ParseError, match="no statement summary object"):
        _parse("tidb-dashboard-statements", '[{"digest": "ab"}]')
    with pytest.raises(ParseError, match="header has no statement summary columns"):
        _parse("tidb-dashboard-statements", "Time,Query_time,Digest,Query\n")
    with pytest.raises(ParseError, match="header but no rows"):
        _parse("tidb-dashboard-statements", "DIGEST_TEXT,EXEC_COUNT,SUM_LATENCY\n")


# ---- HAProxy show stat ---------------------------------------------------------------------------


def test_haproxy_ts_snapshots_frontend_at_its_limit() -> None:
    result = _parse("haproxy-stat", _text("fixture:haproxy-2.6__show_stat_ts.csv"))
    frame = result.tables[T.PROXY_STAT]
    assert result.records == 4 and frame.height == 20
    assert frame.filter(pl.col("snapshot") == 1)["ts"][0] == _utc(2026, 11, 29, 22, 51, 17, 503363)  # TS 1795992677.503363111
    fe = frame.filter((pl.col("snapshot") == 1) & (pl.col("server") == "FRONTEND")).row(0, named=True)
    assert (fe["type"], fe["scur"], fe["slim"], fe["stot"], fe["status"]) == ("frontend", 20, 20, 80, "OPEN")
    app1 = frame.filter((pl.col("snapshot") == 2) & (pl.col("server") == "app1")).row(0, named=True)
    assert (app1["proxy"], app1["type"], app1["scur"], app1["slim"], app1["stot"]) == ("be_app", "server", 10, 10, 80)
    listener = frame.filter((pl.col("snapshot") == 1) & (pl.col("server") == "lst_app")).row(0, named=True)
    assert (listener["type"], listener["status"], listener["rate"]) == ("listener", "WAITING", None)
    assert frame.filter(pl.col("snapshot") == 3)["scur"].to_list() == [0, 0, 0, 0, 0]


def test_haproxy_date_and_iso_time_lines_and_queue() -> None:
    result = _parse("haproxy-stat", _text("fixture:haproxy-2.6__show_stat_date.csv"))
    frame = result.tables[T.PROXY_STAT]
    assert frame["ts"].unique(maintain_order=True).to_list() == [_utc(2026, 11, 29, 22, 51, 39), _utc(2026, 11, 29, 22, 51, 42)]
    backend = frame.filter(pl.col("server") == "BACKEND")
    assert backend["qcur"].to_list() == [10, 10] and backend["scur"].to_list() == [20, 20]
    assert frame.filter(pl.col("server") == "app2")["slim"].to_list() == [5, 5]
    plain = _parse("haproxy-stat", _text("fixture:haproxy-2.6__show_stat_plain.csv"))
    assert plain.records == 1 and plain.tables[T.PROXY_STAT]["ts"].null_count() == 5 and plain.time_range is None


def test_haproxy_old_versions() -> None:
    datadog = _parse("haproxy-stat", _text("corpus:haproxy/datadog__mock_data.csv")).tables[T.PROXY_STAT]
    b_backend = datadog.filter((pl.col("proxy") == "b") & (pl.col("server") == "BACKEND")).row(0, named=True)
    assert (b_backend["scur"], b_backend["smax"], b_backend["slim"], b_backend["stot"]) == (1, 2, 0, 421)  # after "space, afterspace"
    assert datadog.filter(pl.col("server") == "i-2")["status"].to_list() == ["UP 1/2", "DOWN (agent)", "DOWN (agent)"]
    telegraf = _parse("haproxy-stat", _text("corpus:haproxy/telegraf__sample_output.csv")).tables[T.PROXY_STAT]
    assert telegraf.height == 13 and telegraf.filter(pl.col("type") == "listener").height == 5
    www = telegraf.filter((pl.col("proxy") == "www") & (pl.col("server") == "www")).row(0, named=True)
    assert (www["smax"], www["slim"], www["stot"], www["eresp"]) == (20, 20, 1719698, 5285)


def test_haproxy_hostile() -> None:
    with pytest.raises(ParseError, match="no HAProxy show stat header"):
        _parse("haproxy-stat", "pxname,svname\nx,y\n")
    with pytest.raises(ParseError, match="no proxy rows"):
        _parse("haproxy-stat", "# pxname,svname,scur,slim,\n\n")
    text = (
        "fe,FRONTEND,1,2,\n"  # before any header
        "not a time\n"
        "# pxname,svname,scur,slim,type,\n"
        "fe,FRONTEND,x,20,0,\n"
        "be,srv,3,10,9,\n"
        "be,srv2,4\n"  # short row
        + "z" * 100000 + ",a,1,2,2,\n"
    )
    result = _parse("haproxy-stat", text)
    frame = result.tables[T.PROXY_STAT]
    assert frame["scur"].to_list() == [None, 3, 4, 1] and frame["type"].to_list() == ["frontend", "server", "server", "server"]
    reasons = [w.as_text() for w in result.warnings]
    assert "line 1: 1 rows before the first # pxname header skipped" in reasons
    assert "line 2: not a time line: 'not a time'; snapshot kept without time" in reasons
    assert "line 4: a counter is not an integer; read as null" in reasons
    assert "line 5: unknown type '9'; type taken from svname" in reasons


def test_statements_export_without_some_latency_columns_reads_them_as_null() -> None:
    from dbdiag.parsers import tidb_statements

    text = "DIGEST,DIGEST_TEXT,EXEC_COUNT,SUM_LATENCY\nd1,select ?,10,1300000\nd2,select ? from t,5,52000000\n"
    result = tidb_statements.SPEC.parse(text, ParseContext(source="statements.csv"))
    frame = result.tables["statement_summary"]
    assert frame["sum_latency_s"].to_list() == [0.0013, 0.052]
    assert frame["avg_latency_s"].null_count() == 2
