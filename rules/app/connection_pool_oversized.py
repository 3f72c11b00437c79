"""More client threads or connections than the CPUs can serve: throughput flat or falling, latency rising.

What it detects:
    A load test (sysbench threads, pgbench clients, JMeter active threads) run at several
    concurrency levels where, beyond POOL_CORE_FACTOR x the database host's CPUs, more
    concurrency bought (almost) no more throughput while latency rose.

Why it matters:
    A database does useful work on as many transactions at once as it has CPUs (plus those
    waiting on I/O). Past that, extra connections only queue: for a closed loop of N clients
    with no think time, Little's law gives N = TPS x latency, so when TPS stays flat every added
    client adds its share to everyone's latency, and contention on latches, locks and the
    scheduler often makes TPS fall. Oversized pools (hundreds of connections per app node on
    a 16-core server) are a classic cause of "the database is slow" that more hardware does
    not fix.

How it is detected:
    Inputs: ``load_run`` (one row per sysbench/pgbench run: threads, TPS, average latency),
    else ``load_interval`` (per-run averages of the progress lines), and ``load_sample`` (JMeter:
    per window of ``--window`` seconds, default 10, the largest ``allThreads`` seen, samples per
    second and mean elapsed), and ``metric_sample`` (per instance and window: active concurrency
    from ``mysql_global_status_threads_running`` or ``pg_stat_activity_count{state="active"}``, or
    TiDB's ``tidb_server_connections``; throughput from the counters in THROUGHPUT_COUNTERS;
    latency by Little's law (active / throughput) for active counts, from
    ``tidb_server_handle_query_duration_seconds`` sum/count for TiDB; windows are grouped into
    levels by powers of two of concurrency, a level needing MIN_METRIC_WINDOWS = 3 windows and
    taking the medians). The CPU count comes from ``topology`` (lscpu, numactl), host facts or
    per-CPU mpstat; without it the rule is skipped.
    Runs held to a target rate (sysbench ``--rate``, pgbench ``-R``) are left out (their
    throughput is the offered load), and so are sysbench host benchmarks (cpu, memory,
    fileio ...). Runs of one kind (tool and test, or one JMeter file) form a curve of
    concurrency levels.
    A level L is judged when it has more than POOL_CORE_FACTOR = 4 threads per CPU, against
    the level P with the most threads at or below L / MIN_STEP_RATIO = 1.5 (so steps are at
    least 1.5x apart and noise in small steps is not read as a trend). The marginal
    efficiency is (TPS_L / TPS_P - 1) / (threads_L / threads_P - 1): the throughput each added
    thread brought, as a share of what a thread brought at P. It fires when that is at most
    MAX_MARGINAL_EFFICIENCY_PCT = 5% and latency at L is higher than at P. For a doubling of
    threads this is exactly "less than 5% more throughput"; for a 4x step it asks for 15%.

Remediation:
    Size the pool from the CPUs, not from the number of users: HikariCP's starting point is
    connections = CPU cores x 2 + effective spindles (0 when the data set is cached, about 1 for
    an SSD), for all application nodes together (divide by the number of nodes for a per-node
    pool). Let the excess wait in the application (pool ``connectionTimeout``) or in a
    database-side thread pool (MariaDB/Percona ``thread_handling=pool-of-threads``, MySQL
    Enterprise thread pool, PgBouncer ``pool_mode=transaction``, TiDB ``token-limit``): only the
    capture's engine's (``engine_version``), every engine's when it is unknown.
    Re-run the load test at the recommended size and one step either side.

References:
    HikariCP wiki, "About Pool Sizing"; Little's law (J. D. C. Little, 1961);
    N. J. Gunther, Universal Scalability Law; MariaDB thread pool documentation;
    PgBouncer documentation (pool modes).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Bar, BarGroup, Chart, Evidence, Finding, Scope, Severity
from dbdiag.python_values import rows_in
from dbdiag.rules.app.common import CPU_INPUTS, cpu_count, non_database_runs, sample_windows, sources_of, throttled_runs, window_s
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.vocabulary.metrics import FAMILIES

RULE_ID = "connection-pool-oversized"

POOL_CORE_FACTOR = 4
MIN_STEP_RATIO = 1.5
MAX_MARGINAL_EFFICIENCY_PCT = 5.0
EFFECTIVE_SPINDLES = 1  # HikariCP's formula: one for an SSD-backed working set; 0 when fully cached
MIN_METRIC_WINDOWS = 3

# Concurrency series -> (label filter, whether it counts only active sessions: then latency = active / throughput).
CONCURRENCY_METRICS = {
    "mysql_global_status_threads_running": (None, True),
    "pg_stat_activity_count": ("state=active", True),
    "tidb_server_connections": (None, False),
}
# Throughput counters in order of preference, and what they count.
THROUGHPUT_COUNTERS = (
    ("mysql_global_status_questions", "QPS"),
    ("mysql_global_status_queries", "QPS"),
    ("pg_stat_database_xact_commit", "commits/s"),
    ("tidb_server_query_total", "QPS"),
)
TIDB_DURATION = FAMILIES["tidb_server_handle_query_duration_seconds"].name


@dataclass(frozen=True)
class Level:
    threads: int
    tps: float
    latency_ms: float | None
    latency_kind: str  # "avg", "p95", "mean elapsed"
    runs: int
    errors: int | None


@dataclass(frozen=True)
class Curve:
    name: str  # "sysbench oltp_read_write", "pgbench TPC-B (sort of)", "JMeter results.jtl"
    levels: tuple[Level, ...]
    sources: tuple[str, ...]
    unit: str  # "TPS" or "samples/s"


@dataclass(frozen=True)
class Step:
    before: Level
    after: Level
    efficiency_pct: float
    gain_pct: float


def check(inp: RuleInput) -> Verdict:
    curves = _curves(inp)
    if not curves:
        throttled, host = throttled_runs(inp), non_database_runs(inp)
        raise Skip(
            "no load test with a thread count and throughput (sysbench/pgbench run summaries or JMeter allThreads), "
            "and no active-connection series with a throughput counter in the metrics"
            + (f"; left out {len(throttled)} run(s) held to a target rate ({next(iter(throttled.values()))})" if throttled else "")
            + (f"; left out {len(host)} sysbench host benchmark run(s) (cpu, memory ...)" if host else "")
        )
    judgeable = [c for c in curves if len(c.levels) >= 2]
    if not judgeable:
        only = "; ".join(f"{c.name}: {c.levels[0].threads} threads" for c in curves[:4])
        raise Skip(f"one concurrency level per load test ({only}): throughput against threads needs two or more")
    cpus, cpu_source = cpu_count(inp)
    if cpus is None:
        raise Skip(f"CPU count unknown: needs {CPU_INPUTS}")
    limit = POOL_CORE_FACTOR * cpus
    findings: list[Finding] = []
    measured: list[str] = []
    for curve in judgeable:
        steps = _judged_steps(curve, limit)
        if not steps:
            measured.append(f"{curve.name}: no level above {limit} threads ({POOL_CORE_FACTOR}x {cpus} CPUs) with a smaller one to compare")
            continue
        steps_text = ", ".join(
            f"{s.before.threads} to {s.after.threads} threads: {s.gain_pct:+.1f}% {curve.unit}, marginal efficiency {s.efficiency_pct:.1f}%"
            for s in steps
        )
        measured.append(f"{curve.name}: {steps_text}")
        bad = [s for s in steps if _oversized(s)]
        if bad:
            findings.append(_finding(curve, steps, bad[0], cpus, cpu_source, limit, (inp.metric(t.ENGINE_VERSION_METRIC) or {}).get("engine")))
    return Verdict(findings=findings, measured="; ".join(measured))


def _oversized(step: Step) -> bool:
    latency_rose = (
        step.before.latency_ms is not None and step.after.latency_ms is not None and step.after.latency_ms > step.before.latency_ms
    )
    return step.efficiency_pct <= MAX_MARGINAL_EFFICIENCY_PCT and latency_rose


def _judged_steps(curve: Curve, limit: int) -> list[Step]:
    steps: list[Step] = []
    for level in curve.levels:
        if level.threads <= limit:
            continue
        smaller = [p for p in curve.levels if p.threads * MIN_STEP_RATIO <= level.threads]
        if not smaller or smaller[-1].tps <= 0:
            continue
        before = smaller[-1]
        gain = level.tps / before.tps - 1.0
        efficiency = gain / (level.threads / before.threads - 1.0)
        steps.append(Step(before, level, round(100.0 * efficiency, 2), round(100.0 * gain, 2)))
    return steps


def _curves(inp: RuleInput) -> list[Curve]:
    curves: list[Curve] = []
    throttled = {**throttled_runs(inp), **{key: "host benchmark" for key in non_database_runs(inp)}}
    runs = inp.table(t.LOAD_RUN)
    run_sources: set[str] = set()
    if runs is not None:
        run_sources = set(runs["source"].unique().to_list())
        runs = runs.filter(pl.col("threads").is_not_null() & pl.col("tps").is_not_null())
        runs = runs.filter(~rows_in(runs, ("source", "run"), throttled))
        for (tool, test), group in runs.group_by("tool", "test", maintain_order=True):
            curves.append(_run_curve(tool, test, group))
    intervals = inp.table(t.LOAD_INTERVAL)
    if intervals is not None:
        # Progress lines only stand in for runs whose summary is missing (an interrupted run).
        intervals = intervals.filter(
            ~pl.col("source").is_in(sorted(run_sources)) & pl.col("threads").is_not_null() & pl.col("lag_ms").is_null()
        )
        intervals = intervals.filter(~rows_in(intervals, ("source", "run"), throttled))
        for (tool,), group in intervals.group_by("tool", maintain_order=True):
            curves.append(_interval_curve(tool, group))
    metrics = inp.table(t.METRIC_SAMPLE)
    if metrics is not None:
        curves += _metric_curves(metrics, window_s(inp))
    samples = inp.table(t.LOAD_SAMPLE)
    if samples is not None:
        width = window_s(inp)
        for (source,), group in samples.filter(pl.col("all_threads").is_not_null()).group_by("source", maintain_order=True):
            curves.append(_sample_curve(source, group, width))
    return [c for c in curves if c.levels]


def _run_curve(tool: str | None, test: str | None, runs: pl.DataFrame) -> Curve:
    has_avg = runs["latency_avg_ms"].null_count() < runs.height
    latency = "latency_avg_ms" if has_avg else "latency_pct_ms"
    levels = (
        runs.group_by("threads")
        .agg(pl.col("tps").mean(), pl.col(latency).mean().alias("latency_ms"), pl.len().alias("runs"), pl.col("errors").sum())
        .sort("threads")
    )
    kind = "avg" if has_avg else f"p{runs['latency_pct'].drop_nulls().first() or 95:g}"
    name = " ".join(part for part in (tool or "load test", test) if part)
    return Curve(name, _levels(levels, kind), sources_of(runs), "TPS")


def _interval_curve(tool: str | None, intervals: pl.DataFrame) -> Curve:
    per_run = intervals.group_by("source", "run").agg(
        pl.col("threads").max(), pl.col("tps").mean(), pl.col("latency_ms").mean(), pl.col("latency_pct").first(),
        (pl.col("errors_per_s").fill_null(0.0).sum()).round(0).cast(pl.Int64).alias("errors"),
    )
    levels = (
        per_run.group_by("threads")
        .agg(pl.col("tps").mean(), pl.col("latency_ms").mean(), pl.len().alias("runs"), pl.col("errors").sum())
        .sort("threads")
    )
    pct = per_run["latency_pct"].drop_nulls().first()
    kind = f"p{pct:g} of progress lines" if pct is not None else "avg of progress lines"
    return Curve(f"{tool or 'load test'} (progress lines)", _levels(levels, kind), sources_of(intervals), "TPS")


def _sample_curve(source: str, samples: pl.DataFrame, width: float) -> Curve:
    threads_per_window = (
        samples.with_columns(pl.col("start_ts").dt.epoch("us").floordiv(max(1, int(width * 1e6))).alias("_w"))
        .group_by("_w")
        .agg(pl.col("all_threads").max().alias("threads"))
    )
    windows = sample_windows(samples, width, by_label=False).with_columns(
        pl.col("window_start").dt.epoch("us").floordiv(max(1, int(width * 1e6))).alias("_w")
    )
    joined = windows.join(threads_per_window, on="_w").with_columns((pl.col("count") / width).alias("tps"))
    errors = samples.with_columns(pl.col("start_ts").dt.epoch("us").floordiv(max(1, int(width * 1e6))).alias("_w")).group_by("_w").agg(
        (~pl.col("success").fill_null(True)).sum().cast(pl.Int64).alias("errors")
    )
    levels = (
        joined.join(errors, on="_w", how="left")
        .group_by("threads")
        .agg(pl.col("tps").mean(), pl.col("mean_ms").mean().alias("latency_ms"), pl.len().alias("runs"), pl.col("errors").sum())
        .sort("threads")
    )
    return Curve(f"JMeter {source}", _levels(levels, f"mean elapsed per {width:g} s window"), (source,), "samples/s")


def _metric_curves(metrics: pl.DataFrame, width: float) -> list[Curve]:
    """Per instance: windows of (concurrency, throughput, latency) from dashboard series, grouped into levels."""
    width_us = max(1, int(round(width * 1e6)))
    window = (pl.col("ts").dt.epoch("us") // width_us).alias("_w")
    curves: list[Curve] = []
    finite = metrics.filter(pl.col("value").is_finite())
    for metric, (label_filter, active) in CONCURRENCY_METRICS.items():
        conc = finite.filter(pl.col("metric") == metric)
        if label_filter:
            conc = conc.filter(pl.col("labels").str.contains(rf"(?:^|,){label_filter}(?:,|$)"))
        if conc.height == 0:
            continue
        conc = conc.group_by("instance", "ts").agg(pl.col("value").sum()).with_columns(window).group_by("instance", "_w").agg(
            pl.col("value").mean().alias("threads")
        )
        rate, unit = _throughput(finite, metric)
        if rate is None:
            continue
        joined = conc.join(rate.with_columns(window).group_by("instance", "_w").agg(pl.col("per_s").mean()), on=["instance", "_w"])
        if active:
            joined = joined.with_columns((1000.0 * pl.col("threads") / pl.col("per_s")).alias("latency_ms"))
        else:
            latency = _mean_latency_ms(finite, TIDB_DURATION)
            if latency is None:
                continue
            joined = joined.join(latency.with_columns(window).group_by("instance", "_w").agg(pl.col("latency_ms").mean()), on=["instance", "_w"])
        joined = joined.filter((pl.col("threads") >= 1) & (pl.col("per_s") > 0))
        for (instance,), group in joined.group_by("instance", maintain_order=True):
            levels = (
                group.with_columns(pl.col("threads").log(2).floor().alias("_band"))
                .group_by("_band")
                .agg(
                    pl.col("threads").median().round(0).cast(pl.Int64).alias("threads"),
                    pl.col("per_s").median().alias("tps"),
                    pl.col("latency_ms").median(),
                    pl.len().alias("runs"),
                )
                .filter(pl.col("runs") >= MIN_METRIC_WINDOWS)
                .with_columns(pl.lit(None, dtype=pl.Int64).alias("errors"))
                .sort("threads")
            )
            kind = "active / throughput (Little's law)" if active else "mean from handle_query_duration sum/count"
            name = f"{metric} vs {unit}" + (f" on {instance}" if instance else "")
            sources = tuple(sorted(finite.filter(pl.col("instance").eq_missing(instance))["source"].unique().to_list()))
            curves.append(Curve(name, _levels(levels, kind), sources, unit))
    return curves


def _throughput(metrics: pl.DataFrame, near: str) -> tuple[pl.DataFrame | None, str]:
    """Per instance and sample time, the summed per-second increase of the first throughput counter present."""
    engine = near.split("_", 1)[0]
    for counter, unit in THROUGHPUT_COUNTERS:
        if not counter.startswith(engine):
            continue
        series = metrics.filter(pl.col("metric") == counter)
        if series.height == 0:
            continue
        rates = _per_second(series)
        if rates.height:
            return rates.group_by("instance", "ts").agg(pl.col("per_s").sum()), unit
    return None, ""


def _per_second(series: pl.DataFrame) -> pl.DataFrame:
    """Counter samples -> per-second increase between consecutive samples (a drop is a reset)."""
    key = ["source", "metric", "labels", "instance"]
    ordered = series.sort(*key, "ts")
    previous = pl.col("value").shift(1).over(key)
    seconds = (pl.col("ts") - pl.col("ts").shift(1).over(key)).dt.total_microseconds() / 1e6
    increase = pl.when(pl.col("value") >= previous).then(pl.col("value") - previous).otherwise(pl.col("value"))
    return (
        ordered.with_columns((increase / seconds).alias("per_s"))
        .filter(pl.col("per_s").is_not_null() & pl.col("per_s").is_finite())
        .select("instance", "ts", "per_s")
    )


def _mean_latency_ms(metrics: pl.DataFrame, base: str) -> pl.DataFrame | None:
    sums = _per_second(metrics.filter(pl.col("metric") == f"{base}_sum")).group_by("instance", "ts").agg(pl.col("per_s").sum().alias("sum"))
    counts = _per_second(metrics.filter(pl.col("metric") == f"{base}_count")).group_by("instance", "ts").agg(pl.col("per_s").sum().alias("count"))
    if sums.height == 0 or counts.height == 0:
        return None
    joined = sums.join(counts, on=["instance", "ts"]).filter(pl.col("count") > 0)
    return joined.select("instance", "ts", (1000.0 * pl.col("sum") / pl.col("count")).alias("latency_ms"))


def _levels(frame: pl.DataFrame, kind: str) -> tuple[Level, ...]:
    return tuple(
        Level(int(row["threads"]), float(row["tps"]), row["latency_ms"], kind, int(row["runs"]), row.get("errors"))
        for row in frame.iter_rows(named=True)
        if row["threads"] is not None and row["threads"] > 0 and row["tps"] is not None
    )


def _thread_pool(engine: str | None, cpus: int, pool: int) -> str:
    """The database-side pool of the capture's engine (every engine's when it is unknown)."""
    by_engine = {
        "mariadb": f"MariaDB's thread pool: thread_handling=pool-of-threads with thread_pool_size={cpus} (my.cnf, restart)",
        "percona": f"Percona Server's thread pool: thread_handling=pool-of-threads with thread_pool_size={cpus} (my.cnf, restart)",
        "mysql": f"a thread pool: MySQL Enterprise's thread_pool plugin (thread_pool_size={cpus}) or a multiplexing proxy (ProxySQL)",
        "postgresql": f"PgBouncer in front of PostgreSQL: pool_mode=transaction, default_pool_size={pool}",
        "tidb": f"TiDB's token-limit={pool} (tidb.toml)",
    }
    if engine in by_engine:
        return by_engine[engine]
    return (f"a database thread pool: MariaDB/Percona thread_handling=pool-of-threads with thread_pool_size={cpus}; PostgreSQL PgBouncer "
            f"pool_mode=transaction, default_pool_size={pool}; TiDB token-limit={pool}")


def _finding(curve: Curve, steps: list[Step], step: Step, cpus: int, cpu_source: str, limit: int, engine: str | None = None) -> Finding:
    before, after = step.before, step.after
    latency_factor = (after.latency_ms / before.latency_ms) if before.latency_ms else None
    pool = cpus * 2 + EFFECTIVE_SPINDLES
    best = max(curve.levels, key=lambda level: level.tps)
    judged = {s.after.threads: s for s in steps}
    rows = tuple(
        (
            level.threads,
            round(level.threads / cpus, 1),
            round(level.tps, 2),
            None if level.latency_ms is None else round(level.latency_ms, 3),
            level.runs,
            level.errors,
            judged[level.threads].gain_pct if level.threads in judged else None,
            judged[level.threads].efficiency_pct if level.threads in judged else None,
        )
        for level in curve.levels
    )
    latency_text = f"latency x{latency_factor:.1f}" if latency_factor else "latency up"
    remediation = "\n".join(
        [
            f"{after.threads} threads on {cpus} CPUs gave {step.gain_pct:+.1f}% {curve.unit} over {before.threads} threads "
            f"while {latency_text} ({before.latency_ms:.2f} -> {after.latency_ms:.2f} ms {after.latency_kind}).",
            f"1. Start the pool at CPU cores x 2 + effective spindles = {cpus} x 2 + {EFFECTIVE_SPINDLES} = {pool} connections "
            "for the whole application (HikariCP's formula; use physical cores when hyper-threading doubles the CPU count, "
            "0 spindles when the data set is cached).",
            f"   HikariCP: maximumPoolSize={pool}; with K application nodes, give each ceil({pool}/K).",
            f"2. Re-run the load test at {max(1, pool // 2)}, {pool} and {pool * 2} threads and keep the smallest that reaches "
            f"the best throughput (best seen here: {best.tps:,.0f} {curve.unit} at {best.threads} threads).",
            "3. Let the excess wait outside the database: the pool's connectionTimeout in the application, or "
            f"{_thread_pool(engine, cpus, pool)}.",
        ]
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.WARNING,
        title=(
            f"{curve.name}: {after.threads} threads ({after.threads / cpus:.0f} per CPU) gave {step.gain_pct:+.1f}% {curve.unit} "
            f"over {before.threads} ({step.efficiency_pct:.1f}% marginal efficiency), {latency_text}; "
            f"threshold {MAX_MARGINAL_EFFICIENCY_PCT:g}% beyond {POOL_CORE_FACTOR}x {cpus} CPUs = {limit} threads"
        ),
        subject=curve.name,
        impact={
            "description": f"{after.threads - before.threads} added threads brought {step.gain_pct:+.1f}% throughput and "
            f"raised {after.latency_kind} latency from {before.latency_ms:.2f} to {after.latency_ms:.2f} ms",
            "cpus": cpus,
            "threads_limit": limit,
            "marginal_efficiency_pct": step.efficiency_pct,
            "throughput_gain_pct": step.gain_pct,
            "recommended_pool": pool,
        },
        evidence=(
            Evidence(
                title=f"{curve.name}: throughput and latency per concurrency level ({after.latency_kind} latency)",
                columns=("threads", "threads per CPU", curve.unit, "latency ms", "runs/windows", "errors",
                         "gain over compared level %", "marginal efficiency %"),
                rows=rows,
            ),
            Evidence(
                title="CPUs of the database host",
                columns=("CPUs", f"{POOL_CORE_FACTOR}x CPUs", "source"),
                rows=((cpus, limit, cpu_source),),
            ),
        ),
        remediation=remediation,
        sources=curve.sources,
        charts=(_chart(curve, limit),),
    )


def _chart(curve: Curve, limit: int) -> Chart:
    return Chart(
        title=f"{curve.name}: {curve.unit} per thread count (highlighted: above {limit} threads)",
        unit=curve.unit,
        groups=tuple(
            BarGroup(f"{level.threads} threads", (Bar(f"{level.threads}", round(level.tps, 2), level.threads > limit),))
            for level in curve.levels
        ),
    )


RULE = Rule(
    id=RULE_ID,
    title="Connection pool larger than the CPUs can serve",
    area="app",
    requires=((t.LOAD_RUN, t.LOAD_INTERVAL, t.LOAD_SAMPLE, t.METRIC_SAMPLE),),
    check=check,
    doc=__doc__ or "",
)
