"""Softirq work concentrated on a few CPUs or one NUMA node.

What it detects:
    Softirq time (mpstat ``%soft``) — or, without it, network/block softirq events
    (``NET_RX``/``NET_TX``/``BLOCK`` rates from ``mpstat -I SCPU`` or growth between
    ``/proc/softirqs`` snapshots) — that piles up on a few CPUs or on the CPUs of one NUMA
    node while the rest of the machine does the database's work.

Why it matters:
    Packet processing runs in softirq context on the CPU that took the NIC's interrupt. When
    every queue lands on the same few CPUs, those CPUs saturate in ``%soft``: database threads
    scheduled there stall, the NIC drops or delays packets, and the whole server's throughput
    is capped by a handful of cores while the others have room. In the field case behind this
    rule, a 128-CPU ARM server did half the TPS of an identical one because CPUs 0-7 (node 0)
    spent 38-94% of their time in softirq.

How it is detected:
    Inputs: ``cpu_util`` (mpstat ``-P ALL``) for time; else ``softirq_rate`` (``mpstat -I SCPU``)
    or ``softirq_count`` (two or more ``/proc/softirqs`` snapshots) for events. ``topology``
    (lscpu, numactl) names the NUMA node of each CPU.
    Time path: hot CPUs are those with mean ``%soft`` >= max(HOT_CPU_MIN_SOFT_PCT = 10%,
    HOT_CPU_MEDIAN_FACTOR = 4 x the median of the other CPUs: the hottest one left out, so that on a
    2-CPU host it is not its own reference). Fires when the hottest CPU spends
    >= FIRE_SOFT_PCT = 20% in softirq and the hot CPUs hold >= CONCENTRATION_SHARE_PCT = 60% of
    all softirq time while being at most FEW_CPUS_SHARE = 25% of the CPUs, or all on one node of
    a multi-node machine. Critical when the hottest CPU is at >= CRITICAL_SOFT_PCT = 50%.
    Event path (no ``%soft``): the same shape on NET_RX+NET_TX+BLOCK events with
    EVENT_SHARE_PCT = 80%, and at least MIN_EVENTS_PER_S = 100/s (rates) or MIN_EVENTS = 5,000
    (counter growth) on the hottest CPU; always a warning, since events are not time.
    A one-node machine with fewer than MIN_CPUS = 4 CPUs is not judged (two vCPUs cannot spread
    much); a machine with two or more NUMA nodes is judged whatever its CPU count (three 1-CPU
    nodes with every NIC interrupt on node 0 is the case behind that).
    The finding names the I/O devices (``derive.cpu.device_class``) whose interrupts land on the
    hot CPUs (``/proc/interrupts`` growth), and links the ``irq-affinity-skew`` finding of each.
    Impact ``cpu_share`` (time path only): the hot CPUs' ``%soft`` + ``%irq`` above the host's mean,
    summed, as a share of all the host's CPU time, i.e. the interrupt work an even spread would move
    off them. The event path cannot tell time, so it sets none.

Remediation:
    Spread receive processing: more NIC queues (``ethtool -L IFACE combined N``), IRQ affinity
    of the queues spread over the nodes (``/proc/irq/N/smp_affinity_list``, irqbalance or the
    vendor's set_irq_affinity script), RPS/RFS for single-queue NICs
    (``/sys/class/net/IFACE/queues/rx-*/rps_cpus``, ``net.core.rps_sock_flow_entries``). Or
    keep the interrupts on that node on purpose and bind the database to the other nodes
    (``numactl --cpunodebind=... --membind=...``, systemd ``CPUAffinity=``/``NUMAPolicy=``).

References:
    Linux kernel Documentation/networking/scaling.rst (RSS, RPS, RFS, XPS);
    Documentation/core-api/irq/irq-affinity.rst; sysstat mpstat(1) ``%soft``, ``-I SCPU``.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.charts import per_cpu_by_node
from dbdiag.cpulist import format_cpu_list
from dbdiag.findings import CPU_SHARE, Evidence, Finding, Scope, Severity, finding_id
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.cpu import interrupt_placement as P

RULE_ID = "softirq-concentration"

MIN_CPUS = 4
HOT_CPU_MIN_SOFT_PCT = P.HOT_CPU_MIN_SOFT_PCT
HOT_CPU_MEDIAN_FACTOR = P.HOT_CPU_MEDIAN_FACTOR
IRQ_AFFINITY_SKEW = "irq-affinity-skew"  # the rule whose findings about the same devices are linked
FIRE_SOFT_PCT = 20.0
CRITICAL_SOFT_PCT = 50.0
CONCENTRATION_SHARE_PCT = 60.0
FEW_CPUS_SHARE = 0.25
EVENT_SHARE_PCT = 80.0
MIN_EVENTS_PER_S = 100.0
MIN_EVENTS = 5_000


def check(inp: RuleInput) -> Verdict:
    per_cpu = inp.table(t.PER_CPU, keep_empty=True)
    if per_cpu.height < MIN_CPUS and _node_count(per_cpu) < 2:
        raise Skip(
            f"{per_cpu.height} CPU(s) on one NUMA node in the capture; concentration is judged from {MIN_CPUS} CPUs up "
            "(any count on 2+ nodes)"
        )
    if "soft_pct" in per_cpu.columns and per_cpu["soft_pct"].drop_nulls().len() > 0:
        return _check_time(inp, per_cpu)
    return _check_events(inp, per_cpu)


def _hot_node(per_cpu: pl.DataFrame, hot: list[int]) -> int | None:
    nodes = per_cpu.filter(pl.col("cpu").is_in(hot))["node"].unique().to_list()
    return nodes[0] if len(nodes) == 1 and nodes[0] is not None else None


def _node_count(per_cpu: pl.DataFrame) -> int:
    return per_cpu["node"].drop_nulls().n_unique()


def _is_concentrated(per_cpu: pl.DataFrame, hot: list[int], node: int | None) -> bool:
    few = len(hot) <= max(1, int(per_cpu.height * FEW_CPUS_SHARE))
    one_node_of_many = node is not None and _node_count(per_cpu) >= 2
    return few or one_node_of_many


def _check_time(inp: RuleInput, per_cpu: pl.DataFrame) -> Verdict:
    soft = per_cpu.with_columns(pl.col("soft_pct").fill_null(0.0))
    total_soft = soft["soft_pct"].sum()
    top = soft.sort("soft_pct", descending=True).row(0, named=True)
    if total_soft <= 0:
        return Verdict(measured=f"no softirq time on any of {soft.height} CPUs")
    hot, hot_floor = P.hot_softirq_cpus(soft)
    hot_share_pct = 100.0 * soft.filter(pl.col("cpu").is_in(hot))["soft_pct"].sum() / total_soft
    node = _hot_node(soft, hot)
    measured = (
        f"hottest CPU {top['cpu']} at {top['soft_pct']:.1f}% %soft (fires from {FIRE_SOFT_PCT:.0f}%); "
        f"CPUs with >= {hot_floor:.1f}% %soft: {format_cpu_list(hot) or 'none'}, "
        f"{hot_share_pct:.0f}% of softirq time (fires from {CONCENTRATION_SHARE_PCT:.0f}%)"
    )
    fires = (
        top["soft_pct"] >= FIRE_SOFT_PCT
        and hot
        and hot_share_pct >= CONCENTRATION_SHARE_PCT
        and _is_concentrated(soft, hot, node)
    )
    if not fires:
        return Verdict(measured=measured)
    where = _where(hot, node)
    devices = _nic_devices(inp, hot)
    severity = Severity.CRITICAL if top["soft_pct"] >= CRITICAL_SOFT_PCT else Severity.WARNING
    others = soft.filter(~pl.col("cpu").is_in(hot))
    _, cpu_share = P.interrupt_cost(soft, hot)
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"{hot_share_pct:.0f}% of softirq time on {where}{_device_text(devices)}; threshold {CONCENTRATION_SHARE_PCT:.0f}% "
            f"(CPU {top['cpu']} at {top['soft_pct']:.1f}% %soft)"
        ),
        subject=where,
        related=_related(inp, devices),
        impact={
            CPU_SHARE: round(cpu_share, 4),
            "share_pct": round(hot_share_pct, 1),
            "description": (
                f"{len(hot)} of {soft.height} CPUs carry {hot_share_pct:.0f}% of all softirq time; "
                f"they spend {soft.filter(pl.col('cpu').is_in(hot))['soft_pct'].mean():.1f}% of their time in softirq "
                f"while the other CPUs spend {others['soft_pct'].mean():.1f}% there and are "
                f"{others['busy_pct'].mean():.1f}% busy; their %soft+%irq above the host's mean is "
                f"{cpu_share:.1%} of all its CPU time (cpu_share: what an even spread would move off them)"
            ),
            "hot_cpus": hot,
            "hot_node": node,
            "max_soft_pct": round(top["soft_pct"], 2),
            "other_cpus_busy_pct": round(float(others["busy_pct"].mean() or 0.0), 2),
        },
        evidence=(
            _hot_cpu_evidence(soft, hot),
            _node_evidence(soft, "soft_pct", "share of softirq time %"),
            *_irq_device_evidence(inp, hot),
        ),
        remediation=_remediation(soft, hot, node, devices),
        sources=_sources(inp, (t.CPU_UTIL, t.SOFTIRQ_RATE, t.SOFTIRQ_COUNT, t.TOPOLOGY)),
        charts=(
            per_cpu_by_node(
                soft,
                "soft_pct",
                "Per-CPU softirq time (%soft), grouped by NUMA node",
                "%",
                highlight_cpus=set(hot),
                threshold=FIRE_SOFT_PCT,
                threshold_label=f"{FIRE_SOFT_PCT:.0f}% fire threshold",
            ),
        ),
    )
    return Verdict(findings=[finding], measured=measured)


def _event_column(per_cpu: pl.DataFrame) -> tuple[str, str] | None:
    """Pick events per second when mpstat gave rates, else counter growth; (column, unit)."""
    rate_columns = [c for c in ("net_rx_per_s", "net_tx_per_s", "block_per_s") if c in per_cpu.columns]
    count_columns = [c for c in ("net_rx_count", "net_tx_count", "block_count") if c in per_cpu.columns]
    if rate_columns:
        return "events_per_s", "/s"
    if count_columns:
        return "events", "events"
    return None


def _check_events(inp: RuleInput, per_cpu: pl.DataFrame) -> Verdict:
    choice = _event_column(per_cpu)
    if choice is None:
        raise Skip("no %soft column, softirq rates or two /proc/softirqs snapshots")
    column, unit = choice
    parts = ("net_rx_per_s", "net_tx_per_s", "block_per_s") if column == "events_per_s" else ("net_rx_count", "net_tx_count", "block_count")
    events = per_cpu.with_columns(
        pl.sum_horizontal([pl.col(c).fill_null(0) for c in parts if c in per_cpu.columns]).cast(pl.Float64).alias(column)
    )
    total = events[column].sum()
    if total <= 0:
        return Verdict(measured=f"no NET_RX/NET_TX/BLOCK softirq events on any of {events.height} CPUs")
    ranked = events.sort(column, descending=True)
    top = ranked.row(0, named=True)
    hot: list[int] = []
    running = 0.0
    for cpu, value in ranked.select("cpu", column).iter_rows():
        if running >= total * EVENT_SHARE_PCT / 100.0:
            break
        hot.append(cpu)
        running += value
    share_pct = 100.0 * running / total
    node = _hot_node(events, hot)
    floor = MIN_EVENTS_PER_S if column == "events_per_s" else MIN_EVENTS
    measured = (
        f"NET_RX+NET_TX+BLOCK softirqs: {share_pct:.0f}% on CPUs {format_cpu_list(hot)} "
        f"({len(hot)} of {events.height}); hottest CPU {top['cpu']} at {top[column]:,.0f} {unit} "
        f"(fires from {floor:,.0f}); no %soft in the capture, so events stand in for time"
    )
    if top[column] < floor or not _is_concentrated(events, hot, node):
        return Verdict(measured=measured)
    where = _where(hot, node)
    devices = _nic_devices(inp, hot)
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=(
            f"{share_pct:.0f}% of NET_RX/NET_TX/BLOCK softirqs on {where}{_device_text(devices)}; "
            f"threshold {EVENT_SHARE_PCT:.0f}% on at most {FEW_CPUS_SHARE:.0%} of CPUs or one node"
        ),
        subject=where,
        related=_related(inp, devices),
        impact={
            "share_pct": round(share_pct, 1),
            "description": (
                f"{len(hot)} of {events.height} CPUs handle {share_pct:.0f}% of network and block softirqs; "
                "the capture has no %soft, so the time they cost is not known (add mpstat -P ALL)"
            ),
            "hot_cpus": hot,
            "hot_node": node,
        },
        evidence=(
            _hot_cpu_evidence(events, hot),
            _node_evidence(events, column, "share of events %"),
            *_irq_device_evidence(inp, hot),
        ),
        remediation=_remediation(events, hot, node, devices),
        sources=_sources(inp, (t.SOFTIRQ_RATE, t.SOFTIRQ_COUNT, t.TOPOLOGY)),
        charts=(
            per_cpu_by_node(
                events,
                column,
                f"Per-CPU NET_RX+NET_TX+BLOCK softirqs ({unit}), grouped by NUMA node",
                unit,
                highlight_cpus=set(hot),
            ),
        ),
    )
    return Verdict(findings=[finding], measured=measured)


_EVIDENCE_COLUMNS = (
    ("cpu", "CPU"),
    ("node", "node"),
    ("soft_pct", "%soft"),
    ("usr_pct", "%usr"),
    ("sys_pct", "%sys"),
    ("busy_pct", "busy %"),
    ("net_rx_per_s", "NET_RX/s"),
    ("net_tx_per_s", "NET_TX/s"),
    ("block_per_s", "BLOCK/s"),
    ("net_rx_count", "NET_RX events"),
    ("net_tx_count", "NET_TX events"),
)


_COLUMN_LABELS = {"soft_pct": "%soft", "events_per_s": "events/s", "events": "events"}


def _hot_cpu_evidence(per_cpu: pl.DataFrame, hot: list[int]) -> Evidence:
    present = [(c, label) for c, label in _EVIDENCE_COLUMNS if c in per_cpu.columns]
    rows = per_cpu.filter(pl.col("cpu").is_in(hot)).select([c for c, _ in present]).rows()
    return Evidence(
        title="The CPUs concerned (means over the capture)",
        columns=tuple(label for _, label in present),
        rows=tuple(tuple(_round(v) for v in row) for row in rows),
    )


def _node_evidence(per_cpu: pl.DataFrame, column: str, share_label: str) -> Evidence:
    total = per_cpu[column].fill_null(0).sum() or 1.0
    aggregations = [
        pl.len().alias("cpus"),
        pl.col(column).fill_null(0).mean().alias("mean"),
        (100.0 * pl.col(column).fill_null(0).sum() / total).alias("share"),
    ]
    if "busy_pct" in per_cpu.columns:
        aggregations.append(pl.col("busy_pct").mean().alias("busy"))
    by_node = per_cpu.group_by("node").agg(aggregations).sort("node", nulls_last=True)
    columns = ["node", "CPUs", f"mean {_COLUMN_LABELS.get(column, column)}", share_label] + (["mean busy %"] if "busy_pct" in per_cpu.columns else [])
    return Evidence(
        title="Per NUMA node",
        columns=tuple(columns),
        rows=tuple(tuple(_round(v) for v in row) for row in by_node.rows()),
    )


def _irq_device_evidence(inp: RuleInput, hot: list[int]) -> tuple[Evidence, ...]:
    """Which devices' interrupts were served by the hot CPUs (from /proc/interrupts growth)."""
    irq_delta = inp.table(t.IRQ_DELTA, keep_empty=True)
    if irq_delta is None or irq_delta.height == 0:
        return ()
    lines = inp.table(t.DEVICE_INTERRUPT, keep_empty=True)
    if lines is None:
        return ()
    on_hot = (
        lines.group_by("irq", "device")
        .agg(
            pl.col("delta").filter(pl.col("cpu").is_in(hot)).sum().alias("on_hot"),
            pl.col("delta").sum().alias("total"),
        )
        .filter(pl.col("on_hot") > 0)
        .sort("on_hot", descending=True)
        .head(16)
    )
    if on_hot.height == 0:
        return ()
    rows = tuple(
        (irq, device, total, on_hot_count, round(100.0 * on_hot_count / total, 1))
        for irq, device, on_hot_count, total in on_hot.rows()
    )
    return (
        Evidence(
            title="Device interrupts served by these CPUs (/proc/interrupts growth)",
            columns=("IRQ", "device", "interrupts", "on these CPUs", "%"),
            rows=rows,
        ),
    )


def _nic_devices(inp: RuleInput, hot: list[int]) -> list[tuple[str, list[str]]]:
    """(device family, its IRQ numbers) for I/O devices whose interrupts go mostly to the hot CPUs,
    most IRQ lines first; other devices (GPU, USB, input...) only when no I/O device lands there."""
    irq_delta = inp.table(t.IRQ_DELTA, keep_empty=True)
    if irq_delta is None or irq_delta.height == 0:
        return []
    lines = inp.table(t.DEVICE_INTERRUPT, keep_empty=True)
    if lines is None:
        return []
    per_irq = lines.group_by("irq", "family").agg(
        pl.col("delta").filter(pl.col("cpu").is_in(hot)).sum().alias("on_hot"),
        pl.col("delta").sum().alias("total"),
        (pl.col("device_class") == "io").any().alias("io"),
    )
    chosen = {True: {}, False: {}}
    for irq, family, on_hot, total, io in per_irq.sort("irq").rows():
        if total and on_hot / total >= 0.5:
            chosen[io].setdefault(family, []).append(irq)
    families = chosen[True] or chosen[False]
    return sorted(families.items(), key=lambda item: -len(item[1]))


def _where(hot: list[int], node: int | None) -> str:
    cpus = f"CPU{'s' if len(hot) > 1 else ''} {format_cpu_list(hot)}"
    return cpus + (f" (node {node})" if node is not None else "")


def _device_text(devices: list[tuple[str, list[str]]]) -> str:
    """The device with the most IRQ lines on the hot CPUs (the others are in the remediation)."""
    if not devices:
        return ""
    name, irqs = devices[0]
    more = f" and {len(devices) - 1} more device(s)" if len(devices) > 1 else ""
    return f", where the interrupts of {name} (IRQ {_irq_list(irqs)}){more} land"


def _irq_list(irqs: list[str]) -> str:
    """``42-49`` for numbered lines in a row; names as they are."""
    if all(irq.isdigit() for irq in irqs):
        return format_cpu_list([int(irq) for irq in irqs])
    return ", ".join(irqs)


def _related(inp: RuleInput, devices: list[tuple[str, list[str]]]) -> tuple[str, ...]:
    """The irq-affinity-skew findings about the devices named here (same problem, seen from the IRQ side)."""
    names = {name for name, _ in devices}
    return tuple(
        finding_id(IRQ_AFFINITY_SKEW, skew.family)
        for skew in P.judge_devices(inp)
        if skew.skewed and skew.family in names
    )


def _remediation(per_cpu: pl.DataFrame, hot: list[int], node: int | None, devices: list[tuple[str, list[str]]]) -> str:
    all_nodes = sorted(n for n in per_cpu["node"].drop_nulls().unique().to_list())
    other_nodes = [n for n in all_nodes if n != node]
    # the CPUs of the other nodes, the ones the database is bound to in step 4 (not every CPU but the hot ones)
    other_cpus = format_cpu_list(per_cpu.filter(pl.col("node").is_in(other_nodes))["cpu"].to_list())
    cpus = sorted(per_cpu["cpu"].drop_nulls().to_list())
    device_line = (
        "Devices whose interrupts land there: "
        + "; ".join(f"{name} (IRQ {', '.join(irqs)})" for name, irqs in devices[:4])
        + ".\n"
        if devices
        else ""
    )
    irq_example = devices[0][1][0] if devices else "N"
    steps = [
        f"Softirq work is concentrated on {_where(hot, node)}.",
        device_line.strip(),
        "1. See the queues and where their interrupts go (IFACE: the NIC, from ip -br link):",
        "   ethtool -l IFACE",
        f"   for irq in $(grep -E '{devices[0][0] if devices else 'IFACE|virtio|mlx|hns|ixgbe|i40e|ena'}' /proc/interrupts | cut -d: -f1); do echo $irq $(cat /proc/irq/$irq/smp_affinity_list); done",
        "2. Give the NIC one queue per core you want to receive on, and spread the queue IRQs over all nodes:",
        f"   ethtool -L IFACE combined {len(cpus)}   # at most the maximum ethtool -l shows",
        f"   echo <cpu> > /proc/irq/{irq_example}/smp_affinity_list   # one CPU per queue, round-robin across nodes",
        "   (stop irqbalance first if it keeps moving them back: systemctl stop irqbalance)",
        "3. For a single-queue NIC, spread receive processing with RPS/RFS:",
        f"   echo {rps_mask(cpus)} > /sys/class/net/IFACE/queues/rx-0/rps_cpus   # all {len(cpus)} CPUs",
        "   sysctl -w net.core.rps_sock_flow_entries=32768",
        "   echo 2048 > /sys/class/net/IFACE/queues/rx-0/rps_flow_cnt",
    ]
    if node is not None and other_nodes:
        steps += [
            f"4. Or keep node {node} for interrupts on purpose and run the database on the other nodes:",
            f"   numactl --cpunodebind={format_cpu_list(other_nodes)} --membind={format_cpu_list(other_nodes)} <database command>",
            f"   (systemd: CPUAffinity={other_cpus} and NUMAPolicy=bind NUMAMask={format_cpu_list(other_nodes)} in the unit)",
        ]
    steps.append("Then capture again and compare %soft per CPU (mpstat -P ALL -I SCPU 1 60).")
    return "\n".join(line for line in steps if line)


def rps_mask(cpus: list[int]) -> str:
    """The hex CPU mask of ``cpus`` as rps_cpus takes it: 32-bit groups, highest first, comma-separated.

    >>> rps_mask([0, 1, 2]), rps_mask(list(range(40)))
    ('7', 'ff,ffffffff')
    """
    mask = sum(1 << cpu for cpu in cpus)
    groups = []
    while True:
        groups.append(mask & 0xFFFFFFFF)
        mask >>= 32
        if not mask:
            break
    return ",".join([f"{groups[-1]:x}"] + [f"{g:08x}" for g in reversed(groups[:-1])])


def _sources(inp: RuleInput, names: tuple[str, ...]) -> tuple[str, ...]:
    found: list[str] = []
    for name in names:
        frame = inp.table(name)
        if frame is not None:
            found.extend(s for s in frame["source"].unique(maintain_order=True).to_list() if s not in found)
    return tuple(found)


def _round(value: object) -> object:
    return round(value, 2) if isinstance(value, float) else value


RULE = Rule(
    id=RULE_ID,
    title="Softirq work concentrated on a few CPUs or one NUMA node",
    area="cpu",
    requires=((t.CPU_UTIL, t.SOFTIRQ_RATE, t.SOFTIRQ_COUNT),),
    check=check,
    doc=__doc__ or "",
)
