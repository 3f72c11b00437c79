"""The view the HTML and Markdown templates render: the findings JSON document (``report.build_document``)
arranged for reading -- summary, where the time went, idle gaps, timeline panels, CPU profile and
NUMA tables, with chart geometry (``report_geometry``). It adds no number the JSON does not hold.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from dbdiag import flamegraph
from dbdiag.charts import time_panels
from dbdiag.findings import Status
from dbdiag.patterns import lazy_compile
from dbdiag.report_geometry import (
    FLAME_WIDTH_PX,
    LOG_SCALE_SPREAD,
    chart_geometry,
    hbar_geometry,
    line_chart_geometry,
    nice_ceiling,
    tick_text,
)
from dbdiag.units import seconds

def _overview_charts(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-CPU softirq chart for every capture that has per-CPU data, unless a finding shows it."""
    per_cpu = document["metrics"].get("cpu", {}).get("per_cpu", [])
    if not per_cpu or not any(row.get("soft_pct") is not None for row in per_cpu):
        return []
    shown = {c["title"] for f in document["findings"] for c in f["charts"]}
    title = "Per-CPU softirq time (%soft), grouped by NUMA node"
    if title in shown:
        return []
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in sorted(per_cpu, key=lambda r: (r.get("node") is None, r.get("node") or 0, r["cpu"])):
        label = f"node {row['node']}" if row.get("node") is not None else "node ?"
        groups.setdefault(label, []).append({"label": f"CPU {row['cpu']}", "value": row.get("soft_pct") or 0.0, "highlight": False})
    chart = {"title": title, "unit": "%", "groups": [{"label": k, "bars": v} for k, v in groups.items()], "threshold": None}
    return [chart_geometry(chart)]


def _sql_charts(document: dict[str, Any]) -> list[dict[str, Any]]:
    timeline = document["metrics"].get("sql_timeline") or {}
    series = []
    for rank, row in enumerate(document["metrics"].get("sql_profile", []), start=1):
        buckets = timeline.get(row["fp_id"])
        if buckets:
            label = f"#{rank} {row['fp_id'][:12]}…: {(row.get('fingerprint') or '')[:60]}"
            series.append({"label": label, "points": [(_as_datetime(b["bucket"]), b["p99_s"]) for b in buckets]})
    chart = line_chart_geometry("p99 latency over time of the top statements", "s", series) if series else None
    return [chart] if chart else []


def _as_datetime(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    if isinstance(value, str):
        return datetime.fromisoformat(value)
    return None


def _host_line(host: dict[str, Any]) -> str:
    parts = [
        host.get("cpu_model"),
        f"{host['cpus']} CPUs" if host.get("cpus") else None,
        f"{host['sockets']} socket(s)" if host.get("sockets") else None,
        f"{host['numa_nodes']} NUMA node(s)" if host.get("numa_nodes") else None,
        host.get("arch"),
        f"kernel {host['kernel']}" if host.get("kernel") else None,
        f"hypervisor {host['hypervisor']}" if host.get("hypervisor") else None,
    ]
    return " · ".join(str(p) for p in parts if p)


def _cpu_profile_view(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    """Flame graph rectangles, category bars and colours for the "CPU profile" section."""
    if not profile:
        return None
    busy = [c for c in profile["categories"] if c["category"] != "idle" and c["samples"]]
    rows = [
        {
            "label": c["category"],
            "note": f"{c['busy_share_pct'] or 0:.1f}% · {c['samples']:,} samples",
            "segments": [{"value": c["busy_share_pct"] or 0.0, "fill": flamegraph.colour("", c["category"]), "title": f"{c['category']}: {c['samples']:,} samples, {c['busy_share_pct'] or 0:.2f}% of busy samples, {c['share_pct']:.2f}% of all"}],
        }
        for c in busy
    ]
    flame = profile.get("flame")
    return {
        "category_chart": hbar_geometry("Categories, share of busy (non-idle) samples", "%", rows) if rows else None,
        "flame": flamegraph.layout(flame, FLAME_WIDTH_PX) if flame and flame.get("total_samples") else None,
        "colours": {name: flamegraph.colour("", name) for name in flamegraph.CATEGORY_HUES},
    }


def _numa_view(rows: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """Per node local vs remote pages as 100% stacked bars (the table gives the counts)."""
    if not rows:
        return None
    bars = []
    for row in rows:
        local, remote = row.get("local_node") or 0, row.get("other_node") or 0
        total = local + remote
        if not total:
            continue
        bars.append({
            "label": f"node {row['node']}",
            "note": f"remote {100.0 * remote / total:.1f}% of {tick_text(total)} pages",
            "segments": [
                {"value": 100.0 * local / total, "fill": "#8ab4f8", "title": f"node {row['node']}: {local:,} pages local ({100.0 * local / total:.1f}%)"},
                {"value": 100.0 * remote / total, "fill": "#d93025", "title": f"node {row['node']}: {remote:,} pages from another node ({100.0 * remote / total:.1f}%)"},
            ],
        })
    since_boot = any(row.get("since_boot") for row in rows)
    title = "Pages allocated on the local vs another node (local_node / other_node" + (", since boot)" if since_boot else ", during the capture)")
    return {"rows": rows, "since_boot": since_boot, "chart": hbar_geometry(title, "%", bars, top=100.0) if bars else None}


def _buffer_cache_view(stats: dict[str, Any] | None) -> dict[str, Any] | None:
    """metrics.pg_stat_database for the report: the databases that asked for blocks or committed in the window."""
    if not stats:
        return None
    rows = [d for d in stats.get("databases") or [] if (d.get("blks_hit") or 0) + (d.get("blks_read") or 0) or d.get("xact_commit")]
    return {**stats, "rows": rows} if rows else None


def _disks_view(disks: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """metrics.disks for the report: devices that did any work, busiest first, with what each holds in words."""
    rows = []
    for disk in disks or []:
        if not disk.get("iops"):
            continue  # a device that did nothing in the capture
        holds = [m["mountpoint"] for m in disk.get("mounts") or []] + [f"{f['setting']} {f['path']}" for f in disk.get("database_files") or []]
        rows.append({**disk, "holds": holds})
    return rows or None


def build_view(document: dict[str, Any]) -> dict[str, Any]:
    """What the templates see: the document plus chart geometry and grouped rule outcomes."""
    findings = [{**f, "chart_views": [chart_geometry(c) for c in f["charts"]]} for f in document["findings"]]
    anchors = {f["id"]: index for index, f in enumerate(findings, start=1)}
    for f in findings:
        f["anchor"] = anchors[f["id"]]
        f["cost_text"] = cost_text(f.get("impact", {}))
        f["related_views"] = [
            {"id": r, "anchor": anchors[r], "title": findings[anchors[r] - 1]["title"]} for r in f.get("related", []) if r in anchors
        ]
    rules_by_status: dict[str, list[dict[str, Any]]] = {s.value: [] for s in Status}
    for rule in document["rules"]:
        rules_by_status[rule["status"]].append(rule)
    return {
        **document,
        "findings": findings,
        "rules_by_status": rules_by_status,
        "summary": _summary_view(findings),
        "overview_charts": _overview_charts(document),
        "sql_charts": _sql_charts(document),
        "cpu_profile": _cpu_profile_view(document["metrics"].get("cpu_profile")),
        "numa": _numa_view(document["metrics"].get("numa_remote")),
        "buffer_cache": _buffer_cache_view(document["metrics"].get("pg_stat_database")),
        "disks": _disks_view(document["metrics"].get("disks")),
        "where_time_went": where_time_went(document["metrics"].get("time_accounting"), document["metrics"].get("sql_summary")),
        "idle_gaps": _idle_gaps_view(document["metrics"].get("idle_gaps")),
        "timeline": timeline_view(document["metrics"].get("timeline")),
        "host_config": document["metrics"].get("host_config") or [],
        "host_name": document["metrics"].get("host", {}).get("hostname"),
        "host_line": _host_line(document["metrics"].get("host", {})),
    }


def cost_text(impact: dict[str, Any]) -> str:
    """The measured cost in words: "42.0% of DB time (1,517 s) · 12.5% of CPU"."""
    parts = []
    for share, total, what in (("share_of_user_time", "user_time_s", "of user time"), ("share_of_db_time", "db_time_s", "of DB time")):
        value, seconds_total = impact.get(share), impact.get(total)
        if not value and not seconds_total:  # explains none of it (the outside bottleneck's DB time): nothing to say
            continue
        if isinstance(value, (int, float)):
            parts.append(f"{value * 100:.1f}% {what}" + (f" ({seconds(seconds_total)})" if isinstance(seconds_total, (int, float)) else ""))
        elif isinstance(seconds_total, (int, float)):
            parts.append(f"{seconds(seconds_total)} {what}")
    if isinstance(impact.get("cpu_share"), (int, float)):
        parts.append(f"{impact['cpu_share'] * 100:.1f}% of CPU")
    return " · ".join(parts)


def _summary_view(findings: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict's list: every critical and warning finding in rank order, the infos folded."""
    shown = [f for f in findings if f["severity"] != "info"]
    return {"shown": shown, "folded": [f for f in findings if f["severity"] == "info"]}


def duration_text(value: float | None) -> str:
    """Seconds as a DBA reads a total: 2,340 s; 0.94 s; 850 µs."""
    if value is None:
        return "—"
    if value >= 100:
        return f"{value:,.0f} s"
    if value >= 0.99995:
        return f"{value:,.2f} s"
    return seconds(value)


def _sources_text(sources: list[dict[str, Any]], side: str) -> str:
    """What one side was summed from, short: each source's detail up to its parenthesis or semicolon."""
    details = list(dict.fromkeys(s["detail"].split(" (")[0].split(";")[0] for s in sources if s["side"] == side))
    if len(details) > 2:
        return "; ".join(details[:2]) + f"; and {len(details) - 2} more source(s)"
    return "; ".join(details) or "no source"


def where_time_went(accounting: dict[str, Any] | None, sql_summary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The verdict's sentence on DB time against user response time, and its per-window chart."""
    if not accounting:
        return None
    user_s, db_s, ratio = accounting.get("user_response_time_s"), accounting.get("db_time_s"), accounting.get("db_time_ratio")
    sources = accounting.get("sources") or []
    if ratio is not None and user_s:
        share = f"{ratio * 100:.0f}%" if ratio >= 0.01 else f"{ratio * 100:.2g}%"
        origin = f"(DB time from {_sources_text(sources, 'db')}, user response time from {_sources_text(sources, 'user')})"
        if ratio <= 1.0:
            sentence = (f"The database worked {share} of the time users waited: {duration_text(db_s)} of {duration_text(user_s)} {origin}; "
                        "the rest was outside the database" + _connecting_text(accounting) + ".")
        else:
            sentence = (f"The database worked longer than users waited ({share}): {duration_text(db_s)} against {duration_text(user_s)} {origin}; "
                        "the DB side holds work these users did not wait for, or the two sides do not cover the same load.")
    else:
        known = (f"user response time {duration_text(user_s)} ({_sources_text(sources, 'user')})" if user_s is not None
                 else f"DB time {duration_text(db_s)} ({_sources_text(sources, 'db')})" if db_s is not None else None)
        # the histogram names looked for belong in the JSON, not in the verdict's sentence
        reason = _METRIC_LIST_RE.sub("", accounting.get("unavailable_reason") or "no ratio")
        sentence = "Where the time went is not known: " + reason + (f"; known: {known}." if known else ".")
    notes = list(accounting.get("notes") or []) + _other_db_time(db_s, accounting, sql_summary)
    view: dict[str, Any] = {"sentence": sentence, "ratio": ratio, "alignment": accounting.get("alignment"),
                            "details": [f"{s['side']}: {s['detail']}" for s in sources],
                            "period": (accounting.get("from"), accounting.get("to")), "notes": notes,
                            "windows": accounting.get("windows") or [], "chart": None}
    windows = [w for w in view["windows"] if _as_datetime(w["window_start"]) is not None]
    if len(windows) >= 2:  # one window says no more than the sentence
        slot = float(accounting.get("window_s") or 10.0)
        points = [(_as_datetime(w["window_start"]), w) for w in windows]
        start = min(p for p, _ in points)
        end = max(p for p, _ in points) + timedelta(seconds=slot)
        panels = [
            {"title": "User response time vs DB time per window", "unit": "s", "slot_s": slot, "series": [
                {"label": "user response time", "kind": "bar", "css": "s0", "points": [(p, w["user_response_time_s"]) for p, w in points]},
                {"label": "DB time", "kind": "bar", "css": "s1", "points": [(p, w["db_time_s"]) for p, w in points]},
            ]},
            {"title": "DB time / user response time", "unit": "%", "slot_s": slot, "top": 100.0, "series": [
                {"label": "ratio", "css": "s2", "format": "{:.1f}",
                 "points": [(p, w["ratio"] * 100.0 if w["ratio"] is not None else None) for p, w in points]},
            ]},
        ]
        view["chart"] = time_panels(panels, start, end)
    return view


_METRIC_LIST_RE = lazy_compile(r" \((?:[\w*]+_(?:seconds|milliseconds)(?:, )?)+\)")


def _other_db_time(db_s: float | None, accounting: dict[str, Any], sql_summary: dict[str, Any] | None) -> list[str]:
    """A note when Top SQL and the SQL findings count another DB time than this account (another source or span)."""
    logged = (sql_summary or {}).get("db_time_s")
    if db_s is None or not logged or abs(logged - db_s) <= 0.1 * max(logged, db_s):
        return []
    return [
        f"Top SQL and the SQL findings' shares count {duration_text(logged)} of statement time: every statement of the "
        f"statement logs ({sql_summary.get('first_seen')} to {sql_summary.get('last_seen')}); this account's DB time, "
        f"{duration_text(db_s)}, covers {accounting.get('from')} to {accounting.get('to')} from its own source."
    ]


def _connecting_text(accounting: dict[str, Any]) -> str:
    """", of it 314 s (98%) connecting: 105.0 ms per transaction" when the load tool measured connection set-up."""
    connect_s, share = accounting.get("connection_time_s"), accounting.get("connection_share_of_user_time")
    if not connect_s or share is None:
        return ""
    per_txn = accounting.get("connection_ms_per_transaction")
    each = f": {per_txn:,.1f} ms per transaction" if per_txn is not None else ""
    return f", of it {duration_text(connect_s)} ({share * 100:.0f}%) connecting{each}"


IDLE_ROWS = (("in_txn", "idle in a transaction", "#d93025"), ("not_in_txn", "idle between transactions", "#f9ab00"),
             ("sql_latency", "SQL latency", "#1a73e8"))


def _idle_gaps_view(gaps: dict[str, Any] | None) -> dict[str, Any] | None:
    """Idle-gap percentiles (in and out of transactions) next to SQL latency percentiles, as bars."""
    if not gaps:
        return None
    rows = []
    for quantile in ("p50", "p80", "p99"):
        for key, what, fill in IDLE_ROWS:
            value = (gaps.get(key) or {}).get(f"{quantile}_ms")
            if value is None:
                continue
            rows.append({"label": f"{quantile} {what}", "note": f"{tick_text(value)} ms", "segments": [
                {"value": value, "fill": fill, "title": f"{quantile} of {what}: {value:g} ms ({(gaps.get(key) or {}).get('count', 0):,} observations)"}]})
    has_gaps = any((gaps.get(k) or {}).get("p80_ms") is not None for k in ("in_txn", "not_in_txn"))
    chart = _log_hbar("Idle gaps between statements vs SQL latency (percentiles, ms)", "ms", rows) if has_gaps and rows else None
    return {"chart": chart, "rows": [{"key": k, "what": w, **(gaps.get(k) or {})} for k, w, _ in IDLE_ROWS],
            "colours": {w: f for _, w, f in IDLE_ROWS}}


def _log_hbar(title: str, unit: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """hbar_geometry, on a log scale when the values span more than two decades (0 stays a zero-width bar)."""
    values = [seg["value"] for row in rows for seg in row["segments"]]
    positive = [v for v in values if v > 0]
    if not positive or max(positive) / min(positive) <= LOG_SCALE_SPREAD:
        return hbar_geometry(title, unit, rows)
    low, high = math.floor(math.log10(min(positive))), math.ceil(math.log10(max(positive)))
    high = max(high, low + 1)
    decades = high - low
    scaled = [{**row, "segments": [{**seg, "value": (math.log10(seg["value"]) - low) if seg["value"] > 0 else 0.0} for seg in row["segments"]]}
              for row in rows]
    geometry = hbar_geometry(title + " (log scale)", unit, scaled, top=float(decades))
    plot_w = geometry["right"] - geometry["left"]
    geometry["ticks"] = [{"x": round(geometry["left"] + plot_w * i / decades, 1), "label": tick_text(10.0 ** (low + i))}
                         for i in range(decades + 1)]
    return geometry


TIMELINE_PANELS = (
    ("Throughput", "1/s", ("tps", "qps", "logged_qps"), True, None),  # app TPS next to DB QPS: log when 100x apart
    ("Latency", "ms", ("latency_p99", "latency_p999", "latency_p9999", "latency_p99_reported", "latency_p95_reported", "latency_avg", "latency_p50"), True, None),
    ("Connections", "sessions", ("connections", "session_limit"), False, None),
    ("CPU busy", "%", ("cpu_busy_mean", "cpu_busy_max"), False, 10.0),
    ("Softirq time (%soft)", "%", ("cpu_soft_mean", "cpu_soft_max"), False, 1.0),
    ("Disk request time (await)", "ms", ("disk_await",), True, None),  # a saturated volume 100x the others: log
    ("Disk %util", "%", ("disk_util",), False, 10.0),
    ("Swapping (vmstat si, so)", "KiB/s", ("swap_in", "swap_out"), False, 10.0),
    ("Runnable tasks (vmstat r)", "tasks", ("runnable",), False, None),
)


TIMELINE_SERIES_PER_PANEL = 6


SERIES_NAMES = {
    "cpu_busy_mean": "mean over CPUs", "cpu_busy_max": "busiest CPU", "cpu_soft_mean": "mean over CPUs", "cpu_soft_max": "busiest CPU",
    "latency_p99_reported": "p99 as reported", "latency_p95_reported": "p95 as reported", "latency_avg": "average",
    "session_limit": "limit", "logged_qps": "statements logged", "disk_await": "await", "disk_util": "%util", "swap_in": "swapped in (si)",
    "swap_out": "swapped out (so)", "runnable": "runnable (r)",
}


def _series_name(entry: dict[str, Any]) -> str:
    measure = entry["measure"]
    name = SERIES_NAMES.get(measure) or measure.replace("latency_", "")
    if entry.get("label"):
        name += f" {entry['label']}"
    if measure.startswith("cpu_") or (entry.get("label") and entry["label"] in entry["source"]):
        return name  # the CPU source is one; a gauge's label is its metric, its file says no more
    return f"{name} · {_short_source(entry['source'])}"


def _column_name(entry: dict[str, Any]) -> str:
    """A table header for a series: its id, where it comes from (but for the one CPU source) and its unit."""
    where = "" if entry["measure"].startswith("cpu_") else f" · {_short_source(entry['source'])}"
    return f"{entry['series']}{where} ({entry['unit']})"


def _short_source(source: str) -> str:
    """A legend's name for a source: the metric of a metrics file, else the file name (or how many files).

    >>> _short_source("capture/metrics/q.json (tidb_server_query_total)"), _short_source("a/x.log; b/x.log")
    ('tidb_server_query_total', '2 files')
    """
    path, _, metric = source.partition(" (")
    if metric:
        return metric.rstrip(")")
    if "; " in path:
        return f"{path.count('; ') + 1} files"
    return path.rsplit("/", 1)[-1]


def timeline_view(timeline: dict[str, Any] | None) -> dict[str, Any] | None:
    """Small multiples over the capture's time axis, event markers, and the per-window table."""
    if not timeline or not timeline.get("series"):
        return None
    start, end = _as_datetime(timeline.get("from")), _as_datetime(timeline.get("to"))
    slot = float(timeline["window_s"])
    entries = [e for e in timeline["series"] if e["points"]]
    panels, shown = [], []
    for title, unit, measures, log, min_top in TIMELINE_PANELS:
        chosen = sorted((e for e in entries if e["measure"] in measures), key=lambda e: measures.index(e["measure"]))[:TIMELINE_SERIES_PER_PANEL]
        if not chosen:
            continue
        shown += chosen
        high = max((p[1] for e in chosen for p in e["points"] if p[1] is not None), default=0.0)
        panels.append({"title": title, "unit": unit, "log": log, "slot_s": slot,
                       "top": max(min_top, nice_ceiling(high)) if min_top else None,
                       "series": [{"label": _series_name(e), "points": [(_as_datetime(p[0]), p[1]) for p in e["points"]]} for e in chosen]})
    # a line number is an address, not a quantity: never "1,719"; a change is named by its table, not its engine
    events = [{**e, "where": f"{e['source']}:{e['line']}" if e.get("line") is not None else e["source"],
               "about": e.get("table") or e.get("process") or e.get("component") or ""}
              for e in timeline.get("events", [])]
    markers = [{"ts": _as_datetime(e["ts"]), "label": f"{e['kind']} {e['about']}".strip(),
                "title": f"{e['ts']} {e['kind']}: {e.get('message') or ''} ({e['where']})"}
               for e in events if _as_datetime(e["ts"]) is not None]
    chart = time_panels(panels, start, end, markers) if start and end and panels else None
    tabled = ("tps", "qps", "logged_qps", "latency_p99", "latency_p999", "latency_p9999", "connections", "session_limit",
              "cpu_busy_mean", "cpu_busy_max", "cpu_soft_mean", "cpu_soft_max")
    columns = [e for e in shown if e["measure"] in tabled][:12]
    by_window: dict[str, dict[int, float]] = {}
    for index, entry in enumerate(columns):
        for when, value in entry["points"]:
            by_window.setdefault(when, {})[index] = value
    table = {"columns": [_column_name(e) for e in columns],
             "rows": [[when] + [values.get(i) for i in range(len(columns))] for when, values in sorted(by_window.items())]}
    summary = []
    for entry in timeline["series"]:
        values = [p[1] for p in entry["points"] if p[1] is not None]
        summary.append({"series": entry["series"], "source": entry["source"], "unit": entry["unit"], "windows": len(values),
                        "min": min(values) if values else None, "mean": sum(values) / len(values) if values else None,
                        "max": max(values) if values else None, "min_samples": entry.get("min_samples"),
                        "suppressed_windows": entry.get("suppressed_windows") or 0, "note": entry.get("note")})
    return {"chart": chart, "table": table, "summary": summary, "sources": timeline.get("sources", []),
            "events": events, "notes": timeline.get("notes", []), "window_s": slot,
            "requested_window_s": timeline.get("requested_window_s"), "from": timeline.get("from"), "to": timeline.get("to")}
