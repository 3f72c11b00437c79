"""The timeline's series: each timed input counted, or its quantiles taken, per window (``timeline.timeline``
gathers the inputs and windows, and writes the metric). Sample of what comes out, one frame per series::

    window_start 02:00:10  series "tps"  value 301.6  unit "1/s"  source "capture/app/jmeter-results.jtl"  samples 1508
    window_start 02:00:10  series "latency_p99"  value 1412.0  unit "ms"  ...

JMeter samples are counted where they ended, per second of the window their file covers; load-test progress
lines, statement logs, metric counters and histograms, HAProxy frontends and per-CPU mpstat rows as the
``timeline`` docstring says.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from dbdiag import tables as t

from dbdiag.derive.histogram import counter_deltas, histogram_quantile, label_value
from dbdiag.derive.time_db_side import log_completeness
from dbdiag.vocabulary.metrics import FAMILIES

TIMELINE_SCHEMA = {
    "window_start": t.UTC_TIME, "series": pl.String, "value": pl.Float64, "unit": pl.String,
    "source": pl.String, "samples": pl.Int64,
}

QUANTILES = {"latency_p50": 0.5, "latency_p99": 0.99, "latency_p999": 0.999, "latency_p9999": 0.9999}
# A quantile q needs 1 / (1 - q) observations before it is more than the window's maximum.
QUANTILE_MIN_SAMPLES = {name: max(2, math.ceil(round(1.0 / (1.0 - q), 6))) for name, q in QUANTILES.items()}
MAX_LABELS = 8
# A load test's rate in a window it covers only in part (its rows span less than PARTIAL_WINDOW_SHARE of it) is
# per second it covers, at least MIN_COVERED_S (one sample alone spans no time).
PARTIAL_WINDOW_SHARE = 0.9
MIN_COVERED_S = 1.0

# Counters whose increase per second is a throughput: metric -> (measure, labels left out).
# The timeline leaves out Micrometer's actuator series by uri/handler only and keeps every series of the
# other HTTP families (the time account uses the families' SCRAPE_ENDPOINT_LABELS_RE): as it always did.
MICROMETER_ACTUATOR_RE = r"(?:^|,)(?:uri|handler)=[^,]*(?:actuator|metrics|health|prometheus)"
_TIDB_DURATION = FAMILIES["tidb_server_handle_query_duration_seconds"]
RATE_COUNTERS: dict[str, tuple[str, str | None]] = {
    "tidb_server_query_total": ("qps", None),
    _TIDB_DURATION.series("count"): ("qps", _TIDB_DURATION.ignore_labels_re),
    "mysql_global_status_questions": ("qps", None),
    "pg_stat_database_xact_commit": ("tps", None),
    "http_server_requests_seconds_count": ("tps", MICROMETER_ACTUATOR_RE),
    "http_server_request_duration_seconds_count": ("tps", None),
    "http_request_duration_seconds_count": ("tps", None),
}
# Latency histograms (family without _bucket) -> (seconds per unit, labels left out).
LATENCY_HISTOGRAMS: dict[str, tuple[float, str | None]] = {
    _TIDB_DURATION.name: (_TIDB_DURATION.seconds_per_unit, _TIDB_DURATION.ignore_labels_re),
    "http_server_requests_seconds": (FAMILIES["http_server_requests_seconds"].seconds_per_unit, MICROMETER_ACTUATOR_RE),
    "http_server_request_duration_seconds": (FAMILIES["http_server_request_duration_seconds"].seconds_per_unit, None),
    "http_request_duration_seconds": (FAMILIES["http_request_duration_seconds"].seconds_per_unit, None),
}
CONNECTION_GAUGES = (
    "tidb_server_connections", "mysql_global_status_threads_connected", "pg_stat_activity_count",
    "pg_stat_database_numbackends", "haproxy_frontend_current_sessions", "tiproxy_server_connections",
)


def window_expr(column: str = "ts", width_us: int = 1) -> pl.Expr:
    epoch = pl.col(column).dt.epoch("us")
    return pl.from_epoch((epoch // width_us) * width_us, time_unit="us").dt.replace_time_zone("UTC").alias("window_start")


def series_frames(inputs: dict[str, pl.DataFrame], width_us: int, window_s: float, notes: list[str]) -> list[pl.DataFrame]:
    out: list[pl.DataFrame] = []
    window = window_expr(width_us=width_us)
    if "jmeter-samples" in inputs:
        out += _jmeter(inputs["jmeter-samples"], window, window_s)
    if "load-test-intervals" in inputs:
        out += _intervals(inputs["load-test-intervals"], width_us, window_s)
    if "statement-log" in inputs:
        statements = inputs["statement-log"]
        names = statements.select(pl.col("source").unique(maintain_order=True)).to_series().to_list()  # see time_accounting
        timed = statements.filter(pl.col("query_time_s").is_not_null())
        complete, why = log_completeness(timed) if timed.height else (False, "no statement durations")
        prefix = "" if complete else "logged_"
        if not complete:
            notes.append(f"statement series are named logged_*: {why}")
        # one name for all the statements: grouped by window alone (hashing a text per row costs), the name added after
        windowed = statements.select(window, (pl.col("query_time_s") * 1000.0).alias("ms"))
        out.append(_rate(windowed, prefix + "qps", window_s, source="; ".join(names)))
        out += _quantiles(windowed, prefix, source="; ".join(names))
    if "metrics" in inputs:
        out += _metric_series(inputs["metrics"], width_us)
    if "proxy-stat" in inputs:
        out += _proxy(inputs["proxy-stat"], window)
    if "cpu-util" in inputs:
        out += _cpu(inputs["cpu-util"], window)
    if "disk-io" in inputs:
        out += _disks(inputs["disk-io"], window)
    if "vmstat" in inputs:
        out += _vmstat(inputs["vmstat"], window)
    if "events" in inputs:
        events = inputs["events"].with_columns(window)
        out.append(events.group_by("window_start", "kind", "source").agg(pl.len().alias("samples")).select(
            "window_start", pl.format("event[{}]", "kind").alias("series"), pl.col("samples").cast(pl.Float64).alias("value"),
            pl.lit("events").alias("unit"), "source", "samples"))
    return [frame for frame in out if frame.height]


def _by_source(source: str | None) -> tuple[list[str], pl.Expr]:
    """Group keys and the source column: per window and ``source`` column, or per window when all rows have ``source``."""
    if source is None:
        return ["window_start", "source"], pl.col("source")
    return ["window_start"], pl.lit(source, dtype=pl.String).alias("source")


def _rate(frame: pl.DataFrame, series: str, window_s: float, label: str | None = None, source: str | None = None,
          spans: pl.DataFrame | None = None) -> pl.DataFrame:
    """Rows per window and source (``source``: the one source of all rows, then not a column of ``frame``), per second
    of the window the source covers when ``spans`` (source, first_ts, last_ts) says: a file's first and last windows
    are partial (a JTL of 10:00:15-10:00:30 fills half of the window 10:00:10-10:00:20)."""
    keys, source_column = _by_source(source)
    counted = frame.group_by(keys).agg(pl.len().alias("samples"))
    seconds: pl.Expr = pl.lit(window_s)
    if spans is not None:
        counted = counted.join(spans, on="source", how="left")
        window_end = pl.col("window_start") + pl.duration(microseconds=round(window_s * 1e6))
        overlap_s = (pl.min_horizontal(window_end, pl.col("last_ts")) - pl.max_horizontal(pl.col("window_start"), pl.col("first_ts")))
        covered_s = overlap_s.dt.total_microseconds().truediv(1e6)
        # a window the rows span nearly whole is whole: first to last row is one gap short of the file's time
        seconds = pl.when(covered_s < PARTIAL_WINDOW_SHARE * window_s).then(covered_s.clip(min(window_s, MIN_COVERED_S), window_s)) \
            .otherwise(pl.lit(window_s))
    return counted.select(
        "window_start", pl.lit(series if label is None else f"{series}[{label}]").alias("series"),
        (pl.col("samples") / seconds).alias("value"), pl.lit("1/s").alias("unit"), source_column, "samples",
    )


def _quantiles(frame: pl.DataFrame, prefix: str = "", source: str | None = None) -> list[pl.DataFrame]:
    """Quantiles of ``ms`` per window and source, only where the window has enough observations (``source``: see _rate)."""
    frame = frame.filter(pl.col("ms").is_not_null())
    if not frame.height:
        return []
    keys, source_column = _by_source(source)
    grouped = frame.group_by(keys).agg(
        pl.len().alias("samples"), *[pl.col("ms").quantile(q, "linear").alias(name) for name, q in QUANTILES.items()]
    )
    out = []
    for name in QUANTILES:
        out.append(grouped.select(
            "window_start", pl.lit(prefix + name).alias("series"),
            pl.when(pl.col("samples") >= QUANTILE_MIN_SAMPLES[name]).then(pl.col(name)).alias("value"),
            pl.lit("ms").alias("unit"), source_column, "samples",
        ))
    return out


def _jmeter(samples: pl.DataFrame, window: pl.Expr, window_s: float) -> list[pl.DataFrame]:
    frame = samples.with_columns(window)
    if frame["is_transaction"].any():
        frame = frame.filter(pl.col("is_transaction").fill_null(False))
    spans = frame.group_by("source").agg(pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"))
    out = [_rate(frame, "tps", window_s, spans=spans)]
    labels = frame.group_by("label").len().sort(["len", "label"], descending=[True, False]).head(MAX_LABELS)["label"].drop_nulls()
    if labels.len() > 1:
        for label in labels.to_list():
            out.append(_rate(frame.filter(pl.col("label") == label), "tps", window_s, label, spans=spans))
    out += _quantiles(frame.select("window_start", "source", pl.col("elapsed_ms").alias("ms")))
    return out


def interval_starts(intervals: pl.DataFrame) -> pl.DataFrame:
    """Progress lines at the start of the interval each reports (``step_s`` before its time)."""
    key = ["source", "run"]
    by_offset = pl.col("offset_s") - pl.col("offset_s").shift(1).over(key)
    by_time = (pl.col("ts") - pl.col("ts").shift(1).over(key)).dt.total_microseconds() / 1e6
    return intervals.sort(*key, "ts").with_columns(pl.coalesce(by_offset, by_time).alias("step_s")).with_columns(
        pl.col("step_s").fill_null(pl.col("step_s").shift(-1).over(key)).fill_null(pl.col("offset_s")).fill_null(1.0)
    ).with_columns((pl.col("ts") - pl.duration(microseconds=(pl.col("step_s") * 1e6).round().cast(pl.Int64))).alias("ts"))


def _intervals(intervals: pl.DataFrame, width_us: int, window_s: float) -> list[pl.DataFrame]:
    """Progress lines (at their interval's start): TPS and QPS x the interval summed per window."""
    frame = intervals
    frame = frame.with_columns(window_expr("ts", width_us), (pl.col("tps") * pl.col("step_s")).alias("txns"),
                               (pl.col("qps") * pl.col("step_s")).alias("queries"))
    grouped = frame.group_by("window_start", "source").agg(
        pl.col("txns").sum().alias("txns"), pl.when(pl.col("queries").is_not_null().any()).then(pl.col("queries").sum()).alias("queries"),
        pl.col("latency_ms").filter(pl.col("latency_pct").is_null()).dot(pl.col("txns").filter(pl.col("latency_pct").is_null())).alias("lat_w"),
        pl.col("txns").filter(pl.col("latency_pct").is_null() & pl.col("latency_ms").is_not_null()).sum().alias("lat_n"),
        pl.col("latency_ms").filter(pl.col("latency_pct").is_not_null()).max().alias("pct_ms"),
        pl.col("latency_pct").drop_nulls().first().alias("pct"),
    )
    out = [
        grouped.select("window_start", pl.lit("tps").alias("series"), (pl.col("txns") / window_s).alias("value"),
                       pl.lit("1/s").alias("unit"), "source", pl.col("txns").round().cast(pl.Int64).alias("samples")),
        grouped.filter(pl.col("queries").is_not_null()).select(
            "window_start", pl.lit("qps").alias("series"), (pl.col("queries") / window_s).alias("value"),
            pl.lit("1/s").alias("unit"), "source", pl.col("queries").round().cast(pl.Int64).alias("samples")),
        grouped.filter(pl.col("lat_n") > 0).select(
            "window_start", pl.lit("latency_avg").alias("series"), (pl.col("lat_w") / pl.col("lat_n")).alias("value"),
            pl.lit("ms").alias("unit"), "source", pl.col("lat_n").round().cast(pl.Int64).alias("samples")),
        grouped.filter(pl.col("pct_ms").is_not_null()).select(
            "window_start", pl.format("latency_p{}_reported", pl.col("pct").cast(pl.Int64)).alias("series"), pl.col("pct_ms").alias("value"),
            pl.lit("ms").alias("unit"), "source", pl.col("txns").round().cast(pl.Int64).alias("samples")),
    ]
    return out


def _excluded(frame: pl.DataFrame, pattern: str | None) -> pl.DataFrame:
    return frame.filter(~pl.col("labels").str.contains(pattern)) if pattern else frame


def _metric_series(metrics: pl.DataFrame, width_us: int) -> list[pl.DataFrame]:
    out: list[pl.DataFrame] = []
    for metric, (measure, exclude) in RATE_COUNTERS.items():
        rows = _excluded(metrics.filter(pl.col("metric") == metric), exclude)
        if rows.height < 2:
            continue
        deltas = counter_deltas(rows).with_columns(
            ((pl.col("ts") - pl.col("start_ts")).dt.total_microseconds() / 1e6).alias("interval_s"), window_expr("start_ts", width_us)
        ).filter(pl.col("interval_s") > 0)
        per_series = deltas.group_by("window_start", "source", "labels", maintain_order=True).agg(
            (pl.col("delta").sum() / pl.col("interval_s").sum()).alias("rate"), pl.col("delta").sum().alias("count"))
        out.append(per_series.group_by("window_start", "source").agg(pl.col("rate").sum(), pl.col("count").sum()).select(
            "window_start", pl.lit(measure).alias("series"), pl.col("rate").alias("value"), pl.lit("1/s").alias("unit"),
            pl.format("{} ({})", "source", pl.lit(metric)).alias("source"), pl.col("count").round().cast(pl.Int64).alias("samples")))
    for family, (per_unit, exclude) in LATENCY_HISTOGRAMS.items():
        rows = _excluded(metrics.filter(pl.col("metric") == f"{family}_bucket"), exclude)
        if rows.height < 2:
            continue
        buckets = counter_deltas(rows).with_columns(window_expr("start_ts", width_us), label_value("le")).with_columns(
            pl.col("le").str.replace(r"^\+?Inf$", "inf").cast(pl.Float64, strict=False)
        ).filter(pl.col("le").is_not_null()).group_by("window_start", "source", "le").agg(pl.col("delta").sum())
        rows_out: list[dict[str, Any]] = []
        grouped: dict[tuple[Any, str], list[tuple[float, float]]] = {}
        for window_start, source, le, delta in buckets.sort("window_start", "source", "le").iter_rows():
            grouped.setdefault((window_start, source), []).append((le, delta))
        for (window_start, source), pairs in grouped.items():
            total = max((count for le, count in pairs if math.isinf(le)), default=0.0)
            for name, q in QUANTILES.items():
                value = histogram_quantile(pairs, q) if total >= QUANTILE_MIN_SAMPLES[name] else None
                rows_out.append({"window_start": window_start, "series": name,
                                 "value": value * per_unit * 1000.0 if value is not None else None, "unit": "ms",
                                 "source": f"{source} ({family})", "samples": int(round(total))})
        if rows_out:
            out.append(pl.DataFrame(rows_out, schema=TIMELINE_SCHEMA))
    gauges = metrics.filter(pl.col("metric").is_in(CONNECTION_GAUGES) & pl.col("value").is_finite())
    if gauges.height:
        at_scrape = gauges.group_by("ts", "source", "metric", maintain_order=True).agg(pl.col("value").sum())
        out.append(at_scrape.with_columns(window_expr("ts", width_us)).group_by("window_start", "source", "metric").agg(
            pl.col("value").max(), pl.len().alias("samples")).select(
            "window_start", pl.format("connections[{}]", "metric").alias("series"), "value", pl.lit("sessions").alias("unit"),
            "source", "samples"))
    return out


def _proxy(frontends: pl.DataFrame, window: pl.Expr) -> list[pl.DataFrame]:
    frame = frontends.with_columns(window)
    per_snapshot = frame.group_by("window_start", "ts", "source", "proxy", maintain_order=True).agg(pl.col("scur").sum(), pl.col("slim").max())
    grouped = per_snapshot.group_by("window_start", "source", "proxy").agg(
        pl.col("scur").max(), pl.col("slim").max(), pl.len().alias("samples"))
    return [
        grouped.filter(pl.col("scur").is_not_null()).select(
            "window_start", pl.format("connections[{}]", "proxy").alias("series"), pl.col("scur").cast(pl.Float64).alias("value"),
            pl.lit("sessions").alias("unit"), "source", "samples"),
        grouped.filter(pl.col("slim").is_not_null() & (pl.col("slim") > 0)).select(
            "window_start", pl.format("session_limit[{}]", "proxy").alias("series"), pl.col("slim").cast(pl.Float64).alias("value"),
            pl.lit("sessions").alias("unit"), "source", "samples"),
    ]


def _disks(reports: pl.DataFrame, window: pl.Expr) -> list[pl.DataFrame]:
    """Per window and device that did I/O: ``disk_await[dev]`` (ms, each report's reads and writes weighted by their
    requests) and ``disk_util[dev]`` (%util, the reports' mean); one member per device (iostat text and JSON of one
    run would count twice): the one with the most reports."""
    r, w = pl.col("r_per_s").fill_null(0.0), pl.col("w_per_s").fill_null(0.0)
    frame = reports.with_columns(window, (r + w).alias("iops"), (r * pl.col("r_await_ms").fill_null(0.0) + w * pl.col("w_await_ms").fill_null(0.0)).alias("wait"))
    busy = frame.group_by("device", "source").agg(pl.col("iops").sum(), pl.len().alias("n")).filter(pl.col("iops") > 0)
    chosen = busy.sort("device", "n", "source", descending=[False, True, False]).unique("device", keep="first", maintain_order=True)
    frame = frame.join(chosen.select("device", "source"), on=["device", "source"])
    grouped = frame.group_by("window_start", "device", "source").agg(
        pl.when(pl.col("iops").sum() > 0).then(pl.col("wait").sum() / pl.col("iops").sum()).alias("await"),
        pl.col("util_pct").mean().clip(upper_bound=100.0).alias("util"), pl.len().alias("samples"),  # 100.2: iostat's rounding
    ).sort("device", "window_start")
    return [
        grouped.select("window_start", pl.format(f"{name}[{{}}]", "device").alias("series"), pl.col(column).alias("value"),
                       pl.lit(unit).alias("unit"), "source", "samples")
        for name, column, unit in (("disk_await", "await", "ms"), ("disk_util", "util", "%"))
    ]


def _vmstat(lines: pl.DataFrame, window: pl.Expr) -> list[pl.DataFrame]:
    """Per window: ``swap_in``/``swap_out`` (KiB/s, vmstat's si and so) and ``runnable`` (r), each the lines' mean."""
    grouped = lines.with_columns(window).group_by("window_start", "source").agg(
        pl.col("swap_in_kb_per_s").mean().alias("swap_in"), pl.col("swap_out_kb_per_s").mean().alias("swap_out"),
        pl.col("runnable").mean().alias("runnable"), pl.len().alias("samples"),
    ).sort("source", "window_start")
    return [
        grouped.select("window_start", pl.lit(name).alias("series"), pl.col(name).cast(pl.Float64).alias("value"), pl.lit(unit).alias("unit"),
                       "source", "samples")
        for name, unit in (("swap_in", "KiB/s"), ("swap_out", "KiB/s"), ("runnable", "tasks"))
    ]


def _cpu(cpu: pl.DataFrame, window: pl.Expr) -> list[pl.DataFrame]:
    per_cpu = cpu.filter(pl.col("cpu") >= 0)
    frame = (per_cpu if per_cpu.height else cpu).with_columns(
        window, (100.0 - pl.col("idle_pct") - pl.col("iowait_pct").fill_null(0.0)).clip(0.0, 100.0).alias("busy"))
    by_cpu = frame.group_by("window_start", "source", "cpu").agg(pl.col("busy").mean(), pl.col("soft_pct").mean(), pl.len().alias("n"))
    # a fixed order of CPUs makes the float sums below the same on every run (group_by order is not)
    grouped = by_cpu.sort("window_start", "source", "cpu").group_by("window_start", "source", maintain_order=True).agg(
        pl.col("busy").dot("n").truediv(pl.col("n").sum()).alias("cpu_busy_mean"),
        pl.col("soft_pct").dot("n").truediv(pl.col("n").filter(pl.col("soft_pct").is_not_null()).sum()).alias("cpu_soft_mean"),
        pl.col("busy").max().alias("cpu_busy_max"), pl.col("soft_pct").max().alias("cpu_soft_max"), pl.col("n").sum().alias("samples"))
    names = ["cpu_busy_mean", "cpu_soft_mean"] + (["cpu_busy_max", "cpu_soft_max"] if per_cpu.height else [])
    return [
        grouped.select("window_start", pl.lit(name).alias("series"), pl.col(name).alias("value"), pl.lit("%").alias("unit"), "source", "samples")
        for name in names
    ]
