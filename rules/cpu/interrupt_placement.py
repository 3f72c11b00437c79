"""Where interrupt work lands: what softirq-concentration and irq-affinity-skew both judge.

Inputs are the derived tables ``per_cpu`` (mpstat means per CPU, with ``soft_pct``/``irq_pct`` when
``mpstat -P ALL`` was captured), ``irq_delta`` (growth of each ``/proc/interrupts`` line per CPU)
and ``cpu_nodes`` (see ``dbdiag.derive.cpu``). Sample ``per_cpu`` of a 3-node guest::

    cpu  node  soft_pct  irq_pct
    0    0     54.71     0.0
    1    1     0.68      0.0
    2    2     0.59      0.0
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.base import RuleInput

HOT_CPU_MIN_SOFT_PCT = 10.0
HOT_CPU_MEDIAN_FACTOR = 4.0
MIN_DEVICE_INTERRUPTS = 5_000
SERVED_SHARE_PCT = 95.0
FEW_CPUS_SHARE = 0.125  # of the machine's CPUs serving one device


def hot_softirq_cpus(per_cpu: pl.DataFrame) -> tuple[list[int], float]:
    """CPUs whose mean %soft is at least max(HOT_CPU_MIN_SOFT_PCT, HOT_CPU_MEDIAN_FACTOR x the median of
    the other CPUs), and that floor. The hottest CPU is left out of the median so that on a 2-CPU host
    it is not its own reference.

    >>> hot_softirq_cpus(pl.DataFrame({"cpu": [0, 1, 2], "soft_pct": [54.7, 0.7, 0.6]}))
    ([0], 10.0)
    """
    soft = per_cpu.select("cpu", pl.col("soft_pct").fill_null(0.0))
    rest = soft.sort("soft_pct", descending=True)["soft_pct"].slice(1)
    reference = float(rest.median()) if rest.len() else 0.0
    floor = max(HOT_CPU_MIN_SOFT_PCT, HOT_CPU_MEDIAN_FACTOR * reference)
    return soft.filter(pl.col("soft_pct") >= floor)["cpu"].sort().to_list(), floor


def has_soft_time(per_cpu: pl.DataFrame | None) -> bool:
    return per_cpu is not None and "soft_pct" in per_cpu.columns and per_cpu["soft_pct"].drop_nulls().len() > 0


def interrupt_work(per_cpu: pl.DataFrame) -> pl.DataFrame:
    """cpu, work = %soft + %irq (a missing %irq counts 0)."""
    irq = pl.col("irq_pct").fill_null(0.0) if "irq_pct" in per_cpu.columns else pl.lit(0.0)
    return per_cpu.select("cpu", (pl.col("soft_pct").fill_null(0.0) + irq).alias("work"))


def interrupt_cost(per_cpu: pl.DataFrame, cpus: list[int]) -> tuple[float, float]:
    """(mean %soft+%irq of ``cpus``, cpu_share): cpu_share is their %soft+%irq above the host's mean,
    summed, over all the host's CPU time (0..1): the interrupt work an even spread would move off them.

    >>> interrupt_cost(pl.DataFrame({"cpu": [0, 1, 2], "soft_pct": [47.0, 0.5, 0.5]}), [0])
    (47.0, 0.10333333333333333)
    """
    work = interrupt_work(per_cpu)
    chosen = work.filter(pl.col("cpu").is_in(cpus))["work"]
    if chosen.len() == 0:
        return 0.0, 0.0
    excess = (chosen - float(work["work"].mean())).clip(lower_bound=0.0).sum()
    return float(chosen.mean()), float(excess) / (100.0 * work.height)


@dataclass(frozen=True)
class DeviceSkew:
    """Where one device's interrupts went between the snapshots, and whether that is a skew."""

    family: str
    io_device: bool  # a NIC, NVMe, HBA or virtio device (derive.cpu.device_class)
    per_cpu: pl.DataFrame  # cpu, delta, node, irqs
    total: int
    serving_cpus: list[int]
    nodes: list[int]
    skewed: bool


def cpu_nodes(inp: RuleInput) -> pl.DataFrame:
    nodes = inp.table(t.CPU_NODE, keep_empty=True)
    return nodes if nodes is not None else pl.DataFrame(schema={"cpu": pl.Int32, "node": pl.Int32})


def machine_cpus(inp: RuleInput) -> int:
    counts = inp.table(t.IRQ_COUNT)
    return max(0 if counts is None else counts["cpu"].n_unique(), cpu_nodes(inp).height)


def judge_devices(inp: RuleInput) -> list[DeviceSkew]:
    """Every device that took MIN_DEVICE_INTERRUPTS or more between snapshots, busiest first. Its serving
    CPUs are the fewest that took SERVED_SHARE_PCT of its interrupts; it is skewed when they are at most
    FEW_CPUS_SHARE of the machine's CPUs, or all on one node of a machine with two or more."""
    irq_delta = inp.table(t.IRQ_DELTA, keep_empty=True)
    if irq_delta is None or irq_delta.height == 0:
        return []
    cpus = machine_cpus(inp)
    node_count = cpu_nodes(inp)["node"].drop_nulls().n_unique()
    lines = inp.table(t.DEVICE_INTERRUPT, keep_empty=True)
    if lines is None:
        return []
    io_families = set(lines.filter(pl.col("device_class") == "io")["family"].to_list())
    grouped = lines.group_by("family", "cpu").agg(
        pl.col("delta").sum(), pl.col("node").first(), pl.col("irq").unique().sort().alias("irqs")
    )
    judged = []
    for (family,), per_cpu in sorted(grouped.group_by("family"), key=lambda item: (-item[1]["delta"].sum(), item[0])):
        total = int(per_cpu["delta"].sum())
        if total < MIN_DEVICE_INTERRUPTS:
            continue
        serving = _serving_cpus(per_cpu, total)
        serving_cpus = serving["cpu"].to_list()
        nodes = serving["node"].drop_nulls().unique().sort().to_list()
        few = len(serving_cpus) <= max(1, int(cpus * FEW_CPUS_SHARE))
        one_node = node_count >= 2 and len(nodes) == 1 and serving["node"].null_count() == 0
        judged.append(DeviceSkew(family, family in io_families, per_cpu.sort("cpu"), total, serving_cpus, nodes, few or one_node))
    return judged


def _serving_cpus(per_cpu: pl.DataFrame, total: int) -> pl.DataFrame:
    """The fewest CPUs that together took SERVED_SHARE_PCT of the device's interrupts."""
    ranked = per_cpu.sort("delta", descending=True).with_columns(
        (pl.col("delta").cum_sum() - pl.col("delta")).alias("before")
    )
    return ranked.filter(pl.col("before") < total * SERVED_SHARE_PCT / 100.0).sort("cpu")
