"""A database or proxy process was killed (OOM), crashed or restarted during the capture.

What it detects:
    Events read from kernel logs (dmesg, /var/log/messages, journal), database error logs and
    TiDB/TiKV/PD logs: the kernel's OOM killer choosing a database or proxy process, crashes
    (segfault, signal, ``[FATAL]``), and server starts (a restart when it happens inside the
    capture window).

Why it matters:
    A killed TiKV or MySQL drops every connection, loses its caches and, for a distributed
    database, moves leaders: latency jumps (p9999 spikes), TPS dips and clients retry. Repeated
    OOM kills mean memory limits and the working set do not match; a restart loop hides
    behind averages in dashboards.

How it is detected:
    Inputs: ``event``. Events whose process or component is a database or proxy
    (mysqld, mariadbd, postgres, tidb-server, tikv-server, pd-server, tiflash, haproxy,
    proxysql, pgbouncer ...). Kinds ``oom-kill`` and ``crash`` are critical; ``fatal``, ``restart``,
    ``start`` and ``recovery`` (crash recovery at start: the previous instance died) are warnings;
    the same event read from two logs counts once; a start counts only after an earlier stop of the
    same process, or after a host restart (a log that begins with the server starting is no
    incident; a stop alone is the end of a capture, no incident either). Kind ``host-restart``
    (sysstat ``LINUX RESTART`` records: the host booted) is a warning of its own.
    Starts, recoveries and host restarts count only inside the capture window when one is known:
    the union of the spans of every timed input but the event logs themselves (OS collectors such
    as mpstat/sar and /proc snapshots, statements, metrics, load tests, proxy stats), widened by
    WINDOW_MARGIN_S = 60 s on each side, so that a server restarted just before the first statement
    counts. An event without a time (a PostgreSQL log whose prefix has no %m/%t) cannot be placed:
    it is kept and reported "time unknown", and a start without a time is a restart when a stop
    comes before it in the same log.
    For each event with a time, throughput and mean latency in the AROUND_S = 60 s before and
    after it are shown from the load test samples or the statement log when they cover it.

Remediation:
    OOM: set the server's memory limits below the cgroup/host limit (TiKV
    ``storage.block-cache.capacity`` and ``memory-usage-limit``, TiDB ``tidb_server_memory_limit``,
    MySQL ``innodb_buffer_pool_size`` plus per-connection buffers x ``max_connections``,
    PostgreSQL ``shared_buffers`` + ``work_mem`` x connections), protect the process
    (``OOMScoreAdjust=-1000`` in its systemd unit) and find who else used the memory
    (``dmesg`` task dump). Crashes: the error log's stack trace and a bug report; restarts: the
    supervisor's reason (``journalctl -u <unit>``).

References:
    Linux Documentation/admin-guide/mm/concepts.rst (OOM killer); systemd.exec(5)
    (OOMScoreAdjust=); TiKV "Memory usage" tuning; MySQL "How MySQL Uses Memory".
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.python_values import mapped
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.processes import is_database_or_proxy
from dbdiag.vocabulary.processes import DATABASE_COMPONENTS

RULE_ID = "oom-restart"

AROUND_S = 60
CRITICAL_KINDS = ("oom-kill", "crash")
WARNING_KINDS = ("fatal", "start", "restart", "recovery", "host-restart")
WINDOWED_KINDS = ("start", "recovery", "host-restart")  # old starts are history, not an incident of this capture
WINDOW_MARGIN_S = 60
# Timed inputs whose span is the capture's (statement_summary's first_seen can be weeks old; events are judged)
WINDOW_COLUMNS = (
    (t.CPU_UTIL, ("ts",)), (t.NODE_UTIL, ("ts",)), (t.SOFTIRQ_RATE, ("ts",)), (t.IRQ_RATE, ("ts",)),
    (t.SOFTIRQ_COUNT, ("ts",)), (t.IRQ_COUNT, ("ts",)), (t.NUMA_COUNTER, ("ts",)), (t.VMSTAT_COUNT, ("ts",)),
    (t.STATEMENT, ("start_ts", "end_ts")), (t.METRIC_SAMPLE, ("ts",)), (t.LOAD_SAMPLE, ("start_ts",)),
    (t.LOAD_INTERVAL, ("ts",)), (t.PROXY_STAT, ("ts",)),
)
MAX_EVIDENCE_ROWS = 20


def check(inp: RuleInput) -> Verdict:
    events = inp.table(t.EVENT, keep_empty=True)
    database_process = mapped(events["process"], is_database_or_proxy, pl.Boolean).fill_null(False)
    relevant = events.filter(
        pl.col("kind").is_in(CRITICAL_KINDS + WARNING_KINDS + ("shutdown",))
        & (pl.col("component").is_in(DATABASE_COMPONENTS) | database_process | (pl.col("kind") == "host-restart"))
    )
    window = capture_window(inp)
    outside = 0
    if window is not None:
        start, end = window
        margin = timedelta(seconds=WINDOW_MARGIN_S)
        kept = ~pl.col("kind").is_in(WINDOWED_KINDS) | pl.col("ts").is_between(start - margin, end + margin) | pl.col("ts").is_null()
        outside = relevant.filter(~kept).height
        relevant = relevant.filter(kept)
    relevant = _once(relevant)
    relevant = _restarts_only(relevant).filter(pl.col("kind") != "shutdown")  # a stop alone is no incident
    measured = f"{relevant.height} database/proxy event(s) of {events.height} read" + (
        f"; capture window {window[0]:%Y-%m-%d %H:%M:%S} .. {window[1]:%H:%M:%S} UTC (+/- {WINDOW_MARGIN_S} s)"
        + (f"; {outside} start/recovery/host restart(s) outside it left out" if outside else "")
        if window else "; no capture window known"
    )
    if relevant.height == 0:
        return Verdict(measured=measured)
    return Verdict(findings=[_finding(inp, relevant.sort("ts", nulls_last=True))], measured=measured)


def _once(events: pl.DataFrame) -> pl.DataFrame:
    """The same kill is often in both dmesg and /var/log/messages: one row per (kind, process, pid, time).
    Rows without a time are the same event only with the same pid; without a pid each line stays."""
    untimed = pl.col("ts").is_null()
    keyed = events.filter(~untimed | pl.col("pid").is_not_null())
    keyed = keyed.unique(subset=["kind", "process", "pid", "ts"], keep="first", maintain_order=True)
    return pl.concat([keyed, events.filter(untimed & pl.col("pid").is_null())], how="vertical_relaxed")


def _restarts_only(events: pl.DataFrame) -> pl.DataFrame:
    """A start is a restart only after a stop of the same process (kill, crash, shutdown...) or a host
    restart seen earlier: a log that begins with the server starting is not an incident. Earlier is by
    time; when the start or the stop has no time, by line within the same log."""
    others = events.filter(pl.col("kind") != "start")
    starts = events.filter(pl.col("kind") == "start")
    if starts.is_empty():
        return events
    stops = others.filter(pl.col("kind") != "host-restart")
    first_timed = stops.drop_nulls("ts").group_by("process").agg(pl.col("ts").min().alias("stop_ts"))
    first_host = others.filter(pl.col("kind") == "host-restart")["ts"].drop_nulls().min()
    # by line: any stop when the start has no time, an untimed stop when it has one
    first_line = stops.group_by("process", "source").agg(
        pl.col("line").min().alias("stop_line"), pl.col("line").filter(pl.col("ts").is_null()).min().alias("untimed_stop_line")
    )
    joined = starts.join(first_timed, on="process", how="left", nulls_equal=True).join(
        first_line, on=["process", "source"], how="left", nulls_equal=True
    )
    by_time = pl.col("ts").is_not_null() & (
        (pl.col("stop_ts") <= pl.col("ts")) | (pl.lit(first_host, dtype=t.UTC_TIME) <= pl.col("ts"))
    )
    by_line = pl.when(pl.col("ts").is_null()).then(pl.col("stop_line") < pl.col("line")).otherwise(
        pl.col("untimed_stop_line") < pl.col("line")
    )
    restarted = joined.filter((by_time.fill_null(False) | by_line.fill_null(False))).select(starts.columns)
    return pl.concat([others, restarted], how="vertical_relaxed").sort("ts", nulls_last=True)


def capture_window(inp: RuleInput):
    """(first, last) time of every timed input but the event logs, or None when none has a time."""
    spans = []
    for table, columns in WINDOW_COLUMNS:
        frame = inp.table(table)
        for column in columns:
            if frame is not None and column in frame.columns:
                values = frame[column].drop_nulls()
                if values.len():
                    spans.append((values.min(), values.max()))
    if not spans:
        return None
    return min(s for s, _ in spans), max(e for _, e in spans)


def _finding(inp: RuleInput, events: pl.DataFrame) -> Finding:
    kinds = events["kind"].to_list()
    critical = any(kind in CRITICAL_KINDS for kind in kinds)
    counts = events.group_by("kind").len().sort("kind")
    summary = ", ".join(_counted(kind, n) for kind, n in counts.rows())
    first = events.row(0, named=True)
    who = "the host" if first["kind"] == "host-restart" else first.get("process") or first.get("component") or "a database process"
    when = " during the capture" if first["ts"] is not None else f" (time unknown: {first['source']}:{first['line']} has no timestamp)"
    evidence = [
        Evidence(
            title="Events (log lines)",
            columns=("time (UTC)", "kind", "process", "pid", "line", "source"),
            rows=tuple(
                (
                    "time unknown" if r["ts"] is None else r["ts"], r["kind"], r["process"] or r["component"], r["pid"],
                    (r["message"] or "")[:300], f"{r['source']}:{r['line']}",
                )
                for r in events.head(MAX_EVIDENCE_ROWS).iter_rows(named=True)
            ),
        )
    ]
    around = _around(inp, events)
    if around is not None:
        evidence.append(around)
    return Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.CRITICAL if critical else Severity.WARNING,
        title=f"{who} {_verb(first['kind'])}" + (f" ({summary})" if events.height > 1 else "") + when,
        subject=str(who),
        impact={
            "description": f"{summary} ({_whose(events)})",
            "events": events.height,
            "first_ts": None if first["ts"] is None else str(first["ts"]),
        },
        evidence=tuple(evidence),
        remediation=_remediation(events),
        sources=tuple(sorted({f"{s}:{line}" for s, line in events.select("source", "line").rows()}))[:20],
    )


def _whose(events: pl.DataFrame) -> str:
    host = (events["kind"] == "host-restart").any()
    processes = (events["kind"] != "host-restart").any()
    return " and ".join(w for w, seen in (("database/proxy processes", processes), ("the host", host)) if seen)


def _counted(kind: str, n: int) -> str:
    """``2 starts``, ``1 oom-kill``, ``3 recoveries``: a count that reads as English in the title."""
    if n == 1:
        return f"1 {kind}"
    plural = {"recovery": "recoveries", "crash": "crashes"}.get(kind, f"{kind}s")
    return f"{n} {plural}"


def _verb(kind: str) -> str:
    return {
        "oom-kill": "was killed by the OOM killer", "crash": "crashed", "fatal": "logged a fatal error",
        "start": "restarted", "restart": "restarted", "recovery": "restarted after an unclean stop",
        "host-restart": "rebooted (sysstat LINUX RESTART)",
    }.get(kind, kind)


def _around(inp: RuleInput, events: pl.DataFrame) -> Evidence | None:
    """Throughput and mean latency in the AROUND_S seconds before and after each timed event."""
    series = _latency_series(inp)
    if series is None:
        return None
    label, frame = series
    rows = []
    for ts, kind, process in events.filter(pl.col("ts").is_not_null()).select("ts", "kind", "process").head(5).rows():
        before = frame.filter(pl.col("ts").is_between(ts - timedelta(seconds=AROUND_S), ts, closed="left"))
        after = frame.filter(pl.col("ts").is_between(ts, ts + timedelta(seconds=AROUND_S), closed="left"))
        if before.height == 0 and after.height == 0:
            continue
        rows.append(
            (
                ts, f"{kind} {process or ''}".strip(),
                round(before.height / AROUND_S, 2), _mean_ms(before),
                round(after.height / AROUND_S, 2), _mean_ms(after),
            )
        )
    if not rows:
        return None
    return Evidence(
        title=f"{label}: {AROUND_S} s before and after",
        columns=("event time (UTC)", "event", "per s before", "mean ms before", "per s after", "mean ms after"),
        rows=tuple(rows),
    )


def _latency_series(inp: RuleInput) -> tuple[str, pl.DataFrame] | None:
    samples = inp.table(t.LOAD_SAMPLE)
    if samples is not None:
        return "Load-test samples", samples.select(pl.col("start_ts").alias("ts"), pl.col("elapsed_ms").alias("ms")).drop_nulls("ts")
    statements = inp.table(t.STATEMENT)
    if statements is not None:
        return "Statements", statements.select(pl.col("start_ts").alias("ts"), (pl.col("query_time_s") * 1000).alias("ms")).drop_nulls("ts")
    return None


def _mean_ms(frame: pl.DataFrame) -> float | None:
    return None if frame.height == 0 else round(float(frame["ms"].mean()), 2)


def _remediation(events: pl.DataFrame) -> str:
    lines = []
    if (events["kind"] == "oom-kill").any():
        lines += [
            "OOM kill: keep the server's own memory limits under the host/cgroup limit and protect it:",
            "  TiKV: storage.block-cache.capacity (about 45% of the memory TiKV may use) and memory-usage-limit;",
            "  TiDB: SET GLOBAL tidb_server_memory_limit = '80%'; MySQL: innodb_buffer_pool_size + per-session buffers x max_connections;",
            "  PostgreSQL: shared_buffers + work_mem x active connections.",
            "  systemd: OOMScoreAdjust=-1000 for the database unit; read the task dump before the kill line (dmesg) for who else grew.",
        ]
    if (events["kind"] == "crash").any():
        lines.append("Crash: keep the error log's stack trace (and a core: LimitCORE=infinity) and report it with the version.")
    if events["kind"].is_in(["start", "restart", "fatal", "recovery"]).any():
        lines.append("Restart/fatal: journalctl -u <unit> --since <time> for the supervisor's reason; the log lines before the start.")
    if (events["kind"] == "host-restart").any():
        lines.append(
            "Host reboot: journalctl --list-boots and journalctl -b -1 -e for how the previous boot ended; "
            "last -x reboot shutdown; a cold start empties the buffer pool / shared_buffers and the OS page cache."
        )
    if events["ts"].is_null().any():
        lines.append(
            "Time unknown: the log has no timestamps; PostgreSQL: log_line_prefix = '%m [%p] ' (reload) so the next capture places events."
        )
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="Database or proxy process killed (OOM), crashed or restarted",
    area="time",
    requires=((t.EVENT,),),
    check=check,
    doc=__doc__ or "",
)
