"""The host in one line: name, kernel, CPU model, counts — from whichever inputs named them.

Input: ``host_fact`` rows (key, value, source) from the manifest, mpstat banners, lscpu, numactl.
Output: a dict for ``metrics.host``; keys absent when no input gave them.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbdiag import tables as t

# Output key -> fact keys that carry it, in order of trust.
HOST_KEYS = {
    "hostname": ("hostname", "host"),
    "kernel": ("kernel",),
    "arch": ("arch", "architecture", "machine"),
    "cpu_model": ("bios_model_name", "model_name"),
    "cpus": ("cpu_count",),
    "sockets": ("sockets",),
    "numa_nodes": ("numa_node_count",),
    "threads_per_core": ("threads_per_core",),
    "hypervisor": ("hypervisor_vendor",),
}


def host_summary(tables: dict[str, pl.DataFrame]) -> dict[str, Any]:
    facts = tables.get(t.HOST_FACT)
    if facts is None or facts.height == 0:
        return {}
    first_value = dict(facts.filter(pl.col("value").str.strip_chars() != "").unique(subset=["key"], keep="first").select("key", "value").rows())
    summary: dict[str, Any] = {}
    for name, keys in HOST_KEYS.items():
        value = next((first_value[k] for k in keys if k in first_value), None)
        if value is not None:
            summary[name] = int(value) if value.isdigit() else value
    return summary
