"""A buffer pool larger than the memory of the NUMA node(s) the database is bound to.

What it detects:
    ``innodb_buffer_pool_size`` or ``shared_buffers`` larger than the total memory of the
    node(s) the database process may allocate from, on a machine with two or more nodes:
    ``/proc/PID/status`` ``Mems_allowed_list`` of the database process naming a subset of the
    nodes, ``numastat -p`` showing nearly all of the process's memory on one node, or
    ``numactl --show`` with ``policy: bind`` (when the capture ran it in the database's context).

Why it matters:
    A process bound to a node allocates only there. When its pool outgrows the node, the kernel
    reclaims the node's page cache, then swaps or invokes the OOM killer although other nodes
    have free memory; without a strict bind (preferred / first touch) the overflow lands on the
    remote node and every access to it pays the interconnect. Either way the binding that was
    meant to keep memory local now costs more than it saves.

How it is detected:
    Inputs, as derive's ``database_memory`` tables give them: ``db_setting`` (the pool size),
    node memory from ``numa_node.size_mb`` (numactl --hardware) or per-node ``MemTotal`` in
    ``numa_counter`` (numastat -m), and the binding from ``host_setting`` ``process_affinity`` rows
    of a database process, ``numa_counter`` process rows (numastat -p, when the process holds at
    least 512 MB and 95% of it sits on one node) or the ``numactl_show_*`` host facts.
    Fires when the pool is larger than the summed memory of the allowed nodes and those are
    fewer than all the machine's nodes (MIN_NODES = 2). Never on one node; skipped when the
    binding of the database process was not captured.

Remediation:
    Interleave the pool over all nodes (``numactl --interleave=all`` in front of the server,
    ``innodb_numa_interleave = ON`` for MySQL/MariaDB built with NUMA support), or bind to as
    many nodes as the pool needs (``numactl --cpunodebind=0,1 --membind=0,1``), or shrink the
    pool to fit the node while leaving room for connections and the OS.

References:
    numactl(8); set_mempolicy(2); MySQL Reference Manual ``innodb_numa_interleave``; Jeremy Cole,
    "The MySQL swap insanity problem and the effects of the NUMA architecture"; Linux kernel
    Documentation/admin-guide/mm/numa_memory_policy.rst.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import node_memory_mb
from dbdiag.rules.host_counts import numa_nodes
from dbdiag.units import gib

RULE_ID = "buffer-pool-exceeds-numa-node"

MIN_NODES = 2
FIT_NODE_SHARE_PCT = 80.0
INNODB_CHUNK = 128 * 2**20  # innodb_buffer_pool_chunk_size default; sizes are rounded to it


@dataclass(frozen=True)
class Binding:
    """Where a database process may (or in practice does) take memory from, and what says so."""

    process: str
    nodes: tuple[int, ...]
    how: str
    source: str


def check(inp: RuleInput) -> Verdict:
    nodes = numa_nodes(inp)
    if nodes is None:
        raise Skip("NUMA node count unknown: needs lscpu, numactl --hardware or numastat")
    if nodes.value < MIN_NODES:
        return Verdict(measured=f"{nodes.value} NUMA node ({nodes.source}): the pool cannot exceed a node it is not confined to")
    pool = _buffer_pool(inp)
    if pool is None:
        raise Skip("no innodb_buffer_pool_size or shared_buffers size among the database settings")
    sizes = node_memory_mb(inp)
    if sizes is None:
        raise Skip("memory per NUMA node unknown: needs numactl --hardware or numastat -m")
    per_node, sizes_source = sizes
    bindings = _bindings(inp)
    if not bindings:
        raise Skip(
            "the database process's memory binding was not captured: needs /proc/PID/status (Mems_allowed_list), "
            "numastat -p <server> or numactl --show"
        )
    family, name, pool_bytes, pool_source = pool
    findings, judged = [], []
    seen: set[tuple[str, tuple[int, ...]]] = set()
    for binding in bindings:
        key = (binding.process.split()[0], binding.nodes)  # postgres backends: one line per node set
        if key in seen:
            continue
        seen.add(key)
        allowed = sum(per_node.get(n, 0) for n in binding.nodes) * 2**20
        nodes_text = ",".join(map(str, binding.nodes))
        judged.append(f"{binding.process}: nodes {nodes_text} ({binding.how}), {gib(allowed)} for a {gib(pool_bytes)} {name}")
        if len(binding.nodes) < len(per_node) and pool_bytes > allowed:
            findings.append(_finding(binding, name, pool_bytes, pool_source, per_node, sizes_source, allowed))
    return Verdict(findings=findings, measured="; ".join(judged))


def _buffer_pool(inp: RuleInput) -> tuple[str, str, int, str] | None:
    """(engine family, setting name, bytes, source) of the InnoDB pool, else shared_buffers, when captured as a size."""
    settings = inp.table(t.DATABASE_MEMORY_SETTING)
    if settings is None:
        return None
    for family, name in (("innodb", "innodb_buffer_pool_size"), ("postgresql", "shared_buffers")):
        rows = settings.filter((pl.col("name") == name) & pl.col("size_bytes").is_not_null())
        if rows.height:
            return family, name, int(rows["size_bytes"][0]), rows["source"][0]
    return None


def _bindings(inp: RuleInput) -> list[Binding]:
    """The derived ``database_memory_binding`` rows: /proc/PID/status, else numastat -p, else numactl --show."""
    frame = inp.table(t.DATABASE_MEMORY_BINDING)
    if frame is None:
        return []
    return [Binding(r["process"], tuple(r["nodes"]), r["how"], r["source"]) for r in frame.iter_rows(named=True)]


def _finding(
    binding: Binding, name: str, pool_bytes: int, pool_source: str, per_node: dict[int, int], sizes_source: str, allowed: int
) -> Finding:
    nodes_text = ",".join(map(str, binding.nodes))
    all_nodes = ",".join(map(str, sorted(per_node)))
    smallest = min(per_node[n] for n in binding.nodes if n in per_node) if binding.nodes else 0
    fit = int(allowed * FIT_NODE_SHARE_PCT / 100) // INNODB_CHUNK * INNODB_CHUNK
    shrink = (
        f"SET GLOBAL innodb_buffer_pool_size = {fit};" if name == "innodb_buffer_pool_size"
        else f"ALTER SYSTEM SET shared_buffers = '{fit // 2**20}MB'; then restart"
    )
    innodb = name == "innodb_buffer_pool_size"
    node_rows = tuple((n, f"{per_node[n]:,} MB", "yes" if n in binding.nodes else "no") for n in sorted(per_node))
    lines = [
        f"{binding.process} may allocate only on node(s) {nodes_text} ({gib(allowed)}) but {name} is {gib(pool_bytes)}.",
        "Pick one:",
        f"1. Interleave over every node: numactl --interleave=all <server command> (systemd: NUMAPolicy=interleave, NUMAMask={all_nodes})",
    ]
    if innodb:
        lines.append("   or innodb_numa_interleave = ON in my.cnf [mysqld] (MySQL 5.7.9+/MariaDB 10.2.4+ built with NUMA), then restart.")
    lines += [
        f"2. Bind to enough nodes: numactl --cpunodebind={all_nodes} --membind={all_nodes} <server command>",
        f"3. Shrink the pool to fit node(s) {nodes_text} with room for connections and the OS (~{FIT_NODE_SHARE_PCT:.0f}%): "
        + shrink,
        "Check: grep Mems_allowed_list /proc/$(pidof <server>)/status; numastat -p <server>",
    ]
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=(
            f"{name} {gib(pool_bytes)} exceeds the {gib(allowed)} of node(s) {nodes_text} that {binding.process} is bound to; "
            "threshold: the allowed nodes' memory"
        ),
        subject=f"{name} on node(s) {nodes_text}",
        impact={
            "description": "reclaim, swapping or OOM on the bound node while other nodes have memory",
            "pool_bytes": pool_bytes, "allowed_mb": allowed // 2**20, "nodes": list(binding.nodes), "smallest_node_mb": smallest,
        },
        evidence=(
            Evidence(
                title="Pool, binding and node memory",
                columns=("what", "value", "source"),
                rows=((name, f"{gib(pool_bytes)} ({pool_bytes:,} bytes)", pool_source),
                      (f"{binding.process} binding", binding.how, binding.source),
                      ("memory of the allowed node(s)", gib(allowed), sizes_source)),
            ),
            Evidence(title="Memory per NUMA node", columns=("node", "size", "allowed"), rows=node_rows),
        ),
        remediation="\n".join(lines),
        sources=tuple(dict.fromkeys(s for s in (pool_source, binding.source, sizes_source) if s)),
    )


RULE = Rule(
    id=RULE_ID,
    title="Buffer pool larger than the NUMA node(s) the database is bound to",
    area="config",
    requires=((t.DB_SETTING,), (t.NUMA_NODE, t.NUMA_COUNTER, t.TOPOLOGY)),
    check=check,
    doc=__doc__ or "",
)
