"""DB time against user response time (metrics.time_accounting) on synthetic inputs and the real captures."""

from __future__ import annotations

import tarfile
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.time_accounting import time_accounting
from dbdiag.parsers import PARSERS, pgbench, sysbench
from dbdiag.parsers.base import ParseContext
from tests.conftest import CORPUS

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)  # an epoch multiple of 10 s


def statements(rows: list[tuple], source: str = "db/slow.log") -> pl.DataFrame:
    """(conn_id, start offset s, duration s[, sql]) -> ``statement`` rows."""
    return t.conform(t.STATEMENT, pl.DataFrame({
        "stmt_id": list(range(len(rows))),
        "conn_id": [r[0] for r in rows],
        "start_ts": [T0 + timedelta(seconds=r[1]) for r in rows],
        "end_ts": [T0 + timedelta(seconds=r[1] + r[2]) for r in rows],
        "query_time_s": [r[2] for r in rows],
        "sql": [r[3] if len(r) > 3 else "SELECT 1" for r in rows],
        "source": source,
    }, schema_overrides={"conn_id": pl.String}))


def jmeter(rows: list[tuple[float, float]], **extra: list) -> pl.DataFrame:
    """(start offset s, elapsed ms) -> ``load_sample`` rows."""
    frame = pl.DataFrame({"start_ts": [T0 + timedelta(seconds=s) for s, _ in rows], "elapsed_ms": [e for _, e in rows],
                          "label": "checkout", "source": "app/results.jtl", **extra})
    return t.conform(t.LOAD_SAMPLE, frame)


def metric_samples(metric: str, labels: str, values: list[float], step_s: float = 15.0, start_s: float = 0.0) -> pl.DataFrame:
    return t.conform(t.METRIC_SAMPLE, pl.DataFrame({
        "ts": [T0 + timedelta(seconds=start_s + step_s * i) for i in range(len(values))],
        "metric": metric, "labels": labels, "value": values, "source": "metrics/export.json",
    }))


# ------------------------------------------------------------ timestamped sides


def test_jmeter_against_statements_over_the_overlap_and_per_window() -> None:
    # user: 4 transactions of 500 ms at 0, 5, 12, 30 s (the last is after the statement log ends)
    user = jmeter([(0, 500), (5, 500), (12, 500), (30, 500)])
    # db: statements from 1 s to 15 s: 0.1 s in window 0, 0.05 s in window 10 s
    db = statements([("1", 1, 0.04, "BEGIN"), ("1", 6, 0.06), ("2", 11, 0.0005), ("2", 14.5, 0.0495)])
    metric, windows = time_accounting({t.LOAD_SAMPLE: user, t.STATEMENT: db})
    # overlap [1 s, 14.55 s]: samples at 5 and 12 s (1.0 s); statements 0.15 s
    assert metric["user_response_time_s"] == pytest.approx(1.0)
    assert metric["db_time_s"] == pytest.approx(0.15)
    assert metric["db_time_ratio"] == pytest.approx(0.15)
    assert metric["from"] == (T0 + timedelta(seconds=1)).isoformat()
    assert metric["alignment"].startswith("timestamps")
    sides = {(s["side"], s["kind"]) for s in metric["sources"]}
    assert sides == {("user", "jmeter-samples"), ("db", "statement-log")}
    db_source = next(s for s in metric["sources"] if s["side"] == "db")
    assert db_source["count"] == 4 and db_source["detail"] == "Σ statement durations from db/slow.log (4 statements)"
    assert windows.columns == ["window_start", "user_response_time_s", "db_time_s", "ratio"]
    assert windows.rows() == [(T0, 0.5, 0.1, pytest.approx(0.2)), (T0 + timedelta(seconds=10), 0.5, 0.05, pytest.approx(0.1))]
    assert metric["windows"][1]["window_start"] == (T0 + timedelta(seconds=10)).isoformat()


def test_windows_are_epoch_aligned() -> None:
    user = jmeter([(3, 100), (7, 100)])
    db = statements([("1", 2.5, 0.0005), ("1", 3.5, 0.0005), ("1", 6.9, 0.01), ("1", 7.5, 0.001)])
    _, windows = time_accounting({t.LOAD_SAMPLE: user, t.STATEMENT: db}, window_s=5.0)
    assert windows["window_start"].to_list() == [T0, T0 + timedelta(seconds=5)]


def test_an_edge_window_with_one_side_only_is_left_out() -> None:
    """The period starts at 4.8 s (the first sample): the 0-5 s window holds user time and no statement."""
    user = jmeter([(4.8, 100), (6, 100), (7, 100)])
    db = statements([("1", 3.0, 0.0005), ("1", 6.9, 0.01), ("1", 7.5, 0.001)])
    metric, windows = time_accounting({t.LOAD_SAMPLE: user, t.STATEMENT: db}, window_s=5.0)
    assert metric["user_response_time_s"] == pytest.approx(0.3)  # the whole period still counts
    assert windows["window_start"].to_list() == [T0 + timedelta(seconds=5)]


def test_transaction_controller_rows_replace_their_children() -> None:
    user = jmeter([(0, 300), (0, 100), (0.1, 200)], is_transaction=[True, False, False])
    db = statements([("1", 0.0, 0.001), ("1", 0.2, 0.001)])  # the log covers the samples
    metric, _ = time_accounting({t.LOAD_SAMPLE: user, t.STATEMENT: db})
    assert metric["user_response_time_s"] == pytest.approx(0.3)
    assert "transaction-controller samples" in metric["sources"][0]["detail"]


def test_no_overlap_gives_no_ratio_and_says_why() -> None:
    metric, windows = time_accounting({t.LOAD_SAMPLE: jmeter([(0, 100), (10, 100)]), t.STATEMENT: statements([("1", 60, 0.001)])})
    assert metric["db_time_ratio"] is None and windows is None
    assert metric["unavailable_reason"].startswith("no overlap")


def test_one_side_missing() -> None:
    assert time_accounting({}) == (None, None)
    metric, windows = time_accounting({t.LOAD_SAMPLE: jmeter([(0, 100)])})
    assert (metric["user_response_time_s"], metric["db_time_s"], metric["db_time_ratio"], windows) == (0.1, None, None, None)
    assert "no DB time" in metric["unavailable_reason"]
    metric, _ = time_accounting({t.STATEMENT: statements([("1", 0, 0.0001)])})
    assert metric["db_time_s"] == pytest.approx(0.0001) and metric["user_response_time_s"] is None
    assert "no user response time" in metric["unavailable_reason"]


def test_slow_log_with_a_threshold_is_not_db_time() -> None:
    settings = t.conform(t.DB_SETTING, pl.DataFrame({"engine": ["mysql"], "kind": ["variable"], "name": ["long_query_time"],
                                                    "value": ["0.500000"], "source": ["db/vars.tsv"]}))
    slow = statements([("1", 1, 0.7), ("1", 3, 2.5)])
    metric, _ = time_accounting({t.LOAD_SAMPLE: jmeter([(0, 1000), (2, 1000)]), t.STATEMENT: slow, t.DB_SETTING: settings})
    assert metric["db_time_s"] is None and metric["db_time_ratio"] is None
    assert "is a slow log: its shortest statement took 700.000 ms" in metric["unavailable_reason"]
    assert "long_query_time = 0.500000" in metric["unavailable_reason"]


def test_jmeter_without_timestamps_uses_totals() -> None:
    user = jmeter([(0, 400), (1, 600)]).with_columns(pl.lit(None, t.UTC_TIME).alias("start_ts"))
    metric, windows = time_accounting({t.LOAD_SAMPLE: user, t.STATEMENT: statements([("1", 0, 0.0002), ("1", 5, 0.0003)])})
    assert (metric["user_response_time_s"], metric["db_time_s"], metric["db_time_ratio"], windows) == (1.0, 0.0005, 0.0005, None)
    assert "without wall-clock times: assumed to cover the whole span of the DB side" in metric["alignment"]
    assert metric["sources"][0]["detail"].endswith("(2 samples, no timeStamp column)")


def test_tidb_statement_summary_as_db_time() -> None:
    summary = t.conform(t.STATEMENT_SUMMARY, pl.DataFrame({
        "digest": ["a", "b"], "exec_count": [1000, 10], "sum_latency_s": [1.5, 0.5],
        "first_seen": [T0, T0 + timedelta(seconds=30)], "last_seen": [T0 + timedelta(seconds=50), T0 + timedelta(seconds=40)],
        "source": "dashboard/statements.csv",
    }))
    metric, _ = time_accounting({t.LOAD_SAMPLE: jmeter([(1, 1000), (20, 1000), (45, 2000)]), t.STATEMENT_SUMMARY: summary})
    # overlap [1 s, 47 s): digest a (1.5 s over 0-50 s) keeps 46/50 of it, digest b (30-40 s) all of it
    assert metric["user_response_time_s"] == 4.0
    assert metric["db_time_s"] == pytest.approx(1.5 * 46 / 50 + 0.5)
    db = metric["sources"][1]
    assert db["kind"] == "statement-summary" and "2 digest rows" in db["detail"]


# ------------------------------------------------------------ metrics


def test_app_histogram_against_tidb_handle_query_duration() -> None:
    app = pl.concat([
        # 0 -> 30 -> 45 s of waiting users over 30 s, on /checkout; the scrape endpoint is ignored
        metric_samples("http_server_requests_seconds_sum", "method=POST,uri=/checkout", [100.0, 130.0, 145.0]),
        metric_samples("http_server_requests_seconds_sum", "method=GET,uri=/actuator/prometheus", [1.0, 500.0, 900.0]),
        metric_samples("http_server_requests_seconds_count", "method=POST,uri=/checkout", [10.0, 40.0, 55.0]),
    ])
    tidb = pl.concat([
        # 2 s then a restart (counter reset to 1.5) = 3.5 s; internal statements are left out
        metric_samples("tidb_server_handle_query_duration_seconds_sum", "sql_type=Select", [50.0, 52.0, 1.5]),
        metric_samples("tidb_server_handle_query_duration_seconds_sum", "sql_type=internal", [0.0, 100.0, 200.0]),
    ])
    metric, windows = time_accounting({t.METRIC_SAMPLE: pl.concat([app, tidb])})
    assert metric["user_response_time_s"] == pytest.approx(45.0)
    assert metric["db_time_s"] == pytest.approx(3.5)
    assert metric["db_time_ratio"] == pytest.approx(round(3.5 / 45, 4))
    user, db = (next(s for s in metric["sources"] if s["side"] == side) for side in ("user", "db"))
    assert user["kind"] == "app-latency-metric" and "Micrometer" in user["detail"]
    assert db["kind"] == "db-time-metric" and "QPS x average latency" in db["detail"]
    assert "tidb_server_handle_query_duration_seconds_count gives the QPS" in db["detail"]
    # increases count at the start of their scrape interval; 10 s windows widen to the 15 s scrape step
    assert metric["window_s"] == 15.0 and any("widened from 10 s to the 15 s" in n for n in metric["notes"])
    assert windows.rows() == [(T0, 30.0, 2.0, pytest.approx(2 / 30)), (T0 + timedelta(seconds=15), 15.0, 1.5, 0.1)]


def test_generic_app_family_but_not_database_families() -> None:
    metrics = pl.concat([
        metric_samples("checkout_request_latency_seconds_sum", "", [0.0, 20.0]),
        metric_samples("tikv_grpc_msg_duration_seconds_sum", "", [0.0, 900.0]),  # a database's: not the users'
        metric_samples("pg_stat_statements_seconds_total", "queryid=1", [10.0, 14.0]),
    ])
    metric, _ = time_accounting({t.METRIC_SAMPLE: metrics})
    assert (metric["user_response_time_s"], metric["db_time_s"], metric["db_time_ratio"]) == (20.0, 4.0, 0.2)


def test_mysql_exporter_qps_without_latency_is_said() -> None:
    metrics = pl.concat([
        metric_samples("http_request_duration_seconds_sum", "", [0.0, 20.0]),
        metric_samples("mysql_global_status_queries", "", [1000.0, 61000.0]),
    ])
    metric, _ = time_accounting({t.METRIC_SAMPLE: metrics})
    assert metric["db_time_ratio"] is None
    assert "mysql_global_status_queries gives the DB's QPS but no latency" in metric["unavailable_reason"]


# ------------------------------------------------------------ load tests without wall-clock time


def sysbench_run(**values) -> pl.DataFrame:
    base = {"run": 0, "tool": "sysbench", "threads": 2, "duration_s": 10.0, "transactions": 100, "queries": 400,
            "latency_avg_ms": 5.0, "latency_sum_ms": 500.0, "source": "app/sysbench.txt"}
    return t.conform(t.LOAD_RUN, pl.DataFrame([{**base, **values}]))


def test_load_run_matched_to_its_connections() -> None:
    # 2 sysbench connections with 200 statements each over 10 s, and an admin connection that is not counted
    rows = [(conn, 1 + i * 0.05, 0.001) for conn in ("5", "6") for i in range(200)] + [("9", 3, 0.2, "SHOW STATUS")]
    metric, windows = time_accounting({t.LOAD_RUN: sysbench_run(), t.STATEMENT: statements(rows)})
    assert metric["user_response_time_s"] == 0.5 and metric["db_time_s"] == pytest.approx(0.4)
    assert metric["db_time_ratio"] == pytest.approx(0.8) and windows is None
    assert "matched to the 2 connections with the most statements (5, 6: 400 statements; the run counted 400 queries)" in metric["alignment"]
    assert "1 statements of other connections" in metric["alignment"]
    assert metric["sources"][0] | {} == {"side": "user", "kind": "load-test-run", "source": "app/sysbench.txt",
                                         "detail": "sysbench latency sum (500.0 ms over 100 transactions)",
                                         "from": None, "to": None, "count": 100, "seconds": 0.5}


def test_load_run_without_connection_ids_takes_the_busiest_stretch() -> None:
    # a busy 10 s stretch (400 statements from 100 s) after a quiet hour of a few statements
    rows = [(None, float(i * 20), 0.0005) for i in range(5)] + [(None, 100 + i * 0.025, 0.001) for i in range(400)]
    metric, _ = time_accounting({t.LOAD_RUN: sysbench_run(), t.STATEMENT: statements(rows)})
    assert metric["db_time_s"] == pytest.approx(0.4)
    assert "stretch of the DB side with the most statements" in metric["alignment"]
    assert metric["from"] == (T0 + timedelta(seconds=100)).isoformat()


def test_load_run_with_a_sampled_log_is_not_matched() -> None:
    rows = [(None, 1 + i * 0.5, 0.0005) for i in range(20)]  # 20 statements where sysbench sent 400
    metric, _ = time_accounting({t.LOAD_RUN: sysbench_run(), t.STATEMENT: statements(rows)})
    assert metric["db_time_ratio"] is None
    assert "holds 20 statements where the load test sent 400" in metric["unavailable_reason"]


def test_pgbench_user_time_is_transactions_times_average() -> None:
    run = t.conform(t.LOAD_RUN, pl.DataFrame([{"run": 0, "tool": "pgbench", "threads": 1, "duration_s": 10.0,
                                               "transactions": 200, "latency_avg_ms": 2.5, "source": "pgbench.txt"}]))
    rows = [("1", 1 + i * 0.01, 0.001) for i in range(600)]
    metric, _ = time_accounting({t.LOAD_RUN: run, t.STATEMENT: statements(rows)})
    assert metric["user_response_time_s"] == 0.5 and metric["db_time_ratio"] == pytest.approx(1.2)
    assert metric["sources"][0]["detail"] == "pgbench transactions x latency average (200 x 2.5 ms)"


def test_pgbench_progress_timestamps_give_a_timed_user_side() -> None:
    # pgbench --progress-timestamp -P 5: 100 tps at 2 ms for 5 s = 1 s of waiting per line
    intervals = t.conform(t.LOAD_INTERVAL, pl.DataFrame({
        "run": 0, "tool": "pgbench", "ts": [T0 + timedelta(seconds=s) for s in (5, 10, 15, 20)],
        "tps": [100.0, 100.0, 100.0, 50.0], "latency_ms": 2.0, "source": "app/pgbench.txt",
    }))
    rows = [("1", i * 0.01, 0.0005) for i in range(3000)]  # the log runs from 0 to 30 s
    metric, windows = time_accounting({t.LOAD_INTERVAL: intervals, t.STATEMENT: statements(rows)})
    assert metric["sources"][0]["kind"] == "load-test-intervals"
    assert (metric["from"], metric["to"]) == (T0.isoformat(), (T0 + timedelta(seconds=20)).isoformat())  # line 1 covers 0-5 s
    assert metric["user_response_time_s"] == pytest.approx(3.5)
    assert metric["db_time_s"] == pytest.approx(2000 * 0.0005)  # statements started in [0, 20 s)
    # each line counts at its interval's start: 0 and 5 s in the first window, 10 and 15 s in the second
    assert windows["user_response_time_s"].to_list() == [pytest.approx(2.0), pytest.approx(1.5)]


def test_a_sampled_log_is_no_db_time_beside_timestamped_progress_lines() -> None:
    """The run counts what it sent even when its progress lines carry their times: 30 statements logged of the
    2,000 sent (log_statement_sample_rate = 0.015) are not the DB side, though all are sub-millisecond (issue 15's
    pair: a 1% sample made the database work "0.3% of the time users waited")."""
    intervals = t.conform(t.LOAD_INTERVAL, pl.DataFrame({
        "run": 0, "tool": "pgbench", "ts": [T0 + timedelta(seconds=s) for s in (5, 10)],
        "tps": [200.0, 200.0], "latency_ms": 2.0, "source": "app/pgbench.txt",
    }))
    run = t.conform(t.LOAD_RUN, pl.DataFrame([{"run": 0, "tool": "pgbench", "threads": 1, "duration_s": 10.0,
                                               "transactions": 2000, "latency_avg_ms": 2.0, "source": "app/pgbench.txt"}]))
    script = t.conform(t.LOAD_STATEMENT_LATENCY, pl.DataFrame({"run": [0], "script": ["lookup.sql"], "statement": ["SELECT 1;"],
                                                               "latency_ms": [2.0], "source": ["app/pgbench.txt"]}))
    rows = [("1", i * 0.33, 0.0005) for i in range(30)]
    metric, _ = time_accounting({t.LOAD_INTERVAL: intervals, t.LOAD_RUN: run, t.LOAD_STATEMENT_LATENCY: script, t.STATEMENT: statements(rows)})
    assert metric["db_time_ratio"] is None and metric["sources"][0]["kind"] == "load-test-intervals"
    assert "holds 30 statements where the load test sent 2,000: the log is sampled or filtered" in metric["unavailable_reason"]


# ------------------------------------------------------------ connection set-up


def pgbench_connect_run(**values) -> pl.DataFrame:
    """A pgbench -C run: 16 clients, 20 s, 2,798 transactions at 2.26 ms measured (-P) + 112.312 ms connecting."""
    base = {"run": 0, "tool": "pgbench", "threads": 16, "duration_s": 20.0, "transactions": 2798, "errors": 0,
            "tps": 139.395035, "latency_avg_ms": 2.26, "connect_avg_ms": 112.312, "latency_includes_connect": False,
            "source": "app/pgbench.txt"}
    return t.conform(t.LOAD_RUN, pl.DataFrame([{**base, **values}]))


def test_pgbench_connect_time_is_added_to_a_measured_latency() -> None:
    # the case: each transaction's connection through a proxy at its limit took 50x its statement
    metric, _ = time_accounting({t.LOAD_RUN: pgbench_connect_run()})
    assert metric["user_response_time_s"] == pytest.approx(2798 * (2.26 + 112.312) / 1000.0)
    assert metric["connection_time_s"] == pytest.approx(2798 * 112.312 / 1000.0)
    assert metric["connection_share_of_user_time"] == pytest.approx(112.312 / (2.26 + 112.312), abs=1e-4)
    assert (metric["connection_ms_per_transaction"], metric["connection_per_transaction"]) == (112.312, True)
    assert "outside its measured latency (added to it)" in metric["connection_detail"]


def test_pgbench_connect_time_already_in_a_computed_latency_is_not_added_twice() -> None:
    # without -P pgbench prints run time x clients / transactions: 146.637 ms holds the 138.582 ms of connecting
    run = pgbench_connect_run(transactions=691, duration_s=6.0, latency_avg_ms=146.637, connect_avg_ms=138.582,
                              latency_includes_connect=True)
    metric, _ = time_accounting({t.LOAD_RUN: run})
    assert metric["user_response_time_s"] == pytest.approx(691 * 146.637 / 1000.0)
    assert metric["connection_time_s"] == pytest.approx(691 * 138.582 / 1000.0)
    assert metric["connection_share_of_user_time"] == pytest.approx(138.582 / 146.637, abs=1e-4)
    assert "already in its latency average" in metric["connection_detail"]


def test_connection_per_transaction_run_counts_every_statement_not_the_busiest_connections() -> None:
    # 2,798 transactions of one statement each, every one on its own connection, over 20 s; pgbench -S
    # without -r says nothing of its queries. Matching the 16 busiest connections took 16 statements
    # (the "1% of the time users waited" headline); the run is all of them.
    rows = [(str(1000 + i), 5 + i * (20.0 / 2798), 0.0008) for i in range(2798)]
    rows += [("900", 1.0, 0.2, "CREATE DATABASE bench")]  # set-up long before: not the run's
    metric, _ = time_accounting({t.LOAD_RUN: pgbench_connect_run(), t.STATEMENT: statements(rows)})
    db = [s for s in metric["sources"] if s["side"] == "db"]
    assert [s["count"] for s in db] == [2798]
    assert metric["db_time_s"] == pytest.approx(2798 * 0.0008)
    assert "connections with the most statements" not in metric["alignment"]
    assert "every statement of that stretch counts" in metric["alignment"]


def test_connection_per_transaction_stretch_takes_in_its_edges() -> None:
    # the run's statements span a little more than the printed span (transactions / tps = 20.07 s): the
    # stretch finds all but one, and the last one, 10 ms after the others, is taken in
    rows = [(str(1000 + i), 5 + i * (20.2 / 2797), 0.0008) for i in range(2798)]
    metric, _ = time_accounting({t.LOAD_RUN: pgbench_connect_run(), t.STATEMENT: statements(rows)})
    assert [s["count"] for s in metric["sources"] if s["side"] == "db"] == [2798]
    assert "just after it continue it" in metric["alignment"]


def test_a_persistent_run_still_matches_its_connections() -> None:
    run = pgbench_connect_run(connect_avg_ms=None, latency_includes_connect=None, initial_connect_ms=10.0, threads=2,
                              transactions=200, latency_avg_ms=5.0)
    rows = [(conn, 1 + i * 0.05, 0.001) for conn in ("5", "6") for i in range(200)] + [("9", 3, 0.2, "SHOW STATUS")]
    metric, _ = time_accounting({t.LOAD_RUN: run, t.STATEMENT: statements(rows)})
    assert "matched to the 2 connections with the most statements" in metric["alignment"]
    assert metric["user_response_time_s"] == pytest.approx(200 * 0.005 + 2 * 0.010)
    assert metric["connection_per_transaction"] is False and metric["connection_ms_per_transaction"] is None


def test_jmeter_connect_is_part_of_elapsed() -> None:
    samples = jmeter([(i * 0.1, 50.0) for i in range(100)], connect_ms=[40.0] * 100)
    rows = [("1", i * 0.1, 0.0005) for i in range(100)]
    metric, _ = time_accounting({t.LOAD_SAMPLE: samples, t.STATEMENT: statements(rows)})
    assert metric["user_response_time_s"] == pytest.approx(5.0)  # Σ elapsed, the connect inside it
    assert metric["db_time_ratio"] == pytest.approx(0.01)
    assert metric["connection_time_s"] == pytest.approx(4.0) and metric["connection_share_of_user_time"] == 0.8
    assert metric["connection_ms_per_transaction"] == 40.0


def test_sysbench_prints_no_connection_time() -> None:
    metric, _ = time_accounting({t.LOAD_RUN: sysbench_run()})
    assert metric["connection_time_s"] is None and metric["connection_share_of_user_time"] is None


# ------------------------------------------------------------ real captures


def _parse(capture: str, members: dict[str, object]) -> dict[str, pl.DataFrame]:
    """Parse the named members (spec None: the best-detected registered parser) and merge their tables."""
    tables: dict[str, pl.DataFrame] = {}
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        for member, spec in members.items():
            text = tar.extractfile(member).read().decode("utf-8", "backslashreplace")
            name = member.rsplit("/", 1)[-1]
            spec = spec or max(PARSERS, key=lambda s: s.detect(text[:65536], name))
            for table, frame in spec.parse(text, ParseContext(source=member)).tables.items():
                tables[table] = pl.concat([tables[table], frame], how="diagonal_relaxed") if table in tables else frame
    return tables


def test_mariadb_sysbench_capture() -> None:
    """sysbench oltp_read_write, 8 threads at --rate=30 for 10 s, against MariaDB with long_query_time=0.

    User response time = sysbench's Latency "sum": 938.11 ms (295 transactions x 3.18 ms average).
    DB time = Σ Query_time of the 5,900 statements of the 8 sysbench connections (sysbench counted
    5,900 queries: the log holds every one): 0.537154 s. The 2 SHOW statements of the capture script
    (other connections, 0.012 s) are not the load test's.

    Ratio 0.5726: the server worked 1.82 ms of each 3.18 ms transaction. The other 1.36 ms are spent
    outside Query_time, over 20 round trips per transaction (BEGIN, 18 queries, COMMIT) on the Unix
    socket: about 68 µs each. Not CPU contention: the guest was idle (mpstat about 93% idle, perf
    90% of samples in pv_native_safe_halt), so each round trip pays the socket send and receive,
    the wake-up of the waiting server thread and then of the waiting sysbench thread on halted
    vCPUs, and sysbench's Lua/driver work; none of it is inside the server's Query_time. The
    --rate queue never built up (queue length 0), so no scheduling wait is in the latency.
    """
    tables = _parse("mariadb-sysbench-debian12.tar.gz", {
        "capture/app/sysbench-run.txt": sysbench.SPEC, "capture/db/mariadb-slow.log": None,
        "capture/db/global_variables.tsv": None,
    })
    metric, windows = time_accounting(tables)
    assert metric["user_response_time_s"] == pytest.approx(0.93811)
    assert metric["db_time_s"] == pytest.approx(0.537154)
    assert metric["db_time_ratio"] == 0.5726 and windows is None
    user, db = metric["sources"]
    assert user["detail"] == "sysbench latency sum (938.11 ms over 295 transactions)"
    assert db["detail"] == "Σ statement durations from capture/db/mariadb-slow.log (5,900 statements)"
    assert "8 connections with the most statements (6, 7, 8, 9, 10, 11, 12, 13: 5,900 statements; the run counted 5,900 queries)" in metric["alignment"]
    assert "2 statements of other connections in that span (0.012396 s)" in metric["alignment"]


def test_postgres_pgbench_capture() -> None:
    """pgbench TPC-B (sort of), 4 clients, -R about 32 tps, 10 s, against PostgreSQL with
    log_min_duration_statement=0.

    User response time = pgbench's transactions x latency average = 311 x 1.599 ms = 0.497289 s,
    plus its initial connection time, waited once by each client: 4 x 10.629 ms = 0.042516 s;
    0.539805 s in all.
    DB time = Σ ``duration:`` of the 2,177 statements of the 4 pgbench connections (311 x 7 script
    statements: the log holds every one) = 0.304365 s. The ``pgbench -i`` initialisation before the
    run (CREATE DATABASE, data load, 0.94 s) and pgbench's vacuum session are other connections and
    are not counted: summing the whole log would give 1.247 s, more than the users waited.

    Ratio 0.5638 (0.612 of the transactions' own latency): the server worked 0.98 ms of each 1.60 ms transaction. The rest: with -R, pgbench
    measures latency from the scheduled start, so the 0.135 ms average schedule lag is in it
    (311 x 0.135 = 42 ms); the remaining ~0.48 ms per transaction are 7 client round trips (about
    0.07 ms each, the in-transaction idle gap mean measured in test_derive_idle_gaps) outside the
    server's durations, on an idle guest (perf: 95% of samples in pv_native_safe_halt) where each
    round trip wakes the backend and then pgbench. pgbench -r agrees: its client-side statement latencies sum to 1.45 ms per
    transaction against 0.98 ms of server durations.
    """
    tables = _parse("postgres-pgbench-debian12.tar.gz", {
        "capture/app/pgbench.txt": pgbench.SPEC, "capture/db/postgresql.log": None,
    })
    metric, windows = time_accounting(tables)
    assert metric["user_response_time_s"] == pytest.approx(0.539805)
    assert metric["db_time_s"] == pytest.approx(0.304365)
    assert metric["db_time_ratio"] == 0.5638 and windows is None
    assert (metric["connection_time_s"], metric["connection_per_transaction"]) == (pytest.approx(0.042516), False)
    assert metric["connection_ms_per_transaction"] is None  # connected once per client, not per transaction
    assert tables[t.STATEMENT]["query_time_s"].sum() == pytest.approx(1.247283)  # the whole log, init included
    user, db = metric["sources"]
    assert user["detail"] == (
        "pgbench transactions x latency average (311 x 1.599 ms); connecting: pgbench initial connection time "
        "10.629 ms x 4 clients = 0.043 s (each client waited for it once; added)"
    )
    assert (db["count"], db["from"], db["to"]) == (2177, "2026-11-29T19:12:27.180883+00:00", "2026-11-29T19:12:37.133000+00:00")
    assert "the run sent 311 transactions x 7 SQL statements = 2,177" in metric["alignment"]
