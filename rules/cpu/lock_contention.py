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
    weight / busy weight (the summed sample periods when the samples carry them, else the
    counts; the idle loop and the capture's own tooling left out), judged from
    MIN_BUSY_SAMPLES = 200. Fires at LOCK_SHARE_PCT = 5% or more; critical from
    CRITICAL_SHARE_PCT = 15%. Evidence: the lock owners (with stacks), the hottest lock symbols,
    the processes, and the callers above the lock frames. Owners under OWNER_REMEDY_PCT = 10% of
    the lock samples get no remedy of their own (the heaviest always does). Impact:
    ``cpu_share``, the lock code's share of the host CPU time the profile covers.

Remediation:
    The owner of each lock, from the stack (``dbdiag.rules.cpu.lock_owner``: the innermost frame
    that names one, else the process), gets its own remedy and no other: a qdisc / NIC TX-queue
    lock in NAPI -> more TX queues (``ethtool -L``), an ``mq`` root qdisc, XPS; the NAPI receive
    path -> more RX queues, RPS; a socket lock -> RFS; the kernel's mmap_lock / zone / LRU locks ->
    an allocator that keeps memory (jemalloc), memory reserved at start; InnoDB mutexes ->
    ``SHOW ENGINE INNODB STATUS``, ``performance_schema`` wait/synch summary, the thread pool
    (MariaDB), ``innodb_adaptive_hash_index = OFF`` under ``btr_search_*``; PostgreSQL LWLocks ->
    ``pg_stat_activity.wait_event`` and the lock behind the caller (ProcArrayLock -> PgBouncer,
    buffer mapping -> ``shared_buffers``, WAL -> ``wal_buffers``); a proxy -> its thread count;
    any other kernel lock -> ``perf lock record`` / ``perf lock contention``.

References:
    Brendan Gregg, "Systems Performance" (2nd ed.), 6.5 (lock analysis); perf-lock(1);
    MySQL performance_schema mutex instruments; PostgreSQL "Wait Event" documentation.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import CPU_SHARE, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.cpu import lock_owner, lock_remedies
from dbdiag.rules.cpu.profile import CategoryShare, busy_weight, category_evidence, category_stacks, judge, profile_sources

RULE_ID = "lock-contention"
CATEGORY = "locks-futex"

LOCK_SHARE_PCT = 5.0
CRITICAL_SHARE_PCT = 15.0
OWNER_REMEDY_PCT = 10.0  # owners holding less than this share of the lock samples get no remedy of their own
TOP_OWNERS = 6
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
    owners = _owners(inp)
    if owners is not None:
        evidence.insert(0, _owner_evidence(owners, busy_weight(inp)))
    if top_process is None and (chains := _report_callchains(inp)) is not None:
        evidence.append(chains)
    symbols = next(e for e in evidence if e.title.startswith("Hottest"))
    top_symbol = symbols.rows[0][0] if symbols.rows else "lock code"
    severity = Severity.CRITICAL if share.busy_share_pct >= CRITICAL_SHARE_PCT else Severity.WARNING
    top_owner = owners.row(0, named=True) if owners is not None and owners.height else None
    if top_owner is not None:
        where = f"mostly {lock_remedies.label(top_owner['owner'])}" + (f" ({top_owner['caller']})" if top_owner["caller"] else "")
        subject = top_owner["owner"]
    else:
        where = f"in {top_process}" if top_process else f"top: {top_symbol}"
        subject = top_process or top_symbol
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"Lock contention: {share.busy_share_pct:.1f}% of busy CPU {share.basis} in lock code, {where}; "
            f"threshold {LOCK_SHARE_PCT:.0f}%"
        ),
        subject=subject,
        impact={
            "share_pct": round(share.busy_share_pct, 1),
            CPU_SHARE: share.cpu_share,
            "description": f"{share.samples:,} of {share.busy_samples:,} busy samples spinning on or waiting for locks ({share.basis})",
            "samples": share.samples,
            "busy_samples": share.busy_samples,
            "event": share.event,
        },
        evidence=tuple(evidence),
        remediation=_remediation(owners, top_symbol, top_process),
        sources=profile_sources(inp),
    )


def _owners(inp: RuleInput) -> pl.DataFrame | None:
    """Per owner of the lock stacks: weight, samples, processes (busiest first) and the busiest caller; heaviest first."""
    stacks = category_stacks(inp, CATEGORY)
    if stacks is None or stacks.height == 0:
        stacks = _flat_entries(inp)
        if stacks is None:
            return None
    named = lock_owner.owners(stacks)
    callers = (
        named.group_by("owner", "caller").agg(pl.col("weight").sum())
        .sort(["weight", "caller"], descending=[True, False], nulls_last=True)
        .group_by("owner", maintain_order=True).agg(pl.col("caller").drop_nulls().first())
    )
    processes = (
        named.group_by("owner", "comm").agg(pl.col("weight").sum())
        .sort(["weight", "comm"], descending=[True, False])
        .group_by("owner", maintain_order=True).agg(pl.col("comm").drop_nulls())
    )
    return (
        named.group_by("owner").agg(pl.col("samples").sum(), pl.col("weight").sum())
        .join(callers, on="owner", how="left").join(processes, on="owner", how="left")
        .with_columns((pl.col("weight") / pl.col("weight").sum()).alias("of_locks"))
        .sort(["weight", "owner"], descending=[True, False])
    )


def _flat_entries(inp: RuleInput) -> pl.DataFrame | None:
    """Without stacks (perf report / perf top): each lock entry as a one-frame stack of its process."""
    symbols = inp.table(t.CPU_PROFILE_SYMBOL, keep_empty=True)
    if symbols is None or "weight" not in symbols.columns:
        return None
    rows = symbols.filter((pl.col("category") == CATEGORY) & ~pl.col("tooling").fill_null(False))
    if rows.height == 0:
        return None
    return rows.select("comm", pl.col("symbol").alias("stack"), "samples", "weight", pl.col("kernel").alias("leaf_kernel"),
                       pl.col("database_process") if "database_process" in rows.columns else pl.lit(False).alias("database_process"))


def _owner_evidence(owners: pl.DataFrame, whole_weight: float) -> Evidence:
    rows = tuple(
        (
            lock_remedies.label(row["owner"]), row["caller"] or "—", ", ".join(row["comm"][:3]), int(row["samples"]),
            round(100.0 * row["weight"] / whole_weight, 1) if whole_weight else 0.0, round(100.0 * row["of_locks"], 1),
        )
        for row in owners.head(TOP_OWNERS).iter_rows(named=True)
    )
    return Evidence(
        title="Whose locks (owner named by the innermost frame of the stack that names one, else by the process)",
        columns=("owner", "taken in (busiest caller)", "processes", "samples", "% of busy samples", "% of lock samples"),
        rows=rows,
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


def _remediation(owners: pl.DataFrame | None, symbol: str, process: str | None) -> str:
    """Each owner's own remedy (owners under OWNER_REMEDY_PCT of the lock samples left out, the top one always in)."""
    if owners is None or owners.height == 0:
        owner = lock_owner.process_owner(process, process is not None and lock_remedies.engine_of([process]) is not None, None)
        lines = [f"The hottest lock symbol is {symbol}" + (f", mostly in {process}." if process else "."),
                 "Without stacks the owner is the process's:", *lock_remedies.remedy(owner, [process] if process else [], None)]
        return "\n".join(lines)
    lines = ["Each lock's owner and its remedy (heaviest first):"]
    for index, row in enumerate(owners.head(TOP_OWNERS).iter_rows(named=True), start=1):
        if index > 1 and 100.0 * row["of_locks"] < OWNER_REMEDY_PCT:
            break
        remedy = lock_remedies.remedy(row["owner"], list(row["comm"]), row["caller"])
        lines.append(f"{index}. {remedy[0]} {100.0 * row['of_locks']:.0f}% of the lock samples")
        lines.extend(remedy[1:])
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="CPU spent in lock code (spin locks, mutexes, futexes)",
    area="cpu",
    requires=((t.PERF_STACK, t.PERF_SYMBOL),),
    check=check,
    doc=__doc__ or "",
)
