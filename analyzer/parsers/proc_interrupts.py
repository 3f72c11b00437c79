"""``/proc/interrupts``: cumulative interrupt counts per IRQ line and CPU, one or many snapshots.

Raw input (x86_64 guest; ``TS`` line as pt-stalk writes it, optional)::

    TS 1700000000.123456789 2023-11-14 22:13:20
               CPU0       CPU1       CPU2       CPU3
      0:        161          0          0          0   IO-APIC   2-edge      timer
     25:          0          0          0       1849   PCI-MSI 49153-edge      virtio0-input.0
     16:          4          2          2          8  IR-IO-APIC  16-fasteoi   ehci_hcd:usb1, mmc0
     43:    7434032    8092205    6478877    7492252  IR-PCI-MSI-edge      ahci
     10: 3287008667 3310445093 3301386305 3273132897     GICv3  27 Level     arch_timer
    NMI:          0          0          0          0   Non-maskable interrupts
    IPI0:2768808080 2844211768 2878602432 2730576120       Rescheduling interrupts
    ERR:          0

Output table ``irq_count`` (one row per snapshot, IRQ line and CPU):

    snapshot  Int32     0, 1, ... in the order the header lines appear in the member
    ts        Datetime  time line written before the snapshot, else null
    irq       String    "25", "NMI", "LOC", "IPI0", "ERR" as the kernel prints it
    cpu       Int32     CPU number from the header column (``CPU0 CPU2 CPU3``: offline CPUs absent)
    count     Int64     cumulative count since boot
    chip      String    "IO-APIC", "PCI-MSI", "GICv3", "ITS-MSI", old "IR-IO-APIC-edge"; null for named rows
    hwirq     String    "2-edge", "49153-edge", "27 Level"; null when the format has none
    device    String    "virtio0-input.0", "ehci_hcd:usb1, mmc0"; for named rows the description
    source    String    member path

``records`` is the number of snapshots. Rows with fewer counts than CPUs (``ERR:``, ``MIS:``)
keep the counts that are there. Lines between snapshots that read as a time (epoch seconds,
``TS <epoch> ...``, ISO 8601, ``date`` output) give the ``ts`` of the next snapshot; other
unknown lines are skipped with a warning.

The snapshot machinery (header, time lines, counts) is ``kit.snapshots``, shared with ``proc_softirqs``.
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.kit.snapshots import HEADER_DETECT_RE, counter_result, long_frame, read_counter_snapshots
from dbdiag.patterns import lazy_compile
from dbdiag.tables import IRQ_COUNT

# After the counts of a numbered row: chip, then (optionally) hwirq+trigger, then device names.
#   "IO-APIC   2-edge      timer"          hwirq "2-edge"
#   "GICv3  27 Level     arch_timer"       hwirq "27 Level" (arm64 prints number and trigger apart)
#   "IR-IO-APIC-edge      timer"           no hwirq (old kernels: trigger glued to the chip)
_TAIL_RE = lazy_compile(
    r"^(?P<chip>\S+)"
    r"(?:\s+(?P<hwirq>\d+-[A-Za-z]\S*|\d+(?:\s+(?:Level|Edge|level|edge|LEVEL|EDGE))?(?=\s|$)))?"
    r"(?:\s+(?P<device>(?:.*?\S)?))?\s*$"  # not .*?: linear in a run of spaces
)


_IRQ_LABEL_RE = lazy_compile(r"^(?:\d+|[A-Za-z][A-Za-z0-9_/-]{0,15})$")


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows = read_counter_snapshots(text, ctx.tz, "/proc/interrupts", _IRQ_LABEL_RE, str.isdigit)
    if not rows.snapshot_ts:
        raise ParseError("no /proc/interrupts header line (CPU0 CPU1 ...) found")
    if not rows.lengths:
        raise ParseError("/proc/interrupts header found but no counter rows")
    chips: list[str | None] = []
    hwirqs: list[str | None] = []
    devices: list[str | None] = []
    for label, tail in zip(rows.label, rows.tail):
        tail = tail.strip()
        if not label.isdigit():
            chips.append(None)
            hwirqs.append(None)
            devices.append(tail or None)
            continue
        m = _TAIL_RE.match(tail) if tail else None
        if m is None:
            chips.append(None)
            hwirqs.append(None)
            devices.append(tail or None)
            continue
        chips.append(m.group("chip"))
        hwirqs.append(m.group("hwirq"))
        devices.append(m.group("device") or None)
    frame = long_frame(
        rows,
        {"irq": rows.label, "chip": chips, "hwirq": hwirqs, "device": devices},
        IRQ_COUNT,
        ctx.source,
    )
    return counter_result(rows, frame, IRQ_COUNT)


_NUMBERED_ROW_RE = lazy_compile(r"^[ \t]*\d+:[ \t]*\d+[ \t]", re.MULTILINE)
_NAMED_ROW_RE = lazy_compile(r"^[ \t]*(?:NMI|LOC|SPU|PMI|IWI|RES|CAL|TLB|MCE|MCP|IPI\d+|ERR|MIS|Err):", re.MULTILINE)
_CHIP_RE = lazy_compile(r"IO-APIC|PCI-MSI|GIC|ITS-MSI|XT-PIC|-edge|-fasteoi|Level|Edge|interrupts")


def detect(head: str, name: str) -> float:
    header = HEADER_DETECT_RE.search(head)
    numbered = len(_NUMBERED_ROW_RE.findall(head))
    named = len(_NAMED_ROW_RE.findall(head))
    if header is None:
        # A time line first and a header beyond the head is still a header somewhere: rows alone are weak.
        return 0.3 if numbered >= 2 and named and _CHIP_RE.search(head) else 0.0
    if numbered or named:
        return 0.95 if (_CHIP_RE.search(head) or named) else 0.7
    # Header only (huge machines fill the head with it): ambiguous with /proc/softirqs.
    lowered = name.lower()
    if "interrupt" in lowered:
        return 0.8
    if "softirq" in lowered:
        return 0.1
    return 0.45


SPEC = ParserSpec(
    kind="proc-interrupts",
    description="/proc/interrupts: per-IRQ, per-CPU cumulative counts (one or many snapshots)",
    detect=detect,
    parse=parse,
)
