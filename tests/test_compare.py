"""``dbdiag compare`` as a command: saved JSON reports and captures give the same comparison, bad
reports are one line and exit 2, ``--fail-on`` reads the findings new in CAPTURE, the default output
name is its own, and the HTML and Markdown stay safe and short. Noise bands are checked at their edges."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag.cli import COMPARE_REPORT_STEM, DEFAULT_REPORT_STEM, app
from dbdiag.compare import differ
from dbdiag.compare.document import compare_documents
from dbdiag.compare.facts import Fact
from dbdiag.compare.render import MD_MAX_ROWS, render_html, render_markdown
from tests.conftest import REPO

PAIRS = REPO / "fixtures" / "compare"
BASE = PAIRS / "mariadb-sysbench-base.tar.gz"
IGNORED = PAIRS / "mariadb-sysbench-index-ignored.tar.gz"
SCHEMA = json.loads((REPO / "analyzer/schema/compare.schema.json").read_text(encoding="utf-8"))


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> dict[str, Path]:
    """The two captures' analyze JSON reports, written by ``dbdiag analyze``."""
    folder = tmp_path_factory.mktemp("reports")
    paths = {}
    for name, capture in (("base", BASE), ("ignored", IGNORED)):
        paths[name] = folder / f"{name}.json"
        result = invoke("analyze", str(capture), "-f", "json", "-o", str(paths[name]))
        assert result.exit_code == 0, result.output
    return paths


def comparison(result_path: Path) -> dict:
    document = json.loads(result_path.read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return document


def test_captures_and_their_saved_reports_compare_the_same(saved, tmp_path):
    from_captures, from_reports = tmp_path / "c.json", tmp_path / "r.json"
    assert invoke("compare", str(BASE), str(IGNORED), "-f", "json", "-o", str(from_captures)).exit_code == 0
    assert invoke("compare", str(saved["base"]), str(saved["ignored"]), "-f", "json", "-o", str(from_reports)).exit_code == 0
    a, b = comparison(from_captures), comparison(from_reports)
    assert a["differences"] and a["differences"] == b["differences"]
    assert a["verdict"] == b["verdict"] and a["areas"] == b["areas"]


@pytest.mark.parametrize(
    "content, reason",
    [
        ('{"schema_version": 1, "capture": {"source": "x"}, "inputs": [], "find', "truncated JSON"),
        ('{"schema_version": 7, "capture": {}, "inputs": [], "findings": [], "metrics": {}, "verdict": {}}', "schema_version 7"),
        ('{"hello": "world"}', "not a dbdiag analyze JSON report"),
        ("[1, 2, 3]", "not a dbdiag analyze JSON report"),
        ("not json at all\n", "not valid JSON"),
        ('{"schema_version": 1, "baseline": {}, "differences": []}', "a dbdiag compare report"),
    ],
)
def test_a_bad_report_is_one_line_naming_it_and_exit_2(saved, tmp_path, content, reason):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    for args in ((str(saved["base"]), str(bad)), (str(bad), str(saved["base"]))):
        result = invoke("compare", *args, "-f", "json", "-o", str(tmp_path / "out.json"))
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1 and str(bad) in lines[0] and reason in lines[0], result.output
    assert not (tmp_path / "out.json").exists()


def test_a_file_that_is_neither_report_nor_capture_is_one_line_and_exit_2(saved, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("hello, this is not a capture\n", encoding="utf-8")
    out = tmp_path / "out.json"
    result = invoke("compare", str(notes), str(saved["base"]), "-f", "json", "-o", str(out))
    assert result.exit_code == 2 and not out.exists()
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and str(notes) in lines[0] and "neither a dbdiag JSON report nor a capture" in lines[0]


def test_fail_on_reads_the_findings_new_in_capture(saved, tmp_path):
    out = str(tmp_path / "x.json")
    # the ignored index fires plan-flip and full-table-scan (critical) that the baseline does not have
    assert invoke("compare", str(saved["base"]), str(saved["ignored"]), "--fail-on", "critical", "-f", "json", "-o", out).exit_code == 1
    # the other way round nothing is new in CAPTURE: the base's only finding (a load-test note) is in both
    reverse = invoke("compare", str(saved["ignored"]), str(saved["base"]), "--fail-on", "warning", "-f", "json", "-o", out)
    assert reverse.exit_code == 0
    assert comparison(Path(out))["verdict"]["findings_new_in_capture"] == []
    assert invoke("compare", str(saved["base"]), str(saved["ignored"]), "-f", "json", "-o", out).exit_code == 0


def test_the_default_name_is_not_the_analyze_report(saved, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    analyze_report = tmp_path / f"{DEFAULT_REPORT_STEM}.html"
    analyze_report.write_text("the analyze report", encoding="utf-8")
    assert invoke("compare", str(saved["base"]), str(saved["ignored"])).exit_code == 0
    assert analyze_report.read_text(encoding="utf-8") == "the analyze report"
    assert COMPARE_REPORT_STEM != DEFAULT_REPORT_STEM and (tmp_path / f"{COMPARE_REPORT_STEM}.html").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([analyze_report.name, f"{COMPARE_REPORT_STEM}.html"])


def test_the_output_may_not_be_a_side(saved):
    result = invoke("compare", str(saved["base"]), str(saved["ignored"]), "-f", "json", "-o", str(saved["ignored"]))
    assert result.exit_code == 2 and "is the capture" in result.output
    assert json.loads(saved["ignored"].read_text(encoding="utf-8"))["schema_version"] == 1


def test_html_is_offline_escaped_and_markdown_short(saved):
    baseline = json.loads(saved["base"].read_text(encoding="utf-8"))
    capture = copy.deepcopy(json.loads(saved["ignored"].read_text(encoding="utf-8")))
    hostile = "select '<script>alert(1)</script>' from t where id=?"
    capture["metrics"]["sql_profile"][0]["fingerprint"] = hostile
    document = compare_documents(baseline, capture)
    assert any(hostile in d["key"] for d in document["differences"])
    html = render_html(document)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert "src=\"http" not in html and "href=\"http" not in html
    assert html.index('id="verdict"') < html.index('id="timelines"') < html.index('id="area-outcome"')
    tps = next(t for t in document["timelines"] if t["series"] == "tps")
    assert tps["baseline"][0][0] == 0.0 and tps["capture"][0][0] == 0.0  # each side from its own start
    assert html.count('<polyline class="series s0"') == html.count('<polyline class="series s1"') == len(document["timelines"])
    assert 'id="flame-diff"' in html and document["flame_diff"]["nodes"]
    cpus = baseline["metrics"]["host"]["cpus"]
    assert html.count('class="tbar s0"') == html.count('class="tbar s1"') == 2 * cpus  # %soft and %busy, CPU by CPU
    md = render_markdown(document)
    assert "<script>" not in md and len(md) < 8_000
    assert md.count("\n| ") == MD_MAX_ROWS + 2  # the header, its rule and the first rows only


def fact(kind: str, value, unit: str | None = "ms") -> Fact:
    return Fact("outcome", "k", value, unit, kind, None)


@pytest.mark.parametrize(
    "kind, unit, relative",
    [("rate", "1/s", differ.RATE_NOISE_REL), ("time", "ms", differ.TIME_NOISE_REL), ("tail", "ms", differ.TAIL_NOISE_REL)],
)
def test_relative_noise_bands_at_their_edge(kind, unit, relative):
    base = 100.0
    assert not differ.differs(fact(kind, base, unit), fact(kind, base * (1 + relative * 0.9), unit))
    assert differ.differs(fact(kind, base, unit), fact(kind, base * (1 + relative * 1.1), unit))


def test_percent_ratio_and_floor_bands_at_their_edge():
    points = differ.PCT_NOISE_POINTS
    assert not differ.differs(fact("pct", 10.0, "%"), fact("pct", 10.0 + points * 0.9, "%"))
    assert differ.differs(fact("pct", 10.0, "%"), fact("pct", 10.0 + points * 1.1, "%"))
    assert differ.differs(fact("share", points * 1.1, "%"), None)  # a profile share on one side only: 0 on the other
    assert not differ.differs(None, fact("share", points * 0.9, "%"))
    assert not differ.differs(None, fact("pct", 90.0, "%"))  # CPU busy measured on one side only: no change
    assert differ.differs(None, fact("events", 1, "events")) and differ.differs(fact("severity", "warning", None), None)
    ratio, floor_ms = differ.SQL_NOISE_RATIO, differ.TIME_NOISE_FLOOR_MS
    assert not differ.differs(fact("sql-latency", 10.0), fact("sql-latency", 10.0 * ratio * 0.95))
    assert differ.differs(fact("sql-latency", 10.0), fact("sql-latency", 10.0 * ratio * 1.05))
    tiny = floor_ms / 10  # 10x of nearly nothing is still within the floor
    assert not differ.differs(fact("sql-latency", tiny), fact("sql-latency", tiny * 10))
    assert not differ.differs(fact("time", tiny), fact("time", tiny * 5))
    assert differ.differs(fact("text", "madvise", None), fact("text", "always", None))
    assert not differ.differs(fact("set", "a:ALL", None), None)  # plans logged on one side only (auto_explain)


def test_kernel_counters_differ_by_ratio_and_none_against_some():
    """/proc/vmstat growth (pages migrated): 0 on both sides is no change, 0 against some is one, and both sides
    counting differ past the ratio band."""
    ratio = differ.SQL_NOISE_RATIO
    assert not differ.differs(fact("counter", 0, None), fact("counter", 0, None))
    assert differ.differs(fact("counter", 0, None), fact("counter", 153_887, None))
    assert not differ.differs(fact("counter", 1000, None), fact("counter", int(1000 * ratio * 0.95), None))
    assert differ.differs(fact("counter", 1000, None), fact("counter", int(1000 * ratio * 1.05), None))


def test_hit_ratios_differ_by_the_share_they_miss():
    """99.9% against 99.98% is five times the reads but under a point: no change; 99% against 97% triples them;
    98.8% against 81% (TPC-B with 256MB and 128kB of shared buffers) is far inside the 20 points CPU shares get."""
    hit = lambda value: fact("hit-pct", value, "%")  # noqa: E731
    floor, ratio = differ.HIT_PCT_FLOOR_POINTS, differ.SQL_NOISE_RATIO
    assert not differ.differs(hit(99.9), hit(99.98)) and not differ.differs(hit(50.0), hit(50.0 + floor * 0.9))
    assert differ.differs(hit(99.0), hit(97.0)) and differ.differs(hit(98.8), hit(81.0)) and differ.differs(hit(100.0), hit(98.0))
    missed = 10.0  # misses 10% against just under and just over twice that
    assert not differ.differs(hit(100 - missed), hit(100 - missed * ratio * 0.95))
    assert differ.differs(hit(100 - missed), hit(100 - missed * ratio * 1.05))
    assert differ.Difference("activity", "k", 99.98, 50.85, "%", "hit-pct", {}).change_text() == "-49.1 points"


def test_shared_buffers_explain_the_hit_ratio_and_through_it_latency_and_throughput():
    """With a hit ratio that differs, the chain reads in causal order (setting -> hit ratio -> statement latency,
    TPS); without one (a capture with no pg_stat_database), the setting explains those effects itself."""
    from dbdiag.compare.differ import Difference
    from dbdiag.compare.links import link

    def differences(with_ratio: bool) -> list[Difference]:
        ratio = [Difference("activity", "buffer hit ratio bench (pg_stat_database)", 99.98, 50.85, "%", "hit-pct", {})]
        return [Difference("settings", "shared_buffers", "256MB", "128kB", None, "text", {}), *(ratio if with_ratio else []),
                Difference("outcome", "statement latency p50 (statement log)", 0.036, 1.692, "ms", "time", {}),
                Difference("outcome", "tps (pgbench), mean of the timeline", 20802.0, 1963.0, "1/s", "rate", {}),
                Difference("outcome", "commits per second bench (pg_stat_database)", 20220.8, 1988.1, "1/s", "rate", {}),
                Difference("activity", "cpu 3 NET_RX softirqs per second", 577.0, 777.0, "1/s", "rate", {})]

    setting, ratio, *effects, unrelated = differences(True)
    link([setting, ratio, *effects, unrelated])
    assert setting.explains == [ratio.ref] and ratio.explains == [e.ref for e in effects]
    assert all(e.caused_by == [ratio.ref] for e in effects) and unrelated.caused_by == []
    setting, *effects, unrelated = differences(False)
    link([setting, *effects, unrelated])
    assert setting.explains == [e.ref for e in effects] and unrelated.caused_by == []


def test_boot_sized_settings_differ_as_numbers_beyond_their_band():
    """fs.file-max as two boots of one guest sized it (287315, 287289) is no change; a value someone set is one."""
    sized = lambda value: Fact("settings", "sysctl fs.file-max", value, None, "boot-sized", None)  # noqa: E731
    assert not differ.differs(sized("287315"), sized("287289"))
    edge = differ.BOOT_SIZED_NOISE_REL
    assert not differ.differs(sized("100000"), sized(str(int(100000 * (1 + edge * 0.9)))))
    assert differ.differs(sized("100000"), sized(str(int(100000 * (1 + edge * 1.1)))))
    assert differ.differs(sized("287315"), sized("6815744")) and differ.differs(sized("0"), sized("1"))
    assert differ.differs(sized("287315"), sized("unlimited")) and not differ.differs(sized("x"), sized("x"))


@pytest.mark.parametrize("key, before, after", [("kernel.numa_balancing", "0", "1"), ("cmdline numa_balancing", "disable", "enable")])
def test_numa_balancing_explains_the_migrations_and_page_faults_it_costs(key, before, after):
    """The sysctl (host_config's row) and the boot parameter (metrics.settings' "cmdline numa_balancing") link the
    same effects: its vmstat counters, the NUMA page-fault category of the profile, remote memory."""
    from dbdiag.compare.differ import Difference
    from dbdiag.compare.links import link

    cause = Difference("settings", key, before, after, None, "text", {})
    effects = [Difference("activity", "vmstat numa_pages_migrated during the capture", 0, 153_887, None, "counter", {}),
               Difference("profile", "category page-faults-numa (% of busy CPU)", 0.4, 25.0, "%", "share", {}),
               Difference("activity", "node 1 remote memory %", 1.0, 40.0, "%", "pct", {})]
    unrelated = Difference("activity", "cpu 3 NET_RX softirqs per second", 577.0, 777.0, "1/s", "rate", {})
    link([cause, *effects, unrelated])
    assert cause.explains == [e.ref for e in effects] and unrelated.caused_by == []


def test_a_partial_side_is_named_next_to_the_differences_it_affects(saved):
    baseline = json.loads(saved["base"].read_text(encoding="utf-8"))
    capture = json.loads(saved["ignored"].read_text(encoding="utf-8"))
    reason = "capture/db/mariadb-slow.log: the archive ends inside this member (truncated)"
    capture["capture"]["partial"], capture["capture"]["partial_reasons"] = True, [reason]
    document = compare_documents(baseline, capture)
    jsonschema.validate(document, SCHEMA)
    from_log = [d for d in document["differences"] if (d["sources"]["capture"] or "").startswith("capture/db/mariadb-slow.log")]
    from_elsewhere = [d for d in document["differences"] if (d["sources"]["capture"] or "").startswith("capture/app/")]
    assert from_log and all(d["partial"] == [f"capture is partial: {reason}"] for d in from_log)
    assert from_elsewhere and all(d["partial"] == [] for d in from_elsewhere)
    assert document["verdict"]["partial"]["capture"] == [reason] and document["capture"]["partial"]
    assert f"capture is partial: {reason}" in render_html(document)


def test_a_partial_side_exits_3_and_markdown_goes_to_stdout(saved, tmp_path):
    capture = json.loads(saved["ignored"].read_text(encoding="utf-8"))
    capture["capture"]["partial"], capture["capture"]["partial_reasons"] = True, ["capture/os/perf-script.txt: member cut short"]
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(capture), encoding="utf-8")
    result = CliRunner().invoke(app, ["compare", str(saved["base"]), str(partial), "-f", "md", "-o", "-"])
    assert result.exit_code == 3
    assert result.stdout.startswith("## dbdiag compare: ") and "The capture is partial: capture/os/perf-script.txt" in result.stdout


def test_every_setting_is_compared_and_run_specific_ones_are_not(saved):
    baseline = json.loads(saved["base"].read_text(encoding="utf-8"))
    capture = copy.deepcopy(baseline)
    settings = {(r["group"], r["name"]): r for r in capture["metrics"]["settings"]}
    settings[("sysctl", "vm.max_map_count")]["value"] = "262144"
    settings[("mariadb variable", "sort_buffer_size")]["value"] = "4194304"
    settings[("sysctl", "kernel.random.uuid")]["value"] = "another-uuid"  # new on every boot
    settings[("mariadb variable", "pid_file")]["value"] = "/tmp/another/m.pid"  # the run's own file
    capture["metrics"]["settings"].append({"scope": "host", "group": "process_affinity", "subject": "mariadbd 4242",
                                           "name": "Cpus_allowed_list", "value": "0-1", "source": "os/status"})
    baseline["metrics"]["settings"].append({"scope": "host", "group": "process_affinity", "subject": "mariadbd 17",
                                            "name": "Cpus_allowed_list", "value": "0", "source": "os/status"})
    keys = {d["key"]: d for d in compare_documents(baseline, capture)["differences"]}
    assert set(keys) == {"sysctl vm.max_map_count", "mariadb variable sort_buffer_size", "process_affinity mariadbd Cpus_allowed_list"}
    assert keys["sysctl vm.max_map_count"]["sources"]["capture"] == "capture/os/sysctl.txt"
    assert (keys["process_affinity mariadbd Cpus_allowed_list"]["baseline"], keys["process_affinity mariadbd Cpus_allowed_list"]["capture"]) == ("0", "all CPUs")  # 0-1 of 2 CPUs


def _report(cpus: int, nodes: dict[int, list[int]], affinity: str) -> dict:
    """The parts of an analyze report the settings compare reads: the host's CPUs and nodes, one IRQ's affinity."""
    per_cpu = [{"cpu": cpu, "node": node} for node, members in nodes.items() for cpu in members]
    return {
        "schema_version": 1, "capture": {"source": f"host-{cpus}-cpus"}, "inputs": [], "findings": [],
        "metrics": {
            "host": {"cpus": cpus}, "cpu": {"per_cpu": per_cpu},
            "settings": [{"scope": "host", "group": "irq_affinity", "subject": "25", "name": "smp_affinity_list",
                          "value": affinity, "source": "capture/os/irq_affinity.txt"}],
        },
    }


def test_an_affinity_to_every_cpu_or_one_node_compares_across_host_sizes():
    """IRQ 25 allowed on all CPUs of an 8-CPU and of a 4-CPU host is no difference (0-7 and 0-3 say the same);
    on node 1 of each is none either; all CPUs against node 1 is one."""
    big, small = {0: [0, 1, 2, 3], 1: [4, 5, 6, 7]}, {0: [0, 1], 1: [2, 3]}
    keys = lambda a, b: [d["key"] for d in compare_documents(a, b)["differences"] if d["area"] == "settings"]  # noqa: E731
    assert keys(_report(8, big, "0-7"), _report(4, small, "0-3")) == []
    assert keys(_report(8, big, "4-7"), _report(4, small, "2-3")) == []
    assert keys(_report(8, big, "0-7"), _report(4, small, "2-3")) == ["irq_affinity 25 smp_affinity_list"]


def _interrupts(cpus: int, nodes: dict[int, list[int]], served: dict[int, int], affinity: str) -> dict:
    """``_report`` with the NIC's interrupts per node (``served``: node -> count) as derive makes them."""
    from dbdiag import tables as t
    from dbdiag.derive.cpu import device_interrupts, interrupts_per_node
    import polars as pl

    rows = [{"irq": "25", "device": "virtio0-input.0", "cpu": nodes[node][0], "delta": count, "chip": "PCI-MSI", "node": node}
            for node, count in served.items()]
    report = _report(cpus, nodes, affinity)
    report["metrics"]["interrupts"] = interrupts_per_node(device_interrupts(t.conform(t.IRQ_DELTA, pl.DataFrame(rows))))
    return report


def test_the_node_that_serves_a_nics_interrupts_is_compared_and_linked_to_its_affinity():
    """The NIC's interrupts all served on node 0, then all on node 1 after its IRQ was pinned there: the per-node
    shares differ and the affinity setting is the cause linked to them."""
    nodes = {0: [0, 1], 1: [2, 3]}
    document = compare_documents(_interrupts(4, nodes, {0: 9000}, "0-3"), _interrupts(4, nodes, {1: 9000}, "3"))
    rows = {d["key"]: d for d in document["differences"] if "interrupts of" in d["key"]}
    assert set(rows) == {"node 0 interrupts of virtio0 (% of the device's)", "node 1 interrupts of virtio0 (% of the device's)"}
    assert (rows["node 1 interrupts of virtio0 (% of the device's)"]["baseline"], rows["node 1 interrupts of virtio0 (% of the device's)"]["capture"]) == (0.0, 100.0)
    (cause,) = [c for c in document["verdict"]["explained"] if c["area"] == "settings"]
    assert cause["key"] == "irq_affinity 25 smp_affinity_list" and cause["baseline"] == "all CPUs" and cause["capture"] == "3"
    assert "activity:node 1 interrupts of virtio0 (% of the device's)" in cause["effects"]


def test_a_finding_as_the_cause_is_named_by_its_title_without_its_threshold(tmp_path):
    """Two real captures of fixtures/lockwait: sleeps only, then a LOCK TABLES sbtest1 that others wait for. The
    headline names the lock-wait finding by what it says, not by its id."""
    lockwait = REPO / "fixtures" / "lockwait"
    out = tmp_path / "cmp.json"
    result = invoke("compare", str(lockwait / "mariadb-sleep.tar.gz"), str(lockwait / "mariadb-lock-wait-sbtest1.tar.gz"), "-f", "json", "-o", str(out))
    assert result.exit_code == 0, result.output
    headline = comparison(out)["verdict"]["headline"]
    assert "most likely because of Lock wait on sbtest1" in headline and "(only in capture)" in headline
    assert "lock-wait/table-sbtest1" not in headline and "threshold" not in headline


def test_runs_that_offered_different_rates_are_judged_on_latency_not_throughput(saved):
    """The same sysbench workload at --rate 35 on both sides compares TPS; told that the capture's run was
    unlimited, compare says throughput is not comparable and never heads the verdict with it."""
    base = json.loads(saved["base"].read_text(encoding="utf-8"))
    ignored = json.loads(saved["ignored"].read_text(encoding="utf-8"))
    assert [run["rate_limit_tps"] for run in base["metrics"]["load_runs"]] == [35.0]
    same = compare_documents(base, ignored)["verdict"]
    assert not [n for n in same["not_compared"] if n["area"] == "outcome"]
    unlimited = copy.deepcopy(ignored)
    for run in unlimited["metrics"]["load_runs"]:
        run["rate_limit_tps"] = None
    verdict = compare_documents(base, unlimited)["verdict"]
    (reason,) = [n["reason"] for n in verdict["not_compared"] if n["area"] == "outcome"]
    assert "offered different rates (35/s in baseline, unlimited in capture)" in reason
    assert verdict["outcome"]["label"] not in ("TPS", "QPS", "statements per second")
