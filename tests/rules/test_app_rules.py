"""The application-side rules: connection-ceiling, connection-pool-oversized, tail-latency-spikes, rate-limit-advice."""

from __future__ import annotations

import math
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.parsers import haproxy_stat, jmeter_jtl_csv, pgbench, sysbench
from dbdiag.parsers.base import ParseContext
from dbdiag.rules.app import connection_ceiling, connection_pool_oversized, rate_limit_advice, tail_latency_spikes
from dbdiag.rules.base import DOC_SECTIONS, RuleInput, split_doc_sections
from tests.rules.synthetic import rule_input, topology

APP_RULES = (connection_ceiling, connection_pool_oversized, tail_latency_spikes, rate_limit_advice)
LOADTEST = Path(__file__).resolve().parents[2] / "fixtures" / "loadtest"
T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)
TWO_RUNS = "sysbench-oltp_read_write-threads4-then-16.txt"


def _parsed(parser, path: Path, source: str) -> dict[str, pl.DataFrame]:
    return dict(parser.SPEC.parse(path.read_text(errors="backslashreplace"), ParseContext(source)).tables)


def _capture_member(corpus: Path, capture: str, member: str, parser) -> dict[str, pl.DataFrame]:
    with tarfile.open(corpus / "captures" / capture) as archive:
        text = archive.extractfile(member).read().decode()
    return dict(parser.SPEC.parse(text, ParseContext(member)).tables)


def _evidence(finding, title_start: str):
    return next(e for e in finding.evidence if e.title.startswith(title_start))


@pytest.mark.parametrize("module", APP_RULES, ids=lambda m: m.RULE.id)
def test_every_app_rule_documents_all_sections(module):
    sections = split_doc_sections(module.RULE.doc)
    for name in DOC_SECTIONS:
        assert sections.get(name), f"{module.RULE.id}: docstring lacks a non-empty '{name}:' section"


@pytest.mark.parametrize(
    ("module", "missing"),
    [
        (connection_ceiling, "proxy_stat or metric_sample"),
        (connection_pool_oversized, "load_run or load_interval or load_sample or metric_sample"),
        (tail_latency_spikes, "load_sample or statement or metric_sample or latency_histogram or load_interval"),
        (rate_limit_advice, "load_sample or load_run"),
    ],
    ids=["connection-ceiling", "connection-pool-oversized", "tail-latency-spikes", "rate-limit-advice"],
)
def test_missing_inputs_are_named(module, missing):
    outcome = run_rule(module.RULE, RuleInput(tables={}, derived={}, metrics={}))
    assert outcome.status is Status.SKIPPED
    assert outcome.missing == (missing,)


# ---- connection-pool-oversized -------------------------------------------------------------------


def _runs(levels: list[tuple[int, float, float]], test: str = "oltp_read_write") -> pl.DataFrame:
    return t.conform(
        t.LOAD_RUN,
        pl.DataFrame(
            [
                {"run": i, "tool": "sysbench", "test": test, "threads": th, "tps": tps, "latency_avg_ms": lat, "errors": 0, "source": "app/sb.txt"}
                for i, (th, tps, lat) in enumerate(levels)
            ]
        ),
    )


def _pool(levels, cpus: int | None = 2):
    tables = {t.LOAD_RUN: _runs(levels)}
    if cpus:
        tables[t.TOPOLOGY] = topology(cpus, 1)
    return run_rule(connection_pool_oversized.RULE, rule_input(tables))


def test_pool_real_sysbench_4_then_16_threads_on_2_cpus_fires():
    # By hand from the file: 4 threads 846.44 TPS avg 4.72 ms; 16 threads 960.81 TPS avg 16.61 ms.
    # 16 > 4 x 2 CPUs; gain 960.81/846.44 - 1 = 13.51%; over a 4x step: 13.51 / 3 = 4.50% <= 5%; latency x3.5.
    tables = _parsed(sysbench, LOADTEST / TWO_RUNS, f"app/{TWO_RUNS}")
    tables[t.TOPOLOGY] = topology(2, 1)
    outcome = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.WARNING
    assert "16 threads (8 per CPU) gave +13.5% TPS over 4 (4.5% marginal efficiency), latency x3.5" in finding.title
    assert "threshold 5% beyond 4x 2 CPUs = 8 threads" in finding.title
    assert finding.impact["marginal_efficiency_pct"] == pytest.approx(4.50, abs=0.01)
    assert finding.impact["recommended_pool"] == 5  # 2 CPUs x 2 + 1
    table = _evidence(finding, "sysbench")
    assert table.rows[0][:6] == (4, 2.0, 846.44, 4.72, 1, 0)
    assert table.rows[1][:6] == (16, 8.0, 960.81, 16.61, 1, 2)  # "ignored errors: 2"
    assert "maximumPoolSize=5" in finding.remediation
    assert "thread_pool_size=2" in finding.remediation
    assert finding.sources == (f"app/{TWO_RUNS}",)


def test_pool_real_sysbench_on_4_cpus_is_not_beyond_the_factor():
    tables = _parsed(sysbench, LOADTEST / TWO_RUNS, f"app/{TWO_RUNS}")
    tables[t.TOPOLOGY] = topology(4, 1)
    outcome = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert outcome.status is Status.PASSED  # 16 threads = 4 x 4 CPUs: not beyond
    assert "no level above 16 threads" in outcome.measured


def test_pool_flat_beyond_factor_fires_at_the_first_flat_step():
    outcome = _pool([(4, 1000.0, 4.0), (8, 1800.0, 4.4), (16, 2300.0, 7.0), (32, 2350.0, 13.6)])
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    # 16 vs 8: +27.8% over a doubling = 27.8% (scales); 32 vs 16: +2.17% = 2.17% (flat).
    assert finding.impact["marginal_efficiency_pct"] == pytest.approx(100 * (2350 / 2300 - 1), abs=0.01)
    assert "32 threads" in finding.title and "over 16" in finding.title


def test_pool_just_above_and_below_the_efficiency_threshold():
    # doubling 16 -> 32 on 2 CPUs: marginal efficiency = gain
    assert _pool([(16, 1000.0, 16.0), (32, 1055.0, 30.0)]).status is Status.PASSED  # 5.5%
    assert _pool([(16, 1000.0, 16.0), (32, 1050.0, 30.0)]).status is Status.FIRED  # 5.0%: at the threshold
    assert _pool([(16, 1000.0, 16.0), (32, 1049.0, 30.0)]).status is Status.FIRED  # 4.9%


def test_pool_flat_throughput_without_latency_rise_passes():
    assert _pool([(16, 1000.0, 16.0), (32, 1000.0, 15.0)]).status is Status.PASSED


def test_pool_falling_throughput_fires():
    outcome = _pool([(16, 1000.0, 16.0), (64, 800.0, 80.0)])
    assert outcome.status is Status.FIRED
    assert "-20.0% TPS" in outcome.findings[0].title


def test_pool_skips_name_what_is_missing():
    one_level = _pool([(16, 1000.0, 16.0)])
    assert one_level.status is Status.SKIPPED
    assert "one concurrency level" in one_level.missing[0] and "16 threads" in one_level.missing[0]
    no_cpus = _pool([(16, 1000.0, 16.0), (32, 1000.0, 30.0)], cpus=None)
    assert no_cpus.status is Status.SKIPPED
    assert "CPU count unknown" in no_cpus.missing[0] and "topology" in no_cpus.missing[0]


def test_pool_real_pgbench_two_runs_below_the_factor_passes():
    # pgbench -c 1 then -c 3 on 2 CPUs: 3 clients are not beyond 4 x 2 = 8, nothing judged.
    tables = _parsed(pgbench, LOADTEST / "pgbench-two-runs.txt", "app/pgbench.txt")
    tables[t.TOPOLOGY] = topology(2, 1)
    outcome = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert outcome.status is Status.PASSED
    assert "no level above 8 threads" in outcome.measured


def test_pool_jmeter_thread_steps_fire():
    rows = []
    # 10 s windows: 8 threads -> 500/s at 16 ms, 16 threads -> 510/s at 31 ms (2% on a doubling)
    for window, (threads, per_s, elapsed) in enumerate([(8, 50, 16.0), (16, 51, 31.0)]):
        for i in range(per_s * 10):
            rows.append({"start_ts": T0 + timedelta(seconds=10 * window + i / per_s), "elapsed_ms": elapsed, "label": "buy",
                         "success": True, "all_threads": threads, "source": "results.jtl"})
    tables = {t.LOAD_SAMPLE: t.conform(t.LOAD_SAMPLE, pl.DataFrame(rows)), t.TOPOLOGY: topology(2, 1)}
    outcome = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "JMeter results.jtl"
    assert finding.impact["throughput_gain_pct"] == pytest.approx(2.0, abs=0.01)


def _mysql_metrics(levels: list[tuple[int, float]], windows_per_level: int = 4) -> dict[str, pl.DataFrame]:
    """threads_running gauge and the questions counter every 10 s, each level held for a few windows.

    The counter at sample i has counted window i's queries, so the increase at i is window i's rate
    (the very first sample has no increase)."""
    running, questions, total = [], [], 1_000_000.0
    for threads, qps in levels:
        for _ in range(windows_per_level):
            running.append(threads)
            total += qps * 10
            questions.append(total)
    return _metrics(
        _series("mysql_global_status_threads_running", running, step_s=10),
        _series("mysql_global_status_questions", questions, step_s=10),
    )


def test_pool_from_metrics_threads_running_vs_questions():
    # 4 CPUs: 16 active -> 20,000 QPS; 32 active -> 20,400 QPS (+2% on a doubling); latency by Little's law 0.8 -> 1.57 ms
    tables = _mysql_metrics([(4, 8_000.0), (8, 15_000.0), (16, 20_000.0), (32, 20_400.0)])
    tables[t.TOPOLOGY] = topology(4, 1)
    outcome = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "mysql_global_status_threads_running vs QPS on db1:9104"
    table = _evidence(finding, "mysql_global_status_threads_running").rows
    assert [r[0] for r in table] == [4, 8, 16, 32]
    assert [r[2] for r in table] == [8000.0, 15000.0, 20000.0, 20400.0]
    assert table[-1][3] == pytest.approx(1000 * 32 / 20400, abs=0.001)
    assert finding.impact["throughput_gain_pct"] == pytest.approx(2.0, abs=0.01)


def test_pool_from_metrics_scaling_passes():
    tables = _mysql_metrics([(8, 10_000.0), (16, 19_000.0), (32, 30_000.0)])
    tables[t.TOPOLOGY] = topology(2, 1)
    assert run_rule(connection_pool_oversized.RULE, rule_input(tables)).status is Status.PASSED


# ---- connection-ceiling --------------------------------------------------------------------------


def _stat(snapshots: list[list[dict]]) -> pl.DataFrame:
    rows = []
    for snapshot, objects in enumerate(snapshots):
        for obj in objects:
            rows.append({"snapshot": snapshot, "ts": T0 + timedelta(seconds=10 * snapshot), "source": "proxy/show-stat.csv", **obj})
    return t.conform(t.PROXY_STAT, pl.DataFrame(rows))


def _frontend(scur: int, slim: int = 2000, smax: int | None = None) -> dict:
    return {"proxy": "mysql-in", "server": "FRONTEND", "type": "frontend", "scur": scur, "slim": slim, "smax": smax or scur, "stot": 10_000}


def _ceiling(tables: dict[str, pl.DataFrame]):
    return run_rule(connection_ceiling.RULE, rule_input(tables))


def _connect_run(connect_avg_ms: float | None = 105.011) -> pl.DataFrame:
    """pgbench -C through the proxy: 2,993 transactions, 2.232 ms measured + 105.011 ms connecting each."""
    return t.conform(t.LOAD_RUN, pl.DataFrame([{
        "run": 0, "tool": "pgbench", "threads": 16, "duration_s": 20.0, "transactions": 2993, "errors": 0, "tps": 148.73,
        "latency_avg_ms": 2.232, "connect_avg_ms": connect_avg_ms, "latency_includes_connect": False if connect_avg_ms else None,
        "source": "app/pgbench.txt",
    }]))


def _server_at_limit(qcur: int) -> list[list[dict]]:
    server = {"proxy": "be_pg", "server": "pg1", "type": "server", "scur": 2, "slim": 2, "smax": 2, "qcur": 0, "line": 16}
    backend = {"proxy": "be_pg", "server": "BACKEND", "type": "backend", "scur": 18, "slim": 26, "smax": 18, "qcur": qcur, "line": 17}
    return [[server, backend]] * 3


def test_ceiling_carries_the_users_wait_for_a_connection():
    outcome = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=16)), t.LOAD_RUN: _connect_run()})
    finding = outcome.findings[0]
    connect_s, user_s = 2993 * 105.011 / 1000.0, 2993 * (2.232 + 105.011) / 1000.0
    impact = finding.impact
    assert impact["user_time_s"] == pytest.approx(connect_s, abs=1e-5)
    assert impact["share_of_user_time"] == pytest.approx(connect_s / user_s, abs=1e-4)
    assert (impact["db_time_s"], impact["share_of_db_time"]) == (0.0, 0.0)
    assert finding.severity is Severity.CRITICAL  # most of the users' time
    assert f"users waited {connect_s:,.1f} s for a connection behind it (98% of their {user_s:,.1f} s, 105.0 ms per transaction)" in finding.title
    assert impact["limit_rows"] == {"pg1": "proxy/show-stat.csv:16"} and finding.sources[0] == "proxy/show-stat.csv:16"
    assert "(pg1: proxy/show-stat.csv:16)" in finding.remediation and "'server pg1 ... maxconn 4'" in finding.remediation
    assert _evidence(finding, "What the limit cost").rows[0] == ("time users waited for a connection (s)", impact["user_time_s"])


def _config(rows: list[tuple]) -> pl.DataFrame:
    """(section, proxy, keyword, server, args, maxconn, line) -> ``proxy_config`` rows."""
    columns = ("section", "proxy", "keyword", "server", "args", "maxconn", "line")
    return t.conform(t.PROXY_CONFIG, pl.DataFrame([dict(zip(columns, row)) for row in rows]).with_columns(source=pl.lit("app/haproxy.cfg")))


def test_ceiling_names_the_configuration_line_that_sets_the_limit():
    config = _config([
        ("defaults", None, "default-server", None, "maxconn 50", 50, 6),
        ("backend", "be_pg", "server", "pg1", "pg1 127.0.0.1:5432 maxconn 2", 2, 17),
    ])
    finding = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=16)), t.PROXY_CONFIG: config}).findings[0]
    assert finding.sources[0] == "app/haproxy.cfg:17" and finding.impact["limit_settings"] == {"pg1": "app/haproxy.cfg:17"}
    assert "Set at pg1: app/haproxy.cfg:17 'server pg1 127.0.0.1:5432 maxconn 2'." in finding.remediation
    # without its own maxconn the server takes the defaults' default-server one; a file that disagrees is said so
    fallback = _config([("defaults", None, "default-server", None, "maxconn 50", 50, 6),
                        ("backend", "be_pg", "server", "pg1", "pg1 127.0.0.1:5432", None, 17)])
    finding = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=16)), t.PROXY_CONFIG: fallback}).findings[0]
    assert "Set at pg1: app/haproxy.cfg:6 'default-server maxconn 50' (maxconn 50 there, 2 in show stat" in finding.remediation


def test_ceiling_without_a_queue_or_a_measured_connection_time_has_no_cost():
    queued_without_time = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=16)), t.LOAD_RUN: _connect_run(None)}).findings[0]
    at_limit_no_queue = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=0)), t.LOAD_RUN: _connect_run()}).findings[0]
    for finding in (queued_without_time, at_limit_no_queue):
        assert "user_time_s" not in finding.impact and finding.severity is Severity.WARNING
        assert "for a connection behind it" not in finding.title


def test_ceiling_snapshots_outside_the_run_explain_none_of_its_time():
    # the run was placed on the statement log an hour after the snapshots at the limit
    start = T0 + timedelta(hours=1)
    statements = t.conform(t.STATEMENT, pl.DataFrame({
        "conn_id": [str(1000 + i) for i in range(2993)],
        "start_ts": [start + timedelta(seconds=i * 20.0 / 2993) for i in range(2993)],
        "query_time_s": 0.0008, "sql": "SELECT 1", "source": "db/postgresql.log",
    }))
    outcome = _ceiling({t.PROXY_STAT: _stat(_server_at_limit(qcur=16)), t.LOAD_RUN: _connect_run(), t.STATEMENT: statements})
    assert "user_time_s" not in outcome.findings[0].impact


def test_ceiling_haproxy_frontend_at_maxconn_in_several_snapshots_fires():
    outcome = _ceiling({t.PROXY_STAT: _stat([[_frontend(2000)]] * 3)})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.WARNING
    assert finding.title.startswith("HAProxy frontend mysql-in: 2,000 sessions at its maxconn 2,000 in 3 of 3 snapshots")
    assert finding.subject == "mysql-in/FRONTEND"
    assert "threshold 99% of slim in 2 snapshots" in finding.title
    assert "'maxconn 4000' in frontend mysql-in (was 2000)" in finding.remediation
    assert "nbthread" in finding.remediation
    rows = _evidence(finding, "HAProxy show stat").rows
    assert [r[2] for r in rows] == [2000, 2000, 2000] and rows[0][1] == "2024-05-14T02:00:00Z"


def test_ceiling_just_under_99_percent_passes():
    # 99% of 2000 = 1980: 1979 is under, 1980 is at the limit.
    assert _ceiling({t.PROXY_STAT: _stat([[_frontend(1979)]] * 3)}).status is Status.PASSED
    assert _ceiling({t.PROXY_STAT: _stat([[_frontend(1980)]] * 3)}).status is Status.FIRED


def test_ceiling_one_snapshot_needs_a_queue():
    server = {"proxy": "db", "server": "tidb1", "type": "server", "scur": 500, "slim": 500, "smax": 500, "qcur": 0}
    backend = {"proxy": "db", "server": "BACKEND", "type": "backend", "scur": 500, "slim": 50, "smax": 500, "qcur": 0}
    quiet = _ceiling({t.PROXY_STAT: _stat([[server, backend]])})
    assert quiet.status is Status.PASSED  # the backend's slim is fullconn: not judged
    queued = _ceiling({t.PROXY_STAT: _stat([[server, {**backend, "qcur": 37}]])})
    assert queued.status is Status.FIRED
    finding = queued.findings[0]
    assert finding.subject == "db/tidb1"
    assert finding.title.startswith("HAProxy backend db: 1 of 1 servers at their maxconn 500 (500 in all) in 1 of 1 snapshots, up to 37 requests queued")
    assert "'server tidb1 ... maxconn 1000' for each server of backend db (was 500)" in finding.remediation


def test_ceiling_real_haproxy_sample_reports_past_peaks_as_info(corpus):
    # telegraf sample (one snapshot): smax == slim for http-in/FRONTEND (100/100), http-in/IPv6-direct (100/100),
    # www/www (20/20), www/bck (10/10), git/www (2/2); all with scur below the limit; git/BACKEND (smax 8 > slim 2)
    # is a backend (slim = fullconn) and is not judged.
    tables = _parsed(haproxy_stat, corpus / "haproxy" / "telegraf__sample_output.csv", "haproxy/show-stat.csv")
    outcome = _ceiling(tables)
    assert outcome.status is Status.FIRED
    assert len(outcome.findings) == 1
    finding = outcome.findings[0]
    assert finding.severity is Severity.INFO
    assert sorted(finding.impact["objects"]) == ["git/www", "http-in/FRONTEND", "http-in/IPv6-direct", "www/bck", "www/www"]
    assert "0 at 99% of their limit or more, 5 with smax >= slim" in outcome.measured


@pytest.mark.parametrize(
    ("name", "snapshots_at_limit"),
    [("haproxy-2.6__show_stat_ts.csv", "in 2 of 4 snapshots"), ("haproxy-2.6__show_stat_date.csv", "in 2 of 2 snapshots")],
)
def test_ceiling_real_haproxy_2_6_at_maxconn(name, snapshots_at_limit):
    # fixtures/dashboards/README.md: frontend fe_app maxconn 20 and servers maxconn 10 under 40 curl loops;
    # in the "date" capture the servers were lowered to maxconn 5 and the backend queued 10 requests.
    tables = _parsed(haproxy_stat, LOADTEST.parent / "dashboards" / name, f"proxy/{name}")
    outcome = _ceiling(tables)
    assert outcome.status is Status.FIRED
    titles = {f.subject: f.title for f in outcome.findings}
    assert set(titles) == {"fe_app/FRONTEND", "be_app"}
    assert titles["fe_app/FRONTEND"].startswith(f"HAProxy frontend fe_app: 20 sessions at its maxconn 20 {snapshots_at_limit}")
    servers = "HAProxy backend be_app: 2 of 2 servers at their maxconn {0} ({1} in all) " + snapshots_at_limit
    if name.endswith("date.csv"):  # servers lowered to 5 at runtime; the backend queued 10
        assert titles["be_app"].startswith(servers.format(5, 10) + ", up to 10 requests queued")
    else:
        assert titles["be_app"].startswith(servers.format(10, 20) + ";")


def test_ceiling_real_haproxy_2_6_after_the_load_is_history():
    tables = _parsed(haproxy_stat, LOADTEST.parent / "dashboards" / "haproxy-2.6__show_stat_plain.csv", "proxy/show-stat.csv")
    outcome = _ceiling(tables)
    assert [f.severity for f in outcome.findings] == [Severity.INFO]
    rows = outcome.findings[0].evidence[0].rows
    assert rows == (("be_app/app1", "server", 0, 10, 5, 0), ("be_app/app2", "server", 0, 10, 5, 0), ("fe_app/FRONTEND", "frontend", 0, 20, 20, None))


def test_ceiling_grafana_panel_series_named_after_instances():
    # A Grafana "Connection Count" panel export: series named after the TiDB instances, the panel in the file name.
    values = [1200, 1600, 2000, 2000, 2000, 2000, 2000, 2000, 2600]
    rows = _series("tidb-0:10080", values, source="grafana/Connection Count-data-as-joinbyfield-2024-05-14.csv")
    outcome = _ceiling(_metrics(rows))
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].subject == "tidb-0:10080 (Connection Count-data-as-joinbyfield-2024-05-14.csv)"
    latency = _series("tidb-0:10080", values, source="grafana/Connection Idle Duration-data.csv")
    assert _ceiling(_metrics(latency)).status is Status.SKIPPED  # a duration panel is not a connection count


def test_ceiling_limit_raised_during_the_capture_shows_the_demand_behind_it():
    # 3 snapshots at maxconn 2000, then a reload with maxconn 4000 and sessions climbing to 2,600
    snapshots = [[_frontend(2000)]] * 3 + [[_frontend(2300, slim=4000)], [_frontend(2600, slim=4000)]]
    outcome = _ceiling({t.PROXY_STAT: _stat(snapshots)})
    finding = outcome.findings[0]
    assert finding.title.startswith(
        "HAProxy frontend mysql-in: 2,000 sessions at its maxconn 2,000 in 3 of 5 snapshots; "
        "raised to 4,000 at 2024-05-14T02:00:30Z, after which sessions reached 2,600;"
    )
    assert finding.impact["limit"] == 2000
    assert "1. The limit was raised to 4,000 at 2024-05-14T02:00:30Z, and sessions then reached 2,600" in finding.remediation
    where = _evidence(finding, "Where the limit is set").rows[0]
    assert where[:5] == ("mysql-in/FRONTEND", 2000, 3, 2600, 4000)


def test_ceiling_skips_proxy_without_limits():
    backend = {"proxy": "db", "server": "BACKEND", "type": "backend", "scur": 5, "slim": 10, "smax": 10}
    outcome = _ceiling({t.PROXY_STAT: _stat([[backend]])})
    assert outcome.status is Status.SKIPPED
    assert "session limit" in outcome.missing[0]


def _series(metric: str, values: list[float], labels: str = "", step_s: int = 15, source: str = "prom/conn.json") -> list[dict]:
    return [{"ts": T0 + timedelta(seconds=step_s * i), "metric": metric, "labels": labels, "instance": "db1:9104",
             "value": float(v), "source": source} for i, v in enumerate(values)]


def _metrics(*series: list[dict]) -> dict[str, pl.DataFrame]:
    return {t.METRIC_SAMPLE: t.conform(t.METRIC_SAMPLE, pl.DataFrame([row for s in series for row in s]))}


HAPROXY_FLAT = [1200, 1500, 1800, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000, 2000]


def test_ceiling_round_plateau_then_rise_after_reconfiguration_fires():
    outcome = _ceiling(_metrics(_series("haproxy_frontend_current_sessions", HAPROXY_FLAT + [2600, 3100], "proxy=mysql")))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title.startswith("haproxy_frontend_current_sessions{proxy=mysql} flat at the round number 2,000 for 2.0 min (9 samples)")
    assert "rose to 3,100 afterwards" in finding.title
    plateau = _evidence(finding, "The plateau").rows[0]
    assert plateau[1:5] == (2000, "2024-05-14T02:00:45Z", "2024-05-14T02:02:45Z", 9)
    assert dict((r[0], r[2]) for r in _evidence(finding, "What grew").rows)["the same series after the plateau"] == "2024-05-14T02:03:00Z"


def test_ceiling_round_plateau_without_demand_passes():
    outcome = _ceiling(_metrics(_series("haproxy_frontend_current_sessions", HAPROXY_FLAT, "proxy=mysql")))
    assert outcome.status is Status.PASSED
    assert "plateau at 2,000 for 9 samples" in outcome.measured


def test_ceiling_round_plateau_with_queue_fires_and_odd_level_does_not():
    queue = _series("haproxy_backend_current_queue", [0, 0, 0, 0, 5, 40, 90, 120, 150, 170, 180, 190], "proxy=mysql")
    assert _ceiling(_metrics(_series("haproxy_frontend_current_sessions", HAPROXY_FLAT, "proxy=mysql"), queue)).status is Status.FIRED
    odd = [v - 1 if v == 2000 else v for v in HAPROXY_FLAT]  # 1999 is not a number anyone configures
    assert _ceiling(_metrics(_series("haproxy_frontend_current_sessions", odd, "proxy=mysql"), queue)).status is Status.PASSED


def test_ceiling_known_max_connections_fires_and_just_under_passes():
    limit = _series("mysql_global_variables_max_connections", [151] * 8, source="prom/vars.json")
    at = _ceiling(_metrics(_series("mysql_global_status_threads_connected", [90, 151, 151, 151, 151, 151, 151, 151]), limit))
    assert at.status is Status.FIRED
    finding = at.findings[0]
    assert "flat at its limit 151" in finding.title
    assert "mysql_global_variables_max_connections = 151 (prom/vars.json)" in finding.remediation
    assert finding.sources == ("prom/conn.json", "prom/vars.json")
    under = _ceiling(_metrics(_series("mysql_global_status_threads_connected", [90, 149, 149, 149, 149, 149, 149, 149]), limit))
    assert under.status is Status.PASSED  # 149 < 99% of 151 = 149.49, and 149 is not round


def test_ceiling_limit_from_the_engines_setting():
    settings = t.conform(t.DB_SETTING, pl.DataFrame([
        {"engine": "postgresql", "kind": "variable", "name": "max_connections", "value": "500", "source": "db/pg_settings.tsv"},
        {"engine": "mysql", "kind": "variable", "name": "max_connections", "value": "151", "source": "db/global_variables.tsv"},
    ]))
    tables = {**_metrics(_series("mysql_global_status_threads_connected", [90] + [151] * 7)), t.DB_SETTING: settings}
    outcome = _ceiling(tables)
    assert outcome.status is Status.FIRED
    assert "max_connections = 151 (db/global_variables.tsv)" in outcome.findings[0].remediation
    pg = {**_metrics(_series("pg_stat_activity_count", [90] + [151] * 7, "state=active")), t.DB_SETTING: settings}
    assert _ceiling(pg).status is Status.PASSED  # PostgreSQL's limit is 500; 151 is not round


def test_ceiling_short_plateau_passes():
    # four samples at the limit, 45 s: shorter than 5 samples and 60 s
    limit = _series("pg_settings_max_connections", [100] * 6)
    outcome = _ceiling(_metrics(_series("pg_stat_activity_count", [40, 100, 100, 100, 100, 60], "datname=app,state=active"), limit))
    assert outcome.status is Status.PASSED


def test_ceiling_plateau_needs_five_samples_as_well_as_a_minute():
    limit = _series("pg_settings_max_connections", [100] * 7, step_s=30)
    four = _series("pg_stat_activity_count", [40, 100, 100, 100, 100, 60, 60], "state=active", step_s=30)  # 90 s, 4 samples
    assert _ceiling(_metrics(four, limit)).status is Status.PASSED
    five = _series("pg_stat_activity_count", [40, 100, 100, 100, 100, 100, 60], "state=active", step_s=30)
    assert _ceiling(_metrics(five, limit)).status is Status.FIRED


def test_ceiling_pg_activity_is_summed_over_states():
    limit = _series("pg_settings_max_connections", [100] * 8)
    active = _series("pg_stat_activity_count", [10, 60, 60, 60, 60, 60, 60, 60], "datname=app,state=active")
    idle = _series("pg_stat_activity_count", [10, 40, 40, 40, 40, 40, 40, 40], "datname=app,state=idle")
    outcome = _ceiling(_metrics(active, idle, limit))
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].subject == "pg_stat_activity_count"


# ---- tail-latency-spikes ---------------------------------------------------------------------------


def _jmeter_windows(windows: list[list[float]], label: str = "buy") -> pl.DataFrame:
    rows = []
    for w, values in enumerate(windows):
        for i, elapsed in enumerate(values):
            rows.append({"start_ts": T0 + timedelta(seconds=10 * w + 9.0 * i / len(values)), "elapsed_ms": elapsed, "label": label,
                         "success": True, "all_threads": 8, "source": "results.jtl"})
    return t.conform(t.LOAD_SAMPLE, pl.DataFrame(rows))


def _window(base: float = 20.0, slow: float | None = None, n: int = 2000, slow_count: int = 3) -> list[float]:
    """n samples at ``base`` ms, the last ``slow_count`` at ``slow``: p99 = base, p999 = slow (linear ranks)."""
    values = [base] * n
    if slow is not None:
        values[-slow_count:] = [slow] * slow_count
    return values


def _tail(tables):
    return run_rule(tail_latency_spikes.RULE, rule_input(tables))


def test_tail_spike_window_fires_with_restart_next_to_it():
    event = t.conform(t.EVENT, pl.DataFrame([{"ts": T0 + timedelta(seconds=14), "component": "tikv", "kind": "start",
                                              "process": "tikv-server", "message": "Welcome to TiKV", "source": "log/tikv.log", "line": 10}]))
    outcome = _tail({t.LOAD_SAMPLE: _jmeter_windows([_window(), _window(slow=800.0), _window()]), t.EVENT: event})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title == (
        "JMeter label 'buy': p999 800 ms = 40.0x p99 (20.0 ms) in window 2024-05-14T02:00:10Z; threshold 10x p99 and 100 ms"
    )
    window = _evidence(finding, "JMeter label 'buy': windows").rows[0]
    assert window[:6] == ("2024-05-14T02:00:10Z", 2000, 20.0, 20.0, 800.0, None)  # p9999 needs 10,000 samples
    near = _evidence(finding, "What happened").rows
    assert near == (("2024-05-14T02:00:14Z", "event: start", "tikv tikv-server Welcome to TiKV", "log/tikv.log:10"),)
    assert "oom-restart" in finding.remediation
    assert finding.sources == ("log/tikv.log", "results.jtl")


def test_tail_just_under_the_factor_passes():
    assert _tail({t.LOAD_SAMPLE: _jmeter_windows([_window(slow=198.0)])}).status is Status.PASSED  # 9.9x
    assert _tail({t.LOAD_SAMPLE: _jmeter_windows([_window(slow=200.0)])}).status is Status.FIRED  # 10x


def test_tail_below_the_absolute_floor_passes():
    # 40x p99 but only 80 ms
    assert _tail({t.LOAD_SAMPLE: _jmeter_windows([_window(base=2.0, slow=80.0)])}).status is Status.PASSED


def test_tail_small_windows_are_judged_over_the_whole_capture():
    # 4 windows of 300 samples: no window reaches 1,000, the whole capture (1,200) does.
    windows = [_window(n=300), _window(n=300, slow=900.0, slow_count=2), _window(n=300), _window(n=300)]
    outcome = _tail({t.LOAD_SAMPLE: _jmeter_windows(windows)})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert "in the whole capture" in finding.title
    assert "judged over the whole capture (1,200 samples)" in finding.evidence[0].title


def test_tail_too_few_samples_skips_with_counts():
    outcome = _tail({t.LOAD_SAMPLE: _jmeter_windows([_window(n=300, slow=900.0)])})
    assert outcome.status is Status.SKIPPED
    assert "JMeter label 'buy': 300 samples" in outcome.missing[0]


def test_tail_many_one_off_labels_are_counted_in_one_pass_beside_a_judged_one():
    # 100,000 labels of one sample each (fuzzing: past 26 s, one loop step per label) beside one real label
    judged = _jmeter_windows([_window(slow=800.0)])
    one_offs = t.conform(t.LOAD_SAMPLE, pl.DataFrame({
        "start_ts": [T0] * 100_000, "elapsed_ms": [5.0] * 100_000, "label": [f"GET /item/{i}" for i in range(100_000)],
        "success": [True] * 100_000, "all_threads": [8] * 100_000, "source": ["results.jtl"] * 100_000}))
    outcome = _tail({t.LOAD_SAMPLE: pl.concat([judged, one_offs])})
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].title.startswith("JMeter label 'buy': p999 800 ms")
    assert "not judged: 100,000 JMeter labels under 1,000 samples each (100,000 samples)" in outcome.measured


def test_tail_real_jmeter_sample_is_too_small_for_p999(corpus):
    outcome = _tail(_parsed(jmeter_jtl_csv, corpus / "jmeter" / "jmeter__HTMLReportTestFile.csv", "jmeter/results.csv"))
    assert outcome.status is Status.SKIPPED
    assert "JMeter label 'JR-OK': 252 samples" in outcome.missing[0]


def test_tail_real_sysbench_histogram_passes_under_the_floor():
    # By hand from the histogram (4,857 events, nearest rank): p99 = 5.879 ms (rank 4,809), p999 = 45.793 ms
    # (rank 4,853): 7.8x and under 100 ms; p9999 is not judged below 10,000 events.
    name = "sysbench-oltp_read_only-histogram.txt"
    outcome = _tail(_parsed(sysbench, LOADTEST / name, f"app/{name}"))
    assert outcome.status is Status.PASSED
    assert f"sysbench histogram app/{name} run 0: 0 of 1 window(s) spiking, worst 7.8x p99" in outcome.measured


def test_tail_statements_with_plan_change_next_to_the_spike():
    rows = []
    for w in range(2):
        for i in range(1000):
            slow = w == 1 and i >= 998
            rows.append({"stmt_id": len(rows), "start_ts": T0 + timedelta(seconds=10 * w + i * 0.009),
                         "query_time_s": 0.9 if slow else 0.002, "digest": "d1",
                         "plan_digest": "p-scan" if slow else "p-index", "sql": "SELECT 1", "source": "db/tidb-slow.log", "line": len(rows) + 1})
    outcome = _tail({t.STATEMENT: t.conform(t.STATEMENT, pl.DataFrame(rows))})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "SQL statements (all)"
    near = _evidence(finding, "What happened").rows
    # the derived statements' fingerprint id (what the pipeline gives the rule), not the log's digest
    assert near[0][1] == "plan change" and near[0][2].startswith("fingerprint ") and ": new plan p-scan" in near[0][2]
    assert near[0][3] == "db/tidb-slow.log:1999"
    assert "CREATE GLOBAL BINDING" in finding.remediation


def _statement_windows(per_window: list[int], slow_in: int, slow_count: int = 2) -> dict[str, pl.DataFrame]:
    rows = []
    for w, n in enumerate(per_window):
        for i in range(n):
            slow = w == slow_in and i >= n - slow_count
            rows.append({"stmt_id": len(rows), "start_ts": T0 + timedelta(seconds=10 * w + i * 0.009),
                         "query_time_s": 0.9 if slow else 0.002, "sql": "SELECT 1", "source": "db/slow.log", "line": len(rows) + 1})
    return {t.STATEMENT: t.conform(t.STATEMENT, pl.DataFrame(rows))}


def test_tail_statements_in_small_windows_are_judged_over_the_whole_capture():
    # 4 windows of 300 statements: no window reaches 1,000, the whole capture (1,200) does. Its p999 (rank 1,198.8
    # of 1,200, 2 slow ones) is 0.9 s, 450x the p99 of 2 ms.
    outcome = _tail(_statement_windows([300, 300, 300, 300], slow_in=1))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "SQL statements (all)"
    assert "judged over the whole capture (1,200 samples)" in finding.evidence[0].title


def test_tail_too_few_statements_are_not_judged():
    outcome = _tail(_statement_windows([300, 300], slow_in=1))
    assert outcome.status is Status.SKIPPED
    assert "SQL statements (all): 600 samples" in outcome.missing[0]


def test_tail_metric_histogram_buckets():
    # Cumulative counters scraped every 10 s. Window 02:00:10: +1,990 <= 5 ms, +10 in (5, 10] ms: no spike.
    # Window 02:00:20: +1,997 <= 5 ms, +3 in (1, 2.5] s. p99 rank 1,980 -> 5 ms x 1980/1997 = 4.957 ms;
    # p999 rank 1,998 -> 1 s + 1.5 s x (1998 - 1997)/3 = 1,500 ms: 302.6x.
    buckets = {"0.005": [0, 1990, 3987], "0.01": [0, 2000, 3997], "1": [0, 2000, 3997], "2.5": [0, 2000, 4000], "+Inf": [0, 2000, 4000]}
    rows = []
    for le, counts in buckets.items():
        rows += _series("tidb_server_handle_query_duration_seconds_bucket", counts, f"le={le},sql_type=Select", step_s=10)
    outcome = _tail(_metrics(rows))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "tidb_server_handle_query_duration_seconds{sql_type=Select}"
    assert len(finding.evidence[0].rows) == 1
    window = finding.evidence[0].rows[0]
    assert window[0] == "2024-05-14T02:00:20Z on db1:9104" and window[1] == 2000
    assert window[3] == pytest.approx(5 * 1980 / 1997, abs=0.001)
    assert window[4] == pytest.approx(1500.0)
    assert window[6] == pytest.approx(302.6, abs=0.05)


def test_tail_histograms_of_instances_make_one_finding_and_idle_time_is_not_latency():
    buckets = {"0.005": [0, 1990, 3987], "0.01": [0, 2000, 3997], "1": [0, 2000, 3997], "2.5": [0, 2000, 4000], "+Inf": [0, 2000, 4000]}
    rows = []
    for instance in ("tidb-0:10080", "tidb-1:10080"):
        for le, counts in buckets.items():
            # labels carry the instance as Prometheus writes them (the parsers keep it in both places)
            duration = _series("tidb_server_handle_query_duration_seconds_bucket", counts, f"instance={instance},le={le}", step_s=10)
            idle = _series("tidb_server_conn_idle_duration_seconds_bucket", counts, f"in_txn=1,instance={instance},le={le}", step_s=10)
            rows += [{**r, "instance": instance} for r in duration + idle]
    outcome = _tail(_metrics(rows))
    assert [f.subject for f in outcome.findings] == ["tidb_server_handle_query_duration_seconds"]
    windows = [r[0] for r in outcome.findings[0].evidence[0].rows]
    assert sorted(windows) == ["2024-05-14T02:00:20Z on tidb-0:10080", "2024-05-14T02:00:20Z on tidb-1:10080"]
    assert "conn_idle" not in outcome.measured


def test_tail_progress_interval_spike_fires():
    intervals = t.conform(
        t.LOAD_INTERVAL,
        pl.DataFrame([{"run": 0, "tool": "sysbench", "offset_s": float(i + 1), "threads": 8, "tps": 900.0,
                       "latency_ms": lat, "latency_pct": 95.0, "source": "app/sb.txt"} for i, lat in enumerate([10.0, 11.0, 9.0, 250.0, 10.0])]),
    )
    outcome = _tail({t.LOAD_INTERVAL: intervals})
    assert outcome.status is Status.FIRED
    assert "interval latency 250 ms = 25.0x the run's median interval (10.0 ms)" in outcome.findings[0].title


# ---- rate-limit-advice -----------------------------------------------------------------------------


def _rate_windows(spec: list[tuple[int, float]], label: str = "buy") -> pl.DataFrame:
    """Per 10 s window: (requests per second, elapsed ms for every sample; the last 1% at 3x)."""
    rows = []
    for w, (per_s, elapsed) in enumerate(spec):
        n = per_s * 10
        for i in range(n):
            slow = i >= n - n // 100
            rows.append({"start_ts": T0 + timedelta(seconds=10 * w + i / per_s), "elapsed_ms": elapsed * (3 if slow else 1),
                         "label": label, "success": True, "source": "results.jtl"})
    return t.conform(t.LOAD_SAMPLE, pl.DataFrame(rows))


def _advice(tables):
    return run_rule(rate_limit_advice.RULE, rule_input(tables))


def test_rate_limit_from_best_healthy_window():
    # Window p99 (linear ranks, last 1% at 3x) = 1.02 x the base: 10.2 ms at 50/80/100 per s, 51 ms at 120/s;
    # median 10.2 ms, healthy <= 20.4 ms: capacity 100/s.
    samples = _rate_windows([(50, 10.0), (80, 10.0), (100, 10.0), (120, 50.0)])
    outcome = _advice({t.LOAD_SAMPLE: samples})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.INFO
    assert finding.impact["capacity_per_s"] == 100.0
    assert finding.impact["limit_per_s"] == 80.0  # 100 / 1.25
    rows = dict(_evidence(finding, "JMeter label 'buy'").rows)
    p999 = rows["P999 ms"]
    assert finding.impact["burst"] == math.ceil(80.0 * p999 / 1000.0)
    assert "limit_req_zone $server_name zone=rl_buy:1m rate=80r/s;" in finding.remediation
    assert f"limit_req zone=rl_buy burst={finding.impact['burst']} nodelay;" in finding.remediation
    assert "rule.setCount(80.0);" in finding.remediation
    assert "limitForPeriod(8).limitRefreshPeriod(Duration.ofMillis(100))" in finding.remediation
    assert "RateLimiter.create(80.0);" in finding.remediation
    assert finding.title.startswith("JMeter label 'buy': limit 80.0/s, burst")


def test_rate_limit_leaves_failed_samples_out():
    samples = _rate_windows([(50, 10.0), (80, 10.0), (100, 10.0)])
    errors = _rate_windows([(200, 1.0)]).with_columns(pl.lit(False).alias("success"), pl.lit("500").alias("response_code"))
    outcome = _advice({t.LOAD_SAMPLE: pl.concat([samples, errors])})
    finding = outcome.findings[0]
    assert finding.impact["capacity_per_s"] == 100.0  # not 250/s in the first window
    assert dict(_evidence(finding, "JMeter label 'buy'").rows)["failed samples (left out)"] == 2000


def test_rate_limit_healthy_boundary_is_two_times_the_median():
    # window p99 = 1.02 x base: median 10.2 ms, healthy up to 20.4 ms
    inside = _advice({t.LOAD_SAMPLE: _rate_windows([(50, 10.0), (60, 10.0), (70, 10.0), (120, 19.9)])})
    assert inside.findings[0].impact["capacity_per_s"] == 120.0  # 20.298 ms
    outside = _advice({t.LOAD_SAMPLE: _rate_windows([(50, 10.0), (60, 10.0), (70, 10.0), (120, 20.1)])})
    assert outside.findings[0].impact["capacity_per_s"] == 70.0  # 20.502 ms


def test_rate_limit_real_sysbench_two_runs():
    # Both runs are one test (oltp_read_write, from the file name): one 10 s window each.
    # 4 threads: mean interval TPS (805.03+759.11+918.88+829.50+919.41)/5 = 846.386, mean p95 9.662 ms
    # 16 threads: (842.47+955.86+953.31+1175.45+905.12)/5 = 966.442, mean p95 30.634 ms
    # median of the two windows' p95 = 20.148; both <= 40.3 ms -> capacity 966.442, limit 773.15,
    # burst = ceil(773.15 x 137.18 ms max of the 16-thread run) = ceil(106.06) = 107
    outcome = _advice(_parsed(sysbench, LOADTEST / TWO_RUNS, TWO_RUNS))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "sysbench oltp_read_write (4, 16 threads)"
    assert finding.impact["capacity_per_s"] == pytest.approx(966.44, abs=0.01)
    assert finding.impact["limit_per_s"] == pytest.approx(773.15, abs=0.01)
    assert finding.impact["burst"] == 107
    assert "rate=773r/s" in finding.remediation


def test_rate_limit_skips_small_labels():
    outcome = _advice({t.LOAD_SAMPLE: _rate_windows([(5, 10.0)])})  # 50 samples
    assert outcome.status is Status.SKIPPED
    assert "JMeter label 'buy': 50 samples" in outcome.missing[0]


def test_rate_limit_slow_types_get_per_minute_nginx_rates():
    # 120 samples from 02:00:00 to 02:01:59 + 500 ms: 120 / 119.5 s = 1.004/s; / 1.25 = 0.803/s = 48.2/min
    outcome = _advice({t.LOAD_SAMPLE: _rate_windows([(1, 500.0)] * 12, label="Monthly report")})
    finding = outcome.findings[0]
    assert finding.impact["capacity_per_s"] == pytest.approx(120 / 119.5, abs=0.01)
    assert "zone=rl_monthly_report:1m rate=48r/m;" in finding.remediation


# ---- the real captures: both load tests were held to a target rate ---------------------------------


def test_real_mariadb_capture_throttled_sysbench(corpus):
    # capture/app/sysbench-run.txt: "Target transaction rate: 30/sec", 8 threads, 29.43 TPS.
    tables = _capture_member(corpus, "mariadb-sysbench-debian12.tar.gz", "capture/app/sysbench-run.txt", sysbench)
    tables[t.TOPOLOGY] = topology(2, 1)
    advice = _advice(tables)
    assert advice.status is Status.SKIPPED
    assert "run 0 of capture/app/sysbench-run.txt was throttled (target rate 30/s)" in advice.missing[0]
    pool = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert pool.status is Status.SKIPPED and "held to a target rate (target rate 30/s)" in pool.missing[0]
    # the ten 99th-percentile progress values: median 4.295 ms, worst 8.13 ms = 1.9x
    tail = _tail(tables)
    assert tail.status is Status.PASSED
    assert "0 of 10 window(s) spiking, worst 1.9x the median interval" in tail.measured
    # its --histogram holds the run's 295 events: too few for a p999
    assert "not judged: sysbench histogram capture/app/sysbench-run.txt run 0: 295 events" in tail.measured


def test_real_postgres_capture_throttled_pgbench(corpus):
    tables = _capture_member(corpus, "postgres-pgbench-debian12.tar.gz", "capture/app/pgbench.txt", pgbench)
    advice = _advice(tables)
    assert advice.status is Status.SKIPPED
    assert "throttled (schedule lag printed (pgbench -R))" in advice.missing[0]


def test_rate_limit_fixture_with_rate_option_is_left_out():
    name = "sysbench-oltp_point_select-rate50.txt"
    outcome = _advice(_parsed(sysbench, LOADTEST / name, name))
    assert outcome.status is Status.SKIPPED
    assert "target rate 50/s" in outcome.missing[0]


def test_sysbench_host_benchmarks_are_not_transaction_types():
    tables = _parsed(sysbench, LOADTEST / "sysbench-cpu-two-runs-xtrace.txt", "app/sysbench-cpu.txt")
    tables[t.TOPOLOGY] = topology(2, 1)
    advice = _advice(tables)
    assert advice.status is Status.SKIPPED
    assert "run 0 of app/sysbench-cpu.txt is a sysbench host benchmark" in advice.missing[0]
    pool = run_rule(connection_pool_oversized.RULE, rule_input(tables))
    assert pool.status is Status.SKIPPED and "host benchmark" in pool.missing[0]
