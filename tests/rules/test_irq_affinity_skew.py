from __future__ import annotations

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import Status
from dbdiag.rules.cpu import irq_affinity_skew as rule
from tests.rules.synthetic import proc_counts, rule_input, topology


def _irq_rows(per_queue_cpu: dict[str, dict[int, int]], cpus: int) -> list[dict]:
    rows = []
    for number, (device, served) in enumerate(per_queue_cpu.items(), start=40):
        for snapshot in (0, 1):
            for cpu in range(cpus):
                rows.append({
                    "snapshot": snapshot, "irq": str(number), "cpu": cpu,
                    "count": served.get(cpu, 0) * snapshot, "chip": "PCI-MSI", "hwirq": f"{number}-edge",
                    "device": device, "source": "interrupts.txt",
                })
    return rows


def _outcome(per_queue_cpu: dict[str, dict[int, int]], cpus: int = 16, nodes: int = 2):
    tables = {t.IRQ_COUNT: proc_counts(t.IRQ_COUNT, _irq_rows(per_queue_cpu, cpus)), t.TOPOLOGY: topology(cpus, nodes)}
    return run_rule(rule.RULE, rule_input(tables))


def test_all_queues_on_cpu0_fires_with_device_family():
    outcome = _outcome({f"eth0-TxRx-{q}": {0: 10_000} for q in range(8)})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "eth0"
    assert finding.impact["serving_cpus"] == [0]
    assert "80,000 interrupts" in finding.title


def test_queues_spread_over_both_nodes_pass():
    outcome = _outcome({f"eth0-TxRx-{q}": {q * 2: 10_000} for q in range(8)})
    assert outcome.status is Status.PASSED
    assert "eth0" in outcome.measured


def test_queues_on_one_node_of_two_fire_even_when_many_cpus():
    outcome = _outcome({f"eth0-TxRx-{q}": {q: 10_000} for q in range(8)})  # CPUs 0-7 = node 0
    assert outcome.status is Status.FIRED
    assert "(node 0)" in outcome.findings[0].title


def test_quiet_device_just_under_volume_floor_passes():
    quiet = {"nvme0q1": {0: rule.MIN_DEVICE_INTERRUPTS - 1}}
    assert _outcome(quiet).status is Status.PASSED
    loud = {"nvme0q1": {0: rule.MIN_DEVICE_INTERRUPTS}}
    assert _outcome(loud).status is Status.FIRED


def test_single_snapshot_is_skipped_with_reason():
    rows = [r for r in _irq_rows({"eth0-TxRx-0": {0: 10_000}}, 8) if r["snapshot"] == 0]
    tables = {t.IRQ_COUNT: proc_counts(t.IRQ_COUNT, rows)}
    outcome = run_rule(rule.RULE, rule_input(tables))
    assert outcome.status is Status.SKIPPED
    assert "two /proc/interrupts snapshots" in outcome.missing[0]
