"""``lscpu`` output: CPU topology, NUMA node CPU lists and host facts.

Reads, alone or one after the other in the same member:

- the human layout, flat (util-linux < 2.37) or hierarchical (>= 2.37, indented sections)::

      Architecture:            x86_64
        CPU op-mode(s):        32-bit, 64-bit
      CPU(s):                  4
        On-line CPU(s) list:   0-3
      Vendor ID:               AuthenticAMD
        Model name:            QEMU TCG CPU version 2.5+
          Thread(s) per core:  1
          Core(s) per socket:  2
          Socket(s):           2
      Caches (sum of all):
        L1d:                   256 KiB (4 instances)
      NUMA:
        NUMA node(s):          2
        NUMA node0 CPU(s):     0,1
        NUMA node1 CPU(s):     2,3

- the parsable layout (``lscpu -p`` / ``--parse``; a second block, e.g. ``-p -y``, is ignored)::

      # CPU,Core,Socket,Node,,L1d,L1i,L2,L3
      0,0,0,0,,0,0,0,0
      2,2,1,1,,2,2,2,2

- the extended layout (``lscpu -e``): ``CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE ...``.

Output tables:

``topology`` (one row per CPU; ``records`` is their number)::

    cpu Int32, core Int32, socket Int32, node Int32, source String

    From ``-p``/``-e`` when present (node filled from the NUMA lines when the parsable block has
    none); else from the ``NUMA nodeN CPU(s)`` lists (else the on-line CPU list) with
    ``socket`` = 0 only when ``Socket(s): 1`` and ``core`` = ``cpu`` only when
    ``Thread(s) per core: 1``, otherwise null.

``numa_node`` (one row per node; lscpu gives no memory sizes)::

    node Int32, cpus String ("0-5,48-53" as printed), cpu_count Int32, size_mb null, free_mb null, source

``host_fact`` (key, value, source): every ``Key: value`` line, keys in snake_case from lscpu's
labels, with these canonical names: ``cpu_count`` (CPU(s)), ``online_cpus``, ``offline_cpus``,
``threads_per_core``, ``cores_per_socket``, ``sockets``, ``numa_node_count``, ``architecture``,
``model_name``, ``vendor_id``, ``hypervisor_vendor``, ``virtualization_type``, ``l1d_cache`` ...
(hierarchical ``Caches``: ``L2`` -> ``l2_cache``; ``Vulnerabilities``: ``Meltdown`` ->
``vulnerability_meltdown``). Heterogeneous CPUs (ARM big.LITTLE) repeat their per-type keys,
in block order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from dbdiag.cpulist import format_cpu_list, parse_cpu_list
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import HOST_FACT, NUMA_NODE, TOPOLOGY, conform, host_fact_frame


_KV_RE = lazy_compile(r"^(?P<indent>[ \t]*)(?P<key>[A-Za-z][A-Za-z0-9 ()./_+-]{0,60}?):(?P<gap>[ \t]*)(?P<value>.*)$")
_NUMA_KEY_RE = lazy_compile(r"^NUMA node(\d+) CPU\(s\)$")
_PARSE_HEADER_RE = lazy_compile(r"^#\s*CPU\s*(?:,|$)", re.IGNORECASE)
_PARSE_ROW_RE = lazy_compile(r"^\d+(?:,[^,]*)*$")
_EXTENDED_HEADER_RE = lazy_compile(r"^\s*CPU\s+(?:NODE|SOCKET|CORE|BOOK|DRAWER|CLUSTER|L1d|ONLINE|MAXMHZ)\b")
_EXTENDED_ROW_RE = lazy_compile(r"^\s*\d+(?:\s+\S+)+\s*$")

_CANONICAL = {
    "CPU(s)": "cpu_count",
    "On-line CPU(s) list": "online_cpus",
    "Off-line CPU(s) list": "offline_cpus",
    "Thread(s) per core": "threads_per_core",
    "Core(s) per socket": "cores_per_socket",
    "Core(s) per cluster": "cores_per_cluster",
    "Socket(s)": "sockets",
    "NUMA node(s)": "numa_node_count",
}
_CACHES_SECTION = lazy_compile(r"^Caches\b", re.IGNORECASE)
_VULN_SECTION = "Vulnerabilities"

# Keys that only lscpu prints, for detect().
_DETECT_KEYS = lazy_compile(
    r"^[ \t]*(?:Architecture|CPU op-mode\(s\)|CPU\(s\)|On-line CPU\(s\) list|Thread\(s\) per core|"
    r"Core\(s\) per socket|Socket\(s\)|NUMA node\(s\)|NUMA node\d+ CPU\(s\)|Model name|Vendor ID|"
    r"Byte Order|BogoMIPS|L1d cache|Hypervisor vendor):",
    re.MULTILINE,
)


def _snake(label: str) -> str:
    key = label.replace("(s)", "s").lower()
    return re.sub(r"[^a-z0-9]+", "_", key).strip("_")


def _fact_key(label: str, section: str | None) -> str:
    if label in _CANONICAL:
        return _CANONICAL[label]
    if section and _CACHES_SECTION.match(section) and re.fullmatch(r"L\d\w*", label):
        return _snake(label) + "_cache"
    if section == _VULN_SECTION:
        return "vulnerability_" + _snake(label)
    return _snake(label)


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


@dataclass
class _Parsable:
    columns: list[str]
    line: int
    rows: list[list[str]] = field(default_factory=list)


@dataclass
class _State:
    facts: list[tuple[str, str]] = field(default_factory=list)
    numa: list[tuple[int, str, int]] = field(default_factory=list)  # node, cpus as printed, line
    parsable: list[_Parsable] = field(default_factory=list)
    extended: list[_Parsable] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    dropped: int = 0
    hierarchical: bool = False

    def warn(self, line: int | None, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(line, reason))
        else:
            self.dropped += 1


def _read(text: str) -> _State:
    st = _State()
    section: str | None = None
    block: _Parsable | None = None  # the -p or -e block being read
    block_kind = ""
    last: tuple[int, int] | None = None  # (index in facts, value column) for wrapped values
    pieces: dict[int, list[tuple[str, int]]] = {}  # fact index -> [(text, length of its line)]
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            block, last = None, None
            continue
        if block is not None:
            if block_kind == "p" and _PARSE_ROW_RE.match(line.strip()):
                block.rows.append(line.strip().split(","))
                continue
            if block_kind == "e" and _EXTENDED_ROW_RE.match(line):
                block.rows.append(line.split())
                continue
            block = None
        if line.lstrip().startswith("#"):
            last = None
            if _PARSE_HEADER_RE.match(line.strip()):
                block, block_kind = _Parsable([c.strip() for c in line.strip()[1:].split(",")], number), "p"
                st.parsable.append(block)
            continue  # the "# The following is the parsable format ..." preamble
        if _EXTENDED_HEADER_RE.match(line):
            block, block_kind, last = _Parsable(line.split(), number), "e", None
            st.extended.append(block)
            continue
        m = _KV_RE.match(line)
        if m is None:
            if last is not None and line[:1] in (" ", "\t"):
                index, column = last
                piece = line[column:] if not line[:column].strip() else " " + line.strip()
                pieces[index].append((piece, len(line)))
                continue
            st.warn(number, f"not an lscpu line; skipped: {line.strip()[:60]!r}")
            last = None
            continue
        indent, label, value = m.group("indent"), m.group("key").strip(), m.group("value")
        if indent:
            st.hierarchical = True
        numa = _NUMA_KEY_RE.match(label)
        if numa:
            st.numa.append((int(numa.group(1)), value.strip(), number))
            last = None
            continue
        if not indent and not value.strip():
            section, last = label, None  # "Caches (sum of all):", "NUMA:", "Vulnerabilities:"
            continue
        if not indent:
            section = None
        st.facts.append((_fact_key(label, section), value))
        pieces[len(st.facts) - 1] = [(value, len(line))]
        last = (len(st.facts) - 1, m.start("value"))
    st.facts = [(key, _join_wrapped(pieces[i])) for i, (key, _) in enumerate(st.facts)]
    return st


def _join_wrapped(parts: list[tuple[str, int]]) -> str:
    """Join a value lscpu wrapped at the terminal width (``Flags:`` on a tty), mid-word or not.

    Wrapped lines all have the terminal's width; one that is shorter lost a trailing blank
    (editors strip them), so a blank goes back between it and the next piece.
    """
    if len(parts) == 1:
        return parts[0][0].strip()
    width = max(length for _text, length in parts[:-1])
    text = ""
    for i, (piece, length) in enumerate(parts):
        text += piece
        if i < len(parts) - 1 and length < width and not piece.endswith((" ", "\t")):
            text += " "
    return text.strip()


def _block_topology(block: _Parsable, extended: bool, st: _State) -> tuple[list[tuple], int]:
    names = [c.upper() for c in block.columns]
    col = {name: names.index(name) for name in ("CPU", "CORE", "SOCKET", "NODE", "ONLINE") if name in names}
    rows: list[tuple] = []
    offline = 0
    for fields in block.rows:
        def get(name: str) -> str | None:
            i = col.get(name)
            return fields[i] if i is not None and i < len(fields) else None

        if extended and (get("ONLINE") or "").lower() == "no":
            offline += 1
            continue
        cpu = _int(get("CPU"))
        if cpu is None:
            st.warn(block.line, f"parsable row {','.join(fields)[:40]!r} has no CPU number; skipped")
            continue
        rows.append((cpu, _int(get("CORE")), _int(get("SOCKET")), _int(get("NODE"))))
    return rows, offline


def _single(facts: list[tuple[str, str]], key: str) -> int | None:
    values = {v for k, v in facts if k == key}
    return _int(values.pop()) if len(values) == 1 else None


def parse(text: str, ctx: ParseContext) -> ParseResult:
    st = _read(text)
    notes: list[str] = []
    layouts = []
    if st.facts or st.numa:
        layouts.append("human (hierarchical)" if st.hierarchical else "human (flat)")

    node_of: dict[int, int] = {}
    numa_rows = []
    for node, cpus, number in st.numa:
        try:
            members = parse_cpu_list(cpus)
        except ValueError:
            st.warn(number, f"NUMA node{node} CPU list {cpus[:40]!r} not understood; node kept without CPUs")
            members, cpus = [], None
        for cpu in members:
            node_of.setdefault(cpu, node)
        numa_rows.append({"node": node, "cpus": cpus, "cpu_count": len(members)})

    topo: list[tuple] = []
    blocks = [(b, False) for b in st.parsable if "CPU" in [c.upper() for c in b.columns] and b.rows]
    blocks += [(b, True) for b in st.extended if b.rows]
    if blocks:
        block, extended = blocks[0]
        topo, offline = _block_topology(block, extended, st)
        layouts.append("lscpu -e" if extended else "lscpu -p")
        if offline:
            notes.append(f"{offline} offline CPU(s) in lscpu -e left out of the topology")
        if len(blocks) > 1:
            notes.append(
                f"{len(blocks) - 1} more parsable block(s) ignored (e.g. lscpu -p -y with physical IDs); "
                f"topology from the block at line {block.line}"
            )
        if node_of:
            mismatched = [cpu for cpu, _c, _s, node in topo if node is not None and node_of.get(cpu, node) != node]
            if mismatched:
                st.warn(
                    block.line,
                    f"NUMA node of CPU(s) {format_cpu_list(mismatched)} differs between the NUMA lines "
                    "and the parsable block; kept the parsable block",
                )
            if all(node is None for *_rest, node in topo):
                topo = [(cpu, core, sock, node_of.get(cpu)) for cpu, core, sock, _n in topo]
                notes.append("parsable block has no Node column values; nodes taken from the NUMA lines")
    elif st.facts or node_of:
        sockets = _single(st.facts, "sockets")
        threads = _single(st.facts, "threads_per_core")
        cpus = sorted(node_of)
        origin = "NUMA node CPU lists"
        if not cpus:
            online = [v for k, v in st.facts if k == "online_cpus"]
            try:
                cpus = parse_cpu_list(online[0]) if online else []
            except ValueError:
                cpus = []
            origin = "the on-line CPU list (no NUMA lines: node unknown)"
        topo = [
            (cpu, cpu if threads == 1 else None, 0 if sockets == 1 else None, node_of.get(cpu)) for cpu in cpus
        ]
        if topo:
            derived = [what for what, ok in (("socket from Socket(s): 1", sockets == 1),
                                             ("core = cpu from Thread(s) per core: 1", threads == 1)) if ok]
            notes.append(
                f"topology from {origin}"
                + (f"; {', '.join(derived)}" if derived else "; core and socket unknown without lscpu -p")
            )

    if not topo and not numa_rows and not _DETECT_KEYS.search(text):
        raise ParseError("no lscpu fields, NUMA lines or parsable rows found")

    cpu_count = _single(st.facts, "cpu_count")
    if cpu_count is not None and topo and cpu_count != len(topo):
        notes.append(f"CPU(s) says {cpu_count} but the topology lists {len(topo)} CPUs")

    if not numa_rows and any(node is not None for *_rest, node in topo):
        by_node: dict[int, list[int]] = {}
        for cpu, _core, _sock, node in topo:
            if node is not None:
                by_node.setdefault(node, []).append(cpu)
        numa_rows = [{"node": n, "cpus": format_cpu_list(c), "cpu_count": len(c)} for n, c in sorted(by_node.items())]

    models = sum(1 for key, _ in st.facts if key == "model_name")
    if models > 1:
        notes.append(f"{models} CPU types (Model name blocks): their per-type facts repeat in host_fact, in order")
    if layouts:
        notes.insert(0, "layout: " + " + ".join(layouts))

    warnings = list(st.warnings)
    if st.dropped:
        warnings.append(ParseWarning(None, f"{st.dropped} more warnings not listed (capped at {MAX_WARNINGS})"))
    topology = conform(
        TOPOLOGY,
        pl.DataFrame(
            topo, schema={"cpu": pl.Int32, "core": pl.Int32, "socket": pl.Int32, "node": pl.Int32}, orient="row"
        ).with_columns(pl.lit(ctx.source).alias("source")),
    )
    numa = conform(
        NUMA_NODE,
        pl.DataFrame(numa_rows, schema={"node": pl.Int32, "cpus": pl.String, "cpu_count": pl.Int32}).with_columns(
            pl.lit(ctx.source).alias("source")
        ),
    )
    facts = host_fact_frame([(str(k), str(v)) for k, v in st.facts], ctx.source)
    return ParseResult(
        tables={TOPOLOGY: topology, NUMA_NODE: numa, HOST_FACT: facts},
        records=topology.height,
        warnings=warnings,
        notes=notes,
    )


def detect(head: str, name: str) -> float:
    if re.search(r"^#[ \t]*CPU,(?:Core|Socket|Node)", head, re.MULTILINE | re.IGNORECASE):
        return 0.95
    if "# The following is the parsable format" in head:
        return 0.9
    keys = len({key.strip() for key in _DETECT_KEYS.findall(head)})
    if keys >= 3:
        return 0.95
    if _EXTENDED_HEADER_RE.search(head.split("\n", 1)[0]) and re.search(r"^[ \t]*0[ \t]+\S", head, re.MULTILINE):
        return 0.85
    if keys == 2:
        return 0.7
    return 0.3 if keys == 1 and "lscpu" in name.lower() else 0.0


SPEC = ParserSpec(
    kind="lscpu",
    description="lscpu (flat, hierarchical, -p/--parse, -e): CPU topology, NUMA CPU lists, host facts",
    detect=detect,
    parse=parse,
)
