"""``background_activity``: the metrics of background work (GC, compaction, checkpoints, flushes, stalls), counters as increases.

Input: ``metric_sample`` rows whose name matches ``vocabulary.metrics.BACKGROUND_ACTIVITY_METRIC_RE``,
histogram buckets left out, for example::

    ts                    metric                               labels     value  source
    2024-01-01 00:00:00   tikv_engine_compaction_flow_bytes   db=kv      1.2e9  prom.json
    2024-01-01 00:00:15   tidb_tikvclient_gc_config           type=...   600    prom.json

Counters (names ending ``_total``/``_count``/``_sum``) become one row per increase between consecutive
samples (``counter_deltas``: a drop is a restart); gauges keep their values. Output rows: the
counters' increases (series sorted, then time), then the gauges in input order::

    ts                    metric                       labels  value  source
    2024-01-01 00:00:15   tidb_tikvclient_gc_total     ...     3.0    prom.json
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.histogram import counter_deltas
from dbdiag.vocabulary.metrics import BACKGROUND_ACTIVITY_METRIC_RE, COUNTER_SERIES_RE


def background_activity(metrics: pl.DataFrame | None) -> pl.DataFrame | None:
    """The ``background_activity`` table of ``metrics`` (``metric_sample``); None when no such metric was captured."""
    if metrics is None or metrics.height == 0:
        return None
    activity = metrics.filter(
        pl.col("metric").str.contains(BACKGROUND_ACTIVITY_METRIC_RE) & ~pl.col("metric").str.ends_with("_bucket") & pl.col("value").is_finite()
    )
    if activity.height == 0:
        return None
    counters = activity.filter(pl.col("metric").str.contains(COUNTER_SERIES_RE))
    columns = list(t.BACKGROUND_ACTIVITY_SCHEMA)
    return pl.concat(
        [
            counter_deltas(counters).rename({"delta": "value"}).select(columns),
            activity.filter(~pl.col("metric").str.contains(COUNTER_SERIES_RE)).select(columns),
        ]
    )
