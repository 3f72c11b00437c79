"""The real-server fixtures start MariaDB and PostgreSQL, run statements, and report refusals."""

from __future__ import annotations

import pytest

from tests.real_servers import SqlError, run_sql, scratch_database, split_statements


def test_split_keeps_quoted_semicolons_and_drops_comments():
    text = "SELECT 'a;b', \"c;d\"; /* x; */ -- y;\nSELECT `e;f`; DO $q$ BEGIN PERFORM 1; END $q$;"
    assert split_statements(text) == ["SELECT 'a;b', \"c;d\"", "SELECT `e;f`", "DO $q$ BEGIN PERFORM 1; END $q$"]


def test_mariadb_runs_ignored_index_ddl(mariadb):
    assert mariadb.version.startswith("10.11")
    db = scratch_database(mariadb)
    run_sql(db, "CREATE TABLE t (a INT, b INT, KEY i (a)); ALTER TABLE t ALTER INDEX i IGNORED;")
    run_sql(db, "ALTER TABLE t ALTER INDEX i NOT IGNORED; ANALYZE TABLE t; ANALYZE FORMAT=JSON SELECT * FROM t")
    assert run_sql(db, "SELECT ignored FROM information_schema.statistics WHERE index_name = 'i'").strip() == "NO"


def test_mariadb_refusal_names_the_statement(mariadb):
    with pytest.raises(SqlError, match=r"'EXPLAIN ANALYZE SELECT 1' refused: ERROR 1064"):
        run_sql(mariadb, "SELECT 1;\nEXPLAIN ANALYZE SELECT 1;\nSELECT 2")


def test_postgres_runs_concurrent_index_outside_a_transaction(postgres):
    assert postgres.version.startswith("15")
    db = scratch_database(postgres)
    run_sql(db, "CREATE TABLE q (id int, state text); CREATE INDEX CONCURRENTLY q_state ON q (state); ANALYZE q;")
    assert run_sql(db, "SELECT count(*) FROM pg_indexes WHERE indexname = 'q_state'").strip() == "1"


def test_postgres_refusal_names_the_statement(postgres):
    with pytest.raises(SqlError, match=r"'ANALYZE no_such_table' refused: .*does not exist"):
        run_sql(postgres, "SELECT 1; ANALYZE no_such_table; SELECT 2")
