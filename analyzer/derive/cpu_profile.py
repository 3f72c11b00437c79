"""CPU profile: perf samples -> one category per folded stack, hot symbols, ``metrics.cpu_profile``.

Input is ``perf_stack`` (folded ``perf script`` stacks); without it, ``perf_symbol`` (``perf report``
/ ``perf top`` flat entries, with ``perf_callchain`` branches when printed).

**Weights.** Shares are of the summed sample periods when every sample of the chosen event
printed one (``perf script`` prints it by default): in frequency mode (``-F``) and for hardware
events (``cycles:u``) perf changes the period from sample to sample, and a sample of a process
that just started may stand for a few hundred cycles where a steady one stands for millions.
Counted by samples, ``_start`` of short-lived processes took 10% of a ``cycles:u`` profile where
by period it was 0.01%. This is what ``perf report`` shows as Overhead. Without periods, shares
are of sample counts (as ``stackcollapse-perf.pl`` counts them); perf report's printed
percentages are already by period.

**Tooling.** Samples of the capture's own tools (perf, mpstat, pt-query-digest, tar/gzip,
the collector's shells...: :mod:`dbdiag.derive.cpu_tooling`) are listed apart (``tooling``) and
left out of the categories, hot symbols, processes, flame graph and busy shares the rules judge.

**Categories.** Each stack gets exactly one of :data:`CATEGORIES`. The frames are walked from the
sampled (leaf) frame towards the root, and **the innermost frame that matches a category decides**;
within one frame the patterns are tried in the order of :data:`FRAME_RULES` (idle, locks-futex,
memory-copy, scheduler, page-faults-numa, softirq-network, syscalls, runtime-gc). Why innermost:
the CPU was spending the sample in the deepest recognised code, and an outer frame only says how
it got there. This gives what the usual rules of thumb want:

- *idle* only when the idle loop itself was sampled (``do_idle;...;native_safe_halt``). An
  interrupt taken in the idle loop (``native_safe_halt;asm_common_interrupt;...;net_rx_action``)
  is work, and is classified by the frames above the idle loop.
- the leaf decides *scheduler*, *locks-futex* and *memory-copy* (``...;_raw_spin_lock_bh;
  native_queued_spin_lock_slowpath`` is lock spinning even under ``net_rx_action``;
  ``tcp_recvmsg;...;copy_user_enhanced_fast_string`` is copying even inside a ``read``).
- *page-faults-numa* and *softirq-network* are decided by frames anywhere up the stack when the
  leaf itself says nothing (``exc_page_fault;...;get_page_from_freelist;clear_page_erms`` is a
  fault; the same ``clear_page_erms`` under ``net_rx_action`` is network buffer allocation).
- *syscalls* only when nothing more specific was found between the leaf and the syscall entry.
- interrupt and softirq entry frames count as *softirq-network* ("softirq and network", the
  issue's category; mpstat's %irq + %soft): the symbol table tells which softirq.

When no frame matches: a leaf ``clear_page*`` means page-faults-numa (flat profiles have no stack);
then the process decides: the idle task (``swapper``) -> idle, JVM GC threads -> runtime-gc, a
database engine (by comm, or any thread of a pid that has a database comm) -> database; else other.

Outputs of :func:`cpu_profile`:

- ``cpu_profile_stacks``: the ``perf_stack`` rows of the chosen event plus ``category``,
  ``database_process``, ``weight`` (period sum or samples) and ``tooling`` (perf script input only).
- ``cpu_profile_symbols``: per (comm, leaf symbol, category, tooling): ``samples``, ``weight``,
  ``kernel``, ``database_process``, ``share_pct`` (of the whole weight) and ``busy_share_pct`` (of the busy weight;
  null for idle and tooling).
- ``metrics.cpu_profile``: ``samples`` = ``idle_samples`` + ``tooling_samples`` + ``busy_samples``,
  ``weight`` ("period", "samples" or "percent") with ``weight_note``, ``total_weight``,
  ``busy_weight`` (and ``period_total``), ``busy_pct`` (busy weight of all), ``event`` (as
  printed) with ``event_reason`` and ``events`` (all events seen), ``source_kind`` ("perf script"
  / "perf report"), ``sources``, ``kernel`` (leaf in kernel code), ``categories`` (idle and busy,
  every category with zeros: ``samples``, ``weight``, ``share_pct``, ``busy_share_pct``,
  ``top_symbols``), ``top_symbols`` (one row per hottest busy leaf symbol: ``symbol``, ``category``
  (its heaviest), ``categories`` (the breakdown), ``samples``, ``share_pct``, ``busy_share_pct``,
  ``kernel``, ``processes``), ``processes`` (busy, with ``top_category``), ``tooling``
  (``samples``, ``share_pct`` of all, ``non_idle_share_pct``, ``processes``), and ``flame`` (the
  pruned call tree of the busy samples, see :mod:`dbdiag.flamegraph`). From perf report:
  ``samples_exact`` (false when counts were estimated from percentages), ``listed_share_pct``
  (the share the report printed at all) and ``tooling_note`` when it has no Command column.
  Field names and share rules: :mod:`dbdiag.derive.cpu_profile_summary`.

>>> frame_category(["do_idle", "default_idle_call", "native_safe_halt"], comm="swapper")
'idle'
>>> frame_category(["do_idle", "native_safe_halt", "asm_common_interrupt", "handle_softirqs",
...                 "net_rx_action", "__napi_poll", "_raw_spin_lock", "native_queued_spin_lock_slowpath"])
'locks-futex'
>>> frame_category(["net_rx_action", "__napi_poll", "__alloc_pages", "clear_page_erms"])
'softirq-network'
>>> frame_category(["[libc.so.6]", "asm_exc_page_fault", "__handle_mm_fault", "clear_page_erms"])
'page-faults-numa'
>>> frame_category(["do_command", "mysql_parse", "JOIN::exec"], comm="mysqld")
'database'
>>> frame_category(["read", "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_read", "vfs_read"])
'syscalls'
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import polars as pl

from dbdiag import flamegraph
from dbdiag import tables as t
from dbdiag.derive.cpu_profile_summary import summarise
from dbdiag.derive.cpu_tooling import tooling_expr
from dbdiag.patterns import lazy_compile
from dbdiag.vocabulary.processes import profile_database_comm_pattern

IDLE = "idle"
SOFTIRQ_NETWORK = "softirq-network"
SCHEDULER = "scheduler"
LOCKS_FUTEX = "locks-futex"
PAGE_FAULTS_NUMA = "page-faults-numa"
MEMORY_COPY = "memory-copy"
SYSCALLS = "syscalls"
RUNTIME_GC = "runtime-gc"
DATABASE = "database"
OTHER = "other"
CATEGORIES = (IDLE, SOFTIRQ_NETWORK, SCHEDULER, LOCKS_FUTEX, PAGE_FAULTS_NUMA, MEMORY_COPY, SYSCALLS, RUNTIME_GC, DATABASE, OTHER)

# Frame patterns, matched against the frame with compiler/linker suffixes removed (see _normalise).
IDLE_FRAMES = (
    r"do_idle|cpu_idle\w*|default_idle\w*|arch_cpu_idle\w*|(pv_)?native_safe_halt|safe_halt|xen_safe_halt"
    r"|intel_idle\w*|acpi_idle\w*|acpi_safe_halt|poll_idle|cpuidle_enter\w*|call_cpuidle|mwait_idle\w*"
    r"|amd_e400_idle|cpu_startup_entry|cpu_do_idle|psw_idle|tick_nohz_idle_\w+|menu_select|cpuidle_\w+"
)
LOCK_FRAMES = (
    r"(native_|__pv_|pv_)?queued_spin_lock_slowpath|queued_(read|write)_lock_slowpath|_raw_spin_lock\w*"
    r"|_raw_(read|write)_lock\w*|__mutex_lock\w*|mutex_spin_on_owner|osq_lock|rwsem_\w+|__down_\w+"
    r"|futex_wait\w*|futex_wake\w*|do_futex|futex_q_lock|(__x64_sys|__arm64_sys|__se_sys|__do_sys|sys)_futex\w*"
    r"|__lll_lock_wait\w*|lll_mutex_lock_optimized|_*pthread_mutex_(lock|timedlock)\w*|_*pthread_rwlock_\w*lock\w*"
    r"|pthread_spin_lock|ut_delay|PolicyMutex\b.*|TTASEventMutex\b.*|TTASFutexMutex\b.*|sync_array_\w+"
    r"|mutex_spin_wait|rw_lock_(s|x|sx)_lock\w*|(srw_mutex_impl|ssux_lock_impl|srw_lock_impl)\b.*(wait|spin).*"
    r"|LWLockAcquire\w*|LWLockWaitListLock|LWLockWaitForVar|s_lock|perform_spin_delay|spin_delay"
    r"|sync\.\(\*(Mutex|RWMutex)\)\.\w*(Slow|lock|Lock)\w*"
)
MEMORY_COPY_FRAMES = (
    r"_*mem(cpy|move|set|pcpy)\w*|__GI_mem(cpy|move|set)\w*|copy_user_\w+|_*copy_(to|from)_user\w*"
    r"|_copy_(to|from)_iter\w*|rep_movs_alternative|rep_stos_alternative|copy_page\w*|clear_user\w*"
    r"|runtime\.mem(move|clr\w*)"
)
SCHEDULER_FRAMES = (
    r"finish_task_switch|__schedule|schedule|schedule_idle|schedule_timeout|schedule_hrtimeout\w*|preempt_schedule\w*"
    r"|context_switch|__switch_to\w*|pick_next_task\w*|pick_next_entity|put_prev_task\w*|set_next_entity"
    r"|dequeue_task\w*|enqueue_task\w*|dequeue_entity|enqueue_entity|try_to_wake_up|ttwu_\w+|wake_up_q"
    r"|update_curr\w*|update_load_avg|__update_load_avg\w*|update_cfs_group|update_rq_clock\w*|activate_task|deactivate_task"
    r"|select_task_rq\w*|check_preempt\w*|resched_curr|load_balance|newidle_balance|sched_balance_\w+|_?nohz_\w*balance\w*"
    r"|update_sd_lb_stats|find_busiest_group|run_rebalance_domains|rebalance_domains|psi_task_\w+|psi_group_change"
    r"|scheduler_tick|sched_tick|task_tick_fair|do_sched_yield|(__x64_sys|__arm64_sys)_sched_yield|migration_cpu_stop"
    r"|active_load_balance_cpu_stop|sched_ttwu_pending"
)
PAGE_FAULT_FRAMES = (
    r"asm_exc_page_fault|page_fault|do_page_fault|exc_page_fault|do_user_addr_fault|_*handle_mm_fault"
    r"|do_anonymous_page|do_huge_pmd_anonymous_page|do_fault|do_wp_page|handle_pte_fault|do_numa_page"
    r"|do_huge_pmd_numa_page|numa_migrate_prep|migrate_misplaced_(page|folio)\w*|migrate_pages\w*"
    r"|task_numa_work|task_numa_fault|task_numa_placement|change_prot_numa|numamigrate_isolate_page"
    r"|el0_da|do_mem_abort|do_translation_fault"
)
SOFTIRQ_NETWORK_FRAMES = (
    r"net_rx_action|net_tx_action|__napi_poll|napi_\w+|\w+_poll_(rx|tx)\w*|virtnet_poll\w*|netif_receive_skb\w*"
    r"|__netif_receive_skb\w*|process_backlog|ip_rcv\w*|ip6_rcv\w*|ip_list_rcv|tcp_v4_rcv|tcp_v6_rcv|udp_rcv"
    r"|handle_softirqs|__do_softirq|do_softirq\w*|run_ksoftirqd|_*irq_exit\w*|asm_common_interrupt|common_interrupt"
    r"|do_IRQ|asm_sysvec_\w+|sysvec_\w+|__sysvec_\w+|handle_irq_event\w*|smp_apic_timer_interrupt|apic_timer_interrupt"
    r"|ret_from_intr|el1_interrupt|gic_handle_irq"
)
SYSCALL_FRAMES = (
    r"entry_SYSCALL_64\w*|do_syscall_64|__x64_sys_\w+|__ia32_sys_\w+|__arm64_sys_\w+|__se_sys_\w+|__do_sys_\w+"
    r"|syscall_exit_to_user_mode\w*|el0_svc\w*|invoke_syscall|system_call(_fastpath)?|sys_\w+"
)
RUNTIME_GC_FRAMES = (
    # Go: the collector and the allocator only; runtime.goexit / runtime.mstart root every goroutine and thread
    r"runtime\.(gc\w*|scanobject|greyobject|findObject|markroot\w*|scanblock|scanstack|scanframeworker|shade|wbBuf\w*"
    r"|bgsweep|sweepone|bgscavenge|mallocgc\w*|largeAlloc|nextFreeFast|heapBitsSetType|markBits\w*"
    r"|\(\*(mheap|mcentral|mcache|mspan|gcWork|gcControllerState|sweepLocked)\)\.\w+)"
    r"|(G1|PS|Par|CMS|Z|Shenandoah|Serial|Young|Old)\w*::.*|GCTaskThread::.*|ConcurrentGCThread::.*"
    r"|GangWorker::.*|WorkerThread::.*|SpinPause|OopMapCache::.*|InstanceKlass::oop_oop_iterate.*"
)
# Leaf-only hint used when no frame matched (flat profiles): zeroing pages is what faults do.
PAGE_FAULT_LEAF_HINT = r"clear_page\w*|clear_huge_page\w*|clear_subpage"

# Ordered: within one frame the first matching rule wins (the walk order is described above).
FRAME_RULES: tuple[tuple[str, str], ...] = (
    (IDLE, IDLE_FRAMES),
    (LOCKS_FUTEX, LOCK_FRAMES),
    (MEMORY_COPY, MEMORY_COPY_FRAMES),
    (SCHEDULER, SCHEDULER_FRAMES),
    (PAGE_FAULTS_NUMA, PAGE_FAULT_FRAMES),
    (SOFTIRQ_NETWORK, SOFTIRQ_NETWORK_FRAMES),
    (SYSCALLS, SYSCALL_FRAMES),
    (RUNTIME_GC, RUNTIME_GC_FRAMES),
)

IDLE_COMMS = r"swapper(/\d+)?|idle"
GC_COMMS = r"(GC Thread|GC task thread|ParGC Thread|G1 |Gang worker|ZWorker|ZDriver|Shenandoah|CMS |VM Periodic).*"
DATABASE_COMMS = profile_database_comm_pattern()

# Compiler clones and symbol versions: "finish_task_switch.isra.0", "memcpy@@GLIBC_2.14", "read@plt".
_SUFFIX = r"(\.(isra|constprop|part|cold|lto_priv|llvm)(\.\d+)?)+$|@@?[\w.]+$|@plt$|_\[[kij]\]$"

TIME_EVENTS = ("cpu-clock", "task-clock", "cycles", "cpu-cycles", "ref-cycles")
FLAME_MIN_SHARE = 0.001  # frames under 0.1% of the busy samples are not drawn
FLAME_MAX_NODES = 3000


def _anchored(pattern: str) -> str:
    return f"^(?:{pattern})$"


_COMPILED_RULES = tuple((category, lazy_compile(_anchored(pattern))) for category, pattern in FRAME_RULES)
_LEAF_HINT = lazy_compile(_anchored(PAGE_FAULT_LEAF_HINT))
_SUFFIX_RE = lazy_compile(_SUFFIX)


def _normalise(frame: str) -> str:
    return _SUFFIX_RE.sub("", frame.strip())


def _frame_rule(frame: str) -> str | None:
    name = _normalise(frame)
    for category, pattern in _COMPILED_RULES:
        if pattern.match(name):
            return category
    return None


def frame_category(stack_frames: Sequence[str], comm: str | None = None, database_process: bool = False) -> str:
    """The category of one stack (frames root first, leaf last), by the rules in the module docstring.

    ``database_process`` marks a thread of a database engine whose own comm does not say so
    (MySQL 8 names threads ``connection``, ``ib_io_wr-1``...).

    >>> frame_category(["start_thread", "do_handle_one_connection", "ut_delay"], comm="connection")
    'locks-futex'
    >>> frame_category(["start_thread", "row_search_mvcc"], comm="connection", database_process=True)
    'database'
    >>> frame_category(["finish_task_switch.isra.0"])
    'scheduler'
    >>> frame_category(["__memmove_avx512_unaligned_erms"], comm="mariadbd")
    'memory-copy'
    >>> frame_category(["[unknown]"], comm="swapper")
    'idle'
    """
    for frame in reversed(stack_frames):
        category = _frame_rule(frame)
        if category is not None:
            return category
    if stack_frames and _LEAF_HINT.match(_normalise(stack_frames[-1])):
        return PAGE_FAULTS_NUMA
    return _comm_category(comm, database_process)


def _comm_category(comm: str | None, database_process: bool) -> str:
    comm = comm or ""
    if re.fullmatch(IDLE_COMMS, comm):
        return IDLE
    if re.fullmatch(GC_COMMS, comm):
        return RUNTIME_GC
    if database_process or re.fullmatch(DATABASE_COMMS, comm):
        return DATABASE
    return OTHER


def _frame_category_expr(frame: pl.Expr) -> pl.Expr:
    """Vectorised :func:`_frame_rule` over a column of (normalised) frame names."""
    expr = pl.lit(None, dtype=pl.String)
    for category, pattern in reversed(FRAME_RULES):
        expr = pl.when(frame.str.contains(_anchored(pattern))).then(pl.lit(category)).otherwise(expr)
    return expr


def database_pids(stacks: pl.DataFrame) -> set[int]:
    """Pids with at least one thread whose comm names a database engine."""
    if "pid" not in stacks.columns or not stacks.height:
        return set()
    rows = stacks.filter(pl.col("pid").is_not_null() & pl.col("comm").fill_null("").str.contains(_anchored(DATABASE_COMMS)))
    return set(rows["pid"].unique().to_list())


def categorize(stacks: pl.DataFrame) -> pl.DataFrame:
    """``stacks`` (a ``perf_stack`` frame) with a ``category`` column, the same as :func:`frame_category`
    gives, and ``database_process`` (a database engine's thread, by its comm or its pid's).

    Vectorised: the frames are exploded once, each distinct frame name is matched once, and per
    stack the matching frame nearest the leaf wins.

    >>> frame = t.conform(t.PERF_STACK, pl.DataFrame({
    ...     "comm": ["swapper", "mysqld", "connection"], "pid": [0, 10, 10], "tid": [0, 10, 11],
    ...     "stack": ["do_idle;native_safe_halt", "main;do_command;mysql_parse", "start_thread;ut_delay"],
    ...     "samples": [90, 7, 3]}))
    >>> categorize(frame)["category"].to_list()
    ['idle', 'database', 'locks-futex']
    """
    if not stacks.height:
        return stacks.with_columns(pl.lit(None, dtype=pl.String).alias("category"), pl.lit(False).alias("database_process"))
    indexed = stacks.with_row_index("_row")
    frames = (
        indexed.select("_row", pl.col("stack").fill_null("").str.split(";").alias("_frame"))
        .with_columns(pl.int_ranges(0, pl.col("_frame").list.len()).alias("_depth"))
        .explode("_frame", "_depth")
        .drop_nulls("_frame")
    )
    names = frames.select(pl.col("_frame").unique())
    names = names.with_columns(pl.col("_frame").str.strip_chars().str.replace(_SUFFIX, "").alias("_norm"))
    names = names.with_columns(
        _frame_category_expr(pl.col("_norm")).alias("_frame_category"),
        pl.col("_norm").str.contains(_anchored(PAGE_FAULT_LEAF_HINT)).alias("_leaf_hint"),
    )
    frames = frames.join(names, on="_frame", how="left")
    innermost = (
        frames.filter(pl.col("_frame_category").is_not_null())
        .group_by("_row")
        .agg(pl.col("_frame_category").sort_by("_depth").last().alias("_walk"))
    )
    leaf_hint = frames.group_by("_row").agg(pl.col("_leaf_hint").sort_by("_depth").last().alias("_hint"))
    db_pids = database_pids(stacks)
    comm = pl.col("comm").fill_null("")
    is_db = comm.str.contains(_anchored(DATABASE_COMMS))
    if db_pids:
        is_db = is_db | pl.col("pid").is_in(sorted(db_pids)).fill_null(False)
    fallback = (
        pl.when(pl.col("_hint").fill_null(False)).then(pl.lit(PAGE_FAULTS_NUMA))
        .when(comm.str.contains(_anchored(IDLE_COMMS))).then(pl.lit(IDLE))
        .when(comm.str.contains(_anchored(GC_COMMS))).then(pl.lit(RUNTIME_GC))
        .when(is_db).then(pl.lit(DATABASE))
        .otherwise(pl.lit(OTHER))
    )
    return (
        indexed.join(innermost, on="_row", how="left")
        .join(leaf_hint, on="_row", how="left")
        .with_columns(pl.coalesce("_walk", fallback).alias("category"), is_db.fill_null(False).alias("database_process"))
        .sort("_row")
        .drop("_row", "_walk", "_hint")
    )


_HW_SW_EVENTS = frozenset(TIME_EVENTS) | {
    "instructions", "page-faults", "faults", "cache-misses", "cache-references", "branch-misses", "branches",
    "context-switches", "cs", "cpu-migrations", "migrations", "minor-faults", "major-faults", "bus-cycles",
}


def event_base(event: str | None) -> str | None:
    """The event without perf's modifiers: ``cpu-clock:pppH`` -> ``cpu-clock``; tracepoints keep their name.

    >>> event_base("cpu-clock:pppH"), event_base("cycles:P"), event_base("sched:sched_switch"), event_base(None)
    ('cpu-clock', 'cycles', 'sched:sched_switch', None)
    """
    if event is None:
        return None
    base = event.split(":", 1)[0].strip()
    return base if base in _HW_SW_EVENTS else event


def choose_event(samples_by_event: dict[str | None, int]) -> tuple[str | None, str]:
    """The event to profile and why: time-based first (cpu-clock, task-clock, cycles...), then an
    unnamed event (perf's default is one of those), then the event with most samples.

    >>> choose_event({"instructions": 900, "cycles:P": 100})
    ('cycles:P', 'time-based event cycles preferred over instructions')
    >>> choose_event({"page-faults": 10})
    ('page-faults', 'only event')
    """
    if len(samples_by_event) == 1:
        return next(iter(samples_by_event)), "only event"
    others = sorted((e for e in samples_by_event if e is not None), key=lambda e: (-samples_by_event[e], e))
    rank = {name: index for index, name in enumerate(TIME_EVENTS)}
    timed = sorted((e for e in others if event_base(e) in rank), key=lambda e: (rank[event_base(e)], -samples_by_event[e]))
    rest = ", ".join(e for e in others if e not in timed[:1]) or "an unnamed event"
    if timed:
        return timed[0], f"time-based event {event_base(timed[0])} preferred over {rest}"
    if None in samples_by_event:
        return None, f"unnamed event (perf's default, time-based) preferred over {rest}"
    return others[0], f"no time-based event; {others[0]} has the most samples"


def cpu_profile(tables: dict[str, pl.DataFrame]) -> tuple[dict[str, pl.DataFrame], dict[str, Any] | None]:
    """Derived tables ``cpu_profile_stacks`` / ``cpu_profile_symbols`` and ``metrics.cpu_profile``.

    ``(derived, None)`` when there is no perf data. Prefers ``perf_stack``; falls back to
    ``perf_symbol``.

    >>> frame = t.conform(t.PERF_STACK, pl.DataFrame({
    ...     "comm": ["swapper", "mysqld", "mysqld"], "pid": [0, 10, 10], "tid": [0, 10, 10], "event": "cpu-clock",
    ...     "stack": ["do_idle;native_safe_halt", "main;do_command;mysql_parse", "main;schedule;finish_task_switch"],
    ...     "leaf": ["native_safe_halt", "mysql_parse", "finish_task_switch"], "leaf_kernel": [True, False, True],
    ...     "samples": [80, 15, 5], "source": "perf-script.txt"}))
    >>> derived, metric = cpu_profile({"perf_stack": frame})
    >>> metric["samples"], metric["idle_samples"], metric["busy_samples"]
    (100, 80, 20)
    >>> [(c["category"], c["share_pct"], c["busy_share_pct"]) for c in metric["categories"][:3]]
    [('idle', 80.0, None), ('database', 15.0, 75.0), ('scheduler', 5.0, 25.0)]
    >>> metric["top_symbols"][0]["symbol"], sorted(derived)
    ('mysql_parse', ['cpu_profile_stacks', 'cpu_profile_symbols'])
    """
    stacks = tables.get(t.PERF_STACK)
    if stacks is not None and stacks.height and stacks["samples"].fill_null(0).sum() > 0:
        return _from_stacks(stacks)
    symbols = tables.get(t.PERF_SYMBOL)
    if symbols is not None and symbols.height:
        return _from_symbols(symbols, tables.get(t.PERF_CALLCHAIN))
    return {}, None


def _samples_by_event(frame: pl.DataFrame, column: str) -> dict[str | None, int]:
    grouped = frame.group_by("event").agg(pl.col(column).fill_null(0).sum().alias("n"))
    return {event: int(n) for event, n in grouped.iter_rows()}


def _stack_weight(chosen: pl.DataFrame) -> tuple[pl.Expr, str]:
    """The weight of each stack: its summed periods when every sample printed one, else its sample count."""
    if chosen.height and chosen["period"].null_count() == 0 and chosen["period"].sum() > 0:
        return pl.col("period").cast(pl.Float64), "period"
    return pl.col("samples").cast(pl.Float64), "samples"


def _from_stacks(stacks: pl.DataFrame) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    stacks = stacks.filter(pl.col("samples").fill_null(0) > 0)
    by_event = _samples_by_event(stacks, "samples")
    event, reason = choose_event(by_event)
    chosen = stacks.filter(pl.col("event").is_null() if event is None else pl.col("event") == event)
    weight, weight_kind = _stack_weight(chosen)
    chosen = categorize(chosen).with_columns(
        pl.col("leaf").fill_null(pl.col("stack").str.split(";").list.last()),
        weight.alias("weight"),
        (tooling_expr(pl.col("comm")) & (pl.col("category") != IDLE)).alias("tooling"),
    )
    rows = (
        chosen.group_by("comm", "leaf", "category", "tooling", maintain_order=True)
        .agg(pl.col("samples").sum(), pl.col("weight").sum(), pl.col("leaf_kernel").any().alias("kernel"), pl.col("database_process").any())
        .rename({"leaf": "symbol"})
    )
    metric = summarise(rows, weight=weight_kind, categories=CATEGORIES)
    workload = chosen.filter((pl.col("category") != IDLE) & ~pl.col("tooling"))
    metric["flame"] = flamegraph.fold_tree(
        workload.select((pl.col("comm").fill_null("?") + pl.lit(";") + pl.col("stack").fill_null("")).alias("stack"), "samples", "weight", "category"),
        min_share=FLAME_MIN_SHARE,
        max_nodes=FLAME_MAX_NODES,
        weight_unit=_weight_unit(weight_kind, event),
    )
    metric["distinct_stacks"] = chosen.height
    if weight_kind == "period":
        metric["period_total"] = int(chosen["period"].sum())
    metric = {**_header(event, reason, by_event, "perf script", sorted(s for s in chosen["source"].unique().to_list() if s is not None)), **metric}
    return {"cpu_profile_stacks": chosen, "cpu_profile_symbols": _symbol_table(rows, metric)}, metric


def _weight_unit(weight_kind: str, event: str | None) -> str:
    """What the flame graph's widths are of, for its tooltips: "samples", "CPU time (sample periods)"..."""
    if weight_kind != "period":
        return "samples"
    base = event_base(event)
    return "CPU time (sample periods)" if base is None or base in TIME_EVENTS else f"{base} (sample periods)"


def _header(event: str | None, reason: str, by_event: dict[str | None, int], source_kind: str, sources: list[str]) -> dict[str, Any]:
    return {
        "source_kind": source_kind,
        "sources": sources,
        "event": event,
        "event_reason": reason,
        "events": [{"event": e, "samples": n} for e, n in sorted(by_event.items(), key=lambda kv: (-kv[1], kv[0] or ""))],
    }


def _symbol_table(rows: pl.DataFrame, metric: dict[str, Any]) -> pl.DataFrame:
    """``cpu_profile_symbols``: per (comm, symbol, category) its samples, weight and shares (busy share null for idle and tooling)."""
    total, busy = metric["total_weight"], metric["busy_weight"]
    return rows.with_columns(
        ((100.0 * pl.col("weight") / total).round(3) if total else pl.lit(None, pl.Float64)).alias("share_pct"),
        pl.when((pl.col("category") != IDLE) & ~pl.col("tooling")).then((100.0 * pl.col("weight") / busy).round(3) if busy else None).alias("busy_share_pct"),
    ).sort(["weight", "comm", "symbol", "category", "tooling"], descending=[True, False, False, False, False], nulls_last=True)


def _from_symbols(symbols: pl.DataFrame, chains: pl.DataFrame | None) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """Flat ``perf report``/``perf top`` entries: one source per event (percentages of different
    reports cannot be added); samples from the ``Samples`` column, else estimated from ``Overhead``
    and the header's total. Shares come from the printed percentages (perf's Overhead is by
    period, and exact even when the samples are estimated)."""
    symbols = symbols.with_columns(
        pl.coalesce(
            pl.col("samples"),
            # strict=False: a percentage past any real count (a damaged report) becomes null, not a crash
            (pl.col("self_pct") * pl.col("event_samples") / 100.0).round(0).cast(pl.Int64, strict=False),
        ).alias("_samples")
    )
    per_source = symbols.group_by("event", "source").agg(
        pl.col("event_samples").max(), pl.col("_samples").sum(), pl.col("self_pct").sum()
    )
    by_event = {e: int(n or 0) for e, n in per_source.group_by("event").agg(pl.col("event_samples").max().fill_null(pl.col("_samples").max())).iter_rows()}
    event, reason = choose_event(by_event)
    candidates = per_source.filter(pl.col("event").is_null() if event is None else pl.col("event") == event)
    source = candidates.sort(["event_samples", "_samples", "source"], descending=[True, True, False], nulls_last=True)["source"][0]
    chosen = symbols.filter((pl.col("source") == source) & (pl.col("event").is_null() if event is None else pl.col("event") == event))
    header_total = chosen["event_samples"].max()
    exact = chosen["samples"].null_count() == 0
    chain_category = _chain_categories(chains, event, source)
    db_pids = database_pids(chosen)
    entries = []
    for comm, pid, symbol, kernel, self_pct, samples in chosen.select("comm", "pid", "symbol", "kernel", "self_pct", "_samples").iter_rows():
        symbol = symbol or "[unknown]"
        category = chain_category.get(symbol) or frame_category([symbol], comm, pid in db_pids)
        database = pid in db_pids or re.fullmatch(DATABASE_COMMS, comm or "") is not None
        entries.append({"comm": comm, "symbol": symbol, "category": category, "kernel": kernel, "database_process": database,
                        "self_pct": self_pct, "samples": samples})
    frame = pl.DataFrame(entries, schema={"comm": pl.String, "symbol": pl.String, "category": pl.String, "kernel": pl.Boolean,
                                          "database_process": pl.Boolean, "self_pct": pl.Float64, "samples": pl.Int64})
    rows = (
        frame.with_columns((tooling_expr(pl.col("comm")) & (pl.col("category") != IDLE)).alias("tooling"))
        .group_by("comm", "symbol", "category", "tooling", maintain_order=True)
        .agg(pl.col("samples").sum(), pl.col("kernel").any(), pl.col("database_process").any(), pl.col("self_pct").sum().alias("weight"))
    )
    metric = summarise(rows, weight="percent", categories=CATEGORIES, total_weight=100.0)
    if header_total is not None:
        # The counts follow the printed percentages of the header's total (the listed rows may not add up to it).
        scale = int(header_total) / 100.0
        metric["samples"] = int(header_total)
        metric["idle_samples"] = round(scale * (100.0 - metric["busy_weight"] - metric["tooling"]["weight"]))
        metric["tooling_samples"] = metric["tooling"]["samples"] = round(scale * metric["tooling"]["weight"])
        metric["busy_samples"] = metric["samples"] - metric["idle_samples"] - metric["tooling_samples"]
    metric = {**_header(event, reason, by_event, "perf report", [source] if source else []), **metric}
    metric["samples_exact"] = bool(exact)
    metric["listed_share_pct"] = round(float(frame["self_pct"].sum()), 2)
    if chosen["comm"].null_count() == chosen.height:
        metric["tooling_note"] = "the report has no Command column: the capture's own tooling cannot be told apart"
    return {"cpu_profile_symbols": _symbol_table(rows, metric)}, metric


def _chain_categories(chains: pl.DataFrame | None, event: str | None, source: str | None) -> dict[str, str]:
    """Per flat entry, the category of its heaviest printed call chain (the report's own stacks)."""
    if chains is None or not chains.height:
        return {}
    rows = chains.filter((pl.col("source") == source) & (pl.col("event").is_null() if event is None else pl.col("event") == event))
    best: dict[str, tuple[float, str]] = {}
    for entry, chain, share in rows.select("entry_symbol", "chain", pl.col("share_pct").fill_null(0.0)).iter_rows():
        if entry is None or not chain:
            continue
        category = frame_category(chain.split(";"))
        if category == OTHER:
            continue
        if entry not in best or share > best[entry][0]:
            best[entry] = (share, category)
    return {entry: category for entry, (_, category) in best.items()}
