"""Declarative cases of the host-configuration rules: a firing, a passing and a just-under input each.

Inputs are built with the builders of ``tests/rules/test_config_rules.py`` (``host`` rows are
``(category, subject, name, value[, choices])``); see ``tests/rules/rule_cases.py`` for the shape.
"""

from __future__ import annotations

from dbdiag import tables as t
from tests.rules.rule_cases import RuleCase
from tests.rules.test_config_rules import GIB, PLAIN_CMDLINE, STATEMENTS, _innodb, db, host, nodes

THP_CHOICES = "always madvise never"
SCHEDULERS = "none mq-deadline kyber bfq"


def _thp(value: str) -> dict:
    return {t.HOST_SETTING: host(("thp", None, "enabled", value, THP_CHOICES))}


def _numa_balancing(value: str, node_count: int = 2) -> dict:
    return {t.HOST_SETTING: host(("sysctl", None, "kernel.numa_balancing", value)), **nodes(node_count)}


def _disk(device: str, scheduler: str, rotational: str) -> dict:
    return {t.HOST_SETTING: host(("block", device, "scheduler", scheduler, SCHEDULERS), ("block", device, "rotational", rotational))}


RAM_MB = 10240  # shared_buffers fires below PG_MIN_SHARE_PCT = 10% of it: below 1 GiB


def _shared_buffers(value: str) -> dict:
    return {t.DB_SETTING: db(("variable", "shared_buffers", value), engine="postgresql"), **nodes(1, size_mb=RAM_MB)}


def _bound_pool(pool_bytes: int) -> dict:
    """mariadbd bound to node 0 of two 64 GiB nodes."""
    bound = host(("process_affinity", "mariadbd 4242", "Mems_allowed_list", "0"))
    return {t.DB_SETTING: _innodb(pool_bytes), t.HOST_SETTING: bound, **nodes(2, size_mb=65536)}


def _database_host(*cmdline: tuple, node_count: int = 2) -> dict:
    """A database host (two slow-log statements) of ``node_count`` 4-CPU nodes booted with ``cmdline`` added."""
    return {t.HOST_SETTING: host(*PLAIN_CMDLINE, *cmdline), t.STATEMENT: STATEMENTS, **nodes(node_count)}


CASES = (
    RuleCase("transparent-hugepages-enabled", "fires", lambda: _thp("always"), (("transparent_hugepage", "warning", "enabled = always"),)),
    RuleCase("transparent-hugepages-enabled", "passes", lambda: _thp("never")),
    # madvise: THP only where a program asks for it, the nearest value that does not fire
    RuleCase("transparent-hugepages-enabled", "just-under", lambda: _thp("madvise")),
    RuleCase("numa-balancing-enabled", "fires", lambda: _numa_balancing("1"), (("kernel.numa_balancing", "warning", "Automatic NUMA balancing on"),)),
    RuleCase("numa-balancing-enabled", "passes", lambda: _numa_balancing("0")),
    # 2 = memory tiering only: no hinting-fault balancing between nodes
    RuleCase("numa-balancing-enabled", "just-under", lambda: _numa_balancing("2")),
    RuleCase("io-scheduler-not-none", "fires", lambda: _disk("nvme0n1", "mq-deadline", "0"),
             (("nvme0n1", "warning", "uses the mq-deadline I/O scheduler"),)),
    RuleCase("io-scheduler-not-none", "passes", lambda: _disk("nvme0n1", "none", "0")),
    # the same scheduler on a rotational disk is right for it
    RuleCase("io-scheduler-not-none", "just-under", lambda: _disk("sdb", "mq-deadline", "1")),
    RuleCase("buffer-pool-undersized", "fires", lambda: _shared_buffers("1023MB"),
             (("shared_buffers", "warning", "threshold: < 10%"),)),
    RuleCase("buffer-pool-undersized", "passes", lambda: _shared_buffers("4GB")),
    # exactly 10% of RAM: the threshold is "below"
    RuleCase("buffer-pool-undersized", "just-under", lambda: _shared_buffers("1GB")),
    RuleCase("buffer-pool-exceeds-numa-node", "fires", lambda: _bound_pool(64 * GIB + 2**20),
             (("innodb_buffer_pool_size on node(s) 0", "warning", "exceeds the 64.0 GiB of node(s) 0"),)),
    RuleCase("buffer-pool-exceeds-numa-node", "passes", lambda: _bound_pool(32 * GIB)),
    # exactly the node's memory: it fits
    RuleCase("buffer-pool-exceeds-numa-node", "just-under", lambda: _bound_pool(64 * GIB)),
    RuleCase("no-cpu-isolation", "fires", lambda: _database_host(), (("cpu isolation", "info", "no isolcpus/nohz_full/rcu_nocbs/irqaffinity"),)),
    RuleCase("no-cpu-isolation", "passes", lambda: _database_host(("cmdline", None, "nohz_full", "2-7"))),
    # one node under MIN_NODES = 2: never judged
    RuleCase("no-cpu-isolation", "just-under", lambda: _database_host(node_count=1)),
)
