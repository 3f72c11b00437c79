"""``/proc/stat``: the kernel's activity counters since boot, one or many snapshots (``cat /proc/stat``
before and after a run, in a loop with ``TS`` lines as pt-stalk writes them).

Raw input (a time line such as ``TS 1700000000.123 2023-11-14 22:13:20``, an ISO time or ``date``
output may precede a snapshot)::

    cpu  136205 21 30585 176730 1125 0 440 1030 0 0
    cpu0 61828 20 14624 95556 276 0 97 508 0 0
    intr 2542027 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 1 0 0 1 1 349 239
    ctxt 34267295
    btime 1796408593
    processes 43611
    procs_running 6
    procs_blocked 0
    softirq 808530 0 91212 4 69174 205249 0 3 207829 23649 211410

Output table ``proc_stat_count`` (one row per snapshot and counter):

    snapshot  Int32     0, 1, ...: the k-th time a counter name appears is snapshot k
    ts        Datetime  time line written before the snapshot, else null
    counter   String    ctxt (context switches), processes (forks), procs_running, procs_blocked,
                        btime (boot time, epoch s), intr and softirq (their totals: the first number)
    value     Int64     the value as printed
    source    String    member path

``records`` is the number of snapshots. The ``cpu`` rows are mpstat's business (``mpstat`` and
``sar -u`` read the same ticks) and are passed over; the per-IRQ and per-softirq columns of
``intr``/``softirq`` are /proc/interrupts' and /proc/softirqs'.
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseResult, ParserSpec
from dbdiag.parsers.kit.counter_lines import read_counter_lines
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PROC_STAT_COUNT

_COUNTER_PATTERN = r"^(ctxt|btime|processes|procs_running|procs_blocked|intr|softirq) (\d+)(?: \d+)*\r?$"
# rows of /proc/stat that carry nothing read here: per-CPU ticks, and the page/swap rows of 2.4 kernels
_QUIET_PATTERN = r"^(?:cpu\d* |page |swap )"


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return read_counter_lines(text, ctx, PROC_STAT_COUNT, "/proc/stat", _COUNTER_PATTERN, _QUIET_PATTERN)


_CTXT_DETECT_RE = lazy_compile(r"^ctxt \d+\r?$", re.MULTILINE)
_OTHER_DETECT_RE = lazy_compile(r"^(?:btime \d+|processes \d+|procs_running \d+|cpu  \d+ \d+ \d+ \d+|intr \d+ \d+)", re.MULTILINE)


def detect(head: str, name: str) -> float:
    if _CTXT_DETECT_RE.search(head) is None:
        return 0.8 if len(_OTHER_DETECT_RE.findall(head)) >= 2 and "stat" in name.lower() else 0.0
    return 0.95 if _OTHER_DETECT_RE.search(head) else 0.6


SPEC = ParserSpec(
    kind="proc-stat",
    description="/proc/stat: context switches, forks, runnable tasks, interrupt and softirq totals (one or many snapshots)",
    detect=detect,
    parse=parse,
)
