"""Metric histograms per window (derived ``histogram_window``) and background-activity metrics (``background_activity``)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive import derive_all
from dbdiag.derive.background_activity import background_activity
from dbdiag.derive.histogram_windows import histogram_windows

T0 = datetime(2024, 1, 1, 0, 0, 0, tzinfo=timezone.utc)
BOUNDS = ("0.01", "0.1", "+Inf")


def bucket_samples(metric: str, cumulative: list[tuple[int, int, int]], labels: str = "sql_type=Select", step_s: int = 10) -> pl.DataFrame:
    """One scrape per ``step_s``: cumulative counts of the buckets le=0.01, le=0.1, le=+Inf."""
    rows = [
        {"ts": T0 + timedelta(seconds=i * step_s), "metric": metric, "labels": f"{labels},le={le}", "instance": "db1:10080",
         "value": float(count), "source": "prom.json"}
        for i, counts in enumerate(cumulative) for le, count in zip(BOUNDS, counts)
    ]
    return t.conform(t.METRIC_SAMPLE, pl.DataFrame(rows))


def test_percentiles_per_window_and_over_the_whole_capture():
    # window 1: +100 obs all <= 10 ms; window 2: +100 obs, 50 <= 10 ms, 50 in (10, 100] ms
    samples = bucket_samples("q_duration_seconds_bucket", [(0, 0, 0), (100, 100, 100), (150, 200, 200)])
    table = histogram_windows(samples, 10.0)
    assert table.schema == pl.Schema(t.HISTOGRAM_WINDOW_SCHEMA)
    windows = table.filter(pl.col("window_start").is_not_null())
    assert windows["window_start"].to_list() == [T0 + timedelta(seconds=10), T0 + timedelta(seconds=20)]
    assert windows["count"].to_list() == [100, 100]
    assert windows["p50_ms"].to_list() == pytest.approx([5.0, 10.0])  # interpolated inside the bucket, seconds -> ms
    assert windows["p99_ms"][1] == pytest.approx(10.0 + 90.0 * 0.98)
    whole = table.filter(pl.col("window_start").is_null()).row(0, named=True)
    assert (whole["count"], whole["instance"], whole["series_labels"]) == (200, "db1:10080", "sql_type=Select")
    assert whole["p50_ms"] == pytest.approx(10.0 * 100 / 150)


def test_a_millisecond_histogram_is_not_scaled_and_a_window_without_observations_has_no_row():
    samples = bucket_samples("http_server_duration_milliseconds_bucket", [(0, 0, 0), (10, 10, 10), (10, 10, 10)])
    table = histogram_windows(samples, 10.0)
    assert table.filter(pl.col("window_start").is_not_null())["window_start"].to_list() == [T0 + timedelta(seconds=10)]
    assert table["p50_ms"][0] == pytest.approx(0.005)


def test_no_histogram_no_table():
    gauges = t.conform(t.METRIC_SAMPLE, pl.DataFrame({"ts": [T0], "metric": ["up"], "labels": [""], "value": [1.0], "source": ["p.json"]}))
    assert histogram_windows(gauges, 10.0) is None
    assert histogram_windows(None, 10.0) is None


def test_derive_uses_the_windows_of_time_accounting_else_the_window_option():
    samples = bucket_samples("q_duration_seconds_bucket", [(0, 0, 0), (100, 100, 100), (150, 200, 200)])
    table = derive_all({t.METRIC_SAMPLE: samples}, window_s=20.0).tables[t.HISTOGRAM_WINDOW]
    assert table.filter(pl.col("window_start").is_not_null())["count"].to_list() == [100, 100]  # 10-20 s and 20-40 s
    assert table.filter(pl.col("window_start").is_not_null())["window_start"].to_list() == [T0, T0 + timedelta(seconds=20)]


def test_background_activity_takes_counter_increases_and_gauge_values():
    rows = [
        {"ts": T0 + timedelta(seconds=s), "metric": m, "labels": "", "value": v, "source": "prom.json"}
        for m, values in (("tikv_gc_total", (5.0, 8.0, 2.0)), ("pg_checkpoint_in_progress", (0.0, 1.0, 0.0)), ("tidb_qps", (1.0, 2.0, 3.0)))
        for s, v in zip((0, 15, 30), values)
    ]
    rows.append({"ts": T0, "metric": "tikv_gc_seconds_bucket", "labels": "le=1", "value": 3.0, "source": "prom.json"})
    table = background_activity(t.conform(t.METRIC_SAMPLE, pl.DataFrame(rows)))
    assert table.schema == pl.Schema(t.BACKGROUND_ACTIVITY_SCHEMA)
    assert table.select("metric", "value").rows() == [
        ("tikv_gc_total", 3.0), ("tikv_gc_total", 2.0),  # 5 -> 8, then a reset to 2
        ("pg_checkpoint_in_progress", 0.0), ("pg_checkpoint_in_progress", 1.0), ("pg_checkpoint_in_progress", 0.0),
    ]
