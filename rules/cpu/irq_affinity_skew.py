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
    12.5% rather than a quarter.) A one-node machine with fewer than MIN_CPUS = 4 CPUs is not
    judged (two vCPUs cannot spread much); a machine with two or more nodes is judged whatever
    its CPU count, since a device on one node makes every other node reach across for its data.
    Timer and inter-processor lines (named rows such as LOC, RES, IPI0, and the per-CPU
    ``arch_timer``) are not devices and are left out.
    Severity: a warning for I/O devices (NIC queues, NVMe, HBAs, virtio: ``derive.cpu.device_class``);
    other devices (GPU, USB, input, serial, clocks) and names not known as I/O are at most info.
    When mpstat ``%irq``/``%soft`` per CPU is in the capture, an I/O device stays a warning only if
    one of its serving CPUs is a hot softirq CPU (the softirq-concentration test: ``%soft`` at least
    max(10%, 4 x the median of the other CPUs)) spending MIN_HOT_IRQ_SOFT_PCT = 20% or more in
    ``%irq`` + ``%soft``; else it is info: the interrupts land there, but their work is spread (RPS)
    or small. (A single-queue virtio NIC with RPS over all CPUs, a real 2-node guest capture: its
    IRQs on node 1, ``%soft`` 4-22% on every CPU: info.)
    Impact ``cpu_share``: the serving CPUs' ``%irq`` + ``%soft`` above the host's mean, summed, as a
    share of all the host's CPU time, i.e. the interrupt work an even spread would move off them
    (all devices' softirq on those CPUs counts, so it is an upper bound for this one device).
    Without mpstat ``-P ALL`` it is not set.

Remediation:
    Spread the device's queue interrupts over CPUs of every node (``/proc/irq/N/smp_affinity_list``,
    irqbalance, vendor scripts), give the NIC more queues (``ethtool -L IFACE combined N``), or
    dedicate one node to interrupts on purpose and bind the database to the others.

References:
    Linux kernel Documentation/core-api/irq/irq-affinity.rst;
    Documentation/networking/scaling.rst; irqbalance(1).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import format_cpu_list, parse_cpu_list
from dbdiag.findings import CPU_SHARE, Bar, BarGroup, Chart, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.cpu import interrupt_placement as P

RULE_ID = "irq-affinity-skew"

MIN_CPUS = 4
MIN_DEVICE_INTERRUPTS = P.MIN_DEVICE_INTERRUPTS
SERVED_SHARE_PCT = P.SERVED_SHARE_PCT
FEW_CPUS_SHARE = P.FEW_CPUS_SHARE
MIN_HOT_IRQ_SOFT_PCT = 20.0


def check(inp: RuleInput) -> Verdict:
    irq_delta = inp.table(t.IRQ_DELTA, keep_empty=True)
    if irq_delta is None:
        raise Skip("needs two /proc/interrupts snapshots (before and after) to see where interrupts went")
    cpus = P.machine_cpus(inp)
    node_count = P.cpu_nodes(inp)["node"].drop_nulls().n_unique()
    if node_count < 2 and cpus < MIN_CPUS:
        raise Skip(f"{cpus} CPU(s) on one NUMA node in the capture; skew is judged from {MIN_CPUS} CPUs up (any count on 2+ nodes)")
    findings: list[Finding] = []
    judged: list[str] = []
    for skew in P.judge_devices(inp):
        judged.append(f"{skew.family}: {skew.total:,} interrupts on CPUs {format_cpu_list(skew.serving_cpus)}")
        if skew.skewed:
            findings.append(_finding(inp, skew, cpus, node_count))
    if not judged:
        return Verdict(measured=f"no device took {MIN_DEVICE_INTERRUPTS:,} interrupts or more between snapshots")
    return Verdict(findings=findings, measured="; ".join(judged[:8]))


@dataclass(frozen=True)
class Cost:
    """What the serving CPUs spend in interrupt work (mpstat means)."""

    irq_soft_pct: float  # mean %irq+%soft of the serving CPUs
    cpu_share: float  # interrupt_placement.interrupt_cost
    hot_cpus: list[int]  # serving CPUs that are hot softirq CPUs at MIN_HOT_IRQ_SOFT_PCT or more


def _cost(inp: RuleInput, serving_cpus: list[int]) -> Cost | None:
    per_cpu = inp.table(t.PER_CPU, keep_empty=True)
    if not P.has_soft_time(per_cpu):
        return None
    mean_pct, cpu_share = P.interrupt_cost(per_cpu, serving_cpus)
    hot, _ = P.hot_softirq_cpus(per_cpu)
    work = P.interrupt_work(per_cpu)
    hot_serving = work.filter(
        pl.col("cpu").is_in(hot) & pl.col("cpu").is_in(serving_cpus) & (pl.col("work") >= MIN_HOT_IRQ_SOFT_PCT)
    )["cpu"].to_list()
    return Cost(mean_pct, cpu_share, hot_serving)


def _finding(inp: RuleInput, skew: P.DeviceSkew, cpus: int, node_count: int) -> Finding:
    family, per_cpu, serving_cpus, nodes, total = skew.family, skew.per_cpu, skew.serving_cpus, skew.nodes, skew.total
    on_serving = int(per_cpu.filter(pl.col("cpu").is_in(serving_cpus))["delta"].sum())
    share_pct = 100.0 * on_serving / total
    node_text = f" (node {nodes[0]})" if len(nodes) == 1 and node_count >= 2 else ""
    cost = _cost(inp, serving_cpus)
    severity, why = _severity(skew, cost)
    lines = (
        inp.table(t.DEVICE_INTERRUPT, keep_empty=True).filter(pl.col("family") == family)
        .group_by("irq", "device")
        .agg(
            pl.col("delta").sum().alias("total"),
            pl.col("cpu").sort_by("delta", descending=True).first().alias("top_cpu"),
            pl.col("delta").max().alias("top"),
        )
        .sort("total", descending=True)
    )
    irqs = lines["irq"].to_list()
    allowed = _allowed_cpus(inp, irqs)
    other_nodes = sorted(set(P.cpu_nodes(inp)["node"].drop_nulls().to_list()) - set(nodes))
    remediation = "\n".join(
        [
            f"{family}'s interrupts ({total:,} between snapshots) went to {_cpus_text(serving_cpus)}{node_text} "
            f"of {cpus} CPUs.",
            _mask_reading(allowed, serving_cpus, bool((lines["top"] >= 0.95 * lines["total"]).all())),
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
        severity=severity,
        title=(
            f"{family}: {share_pct:.0f}% of {total:,} interrupts on {_cpus_text(serving_cpus)}{node_text}; "
            f"threshold: at most {FEW_CPUS_SHARE:.1%} of {cpus} CPUs or one node"
            + (f" ({why})" if why else "")
        ),
        subject=family,
        impact=_impact(family, skew, share_pct, cpus, cost),
        evidence=(
            Evidence(
                title=f"{family}: interrupt lines (growth between snapshots)",
                columns=("IRQ", "line", "interrupts", "busiest CPU", "on that CPU", "allowed CPUs (smp_affinity_list)"),
                rows=tuple(row + (allowed.get(row[0], "not captured"),) for row in lines.select("irq", "device", "total", "top_cpu", "top").rows()),
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
        sources=tuple((inp.metric(t.CPU_METRIC) or {}).get("interrupt_snapshots") or sorted(inp.table(t.IRQ_COUNT, keep_empty=True)["source"].unique().to_list())),
        charts=(_chart(family, per_cpu, P.cpu_nodes(inp), set(serving_cpus)),),
    )


def _allowed_cpus(inp: RuleInput, irqs: list[str]) -> dict[str, str]:
    """IRQ -> its ``/proc/irq/N/smp_affinity_list`` as captured (irq_affinity listing), for these IRQs."""
    settings = inp.table(t.HOST_SETTING)
    if settings is None:
        return {}
    rows = settings.filter(
        (pl.col("category") == "irq_affinity") & (pl.col("name") == "smp_affinity_list") & pl.col("subject").is_in(irqs)
    )
    return dict(rows.unique(subset="subject", keep="first").select("subject", "value").rows())


def _mask_reading(allowed: dict[str, str], serving_cpus: list[int], one_cpu_each: bool) -> str:
    """What the captured affinity masks say: pinned there, or free and the kernel chose one CPU."""
    if not allowed:
        return "The capture has no /proc/irq/N/smp_affinity_list listing: step 1 shows whether the masks pin them."
    masks = {irq: _cpu_set(value) for irq, value in allowed.items()}
    listed = ", ".join(f"IRQ {irq} -> {value}" for irq, value in sorted(allowed.items()))
    if all(cpus and cpus <= set(serving_cpus) for cpus in masks.values()):
        return (
            f"Their affinity masks pin them there ({listed}): set by hand, a tuning script or an irqbalance policy; "
            "widen the masks (step 2)."
        )
    if one_cpu_each:
        return (
            f"Their affinity masks allow more CPUs ({listed}), yet each line went to one CPU: an interrupt vector is "
            "delivered to one CPU of its mask at a time, so only more queues or RPS spread the work (step 3)."
        )
    return f"Their affinity masks allow more CPUs ({listed}) than the ones they went to: irqbalance or the kernel chose these."


def _cpu_set(text: str) -> set[int]:
    try:
        return set(parse_cpu_list(text))
    except ValueError:
        return set()  # unreadable: not taken as pinned


def _severity(skew: P.DeviceSkew, cost: Cost | None) -> tuple[Severity, str]:
    if not skew.io_device:
        return Severity.INFO, "not an I/O device"
    if cost is not None and not cost.hot_cpus:
        return Severity.INFO, (
            f"softirq work is not piled up there: those CPUs spend {cost.irq_soft_pct:.1f}% in %irq+%soft"
        )
    return Severity.WARNING, ""


def _cpus_text(cpus: list[int]) -> str:
    return f"CPU{'s' if len(cpus) > 1 else ''} {format_cpu_list(cpus)}"


def _impact(family: str, skew: P.DeviceSkew, share_pct: float, cpus: int, cost: Cost | None) -> dict:
    served = f"{len(skew.serving_cpus)} of {cpus} CPUs take {share_pct:.0f}% of {family}'s interrupts"
    impact = {
        "share_pct": round(share_pct, 1),
        "interrupts": skew.total,
        "serving_cpus": skew.serving_cpus,
        "nodes": skew.nodes,
    }
    if cost is None:
        impact["description"] = f"{served}; the CPU time they cost is not known (no per-CPU %irq/%soft: add mpstat -P ALL)"
        return impact
    impact[CPU_SHARE] = round(cost.cpu_share, 4)
    impact["serving_cpus_irq_soft_pct"] = round(cost.irq_soft_pct, 2)
    impact["description"] = (
        f"{served}; those CPUs spend {cost.irq_soft_pct:.1f}% of their time in %irq+%soft; the part above the host's "
        f"mean is {cost.cpu_share:.1%} of all its CPU time (cpu_share; every device's softirq on those CPUs counts)"
    )
    return impact


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
