"""``iostat -x -o JSON`` (sysstat 11.5+; ``-t`` adds each report's ``timestamp``).

Sample input (sysstat 12.6, ``iostat -x -t -o JSON 1``)::

    {"sysstat": {"hosts": [{"nodename": "vm", "sysname": "Linux", "release": "6.18.44-fc-v1300",
       "machine": "x86_64", "number-of-cpus": 2, "date": "12/06/26",
       "statistics": [{"timestamp": "12/06/26 22:20:43",
                       "avg-cpu": {"user": 25.11, "nice": 0.00, "system": 12.66, "iowait": 3.32, ...},
                       "disk": [{"disk_device": "loop0", "r/s": 0.66, "w/s": 55.76, "rkB/s": 10.79, ...,
                                 "r_await": 0.14, "w_await": 52.84, "aqu-sz": 2.95, "util": 5.94}]}]}]}}

Output table ``disk_io``, as ``iostat_text`` gives it (see there): one row per report (``sample``, in
the order of ``statistics``) and device; ts from ``timestamp`` (zone-less: read in ``ctx.tz``, said in a
note), null without ``-t``; line null. Keys are matched by name (``_iostat.DISK_COLUMNS``): sysstat 11's
``await``/``avgqu-sz``/``svctm`` too. ``records`` is the number of reports.
"""

from __future__ import annotations

import math


from dbdiag.parsers._sysstat import parse_sysstat_date
from dbdiag.parsers._iostat import DISK_COLUMNS, disk_io_result
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.iostat_text import report_time
from dbdiag.parsers.kit import json_text
from dbdiag.parsers.kit.times import check_tz


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    try:
        document = json_text.loads(text)
    except ValueError as exc:
        raise ParseError(f"not JSON: {exc}") from None
    hosts = ((document or {}).get("sysstat") or {}).get("hosts") if isinstance(document, dict) else None
    if not isinstance(hosts, list):
        raise ParseError("no sysstat.hosts list (iostat -o JSON) found")
    rows: list[dict[str, object]] = []
    zoned, sample = False, -1
    for host in hosts:
        banner_date = parse_sysstat_date(str(host.get("date") or ""))
        for report in host.get("statistics") or []:
            disks = report.get("disk") if isinstance(report, dict) else None
            if not isinstance(disks, list):
                continue
            sample += 1
            stamp = report_time(str(report.get("timestamp") or ""), banner_date, tz) if report.get("timestamp") else None
            zoned = zoned or bool(stamp and stamp[1])
            for disk in disks:
                if not isinstance(disk, dict) or not disk.get("disk_device"):
                    continue
                row: dict[str, object] = {"sample": sample, "ts": stamp[0] if stamp else None, "device": str(disk["disk_device"])}
                for key, value in disk.items():
                    target = DISK_COLUMNS.get(key)
                    if target is None:
                        continue
                    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                        row[target[0]] = float(value) * target[1]
                    else:
                        warnings.append(ParseWarning(None, f"{disk['disk_device']} {key}: {str(value)[:20]!r} is not a number"))
                rows.append(row)
    if not rows:
        raise ParseError("iostat JSON without any disk statistics (run it with -x and -d or without -c)")
    return disk_io_result(rows, ctx, tz, sample + 1, warnings, zoned)


def detect(head: str, name: str) -> float:
    if '"sysstat"' not in head or '"hosts"' not in head:
        return 0.0
    if '"disk_device"' in head or '"disk"' in head:
        return 0.9
    return 0.2 if "iostat" in name.lower() else 0.0


SPEC = ParserSpec(
    kind="iostat-json",
    description="iostat -x -o JSON (sysstat 11.5+): per-device rates, await, queue size and %util per report",
    detect=detect,
    parse=parse,
)
