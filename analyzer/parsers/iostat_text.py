"""``iostat -x`` text (sysstat 10 to 12; ``-t`` times, ``-d``, ``-p``, ``-N``, ``-k``/``-m``), as run by
hand or by pt-stalk (``<prefix>-iostat``).

Sample input (sysstat 12.6, ``iostat -x -t -y 1``; sysstat 10/11 print ``Device:`` and the columns
``rrqm/s wrqm/s r/s w/s rkB/s wkB/s avgrq-sz avgqu-sz await r_await w_await svctm %util``)::

    Linux 6.18.44-fc-v1300 (vm) \t12/06/26 \t_x86_64_\t(2 CPU)

    12/06/26 22:16:11
    avg-cpu:  %user   %nice %system %iowait  %steal   %idle
               1.03    0.00    1.03   49.23    0.00   48.72

    Device            r/s     rkB/s   rrqm/s  %rrqm r_await rareq-sz     w/s     wkB/s ... f/s f_await  aqu-sz  %util
    loop0            0.00      0.00     0.00   0.00    0.00     0.00  112.00   2683.00 ... 72.00  0.24    1.10  98.40

Output table ``disk_io`` (one row per report and device; see ``dbdiag.tables``): sample (the report's
number: a ``Device`` header starts one), ts (the ``-t`` line above it: ``12/06/26 22:16:11``,
``12/06/2026 10:16:11 PM``, ISO ``2026-12-06T22:16:11+0000``; zone-less ones read in ``ctx.tz``, said in a
note; the banner's date when the line has only a time), device, the rates (kB whatever the header's unit),
the awaits, queue_size, util_pct, svctm_ms (sysstat <= 11), source, line. Columns are found by header name,
so any sysstat version fills what it prints. Without ``-y`` the first report is the average since boot:
derive leaves it out. ``avg-cpu`` blocks are passed over (mpstat and sar have the CPUs); ``records`` is the
number of reports.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone


from dbdiag.parsers._iostat import DISK_COLUMNS, EXTENDED_MARKS, disk_io_result
from dbdiag.parsers._sysstat import parse_sysstat_date
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.times import check_tz, parse_time_line, zone_or_utc
from dbdiag.patterns import lazy_compile

_BANNER_RE = lazy_compile(r"^Linux\s+\S+\s+\([^)]*\)\s+(\S+)")
# iostat -t: the locale's date and time (%x %X), or ISO with S_TIME_FORMAT=ISO
_TIME_RE = lazy_compile(
    r"^(?:(?P<date>\d{1,4}[/.\-]\d{1,2}[/.\-]\d{1,4})\s+)?(?P<hh>\d{1,2}):(?P<mi>\d{2}):(?P<ss>\d{2})(?:\s*(?P<ampm>[AaPp][Mm]))?\s*$"
)
_HEADER_RE = lazy_compile(r"^Device:?\s+(.*\S)\s*$")
_DETECT_HEADER_RE = lazy_compile(r"^Device:?\s+.*(?:r_await|await|%util|aqu-sz|avgqu-sz)", re.MULTILINE)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    rows: list[dict[str, object]] = []
    banner_date, when, zoned, names = None, None, False, None
    sample = -1
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            names = None  # a device table ends at a blank line
            continue
        banner = _BANNER_RE.match(line)
        if banner:
            banner_date = parse_sysstat_date(banner.group(1))
            continue
        header = _HEADER_RE.match(line)
        if header:
            names = header.group(1).split()
            sample += 1
            continue
        stamp = report_time(line, banner_date, tz)
        if stamp is not None:
            when, applied = stamp
            zoned = zoned or applied
            continue
        if names is None:
            continue  # avg-cpu and its row, headers of other tables
        cells = line.split()
        values = cells[1:]
        if len(values) != len(names):
            warnings.append(ParseWarning(number, f"{len(values)} values under {len(names)} columns: line skipped"))
            continue
        row: dict[str, object] = {"sample": sample, "ts": when, "device": cells[0], "line": number}
        for name, value in zip(names, values):
            target = DISK_COLUMNS.get(name)
            if target is None:
                continue
            try:
                number_value = float(value.replace(",", ".")) * target[1]
            except ValueError:
                number_value = math.nan
            if math.isfinite(number_value):
                row[target[0]] = number_value
            else:
                warnings.append(ParseWarning(number, f"{name}: {value[:20]!r} is not a number"))
        rows.append(row)
    if not rows:
        raise ParseError("no iostat -x device rows (a 'Device ... r_await/await ... %util' header and its lines) found")
    return disk_io_result(rows, ctx, tz, sample + 1, warnings, zoned)


def report_time(line: str, banner_date, tz: str) -> tuple[datetime, bool] | None:
    """The report time of an ``iostat -t`` line, as UTC, and whether ``tz`` was applied; None for other lines."""
    if line[4:5] == "-":  # S_TIME_FORMAT=ISO: 2026-12-06T22:16:11+0000
        return parse_time_line(line, tz)
    m = _TIME_RE.match(line)
    if m is None:
        return None
    day = parse_sysstat_date(m.group("date")) if m.group("date") else banner_date
    if day is None:
        return None
    hour = int(m.group("hh")) % 12 + (12 if (m.group("ampm") or "").upper() == "PM" else 0) if m.group("ampm") else int(m.group("hh"))
    try:
        local = datetime(day.year, day.month, day.day, hour, int(m.group("mi")), int(m.group("ss")))
    except ValueError:
        return None
    return local.replace(tzinfo=zone_or_utc(tz)).astimezone(timezone.utc), True


def detect(head: str, name: str) -> float:
    if _DETECT_HEADER_RE.search(head) is None:
        return 0.0
    marks = sum(mark in head for mark in EXTENDED_MARKS)
    return 0.9 if marks >= 2 else 0.6


SPEC = ParserSpec(
    kind="iostat-text",
    description="iostat -x text (sysstat 10-12): per-device rates, await, queue size and %util per report",
    detect=detect,
    parse=parse,
)
