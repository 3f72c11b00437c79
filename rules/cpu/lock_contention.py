"""Lock contention: CPU burnt spinning on or waiting for locks (spin locks, mutexes, futexes).

What it detects:
    A CPU profile whose "locks-futex" category — kernel spin locks
    (``native_queued_spin_lock_slowpath``, ``_raw_spin_lock*``), mutexes and rw-semaphores
    (``__mutex_lock``, ``osq_lock``, ``rwsem_*``), futex calls (``futex_wait*``, ``do_futex``),
    user-space lock slow paths (``__lll_lock_wait``, ``pthread_mutex_lock``), InnoDB's spin waits
    (``ut_delay``, ``PolicyMutex``, ``sync_array_*``) and PostgreSQL's (``LWLockAcquire``,
    ``s_lock``, ``spin_delay``) — holds a large share of the busy samples.

Why it matters:
    A sampled CPU is running, so samples in lock code are CPU spent spinning or entering
    and leaving waits rather than doing work; adding cores or connections makes it worse.
    The caller frames say which lock: the buffer pool, the transaction system, a kernel
    lock behind a syscall, the log.

How it is detected:
    Inputs: ``perf_stack`` or ``perf_symbol`` through the derived CPU profile. Share = locks-futex
    samples / busy (non-idle) samples, judged from MIN_BUSY_SAMPLES = 200. Fires at
    LOCK_SHARE_PCT = 5% or more; critical from CRITICAL_SHARE_PCT = 15%. Evidence: the hottest
    lock symbols, the processes, and (with stacks) the callers above the lock frames.

Remediation:
    Follow the callers. InnoDB: the buffer pool mutexes (``innodb_buffer_pool_instances``),
    hot rows or the auto-increment lock (``innodb_autoinc_lock_mode=2``), the redo log
    (``innodb_log_file_size``, group commit); adaptive hash index (``innodb_adaptive_hash_index=OFF``
    when ``btr_search_*`` callers dominate). PostgreSQL: ``LWLock`` waits in
    ``pg_stat_activity.wait_event`` (buffer mapping -> larger ``shared_buffers``; WALWrite ->
    ``wal_buffers``, faster WAL disk; lock manager -> fewer partitions touched). Kernel spin
    locks under syscalls: the caller says which (``futex`` hash, ``mmap_sem`` from many threads
    allocating memory — use a pooled allocator such as jemalloc — or a network lock). Fewer
    concurrent threads (a thread pool or pooler) lowers contention on every lock.

References:
    Brendan Gregg, "Systems Performance" (2nd ed.), 6.5 (lock analysis); perf-lock(1);
    MySQL performance_schema mutex instruments; PostgreSQL "Wait Event" documentation.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.cpu.profile import CategoryShare, category_evidence, judge, profile_sources

RULE_ID = "lock-contention"
CATEGORY = "locks-futex"

LOCK_SHARE_PCT = 5.0
CRITICAL_SHARE_PCT = 15.0
LOCK_FRAME = (
    r"(spin_lock|spin_unlock|queued_spin|_raw_spin|__mutex_lock|mutex_lock|mutex_spin_on_owner|osq_lock|rwsem|"
    r"futex|__lll_lock_wait|__lll_unlock_wake|pthread_mutex|pthread_rwlock|ut_delay|PolicyMutex|TTASEventMutex|"
    r"sync_array_|LWLock|s_lock|spin_delay|native_queued)"
)


def check(inp: RuleInput) -> Verdict:
    share, measured, fires = judge(inp, CATEGORY, LOCK_SHARE_PCT)
    return Verdict(findings=[_finding(inp, share)] if fires else [], measured=measured)


def _finding(inp: RuleInput, share: CategoryShare) -> Finding:
    evidence, top_process = category_evidence(inp, share, LOCK_FRAME)
    if top_process is None and (chains := _report_callchains(inp)) is not None:
        evidence.append(chains)
    top_symbol = evidence[0].rows[0][0] if evidence[0].rows else "lock code"
    severity = Severity.CRITICAL if share.busy_share_pct >= CRITICAL_SHARE_PCT else Severity.WARNING
    who = f" in {top_process}" if top_process else ""
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"Lock contention: {share.busy_share_pct:.1f}% of busy CPU samples in lock code{who} "
            f"(top: {top_symbol}); threshold {LOCK_SHARE_PCT:.0f}%"
        ),
        subject=top_process or top_symbol,
        impact={
            "share_pct": round(share.busy_share_pct, 1),
            "description": f"{share.samples:,} of {share.busy_samples:,} busy samples spinning on or waiting for locks",
            "samples": share.samples,
            "busy_samples": share.busy_samples,
            "event": share.event,
        },
        evidence=tuple(evidence),
        remediation=_remediation(top_symbol, top_process),
        sources=profile_sources(inp),
    )


def _report_callchains(inp: RuleInput) -> Evidence | None:
    """Without perf script stacks: the call chains perf report printed under lock symbols."""
    chains = inp.table(t.PERF_CALLCHAIN)
    if chains is None:
        return None
    locks = chains.filter(pl.col("entry_symbol").str.contains(LOCK_FRAME)).sort("share_pct", descending=True).head(10)
    if locks.height == 0:
        return None
    return Evidence(
        title="Call chains under lock symbols (perf report)",
        columns=("lock symbol", "chain (root first)", "% as printed"),
        rows=tuple(locks.select("entry_symbol", "chain", "share_pct").rows()),
    )


def _remediation(symbol: str, process: str | None) -> str:
    lines = [f"The hottest lock symbol is {symbol}" + (f", mostly in {process}." if process else ".")]
    lines.append("1. Name the lock from the callers above (evidence), then:")
    lines.append("   InnoDB: SELECT * FROM performance_schema.events_waits_summary_global_by_event_name")
    lines.append("           WHERE event_name LIKE 'wait/synch/%' ORDER BY sum_timer_wait DESC LIMIT 10;")
    lines.append("   PostgreSQL: SELECT wait_event_type, wait_event, count(*) FROM pg_stat_activity GROUP BY 1, 2 ORDER BY 3 DESC;")
    lines.append("   Kernel locks: perf lock record -a -- sleep 10; perf lock report")
    lines.append("2. Fewer concurrent threads lowers every lock's contention: thread pool (pool-of-threads) or PgBouncer.")
    lines.append("3. Engine-specific: innodb_buffer_pool_instances, innodb_adaptive_hash_index=OFF when btr_search_* callers")
    lines.append("   dominate, innodb_autoinc_lock_mode=2; PostgreSQL: shared_buffers (buffer mapping), wal_buffers (WALWrite).")
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="CPU spent in lock code (spin locks, mutexes, futexes)",
    area="cpu",
    requires=((t.PERF_STACK, t.PERF_SYMBOL),),
    check=check,
    doc=__doc__ or "",
)
