"""``numactl --hardware`` (optionally followed by ``numactl --show``, as pt-summary captures it).

Raw input::

    available: 2 nodes (0-1)
    node 0 cpus: 0 2 4 6 8 10 12 14 16 18 20 22
    node 0 size: 96614 MB
    node 0 free: 53769 MB
    node 1 cpus: 1 3 5 7 9 11 13 15 17 19 21 23
    node 1 size: 96762 MB
    node 1 free: 20083 MB
    node distances:
    node   0   1
      0:  10  20
      1:  20  10
    policy: default
    preferred node: current
    physcpubind: 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    cpubind: 0 1
    nodebind: 0 1
    membind: 0 1

Output tables:

``numa_node`` (one row per node)::

    node Int32, cpus String ("0 2 4 ..." as printed; "" for a memory-only node),
    cpu_count Int32, size_mb Int64, free_mb Int64, source String

``topology`` (one row per CPU; ``records`` is their number)::

    cpu Int32, core null, socket null, node Int32, source String

``host_fact`` (key, value, source): ``numa_node_count`` and ``numactl_available_nodes`` from the
``available:`` line, ``numa_distances`` as JSON (``{"nodes": [0, 1], "matrix": [[10, 20], [20, 10]]}``),
and the ``numactl --show`` lines as ``numactl_show_<key>`` (``numactl_show_policy``,
``numactl_show_preferred_node``, ``numactl_show_physcpubind``, ``numactl_show_cpubind``,
``numactl_show_nodebind``, ``numactl_show_membind`` ...). ``No NUMA available on this system``
gives ``numactl_available = no`` and no nodes.
"""

from __future__ import annotations

import json
import re

import polars as pl

from dbdiag.cpulist import parse_cpu_list
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.patterns import lazy_compile
from dbdiag.tables import HOST_FACT, NUMA_NODE, TOPOLOGY, conform, host_fact_frame

_AVAILABLE_RE = lazy_compile(r"^available:\s*(\d+)\s+nodes?\s*(?:\((.*)\))?\s*$")
# values as (?:.*?\S)?, not .*?: the same text, and linear in a run of spaces inside it
_NODE_RE = lazy_compile(r"^node\s+(\d+)\s+(cpus|size|free):[ \t]*((?:.*?\S)?)\s*$")
_SIZE_RE = lazy_compile(r"^(\d+)\s*([KMGT]i?B|kB|B)?$", re.IGNORECASE)
_DIST_HEADER_RE = lazy_compile(r"^node(?:\s+\d+)+\s*$")
_DIST_ROW_RE = lazy_compile(r"^\s*(\d+):((?:\s+\d+)+)\s*$")
_SHOW_RE = lazy_compile(
    r"^(policy|preferred node|preferred|physcpubind|cpubind|nodebind|membind|interleavemask|"
    r"interleavenode|preferred_many|weighted_interleave)\s*:\s*((?:.*?\S)?)\s*$"
)
_NO_NUMA = "No NUMA available on this system"
_UNIT_MB = {"b": 1 / (1 << 20), "kb": 1 / 1024, "kib": 1 / 1024, "mb": 1, "mib": 1, "gb": 1024, "gib": 1024,
            "tb": 1 << 20, "tib": 1 << 20}


def _mb(text: str) -> int | None:
    m = _SIZE_RE.match(text.strip())
    if m is None:
        return None
    unit = (m.group(2) or "MB").lower()
    return int(int(m.group(1)) * _UNIT_MB[unit])


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    facts: list[tuple[str, str]] = []
    nodes: dict[int, dict] = {}
    dist_nodes: list[int] | None = None
    dist_rows: dict[int, list[int]] = {}
    seen_numactl = False
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r").strip()
        if not line:
            continue
        m = _AVAILABLE_RE.match(line)
        if m:
            seen_numactl = True
            facts.append(("numa_node_count", m.group(1)))
            if m.group(2) is not None:
                facts.append(("numactl_available_nodes", m.group(2).strip()))
            continue
        m = _NODE_RE.match(line)
        if m:
            seen_numactl = True
            node, what, value = int(m.group(1)), m.group(2), m.group(3)
            entry = nodes.setdefault(node, {"node": node, "cpus": None, "cpu_count": None, "size_mb": None,
                                            "free_mb": None})
            if what == "cpus":
                try:
                    entry["cpu_list"] = parse_cpu_list(value)
                    entry["cpus"] = " ".join(value.split())
                except ValueError as error:
                    warnings.append(ParseWarning(number, f"node {node} cpus {value[:40]!r} not understood ({error}); dropped"))
                    entry["cpu_list"] = []
                entry["cpu_count"] = len(entry["cpu_list"])
            else:
                mb = _mb(value)
                if mb is None:
                    warnings.append(ParseWarning(number, f"node {node} {what} {value[:40]!r} not understood"))
                entry[f"{what}_mb"] = mb
            continue
        if line == "node distances:":
            seen_numactl = True
            continue
        if _DIST_HEADER_RE.match(line):
            dist_nodes = [int(x) for x in line.split()[1:]]
            continue
        m = _DIST_ROW_RE.match(line)
        if m and dist_nodes is not None:
            dist_rows[int(m.group(1))] = [int(x) for x in m.group(2).split()]
            continue
        m = _SHOW_RE.match(line)
        if m:
            key = "numactl_show_" + re.sub(r"[^a-z0-9]+", "_", m.group(1).lower()).strip("_")
            facts.append((key, " ".join(m.group(2).split())))
            continue
        if line.startswith(_NO_NUMA):
            seen_numactl = True
            facts.append(("numactl_available", "no"))
            notes.append("numactl: no NUMA available on this system")
            continue
        warnings.append(ParseWarning(number, f"not a numactl line; skipped: {line[:60]!r}"))

    if not seen_numactl and not facts:
        raise ParseError("no numactl --hardware lines (available: N nodes / node N cpus:) found")

    if dist_nodes is not None and dist_rows:
        order = [n for n in dist_nodes if n in dist_rows]
        if len(order) == len(dist_nodes) and all(len(dist_rows[n]) == len(dist_nodes) for n in order):
            facts.append(("numa_distances", json.dumps({"nodes": dist_nodes, "matrix": [dist_rows[n] for n in order]})))
        else:
            warnings.append(ParseWarning(None, "node distance matrix is not square; left out"))

    declared = next((int(v) for k, v in facts if k == "numa_node_count"), None)
    if declared is not None and nodes and declared != len(nodes):
        warnings.append(ParseWarning(None, f"available: says {declared} nodes but {len(nodes)} are described"))
    empty = [n for n, e in sorted(nodes.items()) if e["cpus"] == ""]
    if empty:
        notes.append(f"memory-only node(s) without CPUs: {', '.join(map(str, empty))}")

    topo_rows = []
    owner: dict[int, int] = {}
    for node, entry in sorted(nodes.items()):
        for cpu in entry.get("cpu_list", []):
            if cpu in owner:
                reason = f"CPU {cpu} listed on nodes {owner[cpu]} and {node}; kept {owner[cpu]}"
                warnings.append(ParseWarning(None, reason))
                continue
            owner[cpu] = node
            topo_rows.append((cpu, node))
    topo_rows.sort()

    numa = conform(
        NUMA_NODE,
        pl.DataFrame(
            [{k: v for k, v in e.items() if k != "cpu_list"} for _n, e in sorted(nodes.items())],
            schema={"node": pl.Int32, "cpus": pl.String, "cpu_count": pl.Int32, "size_mb": pl.Int64,
                    "free_mb": pl.Int64},
        ).with_columns(pl.lit(ctx.source).alias("source")),
    )
    topology = conform(
        TOPOLOGY,
        pl.DataFrame(topo_rows, schema={"cpu": pl.Int32, "node": pl.Int32}, orient="row").with_columns(
            pl.lit(ctx.source).alias("source")
        ),
    )
    host = host_fact_frame([(str(k), str(v)) for k, v in facts], ctx.source)
    return ParseResult(
        tables={NUMA_NODE: numa, TOPOLOGY: topology, HOST_FACT: host},
        records=topology.height,
        warnings=warnings,
        notes=notes,
    )


def detect(head: str, name: str) -> float:
    if re.search(r"^available:\s*\d+\s+nodes?\b", head, re.MULTILINE):
        return 0.95
    if re.search(r"^node\s+\d+\s+cpus:", head, re.MULTILINE):
        return 0.8
    if head.lstrip().startswith(_NO_NUMA):
        return 0.9
    return 0.0


SPEC = ParserSpec(
    kind="numactl-hardware",
    description="numactl --hardware (+ --show): NUMA nodes with CPUs and memory, node distances",
    detect=detect,
    parse=parse,
)
