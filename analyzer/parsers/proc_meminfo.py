"""``/proc/meminfo``: the kernel's memory accounting, one or many snapshots (``cat`` before and after, pt-stalk's
``<prefix>-meminfo`` with a ``TS <epoch> <date>`` line before each read).

Raw input::

    TS 1796596876.618277939 2026-12-06 22:41:16
    MemTotal:       24683772 kB
    MemFree:        22352496 kB
    MemAvailable:   22913412 kB
    SwapTotal:       2097148 kB
    SwapFree:        1822016 kB
    HugePages_Total:       0

Output table ``meminfo_count`` (one row per snapshot and field; see ``dbdiag.tables``): snapshot (the k-th
time a field appears), ts (the time line before it, zone-less ones in ``ctx.tz``), counter (the field's name),
value (kB, or a count for ``HugePages_*``), source. ``records`` is the number of snapshots. Per-node files
(``Node 0 MemTotal:``) are ``sysfs-node``'s; ``numastat -m`` is ``numastat``'s.
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseResult, ParserSpec
from dbdiag.parsers.kit.counter_lines import read_counter_lines
from dbdiag.patterns import lazy_compile
from dbdiag.tables import MEMINFO_COUNT

_COUNTER_PATTERN = r"^([A-Za-z][A-Za-z0-9_()]*):\s+(\d+)(?: kB)?\r?$"
_DETECT_RE = lazy_compile(r"^MemTotal:\s+\d+ kB\r?$", re.MULTILINE)
_OTHER_RE = lazy_compile(r"^(?:MemFree|MemAvailable|Buffers|Cached|SwapTotal):\s+\d+ kB\r?$", re.MULTILINE)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return read_counter_lines(text, ctx, MEMINFO_COUNT, "/proc/meminfo", _COUNTER_PATTERN)


def detect(head: str, name: str) -> float:
    if _DETECT_RE.search(head) is None:
        return 0.0
    return 0.95 if len(_OTHER_RE.findall(head)) >= 2 else 0.6


SPEC = ParserSpec(
    kind="proc-meminfo",
    description="/proc/meminfo: memory, cache, swap and huge pages in kB (one or many snapshots)",
    detect=detect,
    parse=parse,
)
