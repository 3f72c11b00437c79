"""Whole runs on the real captures in ../shared/corpus/captures and on the bundled demo."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag.cli import app
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
OS_RULES = {"softirq-concentration", "irq-affinity-skew"}
Report = Callable[..., tuple[int, dict]]  # the ``report`` fixture: arguments -> (exit code, JSON report)


def run_json(args: list[str], tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, [*args, "--format", "json", "-o", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    document = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return result.exit_code, document


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    """``run_json`` of the same arguments run once per module: several tests read the same report
    (and must not change it)."""

    @cache
    def run(*args: str) -> tuple[int, dict]:
        return run_json(list(args), tmp_path_factory.mktemp("report"))

    return run


def statuses(document: dict) -> dict[str, str]:
    return {rule["id"]: rule["status"] for rule in document["rules"]}


@pytest.mark.parametrize("name", ["mariadb-sysbench-debian12", "postgres-pgbench-debian12"])
def test_healthy_one_node_captures_fire_no_os_rule(name: str, corpus: Path, report: Report):
    code, document = report("analyze", str(corpus / "captures" / f"{name}.tar.gz"))
    assert code == 0
    for entry in document["inputs"]:
        assert entry["kind"] or entry["skipped"] or entry["status"] == "not recognised", entry["path"]
        assert entry["status"] in {"read", "skipped", "not recognised"}, entry
    kinds = {entry["kind"] for entry in document["inputs"]}
    assert {"mpstat-text", "mpstat-json", "proc-softirqs", "proc-interrupts", "lscpu", "numactl-hardware"} <= kinds
    for rule_id in OS_RULES:
        assert statuses(document)[rule_id] in {"passed", "skipped"}
    assert not [f for f in document["findings"] if f["rule"] in OS_RULES]


def test_numa2x2_guest_softirq_on_cpu3_node1(corpus: Path, report: Report):
    code, document = report("analyze", str(corpus / "captures/numa2x2-guest-iperf-debian12.tar.gz"))
    assert code == 0
    softirq = [f for f in document["findings"] if f["rule"] == "softirq-concentration"]
    assert len(softirq) == 1
    finding = softirq[0]
    assert finding["subject"] == "CPU 3 (node 1)"
    assert finding["impact"]["hot_cpus"] == [3]
    assert finding["impact"]["max_soft_pct"] == pytest.approx(63.6, abs=0.6)
    per_cpu = {row["cpu"]: row for row in document["metrics"]["cpu"]["per_cpu"]}
    assert all(per_cpu[cpu]["soft_pct"] <= 3.0 for cpu in (0, 1, 2))
    skew = [f for f in document["findings"] if f["rule"] == "irq-affinity-skew"]
    assert [f["subject"] for f in skew] == ["virtio0"]
    assert skew[0]["impact"]["nodes"] == [1]


def test_numa2_guest_nic_on_node1_without_soft_column(corpus: Path, report: Report):
    code, document = report("analyze", str(corpus / "captures/numa2-guest-iperf-debian12.tar.gz"))
    assert code == 0
    by_rule = {f["rule"]: f for f in document["findings"]}
    assert by_rule["softirq-concentration"]["subject"] == "CPUs 5-6 (node 1)"
    assert by_rule["softirq-concentration"]["severity"] == "warning"
    assert by_rule["irq-affinity-skew"]["impact"]["serving_cpus"] == [5, 6]


def test_demo_softirq_on_node0_leads_the_host_problem(report: Report):
    code, document = report("demo")
    assert code == 0
    ranked = [f["rule"] for f in document["findings"]]
    top = next(f for f in document["findings"] if f["rule"] == "softirq-concentration")
    # the NIC's softirqs on node 0 are one problem with the IRQ placement that causes them, ranked before any statement
    assert {"irq-affinity-skew/hns3-0000:7d:00.0"} <= set(top["related"])
    assert ranked.index("softirq-concentration") < ranked.index("full-table-scan")
    assert top["severity"] == "critical"
    assert top["subject"] == "CPUs 0-7 (node 0)"
    assert top["charts"] and [g["label"] for g in top["charts"][0]["groups"]][:2] == ["node 0", "node 1"]
    assert document["capture"]["tz"] == "Asia/Shanghai"
    assert document["metrics"]["host"] == {
        "hostname": "bank-core-db03", "kernel": "5.10.0-136.12.0.86.oe2203sp1.aarch64", "arch": "aarch64",
        "cpu_model": "HUAWEI Kunpeng 920 5220", "cpus": 128, "sockets": 4, "numa_nodes": 16, "threads_per_core": 1,
    }


SQL_RULES = {"plan-flip", "stale-statistics", "full-table-scan", "or-without-index-merge", "plan-cache-miss", "dominant-statement"}


@pytest.mark.parametrize(
    ("name", "statements", "top_calls"),
    [("mariadb-sysbench-debian12", 5902, {"select c from sbtest? where id=?": 2950}),
     ("postgres-pgbench-debian12", 2254, {"select abalance from pgbench_accounts where aid = ?": 311})],
)
def test_healthy_captures_profile_their_workload_and_fire_no_sql_rule(name, statements, top_calls, corpus: Path, report: Report):
    code, document = report("analyze", str(corpus / "captures" / f"{name}.tar.gz"))
    assert code == 0
    assert document["metrics"]["sql_summary"]["statements"] == statements
    by_fingerprint = {row["fingerprint"]: row for row in document["metrics"]["sql_profile"]}
    for fingerprint, calls in top_calls.items():
        assert by_fingerprint[fingerprint]["calls"] == calls
    total = sum(row["total_time_s"] for row in document["metrics"]["sql_profile"])
    assert total == pytest.approx(document["metrics"]["sql_summary"]["db_time_s"], rel=1e-6)
    fired = {f["rule"] for f in document["findings"]}
    assert not (fired & SQL_RULES - {"dominant-statement"})
    # a healthy capture says so first; the notes about the load test come below it
    assert document["verdict"]["status"] == "healthy"
    assert document["verdict"]["headline"] == "No problem found in the system"
    assert all(f["rule"] in {"load-test-inflation", "rate-limit-advice", "dominant-statement"} or f["severity"] == "info"
               for f in document["findings"])


def test_demo_sql_findings_and_privacy(tmp_path: Path, report: Report):
    code, document = report("demo")
    assert code == 0
    by_rule = {f["rule"]: f for f in document["findings"]}
    assert SQL_RULES - {"dominant-statement"} <= set(by_rule)
    flip = by_rule["plan-flip"]
    assert flip["severity"] == "critical" and "4 instance(s)" in flip["title"]
    assert "62.1 ms to 37.8 s" in flip["title"]
    assert "CREATE GLOBAL BINDING FROM HISTORY USING PLAN DIGEST" in flip["remediation"] and "LOCK STATS" in flip["remediation"]
    assert ";;" not in flip["remediation"]
    assert "72.7%" in by_rule["plan-cache-miss"]["title"]
    assert "acct_txn_log" in by_rule["full-table-scan"]["title"].lower()
    assert "ADD INDEX" in by_rule["full-table-scan"]["remediation"]
    text = json.dumps(document)
    assert "6228480" not in text and "13734578434" not in text
    assert document["metrics"]["sql_summary"]["literals"] == "replaced by placeholders"
    out = tmp_path / "lit.json"
    CliRunner().invoke(app, ["demo", "--show-literals", "-f", "json", "-o", str(out)])
    assert "6228480" in out.read_text(encoding="utf-8")


# --- issue 4: CPU profile, NUMA, host configuration ------------------------------------------------

NUMA_RULES = {"cross-numa-memory", "unbound-processes", "numa-balancing-enabled", "no-cpu-isolation", "buffer-pool-exceeds-numa-node"}
CAPTURES = ["mariadb-sysbench-debian12", "postgres-pgbench-debian12", "numa2-guest-iperf-debian12", "numa2x2-guest-iperf-debian12"]


@pytest.mark.parametrize("name", CAPTURES)
def test_real_perf_data_give_a_cpu_profile_and_a_flame_graph(name: str, corpus: Path, tmp_path: Path, report: Report):
    _, document = report("analyze", str(corpus / "captures" / f"{name}.tar.gz"))
    profile = document["metrics"]["cpu_profile"]
    assert profile["samples"] > 0 and profile["top_symbols"] and profile["categories"]
    assert profile["source_kind"] == "perf script"
    html_path = tmp_path / "r.html"
    CliRunner().invoke(app, ["analyze", str(corpus / "captures" / f"{name}.tar.gz"), "-o", str(html_path)])
    html = html_path.read_text(encoding="utf-8")
    assert 'id="cpu-profile"' in html and "<svg" in html.split('id="cpu-profile"', 1)[1]


@pytest.mark.parametrize("name", ["mariadb-sysbench-debian12", "postgres-pgbench-debian12"])
def test_no_numa_rule_fires_on_one_node(name: str, corpus: Path, report: Report):
    _, document = report("analyze", str(corpus / "captures" / f"{name}.tar.gz"))
    assert not [f["rule"] for f in document["findings"] if f["rule"] in NUMA_RULES]
    assert statuses(document)["numa-balancing-enabled"] in {"passed", "skipped"}


def test_numa2_guest_process_memory_on_the_other_node(corpus: Path, report: Report):
    """python3 ran on node 0's CPUs with its memory bound to node 1 (numactl --cpunodebind=0 --membind=1)."""
    _, document = report("analyze", str(corpus / "captures/numa2-guest-iperf-debian12.tar.gz"))
    cross = [f for f in document["findings"] if f["rule"] == "cross-numa-memory"]
    assert [f["subject"] for f in cross] == ["python3"] and [f["objects"] for f in cross] == [["python3 183"]]
    assert cross[0]["impact"]["share_pct"] == 100.0 and cross[0]["impact"]["cpu_nodes"] == [0]


def test_demo_fires_the_issue_4_rules_with_evidence(report: Report):
    _, document = report("demo")
    by_rule = {f["rule"]: f for f in document["findings"]}
    for rule_id in ("context-switch-overhead", "cross-numa-memory", "transparent-hugepages-enabled", "numa-balancing-enabled"):
        assert rule_id in by_rule and by_rule[rule_id]["evidence"], rule_id
    switch = by_rule["context-switch-overhead"]
    assert 18.0 <= switch["impact"]["share_pct"] <= 22.0 and "finish_task_switch" in json.dumps(switch["evidence"])
    assert by_rule["cross-numa-memory"]["subject"] == "node 0"
    assert by_rule["unbound-processes"]["subject"] == "haproxy, pd-server"  # no pids: the id is the same after a restart
    assert {"haproxy 2650", "pd-server 2907"} <= set(by_rule["unbound-processes"]["objects"])
    checks = {row["setting"]: row for row in document["metrics"]["host_config"]}
    assert any(row["status"] == "attention" for row in checks.values())


# --- issue 5: where the time went --------------------------------------------------------------------


def test_demo_time_accounting_idle_gaps_and_app_rules(report: Report):
    _, document = report("demo")
    accounting = document["metrics"]["time_accounting"]
    assert accounting["db_time_ratio"] == pytest.approx(0.13, abs=0.01)
    gaps = document["metrics"]["idle_gaps"]
    assert gaps["in_txn"]["p80_ms"] == pytest.approx(25.0, abs=1.0)
    assert gaps["sql_latency"]["p80_ms"] == pytest.approx(3.84, abs=0.2)
    fired = {f["rule"] for f in document["findings"]}
    assert {"bottleneck-outside-database", "connection-ceiling", "oom-restart", "load-test-inflation"} <= fired
    assert document["metrics"]["timeline"]["series"]


@pytest.mark.parametrize("folder", ["jmeter", "prometheus", "haproxy", "oom"])
def test_issue_5_corpus_files_parse_or_say_why(folder: str, corpus: Path, tmp_path: Path):
    for path in sorted((corpus / folder).iterdir()):
        _, document = run_json(["analyze", str(path)], tmp_path)
        (entry,) = document["inputs"]
        assert entry["kind"] is not None and (entry["records"] > 0 or entry.get("error") or entry["skipped"]), entry


def test_the_same_capture_gives_the_same_report_twice(tmp_path: Path):
    """Evidence rows with tied counts and sources from unordered sets once came out in a different order."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = run_json(["demo"], tmp_path / "a")[1], run_json(["demo"], tmp_path / "b")[1]
    for document in (first, second):
        document.pop("generated_at", None)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
