"""A rate limit per transaction type from the throughput it sustained with a healthy tail, with ready snippets.

What it detects:
    Nothing wrong: for each transaction type a load test measured (a JMeter label, a
    sysbench test, a pgbench script) it computes the requests per second the system served
    while its latency tail stayed healthy, takes a safety margin off, and prints the limiter
    settings that enforce it (nginx ``limit_req``, Sentinel, Resilience4j, Guava).

Why it matters:
    Past its capacity a service does not serve more; it queues, latency explodes and
    clients retry, which adds load (congestion collapse). A limiter just under the measured
    capacity turns overload into fast, cheap rejections for the excess and keeps the
    latency of everything admitted where the test saw it. The number must come from a
    measurement of this system, with the tail in view, not from a guess.

How it is detected:
    Inputs: ``load_sample`` (JMeter: successful samples per label, windows of ``--window``
    seconds, default 10; failures are counted apart, fast errors would inflate the rate),
    ``load_run`` with ``load_interval`` (sysbench/pgbench: the run's progress lines, grouped into
    the same windows). A type needs MIN_TYPE_SAMPLES = 100 samples (JMeter) or a run summary.
    Runs held to a target rate (sysbench ``--rate``, pgbench ``-R``) are left out: their
    throughput is the load offered, not what the system could serve; so are sysbench host
    benchmarks (cpu, memory, fileio, threads, mutex).
    Method: the capacity is the highest per-window throughput among windows whose latency
    stayed within HEALTHY_LATENCY_FACTOR = 2 x the median window's latency (P99 per window for
    JMeter windows of at least MIN_WINDOW_SAMPLES = 100 samples; the printed percentile or
    average per progress line for sysbench/pgbench). Without such windows the type's overall
    throughput is the capacity. The limit is capacity / SAFETY_MARGIN = 1.25 (inside the
    1.2-1.3 band a limiter needs to absorb measurement noise and a slower day). The burst is
    limit x the type's tail latency (P999 from 1,000 samples, else P99, else the run's max or
    printed percentile): the requests that arrive at the limit rate during one slow request,
    at least 1. Little's law (concurrency = throughput x mean latency) is shown as a check on
    how many requests are in flight at the limit. Always severity info.

Remediation:
    Put the limiter where requests enter (nginx/ingress for HTTP, the service's own limiter
    for RPC), one per transaction type, using the snippets given; start in log-only mode
    (nginx ``limit_req_dry_run on``, Sentinel's metrics) and compare rejections with the
    capacity. Re-measure after any change of hardware, schema or release. A limit derived
    from a test with no think time or one transaction type (see ``load-test-inflation``)
    overstates what production mixes can sustain.

References:
    nginx ``ngx_http_limit_req_module`` (limit_req_zone, limit_req burst/nodelay);
    Alibaba Sentinel flow control (FlowRule, FLOW_GRADE_QPS); Resilience4j RateLimiter
    (limitForPeriod, limitRefreshPeriod, timeoutDuration); Guava ``RateLimiter.create``;
    J. D. C. Little, "A Proof for the Queuing Formula L = lambda W" (1961).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.python_values import rows_in
from dbdiag.rules.app.common import fmt_ms, non_database_runs, rounded, sample_windows, throttled_runs, window_s
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

RULE_ID = "rate-limit-advice"

SAFETY_MARGIN = 1.25
HEALTHY_LATENCY_FACTOR = 2.0
MIN_TYPE_SAMPLES = 100
MIN_WINDOW_SAMPLES = 100
MIN_SAMPLES_P999 = 1_000
MAX_TYPES = 10
SMOOTH_PERIOD_FROM_PER_S = 50  # from this rate on, Resilience4j refills every 100 ms instead of every second


@dataclass(frozen=True)
class Capacity:
    name: str
    kind: str  # "JMeter label", "sysbench", "pgbench"
    samples: int
    overall_per_s: float
    capacity_per_s: float
    capacity_basis: str
    windows: int
    healthy_windows: int
    median_window_latency_ms: float | None
    latency_name: str  # what the window latency is ("P99", "p95", "avg")
    mean_ms: float | None
    p50_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    tail_ms: float
    tail_name: str
    sources: tuple[str, ...]
    failed: int | None = None  # JMeter samples with success=false, left out of throughput and latency

    @property
    def limit_per_s(self) -> float:
        return self.capacity_per_s / SAFETY_MARGIN

    @property
    def burst(self) -> int:
        return max(1, math.ceil(self.limit_per_s * self.tail_ms / 1000.0))


def check(inp: RuleInput) -> Verdict:
    capacities, unjudged = _capacities(inp)
    if not capacities:
        raise Skip(
            "no transaction type with throughput and latency: "
            + ("; ".join(unjudged[:6]) or f"JMeter labels need {MIN_TYPE_SAMPLES} samples, sysbench/pgbench a run summary")
        )
    ranked = sorted(capacities, key=lambda c: -c.samples)
    findings = [_finding(c) for c in ranked[:MAX_TYPES]]
    measured = "; ".join(f"{c.name}: capacity {c.capacity_per_s:,.1f}/s, limit {c.limit_per_s:,.1f}/s" for c in ranked)
    if len(ranked) > MAX_TYPES:
        measured += f" ({len(ranked) - MAX_TYPES} smaller types without a finding)"
    if unjudged:
        measured += "; not judged: " + "; ".join(unjudged[:4])
    return Verdict(findings=findings, measured=measured)


def _capacities(inp: RuleInput) -> tuple[list[Capacity], list[str]]:
    capacities: list[Capacity] = []
    unjudged: list[str] = []
    samples = inp.table(t.LOAD_SAMPLE)
    if samples is not None:
        capacities += _jmeter(samples, window_s(inp), unjudged)
    runs = inp.table(t.LOAD_RUN)
    if runs is not None:
        throttled = throttled_runs(inp)
        host = non_database_runs(inp)
        free = runs.filter(~rows_in(runs, ("source", "run"), set(throttled) | set(host)))
        for (source, run), how in throttled.items():
            unjudged.append(f"run {run} of {source} was throttled ({how}): its TPS is the offered load, not the capacity")
        for source, run in sorted(host):
            unjudged.append(f"run {run} of {source} is a sysbench host benchmark, not a transaction type")
        if free.height:
            capacities += _runs(free, inp.table(t.LOAD_INTERVAL), window_s(inp), unjudged)
    return capacities, unjudged


def _jmeter(samples: pl.DataFrame, width: float, unjudged: list[str]) -> list[Capacity]:
    found: list[Capacity] = []
    timed = samples.filter(pl.col("start_ts").is_not_null() & pl.col("elapsed_ms").is_not_null())
    failed = dict(timed.filter(~pl.col("success").fill_null(True)).group_by("label").len().iter_rows())
    succeeded = timed.filter(pl.col("success").fill_null(True))
    windows = sample_windows(succeeded, width)
    for (label,), group in succeeded.group_by("label", maintain_order=True):
        if group.height < MIN_TYPE_SAMPLES:
            unjudged.append(f"JMeter label {label!r}: {group.height} samples")
            continue
        ends = group.select((pl.col("start_ts") + pl.duration(microseconds=(pl.col("elapsed_ms") * 1000).cast(pl.Int64))).max()).item()
        span_s = max((ends - group["start_ts"].min()).total_seconds(), 1e-3)
        elapsed = group["elapsed_ms"]
        p99 = float(elapsed.quantile(0.99, "linear"))
        p999 = float(elapsed.quantile(0.999, "linear")) if group.height >= MIN_SAMPLES_P999 else None
        own = windows.filter(pl.col("label").eq_missing(label) & (pl.col("count") >= MIN_WINDOW_SAMPLES))
        overall = group.height / span_s
        capacity, basis, healthy, median = _capacity(own, "per_s", "p99_ms", overall, f"{width:g} s windows")
        found.append(
            Capacity(
                name=f"JMeter label {label!r}",
                kind="JMeter label",
                samples=group.height,
                overall_per_s=overall,
                capacity_per_s=capacity,
                capacity_basis=basis,
                windows=own.height,
                healthy_windows=healthy,
                median_window_latency_ms=median,
                latency_name="P99",
                mean_ms=float(elapsed.mean()),
                p50_ms=float(elapsed.quantile(0.5, "linear")),
                p99_ms=p99,
                p999_ms=p999,
                tail_ms=p999 if p999 is not None else p99,
                tail_name="P999" if p999 is not None else "P99",
                sources=tuple(sorted(group["source"].unique().to_list())),
                failed=int(failed.get(label, 0)),
            )
        )
    return found


def _capacity(windows: pl.DataFrame, rate: str, latency: str, overall: float, what: str) -> tuple[float, str, int, float | None]:
    """(capacity, how it was found, healthy windows, median window latency) from per-window rate and latency."""
    usable = windows.filter(pl.col(latency).is_not_null() & pl.col(rate).is_not_null())
    if usable.height == 0:
        return overall, "overall throughput (no window large enough to judge its latency)", 0, None
    if usable.height == 1:
        return float(usable[rate][0]), f"the only {what.replace('windows', 'window')}", 1, float(usable[latency][0])
    median = float(usable[latency].median())
    healthy = usable.filter(pl.col(latency) <= HEALTHY_LATENCY_FACTOR * median)
    best = float(healthy[rate].max())
    return best, f"highest of {healthy.height} healthy {what} (latency at most {HEALTHY_LATENCY_FACTOR:g}x the median {median:.2f} ms)", healthy.height, median


def _runs(runs: pl.DataFrame, intervals: pl.DataFrame | None, width: float, unjudged: list[str]) -> list[Capacity]:
    """One capacity per (tool, test): the windows of all its runs judged together."""
    found: list[Capacity] = []
    runs = runs.with_columns(
        pl.when(pl.col("test").is_null() | (pl.col("test") == "multiple scripts"))
        .then(pl.format("run {} of {}", pl.col("run"), pl.col("source")))
        .otherwise(pl.col("test"))
        .alias("_type")
    )
    for (tool, kind), group in runs.group_by("tool", "_type", maintain_order=True):
        name = f"{tool or 'load test'} {kind}"
        usable = group.filter(pl.col("tps") > 0)
        if usable.height == 0:
            unjudged.append(f"{name}: no TPS in the summary")
            continue
        windows = pl.concat([_run_windows(row, intervals, width) for row in usable.iter_rows(named=True)], how="vertical_relaxed")
        total_s = float(usable["duration_s"].fill_null(0.0).sum())
        overall = float(usable["transactions"].sum()) / total_s if total_s > 0 else float(usable["tps"].mean())
        capacity, basis, healthy, median = _capacity(windows, "tps", "latency_ms", overall, f"{width:g} s windows of progress lines")
        best = windows.filter(pl.col("tps") == capacity) if windows.height else windows
        best_run = usable.filter(pl.col("run") == best["run"][0]) if best.height else usable.sort("tps", descending=True)
        row = best_run.row(0, named=True)
        pct = row["latency_pct"]
        latency_name = f"p{pct:g}" if pct else "avg"
        tail_ms, tail_name = _run_tail(row, latency_name)
        if tail_ms is None:
            unjudged.append(f"{name}: no latency in the summary")
            continue
        threads = ", ".join(str(v) for v in sorted(usable["threads"].drop_nulls().unique().to_list()))
        found.append(
            Capacity(
                name=f"{name} ({threads} threads)",
                kind=tool or "load test",
                samples=int(usable["transactions"].fill_null(0).sum()),
                overall_per_s=overall,
                capacity_per_s=capacity,
                capacity_basis=basis,
                windows=windows.height,
                healthy_windows=healthy,
                median_window_latency_ms=median,
                latency_name=latency_name,
                mean_ms=row["latency_avg_ms"],
                p50_ms=None,
                p99_ms=row["latency_pct_ms"] if pct == 99 else None,
                p999_ms=None,
                tail_ms=tail_ms,
                tail_name=f"{tail_name} of the {row['threads']}-thread run",
                sources=tuple(sorted(usable["source"].unique().to_list())),
            )
        )
    return found


def _run_windows(row: dict, intervals: pl.DataFrame | None, width: float) -> pl.DataFrame:
    """A run's progress lines grouped into ``width``-second windows (mean TPS and latency), else its summary."""
    progress = (
        intervals.filter((pl.col("source") == row["source"]) & (pl.col("run") == row["run"]) & pl.col("tps").is_not_null())
        if intervals is not None
        else None
    )
    if progress is None or progress.height == 0:
        latency = row["latency_pct_ms"] if row["latency_pct_ms"] is not None else row["latency_avg_ms"]
        return pl.DataFrame({"run": [row["run"]], "tps": [float(row["tps"])], "latency_ms": [latency]},
                            schema={"run": pl.Int32, "tps": pl.Float64, "latency_ms": pl.Float64})
    # each line weighs the seconds it covers, and a window must cover half its width: pgbench's last line
    # (`progress: 20.1 s, 153.6 tps`) covers 0.1 s and is no capacity measured over a window
    progress = progress.sort("offset_s").with_columns(
        _dur=(pl.col("offset_s") - pl.col("offset_s").shift(1).fill_null(0.0)).clip(lower_bound=0.0)
    )
    return (
        progress.with_columns(((pl.col("offset_s") - 1e-9) // width).alias("_w"))
        .group_by("_w")
        .agg(
            ((pl.col("tps") * pl.col("_dur")).sum() / pl.col("_dur").sum()).alias("tps"),
            ((pl.col("latency_ms") * pl.col("_dur")).sum() / pl.col("_dur").sum()).alias("latency_ms"),
            pl.col("_dur").sum().alias("_covered"),
        )
        .filter(pl.col("_covered") >= width / 2)
        .select(pl.lit(row["run"], dtype=pl.Int32).alias("run"), "tps", "latency_ms")
    )


def _run_tail(row: dict, latency_name: str) -> tuple[float | None, str]:
    """The slowest latency the summary gives: max, else the printed percentile, else the average."""
    for column, name in (("latency_max_ms", "max"), ("latency_pct_ms", latency_name), ("latency_avg_ms", "avg")):
        if row[column] is not None and row[column] > 0:
            return float(row[column]), name
    return None, ""


def _slug(name: str) -> str:
    """An nginx zone / Sentinel resource name from a label.

    >>> _slug("JMeter label 'Buy Ticket'")
    'rl_buy_ticket'
    >>> _slug("sysbench run 0 (16 threads, app/sysbench.txt)")
    'rl_sysbench_run_0'
    """
    core = re.sub(r"^JMeter label ", "", name).split(" (", 1)[0]
    return "rl_" + (re.sub(r"[^a-z0-9]+", "_", core.lower()).strip("_") or "type")[:40]


def _nginx_rate(limit_per_s: float) -> str:
    """nginx rates are whole requests per second or per minute.

    >>> _nginx_rate(120.8), _nginx_rate(0.5)
    ('120r/s', '30r/m')
    """
    if limit_per_s >= 1:
        return f"{math.floor(limit_per_s)}r/s"
    return f"{max(1, math.floor(limit_per_s * 60))}r/m"


def _snippets(c: Capacity) -> str:
    zone = _slug(c.name)
    limit = c.limit_per_s
    if limit >= SMOOTH_PERIOD_FROM_PER_S:
        period, per_period = "Duration.ofMillis(100)", max(1, math.floor(limit / 10))
    else:
        period, per_period = "Duration.ofSeconds(1)", max(1, math.floor(limit))
    wait_ms = max(1, math.ceil(c.p99_ms if c.p99_ms else c.tail_ms))
    return "\n".join(
        [
            "# nginx, http block (key $server_name = one budget for the service; $binary_remote_addr = per client)",
            f"limit_req_zone $server_name zone={zone}:1m rate={_nginx_rate(limit)};",
            "# nginx, the location serving this type",
            f"limit_req zone={zone} burst={c.burst} nodelay;",
            "limit_req_status 429;",
            "# Sentinel (Java)",
            f'FlowRule rule = new FlowRule("{zone}");',
            "rule.setGrade(RuleConstant.FLOW_GRADE_QPS);",
            f"rule.setCount({limit:.1f});",
            "FlowRuleManager.loadRules(Collections.singletonList(rule));",
            "# Resilience4j",
            f"RateLimiterConfig config = RateLimiterConfig.custom().limitForPeriod({per_period}).limitRefreshPeriod({period})"
            f".timeoutDuration(Duration.ofMillis({wait_ms})).build();",
            "# Guava",
            f"RateLimiter limiter = RateLimiter.create({limit:.1f});",
        ]
    )


def _finding(c: Capacity) -> Finding:
    in_flight = c.limit_per_s * (c.mean_ms or 0.0) / 1000.0
    remediation = "\n".join(
        [
            f"Limit {c.name} to {c.limit_per_s:,.1f} requests/s = capacity {c.capacity_per_s:,.1f}/s / {SAFETY_MARGIN:g}, "
            f"burst {c.burst} (= {c.limit_per_s:,.1f}/s x {c.tail_name} {fmt_ms(c.tail_ms)}, rounded up).",
            "Start in log-only mode (nginx limit_req_dry_run on; Sentinel metrics), compare rejections with this number, "
            "then enforce. Re-measure after hardware, schema or release changes.",
            _snippets(c),
        ]
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.INFO,
        title=(
            f"{c.name}: limit {c.limit_per_s:,.1f}/s, burst {c.burst} = capacity {c.capacity_per_s:,.1f}/s "
            + (
                f"(best window with {c.latency_name} within {HEALTHY_LATENCY_FACTOR:g}x the median window's) "
                if c.healthy_windows > 1
                else "(overall: too few windows to judge the tail per window) "
            )
            + f"/ margin {SAFETY_MARGIN:g}"
        ),
        subject=c.name,
        impact={
            "description": f"{c.name} sustained {c.capacity_per_s:,.1f}/s with a healthy tail",
            "limit_per_s": round(c.limit_per_s, 2),
            "capacity_per_s": round(c.capacity_per_s, 2),
            "burst": c.burst,
            "safety_margin": SAFETY_MARGIN,
        },
        evidence=(
            Evidence(
                title=f"{c.name}: throughput and latency",
                columns=("measure", "value"),
                rows=(
                    ("samples / transactions", c.samples),
                    ("failed samples (left out)", c.failed),
                    ("overall throughput /s", round(c.overall_per_s, 2)),
                    ("windows judged", c.windows),
                    ("healthy windows", c.healthy_windows),
                    (f"median window {c.latency_name} ms", rounded(c.median_window_latency_ms, 3)),
                    ("capacity /s", round(c.capacity_per_s, 2)),
                    ("capacity from", c.capacity_basis),
                    ("mean latency ms", rounded(c.mean_ms, 3)),
                    ("P50 ms", rounded(c.p50_ms, 3)),
                    ("P99 ms", rounded(c.p99_ms, 3)),
                    ("P999 ms", rounded(c.p999_ms, 3)),
                    (f"burst basis: {c.tail_name} ms", rounded(c.tail_ms, 3)),
                    (f"limit /s (capacity / {SAFETY_MARGIN:g})", round(c.limit_per_s, 2)),
                    ("in flight at the limit (Little's law: limit x mean latency)", rounded(in_flight, 2)),
                ),
            ),
        ),
        remediation=remediation,
        sources=c.sources,
    )


RULE = Rule(
    id=RULE_ID,
    title="Rate limit per transaction type (advice)",
    area="app",
    requires=((t.LOAD_SAMPLE, t.LOAD_RUN),),
    check=check,
    doc=__doc__ or "",
)
