"""softirq-concentration and irq-affinity-skew on multi-node hosts: real guest captures and small cases.

The 3-node capture (fixtures/multinode, 1 CPU per node, the NIC's IRQs pinned to CPU 0) was missed
while both rules skipped hosts under 4 CPUs. The 2-node corpus captures use the guest kernel's own
placement of a single-queue virtio NIC: its receive IRQ lands on one CPU of node 1 (CPU 3 at 64%
%soft in numa2x2), so there too the work is concentrated and the rules say so. The spread case is
real too: the same 2x2 guest with RPS over all CPUs (fixtures/multinode): IRQs still on node 1,
their softirq work on every CPU.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.engine import run_rule
from dbdiag.findings import CPU_SHARE, Severity, Status
from dbdiag.pipeline import analyze
from dbdiag.rules.cpu import irq_affinity_skew, softirq_concentration
from tests.rules.synthetic import cpu_util, proc_counts, rule_input, topology

REPO = Path(__file__).resolve().parents[2]
THREE_NODES = REPO / "fixtures" / "multinode" / "numa3x1-irq-cpu0.tar.gz"
RPS_SPREAD = REPO / "fixtures" / "multinode" / "numa2x2-rps-all-cpus.tar.gz"
RULES = (softirq_concentration.RULE_ID, irq_affinity_skew.RULE_ID)


def _os_outcomes(archive: Path, tmp_path: Path) -> dict[str, object]:
    """The two rules' outcomes on the capture's OS files (perf output left out: it does not feed them)."""
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            if member.isfile() and "perf-" not in member.name:
                target = tmp_path / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(tar.extractfile(member).read())
    outcomes = analyze(tmp_path).outcomes
    return {o.rule: o for o in outcomes if o.rule in RULES}


def test_three_nodes_one_cpu_each_fires_naming_cpu_node_and_device(tmp_path):
    outcomes = _os_outcomes(THREE_NODES, tmp_path)
    soft = outcomes[softirq_concentration.RULE_ID]
    assert soft.status is Status.FIRED
    finding = soft.findings[0]
    assert finding.subject == "CPU 0 (node 0)"
    assert "CPU 0 (node 0)" in finding.title and "virtio0 (IRQ 25-26)" in finding.title
    assert finding.impact["hot_cpus"] == [0]
    # mpstat means: CPU 0 54.7% %soft, CPUs 1-2 0.68% and 0.59%, no %irq; mean 18.66%
    assert finding.impact[CPU_SHARE] == pytest.approx((54.71 - 18.66) / 300, abs=0.002)
    assert finding.related == ("irq-affinity-skew/virtio0",)

    irq = outcomes[irq_affinity_skew.RULE_ID]
    assert irq.status is Status.FIRED
    [skew] = irq.findings
    assert skew.subject == "virtio0" and skew.severity is Severity.WARNING
    assert skew.impact["serving_cpus"] == [0] and skew.impact["nodes"] == [0]
    assert "on CPU 0 (node 0)" in skew.title
    assert "affinity masks pin them there (IRQ 25 -> 0, IRQ 26 -> 0)" in skew.remediation  # irq_affinity.txt
    assert skew.impact[CPU_SHARE] == pytest.approx(finding.impact[CPU_SHARE], abs=1e-6)


def test_two_node_guest_with_kernel_placement_names_node_one(corpus, tmp_path):
    outcomes = _os_outcomes(corpus / "captures/numa2x2-guest-iperf-debian12.tar.gz", tmp_path)
    soft = outcomes[softirq_concentration.RULE_ID].findings[0]
    assert soft.subject == "CPU 3 (node 1)" and "virtio0 (IRQ 25)" in soft.title
    [skew] = outcomes[irq_affinity_skew.RULE_ID].findings
    assert skew.impact["nodes"] == [1] and skew.impact["serving_cpus"] == [2, 3]
    assert "masks allow more CPUs (IRQ 25 -> 0-3, IRQ 26 -> 0-3), yet each line went to one CPU" in skew.remediation


def test_interrupts_on_one_node_with_their_work_spread_by_rps_is_no_alarm(tmp_path):
    outcomes = _os_outcomes(RPS_SPREAD, tmp_path)
    assert outcomes[softirq_concentration.RULE_ID].status is Status.PASSED
    [skew] = outcomes[irq_affinity_skew.RULE_ID].findings  # the IRQs do all land on node 1: said, as info
    assert skew.impact["nodes"] == [1]
    assert skew.severity is Severity.INFO
    assert "softirq work is not piled up there" in skew.title


def test_two_node_guest_events_only_names_node_and_device(corpus, tmp_path):
    outcomes = _os_outcomes(corpus / "captures/numa2-guest-iperf-debian12.tar.gz", tmp_path)
    soft = outcomes[softirq_concentration.RULE_ID].findings[0]  # no %soft: NET_RX events on CPUs 5-6 only
    assert soft.subject == "CPUs 5-6 (node 1)" and "virtio0 (IRQ 25-26)" in soft.title
    assert CPU_SHARE not in soft.impact
    [skew] = outcomes[irq_affinity_skew.RULE_ID].findings
    assert skew.severity is Severity.WARNING and skew.impact["nodes"] == [1]
    # the database moved off node 1 goes to node 0's CPUs (0-3), not to every CPU but the hot ones (0-4,7)
    assert "CPUAffinity=0-3 and NUMAPolicy=bind NUMAMask=0" in soft.remediation
    assert "ethtool -L IFACE combined 8" in soft.remediation and "echo ff > /sys/class/net/IFACE/queues/rx-0/rps_cpus" in soft.remediation


def _irq_tables(served: dict[str, dict[int, int]], cpus: int, nodes: int) -> dict[str, pl.DataFrame]:
    rows = []
    for number, (device, per_cpu) in enumerate(served.items(), start=40):
        for snapshot in (0, 1):
            for cpu in range(cpus):
                rows.append({
                    "snapshot": snapshot, "irq": str(number), "cpu": cpu, "count": per_cpu.get(cpu, 0) * snapshot,
                    "chip": "PCI-MSI", "hwirq": f"{number}-edge", "device": device, "source": "interrupts.txt",
                })
    return {t.IRQ_COUNT: proc_counts(t.IRQ_COUNT, rows), t.TOPOLOGY: topology(cpus, nodes)}


def _skew(served: dict[str, dict[int, int]], cpus: int = 3, nodes: int = 3, soft: list[float] | None = None):
    tables = _irq_tables(served, cpus, nodes)
    if soft is not None:
        tables[t.CPU_UTIL] = cpu_util(soft)
    return run_rule(irq_affinity_skew.RULE, rule_input(tables))


def test_small_multi_node_host_is_judged_and_spread_queues_pass():
    assert _skew({f"eth0-TxRx-{q}": {q: 10_000} for q in range(3)}).status is Status.PASSED
    outcome = _skew({f"eth0-TxRx-{q}": {0: 10_000} for q in range(3)})
    assert outcome.status is Status.FIRED
    assert "on CPU 0 (node 0)" in outcome.findings[0].title


def test_small_one_node_host_still_skipped():
    outcome = _skew({"eth0-TxRx-0": {0: 10_000}}, cpus=3, nodes=1)
    assert outcome.status is Status.SKIPPED
    assert "3 CPU(s) on one NUMA node" in outcome.missing[0]


@pytest.mark.parametrize("device", ["xhci_hcd", "nvidia", "i8042", "mystery-dev"])
def test_devices_that_are_not_io_are_info_at_most(device):
    outcome = _skew({device: {0: 50_000}}, cpus=4, nodes=2)
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].severity is Severity.INFO
    assert "not an I/O device" in outcome.findings[0].title


def test_io_device_severity_follows_the_interrupt_time_of_its_cpus():
    queues = {f"nvme0q{q}": {0: 10_000} for q in range(4)}
    cheap = _skew(queues, cpus=4, nodes=2, soft=[3.0, 1.0, 1.0, 1.0])
    assert cheap.findings[0].severity is Severity.INFO
    assert cheap.findings[0].impact[CPU_SHARE] == pytest.approx((3.0 - 1.5) / 400, abs=1e-4)
    costly = _skew(queues, cpus=4, nodes=2, soft=[40.0, 1.0, 1.0, 1.0])
    assert costly.findings[0].severity is Severity.WARNING
    assert costly.findings[0].impact[CPU_SHARE] == pytest.approx((40.0 - 10.75) / 400, abs=1e-4)
    unknown = _skew(queues, cpus=4, nodes=2)
    assert unknown.findings[0].severity is Severity.WARNING
    assert CPU_SHARE not in unknown.findings[0].impact


def _soft(soft: list[float], nodes: int):
    tables = {t.CPU_UTIL: cpu_util(soft), t.TOPOLOGY: topology(len(soft), nodes)}
    return run_rule(softirq_concentration.RULE, rule_input(tables))


def test_softirq_on_small_multi_node_hosts():
    assert _soft([30.0, 30.0, 30.0], nodes=3).status is Status.PASSED
    fired = _soft([47.0, 0.5, 0.5], nodes=3)
    assert fired.status is Status.FIRED
    assert fired.findings[0].subject == "CPU 0 (node 0)"
    assert fired.findings[0].impact[CPU_SHARE] == pytest.approx((47.0 - 16.0) / 300, abs=1e-4)
    assert _soft([60.0, 1.0], nodes=1).status is Status.SKIPPED
    assert _soft([60.0, 1.0], nodes=2).status is Status.FIRED
