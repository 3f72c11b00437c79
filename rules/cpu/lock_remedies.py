"""The remedy for each lock owner (:mod:`dbdiag.rules.cpu.lock_owner`), for the engine the process is.

Only the owners the profile shows get their lines: no InnoDB or PgBouncer advice for a NIC
TX-queue lock inside NAPI. The SQL printed for MariaDB and PostgreSQL is executed against the
real servers in the tests (``MARIADB_STATEMENTS`` / ``POSTGRESQL_STATEMENTS``).

>>> print(remedy("innodb", ["mariadbd"], "lock_rec_lock")[1])
   SHOW ENGINE INNODB STATUS;  -- SEMAPHORES and TRANSACTIONS: the mutex or rows waited for
>>> [line for line in remedy("network-tx", ["swapper", "iperf3"], "virtnet_poll_tx") if "InnoDB" in line or "PgBouncer" in line]
[]
"""

from __future__ import annotations

from dbdiag.rules.cpu import lock_owner as o

# Every statement below appears verbatim in a remedy; tests run them on MariaDB 10.11 / PostgreSQL 15.
MARIADB_STATEMENTS = (
    "SHOW ENGINE INNODB STATUS;",
    "SELECT * FROM information_schema.INNODB_LOCK_WAITS;",
    "SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT FROM performance_schema.events_waits_summary_global_by_event_name "
    "WHERE EVENT_NAME LIKE 'wait/synch/%' ORDER BY SUM_TIMER_WAIT DESC LIMIT 10;",
    "SET GLOBAL innodb_adaptive_hash_index = OFF;",
)
POSTGRESQL_STATEMENTS = (
    "SELECT wait_event_type, wait_event, count(*) FROM pg_stat_activity WHERE state = 'active' GROUP BY 1, 2 ORDER BY 3 DESC;",
    "SELECT mode, fastpath, count(*) FROM pg_locks GROUP BY 1, 2 ORDER BY 3 DESC;",
    "SELECT pid, wait_event, pg_blocking_pids(pid) AS blocked_by, left(query, 60) FROM pg_stat_activity "
    "WHERE wait_event_type = 'Lock';",
    "SELECT name, blks_hit, blks_read FROM pg_stat_slru ORDER BY blks_read DESC;",
    "SHOW shared_buffers;",
    "SHOW wal_buffers;",
)
LABELS = {
    o.NETWORK_TX: "network stack: qdisc / NIC TX-queue lock",
    o.NETWORK_RX: "network stack: NAPI receive path",
    o.NETWORK_SOCKET: "network stack: socket lock / TCP-IP",
    o.KERNEL_MM: "kernel memory management: mmap_lock / zone / LRU / page lock",
    o.INNODB: "InnoDB mutex / rw-lock",
    o.POSTGRESQL: "PostgreSQL LWLock / spinlock",
    o.PROXY: "a lock inside the proxy",
    o.DATABASE: "a user-space lock inside the database (futex / pthread mutex)",
    o.KERNEL_OTHER: "a kernel lock",
    o.USER_OTHER: "a user-space lock (futex / pthread mutex)",
}


def label(owner: str) -> str:
    return LABELS.get(owner, owner)


def remedy(owner: str, processes: list[str], caller: str | None) -> list[str]:
    """The lines of one owner's remedy; ``processes``: the processes whose samples it holds, busiest
    first; ``caller``: the innermost frame that took the lock (its busiest path)."""
    where = f" (taken in {caller})" if caller else ""
    head = f"{label(owner)}{where}, in {', '.join(processes[:3]) or 'unknown processes'}:"
    body = _REMEDIES.get(owner, _kernel_other)(processes, caller or "")
    return [head, *body]


def _network_tx(_processes: list[str], _caller: str) -> list[str]:
    return [
        "   The senders and the TX-completion softirq (NAPI) of one queue take the same lock: give each CPU its own TX queue.",
        "   ethtool -l DEV                       # TX / combined queues: maximum vs in use",
        "   ethtool -L DEV combined N            # one queue per CPU, up to the maximum shown",
        "   tc qdisc show dev DEV                # one root qdisc (pfifo_fast, fq_codel) serialises every sender",
        "   tc qdisc replace dev DEV root mq     # one child qdisc per TX queue on a multi-queue NIC",
        "   XPS: echo CPUMASK > /sys/class/net/DEV/queues/tx-N/xps_cpus; spread the NIC's IRQs (irq-affinity-skew).",
    ]


def _network_rx(_processes: list[str], _caller: str) -> list[str]:
    return [
        "   One receive queue's NAPI poll runs on one CPU: spread the receive work.",
        "   ethtool -l DEV; ethtool -L DEV combined N                          # more RX queues, one IRQ each",
        "   RPS: echo CPUMASK > /sys/class/net/DEV/queues/rx-N/rps_cpus        # when the NIC has one queue",
        "   Spread the queues' IRQs over CPUs (irqbalance or /proc/irq/N/smp_affinity_list).",
    ]


def _network_socket(_processes: list[str], _caller: str) -> list[str]:
    return [
        "   The socket lock is taken by the thread reading the socket and by the softirq delivering to it (or by",
        "   several threads sharing one socket): deliver each flow on the CPU of its reader (RFS).",
        "   sysctl -w net.core.rps_sock_flow_entries=32768",
        "   echo 2048 > /sys/class/net/DEV/queues/rx-N/rps_flow_cnt          # per RX queue",
        "   One connection per thread in the client or pool; no socket shared by threads.",
    ]


def _kernel_mm(_processes: list[str], _caller: str) -> list[str]:
    return [
        "   Many threads mapping and unmapping memory (mmap_lock), allocating pages (zone lock) or moving them on the",
        "   LRU: keep memory instead of returning it.",
        "   An allocator that keeps its arenas: jemalloc (MariaDB: malloc-lib=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
        "   in [mysqld_safe]; others: LD_PRELOAD); memory reserved at start (buffer pool / shared_buffers on huge pages:",
        "   MariaDB/MySQL large_pages=ON, PostgreSQL huge_pages = on); THP off the fault path:",
        "   echo madvise > /sys/kernel/mm/transparent_hugepage/enabled",
    ]


def _innodb(processes: list[str], caller: str) -> list[str]:
    lines = [
        "   SHOW ENGINE INNODB STATUS;  -- SEMAPHORES and TRANSACTIONS: the mutex or rows waited for",
        "   SELECT * FROM information_schema.INNODB_LOCK_WAITS;  -- rows waited for (MySQL 8: performance_schema.data_lock_waits)",
        "   With performance_schema=ON (a startup option; MariaDB's default is OFF):",
        "   SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT FROM performance_schema.events_waits_summary_global_by_event_name "
        "WHERE EVENT_NAME LIKE 'wait/synch/%' ORDER BY SUM_TIMER_WAIT DESC LIMIT 10;",
    ]
    if caller.startswith("btr_search"):
        lines.append("   The adaptive hash index takes it: SET GLOBAL innodb_adaptive_hash_index = OFF;")
    lines.extend(_threads(processes))
    return lines


def _postgresql(_processes: list[str], caller: str) -> list[str]:
    lines = ["   SELECT wait_event_type, wait_event, count(*) FROM pg_stat_activity WHERE state = 'active' GROUP BY 1, 2 ORDER BY 3 DESC;"]
    if caller.startswith(("ProcArray", "GetSnapshotData")):
        lines.append("   ProcArrayLock: every snapshot reads every backend. Fewer backends: PgBouncer pool_mode = transaction.")
    elif caller.startswith(("BufferAlloc", "BufTable", "StrategyGetBuffer", "ReadBuffer")):
        lines.append("   Buffer mapping: pages replaced all the time. SHOW shared_buffers; then raise it (restart).")
    elif caller.startswith(("XLog", "WAL", "WaitXLog")):
        lines.append("   WAL insertion / flush: SHOW wal_buffers; larger wal_buffers, a faster WAL disk, commit_delay.")
    elif caller.startswith(("LockAcquire", "LockRelease", "ProcSleep", "ProcReleaseLocks", "XactLockTableWait")):
        lines.append("   Heavyweight locks: transactions waiting for rows or tables that others hold (hot rows), and who blocks them:")
        lines.append("   SELECT pid, wait_event, pg_blocking_pids(pid) AS blocked_by, left(query, 60) FROM pg_stat_activity "
                     "WHERE wait_event_type = 'Lock';")
        lines.append("   The lock manager itself: SELECT mode, fastpath, count(*) FROM pg_locks GROUP BY 1, 2 ORDER BY 3 DESC;"
                     "  -- fewer relations and partitions per transaction")
    elif caller.startswith(("SimpleLru", "Slru")):
        lines.append("   SLRU: SELECT name, blks_hit, blks_read FROM pg_stat_slru ORDER BY blks_read DESC;  -- subtransactions, multixacts")
    return lines


def _database(processes: list[str], _caller: str) -> list[str]:
    engine = engine_of(processes)
    if engine == "mariadb":
        return [
            "   MariaDB: SHOW ENGINE INNODB STATUS;  -- SEMAPHORES: InnoDB mutexes waited for",
            "   With performance_schema=ON (startup option, default OFF): SELECT EVENT_NAME, COUNT_STAR, SUM_TIMER_WAIT FROM "
            "performance_schema.events_waits_summary_global_by_event_name WHERE EVENT_NAME LIKE 'wait/synch/%' "
            "ORDER BY SUM_TIMER_WAIT DESC LIMIT 10;",
            *_threads(processes),
        ]
    if engine == "mysql":
        return [
            "   MySQL: SHOW ENGINE INNODB STATUS; and performance_schema.events_waits_summary_global_by_event_name",
            "   (wait/synch/% instruments enabled in performance_schema.setup_instruments).",
            *_threads(processes),
        ]
    if engine == "postgresql":
        return _postgresql(processes, "")
    return ["   perf lock record -a -- sleep 10; perf lock contention   # the contended locks and their callers (perf >= 6.0, kernel >= 5.19)"]


def _threads(processes: list[str]) -> list[str]:
    if engine_of(processes) == "mariadb":
        return ["   Fewer threads running at once: thread_handling = pool-of-threads (MariaDB thread pool, my.cnf [mariadbd])."]
    return ["   Fewer threads running at once: a smaller client pool, or innodb_thread_concurrency (MySQL)."]


def _proxy(processes: list[str], _caller: str) -> list[str]:
    name = next((p for p in processes if o.process_owner(p, False, None) == o.PROXY), "")
    if name.startswith("haproxy"):
        return ["   HAProxy threads share its locks: nbthread no larger than the cores of one node, cpu-map auto:1/1-N (haproxy.cfg global)."]
    if name.startswith("pgbouncer"):
        return ["   PgBouncer is single-threaded: several processes on one port (so_reuseport = 1), each on its own CPU."]
    if name.startswith("proxysql"):
        return ["   ProxySQL worker threads: mysql-threads no larger than the cores it may use (SET mysql-threads=N; SAVE MYSQL VARIABLES TO DISK; restart)."]
    return ["   The proxy's worker threads share its locks: no more worker threads than the cores it runs on."]


def _kernel_other(_processes: list[str], caller: str) -> list[str]:
    return [f"   perf lock record -a -- sleep 10; perf lock contention   # the contended kernel lock{' under ' + caller if caller else ''} (perf >= 6.0)"]


def _user_other(_processes: list[str], _caller: str) -> list[str]:
    return ["   The process's own mutex: its caller frames (evidence) name it; fewer threads contending for it."]


def engine_of(processes: list[str]) -> str | None:
    for process in processes:
        if process.startswith("mariadbd"):
            return "mariadb"
        if process.startswith("mysqld"):
            return "mysql"
        if process.startswith(("postgres", "postmaster")):
            return "postgresql"
    return None


_REMEDIES = {
    o.NETWORK_TX: _network_tx,
    o.NETWORK_RX: _network_rx,
    o.NETWORK_SOCKET: _network_socket,
    o.KERNEL_MM: _kernel_mm,
    o.INNODB: _innodb,
    o.POSTGRESQL: _postgresql,
    o.DATABASE: _database,
    o.PROXY: _proxy,
    o.KERNEL_OTHER: _kernel_other,
    o.USER_OTHER: _user_other,
}
