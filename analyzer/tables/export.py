"""The tables ``dbdiag analyze CAPTURE --tables DIR`` writes as Parquet, and their fixed schemas (version 1).

One file per (table, day) of a capture, Hive-partitioned by host and day (``day`` in UTC)::

    DIR/statement/host=db03/day=2026-11-29/3f9c0a5e1b2d4c68.parquet
    DIR/finding/host=db03/day=2026-11-29/3f9c0a5e1b2d4c68.parquet
    DIR/capture/host=db03/day=2026-11-29/3f9c0a5e1b2d4c68.parquet

``host`` and ``day`` live in the path only, never as columns in the files (Spark refuses a column that
is both, DuckDB and polars add them from the path with ``hive_partitioning``); the values are
percent-encoded (``host=db%2F03``), as Hive does. Every file has ``capture_id``, the same as its name.

The day of a row is the UTC date of its ``DAY_COLUMNS`` (the first not null) (rows whose time is null: ``day=unknown``);
tables without a time of their own (``per_cpu``, ``finding``, ``capture``) take the capture's first
day, and plan nodes their statement's. Columns carry their unit in their name like every other table.

A sample of ``statement`` (the narrow columns: tens of bytes a statement; SQL text is in
``statement_class``, once per class, literals replaced unless ``--show-literals``)::

    capture_id        source                       stmt_id line engine  start_ts            query_time_s ... fp_id            is_sleep
    3f9c0a5e1b2d4c68  capture/db/mariadb-slow.log  2       18   mariadb 2026-11-29 21:34:15 2.290945         C377A83C693AA353 false

``EXPORT_SCHEMA_VERSION`` changes when a column is renamed, retyped or removed (adding one does not):
``dbdiag fleet`` reads files of every version it knows.
"""

from __future__ import annotations

import polars as pl

from dbdiag.tables.derived import PER_CPU_SCHEMA, PUBLIC_PLAN_NODE_SCHEMA
from dbdiag.tables.parsed import (
    EVENT_SCHEMA,
    LOAD_SAMPLE_SCHEMA,
    METRIC_SAMPLE_SCHEMA,
    NUMA_COUNTER_SCHEMA,
    SOFTIRQ_RATE_SCHEMA,
    UTC_TIME,
)

EXPORT_SCHEMA_VERSION = 1
PARTITIONS = ("host", "day")  # the Hive partition keys, in path order
UNKNOWN_DAY = "unknown"
_ID = {"capture_id": pl.String}

# Statements, narrow: times, durations, lock time, rows, connection/transaction ids, class and plan keys.
STATEMENT = "statement"
STATEMENT_SCHEMA = {
    **_ID, "source": pl.String, "stmt_id": pl.Int64, "line": pl.Int64, "engine": pl.String,
    "start_ts": UTC_TIME, "end_ts": UTC_TIME, "query_time_s": pl.Float64, "lock_time_s": pl.Float64, "exec_time_s": pl.Float64,
    "rows_examined": pl.Int64, "rows_sent": pl.Int64, "rows_affected": pl.Int64, "conn_id": pl.String, "txn_id": pl.String,
    "fp_id": pl.String, "plan_key": pl.String, "is_sleep": pl.Boolean, "success": pl.Boolean,
}
# One row per distinct class (fp_id) of the capture: the fingerprint, and the sample the report shows
# (the SQL of its slowest execution, literals replaced unless --show-literals).
STATEMENT_CLASS = "statement_class"
STATEMENT_CLASS_SCHEMA = {
    **_ID, "fp_id": pl.String, "engine": pl.String, "fingerprint": pl.String, "sample_sql": pl.String,
    "first_seen_ts": UTC_TIME, "last_seen_ts": UTC_TIME,
}
PLAN_NODE = "plan_node"  # the public plan nodes: ``filter`` with its literals replaced
PLAN_NODE_SCHEMA = {**_ID, **PUBLIC_PLAN_NODE_SCHEMA}
EVENT = "event"  # the public events (literals of the log line replaced); the event's own ``host`` is ``logged_host``
EVENT_SCHEMA_EXPORT = {**_ID, **{("logged_host" if k == "host" else k): v for k, v in EVENT_SCHEMA.items()}}
PER_CPU = "per_cpu"
PER_CPU_SCHEMA_EXPORT = {**_ID, **PER_CPU_SCHEMA}
SOFTIRQ_RATE = "softirq_rate"
SOFTIRQ_RATE_SCHEMA_EXPORT = {**_ID, **SOFTIRQ_RATE_SCHEMA}
NUMA_COUNTER = "numa_counter"
NUMA_COUNTER_SCHEMA_EXPORT = {**_ID, **NUMA_COUNTER_SCHEMA}
LOAD_SAMPLE = "load_sample"  # the public samples (literals of labels replaced)
LOAD_SAMPLE_SCHEMA_EXPORT = {**_ID, **LOAD_SAMPLE_SCHEMA}
METRIC_SAMPLE = "metric_sample"
METRIC_SAMPLE_SCHEMA_EXPORT = {**_ID, **METRIC_SAMPLE_SCHEMA}
# The findings as the JSON report has them (``rank``: 1 = the verdict's first).
FINDING = "finding"
FINDING_SCHEMA = {
    **_ID, "finding_id": pl.String, "rule": pl.String, "severity": pl.String, "subject": pl.String, "title": pl.String,
    "rank": pl.Int32, "db_time_s": pl.Float64,
}
# One row per export: what was exported, when, by which dbdiag, in which privacy modes.
CAPTURE = "capture"
CAPTURE_SCHEMA = {
    **_ID, "capture_name": pl.String, "analyzed_at": UTC_TIME, "dbdiag_version": pl.String,
    "export_schema_version": pl.Int32, "first_ts": UTC_TIME, "last_ts": UTC_TIME, "statements": pl.Int64,
    "literals_shown": pl.Boolean, "pseudonymized": pl.Boolean,
}

EXPORT_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    STATEMENT: STATEMENT_SCHEMA, STATEMENT_CLASS: STATEMENT_CLASS_SCHEMA, PLAN_NODE: PLAN_NODE_SCHEMA,
    EVENT: EVENT_SCHEMA_EXPORT, PER_CPU: PER_CPU_SCHEMA_EXPORT, SOFTIRQ_RATE: SOFTIRQ_RATE_SCHEMA_EXPORT,
    NUMA_COUNTER: NUMA_COUNTER_SCHEMA_EXPORT, LOAD_SAMPLE: LOAD_SAMPLE_SCHEMA_EXPORT, METRIC_SAMPLE: METRIC_SAMPLE_SCHEMA_EXPORT,
    FINDING: FINDING_SCHEMA, CAPTURE: CAPTURE_SCHEMA,
}
# The columns whose first non-null UTC date is the row's ``day``; () : the capture's first day
# (plan nodes: their statement's day).
DAY_COLUMNS: dict[str, tuple[str, ...]] = {
    STATEMENT: ("start_ts", "end_ts"), STATEMENT_CLASS: ("first_seen_ts",), PLAN_NODE: (), EVENT: ("ts",), PER_CPU: (),
    SOFTIRQ_RATE: ("ts",), NUMA_COUNTER: ("ts",), LOAD_SAMPLE: ("start_ts",), METRIC_SAMPLE: ("ts",), FINDING: (), CAPTURE: (),
}
