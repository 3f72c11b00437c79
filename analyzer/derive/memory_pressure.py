"""The kernel's memory counters over the capture -> the ``memory_pressure`` metric: swapping, major faults,
direct reclaim, OOM kills, the share of time tasks stalled on memory, and what ``vmstat 1`` saw.

Reads ``vmstat_count`` (/proc/vmstat snapshots: the first and the last, ``snapshots.first_and_last``),
``pressure`` (/proc/pressure/memory snapshots), ``meminfo_count`` (/proc/meminfo: MemTotal, the lowest
MemAvailable, swap used) and ``vmstat_sample`` (``vmstat 1``; its first line, the average since boot, left out). A sample, MariaDB whose cgroup holds 100 MiB of its 768 MiB buffer pool
(fixtures/memory)::

    vmstat_count  pswpin 42558 -> 66800, pswpout 85029 -> 109365 over 20.1 s
    pressure      memory some total 0 -> 1695986 us over 20.1 s
      -> {"seconds": 20.1, "swap_in_pages": 24242, "swap_in_kb_per_s": 4824.3, "swap_out_kb_per_s": 4843.0,
          "psi_some_pct": 8.44, "psi_full_pct": 7.75, "major_faults_per_s": 1214.2, "vmstat": {"samples": 19,
          "swap_in_kb_per_s_mean": 6800.1, ...}, "sources": [...]}

Pages are the kernel's 4 KiB (``PAGE_KB``): /proc/vmstat counts pages, not bytes. Rates need the snapshots'
time lines (``TS``/date before each); without them only the counts are given.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import first_and_last, source_order_key

PAGE_KB = 4
COUNTERS = {"pswpin": "swap_in_pages", "pswpout": "swap_out_pages", "pgmajfault": "major_faults", "pgscan_direct": "direct_scan_pages",
            "oom_kill": "oom_kills", "compact_stall": "compaction_stalls"}
ALLOCSTALL_PREFIX = "allocstall"  # allocstall_dma32, allocstall_normal, ...: tasks that had to reclaim before allocating


def memory_pressure(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The ``memory_pressure`` metric (module docstring); None when no input says anything of memory."""
    out: dict[str, Any] = {"sources": []}
    counts = tables.get(t.VMSTAT_COUNT)
    ends = first_and_last(counts)
    if ends is not None:
        start, end = (dict(rows.select("counter", "value").rows()) for rows in (ends.first, ends.last))
        out["seconds"] = ends.seconds
        out["sources"] += list(dict.fromkeys([ends.first["source"][0], ends.last["source"][0]]))
        grown = {name: end[counter] - start[counter] for counter, name in COUNTERS.items() if counter in start and counter in end}
        stalls = [end[c] - start[c] for c in end if c.startswith(ALLOCSTALL_PREFIX) and c in start]
        if stalls:
            grown["allocation_stalls"] = sum(stalls)
        for name, value in grown.items():
            out[name] = max(value, 0)
        if ends.seconds:
            for name in ("swap_in", "swap_out"):
                if f"{name}_pages" in out:
                    out[f"{name}_kb_per_s"] = round(out[f"{name}_pages"] * PAGE_KB / ends.seconds, 1)
            for name in ("major_faults", "direct_scan_pages", "allocation_stalls"):
                if name in out:
                    out[f"{name}_per_s"] = round(out[name] / ends.seconds, 1)
    psi = _psi(tables.get(t.PRESSURE))
    if psi:
        psi_sources = psi.pop("psi_sources")
        out.update(psi)
        out["sources"] += [s for s in psi_sources if s not in out["sources"]]
    meminfo = _meminfo(tables.get(t.MEMINFO_COUNT))
    if meminfo:
        meminfo_sources = meminfo.pop("meminfo_sources")
        out.update(meminfo)
        out["sources"] += [s for s in meminfo_sources if s not in out["sources"]]
    vmstat = _vmstat(tables.get(t.VMSTAT_SAMPLE))
    if vmstat:
        out["vmstat"] = vmstat
        out["sources"] += [s for s in vmstat["sources"] if s not in out["sources"]]
    return out if len(out) > 1 else None


def _psi(pressure: pl.DataFrame | None) -> dict[str, Any] | None:
    """Memory stall shares between the first and the last memory snapshot, and the largest avg10 seen."""
    if pressure is None or pressure.height == 0:
        return None
    memory = pressure.filter(pl.col("resource") == "memory")
    out: dict[str, Any] = {}
    for kind in ("some", "full"):
        rows = memory.filter(pl.col("kind") == kind).drop("resource", "kind").rename({"total_us": "value"}).with_columns(counter=pl.lit(kind))
        ends = first_and_last(rows)
        if rows.height:
            out[f"psi_{kind}_avg10_max_pct"] = rows["avg10_pct"].max()
        if ends is not None and ends.seconds:
            stalled_us = max(ends.last["value"][0] - ends.first["value"][0], 0)
            out[f"psi_{kind}_pct"] = round(stalled_us / (ends.seconds * 1e6) * 100, 2)
            out["psi_seconds"] = ends.seconds
    if not out:
        return None
    out["psi_sources"] = sorted(set(memory["source"].to_list()), key=source_order_key)
    return out


def _meminfo(counts: pl.DataFrame | None) -> dict[str, Any] | None:
    """MemTotal, the lowest MemAvailable (and its share of MemTotal) and the most swap used over the snapshots."""
    if counts is None or counts.height == 0:
        return None
    fields = counts.group_by("counter").agg(pl.col("value").min().alias("low"), pl.col("value").max().alias("high"))
    low, high = dict(fields.select("counter", "low").rows()), dict(fields.select("counter", "high").rows())
    out: dict[str, Any] = {}
    if high.get("MemTotal"):
        out["mem_total_kb"] = high["MemTotal"]
        if low.get("MemAvailable") is not None:
            out["mem_available_kb_min"] = low["MemAvailable"]
            out["mem_available_min_pct"] = round(low["MemAvailable"] / high["MemTotal"] * 100, 2)
    if high.get("SwapTotal"):
        out["swap_total_kb"] = high["SwapTotal"]
        used = counts.filter(pl.col("counter").is_in(["SwapTotal", "SwapFree"])).pivot("counter", index=["source", "snapshot"], values="value")
        swap_used = (used["SwapTotal"] - used["SwapFree"]).max() if {"SwapTotal", "SwapFree"} <= set(used.columns) else None
        if swap_used is not None:
            out["swap_used_kb_max"] = int(swap_used)
    if not out:
        return None
    out["meminfo_sources"] = sorted(set(counts["source"].to_list()), key=source_order_key)
    return out


def vmstat_lines(samples: pl.DataFrame) -> pl.DataFrame:
    """``vmstat_sample`` without each member's first line (vmstat's average since boot)."""
    return samples.filter(pl.int_range(pl.len()).over("source") > 0)


def _vmstat(samples: pl.DataFrame | None) -> dict[str, Any] | None:
    if samples is None or samples.height == 0:
        return None
    rows = vmstat_lines(samples)
    if rows.height == 0:
        return None
    def mean(column: str) -> float | None:
        value = rows[column].mean()
        return None if value is None else round(value, 1)

    return {
        "samples": rows.height,
        "swap_in_kb_per_s_mean": mean("swap_in_kb_per_s"), "swap_in_kb_per_s_max": rows["swap_in_kb_per_s"].max(),
        "swap_out_kb_per_s_mean": mean("swap_out_kb_per_s"), "swap_out_kb_per_s_max": rows["swap_out_kb_per_s"].max(),
        "swap_used_kb_max": rows["swap_used_kb"].max(), "free_kb_min": rows["free_kb"].min(), "blocked_max": rows["blocked"].max(),
        "sources": list(dict.fromkeys(rows["source"].to_list())),
    }
