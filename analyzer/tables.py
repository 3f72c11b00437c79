"""Names and schemas of the tables parsers produce; the one place derive and rules look them up.

Tables are long ("tidy"): one row per observation, units in column names. Every table has
a ``source`` column (the member path, for evidence). When several members produce the same
table the pipeline concatenates them (``diagonal_relaxed``) in capture order.

Times are ``Datetime("us", "UTC")``. A CPU number of ``-1`` stands for mpstat's ``all`` row.
"""

from __future__ import annotations

import polars as pl

UTC_TIME = pl.Datetime("us", "UTC")

# mpstat/sar CPU utilisation: one row per (interval end, cpu).
CPU_UTIL = "cpu_util"
CPU_UTIL_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "usr_pct": pl.Float64,
    "nice_pct": pl.Float64,
    "sys_pct": pl.Float64,
    "iowait_pct": pl.Float64,
    "irq_pct": pl.Float64,
    "soft_pct": pl.Float64,
    "steal_pct": pl.Float64,
    "guest_pct": pl.Float64,
    "gnice_pct": pl.Float64,
    "idle_pct": pl.Float64,
    "source": pl.String,
}

# mpstat -N: per NUMA node utilisation, same percent columns with ``node`` instead of ``cpu``.
NODE_UTIL = "node_util"
NODE_UTIL_SCHEMA = {
    "ts": UTC_TIME,
    "node": pl.Int32,
    **{k: v for k, v in CPU_UTIL_SCHEMA.items() if k.endswith("_pct")},
    "source": pl.String,
}

# mpstat -I SCPU / -o JSON soft-interrupts: softirq rate per CPU and interval.
SOFTIRQ_RATE = "softirq_rate"
SOFTIRQ_RATE_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "softirq": pl.String,  # NET_RX, NET_TX, BLOCK, TIMER, ... as the kernel names them
    "per_s": pl.Float64,
    "source": pl.String,
}

# mpstat -I CPU / -I ALL per-IRQ rates: one row per (interval, cpu, irq).
IRQ_RATE = "irq_rate"
IRQ_RATE_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "irq": pl.String,  # "25", "LOC", "NMI" ... as mpstat prints them, without "/s"
    "per_s": pl.Float64,
    "source": pl.String,
}

# /proc/softirqs snapshots: cumulative counters. ``snapshot`` numbers the snapshots within
# one member (0, 1, ...); ordering across members is derive's job (capture order/name hints).
SOFTIRQ_COUNT = "softirq_count"
SOFTIRQ_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # time line written before the snapshot (pt-stalk "TS <epoch>", date, ISO), else null
    "cpu": pl.Int32,
    "softirq": pl.String,
    "count": pl.Int64,
    "source": pl.String,
}

# /proc/interrupts snapshots: cumulative counters per IRQ line and CPU.
IRQ_COUNT = "irq_count"
IRQ_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # time line written before the snapshot (pt-stalk "TS <epoch>", date, ISO), else null
    "irq": pl.String,  # "25", "NMI", "LOC", "IPI0" ...
    "cpu": pl.Int32,
    "count": pl.Int64,
    "chip": pl.String,  # "PCI-MSI", "IO-APIC", "GICv3" or null for named rows
    "hwirq": pl.String,  # "49153-edge", "2-edge" ... or null
    "device": pl.String,  # "virtio0-input.0", "eth0-TxRx-3", or the description of named rows
    "source": pl.String,
}

# CPU topology from lscpu / lscpu -p / numactl --hardware / mpstat -T.
TOPOLOGY = "topology"
TOPOLOGY_SCHEMA = {
    "cpu": pl.Int32,
    "core": pl.Int32,
    "socket": pl.Int32,
    "node": pl.Int32,
    "source": pl.String,
}

# NUMA nodes: memory per node where given (numactl --hardware, lscpu gives none).
NUMA_NODE = "numa_node"
NUMA_NODE_SCHEMA = {
    "node": pl.Int32,
    "cpus": pl.String,  # as a list string "0-7" or "0 2 4"
    "cpu_count": pl.Int32,
    "size_mb": pl.Int64,
    "free_mb": pl.Int64,
    "source": pl.String,
}

# Host facts: key/value pairs a parser learnt in passing (hostname, kernel, cpu count, model).
HOST_FACT = "host_fact"
HOST_FACT_SCHEMA = {
    "key": pl.String,
    "value": pl.String,
    "source": pl.String,
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    CPU_UTIL: CPU_UTIL_SCHEMA,
    NODE_UTIL: NODE_UTIL_SCHEMA,
    SOFTIRQ_RATE: SOFTIRQ_RATE_SCHEMA,
    IRQ_RATE: IRQ_RATE_SCHEMA,
    SOFTIRQ_COUNT: SOFTIRQ_COUNT_SCHEMA,
    IRQ_COUNT: IRQ_COUNT_SCHEMA,
    TOPOLOGY: TOPOLOGY_SCHEMA,
    NUMA_NODE: NUMA_NODE_SCHEMA,
    HOST_FACT: HOST_FACT_SCHEMA,
}


def empty(table: str) -> pl.DataFrame:
    """An empty frame with the declared schema of ``table``."""
    return pl.DataFrame(schema=SCHEMAS[table])


def conform(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Cast ``frame`` to the declared schema: missing columns become nulls, extra ones are dropped."""
    schema = SCHEMAS[table]
    columns = [
        (pl.col(name).cast(dtype) if name in frame.columns else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in schema.items()
    ]
    return frame.select(columns)
