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

The snapshot machinery (header, time lines, counts) is shared with ``proc_softirqs``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Iterator
from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.tables import IRQ_COUNT, UTC_TIME, conform

MAX_WARNINGS = 50
MAX_LINE_CHARS = 4096  # snapshot_lines: a longer line is no counter row (binary, a runaway write)

HEADER_RE = re.compile(r"^\s*CPU\d+(?:\s+CPU\d+)*\s*$", re.ASCII)
_HEADER_DETECT_RE = re.compile(r"^[ \t]*CPU\d+(?:[ \t]+CPU\d+)*[ \t]*$", re.MULTILINE)
# "  25:", "NMI:", "IPI0:2768808080" (no blank after the colon on arm64), "I/O:" (s390)
ROW_RE = re.compile(r"^\s*([^\s:]+):(.*)$")
_COUNTS_RE_CACHE: dict[int, re.Pattern[str]] = {}

# After the counts of a numbered row: chip, then (optionally) hwirq+trigger, then device names.
#   "IO-APIC   2-edge      timer"          hwirq "2-edge"
#   "GICv3  27 Level     arch_timer"       hwirq "27 Level" (arm64 prints number and trigger apart)
#   "IR-IO-APIC-edge      timer"           no hwirq (old kernels: trigger glued to the chip)
_TAIL_RE = re.compile(
    r"^(?P<chip>\S+)"
    r"(?:\s+(?P<hwirq>\d+-[A-Za-z]\S*|\d+(?:\s+(?:Level|Edge|level|edge|LEVEL|EDGE))?(?=\s|$)))?"
    r"(?:\s+(?P<device>(?:.*?\S)?))?\s*$"  # not .*?: linear in a run of spaces
)

# Time lines between snapshots.
_EPOCH_RE = re.compile(r"^(?:TS\s+)?(\d{9,11})(?:\.(\d{1,9}))?(?:\s+.*)?$")
_ISO_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)\s*(Z|UTC|[+-]\d{2}:?\d{2})?$"
)
_DATE_RE = re.compile(
    r"^(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})"
    r"(?:\s+([A-Za-z]{1,6}|[+-]\d{4}))?\s+(\d{4})$"
)
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
_UTC_NAMES = {"UTC", "GMT", "Z", "UT"}


def _counts_re(ncpu: int) -> re.Pattern[str]:
    """Leading counts, at most one per CPU column; a count is digits followed by a blank or the end."""
    pattern = _COUNTS_RE_CACHE.get(ncpu)
    if pattern is None:
        pattern = re.compile(r"(?:\s*\d+(?!\S)){1,%d}" % max(ncpu, 1), re.ASCII)
        _COUNTS_RE_CACHE[ncpu] = pattern
    return pattern


def _zone(tz: str) -> ZoneInfo | timezone:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def parse_time_line(line: str, tz: str) -> tuple[datetime, bool] | None:
    """A time written between snapshots, as an aware UTC datetime, and whether ``tz`` was applied.

    Accepts epoch seconds (``1700000000.123``), pt-stalk's ``TS <epoch> <date>``, ISO 8601
    (``2024-05-01T10:00:00Z``, ``2024-05-01 10:00:00``), ``date`` output
    (``Tue Nov 29 19:34:00 UTC 2026``) and RFC 2822 (``date -R``). Zone-less times are read in
    ``tz``; the second element says so, for the inventory note.
    """
    text = line.strip()
    if not text or len(text) > 80:
        return None
    m = _EPOCH_RE.match(text)
    if m:
        micros = int((m.group(2) or "0").ljust(6, "0")[:6])
        when = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=int(m.group(1)), microseconds=micros)
        return when, False
    m = _ISO_RE.match(text)
    if m:
        stamp, zone = m.group(1).replace(",", "."), m.group(2)
        try:
            when = datetime.fromisoformat(stamp.replace(" ", "T"))
        except ValueError:
            return None
        if zone in (None, ""):
            return when.replace(tzinfo=_zone(tz)).astimezone(timezone.utc), True
        if zone in ("Z", "UTC"):
            return when.replace(tzinfo=timezone.utc), False
        try:
            offset = datetime.strptime(zone.replace(":", ""), "%z").tzinfo
        except ValueError:
            return None
        return when.replace(tzinfo=offset).astimezone(timezone.utc), False
    m = _DATE_RE.match(text)
    if m:
        month, day, hh, mi, ss, zone, year = m.groups()
        if month not in _MONTHS:
            return None
        try:
            when = datetime(int(year), _MONTHS[month], int(day), int(hh), int(mi), int(ss))
        except ValueError:
            return None
        if zone and zone.upper() in _UTC_NAMES:
            return when.replace(tzinfo=timezone.utc), False
        if zone and zone[0] in "+-":
            offset = datetime.strptime(zone, "%z").tzinfo
            return when.replace(tzinfo=offset).astimezone(timezone.utc), False
        # No zone, or an abbreviation (CET, EST...) that is ambiguous: read in tz and say so.
        return when.replace(tzinfo=_zone(tz)).astimezone(timezone.utc), True
    if "," in text[:5]:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return when.replace(tzinfo=_zone(tz)).astimezone(timezone.utc), True
        return when.astimezone(timezone.utc), False
    return None


@dataclass
class CounterRows:
    """Counters read from a member, row-level; ``counts``/``cpus`` are flat, ``lengths`` per row."""

    snapshot: list[int] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    label: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    counts: list[str] = field(default_factory=list)
    cpus: list[int] = field(default_factory=list)
    snapshot_ts: list[datetime | None] = field(default_factory=list)
    snapshot_cpus: list[list[int]] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped_warnings: int = 0

    def warn(self, line: int | None, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(line, reason))
        else:
            self.dropped_warnings += 1


def read_counter_snapshots(
    text: str,
    tz: str,
    what: str,
    row_ok: re.Pattern[str],
    expects_all_counts: Callable[[str], bool],
) -> CounterRows:
    """Split a member into snapshots (each begins with a ``CPU0 CPU1 ...`` header) and read the rows.

    ``row_ok`` filters row labels (softirq names or IRQ labels). ``expects_all_counts(label)``
    says whether a row with fewer counts than CPU columns deserves a warning (``ERR:`` is fine).
    One Python step per line; counts stay strings in one flat list and are cast by polars.
    """
    out = CounterRows()
    cpus_now: list[int] | None = None
    ncpu = 0
    counts_re = _counts_re(1)
    pending_ts: datetime | None = None
    pending_ts_line = 0
    zone_applied = False
    seen: set[str] = set()
    snap = -1
    lines = text.split("\n")
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if HEADER_RE.match(line):
            try:
                cpus_now = [int(tok[3:]) for tok in line.split()]
            except ValueError:  # pragma: no cover - the regex guarantees digits
                continue
            if len(set(cpus_now)) != len(cpus_now):
                out.warn(number, "header lists a CPU twice; snapshot skipped")
                cpus_now = None
                continue
            ncpu = len(cpus_now)
            counts_re = _counts_re(ncpu)
            snap += 1
            out.snapshot_ts.append(pending_ts)
            out.snapshot_cpus.append(cpus_now)
            pending_ts = None
            seen = set()
            continue
        when = parse_time_line(line, tz)
        if when is not None:
            if pending_ts is not None:
                out.warn(pending_ts_line, "time line not followed by a snapshot; ignored")
            pending_ts, pending_ts_line = when[0], number
            zone_applied = zone_applied or when[1]
            continue
        m = ROW_RE.match(line)
        if m is None or not row_ok.match(m.group(1)):
            out.warn(number, f"not a {what} line; skipped: {line.strip()[:60]!r}")
            continue
        if cpus_now is None:
            out.warn(number, f"{what} row before any CPU header line; skipped")
            continue
        label, body = m.group(1), m.group(2)
        cm = counts_re.match(body)
        if cm is None:
            out.warn(number, f"{label}: no numeric counts; row skipped")
            continue
        if label in seen:
            out.warn(number, f"{label}: second row with this label in snapshot {snap}; skipped")
            continue
        seen.add(label)
        values = cm.group(0).split()
        k = len(values)
        if k < ncpu and expects_all_counts(label):
            out.warn(number, f"{label}: {k} counts for {ncpu} CPU columns; kept the first {k}")
        out.snapshot.append(snap)
        out.line.append(number)
        out.label.append(label)
        out.tail.append(body[cm.end():])
        out.lengths.append(k)
        out.counts.extend(values)
        out.cpus.extend(cpus_now[:k] if k < ncpu else cpus_now)
    if pending_ts is not None:
        out.warn(pending_ts_line, "time line after the last snapshot ignored (a time line dates the snapshot after it)")
    if zone_applied:
        known = not isinstance(_zone(tz), timezone) or tz.upper() in _UTC_NAMES
        out.notes.append(f"snapshot times have no zone; read as {tz if known else f'UTC ({tz!r} is not a known zone)'}")
    _note_cpu_columns(out)
    return out


def _note_cpu_columns(out: CounterRows) -> None:
    distinct = {tuple(c) for c in out.snapshot_cpus}
    for cpus in sorted(distinct):
        if list(cpus) != list(range(len(cpus))):
            out.notes.append(
                f"CPU columns are not 0..{len(cpus) - 1} ({len(cpus)} columns, up to CPU{max(cpus)}): "
                "offline or hot-unplugged CPUs are absent"
            )
            break
    if len(distinct) > 1:
        out.notes.append(f"the set of CPU columns changes between snapshots ({len(distinct)} different headers)")


def long_frame(rows: CounterRows, row_columns: dict[str, list], schema_table: str, source: str) -> pl.DataFrame:
    """Explode row-level columns to one row per (row, CPU) and cast to the declared schema."""
    n = len(rows.lengths)
    meta = pl.DataFrame(
        {
            "snapshot": rows.snapshot,
            "ts": [rows.snapshot_ts[s] for s in rows.snapshot],
            "__n": rows.lengths,
            **row_columns,
        },
        schema_overrides={"snapshot": pl.Int32, "ts": UTC_TIME, "__n": pl.Int64},
    )
    idx = pl.Series("__i", range(n), dtype=pl.Int64).repeat_by(pl.Series(rows.lengths, dtype=pl.Int64)).explode()
    frame = meta.select(pl.exclude("__n").gather(idx)) if n else meta.drop("__n")
    frame = frame.with_columns(
        pl.Series("cpu", rows.cpus, dtype=pl.Int32),
        pl.Series("count", rows.counts, dtype=pl.String).cast(pl.Int64, strict=False),
        pl.lit(source, dtype=pl.String).alias("source"),
    )
    return conform(schema_table, frame)


def finish(rows: CounterRows, frame: pl.DataFrame, table: str) -> ParseResult:
    warnings = sorted(rows.warnings, key=lambda w: (w.line is None, w.line or 0))
    if rows.dropped_warnings:
        warnings.append(
            ParseWarning(None, f"{rows.dropped_warnings} more warnings not listed (capped at {MAX_WARNINGS})")
        )
    overflow = frame.filter(pl.col("count").is_null()).height
    if overflow:
        warnings.append(ParseWarning(None, f"{overflow} counts too large for Int64; left null"))
    stamps = [t for t in rows.snapshot_ts if t is not None]
    return ParseResult(
        tables={table: frame},
        records=len(rows.snapshot_ts),
        warnings=warnings,
        notes=list(rows.notes),
        time_range=(min(stamps), max(stamps)) if stamps else None,
    )


def snapshot_lines(text: str, warn: Callable[[int | None, str], None]) -> Iterator[tuple[int, str]]:
    """(1-based number, line without its CR) of every non-blank line; one longer than MAX_LINE_CHARS
    is handed to ``warn`` and skipped.

    >>> list(snapshot_lines("numa_hit 5\\r\\n\\n   \\n" + "x" * 5000 + "\\nlocal_node 4", print))
    4 line of 5000 characters; skipped
    [(1, 'numa_hit 5'), (5, 'local_node 4')]
    """
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            warn(number, f"line of {len(line)} characters; skipped")
            continue
        yield number, line


def snapshot_result(
    table: str,
    frame: pl.DataFrame,
    snapshots: set[int],
    snapshot_ts: dict[int, datetime],
    warnings: list[ParseWarning],
    dropped: int,
    notes: list[str],
) -> ParseResult:
    """The result of a member read as numbered snapshots (numastat, sysfs node files, /proc/vmstat).

    ``records`` counts ``snapshots``; the time range spans the time lines of those that have one
    (``snapshot_ts``); ``dropped`` warnings past MAX_WARNINGS are counted in one last warning.
    """
    if dropped:
        warnings = [*warnings, ParseWarning(None, f"{dropped} more warnings not listed (capped at {MAX_WARNINGS})")]
    stamps = [snapshot_ts[s] for s in snapshots if s in snapshot_ts]
    return ParseResult(
        tables={table: conform(table, frame)},
        records=len(snapshots),
        warnings=warnings,
        notes=notes,
        time_range=(min(stamps), max(stamps)) if stamps else None,
    )


_IRQ_LABEL_RE = re.compile(r"^(?:\d+|[A-Za-z][A-Za-z0-9_/-]{0,15})$")


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
    return finish(rows, frame, IRQ_COUNT)


_NUMBERED_ROW_RE = re.compile(r"^[ \t]*\d+:[ \t]*\d+[ \t]", re.MULTILINE)
_NAMED_ROW_RE = re.compile(r"^[ \t]*(?:NMI|LOC|SPU|PMI|IWI|RES|CAL|TLB|MCE|MCP|IPI\d+|ERR|MIS|Err):", re.MULTILINE)
_CHIP_RE = re.compile(r"IO-APIC|PCI-MSI|GIC|ITS-MSI|XT-PIC|-edge|-fasteoi|Level|Edge|interrupts")


def detect(head: str, name: str) -> float:
    header = _HEADER_DETECT_RE.search(head)
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
