"""``host_count``: how many CPUs and NUMA nodes the host has, answered once for every rule, with the input that said so.

Output rows (``fact``, ``value``, ``source``)::

    fact        value  source
    cpus        8      topology (lscpu.txt)
    numa_nodes  2      numactl-hardware.txt
    ram_mb      31974  numactl-hardware.txt

- ``cpus``: logical CPUs from the topology (lscpu / numactl), else the host facts' CPU count, else
  the CPUs of the per-CPU utilisation (mpstat); no row when no input tells.
- ``numa_nodes``: the largest count of numa_node, topology, numastat's node columns or the
  numactl/lscpu node-count fact (see ``host_config.node_count``); no row when none tells.
- ``ram_mb``: the machine's memory, the sum of the NUMA nodes' sizes, else a host fact's
  (``host_config.ram_mb``); no row when none tells.
"""

from __future__ import annotations

from typing import Any, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.host_config import node_count, ram_mb


def cpu_count(tables: Mapping[str, Any], host: dict[str, Any] | None) -> tuple[int, str] | None:
    """Logical CPUs and where the number comes from (``host``: the ``host`` metric); None when no input tells."""
    topology = tables.get(t.TOPOLOGY)
    if topology is not None and topology.height:
        return int(topology["cpu"].n_unique()), f"topology ({', '.join(sorted(topology['source'].unique().to_list()))})"
    if isinstance(host, dict) and isinstance(host.get("cpus"), int) and host["cpus"] > 0:
        return int(host["cpus"]), "host facts (cpu_count)"
    util = tables.get(t.CPU_UTIL)
    if util is not None and util.height:
        cpus = util.filter(pl.col("cpu") >= 0)["cpu"].n_unique()
        if cpus:
            return int(cpus), f"per-CPU utilisation ({', '.join(sorted(util['source'].unique().to_list()))})"
    return None


def host_counts(view: Mapping[str, Any]) -> pl.DataFrame:
    rows = []
    cpus = cpu_count(view, view.get(t.HOST_METRIC))
    if cpus is not None:
        rows.append({"fact": "cpus", "value": cpus[0], "source": cpus[1]})
    nodes = node_count(dict(view))
    if nodes is not None:
        rows.append({"fact": "numa_nodes", "value": nodes.value, "source": nodes.source})
    ram = ram_mb(dict(view))
    if ram is not None:
        rows.append({"fact": "ram_mb", "value": ram.value, "source": ram.source})
    return pl.DataFrame(rows, schema=t.HOST_COUNT_SCHEMA)
