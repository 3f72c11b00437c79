"""``dbdiag compare`` on two real pgbench runs that differ in their clients only, 4 against 32, made with a copy
of the shared script (fixtures/compare/README.md, copy K): the load is named first, in both orders; the plans
that auto_explain logged for the slower runs, which run no slower than the plan both sides ran, are no cause;
the pgbench summary is the outcome (its progress lines have no clock to place them on a slow log); and the slow
log's numbers are named as what crossed its threshold, not as the outcome."""

from __future__ import annotations

import pytest

from tests.compare_fixtures import compared, reports_of

FEW, MANY = "postgres-pgbench-clients-4", "postgres-pgbench-clients-32"


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return reports_of(FEW, MANY)



@pytest.mark.parametrize("order", ["few-first", "many-first"])
def test_the_clients_are_named_first_and_the_logged_plans_are_no_cause(reports, order: str) -> None:
    baseline, capture = (FEW, MANY) if order == "few-first" else (MANY, FEW)
    slow_side = "capture" if order == "few-first" else "baseline"
    document = compared(reports[baseline], reports[capture])
    verdict = document["verdict"]
    assert verdict["slow_side"] == slow_side
    first = verdict["explained"][0]
    assert (first["area"], first["key"], first[slow_side]) == ("load", "pgbench TPC-B (sort of) clients", 32)
    assert first["remediation"] == [] and first["related_findings"] == []  # no finding is about the test's set-up
    assert "load pgbench TPC-B (sort of) clients" in verdict["headline"]
    assert [e["area"] for e in verdict["explained"]] == ["load"]
    # the plans auto_explain logged for the slow runs are listed, not ranked
    plans = [d for d in document["differences"] if d["area"] == "plans"]
    assert plans and all(f"plans:{d['key']}" in verdict["also_differs"] for d in plans)
    # the outcome is pgbench's own summary; the slow log's rates are what crossed its threshold
    outcome = verdict["outcome"]
    assert outcome["key"] in ("latency_avg (pgbench summary)", "tps (pgbench summary)")
    keys = {d["key"] for d in document["differences"] if d["area"] == "outcome"}
    assert "latency_avg (pgbench summary)" in keys
    assert not [k for k in keys if k.startswith(("statements per second", "DB time per second", "statement latency", "idle gap"))]
    assert any(k.startswith("logged statements per second (slow log") for k in keys)


SYNC_OFF, SYNC_ON = "postgres-pgbench-sync-commit-off", "postgres-pgbench-sync-commit-on"


@pytest.mark.parametrize("order", ["off-first", "on-first"])
def test_a_setting_neither_capture_holds_is_said_to_be_missing(order: str) -> None:
    """synchronous_commit off against on (copy K plus one line): the shared script collects no PostgreSQL settings,
    so the cause cannot be seen; the verdict says what to collect instead of naming something else."""
    names = (SYNC_OFF, SYNC_ON) if order == "off-first" else (SYNC_ON, SYNC_OFF)
    documents = reports_of(*names)
    document = compared(documents[names[0]], documents[names[1]])
    verdict = document["verdict"]
    assert verdict["slow_side"] == ("capture" if order == "off-first" else "baseline")
    assert verdict["outcome"]["key"] == "tps (pgbench summary)"
    assert verdict["explained"] == []
    assert verdict["headline"].endswith("neither capture holds the database's settings: collect them on both sides")
    assert [n["area"] for n in verdict["not_compared"]] == ["settings"] and "SHOW ALL" in verdict["not_compared"][0]["reason"]
