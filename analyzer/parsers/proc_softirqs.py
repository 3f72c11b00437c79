"""``/proc/softirqs``: cumulative softirq counts per type and CPU, one or many snapshots.

Raw input (a member may hold several snapshots, each starting with the header line; a time
line such as ``TS 1700000000.123``, ``2024-05-01T10:00:00Z`` or ``date`` output may precede one)::

                        CPU0       CPU1       CPU2       CPU3
              HI:          0          0          0          0
           TIMER:        638       1356        973        738
          NET_TX:          0          0          0          0
          NET_RX:          2          0      17693       8868
           BLOCK:          0          0          0          0
        IRQ_POLL:          0          0          0          0
         TASKLET:          1          0          0          1
           SCHED:       3650       2657       4002       2528
         HRTIMER:          0          0          0          0
             RCU:       3087       2468       1381        964

Output table ``softirq_count`` (one row per snapshot, softirq and CPU):

    snapshot  Int32     0, 1, ... in the order the header lines appear in the member
    ts        Datetime  time line written before the snapshot, else null
    cpu       Int32     CPU number from the header column (``CPU0 CPU2``: offline CPUs absent)
    softirq   String    HI, TIMER, NET_TX, NET_RX, BLOCK, BLOCK_IOPOLL, IRQ_POLL, TASKLET, SCHED, HRTIMER, RCU
    count     Int64     cumulative count since boot
    source    String    member path

``records`` is the number of snapshots. A row with fewer counts than CPU columns, or with
text after its counts, keeps the leading counts and gets a warning.
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.kit.snapshots import HEADER_DETECT_RE, counter_result, long_frame, read_counter_snapshots
from dbdiag.patterns import lazy_compile
from dbdiag.tables import SOFTIRQ_COUNT

_SOFTIRQ_LABEL_RE = lazy_compile(r"^[A-Z][A-Z0-9_]{0,31}$")
_KNOWN_ROW_RE = lazy_compile(
    r"^[ \t]*(?:HI|TIMER|NET_TX|NET_RX|BLOCK|BLOCK_IOPOLL|IRQ_POLL|TASKLET|SCHED|HRTIMER|RCU):[ \t]*\d",
    re.MULTILINE,
)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows = read_counter_snapshots(text, ctx.tz, "/proc/softirqs", _SOFTIRQ_LABEL_RE, lambda _label: True)
    if not rows.snapshot_ts:
        raise ParseError("no /proc/softirqs header line (CPU0 CPU1 ...) found")
    if not rows.lengths:
        raise ParseError("/proc/softirqs header found but no softirq rows")
    for line, label, tail in zip(rows.line, rows.label, rows.tail):
        if tail.strip():
            rows.warn(line, f"{label}: text after the counts ignored: {tail.strip()[:40]!r}")
    frame = long_frame(rows, {"softirq": rows.label}, SOFTIRQ_COUNT, ctx.source)
    return counter_result(rows, frame, SOFTIRQ_COUNT)


def detect(head: str, name: str) -> float:
    known = len(_KNOWN_ROW_RE.findall(head))
    if HEADER_DETECT_RE.search(head) is None:
        return 0.3 if known >= 3 else 0.0
    if known >= 2:
        return 0.95
    if known == 1:
        return 0.85
    lowered = name.lower()  # header only (a huge machine fills the head): the name decides
    if "softirq" in lowered:
        return 0.8
    if "interrupt" in lowered:
        return 0.1
    return 0.45


SPEC = ParserSpec(
    kind="proc-softirqs",
    description="/proc/softirqs: per-softirq, per-CPU cumulative counts (one or many snapshots)",
    detect=detect,
    parse=parse,
)
