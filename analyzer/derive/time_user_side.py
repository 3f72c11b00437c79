"""The user side of the time account: load-test samples, intervals and run summaries, or application
latency metrics -> a :class:`~dbdiag.derive.time_sides.Side` (see :mod:`dbdiag.derive.time_accounting`)."""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.connection_time import interval_connect, run_connect
from dbdiag.derive.histogram import counter_deltas
from dbdiag.derive.time_sides import GENERIC_USER_FAMILY_RE, IGNORED_ENDPOINT_RE, USER_FAMILIES, Side
from dbdiag.vocabulary.metrics import NOT_USER_PREFIXES

def user_side(tables: dict[str, pl.DataFrame], notes: list[str]) -> tuple[Side | None, str]:
    samples = tables.get(t.LOAD_SAMPLE)
    if samples is not None and samples.filter(pl.col("elapsed_ms").is_not_null()).height:
        return _from_samples(samples, notes), ""
    intervals = _timed_intervals(tables.get(t.LOAD_INTERVAL), tables.get(t.LOAD_RUN))
    if intervals is not None:
        return intervals, ""
    runs = load_runs(tables)
    if runs is not None:
        return _from_runs(runs), ""
    metrics = tables.get(t.METRIC_SAMPLE)
    if metrics is not None:
        side = _from_app_metrics(metrics, notes)
        if side is not None:
            return side, ""
    return None, (
        "no user response time: no load-test samples (JMeter), no sysbench/pgbench run with a latency, "
        "no application latency histogram (" + ", ".join(USER_FAMILIES) + ", *_request*_seconds, *_duration_seconds)"
    )


def _from_samples(samples: pl.DataFrame, notes: list[str]) -> Side:
    frame = samples.filter(pl.col("elapsed_ms").is_not_null())
    level = "all samples"
    if "is_transaction" in frame.columns and frame["is_transaction"].any():
        dropped = frame.filter(~pl.col("is_transaction").fill_null(False)).height
        frame = frame.filter(pl.col("is_transaction").fill_null(False))
        level = "transaction-controller samples"
        notes.append(
            f"JMeter: {dropped:,} sampler rows not counted: the transaction controllers' samples span their children "
            "(a JTL does not link children to parents, so samplers outside any controller are left out as well)"
        )
    connect_s = (pl.col("connect_ms") / 1000.0) if "connect_ms" in frame.columns else pl.lit(None, pl.Float64)
    if frame["start_ts"].null_count() == frame.height:
        sources = [
            {"side": "user", "kind": "jmeter-samples", "detail": f"JMeter Σ elapsed of {level} from {row['source']} "
             f"({row['count']:,} samples, no timeStamp column)", "source": row["source"], "from": None, "to": None,
             "count": row["count"], "seconds": round(row["seconds"], 6)}
            for row in frame.group_by("source", maintain_order=True)
            .agg(pl.len().alias("count"), (pl.col("elapsed_ms").sum() / 1000.0).alias("seconds")).iter_rows(named=True)
        ]
        connected = frame.select(connect_s.alias("s"))["s"].drop_nulls()
        return Side("user", "jmeter-samples", total_s=float(frame["elapsed_ms"].sum()) / 1000.0, sources=sources,
                    what=f"JMeter samples without timeStamp ({frame.height:,})",
                    connect_s=float(connected.sum()) if connected.len() else None, connect_detail=JMETER_CONNECT)
    frame = frame.filter(pl.col("start_ts").is_not_null())
    events = frame.select(
        pl.col("start_ts").alias("ts"), (pl.col("elapsed_ms") / 1000.0).alias("seconds"), "source", pl.lit(1.0).alias("weight"),
        connect_s.alias("connect_s"),
    )
    ends = frame.select((pl.col("start_ts") + pl.duration(microseconds=(pl.col("elapsed_ms") * 1000).cast(pl.Int64))).max())
    side = Side("user", "jmeter-samples", events=events, what=f"JMeter Σ elapsed of {level}",
                coverage=(frame["start_ts"].min(), ends.item()))
    return side


JMETER_CONNECT = "JMeter Σ Connect of the samples counted (the time to open the connection, or to get one from the pool; part of elapsed)"


def _timed_intervals(intervals: pl.DataFrame | None, runs: pl.DataFrame | None) -> Side | None:
    """pgbench --progress-timestamp: each progress line's TPS x average latency x interval, at its wall time.

    A -C run's connection time (its summary's average, per transaction) is added to each line
    when the progress latency leaves it out (``connection_time.interval_connect``).

    Only when every interval line has a wall time and an average latency (sysbench prints a
    percentile, and no wall time); the interval length is the time since the previous line (for the
    first line, its offset, else the next gap).
    """
    if intervals is None or not intervals.height:
        return None
    usable = intervals.filter(pl.col("ts").is_not_null() & pl.col("latency_pct").is_null() & pl.col("latency_ms").is_not_null())
    if usable.height != intervals.height:
        return None
    key = ["source", "run"]
    step = (pl.col("ts") - pl.col("ts").shift(1)).over(key).dt.total_microseconds() / 1e6
    frame = interval_connect(usable, runs).sort(*key, "ts").with_columns(step.alias("interval_s")).with_columns(
        pl.col("interval_s").fill_null(pl.col("interval_s").shift(-1).over(key)).fill_null(1.0)
    )
    connect_s = pl.col("tps") * pl.col("connect_ms") / 1000.0 * pl.col("interval_s")
    latency_s = pl.col("tps") * pl.col("latency_ms") / 1000.0 * pl.col("interval_s")
    events = frame.select(  # at the interval's start, as samples and statements are placed by theirs
        (pl.col("ts") - pl.duration(microseconds=(pl.col("interval_s") * 1e6).cast(pl.Int64))).alias("ts"),
        (latency_s + pl.when(pl.col("connect_added")).then(connect_s).otherwise(0.0)).alias("seconds"), "source",
        pl.lit(1.0).alias("weight"), pl.col("ts").alias("end_ts"), connect_s.alias("connect_s"),
    ).filter(pl.col("seconds").is_not_null())
    if not events.height:
        return None
    return Side("user", "load-test-intervals", events=events,
                what=f"{frame['tool'][0]} progress lines: TPS x average latency x interval",
                coverage=(events["ts"].min(), events["end_ts"].max()))


def load_runs(tables: dict[str, pl.DataFrame]) -> pl.DataFrame | None:
    runs = tables.get(t.LOAD_RUN)
    if runs is None:
        return None
    runs = run_connect(runs).with_columns(
        (
            pl.when(pl.col("latency_sum_ms").is_not_null())
            .then(pl.col("latency_sum_ms") / 1000.0)
            .when(pl.col("transactions").is_not_null() & pl.col("latency_avg_ms").is_not_null())
            .then(pl.col("transactions") * pl.col("latency_avg_ms") / 1000.0)
            .otherwise(pl.col("tps") * pl.col("latency_avg_ms") * pl.col("duration_s") / 1000.0)
            + pl.when(pl.col("connect_added")).then(pl.col("connect_s")).otherwise(0.0)
        ).alias("user_s"),
        pl.when(pl.col("latency_sum_ms").is_not_null())
        .then(pl.format("{} latency sum ({} ms over {} transactions)", "tool", "latency_sum_ms", "transactions"))
        .when(pl.col("transactions").is_not_null() & pl.col("latency_avg_ms").is_not_null())
        .then(pl.format("{} transactions x latency average ({} x {} ms)", "tool", "transactions", "latency_avg_ms"))
        .otherwise(pl.format("{} tps x latency average x duration ({} x {} ms x {} s)", "tool", "tps", "latency_avg_ms", "duration_s"))
        .alias("detail"),
    ).with_columns(
        pl.when(pl.col("connect_detail").is_not_null())
        .then(pl.format("{}; connecting: {}", "detail", "connect_detail")).otherwise("detail").alias("detail")
    ).filter(pl.col("user_s").is_not_null())
    if not runs.height:
        return None
    expected, told = _expected_queries(runs, tables.get(t.LOAD_STATEMENT_LATENCY))
    return runs.with_columns(pl.Series("expected_queries", expected, dtype=pl.Int64), pl.Series("expected_text", told, dtype=pl.String))


def statements_sent(tables: dict[str, pl.DataFrame]) -> int | None:
    """The statements the capture's load tests sent, when they tell (sysbench counts them, pgbench -r lists its
    script): a statement log holding fewer is sampled or filtered, even with sub-millisecond statements in it
    (``log_statement_sample_rate``)."""
    runs = load_runs(tables)
    if runs is None or runs["expected_queries"].null_count() == runs.height:
        return None
    return int(runs["expected_queries"].sum())


def _expected_queries(runs: pl.DataFrame, statements: pl.DataFrame | None) -> tuple[list[int | None], list[str | None]]:
    """Queries the run sent, and how that is known: sysbench counts them; pgbench -r lists its script."""
    expected = runs["queries"].to_list()
    told = [f"the run counted {n:,} queries" if n is not None else None for n in expected]
    if statements is not None:
        per_run = (
            statements.filter(~pl.col("statement").str.starts_with("\\"))
            .group_by("source", "run")
            .agg(pl.len().alias("n"), pl.col("script").n_unique().alias("scripts"))
        )
        for i, row in enumerate(runs.iter_rows(named=True)):
            match = per_run.filter((pl.col("source") == row["source"]) & (pl.col("run") == row["run"]) & (pl.col("scripts") == 1))
            if expected[i] is None and match.height and row["transactions"] is not None:
                expected[i] = row["transactions"] * match["n"][0]
                told[i] = f"the run sent {row['transactions']:,} transactions x {match['n'][0]} SQL statements = {expected[i]:,}"
    return expected, told


def _from_runs(runs: pl.DataFrame) -> Side:
    sources = [
        {"side": "user", "kind": "load-test-run", "detail": row["detail"], "source": row["source"],
         "from": None, "to": None, "count": row["transactions"], "seconds": round(row["user_s"], 6)}
        for row in runs.iter_rows(named=True)
    ]
    connecting = runs.filter(pl.col("connect_s").is_not_null())
    return Side(
        "user", "load-test-run", total_s=float(runs["user_s"].sum()), sources=sources,
        connect_s=float(connecting["connect_s"].sum()) if connecting.height else None,
        connect_detail="; ".join(connecting["connect_detail"].to_list()),
        connect_per_transaction=bool(runs["connect_per_transaction"].any()),
    )


def _from_app_metrics(metrics: pl.DataFrame, notes: list[str]) -> Side | None:
    sums = metrics.filter(pl.col("metric").str.ends_with("_sum")).with_columns(
        pl.col("metric").str.strip_suffix("_sum").alias("family")
    )
    if not sums.height:
        return None
    families = sums["family"].unique().to_list()
    known = [f for f in families if f in USER_FAMILIES]
    generic = [
        f for f in families
        if f not in USER_FAMILIES and re.match(GENERIC_USER_FAMILY_RE, f) and not f.startswith(NOT_USER_PREFIXES)
    ]
    candidates = known or generic
    if not candidates:
        return None
    best: tuple[float, str, pl.DataFrame] | None = None
    for family in sorted(candidates):
        scale = USER_FAMILIES.get(family, (1.0, ""))[0]
        series = sums.filter((pl.col("family") == family) & ~pl.col("labels").str.contains(IGNORED_ENDPOINT_RE))
        deltas = counter_deltas(series.drop("family")).with_columns((pl.col("delta") * scale).alias("seconds"))
        total = float(deltas["seconds"].sum())
        if best is None or total > best[0]:
            best = (total, family, deltas)
    assert best is not None
    total, family, deltas = best
    if len(candidates) > 1:
        notes.append(f"application latency families found: {', '.join(sorted(candidates))}; {family} has the most time and was used")
    what = USER_FAMILIES.get(family, (1.0, "application latency histogram"))[1]
    samples = sums.filter(pl.col("family") == family)
    events = deltas.select(pl.col("start_ts").alias("ts"), "seconds", "source", pl.col("seconds").alias("weight"), pl.col("ts").alias("end_ts"))
    return Side("user", "app-latency-metric", events=events, what=f"increase of {family}_sum ({what}): TPS x average latency",
                coverage=(samples["ts"].min(), samples["ts"].max()))
