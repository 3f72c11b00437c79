"""PostgreSQL's buffer hit ratio and commit rate per database, from ``pg_stat_database`` snapshots.

``pg_stat_database_delta`` -> ``metrics.pg_stat_database``::

    {"window": "between snapshots", "snapshots": 2, "first_source": "capture/db/pg_stat_database.before",
     "last_source": "capture/db/pg_stat_database.after", "from": "2026-12-04T19:28:56.982831+00:00",
     "to": "2026-12-04T19:29:07.106463+00:00", "seconds": 10.12, "note": "...",
     "databases": [{"datname": "bench", "window": "between snapshots", "seconds": 10.12,
                    "blks_hit": 318497, "blks_read": 307369, "hit_ratio_pct": 50.89,
                    "xact_commit": 15645, "xact_rollback": 0, "commits_per_s": 1545.4, "blks_read_per_s": 30366.9,
                    "stats_reset": null}, ...]}

The hit ratio is Δblks_hit / (Δblks_hit + Δblks_read) between the first and the last snapshot (the
order of ``derive.snapshots``: ``.before`` then ``.after``, or their order in one file), the share of
block requests shared buffers served; a read is a block PostgreSQL asked the kernel for (from the page
cache or the disk: the view does not say which). With one snapshot, or for a database whose counters went
back (``pg_stat_reset()``, a new ``stats_reset``) or that the first snapshot lacks (created since), the
counts are the last snapshot's: since ``stats_reset`` (or since the database was created, or since the
statistics began when ``stats_reset`` is null), and ``window`` says so. Rates need times: the snapshots'
(a ``now()`` column or a time line), or the time since ``stats_reset`` for a cumulative window; without
them ``seconds`` and the rates are null and ``note`` says so. The row of shared objects (``datname``
null) is left out; databases come busiest first (block requests in the window).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import first_and_last

COUNTERS = ("blks_hit", "blks_read", "xact_commit", "xact_rollback")
BETWEEN, SINCE_RESET = "between snapshots", "since stats_reset"


def pg_stat_database_delta(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """``metrics.pg_stat_database`` (module docstring), or None without a database row.

    >>> frame = pl.DataFrame({"snapshot": [0, 0], "datname": ["bench", "bench"], "blks_hit": [100, 1100],
    ...     "blks_read": [50, 50], "xact_commit": [10, 110], "source": ["stat.before", "stat.after"]})
    >>> metric = pg_stat_database_delta({t.PG_STAT_DATABASE: t.conform(t.PG_STAT_DATABASE, frame)})
    >>> [(d["datname"], d["hit_ratio_pct"], d["xact_commit"], d["commits_per_s"]) for d in metric["databases"]]
    [('bench', 100.0, 100, None)]
    >>> metric["note"]
    'the snapshots carry no time: counts over the capture, no rates'
    """
    frame = tables.get(t.PG_STAT_DATABASE)
    named = frame.filter(pl.col("datname").is_not_null()) if frame is not None else None
    if named is None or named.is_empty():
        return None
    ends = first_and_last(named)
    one_snapshot = ends is None
    start, end, window_s = (named, named, None) if ends is None else ends
    start_ts, end_ts = start["ts"][0], end["ts"][0]
    before = start.select("datname", *(pl.col(c).alias(f"{c}_0") for c in (*COUNTERS, "datid", "stats_reset")))
    joined = end.unique("datname", keep="first", maintain_order=True).join(before.unique("datname", keep="first"), on="datname", how="left")
    if one_snapshot:
        joined = joined.with_columns(pl.lit(None, dtype=pl.Int64).alias(f"{c}_0") for c in COUNTERS)
    went_back = pl.any_horizontal(pl.col(c) < pl.col(f"{c}_0") for c in COUNTERS).fill_null(False)
    restarted = (pl.col("blks_hit_0").is_null() | went_back | (pl.col("datid") != pl.col("datid_0")).fill_null(False)
                 | (pl.col("stats_reset").is_not_null() & (pl.col("stats_reset") != pl.col("stats_reset_0")).fill_null(True)))
    since_reset_s = (pl.col("ts") - pl.col("stats_reset")).dt.total_microseconds() / 1e6
    rows = joined.with_columns(
        pl.when(restarted).then(pl.lit(SINCE_RESET)).otherwise(pl.lit(BETWEEN)).alias("window"),
        *(pl.when(restarted).then(pl.col(c)).otherwise(pl.col(c) - pl.col(f"{c}_0")).alias(c) for c in COUNTERS),
        pl.when(restarted).then(since_reset_s).otherwise(pl.lit(window_s, dtype=pl.Float64)).alias("seconds"),
    ).with_columns(
        (pl.col("blks_hit") / (pl.col("blks_hit") + pl.col("blks_read")) * 100).round(2).alias("hit_ratio_pct"),
        (pl.col("xact_commit") / pl.col("seconds")).round(2).alias("commits_per_s"),
        (pl.col("blks_read") / pl.col("seconds")).round(2).alias("blks_read_per_s"),
        pl.col("seconds").round(3),
    ).with_columns(
        pl.when(pl.col("blks_hit") + pl.col("blks_read") > 0).then("hit_ratio_pct").alias("hit_ratio_pct"),
        pl.when(pl.col("seconds") > 0).then("commits_per_s").alias("commits_per_s"),
        pl.when(pl.col("seconds") > 0).then("blks_read_per_s").alias("blks_read_per_s"),
    ).sort(pl.col("blks_hit") + pl.col("blks_read"), "datname", descending=[True, False], nulls_last=True)
    databases = rows.select("datname", "window", "seconds", *COUNTERS, "hit_ratio_pct", "commits_per_s", "blks_read_per_s",
                            "stats_reset").to_dicts()
    return {
        "window": SINCE_RESET if one_snapshot else BETWEEN,
        "snapshots": named.select("source", "snapshot").unique().height,
        "first_source": start["source"][0],
        "last_source": end["source"][0],
        "from": None if one_snapshot else start_ts,
        "to": end_ts,
        "seconds": round(window_s, 3) if window_s is not None else None,
        "note": _note(one_snapshot, start_ts is not None and end_ts is not None),
        "databases": databases,
    }


def _note(one_snapshot: bool, timed: bool) -> str:
    if one_snapshot:
        return ("one snapshot: counts since stats_reset (null: since the statistics began), not over the capture; "
                + ("rates over the time since stats_reset" if timed else "no rates (the snapshot carries no time)"))
    if not timed:
        return "the snapshots carry no time: counts over the capture, no rates"
    return "growth between the first and the last snapshot"
