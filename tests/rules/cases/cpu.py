"""Declarative cases of the CPU rules (``tests/rules/rule_cases.py``), built with ``tests/rules/synthetic.py``:
``cpu_util(soft_pct)`` gives CPU i ``soft_pct[i]`` %soft; ``topology(cpus, nodes)`` spreads them evenly;
``perf_stacks`` gives perf script stacks (those of ``tests/rules/test_profile_numa_rules.py``) that the
derive stage turns into the CPU profile; interrupt rows are those of ``tests/rules/test_irq_affinity_skew.py``."""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.rules.cpu.context_switch_overhead import SCHED_SHARE_PCT
from dbdiag.rules.cpu.irq_affinity_skew import FEW_CPUS_SHARE
from dbdiag.rules.cpu.lock_contention import LOCK_SHARE_PCT
from dbdiag.rules.cpu.softirq_concentration import FIRE_SOFT_PCT
from tests.rules.rule_cases import RuleCase
from tests.rules.synthetic import cpu_util, perf_stacks, proc_counts, topology
from tests.rules.test_irq_affinity_skew import _irq_rows
from tests.rules.test_profile_numa_rules import IDLE_STACK, LOCK_STACK, SCHED_STACK, WORK_STACK


def _softirq(soft_pct: list[float], nodes: int = 4) -> dict:
    return {t.CPU_UTIL: cpu_util(soft_pct), t.TOPOLOGY: topology(len(soft_pct), nodes)}


IRQ_CPUS = 16  # on one node, so only the share of CPUs counts
FEW_CPUS = int(IRQ_CPUS * FEW_CPUS_SHARE)  # the most CPUs serving a device that is still skewed


def _irq(serving_cpus: int) -> dict:
    """Eight eth0 queues of 10,000 interrupts each, spread round-robin over CPUs 0..serving_cpus-1."""
    queues = {f"eth0-TxRx-{q}": {q % serving_cpus: 10_000} for q in range(8)}
    return {t.IRQ_COUNT: proc_counts(t.IRQ_COUNT, _irq_rows(queues, IRQ_CPUS)), t.TOPOLOGY: topology(IRQ_CPUS, 1)}


BUSY_SAMPLES = 1000


def _profile(stack: str, share_pct: float) -> dict:
    """A perf script profile: ``share_pct`` of 1,000 busy samples in ``stack``, the rest in query work, plus idle."""
    own = round(BUSY_SAMPLES * share_pct / 100.0)
    rows = [("mariadbd", stack, own), ("mariadbd", WORK_STACK, BUSY_SAMPLES - own), ("swapper", IDLE_STACK, 500)]
    return {t.PERF_STACK: perf_stacks(rows)}


CASES = (
    RuleCase("softirq-concentration", "fires", lambda: _softirq([FIRE_SOFT_PCT] + [0.5] * 15),
             (("CPU 0 (node 0)", "warning", "of softirq time on CPU 0 (node 0); threshold 60%"),)),
    RuleCase("softirq-concentration", "passes", lambda: _softirq([30.0] * 16)),
    # the hottest CPU 0.1 point under FIRE_SOFT_PCT, everything else as in the firing case
    RuleCase("softirq-concentration", "just-under", lambda: _softirq([FIRE_SOFT_PCT - 0.1] + [0.5] * 15)),
    RuleCase("irq-affinity-skew", "fires", lambda: _irq(FEW_CPUS),
             (("eth0", "warning", f"eth0: 100% of 80,000 interrupts on CPUs 0-{FEW_CPUS - 1}; threshold: at most {FEW_CPUS_SHARE:.1%} of {IRQ_CPUS} CPUs"),)),
    RuleCase("irq-affinity-skew", "passes", lambda: _irq(IRQ_CPUS // 2)),
    # one CPU more than FEW_CPUS_SHARE of the machine's CPUs serves the device
    RuleCase("irq-affinity-skew", "just-under", lambda: _irq(FEW_CPUS + 1)),
    RuleCase("context-switch-overhead", "fires", lambda: _profile(SCHED_STACK, SCHED_SHARE_PCT),
             (("mariadbd", "warning", f"Context switching takes {SCHED_SHARE_PCT:.1f}% of busy CPU samples (mostly mariadbd)"),)),
    RuleCase("context-switch-overhead", "passes", lambda: _profile(SCHED_STACK, 1.0)),
    # one busy sample in 1,000 under SCHED_SHARE_PCT
    RuleCase("context-switch-overhead", "just-under", lambda: _profile(SCHED_STACK, SCHED_SHARE_PCT - 0.1)),
    RuleCase("lock-contention", "fires", lambda: _profile(LOCK_STACK, LOCK_SHARE_PCT),
             (("innodb", "warning", f"Lock contention: {LOCK_SHARE_PCT:.1f}% of busy CPU by samples in lock code, mostly InnoDB mutex"),)),
    RuleCase("lock-contention", "passes", lambda: _profile(LOCK_STACK, 0.5)),
    # one busy sample in 1,000 under LOCK_SHARE_PCT
    RuleCase("lock-contention", "just-under", lambda: _profile(LOCK_STACK, LOCK_SHARE_PCT - 0.1)),
)
