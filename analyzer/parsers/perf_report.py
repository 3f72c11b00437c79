"""``perf report --stdio`` text: flat entries per event and their call-graph branches.

Raw input (``perf report --stdio --no-children``, default sort ``comm,dso,sym``; ``-n`` adds a
``Samples`` column, ``--children`` a ``Children`` column before ``Self``; a file may hold one section
per event, each starting with its ``# Samples:`` line)::

    # Samples: 1K of event 'cycles'
    # Event count (approx.): 6716849984
    #
    # Overhead  Command          Shared Object       Symbol
    # ........  ...............  ..................  ....................
    #
        29.86%  bloom_filter_te  libc.so.6           [.] __random
                |
                |--28.27%--__random
                |          main
                |          __libc_start_call_main
                |
                 --0.73%--rand
                           main

         0.78%  bloom_filter_te  libtidesdb.so       [.] decode_varint64
                |
                ---decode_varint64
                   bloom_filter_deserialize

Also read: other sort keys (``--sort sym``, ``dso,sym``, ``pid`` printed ``26949:sysbench``), extra
columns such as ``IPC [IPC Coverage]`` (not kept), the older call-graph style (``--- name``,
``|--60.00%-- name``), ``-g folded`` (``3.67% leaf;caller;root``), ``-g flat`` and the TUI pasted as text (``+``/``-`` expanders before entries and
branches, U+2592 scrollbar characters at line ends, no ``#`` header; the layout is then inferred
from the entry lines: two percentages = Children/Self; one field before ``[.]`` = dso, two =
comm, dso). ANSI colour codes and carriage returns are removed first.

Output table ``perf_symbol`` (one row per flat entry; ``records`` is their number)::

    event          String   "cycles", "cpu-clock:pppH" from the section's ``# Samples:`` line, else null
    comm, pid      String, Int32   when a sort key (``pid`` gives both), else null
    dso, symbol    String   as printed (``[kernel.kallsyms]``, ``0x00000000000085d4``)
    kernel         Boolean  ``[k]``/``[g]`` true, ``[.]``/``[u]`` false, null when no marker
    self_pct       Float64  ``Overhead`` (flat) or ``Self`` (with ``--children``)
    children_pct   Float64  ``Children`` or null
    samples        Int64    ``Samples`` column (``-n``) or null
    event_samples  Int64    the section's sample count: ``1K`` is 1000, ``2M`` 2000000 (perf rounds
                            down to the unit when it prints one)
    source         String   member path

Output table ``perf_callchain`` (one row per printed chain, i.e. per leaf of each entry's graph)::

    event, entry_symbol  String
    chain      String   frames callers first, joined by ";"
    share_pct  Float64  the percentage printed on the chain's last branch; a chain printed with
                        ``---`` and no branch carries the entry's percentage (Children if shown)
    source     String

Frames are kept as perf printed them; only their order is normalised to callers first. perf
prints callee-first graphs (``--no-children``'s default, ``-g callee``) and caller-first graphs
(``--children``'s default, ``-g caller``) with no marker in the text, so the order is read from
the graphs: a chain that ends at its entry's symbol means caller order; one that starts at the
entry of a pure-self entry means callee order; otherwise perf's default for the layout applies
(noted). With ``--children`` a caller-order chain under an entry may continue past the entry into
its callees (the entry's children), as perf prints it; ``--sort sym`` graphs omit the entry frame.
In the TUI, a collapsed ``+`` branch ends its chain at that frame.

Lines that are neither perf rows nor perf comments (free text around a paste, tables of other
tools) are skipped with a warning each (the first 50, then one count), never silently, because
they may be rows in a layout this parser does not know.

The text is read in one pass over its lines in Python (a call graph is a tree drawn with
indentation: each line's meaning depends on the lines above it). perf report output is an
aggregate, a few MB at most for a busy host (one line per distinct comm/dso/symbol, chains above
perf's 0.5% threshold); it is read at about 2 MB/s. Raw samples (perf script) are another parser.

>>> from dbdiag.parsers.base import ParseContext
>>> text = (
...     "# Samples: 2K of event 'cycles'\\n"
...     "# Overhead  Command  Symbol\\n"
...     "# ........  .......  ..............\\n"
...     "    60.00%  app      [.] foo\\n"
...     "            |\\n"
...     "            ---foo\\n"
...     "               main\\n")
>>> result = parse(text, ParseContext(source="perf-report.txt"))
>>> result.tables["perf_symbol"].select("symbol", "self_pct", "event_samples").rows()
[('foo', 60.0, 2000)]
>>> result.tables["perf_callchain"].select("chain", "share_pct").rows()
[('main;foo', 60.0)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PERF_CALLCHAIN, PERF_SYMBOL, SCHEMAS, conform

MAX_LINE_CHARS = 65536
MAX_LINE_WARNINGS = 50
_BRANCH_INDENT = 11  # "|" plus 10 spaces per call-graph level (ui/stdio/hist.c)
_PENDING = -100  # column of a -g flat chain until its first frame is read
_SLACK = 2  # columns a frame may sit off its level (perf 3.x, narrow percentages); levels are >= 3 apart

_ANSI_RE = lazy_compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")
_SAMPLES_RE = lazy_compile(r"^#\s*Samples:\s*(\d+)\s*([KMGT]?)\s+of event\s+'(.*)'\s*$")
_EVENT_COUNT_RE = lazy_compile(r"^#\s*Event count \(approx\.\):\s*(\d+)")
_DOTS_RE = lazy_compile(r"^#(?:\s+\.+)+\s*$")
_ENTRY_START_RE = lazy_compile(r"^[+-]?\s*\d+(?:\.\d+)?%")
_ENTRY_TOKENS_RE = lazy_compile(
    r"^(?P<sign>[+-])?\s*(?P<p1>\d+(?:\.\d+)?)%\s+(?:(?P<p2>\d+(?:\.\d+)?)%\s+)?(?P<rest>\S.*)$"
)
# values as (?:.*?\S)?, not .*?: the same text, and linear in a run of spaces inside it
_SYMBOL_RE = lazy_compile(r"^\[(?P<kind>[.kgHuA])\] (?P<sym>(?:.*?\S)?)\s*$")
_SYMBOL_SEARCH_RE = lazy_compile(r"\[(?P<kind>[.kgHuA])\] (?P<sym>(?:.*?\S)?)\s*$")
_PCT_RE = lazy_compile(r"^\d+(?:\.\d+)?%$")
_GRAPH_RE = lazy_compile(r"^(?P<lead>[ |]*)(?P<marker>---\s?|--(?P<pct>\d+(?:\.\d+)?)%--\s?)?(?P<name>\S.*)$")
_FLAT_PCT_RE = lazy_compile(r"^\s+(?P<pct>\d+(?:\.\d+)?)%$")
_TUI_BRANCH_RE = lazy_compile(r"^(?P<lead>\s*)(?P<sign>[+-]\s+)?(?P<pct>\d+(?:\.\d+)?)%\s(?P<name>\S.*)$")
_PID_FIRST_RE = lazy_compile(r"^\s*(\d+):((?:.*?\S)?)\s*$")
_PID_LAST_RE = lazy_compile(r"^(.*?):\s*(\d+)\s*$")
_UNIT = {"": 1, "K": 1_000, "M": 1_000_000, "G": 1_000_000_000, "T": 1_000_000_000_000}
_COLUMN_KEYS = {
    "overhead": "self",
    "self": "self",
    "children": "children",
    "samples": "samples",
    "command": "comm",
    "pid:command": "pid",
    "command: pid": "pid",
    "shared object": "dso",
    "symbol": "sym",
}


@dataclass
class _Node:
    col: int
    frames: list[str]
    pct: float | None
    collapsed: bool = False
    has_children: bool = False


@dataclass
class _Section:
    event: str | None
    event_samples: int | None
    columns: list[tuple[str, int, int]] | None = None  # (key, start, end) from the dots line
    children: bool | None = None


@dataclass
class _Entry:
    section: int
    symbol: str | None
    self_pct: float
    children_pct: float | None
    chains: list[tuple[list[str], float | None, bool]] = field(default_factory=list)  # frames, pct, complete
    root: _Node | None = None
    stack: list[_Node] = field(default_factory=list)
    tui: bool = False


@dataclass
class ReportReader:
    """Reads perf report/top text line by line into entries and call-graph chains.

    ``ignore`` holds compiled patterns of lines to skip silently (perf top's key menu, script(1) banners).
    """

    ignore: tuple[re.Pattern[str], ...] = ()
    sections: list[_Section] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    entries: list[_Entry] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped_lines: int = 0
    header_seen: bool = False
    _pending_header: str | None = None
    _printed_samples: str = ""
    _current: _Entry | None = None

    def section(self) -> _Section:
        if not self.sections:
            self.sections.append(_Section(event=None, event_samples=None))
        return self.sections[-1]

    def start_section(self, event: str | None, event_samples: int | None) -> None:
        self.close_entry()
        self.sections.append(_Section(event=event, event_samples=event_samples))

    def skip(self, number: int, line: str, reason: str) -> None:
        self.skipped_lines += 1
        if self.skipped_lines <= MAX_LINE_WARNINGS:
            self.warnings.append(ParseWarning(number, f"{reason}: {line.strip()[:60]!r}"))

    def feed(self, lines: list[str], first_line: int = 1) -> None:
        for offset, raw in enumerate(lines):
            self.feed_line(first_line + offset, raw)

    def feed_line(self, number: int, raw: str) -> None:
        if len(raw) > MAX_LINE_CHARS:
            self.close_entry()
            self.skip(number, raw[:60], f"line of {len(raw)} characters skipped")
            return
        line = raw.rstrip()
        if not line:
            self.close_entry()
            return
        if line.startswith("#"):
            self._comment(line)
            return
        entry = self._entry_row(line)
        if entry is not None:
            self.close_entry()
            self._current = entry
            return
        if self._current is not None and self._graph_line(number, line):
            return
        if any(pattern.search(line) for pattern in self.ignore):
            return
        self.close_entry()
        self.skip(number, line, "not a perf report row")

    def _comment(self, line: str) -> None:
        self.close_entry()
        match = _SAMPLES_RE.match(line)
        if match:
            count = int(match.group(1)) * _UNIT[match.group(2)]
            self.start_section(match.group(3), count)
            self._printed_samples = match.group(1) + match.group(2)
            self.header_seen = True
            return
        match = _EVENT_COUNT_RE.match(line)
        if match and self.sections:
            section = self.sections[-1]
            self.notes.append(f"event {section.event!r}: {self._printed_samples} samples, event count {match.group(1)}")
            return
        if _DOTS_RE.match(line) and self._pending_header is not None:
            self._columns(self._pending_header, line)
            return
        self._pending_header = line

    def _columns(self, header: str, dots: str) -> None:
        spans = [(m.start(), m.end()) for m in re.finditer(r"\.+", dots)]
        columns: list[tuple[str, int, int]] = []
        dropped: list[str] = []
        seen: set[str] = set()
        for index, (start, _end) in enumerate(spans):
            stop = spans[index + 1][0] if index + 1 < len(spans) else len(header) + 1
            name = re.sub(r"\s+", " ", header[start:stop].strip())
            key = _COLUMN_KEYS.get(name.lower())
            if key is None or key in seen:
                dropped.append(name)
                key = "other"
            seen.add(key)
            columns.append((key, start, spans[index + 1][0] if index + 1 < len(spans) else -1))
        section = self.section()
        section.columns = columns
        section.children = "children" in seen
        self.header_seen = True
        if dropped:
            note = f"columns not kept: {', '.join(dropped)}"
            if note not in self.notes:
                self.notes.append(note)

    def _entry_row(self, line: str) -> _Entry | None:
        if not _ENTRY_START_RE.match(line.lstrip()):
            return None
        section = self.section()
        values = self._fixed_width(line, section.columns) if section.columns else None
        if values is None:
            values = self._tokens(line, section)
        if values is None:
            return None
        symbol = values.get("sym")
        kernel = None
        if symbol is not None:
            match = _SYMBOL_RE.match(symbol)
            if match is None:
                return None
            kernel = match.group("kind") in "kg"
            symbol = match.group("sym")
        comm, pid = values.get("comm"), None
        if values.get("pid"):
            pid, pid_comm = _split_pid(values["pid"])
            comm = comm or pid_comm
        children_pct = _pct(values.get("children"))
        self_pct = _pct(values.get("self"))
        samples = values.get("samples")
        self.rows.append(
            {
                "event": section.event,
                "comm": comm or None,
                "pid": pid,
                "dso": values.get("dso") or None,
                "symbol": symbol,
                "kernel": kernel,
                "self_pct": self_pct,
                "children_pct": children_pct,
                "samples": int(samples) if samples else None,
                "event_samples": section.event_samples,
            }
        )
        entry = _Entry(len(self.sections) - 1, symbol, self_pct or 0.0, children_pct, tui=values.get("tui", False))
        self.entries.append(entry)
        return entry

    @staticmethod
    def _fixed_width(line: str, columns: list[tuple[str, int, int]]) -> dict | None:
        values: dict = {}
        for key, start, end in columns:
            cell = (line[start:end] if end >= 0 else line[start:]).strip()
            if key in ("self", "children"):
                if not _PCT_RE.match(cell):
                    return None
            elif key == "samples":
                if not cell.isdigit():
                    return None
            elif key == "sym" and not _SYMBOL_RE.match(cell):
                return None
            if key != "other":
                values[key] = cell
        return values

    @staticmethod
    def _tokens(line: str, section: _Section) -> dict | None:
        """An entry without a usable ``#`` header (TUI paste, perf top): fields split on 2+ spaces."""
        match = _ENTRY_TOKENS_RE.match(line)
        if match is None:
            return None
        rest = match.group("rest")
        symbol = _SYMBOL_SEARCH_RE.search(rest)
        if symbol is None:
            return None
        if match.group("p2") is not None:
            values = {"children": match.group("p1") + "%", "self": match.group("p2") + "%"}
        else:
            values = {"self": match.group("p1") + "%"}
        before = [f for f in re.split(r"\s{2,}", rest[: symbol.start()].strip()) if f]
        if before and before[0].isdigit() and len(before) > 1:
            values["samples"] = before.pop(0)
        if len(before) == 1:
            values["dso"] = before[0]
        elif len(before) == 2:
            values["comm"], values["dso"] = before
        elif len(before) > 2:
            return None
        values["sym"] = rest[symbol.start() :].rstrip()
        values["tui"] = match.group("sign") is not None
        if section.children is None:
            section.children = "children" in values
        return values

    def _graph_line(self, number: int, line: str) -> bool:
        entry = self._current
        assert entry is not None
        top_pct = entry.children_pct if entry.children_pct is not None else entry.self_pct
        flat = _FLAT_PCT_RE.match(line)
        if flat is not None:  # -g flat: a percentage line, then the chain's frames one per line
            if entry.root is None:
                entry.root = _Node(-1, [], top_pct)
                entry.stack = [entry.root]
            self._pop(entry, lambda node: True)
            entry.root.has_children = True
            entry.stack.append(_Node(_PENDING, [], float(flat.group("pct"))))
            return True
        tui = _TUI_BRANCH_RE.match(line)
        if tui is not None and tui.start("pct") == 0:  # -g folded: "3.67% leaf;caller;root"
            entry.chains.append((tui.group("name").strip().split(";"), float(tui.group("pct")), True))
            return True
        if tui is not None and "|" not in line and "--" not in line[: tui.start("pct")]:
            col = tui.start("pct")
            if entry.root is None:
                entry.root = _Node(-1, [], top_pct)
                entry.stack = [entry.root]
            self._pop(entry, lambda node: node.col >= col)
            parent = entry.stack[-1]
            parent.has_children = True
            collapsed = parent.collapsed or (tui.group("sign") or "").startswith("+")
            frames = parent.frames + [tui.group("name").strip()]
            entry.stack.append(_Node(col, frames, float(tui.group("pct")), collapsed))
            return True
        stripped = line.strip()
        if set(stripped) <= {"|", " "}:
            if entry.root is None:
                entry.root = _Node(line.index("|"), [], top_pct)
                entry.stack = [entry.root]
            return True
        match = _GRAPH_RE.match(line)
        if match is None:
            return False
        lead, marker, name = match.group("lead"), match.group("marker"), match.group("name").strip()
        if marker is None:
            col = len(lead)
            if entry.root is None:
                return False
            self._pop(entry, lambda node: node.col > col + _SLACK)
            top = entry.stack[-1]
            if top.col == _PENDING:
                top.col = col
            if top is entry.root or abs(top.col - col) > _SLACK:
                self.skip(number, line, "call-graph frame at an unexpected indentation")
                return True
            top.frames.append(name)
            return True
        if marker.startswith("---"):
            parent_col, col = len(lead), len(lead) + len(marker)
        else:
            # perf indents a branch's frames 11 columns right of the "|" it hangs from,
            # whatever the width of the percentage printed on the branch
            parent_col = len(lead) - 1
            col = parent_col + _BRANCH_INDENT
        if entry.root is None:
            entry.root = _Node(parent_col, [], top_pct)
            entry.stack = [entry.root]
        # modern graphs put a branch under its parent's frame column, perf 3.x one column left of it
        self._pop(entry, lambda node: node.col > parent_col + _SLACK)
        parent = entry.stack[-1]
        parent.has_children = True
        pct = float(match.group("pct")) if match.group("pct") else parent.pct
        entry.stack.append(_Node(col, parent.frames + [name], pct))
        return True

    @staticmethod
    def _pop(entry: _Entry, done) -> None:
        while len(entry.stack) > 1 and done(entry.stack[-1]):
            node = entry.stack.pop()
            if not node.has_children and node.frames:
                entry.chains.append((node.frames, node.pct, not node.collapsed))

    def in_graph(self) -> bool:
        return self._current is not None and len(self._current.stack) > 1

    def close_entry(self) -> None:
        entry = self._current
        if entry is None:
            return
        self._pop(entry, lambda node: True)
        self._current = None

    def callchains(self) -> tuple[list[dict], list[str]]:
        """Chains of every entry, callers first, with the order decided per section."""
        self.close_entry()
        by_section: dict[int, list[_Entry]] = {}
        for entry in self.entries:
            by_section.setdefault(entry.section, []).append(entry)
        caller = [self._caller_order(by_section.get(i, []), section) for i, section in enumerate(self.sections)]
        rows: list[dict] = []
        for entry in self.entries:
            for frames, pct, _complete in entry.chains:
                ordered = frames if caller[entry.section][0] else frames[::-1]
                rows.append(
                    {
                        "event": self.sections[entry.section].event,
                        "entry_symbol": entry.symbol,
                        "chain": ";".join(ordered),
                        "share_pct": pct,
                    }
                )
        notes = [why for _, why in caller if why]
        return rows, notes

    @staticmethod
    def _caller_order(entries: list[_Entry], section: _Section) -> tuple[bool, str | None]:
        caller_votes = callee_votes = 0
        has_chains = False
        for entry in entries:
            pure_self = entry.children_pct is None or (entry.self_pct > 0 and entry.children_pct == entry.self_pct)
            for frames, _pct, complete in entry.chains:
                has_chains = True
                if not complete or len(frames) < 2 or frames[0] == frames[-1]:
                    continue
                if frames[-1] == entry.symbol:
                    caller_votes += 1
                elif frames[0] == entry.symbol and pure_self:
                    callee_votes += 1
        if caller_votes or callee_votes:
            return caller_votes >= callee_votes, None
        default = bool(section.children)
        if not has_chains:
            return default, None
        label = section.event or "the report"
        order = "caller (perf's default with --children)" if default else "callee (perf's default without --children)"
        return default, f"call-graph order of {label} not evident from the chains; read as {order}"


def _pct(cell: str | None) -> float | None:
    return float(cell.rstrip("%")) if cell else None


def _split_pid(cell: str) -> tuple[int | None, str | None]:
    match = _PID_FIRST_RE.match(cell)
    if match:
        return int(match.group(1)), match.group(2) or None
    match = _PID_LAST_RE.match(cell)
    if match:
        return int(match.group(2)), match.group(1).strip() or None
    return None, cell


def clean_lines(text: str) -> list[str]:
    """Lines without ANSI escapes, carriage returns and the TUI's U+2592 scrollbar column."""
    text = _ANSI_RE.sub("", text)
    return [line.rstrip("\r").rstrip().rstrip("\u2592").rstrip("\r") for line in text.split("\n")]


def finish(reader: ReportReader, ctx: ParseContext, cut_short: bool) -> ParseResult:
    """Tables, warnings and notes from a reader that has seen every line.

    ``cut_short``: the input's last line has no newline (the file was cut while being written).
    """
    if cut_short and reader.in_graph():
        reason = "input ends inside a call graph (truncated?): its last chain may be incomplete"
        reader.warnings.append(ParseWarning(None, reason))
    chains, order_notes = reader.callchains()
    if reader.skipped_lines > MAX_LINE_WARNINGS:
        reader.warnings.append(ParseWarning(None, f"{reader.skipped_lines - MAX_LINE_WARNINGS} more lines skipped"))
    symbols = _frame(PERF_SYMBOL, reader.rows, ctx.source)
    callchain = _frame(PERF_CALLCHAIN, chains, ctx.source)
    return ParseResult(
        tables={PERF_SYMBOL: symbols, PERF_CALLCHAIN: callchain},
        records=symbols.height,
        warnings=reader.warnings,
        notes=reader.notes + order_notes,
    )


def _frame(table: str, rows: list[dict], source: str) -> pl.DataFrame:
    schema = {name: dtype for name, dtype in SCHEMAS[table].items() if name != "source"}
    frame = pl.from_dicts(rows, schema=schema) if rows else pl.DataFrame(schema=schema)
    return conform(table, frame.with_columns(pl.lit(source, dtype=pl.String).alias("source")))


def parse(text: str, ctx: ParseContext) -> ParseResult:
    reader = ReportReader()
    reader.feed(clean_lines(text))
    if not reader.rows and not reader.header_seen:
        raise ParseError("no perf report entries and no '# Samples:' or column header found")
    if not reader.rows:
        reader.notes.append("perf report header without entries")
    return finish(reader, ctx, cut_short=not text.endswith("\n"))


_DETECT_ENTRY_RE = lazy_compile(
    r"^[+-]?[ \t]*\d+\.\d+%[ \t]+(?:\d+\.\d+%[ \t]+)?(?:\S.*?)?\[[.kgHuA]\] \S", re.MULTILINE
)


def detect(head: str, name: str) -> float:
    if "PerfTop:" in head:
        return 0.2
    if re.search(r"^# Samples: \d+(?:[ \t]*[KMGT])?[ \t]+of event '", head, re.MULTILINE):
        return 0.95
    if re.search(r"^# (?:Overhead|Children +Self)\b", head, re.MULTILINE) and re.search(
        r"^#(?: +\.+)+ *$", head, re.MULTILINE
    ):
        return 0.9
    entries = len(_DETECT_ENTRY_RE.findall(_ANSI_RE.sub("", head)))
    if entries >= 3:
        return 0.8 if "perf" in name.lower() or entries >= 5 else 0.7
    return 0.0


SPEC = ParserSpec(
    kind="perf-report",
    description="perf report --stdio (flat and call-graph, --children, -n, any sort keys, TUI paste)",
    detect=detect,
    parse=parse,
)
