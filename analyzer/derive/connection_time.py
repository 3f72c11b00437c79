"""The time users spent connecting, as the load tool measured it, for ``metrics.time_accounting``.

pgbench prints it in its run summary (``load_run``)::

    latency average = 2.260 ms
    latency stddev = 9.990 ms
    average connection time = 112.312 ms        <- -C: a new connection per transaction
    tps = 139.395035 (including reconnection times)

or, without ``-C``, ``initial connection time = 10.629 ms`` (the time until every client was
connected, waited once by each client). JMeter writes a ``Connect`` column per sample
(``load_sample.connect_ms``; part of ``elapsed``). sysbench prints no connection time.

What the tool's latency holds decides whether the connection time is added to the user time or
is already part of it (``load_run.latency_includes_connect``, from the pgbench parser): pgbench
``-C`` with a measured latency (``-P``, ``-L``) starts each transaction's clock after connecting,
so user time = transactions x (latency + connection time); without a measurement its "latency
average" is the run time x clients / transactions, connections included; with ``-R`` a latency
counts from the scheduled start, before the connection.

:func:`run_connect` adds to each run ``connect_s`` (seconds users spent connecting),
``connect_added`` (true when ``connect_s`` is not in the latency sum and must be added) and
``connect_detail`` (the sum in words).

>>> runs = pl.DataFrame({"tool": ["pgbench"], "threads": [16], "transactions": [2798], "errors": [0],
...     "connect_avg_ms": [112.312], "initial_connect_ms": [None], "latency_includes_connect": [False]})
>>> row = run_connect(runs).row(0, named=True)
>>> round(row["connect_s"], 3), row["connect_added"]
(314.249, True)
>>> row["connect_detail"]
'pgbench -C: average connection time 112.312 ms x 2,798 transactions = 314.249 s, outside its measured latency (added to it)'
"""

from __future__ import annotations

import polars as pl


def run_connect(runs: pl.DataFrame) -> pl.DataFrame:
    """``runs`` (``load_run`` rows) with ``connect_s``, ``connect_added`` and ``connect_detail``."""
    frame = runs
    for name, dtype in (("connect_avg_ms", pl.Float64), ("initial_connect_ms", pl.Float64), ("latency_includes_connect", pl.Boolean)):
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype).alias(name))
    per_txn = pl.col("connect_avg_ms").is_not_null() & pl.col("transactions").is_not_null()
    initial = pl.col("initial_connect_ms").is_not_null() & pl.col("threads").is_not_null()
    connections = pl.col("transactions") + pl.col("errors").fill_null(0)
    per_txn_s = pl.col("connect_avg_ms") * connections / 1000.0
    initial_s = pl.col("initial_connect_ms") * pl.col("threads") / 1000.0
    included = pl.col("latency_includes_connect").fill_null(False)
    per_txn_text = pl.format(
        "{} -C: average connection time {} ms x {} transactions = {} s, ",
        "tool", pl.col("connect_avg_ms"), _thousands(connections), per_txn_s.round(3),
    ) + pl.when(included).then(pl.lit("already in its latency average (computed from the run time)")).otherwise(
        pl.lit("outside its measured latency (added to it)")
    )
    initial_text = pl.format(
        "{} initial connection time {} ms x {} clients = {} s (each client waited for it once; added)",
        "tool", pl.col("initial_connect_ms"), pl.col("threads"), initial_s.round(3),
    )
    return frame.with_columns(
        pl.when(per_txn).then(per_txn_s).when(initial).then(initial_s).alias("connect_s"),
        pl.when(per_txn).then(~included).when(initial).then(pl.lit(True)).otherwise(pl.lit(False)).alias("connect_added"),
        pl.when(per_txn).then(per_txn_text).when(initial).then(initial_text).alias("connect_detail"),
        per_txn.alias("connect_per_transaction"),
    )


def interval_connect(intervals: pl.DataFrame, runs: pl.DataFrame | None) -> pl.DataFrame:
    """pgbench -C progress lines (``load_interval``) with ``connect_ms`` (the run's average connection time)
    and ``connect_added`` (whether the progress latency leaves it out), null for other runs."""
    columns = ("connect_avg_ms", "latency_includes_connect")
    if runs is None or not set(columns) <= set(runs.columns):
        return intervals.with_columns(pl.lit(None, pl.Float64).alias("connect_ms"), pl.lit(False).alias("connect_added"))
    per_run = runs.select("source", "run", pl.col("connect_avg_ms").alias("connect_ms"),
                          (~pl.col("latency_includes_connect").fill_null(True)).alias("connect_added"))
    return intervals.join(per_run, on=["source", "run"], how="left").with_columns(pl.col("connect_added").fill_null(False))


def _thousands(expr: pl.Expr) -> pl.Expr:
    """An integer with thousands separators (2798 -> "2,798")."""
    text = expr.cast(pl.Int64).cast(pl.String)
    return text.str.reverse().str.replace_all(r"(\d{3})", "$1,").str.reverse().str.strip_chars_start(",")
