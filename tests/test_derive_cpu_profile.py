"""CPU profile derive: one category per stack, event choice, perf report fallback, real captures."""

from __future__ import annotations

import gzip
import json
import tarfile
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive import cpu_profile as cp
from dbdiag.derive.cpu_profile import categorize, choose_event, cpu_profile, frame_category
from dbdiag.parsers.base import ParseContext

IDLE_LOOP = ["secondary_startup_64_no_verify", "start_secondary", "cpu_startup_entry", "do_idle", "default_idle_call", "amd_e400_idle", "native_safe_halt"]
IRQ_IN_IDLE = IDLE_LOOP + ["asm_common_interrupt", "common_interrupt", "__irq_exit_rcu", "handle_softirqs"]
READ_SYSCALL = ["[unknown]", "read", "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "ksys_read", "vfs_read", "sock_read_iter", "tcp_recvmsg"]

# (frames root first, comm, expected) — the stacks are shapes seen in the real captures.
CASES = [
    (IDLE_LOOP, "swapper", "idle"),
    (["do_idle", "tick_nohz_idle_exit"], "swapper", "idle"),
    (["do_idle", "schedule_idle", "__schedule", "finish_task_switch.isra.0"], "swapper", "scheduler"),
    (IRQ_IN_IDLE, "swapper", "softirq-network"),
    (IRQ_IN_IDLE + ["net_rx_action", "__napi_poll", "virtnet_poll", "receive_buf", "page_to_skb"], "swapper", "softirq-network"),
    (IRQ_IN_IDLE + ["net_rx_action", "__napi_poll", "virtnet_poll_tx", "_raw_spin_lock", "native_queued_spin_lock_slowpath"], "swapper", "locks-futex"),
    (["ret_from_fork", "kthread", "run_ksoftirqd", "handle_softirqs", "net_rx_action", "__napi_poll", "virtnet_poll", "try_fill_recv", "__alloc_pages", "get_page_from_freelist", "clear_page_erms"], "ksoftirqd/5", "softirq-network"),
    (["[unknown]", "[libc.so.6]", "asm_exc_page_fault", "exc_page_fault", "do_user_addr_fault", "handle_mm_fault", "__handle_mm_fault", "do_huge_pmd_anonymous_page", "clear_huge_page", "clear_page_erms"], "python3", "page-faults-numa"),
    (["task_work_run", "task_numa_work", "change_prot_numa", "change_pte_range"], "mysqld", "page-faults-numa"),
    (["clear_page_erms"], "python3", "page-faults-numa"),  # flat profile: the leaf hint
    (READ_SYSCALL + ["skb_copy_datagram_iter", "__skb_datagram_iter", "_copy_to_iter", "copy_user_enhanced_fast_string"], "iperf3", "memory-copy"),
    (READ_SYSCALL + ["lock_sock_nested", "_raw_spin_lock_bh", "native_queued_spin_lock_slowpath"], "iperf3", "locks-futex"),
    (READ_SYSCALL + ["tcp_rcv_space_adjust", "ktime_get", "read_hpet"], "iperf3", "syscalls"),
    (["[unknown]", "__select", "entry_SYSCALL_64_after_hwframe", "do_syscall_64", "__x64_sys_pselect6", "do_select", "poll_freewait", "_raw_spin_unlock_irqrestore"], "iperf3", "syscalls"),
    (["start_thread", "pthread_mutex_lock@@GLIBC_2.2.5", "__lll_lock_wait", "syscall", "entry_SYSCALL_64", "do_syscall_64", "__x64_sys_futex", "do_futex", "futex_wait"], "mysqld", "locks-futex"),
    (["start_thread", "__lll_lock_wait", "do_futex", "futex_wait", "futex_wait_queue", "schedule", "__schedule", "finish_task_switch.isra.0"], "mysqld", "scheduler"),
    (["start_thread", "row_search_mvcc", "buf_page_get_gen", "PolicyMutex<TTASEventMutex<GenericPolicy> >::enter", "ut_delay"], "mysqld", "locks-futex"),
    (["PostgresMain", "exec_simple_query", "LWLockAcquire", "perform_spin_delay", "pg_usleep"], "postgres", "locks-futex"),
    (["PostgresMain", "exec_simple_query", "ExecScan", "heap_getnextslot"], "postgres", "database"),
    (["start_thread", "handle_one_connection", "do_command", "dispatch_command", "__memmove_avx512_unaligned_erms"], "mariadbd", "memory-copy"),
    (["start_thread", "handle_one_connection", "do_command", "JOIN::exec"], "mariadbd", "database"),
    (["runtime.goexit", "runtime.gcBgMarkWorker", "runtime.gcDrain", "runtime.scanobject"], "tidb-server", "runtime-gc"),
    (["thread_native_entry", "[libjvm.so]"], "GC Thread#3", "runtime-gc"),
    (["runtime.goexit", "runtime.memmove"], "tidb-server", "memory-copy"),
    (["[sysbench]", "sb_histogram_get_pct_intermediate"], "sysbench", "other"),
    (["ret_from_fork", "kthread", "worker_thread", "process_one_work", "gc_worker"], "kworker/1:4-mm_", "other"),
    (["[unknown]"], "swapper", "idle"),
    ([], None, "other"),
]


@pytest.mark.parametrize(("frames", "comm", "expected"), CASES)
def test_category_of_hand_made_stacks(frames, comm, expected):
    assert frame_category(frames, comm) == expected


def test_vectorised_categories_agree_with_the_scalar_rule():
    frame = t.conform(t.PERF_STACK, pl.DataFrame({
        "comm": [comm for _, comm, _ in CASES],
        "stack": [";".join(frames) for frames, _, _ in CASES],
        "samples": [1] * len(CASES),
    }))
    assert categorize(frame)["category"].to_list() == [expected for _, _, expected in CASES]


def test_threads_of_a_database_pid_are_database_whatever_their_name():
    frame = t.conform(t.PERF_STACK, pl.DataFrame({
        "comm": ["mysqld", "connection", "connection", "ib_io_wr-1"],
        "pid": [10, 10, 20, 10],
        "stack": ["main;mysqld_main", "start_thread;JOIN::exec", "start_thread;JOIN::exec", "start_thread;io_handler"],
        "samples": [1, 1, 1, 1],
    }))
    # pid 20 has no thread named like a database: its "connection" thread is not assumed to be one.
    assert categorize(frame)["category"].to_list() == ["database", "database", "other", "database"]


def test_time_based_event_is_chosen():
    assert choose_event({"instructions": 5000, "cycles": 10}) == ("cycles", "time-based event cycles preferred over instructions")
    assert choose_event({"cycles:P": 9, "cpu-clock:pppH": 1})[0] == "cpu-clock:pppH"
    assert choose_event({"page-faults": 10, None: 3})[0] is None
    assert choose_event({"page-faults": 10, "cache-misses": 30})[0] == "cache-misses"


KERNEL_LEAVES = {"native_safe_halt", "finish_task_switch"}


def _stacks(rows: list[tuple[str, str, str, int]]) -> pl.DataFrame:
    return t.conform(t.PERF_STACK, pl.DataFrame(
        [{"comm": c, "event": e, "stack": s, "leaf": s.split(";")[-1], "samples": n, "leaf_kernel": s.split(";")[-1] in KERNEL_LEAVES, "source": "p.txt"}
         for c, e, s, n in rows]
    ))


def test_profile_counts_only_the_chosen_event():
    stacks = _stacks([
        ("swapper", "cycles", "do_idle;native_safe_halt", 50),
        ("mysqld", "cycles", "main;do_command;JOIN::exec", 30),
        ("mysqld", "cycles", "main;schedule;__schedule;finish_task_switch", 20),
        ("mysqld", "instructions", "main;do_command;JOIN::exec", 1000),
    ])
    derived, metric = cpu_profile({t.PERF_STACK: stacks})
    assert metric["event"] == "cycles" and metric["source_kind"] == "perf script"
    assert (metric["samples"], metric["idle_samples"], metric["busy_samples"]) == (100, 50, 50)
    shares = {c["category"]: (c["samples"], c["share_pct"], c["busy_share_pct"]) for c in metric["categories"]}
    assert shares["scheduler"] == (20, 20.0, 40.0)
    assert shares["database"] == (30, 30.0, 60.0)
    assert shares["idle"] == (50, 50.0, None)
    assert set(shares) == set(cp.CATEGORIES)  # every category listed, zeros included
    assert [s["symbol"] for s in metric["top_symbols"]] == ["JOIN::exec", "finish_task_switch"]  # idle left out
    assert metric["processes"][0] == {"comm": "mysqld", "samples": 50, "share_pct": 50.0, "busy_share_pct": 100.0, "top_category": "database"}
    assert metric["kernel"]["busy_samples"] == 20
    assert derived["cpu_profile_stacks"]["event"].unique().to_list() == ["cycles"]
    assert derived["cpu_profile_stacks"]["samples"].sum() == 100
    symbols = derived["cpu_profile_symbols"]
    assert set(symbols.columns) >= {"comm", "symbol", "category", "samples", "share_pct", "busy_share_pct"}
    assert symbols.filter(pl.col("symbol") == "finish_task_switch")["busy_share_pct"].to_list() == [40.0]
    flame = metric["flame"]
    assert flame["total_samples"] == 50  # busy samples only
    assert flame["nodes"][1]["frame"] == "mysqld"


def test_no_perf_input_gives_no_metric():
    assert cpu_profile({}) == ({}, None)
    assert cpu_profile({t.PERF_STACK: t.empty(t.PERF_STACK)}) == ({}, None)


def test_flat_report_is_the_fallback_and_uses_its_percentages():
    symbols = t.conform(t.PERF_SYMBOL, pl.DataFrame({
        "event": ["cpu-clock:pppH"] * 4 + ["instructions"],
        "comm": ["swapper", "mysqld", "mysqld", "mysqld", "mysqld"],
        "symbol": ["pv_native_safe_halt", "finish_task_switch.isra.0", "ut_delay", "row_search_mvcc", "row_search_mvcc"],
        "kernel": [True, True, False, False, False],
        "self_pct": [60.0, 20.0, 10.0, 10.0, 100.0],
        "event_samples": [1000] * 4 + [50],
        "source": "perf-report.txt",
    }))
    derived, metric = cpu_profile({t.PERF_SYMBOL: symbols})
    assert metric["source_kind"] == "perf report" and metric["event"] == "cpu-clock:pppH"
    assert (metric["samples"], metric["idle_samples"], metric["busy_samples"]) == (1000, 600, 400)
    assert metric["samples_exact"] is False
    shares = {c["category"]: (c["samples"], c["busy_share_pct"]) for c in metric["categories"]}
    assert shares["scheduler"] == (200, 50.0)
    assert shares["locks-futex"] == (100, 25.0)
    assert shares["database"] == (100, 25.0)
    assert "cpu_profile_stacks" not in derived


def test_report_call_chains_decide_the_category_of_a_flat_entry():
    symbols = t.conform(t.PERF_SYMBOL, pl.DataFrame({
        "event": ["cycles"], "comm": ["iperf3"], "symbol": ["read_hpet"], "self_pct": [100.0], "samples": [10], "source": "r.txt",
    }))
    chains = t.conform(t.PERF_CALLCHAIN, pl.DataFrame({
        "event": ["cycles", "cycles"], "entry_symbol": ["read_hpet", "read_hpet"], "source": "r.txt",
        "chain": ["read;entry_SYSCALL_64;do_syscall_64;ktime_get;read_hpet", "handle_softirqs;net_rx_action;ktime_get;read_hpet"],
        "share_pct": [70.0, 30.0],
    }))
    _, metric = cpu_profile({t.PERF_SYMBOL: symbols, t.PERF_CALLCHAIN: chains})
    assert metric["top_symbols"][0]["category"] == "syscalls"
    assert metric["samples_exact"] is True


def _capture_tables(corpus, capture: str) -> dict[str, pl.DataFrame]:
    perf_script = pytest.importorskip("dbdiag.parsers.perf_script")
    with tarfile.open(corpus / "captures" / f"{capture}.tar.gz") as archive:
        text = archive.extractfile("capture/os/perf-script.txt").read().decode("utf-8", "backslashreplace")
    return perf_script.parse(text, ParseContext(source="capture/os/perf-script.txt")).tables


# Totals checked against the raw files: sample header lines (grep -c ' cpu-clock') and samples whose
# first frame is native_safe_halt / pv_native_safe_halt (the rest of idle is tick_nohz_idle_* and
# do_idle leaves).
REAL = {
    "mariadb-sysbench-debian12": (529, 477, 477),
    "postgres-pgbench-debian12": (506, 480, 480),
    "numa2-guest-iperf-debian12": (7618, 4970, 4988),
    "numa2x2-guest-iperf-debian12": (3995, 2183, 2188),
}


@pytest.mark.parametrize("capture", sorted(REAL))
def test_real_captures(corpus, capture):
    total, halt, idle = REAL[capture]
    derived, metric = cpu_profile(_capture_tables(corpus, capture))
    assert metric["samples"] == total
    assert metric["idle_samples"] == idle >= halt
    assert metric["idle_samples"] + metric["tooling_samples"] + metric["busy_samples"] == total
    assert sum(c["samples"] for c in metric["categories"]) == total - metric["tooling_samples"]
    assert sum(c["busy_share_pct"] or 0 for c in metric["categories"]) == pytest.approx(100.0, abs=0.1)
    stacks = derived["cpu_profile_stacks"]
    scalar = [frame_category(stack.split(";"), comm, pid in cp.database_pids(stacks)) for comm, pid, stack in stacks.select("comm", "pid", "stack").rows()]
    assert stacks["category"].to_list() == scalar
    flame = metric["flame"]
    assert flame["total_samples"] == metric["busy_samples"]
    assert len(flame["nodes"]) <= cp.FLAME_MAX_NODES


def test_real_network_capture_categories(corpus):
    _, metric = cpu_profile(_capture_tables(corpus, "numa2-guest-iperf-debian12"))
    busy = {c["category"]: c["busy_share_pct"] for c in metric["categories"]}
    # iperf3 receive path: softirq network first, python3's huge-page faults second.
    assert max(busy, key=lambda k: busy[k] or 0) == "softirq-network"
    assert busy["page-faults-numa"] > 20
    processes = {p["comm"]: p["top_category"] for p in metric["processes"]}
    assert processes["python3"] == "page-faults-numa" and processes["ksoftirqd/5"] == "softirq-network"


def test_real_database_capture_is_mostly_the_engine(corpus):
    _, metric = cpu_profile(_capture_tables(corpus, "mariadb-sysbench-debian12"))
    processes = {p["comm"]: p for p in metric["processes"]}
    assert processes["mariadbd"]["top_category"] == "database"
    assert processes["sysbench"]["top_category"] == "other"  # the client is not a database engine


def test_flat_report_without_counts_still_gives_shares():
    symbols = t.conform(t.PERF_SYMBOL, pl.DataFrame({
        "symbol": ["intel_idle", "LWLockAcquire", "ExecScan"], "comm": [None, None, None],
        "self_pct": [50.0, 30.0, 15.0], "source": "top.txt",
    }))
    _, metric = cpu_profile({t.PERF_SYMBOL: symbols})
    assert metric["samples"] == 0 and metric["samples_exact"] is False and metric["event"] is None
    assert metric["listed_share_pct"] == 95.0
    busy = {c["category"]: c["busy_share_pct"] for c in metric["categories"]}
    assert busy["locks-futex"] == 60.0 and busy["other"] == 30.0  # no comm: ExecScan cannot be told a database's
    assert metric["processes"] == []


def test_go_goroutine_roots_do_not_make_every_go_stack_garbage_collection() -> None:
    """runtime.goexit / runtime.mstart sit at the root of every goroutine and thread of a Go server."""
    query = ["runtime.goexit", "github.com/pingcap/tidb/executor.(*ExecStmt).Exec", "github.com/pingcap/tidb/util/codec.DecodeOne"]
    marking = ["runtime.goexit", "runtime.gcBgMarkWorker", "runtime.systemstack", "runtime.gcDrain", "runtime.scanobject"]
    assert cp.frame_category(query, comm="tidb-server") == "database"
    assert cp.frame_category(marking, comm="tidb-server") == "runtime-gc"
    assert cp.frame_category(["runtime.goexit", "main.handler", "runtime.mallocgc"], comm="app") == "runtime-gc"


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "perf"


def _fixture_tables(name: str) -> dict[str, pl.DataFrame]:
    """A perf script made by fixtures/perf/make_real_profiles.sh (a .txt.gz, or a capture .tar.xz)."""
    from dbdiag.parsers import perf_script

    path = FIXTURES / name
    if name.endswith(".tar.xz"):
        with tarfile.open(path) as archive:
            data = archive.extractfile("capture/os/perf-script.txt").read()
    else:
        data = gzip.decompress(path.read_bytes())
    return perf_script.parse_bytes(data, ParseContext(source=name)).tables


def test_frequency_mode_samples_are_weighted_by_their_period():
    """Real: perf record -e page-faults -F 999 -g of 40 runs of /bin/true then python3 touching 300 MB.

    Each new process starts with a period of 1 fault per sample: by samples ``_start`` is 9.3% of
    the profile and ``true`` 51%; by period (what perf report's Overhead shows) 0.13% and 10.5%.
    """
    derived, metric = cpu_profile(_fixture_tables("page-faults.perf-script.txt.gz"))
    assert metric["weight"] == "period" and metric["samples"] == 333 and metric["period_total"] == 87_999
    processes = {p["comm"]: p for p in metric["processes"]}
    assert processes["true"]["samples"] == 170 and processes["true"]["busy_share_pct"] == pytest.approx(10.51, abs=0.01)
    assert processes["python3"]["busy_share_pct"] == pytest.approx(88.39, abs=0.01)
    assert metric["processes"][0]["comm"] == "python3"  # by samples it would be "true"
    symbols = derived["cpu_profile_symbols"]
    start = symbols.filter(pl.col("symbol") == "_start")
    assert int(start["samples"].sum()) == 31
    assert float(start["share_pct"].sum()) == pytest.approx(100.0 * 111 / 87_999, abs=0.01)
    assert metric["flame"]["total_weight"] == pytest.approx(metric["busy_weight"])


def _crafted_cycles_u(start_samples: int, loop_samples: int) -> str:
    """perf script -F comm,tid,time,period,event,ip,sym,dso of a cycles:u profile (crafted: this VM has no PMU,
    ``perf record -e cycles:u`` falls back to cpu-clock here). The layout is perf 6.1's, as in the real files."""
    blocks = []
    for i in range(start_samples):  # frequency mode: a new process's first samples stand for a few cycles
        blocks.append(f"worker {3000 + i} {100.0 + i / 1000:.6f}:          {1 + i % 7} cycles:u: \n"
                      "\t           1ab70 _start+0x0 (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n")
    for i in range(loop_samples):
        blocks.append(f"mariadbd 2100 {101.0 + i / 1000:.6f}:    2000000 cycles:u: \n"
                      "\t          a757e6 row_search_mvcc+0xc6 (/usr/sbin/mariadbd)\n"
                      "\t          83d61f do_command+0x13f (/usr/sbin/mariadbd)\n")
    return "\n".join(blocks) + "\n"


def test_cycles_u_start_at_ten_percent_of_samples_is_a_hundredth_of_a_percent_by_period():
    """The issue's case, crafted: ``_start`` 10% of a ``cycles:u`` profile by samples, 0.0002% by period."""
    from dbdiag.parsers import perf_script

    tables = perf_script.parse(_crafted_cycles_u(100, 900), ParseContext(source="perf-script.txt")).tables
    _, metric = cpu_profile(tables)
    assert metric["event"] == "cycles:u" and metric["weight"] == "period"
    top = {s["symbol"]: s for s in metric["top_symbols"]}
    assert top["_start"]["samples"] == 100 and top["_start"]["busy_share_pct"] < 0.01
    assert top["row_search_mvcc"]["busy_share_pct"] > 99.99


def test_samples_without_a_period_are_counted():
    """perf 3.x layouts print no period (corpus: perf-funcab-cmd-01): shares stay of sample counts."""
    stacks = t.conform(t.PERF_STACK, pl.DataFrame({
        "comm": ["db", "db"], "stack": ["main;f", "main;g"], "leaf": ["f", "g"], "samples": [3, 1], "source": "s"}))
    _, metric = cpu_profile({t.PERF_STACK: stacks})
    assert metric["weight"] == "samples" and [s["busy_share_pct"] for s in metric["top_symbols"]] == [75.0, 25.0]


def test_one_row_per_symbol_with_its_categories_as_a_breakdown(corpus):
    """clear_page_erms: 548 samples as page faults (python3) and 155 as network buffers: one row of 703."""
    _, metric = cpu_profile(_capture_tables(corpus, "numa2-guest-iperf-debian12"))
    names = [s["symbol"] for s in metric["top_symbols"]]
    assert len(names) == len(set(names))
    first = metric["top_symbols"][0]
    assert first["symbol"] == "clear_page_erms" and first["samples"] == 703 and first["category"] == "page-faults-numa"
    assert [(c["category"], c["samples"]) for c in first["categories"]] == [("page-faults-numa", 548), ("softirq-network", 155)]
    assert first["busy_share_pct"] == pytest.approx(sum(c["busy_share_pct"] for c in first["categories"]), abs=0.02)


def test_capture_tooling_is_shown_apart_and_left_out_of_the_shares():
    """Real: sysbench on MariaDB while pt-query-digest, tar+gzip and mpstat ran (make_real_profiles.sh).

    gzip and pt-query-digest took 53% of the non-idle samples; counted as the workload, gzip was
    the busiest process of the profile.
    """
    derived, metric = cpu_profile(_fixture_tables("mariadb-tooling.tar.xz"))
    tooling = {p["comm"]: p["samples"] for p in metric["tooling"]["processes"]}
    assert tooling["gzip"] == 564 and tooling["pt-query-digest"] == 285 and tooling["tar"] == 48
    assert metric["tooling_samples"] == 900 and metric["tooling"]["non_idle_share_pct"] == pytest.approx(56.6, abs=0.01)
    assert [p["comm"] for p in metric["processes"]] == ["mariadbd", "sysbench"]
    assert metric["busy_samples"] == 690 and metric["samples"] == 1590
    assert sum(c["busy_share_pct"] or 0 for c in metric["categories"]) == pytest.approx(100.0, abs=0.1)
    assert not any(s for s in metric["top_symbols"] if set(s["processes"]) & set(tooling))
    stacks = derived["cpu_profile_stacks"]
    assert set(stacks.filter(pl.col("tooling"))["comm"].unique()) == set(tooling)
    assert "gzip" not in json.dumps(metric["flame"])


@pytest.mark.parametrize(("comm", "tooling"), [
    ("pt-query-digest", True), ("pt-stalk", True), ("mpstat", True), ("sadc", True), ("perf-exec", True), ("xz", True),
    ("zstd", True), ("sosreport", True), ("dbdiag", True), ("collect.sh", True), ("sh", True),
    ("mariadbd", False), ("postgres", False), ("sysbench", False), ("pgbench", False), ("psql", False), ("swapper", False),
])
def test_tooling_names(comm, tooling):
    from dbdiag.derive.cpu_tooling import is_tooling

    assert is_tooling(comm) is tooling


def test_perf_report_tooling_is_apart_by_its_command_column(corpus):
    """Real perf report --sort comm,dso,symbol of the 2-node guest: perf, mpstat and sleep ran the capture."""
    from dbdiag.parsers import perf_report

    with tarfile.open(corpus / "captures" / "numa2-guest-iperf-debian12.tar.gz") as archive:
        text = archive.extractfile("capture/os/perf-report.txt").read().decode()
    _, metric = cpu_profile(perf_report.parse(text, ParseContext(source="capture/os/perf-report.txt")).tables)
    assert metric["weight"] == "percent" and metric["source_kind"] == "perf report"
    tooling = {p["comm"] for p in metric["tooling"]["processes"]}
    assert {"mpstat", "perf", "sleep"} <= tooling and not tooling & {p["comm"] for p in metric["processes"]}
    assert metric["idle_samples"] + metric["tooling_samples"] + metric["busy_samples"] == metric["samples"]
    assert 0 < metric["tooling"]["share_pct"] < 1
