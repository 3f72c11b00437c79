"""The SQL syntax of remedies follows the capture's engine and version (``engine_version``).

MariaDB and PostgreSQL remedies of full-table-scan, dominant-statement, or-without-index-merge and
buffer-pool-undersized run on the real servers (tests/real_servers.py), also those that fire on no
capture of the repository; MySQL 8 and TiDB ones are parsed with sqlglot (MySQL dialect; sqlglot has
no TiDB dialect), the TiDB-only forms checked against the grammar of the PingCAP docs
("CREATE [GLOBAL|SESSION] BINDING", "SET [GLOBAL|SESSION] <variable>").
"""

from __future__ import annotations

import re

import polars as pl
import pytest
import sqlglot

from dbdiag import tables as t
from dbdiag.derive import derive_all
from dbdiag.engine import run_rule
from dbdiag.findings import Status
from dbdiag.rules.base import RuleInput
from dbdiag.rules.config import buffer_pool_undersized
from dbdiag.rules.sql import full_table_scan, or_without_index_merge, plan_cache_miss, plan_check
from tests.real_servers import run_sql, scratch_database
from tests.remedy_sql import placeholders, statements


MARIADB = {"engine": "mariadb", "version": "10.11.19-MariaDB-0+deb12u1-log", "number": [10, 11, 19], "source": "x"}
POSTGRESQL = {"engine": "postgresql", "version": "15.18", "number": [15, 18], "source": "x"}
MYSQL_8_0_15 = {"engine": "mysql", "version": "8.0.15", "number": [8, 0, 15], "source": "x"}
MYSQL_8_0_36 = {"engine": "mysql", "version": "8.0.36", "number": [8, 0, 36], "source": "x"}
TIDB_7_0 = {"engine": "tidb", "version": "8.0.11-TiDB-v7.0.0", "number": [7, 0, 0], "source": "x"}
TIDB_7_5 = {"engine": "tidb", "version": "8.0.11-TiDB-v7.5.1", "number": [7, 5, 1], "source": "x"}
ITEMS = {
    "mariadb": "CREATE TABLE items (id INT PRIMARY KEY, sku VARCHAR(20), supplier_code VARCHAR(12))",
    "postgresql": "CREATE TABLE items (id int PRIMARY KEY, sku text, supplier_code text)",
}
OR_QUERY = "SELECT id FROM items WHERE sku = 'SKU-1' OR supplier_code = 'SUP-2'"
SCAN_QUERY = "SELECT count(*) FROM items WHERE supplier_code = 'SUP-1610'"
UNION_REWRITE = "SELECT id FROM items WHERE sku = 'SKU-1' UNION SELECT id FROM items WHERE supplier_code = 'SUP-2'"


def _or_remedy(engine: str, version: dict | None, literals_shown: bool = True) -> str:
    predicate = or_without_index_merge.find_or_predicate(OR_QUERY, engine, "items")
    assert predicate is not None
    return or_without_index_merge._remediation(engine, predicate, plan_check.runnable_sample(OR_QUERY, literals_shown), version)


def _scan_remedy(engine: str, version: dict | None, literals_shown: bool = True) -> str:
    suggestion = full_table_scan.suggest_index(SCAN_QUERY, engine, "items")
    return full_table_scan._remediation(engine, suggestion, "items", plan_check.plan_check(engine, version, SCAN_QUERY, literals_shown))


def _settings(engine: str, rows: list[tuple[str, str]]) -> pl.DataFrame:
    return t.conform(t.DB_SETTING, pl.DataFrame(
        {"engine": engine, "kind": "variable", "name": [n for n, _ in rows], "value": [v for _, v in rows], "source": "db/settings.tsv"}))


def _ram(size_mb: int) -> dict[str, pl.DataFrame]:
    return {t.NUMA_NODE: t.conform(t.NUMA_NODE, pl.DataFrame({"node": [0], "cpus": ["0-3"], "size_mb": [size_mb], "source": "os/numactl.txt"}))}


def _buffer_pool_remedy(engine: str, rows: list[tuple[str, str]], ram_mb: int, version: dict | None) -> str:
    tables = {t.DB_SETTING: _settings(engine, rows), **_ram(ram_mb)}
    derived = derive_all(tables).tables  # the settings as the server runs them, RAM as host_count says
    outcome = run_rule(buffer_pool_undersized.RULE, RuleInput(tables=tables, derived=derived, metrics={"engine_version": version} if version else {}))
    assert outcome.status is Status.FIRED, outcome
    return outcome.findings[0].remediation


def _thp_remedy(engine: str) -> str:
    from dbdiag.rules.config.transparent_hugepages_enabled import _remediation

    return _remediation(None, engine)


def _runnable(text: str) -> list[str]:
    found = statements(text)
    assert found, text
    assert not [s for s in found if placeholders(s)], found
    return found


# ---- the syntax each engine and version gets ----------------------------------------------------


@pytest.mark.parametrize(("engine", "version", "verb"), [
    ("mariadb", MARIADB, "ANALYZE FORMAT=JSON"), ("mariadb", None, "ANALYZE FORMAT=JSON"),
    ("postgresql", POSTGRESQL, "EXPLAIN (ANALYZE, BUFFERS)"), ("mysql", MYSQL_8_0_36, "EXPLAIN ANALYZE"),
    ("mysql", MYSQL_8_0_15, "EXPLAIN FORMAT=JSON"), ("mysql", None, "EXPLAIN ANALYZE"), ("tidb", TIDB_7_5, "EXPLAIN ANALYZE"),
])
def test_plan_check_verb_by_engine_and_version(engine, version, verb):
    text = plan_check.plan_check(engine, version, SCAN_QUERY, True)
    assert text.startswith(f"{verb} {SCAN_QUERY};")
    assert ("8.0.18+" in text) == (engine == "mysql" and version is None)  # the minimum version, when unknown


def test_a_sample_with_replaced_literals_or_a_change_is_advice_in_prose():
    assert statements(plan_check.plan_check("mariadb", MARIADB, "SELECT a FROM t WHERE b = ?", True)) == []
    assert statements(plan_check.plan_check("postgresql", POSTGRESQL, SCAN_QUERY, False)) == []
    update = plan_check.plan_check("postgresql", POSTGRESQL, "UPDATE t SET a = 1 WHERE b = 2", True)
    assert statements(update) == [] and "changes data" in update


def test_mariadb_remedies_print_nothing_mariadb_lacks():
    texts = [_scan_remedy("mariadb", MARIADB), _or_remedy("mariadb", MARIADB),
             _buffer_pool_remedy("mariadb", [("innodb_buffer_pool_size", str(32 * 2**20))], 256, MARIADB)]
    for text in texts:
        for foreign in ("EXPLAIN ANALYZE", "SET PERSIST", "BINDING", "INDEX_MERGE(", "INVISIBLE", "CONCURRENTLY"):
            assert foreign not in text, (foreign, text)


def test_mysql_version_chooses_hint_and_persist():
    assert "INDEX_MERGE(items" in _or_remedy("mysql", MYSQL_8_0_36)
    assert "INDEX_MERGE(" not in _or_remedy("mysql", {**MYSQL_8_0_15, "number": [8, 0, 19]})
    assert "MySQL 8.0.20+" in _or_remedy("mysql", None)
    rows = [("innodb_buffer_pool_size", str(32 * 2**20))]
    assert "or: SET PERSIST innodb_buffer_pool_size = 134217728;" in _buffer_pool_remedy("mysql", rows, 256, MYSQL_8_0_36)
    assert "SET PERSIST" not in _buffer_pool_remedy("mysql", rows, 256, {**MYSQL_8_0_36, "number": [5, 7, 40]})
    assert "(MySQL 8.0+, not MariaDB: SET PERSIST" in _buffer_pool_remedy("mysql", rows, 256, None)


def test_tidb_version_chooses_the_plan_cache_variable():
    never = pl.DataFrame({"fp_id": ["abc"]})
    assert "tidb_session_plan_cache_size = 200;" in plan_cache_miss._remediation(never, TIDB_7_5)
    old = plan_cache_miss._remediation(never, TIDB_7_0)
    assert "SET GLOBAL tidb_prepared_plan_cache_size = 200;" in old and "tidb_session_plan_cache_size" not in old
    assert "(v7.1+; before: tidb_prepared_plan_cache_size)" in plan_cache_miss._remediation(never, None)


# ---- MySQL 8 and TiDB: parsed ---------------------------------------------------------------------

TIDB_ONLY = {  # statement forms sqlglot does not know, by the PingCAP docs' grammar
    "CREATE GLOBAL BINDING": re.compile(r"^CREATE GLOBAL BINDING FOR (SELECT .+) USING (SELECT /\*\+ USE_INDEX_MERGE\(.+\) \*/ .+)$"),
}


@pytest.mark.parametrize("version", [MYSQL_8_0_36, MYSQL_8_0_15, None], ids=["8.0.36", "8.0.15", "unknown"])
def test_mysql_8_statements_parse(version):
    rows = [("innodb_buffer_pool_size", str(32 * 2**20))]
    text = "\n".join([_scan_remedy("mysql", version), _or_remedy("mysql", version), _buffer_pool_remedy("mysql", rows, 256, version)])
    for statement in _runnable(text):
        sqlglot.parse_one(statement, read="mysql", error_level=sqlglot.ErrorLevel.RAISE)


def test_tidb_statements_parse():
    never = pl.DataFrame({"fp_id": ["abc"]})
    text = "\n".join([_scan_remedy("tidb", TIDB_7_5), _or_remedy("tidb", TIDB_7_5), plan_cache_miss._remediation(never, TIDB_7_5)])
    found = _runnable(text)
    assert any(s.startswith("CREATE GLOBAL BINDING FOR SELECT") for s in found)
    for statement in found:
        form = next((pattern for prefix, pattern in TIDB_ONLY.items() if statement.startswith(prefix)), None)
        if form is None:
            sqlglot.parse_one(statement, read="mysql", error_level=sqlglot.ErrorLevel.RAISE)
            continue
        match = form.match(statement)
        assert match, statement
        for inner in match.groups():
            sqlglot.parse_one(inner, read="mysql", error_level=sqlglot.ErrorLevel.RAISE)


def test_tidb_binding_without_literals_is_prose():
    text = _or_remedy("tidb", TIDB_7_5, literals_shown=False)
    assert "BINDING" in text and not [s for s in statements(text) if "BINDING" in s or placeholders(s)]


# ---- MariaDB and PostgreSQL: run ------------------------------------------------------------------


def _run_each(server, engine: str, texts: list[str]) -> list[str]:
    """Each remedy's statements on a fresh copy of the table (two remedies may add the same index)."""
    ran = []
    for text in texts:
        db = scratch_database(server)
        run_sql(db, ITEMS[engine])
        for statement in _runnable(text):
            run_sql(db, statement)
            ran.append(statement)
    return ran


def test_mariadb_remedies_run_on_mariadb(mariadb):
    pool = run_sql(mariadb, "SELECT @@innodb_buffer_pool_size").split()[-1]
    small_pool = [("innodb_buffer_pool_size", str(32 * 2**20))]
    try:
        ran = _run_each(mariadb, "mariadb", [
            _scan_remedy("mariadb", MARIADB), _or_remedy("mariadb", MARIADB), _or_remedy("mariadb", None),
            _buffer_pool_remedy("mariadb", small_pool, 256, MARIADB), _buffer_pool_remedy("mariadb", small_pool, 256, None),
        ])
    finally:
        run_sql(mariadb, f"SET GLOBAL innodb_buffer_pool_size = {pool}")
    assert UNION_REWRITE in ran
    assert f"ANALYZE FORMAT=JSON {SCAN_QUERY}" in ran and "SET GLOBAL innodb_buffer_pool_size = 134217728" in ran


def test_postgresql_remedies_run_on_postgresql(postgres):
    try:
        ran = _run_each(postgres, "postgresql", [
            _scan_remedy("postgresql", POSTGRESQL), _or_remedy("postgresql", POSTGRESQL),
            _buffer_pool_remedy("postgresql", [("shared_buffers", "16MB")], 1024, POSTGRESQL), _thp_remedy("postgresql"),
        ])
    finally:
        run_sql(postgres, "ALTER SYSTEM RESET shared_buffers; ALTER SYSTEM RESET effective_cache_size; ALTER SYSTEM RESET huge_pages; "
                          "SELECT pg_reload_conf()")
    assert UNION_REWRITE in ran
    assert f"EXPLAIN (ANALYZE, BUFFERS) {SCAN_QUERY}" in ran and "ALTER SYSTEM SET shared_buffers = '256MB'" in ran


def test_prose_remedies_name_only_the_capture_s_engine():
    from dbdiag.rules.app.connection_pool_oversized import _thread_pool
    from dbdiag.rules.config.transparent_hugepages_enabled import _remediation as thp_remedy

    assert "PgBouncer" not in _thread_pool("mariadb", 4, 8) and "thread_handling" not in _thread_pool("postgresql", 4, 8)
    assert "PgBouncer" in _thread_pool(None, 4, 8) and "thread_handling" in _thread_pool(None, 4, 8)  # unknown: every engine's
    assert "PostgreSQL" not in thp_remedy(None, "mariadb") and "MariaDB" not in thp_remedy(None, "postgresql")
    assert statements(thp_remedy(None, "postgresql")) == ["ALTER SYSTEM SET huge_pages = 'try'"]  # run on PostgreSQL below


def test_mariadb_refuses_explain_analyze_so_no_remedy_prints_it(mariadb):
    """Why plan_check prints ANALYZE FORMAT=JSON for MariaDB: 10.11 has no EXPLAIN ANALYZE (MySQL 8.0.18+ syntax)."""
    from tests.real_servers import SqlError

    db = scratch_database(mariadb)
    run_sql(db, ITEMS["mariadb"])
    with pytest.raises(SqlError, match="1064"):
        run_sql(db, f"EXPLAIN ANALYZE {SCAN_QUERY}")
    run_sql(db, f"{plan_check.explain_verb('mariadb', MARIADB)} {SCAN_QUERY}")
