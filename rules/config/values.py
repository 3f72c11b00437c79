"""The derived ``host_config_value``, ``block_device``, ``database_affinity``, ``database_evidence``,
``database_memory_setting`` and ``node_memory`` tables as the config rules read them (row views: ``dbdiag.host_values``).

>>> import polars as pl
>>> frame = pl.DataFrame({"category": ["sysctl"], "name": ["vm.swappiness"], "value": ["60"], "choices": [None], "source": ["sysctl.txt"]})
>>> values_of(frame, "sysctl")["vm.swappiness"]
Value(value='60', choices=None, source='sysctl.txt', unit=None)
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import cpu_list_or_none
from dbdiag.host_values import BlockDevice, ProcessAffinity, Value
from dbdiag.rules.base import RuleInput


def block_devices(inp: RuleInput) -> list[BlockDevice]:
    """Disks with a captured scheduler (virtual devices left out), by name."""
    frame = inp.table(t.BLOCK_DEVICE, keep_empty=True)
    if frame is None:
        return []
    return [
        BlockDevice(
            row["device"],
            row["kind"],
            Value(row["scheduler"], row["scheduler_choices"], row["scheduler_source"]) if row["scheduler"] is not None else None,
            Value(row["rotational"], None, row["rotational_source"]) if row["rotational"] is not None else None,
        )
        for row in frame.to_dicts()
    ]


def database_affinity(inp: RuleInput) -> list[ProcessAffinity]:
    """Affinity of the database server processes, by subject ("mariadbd 1234")."""
    frame = inp.table(t.DATABASE_AFFINITY, keep_empty=True)
    if frame is None:
        return []
    return [
        ProcessAffinity(row["subject"], cpu_list_or_none(row["cpus"]), cpu_list_or_none(row["mems"]), row["cpus"], row["mems"], row["source"])
        for row in frame.to_dicts()
    ]


def cmdline_sources(inp: RuleInput) -> list[str] | None:
    """The files the kernel command line was read from; None when none was captured."""
    settings = inp.table(t.HOST_SETTING, keep_empty=True)
    rows = settings.filter(pl.col("category") == "cmdline") if settings is not None else None
    if rows is None or rows.height == 0:
        return None
    return sorted(set(rows["source"].drop_nulls().to_list()))


def values_of(frame: pl.DataFrame | None, category: str) -> dict[str, Value]:
    if frame is None:
        return {}
    rows = frame.filter(pl.col("category") == category)
    return {row["name"]: Value(row["value"], row["choices"], row["source"]) for row in rows.to_dicts()}


def setting_values(inp: RuleInput, category: str) -> dict[str, Value]:
    """The kernel settings of one category ("sysctl", "cmdline", "thp") by name; empty when none was captured."""
    return values_of(inp.table(t.HOST_CONFIG_VALUE, keep_empty=True), category)


def database_evidence(inp: RuleInput) -> list[str]:
    """Why we believe a database runs on this host: one short line per kind of evidence."""
    frame = inp.table(t.DATABASE_EVIDENCE, keep_empty=True)
    return [] if frame is None else frame["line"].to_list()


def database_memory_setting(inp: RuleInput, name: str) -> Value | None:
    """One of derive's DATABASE_MEMORY_SETTINGS as the server runs it; None when not captured."""
    frame = inp.table(t.DATABASE_MEMORY_SETTING)
    rows = frame.filter(pl.col("name") == name) if frame is not None else None
    if rows is None or rows.height == 0:
        return None
    row = rows.row(0, named=True)
    return Value(row["value"], None, row["source"], row["unit"])


def node_memory_mb(inp: RuleInput) -> tuple[dict[int, int], str] | None:
    """MB per NUMA node and the input that said so; None when no input sizes every node."""
    frame = inp.table(t.NODE_MEMORY)
    if frame is None:
        return None
    return {int(node): int(mb) for node, mb in frame.select("node", "size_mb").rows()}, frame["source"][0]
