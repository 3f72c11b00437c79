"""Declarative cases of the memory rules: /proc/vmstat and /proc/pressure/memory before and after, built here."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl

from dbdiag import tables as t
from tests.rules.rule_cases import RuleCase

START = datetime(2026, 12, 6, 22, 0, tzinfo=timezone.utc)


def _snapshots(seconds: float, swapped_in_pages: int, stalled_us: int, allocstalls: int = 0) -> dict:
    """Two snapshots ``seconds`` apart: pswpin grew by ``swapped_in_pages``, PSI memory some by ``stalled_us``."""
    end = START + timedelta(seconds=seconds)
    counters = [{"snapshot": 0, "ts": START, "counter": name, "value": 1000, "source": "os/vmstat.before"}
                for name in ("pswpin", "pswpout", "pgmajfault", "allocstall_normal")]
    grown = {"pswpin": swapped_in_pages, "pswpout": swapped_in_pages, "pgmajfault": swapped_in_pages, "allocstall_normal": allocstalls}
    counters += [{"snapshot": 0, "ts": end, "counter": name, "value": 1000 + grown[name], "source": "os/vmstat.after"} for name in grown]
    pressure = [{"snapshot": 0, "ts": when, "resource": "memory", "kind": "some", "avg10_pct": 0.0, "avg60_pct": 0.0, "avg300_pct": 0.0,
                 "total_us": total, "source": f"os/pressure-memory.{name}", "line": 2}
                for when, total, name in ((START, 5_000, "before"), (end, 5_000 + stalled_us, "after"))]
    return {t.VMSTAT_COUNT: t.conform(t.VMSTAT_COUNT, pl.DataFrame(counters)), t.PRESSURE: t.conform(t.PRESSURE, pl.DataFrame(pressure))}


def _meminfo(available_kb: int, total_kb: int) -> dict:
    rows = [{"snapshot": 0, "ts": START, "counter": name, "value": value, "source": "os/meminfo"}
            for name, value in (("MemTotal", total_kb), ("MemAvailable", available_kb))]
    return {t.MEMINFO_COUNT: t.conform(t.MEMINFO_COUNT, pl.DataFrame(rows))}


CASES = (
    # 60 s, 6,000 pages swapped in (400 KiB/s), stalls 3% of the time
    RuleCase("memory-pressure", "fires", lambda: _snapshots(60, 6_000, 1_800_000), (("host", "warning", "400 KiB/s swapped in"),)),
    # no swapping, stalls 30% of the time: critical on the stalls alone
    RuleCase("memory-pressure", "fires", lambda: _snapshots(60, 0, 18_000_000), (("host", "critical", "stalled on memory 30.0%"),)),
    # no swap, no stall, but MemAvailable at 3% of MemTotal: the OOM killer is near
    RuleCase("memory-pressure", "fires", lambda: {**_snapshots(60, 0, 0), **_meminfo(available_kb=600_000, total_kb=20_000_000)},
             (("host", "warning", "MemAvailable down to 3.0% of MemTotal"),)),
    RuleCase("memory-pressure", "passes", lambda: _snapshots(60, 0, 0)),
    # 3,780 pages in 60 s: 252 KiB/s, under 256; stalls 9.9%
    RuleCase("memory-pressure", "just-under", lambda: _snapshots(60, 3_780, 5_940_000)),
)
