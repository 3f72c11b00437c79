"""Names and schemas of the tables derive produces (``dbdiag.derive.DERIVATIONS``), and the metric keys.

Rules read them through the same ``inp.table`` as the parsed ones; a derived table whose meaning differs
from a parsed one has its own name (the fingerprinted statements are not ``statement``).
"""

from __future__ import annotations

import polars as pl

from dbdiag.tables.parsed import (
    EVENT,
    LOAD_SAMPLE,
    LOAD_STATEMENT_LATENCY,
    LOCK_WAIT,
    LOCK_WAIT_SCHEMA,
    PERF_STACK_SCHEMA,
    PLAN_NODE,
    PLAN_NODE_SCHEMA,
    STATEMENT,
    STATEMENT_SCHEMA,
    UTC_TIME,
)

# The parsed tables redact_text made safe to show (SQL literals in log lines and labels replaced;
# same rows and schema). They take the parsed names downstream of derive: nothing later sees the raw text.
PUBLIC_TEXT_TABLES = (EVENT, LOAD_SAMPLE, LOAD_STATEMENT_LATENCY)

# derive/changes.py: changes seen in the capture, the causes plan and latency
# changes are traced to. One row per DDL, statistics collection, bulk data change, setting change,
# restart or OOM kill, oldest first.
CHANGE = "change"
CHANGE_SCHEMA = {
    "ts": UTC_TIME,  # when it took effect: the statement's end, the event's time
    "kind": pl.String,  # "ddl", "statistics", "bulk-change", "config", "restart", "oom-kill"
    "action": pl.String,  # "index-ignored", "index-not-ignored", "index-invisible", "index-visible", "create-index",
    # "drop-index", "alter-index", "alter-table", "create-table", "drop-table", "truncate", "rename-table", "analyze", "auto-analyze",
    # "optimize", "lock-stats", "unlock-stats", "insert", "update", "delete", "load-data", "copy", "set-global",
    # "alter-system", "reload"; for events their kind ("start", "shutdown", "crash", "restart", "recovery", "oom-kill")
    "table": pl.String,  # table name without schema or quotes; null when none is named or known
    "object": pl.String,  # the index, the setting, the process
    "rows": pl.Int64,  # rows affected when the log says
    "engine": pl.String,  # the statement's engine, the event's component
    "statement": pl.String,  # the SQL (literals replaced unless shown) or the log line
    "conn_id": pl.String,  # thread id / backend pid / connection id
    "source": pl.String,
    "line": pl.Int64,
}

# derive/sql.py: the statements with fingerprint, class and plan key, SQL text redacted unless shown
# (``sample_sql``): not the parsed ``statement`` (raw text, no fingerprint).
FINGERPRINTED_STATEMENT = "fingerprinted_statement"
FINGERPRINTED_STATEMENT_SCHEMA = {
    **STATEMENT_SCHEMA, "fingerprint": pl.String, "fp_id": pl.String, "statement_class": pl.String,  # "work", "sleep"
    "plan_key": pl.String, "exec_time_s": pl.Float64, "sample_sql": pl.String,
    "target_tables": pl.String,  # derive/statement_targets.py: tables the statement writes/locks/alters, by real name
}
PUBLIC_PLAN_NODE = "public_plan_node"  # plan nodes with the literals of ``filter`` replaced
PUBLIC_PLAN_NODE_SCHEMA = dict(PLAN_NODE_SCHEMA)
# derive/sql_statements.py: the fingerprinted statements that work (sleeps are no DB time), and how they are keyed:
# ``one_source`` (statements and plan nodes from one source: stmt_id alone keys them), ``numbered`` (and stmt_id = row).
WORKING_STATEMENT = "working_statement"
WORKING_STATEMENT_SCHEMA = FINGERPRINTED_STATEMENT_SCHEMA
STATEMENT_LAYOUT = "statement_layout"
STATEMENT_LAYOUT_SCHEMA = {"one_source": pl.Boolean, "numbered": pl.Boolean}
# derive/full_scans.py: the timed working statements that read a whole table, by which signal, and the biggest scan node.
# A full scan: a full-scan plan node reading >= FULL_SCAN_MIN_ROWS rows, or (no plan) the log's flag, or (no plan)
# rows examined >= FULL_SCAN_MIN_ROWS and >= FULL_SCAN_EXAMINED_PER_RETURNED x rows returned.
FULL_SCAN_MIN_ROWS = 10_000
FULL_SCAN_EXAMINED_PER_RETURNED = 100.0
FULL_SCAN_NODE_TYPES = ("TableFullScan", "Seq Scan", "Parallel Seq Scan", "ALL")
FULL_SCAN = "full_scan"
FULL_SCAN_SCHEMA = {
    **{k: FINGERPRINTED_STATEMENT_SCHEMA[k] for k in ("source", "stmt_id", "line", "fp_id", "engine", "query_time_s", "exec_time_s",
                                                       "rows_examined", "rows_sent", "rows_affected", "sample_sql", "plan", "index_names")},
    "scan_by_plan": pl.Boolean, "scan_table": pl.String, "scan_node": pl.String, "scan_rows": pl.Float64,
    "scan_by_flag": pl.Boolean, "scan_by_rows": pl.Boolean,
}
# derive/cpu.py: one row per CPU (the columns of the sources present), CPU -> NUMA node, IRQ growth per CPU.
PER_CPU = "per_cpu"
PER_CPU_SCHEMA = {
    "cpu": pl.Int32, "intervals": pl.UInt32, **{f"{k}_pct": pl.Float64 for k in ("usr", "sys", "irq", "soft", "busy")},
    **{f"{k}_per_s": pl.Float64 for k in ("net_rx", "net_tx", "block")}, **{f"{k}_count": pl.Int64 for k in ("net_rx", "net_tx", "block")},
    "node": pl.Int32,
}
CPU_NODE = "cpu_nodes"
CPU_NODE_SCHEMA = {"cpu": pl.Int32, "node": pl.Int32, "socket": pl.Int32, "core": pl.Int32}
IRQ_DELTA = "irq_delta"
IRQ_DELTA_SCHEMA = {"irq": pl.String, "device": pl.String, "cpu": pl.Int32, "delta": pl.Int64, "chip": pl.String, "node": pl.Int32}
# derive/host_counts.py: how many CPUs ("cpus") and NUMA nodes ("numa_nodes") the host has, its RAM ("ram_mb"), and the
# input that said so.
HOST_COUNT = "host_count"
HOST_COUNT_SCHEMA = {"fact": pl.String, "value": pl.Int64, "source": pl.String}
# derive/host_config.py: the kernel settings the config rules judge (category "sysctl", "cmdline", "thp" of the top
# directory), value stripped, one row per name (the last captured); and why we believe a database runs on the host.
HOST_CONFIG_VALUE = "host_config_value"
HOST_CONFIG_VALUE_SCHEMA = {"category": pl.String, "name": pl.String, "value": pl.String, "choices": pl.String, "source": pl.String}
# Disks with a captured queue/scheduler (virtual devices left out), by name; kind nvme, ssd, hdd or unknown.
BLOCK_DEVICE = "block_device"
BLOCK_DEVICE_SCHEMA = {
    "device": pl.String, "kind": pl.String, "scheduler": pl.String, "scheduler_choices": pl.String, "scheduler_source": pl.String,
    "rotational": pl.String, "rotational_source": pl.String,
}
# The allowed CPUs and memory nodes (as printed: "0-3") of database server processes, by subject ("mariadbd 1234").
DATABASE_AFFINITY = "database_affinity"
DATABASE_AFFINITY_SCHEMA = {"subject": pl.String, "cpus": pl.String, "mems": pl.String, "source": pl.String}
# derive/database_memory.py: the buffer-pool settings as the server runs them, MB per NUMA node, and the nodes a
# database process may take memory from.
DATABASE_MEMORY_SETTING = "database_memory_setting"
DATABASE_MEMORY_SETTING_SCHEMA = {"name": pl.String, "value": pl.String, "unit": pl.String, "size_bytes": pl.Int64, "source": pl.String}
NODE_MEMORY = "node_memory"
NODE_MEMORY_SCHEMA = {"node": pl.Int32, "size_mb": pl.Int64, "source": pl.String}
DATABASE_MEMORY_BINDING = "database_memory_binding"
DATABASE_MEMORY_BINDING_SCHEMA = {"process": pl.String, "nodes": pl.List(pl.Int32), "how": pl.String, "source": pl.String}
DATABASE_EVIDENCE = "database_evidence"
DATABASE_EVIDENCE_SCHEMA = {"line": pl.String}
# derive/cpu.py: the IRQ lines of real devices (timers, IPIs left out), with the device behind a line's queues
# (``family``: "virtio0" for virtio0-input.0) and its class ("io", "gpu", "usb", "input", "other").
DEVICE_INTERRUPT = "device_interrupt"
DEVICE_INTERRUPT_SCHEMA = {**IRQ_DELTA_SCHEMA, "family": pl.String, "device_class": pl.String}
# derive/sql.py: lock waits with the literals of their statement and DETAIL replaced (unless shown).
PUBLIC_LOCK_WAIT = "public_lock_wait"
PUBLIC_LOCK_WAIT_SCHEMA = dict(LOCK_WAIT_SCHEMA)
# derive/cpu_profile.py: the chosen event's stacks with their category, and per (comm, symbol, category) shares.
CPU_PROFILE_STACK = "cpu_profile_stacks"
CPU_PROFILE_STACK_SCHEMA = {**PERF_STACK_SCHEMA, "category": pl.String, "database_process": pl.Boolean, "weight": pl.Float64, "tooling": pl.Boolean}
CPU_PROFILE_SYMBOL = "cpu_profile_symbols"
CPU_PROFILE_SYMBOL_SCHEMA = {
    "comm": pl.String, "symbol": pl.String, "category": pl.String, "tooling": pl.Boolean, "samples": pl.Int64, "weight": pl.Float64,
    "kernel": pl.Boolean, "database_process": pl.Boolean, "share_pct": pl.Float64, "busy_share_pct": pl.Float64,
}
# derive/numa.py: per node allocation counters (first to last snapshot), per process memory by node.
NUMA_REMOTE = "numa_remote"
NUMA_REMOTE_SCHEMA = {
    "node": pl.Int32, **{k: pl.Int64 for k in ("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node")},
    "remote_pct": pl.Float64, "miss_pct": pl.Float64, "since_boot": pl.Boolean, "first_source": pl.String, "last_source": pl.String,
}
NUMA_PROCESS_MEMORY = "numa_process_memory"
NUMA_PROCESS_MEMORY_SCHEMA = {
    "pid": pl.Int32, "process": pl.String, "node": pl.Int32, "private_mb": pl.Float64, "total_mb": pl.Float64, "share_pct": pl.Float64, "source": pl.String,
}
# derive/time_accounting.py and timeline.py: per window DB time against user time, and every series by window.
TIME_ACCOUNTING_WINDOW = "time_accounting_windows"
TIME_ACCOUNTING_WINDOW_SCHEMA = {"window_start": UTC_TIME, "user_response_time_s": pl.Float64, "db_time_s": pl.Float64, "ratio": pl.Float64}
# derive/histogram_windows.py: percentiles of each metric histogram per window and over the whole capture (null window).
HISTOGRAM_WINDOW = "histogram_window"
HISTOGRAM_WINDOW_SCHEMA = {
    "source": pl.String, "metric": pl.String, "series_labels": pl.String, "instance": pl.String, "window_start": UTC_TIME,
    "count": pl.Int64, "p50_ms": pl.Float64, "p99_ms": pl.Float64, "p999_ms": pl.Float64, "p9999_ms": pl.Float64,
}
# derive/background_activity.py: GC/compaction/checkpoint/flush metrics, counters as increases.
BACKGROUND_ACTIVITY = "background_activity"
BACKGROUND_ACTIVITY_SCHEMA = {"ts": UTC_TIME, "metric": pl.String, "labels": pl.String, "value": pl.Float64, "source": pl.String}
TIMELINE = "timeline_window"  # the metric of the same content is "timeline"
TIMELINE_SCHEMA = {"window_start": UTC_TIME, "series": pl.String, "value": pl.Float64, "unit": pl.String, "source": pl.String, "samples": pl.Int64}

DERIVED_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    CHANGE: CHANGE_SCHEMA, FINGERPRINTED_STATEMENT: FINGERPRINTED_STATEMENT_SCHEMA, PUBLIC_PLAN_NODE: PUBLIC_PLAN_NODE_SCHEMA,
    WORKING_STATEMENT: WORKING_STATEMENT_SCHEMA, STATEMENT_LAYOUT: STATEMENT_LAYOUT_SCHEMA, FULL_SCAN: FULL_SCAN_SCHEMA,
    PER_CPU: PER_CPU_SCHEMA, CPU_NODE: CPU_NODE_SCHEMA, IRQ_DELTA: IRQ_DELTA_SCHEMA, DEVICE_INTERRUPT: DEVICE_INTERRUPT_SCHEMA,
    PUBLIC_LOCK_WAIT: PUBLIC_LOCK_WAIT_SCHEMA, HOST_COUNT: HOST_COUNT_SCHEMA, HOST_CONFIG_VALUE: HOST_CONFIG_VALUE_SCHEMA,
    DATABASE_EVIDENCE: DATABASE_EVIDENCE_SCHEMA, BLOCK_DEVICE: BLOCK_DEVICE_SCHEMA,
    DATABASE_AFFINITY: DATABASE_AFFINITY_SCHEMA, CPU_PROFILE_STACK: CPU_PROFILE_STACK_SCHEMA,
    CPU_PROFILE_SYMBOL: CPU_PROFILE_SYMBOL_SCHEMA, NUMA_REMOTE: NUMA_REMOTE_SCHEMA, NUMA_PROCESS_MEMORY: NUMA_PROCESS_MEMORY_SCHEMA,
    TIME_ACCOUNTING_WINDOW: TIME_ACCOUNTING_WINDOW_SCHEMA, TIMELINE: TIMELINE_SCHEMA,
    DATABASE_MEMORY_SETTING: DATABASE_MEMORY_SETTING_SCHEMA, NODE_MEMORY: NODE_MEMORY_SCHEMA,
    DATABASE_MEMORY_BINDING: DATABASE_MEMORY_BINDING_SCHEMA, HISTOGRAM_WINDOW: HISTOGRAM_WINDOW_SCHEMA, BACKGROUND_ACTIVITY: BACKGROUND_ACTIVITY_SCHEMA,
}
# A rule skipped for lack of a derived table names the input a user can add (the report's names stay).
SHOWN_AS = {FINGERPRINTED_STATEMENT: STATEMENT, WORKING_STATEMENT: STATEMENT, PUBLIC_PLAN_NODE: PLAN_NODE, PUBLIC_LOCK_WAIT: LOCK_WAIT}

# Derived metrics (JSON-ready values; ``metrics`` in the report, in this order).
METRICS = (
    HOST_METRIC := "host", CPU_METRIC := "cpu", INTERRUPTS_METRIC := "interrupts", CPU_PROFILE_METRIC := "cpu_profile", VMSTAT_NUMA_METRIC := "vmstat_numa",
    PROC_STAT_METRIC := "proc_stat", DISKS_METRIC := "disks", MEMORY_PRESSURE_METRIC := "memory_pressure",
    PG_STAT_DATABASE_METRIC := "pg_stat_database",
    HOST_CONFIG_METRIC := "host_config", TIME_ACCOUNTING_METRIC := "time_accounting", IDLE_GAPS_METRIC := "idle_gaps",
    TIMELINE_METRIC := "timeline", SQL_PROFILE_METRIC := "sql_profile", SQL_SUMMARY_METRIC := "sql_summary",
    SQL_TIMELINE_METRIC := "sql_timeline", ENGINE_VERSION_METRIC := "engine_version", DERIVE_ERRORS_METRIC := "derive_errors",
)
