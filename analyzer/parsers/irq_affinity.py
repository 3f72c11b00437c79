"""IRQ affinity listings: ``/proc/irq/N/smp_affinity_list`` (and friends) with their values.

Raw input, any of these layouts (one member may mix them)::

    /proc/irq/24/smp_affinity_list: 0-7           path, colon, blank (the captures' layout)
    /proc/irq/24/smp_affinity_list:0-7            grep . /proc/irq/*/smp_affinity_list
    /proc/irq/24/smp_affinity:ff                  grep . /proc/irq/*/smp_affinity
    /proc/irq/24/effective_affinity_list:3
    /proc/irq/default_smp_affinity:ff
    /proc/irq/24 0-7                              for i in /proc/irq/*; do echo $i $(cat $i/smp_affinity_list); done
    /proc/irq/24: 0-7                             ... echo $i: $(cat ...) ...
    ==> /proc/irq/24/smp_affinity_list <==        head /proc/irq/*/smp_affinity_list
    0-7

Output table ``host_setting`` (one row per IRQ file)::

    category "irq_affinity", subject the IRQ number ("24"; null for default_smp_affinity),
    name     the file: "smp_affinity_list", "smp_affinity", "effective_affinity_list",
             "effective_affinity", "affinity_hint", "node", "default_smp_affinity"
    value    as printed ("0-7", "00000000,000000ff"), choices null

The ``for`` loop layout does not say which file it read: its values are taken as
``smp_affinity_list`` (the loop the README documents), or ``smp_affinity`` when the member name
says ``smp_affinity`` without ``list``; a note says so. Other files below ``/proc/irq``
(``spurious``, the handler directories) and ``cat:``/``grep:`` error lines are counted in a note.
``records`` is the number of rows.

>>> from dbdiag.parsers.base import ParseContext
>>> out = parse("/proc/irq/24/smp_affinity_list: 0-7\\n/proc/irq/25 2\\n", ParseContext(source="irq.txt"))
>>> out.tables["host_setting"].select("subject", "name", "value").rows()
[('24', 'smp_affinity_list', '0-7'), ('25', 'smp_affinity_list', '2')]
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE, Row, base_name, frame
from dbdiag.parsers.kit.warning_caps import cap_skipped_lines
from dbdiag.patterns import lazy_compile

_FILES = ("smp_affinity_list", "smp_affinity", "effective_affinity_list", "effective_affinity", "affinity_hint", "node")
# values as (?:.*?[^ \t\n])?, not .*?: the same text, and linear in a run of spaces inside it
_FILE_RE = lazy_compile(r"^/proc/irq/(\d+)/([A-Za-z_]+):[ \t]*((?:.*?[^ \t\n])?)[ \t]*$")
_DEFAULT_RE = lazy_compile(r"^/proc/irq/default_smp_affinity:[ \t]*((?:.*?[^ \t\n])?)[ \t]*$")
_LOOP_RE = lazy_compile(r"^/proc/irq/(\d+)/?:?[ \t]+(\S(?:.*?[^ \t\n])?)[ \t]*$")
_HEAD_RE = lazy_compile(r"^==> /proc/irq/(\d+)/([A-Za-z_]+) <==$")
_BARE_DIR_RE = lazy_compile(r"^/proc/irq/(?:\d+|default_smp_affinity)/?[ \t]*$")
_OTHER_RE = lazy_compile(r"^(?:/proc/irq/\S+.*|(?:cat|grep): .*)$")
_DETECT_RE = lazy_compile(
    r"^(?:==> )?/proc/irq/(?:\d+(?:/[a-z_]+(?::| <==$)|/?:?[ \t]+[0-9a-fA-F,-]+[ \t]*$)|default_smp_affinity:)",
    re.MULTILINE,
)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows: list[Row] = []
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    loop_name = "smp_affinity" if re.search(r"smp_affinity(?!_list)", base_name(ctx.source)) else "smp_affinity_list"
    looped = ignored = 0
    headed: tuple[str, str] | None = None
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _HEAD_RE.match(line)
        if m:
            headed = (m.group(1), m.group(2))
            continue
        if headed is not None:
            irq, name = headed
            headed = None
            if name in _FILES:
                rows.append(("irq_affinity", irq, name, line.strip(), None))
            else:
                ignored += 1
            continue
        m = _FILE_RE.match(line)
        if m and m.group(2) in _FILES:
            rows.append(("irq_affinity", m.group(1), m.group(2), m.group(3), None))
            continue
        m = _DEFAULT_RE.match(line)
        if m:
            rows.append(("irq_affinity", None, "default_smp_affinity", m.group(1), None))
            continue
        m = _LOOP_RE.match(line)
        if m:
            rows.append(("irq_affinity", m.group(1), loop_name, m.group(2), None))
            looped += 1
            continue
        if _OTHER_RE.match(line) or _BARE_DIR_RE.match(line):
            ignored += 1
            continue
        warnings.append(ParseWarning(number, f"not an IRQ affinity line; skipped: {line[:60]!r}"))
    if not rows:
        raise ParseError("no /proc/irq/N/smp_affinity(_list) line found")
    if looped:
        notes.append(f"{looped} line(s) without a file name read as {loop_name}")
    if ignored:
        notes.append(f"{ignored} other /proc/irq or error line(s) ignored")
    return ParseResult(tables={TABLE: frame(rows, ctx.source)}, records=len(rows), warnings=cap_skipped_lines(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = [line for line in head.split("\n") if line.strip()]
    if not lines:
        return 0.0
    hits = len(_DETECT_RE.findall(head)) + head.count(" <==\n")  # a head-style header stands for 2 lines
    if hits and hits * 2 >= len(lines):
        return 0.95
    return 0.0


SPEC = ParserSpec(
    kind="irq-affinity",
    description="/proc/irq/N/smp_affinity(_list), effective_affinity(_list) listings",
    detect=detect,
    parse=parse,
)
