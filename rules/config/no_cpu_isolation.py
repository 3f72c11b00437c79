"""A multi-node database host with no CPU isolation and no binding of the database.

What it detects:
    A host with two or more NUMA nodes that runs a database (SQL statements, database settings or
    perf samples of a database process were captured) whose kernel command line has none of
    ``isolcpus``, ``nohz_full``, ``rcu_nocbs``, ``irqaffinity``, and whose database process, when
    its ``/proc/PID/status`` was captured, is allowed on every CPU. Informational: isolation is a
    tuning step, not a fault.

Why it matters:
    On a large multi-node server, interrupts, softirqs, timers, RCU callbacks and housekeeping
    threads land on the same CPUs as the database's threads, and the scheduler moves those
    threads across nodes. Fencing a few CPUs for the OS and the NIC (``irqaffinity``,
    ``isolcpus``/``nohz_full`` or cgroup cpusets) and binding the database to the rest keeps
    its caches and memory local and its latency steady.

How it is detected:
    Inputs: ``host_setting`` (cmdline parameters; ``process_affinity`` of the database process),
    the node count from ``topology`` / ``numa_node``, and evidence of a database (``statement``,
    ``db_setting``, or a database comm — mysqld, mariadbd, postgres, tidb-server, tikv-server ...
    — in ``perf_stack`` / ``perf_symbol``). Fires when the machine has at least MIN_NODES = 2
    nodes, the command line names none of ISOLATION_PARAMETERS, and no captured database
    process is restricted to fewer CPUs than the machine has. Never on one node; skipped when
    /proc/cmdline or the database evidence is missing.

Remediation:
    Decide which CPUs serve the OS and interrupts (e.g. two cores per node), then either bind
    the database (``numactl --cpunodebind=N --membind=N``, systemd ``CPUAffinity=`` /
    ``NUMAPolicy=``), or isolate at boot (``irqaffinity=0-1``, ``isolcpus=managed_irq,domain,2-N``,
    ``nohz_full=2-N rcu_nocbs=2-N``) — isolcpus takes the CPUs away from the scheduler's load
    balancing, so the database must then be pinned onto them explicitly.

References:
    Linux kernel Documentation/admin-guide/kernel-parameters.txt (isolcpus, nohz_full,
    rcu_nocbs, irqaffinity); Documentation/admin-guide/cgroup-v2.rst (cpuset); Red Hat
    "Isolating CPUs using tuned-profiles-realtime"; numactl(8), systemd.exec(5).
"""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.cpulist import format_cpu_list, parse_cpu_list
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import cmdline_sources, database_affinity, database_evidence, setting_values
from dbdiag.rules.host_counts import numa_nodes
from dbdiag.vocabulary.kernel import CPU_ISOLATION_PARAMETERS

RULE_ID = "no-cpu-isolation"

MIN_NODES = 2
ISOLATION_PARAMETERS = CPU_ISOLATION_PARAMETERS


def check(inp: RuleInput) -> Verdict:
    nodes = numa_nodes(inp)
    if nodes is None:
        raise Skip("NUMA node count unknown: needs lscpu, numactl --hardware or numastat")
    if nodes.value < MIN_NODES:
        return Verdict(measured=f"{nodes.value} NUMA node ({nodes.source}); judged from {MIN_NODES} nodes")
    if cmdline_sources(inp) is None:
        raise Skip("no /proc/cmdline captured: cannot tell whether CPUs are isolated")
    params = setting_values(inp, "cmdline")
    databases = database_evidence(inp)
    if not databases:
        raise Skip("no database seen on this host (no SQL statements, database settings or database process in perf)")
    isolation = {name: params[name].value for name in ISOLATION_PARAMETERS if name in params}
    if isolation:
        shown = ", ".join(f"{name}={value}" for name, value in isolation.items())
        return Verdict(measured=f"{nodes.value} nodes; kernel command line isolates CPUs: {shown}")
    all_cpus = _all_cpus(inp)
    affinity = database_affinity(inp)
    bound = [p for p in affinity if p.cpus is not None and all_cpus and len(set(p.cpus)) < len(all_cpus)]
    if bound:
        shown = "; ".join(f"{p.subject} on CPUs {p.cpus_text}" for p in bound)
        return Verdict(measured=f"{nodes.value} nodes; no isolation on the command line but the database is bound: {shown}")
    return Verdict(
        findings=[_finding(inp, nodes.value, all_cpus, affinity, databases)],
        measured=f"{nodes.value} nodes; none of {', '.join(ISOLATION_PARAMETERS)} on the command line; database not bound",
    )


def _all_cpus(inp: RuleInput) -> list[int]:
    """The machine's CPUs from lscpu/numactl topology, else from the numa_node CPU lists."""
    topology = inp.table(t.TOPOLOGY)
    if topology is not None:
        return sorted(set(topology["cpu"].drop_nulls().to_list()))
    nodes = inp.table(t.NUMA_NODE)
    cpus: set[int] = set()
    for text in nodes["cpus"].drop_nulls().to_list() if nodes is not None else []:
        try:
            cpus.update(parse_cpu_list(text))
        except ValueError:
            continue
    return sorted(cpus)


def _finding(inp: RuleInput, nodes: int, all_cpus: list[int], affinity: list, databases: list[str]) -> Finding:
    cmd_sources = cmdline_sources(inp) or []
    rows = [(name, "not set", ", ".join(cmd_sources)) for name in ISOLATION_PARAMETERS]
    rows += [(f"{p.subject} Cpus_allowed_list", p.cpus_text or "?", p.source) for p in affinity]
    if not affinity:
        rows.append(("database process affinity", "not captured (/proc/PID/status)", ""))
    evidence = (
        Evidence(title="CPU isolation and database binding", columns=("setting", "value", "source"), rows=tuple(rows)),
        Evidence(title="Database on this host", text="\n".join(databases)),
    )
    cpu_text = f" of {len(all_cpus)} CPUs ({format_cpu_list(all_cpus)})" if all_cpus else ""
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.INFO,
        title=f"{nodes}-node database host{cpu_text}: no isolcpus/nohz_full/rcu_nocbs/irqaffinity and the database is not bound",
        subject="cpu isolation",
        impact={"description": "interrupts, housekeeping and database threads share every CPU of every node", "nodes": nodes},
        evidence=evidence,
        remediation="\n".join([
            "Pick housekeeping CPUs (e.g. the first two cores of each node) for the OS and interrupts, then either:",
            "a) bind the database per node: numactl --cpunodebind=N --membind=N <server> (one instance per node),",
            "   or with systemd: systemctl edit <service> ->",
            "   [Service]",
            "   CPUAffinity=<database CPUs>",
            "   NUMAPolicy=bind",
            "   NUMAMask=<nodes>",
            "b) or isolate at boot (GRUB_CMDLINE_LINUX): irqaffinity=<housekeeping CPUs> nohz_full=<database CPUs>",
            "   rcu_nocbs=<database CPUs>; with isolcpus=managed_irq,domain,<database CPUs> the scheduler no longer",
            "   balances those CPUs, so pin the database onto them explicitly (taskset/numactl/CPUAffinity=).",
            "Check afterwards: grep Cpus_allowed_list /proc/$(pidof <server>)/status; cat /proc/cmdline",
        ]),
        sources=tuple(dict.fromkeys(row[2] for row in rows if row[2])),
    )


RULE = Rule(
    id=RULE_ID,
    title="Multi-node database host without CPU isolation or binding",
    area="config",
    requires=((t.HOST_SETTING,), (t.TOPOLOGY, t.NUMA_NODE, t.NUMA_COUNTER, t.HOST_FACT)),
    check=check,
    doc=__doc__ or "",
)
