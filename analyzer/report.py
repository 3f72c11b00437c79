"""Report: an ``Analysis`` -> the findings JSON (the contract), then HTML and Markdown from templates.

The JSON document is built first; HTML and Markdown are rendered from it plus chart geometry,
so the three formats always carry the same numbers. Templates do the markup; this module
only arranges data (and computes bar positions, which jinja would make unreadable).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import dbdiag
from dbdiag import flamegraph, markdown, pseudonymize, redact_text
from dbdiag.charts import time_panels
from dbdiag.findings import Finding, Status
from dbdiag.verdict import rank_findings, verdict
from dbdiag.pipeline import Analysis
from dbdiag.units import seconds

if TYPE_CHECKING:  # jinja2 is imported for HTML and Markdown only: JSON runs skip it
    from jinja2 import Environment

SCHEMA_VERSION = 1
FORMATS = ("html", "json", "md")

CHART_WIDTH_PX = 1160
CHART_HEIGHT_PX = 260
CHART_MARGIN_LEFT_PX = 48
CHART_MARGIN_BOTTOM_PX = 44
BAR_GAP_PX = 1
GROUP_GAP_PX = 10
MAX_BAR_WIDTH_PX = 48
MIN_PERCENT_SCALE = 10.0


def findings_of(analysis: Analysis) -> list[Finding]:
    return rank_findings(f for outcome in analysis.outcomes for f in outcome.findings)


def _json_safe(value: Any) -> Any:
    """Plain JSON values: NaN/inf become null, tuples lists, datetimes ISO strings."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def build_document(analysis: Analysis, generated_at: datetime | None = None) -> dict[str, Any]:
    """The findings JSON (DESIGN.md contract, schema in ``dbdiag/schema/findings.schema.json``)."""
    findings = findings_of(analysis)
    capture = analysis.capture
    document = {
        "schema_version": SCHEMA_VERSION,
        "dbdiag_version": dbdiag.__version__,
        "generated_at": generated_at.isoformat() if generated_at else None,
        "capture": {
            "source": capture.source,
            "container": capture.container,
            "members": len(capture.members),
            "partial": bool(analysis.partial_reasons),
            "partial_reasons": analysis.partial_reasons,
            "tz": analysis.tz,
            "tz_origin": analysis.tz_origin,
            "privacy": _privacy(analysis),
        },
        "verdict": verdict(findings, analysis.outcomes, bool(analysis.recognised)),
        "inputs": [
            {
                "path": r.path,
                "kind": r.kind,
                "status": r.status,
                "size_bytes": r.size_bytes,
                "records": r.records,
                "warnings": _inventory_text(r.warnings, analysis),
                "notes": _inventory_text(r.notes, analysis),
                "skipped": r.skipped,
                "error": r.error,
                "time_range": [str(v) for v in r.time_range] if r.time_range else None,
            }
            for r in analysis.inputs
        ],
        "rules": [o.to_json() for o in analysis.outcomes],
        "findings": [f.to_json() for f in findings],
        "metrics": _metrics(analysis),
    }
    document = _json_safe(document)
    if not analysis.options.pseudonymize:
        return document
    # the last step, on the whole document: every format rendered from it shows the same pseudonyms
    paths = [capture.source] + [r.path for r in analysis.inputs]
    names = pseudonymize.collect_names(analysis.tables, paths)
    document, counts = pseudonymize.pseudonymize_document(document, names, paths)
    document["capture"]["privacy"]["pseudonyms"] = dict(vars(counts))
    return document


def _privacy(analysis: Analysis) -> dict[str, Any]:
    """The two privacy modes of this report, in words for the reader and as fields for machines."""
    shown, pseudonymized = analysis.options.show_literals, analysis.options.pseudonymize
    return {
        "literals": "shown" if shown else "replaced",
        "literals_detail": ("SQL literals shown as captured (--show-literals)" if shown else
                            "SQL literals replaced by ? in statements, plans, log lines and load-test labels"),
        "names": "pseudonymized" if pseudonymized else "kept",
        "names_detail": ("host names, IP addresses, user and database names replaced by pseudonyms (--pseudonymize)"
                         if pseudonymized else "host names, IP addresses, user and database names as captured (--pseudonymize replaces them)"),
        "pseudonyms": None,
    }


def _inventory_text(texts: list[str], analysis: Analysis) -> list[str]:
    """Parse warnings and notes quote bits of lines: their SQL redacted like log lines'."""
    if analysis.options.show_literals:
        return texts
    return [redact_text.redact_log_line(text) for text in texts]


def _metrics(analysis: Analysis) -> dict[str, Any]:
    """The derived metrics, plus the per-node NUMA table when derive left it as a table only."""
    metrics = dict(analysis.derived.metrics)
    numa = analysis.derived.tables.get("numa_remote")
    if "numa_remote" not in metrics and numa is not None and numa.height:
        metrics["numa_remote"] = numa.to_dicts()
    return metrics


def render_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def chart_geometry(chart: dict[str, Any]) -> dict[str, Any]:
    """Bar rectangles for a grouped bar chart (dict form of ``findings.Chart``), in SVG pixels."""
    groups = chart["groups"]
    bar_count = sum(len(g["bars"]) for g in groups) or 1
    plot_width = CHART_WIDTH_PX - CHART_MARGIN_LEFT_PX - GROUP_GAP_PX * max(len(groups) - 1, 0)
    bar_width = min(max(plot_width / bar_count - BAR_GAP_PX, 1.0), MAX_BAR_WIDTH_PX)
    values = [b["value"] for g in groups for b in g["bars"]] + [chart.get("threshold") or 0.0]
    top = _nice_ceiling(max(values) if values else 1.0)
    if chart["unit"] == "%":
        # A 0.1% maximum must not look like a full bar: percent charts span at least 0-10%.
        top = max(top, MIN_PERCENT_SCALE)
    plot_height = CHART_HEIGHT_PX - CHART_MARGIN_BOTTOM_PX - 10
    x = float(CHART_MARGIN_LEFT_PX)
    out_groups = []
    for group in groups:
        start = x
        bars = []
        for bar in group["bars"]:
            height = plot_height * (bar["value"] / top) if top else 0.0
            bars.append({**bar, "x": round(x, 1), "w": round(bar_width, 1), "h": round(height, 1), "y": round(10 + plot_height - height, 1)})
            x += bar_width + BAR_GAP_PX
        out_groups.append({"label": group["label"], "bars": bars, "x0": round(start, 1), "x1": round(x - BAR_GAP_PX, 1)})
        x += GROUP_GAP_PX
    ticks = [{"value": top * i / 4, "y": round(10 + plot_height - plot_height * i / 4, 1)} for i in range(5)]
    threshold = chart.get("threshold")
    return {
        "title": chart["title"],
        "unit": chart["unit"],
        "width": CHART_WIDTH_PX,
        "height": CHART_HEIGHT_PX,
        "left": CHART_MARGIN_LEFT_PX,
        "plot_bottom": 10 + plot_height,
        "groups": out_groups,
        "ticks": ticks,
        "show_bar_labels": bar_count <= 32,
        "threshold": threshold,
        "threshold_y": round(10 + plot_height - plot_height * threshold / top, 1) if threshold else None,
        "threshold_label": chart.get("threshold_label"),
    }


def _nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


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


LINE_CHART_WIDTH_PX = 1160
LINE_CHART_HEIGHT_PX = 240
LINE_MARGIN_LEFT_PX = 64
LINE_MARGIN_BOTTOM_PX = 28
LOG_SCALE_SPREAD = 100.0  # y on a log scale when max/min of the values exceeds this


def line_chart_geometry(title: str, unit: str, series: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Polylines for time series: ``series`` = [{"label", "points": [(datetime, value)]}] in SVG pixels."""
    points = [(when, value) for s in series for when, value in s["points"] if when is not None and value is not None and value > 0]
    if len(points) < 2:
        return None
    times = [when.timestamp() for when, _ in points]
    values = [value for _, value in points]
    t0, t1 = min(times), max(times)
    low, high = min(values), max(values)
    log_y = high / low > LOG_SCALE_SPREAD
    if log_y:
        y_low, y_high = math.floor(math.log10(low)), math.ceil(math.log10(high))
        y_high = max(y_high, y_low + 1)
        ticks_values = [10.0**e for e in range(y_low, y_high + 1)]
        def scale(v: float) -> float:
            return (math.log10(v) - y_low) / (y_high - y_low)
    else:
        top = _nice_ceiling(high)
        ticks_values = [top * i / 4 for i in range(5)]
        def scale(v: float) -> float:
            return v / top
    plot_w = LINE_CHART_WIDTH_PX - LINE_MARGIN_LEFT_PX - 10
    plot_h = LINE_CHART_HEIGHT_PX - LINE_MARGIN_BOTTOM_PX - 10
    def x_of(ts: float) -> float:
        return LINE_MARGIN_LEFT_PX + (plot_w * (ts - t0) / (t1 - t0) if t1 > t0 else plot_w / 2)
    def y_of(v: float) -> float:
        return 10 + plot_h - plot_h * scale(v)
    out_series = []
    for index, s in enumerate(series):
        pts = [(x_of(w.timestamp()), y_of(v), w, v) for w, v in s["points"] if w is not None and v is not None and v > 0]
        out_series.append({
            "label": s["label"],
            "css": f"s{index % 6}",
            "path": " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in pts),
            "dots": [{"x": round(x, 1), "y": round(y, 1), "title": f"{w:%H:%M:%S} {_tick(v)} {unit}"} for x, y, w, v in pts],
        })
    x_ticks = [
        {
            "x": round(x_of(t0 + (t1 - t0) * i / 4), 1),
            "label": datetime.fromtimestamp(t0 + (t1 - t0) * i / 4, tz=points[0][0].tzinfo).strftime("%H:%M:%S"),
            "anchor": ("start", "middle", "middle", "middle", "end")[i],
        }
        for i in range(5)
    ]
    return {
        "title": title + (" (log scale)" if log_y else ""),
        "unit": unit,
        "width": LINE_CHART_WIDTH_PX,
        "height": LINE_CHART_HEIGHT_PX,
        "left": LINE_MARGIN_LEFT_PX,
        "plot_bottom": 10 + plot_h,
        "series": out_series,
        "y_ticks": [{"y": round(y_of(v), 1), "label": _tick(v)} for v in ticks_values],
        "x_ticks": x_ticks,
    }


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


HBAR_WIDTH_PX = 1160
HBAR_LABEL_PX = 190
HBAR_NOTE_PX = 250
HBAR_ROW_PX = 22
FLAME_WIDTH_PX = 1160


def hbar_geometry(title: str, unit: str, rows: list[dict[str, Any]], top: float | None = None) -> dict[str, Any]:
    """Horizontal (optionally stacked) bars: ``rows`` = [{"label", "note", "segments": [{"value", "fill", "title"}]}].

    The scale runs from 0 to ``top`` (default: round steps just above the longest bar).

    >>> g = hbar_geometry("t", "%", [{"label": "a", "note": "", "segments": [{"value": 30.0, "fill": "red", "title": "a"}]}], top=100)
    >>> g["rows"][0]["segments"][0]["w"], g["rows"][0]["y"]
    (216.0, 6)
    >>> [tick["label"] for tick in hbar_geometry("t", "%", [{"label": "a", "note": "", "segments": [{"value": 31.8, "fill": "red", "title": "a"}]}])["ticks"]]
    ['0', '10', '20', '30', '40']
    """
    longest = max((sum(seg["value"] for seg in row["segments"]) for row in rows), default=0.0)
    if top:
        step = top / 4
    else:
        step = _nice_ceiling(longest / 4)  # round steps: 0 10 20 30 40, not 0 12.5 25 37.5 50
        top = step * max(math.ceil(longest / step - 1e-9), 1)
    plot_w = HBAR_WIDTH_PX - HBAR_LABEL_PX - HBAR_NOTE_PX
    out_rows = []
    for index, row in enumerate(rows):
        x = float(HBAR_LABEL_PX)
        segments = []
        for seg in row["segments"]:
            w = plot_w * seg["value"] / top
            segments.append({**seg, "x": round(x, 1), "w": round(w, 1)})
            x += w
        out_rows.append({**row, "y": 6 + index * HBAR_ROW_PX, "segments": segments})
    ticks = [{"x": round(HBAR_LABEL_PX + plot_w * step * i / top, 1), "label": _tick(step * i)} for i in range(round(top / step) + 1)]
    return {
        "title": title,
        "unit": unit,
        "width": HBAR_WIDTH_PX,
        "height": 12 + len(rows) * HBAR_ROW_PX + 16,
        "left": HBAR_LABEL_PX,
        "right": HBAR_LABEL_PX + plot_w,
        "bar_h": HBAR_ROW_PX - 6,
        "rows": out_rows,
        "ticks": ticks,
        "axis_y": 6 + len(rows) * HBAR_ROW_PX,
    }


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
            "note": f"remote {100.0 * remote / total:.1f}% of {_tick(total)} pages",
            "segments": [
                {"value": 100.0 * local / total, "fill": "#8ab4f8", "title": f"node {row['node']}: {local:,} pages local ({100.0 * local / total:.1f}%)"},
                {"value": 100.0 * remote / total, "fill": "#d93025", "title": f"node {row['node']}: {remote:,} pages from another node ({100.0 * remote / total:.1f}%)"},
            ],
        })
    since_boot = any(row.get("since_boot") for row in rows)
    title = "Pages allocated on the local vs another node (local_node / other_node" + (", since boot)" if since_boot else ", during the capture)")
    return {"rows": rows, "since_boot": since_boot, "chart": hbar_geometry(title, "%", bars, top=100.0) if bars else None}


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
        "where_time_went": _where_time_went(document["metrics"].get("time_accounting"), document["metrics"].get("sql_summary")),
        "idle_gaps": _idle_gaps_view(document["metrics"].get("idle_gaps")),
        "timeline": _timeline_view(document["metrics"].get("timeline")),
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


def _duration(value: float | None) -> str:
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


def _where_time_went(accounting: dict[str, Any] | None, sql_summary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The verdict's sentence on DB time against user response time, and its per-window chart."""
    if not accounting:
        return None
    user_s, db_s, ratio = accounting.get("user_response_time_s"), accounting.get("db_time_s"), accounting.get("db_time_ratio")
    sources = accounting.get("sources") or []
    if ratio is not None and user_s:
        share = f"{ratio * 100:.0f}%" if ratio >= 0.01 else f"{ratio * 100:.2g}%"
        origin = f"(DB time from {_sources_text(sources, 'db')}, user response time from {_sources_text(sources, 'user')})"
        if ratio <= 1.0:
            sentence = (f"The database worked {share} of the time users waited: {_duration(db_s)} of {_duration(user_s)} {origin}; "
                        "the rest was outside the database" + _connecting_text(accounting) + ".")
        else:
            sentence = (f"The database worked longer than users waited ({share}): {_duration(db_s)} against {_duration(user_s)} {origin}; "
                        "the DB side holds work these users did not wait for, or the two sides do not cover the same load.")
    else:
        known = (f"user response time {_duration(user_s)} ({_sources_text(sources, 'user')})" if user_s is not None
                 else f"DB time {_duration(db_s)} ({_sources_text(sources, 'db')})" if db_s is not None else None)
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


_METRIC_LIST_RE = re.compile(r" \((?:[\w*]+_(?:seconds|milliseconds)(?:, )?)+\)")


def _other_db_time(db_s: float | None, accounting: dict[str, Any], sql_summary: dict[str, Any] | None) -> list[str]:
    """A note when Top SQL and the SQL findings count another DB time than this account (another source or span)."""
    logged = (sql_summary or {}).get("db_time_s")
    if db_s is None or not logged or abs(logged - db_s) <= 0.1 * max(logged, db_s):
        return []
    return [
        f"Top SQL and the SQL findings' shares count {_duration(logged)} of statement time: every statement of the "
        f"statement logs ({sql_summary.get('first_seen')} to {sql_summary.get('last_seen')}); this account's DB time, "
        f"{_duration(db_s)}, covers {accounting.get('from')} to {accounting.get('to')} from its own source."
    ]


def _connecting_text(accounting: dict[str, Any]) -> str:
    """", of it 314 s (98%) connecting: 105.0 ms per transaction" when the load tool measured connection set-up."""
    connect_s, share = accounting.get("connection_time_s"), accounting.get("connection_share_of_user_time")
    if not connect_s or share is None:
        return ""
    per_txn = accounting.get("connection_ms_per_transaction")
    each = f": {per_txn:,.1f} ms per transaction" if per_txn is not None else ""
    return f", of it {_duration(connect_s)} ({share * 100:.0f}%) connecting{each}"


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
            rows.append({"label": f"{quantile} {what}", "note": f"{_tick(value)} ms", "segments": [
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
    geometry["ticks"] = [{"x": round(geometry["left"] + plot_w * i / decades, 1), "label": _tick(10.0 ** (low + i))}
                         for i in range(decades + 1)]
    return geometry


TIMELINE_PANELS = (
    ("Throughput", "1/s", ("tps", "qps", "logged_qps"), True, None),  # app TPS next to DB QPS: log when 100x apart
    ("Latency", "ms", ("latency_p99", "latency_p999", "latency_p9999", "latency_p99_reported", "latency_p95_reported", "latency_avg", "latency_p50"), True, None),
    ("Connections", "sessions", ("connections", "session_limit"), False, None),
    ("CPU busy", "%", ("cpu_busy_mean", "cpu_busy_max"), False, 10.0),
    ("Softirq time (%soft)", "%", ("cpu_soft_mean", "cpu_soft_max"), False, 1.0),
)
TIMELINE_SERIES_PER_PANEL = 6
SERIES_NAMES = {
    "cpu_busy_mean": "mean over CPUs", "cpu_busy_max": "busiest CPU", "cpu_soft_mean": "mean over CPUs", "cpu_soft_max": "busiest CPU",
    "latency_p99_reported": "p99 as reported", "latency_p95_reported": "p95 as reported", "latency_avg": "average",
    "session_limit": "limit", "logged_qps": "statements logged",
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


def _timeline_view(timeline: dict[str, Any] | None) -> dict[str, Any] | None:
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
                       "top": max(min_top, _nice_ceiling(high)) if min_top else None,
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


def _template_env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    # Autoescape every HTML template (SQL and log text are hostile input); Markdown gets
    # its own escaping filter instead, since HTML entities would garble a pasted ticket.
    env = Environment(
        loader=PackageLoader("dbdiag.report_templates", "."),
        autoescape=lambda name: not (name or "").endswith(".md.j2"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = markdown_cell
    env.filters["code"] = lambda value, table=False: markdown.code(str(value), table=table)
    env.filters["fenced"] = lambda value: markdown.fenced(str(value))
    env.filters["num"] = _number
    env.filters["tick"] = _tick
    env.filters["secs"] = seconds
    env.filters["dur"] = _duration
    return env


def markdown_cell(value: Any) -> str:
    """A value as inert Markdown text (numbers formatted as in the HTML); see ``dbdiag.markdown``."""
    return markdown.inline(_number(value))


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def _tick(value: float) -> str:
    """Axis labels: short (1.5M, 250k, 25)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def render_html(document: dict[str, Any]) -> str:
    env = _template_env()
    view = build_view(document)
    view["flame_script"] = view["flame_script_hash"] = None
    if view["cpu_profile"] and view["cpu_profile"]["flame"]:
        view["flame_script"], view["flame_script_hash"] = flame_script(env)
    return env.get_template("report.html.j2").render(view=view)


def flame_script(env: Environment) -> tuple[Any, str]:
    """The flame graph's zoom/search script and its CSP source (``'sha256-...'``), hashed from the
    exact text put between the ``<script>`` tags, so the policy allows that script and nothing else."""
    from markupsafe import Markup

    text = env.get_template("flame.js.j2").render()
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return Markup(text), Markup(f"'sha256-{digest}'")


def render_markdown(document: dict[str, Any]) -> str:
    return _template_env().get_template("report.md.j2").render(view=build_view(document))


def render(document: dict[str, Any], fmt: str) -> str:
    return {"html": render_html, "json": render_json, "md": render_markdown}[fmt](document)
