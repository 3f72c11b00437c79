"""Context switching takes a large share of the CPU: the scheduler is hot in the CPU profile.

What it detects:
    A CPU profile (``perf script`` call stacks, or ``perf report``/``perf top`` when there are no
    stacks) in which the kernel's context-switch path — ``finish_task_switch``, ``__schedule``,
    ``schedule``, ``context_switch``, ``__switch_to``, ``pick_next_task*``, wake-ups
    (``try_to_wake_up``), the "scheduler" category of the profile — holds a large share of the
    samples the machine spent working.

Why it matters:
    Every switch costs the switch itself plus cold caches and TLBs afterwards. A database
    with thousands of runnable threads (one per connection), a proxy with more threads than
    cores, or threads that sleep and wake for every packet turn a 48-core machine into one
    doing a fraction of the work: in the field case behind this rule ``finish_task_switch``
    alone was about 20% of all samples, and the identical server without the problem did
    twice the TPS.

How it is detected:
    Inputs: ``perf_stack`` or ``perf_symbol``, through the derived CPU profile (one event: the
    time-based one when several were recorded). Share = scheduler-category samples / busy
    samples (all samples minus the idle loop, so an idle machine does not hide the share).
    Judged from MIN_BUSY_SAMPLES = 200 busy samples. Fires at SCHED_SHARE_PCT = 10% or more;
    critical from CRITICAL_SHARE_PCT = 20%. Evidence: the hottest scheduler symbols, the
    processes, and (with stacks) the caller paths that entered the scheduler (futex waits,
    poll/epoll, nanosleep, I/O waits).

Remediation:
    Fewer runnable threads per core: a thread pool in the database (MariaDB/Percona
    ``thread_handling=pool-of-threads`` with ``thread_pool_size`` = cores; MySQL Enterprise
    thread pool or ``innodb_thread_concurrency``), a transaction-mode pooler in front of
    PostgreSQL (PgBouncer ``pool_mode=transaction``, ``default_pool_size`` about 2-4 x cores),
    smaller application pools, TiDB ``token-limit``; proxies with ``nbthread`` no larger than the
    cores of their node, one process per node (HAProxy ``cpu-map``). Bind each instance to a node
    (``numactl --cpunodebind=N --membind=N``) so that wake-ups stay local. Confirm with
    ``pidstat -w 1`` (cswch/s, nvcswch/s per process) and ``perf sched record`` / ``perf sched latency``.

References:
    Brendan Gregg, "Systems Performance" (2nd ed.), 6.6 (scheduler analysis);
    perf-sched(1); MariaDB thread pool documentation; PgBouncer documentation.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.cpu.profile import CategoryShare, category_evidence, judge, profile_sources

RULE_ID = "context-switch-overhead"
CATEGORY = "scheduler"

SCHED_SHARE_PCT = 10.0
CRITICAL_SHARE_PCT = 20.0
# Frames that belong to the switch itself; the rows of "paths into" start above them.
SCHEDULER_FRAME = (
    r"^(finish_task_switch|__schedule|schedule|schedule_idle|schedule_hrtimeout_range(_clock)?|schedule_timeout|"
    r"schedule_preempt_disabled|preempt_schedule\w*|context_switch|__switch_to\w*|pick_next_task\w*|"
    r"__pick_next_task\w*|put_prev_task\w*|dequeue_task\w*|enqueue_task\w*|try_to_wake_up|ttwu_\w+|"
    r"update_curr\w*|update_rq_clock\w*|switch_mm\w*|__switch_mm\w*|finish_lock_switch|raw_spin_rq_unlock\w*|"
    r"_raw_spin_unlock_irq|__raw_spin_unlock_irq|psi_task_switch|psi_group_change)(\.\w+)*$"
)


def check(inp: RuleInput) -> Verdict:
    share, measured, fires = judge(inp, CATEGORY, SCHED_SHARE_PCT)
    return Verdict(findings=[_finding(inp, share)] if fires else [], measured=measured)


def _finding(inp: RuleInput, share: CategoryShare) -> Finding:
    evidence, top_process = category_evidence(inp, share, SCHEDULER_FRAME)
    switches = _context_switch_counts(inp)
    if switches is not None:
        evidence.append(switches)
    severity = Severity.CRITICAL if share.busy_share_pct >= CRITICAL_SHARE_PCT else Severity.WARNING
    who = f" (mostly {top_process})" if top_process else ""
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=severity,
        title=(
            f"Context switching takes {share.busy_share_pct:.1f}% of busy CPU samples{who}; "
            f"threshold {SCHED_SHARE_PCT:.0f}%"
        ),
        subject=top_process or "host",
        impact={
            "share_pct": round(share.busy_share_pct, 1),
            "cpu_share": round(share.cpu_share, 4),
            "description": f"{share.samples:,} of {share.busy_samples:,} busy samples in the scheduler's switch path",
            "samples": share.samples,
            "busy_samples": share.busy_samples,
            "event": share.event,
        },
        evidence=tuple(evidence),
        remediation=_remediation(top_process),
        sources=profile_sources(inp),
    )


def _context_switch_counts(inp: RuleInput) -> Evidence | None:
    """voluntary/nonvoluntary switch counters of the processes whose /proc/PID/status was captured."""
    settings = inp.table(t.HOST_SETTING)
    if settings is None:
        return None
    counters = settings.filter(
        pl.col("category") == "process_affinity",
        pl.col("name").is_in(["voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"]),
    )
    if counters.height == 0:
        return None
    wide = counters.pivot(on="name", index="subject", values="value", aggregate_function="first").sort("subject")
    columns = [c for c in ("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches") if c in wide.columns]
    return Evidence(
        title="Context switches since process start (/proc/PID/status)",
        columns=("process", *columns),
        rows=tuple(wide.select("subject", *columns).rows()),
    )


# The thread pool of the process that switches most: only its own line when it is a database or proxy.
_POOL_LINES = {
    "mariadbd": "   MariaDB: thread_handling=pool-of-threads, thread_pool_size=<cores of the instance>",
    "mysqld": "   MySQL/Percona: thread_handling=pool-of-threads (Percona), the thread_pool plugin (MySQL Enterprise), thread_pool_size=<cores>",
    "postgres": "   PostgreSQL: PgBouncer in front, pool_mode=transaction, default_pool_size = 2-4 x cores",
    "tidb-server": "   TiDB: token-limit and the application pools",
    "haproxy": "   HAProxy: nbthread <= cores of its node",
}


def _pool_lines(top_process: str | None) -> list[str]:
    if top_process in _POOL_LINES:
        return [_POOL_LINES[top_process]]
    return [
        "   MariaDB/Percona: thread_handling=pool-of-threads, thread_pool_size=<cores of the instance>",
        "   PostgreSQL: PgBouncer in front, pool_mode=transaction, default_pool_size = 2-4 x cores",
        "   TiDB: token-limit and the application pools; proxies: nbthread <= cores of their node",
    ]


def _remediation(top_process: str | None) -> str:
    target = top_process or "the busiest process"
    return "\n".join(
        [
            f"1. See who switches and how often: pidstat -w 1 10 (cswch/s, nvcswch/s of {target}); vmstat 1 (cs column).",
            "2. Cut runnable threads per core:",
            *_pool_lines(top_process),
            "3. Keep wake-ups local: numactl --cpunodebind=<node> --membind=<node> <service> for each instance,",
            "   HAProxy: one process per node with cpu-map.",
            "4. Re-profile (perf record -a -g -- sleep 30) and compare finish_task_switch's share.",
        ]
    )


RULE = Rule(
    id=RULE_ID,
    title="Context switching takes a large share of CPU",
    area="cpu",
    requires=((t.PERF_STACK, t.PERF_SYMBOL),),
    check=check,
    doc=__doc__ or "",
)
