"""The facts of the host side of one analyze report: the machine, the CPUs and their nodes, interrupts, NUMA
memory, /proc/vmstat and /proc/stat counters, the perf profile (``facts.facts_of`` puts them in order).

A sample::

    metrics.cpu.per_cpu[] {"cpu": 3, "node": 1, "busy_pct": 71.2, "soft_pct": 69.0, "net_rx_per_s": 9120.0}
      -> Fact("activity", "node 1 soft % (mean of its CPUs)", ...), Fact("activity", "cpu 3 soft %", 69.0, "%", "pct", ...)
    metrics.proc_stat {"seconds": 60.0, "context_switches_per_s": 2048251.83, ...}
      -> Fact("activity", "context switches per second (/proc/stat)", 2048251.83, "1/s", "counter", ...)
"""

from __future__ import annotations

from typing import Any

from dbdiag.compare.fact import Fact
from dbdiag.cpulist import cpu_list_or_none

HOST_FIELDS = ("cpu_model", "cpus", "sockets", "numa_nodes", "threads_per_core", "kernel", "arch", "hypervisor")


def host_facts(host: dict[str, Any], document: dict[str, Any]) -> list[Fact]:
    source = next((i["path"] for i in document.get("inputs") or [] if i.get("kind") == "lscpu"), None)
    return [Fact("host", field, host[field], None, "text", source) for field in HOST_FIELDS if host.get(field) is not None]


AFFINITY_GROUPS = ("irq_affinity", "process_affinity")
CpuLayout = tuple[int | None, dict[int, frozenset[int]]]  # (the host's CPU count, each node's CPUs)


def cpu_layout(metrics: dict[str, Any]) -> CpuLayout:
    nodes: dict[int, set[int]] = {}
    for row in (metrics.get("cpu") or {}).get("per_cpu") or []:
        if row.get("node") is not None and row.get("cpu") is not None:
            nodes.setdefault(row["node"], set()).add(row["cpu"])
    return (metrics.get("host") or {}).get("cpus"), {node: frozenset(cpus) for node, cpus in nodes.items()}


def affinity_text(value: str | None, layout: CpuLayout) -> str | None:
    """A CPU list as the host's CPUs it names, so that hosts of different sizes compare: "all CPUs" (0-7 on 8
    CPUs, 0-3 on 4), "node 1" (exactly node 1's CPUs), else the list as written.

    >>> affinity_text("0-3", (4, {})), affinity_text("2-3", (4, {0: frozenset({0, 1}), 1: frozenset({2, 3})})), affinity_text("1", (4, {}))
    ('all CPUs', 'node 1', '1')
    """
    cpus = cpu_list_or_none(value)
    count, nodes = layout
    if not cpus:
        return value
    if count and sorted(cpus) == list(range(count)):
        return "all CPUs"
    covered = [node for node, members in sorted(nodes.items()) if members <= set(cpus)]
    if covered and set().union(*(nodes[n] for n in covered)) == set(cpus):
        return ("node " if len(covered) == 1 else "nodes ") + ",".join(str(n) for n in covered)
    return value


def memory_nodes_text(value: str | None, layout: CpuLayout) -> str | None:
    """A process' ``Mems_allowed_list`` (NUMA node numbers, not CPUs): "all nodes" when it names every node
    of the host, else "node 0" / "nodes 1-15" as written.

    >>> memory_nodes_text("0-1", (4, {0: frozenset({0, 1}), 1: frozenset({2, 3})})), memory_nodes_text("1", (4, {}))
    ('all nodes', 'node 1')
    """
    nodes = cpu_list_or_none(value)
    if not nodes:
        return value
    if layout[1] and sorted(nodes) == sorted(layout[1]):
        return "all nodes"
    return ("node " if len(nodes) == 1 else "nodes ") + str(value).strip()


def cpu_facts(cpu: dict[str, Any]) -> list[Fact]:
    """Per node, then per CPU: busy and softirq %, NET_RX softirqs per second."""
    per_cpu = cpu.get("per_cpu") or []
    source = ", ".join(cpu.get("softirq_snapshots") or []) or None
    facts = []
    nodes = sorted({row.get("node") for row in per_cpu if row.get("node") is not None})
    for node in nodes:
        rows = [row for row in per_cpu if row.get("node") == node]
        for field in ("busy_pct", "soft_pct"):
            values = [row[field] for row in rows if row.get(field) is not None]
            if values:
                facts.append(Fact("activity", f"node {node} {field[:-4]} % (mean of its CPUs)", sum(values) / len(values), "%", "pct", source))
    for row in per_cpu:
        for field in ("busy_pct", "soft_pct"):
            if row.get(field) is not None:
                facts.append(Fact("activity", f"cpu {row['cpu']} {field[:-4]} %", row[field], "%", "pct", source))
        if row.get("net_rx_per_s") is not None:
            facts.append(Fact("activity", f"cpu {row['cpu']} NET_RX softirqs per second", row["net_rx_per_s"], "1/s", "rate", source))
    return facts


def interrupt_facts(rows: list[dict[str, Any]], cpu: dict[str, Any], layout: CpuLayout) -> list[Fact]:
    """``metrics.interrupts`` of I/O devices (NICs, disks): the share of each device's interrupts each node of
    the host served (0 on a node that served none: a NIC moved from node 0 to node 1 differs on both)."""
    source = ", ".join(cpu.get("interrupt_snapshots") or []) or None
    nodes = sorted(layout[1])
    shares: dict[str, dict[int, float]] = {}
    for row in rows:
        if row.get("device_class") == "io" and row.get("share_pct") is not None:
            shares.setdefault(row["device"], {})[row["node"]] = row["share_pct"]
    return [
        Fact("activity", f"node {node} interrupts of {device} (% of the device's)", by_node.get(node, 0.0), "%", "pct", source)
        for device, by_node in shares.items() for node in sorted(set(nodes) | set(by_node))
    ]


def numa_facts(rows: list[dict[str, Any]]) -> list[Fact]:
    return [
        Fact("activity", f"node {row['node']} remote memory %", row["remote_pct"], "%", "pct", row.get("last_source"))
        for row in rows if row.get("remote_pct") is not None
    ]


# /proc/vmstat counters of NUMA balancing and page migration (``metrics.vmstat_numa``), in the order a chain
# shows them: the pages the balancing moved, then the hinting faults that decided it, then the page-table scans.
VMSTAT_COUNTERS = ("numa_pages_migrated", "numa_hint_faults", "numa_hint_faults_local", "numa_pte_updates",
                   "numa_huge_pte_updates", "pgmigrate_success", "pgmigrate_fail")


def vmstat_facts(vmstat: dict[str, Any]) -> list[Fact]:
    """The counters' growth between the first and the last /proc/vmstat snapshot: per second when the snapshots
    carry their times, else over the capture ("vmstat numa_pages_migrated during the capture", 0 with balancing off).

    >>> [(f.key, f.value) for f in vmstat_facts({"counters": {"numa_hint_faults": 4454, "numa_pages_migrated": 153887,
    ...     "thp_fault_alloc": 299}, "seconds": None, "first_source": "os/vmstat.0", "last_source": "os/vmstat.1"})]
    [('vmstat numa_pages_migrated during the capture', 153887), ('vmstat numa_hint_faults during the capture', 4454)]
    """
    counters, seconds = vmstat.get("counters") or {}, vmstat.get("seconds")
    source = ", ".join(s for s in (vmstat.get("first_source"), vmstat.get("last_source")) if s) or None
    window, unit = ("per second", "1/s") if seconds else ("during the capture", None)
    return [Fact("activity", f"vmstat {name} {window}", counters[name] / seconds if seconds else counters[name], unit, "counter", source)
            for name in VMSTAT_COUNTERS if name in counters]


# /proc/stat's counters (``metrics.proc_stat``) compared, with their names in a key.
PROC_STAT_FACTS = (("context_switches", "context switches"), ("forks", "forks (new processes and threads)"))


def proc_stat_facts(stat: dict[str, Any]) -> list[Fact]:
    """Context switches and forks between the first and the last /proc/stat snapshot, per second when both carry
    their times, else over the capture.

    >>> [(f.key, f.value) for f in proc_stat_facts({"seconds": 60.0, "context_switches": 126_000_000, "context_switches_per_s": 2_100_000.0,
    ...     "forks": 9000, "forks_per_s": 150.0, "first_source": "os/stat.before", "last_source": "os/stat.after"})]
    [('context switches per second (/proc/stat)', 2100000.0), ('forks (new processes and threads) per second (/proc/stat)', 150.0)]
    """
    source = ", ".join(s for s in (stat.get("first_source"), stat.get("last_source")) if s) or None
    per_second = bool(stat.get("seconds"))
    facts = []
    for field, label in PROC_STAT_FACTS:
        value = stat.get(f"{field}_per_s") if per_second else stat.get(field)
        if value is not None:
            window, unit = ("per second", "1/s") if per_second else ("during the capture", None)
            facts.append(Fact("activity", f"{label} {window} (/proc/stat)", value, unit, "counter", source))
    return facts


def profile_facts(profile: dict[str, Any]) -> list[Fact]:
    source = ", ".join(profile.get("sources") or []) or None
    facts = []
    for category in profile.get("categories") or []:
        if category.get("category") == "idle" or category.get("busy_share_pct") is None:
            continue
        facts.append(Fact("profile", f"category {category['category']} (% of busy CPU)", category["busy_share_pct"], "%", "share", source))
        for symbol in category.get("top_symbols") or []:
            if symbol.get("busy_share_pct") is not None:
                facts.append(Fact("profile", f"symbol {symbol['symbol']} (% of busy CPU)", symbol["busy_share_pct"], "%", "share", source))
    kernel = profile.get("kernel") or {}
    if kernel.get("busy_share_pct") is not None:
        facts.append(Fact("profile", "kernel (% of busy CPU)", kernel["busy_share_pct"], "%", "share", source))
    return facts
