"""The remedy SQL extractor (tests/remedy_sql.py) on remedies as dbdiag prints them: it finds every statement
(none silently missed), splits them where the engine would, and keeps prose and shell lines out."""

from __future__ import annotations

from tests.remedy_sql import placeholders, statements

# lock-wait on fixtures/lockwait/mariadb-lock-wait.tar.gz (the SELECT lines shortened)
MARIADB_LOCK_WAIT = """While the waits happen, see who blocks whom:
  SHOW FULL PROCESSLIST;   -- 'Waiting for table metadata lock' / 'Waiting for table level lock'
  SELECT OWNER_THREAD_ID, LOCK_STATUS FROM performance_schema.metadata_locks WHERE OBJECT_NAME = 'accounts';   -- with performance_schema on
End the blocker (its transaction rolls back): KILL 6;
Bound the waits: SET GLOBAL lock_wait_timeout = 60;   -- metadata and table locks, seconds
                 SET GLOBAL innodb_lock_wait_timeout = 10;   -- InnoDB row locks, seconds
Then: replace LOCK TABLES with short transactions, commit sooner in the blocking job, run DDL off-peak."""

# stale-statistics on fixtures/causes/pg-queue-stale-stats.tar.gz
PG_STALE_STATISTICS = """The plans went wrong after a bulk INSERT on jobs (capture/db/postgresql.log:625). Step 1 collects statistics on the data as it is now.
1. Refresh the statistics: ANALYZE jobs;
2. If estimates stay off for skewed columns, sample more: ALTER TABLE jobs ALTER COLUMN state SET STATISTICS 1000; ALTER TABLE jobs ALTER COLUMN queue_id SET STATISTICS 1000; ANALYZE jobs;
3. Keep them fresh on a fast-changing table: ALTER TABLE jobs SET (autovacuum_analyze_scale_factor = 0.02);
Check with EXPLAIN (ANALYZE) that estimated and actual rows now agree within 10x."""

# or-without-index-merge on TiDB (its step 2), and a full-table-scan of the old shape (a placeholder)
TIDB_INDEX_MERGE = ("2. Let the optimizer merge them: SET GLOBAL tidb_enable_index_merge = ON;  (default ON from v5.4; "
                    "check with SHOW VARIABLES LIKE 'tidb_enable_index_merge')")
OLD_FULL_SCAN = """1. See which indexes exist: \\d orders
   ethtool -L DEV combined N            # one queue per CPU
3. Check the plan no longer scans the table: EXPLAIN ANALYZE <statement>;"""


def test_every_statement_of_a_mariadb_remedy_and_no_prose():
    assert statements(MARIADB_LOCK_WAIT) == [
        "SHOW FULL PROCESSLIST",
        "SELECT OWNER_THREAD_ID, LOCK_STATUS FROM performance_schema.metadata_locks WHERE OBJECT_NAME = 'accounts'",
        "KILL 6",
        "SET GLOBAL lock_wait_timeout = 60",
        "SET GLOBAL innodb_lock_wait_timeout = 10",
    ]


def test_several_statements_on_one_line_split_where_the_engine_would():
    assert statements(PG_STALE_STATISTICS) == [
        "ANALYZE jobs",
        "ALTER TABLE jobs ALTER COLUMN state SET STATISTICS 1000", "ALTER TABLE jobs ALTER COLUMN queue_id SET STATISTICS 1000",
        "ANALYZE jobs",
        "ALTER TABLE jobs SET (autovacuum_analyze_scale_factor = 0.02)",
    ]


def test_a_semicolon_in_prose_after_a_statement_ends_nothing():
    assert statements(TIDB_INDEX_MERGE) == ["SET GLOBAL tidb_enable_index_merge = ON"]


def test_semicolons_in_quotes_comments_and_dollar_quotes_do_not_split():
    text = ("Run: SELECT 'a;b', \"c;d\" FROM t WHERE x = `e;f`; then\n"
            "  DO $$ BEGIN PERFORM 1; END $$;   -- PostgreSQL\n"
            "  SELECT 1 /* a; comment */ + 1;")
    assert statements(text) == ["SELECT 'a;b', \"c;d\" FROM t WHERE x = `e;f`", "DO $$ BEGIN PERFORM 1; END $$",
                                "SELECT 1 /* a; comment */ + 1"]


def test_lower_case_prose_shell_and_psql_lines_are_not_sql():
    assert statements("set the limit; then select the rows;\n  ethtool -L DEV combined N; sysctl -w a=1;\n\\d orders") == []
    assert statements("a statement without its end: SHOW INDEX FROM t") == []


def test_placeholders_make_half_sql():
    (found,) = statements(OLD_FULL_SCAN)
    assert placeholders(found) == ["<statement>"]
    assert placeholders("SELECT * FROM t WHERE a = ? AND b = '?' AND c <> 1 AND d < e") == ["?"]
    assert placeholders("ALTER TABLE t ALTER INDEX i NOT IGNORED") == []
