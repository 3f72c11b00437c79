"""Tail latency far above the 99th percentile in some windows (jitter), and what happened then.

What it detects:
    Windows of the capture (``--window``, default 10 s) in which the 99.9th or 99.99th
    percentile of a transaction type's latency is TAIL_FACTOR times its 99th percentile or more,
    and long in absolute terms; the events that coincide with them: restarts and OOM kills
    (``event``), plan changes of a statement fingerprint, garbage collection, compaction,
    checkpoint or flush activity in the metrics.

Why it matters:
    Averages and even p99 hide stalls: when one request in a thousand waits 100 times longer
    than the rest, every user who makes a few hundred requests a day meets it, and a page that
    fans out to 50 backend calls sees it at 5% of page views. Such stalls have a cause that
    runs now and then: a GC pause, a checkpoint or compaction burst, a process restart, a plan
    that flipped to a full scan, a noisy neighbour. Finding the window finds the cause.

How it is detected:
    Inputs, each giving per-window percentiles: ``load_sample`` (JMeter: ``elapsed`` per label),
    ``statement`` (query times of all logged statements), ``metric_sample`` histograms
    (``*_bucket`` counters with an ``le`` label: increases per window, then
    ``histogram_quantile``, one row per instance and window; values in seconds unless the name
    says ``_ms``/``milliseconds``; idle-time histograms such as TiDB's ``conn_idle_duration`` are not
    latencies and are left out),
    ``latency_histogram`` (sysbench ``--histogram``: one row for the whole run), and
    ``load_interval`` (sysbench/pgbench progress lines: one percentile or average per interval).
    Sysbench host benchmarks (cpu, memory, fileio ...) are left out. Percentiles of raw samples interpolate linearly between closest ranks; histograms use
    nearest rank. A p999 is judged only from MIN_SAMPLES_P999 = 1,000 samples in the window and
    a p9999 from MIN_SAMPLES_P9999 = 10,000; a transaction type with no window that large is
    judged over the whole capture (noted), and below 1,000 samples in all not at all.
    Fires when p999 (or p9999) >= TAIL_FACTOR = 10 x p99 and >= TAIL_FLOOR_MS = 100 ms.
    For progress lines (no p99 to compare with) an interval fires when its latency is
    >= TAIL_FACTOR x the median interval of the run and >= TAIL_FLOOR_MS.
    Correlation: events, plan changes (a fingerprint's ``plan_digest``/plan signature first
    seen) and metrics named like GC/compaction/checkpoint/flush/stall within one window before
    or after the spike window.

Remediation:
    Follows the correlated cause: a restart or OOM kill (see ``oom-restart``: memory limits,
    the process's own memory quota); a plan change (bind the good plan: TiDB
    ``CREATE GLOBAL BINDING``, MySQL optimizer hints / ``FORCE INDEX``, PostgreSQL
    ``pg_hint_plan``; refresh statistics); GC (TiDB ``tidb_gc_life_time``/GC concurrency,
    JVM/Go GC tuning of the client); checkpoints and flushes (PostgreSQL
    ``checkpoint_completion_target = 0.9`` and a larger ``max_wal_size``, InnoDB
    ``innodb_io_capacity``/``innodb_adaptive_flushing``, TiKV ``rocksdb.rate-bytes-per-sec``);
    otherwise noisy neighbours (steal time, shared disks) and client pauses.

References:
    J. Dean and L. A. Barroso, "The Tail at Scale" (CACM 2013); Prometheus
    ``histogram_quantile`` documentation; Gil Tene, "How NOT to measure latency";
    PostgreSQL ``checkpoint_completion_target``; TiDB SQL plan management (bindings).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.app.common import fmt_ms, iso, non_database_runs, percentile_from_counts, rounded, sample_windows, window_s
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.sql.common import working_statements

RULE_ID = "tail-latency-spikes"

TAIL_FACTOR = 10.0
TAIL_FLOOR_MS = 100.0
MIN_SAMPLES_P999 = 1_000
NAMED_SMALL_LABELS = 6  # more labels too small to judge are counted, not listed
MIN_SAMPLES_P9999 = 10_000
MAX_WINDOWS_SHOWN = 12
NOT_LATENCY_PATTERN = r"(?i)idle"  # TiDB's conn_idle_duration: time between a client's commands, not work
QUANTILES = {"p50_ms": 0.5, "p99_ms": 0.99, "p999_ms": 0.999, "p9999_ms": 0.9999}


@dataclass
class Subject:
    """One latency population judged per window: a JMeter label, all statements, a histogram series."""

    name: str
    kind: str  # "JMeter label", "SQL statements", "metric histogram", "sysbench histogram", "progress lines"
    windows: pl.DataFrame  # window_start (null = whole run/capture), count, p50_ms, p99_ms, p999_ms, p9999_ms, basis
    sources: tuple[str, ...]
    note: str = ""
    spikes: pl.DataFrame = field(default_factory=pl.DataFrame)
    run_key: tuple[str, int] | None = None  # (source, run) of load-test progress lines


def check(inp: RuleInput) -> Verdict:
    width = window_s(inp)
    subjects, unjudged = _subjects(inp, width)
    if not subjects:
        raise Skip("no latency population large enough for a p999: " + ("; ".join(unjudged[:6]) or "no latencies"))
    findings: list[Finding] = []
    measured: list[str] = []
    for subject in subjects:
        subject.spikes = _spikes(subject)
        worst = subject.windows.sort("ratio", descending=True, nulls_last=True).row(0, named=True)
        versus = "the median interval" if subject.kind == "progress lines" else "p99"
        measured.append(
            f"{subject.name}: {subject.spikes.height} of {subject.windows.height} window(s) spiking, worst "
            f"{'-' if worst['ratio'] is None else format(worst['ratio'], '.1f')}x {versus}"
        )
        if subject.spikes.height:
            findings.append(_finding(inp, subject, width))
    if unjudged:
        measured.append("not judged: " + "; ".join(unjudged[:4]))
    return Verdict(findings=findings, measured="; ".join(measured))


def _ratio_expr() -> pl.Expr:
    """The tail that counts over p99: p9999 when the window had enough samples for it, else p999."""
    tail = pl.max_horizontal(pl.col("p999_ms"), pl.col("p9999_ms"))
    return pl.when(pl.col("p99_ms") > 0).then(tail / pl.col("p99_ms")).otherwise(None).alias("ratio")


def _spikes(subject: Subject) -> pl.DataFrame:
    frame = subject.windows
    if subject.kind == "progress lines":
        return frame.filter((pl.col("ratio") >= TAIL_FACTOR) & (pl.col("p999_ms") >= TAIL_FLOOR_MS))
    p999 = (pl.col("p999_ms") >= TAIL_FACTOR * pl.col("p99_ms")) & (pl.col("p999_ms") >= TAIL_FLOOR_MS)
    p9999 = (pl.col("p9999_ms") >= TAIL_FACTOR * pl.col("p99_ms")) & (pl.col("p9999_ms") >= TAIL_FLOOR_MS)
    return frame.filter(p999.fill_null(False) | p9999.fill_null(False))


# ---- the latency populations --------------------------------------------------------------------


def _subjects(inp: RuleInput, width: float) -> tuple[list[Subject], list[str]]:
    subjects: list[Subject] = []
    unjudged: list[str] = []
    samples = inp.table(t.LOAD_SAMPLE)
    if samples is not None:
        samples, small = _labels_large_enough(samples)
        unjudged += small
        windows = sample_windows(samples, width)
        whole = sample_windows(samples, 1e12).drop("window_start")
        sources = _sources(samples)
        for (label,), group in windows.group_by("label", maintain_order=True):
            total = partial(whole.filter, pl.col("label").eq_missing(label))
            _add(subjects, unjudged, f"JMeter label {label!r}", "JMeter label", group, total, sources)
    statements = working_statements(inp)  # the derived statements that work: a sleep is no latency of the database
    if statements is not None:
        timed = statements.filter(pl.col("query_time_s").is_not_null()).select(
            pl.coalesce("start_ts", "end_ts").alias("start_ts"), (pl.col("query_time_s") * 1000.0).alias("elapsed_ms")
        )
        if timed.height:  # one population: no label to group by (hashing a text per statement costs)
            windows = sample_windows(timed, width, by_label=False)
            total = partial(_whole_capture, timed)
            _add(subjects, unjudged, "SQL statements (all)", "SQL statements", windows, total, _sources(statements))
    host = non_database_runs(inp)
    histogram = inp.table(t.LATENCY_HISTOGRAM)
    if histogram is not None:
        for (source, run), group in histogram.group_by("source", "run", maintain_order=True):
            if (source, run) in host:
                continue
            pairs = list(group.select("latency_ms", "count").iter_rows())
            count = int(group["count"].sum())
            row = {"window_start": None, "count": count, **{k: percentile_from_counts(pairs, q) for k, q in QUANTILES.items()}}
            frame = _enough(pl.DataFrame([row], schema=_window_schema()))
            name = f"sysbench histogram {source} run {run}"
            if count >= MIN_SAMPLES_P999:
                subjects.append(Subject(name, "sysbench histogram", _basis(frame, "whole run"), (source,)))
            else:
                unjudged.append(f"{name}: {count:,} events")
    for subject in _histogram_subjects(inp):
        if subject.windows.height:
            subjects.append(subject)
        else:
            unjudged.append(f"{subject.name}: fewer than {MIN_SAMPLES_P999:,} observations per window and overall")
    intervals = inp.table(t.LOAD_INTERVAL)
    if intervals is not None:
        subjects.extend(s for s in _interval_subjects(intervals) if s.run_key not in host)
    return subjects, unjudged


def _sources(frame: pl.DataFrame) -> tuple[str, ...]:
    """The frame's distinct sources, sorted: one comparison pass when all rows have the first one (the usual
    case), cheaper than hashing the text of every row."""
    column = frame["source"]
    if column.len() and column.eq_missing(column[0]).all():
        return (column[0],)
    return tuple(sorted(column.unique().to_list()))


def _labels_large_enough(samples: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """The samples of labels that hold MIN_SAMPLES_P999 samples in all (no window of the others can be
    judged), and one line for the rest: tens of thousands of one-off labels cost one group-by, not a
    loop each."""
    counts = samples.group_by("label", maintain_order=True).len()
    small = counts.filter(pl.col("len") < MIN_SAMPLES_P999)
    if small.height == 0:
        return samples, []
    kept = samples.join(small.select("label"), on="label", how="anti", nulls_equal=True)
    if small.height <= NAMED_SMALL_LABELS:
        return kept, [f"JMeter label {label!r}: {count:,} samples" for label, count in small.iter_rows()]
    return kept, [f"{small.height:,} JMeter labels under {MIN_SAMPLES_P999:,} samples each ({int(small['len'].sum()):,} samples)"]


def _window_schema(with_instance: bool = False) -> dict[str, pl.DataType]:
    schema = {"window_start": t.UTC_TIME, "count": pl.Int64, **{k: pl.Float64 for k in QUANTILES}}
    return {**schema, "instance": pl.String} if with_instance else schema


def _basis(frame: pl.DataFrame, basis: str) -> pl.DataFrame:
    return frame.with_columns(pl.lit(basis).alias("basis"), _ratio_expr())


def _enough(frame: pl.DataFrame) -> pl.DataFrame:
    """Windows with enough samples for p999; p9999 blanked where fewer than MIN_SAMPLES_P9999."""
    return frame.filter(pl.col("count") >= MIN_SAMPLES_P999).with_columns(
        pl.when(pl.col("count") >= MIN_SAMPLES_P9999).then(pl.col("p9999_ms")).otherwise(None).alias("p9999_ms")
    )


def _whole_capture(timed: pl.DataFrame) -> pl.DataFrame:
    return sample_windows(timed, 1e12, by_label=False).drop("window_start")


def _add(
    subjects: list[Subject], unjudged: list[str], name: str, kind: str, windows: pl.DataFrame,
    whole_capture: Callable[[], pl.DataFrame], sources: tuple[str, ...],
) -> None:
    """``whole_capture()``: the percentiles over the whole capture, computed only when no window is judged."""
    columns = ["window_start", "count", *QUANTILES]
    judged = _enough(windows.select(columns))
    if judged.height:
        subjects.append(Subject(name, kind, _basis(judged, "window"), sources))
        return
    total = whole_capture()
    whole = _enough(total.with_columns(pl.lit(None, dtype=t.UTC_TIME).alias("window_start")).select(columns))
    if whole.height:
        note = f"no window held {MIN_SAMPLES_P999:,} samples: judged over the whole capture ({int(whole['count'][0]):,} samples)"
        subjects.append(Subject(name, kind, _basis(whole, "whole capture"), sources, note))
    else:
        unjudged.append(f"{name}: {int(total['count'].sum()):,} samples")


def _histogram_subjects(inp: RuleInput) -> list[Subject]:
    """One subject per histogram (metric + labels other than ``le`` and ``instance``, derived
    ``histogram_window``), windows per instance; over the whole capture when no window is large enough."""
    windows = inp.table(t.HISTOGRAM_WINDOW)
    if windows is None:
        return []
    columns = ["window_start", "count", *QUANTILES, "instance"]
    latencies = windows.filter(~pl.col("metric").str.contains(NOT_LATENCY_PATTERN))
    subjects: list[Subject] = []
    for (source, metric, labels), group in latencies.group_by("source", "metric", "series_labels", maintain_order=True):
        name = f"{metric[: -len('_bucket')]}{{{labels}}}" if labels else metric[: -len("_bucket")]
        per_window = group.filter(pl.col("window_start").is_not_null()).select(columns).sort("window_start", "instance")
        judged = _enough(per_window)
        if judged.height:
            subjects.append(Subject(name, "metric histogram", _basis(judged, "window"), (source,)))
            continue
        whole = _enough(group.filter(pl.col("window_start").is_null()).select(columns))
        note = f"no window held {MIN_SAMPLES_P999:,} observations: judged over the whole capture"
        subjects.append(Subject(name, "metric histogram", _basis(whole, "whole capture"), (source,), note))
    return subjects


def _interval_subjects(intervals: pl.DataFrame) -> list[Subject]:
    subjects: list[Subject] = []
    for (source, run, tool), group in intervals.filter(pl.col("latency_ms").is_not_null()).group_by("source", "run", "tool", maintain_order=True):
        if group.height < 3:
            continue
        pct = group["latency_pct"].drop_nulls().first()
        what = f"p{pct:g}" if pct is not None else "average"
        median = float(group["latency_ms"].median())
        frame = group.select(
            pl.col("ts").alias("window_start"),
            pl.col("offset_s"),
            pl.lit(None, dtype=pl.Int64).alias("count"),
            pl.lit(median).alias("p50_ms"),
            pl.lit(None, dtype=pl.Float64).alias("p99_ms"),
            pl.col("latency_ms").alias("p999_ms"),
            pl.lit(None, dtype=pl.Float64).alias("p9999_ms"),
        ).with_columns(
            (pl.col("p999_ms") / median if median > 0 else pl.lit(None, dtype=pl.Float64)).alias("ratio"),
            pl.lit(f"interval {what} vs the run's median interval").alias("basis"),
        )
        note = f"{tool} prints one latency per interval ({what}): an interval is compared with the run's median interval ({median:.2f} ms)"
        subjects.append(Subject(f"{tool} run {run} ({source})", "progress lines", frame, (source,), note, run_key=(source, run)))
    return subjects


# ---- what happened near the spikes ---------------------------------------------------------------


def _near(spikes: pl.DataFrame, width: float) -> list[tuple[datetime, datetime]]:
    step = timedelta(seconds=width)
    return [(w - step, w + 2 * step) for w in spikes["window_start"].drop_nulls().to_list()]


def _correlations(inp: RuleInput, spikes: pl.DataFrame, width: float) -> list[tuple[Any, ...]]:
    ranges = _near(spikes, width)
    whole = spikes["window_start"].null_count() > 0
    rows: list[tuple[Any, ...]] = []
    rows += _event_rows(inp, ranges, whole)
    rows += _plan_change_rows(inp, ranges, whole)
    rows += _metric_hint_rows(inp, ranges)
    return rows


def _in_ranges(column: str, ranges: list[tuple[datetime, datetime]]) -> pl.Expr:
    expr = pl.lit(False)
    for start, end in ranges:
        expr = expr | ((pl.col(column) >= start) & (pl.col(column) < end))
    return expr


def _event_rows(inp: RuleInput, ranges: list[tuple[datetime, datetime]], whole: bool) -> list[tuple[Any, ...]]:
    events = inp.table(t.EVENT)
    if events is None:
        return []
    near = events if whole else events.filter(_in_ranges("ts", ranges))
    return [
        (iso(r["ts"]), f"event: {r['kind']}", f"{r['component'] or ''} {r['process'] or ''} {r['message'] or ''}".strip()[:200],
         f"{r['source']}:{r['line']}" if r["line"] else r["source"])
        for r in near.sort("ts").head(10).iter_rows(named=True)
    ]


def _plan_change_rows(inp: RuleInput, ranges: list[tuple[datetime, datetime]], whole: bool) -> list[tuple[Any, ...]]:
    statements = inp.table(t.FINGERPRINTED_STATEMENT)
    if statements is None:
        return []
    key = next((c for c in ("fp_id", "digest") if c in statements.columns and statements[c].null_count() < statements.height), None)
    plan = pl.col("plan_key") if "plan_key" in statements.columns else pl.coalesce("plan_digest", "plan_signature")
    if key is None:
        return []
    plans = (
        statements.select(pl.col(key).cast(pl.String).alias("key"), plan.alias("plan"), pl.coalesce("start_ts", "end_ts").alias("ts"), "source", "line")
        .filter(pl.col("plan").is_not_null() & pl.col("ts").is_not_null())
        .sort("ts")
        .group_by("key", "plan", maintain_order=True)
        .agg(pl.col("ts").first(), pl.col("source").first(), pl.col("line").first())
    )
    changed = plans.with_columns(pl.col("ts").rank("ordinal").over("key").alias("order")).filter(pl.col("order") > 1)
    near = changed if whole else changed.filter(_in_ranges("ts", ranges))
    return [
        (iso(r["ts"]), "plan change", f"fingerprint {r['key']}: new plan {str(r['plan'])[:80]}", f"{r['source']}:{r['line']}")
        for r in near.sort("ts").head(10).iter_rows(named=True)
    ]


def _metric_hint_rows(inp: RuleInput, ranges: list[tuple[datetime, datetime]]) -> list[tuple[Any, ...]]:
    values = inp.table(t.BACKGROUND_ACTIVITY)
    if values is None or not ranges:
        return []
    rows: list[tuple[Any, ...]] = []
    for (metric, labels), group in values.group_by("metric", "labels", maintain_order=True):
        median = group["value"].median()
        near = group.filter(_in_ranges("ts", ranges))
        if near.height == 0 or median is None:
            continue
        peak = near.sort("value", descending=True).row(0, named=True)
        if peak["value"] > median:
            name = f"{metric}{{{labels}}}" if labels else metric
            rows.append((iso(peak["ts"]), "metric", f"{name} = {peak['value']:,.4g} (median over the capture {median:,.4g})", peak["source"]))
    return rows[:10]


# ---- the finding -------------------------------------------------------------------------------


def _finding(inp: RuleInput, subject: Subject, width: float) -> Finding:
    spikes = subject.spikes.sort("ratio", descending=True, nulls_last=True)
    worst = spikes.row(0, named=True)
    correlations = _correlations(inp, spikes.head(MAX_WINDOWS_SHOWN), width)
    progress = subject.kind == "progress lines"
    when = f"the {worst['basis']}" if worst["window_start"] is None else f"window {_window_label(worst)}"
    if progress:
        title = (
            f"{subject.name}: interval latency {fmt_ms(worst['p999_ms'])} = {worst['ratio']:.1f}x the run's median interval "
            f"({fmt_ms(worst['p50_ms'])}) in {spikes.height} interval(s); threshold {TAIL_FACTOR:g}x and {TAIL_FLOOR_MS:g} ms"
        )
    else:
        tail_name, tail = ("p9999", worst["p9999_ms"]) if (worst["p9999_ms"] or 0) > (worst["p999_ms"] or 0) else ("p999", worst["p999_ms"])
        title = (
            f"{subject.name}: {tail_name} {fmt_ms(tail)} = {worst['ratio']:.1f}x p99 ({fmt_ms(worst['p99_ms'])}) in {when}"
            + (f" and {spikes.height - 1} other window(s)" if spikes.height > 1 else "")
            + f"; threshold {TAIL_FACTOR:g}x p99 and {TAIL_FLOOR_MS:g} ms"
        )
    shown = spikes.head(MAX_WINDOWS_SHOWN)
    window_rows = tuple(
        (_window_label(r), r["count"], rounded(r["p50_ms"], 3), rounded(r["p99_ms"], 3),
         rounded(r["p999_ms"], 3), rounded(r["p9999_ms"], 3), rounded(r["ratio"], 1))
        for r in shown.iter_rows(named=True)
    )
    evidence = [
        Evidence(
            title=f"{subject.name}: windows with a tail spike ({spikes.height}, worst first; {width:g} s windows)"
            + (f"; {subject.note}" if subject.note else ""),
            columns=("window start", "samples", "p50 ms" if not progress else "run median ms", "p99 ms",
                     "p999 ms" if not progress else "interval latency ms", "p9999 ms", "tail / p99" if not progress else "x median"),
            rows=window_rows,
        ),
        Evidence(
            title="What happened in or next to those windows (one window either side)",
            columns=("time", "what", "detail", "source"),
            rows=tuple(correlations) or (("-", "nothing found", "no event, plan change or GC/compaction/checkpoint metric in the capture near the spikes", "-"),),
        ),
    ]
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.WARNING,
        title=title,
        subject=subject.name,
        impact={
            "description": f"the slowest {'0.01' if (worst['p9999_ms'] or 0) > (worst['p999_ms'] or 0) else '0.1'}% of requests took "
            f"{worst['ratio']:.0f}x the p99 or more in {spikes.height} window(s)",
            "windows": spikes.height,
            "worst_ratio": rounded(worst["ratio"], 1),
            "worst_window": iso(worst["window_start"]),
        },
        evidence=tuple(evidence),
        remediation=_remediation(correlations),
        sources=tuple(sorted({*subject.sources, *(c[3].rsplit(":", 1)[0] for c in correlations if c[3] and c[3] != "-")})),
    )


def _window_label(row: dict[str, Any]) -> str:
    on = f" on {row['instance']}" if row.get("instance") else ""
    if row["window_start"] is not None:
        return (iso(row["window_start"]) or "") + on
    if row.get("offset_s") is not None:
        return f"{row['offset_s']:g} s into the run"
    return row["basis"]


def _remediation(correlations: list[tuple[Any, ...]]) -> str:
    kinds = {c[1] for c in correlations}
    lines: list[str] = []
    if any(k.startswith("event") for k in kinds):
        lines.append(
            "A restart/OOM kill/crash coincides with the spike: a restarted server starts with cold caches and reconnecting "
            "clients; see oom-restart for the process and its memory limit (memory quota, cgroup limit, server memory settings)."
        )
    if "plan change" in kinds:
        lines.append(
            "A statement changed plan next to the spike: compare the plans (EXPLAIN ANALYZE) and bind the good one "
            "(TiDB CREATE GLOBAL BINDING FOR <sql> USING <sql with hints>; MySQL optimizer hints or FORCE INDEX; PostgreSQL "
            "pg_hint_plan), then refresh statistics (ANALYZE TABLE)."
        )
    if "metric" in kinds:
        lines.append(
            "GC/compaction/checkpoint/flush activity peaks next to the spike: smooth it (PostgreSQL checkpoint_completion_target = 0.9 "
            "and a larger max_wal_size; InnoDB innodb_io_capacity / innodb_adaptive_flushing = ON; TiKV rocksdb.rate-bytes-per-sec "
            "and max-background-jobs; TiDB tidb_gc_life_time; client JVM: G1/ZGC pause targets)."
        )
    if not lines:
        lines.append(
            "Nothing in the capture coincides with the spikes. Look for: GC pauses in the client or the database (GC logs), "
            "checkpoints and flushes (PostgreSQL log_checkpoints = on; InnoDB checkpoint age), noisy neighbours "
            "(mpstat %steal, shared disks: iostat await), and network retransmits (netstat -s, softirq load)."
        )
    lines.append("Capture the next spike with per-second data (mpstat 1, iostat -x 1, the database's own metrics) to confirm.")
    return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, start=1))


RULE = Rule(
    id=RULE_ID,
    title="Tail latency spikes (p999/p9999 far above p99)",
    area="app",
    requires=((t.LOAD_SAMPLE, t.FINGERPRINTED_STATEMENT, t.METRIC_SAMPLE, t.LATENCY_HISTOGRAM, t.LOAD_INTERVAL),),
    check=check,
    doc=__doc__ or "",
)
