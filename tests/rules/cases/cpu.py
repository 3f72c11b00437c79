"""Declarative cases of the CPU rules (``tests/rules/rule_cases.py``), built with ``tests/rules/synthetic.py``:
``cpu_util(soft_pct)`` gives CPU i ``soft_pct[i]`` %soft; ``topology(cpus, nodes)`` spreads them evenly."""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.rules.cpu.softirq_concentration import FIRE_SOFT_PCT
from tests.rules.rule_cases import RuleCase
from tests.rules.synthetic import cpu_util, topology


def _softirq(soft_pct: list[float], nodes: int = 4) -> dict:
    return {t.CPU_UTIL: cpu_util(soft_pct), t.TOPOLOGY: topology(len(soft_pct), nodes)}


CASES = (
    RuleCase("softirq-concentration", "fires", lambda: _softirq([FIRE_SOFT_PCT] + [0.5] * 15),
             (("CPU 0 (node 0)", "warning", "of softirq time on CPU 0 (node 0); threshold 60%"),)),
    RuleCase("softirq-concentration", "passes", lambda: _softirq([30.0] * 16)),
    # the hottest CPU 0.1 point under FIRE_SOFT_PCT, everything else as in the firing case
    RuleCase("softirq-concentration", "just-under", lambda: _softirq([FIRE_SOFT_PCT - 0.1] + [0.5] * 15)),
)
