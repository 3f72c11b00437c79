"""sysfs NUMA node files: ``/sys/devices/system/node/nodeN/numastat`` and ``nodeN/meminfo``.

Raw input, ``nodeN/numastat`` (pages since boot; the node number is NOT in the file)::

    numa_hit 193460335812
    numa_miss 12624528
    numa_foreign 59858623300
    interleave_hit 57146
    local_node 193454780853
    other_node 18179487

``nodeN/meminfo`` (the node is on every line)::

    Node 0 MemTotal:       134182340 kB
    Node 0 AnonHugePages:    147456 kB
    Node 0 HugePages_Total:     0

and listings of several files: ``grep . /sys/devices/system/node/node*/numastat``
(``/sys/devices/system/node/node0/numastat:numa_hit 123``), ``head node*/numastat``
(``==> /sys/devices/system/node/node1/numastat <==`` before each file) and plain
``cat /sys/devices/system/node/node*/numastat`` (blocks one after the other).

Output table ``numa_counter`` (one row per snapshot, node and counter):

    snapshot  Int32     0, 1, ... within the member (time lines, or a counter met again)
    ts        Datetime  time line (``TS <epoch>``, ISO, ``date``) before the snapshot, else null
    scope     String    "system" (numastat file, unit "pages") or "meminfo" (meminfo file)
    pid       Int32     null
    process   String    null
    node      Int32     see below; null (with a warning) when it cannot be known
    counter   String    numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node;
                        MemTotal, MemFree, FilePages, HugePages_Total ... for meminfo
    value     Float64   meminfo ``kB`` values are converted to MB (unit "MB"); HugePages_* are
                        counts of huge pages and stay so (unit "pages")
    unit      String    "pages" or "MB"
    source    String    member path

Where the node number comes from, first match wins:

1. the line itself (meminfo ``Node 1 ...``; ``.../node1/numastat:numa_hit 5`` from grep);
2. the last ``==> .../node1/numastat <==`` header (head, tail);
3. the member path: digits right after ``node`` (``node1/numastat``, ``node1-numastat``,
   ``sys_node1_numastat``). A number after ``numastat`` (``node-numastat.0``) is NOT a node:
   in the real captures ``node-numastat.0`` and ``.1`` are ``cat node*/numastat`` taken before and
   after the load (each holds both nodes; ``.0`` matches ``numastat.0`` of the same capture);
4. otherwise a member holding several blocks (``numa_hit`` met again) is read as
   ``cat node*/numastat``: block k is the k-th node in the shell's glob order (node0, node1,
   node10, node11, ..., node2 ...) of nodes 0..B-1, which assumes the node numbers have no gap
   (noted in the inventory). A single block gives a null node and a warning.

When the node is known, a counter met again for the same node starts the next snapshot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.numastat import MAX_COUNTER, MAX_NODE
from dbdiag.parsers.kit.lines import snapshot_lines
from dbdiag.parsers.kit.snapshots import snapshot_result
from dbdiag.parsers.kit.times import parse_time_line
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import NUMA_COUNTER, UTC_TIME

SYSTEM_COUNTERS = ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")

_PATH_NODE_RE = lazy_compile(r"node(\d+)(?=$|[/_.:-])")
_GREP_PREFIX_RE = lazy_compile(r"^(\S*?node(\d+)/(?:numastat|meminfo)):(.*)$")
_HEAD_HEADER_RE = lazy_compile(r"^==> (.*) <==\s*$")
_NUMASTAT_LINE_RE = lazy_compile(r"^\s*([a-z][a-z_]*)\s+(\d+)\s*$")
_MEMINFO_LINE_RE = lazy_compile(r"^\s*Node\s+(\d+)\s+([A-Za-z][A-Za-z0-9_()]*):\s+(\d+)(?:\s+(kB))?\s*$")


@dataclass
class _State:
    tz: str
    path_node: int | None
    snapshot: int = 0
    seen: set[tuple] = field(default_factory=set)  # (scope, node or block, counter) in this snapshot
    block: int = 0  # for numastat lines with no known node: the block index in this snapshot
    block_counters: set[str] = field(default_factory=set)
    blocks_per_snapshot: dict[int, int] = field(default_factory=dict)
    file_node: int | None = None  # from a "==> path <==" header
    snapshot_ts: dict[int, object] = field(default_factory=dict)
    rows: list[tuple] = field(default_factory=list)  # snapshot, scope, node, block, counter, value, unit
    warnings: list[ParseWarning] = field(default_factory=list)
    dropped: int = 0
    zone_applied: bool = False

    def warn(self, line: int | None, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(line, reason))
        else:
            self.dropped += 1

    def next_snapshot(self) -> None:
        self.snapshot += 1
        self.seen = set()
        self.block = 0
        self.block_counters = set()


def node_from_path(path: str) -> int | None:
    """The node number a sysfs-style path names (``node1/numastat`` -> 1), else None.

    >>> node_from_path("sys/devices/system/node/node1/numastat"), node_from_path("os/node-numastat.1")
    (1, None)
    """
    found = _PATH_NODE_RE.findall(path)
    return int(found[-1]) if found and len(found[-1]) <= 4 and int(found[-1]) <= MAX_NODE else None


def _add(state: _State, scope: str, node: int | None, counter: str, value: int, unit: str | None) -> None:
    if node is None:  # numastat lines with no node anywhere: blocks of `cat node*/numastat`
        if counter in state.block_counters:
            state.block += 1
            state.block_counters = set()
        state.block_counters.add(counter)
        state.blocks_per_snapshot[state.snapshot] = state.block + 1
        key = (scope, ("block", state.block), counter)
    else:
        key = (scope, node, counter)
        if key in state.seen:
            state.next_snapshot()
    state.seen.add(key)
    if scope == "meminfo":
        mb = unit == "kB"
        state.rows.append((state.snapshot, scope, node, None, counter, value / 1024 if mb else float(value),
                           "MB" if mb else "pages"))
    else:
        state.rows.append((state.snapshot, scope, node, None if node is not None else state.block, counter,
                           float(value), "pages"))


def _in_range(state: _State, number: int, what: str, value: str, bound: int) -> bool:
    """Whether a number fits where derive casts it (a 40-digit counter ended the run there)."""
    if len(value) <= 19 and int(value) <= bound:
        return True
    state.warn(number, f"{what} {value[:24]} over {bound}; line dropped")
    return False


def _line(state: _State, line: str, number: int, prefix_node: int | None) -> None:
    m = _MEMINFO_LINE_RE.match(line)
    if m:
        if _in_range(state, number, "node", m.group(1), MAX_NODE) and _in_range(state, number, m.group(2), m.group(3), MAX_COUNTER):
            _add(state, "meminfo", int(m.group(1)), m.group(2), int(m.group(3)), m.group(4))
        return
    m = _NUMASTAT_LINE_RE.match(line)
    if m:
        node = prefix_node if prefix_node is not None else state.file_node
        if node is None:
            node = state.path_node
        if _in_range(state, number, m.group(1), m.group(2), MAX_COUNTER):
            _add(state, "system", node, m.group(1), int(m.group(2)), None)
        return
    when = parse_time_line(line, state.tz)
    if when is not None:
        if state.rows and state.rows[-1][0] == state.snapshot:
            state.next_snapshot()
        state.snapshot_ts[state.snapshot] = when[0]
        state.zone_applied = state.zone_applied or when[1]
        return
    state.warn(number, f"not a sysfs node numastat/meminfo line; skipped: {line.strip()[:60]!r}")


def _glob_order(count: int) -> list[int]:
    """Node numbers 0..count-1 in the order a shell glob lists node0, node1, node10, node2 ..."""
    return sorted(range(count), key=lambda n: f"node{n}")


def _resolve_blocks(state: _State, notes: list[str]) -> list[tuple]:
    unknown = [r for r in state.rows if r[2] is None and r[1] == "system"]
    if not unknown:
        return state.rows
    counts = set(state.blocks_per_snapshot.values())
    if counts == {1}:
        state.warn(None, "node number unknown (not in the file nor in its path, one block): node left null; "
                         "name the file nodeN/numastat")
        return state.rows
    if len(counts) > 1:
        state.warn(None, f"snapshots hold different numbers of node blocks ({sorted(counts)}); "
                         "node numbers follow each snapshot's block order")
    most = max(counts)
    notes.append(f"node numbers taken from block order (cat node*/numastat in glob order of nodes 0-{most - 1}): "
                 "the file does not name them")
    resolved = []
    for row in state.rows:
        if row[2] is None and row[1] == "system":
            order = _glob_order(state.blocks_per_snapshot[row[0]])
            row = (row[0], row[1], order[row[3]], row[3], row[4], row[5], row[6])
        resolved.append(row)
    return resolved


def parse(text: str, ctx: ParseContext) -> ParseResult:
    state = _State(tz=ctx.tz, path_node=node_from_path(ctx.source))
    for number, line in snapshot_lines(text, state.warn):
        header = _HEAD_HEADER_RE.match(line) if line.startswith("==>") else None
        if header:
            state.file_node = node_from_path(header.group(1))
            if state.file_node is None:
                state.warn(number, f"file {header.group(1)[:60]!r} names no node; its lines get the path's node")
            continue
        prefixed = _GREP_PREFIX_RE.match(line) if "/" in line else None
        if prefixed:
            if _in_range(state, number, "node", prefixed.group(2), MAX_NODE):
                _line(state, prefixed.group(3), number, int(prefixed.group(2)))
            continue
        _line(state, line, number, None)
    if not state.rows:
        raise ParseError("no sysfs node numastat ('numa_hit N') or meminfo ('Node N MemTotal: ...') lines found")
    notes: list[str] = []
    rows = _resolve_blocks(state, notes)
    known = [r for r in rows if r[1] == "system"]
    odd = sorted({r[4] for r in known} - set(SYSTEM_COUNTERS))
    if odd:
        notes.append(f"counters beyond the usual six: {', '.join(odd[:10])}")
    if state.zone_applied:
        notes.append(f"snapshot times have no zone; read as {ctx.tz}")
    frame = pl.DataFrame(
        rows,
        schema={"snapshot": pl.Int32, "scope": pl.String, "node": pl.Int32, "__block": pl.Int32,
                "counter": pl.String, "value": pl.Float64, "unit": pl.String},
        orient="row",
    ).with_columns(
        pl.Series("ts", [state.snapshot_ts.get(r[0]) for r in rows], dtype=UTC_TIME),
        pl.lit(ctx.source, dtype=pl.String).alias("source"),
    )
    return snapshot_result(
        NUMA_COUNTER, frame, {r[0] for r in rows}, state.snapshot_ts, state.warnings, state.dropped, notes
    )


_SYSFS_LINE_DETECT_RE = lazy_compile(r"^(?:numa_hit|numa_miss|numa_foreign|interleave_hit|local_node|other_node) \d+$",
                                   re.MULTILINE)
_SYSFS_ONLY_DETECT_RE = lazy_compile(r"^(?:interleave_hit|local_node|other_node) \d+$", re.MULTILINE)
_GREP_DETECT_RE = lazy_compile(r"node\d+/numastat:(?:numa_hit|local_node|other_node) \d+|"
                             r"node\d+/meminfo:Node \d+ \w+:|^==> \S*node\d+/(?:numastat|meminfo) <==", re.MULTILINE)
_MEMINFO_DETECT_RE = lazy_compile(r"^Node \d+ (?:MemTotal|MemFree|MemUsed|Active|FilePages|AnonPages):\s+\d+ kB$",
                                re.MULTILINE)


def detect(head: str, name: str) -> float:
    if _GREP_DETECT_RE.search(head):
        return 0.95
    if len(_MEMINFO_DETECT_RE.findall(head)) >= 2:
        return 0.95
    lines = len(_SYSFS_LINE_DETECT_RE.findall(head))
    if lines >= 3 and _SYSFS_ONLY_DETECT_RE.search(head):
        return 0.9
    if lines >= 1 and _SYSFS_ONLY_DETECT_RE.search(head):
        return 0.6 if "numastat" in name.lower() else 0.4
    return 0.0


SPEC = ParserSpec(
    kind="sysfs-node",
    description="/sys/devices/system/node/nodeN/numastat and nodeN/meminfo (single files, cat/grep/head listings)",
    detect=detect,
    parse=parse,
)
