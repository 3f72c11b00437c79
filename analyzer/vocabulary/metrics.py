"""The Prometheus metric families dbdiag reads: name, kind, unit, role, and the series left out of them.

A histogram family is named without its ``_bucket``/``_sum``/``_count`` suffix; a counter or gauge by its
series name. The derivations and rules that use a family take its name, unit and label filter from here
(which families a use reads, and in which order of preference, stays with the use).

>>> FAMILIES["tidb_server_handle_query_duration_seconds"].series("sum")
'tidb_server_handle_query_duration_seconds_sum'
>>> FAMILIES["http_server_duration_milliseconds"].seconds_per_unit
0.001
>>> sorted({family.role for family in FAMILIES.values()})
['active_sessions', 'connection_limit', 'connections', 'db_time', 'idle_time', 'throughput', 'user_latency']
"""

from __future__ import annotations

from dataclasses import dataclass

# TiDB's own statements (statistics, DDL jobs, GC): not the application's.
INTERNAL_SQL_LABELS_RE = r"(?:^|,)sql_type=internal(?:,|$)"
# Requests of scrape and health endpoints: not the application's users.
SCRAPE_ENDPOINT_LABELS_RE = r"(?:^|,)(?:uri|handler|path|route|endpoint|http_route)=[^,]*(?:actuator|metrics|health|prometheus)"

SECONDS_PER_UNIT = {"s": 1.0, "ms": 1e-3}
# Background work that stalls foreground requests now and then: garbage collection, compaction, checkpoints, flushes.
BACKGROUND_ACTIVITY_METRIC_RE = r"(?i)(gc|garbage|compaction|compact|checkpoint|flush|stall|vacuum|fsync)"
# A counter series: its increases, not its values, say what happened in a window.
COUNTER_SERIES_RE = r"_(total|count|sum)$"


@dataclass(frozen=True)
class MetricFamily:
    name: str
    kind: str  # "counter", "gauge" or "histogram"
    unit: str  # "s", "ms" or "1" (a count)
    role: str  # what dbdiag measures with it (the roles of the module docstring's last line)
    ignore_labels_re: str | None = None  # series left out (matched against the ``labels`` text)
    calls: str | None = None  # for a counter of seconds: the counter of the statements it is spent in
    source: str = ""  # what emits it, as reports name it

    def series(self, suffix: str) -> str:
        return f"{self.name}_{suffix}"

    @property
    def seconds_per_unit(self) -> float:
        return SECONDS_PER_UNIT[self.unit]


_CATALOGUE = (
    # Time spent executing statements, from database exporters.
    MetricFamily("tidb_server_handle_query_duration_seconds", "histogram", "s", "db_time", INTERNAL_SQL_LABELS_RE,
                 source="TiDB handle_query_duration"),
    MetricFamily("pg_stat_statements_seconds_total", "counter", "s", "db_time", calls="pg_stat_statements_calls_total",
                 source="postgres_exporter pg_stat_statements"),
    MetricFamily("pg_stat_statements_total_time_seconds", "counter", "s", "db_time", calls="pg_stat_statements_calls",
                 source="postgres_exporter pg_stat_statements (queries.yaml)"),
    MetricFamily("pg_stat_database_active_time_seconds_total", "counter", "s", "db_time",
                 source="postgres_exporter pg_stat_database active_time"),
    MetricFamily("mysql_perf_schema_events_statements_seconds_total", "counter", "s", "db_time",
                 calls="mysql_perf_schema_events_statements_total", source="mysqld_exporter events_statements_summary_by_digest"),
    MetricFamily("tidb_server_conn_idle_duration_seconds", "histogram", "s", "idle_time", source="TiDB conn_idle_duration"),
    # Time users waited, from application latency histograms/summaries.
    MetricFamily("http_server_requests_seconds", "histogram", "s", "user_latency", SCRAPE_ENDPOINT_LABELS_RE,
                 source="Spring Boot Micrometer HTTP server requests"),
    MetricFamily("http_server_request_duration_seconds", "histogram", "s", "user_latency", SCRAPE_ENDPOINT_LABELS_RE,
                 source="OpenTelemetry HTTP server request duration"),
    MetricFamily("http_request_duration_seconds", "histogram", "s", "user_latency", SCRAPE_ENDPOINT_LABELS_RE,
                 source="Prometheus client HTTP request duration"),
    MetricFamily("http_server_duration_milliseconds", "histogram", "ms", "user_latency", SCRAPE_ENDPOINT_LABELS_RE,
                 source="OpenTelemetry (semconv < 1.21) HTTP server duration"),
    # Statements and transactions counted.
    MetricFamily("tidb_server_query_total", "counter", "1", "throughput", source="TiDB queries"),
    MetricFamily("mysql_global_status_questions", "counter", "1", "throughput", source="MySQL Questions"),
    MetricFamily("mysql_global_status_queries", "counter", "1", "throughput", source="MySQL Queries"),
    MetricFamily("pg_stat_database_xact_commit", "counter", "1", "throughput", source="PostgreSQL commits"),
    # Sessions open, sessions executing, and their limits.
    MetricFamily("tidb_server_connections", "gauge", "1", "connections", source="TiDB connections"),
    MetricFamily("mysql_global_status_threads_connected", "gauge", "1", "connections", source="MySQL Threads_connected"),
    MetricFamily("pg_stat_activity_count", "gauge", "1", "connections", source="postgres_exporter pg_stat_activity (by datname, state)"),
    MetricFamily("pg_stat_database_numbackends", "gauge", "1", "connections", source="postgres_exporter pg_stat_database numbackends"),
    MetricFamily("haproxy_frontend_current_sessions", "gauge", "1", "connections", source="HAProxy frontend sessions"),
    MetricFamily("haproxy_server_current_sessions", "gauge", "1", "connections", source="HAProxy server sessions"),
    MetricFamily("haproxy_listener_current_sessions", "gauge", "1", "connections", source="HAProxy listener sessions"),
    MetricFamily("haproxy_process_current_connections", "gauge", "1", "connections", source="HAProxy process connections"),
    MetricFamily("tiproxy_server_connections", "gauge", "1", "connections", source="TiProxy connections"),
    MetricFamily("mysql_global_status_threads_running", "gauge", "1", "active_sessions", source="MySQL Threads_running"),
    MetricFamily("mysql_global_variables_max_connections", "gauge", "1", "connection_limit", source="MySQL max_connections"),
    MetricFamily("pg_settings_max_connections", "gauge", "1", "connection_limit", source="PostgreSQL max_connections"),
    MetricFamily("haproxy_frontend_limit_sessions", "gauge", "1", "connection_limit", source="HAProxy frontend maxconn"),
    MetricFamily("haproxy_server_limit_sessions", "gauge", "1", "connection_limit", source="HAProxy server maxconn"),
    MetricFamily("haproxy_listener_limit_sessions", "gauge", "1", "connection_limit", source="HAProxy listener maxconn"),
    MetricFamily("haproxy_process_max_connections", "gauge", "1", "connection_limit", source="HAProxy global maxconn"),
)
FAMILIES: dict[str, MetricFamily] = {family.name: family for family in _CATALOGUE}

# Name beginnings of database, exporter and runtime series: never an application's latency family.
NOT_USER_PREFIXES = (
    "tidb_", "tikv_", "pd_", "tiflash_", "tiproxy_", "mysql_", "mysqld_", "pg_", "postgres", "mariadb",
    "etcd_", "prometheus_", "go_", "process_", "node_", "haproxy_", "scrape_", "promhttp_",
)


def of_role(role: str) -> tuple[MetricFamily, ...]:
    """The families of one role, in catalogue order.

    >>> [family.name for family in of_role("active_sessions")]
    ['mysql_global_status_threads_running']
    """
    return tuple(family for family in _CATALOGUE if family.role == role)
