"""A load test that cannot reflect production: one transaction type, no think time, too short, errors ignored.

What it detects:
    Load-test results (JMeter JTL, sysbench, pgbench) whose design makes their throughput and
    latency say little about production: a single transaction type hammered in a loop, no think
    time between a virtual user's requests, a run too short to warm caches and reach a steady
    state, no ramp-up, a tiny hot key range, or errors that were counted as throughput.

Why it matters:
    A closed loop of one hot transaction without think time measures the load generator and
    the hottest rows, not the system: numbers come out several times higher (or, with hot-row
    contention, lower) than production can do, capacity plans built on them fail, and
    comparisons between two servers (21k vs 11k TPS) mislead when the tests differ.

How it is detected:
    Inputs: ``load_sample`` (JMeter), ``load_run`` / ``load_interval`` / ``load_statement_latency``
    (sysbench, pgbench). Problems looked for:
    one transaction type (one JMeter label; one sysbench test; one pgbench script);
    no think time (JMeter: median pause between a thread's samples under THINK_TIME_MIN_MS = 50 ms;
    sysbench/pgbench: a closed loop with no ``--rate``/``-R`` (or pgbench's schedule lag, which
    only a rate limit prints) and no ``\\sleep``);
    too short (under SHORT_RUN_S = 600 s of measurement);
    no ramp-up (JMeter: all threads running from the first RAMP_WINDOW_S = 10 s);
    tiny hot key range (pgbench scaling factor below the number of clients: every client
    updates one of ``scale`` branch rows);
    errors ignored (failed samples or transactions above ERROR_SHARE_PCT = 1%, or sysbench
    "ignored errors"). Fires with MIN_PROBLEMS = 2 problems or more. Always a warning.

Remediation:
    A test that reflects production: a mix of about 70% queries, 20% short updates and 10% long
    or report transactions (JMeter Throughput Controllers or weighted pgbench scripts
    ``-b select-only@7 -b simple-update@2 -f report.sql@1``); 1-3 s think time per virtual user
    (JMeter Uniform/Gaussian Random Timer, pgbench ``\\sleep``, sysbench ``--rate``); 5-10 minutes of
    warm-up excluded from the results; 15-30 minutes of sampling; production-sized data and key
    distribution (pgbench ``-s`` >= clients, sysbench ``--table-size``, ``--rand-type=zipfian``
    only when production is skewed); and a run that stops, or is discarded, on errors.

References:
    JMeter "Best Practices" (timers, ramp-up); pgbench(1) (-b weights, \\sleep, -R);
    sysbench documentation (--rate, --warmup-time); Brendan Gregg, "Systems Performance",
    12.3 (benchmarking sins).
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

RULE_ID = "load-test-inflation"

THINK_TIME_MIN_MS = 50.0
SHORT_RUN_S = 600.0
RAMP_WINDOW_S = 10.0
ERROR_SHARE_PCT = 1.0
MIN_PROBLEMS = 2


def check(inp: RuleInput) -> Verdict:
    samples = inp.table(t.LOAD_SAMPLE)
    runs = inp.table(t.LOAD_RUN)
    if samples is not None:
        problems, described = _jmeter_problems(samples), "JMeter samples"
        sources = sorted(samples["source"].unique().to_list())
    elif runs is not None:
        problems = _run_problems(runs, inp.table(t.LOAD_STATEMENT_LATENCY), inp.table(t.LOAD_INTERVAL))
        described = "load-test runs"
        sources = sorted(runs["source"].unique().to_list())
    else:
        raise Skip("no load-test samples or run summaries")
    measured = f"{described}: " + (", ".join(name for name, _ in problems) or "no problem found") + f" (fires from {MIN_PROBLEMS})"
    if len(problems) < MIN_PROBLEMS:
        return Verdict(measured=measured)
    return Verdict(findings=[_finding(problems, sources, described)], measured=measured)


def _jmeter_problems(samples: pl.DataFrame) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    labels = samples["label"].drop_nulls().unique().sort().to_list()
    if len(labels) == 1:
        problems.append(("one transaction type", f"every one of {samples.height:,} samples is {labels[0]!r}"))
    pause = _median_pause_ms(samples)
    if pause is not None and pause < THINK_TIME_MIN_MS:
        problems.append(("no think time", f"median pause between a thread's samples {pause:.1f} ms (under {THINK_TIME_MIN_MS:.0f} ms)"))
    timed = samples.drop_nulls("start_ts")
    if timed.height:
        span_s = (timed["start_ts"].max() - timed["start_ts"].min()).total_seconds()
        if span_s < SHORT_RUN_S:
            problems.append(("too short", f"{span_s:,.0f} s of samples (under {SHORT_RUN_S:.0f} s)"))
        ramp = _ramp(timed)
        if ramp is not None:
            problems.append(("no ramp-up", ramp))
    failed = int((~samples["success"].fill_null(True)).sum())
    if samples.height and 100.0 * failed / samples.height > ERROR_SHARE_PCT:
        problems.append(("errors ignored", f"{failed:,} of {samples.height:,} samples failed ({100.0 * failed / samples.height:.1f}%)"))
    return problems


def _median_pause_ms(samples: pl.DataFrame) -> float | None:
    """Median time from the end of a thread's sample to the start of its next one."""
    timed = samples.drop_nulls(["start_ts", "thread_name", "elapsed_ms"])
    if timed.height < 2:
        return None
    pauses = (
        timed.sort("thread_name", "start_ts")
        .with_columns(
            (
                (pl.col("start_ts").shift(-1).over("thread_name") - pl.col("start_ts")).dt.total_microseconds() / 1000.0
                - pl.col("elapsed_ms")
            ).alias("pause_ms")
        )
        .drop_nulls("pause_ms")
    )
    return None if pauses.height == 0 else float(pauses["pause_ms"].clip(lower_bound=0).median())


def _ramp(samples: pl.DataFrame) -> str | None:
    """'no ramp-up' when the first RAMP_WINDOW_S already ran (nearly) all threads."""
    if samples["all_threads"].null_count() == samples.height:
        return None
    start = samples["start_ts"].min()
    peak = int(samples["all_threads"].max())
    early = samples.filter((pl.col("start_ts") - start).dt.total_seconds() < RAMP_WINDOW_S)["all_threads"].max()
    if peak > 1 and early is not None and early >= 0.9 * peak:
        return f"{early} of {peak} threads running in the first {RAMP_WINDOW_S:.0f} s"
    return None


def _run_problems(
    runs: pl.DataFrame, statement_latency: pl.DataFrame | None, intervals: pl.DataFrame | None
) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    tools = sorted(runs["tool"].drop_nulls().unique().to_list())
    scripts = 0
    if statement_latency is not None:
        scripts = statement_latency.group_by("source", "run").agg(pl.col("script").n_unique()).get_column("script").max() or 0
    if scripts <= 1:
        tests = ", ".join(sorted({str(x) for x in runs["test"].drop_nulls().to_list()})) or "one script"
        # pgbench names its -S script "select only": "ran select only only" would read as a typo
        problems.append(("one transaction type", f"{'/'.join(tools)} ran one script only: {tests}"))
    sleeps = statement_latency is not None and statement_latency["statement"].str.contains(r"^\\sleep").any()
    # pgbench -R prints a schedule lag even when the command line is not in the file
    lagged = intervals is not None and intervals["lag_ms"].drop_nulls().len() > 0
    if runs["rate_limit_tps"].null_count() == runs.height and not sleeps and not lagged:
        problems.append(("no think time", "closed loop at full speed: no --rate / -R and no \\sleep"))
    longest = runs["duration_s"].max()
    if longest is not None and longest < SHORT_RUN_S:
        problems.append(("too short", f"longest run {longest:,.0f} s (under {SHORT_RUN_S:.0f} s)"))
    # a branch row is a hot key only for the scripts that update it (TPC-B-like); -S reads accounts alone
    writes_branches = ~pl.col("test").fill_null("").str.to_lowercase().str.contains("select only")
    contended = runs.filter(pl.col("scale").is_not_null() & (pl.col("scale") < pl.col("threads")) & writes_branches)
    if contended.height:
        row = contended.row(0, named=True)
        problems.append(("tiny hot key range", f"pgbench scale {row['scale']} with {row['threads']} clients: clients queue on {row['scale']} branch rows"))
    errors = runs.select((pl.col("errors").fill_null(0)).sum()).item()
    transactions = runs.select(pl.col("transactions").fill_null(0).sum()).item()
    if transactions and 100.0 * errors / transactions > ERROR_SHARE_PCT:
        problems.append(("errors ignored", f"{errors:,} errors for {transactions:,} transactions"))
    return problems


def _finding(problems: list[tuple[str, str]], sources: list[str], described: str) -> Finding:
    names = ", ".join(name for name, _ in problems)
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=f"The load test cannot reflect production: {names}; threshold {MIN_PROBLEMS} problems",
        subject="load test",
        impact={"description": f"{len(problems)} design problems in the {described}", "problems": [n for n, _ in problems]},
        evidence=(Evidence(title="What is wrong with the test", columns=("problem", "seen"), rows=tuple(problems)),),
        remediation="\n".join(
            [
                "Re-run as a mixed test before comparing servers or sizing:",
                "1. Mix: ~70% queries, 20% short updates, 10% long/report transactions",
                "   (JMeter Throughput Controllers; pgbench -b select-only@7 -b simple-update@2 -f report.sql@1).",
                "2. Think time 1-3 s per virtual user (JMeter Uniform Random Timer; pgbench \\sleep 1000 ms; sysbench --rate).",
                "3. Warm up 5-10 min (excluded), then sample 15-30 min; ramp threads up over the warm-up.",
                "4. Production-sized data and keys (pgbench -s >= clients; sysbench --table-size; realistic key distribution).",
                "5. Fail the run on errors instead of counting them as throughput.",
            ]
        ),
        sources=tuple(sources),
    )


RULE = Rule(
    id=RULE_ID,
    title="Load test that cannot reflect production",
    area="loadtest",
    requires=((t.LOAD_SAMPLE, t.LOAD_RUN),),
    check=check,
    doc=__doc__ or "",
)
