"""Report: where the time went (verdict), idle gaps vs SQL latency, the timeline; Markdown tables; schema."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.charts import time_panels
from dbdiag.derive.timeline import timeline
from dbdiag.report import build_document, render_html, render_json, render_markdown

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
HOSTILE = '<script>alert("x")</script>'
T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def iso(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def _document(metrics: dict) -> dict:
    return {
        "schema_version": 1, "dbdiag_version": "0", "generated_at": None,
        "capture": {"source": "c", "container": "file", "members": 1, "partial": False, "partial_reasons": [], "tz": "UTC", "tz_origin": "default"},
        "verdict": {"status": "healthy", "headline": "h", "findings": [], "findings_by_severity": {"critical": 0, "warning": 0, "info": 0}, "rules_by_status": {"fired": 0, "passed": 0, "skipped": 0, "errored": 0}},
        "inputs": [], "rules": [], "findings": [], "metrics": metrics,
    }


def accounting(windows: int = 3, ratio: float | None = 0.13) -> dict:
    rows = [{"window_start": iso(10 * i), "user_response_time_s": 6000.0, "db_time_s": 780.0, "ratio": 0.13} for i in range(windows)]
    return {
        "user_response_time_s": 18000.0, "db_time_s": 2340.0 if ratio is not None else None, "db_time_ratio": ratio,
        "sources": [
            {"side": "user", "kind": "jmeter-samples", "detail": f"JMeter Σ elapsed of all samples from app/{HOSTILE}.jtl (18,000 samples)",
             "source": f"app/{HOSTILE}.jtl", "from": iso(0), "to": iso(30), "count": 18000, "seconds": 18000.0},
        ] + ([{"side": "db", "kind": "db-time-metric", "detail": "increase of tidb_server_handle_query_duration_seconds_sum",
               "source": "m.json", "from": iso(0), "to": iso(30), "count": 2, "seconds": 2340.0}] if ratio is not None else []),
        "from": iso(0), "to": iso(30), "alignment": "timestamps: both sums over the overlap of the two sides' coverage",
        "window_s": 10.0, "windows": rows, "notes": [],
        "unavailable_reason": None if ratio is not None else "no DB time: the slow log has a threshold",
    }


IDLE = {
    "in_txn": {"count": 1000, "p50_ms": 2.75, "p80_ms": 25.0, "p99_ms": 75.6, "mean_ms": 9.1},
    "not_in_txn": {"count": 500, "p50_ms": 2.5, "p80_ms": 8.0, "p99_ms": 128.0, "mean_ms": 7.0},
    "sql_latency": {"count": 1500, "p50_ms": 0.48, "p80_ms": 3.84, "p99_ms": 7.82, "mean_ms": 1.3},
    "source": ["metrics/idle.json"], "method": "metrics", "method_detail": "TiDB histograms", "resolution_ms": None,
    "unavailable_reason": None, "notes": [],
}


def timeline_metric() -> dict:
    samples = t.conform(t.LOAD_SAMPLE, pl.DataFrame({
        # one sample ends every 0.1 s (the timeline places JMeter samples at their end)
        "start_ts": [T0 + timedelta(seconds=i * 0.1, milliseconds=-(i % 100 + 1)) for i in range(1200)],
        "elapsed_ms": [float(i % 100 + 1) for i in range(1200)],
        "label": [HOSTILE if i % 2 else "login" for i in range(1200)], "source": "app/results.jtl",
    }))
    cpu = t.conform(t.CPU_UTIL, pl.DataFrame({
        "ts": [T0 + timedelta(seconds=s) for s in range(1, 121) for _ in (0, 1)], "cpu": [c for _ in range(1, 121) for c in (0, 1)],
        "idle_pct": 50.0, "iowait_pct": 0.0, "soft_pct": [s % 7 * 1.0 for s in range(1, 121) for _ in (0, 1)], "source": "os/mpstat.txt",
    }))
    events = t.conform(t.EVENT, pl.DataFrame({
        "ts": [T0 + timedelta(seconds=31), T0 + timedelta(seconds=33)], "component": ["kernel", "tikv"], "kind": ["oom-kill", "start"],
        "process": ["tikv-server", "tikv-server"], "message": [f"Killed process 7 {HOSTILE}", "Welcome to TiKV"],
        "source": ["os/dmesg.txt", "db/tikv.log"], "line": [4, 1],
    }))
    _, metric = timeline({t.LOAD_SAMPLE: samples, t.CPU_UTIL: cpu, t.EVENT: events}, window_s=10.0)
    return metric


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads(render_json(_document({"time_accounting": accounting(), "idle_gaps": IDLE, "timeline": timeline_metric()})))


# ------------------------------------------------------------ verdict


def test_verdict_says_where_the_time_went(document) -> None:
    html = render_html(document)
    verdict = html[html.index('<section class="verdict'): html.index("</section>")]
    assert ("The database worked 13% of the time users waited: 2,340 s of 18,000 s (DB time from increase of "
            "tidb_server_handle_query_duration_seconds_sum, user response time from JMeter Σ elapsed of all samples from app/"
            "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;.jtl); the rest was outside the database.") in verdict
    assert "Summed: user: JMeter Σ elapsed of all samples from app/&lt;script&gt;" in verdict
    chart = verdict[verdict.index("<svg"): verdict.index("</svg>")]
    assert chart.count('<rect class="tbar') == 6  # user and DB per window, 3 windows
    assert chart.count('<circle class="dot') == 3  # the ratio per window
    assert "ratio 02:00:10: 13.0 %" in chart


def test_one_window_gets_no_chart() -> None:
    html = render_html(json.loads(render_json(_document({"time_accounting": accounting(windows=1)}))))
    assert "The database worked 13% of the time users waited" in html and "<svg" not in html


def test_verdict_without_a_ratio_gives_the_reason() -> None:
    html = render_html(json.loads(render_json(_document({"time_accounting": accounting(ratio=None)}))))
    assert "Where the time went is not known: no DB time: the slow log has a threshold; known: user response time 18,000 s" in html
    assert 'class="chart panels"' in html  # its windows still drawn


def test_no_sentence_or_sections_without_the_metrics() -> None:
    html = render_html(_document({}))
    markdown = render_markdown(_document({}))
    for marker in ('id="where-time-went"', 'id="idle-gaps"', 'id="timeline"', "chart panels"):
        assert marker not in html
    assert "Where the time went" not in markdown and "### Timeline" not in markdown and "Idle gaps" not in markdown


# ------------------------------------------------------------ idle gaps


def test_idle_gap_chart_has_three_bars_per_percentile(document) -> None:
    html = render_html(document)
    section = html[html.index('id="idle-gaps"'): html.index('id="timeline"')]
    chart = section[section.index("<svg"): section.index("</svg>")]
    assert chart.count("<rect") == 9
    assert "p80 idle in a transaction" in chart and "25 ms" in chart and "p80 SQL latency" in chart and "3.84 ms" in chart
    assert "(log scale)" in section  # 0.48 to 128 ms: over 100x
    assert re.search(r"idle in a transaction</td><td class=\"num\">1,000</td><td class=\"num\">2.75</td>\s*<td class=\"num\">25.00</td>", section)


def test_idle_gaps_without_percentiles_show_the_reason_and_no_chart() -> None:
    gaps = {**IDLE, "in_txn": {"count": 5605, "p50_ms": None, "p80_ms": None, "p99_ms": None, "mean_ms": None},
            "not_in_txn": {"count": 287, "p50_ms": None, "p80_ms": None, "p99_ms": None, "mean_ms": None},
            "method": "statements", "resolution_ms": 1000.0, "unavailable_reason": f"resolution of 1 s {HOSTILE}"}
    document = json.loads(render_json(_document({"idle_gaps": gaps})))
    html = render_html(document)
    section = html[html.index('id="idle-gaps"'):]
    assert "<svg" not in section
    assert "Idle-gap percentiles unavailable: resolution of 1 s &lt;script&gt;" in section
    assert "timestamp resolution 1.0 s" in section
    markdown = render_markdown(document)
    assert "| idle in a transaction | 5,605 | — | — | — | — |" in markdown
    assert "Idle-gap percentiles unavailable: resolution of 1 s &lt;script&gt;" in markdown


# ------------------------------------------------------------ timeline


def test_timeline_panels_share_the_axis_with_markers(document) -> None:
    metric = document["metrics"]["timeline"]
    html = render_html(document)
    section = html[html.index('id="timeline"'):]
    chart = section[section.index("<svg"): section.index("</svg>")]
    titles = re.findall(r'<text class="panel-title"[^>]*>([^<]*)</text>', chart)
    assert titles == ["Throughput (1/s)", "Latency (ms)", "CPU busy (%)", "Softirq time (%soft) (%)"]
    tps = next(s for s in metric["series"] if s["series"] == "tps")
    cpu = next(s for s in metric["series"] if s["series"] == "cpu_busy_mean")
    assert len(tps["points"]) == 12 and len(cpu["points"]) == 12  # 120 s in 10 s windows
    # one dot per window and series: tps, per label x2, p50, p99 (100 samples a window), CPU and soft x2
    drawn = [s for s in metric["series"] if s["points"] and not s["series"].startswith("event")]
    assert chart.count('<circle class="dot') == sum(len(s["points"]) for s in drawn)
    markers = re.findall(r'<g class="marker"><title>([^<]*)</title>\s*<line x1="([\d.]+)"', chart)
    assert len(markers) == 2 and markers[0][0].startswith("2024-05-14T02:00:31+00:00 oom-kill: Killed process 7 &lt;script&gt;")
    assert ">oom-kill tikv-server</text>" in chart and ">start tikv-server</text>" in chart  # the second label on its own row
    # the CPU window 02:00:30 and the marker at 02:00:31 sit on the same x scale
    x_dots = sorted({float(x) for x in re.findall(r'<circle class="dot s0" cx="([\d.]+)"', chart)})
    assert x_dots[0] < float(markers[0][1]) < x_dots[-1]
    assert "<script>" not in html
    assert '>tps &lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; · results.jtl</text>' in chart  # a hostile JMeter label


def test_timeline_tables_and_sources(document) -> None:
    html = render_html(document)
    section = html[html.index('id="timeline"'):]
    assert "Sources and their clocks" in section and "os/mpstat.txt" in section and "own timestamps, not shifted" in section
    assert re.search(r'<td class="sql">latency_p999</td><td class="path">app/results.jtl</td><td>ms</td><td class="num">0</td>', section)
    assert "Values per window (12 windows)" in section


def test_markdown_has_the_numbers_as_tables(document) -> None:
    markdown = render_markdown(document)
    assert "<svg" not in markdown and "<script>" not in markdown
    assert "**Where the time went:** The database worked 13% of the time users waited: 2,340 s of 18,000 s" in markdown
    assert "| 2024-05-14T02:00:00+00:00 | 6,000 | 780.00 | 13.00 |" in markdown
    assert "| idle in a transaction | 1,000 | 2.75 | 25.00 | 75.60 | 9.10 |" in markdown
    assert "### Timeline" in markdown
    assert "| tps | app/results.jtl | 1/s | 12 | 10.00 | 10.00 | 10.00 |  |  |" in markdown
    assert "| latency_p999 | app/results.jtl | ms | 0 | — | — | — | 12 | only for windows with at least 1,000 observations |" in markdown
    assert "Killed process 7 &lt;script&gt;alert" in markdown
    assert '| tps\\[&lt;script&gt;alert("x")&lt;/script&gt;\\] | app/results.jtl | 1/s | 12 | 5.00 |' in markdown
    header = next(line for line in markdown.splitlines() if line.startswith("| window start (UTC) | tps"))
    row = next(line for line in markdown.splitlines() if line.startswith("| 2024-05-14T02:00:00+00:00 | 10.00"))
    assert header.count("|") == row.count("|") == 10  # window, tps and per label x2, p99, CPU busy mean and max, soft mean and max


def test_schema_accepts_the_timeline_and_rejects_a_broken_one(document) -> None:
    jsonschema.validate(document, SCHEMA)
    broken = json.loads(json.dumps(document))
    broken["metrics"]["timeline"]["sources"][0]["clock"] = "guessed"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    broken = json.loads(json.dumps(document))
    del broken["metrics"]["timeline"]["series"][0]["points"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_time_panels_break_lines_at_missing_windows_and_skip_empty_panels() -> None:
    points = [(T0 + timedelta(seconds=s), 1.0) for s in (0, 10, 20, 60, 70)]
    geometry = time_panels([
        {"title": "A", "unit": "1/s", "slot_s": 10.0, "series": [{"label": "a", "points": points}]},
        {"title": "empty", "unit": "%", "series": [{"label": "b", "points": [(T0, None)]}]},
    ], T0, T0 + timedelta(seconds=80))
    assert [p["title"] for p in geometry["panels"]] == ["A (1/s)"]
    segments = geometry["panels"][0]["lines"][0]["segments"]
    assert [len(seg.split()) for seg in segments] == [3, 2]
    assert time_panels([], T0, T0 + timedelta(seconds=1)) is None


# ------------------------------------------------------------ a real capture, end to end


def test_postgres_capture_report(corpus) -> None:
    from dbdiag.pipeline import analyze

    analysis = analyze(corpus / "captures" / "postgres-pgbench-debian12.tar.gz")
    if "timeline" not in analysis.derived.metrics:  # until derive_all computes it
        _, metric = timeline(analysis.tables, 10.0, analysis.derived.metrics.get("time_accounting"))
        analysis.derived.metrics["timeline"] = metric
    document = json.loads(render_json(build_document(analysis)))
    jsonschema.validate(document, SCHEMA)
    html = render_html(document)
    # user time: 311 x 1.599 ms + the initial connection time pgbench printed, 4 clients x 10.629 ms
    assert "The database worked 56% of the time users waited: 304.4 ms of 539.8 ms" in html
    section = html[html.index('id="timeline"'):]
    assert "pgbench prints no wall-clock time: its progress lines are placed at 2026-11-29T19:12:27.180883+00:00" in section
    idle = html[html.index('id="idle-gaps"'): html.index('id="timeline"')]
    chart = idle[idle.index("<svg"): idle.index("</svg>")]
    assert chart.count("<rect") == 9 and ">0 ms</text>" in chart  # p50 in a transaction: 0 ms, a bar of no width


def test_event_rows_name_the_table_and_keep_line_numbers_unformatted():
    from dbdiag.pipeline import analyze
    from dbdiag.report import build_document
    from dbdiag.report_view import timeline_view

    capture = Path(__file__).resolve().parent.parent / "fixtures" / "causes" / "mariadb-ignored-index.tar.gz"
    document = build_document(analyze(capture))
    view = timeline_view(document["metrics"]["timeline"])
    ignored = next(e for e in view["events"] if e["kind"] == "index-ignored")
    assert ignored["where"] == "capture/db/mariadb-slow.log:2038" and ignored["about"] == "orders"
    html = render_html(document)
    assert "capture/db/mariadb-slow.log:2038" in html and "mariadb-slow.log:2,038" not in html
