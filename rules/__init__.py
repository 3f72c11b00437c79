"""The rule registry: every rule dbdiag runs, in report order. Adding a rule = one module + one line here."""

from __future__ import annotations

from dbdiag.rules.base import Rule
from dbdiag.rules.cpu import irq_affinity_skew, softirq_concentration

RULES: tuple[Rule, ...] = (
    softirq_concentration.RULE,
    irq_affinity_skew.RULE,
)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in RULES if rule.id == rule_id), None)
