"""Database or proxy processes allowed on every CPU of a multi-node machine.

What it detects:
    Database servers (mysqld, mariadbd, postgres, tidb-server, tikv-server, pd-server ...) and
    proxies/poolers (haproxy, proxysql, pgbouncer ...) whose ``Cpus_allowed_list`` (from
    ``/proc/PID/status`` or ``taskset -p``) covers every CPU of a machine with two or more
    NUMA nodes: the scheduler may run their threads on any node, away from their memory.

Why it matters:
    An unbound process's threads migrate between nodes and its memory ends up spread over all
    of them, so a share of every access is remote; caches are cold after each migration;
    when several instances share the host they compete on every node. The cost shows up as
    remote-memory counters in numastat and as page-fault / NUMA-balancing / syscall time in the
    CPU profile, not as a saturated resource.

How it is detected:
    Inputs: ``host_setting`` (process affinity) and ``topology`` (CPUs and their nodes). Never
    judged on a single-node machine. A process is unbound when its CPU list holds every CPU
    the topology knows. Severity is a warning when the capture also shows the cost: a node with
    REMOTE_SHARE_PCT = 15% or more remote allocations (derived from numastat), or the process's
    own memory with less than LOCAL_MEMORY_PCT = 85% on its largest node (``numastat -p``), or
    the profile's page-faults/NUMA category at PROFILE_NUMA_SHARE_PCT = 5% or more of busy
    samples; otherwise info.

Remediation:
    Bind each instance to one node, CPUs and memory together:
    ``numactl --cpunodebind=N --membind=N`` in the service's start command, or systemd
    ``CPUAffinity=`` + ``NUMAPolicy=bind`` + ``NUMAMask=``; for HAProxy ``cpu-map`` with one
    process/thread group per node; for a single instance larger than a node, interleave its
    memory (``numactl --interleave=all``) rather than leaving placement to chance. Keep NIC
    interrupt CPUs out of the database's set when softirqs are heavy.

References:
    numactl(8), taskset(1), systemd.exec(5) (CPUAffinity=, NUMAPolicy=); HAProxy ``cpu-map``;
    TiDB "Deploy on NUMA" (numa_node in the topology file).
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import format_cpu_list
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.numa.common import Binding, cpu_node_map, node_count, process_bindings
from dbdiag.rules.processes import is_database_or_proxy

RULE_ID = "unbound-processes"

REMOTE_SHARE_PCT = 15.0
LOCAL_MEMORY_PCT = 85.0
PROFILE_NUMA_SHARE_PCT = 5.0


def check(inp: RuleInput) -> Verdict:
    nodes = node_count(inp)
    if nodes < 2:
        raise Skip(f"{nodes or 1} NUMA node: binding to a node changes nothing")
    cpu_nodes = cpu_node_map(inp)
    if not cpu_nodes:
        raise Skip("the CPU topology (lscpu or numactl --hardware) is needed to tell which CPUs each node has")
    bindings = [b for b in process_bindings(inp) if is_database_or_proxy(b.name) and b.cpus is not None]
    if not bindings:
        raise Skip("no database or proxy process affinity (/proc/PID/status, taskset -p) in the capture")
    all_cpus = set(cpu_nodes)
    unbound = [b for b in bindings if all_cpus <= set(b.cpus or ())]
    measured = "; ".join(
        f"{b.subject}: CPUs {format_cpu_list(b.cpus or ())}{' (all)' if b in unbound else ''}" for b in bindings
    )
    if not unbound:
        return Verdict(measured=measured)
    cost = _cost_signals(inp, unbound)
    return Verdict(findings=[_finding(inp, unbound, cost, nodes, len(all_cpus))], measured=measured)


def _cost_signals(inp: RuleInput, unbound: list[Binding]) -> list[tuple[str, str]]:
    """Evidence that the lack of binding costs something now: (signal, value) pairs."""
    signals: list[tuple[str, str]] = []
    remote = inp.table(t.NUMA_REMOTE, keep_empty=True)
    if remote is not None and remote.height and not bool(remote["since_boot"].any()):
        for node, pct in remote.filter(pl.col("remote_pct") >= REMOTE_SHARE_PCT).select("node", "remote_pct").rows():
            signals.append((f"node {node} remote allocations (numastat)", f"{pct:.1f}%"))
    memory = inp.table(t.NUMA_PROCESS_MEMORY, keep_empty=True)
    if memory is not None and memory.height:
        names = {b.name for b in unbound}
        pids = {b.pid for b in unbound if b.pid is not None}
        for (pid, process), group in memory.filter(
            pl.col("process").is_in(list(names)) | pl.col("pid").is_in(list(pids))
        ).group_by("pid", "process", maintain_order=True):
            total = float(group["total_mb"].sum())
            if total <= 0:
                continue
            largest = 100.0 * float(group["total_mb"].max()) / total
            if largest < LOCAL_MEMORY_PCT:
                spread = ", ".join(f"node {n} {mb:,.0f} MB" for n, mb in group.sort("node").select("node", "total_mb").rows())
                signals.append((f"{process} {pid} memory spread (numastat -p)", spread))
    profile = inp.metric(t.CPU_PROFILE_METRIC) or {}
    for category in profile.get("categories", []):
        if category.get("category") == "page-faults-numa" and (category.get("busy_share_pct") or 0) >= PROFILE_NUMA_SHARE_PCT:
            signals.append(("page faults / NUMA balancing in the CPU profile", f"{category['busy_share_pct']:.1f}% of busy samples"))
    return signals


def _finding(inp: RuleInput, unbound: list[Binding], cost: list[tuple[str, str]], nodes: int, cpus: int) -> Finding:
    names = ", ".join(b.subject for b in unbound)
    severity = Severity.WARNING if cost else Severity.INFO
    evidence = [
        Evidence(
            title="Processes allowed on every CPU",
            columns=("process", "Cpus_allowed_list", "Mems_allowed_list", "source"),
            rows=tuple(
                (b.subject, format_cpu_list(b.cpus or ()), format_cpu_list(b.mems) if b.mems else None, b.source)
                for b in unbound
            ),
        )
    ]
    if cost:
        evidence.append(Evidence(title="What it costs in this capture", columns=("signal", "value"), rows=tuple(cost)))
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=f"{len(unbound)} database/proxy process(es) may run on all {cpus} CPUs of {nodes} NUMA nodes: {names}",
        subject=", ".join(sorted({b.name or b.subject for b in unbound})),  # names only: pids change with every start
        objects=tuple(b.subject for b in unbound),
        impact={
            "description": "threads and memory of these processes are placed by chance across nodes"
            + ("; the capture shows remote-memory cost" if cost else ""),
            "processes": [b.subject for b in unbound],
        },
        evidence=tuple(evidence),
        remediation=_remediation(unbound, nodes),
        sources=tuple(sorted({b.source for b in unbound})),
    )


def _remediation(unbound: list[Binding], nodes: int) -> str:
    lines = ["Bind each instance's CPUs and memory to one node (spread instances over the nodes):"]
    for index, binding in enumerate(unbound):
        node = index % nodes
        lines.append(f"   {binding.name}: numactl --cpunodebind={node} --membind={node} <its start command>")
    lines.append("   systemd: [Service] CPUAffinity=<node's CPUs>, NUMAPolicy=bind, NUMAMask=<node>")
    lines.append("   HAProxy: cpu-map auto:1/1-<n> <node's CPUs> with nbthread = that node's cores")
    lines.append("An instance larger than one node: numactl --interleave=all (MySQL/MariaDB: innodb_numa_interleave=ON).")
    lines.append("Check after restart: grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/<pid>/status; numastat -p <pid>.")
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="Database or proxy processes not bound to a NUMA node",
    area="numa",
    requires=((t.HOST_SETTING,), (t.TOPOLOGY,)),
    check=check,
    doc=__doc__ or "",
)
