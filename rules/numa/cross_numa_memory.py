"""Memory accessed across NUMA nodes: allocations served remotely, or a process's memory away from its CPUs.

What it detects:
    On a machine with two or more NUMA nodes, either
    (a) a node whose allocations were largely served from another node's memory during the
        capture: ``other_node`` growth against ``local_node`` growth in ``numastat`` (or
        ``/sys/devices/system/node/node*/numastat``) snapshots, or
    (b) a process whose CPUs (``Cpus_allowed_list``) lie on some nodes while most of its
        memory (``numastat -p``) sits on others.

Why it matters:
    A remote access costs roughly 1.5-2x a local one and crosses an interconnect shared by
    everyone on the socket. A database whose threads run on node 0 while its buffer pool
    sits on node 1 does every page access remotely: throughput drops and latency rises with
    no visible CPU or I/O saturation, which is how two identical servers end up at 21k and 11k TPS.

How it is detected:
    Inputs: ``numa_counter`` (numastat, numastat -p, sysfs node numastat); ``host_setting``
    process affinity; ``topology`` for the nodes of CPUs. Never judged on a single-node machine.
    (a) per node, remote_pct = other_node / (local_node + other_node) over the growth between the
    first and last snapshot; fires at REMOTE_SHARE_PCT = 15% or more when the node allocated at
    least MIN_NODE_PAGES = 10,000 pages (40 MB of 4 KiB pages) in between. With a single
    snapshot the since-boot counters are judged the same way but reported as info (history,
    not necessarily now).
    (b) per process with at least MIN_PROCESS_MB = 64 MB in ``numastat -p`` and a known CPU
    list: the share of its memory on nodes none of its CPUs belong to; fires at
    REMOTE_SHARE_PCT = 15% or more. Critical from CRITICAL_SHARE_PCT = 50%.

Remediation:
    Bind each instance's CPUs and memory to the same node
    (``numactl --cpunodebind=N --membind=N``, systemd ``NUMAPolicy=bind`` + ``NUMAMask=`` and
    ``CPUAffinity=``), run one instance per node, or, for one instance bigger than a node,
    interleave its memory (``numactl --interleave=all``, MySQL/MariaDB
    ``innodb_numa_interleave=ON``) so that no node is the remote one for everybody.
    Remove bindings that contradict each other (CPUs on one node, ``--membind`` on another).

References:
    numastat(8), numactl(8); Linux Documentation/admin-guide/mm/numa_memory_policy.rst;
    MySQL ``innodb_numa_interleave``; Jeremy Cole, "The MySQL swap insanity problem and the
    effects of the NUMA architecture".
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import format_cpu_list
from dbdiag.findings import Bar, BarGroup, Chart, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.numa.common import Binding, cpu_node_map, node_count, process_bindings

RULE_ID = "cross-numa-memory"

REMOTE_SHARE_PCT = 15.0
CRITICAL_SHARE_PCT = 50.0
MIN_NODE_PAGES = 10_000
MIN_PROCESS_MB = 64.0


def check(inp: RuleInput) -> Verdict:
    nodes = node_count(inp)
    if nodes < 2:
        raise Skip(f"{nodes or 1} NUMA node: all memory is local")
    findings: list[Finding] = []
    measured: list[str] = []
    remote = inp.table(t.NUMA_REMOTE, keep_empty=True)
    if remote is not None and remote.height:
        node_findings, node_measured = _node_findings(remote)
        findings += node_findings
        measured.append(node_measured)
    process_memory = inp.table(t.NUMA_PROCESS_MEMORY, keep_empty=True)
    if process_memory is not None and process_memory.height:
        process_findings, process_measured = _process_findings(inp, process_memory)
        findings += process_findings
        measured.append(process_measured)
    if not measured:
        raise Skip("numastat gave neither per-node allocation counters nor per-process memory")
    return Verdict(findings=findings, measured="; ".join(measured))


def _node_findings(remote: pl.DataFrame) -> tuple[list[Finding], str]:
    since_boot = bool(remote["since_boot"].any())
    window = "since boot" if since_boot else "between snapshots"
    judged = remote.filter((pl.col("local_node") + pl.col("other_node")) >= MIN_NODE_PAGES)
    parts = [
        f"node {node} {pct:.1f}% remote" for node, pct in judged.select("node", "remote_pct").rows() if pct is not None
    ]
    measured = f"per-node remote allocations {window}: " + (", ".join(parts) or f"no node allocated {MIN_NODE_PAGES:,} pages")
    hot = judged.filter(pl.col("remote_pct") >= REMOTE_SHARE_PCT).sort("remote_pct", descending=True)
    if hot.height == 0:
        return [], measured
    worst = hot.row(0, named=True)
    hot_nodes = hot["node"].to_list()
    severity = Severity.INFO if since_boot else (Severity.CRITICAL if worst["remote_pct"] >= CRITICAL_SHARE_PCT else Severity.WARNING)
    sources = tuple(s for s in (worst.get("first_source"), worst.get("last_source")) if s)
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"{worst['remote_pct']:.0f}% of node {worst['node']}'s allocations came from other nodes {window}"
            f"{_others_text(hot)}; threshold {REMOTE_SHARE_PCT:.0f}%"
        ),
        subject=f"node {worst['node']}",
        impact={
            "share_pct": round(float(worst["remote_pct"]), 1),
            "description": f"{int(worst['other_node']):,} of {int(worst['local_node'] + worst['other_node']):,} pages "
            f"allocated on node {worst['node']} were remote {window}",
            "nodes": hot_nodes,
        },
        evidence=(
            Evidence(
                title=f"numastat per node ({window}, pages)",
                columns=("node", "local_node", "other_node", "remote %", "numa_miss", "numa_foreign"),
                rows=tuple(
                    (r["node"], r["local_node"], r["other_node"], _round(r["remote_pct"]), r["numa_miss"], r["numa_foreign"])
                    for r in remote.sort("node").iter_rows(named=True)
                ),
            ),
        ),
        remediation=_remediation(None),
        sources=sources,
        charts=(_node_chart(remote, set(hot_nodes), window),),
    )
    return [finding], measured


def _others_text(hot: pl.DataFrame) -> str:
    """`` (and node 3 at 22%)`` or `` (and 15 other nodes at 17-31%)`` for the nodes after the worst."""
    others = hot.slice(1)
    if others.height == 0:
        return ""
    if others.height == 1:
        node, pct = others.select("node", "remote_pct").row(0)
        return f" (and node {node} at {pct:.0f}%)"
    low, high = others["remote_pct"].min(), others["remote_pct"].max()
    return f" (and {others.height} other nodes at {low:.0f}-{high:.0f}%)"


def _process_findings(inp: RuleInput, memory: pl.DataFrame) -> tuple[list[Finding], str]:
    bindings = process_bindings(inp)
    cpu_nodes = cpu_node_map(inp)
    findings: list[Finding] = []
    measured: list[str] = []
    for (pid, process), group in memory.group_by("pid", "process", maintain_order=True):
        total_mb = float(group["total_mb"].sum())
        if total_mb < MIN_PROCESS_MB:
            continue
        binding = _binding_for(bindings, pid, process)
        if binding is None or binding.cpus is None or not cpu_nodes:
            measured.append(f"{process} {pid}: {total_mb:,.0f} MB, CPU list unknown")
            continue
        cpu_nodes_of_process = sorted({cpu_nodes[c] for c in binding.cpus if c in cpu_nodes})
        away = group.filter(~pl.col("node").is_in(cpu_nodes_of_process))
        away_pct = 100.0 * float(away["total_mb"].sum()) / total_mb
        measured.append(f"{process} {pid}: {away_pct:.0f}% of {total_mb:,.0f} MB off its CPUs' nodes")
        if away_pct >= REMOTE_SHARE_PCT:
            findings.append(_process_finding(process, pid, group, total_mb, away_pct, binding, cpu_nodes_of_process))
    return findings, "; ".join(measured) or f"no process with {MIN_PROCESS_MB:.0f} MB or more in numastat -p"


def _binding_for(bindings: list[Binding], pid: int | None, process: str | None) -> Binding | None:
    by_pid = [b for b in bindings if pid is not None and b.pid == pid]
    if by_pid:
        return by_pid[0]
    by_name = [b for b in bindings if b.pid is None and process and b.name == process]
    return by_name[0] if len(by_name) == 1 else None


def _process_finding(
    process: str, pid: int | None, group: pl.DataFrame, total_mb: float, away_pct: float, binding: Binding, nodes: list[int]
) -> Finding:
    severity = Severity.CRITICAL if away_pct >= CRITICAL_SHARE_PCT else Severity.WARNING
    node_text = ", ".join(map(str, nodes))
    mems = format_cpu_list(binding.mems) if binding.mems else "unknown"
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"{process} ({pid}): {away_pct:.0f}% of its {total_mb:,.0f} MB lies on nodes none of its CPUs "
            f"({format_cpu_list(binding.cpus or ())}, node {node_text}) belong to; threshold {REMOTE_SHARE_PCT:.0f}%"
        ),
        subject=str(process),  # the pid changes with every start: the id must not
        objects=(f"{process} {pid}",) if pid is not None else (),
        impact={
            "share_pct": round(away_pct, 1),
            "description": f"every access to {away_pct:.0f}% of {process}'s memory crosses the interconnect",
            "memory_mb": round(total_mb, 1),
            "cpu_nodes": nodes,
        },
        evidence=(
            Evidence(
                title=f"{process} ({pid}) memory per node (numastat -p, MB)",
                columns=("node", "MB", "% of process", "node has its CPUs"),
                rows=tuple(
                    (node, round(mb, 2), round(100.0 * mb / total_mb, 1), "yes" if node in nodes else "no")
                    for node, mb in group.sort("node").select("node", "total_mb").rows()
                ),
            ),
            Evidence(
                title="Where it may run and allocate",
                columns=("setting", "value", "source"),
                rows=(
                    ("Cpus_allowed_list", format_cpu_list(binding.cpus or ()), binding.source),
                    ("Mems_allowed_list", mems, binding.source),
                ),
            ),
        ),
        remediation=_remediation((process, nodes)),
        sources=tuple(sorted({*group["source"].unique().to_list(), binding.source})),
    )


def _remediation(process_nodes: tuple[str, list[int]] | None) -> str:
    if process_nodes:
        process, nodes = process_nodes
        node = nodes[0] if nodes else 0
        first = (
            f"1. Put {process}'s memory where its CPUs are: restart it under "
            f"numactl --cpunodebind={node} --membind={node} (systemd: CPUAffinity= plus NUMAPolicy=bind, NUMAMask={node})."
        )
    else:
        first = "1. Find who allocates remotely: numastat -p <pid> for the database and proxy processes, per node."
    return "\n".join(
        [
            first,
            "2. One instance per node (each bound with --cpunodebind=N --membind=N), or, for one instance larger "
            "than a node, interleave: numactl --interleave=all, innodb_numa_interleave=ON (MySQL/MariaDB).",
            "3. Check for contradicting bindings: grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/<pid>/status.",
            "4. Re-measure: numastat -c before and after a minute of load; other_node should stay a small share of local_node.",
        ]
    )


def _node_chart(remote: pl.DataFrame, hot: set[int], window: str) -> Chart:
    return Chart(
        title=f"Remote share of each node's allocations ({window})",
        unit="%",
        groups=tuple(
            BarGroup(f"node {node}", (Bar(f"node {node}", float(pct or 0.0), node in hot),))
            for node, pct in remote.sort("node").select("node", "remote_pct").rows()
        ),
        threshold=REMOTE_SHARE_PCT,
        threshold_label=f"{REMOTE_SHARE_PCT:.0f}%",
    )


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


RULE = Rule(
    id=RULE_ID,
    title="Memory accessed across NUMA nodes",
    area="numa",
    requires=((t.NUMA_COUNTER,),),
    check=check,
    doc=__doc__ or "",
)
