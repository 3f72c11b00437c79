"""The derived ``change`` table: which statements and events are changes, and what each row says."""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.changes import BULK_MIN_ROWS, BULK_MIN_TIME_S, changes, classify
from tests.rules.sql_synthetic import run, statement_table


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("ALTER TABLE `shop`.`orders` ALTER INDEX idx_a IGNORED", ("ddl", "index-ignored", "orders", "idx_a")),
        ("alter table orders alter index idx_a not ignored", ("ddl", "index-not-ignored", "orders", "idx_a")),
        ("ALTER TABLE t1 ALTER INDEX i INVISIBLE", ("ddl", "index-invisible", "t1", "i")),
        ("ALTER TABLE t1 ALTER INDEX i VISIBLE", ("ddl", "index-visible", "t1", "i")),
        ("ALTER TABLE t1 DROP INDEX i", ("ddl", "drop-index", "t1", "i")),
        ("ALTER TABLE t1 ADD UNIQUE KEY u (a, b), ALGORITHM=INPLACE", ("ddl", "create-index", "t1", "u")),
        ("CREATE INDEX CONCURRENTLY IF NOT EXISTS q_state ON ONLY public.q (state)", ("ddl", "create-index", "q", "q_state")),
        ('DROP INDEX CONCURRENTLY "Q_State"', ("ddl", "drop-index", None, "Q_State")),
        ("DROP INDEX i ON t1", ("ddl", "drop-index", "t1", "i")),
        ("ALTER TABLE t1 ADD COLUMN c INT", ("ddl", "alter-table", "t1", None)),
        ("/* app */ TRUNCATE TABLE t1", ("ddl", "truncate", "t1", None)),
        ("ANALYZE TABLE t1 PERSISTENT FOR ALL", ("statistics", "analyze", "t1", None)),
        ("analyze table t1", ("statistics", "analyze", "t1", None)),  # TiDB's auto analyze as its slow log writes it
        ("ANALYZE (VERBOSE) jobs", ("statistics", "analyze", "jobs", None)),
        ("ANALYZE", ("statistics", "analyze", None, None)),
        ("VACUUM (ANALYZE) jobs", ("statistics", "analyze", "jobs", None)),
        ("LOCK STATS t1", ("statistics", "lock-stats", "t1", None)),
        ("SET GLOBAL innodb_buffer_pool_size = 1073741824", ("config", "set-global", None, "innodb_buffer_pool_size")),
        ("ALTER SYSTEM SET random_page_cost = 1.1", ("config", "alter-system", None, "random_page_cost")),
        ("SELECT pg_reload_conf()", ("config", "reload", None, None)),
        ("COPY jobs FROM STDIN", ("bulk-change", "copy", "jobs", None)),
    ],
)
def test_classify(sql: str, expected: tuple):
    assert classify(sql) == expected


@pytest.mark.parametrize("sql", ["ANALYZE SELECT * FROM t1", "ANALYZE FORMAT=JSON SELECT 1", "SELECT * FROM t1", "SET NAMES utf8mb4",
                                 "COPY jobs TO STDOUT", "SHOW INDEX FROM t1"])
def test_not_a_change(sql: str):
    assert classify(sql) is None


def test_bulk_changes_need_rows_or_a_long_set_based_write():
    rows = (
        run("INSERT INTO t1 VALUES (1)", 0.001, engine="mariadb", rows_affected=BULK_MIN_ROWS - 1)
        + run("DELETE FROM t1 WHERE a < 5", 0.001, engine="mariadb", rows_affected=BULK_MIN_ROWS)
        + run("INSERT INTO jobs SELECT * FROM staging", BULK_MIN_TIME_S - 0.01, engine="postgresql")
        + run("INSERT INTO jobs SELECT * FROM staging", BULK_MIN_TIME_S, engine="postgresql")
        + run("INSERT INTO jobs VALUES (1)", 5.0, engine="postgresql")  # one row, however long it ran
    )
    found = changes({t.STATEMENT: statement_table(rows)})
    assert found.select("action", "table", "rows", "line").rows() == [("delete", "t1", BULK_MIN_ROWS, 21), ("insert", "jobs", None, 61)]


def test_rows_carry_time_connection_place_and_redacted_text():
    rows = run("ALTER TABLE t1 ADD COLUMN note VARCHAR(10) DEFAULT 'secret'", 0.2, engine="mysql", conn_id="42")
    row = changes({t.STATEMENT: statement_table(rows)}).row(0, named=True)
    assert row["statement"] == "ALTER TABLE t1 ADD COLUMN note VARCHAR(?) DEFAULT ?"
    assert (row["conn_id"], row["source"], row["line"], row["engine"]) == ("42", "db/slow.log", 1, "mysql")
    assert row["ts"] == statement_table(rows)["end_ts"][0]
    shown = changes({t.STATEMENT: statement_table(rows)}, show_literals=True)
    assert "'secret'" in shown["statement"][0]


def test_restarts_and_oom_kills_come_from_the_events():
    at = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)
    events = t.conform(t.EVENT, pl.DataFrame({
        "ts": [at, at], "component": ["kernel", "mysqld"], "kind": ["oom-kill", "aborted-connection"],
        "process": ["mariadbd", None], "pid": [77, None], "message": ["Out of memory: Killed process 77", "Aborted"],
        "source": ["os/dmesg", "db/err.log"], "line": [3, 9],
    }))
    found = changes({t.EVENT: events})
    assert found.select("kind", "action", "object", "conn_id", "source", "line").rows() == [
        ("oom-kill", "oom-kill", "mariadbd", "77", "os/dmesg", 3)
    ]


def test_nothing_to_read_gives_none_and_the_schema_is_declared():
    assert changes({}) is None
    frame = changes({t.STATEMENT: statement_table(run("SELECT 1", 0.1))})
    assert frame.schema == pl.Schema(t.CHANGE_SCHEMA) and frame.height == 0


def test_the_servers_own_analyze_is_auto_analyze():
    rows = run("analyze table `bank`.`mq_producer_msg`", 120.0, engine="tidb", is_internal=True) + run("ANALYZE TABLE t1", 0.1, engine="tidb")
    found = changes({t.STATEMENT: statement_table(rows)})
    assert found.select("action", "table").rows() == [("auto-analyze", "mq_producer_msg"), ("analyze", "t1")]
