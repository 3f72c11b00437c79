"""``/proc/vmstat``: every kernel VM counter, one or many snapshots (``cat /proc/vmstat`` in a loop,
pt-stalk's ``procvmstat`` with ``TS`` lines).

Raw input (a time line such as ``TS 1700000000.123 2023-11-14 22:13:20``, an ISO time or
``date`` output may precede a snapshot)::

    nr_free_pages 944094
    numa_hit 6192709
    numa_local 6192709
    numa_pte_updates 0
    numa_hint_faults 0
    numa_hint_faults_local 0
    numa_pages_migrated 0
    pgmigrate_success 0
    thp_fault_alloc 0

Output table ``vmstat_count`` (one row per snapshot and counter):

    snapshot  Int32     0, 1, ...: the k-th time a counter name appears is snapshot k
    ts        Datetime  time line written before the snapshot, else null
    counter   String    name as the kernel prints it
    value     Int64     value (cumulative since boot for event counters, current for nr_*)
    source    String    member path

``records`` is the number of snapshots. The ``vmstat`` command (``procs ---memory---`` columns)
and ``vmstat -s`` are other formats and are not read here. Lines are matched with one
vectorised regex over the member; only lines that are not counters are looked at one by one
(time lines, or warnings for the first few unknown ones).
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseResult, ParserSpec
from dbdiag.parsers.kit.counter_lines import read_counter_lines
from dbdiag.patterns import lazy_compile
from dbdiag.tables import VMSTAT_COUNT

_COUNTER_PATTERN = r"^([a-z][a-z0-9_]*) (-?\d+)\r?$"


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return read_counter_lines(text, ctx, VMSTAT_COUNT, "/proc/vmstat", _COUNTER_PATTERN)


_LINE_DETECT_RE = lazy_compile(r"^[a-z][a-z0-9_]* \d+$", re.MULTILINE)
_VMSTAT_ONLY_DETECT_RE = lazy_compile(
    r"^(?:nr_free_pages|nr_inactive_anon|nr_active_anon|nr_inactive_file|nr_active_file|nr_dirty|nr_writeback|"
    r"nr_mapped|nr_anon_pages|nr_slab_reclaimable|pgpgin|pgpgout|pswpin|pswpout|pgalloc_normal|pgfree|pgfault|"
    r"pgmajfault|numa_interleave|numa_local|numa_other|numa_hint_faults|pgmigrate_success|thp_fault_alloc|"
    r"nr_zone_inactive_anon|nr_dirty_threshold) \d+$",
    re.MULTILINE,
)


def detect(head: str, name: str) -> float:
    known = len(_VMSTAT_ONLY_DETECT_RE.findall(head))
    lines = len(_LINE_DETECT_RE.findall(head))
    if known >= 3 and lines >= 10:
        return 0.95
    if known >= 2 and lines >= 3:
        return 0.8
    if lines >= 10 and "vmstat" in name.lower():
        return 0.6
    return 0.0


SPEC = ParserSpec(
    kind="proc-vmstat",
    description="/proc/vmstat: kernel VM and NUMA counters (one or many snapshots)",
    detect=detect,
    parse=parse,
)
