"""bottleneck-outside-database, oom-restart and load-test-inflation on hand-built inputs and real captures."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.pipeline import analyze
from dbdiag.rules.base import RuleInput
from dbdiag.rules.loadtest import load_test_inflation
from dbdiag.rules.time import bottleneck_outside_database as bottleneck
from dbdiag.rules.time import oom_restart

T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def _accounting(user_s: float, db_s: float) -> dict:
    return {
        "user_response_time_s": user_s, "db_time_s": db_s, "db_time_ratio": db_s / user_s, "window_s": 10.0,
        "sources": [
            {"side": "user", "kind": "app-latency-metric", "detail": "increase of http_server_requests_seconds_sum",
             "source": "metrics/app.json", "from": "2024-05-14T02:00:00", "to": "2024-05-14T02:01:00"},
            {"side": "db", "kind": "db-time-metric", "detail": "increase of tidb_server_handle_query_duration_seconds_sum",
             "source": "metrics/tidb.json", "from": "2024-05-14T02:00:00", "to": "2024-05-14T02:01:00"},
        ],
        "windows": [{"window_start": "2024-05-14T02:00:00", "user_response_time_s": user_s / 6, "db_time_s": db_s / 6, "ratio": db_s / user_s}],
    }


def _gaps(idle_p80: float, sql_p80: float, count: int = 1000) -> dict:
    stats = lambda p80: {"count": count, "p50_ms": p80 / 2, "p80_ms": p80, "p99_ms": p80 * 3}  # noqa: E731
    return {"in_txn": stats(idle_p80), "not_in_txn": stats(idle_p80 * 10), "sql_latency": stats(sql_p80), "method": "statements"}


def _metrics_input(metrics: dict) -> RuleInput:
    tables = {t.METRIC_SAMPLE: t.conform(t.METRIC_SAMPLE, pl.DataFrame({"metric": ["x"], "value": [1.0], "source": ["m.json"]}))}
    return RuleInput(tables=tables, derived={}, metrics=metrics)


def test_db_time_thirteen_percent_of_user_time_is_critical():
    outcome = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _accounting(18_000.0, 2_340.0)}))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL
    assert "the database worked 13% of the time users waited (2,340.0 s of 18,000.0 s); threshold 30%" in finding.title
    assert finding.impact["outside_share_pct"] == 87.0 and finding.impact["db_time_ratio"] == 0.13
    assert "softirq-concentration" in finding.impact["see_also"]


def test_db_share_just_under_and_over_threshold():
    under = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _accounting(1000.0, 299.0)}))
    assert under.status is Status.FIRED and under.findings[0].severity is Severity.WARNING
    over = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _accounting(1000.0, 300.0)}))
    assert over.status is Status.PASSED and "30.0%" in over.measured


def _connecting(user_s: float, db_s: float, connect_s: float, per_txn_ms: float | None = 112.312) -> dict:
    return {**_accounting(user_s, db_s), "connection_time_s": connect_s, "connection_share_of_user_time": round(connect_s / user_s, 4),
            "connection_ms_per_transaction": per_txn_ms, "connection_per_transaction": per_txn_ms is not None,
            "connection_detail": "pgbench -C: average connection time 112.312 ms x 2,798 transactions = 314.249 s"}


def test_connecting_dominates_fires_with_its_numbers():
    # a pgbench -C run where the database did 40% of the waiting (not under 30%) but connecting took 55%
    outcome = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _connecting(1000.0, 400.0, 550.0)}))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL
    # 550 s of connecting / 112.312 ms = 4,897 transactions, 450 s / 4,897 = 91.9 ms of their own: not twice, no factor
    assert finding.title.startswith("Bottleneck outside the database: connecting took 112.3 ms per transaction, "
                                    "55% of the time users waited (550.0 s of 1,000.0 s)")
    assert "threshold 50%" in finding.title and "the database worked" not in finding.title
    impact = finding.impact
    assert (impact["user_time_s"], impact["share_of_user_time"], impact["db_time_s"], impact["share_of_db_time"]) == (600.0, 0.6, 0.0, 0.0)
    assert (impact["measured_user_time_s"], impact["measured_db_time_s"]) == (1000.0, 400.0)
    assert impact["connection_time_s"] == 550.0 and impact["connection_ms_per_transaction"] == 112.312
    rows = dict(finding.evidence[0].rows)
    assert rows["of which connecting (s)"] == 550.0 and rows["connecting / user response time"] == "55.0%"
    assert finding.remediation.startswith("0. Connecting is the cost (112.3 ms per transaction)")


def test_connecting_just_under_half_passes():
    outcome = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _connecting(1000.0, 400.0, 499.0)}))
    assert outcome.status is Status.PASSED and "connecting 49.9% of user response time" in outcome.measured


def test_low_db_share_carries_the_user_time_outside_the_database():
    finding = run_rule(bottleneck.RULE, _metrics_input({"time_accounting": _accounting(1000.0, 100.0)})).findings[0]
    assert (finding.impact["user_time_s"], finding.impact["share_of_user_time"]) == (900.0, 0.9)
    assert "connection_time_s" not in finding.impact and not finding.remediation.startswith("0.")


def test_idle_gaps_several_times_sql_latency_fire_alone():
    outcome = run_rule(bottleneck.RULE, _metrics_input({"idle_gaps": _gaps(25.0, 3.84)}))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert "in-transaction idle p80 25.0 ms is 6.5x the SQL p80 3.84 ms; threshold 3x" in finding.title
    assert finding.severity is Severity.CRITICAL
    gaps = next(e for e in finding.evidence if e.title.startswith("Idle gaps"))
    assert gaps.rows[0] == ("idle inside transactions", 1000, 12.5, 25.0, 75.0)


def test_idle_gaps_under_factor_or_too_few_pass():
    assert run_rule(bottleneck.RULE, _metrics_input({"idle_gaps": _gaps(11.0, 3.84)})).status is Status.PASSED
    few = run_rule(bottleneck.RULE, _metrics_input({"idle_gaps": _gaps(25.0, 3.84, count=bottleneck.MIN_GAPS - 1)}))
    assert few.status is Status.PASSED


def test_no_accounting_and_no_gaps_is_skipped():
    outcome = run_rule(bottleneck.RULE, _metrics_input({}))
    assert outcome.status is Status.SKIPPED and "load test" in outcome.missing[0]


# --- oom-restart -----------------------------------------------------------------------------


def _events(rows: list[dict], with_statements: bool = True) -> RuleInput:
    tables = {t.EVENT: t.conform(t.EVENT, pl.DataFrame(rows))}
    if with_statements:
        starts = [T0 + timedelta(seconds=s / 10) for s in range(0, 1200)]
        tables[t.STATEMENT] = t.conform(t.STATEMENT, pl.DataFrame({
            "start_ts": starts, "query_time_s": [0.002 if s < T0 + timedelta(seconds=60) else 0.020 for s in starts],
            "source": "slow.log",
        }))
    return RuleInput(tables=tables, derived={}, metrics={})


def test_oom_kill_of_tikv_is_critical_with_latency_before_and_after():
    inp = _events([{
        "ts": T0 + timedelta(seconds=60), "component": "kernel", "kind": "oom-kill", "process": "tikv-server", "pid": 4321,
        "message": "Out of memory: Killed process 4321 (tikv-server)", "source": "os/dmesg.txt", "line": 812,
    }])
    outcome = run_rule(oom_restart.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL and finding.title == "tikv-server was killed by the OOM killer during the capture"
    around = finding.evidence[1]
    assert around.rows[0][2:] == (10.0, 2.0, 10.0, 20.0)
    assert finding.sources == ("os/dmesg.txt:812",)


def test_start_outside_the_capture_window_and_other_processes_pass():
    inp = _events([
        {"ts": T0 - timedelta(days=3), "component": "tidb", "kind": "start", "process": "tidb-server", "source": "tidb.log", "line": 1},
        {"ts": T0 + timedelta(seconds=30), "component": "kernel", "kind": "oom-kill", "process": "java", "source": "dmesg", "line": 5},
    ])
    outcome = run_rule(oom_restart.RULE, inp)
    assert outcome.status is Status.PASSED and outcome.measured.startswith("0 database/proxy event(s) of 2 read")


def test_restart_inside_the_window_is_a_warning():
    inp = _events([
        {"ts": T0 + timedelta(seconds=80), "component": "tikv", "kind": "shutdown", "process": "tikv-server", "source": "tikv.log", "line": 8},
        {"ts": T0 + timedelta(seconds=90), "component": "tikv", "kind": "start", "process": "tikv-server", "source": "tikv.log", "line": 9},
    ])
    finding = run_rule(oom_restart.RULE, inp).findings[0]
    assert finding.severity is Severity.WARNING and finding.title == "tikv-server restarted during the capture"


def test_a_log_that_begins_with_the_server_starting_is_no_incident():
    inp = _events([{"ts": T0 + timedelta(seconds=1), "component": "postgres", "kind": "start", "process": "postgres", "source": "pg.log", "line": 4}])
    outcome = run_rule(oom_restart.RULE, inp)
    assert outcome.status is Status.PASSED


# --- load-test-inflation -------------------------------------------------------------------------


def _jmeter(labels: list[str], pause_ms: float, seconds: int, threads: int = 4, failed_every: int = 0) -> RuleInput:
    rows = []
    for thread in range(threads):
        at = T0
        n = 0
        while at < T0 + timedelta(seconds=seconds):
            rows.append({
                "start_ts": at, "elapsed_ms": 100.0, "label": labels[n % len(labels)], "thread_name": f"tg 1-{thread}",
                "success": not (failed_every and n % failed_every == 0), "all_threads": threads, "source": "results.jtl",
            })
            at += timedelta(milliseconds=100 + pause_ms)
            n += 1
    return RuleInput(tables={t.LOAD_SAMPLE: t.conform(t.LOAD_SAMPLE, pl.DataFrame(rows))}, derived={}, metrics={})


def test_single_label_without_think_time_fires():
    outcome = run_rule(load_test_inflation.RULE, _jmeter(["transfer"], pause_ms=0.0, seconds=30))
    assert outcome.status is Status.FIRED
    problems = dict(outcome.findings[0].evidence[0].rows)
    assert problems["one transaction type"].endswith("is 'transfer'")
    assert problems["no think time"].startswith("median pause between a thread's samples 0.0 ms")
    assert "too short" in problems and "no ramp-up" in problems


def test_mixed_long_test_with_think_time_passes():
    inp = _jmeter(["query", "update", "report"], pause_ms=1500.0, seconds=700, threads=1)
    outcome = run_rule(load_test_inflation.RULE, inp)
    assert outcome.status is Status.PASSED and "no problem found" in outcome.measured


def test_one_problem_is_under_the_threshold():
    outcome = run_rule(load_test_inflation.RULE, _jmeter(["query", "update"], pause_ms=10.0, seconds=700, threads=1))
    assert outcome.status is Status.PASSED and "no think time" in outcome.measured


@pytest.mark.parametrize(
    ("capture", "problems"),
    [
        # sysbench oltp_read_write at --rate=30 for 10 s: one transaction type, 10 s long
        ("mariadb-sysbench-debian12.tar.gz", ("one transaction type", "too short")),
        # pgbench TPC-B-like with -R 30 (schedule lag printed), 10 s, scale 5 >= 4 clients
        ("postgres-pgbench-debian12.tar.gz", ("one transaction type", "too short")),
    ],
)
def test_real_load_tests(capture: str, problems: tuple[str, ...], corpus: Path):
    analysis = analyze(corpus / "captures" / capture)
    inp = RuleInput(tables=analysis.tables, derived=analysis.derived.tables, metrics=analysis.derived.metrics)
    outcome = run_rule(load_test_inflation.RULE, inp)
    assert outcome.status is Status.FIRED
    assert tuple(name for name, _ in outcome.findings[0].evidence[0].rows) == problems


def test_select_only_pgbench_is_one_script_and_no_branch_contention():
    # pgbench -S -C -c 16 on scale 1 (fixtures/pgbench-haproxy-connect): 16 clients > 1 branch row, but -S
    # never updates a branch: no "tiny hot key range"; the script name is not doubled ("select only only")
    capture = Path(__file__).resolve().parents[2] / "fixtures" / "pgbench-haproxy-connect" / "pgbench-C-haproxy-maxconn2.tar.gz"
    analysis = analyze(capture)
    inp = RuleInput(tables=analysis.tables, derived=analysis.derived.tables, metrics=analysis.derived.metrics)
    problems = dict(run_rule(load_test_inflation.RULE, inp).findings[0].evidence[0].rows)
    assert "tiny hot key range" not in problems
    assert problems["one transaction type"] == "pgbench ran one script only: select only"


def test_rate_limit_capacity_ignores_the_last_tenth_of_a_second_line():
    # pgbench -P 1 prints a last "progress: 20.1 s, 153.6 tps" over 0.1 s: no window; the 10 s windows
    # weigh each line by its seconds (the best one: 151.3/s)
    from dbdiag.rules.app import rate_limit_advice

    capture = Path(__file__).resolve().parents[2] / "fixtures" / "pgbench-haproxy-connect" / "pgbench-C-haproxy-maxconn2.tar.gz"
    analysis = analyze(capture)
    inp = RuleInput(tables=analysis.tables, derived=analysis.derived.tables, metrics=analysis.derived.metrics)
    (finding,) = run_rule(rate_limit_advice.RULE, inp).findings
    assert "capacity 151.3/s" in finding.title and "153.6" not in finding.title
