"""The database's memory: its buffer-pool settings, the memory of each NUMA node, and where its processes may take memory from.

Three tables, for the rules that weigh a buffer pool against RAM or a NUMA node:

``database_memory_setting``: each of DATABASE_MEMORY_SETTINGS as the server runs it (``db_setting``
rows: SHOW/pg_settings variables first, else config files; TiDB's no-op MySQL names left out; see
``host_config.db_value``), with its size in bytes when it is one::

    name                     value  unit  size_bytes   source
    innodb_buffer_pool_size  134217728  null  134217728  mysql/variables.txt
    shared_buffers           16384  8kB   134217728    pg_settings.csv

``node_memory``: MB per NUMA node (``numa_node.size_mb``, else numastat -m / node meminfo MemTotal;
none unless every node has a positive size)::

    node  size_mb  source
    0     15987    numactl-hardware.txt

``database_memory_binding``: the nodes a database process may (or in practice does) take memory
from; the first kind of evidence found: ``/proc/PID/status`` Mems_allowed_list, then ``numastat -p``
(one node when it holds >= ONE_NODE_SHARE_PCT of a process of >= MIN_PROCESS_MB), then a ``bind``
policy of ``numactl --show``::

    process       nodes  how                                        source
    mariadbd 812  [0]    Mems_allowed_list 0                        proc/812/status
    postgres 90   [1]    numastat -p: 99% of 2,048 MB on node 1     numastat-p.txt
"""

from __future__ import annotations

from typing import Any, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.host_config import database_process_affinity, db_value, is_database_process, node_sizes_mb
from dbdiag.python_values import mapped
from dbdiag.settings import size_bytes

DATABASE_MEMORY_SETTINGS = ("innodb_buffer_pool_size", "innodb_buffer_pool_chunk_size", "innodb_buffer_pool_instances", "shared_buffers")
MIN_PROCESS_MB = 512.0
ONE_NODE_SHARE_PCT = 95.0

Binding = dict[str, Any]  # a database_memory_binding row


def database_memory_settings(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``database_memory_setting`` table: one row per captured name of DATABASE_MEMORY_SETTINGS."""
    rows = []
    for name in DATABASE_MEMORY_SETTINGS:
        value = db_value(dict(tables), name)
        if value is not None:
            rows.append({"name": name, "value": value.value, "unit": value.unit, "size_bytes": size_bytes(value.value, value.unit), "source": value.source})
    return pl.DataFrame(rows, schema=t.DATABASE_MEMORY_SETTING_SCHEMA)


def node_memory(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``node_memory`` table; empty when no input sizes every node."""
    sizes = node_sizes_mb(dict(tables))
    rows = [] if sizes is None else [{"node": node, "size_mb": mb, "source": sizes[1]} for node, mb in sorted(sizes[0].items())]
    return pl.DataFrame(rows, schema=t.NODE_MEMORY_SCHEMA)


def database_memory_bindings(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``database_memory_binding`` table (see the module docstring for the order of the evidence)."""
    found = _affinity_bindings(tables) or _numastat_bindings(tables) or _numactl_show_binding(tables)
    return pl.DataFrame(found, schema=t.DATABASE_MEMORY_BINDING_SCHEMA)


def _affinity_bindings(tables: Mapping[str, pl.DataFrame]) -> list[Binding]:
    return [
        _binding(affinity.subject, affinity.mems, f"Mems_allowed_list {affinity.mems_text}", affinity.source)
        for affinity in database_process_affinity(dict(tables)) if affinity.mems
    ]


def _numactl_show_binding(tables: Mapping[str, pl.DataFrame]) -> list[Binding]:
    """``numactl --show`` is the policy of the shell that ran it: only a ``bind`` policy says
    anything (the capture ran inside the database's wrapper); ``default`` says nothing of it."""
    facts = tables.get(t.HOST_FACT)
    if facts is None or facts.height == 0:
        return []
    show = {key: (value, source) for key, value, source in facts.filter(pl.col("key").str.starts_with("numactl_show_")).select("key", "value", "source").rows()}
    policy = show.get("numactl_show_policy", ("", ""))[0]
    membind, source = show.get("numactl_show_membind", ("", ""))
    nodes = [int(n) for n in membind.split() if n.isdigit()]
    if policy != "bind" or not nodes:
        return []
    return [_binding("numactl --show (policy of the capturing shell)", nodes, f"policy bind, membind {membind}", source)]


def _numastat_bindings(tables: Mapping[str, pl.DataFrame]) -> list[Binding]:
    """From the derived ``numa_process_memory`` (each process once, its latest snapshot: the parts of its own
    table, else the Total of a several-process summary; numastat may print the same process in both)."""
    memory = tables.get(t.NUMA_PROCESS_MEMORY)
    if memory is None or memory.height == 0:
        return []
    memory = memory.filter(pl.col("process").is_not_null() & pl.col("total_mb").is_not_null())
    memory = memory.filter(mapped(memory["process"], is_database_process, pl.Boolean).fill_null(False))
    found = []
    for (pid, name), frame in memory.sort("pid", "node").group_by("pid", "process", maintain_order=True):
        total = float(frame["total_mb"].sum())
        if total < MIN_PROCESS_MB:
            continue
        top = frame.sort("total_mb", descending=True, maintain_order=True).row(0, named=True)
        share = 100.0 * top["total_mb"] / total
        nodes = [top["node"]] if share >= ONE_NODE_SHARE_PCT else frame["node"].to_list()
        found.append(_binding(f"{name} {pid}", nodes, f"numastat -p: {share:.0f}% of {total:,.0f} MB on node {top['node']}", top["source"]))
    return found


def _binding(process: str, nodes: list[int], how: str, source: str) -> Binding:
    return {"process": process, "nodes": list(nodes), "how": how, "source": source}
