"""Chart data (not drawings) shared by rules and the report overview."""

from __future__ import annotations

import polars as pl

from dbdiag.findings import Bar, BarGroup, Chart


def per_cpu_by_node(
    per_cpu: pl.DataFrame,
    value_column: str,
    title: str,
    unit: str,
    highlight_cpus: set[int] = frozenset(),
    threshold: float | None = None,
    threshold_label: str | None = None,
) -> Chart:
    """One bar per CPU, grouped by NUMA node (``node ?`` when the topology is unknown)."""
    rows = per_cpu.select("cpu", "node", pl.col(value_column).fill_null(0.0)).sort("node", "cpu", nulls_last=True)
    groups: dict[str, list[Bar]] = {}
    for cpu, node, value in rows.iter_rows():
        label = f"node {node}" if node is not None else "node ?"
        groups.setdefault(label, []).append(Bar(f"CPU {cpu}", round(float(value), 2), cpu in highlight_cpus))
    return Chart(
        title=title,
        unit=unit,
        groups=tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items()),
        threshold=threshold,
        threshold_label=threshold_label,
    )
