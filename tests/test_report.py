"""Report rendering: chart geometry, escaping in HTML and Markdown, formats agree."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from dbdiag.report import render_html, render_markdown
from dbdiag.report_geometry import chart_geometry, line_chart_geometry

T0 = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)


def bar_chart(values: list[float], unit: str = "%") -> dict:
    return {"title": "t", "unit": unit, "groups": [{"label": "node 0", "bars": [{"label": f"CPU {i}", "value": v, "highlight": False} for i, v in enumerate(values)]}]}


def test_percent_bars_never_blow_up_tiny_values():
    geometry = chart_geometry(bar_chart([0.1, 0.05]))
    assert geometry["ticks"][-1]["value"] == 10.0
    heights = [bar["h"] for bar in geometry["groups"][0]["bars"]]
    assert max(heights) < 0.02 * (geometry["plot_bottom"] - 10)


def test_bars_scale_to_a_round_top():
    geometry = chart_geometry(bar_chart([3_353_332, 1_482_721], unit="interrupts"))
    assert geometry["ticks"][-1]["value"] == 5_000_000
    tallest = geometry["groups"][0]["bars"][0]
    assert tallest["y"] + tallest["h"] == geometry["plot_bottom"]


def test_latency_lines_use_log_scale_over_two_decades():
    series = [{"label": "flip", "points": [(T0 + timedelta(seconds=i), v) for i, v in enumerate([0.062, 0.061, 38.0, 37.5])]}]
    geometry = line_chart_geometry("p99", "s", series)
    assert geometry["title"].endswith("(log scale)")
    labels = [tick["label"] for tick in geometry["y_ticks"]]
    assert labels[0] == "0.01" and labels[-1] == "100"
    flat = line_chart_geometry("p99", "s", [{"label": "x", "points": [(T0, 1.0), (T0 + timedelta(seconds=1), 2.0)]}])
    assert "log" not in flat["title"]


def _document(sql: str) -> dict:
    finding = {
        "id": "plan-flip/s", "related": [], "rule": "plan-flip", "severity": "warning", "scope": "statement", "title": "a | b <i>x</i>", "subject": "s",
        "impact": {"description": "d"}, "evidence": [{"title": "Statement", "columns": [], "rows": [], "text": sql}],
        "remediation": "r", "sources": ["db/slow.log:1"], "charts": [],
    }
    return {
        "schema_version": 1, "dbdiag_version": "0", "generated_at": None,
        "capture": {"source": "c", "container": "file", "members": 1, "partial": False, "partial_reasons": [], "tz": "UTC", "tz_origin": "default"},
        "verdict": {"status": "problem", "headline": "h", "findings": ["plan-flip/s"], "findings_by_severity": {"critical": 0, "warning": 1, "info": 0}, "rules_by_status": {"fired": 1, "passed": 0, "skipped": 0, "errored": 0}},
        "inputs": [], "rules": [{"id": "plan-flip", "title": "t", "status": "fired", "missing": [], "measured": "m|<b>", "error": None}],
        "findings": [finding], "metrics": {},
    }


def test_hostile_sql_is_escaped_in_html():
    html = render_html(_document("SELECT '</pre><script>alert(1)</script>'"))
    assert "<script>" not in html
    assert "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "a | b &lt;i&gt;x&lt;/i&gt;" in html


def test_markdown_escapes_pipes_and_tags_in_table_cells():
    markdown = render_markdown(_document("SELECT 1"))
    assert "| `plan-flip` | fired | m\\|&lt;b&gt; |" in markdown
    assert "a \\| b &lt;i&gt;x&lt;/i&gt;" in markdown


def test_print_stylesheet_keeps_badges_coloured_and_never_holds_a_tall_block_together():
    html = render_html(_document("SELECT 1"))
    print_css = html[html.index("@media print"):]
    print_css = print_css[: print_css.index("</style>")]
    assert "print-color-adjust: exact" in print_css  # badges and severity borders keep their colours on paper
    for line in print_css.splitlines():
        if "break-inside: avoid" in line:
            # a block taller than a page that avoids a break leaves a blank page before it
            assert not re.search(r"\.(verdict|finding|summary)\b(?!\s+h3)", line), line


def test_summary_lists_every_critical_and_warning_and_folds_the_infos():
    document = _document("SELECT 1")
    template = document["findings"][0]
    severities = ["critical"] * 6 + ["warning"] * 2 + ["info"] * 3
    document["findings"] = [
        {**template, "id": f"r/s{i}", "severity": s, "title": f"finding number {i}", "related": ["r/s1"] if i == 0 else []}
        for i, s in enumerate(severities)
    ]
    html = render_html(document)
    verdict = html[html.index('id="verdict"'):html.index("<h2>Findings</h2>")]
    shown = verdict[: verdict.index('class="folded"')]
    assert all(f"finding number {i}<" in shown for i in range(8))  # the 6th critical is not hidden
    assert not any(f"finding number {i}<" in shown for i in range(8, 11))
    assert "+3 more (info)" in verdict
    assert '<a href="#finding-2" title="finding number 1">#2 r/s1</a>' in verdict


def test_where_the_time_went_names_the_connection_set_up_the_load_tool_measured():
    from dbdiag.report_view import where_time_went

    accounting = {"user_response_time_s": 321.0, "db_time_s": 2.89, "db_time_ratio": 0.009, "sources": [],
                  "connection_time_s": 314.3, "connection_share_of_user_time": 0.979, "connection_ms_per_transaction": 105.0}
    sentence = where_time_went(accounting)["sentence"]
    assert "the rest was outside the database, of it 314 s (98%) connecting: 105.0 ms per transaction." in sentence
    del accounting["connection_time_s"]
    assert "connecting" not in where_time_went(accounting)["sentence"]


def test_a_second_db_time_of_another_window_is_explained_next_to_the_first():
    from dbdiag.report_view import where_time_went

    accounting = {"user_response_time_s": 4486.0, "db_time_s": 592.3, "db_time_ratio": 0.132, "sources": [],
                  "from": "02:00:13", "to": "02:00:29"}
    summary = {"db_time_s": 1784.6, "first_seen": "02:00:00", "last_seen": "02:00:58"}
    (note,) = where_time_went(accounting, summary)["notes"]
    assert "count 1,785 s of statement time" in note and "592 s, covers 02:00:13 to 02:00:29" in note
    assert where_time_went(accounting, {**summary, "db_time_s": 600.0})["notes"] == []  # the same time: nothing to explain


def test_an_unknown_ratio_says_why_without_the_list_of_histogram_names():
    from dbdiag.report_view import where_time_went

    reason = ("no load-test samples (JMeter), no application latency histogram (http_server_requests_seconds, "
              "http_server_duration_milliseconds, *_request*_seconds)")
    sentence = where_time_went({"db_time_s": 6.92, "user_response_time_s": None, "db_time_ratio": None, "sources": [],
                                 "unavailable_reason": reason})["sentence"]
    assert sentence.startswith("Where the time went is not known: no load-test samples (JMeter), no application latency histogram;")
    assert "_seconds" not in sentence


def test_cost_text_names_what_the_finding_explains_and_skips_zeros():
    from dbdiag.report_view import cost_text

    assert cost_text({"share_of_user_time": 0.868, "user_time_s": 3894.1, "share_of_db_time": 0.0, "db_time_s": 0.0}) == "86.8% of user time (3,894.1 s)"
    assert cost_text({"share_of_db_time": 0.849, "db_time_s": 1514.6, "cpu_share": 0.036}) == "84.9% of DB time (1,514.6 s) · 3.6% of CPU"
    assert cost_text({"description": "no cost"}) == ""
