"""Automatic NUMA balancing switched on on a multi-node machine.

What it detects:
    ``kernel.numa_balancing`` set to 1 (or 3: balancing plus memory tiering) in ``sysctl`` — or,
    when no sysctl was captured, ``numa_balancing=enable`` on the kernel command line — on a
    machine with two or more NUMA nodes. On one node there is nothing to balance: never fires.

Why it matters:
    NUMA balancing periodically unmaps pages of every process (``numa_pte_updates``) so that the
    next touch takes a hinting fault (``numa_hint_faults``) and the kernel can move the page or
    the task towards each other (``numa_pages_migrated``). For a large database whose threads
    touch the whole buffer pool from every node, that is steady extra page faults, TLB
    shootdowns and page copies for no locality gain; and when the database is bound per node on
    purpose it only adds cost. Vendors of large databases advise turning it off.

How it is detected:
    Inputs: ``host_setting`` (sysctl ``kernel.numa_balancing``, cmdline ``numa_balancing``) and
    the node count from ``topology`` / ``numa_node`` / ``numa_counter`` (lscpu, numactl --hardware,
    numastat).
    Fires when the value is one of FIRING_SYSCTL_VALUES = 1, 3 (or the cmdline says
    ``enable``) and the machine has at least MIN_NODES = 2 nodes. Evidence adds the
    ``/proc/vmstat`` NUMA counters' growth between two snapshots when captured
    (``metrics.vmstat_numa``): hinting faults and migrated pages show the balancing at work.

Remediation:
    ``sysctl -w kernel.numa_balancing=0`` now, and ``kernel.numa_balancing = 0`` in
    ``/etc/sysctl.d/90-numa.conf`` (or ``numa_balancing=disable`` on the kernel command line)
    for the next boot — above all when the database is bound per node
    (``numactl --cpunodebind=N --membind=N``, one instance per node) or interleaved
    (``numactl --interleave=all``, ``innodb_numa_interleave=ON``).

References:
    Linux kernel Documentation/admin-guide/sysctl/kernel.rst (numa_balancing);
    Documentation/admin-guide/kernel-parameters.txt (numa_balancing=); Red Hat "Automatic NUMA
    balancing" (Performance Tuning Guide); Oracle and SAP HANA notes recommending it off.
"""

from __future__ import annotations

from typing import Any

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import Value, database_evidence, setting_values
from dbdiag.rules.host_counts import numa_nodes

RULE_ID = "numa-balancing-enabled"

MIN_NODES = 2
FIRING_SYSCTL_VALUES = ("1", "3")
FIRING_CMDLINE_VALUE = "enable"
SHOWN_VMSTAT_COUNTERS = (
    "numa_pte_updates", "numa_huge_pte_updates", "numa_hint_faults", "numa_hint_faults_local",
    "numa_pages_migrated", "pgmigrate_success", "pgmigrate_fail",
)


def check(inp: RuleInput) -> Verdict:
    runtime = setting_values(inp, "sysctl").get("kernel.numa_balancing")
    boot = setting_values(inp, "cmdline").get("numa_balancing")
    if runtime is None and boot is None:
        raise Skip("no kernel.numa_balancing captured: needs sysctl -a (or /proc/sys/kernel/numa_balancing) or /proc/cmdline")
    nodes = numa_nodes(inp)
    if nodes is None:
        raise Skip("NUMA node count unknown: needs lscpu, numactl --hardware or numastat")
    if runtime is not None:
        setting, on = f"kernel.numa_balancing = {runtime.value} ({runtime.source})", runtime.value in FIRING_SYSCTL_VALUES
    else:
        setting, on = f"cmdline numa_balancing={boot.value} ({boot.source})", boot.value == FIRING_CMDLINE_VALUE
    measured = f"{setting}; {nodes.value} NUMA node(s) ({nodes.source})"
    if nodes.value < MIN_NODES:
        return Verdict(measured=f"{measured}: one node, nothing to balance; judged from {MIN_NODES} nodes")
    if not on:
        return Verdict(measured=f"{measured}; off")
    return Verdict(findings=[_finding(inp, runtime, boot, nodes.value, nodes.source)], measured=measured)


def _finding(inp: RuleInput, runtime: Value | None, boot: Value | None, nodes: int, nodes_source: str) -> Finding:
    rows = []
    if runtime is not None:
        rows.append(("sysctl kernel.numa_balancing", runtime.value, runtime.source))
    if boot is not None:
        rows.append(("cmdline numa_balancing", boot.value, boot.source))
    rows.append(("NUMA nodes", str(nodes), nodes_source))
    evidence = [Evidence(title="NUMA balancing setting and nodes", columns=("setting", "value", "source"), rows=tuple(rows))]
    vmstat = inp.metric(t.VMSTAT_NUMA_METRIC) or {}
    counters: dict[str, Any] = vmstat.get("counters") or {}
    vm_sources = [str(s) for s in vmstat.get("sources") or []]
    impact: dict[str, Any] = {"description": "NUMA hinting faults and page migrations in every process", "nodes": nodes}
    if counters:
        shown = [name for name in SHOWN_VMSTAT_COUNTERS if name in counters] or sorted(counters)
        evidence.append(Evidence(
            title=f"/proc/vmstat NUMA counters, growth between {' and '.join(vm_sources) or 'two snapshots'}",
            columns=("counter", "growth"),
            rows=tuple((name, counters[name]) for name in shown),
        ))
        for name in ("numa_hint_faults", "numa_pages_migrated"):
            if name in counters:
                impact[name] = counters[name]
    databases = database_evidence(inp)
    if databases:
        evidence.append(Evidence(title="Database on this host", text="\n".join(databases)))
    value = runtime.value if runtime is not None else f"numa_balancing={boot.value}"
    activity = ""
    if "numa_hint_faults" in counters:
        activity = f", {counters['numa_hint_faults']:,} hinting faults"
        if "numa_pages_migrated" in counters:
            activity += f" and {counters['numa_pages_migrated']:,} pages migrated"
        activity += " during the capture"
    sources = tuple(dict.fromkeys([row[2] for row in rows] + vm_sources))
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=f"Automatic NUMA balancing on (kernel.numa_balancing = {value}) on {nodes} NUMA nodes{activity}; recommended: 0",
        subject="kernel.numa_balancing",
        impact=impact,
        evidence=tuple(evidence),
        remediation="\n".join([
            "1. Now: sysctl -w kernel.numa_balancing=0",
            "2. Persist: echo 'kernel.numa_balancing = 0' > /etc/sysctl.d/90-numa-balancing.conf && sysctl --system",
            "   (or numa_balancing=disable on the kernel command line).",
            f"3. Then place memory on purpose: bind each instance to one of the {nodes} nodes",
            "   (numactl --cpunodebind=N --membind=N, or systemd CPUAffinity=/NUMAPolicy=bind/NUMAMask=),",
            "   or interleave one big instance (numactl --interleave=all, innodb_numa_interleave=ON).",
            "4. Check after a while: grep -E 'numa_hint_faults|numa_pages_migrated' /proc/vmstat stops growing.",
        ]),
        sources=sources,
    )


RULE = Rule(
    id=RULE_ID,
    title="Automatic NUMA balancing on a multi-node machine",
    area="config",
    requires=((t.HOST_SETTING,), (t.TOPOLOGY, t.NUMA_NODE, t.NUMA_COUNTER, t.HOST_FACT)),
    check=check,
    doc=__doc__ or "",
)
