"""What the time account is made of: the two sides (:class:`Side`), the exporter counters of DB time, the
application latency families of user time, and the thresholds of :mod:`dbdiag.derive.time_accounting`
(whose docstring says how they are used).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from dbdiag.vocabulary.metrics import FAMILIES, SCRAPE_ENDPOINT_LABELS_RE, of_role


# Application latency histograms/summaries: family -> (seconds per unit, what emits it).
USER_FAMILIES: dict[str, tuple[float, str]] = {f.name: (f.seconds_per_unit, f.source) for f in of_role("user_latency")}
GENERIC_USER_FAMILY_RE = r"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:_request[a-zA-Z0-9_:]*_seconds|_duration_seconds)$"
IGNORED_ENDPOINT_RE = SCRAPE_ENDPOINT_LABELS_RE


@dataclass(frozen=True)
class DbCounter:
    """A counter of seconds spent executing statements, from a database exporter."""

    metric: str
    count_metric: str | None  # the matching statement counter (QPS), when there is one
    kind: str
    exclude_labels_re: str | None = None  # series left out (TiDB's internal statements)


def _db_counter(family_name: str, what: str) -> DbCounter:
    """The counter of one ``db_time`` family: a histogram's ``_sum`` (with ``_count``), else the counter itself."""
    family = FAMILIES[family_name]
    if family.kind == "histogram":
        return DbCounter(family.series("sum"), family.series("count"), f"{family.source}: {what}", family.ignore_labels_re)
    return DbCounter(family.name, family.calls, f"{family.source}: {what}", family.ignore_labels_re)


DB_TIME_COUNTERS: tuple[DbCounter, ...] = (
    _db_counter("tidb_server_handle_query_duration_seconds", "QPS x average latency"),
    _db_counter("pg_stat_statements_seconds_total", "Σ execution time"),
    _db_counter("pg_stat_statements_total_time_seconds", "Σ execution time"),
    _db_counter("pg_stat_database_active_time_seconds_total", "time backends spent executing statements"),
    _db_counter("mysql_perf_schema_events_statements_seconds_total", "Σ statement latency of the digests kept"),
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
