"""oom-restart at the edges of the capture: restarts just outside the statements, logs without times,
host reboots from sysstat. Real inputs from fixtures/edges (make-edges.sh: PostgreSQL 15, sysstat 12.6)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.pipeline import analyze
from dbdiag.rules.base import RuleInput
from dbdiag.rules.time import oom_restart

EDGES = Path(__file__).resolve().parents[2] / "fixtures" / "edges"
T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def _outcome(capture: Path):
    return next(o for o in analyze(capture).outcomes if o.rule == oom_restart.RULE_ID)


def test_restart_just_before_the_first_statement_and_just_after_the_last_counts():
    # stop 02:04:56.683, start 56.861, first statement 57.044 ... last 59.018, stop 59.029, start 02:05:01.256
    outcome = _outcome(EDGES / "pg-restart-at-edges" / "postgresql.log")
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.WARNING
    assert finding.title == "postgres restarted (2 starts) during the capture"
    starts = [row for row in finding.evidence[0].rows if row[1] == "start"]
    assert [str(row[0]) for row in starts] == ["2026-12-02 02:04:56.861000+00:00", "2026-12-02 02:05:01.256000+00:00"]
    assert [row[5] for row in starts] == ["postgresql.log:15", "postgresql.log:55"]


def test_restart_in_a_log_without_timestamps_is_reported_time_unknown():
    outcome = _outcome(EDGES / "pg-no-timestamps" / "postgresql.log")
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title == "postgres restarted (time unknown: postgresql.log:26 has no timestamp)"
    assert finding.impact["first_ts"] is None
    assert finding.evidence[0].rows[0][0] == "time unknown"
    assert "log_line_prefix" in finding.remediation


def test_sysstat_linux_restart_is_a_host_restart_event_reported_once():
    # the same sa file as sar text, sadf -d and sadf -dh: one reboot at 02:05:05
    outcome = _outcome(EDGES / "sar-restart")
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title == "the host rebooted (sysstat LINUX RESTART) during the capture"
    assert finding.impact["events"] == 1 and finding.impact["first_ts"] == "2026-12-02 02:05:05+00:00"
    assert "journalctl --list-boots" in finding.remediation


def _input(events: list[dict], cpu_from_s: float | None = None) -> RuleInput:
    tables = {t.EVENT: t.conform(t.EVENT, pl.DataFrame(events))}
    starts = [T0 + timedelta(seconds=s) for s in range(0, 120)]
    tables[t.STATEMENT] = t.conform(t.STATEMENT, pl.DataFrame({"start_ts": starts, "query_time_s": 0.001, "source": "slow.log"}))
    if cpu_from_s is not None:
        tables[t.CPU_UTIL] = t.conform(t.CPU_UTIL, pl.DataFrame({"ts": [T0 + timedelta(seconds=cpu_from_s), T0], "cpu": [-1, -1], "source": "mpstat.txt"}))
    return RuleInput(tables=tables, derived={}, metrics={})


def _restart(at_s: float, line: int = 10) -> list[dict]:
    return [
        {"ts": T0 + timedelta(seconds=at_s - 1), "kind": "shutdown", "process": "mysqld", "component": "mysqld", "source": "err.log", "line": line},
        {"ts": T0 + timedelta(seconds=at_s), "kind": "start", "process": "mysqld", "component": "mysqld", "source": "err.log", "line": line + 1},
    ]


def test_window_margin_and_union_of_inputs():
    assert run_rule(oom_restart.RULE, _input(_restart(-30))).status is Status.FIRED  # 30 s before the first statement
    far = run_rule(oom_restart.RULE, _input(_restart(-300)))
    assert far.status is Status.PASSED and "1 start/recovery/host restart(s) outside it left out" in far.measured
    # mpstat began 10 minutes before the statements: the window is the union
    assert run_rule(oom_restart.RULE, _input(_restart(-300), cpu_from_s=-600)).status is Status.FIRED


def test_a_host_restart_makes_the_next_database_start_a_restart():
    events = [
        {"ts": T0 + timedelta(seconds=20), "kind": "host-restart", "component": "host", "source": "sar.txt", "line": 14},
        {"ts": T0 + timedelta(seconds=50), "kind": "start", "process": "mysqld", "component": "mysqld", "source": "err.log", "line": 3},
    ]
    finding = run_rule(oom_restart.RULE, _input(events)).findings[0]
    assert [row[1] for row in finding.evidence[0].rows] == ["host-restart", "start"]


def test_untimed_log_that_begins_with_a_start_is_no_incident():
    events = [{"ts": None, "kind": "start", "process": "postgres", "component": "postgres", "source": "pg.log", "line": 4}]
    assert run_rule(oom_restart.RULE, _input(events)).status is Status.PASSED


def test_many_stops_and_starts_do_not_hang():
    events = []
    for i in range(5_000):
        events += _restart(i * 0.01, line=2 * i + 1)
    started = time.monotonic()
    outcome = run_rule(oom_restart.RULE, _input(events))
    assert outcome.status is Status.FIRED
    assert time.monotonic() - started < 20


def test_untimed_events_are_one_only_with_the_same_pid():
    kill = {"ts": None, "kind": "oom-kill", "process": "mysqld", "pid": 812, "component": "kernel", "line": 40}
    events = [{**kill, "source": "dmesg.txt"}, {**kill, "source": "dmesg-copy.txt"},
              {**kill, "pid": None, "source": "a.log"}, {**kill, "pid": None, "source": "a.log", "line": 90}]
    finding = run_rule(oom_restart.RULE, _input(events)).findings[0]
    assert finding.impact["events"] == 3


def test_a_host_reboot_is_a_change_and_a_timeline_marker():
    analysis = analyze(EDGES / "sar-restart")
    changes = analysis.derived.tables[t.CHANGE]
    assert changes.filter(pl.col("action") == "host-restart").height >= 1
    events = analysis.derived.metrics["timeline"]["events"]
    assert any(e["kind"] == "host-restart" for e in events), events
