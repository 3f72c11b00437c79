"""What the NUMA rules share: how many nodes the machine has and where processes may run.

Process bindings come from ``host_setting`` rows of category ``process_affinity``
(``/proc/PID/status`` ``Cpus_allowed_list`` / ``Mems_allowed_list``, ``taskset -p``), whose
``subject`` names the process ("mariadbd 1234", or the name alone when the file gave no pid).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import parse_cpu_list
from dbdiag.patterns import lazy_compile
from dbdiag.rules.base import RuleInput
from dbdiag.rules.host_counts import numa_nodes

_SUBJECT_PID = lazy_compile(r"^(?P<name>.*?)[ :(]+(?P<pid>\d+)\)?$")


@dataclass(frozen=True)
class Binding:
    """Where one process may run and allocate, as its status/taskset file says."""

    subject: str
    name: str
    pid: int | None
    cpus: tuple[int, ...] | None
    mems: tuple[int, ...] | None
    source: str


def node_count(inp: RuleInput) -> int:
    """Nodes known from topology (lscpu/numactl), node tables, per-node counters or node-count facts."""
    amount = numa_nodes(inp)
    return amount.value if amount is not None else 0


def cpu_node_map(inp: RuleInput) -> dict[int, int]:
    nodes = inp.table(t.CPU_NODE, keep_empty=True)
    if nodes is None or nodes.height == 0:
        return {}
    return {cpu: node for cpu, node in nodes.select("cpu", "node").drop_nulls().rows()}


def split_subject(subject: str) -> tuple[str, int | None]:
    """``"mariadbd 1234"`` -> (``"mariadbd"``, 1234); a bare name keeps pid None.

    >>> split_subject("mariadbd 1234"), split_subject("haproxy (77)"), split_subject("python3")
    (('mariadbd', 1234), ('haproxy', 77), ('python3', None))
    """
    match = _SUBJECT_PID.match(subject.strip())
    if match and match.group("name"):
        return match.group("name").strip(), int(match.group("pid"))
    return subject.strip(), None


def process_bindings(inp: RuleInput) -> list[Binding]:
    settings = inp.table(t.HOST_SETTING)
    if settings is None:
        return []
    rows = settings.filter(
        pl.col("category") == "process_affinity",
        pl.col("name").is_in(["Cpus_allowed_list", "Mems_allowed_list"]),
        pl.col("subject").is_not_null(),
    )
    bindings: list[Binding] = []
    for (subject, source), group in rows.group_by("subject", "source", maintain_order=True):
        values = dict(group.select("name", "value").rows())
        name, pid = split_subject(subject)
        bindings.append(
            Binding(
                subject=subject,
                name=name,
                pid=pid,
                cpus=_cpus(values.get("Cpus_allowed_list")),
                mems=_cpus(values.get("Mems_allowed_list")),
                source=source,
            )
        )
    return bindings


def _cpus(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        return tuple(parse_cpu_list(text))
    except ValueError:
        return None
