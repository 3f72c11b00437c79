"""The rule registry: every rule dbdiag runs, in report order. Adding a rule = one module + one line here."""

from __future__ import annotations

from dbdiag.rules.base import Rule
from dbdiag.rules.cpu import irq_affinity_skew, softirq_concentration
from dbdiag.rules.sql import (
    dominant_statement,
    full_table_scan,
    or_without_index_merge,
    plan_cache_miss,
    plan_flip,
    stale_statistics,
)

RULES: tuple[Rule, ...] = (
    softirq_concentration.RULE,
    irq_affinity_skew.RULE,
    plan_flip.RULE,
    stale_statistics.RULE,
    full_table_scan.RULE,
    or_without_index_merge.RULE,
    plan_cache_miss.RULE,
    dominant_statement.RULE,
)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in RULES if rule.id == rule_id), None)
