"""Report: flame graph geometry, CPU profile / NUMA / host configuration sections, schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import polars as pl
import pytest

from dbdiag import flamegraph
from dbdiag import tables as t
from dbdiag.derive.cpu_profile import cpu_profile
from dbdiag.report import render_html, render_json, render_markdown

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
HOSTILE = '<script>alert("x")</script>'


def _stacks(rows: list[tuple[str, str, int]]) -> pl.DataFrame:
    return pl.DataFrame({"stack": [s for s, _, _ in rows], "category": [c for _, c, _ in rows], "samples": [n for _, _, n in rows]})


def test_widths_sum_and_siblings_are_alphabetical():
    tree = flamegraph.fold_tree(_stacks([
        ("db;main;zeta", "database", 40), ("db;main;alpha", "database", 35), ("db;main", "database", 5), ("net;rx", "softirq-network", 20),
    ]), min_share=0.0)
    geometry = flamegraph.layout(tree, width_px=1000)
    rects = {r["label"]: r for r in geometry["rects"]}
    assert rects["all"]["width"] == 1000 and rects["all"]["x"] == 0
    assert rects["db"]["width"] + rects["net"]["width"] == 1000
    assert rects["alpha"]["x"] == rects["main"]["x"] and rects["zeta"]["x"] == pytest.approx(rects["alpha"]["x"] + 350)
    # main keeps its own 5 samples as a gap after its children
    assert rects["alpha"]["width"] + rects["zeta"]["width"] == pytest.approx(rects["main"]["width"] - 50)
    assert rects["db"]["y"] > rects["main"]["y"] > rects["zeta"]["y"]  # root at the bottom
    for node in tree["nodes"][1:]:
        children = [n for n in tree["nodes"] if n["parent"] == tree["nodes"].index(node)]
        assert sum(c["samples"] for c in children) <= node["samples"]


def test_frames_under_the_minimum_share_are_not_drawn_and_counted():
    rows = [("db;hot", "database", 9990)] + [(f"db;tiny{i}", "other", 1) for i in range(10)]
    tree = flamegraph.fold_tree(_stacks(rows), min_share=0.001)
    assert [n["frame"] for n in tree["nodes"]] == ["all", "db", "hot"]
    assert tree["dropped_frames"] == 10
    assert tree["nodes"][1]["samples"] == 10000  # the dropped frames still count in their caller


def test_rectangle_cap_keeps_a_tree_of_the_widest_frames():
    rows = [(f"p{i % 7};f{i};g{i}", "other", 1 + i % 5) for i in range(400)]
    tree = flamegraph.fold_tree(_stacks(rows), min_share=0.0, max_nodes=100)
    nodes = tree["nodes"]
    assert len(nodes) == 100
    assert tree["dropped_frames"] == 1 + 7 + 400 + 400 - 100
    for index, node in enumerate(nodes[1:], start=1):
        assert 0 <= node["parent"] < index
        assert nodes[node["parent"]]["depth"] == node["depth"] - 1


def test_node_takes_the_category_with_most_samples():
    tree = flamegraph.fold_tree(_stacks([("db;f;a", "locks-futex", 6), ("db;f;b", "database", 4)]), min_share=0.0)
    assert {n["frame"]: n["category"] for n in tree["nodes"]}["f"] == "locks-futex"


def _profile_metric() -> dict:
    frame = t.conform(t.PERF_STACK, pl.DataFrame({
        "comm": ["swapper", "mysqld", "mysqld", "mysqld"],
        "pid": [0, 7, 7, 7],
        "event": "cpu-clock",
        "stack": ["do_idle;native_safe_halt", f"main;do_command;{HOSTILE}", 'main;do_command;quote"d&amp', "main;schedule;finish_task_switch"],
        "leaf": ["native_safe_halt", HOSTILE, 'quote"d&amp', "finish_task_switch"],
        "leaf_kernel": [True, False, False, True],
        "samples": [50, 25, 5, 20],
        "source": "os/perf-script.txt",
    }))
    _, metric = cpu_profile({t.PERF_STACK: frame})
    return metric


def _document(metrics: dict) -> dict:
    return {
        "schema_version": 1, "dbdiag_version": "0", "generated_at": None,
        "capture": {"source": "c", "container": "file", "members": 1, "partial": False, "partial_reasons": [], "tz": "UTC", "tz_origin": "default"},
        "verdict": {"status": "healthy", "headline": "h", "findings": [], "findings_by_severity": {"critical": 0, "warning": 0, "info": 0}, "rules_by_status": {"fired": 0, "passed": 0, "skipped": 0, "errored": 0}},
        "inputs": [], "rules": [], "findings": [], "metrics": metrics,
    }


NUMA_ROWS = [
    {"node": 0, "numa_hit": 1000, "numa_miss": 0, "numa_foreign": 0, "interleave_hit": 0, "local_node": 900, "other_node": 100,
     "remote_pct": 10.0, "miss_pct": 0.0, "since_boot": False, "first_source": "numastat.0", "last_source": "numastat.1"},
    {"node": 1, "numa_hit": 1000, "numa_miss": 40, "numa_foreign": 0, "interleave_hit": 0, "local_node": 600, "other_node": 400,
     "remote_pct": 40.0, "miss_pct": 3.8, "since_boot": False, "first_source": "numastat.0", "last_source": "numastat.1"},
]
HOST_CONFIG = [
    {"setting": "transparent_hugepage/enabled", "value": "always", "recommended": "never or madvise", "why": "compaction <stalls>",
     "status": "attention", "source": "os/thp_enabled.txt"},
    {"setting": "vm.swappiness", "value": "1", "recommended": "1-10", "why": "keep the pool | in RAM", "status": "ok", "source": "os/sysctl.txt"},
]


@pytest.fixture(scope="module")
def document() -> dict:
    document = _document({"cpu_profile": _profile_metric(), "numa_remote": NUMA_ROWS, "host_config": HOST_CONFIG})
    return json.loads(render_json(document))


def test_document_with_the_new_metrics_validates(document):
    jsonschema.validate(document, SCHEMA)
    broken = json.loads(json.dumps(document))
    del broken["metrics"]["cpu_profile"]["categories"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)
    broken = json.loads(json.dumps(document))
    broken["metrics"]["host_config"][0]["status"] = "bad"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, SCHEMA)


def test_html_has_flame_graph_tables_and_charts(document):
    html = render_html(document)
    assert '<svg class="flame"' in html
    flame = html[html.index('<svg class="flame"'):]
    flame = flame[: flame.index("</svg>")]
    assert flame.count("<rect") == len(document["metrics"]["cpu_profile"]["flame"]["nodes"])
    assert "<title>finish_task_switch — 20 samples, 40.00% of busy samples (scheduler)</title>" in flame
    assert "Hot symbols (leaf frames)" in html
    assert re.search(r"<td class=\"sql\">finish_task_switch</td><td>.*scheduler</td>\s*<td class=\"num\">20</td><td class=\"num\">40.00</td>", html)
    assert 'id="numa-memory"' in html and "remote 40.0% of 1k pages" in html
    assert 'id="host-config"' in html and "compaction &lt;stalls&gt;" in html


def test_hostile_symbols_are_escaped_in_html(document):
    html = render_html(document)
    assert "<script>alert" not in html and html.count("<script") == 1  # only the flame graph's own
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert "quote&#34;d&amp;amp" in html


def test_markdown_tables(document):
    markdown = render_markdown(document)
    assert "<svg" not in markdown
    assert "### CPU profile" in markdown
    assert "| scheduler | 20 | 40.00 | 20.00 | finish_task_switch |" in markdown
    assert '&lt;script&gt;alert("x")&lt;/script&gt;' in markdown and "<script>" not in markdown
    assert "| 1 | 600 | 400 | 40 | 40.00 |" in markdown
    assert "| vm.swappiness | 1 | 1-10 | ok | keep the pool \\| in RAM |" in markdown


def test_sections_only_when_their_data_exist():
    html = render_html(_document({}))
    markdown = render_markdown(_document({}))
    for marker in ('id="cpu-profile"', 'id="numa-memory"', 'id="host-config"', '<svg class="flame"'):
        assert marker not in html
    assert "CPU profile" not in markdown and "NUMA memory" not in markdown and "Host configuration" not in markdown


def test_flame_graph_of_a_real_capture_stays_small(corpus):
    import tarfile

    from dbdiag.parsers import perf_script
    from dbdiag.parsers.base import ParseContext

    with tarfile.open(corpus / "captures" / "numa2-guest-iperf-debian12.tar.gz") as archive:
        text = archive.extractfile("capture/os/perf-script.txt").read().decode()
    _, metric = cpu_profile(perf_script.parse(text, ParseContext(source="capture/os/perf-script.txt")).tables)
    html = render_html(json.loads(render_json(_document({"cpu_profile": metric}))))
    assert '<svg class="flame"' in html
    assert len(html) < 2_000_000
    flame = metric["flame"]
    assert 0 < flame["dropped_frames"] and len(flame["nodes"]) <= 3000


def test_flame_script_is_allowed_by_its_hash_and_nothing_else(document):
    import base64
    import hashlib

    html = render_html(document)
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1 and "<script" not in scripts[0]
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode("utf-8")).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', html).group(1)
    assert f"script-src 'sha256-{digest}';" in policy
    assert "unsafe-inline'; script" not in policy.split("script-src", 1)[1]  # scripts: the hash only
    assert 'id="flame-search"' in html


def test_no_script_and_no_script_source_without_a_flame_graph():
    html = render_html(_document({"host_config": HOST_CONFIG}))
    assert "<script" not in html and "script-src" not in html


DEEP = Path(__file__).resolve().parent.parent / "fixtures" / "perf" / "deep-stacks.perf-script.txt.gz"


def _deep_metric() -> dict:
    """Real: fixtures/perf/make_deep_stacks.sh (perf record -F 999 -g of deep_stacks.c): perf keeps 127
    frames of stacks 300 (direct recursion, descend) and 200 (ping/pong, mutual) deep."""
    import gzip

    from dbdiag.parsers import perf_script
    from dbdiag.parsers.base import ParseContext

    tables = perf_script.parse_bytes(gzip.decompress(DEEP.read_bytes()), ParseContext(source="perf-script.txt")).tables
    assert tables[t.PERF_STACK]["stack"].str.count_matches(";").max() == 126  # 127 frames: perf's cap
    _, metric = cpu_profile(tables)
    return metric


def test_deep_real_stacks_collapse_recursion_and_cap_the_depth():
    metric = _deep_metric()
    flame = metric["flame"]
    nodes = flame["nodes"]
    assert max(n["depth"] for n in nodes) == flamegraph.MAX_DEPTH == 40
    descend = [n for n in nodes if n["frame"] == "descend"]
    assert len(descend) == 1 and descend[0]["repeats"] == [126, 126]  # direct recursion: one frame, its count
    cuts = [n for n in nodes if n["frame"] == flamegraph.CUT_FRAME]
    # ping/pong alternate (not direct recursion): capped, 10 outer + marker + 29 inner frames of 128 (comm included)
    assert cuts and all(n["hidden_frames"] == [128 - 10 - 29, 128 - 10 - 29] for n in cuts)
    assert flame["capped_stacks"] > 0 and flame["collapsed_recursion"] > 0
    geometry = flamegraph.layout(flame)
    assert geometry["height"] == 41 * flamegraph.ROW_HEIGHT_PX  # 697 px, not the 130 rows (2,210 px) of the raw stacks
    labels = {r["label"] for r in geometry["rects"]}
    assert "descend ×126" in labels and "… 89 frames" in labels


def test_deep_stacks_in_html_show_the_marker_and_the_count():
    html = render_html(json.loads(render_json(_document({"cpu_profile": _deep_metric()}))))
    flame = html[html.index('<svg class="flame"'):]
    flame = flame[: flame.index("</svg>")]
    assert 'height="697"' in flame and '<g class="cut">' in flame
    assert re.search(r"<title>descend ×126 — \d+ samples, [\d.]+% of busy CPU time \(sample periods\) \(other\); direct recursion", flame)
    assert re.search(r"<title>… 89 frames — .*deeper than 40 levels</title>", flame)


def test_widths_follow_the_weight_when_given():
    stacks = pl.DataFrame({"stack": ["db;a", "db;b"], "samples": [90, 10], "weight": [1.0, 99.0], "category": ["database"] * 2})
    rects = {r["label"]: r for r in flamegraph.layout(flamegraph.fold_tree(stacks, min_share=0.0), width_px=100)["rects"]}
    assert rects["a"]["width"] == 1.0 and rects["b"]["width"] == 99.0 and rects["a"]["samples"] == 90


def test_recursion_counts_differ_per_stack():
    tree = flamegraph.fold_tree(_stacks([("db;f;f;g", "other", 1), ("db;f;f;f;f;f;g", "other", 1), ("db;f;h", "other", 1)]), min_share=0.0)
    f = next(n for n in tree["nodes"] if n["frame"] == "f")
    assert f["repeats"] == [1, 5] and flamegraph.frame_label(f) == "f ×1–5"


def test_a_run_of_unnamed_frames_is_not_called_recursion():
    tree = flamegraph.fold_tree(_stacks([("mariadbd;start_thread;[mariadbd];[mariadbd];do_command", "database", 3)]), min_share=0.0)
    rect = next(r for r in flamegraph.layout(tree)["rects"] if r["label"] == "[mariadbd] ×2")
    assert "without a symbol" in rect["note"] and "recursion" not in rect["note"]


def test_the_captures_own_tooling_is_named_apart_in_the_report(tmp_path: Path):
    from dbdiag.pipeline import analyze
    from dbdiag.report import build_document

    fixture = Path(__file__).resolve().parent.parent / "fixtures" / "perf" / "mariadb-tooling.tar.xz"
    html = render_html(build_document(analyze(fixture)))
    start = html.index('id="cpu-tooling"')
    paragraph = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html[start:html.index("</p>", start)]))
    assert "shown apart and left out of every share the rules judge: 900 samples" in paragraph
    assert "gzip 564" in paragraph and "pt-query-digest 285" in paragraph
