"""A device's interrupts served by one CPU or one NUMA node while the others idle.

What it detects:
    Busy devices (NICs, NVMe, HBAs: every numbered line of ``/proc/interrupts`` with a
    device name, queues of one device counted together) whose interrupts, between the first
    and the last ``/proc/interrupts`` snapshot, were handled by very few CPUs, or only by the
    CPUs of one NUMA node on a multi-node machine.

Why it matters:
    The CPU that takes a device interrupt also runs its softirq work (packet or I/O
    completion). A multi-queue NIC whose queues all point at CPU 0, or at node 0, turns a
    many-core server into one limited by those few cores, and makes every other node's
    threads reach across the interconnect for their packets.

How it is detected:
    Inputs: ``irq_count`` (two or more ``/proc/interrupts`` snapshots), ``topology`` for nodes.
    Per device (queue suffixes such as ``-TxRx-3``, ``-input.0`` or ``q3`` removed), the growth
    of its interrupt counters per CPU. A device is judged when it took at least
    MIN_DEVICE_INTERRUPTS = 5,000 interrupts. Its serving CPUs are the fewest CPUs that together
    took SERVED_SHARE_PCT = 95% of them. It fires when the serving CPUs are at most
    FEW_CPUS_SHARE = 12.5% of the machine's CPUs, or all lie in one node of a machine with two
    or more nodes. (An NVMe drive with one queue per four CPUs on every node is fine, hence
    12.5% rather than a quarter.) Machines with fewer than MIN_CPUS = 4 CPUs are not judged.
    Timer and inter-processor lines (named rows such as LOC, RES, IPI0, and the per-CPU
    ``arch_timer``) are not devices and are left out.

Remediation:
    Spread the device's queue interrupts over CPUs of every node (``/proc/irq/N/smp_affinity_list``,
    irqbalance, vendor scripts), give the NIC more queues (``ethtool -L IFACE combined N``), or
    dedicate one node to interrupts on purpose and bind the database to the others.

References:
    Linux kernel Documentation/core-api/irq/irq-affinity.rst;
    Documentation/networking/scaling.rst; irqbalance(1).
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import format_cpu_list
from dbdiag.derive.cpu import device_family, device_interrupts
from dbdiag.findings import Bar, BarGroup, Chart, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

RULE_ID = "irq-affinity-skew"

MIN_CPUS = 4
MIN_DEVICE_INTERRUPTS = 5_000
SERVED_SHARE_PCT = 95.0
FEW_CPUS_SHARE = 0.125


def check(inp: RuleInput) -> Verdict:
    irq_delta = inp.derived.get("irq_delta")
    if irq_delta is None:
        raise Skip("needs two /proc/interrupts snapshots (before and after) to see where interrupts went")
    cpus = _cpu_count(inp)
    if cpus < MIN_CPUS:
        raise Skip(f"{cpus} CPU(s) in the capture; skew is judged from {MIN_CPUS} CPUs up")
    devices = _device_growth(irq_delta)
    node_count = inp.derived["cpu_nodes"]["node"].drop_nulls().n_unique()
    findings: list[Finding] = []
    judged: list[str] = []
    for family, per_cpu in devices.items():
        total = per_cpu["delta"].sum()
        if total < MIN_DEVICE_INTERRUPTS:
            continue
        serving = _serving_cpus(per_cpu, total)
        serving_cpus = serving["cpu"].to_list()
        nodes = serving["node"].drop_nulls().unique().to_list()
        judged.append(f"{family}: {total:,} interrupts on CPUs {format_cpu_list(serving_cpus)}")
        few = len(serving_cpus) <= max(1, int(cpus * FEW_CPUS_SHARE))
        one_node = node_count >= 2 and len(nodes) == 1 and serving["node"].null_count() == 0
        if few or one_node:
            findings.append(_finding(inp, family, per_cpu, serving_cpus, nodes, cpus, node_count))
    if not judged:
        return Verdict(measured=f"no device took {MIN_DEVICE_INTERRUPTS:,} interrupts or more between snapshots")
    return Verdict(findings=findings, measured="; ".join(judged[:8]))


def _cpu_count(inp: RuleInput) -> int:
    counts = inp.tables[t.IRQ_COUNT]
    return max(counts["cpu"].n_unique(), inp.derived["cpu_nodes"].height)


def _serving_cpus(per_cpu: pl.DataFrame, total: int) -> pl.DataFrame:
    """The fewest CPUs that together took SERVED_SHARE_PCT of the device's interrupts."""
    ranked = per_cpu.sort("delta", descending=True).with_columns(
        (pl.col("delta").cum_sum() - pl.col("delta")).alias("before")
    )
    return ranked.filter(pl.col("before") < total * SERVED_SHARE_PCT / 100.0).sort("cpu")


def _device_growth(irq_delta: pl.DataFrame) -> dict[str, pl.DataFrame]:
    grouped = device_interrupts(irq_delta).group_by("family", "cpu").agg(
        pl.col("delta").sum(), pl.col("node").first(), pl.col("irq").unique().sort().alias("irqs")
    )
    return {
        family: frame.sort("cpu")
        for (family,), frame in sorted(grouped.group_by("family"), key=lambda item: -item[1]["delta"].sum())
    }


def _finding(
    inp: RuleInput,
    family: str,
    per_cpu: pl.DataFrame,
    serving_cpus: list[int],
    nodes: list[int],
    cpus: int,
    node_count: int,
) -> Finding:
    total = int(per_cpu["delta"].sum())
    on_serving = int(per_cpu.filter(pl.col("cpu").is_in(serving_cpus))["delta"].sum())
    share_pct = 100.0 * on_serving / total
    node_text = f" (node {nodes[0]})" if len(nodes) == 1 and node_count >= 2 else ""
    irq_delta = inp.derived["irq_delta"]
    lines = (
        irq_delta.filter(pl.col("device").map_elements(device_family, return_dtype=pl.String) == family)
        .group_by("irq", "device")
        .agg(
            pl.col("delta").sum().alias("total"),
            pl.col("cpu").sort_by("delta", descending=True).first().alias("top_cpu"),
            pl.col("delta").max().alias("top"),
        )
        .sort("total", descending=True)
    )
    irqs = lines["irq"].to_list()
    other_nodes = sorted(set(inp.derived["cpu_nodes"]["node"].drop_nulls().to_list()) - set(nodes))
    remediation = "\n".join(
        [
            f"{family}'s interrupts ({total:,} between snapshots) went to CPUs {format_cpu_list(serving_cpus)}{node_text} "
            f"of {cpus} CPUs.",
            "1. Where each line may go now:",
            f"   for irq in {' '.join(irqs[:16])}; do echo $irq $(cat /proc/irq/$irq/smp_affinity_list); done",
            "2. Spread the queues, one CPU per queue, across nodes"
            + (f" (e.g. some on node {other_nodes[0]})" if other_nodes else "")
            + ":",
            f"   echo <cpu> > /proc/irq/{irqs[0]}/smp_affinity_list",
            "   or let irqbalance do it: systemctl enable --now irqbalance (check its --banirq/--policyscript settings)",
            "3. A single-queue device cannot be spread by affinity: add queues (ethtool -L IFACE combined N) "
            "or use RPS (/sys/class/net/IFACE/queues/rx-0/rps_cpus).",
            "4. If the skew is deliberate (interrupts fenced onto one node), make sure the database is bound "
            "to the other nodes (numactl --cpunodebind/--membind).",
        ]
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=(
            f"{family}: {share_pct:.0f}% of {total:,} interrupts on CPUs {format_cpu_list(serving_cpus)}{node_text}; "
            f"threshold: at most {FEW_CPUS_SHARE:.1%} of {cpus} CPUs or one node"
        ),
        subject=family,
        impact={
            "share_pct": round(share_pct, 1),
            "description": f"{len(serving_cpus)} of {cpus} CPUs take {share_pct:.0f}% of {family}'s interrupts",
            "interrupts": total,
            "serving_cpus": serving_cpus,
            "nodes": nodes,
        },
        evidence=(
            Evidence(
                title=f"{family}: interrupt lines (growth between snapshots)",
                columns=("IRQ", "line", "interrupts", "busiest CPU", "on that CPU"),
                rows=tuple(lines.select("irq", "device", "total", "top_cpu", "top").rows()),
            ),
            Evidence(
                title=f"{family}: interrupts per CPU",
                columns=("CPU", "node", "interrupts", "%"),
                rows=tuple(
                    (cpu, node, int(delta), round(100.0 * delta / total, 1))
                    for cpu, node, delta in per_cpu.select("cpu", "node", "delta").rows()
                ),
            ),
        ),
        remediation=remediation,
        sources=tuple(inp.metrics.get("cpu", {}).get("interrupt_snapshots") or sorted(inp.tables[t.IRQ_COUNT]["source"].unique().to_list())),
        charts=(_chart(family, per_cpu, inp.derived["cpu_nodes"], set(serving_cpus)),),
    )


def _chart(family: str, per_cpu: pl.DataFrame, cpu_nodes: pl.DataFrame, highlight: set[int]) -> Chart:
    counts = dict(per_cpu.select("cpu", "delta").iter_rows())
    known = cpu_nodes.select("cpu", "node").rows() or [(cpu, None) for cpu in sorted(counts)]
    groups: dict[str, list[Bar]] = {}
    for cpu, node in sorted(known, key=lambda row: (row[1] is None, row[1] or 0, row[0])):
        label = f"node {node}" if node is not None else "node ?"
        groups.setdefault(label, []).append(Bar(f"CPU {cpu}", float(counts.get(cpu, 0)), cpu in highlight))
    return Chart(
        title=f"{family}: interrupts per CPU between snapshots, grouped by NUMA node",
        unit="interrupts",
        groups=tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items()),
    )


RULE = Rule(
    id=RULE_ID,
    title="Device interrupts served by one CPU or one NUMA node",
    area="cpu",
    requires=((t.IRQ_COUNT,),),
    check=check,
    doc=__doc__ or "",
)
