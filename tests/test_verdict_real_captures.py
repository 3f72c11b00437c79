"""The verdict on the real captures of issue 12's cases: the first finding is the cause, with its subject.

Each capture was made on this kind of machine with the real servers and tools (the scripts beside them):
fixtures/pgbench-haproxy-connect (pgbench -C through HAProxy at server maxconn 2), fixtures/multinode
(a 3-node guest whose NIC IRQs are pinned to CPU 0), fixtures/lockwait (LOCK TABLES / an open transaction
holding rows while others wait), and the demo (statistics taken by TiDB's auto analyze on an empty queue
table). The cause captures of plan flips are checked in tests/test_cause_captures.py.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from dbdiag.pipeline import analyze
from dbdiag.report import build_document

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
DEMO = FIXTURES / "demo" / "bank-core-demo.tar.gz"


@cache
def document(path: Path) -> dict:
    return build_document(analyze(path))


def first(path: Path) -> dict:
    doc = document(path)
    assert doc["verdict"]["status"] == "problem"
    top = doc["findings"][0]
    assert doc["verdict"]["findings"][0] == top["id"] and doc["verdict"]["headline"].endswith(top["title"])
    return top


def test_connection_per_transaction_through_a_capped_proxy_leads_with_the_cap():
    capture = FIXTURES / "pgbench-haproxy-connect" / "pgbench-C-haproxy-maxconn2.tar.gz"
    top = first(capture)
    assert top["rule"] == "connection-ceiling" and top["subject"] == "be_pg/pg1"
    assert "capture/app/haproxy.cfg:" in " ".join(top["sources"]) + top["title"] + str(top["evidence"])
    outside = next(f for f in document(capture)["findings"] if f["rule"] == "bottleneck-outside-database")
    assert outside["id"] in top["related"]
    # one DB time in the whole report: the finding's account is the metric's
    accounting = document(capture)["metrics"]["time_accounting"]
    assert outside["impact"]["measured_db_time_s"] == pytest.approx(accounting["db_time_s"], rel=1e-6)


def test_nic_irqs_pinned_to_one_cpu_of_three_nodes_leads_with_that_cpu():
    top = first(FIXTURES / "multinode" / "numa3x1-irq-cpu0.tar.gz")
    assert top["rule"] == "softirq-concentration" and top["subject"] == "CPU 0 (node 0)"
    assert "virtio0" in top["title"]


@pytest.mark.parametrize("name", ["mariadb-lock-wait", "pg-lock-wait"])
def test_sessions_waiting_for_a_lock_lead_with_the_lock_wait_and_its_blocker(name: str):
    top = first(FIXTURES / "lockwait" / f"{name}.tar.gz")
    assert top["rule"] == "lock-wait" and top["subject"] == "table accounts"
    assert "blocker" in top["title"] and "capture/db/" in top["title"]
    assert not [f for f in document(FIXTURES / "lockwait" / f"{name}.tar.gz")["findings"] if f["rule"] == "full-table-scan"]


def test_demo_summary_holds_every_critical_and_the_flip_names_the_statistics_job():
    doc = document(DEMO)
    criticals = [f["id"] for f in doc["findings"] if f["severity"] == "critical"]
    assert criticals and set(criticals) <= set(doc["verdict"]["findings"])
    flip = next(f for f in doc["findings"] if f["rule"] == "plan-flip")
    assert "auto analyze" in flip["title"].lower() and "tidb_slow_query.log:" in flip["title"]
