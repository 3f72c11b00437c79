"""One analyze JSON report -> the facts ``compare`` sets side by side, one ``Fact`` per (area, key).

Reads only the report document (``dbdiag.report.build_document``), so that two captures and two
saved JSON reports compare the same. A sample of what it reads and what it gives::

    metrics.timeline.series[] {"series": "tps", "unit": "1/s", "source": "capture/app/sysbench-run.txt",
                               "points": [["2026-12-03T13:17:40+00:00", 50.0], ...]}
      -> Fact("outcome", "tps (sysbench)", 50.97, "1/s", "rate", "capture/app/sysbench-run.txt")
    metrics.sql_profile[] {"fp_id": "E81D...", "fingerprint": "select c from sbtest? where id=?",
                           "calls": 10220, "total_time_s": 0.977, "p99_s": 0.000361, "plans": [...],
                           "worst_sample": {"where": "capture/db/mariadb-slow.log:46515"}}
      -> Fact("sql", "select c from sbtest? where id=? | DB time per second", 0.0489, "s/s", "sql-time", ...)
         Fact("plans", "select c from sbtest? where id=?", "sbtest1:ref(xid), sbtest2:ref(xid)", ...)
    metrics.timeline.events[] {"kind": "index-ignored", "message": "ALTER TABLE sbtest1 ALTER INDEX xid IGNORED",
                               "source": "capture/db/mariadb-slow.log", "line": 7}
      -> Fact("events", "index-ignored ALTER TABLE sbtest1 ALTER INDEX xid IGNORED (mysql-slowlog)", 1, ...,
              "capture/db/mariadb-slow.log:7")   (a start or a crash: counted per kind)
    metrics.settings[] {"scope": "host", "group": "sysctl", "subject": null, "name": "vm.max_map_count",
                        "value": "65530", "source": "capture/os/sysctl.txt"}
      -> Fact("settings", "sysctl vm.max_map_count", "65530", None, "text", "capture/os/sysctl.txt")
    findings[] {"id": "plan-flip/fingerprint-e81d...", "severity": "critical", "sources": [...]}
      -> Fact("findings", "plan-flip/fingerprint-e81d...", "critical", None, "severity", ...)

``kind`` says how two values are judged (``differ.py``): a rate or a time by relative change, a
percentage or a share of the profile by points, a text, a set or a severity by equality.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from dbdiag.compare.fact import Fact
from dbdiag.compare.host_facts import (
    AFFINITY_GROUPS, CpuLayout, affinity_text, cpu_facts, cpu_layout, host_facts, interrupt_facts, memory_nodes_text, numa_facts,
    proc_stat_facts, profile_facts, vmstat_facts,
)

# Timeline series of a load test that are the outcome the users saw. A statement log's own series
# (per-second p50/p99 of every statement) are left to its summary (``_sql_summary_facts``): a
# per-second median of a mix of 20 us selects and 1 ms commits jumps between the two.
OUTCOME_SERIES = ("tps", "qps", "latency_avg", "latency_p95_reported", "latency_p99_reported", "errors")
STATEMENT_LOG_KINDS = ("mysql-slowlog", "postgresql-log", "postgresql-csvlog", "postgresql-jsonlog", "tidb-slowlog")
ACTIVITY_SERIES = ("cpu_busy_mean", "cpu_busy_max", "cpu_soft_mean", "cpu_soft_max")
# Sessions open at the proxy or the database ("connections[tidb_front]", "connections[tidb_server_connections]"):
# what a pool or a proxy's limit lets through, and so the threads the database host runs.
SESSION_SERIES = "connections["
# A fingerprint's median and p99 are compared only when it ran this often (a one-off DDL has no noise band).
SQL_MIN_CALLS = 20
# A setting's value as host_config writes it may end in a note on this host's RAM ("256 MiB (3.7% of
# 6.8 GiB RAM)"): the note moves with free memory, so only what precedes it is the setting.
VALUE_NOTE = re.compile(r"\s+\([^()]*\)$")
# Settings that differ between any two runs of one server: counters sysctl -a prints among its
# settings, random ids, and the paths of a run's own files (two healthy runs differed in exactly these).
VOLATILE_SETTING = re.compile(
    r"^(?:fs\.(?:dentry-state|file-nr|inode-nr|inode-state|aio-nr)|kernel\.(?:ns_last_pid|random\..*|pty\.nr)"
    r"|net\.netfilter\.nf_conntrack_count|datadir|socket|log_error|pid_file|hostname|server_uuid|tmpdir|gtid_.*"
    r"|(?:non)?voluntary_ctxt_switches)$"
    r"|(?:_file|_dir|_dir_path|_path|_directories|_basename|_index)$"
)
# Settings the kernel sizes from the RAM it finds at boot: two boots of one guest gave fs.file-max 287315 and
# 287289 (fixtures/compare/numa2-guest-*); judged as numbers (``differ.BOOT_SIZED_NOISE_REL``), not as texts.
BOOT_SIZED_SETTING = re.compile(
    r"^(?:fs\.file-max|fs\.epoll\.max_user_watches|fs\.inotify\.max_user_watches|kernel\.threads-max"
    r"|vm\.(?:min_free|user_reserve|admin_reserve)_kbytes|user\.max_[a-z]+_namespaces)$"
)
HOST_CONFIG_BLOCK = re.compile(r"^\S+ queue/")  # host_config's name of a disk's setting: "nvme0n1 queue/scheduler"
PROCESS_ID = re.compile(r"\s+\d+$")  # "mariadbd 1234" -> "mariadbd": the pid changes with every start


def facts_of(document: dict[str, Any]) -> list[Fact]:
    """Every fact of one report, in the order areas are shown (known ones first within an area)."""
    metrics = document.get("metrics") or {}
    kinds = {item["path"]: item.get("kind") for item in document.get("inputs") or []}
    layout = cpu_layout(metrics)
    facts: list[Fact] = []
    facts += _load_facts(metrics.get("load_runs") or [])
    facts += _timeline_facts(metrics.get("timeline") or {}, kinds)
    facts += _run_summary_facts(metrics.get("load_runs") or [])
    facts += _time_accounting_facts(metrics.get("time_accounting") or {})
    facts += _sql_summary_facts(metrics.get("sql_summary") or {}, metrics.get("idle_gaps") or {}, _span_s(metrics),
                                _whole_statement_log(metrics.get("timeline") or {}))
    facts += host_facts(metrics.get("host") or {}, document)
    facts += _setting_facts(metrics.get("host_config") or [], metrics.get("settings") or [])
    facts += _other_setting_facts(metrics.get("settings") or [], metrics.get("host_config") or [], layout)
    facts += cpu_facts(metrics.get("cpu") or {})
    facts += interrupt_facts(metrics.get("interrupts") or [], metrics.get("cpu") or {}, layout)
    facts += numa_facts(metrics.get("numa_remote") or [])
    facts += vmstat_facts(metrics.get("vmstat_numa") or {})
    facts += proc_stat_facts(metrics.get("proc_stat") or {})
    facts += _pg_stat_database_facts(metrics.get("pg_stat_database") or {})
    facts += profile_facts(metrics.get("cpu_profile") or {})
    facts += _sql_facts(metrics.get("sql_profile") or [], _span_s(metrics))
    facts += _finding_facts(document.get("findings") or [])
    return facts


def engine_of(document: dict[str, Any]) -> str | None:
    """The database engine the report read ("mariadb", "postgresql", ...), or None."""
    metrics = document.get("metrics") or {}
    version = metrics.get("engine_version") or {}
    if version.get("engine"):
        return str(version["engine"])
    engines = (metrics.get("sql_summary") or {}).get("engines") or []
    return str(engines[0]) if engines else None


def _mean(points: list[list[Any]]) -> float | None:
    values = [p[1] for p in points if p[1] is not None]
    return sum(values) / len(values) if values else None


# Changes a capture shows one by one (a DDL, a statistics job, a setting changed): each its own fact, named by
# its statement and placed at its file:line, when a kind has at most NAMED_EVENTS_MAX of them; other kinds
# (starts, crashes: their lines carry their own time) and more of one kind are counted.
# Events that change plans (analyzer/derive/changes.py actions).
PLAN_EVENTS = (
    "index-ignored", "index-not-ignored", "index-invisible", "index-visible", "drop-index", "create-index", "alter-index",
    "analyze", "optimize", "lock-stats", "unlock-stats",
)
NAMED_EVENT_KINDS = (*PLAN_EVENTS, "alter-table", "create-table", "drop-table", "truncate", "rename-table", "set-global", "alter-system")
NAMED_EVENTS_MAX = 5


def _timeline_facts(timeline: dict[str, Any], kinds: dict[str, str | None]) -> list[Fact]:
    facts = []
    for series in timeline.get("series") or []:
        name, source = series.get("series") or "", series.get("source")
        origin = kinds.get(source) or "?"
        if name.startswith("event["):
            label = series.get("label") or name
            named = [e for e in timeline.get("events") or [] if e.get("kind") == label and e.get("source") == source]
            if label in NAMED_EVENT_KINDS and 0 < len(named) <= NAMED_EVENTS_MAX:
                for event in named:  # "index-ignored ALTER TABLE sbtest1 ALTER INDEX xid IGNORED (mysql-slowlog)"
                    where = f"{source}:{event['line']}" if event.get("line") else source
                    facts.append(Fact("events", f"{label} {event.get('message') or ''} ({origin})".replace("  ", " "), 1, "events", "events", where))
                continue
            count = int(sum(p[1] or 0 for p in series.get("points") or []))
            facts.append(Fact("events", f"{label} events ({origin})", count, "events", "events", source))
            continue
        area = "outcome" if name in OUTCOME_SERIES else "activity" if name in ACTIVITY_SERIES or name.startswith(SESSION_SERIES) else None
        if area is None or origin in STATEMENT_LOG_KINDS:
            continue
        value = _mean(series.get("points") or [])
        kind = "pct" if series.get("unit") == "%" else "time" if series.get("unit") in ("ms", "s") else "rate"
        kind = "tail" if kind == "time" and "p99" in name else kind
        facts.append(Fact(area, f"{name} ({origin}), mean of the timeline", value, series.get("unit"), kind, source))
    return facts


def _load_facts(runs: list[dict[str, Any]]) -> list[Fact]:
    """How many clients each load test ran (``metrics.load_runs``): the load itself, which moves every
    statement's latency and the throughput of a closed loop, so two runs at other concurrency differ first in it.

    >>> [(f.key, f.value) for f in _load_facts([{"tool": "pgbench", "test": "TPC-B (sort of)", "threads": 32, "source": "app/pgbench.txt"}])]
    [('pgbench TPC-B (sort of) clients', 32)]
    """
    facts = []
    for run in runs:
        if run.get("threads") is not None:
            name = " ".join(str(part) for part in (run.get("tool"), run.get("test")) if part)
            facts.append(Fact("load", f"{name} clients", int(run["threads"]), None, "text", run.get("source")))
    return facts


def _run_summary_facts(runs: list[dict[str, Any]]) -> list[Fact]:
    """A load test's own summary (TPS, average latency) of every run: the number both sides have whatever else
    they hold (pgbench prints progress lines without a clock, sysbench's are placed on the timeline only against a
    statement log of every statement: one side's timeline and the other's summary would not compare).

    >>> [(f.key, f.value) for f in _run_summary_facts([{"tool": "pgbench", "tps": 2331.8, "latency_avg_ms": 13.7,
    ...     "source": "app/pgbench.txt"}])]
    [('tps (pgbench summary)', 2331.8), ('latency_avg (pgbench summary)', 13.7)]
    """
    facts = []
    for run in runs:
        label = f"{run.get('tool')} summary"
        if run.get("tps") is not None:
            facts.append(Fact("outcome", f"tps ({label})", run["tps"], "1/s", "rate", run.get("source")))
        if run.get("latency_avg_ms") is not None:
            facts.append(Fact("outcome", f"latency_avg ({label})", run["latency_avg_ms"], "ms", "time", run.get("source")))
    return facts


def _time_accounting_facts(accounting: dict[str, Any]) -> list[Fact]:
    if accounting.get("db_time_ratio") is None:
        return []
    sources = accounting.get("sources") or []
    source = ", ".join(s["source"] for s in sources if s.get("source")) or None
    user = next((s for s in sources if s.get("side") == "user" and s.get("count")), None)
    facts = [Fact("outcome", "DB time / user response time", accounting["db_time_ratio"] * 100, "%", "pct", source)]
    if user is not None and accounting.get("user_response_time_s") is not None:
        per_request_ms = accounting["user_response_time_s"] / user["count"] * 1000
        facts.append(Fact("outcome", "user response time per request", per_request_ms, "ms", "time", user.get("source")))
    return facts


def _whole_statement_log(timeline: dict[str, Any]) -> bool:
    """False when the timeline named the statement series ``logged_*``: the log is a slow log with a threshold
    (derive/time_db_side.log_completeness), so its rates and gaps are of the statements over it only."""
    return not any(str(s.get("series") or "").startswith("logged_") for s in timeline.get("series") or [])


def _sql_summary_facts(summary: dict[str, Any], gaps: dict[str, Any], span: float | None, whole: bool = True) -> list[Fact]:
    """The statement log's throughput, DB time and latency; a slow log's as "logged ..." (what crossed its threshold:
    no outcome, and not the headline), and no idle gaps from it (the gaps between logged statements are not idle time)."""
    facts = []
    source = ", ".join(gaps.get("source") or []) or None
    head, log = ("", "(statement log)") if whole else ("logged ", "(slow log: statements over its threshold)")
    if span and summary.get("statements"):
        facts.append(Fact("outcome", f"{head}statements per second {log}", summary["statements"] / span, "1/s", "rate", source))
        facts.append(Fact("outcome", f"{head}DB time per second {log}", (summary.get("db_time_s") or 0) / span, "s/s", "time", source))
    latency = gaps.get("sql_latency") or {}
    for name in ("p50_ms", "p99_ms"):
        if latency.get(name) is not None:
            kind = "tail" if name == "p99_ms" else "time"
            facts.append(Fact("outcome", f"{head}statement latency {name[:-3]} {log}", latency[name], "ms", kind, source))
    if not whole:
        return facts
    # idle gaps: the time a connection sat between two statements, inside a transaction or not
    for where, label in (("in_txn", "in a transaction"), ("not_in_txn", "between transactions")):
        for name in ("p50_ms", "p99_ms"):
            value = (gaps.get(where) or {}).get(name)
            if value is not None:
                kind = "tail" if name == "p99_ms" else "time"
                facts.append(Fact("outcome", f"idle gap {label} {name[:-3]}", value, "ms", kind, source))
    return facts


def _setting_facts(rows: list[dict[str, Any]], raw_rows: list[dict[str, Any]]) -> list[Fact]:
    """The settings the rules know, with the value as the capture wrote it when ``metrics.settings``
    has it (``128kB``, where host_config rounds to ``0 MiB``; the last line of a config file wins, as
    in the server), else host_config's value without its RAM note."""
    raw = {}
    for row in raw_rows:
        if row.get("subject") is None and row.get("value") is not None:
            raw[row["name"]] = row["value"]
    facts = []
    for row in rows:
        if HOST_CONFIG_BLOCK.match(str(row.get("setting"))):
            continue  # a disk's queue file: every one of them is compared from metrics.settings ("block nvme0n1 scheduler")
        value = row.get("value")
        if isinstance(value, str):
            value = VALUE_NOTE.sub("", value)
        value = raw.get(str(row.get("setting")), value)
        facts.append(Fact("settings", str(row.get("setting")), value, None, "text", row.get("source")))
    return facts


def _other_setting_facts(rows: list[dict[str, Any]], known: list[dict[str, Any]], layout: CpuLayout) -> list[Fact]:
    """``metrics.settings``: every setting the rules do not already name (those come first, from
    host_config), keyed by group, subject and name: "sysctl vm.max_map_count", "block nvme0n1
    scheduler", "process_affinity mariadbd Cpus_allowed_list", "mariadb variable sort_buffer_size".
    CPU affinities read as the host's CPUs they name (``affinity_text``)."""
    names = {str(row.get("setting")) for row in known}
    facts = []
    for row in sorted(rows, key=lambda r: (r["scope"], r["group"], r.get("subject") or "", r["name"])):
        if row["name"] in names or row["group"] == "thp" or VOLATILE_SETTING.search(row["name"]):
            continue
        subject = PROCESS_ID.sub("", row["subject"]) if row.get("subject") else None
        key = " ".join(part for part in (row["group"], subject, row["name"]) if part)
        value = row.get("value")
        if row["name"] == "Mems_allowed_list":
            value = memory_nodes_text(value, layout)
        elif row["group"] in AFFINITY_GROUPS:
            value = affinity_text(value, layout)
        kind = "boot-sized" if row["group"] == "sysctl" and BOOT_SIZED_SETTING.search(row["name"]) else "text"
        facts.append(Fact("settings", key, value, None, kind, row.get("source")))
    return facts


# A database is compared when shared buffers saw this many block requests in the window: a psql session's catalog
# reads are a few hundred (231 in the postgres database of fixtures/compare/postgres-*), and a ratio of those says
# who connected, not how the cache did.
BUSY_DATABASE_MIN_BLOCKS = 10_000


def _pg_stat_database_facts(stats: dict[str, Any]) -> list[Fact]:
    """``metrics.pg_stat_database``: each busy database's buffer hit ratio (judged by the share it misses,
    ``differ``'s "hit-pct") and its commits per second when the snapshots carry their times.

    >>> [(f.area, f.key, f.value) for f in _pg_stat_database_facts({"first_source": "db/a", "last_source": "db/b",
    ...     "databases": [{"datname": "bench", "window": "between snapshots", "blks_hit": 318497, "blks_read": 307369,
    ...                    "hit_ratio_pct": 50.89, "commits_per_s": 1545.39},
    ...                   {"datname": "postgres", "blks_hit": 125, "blks_read": 106, "hit_ratio_pct": 54.11}]})]
    [('activity', 'buffer hit ratio bench (pg_stat_database)', 50.89), ('outcome', 'commits per second bench (pg_stat_database)', 1545.39)]
    """
    source = ", ".join(s for s in (stats.get("first_source"), stats.get("last_source")) if s) or None
    facts = []
    for database in stats.get("databases") or []:
        if (database.get("blks_hit") or 0) + (database.get("blks_read") or 0) < BUSY_DATABASE_MIN_BLOCKS:
            continue
        name = database["datname"]
        if database.get("hit_ratio_pct") is not None:
            facts.append(Fact("activity", f"buffer hit ratio {name} (pg_stat_database)", database["hit_ratio_pct"], "%", "hit-pct", source))
        if database.get("commits_per_s") is not None and database.get("window") == "between snapshots":
            facts.append(Fact("outcome", f"commits per second {name} (pg_stat_database)", database["commits_per_s"], "1/s", "rate", source))
    return facts


def _sql_facts(profile: list[dict[str, Any]], span_s: float | None) -> list[Fact]:
    facts = []
    for row in profile:
        text = row.get("fingerprint") or row.get("fp_id")
        source = (row.get("worst_sample") or {}).get("where")
        subject = f"fingerprint-{str(row.get('fp_id') or '').lower()}"
        if span_s:
            facts.append(Fact("sql", f"{text} | DB time per second", (row.get("total_time_s") or 0) / span_s, "s/s", "sql-time", source, subject=subject))
            facts.append(Fact("sql", f"{text} | calls per second", (row.get("calls") or 0) / span_s, "1/s", "sql-rate", source, subject=subject))
        for name, field in (("median", "p50_s"), ("p99", "p99_s")):
            if row.get(field) is not None and (row.get("calls") or 0) >= SQL_MIN_CALLS:
                kind = "sql-tail" if name == "p99" else "sql-latency"
                facts.append(Fact("sql", f"{text} | {name}", row[field] * 1000, "ms", kind, source, subject=subject))
        plans = sorted(p["plan_key"] for p in row.get("plans") or [] if p.get("plan_key"))
        if plans:
            facts.append(Fact("plans", str(text), ", ".join(plans), None, "set", source, subject=subject))
        for plan in row.get("plans") or []:  # each plan's own median: did the statement slow down on a plan it kept?
            if plan.get("plan_key") and plan.get("p50_s") is not None and (plan.get("calls") or 0) >= SQL_MIN_CALLS:
                facts.append(Fact("sql", f"{text} | plan {plan['plan_key']} | median", plan["p50_s"] * 1000, "ms", "sql-latency",
                                  source, subject=subject))
    return facts


def _finding_facts(findings: list[dict[str, Any]]) -> list[Fact]:
    return [
        Fact("findings", f["id"], f["severity"], None, "severity", (f.get("sources") or [None])[0], (f["id"],), f["id"].partition("/")[2])
        for f in findings
    ]


def _span_s(metrics: dict[str, Any]) -> float | None:
    """Seconds of statement log that per-second SQL values are of (captures of different length compare):
    the load-test run's span when time accounting placed it in the log, else first to last statement
    (which counts the set-up statements logged before the run started)."""
    accounting = metrics.get("time_accounting") or {}
    placed = _seconds_between(accounting.get("from"), accounting.get("to"))
    if placed:
        return placed
    summary = metrics.get("sql_summary") or {}
    return _seconds_between(summary.get("first_seen"), summary.get("last_seen"))


def _seconds_between(first: str | None, last: str | None) -> float | None:
    if not first or not last:
        return None
    seconds = (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
    return seconds if seconds > 0 else None
