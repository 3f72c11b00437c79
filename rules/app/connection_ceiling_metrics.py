"""connection-ceiling, the metric series: connection counts (exporters, Grafana panels) that sit on a plateau at
their limit (a limit series or setting, else a round level), with the demand signals (queues, errors) during it.
Thresholds and the series it reads: :mod:`.connection_ceiling`'s docstring.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.app.common import iso
from dbdiag.rules.base import RuleInput
from dbdiag.vocabulary.dialects import MYSQL_FAMILY

RULE_ID = "connection-ceiling"
AT_LIMIT_SHARE_PCT = 99.0
PLATEAU_MIN_SAMPLES = 5
PLATEAU_MIN_S = 60.0
ROUND_MULTIPLE = 500
ROUND_POWER_OF_TWO_FROM = 256

# Connection series -> the series (same instance, same labels) holding their limit, and the database
# settings (``db_setting`` names, of which engines) that can hold it instead.
CONNECTION_METRICS = {
    "tidb_server_connections": (None, ("max_connections", "max-server-connections"), ("tidb",)),
    "mysql_global_status_threads_connected": ("mysql_global_variables_max_connections", ("max_connections",), MYSQL_FAMILY),
    "pg_stat_activity_count": ("pg_settings_max_connections", ("max_connections",), ("postgresql",)),
    "haproxy_frontend_current_sessions": ("haproxy_frontend_limit_sessions", (), ()),
    "haproxy_server_current_sessions": ("haproxy_server_limit_sessions", (), ()),
    "haproxy_listener_current_sessions": ("haproxy_listener_limit_sessions", (), ()),
    "haproxy_process_current_connections": ("haproxy_process_max_connections", (), ()),
}
LIMIT_METRICS = tuple(sorted({limit for limit, _, _ in CONNECTION_METRICS.values() if limit}))
# Series summed over their labels per instance (pg_stat_activity_count is split by datname and state).
SUMMED_METRICS = ("pg_stat_activity_count",)
# Series of other names (Grafana panels name series after instances; the panel is the file name) count as
# connection series when their name or file says so and they are not counters, durations or sizes.
GENERIC_CONNECTION_PATTERN = r"(?i)(connection|session)"
NOT_A_COUNT_PATTERN = (
    r"(?i)(_total|_count|_sum|_bucket|_created|duration|idle|second|latency|bytes|error|rate|per_s|qps|max_used|aborted"
    r"|^mysql_global_status_connections$)"  # MySQL's Connections is a counter without the _total suffix
)
QUEUE_METRIC_PATTERN = r"(?i)(current_queue|queue_current|_qcur$|waiting_connections)"
ERROR_METRIC_PATTERN = r"(?i)(connection_errors|aborted_connects|connect_errors|denied_connections|request_errors|too_many_connections)"


@dataclass(frozen=True)
class Plateau:
    level: float
    start: datetime
    end: datetime
    samples: int
    after_max: float | None  # highest value after the plateau, when the series goes on
    rise_ts: datetime | None  # first sample above the plateau (by more than 1%) after it


def series_findings(inp: RuleInput, samples: pl.DataFrame) -> tuple[list[Finding], str, bool]:
    basename = pl.col("source").str.replace(r"^.*/", "")
    generic = (
        ~pl.col("metric").is_in([*CONNECTION_METRICS, *LIMIT_METRICS])
        & (pl.col("metric").str.contains(GENERIC_CONNECTION_PATTERN) | basename.str.contains(GENERIC_CONNECTION_PATTERN))
        & ~pl.col("metric").str.contains(NOT_A_COUNT_PATTERN)
        & ~basename.str.contains(NOT_A_COUNT_PATTERN)
    )
    connections = samples.filter((pl.col("metric").is_in(list(CONNECTION_METRICS)) | generic) & pl.col("value").is_finite())
    if connections.height == 0:
        return [], "", False
    connections = _summed(connections)
    limits = _limit_values(inp, samples)
    demand = _demand_signals(inp, samples)
    findings: list[Finding] = []
    measured: list[str] = []
    for (source, metric, labels, instance), series in connections.group_by("source", "metric", "labels", "instance", maintain_order=True):
        series = series.sort("ts")
        limit, limit_setting, limit_source = _limit_for(metric, labels, instance, limits)
        plateaus = _plateaus(series)
        name = f"{metric}{{{labels}}}" if labels else metric
        if metric not in CONNECTION_METRICS and not re.search(GENERIC_CONNECTION_PATTERN, metric):
            name = f"{name} ({source.rsplit('/', 1)[-1]})"
        if not plateaus:
            measured.append(f"{name}: max {series['value'].max():,.0f}, no plateau")
            continue
        plateau = max(plateaus, key=lambda p: p.samples)
        at_known = limit is not None and plateau.level * 100 >= limit * AT_LIMIT_SHARE_PCT
        signals = _signals_during(demand, plateau)
        if plateau.rise_ts is not None and plateau.after_max is not None:
            signals.append(("the same series after the plateau", f"rose to {plateau.after_max:,.0f} afterwards", iso(plateau.rise_ts)))
        measured.append(f"{name}: plateau at {plateau.level:,.0f} for {plateau.samples} samples")
        if at_known or (_is_round(plateau.level) and signals):
            findings.append(_metric_finding(name, source, series, plateau, (limit, limit_setting, limit_source), signals))
    more = f" (and {len(measured) - 8} more series)" if len(measured) > 8 else ""
    return findings, "metrics: " + "; ".join(measured[:8]) + more, True


def _summed(connections: pl.DataFrame) -> pl.DataFrame:
    summed = connections.filter(pl.col("metric").is_in(list(SUMMED_METRICS)))
    if summed.height == 0:
        return connections
    totals = summed.group_by("source", "metric", "instance", "ts").agg(pl.col("value").sum()).with_columns(pl.lit("").alias("labels"))
    return pl.concat([connections.filter(~pl.col("metric").is_in(list(SUMMED_METRICS))), totals.select(connections.columns)])


def _limit_values(inp: RuleInput, samples: pl.DataFrame) -> dict[str, Any]:
    series = (
        samples.filter(pl.col("metric").is_in(list(LIMIT_METRICS)) & pl.col("value").is_finite())
        .group_by("metric", "labels", "instance")
        .agg(pl.col("value").max(), pl.col("source").first())
    )
    settings: dict[tuple[str | None, str], tuple[float, str, str]] = {}
    db = inp.table(t.DB_SETTING)
    if db is not None:
        for engine, name, value, source in db.select("engine", "name", "value", "source").iter_rows():
            key = (name or "").lower().rsplit(".", 1)[-1]
            if key in ("max_connections", "max-server-connections") and value and value.strip().isdigit() and int(value) > 0:
                settings.setdefault((engine, key), (float(value), f"{name} = {value}", source))
    return {"series": series, "settings": settings}


def _limit_for(metric: str, labels: str, instance: str | None, limits: dict[str, Any]) -> tuple[float | None, str, str | None]:
    """The limit of a connection series: (value, how it is set, source), from a limit series or a setting."""
    limit_metric, setting_names, engines = CONNECTION_METRICS.get(metric, (None, (), ()))
    series: pl.DataFrame = limits["series"]
    if limit_metric:
        same = series.filter(pl.col("metric") == limit_metric)
        for condition in (
            (pl.col("labels") == labels) & (pl.col("instance").eq_missing(instance)),
            pl.col("instance").eq_missing(instance),
            pl.lit(True),
        ):
            match = same.filter(condition)
            if match.height == 1 or (match.height and match["value"].n_unique() == 1):
                row = match.row(0, named=True)
                return float(row["value"]), f"{limit_metric} = {row['value']:,.0f}", row["source"]
    for name in setting_names:
        for engine in (*engines, None):  # a setting whose engine is unknown still counts
            if (engine, name) in limits["settings"]:
                return limits["settings"][(engine, name)]
    return None, "", None


def _plateaus(series: pl.DataFrame) -> list[Plateau]:
    """Runs of consecutive samples within 1% of the run's highest value, long enough to be a ceiling."""
    values = series["value"].to_list()
    times = series["ts"].to_list()
    share = AT_LIMIT_SHARE_PCT / 100.0
    found: list[Plateau] = []
    start = 0
    while start < len(values):
        high = low = values[start]
        end = start + 1
        while end < len(values):
            value = values[end]
            new_high, new_low = max(high, value), min(low, value)
            if new_high <= 0 or new_low < new_high * share:
                break
            high, low, end = new_high, new_low, end + 1
        count = end - start
        if high > 0 and count >= PLATEAU_MIN_SAMPLES and (times[end - 1] - times[start]).total_seconds() >= PLATEAU_MIN_S:
            after = max(values[end:]) if end < len(values) else None
            rise = next((times[i] for i in range(end, len(values)) if values[i] > high / share), None)
            found.append(Plateau(high, times[start], times[end - 1], count, after, rise))
            start = end
        else:
            start += 1
    return found


def _is_round(level: float) -> bool:
    """Limits people type: 1000, 1500, 2000, 4096 ...

    >>> [_is_round(v) for v in (2000, 4096, 1024, 256, 1999, 300, 128)]
    [True, True, True, True, False, False, False]
    """
    value = int(level)
    if value != level or value <= 0:
        return False
    power_of_two = value >= ROUND_POWER_OF_TWO_FROM and value & (value - 1) == 0
    return value % ROUND_MULTIPLE == 0 or power_of_two


def _demand_signals(inp: RuleInput, samples: pl.DataFrame) -> dict[str, pl.DataFrame]:
    signals: dict[str, pl.DataFrame] = {}
    queue = samples.filter(pl.col("metric").str.contains(QUEUE_METRIC_PATTERN) & pl.col("value").is_finite())
    if queue.height:
        signals["queue"] = queue.select("ts", "metric", "value")
    errors = samples.filter(pl.col("metric").str.contains(ERROR_METRIC_PATTERN) & pl.col("value").is_finite())
    if errors.height:
        signals["errors"] = errors.select("ts", "metric", "labels", "value")
    load = inp.table(t.LOAD_SAMPLE)
    if load is not None and load["all_threads"].null_count() < load.height:
        signals["threads"] = load.select(pl.col("start_ts").alias("ts"), pl.col("all_threads").cast(pl.Float64).alias("value"))
    return signals


def _signals_during(demand: dict[str, pl.DataFrame], plateau: Plateau) -> list[tuple[str, str, str | None]]:
    inside = (pl.col("ts") >= plateau.start) & (pl.col("ts") <= plateau.end)
    found: list[tuple[str, str, str | None]] = []
    if "queue" in demand:
        queued = demand["queue"].filter(inside & (pl.col("value") > 0))
        if queued.height:
            top = queued.sort("value", descending=True).row(0, named=True)
            found.append((f"{top['metric']} > 0", f"up to {top['value']:,.0f} queued", iso(top["ts"])))
    if "errors" in demand:
        for (metric, labels), group in demand["errors"].filter(inside).group_by("metric", "labels", maintain_order=True):
            values = group.sort("ts")["value"]
            if values.len() >= 2 and values[-1] > values[0]:
                found.append((f"{metric}{{{labels}}}" if labels else metric, f"+{values[-1] - values[0]:,.0f} during the plateau", None))
    if "threads" in demand:
        threads = demand["threads"].filter(inside).sort("ts")["value"].drop_nulls()
        if threads.len() >= 2 and threads.max() > threads[0]:
            found.append(("load-test threads (allThreads)", f"{threads[0]:,.0f} -> {threads.max():,.0f}", None))
    return found


def _metric_finding(
    name: str,
    source: str,
    series: pl.DataFrame,
    plateau: Plateau,
    limit_info: tuple[float | None, str, str | None],
    signals: list[tuple[str, str, str | None]],
) -> Finding:
    limit, limit_setting, limit_source = limit_info
    minutes = (plateau.end - plateau.start).total_seconds() / 60.0
    known = limit is not None and plateau.level * 100 >= limit * AT_LIMIT_SHARE_PCT
    limit_text = f"its limit {limit:,.0f}" if known else f"the round number {plateau.level:,.0f}"
    around = series.filter(
        (pl.col("ts") >= plateau.start - (plateau.end - plateau.start) * 0.25) & (pl.col("ts") <= plateau.end + (plateau.end - plateau.start) * 0.25)
    )
    step = max(1, math.ceil(around.height / 24))
    rows = tuple((iso(ts), value) for ts, value in around.select("ts", "value").rows()[::step])
    level = int(plateau.level)
    remediation = "\n".join(
        [
            f"{name} stayed at {level:,} from {iso(plateau.start)} to {iso(plateau.end)} ({minutes:.1f} min).",
            "1. Find the limit that equals it: " + (f"{limit_setting} ({limit_source})" if known else _guess_limit_text(name, level)) + ".",
            f"2. Raise it above the demand seen (e.g. to {level * 2:,}) only if the database has spare CPU at this "
            "concurrency; otherwise keep it and queue in front of it (HAProxy server maxconn + timeout queue, pool connectionTimeout).",
            "3. Check every layer: HAProxy global and frontend maxconn, server maxconn, database max_connections "
            "(online in MySQL/MariaDB, a restart in PostgreSQL; TiDB max-server-connections), "
            "application pool maximumPoolSize x application nodes.",
        ]
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=(
            f"{name} flat at {limit_text} for {minutes:.1f} min ({plateau.samples} samples)"
            + (f" while demand grew ({signals[0][0]}: {signals[0][1]})" if signals else "")
            + f"; threshold: within {100 - AT_LIMIT_SHARE_PCT:g}% of a limit for {PLATEAU_MIN_S:g} s"
        ),
        subject=name,
        impact={
            "description": f"connections above {level:,} waited or were refused for {minutes:.1f} min",
            "limit": level,
            "first_at_limit": iso(plateau.start),
            "last_at_limit": iso(plateau.end),
        },
        evidence=(
            Evidence(
                title="The plateau",
                columns=("series", "level", "first at it", "last at it", "samples", "limit", "limit source"),
                rows=((name, level, iso(plateau.start), iso(plateau.end), plateau.samples,
                       None if limit is None else int(limit),
                       f"{limit_setting} ({limit_source})" if limit_setting else "round number, no limit series or setting in the capture"),),
            ),
            Evidence(
                title="What grew meanwhile",
                columns=("signal", "change", "time"),
                rows=tuple(signals) or (("none in the capture", "the limit is known to be reached", None),),
            ),
            Evidence(title=f"{name} around the plateau", columns=("time", "value"), rows=rows),
        ),
        remediation=remediation,
        sources=tuple(sorted({source, *([limit_source] if limit_source else [])})),
    )


def _guess_limit_text(name: str, level: int) -> str:
    if name.startswith("haproxy"):
        return f"HAProxy maxconn {level} (global, frontend or server: haproxy -c -f haproxy.cfg; echo 'show info' | socat ...)"
    return (
        f"a setting of {level}: max_connections / max-server-connections on the database, HAProxy maxconn, "
        "or pool sizes x application nodes"
    )
