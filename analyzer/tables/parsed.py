"""Names and schemas of the tables parsers produce (the derived ones: :mod:`dbdiag.tables.derived`).

Tables are long ("tidy"): one row per observation, units in column names. Every table has
a ``source`` column (the member path, for evidence). When several members produce the same
table the pipeline concatenates them (``diagonal_relaxed``) in capture order.

Times are ``Datetime("us", "UTC")``. A CPU number of ``-1`` stands for mpstat's ``all`` row.
"""

from __future__ import annotations

import polars as pl

from dbdiag.tables.disks_memory import *  # noqa: F403 - the disk and memory tables, read as t.NAME
from dbdiag.tables.disks_memory import DISKS_MEMORY_SCHEMAS
from dbdiag.tables.types import UTC_TIME

# mpstat/sar CPU utilisation: one row per (interval end, cpu).
CPU_UTIL = "cpu_util"
CPU_UTIL_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "usr_pct": pl.Float64,
    "nice_pct": pl.Float64,
    "sys_pct": pl.Float64,
    "iowait_pct": pl.Float64,
    "irq_pct": pl.Float64,
    "soft_pct": pl.Float64,
    "steal_pct": pl.Float64,
    "guest_pct": pl.Float64,
    "gnice_pct": pl.Float64,
    "idle_pct": pl.Float64,
    "source": pl.String,
}

# mpstat -N: per NUMA node utilisation, same percent columns with ``node`` instead of ``cpu``.
NODE_UTIL = "node_util"
NODE_UTIL_SCHEMA = {
    "ts": UTC_TIME,
    "node": pl.Int32,
    **{k: v for k, v in CPU_UTIL_SCHEMA.items() if k.endswith("_pct")},
    "source": pl.String,
}

# mpstat -I SCPU / -o JSON soft-interrupts: softirq rate per CPU and interval.
SOFTIRQ_RATE = "softirq_rate"
SOFTIRQ_RATE_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "softirq": pl.String,  # NET_RX, NET_TX, BLOCK, TIMER, ... as the kernel names them
    "per_s": pl.Float64,
    "source": pl.String,
}

# mpstat -I CPU / -I ALL per-IRQ rates: one row per (interval, cpu, irq).
IRQ_RATE = "irq_rate"
IRQ_RATE_SCHEMA = {
    "ts": UTC_TIME,
    "cpu": pl.Int32,
    "irq": pl.String,  # "25", "LOC", "NMI" ... as mpstat prints them, without "/s"
    "per_s": pl.Float64,
    "source": pl.String,
}

# /proc/softirqs snapshots: cumulative counters. ``snapshot`` numbers the snapshots within
# one member (0, 1, ...); ordering across members is derive's job (capture order/name hints).
SOFTIRQ_COUNT = "softirq_count"
SOFTIRQ_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # time line written before the snapshot (pt-stalk "TS <epoch>", date, ISO), else null
    "cpu": pl.Int32,
    "softirq": pl.String,
    "count": pl.Int64,
    "source": pl.String,
}

# /proc/interrupts snapshots: cumulative counters per IRQ line and CPU.
IRQ_COUNT = "irq_count"
IRQ_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # time line written before the snapshot (pt-stalk "TS <epoch>", date, ISO), else null
    "irq": pl.String,  # "25", "NMI", "LOC", "IPI0" ...
    "cpu": pl.Int32,
    "count": pl.Int64,
    "chip": pl.String,  # "PCI-MSI", "IO-APIC", "GICv3" or null for named rows
    "hwirq": pl.String,  # "49153-edge", "2-edge" ... or null
    "device": pl.String,  # "virtio0-input.0", "eth0-TxRx-3", or the description of named rows
    "source": pl.String,
}

# CPU topology from lscpu / lscpu -p / numactl --hardware / mpstat -T.
TOPOLOGY = "topology"
TOPOLOGY_SCHEMA = {
    "cpu": pl.Int32,
    "core": pl.Int32,
    "socket": pl.Int32,
    "node": pl.Int32,
    "source": pl.String,
}

# NUMA nodes: memory per node where given (numactl --hardware, lscpu gives none).
NUMA_NODE = "numa_node"
NUMA_NODE_SCHEMA = {
    "node": pl.Int32,
    "cpus": pl.String,  # as a list string "0-7" or "0 2 4"
    "cpu_count": pl.Int32,
    "size_mb": pl.Int64,
    "free_mb": pl.Int64,
    "source": pl.String,
}

# Host facts: key/value pairs a parser learnt in passing (hostname, kernel, cpu count, model).
HOST_FACT = "host_fact"
HOST_FACT_SCHEMA = {
    "key": pl.String,
    "value": pl.String,
    "source": pl.String,
}

# One row per executed SQL statement, for every engine (MySQL/MariaDB/Percona, TiDB, PostgreSQL).
# ``stmt_id`` numbers statements within one source member (0, 1, ...); (source, stmt_id) is the
# key that ``plan_node`` rows point to. Columns a format does not carry stay null.
STATEMENT = "statement"
STATEMENT_SCHEMA = {
    "stmt_id": pl.Int64,
    "engine": pl.String,  # "mysql", "mariadb", "percona", "tidb", "postgresql"
    "start_ts": UTC_TIME,
    "end_ts": UTC_TIME,
    "query_time_s": pl.Float64,
    "lock_time_s": pl.Float64,  # MySQL Lock_time; TiDB lock wait (Lock_keys_time / LockKeys)
    "rows_examined": pl.Int64,
    "rows_sent": pl.Int64,
    "rows_affected": pl.Int64,
    "user": pl.String,
    "client_host": pl.String,
    "db": pl.String,
    "conn_id": pl.String,  # MySQL thread id, TiDB Conn_ID, PostgreSQL pid or session id
    "txn_id": pl.String,  # TiDB Txn_start_ts, PostgreSQL %x/%v, InnoDB_trx_id
    "instance": pl.String,  # TiDB INSTANCE, or the server the log came from when known
    "full_scan": pl.Boolean,
    "full_join": pl.Boolean,
    "tmp_table": pl.Boolean,
    "tmp_table_on_disk": pl.Boolean,
    "filesort": pl.Boolean,
    "digest": pl.String,  # engine digest: TiDB Digest, PostgreSQL query_id
    "plan_digest": pl.String,  # TiDB Plan_digest
    "plan": pl.String,  # plan text as logged/decoded (MariaDB explain rows, TiDB plan, auto_explain)
    "plan_signature": pl.String,  # plan shape without costs: "t1:ref(idx_a)|t2:ALL" etc.
    "stats_info": pl.String,  # TiDB Stats: "t:pseudo" / "t:446183563574853633"
    "index_names": pl.String,  # TiDB Index_names, or indexes named in the plan
    "prepared": pl.Boolean,
    "plan_from_cache": pl.Boolean,
    "is_internal": pl.Boolean,
    "success": pl.Boolean,
    "error_code": pl.String,
    "mem_max_bytes": pl.Int64,
    "process_time_s": pl.Float64,  # TiDB Process_time (coprocessor CPU), summed over cop tasks
    "wait_time_s": pl.Float64,  # TiDB Wait_time
    "backoff_time_s": pl.Float64,  # TiDB Backoff_time
    "sql": pl.String,  # the statement text, literals included (privacy is the report's job)
    "source": pl.String,
    "line": pl.Int64,  # 1-based line of the entry's first line in the source member
}

# Plan nodes of statements whose plan was logged (auto_explain, MariaDB explain, TiDB plan):
# one row per node, depth-first order. Estimates vs actuals drive the stale-statistics rule.
PLAN_NODE = "plan_node"
PLAN_NODE_SCHEMA = {
    "stmt_id": pl.Int64,
    "node_id": pl.Int32,  # 0 = root, in plan order
    "depth": pl.Int32,
    "node_type": pl.String,  # "Seq Scan", "Index Scan", "TableFullScan", MariaDB access type "ALL"/"ref"
    "relation": pl.String,  # table name (alias resolved when the plan says)
    "index_name": pl.String,
    "est_rows": pl.Float64,
    "actual_rows": pl.Float64,  # per loop, as the engine reports it
    "loops": pl.Float64,
    "rows_removed_by_filter": pl.Float64,
    "filter": pl.String,  # filter / condition text when given
    "source": pl.String,
}

# perf script call stacks folded FlameGraph-style: one row per distinct (process, thread, event, stack)
# with the number of samples that ended there. Frames are root-first, joined by ";"; a frame is the
# symbol without "+0x..." offsets, "[unknown]" symbols become "[dso basename]" as stackcollapse-perf.pl
# does; kernel frames keep their name (``kernel`` marks stacks whose leaf is in the kernel).
PERF_STACK = "perf_stack"
PERF_STACK_SCHEMA = {
    "comm": pl.String,  # process/thread name as perf prints it ("mariadbd", "swapper")
    "pid": pl.Int32,  # null when the layout has none
    "tid": pl.Int32,
    "event": pl.String,  # "cycles", "cpu-clock", "page-faults"... (null when not printed)
    "stack": pl.String,  # "start_thread;do_command;dispatch_command;mysql_parse"
    "leaf": pl.String,  # the sampled frame (last of ``stack``)
    "leaf_kernel": pl.Boolean,  # leaf frame's dso is the kernel ([kernel.kallsyms], vmlinux, modules)
    "samples": pl.Int64,
    "period": pl.Int64,  # sum of the sample periods when printed, else null
    "source": pl.String,
}

# perf report --stdio / perf top: one row per flat entry (symbol, as sorted by the report's keys).
PERF_SYMBOL = "perf_symbol"
PERF_SYMBOL_SCHEMA = {
    "event": pl.String,  # "cycles", "cpu-clock:pppH" ... from the "# Samples: ... of event" header
    "comm": pl.String,  # null when not a sort key
    "pid": pl.Int32,
    "dso": pl.String,
    "symbol": pl.String,
    "kernel": pl.Boolean,  # "[k]" vs "[.]" (null when not shown)
    "self_pct": pl.Float64,  # "Overhead" (flat) or "Self" (with --children)
    "children_pct": pl.Float64,  # "Children" with --children, else null
    "samples": pl.Int64,  # "Samples" column when shown (-n), else null
    "event_samples": pl.Int64,  # total samples of the event from the header, else null
    "source": pl.String,
}

# perf report call-graph branches under a flat entry: one row per printed chain.
PERF_CALLCHAIN = "perf_callchain"
PERF_CALLCHAIN_SCHEMA = {
    "event": pl.String,
    "entry_symbol": pl.String,  # the flat entry the chain hangs under
    "chain": pl.String,  # frames callers first, as printed, joined by ";": ends at the entry in callee-order
    # graphs, may start at it (the children part) with --children; --sort sym graphs leave the entry out
    "share_pct": pl.Float64,  # percentage printed on the branch (of all samples, as perf prints it)
    "source": pl.String,
}

# numastat family: per-node counters. ``scope``: "system" (numastat, sysfs nodeN/numastat; pages),
# "meminfo" (numastat -m, sysfs nodeN/meminfo; MB), "process" (numastat -p; MB).
# Totals printed by numastat are not kept (sum the nodes).
NUMA_COUNTER = "numa_counter"
NUMA_COUNTER_SCHEMA = {
    "snapshot": pl.Int32,  # numbers snapshots within one member (0, 1, ...)
    "ts": UTC_TIME,  # time line before the snapshot when present, else null
    "scope": pl.String,
    "pid": pl.Int32,  # numastat -p: the process id, else null
    "process": pl.String,  # numastat -p: the process name ("mariadbd"), else null
    "node": pl.Int32,
    "counter": pl.String,  # numa_hit, numa_miss, numa_foreign, interleave_hit, local_node, other_node,
    # MemTotal, MemFree, FilePages, AnonHugePages..., Huge, Heap, Stack, Private
    "value": pl.Float64,
    "unit": pl.String,  # "pages", "MB", "kB"
    "source": pl.String,
}

# /proc/vmstat snapshots: every counter (numa_hint_faults, numa_pages_migrated, pgmigrate_success, ...).
VMSTAT_COUNT = "vmstat_count"
VMSTAT_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,
    "counter": pl.String,
    "value": pl.Int64,
    "source": pl.String,
}

# /proc/stat snapshots: ctxt, processes, procs_running, procs_blocked, btime, and the intr/softirq totals.
PROC_STAT_COUNT = "proc_stat_count"
PROC_STAT_COUNT_SCHEMA = dict(VMSTAT_COUNT_SCHEMA)
# PostgreSQL's pg_stat_database as psql prints it (parsers/pg_stat_database.py): one row per snapshot and database,
# counters cumulative since ``stats_reset`` (null: never reset). Columns a server version lacks are null.
PG_STAT_DATABASE = "pg_stat_database"
PG_STAT_DATABASE_SCHEMA = {
    "snapshot": pl.Int32,  # 0, 1, ... in the order the tables appear in the member
    "ts": UTC_TIME,  # the snapshot's time column (now(), snapshot_time, ...) or the time line before it; else null
    "datid": pl.Int64,
    "datname": pl.String,  # null for the row of shared objects (datid 0)
    "numbackends": pl.Int32,
    "xact_commit": pl.Int64,
    "xact_rollback": pl.Int64,
    "blks_read": pl.Int64,  # blocks read from outside shared buffers (the OS page cache or the disk)
    "blks_hit": pl.Int64,  # blocks found in shared buffers
    "tup_returned": pl.Int64,
    "tup_fetched": pl.Int64,
    "tup_inserted": pl.Int64,
    "tup_updated": pl.Int64,
    "tup_deleted": pl.Int64,
    "conflicts": pl.Int64,
    "temp_files": pl.Int64,
    "temp_bytes": pl.Int64,
    "deadlocks": pl.Int64,
    "checksum_failures": pl.Int64,  # PostgreSQL 12+
    "checksum_last_failure": UTC_TIME,
    "blk_read_time_ms": pl.Float64,  # blk_read_time (track_io_timing)
    "blk_write_time_ms": pl.Float64,
    "session_time_ms": pl.Float64,  # PostgreSQL 14+
    "active_time_ms": pl.Float64,
    "idle_in_transaction_time_ms": pl.Float64,
    "sessions": pl.Int64,
    "sessions_abandoned": pl.Int64,
    "sessions_fatal": pl.Int64,
    "sessions_killed": pl.Int64,
    "stats_reset": UTC_TIME,
    "source": pl.String,
    "line": pl.Int64,
}

# Host configuration read from the OS. ``category``: "sysctl", "cmdline", "thp", "block",
# "irq_affinity", "nic_channels", "process_affinity"; "unknown" for a choice line nothing identifies.
HOST_SETTING = "host_setting"
HOST_SETTING_SCHEMA = {
    "category": pl.String,
    "subject": pl.String,  # device ("nvme0n1"), IRQ ("25"), NIC ("eth0"), process ("mariadbd 1234"); null for global
    "name": pl.String,  # "kernel.numa_balancing", "isolcpus", "enabled", "scheduler", "smp_affinity_list",
    # "combined_current", "Cpus_allowed_list" ...
    "value": pl.String,  # effective value ("always" for "[always] madvise never", "none" for "[none] mq-deadline")
    "choices": pl.String,  # the offered choices when the file lists them ("always madvise never"), else null
    "source": pl.String,
}

# Database settings and status counters. ``kind``: "variable" (SHOW GLOBAL VARIABLES, SHOW ALL,
# pg_settings), "status" (SHOW GLOBAL STATUS), "config" (postgresql.conf, my.cnf, TiDB/TiKV/PD TOML).
DB_SETTING = "db_setting"
DB_SETTING_SCHEMA = {
    "engine": pl.String,  # "mysql", "mariadb", "postgresql", "tidb", "tikv", "pd"; null when unknown
    "kind": pl.String,
    "name": pl.String,  # as the engine spells it; TOML keys as dotted paths ("storage.block-cache.capacity")
    "value": pl.String,  # as printed, quotes removed ("134217728", "128MB", "on")
    "unit": pl.String,  # pg_settings/SHOW ALL unit when given ("8kB", "ms"), else null
    "source": pl.String,
}

# Load-test samples (JMeter JTL CSV/XML): one row per sampled request/transaction.
LOAD_SAMPLE = "load_sample"
LOAD_SAMPLE_SCHEMA = {
    "start_ts": UTC_TIME,  # timeStamp (sample start)
    "elapsed_ms": pl.Float64,  # elapsed: the whole sample
    "label": pl.String,  # sampler or transaction-controller label
    "success": pl.Boolean,
    "response_code": pl.String,
    "thread_name": pl.String,
    "latency_ms": pl.Float64,  # Latency: time to first byte
    "connect_ms": pl.Float64,
    "idle_ms": pl.Float64,  # IdleTime (timers/think time inside a transaction controller)
    "bytes": pl.Int64,
    "sent_bytes": pl.Int64,
    "all_threads": pl.Int32,
    "grp_threads": pl.Int32,
    "is_transaction": pl.Boolean,  # a transaction-controller sample (its children are in the file too)
    "source": pl.String,
    "line": pl.Int64,
}

# Load-test progress lines: sysbench --report-interval lines, pgbench -P progress lines.
LOAD_INTERVAL = "load_interval"
LOAD_INTERVAL_SCHEMA = {
    "run": pl.Int32,  # numbers runs within one member (several outputs concatenated)
    "tool": pl.String,  # "sysbench", "pgbench"
    "ts": UTC_TIME,  # wall time when printed (pgbench --progress-timestamp), else null
    "offset_s": pl.Float64,  # seconds since the run started, as printed
    "threads": pl.Int32,
    "tps": pl.Float64,
    "qps": pl.Float64,
    "reads_per_s": pl.Float64,
    "writes_per_s": pl.Float64,
    "other_per_s": pl.Float64,
    "latency_ms": pl.Float64,  # sysbench: the percentile it prints; pgbench: "lat" (average)
    "latency_pct": pl.Float64,  # 95.0 for sysbench's default, null when the value is an average
    "latency_stddev_ms": pl.Float64,
    "lag_ms": pl.Float64,  # pgbench -R schedule lag
    "errors_per_s": pl.Float64,
    "reconnects_per_s": pl.Float64,
    "source": pl.String,
}

# Load-test run summaries (sysbench / pgbench), one row per run.
LOAD_RUN = "load_run"
LOAD_RUN_SCHEMA = {
    "run": pl.Int32,
    "tool": pl.String,
    "test": pl.String,  # "oltp_read_write", "TPC-B (sort of)", a script file name
    "threads": pl.Int32,  # sysbench threads / pgbench clients
    "duration_s": pl.Float64,
    "transactions": pl.Int64,
    "tps": pl.Float64,
    "queries": pl.Int64,
    "qps": pl.Float64,
    "errors": pl.Int64,
    "reconnects": pl.Int64,
    "latency_min_ms": pl.Float64,
    "latency_avg_ms": pl.Float64,
    "latency_max_ms": pl.Float64,
    "latency_pct_ms": pl.Float64,
    "latency_pct": pl.Float64,  # which percentile latency_pct_ms is (95.0)
    "latency_sum_ms": pl.Float64,  # sysbench "sum": total time spent in transactions
    "rate_limit_tps": pl.Float64,  # pgbench -R / sysbench --rate, when set
    "scale": pl.Int32,  # pgbench scaling factor
    "connect_avg_ms": pl.Float64,  # pgbench -C "average connection time": connect + disconnect per transaction
    "initial_connect_ms": pl.Float64,  # pgbench "initial connection time" (once per client, without -C)
    "latency_includes_connect": pl.Boolean,  # latency_avg_ms holds connect_avg_ms (pgbench -C without -P/-L, or -R)
    "source": pl.String,
}

# pgbench -r per-statement latencies.
LOAD_STATEMENT_LATENCY = "load_statement_latency"
LOAD_STATEMENT_LATENCY_SCHEMA = {
    "run": pl.Int32,
    "script": pl.String,
    "statement": pl.String,
    "latency_ms": pl.Float64,
    "failures": pl.Int64,
    "source": pl.String,
}

# Latency histograms (sysbench --histogram): one row per bucket.
LATENCY_HISTOGRAM = "latency_histogram"
LATENCY_HISTOGRAM_SCHEMA = {
    "run": pl.Int32,
    "latency_ms": pl.Float64,  # bucket value as printed
    "count": pl.Int64,
    "source": pl.String,
}

# Time series from dashboards: Prometheus query/query_range JSON, Grafana CSV, TiDB Dashboard metrics.
METRIC_SAMPLE = "metric_sample"
METRIC_SAMPLE_SCHEMA = {
    "ts": UTC_TIME,
    "metric": pl.String,  # __name__, else the file/panel/query name
    "labels": pl.String,  # canonical "k1=v1,k2=v2" sorted by key, without __name__ ("" when none)
    "instance": pl.String,  # the instance label when present
    "value": pl.Float64,  # NaN and +/-Inf kept as float values
    "source": pl.String,
}

# Statement summaries (TiDB Dashboard statements export, statements_summary tables).
STATEMENT_SUMMARY = "statement_summary"
STATEMENT_SUMMARY_SCHEMA = {
    "digest": pl.String,
    "digest_text": pl.String,  # the normalized statement
    "schema_name": pl.String,
    "plan_digest": pl.String,
    "instance": pl.String,
    "exec_count": pl.Int64,
    "sum_latency_s": pl.Float64,
    "avg_latency_s": pl.Float64,
    "max_latency_s": pl.Float64,
    "min_latency_s": pl.Float64,
    "avg_rows_examined": pl.Float64,
    "first_seen": UTC_TIME,
    "last_seen": UTC_TIME,
    "source": pl.String,
}

# HAProxy "show stat" CSV: one row per (snapshot, proxy, server).
PROXY_STAT = "proxy_stat"
PROXY_STAT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # time line before the snapshot, else null
    "proxy": pl.String,  # pxname
    "server": pl.String,  # svname (FRONTEND, BACKEND, or the server)
    "type": pl.String,  # "frontend", "backend", "server", "listener"
    "status": pl.String,
    "scur": pl.Int64,
    "smax": pl.Int64,
    "slim": pl.Int64,
    "stot": pl.Int64,
    "qcur": pl.Int64,
    "qmax": pl.Int64,
    "qlimit": pl.Int64,
    "rate": pl.Int64,
    "rate_max": pl.Int64,
    "ereq": pl.Int64,
    "econ": pl.Int64,
    "eresp": pl.Int64,
    "source": pl.String,
    "line": pl.Int64,  # line of the row in the member (file:line)
}

# HAProxy configuration (haproxy.cfg): one row per directive, with the session limit it sets.
PROXY_CONFIG = "proxy_config"
PROXY_CONFIG_SCHEMA = {
    "section": pl.String,  # "global", "defaults", "frontend", "backend", "listen", ...
    "proxy": pl.String,  # the section's name; null for an unnamed global/defaults
    "keyword": pl.String,  # the directive's first word ("maxconn", "server", "bind" ...)
    "server": pl.String,  # the server's name on a server line
    "args": pl.String,  # the rest of the line without its comment
    "maxconn": pl.Int64,  # the limit the line sets (maxconn N, or a server/default-server maxconn N parameter)
    "line": pl.Int64,
    "source": pl.String,
}

# Events from logs: OOM kills, restarts, crashes, fatal errors, aborted connections.
EVENT = "event"
EVENT_SCHEMA = {
    "ts": UTC_TIME,
    "host": pl.String,
    "component": pl.String,  # "kernel", "tidb", "tikv", "pd", "mysqld", "postgres", "haproxy", "systemd"
    "kind": pl.String,  # "oom-kill", "start", "shutdown", "crash", "restart" (a supervisor restarts it),
    # "recovery" (crash recovery at start: stopped uncleanly at an unknown earlier time), "fatal",
    # "memory-alarm" (server near its memory limit), "aborted-connection", "error"
    "process": pl.String,  # the process the event is about (the OOM victim, the restarted server)
    "pid": pl.Int32,
    "message": pl.String,  # the log line, trimmed to a sensible length
    "source": pl.String,
    "line": pl.Int64,
}

# Lock waits a database logged on their own (PostgreSQL log_lock_waits, deadlocks, lock timeouts): one row
# per log entry. MySQL-family and TiDB waits are statement columns (``lock_time_s``), not rows here.
LOCK_WAIT = "lock_wait"
LOCK_WAIT_SCHEMA = {
    "ts": UTC_TIME,
    "kind": pl.String,  # "waiting" (still waiting after wait_s), "acquired" (after wait_s), "deadlock" (victim), "timeout"
    "conn_id": pl.String,  # as the statement table's conn_id (PostgreSQL session id, else pid)
    "pid": pl.String,  # the waiting process
    "lock_mode": pl.String,  # "ShareLock", "AccessShareLock", "ExclusiveLock" ...
    "lock_object": pl.String,  # "transaction 735", "relation 16385 of database 16384", "tuple (0,7) of relation ..."
    "wait_s": pl.Float64,
    "holders": pl.String,  # pids holding the lock, comma-separated, when the log names them
    "relation": pl.String,  # table name when the log's CONTEXT names it
    "statement": pl.String,  # the waiting statement, literals included (derive redacts it)
    "detail": pl.String,  # the DETAIL text (wait queue; a deadlock's processes and statements)
    "source": pl.String,
    "line": pl.Int64,
}

SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    CPU_UTIL: CPU_UTIL_SCHEMA,
    NODE_UTIL: NODE_UTIL_SCHEMA,
    SOFTIRQ_RATE: SOFTIRQ_RATE_SCHEMA,
    IRQ_RATE: IRQ_RATE_SCHEMA,
    SOFTIRQ_COUNT: SOFTIRQ_COUNT_SCHEMA,
    IRQ_COUNT: IRQ_COUNT_SCHEMA,
    TOPOLOGY: TOPOLOGY_SCHEMA,
    NUMA_NODE: NUMA_NODE_SCHEMA,
    HOST_FACT: HOST_FACT_SCHEMA,
    STATEMENT: STATEMENT_SCHEMA,
    PLAN_NODE: PLAN_NODE_SCHEMA,
    PERF_STACK: PERF_STACK_SCHEMA,
    PERF_SYMBOL: PERF_SYMBOL_SCHEMA,
    PERF_CALLCHAIN: PERF_CALLCHAIN_SCHEMA,
    NUMA_COUNTER: NUMA_COUNTER_SCHEMA,
    VMSTAT_COUNT: VMSTAT_COUNT_SCHEMA,
    PROC_STAT_COUNT: PROC_STAT_COUNT_SCHEMA,
    PG_STAT_DATABASE: PG_STAT_DATABASE_SCHEMA,
    HOST_SETTING: HOST_SETTING_SCHEMA,
    DB_SETTING: DB_SETTING_SCHEMA,
    LOAD_SAMPLE: LOAD_SAMPLE_SCHEMA,
    LOAD_INTERVAL: LOAD_INTERVAL_SCHEMA,
    LOAD_RUN: LOAD_RUN_SCHEMA,
    LOAD_STATEMENT_LATENCY: LOAD_STATEMENT_LATENCY_SCHEMA,
    LATENCY_HISTOGRAM: LATENCY_HISTOGRAM_SCHEMA,
    METRIC_SAMPLE: METRIC_SAMPLE_SCHEMA,
    STATEMENT_SUMMARY: STATEMENT_SUMMARY_SCHEMA,
    PROXY_STAT: PROXY_STAT_SCHEMA,
    PROXY_CONFIG: PROXY_CONFIG_SCHEMA,
    EVENT: EVENT_SCHEMA,
    LOCK_WAIT: LOCK_WAIT_SCHEMA,
    **DISKS_MEMORY_SCHEMAS,
}
