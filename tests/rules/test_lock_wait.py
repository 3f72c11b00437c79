"""lock-wait on hand-built statements; the SQL rules judge execution time; sleep is not DB time."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.sql import SqlOptions, derive_sql, is_sleep, with_logged_lock_waits
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.rules.base import DOC_SECTIONS, RuleInput, split_doc_sections
from dbdiag.rules.sql import dominant_statement, full_table_scan, lock_wait
from tests.rules.sql_synthetic import LINES_PER_ENTRY, SOURCE, START, filler, run, sql_input, statement_table

SCAN = "SELECT * FROM orders WHERE note = 'x'"  # 50,000 rows examined for 1: a full scan by the rows signal


def _waiting_scans(count: int, query_time_s: float, lock_time_s: float) -> list[dict]:
    return run(SCAN, query_time_s, count, engine="mariadb", lock_time_s=lock_time_s, rows_examined=50_000, rows_sent=1)


def _timed(rows: list[dict], conn_ids: list[str], starts_s: list[float]) -> list[dict]:
    return [
        {**row, "conn_id": conn, "start_ts": START + timedelta(seconds=at), "end_ts": START + timedelta(seconds=at + (row["query_time_s"] or 0.0))}
        for row, conn, at in zip(rows, conn_ids, starts_s)
    ]


def _lock_tables_scenario(waits: int = 5, lock_time_s: float = 2.0) -> list[dict]:
    """Connection 6 holds LOCK TABLES orders WRITE from 10 s to 13 s; ``waits`` scans wait for it from 10.5 s."""
    holder = _timed(
        run("LOCK TABLES orders WRITE", 0.0001, engine="mariadb") + run("DO SLEEP(3)", 3.0, engine="mariadb") + run("UNLOCK TABLES", 0.0003, engine="mariadb"),
        ["6", "6", "6"], [10.0, 10.0001, 13.0002],
    )
    waiting = _timed(_waiting_scans(waits, lock_time_s + 0.01, lock_time_s), [str(20 + i) for i in range(waits)], [10.5] * waits)
    work = _timed(filler(1.0, count=10, engine="mariadb"), ["30"] * 10, [float(i) for i in range(10)])
    return work + holder + waiting


def test_lock_wait_documents_all_sections_and_is_skipped_without_statements():
    sections = split_doc_sections(lock_wait.RULE.doc)
    assert all(sections.get(name) for name in DOC_SECTIONS)
    outcome = run_rule(lock_wait.RULE, RuleInput(tables={}, derived={}, metrics={}))
    assert outcome.status is Status.SKIPPED and outcome.missing == ("statement",)


def test_a_scan_that_only_waited_is_a_lock_wait_not_a_full_scan():
    inp = sql_input(_lock_tables_scenario())
    scan = run_rule(full_table_scan.RULE, inp)
    assert scan.status is Status.PASSED, [f.title for f in scan.findings]  # before: "Full table scan ... takes 90.9%"
    assert "lock wait left out" in scan.measured
    outcome = run_rule(lock_wait.RULE, inp)
    assert outcome.status is Status.FIRED
    (finding,) = outcome.findings
    assert finding.subject == "table orders"
    assert finding.severity is Severity.CRITICAL
    assert finding.impact["waits"] == 5 and finding.impact["db_time_s"] == pytest.approx(10.0)
    holder_line = 1 + 10 * LINES_PER_ENTRY  # the LOCK TABLES row (rows are numbered in list order)
    assert finding.sources[0] == f"{SOURCE}:{holder_line}"
    assert "blocker: connection 6, LOCK TABLES orders WRITE" in finding.title
    blocker = next(e for e in finding.evidence if e.title.startswith("Blocker"))
    assert [row[1] for row in blocker.rows] == ["LOCK TABLES orders WRITE", "DO SLEEP(?)", "UNLOCK TABLES"]
    assert "KILL 6;" in finding.remediation and "INNODB_LOCK_WAITS" in finding.remediation


def test_share_of_db_time_excludes_sleep():
    inp = sql_input(_lock_tables_scenario())
    (finding,) = run_rule(lock_wait.RULE, inp).findings
    work_s = 1.0 + 0.0001 + 0.0003 + 5 * 2.01  # the DO SLEEP(3) of the holder is not DB time
    assert finding.impact["share_of_db_time"] == pytest.approx(10.0 / work_s, abs=1e-4)


def test_just_under_the_total_wait_passes_and_a_minor_wait_is_not_counted():
    under = run_rule(lock_wait.RULE, sql_input(_lock_tables_scenario(waits=1, lock_time_s=0.99)))
    assert under.status is Status.PASSED and "1 wait(s), 990.0 ms" in under.measured
    at = run_rule(lock_wait.RULE, sql_input(_lock_tables_scenario(waits=1, lock_time_s=1.0)))
    assert at.status is Status.FIRED
    minor = run(SCAN, 4.0, 3, engine="mariadb", lock_time_s=1.9, rows_examined=50_000, rows_sent=1)  # 47.5% of each: working
    outcome = run_rule(lock_wait.RULE, sql_input(minor + filler(1.0, engine="mariadb")))
    assert outcome.status is Status.PASSED
    assert run_rule(full_table_scan.RULE, sql_input(minor + filler(1.0, engine="mariadb"))).status is Status.FIRED


def test_without_a_visible_blocker_the_finding_says_so():
    rows = _timed(_waiting_scans(3, 2.0, 1.9), ["1", "2", "3"], [5.0, 5.0, 5.0]) + filler(1.0, engine="mariadb")
    (finding,) = run_rule(lock_wait.RULE, sql_input(rows)).findings
    assert "blocker: no blocker visible in the capture" in finding.title
    assert "KILL <blocking thread id>;" in finding.remediation


def test_postgres_acquired_waits_become_lock_time_of_the_statement_that_waited():
    statements = statement_table(_timed(
        run("UPDATE accounts SET balance = 1 WHERE id = 7", 1.0, 2, engine="postgresql") + run("SELECT 1", 0.5, engine="postgresql"),
        ["41", "42", "41"], [0.0, 0.2, 1.5],
    ))
    waits = t.conform(t.LOCK_WAIT, pl.DataFrame({
        "ts": [START + timedelta(seconds=0.9), START + timedelta(seconds=1.1)], "kind": ["acquired", "acquired"],
        "conn_id": ["41", "42"], "wait_s": [0.8, 1.5], "source": [SOURCE, SOURCE],
    }))
    locked = with_logged_lock_waits(statements, waits)
    assert locked["lock_time_s"].to_list() == [0.8, 1.0, None]  # capped at the query time; the next statement keeps none


def test_sleep_statements_are_counted_apart_and_never_dominate():
    rows = run("SELECT SLEEP(5)", 5.0, 10, engine="mariadb") + run("DO SLEEP(1)", 1.0, 5, engine="mariadb") + filler(1.0, count=10, engine="mariadb")
    rows += run("SELECT name FROM users WHERE id = 3", 0.3, 12, engine="mariadb")
    frame, metrics = derive_sql({t.STATEMENT: statement_table(rows)}, SqlOptions())
    assert frame.filter(pl.col("statement_class") == "sleep").height == 15
    summary = metrics["sql_summary"]
    assert summary["sleep"]["statements"] == 15 and summary["sleep"]["time_s"] == pytest.approx(55.0)
    assert summary["db_time_s"] == pytest.approx(1.0 + 3.6)
    assert all("sleep" not in row["fingerprint"] for row in metrics["sql_profile"])
    assert sum(row["share_of_db_time_pct"] for row in metrics["sql_profile"]) == pytest.approx(100.0)
    inp = sql_input(rows)
    outcome = run_rule(dominant_statement.RULE, inp)
    assert outcome.status is Status.FIRED  # the user lookup: 3.6 s of 4.6 s, not SELECT SLEEP(5) with 50 s
    assert "78%" in outcome.findings[0].title


@pytest.mark.parametrize(("sql", "sleeps"), [
    ("SELECT SLEEP(2)", True), ("do sleep(0.5);", True), ("SELECT pg_sleep(1.5)", True), ("select pg_sleep_for('5 minutes')", True),
    ("SELECT pg_sleep_until('tomorrow 03:00')", True), ("WAITFOR DELAY '00:00:05'", True), ("SELECT SLEEP(1) AS s FROM DUAL", True),
    ("SELECT * FROM t WHERE SLEEP(1)", False), ("SELECT BENCHMARK(1000000, MD5('x'))", False), ("SELECT sleep_minutes FROM shifts", False),
    (None, False),
])
def test_what_counts_as_sleep(sql: str | None, sleeps: bool):
    assert pl.DataFrame({"sql": [sql]}, schema={"sql": pl.String}).select(is_sleep(pl.col("sql"))).item() is sleeps


def _row_lock_scenario(baseline_runs: int) -> list[dict]:
    """Connection 11 keeps a transaction that updated orders open from 10 s to 12 s; 3 point updates of
    other connections run inside it for 1.8 s each (Lock_time 1 ms: MariaDB leaves row locks out)."""
    update = "UPDATE orders SET state = 2 WHERE id = 7"
    holder = _timed(
        run("START TRANSACTION", 0.0001, engine="mariadb") + run("UPDATE orders SET state = 1 WHERE id < 50", 0.001, engine="mariadb")
        + run("COMMIT", 0.001, engine="mariadb"),
        ["11", "11", "11"], [10.0, 10.001, 12.0],
    )
    waiting = _timed(run(update, 1.8, 3, engine="mariadb", lock_time_s=0.001), ["21", "22", "23"], [10.1, 10.1, 10.1])
    usual = _timed(run(update, 0.002, baseline_runs, engine="mariadb", lock_time_s=0.0001), ["30"] * baseline_runs, [20.0 + i for i in range(baseline_runs)])
    return holder + waiting + usual + _timed(filler(1.0, engine="mariadb"), ["31"] * 10, [30.0 + i for i in range(10)])


def test_mariadb_row_lock_waits_are_inferred_from_an_open_transaction_and_said_apart():
    (finding,) = run_rule(lock_wait.RULE, sql_input(_row_lock_scenario(baseline_runs=3))).findings
    assert finding.subject == "table orders" and finding.impact["waits"] == 3
    assert finding.impact["inferred_row_lock_wait_s"] == pytest.approx(3 * (1.8 - 0.002))
    assert finding.severity is Severity.WARNING  # inferred waits alone: never critical
    assert "inferred InnoDB row-lock waits" in finding.impact["description"]
    assert "blocker: connection 11, START TRANSACTION" in finding.title


def test_row_lock_waits_are_not_inferred_without_a_usual_time():
    outcome = run_rule(lock_wait.RULE, sql_input(_row_lock_scenario(baseline_runs=2)))  # 2 runs outside the hold: too few
    assert outcome.status is Status.PASSED


def test_holds_by_the_real_table_name_in_log_order():
    """holds(): a DDL before any transaction, LOCK TABLES of two tables, a transaction that wrote the table
    (sbtest1, which the fingerprints write as sbtest?), one that wrote only sbtest2, one never closed."""
    from dbdiag.rules.sql.lock_holds import holds, may_hold

    script = [  # (connection, start s, SQL)
        ("5", 1.0, "ALTER TABLE sbtest1 ADD INDEX k (k)"),
        ("6", 2.0, "LOCK TABLES sbtest1 WRITE, sbtest2 READ"), ("6", 2.5, "UNLOCK TABLES"),
        ("7", 3.0, "BEGIN"), ("7", 3.1, "SELECT c FROM sbtest1 WHERE id = 1"), ("7", 3.2, "UPDATE sbtest1 SET k = k + 1 WHERE id = 2"),
        ("7", 3.3, "COMMIT"),
        ("8", 4.0, "BEGIN"), ("8", 4.1, "UPDATE sbtest2 SET k = k + 1 WHERE id = 2"), ("8", 4.2, "COMMIT"),
        ("9", 5.0, "START TRANSACTION"), ("9", 5.1, "DELETE FROM sbtest1 WHERE id = 3"),
    ]
    rows = [{**run(sql, 0.001, engine="mariadb")[0], "conn_id": conn} for conn, _, sql in script]
    statements = statement_table(_timed(rows, [conn for conn, _, _ in script], [at for _, at, _ in script]))
    everything, _ = derive_sql({t.STATEMENT: statements}, SqlOptions())
    assert everything.filter(pl.col("sql").str.starts_with("UPDATE sbtest"))["fingerprint"].unique().to_list() == ["update sbtest? set k = k ? ? where id = ?"]
    found = holds(everything.filter(may_hold("sbtest1")), "sbtest1", set())
    assert [(conn, how, begin.second, end.second) for conn, begin, end, how in found] == [
        ("5", "DDL on sbtest1", 1, 1),
        ("6", "LOCK TABLES sbtest1 ... UNLOCK TABLES", 2, 2),
        ("7", "open transaction that wrote to sbtest1", 3, 3),
    ]
    assert [conn for conn, *_ in holds(everything.filter(may_hold("sbtest2")), "sbtest2", set())] == ["6", "8"]
    assert holds(everything.filter(may_hold("sbtest1")), "sbtest1", {"5", "6", "7"}) == []


def test_a_locking_read_holds_its_table_by_the_real_name():
    """A transaction whose only write is ``SELECT ... FOR UPDATE`` on sbtest1 holds sbtest1 (its fingerprint
    says sbtest?: the table comes from the statement's own text), not sbtest2; ``LOCK IN SHARE MODE`` too."""
    from dbdiag.rules.sql.lock_holds import holds, may_hold

    script = [  # (connection, start s, SQL)
        ("7", 3.0, "BEGIN"), ("7", 3.1, "SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE"), ("7", 3.3, "COMMIT"),
        ("8", 4.0, "BEGIN"), ("8", 4.1, "select c from `sbtest2` where id = 2 lock in share mode"), ("8", 4.2, "COMMIT"),
    ]
    rows = [{**run(sql, 0.001, engine="mariadb")[0], "conn_id": conn} for conn, _, sql in script]
    statements = statement_table(_timed(rows, [conn for conn, _, _ in script], [at for _, at, _ in script]))
    everything, _ = derive_sql({t.STATEMENT: statements}, SqlOptions())
    assert everything["target_tables"].to_list() == [None, "sbtest1", None, None, "sbtest2", None]
    assert [(conn, how) for conn, _, _, how in holds(everything.filter(may_hold("sbtest1")), "sbtest1", set())] == [
        ("7", "open transaction that wrote to sbtest1"),
    ]
    assert [conn for conn, *_ in holds(everything.filter(may_hold("sbtest2")), "sbtest2", set())] == ["8"]
