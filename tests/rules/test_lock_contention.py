"""lock-contention: the owner of each lock from the stack, and that owner's remedy only.

Real stacks: the 2-node guest capture of the corpus (iperf3 into a single-queue virtio NIC: the
TX-queue lock in NAPI and the socket lock), fixtures/perf/mariadb-hot-row.tar.xz (32 sysbench
threads updating 4 rows of MariaDB 10.11), fixtures/perf/pg-contention.tar.xz (32 pgbench clients
updating the same rows of PostgreSQL 15). The SQL of the remedies runs on the real MariaDB and
PostgreSQL when they are installed.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import polars as pl
import pytest

from dbdiag.derive.cpu_profile import cpu_profile
from dbdiag.engine import run_rule
from dbdiag.findings import Status
from dbdiag.parsers import perf_script
from dbdiag.parsers.base import ParseContext
from dbdiag.rules.base import RuleInput
from dbdiag.rules.cpu import lock_contention, lock_owner, lock_remedies
from tests.real_servers import run_sql
from tests.remedy_sql import statements

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "perf"
ENGINE_REMEDIES = ("InnoDB", "innodb", "PgBouncer", "performance_schema", "pg_stat_activity", "thread_handling")


def _rule_input(tables: dict) -> RuleInput:
    derived, metric = cpu_profile(tables)
    return RuleInput(tables=tables, derived=derived, metrics={"cpu_profile": metric})


def _capture(path: Path) -> dict:
    with tarfile.open(path) as archive:
        data = archive.extractfile("capture/os/perf-script.txt").read()
    return perf_script.parse_bytes(data, ParseContext(source="capture/os/perf-script.txt")).tables


def test_nic_tx_queue_lock_in_napi_gets_the_network_remedy_only(corpus):
    """The issue's case: lock-contention fired on this capture with InnoDB and PgBouncer remedies."""
    outcome = run_rule(lock_contention.RULE, _rule_input(_capture(corpus / "captures" / "numa2-guest-iperf-debian12.tar.gz")))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == "network-tx" and finding.id == "lock-contention/network-tx"
    assert "qdisc / NIC TX-queue lock (virtnet_poll_tx)" in finding.title
    owners = finding.evidence[0]
    assert owners.title.startswith("Whose locks")
    assert [(row[0], row[1], row[3]) for row in owners.rows] == [
        ("network stack: qdisc / NIC TX-queue lock", "virtnet_poll_tx", 113),
        ("network stack: socket lock / TCP-IP", "lock_sock_nested", 54),
    ]
    assert "ethtool -L DEV combined N" in finding.remediation and "rps_sock_flow_entries" in finding.remediation
    assert not [word for word in ENGINE_REMEDIES if word in finding.remediation]
    # 167 lock samples of 7,618 (idle included) at one period each: the host CPU time the locks took
    assert finding.impact["cpu_share"] == pytest.approx(167 / 7618, abs=1e-4)
    assert finding.impact["share_pct"] == pytest.approx(100.0 * 167 / 2594, abs=0.05)


def test_futex_inside_mariadb_is_the_database_s_under_its_handler_call():
    """Real: the lock stacks of mariadbd under hot-row updates end in futex calls below [mariadbd] frames
    (InnoDB's own symbols are not in Debian's binary): the owner is the database, named by its caller."""
    derived, _ = cpu_profile(_capture(FIXTURES / "mariadb-hot-row.tar.xz"))
    stacks = derived["cpu_profile_stacks"].filter((pl.col("category") == "locks-futex") & (pl.col("comm") == "mariadbd"))
    named = lock_owner.owners(stacks)
    assert set(named["owner"]) <= {"database", "network-socket"}
    futex = named.filter(pl.col("stack").str.contains("ha_update_row") & pl.col("stack").str.contains("futex"))
    assert futex.height and set(futex["owner"]) == {"database"} and set(futex["caller"]) == {"handler::ha_update_row"}
    lines = lock_remedies.remedy("database", ["mariadbd"], "handler::ha_update_row")
    assert any("thread_handling = pool-of-threads" in line for line in lines) and not any("PgBouncer" in line for line in lines)


def test_postgresql_row_lock_waits_are_postgresql_s_and_named_by_their_caller():
    """Real: pgbench TPC-B-like updates, 32 clients on scale 1 (make_pg_contention.sh): the backends' lock
    stacks are PostgreSQL's heavyweight lock waits (XactLockTableWait -> ProcSleep -> LWLockAcquire -> semaphore)."""
    derived, _ = cpu_profile(_capture(FIXTURES / "pg-contention.tar.xz"))
    stacks = derived["cpu_profile_stacks"].filter((pl.col("category") == "locks-futex") & (pl.col("comm") == "postgres"))
    named = lock_owner.owners(stacks)
    backend = named.filter(pl.col("owner") == "postgresql")
    assert backend.height and set(backend["caller"]) <= {"ProcSleep", "LockRelease", "LockReleaseAll", "LockAcquireExtended"}
    assert int(backend.filter(pl.col("caller") == "ProcSleep")["samples"].sum()) == 5
    assert set(named["owner"]) == {"postgresql", "network-socket"}  # and the unix socket of the client connection
    text = "\n".join(lock_remedies.remedy("postgresql", ["postgres"], "ProcSleep"))
    assert "pg_blocking_pids(pid)" in text and "INNODB" not in text.upper() and "performance_schema" not in text


@pytest.mark.parametrize(("stack", "comm", "database", "owner", "caller"), [
    # real shapes (corpus captures and the fixtures of this repo)
    ("swapper;handle_softirqs;net_rx_action;__napi_poll;virtnet_poll_tx;_raw_spin_lock;native_queued_spin_lock_slowpath",
     "swapper", False, "network-tx", "virtnet_poll_tx"),
    ("iperf3;read;entry_SYSCALL_64_after_hwframe;do_syscall_64;ksys_read;sock_read_iter;inet6_recvmsg;tcp_recvmsg;lock_sock_nested;"
     "_raw_spin_lock_bh;native_queued_spin_lock_slowpath", "iperf3", False, "network-socket", "lock_sock_nested"),
    ("iperf3;ip_finish_output2;__dev_queue_xmit;sch_direct_xmit;_raw_spin_lock;native_queued_spin_lock_slowpath",
     "iperf3", False, "network-tx", "sch_direct_xmit"),
    ("kdamond.0;ret_from_fork;kthread;kdamond_fn;damon_pa_prepare_access_checks;damon_folio_mkold;rmap_walk_anon;"
     "damon_folio_mkold_one;page_vma_mapped_walk;_raw_spin_lock", "kdamond.0", False, "kernel-mm", "page_vma_mapped_walk"),
    ("mariadbd;__libc_recv;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_recvfrom;__sys_recvfrom;sock_recvmsg;"
     "unix_stream_recvmsg;unix_stream_read_generic;_raw_spin_lock", "mariadbd", True, "network-socket", "unix_stream_read_generic"),
    ("polars-0;syscall;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_futex;do_futex;futex_wake", "polars-0", False, "user", None),
    # crafted shapes of stacks this machine did not produce (symbol names from MariaDB 10.11 / PostgreSQL 15 sources)
    ("mariadbd;do_command;row_ins_clust_index_entry_low;lock_rec_lock;lock_sys_t::wr_lock;srw_mutex_impl<true>::wait_and_lock;"
     "syscall;do_futex;futex_wait", "mariadbd", True, "innodb", "lock_sys_t::wr_lock"),
    ("mysqld;start_thread;btr_search_guess_on_hash;rw_lock_s_lock_spin;ut_delay", "mysqld", True, "innodb", "btr_search_guess_on_hash"),
    ("postgres;PostgresMain;exec_simple_query;GetSnapshotData;LWLockAcquire;perform_spin_delay;pg_usleep",
     "postgres", True, "postgresql", "GetSnapshotData"),
    ("mariadbd;my_malloc;__libc_malloc;sysmalloc;[libc.so.6];__mmap;entry_SYSCALL_64;do_syscall_64;vm_mmap_pgoff;down_write_killable;"
     "rwsem_down_write_slowpath;osq_lock", "mariadbd", True, "kernel-mm", "vm_mmap_pgoff"),
    ("haproxy;run_thread_poll_loop;process_runnable_tasks;pthread_mutex_lock;__lll_lock_wait;syscall;do_futex;futex_wait",
     "haproxy", False, "proxy", "process_runnable_tasks"),
])
def test_owner_of_each_lock_stack(stack, comm, database, owner, caller):
    frames = stack.split(";")
    assert lock_owner.owner_of(frames, comm, database)[0] == owner
    assert lock_owner.caller_of(frames) == (caller or frames[0])


def test_each_owner_s_remedy_names_no_other_engine():
    for owner in (lock_owner.NETWORK_TX, lock_owner.NETWORK_RX, lock_owner.NETWORK_SOCKET, lock_owner.KERNEL_MM):
        text = "\n".join(lock_remedies.remedy(owner, ["mariadbd", "postgres"], None))
        assert not [word for word in ENGINE_REMEDIES if word in text], owner
    innodb = "\n".join(lock_remedies.remedy(lock_owner.INNODB, ["mariadbd"], "lock_rec_lock"))
    assert "pg_stat_activity" not in innodb and "PgBouncer" not in innodb
    postgres = "\n".join(lock_remedies.remedy(lock_owner.POSTGRESQL, ["postgres"], "GetSnapshotData"))
    assert "PgBouncer" in postgres and "INNODB" not in postgres.upper()
    every_sql = "\n".join(
        line for owner, caller in [("innodb", "btr_search_x"), ("database", None)] for line in lock_remedies.remedy(owner, ["mariadbd"], caller)
    )
    assert set(statements(every_sql)) == {statement.rstrip(";") for statement in lock_remedies.MARIADB_STATEMENTS}
    pg_sql = "\n".join(
        line for caller in ("GetSnapshotData", "BufferAlloc", "XLogInsertRecord", "ProcSleep", "SimpleLruReadPage")
        for line in lock_remedies.remedy("postgresql", ["postgres"], caller)
    )
    assert set(statements(pg_sql)) == {statement.rstrip(";") for statement in lock_remedies.POSTGRESQL_STATEMENTS}


def test_mariadb_remedy_sql_runs_on_mariadb(mariadb):
    for statement in lock_remedies.MARIADB_STATEMENTS:
        run_sql(mariadb, statement)  # raises with the server's error


def test_postgresql_remedy_sql_runs_on_postgresql(postgres):
    for statement in lock_remedies.POSTGRESQL_STATEMENTS:
        run_sql(postgres, statement)


def test_flat_report_owner_comes_from_the_entry_and_its_process():
    """perf report / perf top without stacks: an InnoDB spin symbol in mariadbd is InnoDB's; gzip (tooling) is left out."""
    from dbdiag import tables as t

    symbols = t.conform(t.PERF_SYMBOL, pl.DataFrame({
        "event": "cycles", "comm": ["mariadbd", "mariadbd", "swapper", "gzip"], "symbol": ["ut_delay", "row_search_mvcc", "intel_idle", "deflate_slow"],
        "self_pct": [10.0, 40.0, 20.0, 30.0], "event_samples": 1000, "source": "perf-report.txt"}))
    outcome = run_rule(lock_contention.RULE, _rule_input({t.PERF_SYMBOL: symbols}))
    finding = outcome.findings[0]
    assert finding.subject == "innodb" and finding.impact["share_pct"] == 20.0 and finding.impact["cpu_share"] == 0.1
    assert "300 samples of the capture's own tooling left out" in outcome.measured
    assert "SHOW ENGINE INNODB STATUS;" in finding.remediation and "ethtool" not in finding.remediation
