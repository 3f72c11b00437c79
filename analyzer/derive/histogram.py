"""Prometheus counter and histogram arithmetic over ``metric_sample`` rows: increases and quantiles.

- :func:`counter_deltas`: per series (metric + labels + source), the increase between consecutive
  samples, a drop counted as a reset (the new value is the increase since the restart), as
  Prometheus' ``increase()`` does without its extrapolation to the range edges.
- :func:`histogram_quantile`: a quantile from cumulative ``le`` buckets by linear interpolation inside
  the bucket that holds the rank, with the semantics of PromQL's ``histogram_quantile``.
- :func:`label_value`: one label out of the canonical ``k1=v1,k2=v2`` string of ``metric_sample``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

SERIES_KEY = ("source", "metric", "labels")


def histogram_quantile(buckets: Sequence[tuple[float, float]], q: float) -> float | None:
    """The ``q`` quantile (0..1) of cumulative buckets ``(le, count)``; None when it cannot be known.

    As PromQL: buckets are sorted by ``le``; the rank is ``q`` x the ``+Inf`` bucket's count; the
    answer is interpolated linearly inside the first bucket whose count reaches the rank, from the
    previous bucket's bound (0 below the first bucket when its bound is positive). A rank that
    falls in the ``+Inf`` bucket returns the highest finite bound. No ``+Inf`` bucket, fewer than
    two buckets or no observations: None. Counts that decrease (scrapes not taken at once) are
    made monotonic first.

    >>> buckets = [(0.001, 10), (0.002, 30), (0.004, 40), (float("inf"), 40)]
    >>> histogram_quantile(buckets, 0.5)  # rank 20: halfway through (0.001, 0.002]
    0.0015
    >>> histogram_quantile(buckets, 0.25)  # rank 10: the top of the first bucket
    0.001
    >>> histogram_quantile(buckets, 0.1)  # rank 4: inside the first bucket, from 0
    0.0004
    >>> histogram_quantile([(0.5, 1), (1.0, 2), (float("inf"), 10)], 0.99)  # in +Inf: highest bound
    1.0
    >>> histogram_quantile([(1.0, 0), (float("inf"), 0)], 0.5) is None  # nothing observed
    True
    >>> histogram_quantile([(1.0, 5), (2.0, 9)], 0.5) is None  # no +Inf bucket
    True
    """
    if not 0.0 <= q <= 1.0 or len(buckets) < 2:
        return None
    ordered = sorted(buckets, key=lambda bucket: bucket[0])
    if not math.isinf(ordered[-1][0]):
        return None
    bounds = [le for le, _ in ordered]
    counts: list[float] = []
    for _, count in ordered:
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    index = next(i for i, count in enumerate(counts) if count >= rank)
    if index == len(ordered) - 1:
        return bounds[-2]
    if index == 0 and bounds[0] <= 0:
        return bounds[0]
    start = bounds[index - 1] if index > 0 else 0.0
    below = counts[index - 1] if index > 0 else 0.0
    in_bucket = counts[index] - below
    if in_bucket <= 0:
        return bounds[index]
    return round(start + (bounds[index] - start) * (rank - below) / in_bucket, 12)


def counter_deltas(samples: pl.DataFrame) -> pl.DataFrame:
    """``metric_sample`` rows of counters -> one row per increase: ``ts`` (the later sample),
    ``start_ts`` (the earlier one), ``delta``.

    Keeps ``source``, ``metric``, ``labels`` and ``instance``. NaN/inf values are dropped first; the
    first sample of each series has no increase and yields no row; a value lower than the previous
    one is a reset, and its increase is the value itself.

    >>> from datetime import datetime, timezone
    >>> ts = [datetime(2024, 1, 1, 0, 0, s, tzinfo=timezone.utc) for s in (0, 15, 30, 45)]
    >>> frame = pl.DataFrame({"ts": ts, "metric": "x_sum", "labels": "", "instance": None,
    ...                       "value": [10.0, 12.5, 1.0, 3.0], "source": "m.json"})
    >>> counter_deltas(frame)["delta"].to_list()  # 10 -> 12.5, reset to 1, 1 -> 3
    [2.5, 1.0, 2.0]
    """
    clean = samples.filter(pl.col("value").is_finite()).sort(*SERIES_KEY, "ts")
    # sorted, a series' rows are contiguous: comparing keys with the row before is cheaper than windows over three strings
    same_series = pl.all_horizontal(pl.col(key).eq_missing(pl.col(key).shift(1)) for key in SERIES_KEY)
    previous = pl.when(same_series).then(pl.col("value").shift(1))
    return (
        clean.with_columns(
            pl.when(pl.col("value") >= previous).then(pl.col("value") - previous).otherwise(pl.col("value")).alias("delta"),
            previous.is_null().alias("_first"),
            pl.when(same_series).then(pl.col("ts").shift(1)).alias("start_ts"),
        )
        .filter(~pl.col("_first"))
        .select("ts", "start_ts", "source", "metric", "labels", "instance", "delta")
    )


def label_value(name: str) -> pl.Expr:
    """The value of label ``name`` in ``labels`` (``k1=v1,k2=v2``), null when absent.

    >>> frame = pl.DataFrame({"labels": ["in_txn=1,le=0.005", "le=+Inf", ""]})
    >>> frame.select(label_value("le"))["le"].to_list()
    ['0.005', '+Inf', None]
    """
    return pl.col("labels").str.extract(rf"(?:^|,){name}=([^,]*)", 1).alias(name)
