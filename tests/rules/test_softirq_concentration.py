from __future__ import annotations

import pytest

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.rules.cpu import softirq_concentration as rule
from tests.rules.synthetic import cpu_util, proc_counts, rule_input, topology


def _outcome(soft: list[float], nodes: int = 4):
    tables = {t.CPU_UTIL: cpu_util(soft), t.TOPOLOGY: topology(len(soft), nodes)}
    return run_rule(rule.RULE, rule_input(tables))


def test_fires_on_one_node_of_many_with_cpus_and_node_named():
    soft = [90.0, 70.0, 50.0, 40.0] + [1.0] * 12  # node 0 = CPUs 0-3 of 16
    outcome = _outcome(soft)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "CPUs 0-3 (node 0)"
    assert finding.severity is Severity.CRITICAL
    assert finding.impact["hot_cpus"] == [0, 1, 2, 3]
    share = 100 * sum(soft[:4]) / sum(soft)
    assert finding.impact["share_pct"] == pytest.approx(share, abs=0.1)
    assert f"{share:.0f}% of softirq time on CPUs 0-3 (node 0); threshold 60%" in finding.title
    chart = finding.charts[0]
    assert [g.label for g in chart.groups] == ["node 0", "node 1", "node 2", "node 3"]
    assert [b.highlight for b in chart.groups[0].bars] == [True] * 4
    assert "numactl --cpunodebind=1-3 --membind=1-3" in finding.remediation


def test_passes_when_softirq_is_spread_evenly():
    outcome = _outcome([30.0] * 16)
    assert outcome.status is Status.PASSED
    assert "hottest CPU" in outcome.measured


def test_just_under_the_cpu_threshold_passes():
    soft = [rule.FIRE_SOFT_PCT - 0.1] + [0.5] * 15
    assert _outcome(soft).status is Status.PASSED
    soft[0] = rule.FIRE_SOFT_PCT
    assert _outcome(soft).status is Status.FIRED


def test_warning_between_fire_and_critical():
    outcome = _outcome([30.0] + [0.5] * 15)
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].severity is Severity.WARNING


def test_spread_over_half_the_cpus_on_one_node_machine_passes():
    # 8 of 16 CPUs hot on a single-node machine: neither "few CPUs" nor "one node of many".
    outcome = _outcome([40.0] * 8 + [1.0] * 8, nodes=1)
    assert outcome.status is Status.PASSED


def test_small_machine_is_skipped_with_reason():
    outcome = _outcome([60.0, 1.0], nodes=1)
    assert outcome.status is Status.SKIPPED
    assert "2 CPU(s)" in outcome.missing[0]


def test_missing_inputs_are_named():
    outcome = run_rule(rule.RULE, rule_input({}))
    assert outcome.status is Status.SKIPPED
    assert outcome.missing == ("cpu_util or softirq_rate or softirq_count",)


def test_event_path_from_proc_softirqs_deltas():
    rows = []
    for snapshot, scale in ((0, 0), (1, 1)):
        for cpu in range(8):
            net_rx = (20_000 if cpu in (5, 6) else 3) * scale
            rows.append({"snapshot": snapshot, "cpu": cpu, "softirq": "NET_RX", "count": net_rx, "source": "softirqs.txt"})
    tables = {t.SOFTIRQ_COUNT: proc_counts(t.SOFTIRQ_COUNT, rows), t.TOPOLOGY: topology(8, 2)}
    outcome = run_rule(rule.RULE, rule_input(tables))
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].subject == "CPUs 5-6 (node 1)"
    assert outcome.findings[0].severity is Severity.WARNING


def test_event_path_below_volume_floor_passes():
    rows = [
        {"snapshot": s, "cpu": cpu, "softirq": "NET_RX", "count": (100 if cpu == 5 else 0) * s, "source": "softirqs.txt"}
        for s in (0, 1)
        for cpu in range(8)
    ]
    tables = {t.SOFTIRQ_COUNT: proc_counts(t.SOFTIRQ_COUNT, rows), t.TOPOLOGY: topology(8, 2)}
    assert run_rule(rule.RULE, rule_input(tables)).status is Status.PASSED
