"""Declarative cases of the NUMA rules (``tests/rules/rule_cases.py``) on a machine of 8 CPUs in 2 nodes.

``numastat(remote_pct)`` (``tests/rules/synthetic.py``) gives two numastat snapshots between which node i
allocated 100,000 pages, ``remote_pct[i]`` % of them from the other node; the derive stage turns them
into ``numa_remote``. The database process is ``mariadbd 4242`` with the CPU list of its status file.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.numa.cross_numa_memory import REMOTE_SHARE_PCT
from dbdiag.rules.numa.unbound_processes import REMOTE_SHARE_PCT as UNBOUND_COST_PCT
from tests.rules.rule_cases import RuleCase
from tests.rules.synthetic import numastat, topology


def _two_nodes(node1_remote_pct: float) -> dict:
    return {t.NUMA_COUNTER: numastat([3.0, node1_remote_pct]), t.TOPOLOGY: topology(8, 2)}


def _mariadbd(cpus_allowed: str, node1_remote_pct: float = 2.0) -> dict:
    affinity = pl.DataFrame({"category": ["process_affinity"], "subject": ["mariadbd 4242"], "name": ["Cpus_allowed_list"],
                             "value": [cpus_allowed], "source": ["mariadbd-status.txt"]})
    return {**_two_nodes(node1_remote_pct), t.HOST_SETTING: t.conform(t.HOST_SETTING, affinity)}


CASES = (
    RuleCase("cross-numa-memory", "fires", lambda: _two_nodes(REMOTE_SHARE_PCT),
             (("node 1", "warning", f"{REMOTE_SHARE_PCT:.0f}% of node 1's allocations came from other nodes between snapshots; "
                                    f"threshold {REMOTE_SHARE_PCT:.0f}%"),)),
    RuleCase("cross-numa-memory", "passes", lambda: _two_nodes(2.0)),
    # node 1 0.1 point under REMOTE_SHARE_PCT
    RuleCase("cross-numa-memory", "just-under", lambda: _two_nodes(REMOTE_SHARE_PCT - 0.1)),
    # unbound and a node at REMOTE_SHARE_PCT remote: the cost is shown, a warning (without it, info)
    RuleCase("unbound-processes", "fires", lambda: _mariadbd("0-7", UNBOUND_COST_PCT),
             (("mariadbd", "warning", "1 database/proxy process(es) may run on all 8 CPUs of 2 NUMA nodes: mariadbd 4242"),)),
    RuleCase("unbound-processes", "passes", lambda: _mariadbd("4-7", 25.0)),
    # no threshold: unbound means every CPU the topology knows; all CPUs but one is the nearest bound
    # list, and passes even with the remote traffic that makes an unbound process a warning
    RuleCase("unbound-processes", "just-under", lambda: _mariadbd("0-6", 25.0)),
)
