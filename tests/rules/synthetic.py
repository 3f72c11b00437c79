"""Small hand-built tables for rule tests: a machine of N CPUs in K nodes with chosen %soft."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import derive_all
from dbdiag.rules.base import RuleInput

START = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def topology(cpus: int, nodes: int) -> pl.DataFrame:
    per_node = cpus // nodes
    return t.conform(
        t.TOPOLOGY,
        pl.DataFrame({"cpu": list(range(cpus)), "node": [c // per_node for c in range(cpus)], "source": "lscpu.txt"}),
    )


def cpu_util(soft_pct: list[float], busy_pct: float = 55.0, intervals: int = 3) -> pl.DataFrame:
    """Each CPU i gets soft_pct[i] %soft and fills up to busy_pct with %usr (at least 2%)."""
    rows = []
    for interval in range(intervals):
        ts = START + timedelta(seconds=interval + 1)
        for cpu, soft in enumerate(soft_pct):
            usr = max(busy_pct - soft, 2.0)
            rows.append({"ts": ts, "cpu": cpu, "usr_pct": usr, "soft_pct": soft, "idle_pct": max(100.0 - usr - soft, 0.0), "source": "mpstat.txt"})
    return t.conform(t.CPU_UTIL, pl.DataFrame(rows))


def proc_counts(table: str, rows: list[dict]) -> pl.DataFrame:
    return t.conform(table, pl.DataFrame(rows))


def rule_input(tables: dict[str, pl.DataFrame]) -> RuleInput:
    derived = derive_all(tables)
    return RuleInput(tables=tables, derived=derived.tables, metrics=derived.metrics)


def perf_stacks(samples: list[tuple[str, str, int]], event: str = "cpu-clock") -> pl.DataFrame:
    """A ``perf_stack`` table of ``(comm, folded stack root first, samples)`` rows, as perf script gives them."""
    frame = pl.DataFrame(samples, schema=["comm", "stack", "samples"], orient="row")
    return t.conform(t.PERF_STACK, frame.with_columns(pl.lit(event).alias("event"), pl.lit("perf-script.txt").alias("source")))


def numastat(remote_pct: list[float], allocated_pages: int = 100_000) -> pl.DataFrame:
    """``numa_counter`` rows of two numastat snapshots (before, after): node i allocates ``allocated_pages``
    in between, ``remote_pct[i]`` % of them from other nodes."""
    rows = []
    for node, pct in enumerate(remote_pct):
        other = round(allocated_pages * pct / 100)
        for source, hit, local, remote in (("numastat.before", 1000, 1000, 0),
                                           ("numastat.after", 1000 + allocated_pages, 1000 + allocated_pages - other, other)):
            counters = {"numa_hit": hit, "numa_miss": 0, "numa_foreign": 0, "interleave_hit": 0, "local_node": local, "other_node": remote}
            rows += [{"snapshot": 0, "scope": "system", "node": node, "counter": name, "value": float(value), "unit": "pages", "source": source}
                     for name, value in counters.items()]
    return t.conform(t.NUMA_COUNTER, pl.DataFrame(rows))
