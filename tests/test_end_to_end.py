"""Whole runs on the real captures in ../shared/corpus/captures and on the bundled demo."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag.cli import app
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
OS_RULES = {"softirq-concentration", "irq-affinity-skew"}


def run_json(args: list[str], tmp_path: Path) -> tuple[int, dict]:
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, [*args, "--format", "json", "-o", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    document = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return result.exit_code, document


def statuses(document: dict) -> dict[str, str]:
    return {rule["id"]: rule["status"] for rule in document["rules"]}


@pytest.mark.parametrize("name", ["mariadb-sysbench-debian12", "postgres-pgbench-debian12"])
def test_healthy_one_node_captures_fire_no_os_rule(name: str, corpus: Path, tmp_path: Path):
    code, document = run_json(["analyze", str(corpus / "captures" / f"{name}.tar.gz")], tmp_path)
    assert code == 0
    for entry in document["inputs"]:
        assert entry["kind"] or entry["skipped"] or entry["status"] == "not recognised", entry["path"]
        assert entry["status"] in {"read", "skipped", "not recognised"}, entry
    kinds = {entry["kind"] for entry in document["inputs"]}
    assert {"mpstat-text", "mpstat-json", "proc-softirqs", "proc-interrupts", "lscpu", "numactl-hardware"} <= kinds
    for rule_id in OS_RULES:
        assert statuses(document)[rule_id] in {"passed", "skipped"}
    assert not [f for f in document["findings"] if f["rule"] in OS_RULES]


def test_numa2x2_guest_softirq_on_cpu3_node1(corpus: Path, tmp_path: Path):
    code, document = run_json(["analyze", str(corpus / "captures/numa2x2-guest-iperf-debian12.tar.gz")], tmp_path)
    assert code == 0
    softirq = [f for f in document["findings"] if f["rule"] == "softirq-concentration"]
    assert len(softirq) == 1
    finding = softirq[0]
    assert finding["subject"] == "CPUs 3 (node 1)"
    assert finding["impact"]["hot_cpus"] == [3]
    assert finding["impact"]["max_soft_pct"] == pytest.approx(63.6, abs=0.6)
    per_cpu = {row["cpu"]: row for row in document["metrics"]["cpu"]["per_cpu"]}
    assert all(per_cpu[cpu]["soft_pct"] <= 3.0 for cpu in (0, 1, 2))
    skew = [f for f in document["findings"] if f["rule"] == "irq-affinity-skew"]
    assert [f["subject"] for f in skew] == ["virtio0"]
    assert skew[0]["impact"]["nodes"] == [1]


def test_numa2_guest_nic_on_node1_without_soft_column(corpus: Path, tmp_path: Path):
    code, document = run_json(["analyze", str(corpus / "captures/numa2-guest-iperf-debian12.tar.gz")], tmp_path)
    assert code == 0
    by_rule = {f["rule"]: f for f in document["findings"]}
    assert by_rule["softirq-concentration"]["subject"] == "CPUs 5-6 (node 1)"
    assert by_rule["softirq-concentration"]["severity"] == "warning"
    assert by_rule["irq-affinity-skew"]["impact"]["serving_cpus"] == [5, 6]


def test_demo_top_finding_is_softirq_on_node0(tmp_path: Path):
    code, document = run_json(["demo"], tmp_path)
    assert code == 0
    top = document["findings"][0]
    assert top["rule"] == "softirq-concentration"
    assert top["severity"] == "critical"
    assert top["subject"] == "CPUs 0-7 (node 0)"
    assert top["charts"] and [g["label"] for g in top["charts"][0]["groups"]][:2] == ["node 0", "node 1"]
    assert document["capture"]["tz"] == "Asia/Shanghai"
    assert document["metrics"]["host"] == {
        "hostname": "bank-core-db03", "kernel": "5.10.0-136.12.0.86.oe2203sp1.aarch64", "arch": "aarch64",
        "cpu_model": "HUAWEI Kunpeng 920 5220", "cpus": 128, "sockets": 4, "numa_nodes": 16, "threads_per_core": 1,
    }
