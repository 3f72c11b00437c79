"""Per-CPU picture of the capture: utilisation, softirq time and softirq/IRQ counts, with NUMA node.

Output ``per_cpu`` (one row per CPU):
    cpu, node, intervals, usr_pct, sys_pct, irq_pct, soft_pct, busy_pct,
    net_rx_per_s, net_tx_per_s, block_per_s          (mpstat -I SCPU means)
    net_rx_count, net_tx_count, block_count          (/proc/softirqs first-to-last growth)
Output ``irq_delta`` (one row per IRQ line and CPU with growth > 0):
    irq, device, chip, cpu, node, delta
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import first_to_last_delta
from dbdiag.patterns import lazy_compile
from dbdiag.python_values import mapped

NETWORK_SOFTIRQS = ("NET_RX", "NET_TX", "BLOCK")
# ``per_cpu`` when no input gives one CPU: the columns every reader may ask for.
EMPTY_PER_CPU_SCHEMA = {"cpu": pl.Int32, "node": pl.Int32}


def empty_per_cpu() -> pl.DataFrame:
    return pl.DataFrame(schema=EMPTY_PER_CPU_SCHEMA)


def cpu_nodes(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """cpu -> node (and socket, core): the first source that knows a CPU's node wins."""
    topology = tables.get(t.TOPOLOGY)
    if topology is None or topology.height == 0:
        return pl.DataFrame(schema={"cpu": pl.Int32, "node": pl.Int32, "socket": pl.Int32, "core": pl.Int32})
    return (
        topology.sort(pl.col("node").is_null())
        .group_by("cpu", maintain_order=True)
        .agg(pl.col("node").drop_nulls().first(), pl.col("socket").drop_nulls().first(), pl.col("core").drop_nulls().first())
        .sort("cpu")
    )


def _utilisation(tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    util = tables.get(t.CPU_UTIL)
    if util is None or util.height == 0:
        return None
    # The same run is often captured twice (mpstat text and JSON): one row per (time, cpu).
    per_cpu = util.filter(pl.col("cpu") >= 0).unique(subset=["ts", "cpu"], keep="first", maintain_order=True)
    return per_cpu.group_by("cpu").agg(
        pl.len().alias("intervals"),
        pl.col("usr_pct").mean(),
        pl.col("sys_pct").mean(),
        pl.col("irq_pct").mean(),
        pl.col("soft_pct").mean(),
        (100.0 - pl.col("idle_pct")).mean().alias("busy_pct"),
    )


def _softirq_rates(tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    rates = tables.get(t.SOFTIRQ_RATE)
    if rates is None or rates.height == 0:
        return None
    rates = rates.filter(pl.col("cpu") >= 0, pl.col("softirq").is_in(NETWORK_SOFTIRQS))
    if rates.height == 0:
        return None
    return (
        rates.unique(subset=["ts", "cpu", "softirq"], keep="first", maintain_order=True)
        .group_by("cpu")
        .agg(
            pl.col("per_s").filter(pl.col("softirq") == name).mean().alias(f"{name.lower()}_per_s")
            for name in NETWORK_SOFTIRQS
        )
    )


def softirq_count_delta(tables: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame | None, list[str]]:
    counts = tables.get(t.SOFTIRQ_COUNT)
    if counts is None or counts.height == 0:
        return None, []
    delta, sources = first_to_last_delta(counts, ["cpu", "softirq"])
    if delta.height == 0:
        return None, []
    wide = delta.filter(pl.col("softirq").is_in(NETWORK_SOFTIRQS)).group_by("cpu").agg(
        pl.col("delta").filter(pl.col("softirq") == name).sum().alias(f"{name.lower()}_count")
        for name in NETWORK_SOFTIRQS
    )
    return wide, sources


def per_cpu_summary(tables: dict[str, pl.DataFrame], softirq_delta: pl.DataFrame | None) -> pl.DataFrame:
    """Join every per-CPU view that the capture has; CPUs known to any source appear once."""
    parts = [
        frame
        for frame in (_utilisation(tables), _softirq_rates(tables), softirq_delta)
        if frame is not None
    ]
    if not parts:
        return empty_per_cpu()
    summary = parts[0]
    for part in parts[1:]:
        summary = summary.join(part, on="cpu", how="full", coalesce=True)
    nodes = cpu_nodes(tables).select("cpu", "node")
    return summary.join(nodes, on="cpu", how="left").sort("cpu")


def irq_delta(tables: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame | None, list[str]]:
    """Growth of each IRQ line per CPU between the first and last /proc/interrupts snapshot."""
    counts = tables.get(t.IRQ_COUNT)
    if counts is None or counts.height == 0:
        return None, []
    delta, sources = first_to_last_delta(counts.with_columns(pl.col("device").fill_null("")), ["irq", "device", "cpu"])
    if delta.height == 0:
        return None, []
    chips = counts.select("irq", "chip").unique(subset=["irq"], keep="first")
    nodes = cpu_nodes(tables).select("cpu", "node")
    frame = (
        delta.join(chips, on="irq", how="left")
        .join(nodes, on="cpu", how="left")
        .filter(pl.col("delta") > 0)
        .sort("irq", "cpu")
    )
    return frame, sources


_QUEUE_SUFFIX = lazy_compile(r"[-_.]?(?:TxRx|Tx-Rx|rx|tx|input|output|comp|queue|fp|q)[-_.]?\d+(?=$|@)", re.IGNORECASE)


def device_family(device: str) -> str:
    """The device behind a per-queue IRQ name, so that a NIC's queues count as one device.

    >>> [device_family(d) for d in ("virtio0-input.0", "hns3-0000:7d:00.0-TxRx-3", "eth0-TxRx-0",
    ...  "mlx5_comp3@pci:0000:3b:00.0", "nvme0q3", "ens5-Tx-Rx-2", "i8042")]
    ['virtio0', 'hns3-0000:7d:00.0', 'eth0', 'mlx5@pci:0000:3b:00.0', 'nvme0', 'ens5', 'i8042']
    """
    return _QUEUE_SUFFIX.sub("", device.strip()) or device.strip()


NOT_DEVICES = ("arch_timer", "timer", "IPI", "cascade")

# Drivers and interface names of I/O devices (NICs, NVMe, SAS/SATA/FC HBAs, virtual disks and NICs):
# their interrupts carry the database's packets and block I/O.
_IO_DEVICE = lazy_compile(
    r"^(?:virtio|nvme|eth\d|en[opsx]|eno|ib\d|mlx[45]|hns|hinic|ixgbe|i40e|iavf|ice|igb|igc|e1000|bnxt|bnx2|tg3|"
    r"ena\b|gve|vmxnet|vmw_pvscsi|qede|qed|cxgb|sfc|ionic|nfp|fm10k|ngbe|txgbe|ahci|ata|megasas|megaraid|mpt[23]sas|"
    r"mpi3mr|qla2xxx|lpfc|hpsa|smartpqi|aacraid|isci|mvsas|pm80xx|hisi_sas|xen-blkfront|blkif|vif|hv_netvsc|hv_storvsc)",
    re.IGNORECASE,
)
# Devices whose interrupts are not the database's I/O: GPUs, USB, audio, input, serial, clocks,
# PCIe port services, platform buses.
_OTHER_DEVICE = lazy_compile(
    r"^(?:nvidia|amdgpu|radeon|nouveau|i915|xe\b|xhci|ehci|ohci|uhci|usb|snd|hda|i8042|hid|ttyS|serial|rtc|acpi|hpet|"
    r"aerdrv|PCIe|pciehp|dmar|watchdog|thermal|pmu|arm-pmu|mei|i2c|spi|gpio|edac|intel_|vfio|virtio\d+-config)",
    re.IGNORECASE,
)


def device_class(device: str) -> str:
    """``io`` for NIC queues, NVMe, HBAs and virtio devices; ``other`` for GPUs, USB, input, clocks and
    the like; ``unknown`` for names neither list knows.

    >>> [device_class(d) for d in ("virtio0-input.0", "nvme0q3", "mlx5_comp3@pci:0000:3b:00.0",
    ...  "xhci_hcd", "nvidia", "i8042", "virtio0-config", "foo")]
    ['io', 'io', 'io', 'other', 'other', 'other', 'other', 'unknown']
    """
    name = device.strip()
    if _OTHER_DEVICE.match(name):
        return "other"
    if _IO_DEVICE.match(name) or _QUEUE_SUFFIX.search(name):
        return "io"
    return "unknown"


def device_interrupts(irq_delta: pl.DataFrame) -> pl.DataFrame:
    """Lines of real devices: numbered rows with a device name, timers and IPIs left out; ``family``
    (the device behind its queues) and ``device_class`` (see ``device_class``) added."""
    numbered = irq_delta.filter(pl.col("chip").is_not_null(), pl.col("device") != "")
    devices = numbered.filter(~pl.any_horizontal([pl.col("device").str.contains(word, literal=True) for word in NOT_DEVICES]))
    return devices.with_columns(
        mapped(devices["device"], device_family, pl.String).alias("family"),
        mapped(devices["device"], device_class, pl.String).alias("device_class"),
    )


def interrupts_per_node(devices: pl.DataFrame) -> list[dict[str, object]]:
    """``metrics.interrupts``: each device's interrupts over the capture per NUMA node that served them, and
    that node's share of the device's, largest device first (from ``device_interrupt``; CPUs of no known node
    left out)::

        [{"device": "virtio0", "device_class": "io", "node": 1, "interrupts": 182340, "share_pct": 100.0}, ...]
    """
    placed = devices.filter(pl.col("node").is_not_null(), pl.col("delta") > 0)
    if placed.height == 0:
        return []
    per_node = placed.group_by("family", "device_class", "node").agg(pl.col("delta").sum().alias("interrupts"))
    total = pl.col("interrupts").sum().over("family")
    return (
        per_node.with_columns((100.0 * pl.col("interrupts") / total).round(2).alias("share_pct"), total.alias("_total"))
        .sort("_total", "family", "node", descending=[True, False, False])
        .select(pl.col("family").alias("device"), "device_class", "node", "interrupts", "share_pct")
        .to_dicts()
    )
