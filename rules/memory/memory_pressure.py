"""The host is short of memory: pages swapped in and out, tasks stalled on memory, direct reclaim.

What it detects:
    Over the capture (the first and the last /proc/vmstat and /proc/pressure/memory snapshots, with their
    time lines; ``vmstat 1`` beside them): pages swapped in at SWAP_IN_MIN_KB_PER_S = 256 KiB/s or more, or
    tasks stalled on memory (PSI ``some``) PSI_SOME_MIN_PCT = 10% of the time or more, or tasks that had to
    reclaim memory themselves before allocating (``allocstall_*``) ALLOCATION_STALLS_MIN_PER_S = 10 times a
    second or more, or /proc/meminfo's MemAvailable below MEM_AVAILABLE_MIN_PCT = 5% of MemTotal in a snapshot
    (the OOM killer is near). Critical when the stall share reaches PSI_SOME_CRITICAL_PCT = 25% or the swap-in
    SWAP_IN_CRITICAL_KB_PER_S = 51,200 KiB/s (50 MiB/s).

Why it matters:
    A database keeps its working set in memory on purpose (InnoDB's buffer pool, PostgreSQL's shared
    buffers, TiKV's block cache); a page of it swapped out costs a disk read the next time a query touches
    it, inside the query, holding whatever latch it held. The server looks slow at random; free memory
    can look plentiful on the host when a cgroup or container limit is what is full.

How it is detected:
    Inputs: the ``memory_pressure`` metric (derive/memory_pressure.py: counter growth between the first
    and last snapshot of /proc/vmstat, pswpin/pswpout in 4 KiB pages, pgmajfault, allocstall_*; the PSI
    memory ``total`` growth over the seconds between its snapshots; ``vmstat 1``'s si/so, its first line
    left out). Rates need the snapshots' time lines.

Remediation:
    Find whose memory it is and what limit it hits (the process' VmSwap, its cgroup's or container's
    limit), then fit the database's memory settings under that limit with room for connections and the
    OS, or raise the limit; swappiness does not stop a cgroup from swapping its own pages.

References:
    Linux Documentation/accounting/psi.rst, admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst (memory.max,
    memory.swap.max); MariaDB documentation, innodb_buffer_pool_size (resizing online); PostgreSQL
    documentation, "Resource Consumption" (shared_buffers, work_mem); Brendan Gregg, "Systems Performance",
    2nd ed., ch. 7 (memory).
"""

from __future__ import annotations

from typing import Any

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

RULE_ID = "memory-pressure"

SWAP_IN_MIN_KB_PER_S = 256.0
PSI_SOME_MIN_PCT = 10.0
ALLOCATION_STALLS_MIN_PER_S = 10.0
MEM_AVAILABLE_MIN_PCT = 5.0
PSI_SOME_CRITICAL_PCT = 25.0
SWAP_IN_CRITICAL_KB_PER_S = 51_200.0


def check(inp: RuleInput) -> Verdict:
    memory = inp.metric(t.MEMORY_PRESSURE_METRIC) or {}
    swap_in = memory.get("swap_in_kb_per_s")
    if swap_in is None and (memory.get("vmstat") or {}).get("samples"):
        swap_in = memory["vmstat"]["swap_in_kb_per_s_mean"]
    psi, stalls = memory.get("psi_some_pct"), memory.get("allocation_stalls_per_s")
    available = memory.get("mem_available_min_pct")
    if swap_in is None and psi is None and stalls is None and available is None:
        raise Skip("no rate of swapping or memory stalls: needs /proc/vmstat and /proc/pressure/memory before and after "
                   "(each after a date/TS line), vmstat 1, or /proc/meminfo")
    reasons = []
    if swap_in is not None and swap_in >= SWAP_IN_MIN_KB_PER_S:
        reasons.append(f"{swap_in:,.0f} KiB/s swapped in")
    if psi is not None and psi >= PSI_SOME_MIN_PCT:
        reasons.append(f"tasks stalled on memory {psi:.1f}% of the time")
    if stalls is not None and stalls >= ALLOCATION_STALLS_MIN_PER_S:
        reasons.append(f"{stalls:,.0f} direct-reclaim stalls/s")
    if available is not None and available < MEM_AVAILABLE_MIN_PCT:
        reasons.append(f"MemAvailable down to {available:.1f}% of MemTotal")
    measured = (f"swap-in {_num(swap_in)} KiB/s (limit {SWAP_IN_MIN_KB_PER_S:g}), memory stalls {_num(psi)}% "
                f"(limit {PSI_SOME_MIN_PCT:g}%), allocation stalls {_num(stalls)}/s (limit {ALLOCATION_STALLS_MIN_PER_S:g}), "
                f"MemAvailable low {_num(available)}% (limit {MEM_AVAILABLE_MIN_PCT:g}%)")
    if not reasons:
        return Verdict(findings=[], measured=measured)
    critical = (psi or 0.0) >= PSI_SOME_CRITICAL_PCT or (swap_in or 0.0) >= SWAP_IN_CRITICAL_KB_PER_S
    return Verdict(findings=[_finding(inp, memory, reasons, swap_in, psi, critical)], measured=measured)


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def _finding(inp: RuleInput, memory: dict[str, Any], reasons: list[str], swap_in: float | None, psi: float | None, critical: bool) -> Finding:
    seconds = memory.get("seconds") or memory.get("psi_seconds")
    rows = [(name, _num(memory.get(key)), unit) for name, key, unit in (
        ("swapped in (pswpin x 4 KiB)", "swap_in_kb_per_s", "KiB/s"), ("swapped out (pswpout x 4 KiB)", "swap_out_kb_per_s", "KiB/s"),
        ("major page faults (pgmajfault)", "major_faults_per_s", "/s"), ("direct-reclaim stalls (allocstall_*)", "allocation_stalls_per_s", "/s"),
        ("pages scanned by direct reclaim (pgscan_direct)", "direct_scan_pages_per_s", "/s"), ("OOM kills (oom_kill)", "oom_kills", "in the capture"),
        ("tasks stalled on memory, some (PSI)", "psi_some_pct", "% of the time"), ("all tasks stalled, full (PSI)", "psi_full_pct", "% of the time"),
        ("MemAvailable, lowest (meminfo)", "mem_available_kb_min", "kB"), ("MemTotal (meminfo)", "mem_total_kb", "kB"),
        ("swap used, most (meminfo)", "swap_used_kb_max", "kB"),
    ) if memory.get(key) is not None]
    evidence = [Evidence(title=f"Memory counters over the capture ({seconds:.1f} s)" if seconds else "Memory counters over the capture",
                         columns=("measure", "value", "unit"), rows=tuple(rows))]
    vmstat = memory.get("vmstat")
    if vmstat:
        evidence.append(Evidence(title=f"vmstat, {vmstat['samples']} lines", columns=("measure", "mean", "max"), rows=(
            ("si (KiB/s swapped in)", vmstat["swap_in_kb_per_s_mean"], vmstat["swap_in_kb_per_s_max"]),
            ("so (KiB/s swapped out)", vmstat["swap_out_kb_per_s_mean"], vmstat["swap_out_kb_per_s_max"]),
            ("swpd (KiB of swap used)", "", vmstat["swap_used_kb_max"]), ("free (KiB), lowest", "", vmstat["free_kb_min"]),
        )))
    free_kb = memory.get("mem_available_kb_min") if memory.get("mem_available_kb_min") is not None else (vmstat or {}).get("free_kb_min")
    free_note = ""
    if free_kb is not None and free_kb > 1024 * 1024 and (memory.get("mem_available_min_pct") or 100.0) >= MEM_AVAILABLE_MIN_PCT:
        what = "available" if memory.get("mem_available_kb_min") is not None else "free"
        free_note = f"; the host still had {free_kb / 1024 / 1024:.1f} GiB {what}, so a cgroup or container limit is what is full"
    return Finding(
        rule=RULE_ID, scope=Scope.HOST, severity=Severity.CRITICAL if critical else Severity.WARNING,
        title=f"The host is short of memory: {', '.join(reasons)}{free_note}",
        subject="host",
        impact={"description": f"{', '.join(reasons)}: pages the database needs are read back from swap inside its queries",
                "swap_in_kb_per_s": swap_in, "psi_some_pct": psi},
        evidence=tuple(evidence), remediation=_remediation(inp), sources=tuple(memory.get("sources") or ()),
    )


def _remediation(inp: RuleInput) -> str:
    engine = ((inp.metric(t.ENGINE_VERSION_METRIC) or {}).get("engine") or "").lower()
    lines = [
        "1. Whose pages are swapped: grep -E 'VmRSS|VmSwap' /proc/<database pid>/status; the largest VmSwap over all processes:",
        "   grep VmSwap /proc/[0-9]*/status | sort -k2 -n | tail",
        "2. Which limit is full: cat /proc/<pid>/cgroup, then that group's memory.limit_in_bytes and memory.usage_in_bytes (cgroup v1)",
        "   or memory.max, memory.current, memory.swap.max (v2); systemd: systemctl show <unit> -p MemoryMax; containers: their memory limit.",
        "3. Fit the database under it, leaving about a quarter for connections, sorts and the OS, or raise the limit:",
    ]
    if engine in ("mariadb", "mysql", "percona"):
        lines.append("   innodb_buffer_pool_size (it resizes online, in whole innodb_buffer_pool_chunk_size chunks); per connection sort_buffer_size,")
        lines.append("   join_buffer_size and tmp_table_size multiply by max_connections.")
    elif engine == "postgresql":
        lines.append("   shared_buffers (a restart), and work_mem x the sorts and hashes of every connection at once (max_connections).")
    else:
        lines.append("   the engine's cache size (buffer pool, shared buffers, block cache) and its per-connection buffers.")
    lines.append("4. Re-measure: vmstat 1 60 (si and so should stay 0) and cat /proc/pressure/memory before and after a minute of load.")
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="Host short of memory (swapping, memory stalls)",
    area="memory",
    requires=((t.VMSTAT_COUNT, t.PRESSURE, t.MEMINFO_COUNT, t.VMSTAT_SAMPLE),),
    check=check,
    doc=__doc__ or "",
)
