"""How many CPUs and NUMA nodes the host has and its RAM, as the derived ``host_count`` table says (one answer for every rule)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.base import RuleInput


@dataclass(frozen=True)
class Count:
    value: int
    source: str  # the input that said so


def host_count(inp: RuleInput, fact: str) -> Count | None:
    """``fact`` ("cpus", "numa_nodes", "ram_mb") of the host, None when no input tells."""
    counts = inp.table(t.HOST_COUNT)
    if counts is None:
        return None
    rows = counts.filter(pl.col("fact") == fact)
    return Count(int(rows["value"][0]), rows["source"][0]) if rows.height else None


def numa_nodes(inp: RuleInput) -> Count | None:
    return host_count(inp, "numa_nodes")


def cpus(inp: RuleInput) -> Count | None:
    return host_count(inp, "cpus")


def ram_mb(inp: RuleInput) -> Count | None:
    return host_count(inp, "ram_mb")
