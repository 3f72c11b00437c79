"""context-switch-overhead, lock-contention, cross-numa-memory, unbound-processes on hand-built inputs.

The CPU-profile rules read the derived profile (``metrics["cpu_profile"]`` and the
``cpu_profile_stacks``/``cpu_profile_symbols`` tables); the NUMA rules read ``numa_remote``,
``numa_process_memory`` and process affinity rows. These tests build those shapes directly so
that each threshold is probed on its own; tests/test_end_to_end.py runs them on real data.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.host_counts import host_counts
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.rules.base import RuleInput
from dbdiag.rules.cpu import context_switch_overhead, lock_contention
from dbdiag.rules.numa import cross_numa_memory, unbound_processes
from tests.rules.synthetic import topology

SCHED_STACK = "runtime.mstart;runtime.futexsleep;runtime.futex;el0_svc;__arm64_sys_futex;do_futex;futex_wait;futex_wait_queue_me;schedule;__schedule;finish_task_switch"
LOCK_STACK = "start_thread;do_command;buf_page_get_gen;PolicyMutex<TTASEventMutex<GenericPolicy> >::enter;ut_delay"
WORK_STACK = "start_thread;do_command;mysql_execute_command;JOIN::exec"
IDLE_STACK = "secondary_start_kernel;cpu_startup_entry;do_idle;cpu_do_idle"


def _profile_input(samples: dict[str, tuple[str, str, int]], idle: int = 500) -> RuleInput:
    """``samples``: category -> (comm, stack, count); plus ``idle`` idle samples."""
    rows = [(comm, stack, stack.rsplit(";", 1)[-1], count, category) for category, (comm, stack, count) in samples.items()]
    rows.append(("swapper", IDLE_STACK, "cpu_do_idle", idle, "idle"))
    stacks = pl.DataFrame(rows, schema=["comm", "stack", "leaf", "samples", "category"], orient="row").with_columns(
        pl.lit("cpu-clock").alias("event"), pl.lit("perf-script.txt").alias("source")
    )
    busy = sum(count for _, _, count in samples.values())
    categories = [
        {"category": category, "samples": count, "share_pct": 100.0 * count / (busy + idle), "busy_share_pct": 100.0 * count / busy}
        for category, (_, _, count) in samples.items()
    ]
    symbols = stacks.filter(pl.col("category") != "idle").select(
        "comm", pl.col("leaf").alias("symbol"), "category", "samples"
    )
    perf = t.conform(t.PERF_STACK, stacks.drop("category"))
    return RuleInput(
        tables={t.PERF_STACK: perf},
        derived={"cpu_profile_stacks": stacks, "cpu_profile_symbols": symbols},
        metrics={
            "cpu_profile": {
                "samples": busy + idle, "busy_samples": busy, "idle_samples": idle, "event": "cpu-clock",
                "source_kind": "perf-script", "categories": categories, "top_symbols": [],
            }
        },
    )


def test_context_switch_at_twenty_percent_is_critical_with_paths_into_the_scheduler():
    inp = _profile_input({"scheduler": ("tidb-server", SCHED_STACK, 200), "database": ("tidb-server", WORK_STACK, 800)})
    outcome = run_rule(context_switch_overhead.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL and finding.impact["share_pct"] == 20.0
    assert "20.0% of busy CPU samples" in finding.title and "threshold 10%" in finding.title
    paths = next(e for e in finding.evidence if e.title.startswith("Paths into it"))
    # the three frames just above the switch path, root first
    assert paths.rows[0][0] == "do_futex > futex_wait > futex_wait_queue_me"
    assert next(e for e in finding.evidence if e.title.startswith("Hottest")).rows[0][0] == "finish_task_switch"


def test_context_switch_just_under_threshold_passes_and_idle_does_not_dilute():
    under = _profile_input({"scheduler": ("x", SCHED_STACK, 99), "database": ("x", WORK_STACK, 901)}, idle=100_000)
    outcome = run_rule(context_switch_overhead.RULE, under)
    assert outcome.status is Status.PASSED and "9.9%" in outcome.measured
    at = _profile_input({"scheduler": ("x", SCHED_STACK, 100), "database": ("x", WORK_STACK, 900)}, idle=100_000)
    assert run_rule(context_switch_overhead.RULE, at).findings[0].severity is Severity.WARNING


def test_small_profile_is_skipped_with_the_count():
    inp = _profile_input({"scheduler": ("x", SCHED_STACK, 50), "database": ("x", WORK_STACK, 100)})
    outcome = run_rule(context_switch_overhead.RULE, inp)
    assert outcome.status is Status.SKIPPED and "150 busy" in outcome.missing[0]


def test_missing_perf_input_is_skipped_naming_it():
    outcome = run_rule(context_switch_overhead.RULE, RuleInput(tables={}, derived={}, metrics={}))
    assert outcome.status is Status.SKIPPED and outcome.missing == ("perf_stack or perf_symbol",)


def test_lock_contention_fires_with_innodb_callers():
    inp = _profile_input({"locks-futex": ("mariadbd", LOCK_STACK, 60), "database": ("mariadbd", WORK_STACK, 940)})
    outcome = run_rule(lock_contention.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.WARNING and "6.0%" in finding.title
    assert "InnoDB mutex / rw-lock (buf_page_get_gen)" in finding.title and finding.subject == "innodb"
    paths = next(e for e in finding.evidence if e.title.startswith("Paths into it"))
    assert paths.rows[0][0] == "start_thread > do_command > buf_page_get_gen"


def test_lock_contention_under_threshold_passes():
    inp = _profile_input({"locks-futex": ("mariadbd", LOCK_STACK, 49), "database": ("mariadbd", WORK_STACK, 951)})
    assert run_rule(lock_contention.RULE, inp).status is Status.PASSED


# --- NUMA ----------------------------------------------------------------------------------


def _numa_input(
    remote_pct: list[float] | None,
    allocated_pages: int = 100_000,
    since_boot: bool = False,
    process_mb: dict[int, float] | None = None,
    status: dict[str, str] | None = None,
    cpus: int = 8,
    nodes: int = 2,
) -> RuleInput:
    tables: dict[str, pl.DataFrame] = {t.TOPOLOGY: topology(cpus, nodes)}
    derived: dict[str, pl.DataFrame] = {
        "cpu_nodes": pl.DataFrame({"cpu": list(range(cpus)), "node": [c // (cpus // nodes) for c in range(cpus)]})
    }
    counters = []
    if remote_pct is not None:
        rows = []
        for node, pct in enumerate(remote_pct):
            other = round(allocated_pages * pct / 100)
            rows.append({
                "node": node, "numa_hit": allocated_pages, "numa_miss": 0, "numa_foreign": 0, "interleave_hit": 0,
                "local_node": allocated_pages - other, "other_node": other, "remote_pct": pct, "miss_pct": 0.0,
                "since_boot": since_boot, "first_source": "numastat.before", "last_source": "numastat.after",
            })
            counters.append({"snapshot": 0, "scope": "system", "node": node, "counter": "numa_hit", "value": 1.0, "unit": "pages", "source": "numastat.before"})
        derived["numa_remote"] = pl.DataFrame(rows)
    if process_mb is not None:
        derived["numa_process_memory"] = pl.DataFrame({
            "pid": [4242] * len(process_mb), "process": ["mariadbd"] * len(process_mb), "node": list(process_mb),
            "private_mb": list(process_mb.values()), "total_mb": list(process_mb.values()),
            "share_pct": [100.0 * v / sum(process_mb.values()) for v in process_mb.values()],
            "source": ["numastat-p-mariadbd.txt"] * len(process_mb),
        })
        counters.append({"snapshot": 0, "scope": "process", "pid": 4242, "process": "mariadbd", "node": 0, "counter": "Private", "value": 1.0, "unit": "MB", "source": "numastat-p-mariadbd.txt"})
    if counters:
        tables[t.NUMA_COUNTER] = t.conform(t.NUMA_COUNTER, pl.DataFrame(counters))
    if status is not None:
        tables[t.HOST_SETTING] = t.conform(t.HOST_SETTING, pl.DataFrame({
            "category": "process_affinity", "subject": "mariadbd 4242", "name": list(status), "value": list(status.values()),
            "source": "mariadbd-status.txt",
        }))
    derived[t.HOST_COUNT] = host_counts(tables)
    return RuleInput(tables=tables, derived=derived, metrics={})


def test_node_with_remote_share_over_threshold_fires_between_snapshots():
    outcome = run_rule(cross_numa_memory.RULE, _numa_input([3.0, 22.0]))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "node 1" and finding.severity is Severity.WARNING
    assert "22% of node 1's allocations came from other nodes between snapshots; threshold 15%" in finding.title


def test_remote_share_just_under_threshold_passes_and_small_traffic_is_not_judged():
    assert run_rule(cross_numa_memory.RULE, _numa_input([3.0, 14.9])).status is Status.PASSED
    quiet = run_rule(cross_numa_memory.RULE, _numa_input([3.0, 60.0], allocated_pages=cross_numa_memory.MIN_NODE_PAGES - 1))
    assert quiet.status is Status.PASSED and "no node allocated" in quiet.measured


def test_since_boot_counters_are_info_only():
    outcome = run_rule(cross_numa_memory.RULE, _numa_input([3.0, 30.0], since_boot=True))
    assert outcome.findings[0].severity is Severity.INFO and "since boot" in outcome.findings[0].title


def test_process_memory_on_the_other_node_from_its_cpus_fires():
    inp = _numa_input(None, process_mb={0: 2.0, 1: 998.0}, status={"Cpus_allowed_list": "0-3", "Mems_allowed_list": "0-1"})
    outcome = run_rule(cross_numa_memory.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL and finding.impact["cpu_nodes"] == [0]
    assert finding.title.startswith("mariadbd (4242): 100% of its 1,000 MB lies on nodes none of its CPUs (0-3, node 0)")
    assert "numactl --cpunodebind=0 --membind=0" in finding.remediation


def test_process_memory_with_its_cpus_passes():
    inp = _numa_input(None, process_mb={0: 990.0, 1: 10.0}, status={"Cpus_allowed_list": "0-3"})
    outcome = run_rule(cross_numa_memory.RULE, inp)
    assert outcome.status is Status.PASSED and "1% of 1,000 MB off its CPUs' nodes" in outcome.measured


def test_numa_rules_never_fire_on_one_node():
    single = _numa_input([0.0], status={"Cpus_allowed_list": "0-7"}, nodes=1)
    assert run_rule(cross_numa_memory.RULE, single).status is Status.SKIPPED
    assert run_rule(unbound_processes.RULE, single).status is Status.SKIPPED


def test_unbound_database_process_is_info_without_cost_and_warning_with_it():
    calm = run_rule(unbound_processes.RULE, _numa_input([2.0, 3.0], status={"Cpus_allowed_list": "0-7"}))
    assert calm.status is Status.FIRED and calm.findings[0].severity is Severity.INFO
    costly = run_rule(unbound_processes.RULE, _numa_input([2.0, 25.0], status={"Cpus_allowed_list": "0-7"}))
    finding = costly.findings[0]
    assert finding.severity is Severity.WARNING
    assert ("node 1 remote allocations (numastat)", "25.0%") in finding.evidence[1].rows
    assert "numactl --cpunodebind=0 --membind=0" in finding.remediation


def test_bound_database_process_passes():
    outcome = run_rule(unbound_processes.RULE, _numa_input([2.0, 25.0], status={"Cpus_allowed_list": "4-7"}))
    assert outcome.status is Status.PASSED and "mariadbd 4242: CPUs 4-7" in outcome.measured
