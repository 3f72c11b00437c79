"""What the time account is made of: the two sides (:class:`Side`), the exporter counters of DB time, the
application latency families of user time, and the thresholds of :mod:`dbdiag.derive.time_accounting`
(whose docstring says how they are used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl


# Application latency histograms/summaries: family -> (seconds per unit, what emits it).
USER_FAMILIES: dict[str, tuple[float, str]] = {
    "http_server_requests_seconds": (1.0, "Spring Boot Micrometer HTTP server requests"),
    "http_server_request_duration_seconds": (1.0, "OpenTelemetry HTTP server request duration"),
    "http_request_duration_seconds": (1.0, "Prometheus client HTTP request duration"),
    "http_server_duration_milliseconds": (1e-3, "OpenTelemetry (semconv < 1.21) HTTP server duration"),
}
GENERIC_USER_FAMILY_RE = r"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:_request[a-zA-Z0-9_:]*_seconds|_duration_seconds)$"
NOT_USER_PREFIXES = (
    "tidb_", "tikv_", "pd_", "tiflash_", "tiproxy_", "mysql_", "mysqld_", "pg_", "postgres", "mariadb",
    "etcd_", "prometheus_", "go_", "process_", "node_", "haproxy_", "scrape_", "promhttp_",
)
IGNORED_ENDPOINT_RE = r"(?:^|,)(?:uri|handler|path|route|endpoint|http_route)=[^,]*(?:actuator|metrics|health|prometheus)"


@dataclass(frozen=True)
class DbCounter:
    """A counter of seconds spent executing statements, from a database exporter."""

    metric: str
    count_metric: str | None  # the matching statement counter (QPS), when there is one
    kind: str
    exclude_labels_re: str | None = None  # series left out (TiDB's internal statements)


DB_TIME_COUNTERS: tuple[DbCounter, ...] = (
    DbCounter("tidb_server_handle_query_duration_seconds_sum", "tidb_server_handle_query_duration_seconds_count",
              "TiDB handle_query_duration: QPS x average latency", r"(?:^|,)sql_type=internal(?:,|$)"),
    DbCounter("pg_stat_statements_seconds_total", "pg_stat_statements_calls_total",
              "postgres_exporter pg_stat_statements: Σ execution time"),
    DbCounter("pg_stat_statements_total_time_seconds", "pg_stat_statements_calls",
              "postgres_exporter pg_stat_statements (queries.yaml): Σ execution time"),
    DbCounter("pg_stat_database_active_time_seconds_total", None,
              "postgres_exporter pg_stat_database active_time: time backends spent executing statements"),
    DbCounter("mysql_perf_schema_events_statements_seconds_total", "mysql_perf_schema_events_statements_total",
              "mysqld_exporter events_statements_summary_by_digest: Σ statement latency of the digests kept"),
)
QPS_ONLY_COUNTERS = ("mysql_global_status_queries", "mysql_global_status_questions")

COMPLETE_LOG_MAX_MIN_S = 0.001  # a log of every statement has sub-millisecond ones (BEGIN, point reads)
COMPLETE_LOG_MIN_SHARE = 0.8  # of the queries a load test counted, when it counted them
SPAN_SLACK = 1.5  # a load test's connections may span up to 1.5 x its duration (+ 2 s) ...
SPAN_SLACK_S = 2.0  # ... to allow for 1-second log timestamps and connection set-up
EDGE_GAP_S = 1.0  # a -C run's stretch takes in the statements just outside it, while they follow each other this closely
THRESHOLD_SETTINGS = ("long_query_time", "log_min_duration_statement", "log_slow_rate_limit", "log_statement_sample_rate")


@dataclass
class Side:
    """One side of the account: timestamped contributions (``ts``, ``seconds``, ``source``) or a total."""

    side: str
    kind: str
    events: pl.DataFrame | None = None  # ts, seconds, source, weight (what "busiest" counts)
    total_s: float | None = None  # when there are no timestamps
    sources: list[dict[str, Any]] = field(default_factory=list)  # load-test runs: one entry each
    coverage: tuple[datetime, datetime] | None = None
    counter: DbCounter | None = None  # the exporter counter the DB side comes from
    what: str = ""  # what the contributions are, for ``detail``
    connect_s: float | None = None  # user time spent connecting, for a side given as a total (load-test runs)
    connect_detail: str = ""
    connect_per_transaction: bool = False  # a new connection per transaction (pgbench -C)
