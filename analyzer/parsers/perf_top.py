"""``perf top --stdio`` text: the last complete screen of a run, or one pasted screen.

Raw input (``perf top --stdio -d 2`` writes a screen every 2 s, each starting with a clear-screen
escape and the ``PerfTop:`` line; recorded through script(1) the lines end in ``\\r`` and the
percentages are coloured)::

    ESC[HESC[2J
       PerfTop:   11510 irqs/sec  kernel:15.5%  exact:  0.0% lost: 0/0 drop: 7032/7032 [4000Hz cpu-clock:pppH],  (all, 2 CPUs)
    -------------------------------------------------------------------------------

      ESC[32m   2.76%ESC[m  libpython3.11.so.1.0   [.] _PyEval_EvalFrameDefault
      ESC[32m   1.88%ESC[m  libc.so.6              [.] _int_free

Entry lines are those of ``perf report`` without a column header (one field before ``[.]`` is the
dso, two are comm and dso as with ``--sort comm,dso,sym``; ``-g`` adds Children/Self and call
graphs, read as in ``perf_report``). Symbols are cut at the terminal width, as perf printed them.

Output tables ``perf_symbol`` and ``perf_callchain`` as in ``dbdiag.parsers.perf_report``, from
the kept screen only: ``event`` is the event in the ``[4000Hz cpu-clock:pppH]`` bracket,
``event_samples`` is null (perf top prints a rate, not a count). ``records`` is the number of
entries of the kept screen.

The kept screen is the last one with entries, unless it is the last screen of the input and has
fewer entries than the screen before it (perf was stopped while writing it): then the one before.
Notes give the number of screens seen, which one was kept and its ``irqs/sec`` and ``kernel%``.
perf top's key menu and script(1)'s ``Script started/done`` banners are skipped silently.

>>> from dbdiag.parsers.base import ParseContext
>>> screen = (
...     "   PerfTop:    9896 irqs/sec  kernel:12.1%  exact:  0.0% lost: 0/0 drop: 0/0 [4000Hz cycles],  (all, 2 CPUs)\\n"
...     "----------------------------------------------\\n"
...     "\\n"
...     "    22.16%  swapper  [kernel]              [k] pv_native_safe_halt\\n"
...     "     4.43%  python3  libpython3.11.so.1.0  [.] _PyEval_EvalFrameDefault\\n")
>>> result = parse(screen, ParseContext(source="top.txt"))
>>> result.tables["perf_symbol"].select("event", "comm", "symbol", "kernel", "self_pct").rows()
[('cycles', 'swapper', 'pv_native_safe_halt', True, 22.16), ('cycles', 'python3', '_PyEval_EvalFrameDefault', False, 4.43)]
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.perf_report import ReportReader, clean_lines, finish
from dbdiag.patterns import lazy_compile

_HEADER_RE = lazy_compile(r"^\s*PerfTop:\s*(?P<irqs>\d+)\s+irqs/sec\s+kernel:\s*(?P<kernel>[\d.]+)%")
# no "[" inside the brackets: a run of "[" would otherwise be rescanned from each one
_EVENT_RE = lazy_compile(r"\[(?:[^\[\]\s]*\s+)?(?P<event>[^\[\]\s]+)\]")
_ENTRY_RE = lazy_compile(r"^[+-]?\s*\d+(?:\.\d+)?%\s+(?:\d+(?:\.\d+)?%\s+)?\S.*\[[.kgHuA]\] ")
_IGNORE = (
    lazy_compile(r"^-{10,}$"),
    lazy_compile(r"^Script (?:started|done) on "),
    lazy_compile(r"^Mapped keys:"),
    lazy_compile(r"^\t?\[\w+\]\s+\S"),
    lazy_compile(r"^\s*\[\w+\]\s{2,}\S"),
    lazy_compile(r"Enter selection, or unmapped key to continue"),
)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    lines = clean_lines(text)
    starts = [i for i, line in enumerate(lines) if _HEADER_RE.match(line)]
    if not starts:
        if not any(_ENTRY_RE.match(line.lstrip()) for line in lines):
            raise ParseError("no 'PerfTop:' screen header and no perf top entry lines found")
        starts = [0]
    bounds = list(zip(starts, starts[1:] + [len(lines)]))
    counts = [sum(1 for line in lines[a:b] if _ENTRY_RE.match(line.lstrip())) for a, b in bounds]
    with_entries = [i for i, count in enumerate(counts) if count]
    notes = [f"{len(bounds)} perf top screen(s) seen"]
    if not with_entries:
        kept = len(bounds) - 1
        notes.append("no screen has entries")
    else:
        kept = with_entries[-1]
        if kept == len(bounds) - 1 and len(with_entries) > 1 and counts[kept] < counts[with_entries[-2]]:
            notes.append(
                f"last screen has {counts[kept]} entries against {counts[with_entries[-2]]} before it "
                "(cut off when perf stopped): kept the one before"
            )
            kept = with_entries[-2]
    start, stop = bounds[kept]
    header = _HEADER_RE.match(lines[start])
    reader = ReportReader(ignore=_IGNORE)
    if header is not None:
        event = _EVENT_RE.search(lines[start], header.end())
        reader.start_section(event.group("event") if event else None, None)
        notes.append(
            f"kept screen {kept + 1} (line {start + 1}): {header.group('irqs')} irqs/sec, "
            f"kernel {header.group('kernel')}%"
        )
        start += 1
    reader.feed(lines[start:stop], first_line=start + 1)
    result = finish(reader, ctx, cut_short=stop == len(lines) and not text.endswith("\n"))
    result.notes = notes + result.notes
    return result


def detect(head: str, name: str) -> float:
    if re.search(r"PerfTop:\s*\d+\s+irqs/sec", head):
        return 0.95
    return 0.0


SPEC = ParserSpec(
    kind="perf-top",
    description="perf top --stdio: the last complete screen (entries and -g call graphs)",
    detect=detect,
    parse=parse,
)
