"""``histogram_window``: percentiles of every metric histogram per window and over the whole capture.

Input: ``metric_sample`` rows of Prometheus-style bucket counters (``*_bucket`` with an ``le`` label),
for example ``tidb_server_handle_query_duration_seconds_bucket{le="0.005",sql_type="Select"}``.
Increases per window (``counter_deltas``, resets taken as restarts), summed per bucket, then
``histogram_quantile``. One series is a metric with its labels other than ``le`` and ``instance``
(``series_labels``); rows are per instance and window, and once more per instance over the whole
capture (``window_start`` null). Values are milliseconds: seconds unless the metric's name says
``_ms``/``millisecond``. Windows whose ``+Inf`` bucket did not grow have no row.

Output rows, in series order (``source``, ``metric``, ``series_labels`` sorted), windows by start and instance, then
the whole-capture rows by instance::

    source     metric                         series_labels   instance  window_start         count  p50_ms  p99_ms ...
    prom.json  tidb_..._duration_seconds_bucket  sql_type=Select  db1:10080  2024-01-01 00:00:00  15000  2.4     8.9
    prom.json  tidb_..._duration_seconds_bucket  sql_type=Select  db1:10080  null                 45000  2.5     9.1
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.histogram import counter_deltas, histogram_quantile, label_value

QUANTILES = {"p50_ms": 0.5, "p99_ms": 0.99, "p999_ms": 0.999, "p9999_ms": 0.9999}


def histogram_windows(metrics: pl.DataFrame | None, width_s: float) -> pl.DataFrame | None:
    """The ``histogram_window`` table of ``metrics`` (``metric_sample``) in windows of ``width_s``; None without histograms."""
    if metrics is None or metrics.height == 0:
        return None
    buckets = metrics.filter(pl.col("metric").str.ends_with("_bucket") & pl.col("labels").str.contains(r"(?:^|,)le="))
    if buckets.height == 0:
        return None
    deltas = counter_deltas(buckets).with_columns(
        label_value("le"),
        pl.coalesce(pl.col("instance"), label_value("instance")).alias("series_instance"),
        pl.col("labels").str.replace_all(r"(?:^|,)(?:le|instance)=[^,]*", "").str.strip_chars(",").alias("series_labels"),
    )
    width_us = max(1, int(round(width_s * 1e6)))
    deltas = deltas.with_columns(
        pl.from_epoch((pl.col("ts").dt.epoch("us") // width_us) * width_us, time_unit="us").dt.replace_time_zone("UTC").alias("window_start"),
        pl.col("le").str.replace(r"^\+?Inf$", "inf").cast(pl.Float64, strict=False).alias("le_value"),
    ).filter(pl.col("le_value").is_not_null())
    rows: list[dict[str, Any]] = []
    for (source, metric, labels), group in deltas.group_by("source", "metric", "series_labels", maintain_order=True):
        scale = 1.0 if ("_ms" in metric or "millisecond" in metric) else 1000.0
        series = {"source": source, "metric": metric, "series_labels": labels}
        per_window = group.group_by("series_instance", "window_start", "le_value").agg(pl.col("delta").sum())
        windows = [
            _quantile_row(window, frame, scale, instance)
            for (instance, window), frame in per_window.group_by("series_instance", "window_start", maintain_order=True)
        ]
        windows = sorted((r for r in windows if r), key=lambda r: (r["window_start"], r["instance"] is not None, r["instance"] or ""))
        totals = per_window.group_by("series_instance", "le_value").agg(pl.col("delta").sum())
        whole = [_quantile_row(None, frame, scale, instance) for (instance,), frame in totals.group_by("series_instance")]
        whole = sorted((r for r in whole if r), key=lambda r: (r["instance"] is not None, r["instance"] or ""))
        rows += [{**series, **r} for r in windows + whole]
    return pl.DataFrame(rows, schema=t.HISTOGRAM_WINDOW_SCHEMA)


def _quantile_row(window: datetime | None, frame: pl.DataFrame, scale: float, instance: str | None) -> dict[str, Any] | None:
    pairs = list(frame.select("le_value", "delta").iter_rows())
    count = max((c for le, c in pairs if le == float("inf")), default=0)
    if count <= 0:
        return None
    values = {k: histogram_quantile(pairs, q) for k, q in QUANTILES.items()}
    return {"instance": instance, "window_start": window, "count": int(count), **{k: (None if v is None else v * scale) for k, v in values.items()}}
