"""``numastat`` (numactl package) in all its text forms: per-node NUMA counters and memory.

Raw input, default form (the old perl-compatible layout; counters in pages since boot)::

                               node0           node1
    numa_hit              4735090719      2770141501
    numa_miss                      0           92981
    numa_foreign               92981               0
    interleave_hit             59485           59445
    local_node            4734323881      2769543674
    other_node                766838          690808

``numastat -n`` / ``-v`` / ``-c`` (the same counters converted to MB, with a Total column)::

    Per-node numastat info (in MBs):
                              Node 0          Node 1           Total
                     --------------- --------------- ---------------
    Numa_Hit                  350.96           17.08          368.04
    Other_Node                  0.96            6.08            7.04

``numastat -m`` (``Per-node system memory usage (in MBs):``, rows MemTotal, MemFree, FilePages,
AnonHugePages, HugePages_Total ... all in MB), ``numastat -p PID|name`` for one process (or ``-v``
with several: one table per process)::

    Per-node process memory usage (in MBs) for PID 183 (python3)
                               Node 0          Node 1           Total
                      --------------- --------------- ---------------
    Huge                         0.00            0.00            0.00
    Heap                         0.00            0.45            0.45
    Stack                        0.00            0.04            0.04
    Private                      0.00          121.27          121.27
    ----------------  --------------- --------------- ---------------
    Total                        0.00          121.77          121.77

and ``numastat -p name`` matching several processes (one summary table of per-process totals)::

    Per-node process memory usage (in MBs)
    PID                        Node 0           Total
    ----------------  --------------- ---------------
    26535 (postgres)            28.82           28.82
    26536 (postgres)             6.21            6.21
    ----------------  --------------- ---------------
    Total                       35.03           35.03

Output table ``numa_counter`` (one row per snapshot, table row and node):

    snapshot  Int32     0, 1, ... : a member may hold numastat run repeatedly
    ts        Datetime  time line before the snapshot (``TS <epoch>``, ISO, ``date``), else null
    scope     String    "system" (default and -n forms), "meminfo" (-m), "process" (-p)
    pid       Int32     process tables: the pid, else null
    process   String    process tables: the command name, else null
    node      Int32     from the ``node1`` / ``Node 1`` column header
    counter   String    system: numa_hit, numa_miss, numa_foreign, interleave_hit, local_node,
                        other_node (lower case in every form); meminfo: MemTotal, Active(anon) ...
                        as printed; process: Huge, Heap, Stack, Private, or ``Total`` for the rows
                        of the several-process summary (the only per-process figure it prints)
    value     Float64
    unit      String    "pages" for the default form, "MB" for every other form (mind ``-n``)
    source    String    member path

"Total" columns and the "Total" row under a table are dropped (sum the nodes). A new snapshot
starts at a time line, or when a table of the same kind (same process) appears again. Tables
folded by numastat on a narrow terminal (a second section with more node columns and the same
row labels, after a blank line) are joined back. ``Token X not in hash table.`` lines (meminfo
fields this numastat version does not know) and ``Found no processes containing pattern`` become
notes; ``Can't read /proc/N/numa_maps`` becomes a warning.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.lines import snapshot_lines
from dbdiag.parsers.kit.snapshots import snapshot_result
from dbdiag.parsers.kit.times import parse_time_line
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import NUMA_COUNTER, UTC_TIME


_TITLE_RE = lazy_compile(
    r"^\s*Per-node (numastat info|system memory usage|process memory usage) \(in MBs\)"
    r"(?::|\s+for PID (\d+) \((.*)\))?\s*$"
)
_COMPAT_HEADER_RE = lazy_compile(r"^\s*node\d+(?:\s+node\d+)*\s*$")
_HEADER_RE = lazy_compile(r"^\s*(?:PID\s+)?(?:(?:Node\s+\d+|Total)(?:\s+|$))+$")
_HEADER_TOKEN_RE = lazy_compile(r"Node\s+(\d+)|node(\d+)|(Total)")
_DASHES_RE = lazy_compile(r"^[\s-]*-[\s-]*$")
_NUMBER = r"-?\d+(?:\.\d+)?"
_PID_LABEL_RE = lazy_compile(r"^(\d+)(?:\s+\((.*?)\)?)?$")
_TOKEN_RE = lazy_compile(r"^Token (\S+) not in hash table\.\s*$")
_NO_MATCH_RE = lazy_compile(r"^Found no processes containing pattern:?\s*((?:.*?\S)?)\s*$")  # not .*?: linear
_CANT_READ_RE = lazy_compile(r"^Can't read /proc/(\d+)/numa_maps")
_NO_DATA_RE = lazy_compile(r"^Table has no (?:non-zero )?data\.\s*$")
_VERSION_RE = lazy_compile(r"^\S*numastat version:")
_MESSAGE_HINT_RE = lazy_compile(r"^\s*(?:Token |Found no |Can't read |Table has |\S*numastat version)")
# Only lines shaped like a time are handed to parse_time_line (rows are the bulk of a long file).
_TIME_HINT_RE = lazy_compile(r"^\s*(?:TS\s|\d{9,11}(?:[.\s]|$)|\d{4}-\d{2}-\d{2}|[A-Z][a-z]{2}[ ,])")
# Out-of-range numbers are dropped with a warning here, so that derive never meets them: a 40-digit
# counter failed derive's cast to Int64 and ended the run.
MAX_COUNTER = 2**63 - 1
MAX_NODE = 4_095  # Linux builds for at most 1,024 nodes (NODES_SHIFT 10)
MAX_PID = 2**31 - 1
_SYSTEM_LABELS = {"numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"}
_PROCESS_LABELS = {"Huge", "Heap", "Stack", "Private"}


@dataclass
class _Table:
    scope: str | None  # None: a titleless "Node N" table, decided by its first row label
    unit: str
    pid: int | None = None
    process: str | None = None
    summary: bool = False  # the several-process table: rows are "PID (name)"
    compat: bool = False  # "node0" header style
    columns: list[int | None] | None = None  # node per value column, None for Total
    nodes: set[int] = field(default_factory=set)
    rows: set[tuple[str, int | None, int]] = field(default_factory=set)


@dataclass
class _State:
    ctx: ParseContext
    snapshot: int = 0
    keys: set[tuple] = field(default_factory=set)  # table kinds already seen in this snapshot
    snapshot_ts: dict[int, object] = field(default_factory=dict)
    table: _Table | None = None
    awaiting_header: bool = False
    out: dict[str, list] = field(default_factory=lambda: {k: [] for k in
                                 ("snapshot", "scope", "pid", "process", "node", "counter", "value", "unit")})
    warnings: list[ParseWarning] = field(default_factory=list)
    dropped: int = 0
    tokens: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    zone_applied: bool = False
    recognised: bool = False  # a title, header or numastat message was seen

    def warn(self, line: int | None, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(line, reason))
        else:
            self.dropped += 1

    def begin(self, key: tuple) -> None:
        """A new table of kind ``key``: a second one of the same kind means the next snapshot."""
        if key in self.keys:
            self.snapshot += 1
            self.keys = set()
        self.keys.add(key)


@lru_cache(maxsize=64)
def _row_re(ncols: int) -> re.Pattern[str]:
    """A row: its label, then exactly ``ncols`` numbers (one per header column)."""
    # the label ends on \S ((?:.*?\S)?, not .*?): the same rows, and linear in a run of spaces
    return re.compile(r"^((?:.*?\S)?)((?:\s+%s){%d})\s*$" % (_NUMBER, ncols))


def _header_columns(line: str) -> list[int | None]:
    columns: list[int | None] = []
    for node_a, node_b, _total in _HEADER_TOKEN_RE.findall(line):
        number = node_a or node_b
        columns.append(int(number) if number else None)
    return columns


def _key(table: _Table) -> tuple:
    if table.scope == "process":
        return ("process", "summary") if table.summary else ("process", table.pid, table.process)
    return (table.scope, table.unit)


def _title(state: _State, match: re.Match[str]) -> None:
    what, pid, name = match.group(1), match.group(2), match.group(3)
    if what == "numastat info":
        table = _Table(scope="system", unit="MB")
    elif what == "system memory usage":
        table = _Table(scope="meminfo", unit="MB")
    else:
        process = None if name in (None, "", "(null)") else name
        table = _Table(scope="process", unit="MB", pid=int(pid) if pid and int(pid) <= MAX_PID else None,
                       process=process, summary=pid is None)
    state.begin(_key(table))
    state.table = table
    state.awaiting_header = True


def _header(state: _State, line: str, number: int) -> None:
    compat = _COMPAT_HEADER_RE.match(line) is not None
    columns = _header_columns(line)
    nodes = {c for c in columns if c is not None}
    if len(nodes) != len([c for c in columns if c is not None]):
        state.warn(number, "header names a node twice; table skipped")
        state.table, state.awaiting_header = None, False
        return
    if any(node > MAX_NODE for node in nodes):
        state.warn(number, f"header names node {max(nodes)} (over {MAX_NODE}); table skipped")
        state.table, state.awaiting_header = None, False
        return
    table = state.table
    if state.awaiting_header and table is not None:
        table.columns, table.compat = columns, compat
        state.awaiting_header = False
        if line.lstrip().startswith("PID"):
            table.summary = True
        return
    if table is not None and table.columns is not None and table.compat == compat and not (nodes & table.nodes):
        table.columns = columns  # the next section of a table numastat folded to the screen width
        return
    if compat:
        table = _Table(scope="system", unit="pages", compat=True, columns=columns)
        state.begin(_key(table))
    else:
        summary = line.lstrip().startswith("PID")
        table = _Table(scope="process" if summary else None, unit="MB", summary=summary, columns=columns)
        if summary:
            state.begin(_key(table))
    state.table = table


def _row(state: _State, line: str, number: int) -> None:
    table = state.table
    if table is None or table.columns is None:
        state.warn(number, f"not a numastat line; skipped: {line.strip()[:60]!r}")
        return
    ncols = len(table.columns)
    match = _row_re(ncols).match(line)
    label = match.group(1).strip() if match else ""
    if match is None or not label:
        state.warn(number, f"row without {ncols} numeric column(s) under the header; skipped: {line.strip()[:60]!r}")
        return
    if label == "Total":
        return
    if table.scope is None:  # a table without its title line: the row labels say what it is
        if label.lower() in _SYSTEM_LABELS:
            table.scope = "system"
        elif label in _PROCESS_LABELS:
            table.scope = "process"
        elif _PID_LABEL_RE.match(label):
            table.scope, table.summary = "process", True
        else:
            table.scope = "meminfo"
        state.begin(_key(table))
    pid, process, counter = table.pid, table.process, label
    if table.scope == "system":
        counter = label.lower()
    elif table.summary:
        pid_match = _PID_LABEL_RE.match(label)
        if pid_match is None:
            state.warn(number, f"process row label {label[:40]!r} is not 'PID (name)'; skipped")
            return
        pid, process, counter = int(pid_match.group(1)), pid_match.group(2) or None, "Total"
        if pid > MAX_PID:
            state.warn(number, f"process id {pid_match.group(1)[:20]} over {MAX_PID}; skipped")
            return
    values = match.group(2).split()
    for node, value in zip(table.columns, values):
        if node is None:
            continue
        row_key = (counter, pid, node)
        if abs(float(value)) > MAX_COUNTER:
            state.warn(number, f"{counter} for node {node} is {value[:24]}, over {MAX_COUNTER}; dropped")
            continue
        if row_key in table.rows:
            state.warn(number, f"{counter} for node {node} given twice in one table; kept the first")
            continue
        table.rows.add(row_key)
        table.nodes.add(node)
        out = state.out
        out["snapshot"].append(state.snapshot)
        out["scope"].append(table.scope)
        out["pid"].append(pid)
        out["process"].append(process)
        out["node"].append(node)
        out["counter"].append(counter)
        out["value"].append(float(value))
        out["unit"].append(table.unit)


def _other_line(state: _State, line: str, number: int) -> bool:
    """Lines numastat prints besides tables; True when handled."""
    text = line.strip()
    m = _TOKEN_RE.match(text)
    if m:
        if m.group(1) not in state.tokens:
            state.tokens.append(m.group(1))
        return True
    m = _NO_MATCH_RE.match(text)
    if m:
        state.notes.append(f"numastat found no process matching {m.group(1)}; no process table")
        return True
    m = _CANT_READ_RE.match(text)
    if m:
        state.warn(number, f"numastat could not read /proc/{m.group(1)}/numa_maps: no memory figures for that pid")
        return True
    if _NO_DATA_RE.match(text):
        state.notes.append(f"numastat printed {text!r}")
        state.table, state.awaiting_header = None, False
        return True
    return _VERSION_RE.match(text) is not None


def _time_line(state: _State, line: str, number: int) -> bool:
    when = parse_time_line(line, state.ctx.tz)
    if when is None:
        return False
    if state.keys:
        state.snapshot += 1
        state.keys = set()
    elif state.snapshot in state.snapshot_ts:
        state.warn(number, "two time lines without a table between them; kept the later")
    state.snapshot_ts[state.snapshot] = when[0]
    state.zone_applied = state.zone_applied or when[1]
    state.table, state.awaiting_header = None, False
    return True


def parse(text: str, ctx: ParseContext) -> ParseResult:
    state = _State(ctx=ctx)
    for number, line in snapshot_lines(text, state.warn):
        title = _TITLE_RE.match(line)
        if title:
            state.recognised = True
            _title(state, title)
        elif _COMPAT_HEADER_RE.match(line) or _HEADER_RE.match(line):
            state.recognised = True
            _header(state, line, number)
        elif _DASHES_RE.match(line):
            if state.table is None:
                state.warn(number, "rule line outside a table; skipped")
        elif _MESSAGE_HINT_RE.match(line) and _other_line(state, line, number):
            state.recognised = True
        elif _TIME_HINT_RE.match(line) and _time_line(state, line, number):
            continue
        else:
            _row(state, line, number)
    out = state.out
    if not state.recognised:
        raise ParseError("no numastat table (node0 header or 'Per-node ... (in MBs)' title) found")
    if not out["snapshot"]:
        state.warn(None, "numastat output without any table row")
    frame = pl.DataFrame(
        {**out, "ts": [state.snapshot_ts.get(s) for s in out["snapshot"]]},
        schema_overrides={"snapshot": pl.Int32, "pid": pl.Int32, "process": pl.String, "node": pl.Int32,
                          "value": pl.Float64, "scope": pl.String, "counter": pl.String, "unit": pl.String,
                          "ts": UTC_TIME},
    ).with_columns(pl.lit(ctx.source, dtype=pl.String).alias("source"))
    notes = list(state.notes)
    if state.tokens:
        notes.append(f"numastat did not know {len(state.tokens)} meminfo field(s): {', '.join(state.tokens)}")
    if state.zone_applied:
        notes.append(f"snapshot times have no zone; read as {ctx.tz}")
    return snapshot_result(
        NUMA_COUNTER, frame, set(out["snapshot"]), state.snapshot_ts, state.warnings, state.dropped, notes
    )


_TITLE_DETECT_RE = lazy_compile(r"^[ \t]*Per-node (?:numastat info|system memory usage|process memory usage) \(in MBs\)",
                              re.MULTILINE)
_COMPAT_HEADER_DETECT_RE = lazy_compile(r"^[ \t]*node\d+(?:[ \t]+node\d+)*[ \t]*$", re.MULTILINE)
_COMPAT_ROW_DETECT_RE = lazy_compile(
    r"^(?:numa_hit|numa_miss|numa_foreign|interleave_hit|local_node|other_node)[ \t]{2,}\d+", re.MULTILINE
)
_MB_ROW_DETECT_RE = lazy_compile(r"^(?:Numa_Hit|Numa_Miss|Local_Node|Other_Node|Interleave_Hit)[ \t]+\d", re.MULTILINE)
_MODERN_HEADER_DETECT_RE = lazy_compile(r"^[ \t]*(?:PID[ \t]+)?Node[ \t]+\d+(?:[ \t]+Node[ \t]+\d+)*[ \t]+Total[ \t]*$",
                                      re.MULTILINE)


def detect(head: str, name: str) -> float:
    if _TITLE_DETECT_RE.search(head):
        return 0.95
    compat_rows = len(_COMPAT_ROW_DETECT_RE.findall(head))
    if _COMPAT_HEADER_DETECT_RE.search(head) and compat_rows >= 2:
        return 0.95
    if _MODERN_HEADER_DETECT_RE.search(head):
        return 0.9 if _MB_ROW_DETECT_RE.search(head) or "---" in head else 0.6
    if head.lstrip().startswith("Found no processes containing pattern"):
        return 0.8
    if compat_rows >= 3 and "numastat" in name.lower():
        return 0.6
    return 0.0


SPEC = ParserSpec(
    kind="numastat",
    description="numastat (default, -n, -m, -p, -c, -v forms): per-node NUMA counters and memory, one or many runs",
    detect=detect,
    parse=parse,
)
