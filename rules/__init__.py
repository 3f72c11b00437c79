"""The rule registry: every rule dbdiag runs, in report order. Adding a rule = one module + one line here."""

from __future__ import annotations

from dbdiag.rules.app import connection_ceiling, connection_pool_oversized, rate_limit_advice, tail_latency_spikes
from dbdiag.rules.base import Rule
from dbdiag.rules.cpu import context_switch_overhead, irq_affinity_skew, lock_contention, softirq_concentration
from dbdiag.rules.disk import disk_latency_high
from dbdiag.rules.memory import memory_pressure
from dbdiag.rules.config import (
    buffer_pool_exceeds_numa_node,
    buffer_pool_undersized,
    io_scheduler_not_none,
    no_cpu_isolation,
    numa_balancing_enabled,
    transparent_hugepages_enabled,
)
from dbdiag.rules.loadtest import load_test_inflation
from dbdiag.rules.numa import cross_numa_memory, unbound_processes
from dbdiag.rules.sql import (
    dominant_statement,
    full_table_scan,
    lock_wait,
    or_without_index_merge,
    plan_cache_miss,
    plan_flip,
    stale_statistics,
)
from dbdiag.rules.time import bottleneck_outside_database, oom_restart

RULES: tuple[Rule, ...] = (
    bottleneck_outside_database.RULE,
    softirq_concentration.RULE,
    irq_affinity_skew.RULE,
    context_switch_overhead.RULE,
    lock_contention.RULE,
    cross_numa_memory.RULE,
    unbound_processes.RULE,
    transparent_hugepages_enabled.RULE,
    numa_balancing_enabled.RULE,
    disk_latency_high.RULE,
    memory_pressure.RULE,
    io_scheduler_not_none.RULE,
    buffer_pool_exceeds_numa_node.RULE,
    buffer_pool_undersized.RULE,
    no_cpu_isolation.RULE,
    oom_restart.RULE,
    load_test_inflation.RULE,
    connection_ceiling.RULE,
    connection_pool_oversized.RULE,
    tail_latency_spikes.RULE,
    rate_limit_advice.RULE,
    plan_flip.RULE,
    stale_statistics.RULE,
    lock_wait.RULE,
    full_table_scan.RULE,
    or_without_index_merge.RULE,
    plan_cache_miss.RULE,
    dominant_statement.RULE,
)


def rule_by_id(rule_id: str) -> Rule | None:
    return next((rule for rule in RULES if rule.id == rule_id), None)
