"""Timeline: per-window throughput, gated latency percentiles, connections, CPU and events on one axis."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.time_accounting import time_accounting
from dbdiag.derive.timeline import QUANTILE_MIN_SAMPLES, timeline
from dbdiag.pipeline import analyze

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)  # an epoch multiple of 10 s


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def jmeter(rows: list[tuple[float, float, str]]) -> pl.DataFrame:
    """(start offset s, elapsed ms, label) -> ``load_sample`` rows."""
    return t.conform(t.LOAD_SAMPLE, pl.DataFrame({
        "start_ts": [at(s) for s, _, _ in rows], "elapsed_ms": [e for _, e, _ in rows], "label": [label for _, _, label in rows],
        "source": "app/results.jtl",
    }))


def series(metric: dict, name: str, source: str | None = None) -> dict:
    found = [s for s in metric["series"] if s["series"] == name and (source is None or s["source"] == source)]
    assert len(found) == 1, [(s["series"], s["source"]) for s in metric["series"]]
    return found[0]


def values(metric: dict, name: str, source: str | None = None) -> dict[str, float]:
    return {when: value for when, value in series(metric, name, source)["points"]}


def iso(seconds: float) -> str:
    return at(seconds).isoformat()


# ------------------------------------------------------------ windows and gating


def test_jmeter_windows_rates_and_quantile_gating() -> None:
    # window 0-10 s: 1,200 samples (p99 and p999 allowed, not p9999); window 10-20 s: 150 (p99 only);
    # window 20-30 s: 50 (p50 only), by the time each ended. Elapsed 1..n ms so quantiles are known.
    ends = [(i * 10 / 1200, float(i % 1000 + 1), "buy" if i % 3 else "browse") for i in range(1200)]
    ends += [(10 + i * 10 / 150, float(i + 1), "buy") for i in range(150)]
    ends += [(20 + i * 10 / 50, 5.0, "buy") for i in range(50)]
    rows = [(end - elapsed / 1000, elapsed, label) for end, elapsed, label in ends]
    table, metric = timeline({t.LOAD_SAMPLE: jmeter(rows)}, window_s=10.0, min_windows=1)
    assert metric["window_s"] == 10.0 and metric["from"] == iso(0) and metric["to"] == iso(30)
    assert values(metric, "tps") == {iso(0): 120.0, iso(10): 15.0, iso(20): 5.0}
    assert values(metric, "tps[browse]") == {iso(0): 40.0}
    assert values(metric, "tps[buy]") == {iso(0): 80.0, iso(10): 15.0, iso(20): 5.0}
    p99 = values(metric, "latency_p99")
    assert set(p99) == {iso(0), iso(10)}  # 50 samples are not enough for a p99
    assert p99[iso(10)] == pytest.approx(pl.Series(range(1, 151), dtype=pl.Float64).quantile(0.99, "linear"))
    assert set(values(metric, "latency_p999")) == {iso(0)}
    assert series(metric, "latency_p999")["suppressed_windows"] == 2
    p9999 = series(metric, "latency_p9999")
    assert p9999["points"] == [] and p9999["suppressed_windows"] == 3 and p9999["min_samples"] == 10_000
    assert values(metric, "latency_p50")[iso(20)] == 5.0
    # the long table holds only reported values, with what each is computed from
    rows_p999 = table.filter(pl.col("series") == "latency_p999")
    assert rows_p999["samples"].to_list() == [1200] and rows_p999["unit"].to_list() == ["ms"]
    assert table.schema["window_start"] == t.UTC_TIME


def test_jmeter_throughput_counts_the_samples_that_ended_in_a_window() -> None:
    # 10 threads in a closed loop of 500 ms samples (one ends every 50 ms); the file holds the rows written (at
    # each sample's end) from 10 s to 20 s, as a JTL cut from a longer test: 20 per second in each window. By
    # start time the first window would also count the samples started before 10 s, the last would miss those
    # that ended after 20 s.
    rows = [(start, 500.0, "x") for thread in range(10) for start in (k * 0.5 + thread * 0.05 + 0.01 for k in range(60))
            if 10.0 <= start + 0.5 < 20.0]
    _, metric = timeline({t.LOAD_SAMPLE: jmeter(rows)}, window_s=5.0, min_windows=1)
    assert values(metric, "tps") == {iso(10): 20.0, iso(15): 20.0}
    # cut at 15 s and 30 s against 10 s windows: the first window holds 5 s of the file, per second of those
    rows = [(start, 500.0, "x") for thread in range(10) for start in (k * 0.5 + thread * 0.05 + 0.01 for k in range(70))
            if 15.0 <= start + 0.5 < 30.0]
    _, metric = timeline({t.LOAD_SAMPLE: jmeter(rows)}, window_s=10.0, min_windows=1)
    assert values(metric, "tps") == {iso(10): pytest.approx(20.0, rel=0.01), iso(20): 20.0}


def test_minimum_samples_per_quantile() -> None:
    assert QUANTILE_MIN_SAMPLES == {"latency_p50": 2, "latency_p99": 100, "latency_p999": 1000, "latency_p9999": 10000}


def test_short_capture_gets_finer_windows_and_says_so() -> None:
    rows = [(i * 0.1, 2.0, "x") for i in range(120)]  # 12 s
    _, metric = timeline({t.LOAD_SAMPLE: jmeter(rows)}, window_s=10.0)
    assert metric["window_s"] == 1.0 and metric["requested_window_s"] == 10.0
    assert any("1 s windows instead of 10 s" in note for note in metric["notes"])
    assert set(values(metric, "tps").values()) == {10.0}


def test_long_capture_gets_coarser_windows() -> None:
    rows = [(0.0, 1.0, "x"), (86_400.0, 1.0, "x")]
    _, metric = timeline({t.LOAD_SAMPLE: jmeter(rows)}, window_s=10.0)
    assert metric["window_s"] == 80.0  # 10 x 2^3: the first doubling under 2,000 windows a day
    assert any("at most 2000 windows" in note for note in metric["notes"])


def test_nothing_with_a_clock_gives_nothing() -> None:
    assert timeline({}) == (None, None)
    untimed = t.conform(t.LOAD_SAMPLE, pl.DataFrame({"elapsed_ms": [1.0], "source": "a.jtl"}))
    assert timeline({t.LOAD_SAMPLE: untimed}) == (None, None)


# ------------------------------------------------------------ CPU alignment, events, proxies, metrics


def mpstat(rows: list[tuple[float, int, float, float, float]]) -> pl.DataFrame:
    """(report time s = interval end, cpu, %idle, %iowait, %soft) -> ``cpu_util`` rows."""
    return t.conform(t.CPU_UTIL, pl.DataFrame({
        "ts": [at(s) for s, *_ in rows], "cpu": [r[1] for r in rows], "idle_pct": [r[2] for r in rows],
        "iowait_pct": [r[3] for r in rows], "soft_pct": [r[4] for r in rows], "source": "os/mpstat.txt",
    }))


def test_cpu_reports_count_at_their_interval_start_on_the_same_axis() -> None:
    # reports every 5 s stamped at their interval's end: 5 s and 10 s measure window 0-10, 15 s and 20 s window 10-20
    cpu = mpstat([
        (5, -1, 50.0, 0.0, 5.0), (5, 0, 20.0, 10.0, 10.0), (5, 1, 90.0, 0.0, 0.0),
        (10, 0, 40.0, 0.0, 20.0), (10, 1, 90.0, 0.0, 0.0),
        (15, 0, 100.0, 0.0, 0.0), (15, 1, 0.0, 0.0, 50.0),
        (20, 0, 100.0, 0.0, 0.0), (20, 1, 20.0, 0.0, 30.0),
    ])
    samples = jmeter([(s, 1.0, "x") for s in (1.0, 11.0)])
    _, metric = timeline({t.CPU_UTIL: cpu, t.LOAD_SAMPLE: samples}, window_s=5.0, min_windows=1)
    # busy = 100 - idle - iowait; window 0-5 holds the 5 s report (CPU 0: 70, CPU 1: 10), the all row is not used
    busy = values(metric, "cpu_busy_mean")
    assert busy == {iso(0): 40.0, iso(5): 35.0, iso(10): 50.0, iso(15): 40.0}
    assert values(metric, "cpu_busy_max") == {iso(0): 70.0, iso(5): 60.0, iso(10): 100.0, iso(15): 80.0}
    assert values(metric, "cpu_soft_mean") == {iso(0): 5.0, iso(5): 10.0, iso(10): 25.0, iso(15): 15.0}
    assert values(metric, "cpu_soft_max")[iso(10)] == 50.0
    assert set(values(metric, "tps")) == {iso(0), iso(10)}  # the same windows as the CPU
    cpu_source = next(s for s in metric["sources"] if s["kind"] == "cpu-util")
    assert cpu_source["from"] == iso(0) and cpu_source["clock"] == "own" and cpu_source["clock_offset_s"] is None


def test_only_the_all_row_gives_the_mean_only() -> None:
    cpu = mpstat([(s, -1, 75.0, 5.0, 1.0) for s in range(1, 30)])
    _, metric = timeline({t.CPU_UTIL: cpu}, window_s=10.0, min_windows=1)
    assert set(values(metric, "cpu_busy_mean").values()) == {20.0}
    assert not [s for s in metric["series"] if s["series"] == "cpu_busy_max"]


def test_events_are_markers_and_counted_per_window() -> None:
    events = t.conform(t.EVENT, pl.DataFrame({
        "ts": [at(12), at(14), at(15)], "component": ["kernel", "tikv", "mysqld"], "kind": ["oom-kill", "start", "aborted-connection"],
        "process": ["tikv-server", "tikv-server", "mysqld"], "message": ["Killed process 7 (tikv-server)", "Welcome to TiKV", "Aborted"],
        "source": ["os/dmesg.txt", "db/tikv.log", "db/error.log"], "line": [3, 9, 1],
    }))
    samples = jmeter([(s, 1.0, "x") for s in range(0, 60)])
    table, metric = timeline({t.EVENT: events, t.LOAD_SAMPLE: samples}, window_s=10.0, min_windows=1)
    assert [(e["ts"], e["kind"], e["process"]) for e in metric["events"]] == [(iso(12), "oom-kill", "tikv-server"), (iso(14), "start", "tikv-server")]
    assert values(metric, "event[oom-kill]") == {iso(10): 1.0}
    assert "event[aborted-connection]" not in table["series"].to_list()


def test_haproxy_sessions_per_frontend_with_their_limit() -> None:
    snapshots = [(s, scur) for s, scur in ((0, 1990), (4, 2000), (12, 2000), (25, 2400))]
    rows = []
    for index, (s, scur) in enumerate(snapshots):
        rows.append({"snapshot": index, "ts": at(s), "proxy": "fe_db", "server": "FRONTEND", "type": "frontend", "scur": scur,
                     "slim": 2000 if s < 20 else 4000})
        rows.append({"snapshot": index, "ts": at(s), "proxy": "be_db", "server": "BACKEND", "type": "backend", "scur": 5, "slim": None})
    proxy = t.conform(t.PROXY_STAT, pl.DataFrame(rows).with_columns(source=pl.lit("proxy/stat.csv")))
    _, metric = timeline({t.PROXY_STAT: proxy}, window_s=10.0, min_windows=1)
    assert values(metric, "connections[fe_db]") == {iso(0): 2000.0, iso(10): 2000.0, iso(20): 2400.0}
    assert values(metric, "session_limit[fe_db]") == {iso(0): 2000.0, iso(10): 2000.0, iso(20): 4000.0}
    assert not [s for s in metric["series"] if "be_db" in s["series"]]


def metric_rows(metric: str, labels: str, values_: list[float], step_s: float = 15.0) -> pl.DataFrame:
    return t.conform(t.METRIC_SAMPLE, pl.DataFrame({
        "ts": [at(step_s * i) for i in range(len(values_))], "metric": metric, "labels": labels, "value": [float(v) for v in values_],
        "source": f"metrics/{metric}.json",
    }))


def test_counter_rates_and_histogram_quantiles_from_metrics() -> None:
    # 15 s scrapes: query counter +3,000 per scrape (200/s) on two instances; internal statements left out
    count = pl.concat([
        metric_rows("tidb_server_handle_query_duration_seconds_count", "instance=a,sql_type=Select", [0, 3000, 6000, 9000]),
        metric_rows("tidb_server_handle_query_duration_seconds_count", "instance=b,sql_type=Select", [0, 3000, 6000, 9000]),
        metric_rows("tidb_server_handle_query_duration_seconds_count", "instance=a,sql_type=internal", [0, 9e6, 18e6, 27e6]),
    ])
    # per scrape: 1,000 observations under 1 ms, 900 more under 2 ms, 100 more under 4 ms -> 2,000 per scrape
    buckets = pl.concat([
        metric_rows("tidb_server_handle_query_duration_seconds_bucket", f"le={le}", [c * i for i in range(4)])
        for le, c in (("0.001", 1000), ("0.002", 1900), ("0.004", 2000), ("+Inf", 2000))
    ])
    connections = metric_rows("tidb_server_connections", "instance=a", [100, 120, 140, 130])
    _, metric = timeline({t.METRIC_SAMPLE: pl.concat([count, buckets, connections])}, window_s=10.0, min_windows=1)
    qps = series(metric, "qps")
    assert qps["source"] == "metrics/tidb_server_handle_query_duration_seconds_count.json (tidb_server_handle_query_duration_seconds_count)"
    # increases begin at 0, 15 and 30 s: windows 0, 10 and 30 (none begins in 20-30)
    assert dict(qps["points"]) == {iso(0): 400.0, iso(10): 400.0, iso(30): 400.0}
    p99 = dict(series(metric, "latency_p99")["points"])
    assert p99[iso(0)] == pytest.approx(2.0 + 2.0 * (0.99 * 2000 - 1900) / 100)  # ms, inside (2, 4]
    p999 = dict(series(metric, "latency_p999")["points"])
    assert p999[iso(0)] == pytest.approx(2.0 + 2.0 * (0.999 * 2000 - 1900) / 100)
    assert series(metric, "latency_p9999")["suppressed_windows"] == 3  # 2,000 observations per window
    assert dict(series(metric, "connections[tidb_server_connections]")["points"]) == {
        iso(0): 100.0, iso(10): 120.0, iso(30): 140.0, iso(40): 130.0}


# ------------------------------------------------------------ clock-less load tests


def sysbench_intervals(tps: list[float]) -> pl.DataFrame:
    return t.conform(t.LOAD_INTERVAL, pl.DataFrame({
        "run": 0, "tool": "sysbench", "offset_s": [float(i + 1) for i in range(len(tps))], "threads": 8, "tps": tps,
        "qps": [v * 20 for v in tps], "latency_ms": 5.0, "latency_pct": 95.0, "source": "app/sysbench.txt",
    }))


def test_clockless_run_placed_where_time_accounting_placed_it() -> None:
    accounting = {
        "from": iso(3.5), "alignment": "sysbench prints no wall-clock time: its 8 threads were matched to ...", "run_placed": True,
        "sources": [{"side": "user", "kind": "load-test-run", "from": None}, {"side": "db", "kind": "statement-log", "from": iso(3.5)}],
    }
    intervals = sysbench_intervals([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 110.0, 120.0])
    _, metric = timeline({t.LOAD_INTERVAL: intervals}, window_s=10.0, accounting=accounting)
    assert metric["window_s"] == 1.0
    # line "1s" covers 3.5-4.5 s: window 3; each line's transactions land in the window where its interval began
    assert values(metric, "tps") == {iso(3 + i): 10.0 * (i + 1) for i in range(12)}
    assert values(metric, "qps")[iso(3)] == 200.0
    assert values(metric, "latency_p95_reported")[iso(3)] == 5.0
    source = metric["sources"][0]
    assert source["clock"] == "placed" and source["clock_offset_s"] is None and source["from"] == iso(3.5)
    assert "placed at " + iso(3.5) in source["note"]


def test_clockless_run_without_placement_is_left_out_and_said() -> None:
    intervals = sysbench_intervals([10.0, 20.0])
    samples = jmeter([(s, 1.0, "x") for s in range(30)])
    _, metric = timeline({t.LOAD_INTERVAL: intervals, t.LOAD_SAMPLE: samples}, window_s=10.0, min_windows=1)
    assert not [s for s in metric["sources"] if s["kind"] == "load-test-intervals"]
    assert any("were not placed" in note for note in metric["notes"])


def test_slow_log_statements_are_named_logged() -> None:
    statements = t.conform(t.STATEMENT, pl.DataFrame({
        "stmt_id": list(range(40)), "start_ts": [at(i) for i in range(40)], "end_ts": [at(i + 0.5) for i in range(40)],
        "query_time_s": 0.5, "conn_id": "1", "source": "db/slow.log",
    }))
    _, metric = timeline({t.STATEMENT: statements}, window_s=10.0, min_windows=1)
    assert values(metric, "logged_qps") == {iso(w): 1.0 for w in (0, 10, 20, 30)}
    assert series(metric, "logged_latency_p50")["note"].startswith("statements in the log only")
    assert any("slow log" in note for note in metric["notes"])


# ------------------------------------------------------------ real captures


@pytest.fixture(scope="module")
def mariadb(corpus):
    return analyze(corpus / "captures" / "mariadb-sysbench-debian12.tar.gz")


@pytest.fixture(scope="module")
def postgres(corpus):
    return analyze(corpus / "captures" / "postgres-pgbench-debian12.tar.gz")


def test_mariadb_capture_on_one_axis(mariadb) -> None:
    """sysbench (8 threads, --rate=30, 10 s, --report-interval=1) placed by its 8 connections on the slow log.

    The slow log (long_query_time=0) starts at 19:12:14 (MariaDB stamps the start's second); sysbench's interval lines sum to
    294.97 transactions (its summary: 295) and 5,899.22 queries (5,900). mpstat's report at
    19:12:15 (CPU 0 90.10% idle, CPU 1 96.94%) measured 19:12:14-15: busy 9.90 and 3.06, mean 6.48.
    """
    accounting, _ = time_accounting(mariadb.tables)
    table, metric = timeline(mariadb.tables, 10.0, accounting)
    assert metric["window_s"] == 1.0
    assert sum(values(metric, "tps", "capture/app/sysbench-run.txt").values()) == pytest.approx(294.97)
    assert sum(values(metric, "qps", "capture/app/sysbench-run.txt").values()) == pytest.approx(5899.22)
    assert values(metric, "tps", "capture/app/sysbench-run.txt")["2026-11-29T19:12:14+00:00"] == 24.95  # the "1s" line
    statements = table.filter((pl.col("series") == "qps") & (pl.col("source") == "capture/db/mariadb-slow.log"))
    assert statements["samples"].sum() == 5902  # every statement, the 2 of the capture script included
    assert values(metric, "cpu_busy_mean")["2026-11-29T19:12:14+00:00"] == pytest.approx(6.48)
    assert values(metric, "cpu_busy_max")["2026-11-29T19:12:14+00:00"] == pytest.approx(9.90)
    kinds = {s["source"]: (s["kind"], s["clock"]) for s in metric["sources"]}
    assert kinds == {
        "capture/app/sysbench-run.txt": ("load-test-intervals", "placed"), "capture/db/mariadb-slow.log": ("statement-log", "own"),
        "capture/os/mpstat.json": ("cpu-util", "own"), "capture/db/mariadb-error.log": ("events", "own"),
    }
    assert [e["kind"] for e in metric["events"]] == ["start"]
    assert any("resolution of 1 s" in note for note in metric["notes"])
    assert not values(metric, "latency_p999")  # 590 statements a second: never 1,000 in a 1 s window


def test_postgres_capture_on_one_axis(postgres) -> None:
    """pgbench (4 clients, -P 1, 10 s): 9 progress lines (TPS 36, 28, ...) placed at 19:12:27.180883, the
    first statement of its 4 connections; PostgreSQL's log has ms times: every statement counted."""
    accounting, _ = time_accounting(postgres.tables)
    _, metric = timeline(postgres.tables, 10.0, accounting)
    tps = values(metric, "tps", "capture/app/pgbench.txt")
    assert list(tps.items())[:2] == [("2026-11-29T19:12:27+00:00", 36.0), ("2026-11-29T19:12:28+00:00", 28.0)]
    assert sum(tps.values()) == 282.0  # 9 whole seconds of the 311 transactions
    assert sum(p[1] for p in series(metric, "qps", "capture/db/postgresql.log")["points"]) == 2254
    assert set(values(metric, "latency_avg")) == set(tps)
    assert not any("resolution" in note for note in metric["notes"])
