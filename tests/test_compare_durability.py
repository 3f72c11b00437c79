"""``dbdiag compare`` on two real MariaDB sysbench runs made as an unseen check (fixtures/compare/README.md, copies
G and H): the redo log not flushed at commit (``innodb_flush_log_at_trx_commit = 0``) against flushed with the
binary log synced too (``= 1``, ``sync_binlog = 1``, ``log_bin``). The durability settings are named first, in both
orders, with the commits' time as their effect; before, compare found "no difference that explains it"."""

from __future__ import annotations

import pytest

from tests.compare_fixtures import compared, reports_of

LAZY, SYNCED = "mariadb-sysbench-flush-0", "mariadb-sysbench-flush-1-binlog"
DURABILITY = {"mariadb variable innodb_flush_log_at_trx_commit", "mariadb variable sync_binlog", "mariadb variable log_bin"}


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return reports_of(LAZY, SYNCED)



@pytest.mark.parametrize("order", ["lazy-first", "synced-first"])
def test_durability_settings_explain_the_commit_time(reports, order: str) -> None:
    baseline, capture = (LAZY, SYNCED) if order == "lazy-first" else (SYNCED, LAZY)
    slow_side = "capture" if order == "lazy-first" else "baseline"
    document = compared(reports[baseline], reports[capture])
    verdict = document["verdict"]
    assert verdict["slow_side"] == slow_side
    assert {e["key"] for e in verdict["explained"]} == DURABILITY
    first = verdict["explained"][0]
    assert first["key"] == "mariadb variable innodb_flush_log_at_trx_commit" and first[slow_side] == "1"
    assert "sql:commit | DB time per second" in first["effects"]
    commit = next(d for d in document["differences"] if d["key"] == "commit | median")
    fast_side = "baseline" if slow_side == "capture" else "capture"
    assert commit[slow_side] > 10 * commit[fast_side]
    # a setting moves the commits' time, not every statement's
    assert not [e for e in first["effects"] if e.startswith("sql:") and not e.startswith("sql:commit |")]
    # the binary log's index file is a path of the run, no setting
    assert not [d for d in document["differences"] if d["key"].endswith("log_bin_index")]


def test_a_dropped_index_is_named_first_and_its_remedy_recreates_it() -> None:
    """Copy I (copy A plus one DDL): sbtest2's index xid dropped after the slow log was switched on. The DDL is the
    cause, the plans of sbtest2 that became full scans its effect, and the full-table-scan remedy recreates the
    index itself (no flip shows inside the capture, so there is no plan-flip remedy to point to)."""
    documents = reports_of("mariadb-sysbench-base", "mariadb-sysbench-index-dropped")
    document = compared(documents["mariadb-sysbench-base"], documents["mariadb-sysbench-index-dropped"])
    verdict = document["verdict"]
    assert verdict["slow_side"] == "capture"
    first = verdict["explained"][0]
    assert first["area"] == "events" and first["key"].startswith("drop-index ALTER TABLE sbtest2 MODIFY id INT NOT NULL, DROP INDEX xid")
    assert "at capture/db/mariadb-slow.log:7 (only in capture)" in verdict["headline"]
    assert "sbtest2:ALL" in first["effect"]
    remedies = [r["text"] for r in first["remediation"]]
    assert any("ALTER TABLE sbtest2 ADD INDEX xid (id);" in text for text in remedies), remedies
