"""One time axis for everything with a clock: throughput, latency percentiles, connections, CPU, events.

Derived table ``timeline`` (long): ``window_start`` (UTC, windows of ``window_s`` aligned to
multiples of ``window_s`` since the epoch, as ``time_accounting_windows``), ``series``, ``value``,
``unit``, ``source``, ``samples`` (what the value is computed from: requests, statements,
histogram observations, CPU samples, snapshots; null when not countable). ``series`` is a measure,
with ``[label]`` when it is one of several (``tps[Login]``, ``connections[fe_mysql]``):

- ``tps`` / ``qps`` (per second): JMeter samples ended in the window (transaction-controller
  samples when the file has them, else every sample; also per label for the
  :data:`MAX_LABELS` busiest labels), per second of the window the file covers (its first and
  last windows are partial: under :data:`PARTIAL_WINDOW_SHARE` of a window, at least :data:`MIN_COVERED_S`); sysbench/pgbench progress lines (TPS and QPS x the interval,
  summed per window); statements started in the window; counter metrics of :data:`RATE_COUNTERS`
  (per series Σ increase / Σ scrape interval of the increases that began in the window, summed over
  series).
- ``latency_p50`` ... ``latency_p9999`` (ms): quantiles of JMeter elapsed times and of statement
  durations started in the window, and :func:`~dbdiag.derive.histogram.histogram_quantile` over the
  bucket increases of :data:`LATENCY_HISTOGRAMS`. A quantile is only given for a window with at
  least :data:`QUANTILE_MIN_SAMPLES` observations (p99: 100, p999: 1,000, p9999: 10,000): below
  that it is the window's maximum under another name. The metric counts the windows left out.
  sysbench's own percentile (``latency_p95_reported``, ``latency_p99_reported``: as it was asked)
  and pgbench's average (``latency_avg``) per progress line are kept as the tool printed them (the
  largest of the lines in a window; the transaction-weighted mean for averages). A statement log
  that lacks the short statements (a slow log with a threshold, by
  :func:`~dbdiag.derive.time_db_side.log_completeness`) gives ``logged_qps`` and
  ``logged_latency_*`` instead: the statements it holds, not the load.
- ``disk_await[dev]`` (ms) and ``disk_util[dev]`` (%) from iostat -x -t: each device's request time (reads and
  writes weighted by their requests) and %util, iostat's first report of a member left out;
- ``swap_in``/``swap_out`` (KiB/s) and ``runnable`` (tasks) from vmstat -t: si, so and r per window (their mean),
  vmstat's first line of a member left out;
- ``connections[...]`` (sessions): HAProxy ``scur`` per frontend (the largest in the window,
  summed over snapshots' frontends of that proxy) with its ``slim`` as ``session_limit[...]``;
  gauges of :data:`CONNECTION_GAUGES` (summed over series at each scrape, largest in the window).
- ``cpu_busy_mean`` / ``cpu_busy_max``, ``cpu_soft_mean`` / ``cpu_soft_max`` (%): from ``cpu_util``
  per CPU, busy = 100 - %idle - %iowait; mean over CPUs and samples in the window, and the busiest
  CPU's mean over the window. mpstat stamps a report with its interval's end: each counts at its
  interval's start (the end less the step between reports), like every other input. With only
  mpstat's ``all`` row, the mean only. One ``cpu_util`` source is used (the one with most rows);
  others covering the same CPUs repeat it.
- ``event[kind]`` (events): count of :data:`MARKER_KINDS` events in the window, and of the changes
  of :data:`CHANGE_KINDS` (the derived ``change`` table: DDL, statistics collection, bulk data
  changes, setting changes) under their action (``event[index-ignored]``, ``event[analyze]``); the
  metric lists each for markers, changes with ``change`` (their kind), ``table``, ``object`` and
  ``conn_id``.

Sources without a wall clock: a single sysbench/pgbench run is placed where
``time_accounting`` placed it on the statement log (pass its metric as ``accounting``); its
progress lines then sit at that start + their offset, and the source is listed with ``clock``
"placed" and a note saying how. Nothing is shifted otherwise: each source's own first and last
time on the axis are listed (for reports over an interval, mpstat's and progress lines', the
interval's start) with ``clock`` "own"; ``clock_offset_s`` stays null: dbdiag does not guess
offsets between clocks it cannot compare.

The series are made by ``timeline_series`` (its constants: MAX_LABELS, PARTIAL_WINDOW_SHARE, RATE_COUNTERS,
LATENCY_HISTOGRAMS, CONNECTION_GAUGES, QUANTILE_MIN_SAMPLES); this module gathers the inputs, chooses the windows
and writes the metric.

``metrics.timeline``: ``window_s`` (used), ``requested_window_s``, ``from``, ``to``,
``series`` ([{series, measure, label, unit, source, points: [[iso, value], ...],
min_samples, suppressed_windows, note}]), ``events``, ``sources``
([{source, kind, from, to, clock, clock_offset_s, note}]) and ``notes``.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.disks import iostat_reports
from dbdiag.derive.idle_gaps import resolution_us
from dbdiag.derive.memory_pressure import vmstat_lines
from dbdiag.derive.sql import is_sleep
from dbdiag.derive.timeline_series import (
    CONNECTION_GAUGES, LATENCY_HISTOGRAMS, QUANTILE_MIN_SAMPLES, QUANTILES, RATE_COUNTERS, TIMELINE_SCHEMA, interval_starts,
    series_frames,
)
from dbdiag.timebounds import inside

MIN_WINDOWS = 10  # a capture shorter than 10 windows gets finer windows (down to FINE_WINDOWS_S)
FINE_WINDOWS_S = (5.0, 2.0, 1.0)
MAX_WINDOWS = 2000  # longer captures get coarser windows, so the JSON stays readable
MARKER_KINDS = ("oom-kill", "start", "shutdown", "crash", "restart", "recovery", "fatal", "host-restart")
CHANGE_KINDS = ("ddl", "statistics", "bulk-change", "config")  # restarts and OOM kills come from the events
MAX_MARKERS = 200
MESSAGE_CHARS = 300



def timeline(
    tables: dict[str, pl.DataFrame], window_s: float = 10.0, accounting: dict[str, Any] | None = None,
    min_windows: int = MIN_WINDOWS, changes: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame | None, dict[str, Any] | None]:
    """The ``timeline`` table and ``metrics.timeline``; (None, None) when nothing has a usable time.

    ``accounting``: ``metrics.time_accounting``, to place a clock-less load-test run where it was
    matched. A capture spanning fewer than ``min_windows`` windows gets finer ones (5, 2, 1 s).
    ``changes``: the derived ``change`` table, whose changes are marked.
    """
    notes: list[str] = []
    sources: list[dict[str, Any]] = []
    marked = _marked_changes(changes)
    inputs = _timed_inputs(tables, accounting, sources, notes, marked)
    if not inputs:
        return None, None
    first = min(frame["ts"].min() for frame in inputs.values())
    last = max(frame["ts"].max() for frame in inputs.values())
    used_s = _window_for(first, last, window_s, min_windows, notes)
    width_us = max(1, int(round(used_s * 1e6)))
    frames = series_frames(inputs, width_us, used_s, notes)
    if not frames:
        return None, None
    table = pl.concat([frame.select(list(TIMELINE_SCHEMA)).cast(TIMELINE_SCHEMA) for frame in frames], how="vertical")
    table = table.filter(pl.col("value").is_not_null() & pl.col("value").is_finite()).sort("series", "source", "window_start")
    metric = {
        "window_s": used_s,
        "requested_window_s": window_s,
        "from": _iso(table["window_start"].min()) if table.height else _iso(first),
        "to": _iso(table["window_start"].max() + timedelta(microseconds=width_us)) if table.height else _iso(last),
        "series": _series_entries(table, frames),
        "events": _event_list(tables.get(t.EVENT), marked),
        "sources": sources,
        "notes": notes,
    }
    return table, metric


# ---------------------------------------------------------------- inputs and their clocks


def _timed_inputs(tables: dict[str, pl.DataFrame], accounting: dict[str, Any] | None,
                  sources: list[dict[str, Any]], notes: list[str], marked: pl.DataFrame | None = None) -> dict[str, pl.DataFrame]:
    """Per input kind, its rows with a ``ts`` column on the common axis; fills ``sources``."""
    inputs: dict[str, pl.DataFrame] = {}

    def add(kind: str, frame: pl.DataFrame, clock: str = "own", note: str | None = None) -> None:
        # parse results are bounded already (timebounds); a time shifted here must not overflow either
        frame = frame.filter(inside(pl.col("ts")).fill_null(False))
        if not frame.height:
            return
        inputs[kind] = pl.concat([inputs[kind], frame], how="diagonal_relaxed") if kind in inputs else frame
        for source, start, end in frame.group_by("source", maintain_order=True).agg(
            pl.col("ts").min().alias("a"), pl.col("ts").max().alias("b")
        ).iter_rows():
            sources.append({"source": source, "kind": kind, "from": _iso(start), "to": _iso(end),
                            "clock": clock, "clock_offset_s": None, "note": note})

    samples = tables.get(t.LOAD_SAMPLE)
    if samples is not None and samples.height:
        untimed = samples.filter(pl.col("start_ts").is_null()).height
        if untimed:
            notes.append(f"{untimed:,} JMeter samples without a timeStamp are not on the timeline")
        # placed at their end: JMeter writes a row when its sample ends, so a file cut by time (a test's
        # middle minutes) is whole by end time, and a window counts what completed in it, as JMeter's throughput
        ended = pl.col("start_ts") + pl.duration(microseconds=(pl.col("elapsed_ms").fill_null(0) * 1000).round().cast(pl.Int64))
        add("jmeter-samples", samples.with_columns(ended.alias("ts")).drop("start_ts"))
    intervals = tables.get(t.LOAD_INTERVAL)
    if intervals is not None and intervals.height:
        placed = _placed_intervals(intervals, accounting, notes)
        timed = intervals.filter(pl.col("ts").is_not_null())
        if timed.height:
            add("load-test-intervals", interval_starts(timed))
        if placed is not None:
            frame, note = placed
            add("load-test-intervals", interval_starts(frame), clock="placed", note=note)
    statements = tables.get(t.STATEMENT)
    if statements is not None and statements.height:
        # only the columns the series read: the SQL text is not copied by the filter
        # a statement that only sleeps is no work: left out of the statement series as out of DB time
        statements = statements.select("start_ts", "end_ts", "query_time_s", "source", "is_internal", "sql").filter(
            ~pl.col("is_internal").fill_null(False) & ~is_sleep(pl.col("sql"))
        ).drop("sql")
        coarse = resolution_us(statements["start_ts"], resolution_us(statements["end_ts"]))
        if coarse >= 1_000_000:
            notes.append(
                f"statement times have a resolution of {coarse / 1e6:g} s (start = logged end - duration): a statement can "
                "fall one window early or late, so per-window statement counts are only good to about one window's shift"
            )
        add("statement-log", statements.rename({"start_ts": "ts"}).drop("end_ts"))
    metrics = tables.get(t.METRIC_SAMPLE)
    if metrics is not None and metrics.height:
        wanted = list(RATE_COUNTERS) + [f"{family}_bucket" for family in LATENCY_HISTOGRAMS] + list(CONNECTION_GAUGES)
        used = metrics.filter(pl.col("metric").is_in(wanted))
        if used.height:
            add("metrics", used)
    proxy = tables.get(t.PROXY_STAT)
    if proxy is not None and proxy.height:
        untimed = proxy.filter(pl.col("ts").is_null())["snapshot"].n_unique()
        if untimed:
            notes.append(f"{untimed} HAProxy snapshot(s) without a time line are not on the timeline")
        add("proxy-stat", proxy.filter(pl.col("type") == "frontend"))
    cpu = tables.get(t.CPU_UTIL)
    if cpu is not None and cpu.height:
        sizes = cpu.group_by("source").len().sort(["len", "source"], descending=[True, False])
        chosen = sizes["source"][0]
        if sizes.height > 1:
            notes.append(f"CPU from {chosen}; {', '.join(sizes['source'][1:].to_list())} not used (same CPUs, one source is enough)")
        add("cpu-util", _at_interval_start(cpu.filter(pl.col("source") == chosen)))
    disks = tables.get(t.DISK_IO)
    if disks is not None and disks.height:
        reports = iostat_reports(disks).filter(pl.col("ts").is_not_null())  # the reports metrics.disks reads
        if reports.height:
            add("disk-io", _at_interval_start(reports))
    vmstat = tables.get(t.VMSTAT_SAMPLE)
    if vmstat is not None and vmstat.height:
        lines = vmstat_lines(vmstat).filter(pl.col("ts").is_not_null())  # the lines metrics.memory_pressure reads
        if lines.height:
            add("vmstat", _at_interval_start(lines))
    events = tables.get(t.EVENT)
    if events is not None and events.height:
        add("events", events.filter(pl.col("kind").is_in(MARKER_KINDS)))
    if marked is not None:
        # a change's statement is in the statement log already: its span is not listed again
        frame = marked.filter(inside(pl.col("ts")).fill_null(False)).select("ts", pl.col("action").alias("kind"), "source")
        if frame.height:
            inputs["events"] = pl.concat([inputs["events"], frame], how="diagonal_relaxed") if "events" in inputs else frame
    return inputs


def _marked_changes(changes: pl.DataFrame | None) -> pl.DataFrame | None:
    """The changes the timeline marks (:data:`CHANGE_KINDS`, with a time), or None."""
    if changes is None or not changes.height:
        return None
    marked = changes.filter(pl.col("kind").is_in(CHANGE_KINDS) & pl.col("ts").is_not_null())
    return marked if marked.height else None


def _at_interval_start(cpu: pl.DataFrame) -> pl.DataFrame:
    """mpstat/sar rows carry their interval's end: move each to its start (the end less the step to the
    previous report; the first report takes the next step), so it lands in the window it measured."""
    times = cpu.select("ts").unique().sort("ts")["ts"]
    if times.len() < 2:
        return cpu
    steps = pl.DataFrame({"ts": times, "step": times.diff().fill_null(times[1] - times[0])})
    return cpu.join(steps, on="ts", how="left").with_columns((pl.col("ts") - pl.col("step")).alias("ts")).drop("step")


def _placed_intervals(intervals: pl.DataFrame, accounting: dict[str, Any] | None,
                      notes: list[str]) -> tuple[pl.DataFrame, str] | None:
    """Progress lines without wall time, at time_accounting's placement of their (single) run."""
    untimed = intervals.filter(pl.col("ts").is_null())
    if not untimed.height:
        return None
    tools = ", ".join(sorted(set(untimed["tool"].drop_nulls().to_list()))) or "load test"
    placed_from = _placement(accounting)
    runs_n = untimed.select("source", "run").n_unique()
    if placed_from is None or runs_n != 1:
        notes.append(
            f"{tools} progress lines have no wall-clock time and were not placed "
            + ("(several runs)" if runs_n != 1 else "(time_accounting could not place the run on the statement log)")
            + ": they are not on the timeline"
        )
        return None
    start = datetime.fromisoformat(placed_from)
    frame = untimed.with_columns(
        (pl.lit(start).cast(t.UTC_TIME) + pl.duration(microseconds=(pl.col("offset_s") * 1e6).round().cast(pl.Int64))).alias("ts")
    )
    note = (
        f"{tools} prints no wall-clock time: its progress lines are placed at {placed_from} + their offset, "
        "where time_accounting matched the run to the statement log (its alignment): the tool's position comes "
        "from that match, not from a clock, so no offset is measured"
    )
    return frame, note


def _placement(accounting: dict[str, Any] | None) -> str | None:
    """The start time_accounting gave a single clock-less load-test run, when it placed one
    (``run_placed``: matched to the run's connections or busiest stretch; whole totals are no placement)."""
    if not accounting or not accounting.get("from") or not accounting.get("run_placed"):
        return None
    user = [s for s in accounting.get("sources", []) if s.get("side") == "user"]
    if len(user) != 1 or user[0].get("kind") != "load-test-run" or user[0].get("from") is not None:
        return None
    return str(accounting["from"])


def _window_for(first: datetime, last: datetime, window_s: float, min_windows: int, notes: list[str]) -> float:
    span = (last - first).total_seconds()
    if window_s <= 0:
        raise ValueError("window_s must be positive")
    if span / window_s < min_windows:
        for finer in FINE_WINDOWS_S:
            if finer < window_s and span / finer >= min_windows:
                notes.append(f"the capture spans {span:.1f} s: {finer:g} s windows instead of {window_s:g} s, to show a shape")
                return finer
        if window_s > FINE_WINDOWS_S[-1] and span >= FINE_WINDOWS_S[-1]:
            notes.append(f"the capture spans {span:.1f} s: {FINE_WINDOWS_S[-1]:g} s windows instead of {window_s:g} s")
            return FINE_WINDOWS_S[-1]
    if span / window_s > MAX_WINDOWS:
        coarse = window_s
        while span / coarse > MAX_WINDOWS:
            coarse *= 2
        notes.append(f"the capture spans {span:,.0f} s: {coarse:g} s windows instead of {window_s:g} s, at most {MAX_WINDOWS} windows")
        return coarse
    return window_s


# ---------------------------------------------------------------- metric


def _series_entries(table: pl.DataFrame, frames: list[pl.DataFrame]) -> list[dict[str, Any]]:
    """One entry per (series, source), points [iso, value] in time order; quantile gating counted."""
    raw = pl.concat([f.select("series", "source", "value").cast({"value": pl.Float64}) for f in frames])
    suppressed = dict(
        raw.filter(pl.col("series").str.replace("^logged_", "").is_in(list(QUANTILES)) & pl.col("value").is_null())
        .group_by("series", "source").len().select(pl.concat_str("series", "source", separator="\x00"), "len").iter_rows()
    )
    entries = []
    for (series, source), group in table.group_by("series", "source", maintain_order=True):
        measure, _, label = series.partition("[")
        entry: dict[str, Any] = {
            "series": series, "measure": measure, "label": label[:-1] if label else None, "unit": group["unit"][0],
            "source": source,
            "points": [[_iso(ts), round(value, 4)] for ts, value in group.select("window_start", "value").iter_rows()],
            "min_samples": QUANTILE_MIN_SAMPLES.get(measure.removeprefix("logged_")),
            "suppressed_windows": suppressed.get(f"{series}\x00{source}", 0),
            "note": _note(measure),
        }
        entries.append(entry)
    gated_only = {key for key in suppressed if key not in {f"{e['series']}\x00{e['source']}" for e in entries}}
    for key in sorted(gated_only):
        series, source = key.split("\x00")
        entries.append({"series": series, "measure": series, "label": None, "unit": "ms", "source": source, "points": [],
                        "min_samples": QUANTILE_MIN_SAMPLES[series.removeprefix("logged_")], "suppressed_windows": suppressed[key],
                        "note": _note(series)})
    order = {name: i for i, name in enumerate(["tps", "qps", "latency_avg", "latency_p50", "latency_p95_reported", "latency_p99_reported", "latency_p99",
                                                 "latency_p999", "latency_p9999", "logged_qps", "logged_latency_p50", "logged_latency_p99",
                                                 "logged_latency_p999", "logged_latency_p9999", "connections", "session_limit",
                                                 "cpu_busy_mean", "cpu_busy_max", "cpu_soft_mean", "cpu_soft_max", "disk_await", "disk_util",
                                                 "swap_in", "swap_out", "runnable", "event"])}
    entries.sort(key=lambda e: (order.get(e["measure"], 99), e["source"], e["label"] or ""))
    return entries


def _note(measure: str) -> str | None:
    if measure == "disk_await":
        return "iostat's r_await and w_await weighted by their requests per window"
    if measure.startswith("logged_"):
        return "statements in the log only (a slow log lacks those under its threshold): " + (_note(measure.removeprefix("logged_")) or "per second")
    if measure in QUANTILES:
        return f"only for windows with at least {QUANTILE_MIN_SAMPLES[measure]:,} observations"
    if measure.endswith("_reported"):
        return "the load test's own percentile per progress line (the largest of the lines in the window)"
    if measure == "latency_avg":
        return "the load test's average latency, weighted by transactions"
    if measure == "cpu_busy_max" or measure == "cpu_soft_max":
        return "the busiest CPU's mean over the window"
    if measure == "cpu_soft_mean":
        return "mean over CPUs of %soft"
    if measure.startswith("cpu_"):
        return "mean over CPUs; busy = 100 - %idle - %iowait"
    if measure == "connections":
        return "largest in the window"
    return None


def _event_list(events: pl.DataFrame | None, changes: pl.DataFrame | None = None) -> list[dict[str, Any]]:
    """The marker events and changes in time order (the first MAX_MARKERS: a restart loop would bury the chart)."""
    entries: list[tuple[datetime, dict[str, Any]]] = []
    if events is not None and events.height:
        rows = events.filter(pl.col("kind").is_in(MARKER_KINDS) & pl.col("ts").is_not_null()).sort("ts")
        entries += [
            (row["ts"], {"ts": _iso(row["ts"]), "kind": row["kind"], "component": row["component"], "process": row["process"],
                         "message": row["message"], "source": row["source"], "line": row["line"]})
            for row in rows.head(MAX_MARKERS).iter_rows(named=True)
        ]
    if changes is not None:
        entries += [
            (row["ts"], {"ts": _iso(row["ts"]), "kind": row["action"], "change": row["kind"], "component": row["engine"],
                         "process": None, "table": row["table"], "object": row["object"], "conn_id": row["conn_id"],
                         "message": (row["statement"] or "")[:MESSAGE_CHARS], "source": row["source"], "line": row["line"]})
            for row in changes.sort("ts").head(MAX_MARKERS).iter_rows(named=True)
        ]
    entries.sort(key=lambda entry: entry[0])
    return [entry for _, entry in entries[:MAX_MARKERS]]


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None
