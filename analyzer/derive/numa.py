"""NUMA figures derived from ``numa_counter`` (numastat, sysfs node files) and ``vmstat_count``.

Outputs:

``numa_remote`` (one row per node)::

    node Int32, numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node (Int64 pages:
    growth from the node's first to its last snapshot, or since boot when there is one snapshot),
    remote_pct Float64 (other_node / (local_node + other_node) * 100; null without traffic),
    miss_pct Float64 (numa_miss / (numa_hit + numa_miss) * 100; null without allocations),
    since_boot Boolean, first_source String, last_source String

``numa_process_memory`` (one row per process and node, latest snapshot of each process)::

    pid Int32, process String, node Int32, private_mb Float64, total_mb Float64, share_pct Float64, source String

``vmstat_numa_delta``: a dict with the growth of the NUMA-balancing, migration and THP counters of
``/proc/vmstat`` between its first and last snapshot.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import first_and_last, ordered_snapshots

SYSTEM_COUNTERS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")
PROCESS_PARTS = ("Huge", "Heap", "Stack", "Private")
VMSTAT_NUMA_COUNTERS = (
    "numa_hint_faults",
    "numa_hint_faults_local",
    "numa_pages_migrated",
    "pgmigrate_success",
    "pgmigrate_fail",
    "numa_pte_updates",
    "numa_huge_pte_updates",
)
# A sysfs listing (node-numastat.0, node1/numastat, /sys/devices/...) rather than the numastat command.
_SYSFS_SOURCE_PATTERN = r"(?i)(?:^|/)sys/devices/|node\d*[/_.-]*numastat"

_REMOTE_SCHEMA = {
    "node": pl.Int32,
    **{name: pl.Int64 for name in SYSTEM_COUNTERS},
    "remote_pct": pl.Float64,
    "miss_pct": pl.Float64,
    "since_boot": pl.Boolean,
    "first_source": pl.String,
    "last_source": pl.String,
}


def _pct(part: pl.Expr, whole: pl.Expr) -> pl.Expr:
    return pl.when(whole > 0).then(part / whole * 100.0).otherwise(None)


def _snapshot_count(frame: pl.DataFrame) -> int:
    return frame.select("source", "snapshot").unique().height if frame.height else 0


def _one_family(system: pl.DataFrame) -> pl.DataFrame:
    """The numastat command's rows, or the sysfs files' rows when only they span two snapshots or more.

    Both report the same kernel counters moments apart; mixing them would interleave snapshots.
    """
    is_sysfs = pl.col("source").str.contains(_SYSFS_SOURCE_PATTERN)
    command, sysfs = system.filter(~is_sysfs), system.filter(is_sysfs)
    if command.height == 0:
        return sysfs
    if sysfs.height and _snapshot_count(command) < 2 <= _snapshot_count(sysfs):
        return sysfs
    return command


def numa_remote(tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    """Per node: growth of the numastat counters over the capture, and the share of remote pages.

    Uses the ``numastat`` command's page counters (``-n``/``-c`` MB figures are not used); the sysfs
    ``nodeN/numastat`` files (told apart by their path: ``/sys/devices/``, ``node-numastat.0``,
    ``node1/numastat``) only when the command output is absent or has a single snapshot while the
    sysfs files have two or more: the two sources report the same counters moments apart and are
    never mixed. With a single snapshot of a node the counters are since boot and ``since_boot``
    is True. Negative growth (a reboot between snapshots) counts as 0.

    >>> rows = [(source, node, counter, value)
    ...         for source, hit, local, other in (("numastat.before", 1000, 990, 10),
    ...                                           ("numastat.after", 3000, 2490, 510))
    ...         for node in (0,)
    ...         for counter, value in (("numa_hit", hit), ("numa_miss", 0), ("numa_foreign", 0),
    ...                                ("interleave_hit", 0), ("local_node", local), ("other_node", other))]
    >>> frame = pl.DataFrame(rows, schema=["source", "node", "counter", "value"], orient="row").with_columns(
    ...     snapshot=pl.lit(0, pl.Int32), scope=pl.lit("system"), unit=pl.lit("pages"))
    >>> out = numa_remote({"numa_counter": t.conform("numa_counter", frame)})
    >>> out.select("node", "numa_hit", "local_node", "other_node", "remote_pct", "since_boot").row(0)
    (0, 2000, 1500, 500, 25.0, False)
    """
    counters = tables.get(t.NUMA_COUNTER)
    if counters is None or counters.height == 0:
        return None
    system = counters.filter(
        (pl.col("scope") == "system") & (pl.col("unit") == "pages") & pl.col("node").is_not_null()
        & pl.col("counter").is_in(SYSTEM_COUNTERS) & pl.col("value").is_not_null()
    )
    if system.height == 0:
        return None
    system = _one_family(system)

    seq = ordered_snapshots(system)
    ends = seq.group_by("node").agg(pl.col("seq").min().alias("first"), pl.col("seq").max().alias("last"))
    seq = seq.join(ends, on="node")
    start = seq.filter(pl.col("seq") == pl.col("first"))
    end = seq.filter(pl.col("seq") == pl.col("last"))
    wide_end = end.pivot(on="counter", index=["node", "first", "last", "source"], values="value",
                         aggregate_function="first")
    wide_start = start.pivot(on="counter", index=["node"], values="value", aggregate_function="first")
    for name in SYSTEM_COUNTERS:
        if name not in wide_end.columns:
            wide_end = wide_end.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
        if name not in wide_start.columns:
            wide_start = wide_start.with_columns(pl.lit(None, dtype=pl.Float64).alias(name))
    first_sources = start.group_by("node").agg(pl.col("source").first().alias("first_source"))
    joined = wide_end.join(wide_start.select("node", *[pl.col(n).alias(f"{n}__start") for n in SYSTEM_COUNTERS]),
                           on="node", how="left").join(first_sources, on="node", how="left")
    since_boot = pl.col("first") == pl.col("last")
    growth = [
        pl.when(since_boot).then(pl.col(n)).otherwise((pl.col(n) - pl.col(f"{n}__start")).clip(lower_bound=0))
        .round(0).cast(pl.Int64, strict=False).alias(n)  # parsers drop counters over Int64; never fail here
        for n in SYSTEM_COUNTERS
    ]
    out = joined.select(
        pl.col("node").cast(pl.Int32),
        *growth,
        since_boot.alias("since_boot"),
        "first_source",
        pl.col("source").alias("last_source"),
    ).with_columns(
        _pct(pl.col("other_node"), pl.col("local_node") + pl.col("other_node")).alias("remote_pct"),
        _pct(pl.col("numa_miss"), pl.col("numa_hit") + pl.col("numa_miss")).alias("miss_pct"),
    )
    return out.select([pl.col(name).cast(dtype) for name, dtype in _REMOTE_SCHEMA.items()]).sort("node")


def numa_process_memory(tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    """Per process and node: memory from ``numastat -p`` (the latest snapshot of each process).

    ``total_mb`` is Huge + Heap + Stack + Private (or the per-process figure of numastat's
    several-process summary, where ``private_mb`` is then null); ``share_pct`` is the node's part
    of the process's memory on all nodes.

    >>> frame = pl.DataFrame({"pid": [183] * 4, "process": ["python3"] * 4, "node": [0, 1, 0, 1],
    ...     "counter": ["Private", "Private", "Heap", "Heap"], "value": [0.0, 121.27, 0.0, 0.45]}).with_columns(
    ...     snapshot=pl.lit(0, pl.Int32), scope=pl.lit("process"), unit=pl.lit("MB"), source=pl.lit("numastat-p.txt"))
    >>> out = numa_process_memory({"numa_counter": t.conform("numa_counter", frame)})
    >>> out.select("node", "private_mb", "total_mb", "share_pct").rows()
    [(0, 0.0, 0.0, 0.0), (1, 121.27, 121.72, 100.0)]
    """
    counters = tables.get(t.NUMA_COUNTER)
    if counters is None or counters.height == 0:
        return None
    process = counters.filter(
        (pl.col("scope") == "process") & pl.col("node").is_not_null() & pl.col("value").is_not_null()
        & pl.col("counter").is_in([*PROCESS_PARTS, "Total"])
    )
    if process.height == 0:
        return None
    seq = ordered_snapshots(process)
    latest = seq.filter(pl.col("seq") == pl.col("seq").max().over("pid", "process"))
    per_node = latest.group_by("pid", "process", "node").agg(
        pl.when(pl.col("counter").is_in(PROCESS_PARTS).any())
        .then(pl.col("value").filter(pl.col("counter") == "Private").sum())
        .otherwise(None).alias("private_mb"),
        pl.when(pl.col("counter").is_in(PROCESS_PARTS).any())
        .then(pl.col("value").filter(pl.col("counter").is_in(PROCESS_PARTS)).sum())
        .otherwise(pl.col("value").filter(pl.col("counter") == "Total").sum()).alias("total_mb"),
        pl.col("source").first(),
    )
    whole = pl.col("total_mb").sum().over("pid", "process")
    out = per_node.with_columns(
        pl.col("total_mb").round(2),
        pl.col("private_mb").round(2),
        _pct(pl.col("total_mb"), whole).round(2).alias("share_pct"),
    )
    return out.select(
        pl.col("pid").cast(pl.Int32), pl.col("process").cast(pl.String), pl.col("node").cast(pl.Int32),
        pl.col("private_mb").cast(pl.Float64), pl.col("total_mb").cast(pl.Float64),
        pl.col("share_pct").cast(pl.Float64), pl.col("source").cast(pl.String),
    ).sort("pid", "process", "node", nulls_last=True)


def vmstat_numa_delta(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """Growth of NUMA-balancing, page-migration and THP counters between the first and last vmstat snapshot.

    Returns None with fewer than two snapshots. ``counters`` holds only the counters this kernel
    prints (no ``numa_hint_faults`` without CONFIG_NUMA_BALANCING); ``hint_faults_local_pct`` is
    numa_hint_faults_local / numa_hint_faults * 100 over the window (None without hint faults).

    >>> frame = pl.DataFrame({"snapshot": [0, 0, 1, 1], "counter": ["numa_hint_faults", "numa_hint_faults_local"] * 2,
    ...     "value": [100, 90, 1100, 490], "source": ["procvmstat"] * 4})
    >>> delta = vmstat_numa_delta({"vmstat_count": t.conform("vmstat_count", frame)})
    >>> delta["counters"], delta["hint_faults_local_pct"], delta["first_source"]
    ({'numa_hint_faults': 1000, 'numa_hint_faults_local': 400}, 40.0, 'procvmstat')
    """
    ends = first_and_last(tables.get(t.VMSTAT_COUNT))
    if ends is None:
        return None
    start_rows, end_rows, seconds = ends
    wanted = pl.col("counter").is_in(VMSTAT_NUMA_COUNTERS) | pl.col("counter").str.starts_with("thp_")
    start = start_rows.filter(wanted).select("counter", pl.col("value").alias("start"))
    end = end_rows.filter(wanted).select("counter", pl.col("value").alias("end"))
    delta = end.join(start, on="counter", how="inner").with_columns(
        (pl.col("end") - pl.col("start")).clip(lower_bound=0).alias("delta")
    )
    order = {name: i for i, name in enumerate(VMSTAT_NUMA_COUNTERS)}
    grown = sorted(delta.select("counter", "delta").rows(), key=lambda r: (order.get(r[0], len(order)), r[0]))
    counters = {name: value for name, value in grown if value is not None}
    hints, local = counters.get("numa_hint_faults"), counters.get("numa_hint_faults_local")
    return {
        "first_source": start_rows["source"][0],
        "last_source": end_rows["source"][0],
        "first_snapshot": int(start_rows["snapshot"][0]),
        "last_snapshot": int(end_rows["snapshot"][0]),
        "seconds": seconds,
        "counters": counters,
        "hint_faults_local_pct": round(local / hints * 100.0, 2) if hints and local is not None else None,
    }
