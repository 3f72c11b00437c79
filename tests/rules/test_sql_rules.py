from __future__ import annotations

import pytest

from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.rules.base import DOC_SECTIONS, RuleInput, split_doc_sections
from dbdiag.rules.sql import full_table_scan, or_without_index_merge, plan_cache_miss, stale_statistics, stale_statistics_signals
from tests.rules.sql_synthetic import filler, fp_id_of, plan_for, run, sql_input

SQL_RULES = (stale_statistics, full_table_scan, or_without_index_merge, plan_cache_miss)


@pytest.mark.parametrize("module", SQL_RULES, ids=lambda m: m.RULE.id)
def test_every_sql_rule_documents_all_sections(module):
    sections = split_doc_sections(module.RULE.doc)
    for name in DOC_SECTIONS:
        assert sections.get(name), f"{module.RULE.id}: docstring lacks a non-empty '{name}:' section"


@pytest.mark.parametrize("module", SQL_RULES, ids=lambda m: m.RULE.id)
def test_missing_statements_are_named(module):
    outcome = run_rule(module.RULE, RuleInput(tables={}, derived={}, metrics={}))
    assert outcome.status is Status.SKIPPED
    assert outcome.missing == ("statement",)


def _evidence(finding, title_start: str):
    return next(e for e in finding.evidence if e.title.startswith(title_start))


# ---- full-table-scan ---------------------------------------------------------------------------

ORDERS_SCAN = "SELECT * FROM orders WHERE status = 3 AND created_at > '2024-05-01'"
TIDB_FULL_SCAN = [{"node_type": "TableReader", "depth": 0, "est_rows": 10.0, "actual_rows": 12.0},
                  {"node_type": "Selection", "depth": 1, "est_rows": 10.0, "actual_rows": 12.0, "filter": "eq(shop.orders.status, 3)"},
                  {"node_type": "TableFullScan", "depth": 2, "relation": "orders", "est_rows": 2_000_000.0, "actual_rows": 2_000_000.0}]


def test_full_scan_fires_with_table_index_and_tidb_ddl():
    rows = run(ORDERS_SCAN, 0.5, 10, full_scan=True, rows_examined=2_000_000, rows_sent=12) + filler(2.0)
    inp = sql_input(rows, plan_for(range(10), TIDB_FULL_SCAN))
    outcome = run_rule(full_table_scan.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    share = 100 * 5.0 / 7.0
    assert finding.severity is Severity.CRITICAL  # 71% >= 25%
    assert finding.subject == f"fingerprint {fp_id_of(inp, 'SELECT * FROM orders')}"
    assert f"Full table scan of orders takes {share:.1f}% of database time (5.0 s in 10 execution(s)); threshold 5% and 1 s" == finding.title
    assert finding.impact["share_pct"] == pytest.approx(share, abs=0.05)
    assert finding.impact["rows_examined"] == 20_000_000
    executions = _evidence(finding, "Scanning executions")
    assert executions.rows[0][:2] == (10, 10)
    assert executions.rows[0][4:8] == (20_000_000, 120, round(20_000_000 / 120, 1), "orders")
    signals = dict(_evidence(finding, "How the scan shows").rows)
    assert list(signals.values()) == [10, 0, 0]  # the flag and rows examined only stand in when no plan was logged
    node = _evidence(finding, "Full-scan plan nodes").rows[0]
    assert node[:4] == ("TableFullScan", "orders", 2_000_000.0, 2_000_000.0)
    assert "ALTER TABLE orders ADD INDEX idx_orders_status_created_at (status, created_at);" in finding.remediation
    assert "SHOW INDEX FROM orders;" in finding.remediation
    assert "TableFullScan" in finding.remediation
    statement = _evidence(finding, "Statement")
    assert statement.title == "Statement (literals replaced)"
    assert "'2024-05-01'" not in statement.text and "status = ?" in statement.text
    assert finding.sources[0] == "db/slow.log:1"


def test_full_scan_postgresql_seq_scan_counts_rows_removed_by_filter_per_loop():
    sql = "SELECT id FROM accounts_archive WHERE email = 'a@b.c'"
    seq_scan = [{"node_type": "Seq Scan", "depth": 0, "relation": "accounts_archive", "est_rows": 1.0, "actual_rows": 1.0,
                 "loops": 2.0, "rows_removed_by_filter": 4_999.0, "filter": "(email = 'a@b.c'::text)"}]
    rows = run(sql, 1.0, 3, engine="postgresql") + filler(3.0, engine="postgresql")
    fired = run_rule(full_table_scan.RULE, sql_input(rows, plan_for(range(3), seq_scan)))
    assert fired.status is Status.FIRED  # (1 + 4,999) x 2 loops = 10,000 rows read
    finding = fired.findings[0]
    assert "CREATE INDEX CONCURRENTLY idx_accounts_archive_email ON accounts_archive (email);" in finding.remediation
    assert "\\d accounts_archive" in finding.remediation
    assert "EXPLAIN (ANALYZE, BUFFERS)" in finding.remediation
    one_loop = [{**seq_scan[0], "loops": 1.0}]  # 5,000 rows read: a small table
    assert run_rule(full_table_scan.RULE, sql_input(rows, plan_for(range(3), one_loop))).status is Status.PASSED


def test_full_scan_flag_on_a_small_lookup_table_passes():
    small = [{"node_type": "TableFullScan", "depth": 0, "relation": "currencies", "est_rows": 180.0, "actual_rows": 180.0}]
    rows = run("SELECT * FROM currencies WHERE code = 'EUR'", 1.0, 5, full_scan=True, rows_examined=180, rows_sent=1) + filler(1.0)
    outcome = run_rule(full_table_scan.RULE, sql_input(rows, plan_for(range(5), small)))
    assert outcome.status is Status.PASSED
    assert "no full scans among 15 timed statement(s)" == outcome.measured


def test_full_scan_from_rows_examined_on_mysql_without_plan():
    sql = "UPDATE jobs SET state = 'done' WHERE state = 'running' AND run_at < NOW()"
    rows = run(sql, 2.0, 2, engine="mysql", rows_examined=500_000, rows_sent=0, rows_affected=3) + filler(4.0, engine="mysql")
    outcome = run_rule(full_table_scan.RULE, sql_input(rows))
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.CRITICAL
    assert list(dict(_evidence(finding, "How the scan shows").rows).values()) == [0, 0, 2]
    assert "ALTER TABLE jobs ADD INDEX idx_jobs_state_run_at (state, run_at);" in finding.remediation
    assert "ALGORITHM=INPLACE, LOCK=NONE" in finding.remediation


def test_full_scan_rows_examined_does_not_override_a_logged_plan():
    # MariaDB KB example: a 3-table join through indexes examining 65,633 rows to count them.
    rows = run("select count(*) from customer, orders, nation where c_custkey=o_custkey and c_nationkey=n_nationkey and n_name='GERMANY'",
               5.524103, 1, engine="mariadb", rows_examined=65_633, rows_sent=1)
    explain = [{"node_type": "ref", "depth": 0, "relation": table, "est_rows": est} for table, est in (("nation", 1.0), ("customer", 3145.0), ("orders", 7.0))]
    assert run_rule(full_table_scan.RULE, sql_input(rows)).status is Status.FIRED
    assert run_rule(full_table_scan.RULE, sql_input(rows, plan_for([0], explain))).status is Status.PASSED


def test_full_scan_rows_examined_just_under_the_floor_passes():
    sql = "SELECT COUNT(*) FROM audit WHERE actor = 'x'"
    under = run(sql, 2.0, 2, engine="mysql", rows_examined=full_table_scan.MIN_SCANNED_ROWS - 1, rows_sent=1) + filler(1.0, engine="mysql")
    assert run_rule(full_table_scan.RULE, sql_input(under)).status is Status.PASSED
    at = run(sql, 2.0, 2, engine="mysql", rows_examined=full_table_scan.MIN_SCANNED_ROWS, rows_sent=1) + filler(1.0, engine="mysql")
    assert run_rule(full_table_scan.RULE, sql_input(at)).status is Status.FIRED


def test_full_scan_share_threshold_just_under_and_at():
    scans = run(ORDERS_SCAN, 1.0, 2, full_scan=True)  # 2 s
    at = run_rule(full_table_scan.RULE, sql_input(scans + filler(38.0, count=38)))  # 2 / 40 = 5%
    assert at.status is Status.FIRED
    assert at.findings[0].severity is Severity.WARNING
    assert at.findings[0].impact["share_pct"] == 5.0
    under = run_rule(full_table_scan.RULE, sql_input(scans + filler(38.1, count=38)))
    assert under.status is Status.PASSED
    assert "4.99" not in under.measured and "5.0% of statement time (fires from 1 s and 5%)" in under.measured


def test_full_scan_total_time_threshold_just_under_and_at():
    # Exactly representable durations: 4 x 0.25 s is 1 s on the dot.
    assert run_rule(full_table_scan.RULE, sql_input(run(ORDERS_SCAN, 0.2475, 4, full_scan=True))).status is Status.PASSED
    assert run_rule(full_table_scan.RULE, sql_input(run(ORDERS_SCAN, 0.25, 4, full_scan=True))).status is Status.FIRED


def test_full_scan_indexed_statements_pass():
    index_plan = [{"node_type": "IndexRangeScan", "depth": 0, "relation": "orders", "index_name": "idx_status", "est_rows": 12.0, "actual_rows": 12.0}]
    rows = run(ORDERS_SCAN, 0.5, 10, full_scan=False, rows_examined=12, rows_sent=12) + filler(2.0)
    outcome = run_rule(full_table_scan.RULE, sql_input(rows, plan_for(range(10), index_plan)))
    assert outcome.status is Status.PASSED


def test_full_scan_without_usable_where_says_so():
    rows = run("SELECT * FROM orders WHERE lower(note) = 'x'", 1.0, 3, full_scan=True) + filler(1.0)
    finding = run_rule(full_table_scan.RULE, sql_input(rows)).findings[0]
    assert "an index cannot be derived from the statement alone" in _evidence(finding, "Index that would help").text
    assert "ADD INDEX" not in finding.remediation


def test_full_scan_reports_at_most_max_findings_heaviest_first():
    rows = []
    for table in range(full_table_scan.MAX_FINDINGS + 2):
        rows += run(f"SELECT * FROM big_{chr(97 + table)} WHERE k = 1", 1.0 + table, 1, full_scan=True)
    outcome = run_rule(full_table_scan.RULE, sql_input(rows))
    assert len(outcome.findings) == full_table_scan.MAX_FINDINGS
    assert "big_g" in outcome.findings[0].title


# ---- stale-statistics ------------------------------------------------------------------------

QUEUE_SQL = "SELECT * FROM task_queue WHERE status = 1 AND flow_id = 7 LIMIT 10"


def test_stale_statistics_fires_on_tidb_pseudo_stats():
    rows = run(QUEUE_SQL, 0.5, 10, stats_info="task_queue:pseudo,flows:446183563574853633") + filler(5.0)
    inp = sql_input(rows)
    outcome = run_rule(stale_statistics.RULE, inp)
    assert outcome.status is Status.FIRED
    assert len(outcome.findings) == 1  # flows has real statistics
    finding = outcome.findings[0]
    assert finding.subject == "table task_queue"
    assert finding.severity is Severity.CRITICAL  # 50% of statement time
    assert finding.title.startswith("Stale statistics on task_queue: pseudo statistics")
    assert "50.0% of database time (5.0 s)" in finding.title
    assert finding.impact["fingerprints"] == [fp_id_of(inp, "SELECT * FROM task_queue")]
    assert finding.impact["statements"] == 10
    by_class = _evidence(finding, "Statements that used these statistics")
    assert by_class.rows[0][:3] == (fp_id_of(inp, "SELECT * FROM task_queue"), 10, "5.0 s")
    assert _evidence(finding, "TiDB Stats line").rows == (("pseudo", 10, None, None),)
    assert "ANALYZE TABLE task_queue;" in finding.remediation
    assert "LOCK STATS task_queue;" in finding.remediation
    assert "SHOW STATS_META WHERE table_name = 'task_queue';" in finding.remediation


def test_stale_statistics_outdated_modify_ratio_at_and_under_threshold():
    def outcome(rows_count: int, modified: int):
        stats = f"task_queue:446183563574853633[{rows_count};{modified}][idx_status:allLoaded,idx_flow:allEvicted][status:allEvicted]"
        return run_rule(stale_statistics.RULE, sql_input(run(QUEUE_SQL, 1.0, 3, stats_info=stats) + filler(1.0)))

    at = outcome(10_000, 8_000)
    assert at.status is Status.FIRED
    assert _evidence(at.findings[0], "TiDB Stats line").rows == (("outdated", 3, 10_000, 8_000),)
    assert outcome(10_000, 7_999).status is Status.PASSED
    # A queue drained to empty: every modification counts, above the floor of modified rows.
    assert outcome(0, stale_statistics.OUTDATED_MIN_MODIFIED_ROWS).status is Status.FIRED
    assert outcome(0, stale_statistics.OUTDATED_MIN_MODIFIED_ROWS - 1).status is Status.PASSED


def _pg_rows(query_time_s: float = 1.0, count: int = 3) -> list[dict]:
    return run("SELECT * FROM orders WHERE status = 1", query_time_s, count, engine="postgresql") + filler(2.0, engine="postgresql")


def _index_scan(est: float, actual: float, **more) -> list[dict]:
    return [{"node_type": "Index Scan", "depth": 0, "relation": "orders", "index_name": "orders_status_idx",
             "est_rows": est, "actual_rows": actual, "loops": 1.0, "filter": "(status = 1)", **more}]


def test_stale_statistics_postgresql_misestimate_at_and_under_factor():
    at = run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), _index_scan(10.0, 1_000.0))))
    assert at.status is Status.FIRED
    finding = at.findings[0]
    assert finding.subject == "table orders"
    assert "estimates up to 100x off" in finding.title
    assert finding.impact["max_misestimate"] == 100.0
    nodes = _evidence(finding, "Plan nodes on orders").rows
    # the filter as every report shows it: the derived plan nodes, literals replaced
    assert nodes == (("Index Scan", "orders_status_idx", 10.0, 1_000.0, 1.0, None, "100x", "(status = ?)", 3),)
    assert "ANALYZE orders;" in finding.remediation
    assert "ALTER TABLE orders ALTER COLUMN status SET STATISTICS 1000;" in finding.remediation
    under = run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), _index_scan(10.0, 999.0))))
    assert under.status is Status.PASSED


def test_stale_statistics_ignores_tiny_nodes(monkeypatch):
    plan = plan_for(range(3), _index_scan(1.0, 500.0))  # 500x off
    assert run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan)).status is Status.FIRED
    monkeypatch.setattr(stale_statistics_signals, "MIN_NODE_ROWS", 501.0)  # where the signals read it
    assert run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan)).status is Status.PASSED
    # With the default floor of 100 rows, a node under 100 rows cannot be 100x off (estimates count from 1 row).
    monkeypatch.undo()
    assert run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), _index_scan(0.01, 99.0)))).status is Status.PASSED


def test_stale_statistics_index_scan_filter_removing_many_rows():
    plan = _index_scan(1.0, 1.0, rows_removed_by_filter=250_000.0)
    finding = run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), plan))).findings[0]
    assert "an index expected to return 100x fewer rows than its filter then removed" in finding.impact["description"]
    assert _evidence(finding, "Plan nodes on orders").rows[0][5:7] == (250_000.0, "250,001x")


def test_stale_statistics_judges_join_inputs_but_not_other_nodes():
    update = [{"node_type": "ModifyTable", "depth": 0, "relation": "orders", "est_rows": 5_000.0, "actual_rows": 0.0}]
    assert run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), update))).status is Status.PASSED
    joined = [
        {"node_type": "Hash Join", "depth": 0, "est_rows": 10.0, "actual_rows": 10.0},
        {"node_type": "Subquery on orders", "depth": 1, "relation": "orders", "est_rows": 5.0, "actual_rows": 50_000.0},
        {"node_type": "Hash", "depth": 1, "est_rows": 10.0, "actual_rows": 10.0},
        {"node_type": "Seq Scan", "depth": 2, "relation": "customers", "est_rows": 10.0, "actual_rows": 10.0},
    ]
    finding = run_rule(stale_statistics.RULE, sql_input(_pg_rows(), plan_for(range(3), joined))).findings[0]
    assert finding.subject == "table orders"
    assert "10,000x" in _evidence(finding, "Plan nodes on orders").rows[0][6]


def test_stale_statistics_tidb_actrows_judged_except_below_index_join():
    def plan(join: str) -> list[dict]:
        return [
            {"node_type": join, "depth": 0, "est_rows": 10.0, "actual_rows": 9.0},
            {"node_type": "TableReader", "depth": 1, "est_rows": 10.0, "actual_rows": 9.0},
            {"node_type": "TableFullScan", "depth": 2, "relation": "flows", "est_rows": 10.0, "actual_rows": 9.0},
            {"node_type": "IndexLookUp", "depth": 1, "est_rows": 1.0, "actual_rows": 9_000.0},
            {"node_type": "IndexRangeScan", "depth": 2, "relation": "task_queue", "index_name": "idx_status", "est_rows": 1.0, "actual_rows": 9_000.0},
        ]

    rows = run(QUEUE_SQL, 1.0, 3) + filler(1.0)
    hash_join = run_rule(stale_statistics.RULE, sql_input(rows, plan_for(range(3), plan("HashJoin"))))
    assert hash_join.status is Status.FIRED
    assert [f.subject for f in hash_join.findings] == ["table task_queue"]
    assert "TiDB 6.5+" in hash_join.findings[0].remediation
    index_join = run_rule(stale_statistics.RULE, sql_input(rows, plan_for(range(3), plan("IndexJoin"))))
    assert index_join.status is Status.PASSED


def test_stale_statistics_mariadb_rows_vs_r_rows():
    rows = run("SELECT * FROM orders WHERE status = 1", 1.5, 2, engine="mariadb") + filler(1.0, engine="mariadb")
    explain = [{"node_type": "ref", "depth": 0, "relation": "orders", "index_name": "idx_status", "est_rows": 12.0, "actual_rows": 48_000.0}]
    finding = run_rule(stale_statistics.RULE, sql_input(rows, plan_for(range(2), explain))).findings[0]
    assert "estimates up to 4,000x off" in finding.title
    assert "ANALYZE TABLE orders PERSISTENT FOR COLUMNS (status) INDEXES (idx_status);" in finding.remediation
    assert "histogram_size" in finding.remediation


def test_stale_statistics_mariadb_columns_without_an_index_name_the_empty_index_list():
    """MariaDB's grammar takes ``FOR COLUMNS (...)`` only with ``INDEXES (...)``: a full scan names no index, so the
    list is empty (``INDEXES ()``), not left out (ERROR 1064; run on the real server by test_remedies_on_real_engines)."""
    from dbdiag.rules.sql.stale_statistics_remedies import _remediation_steps

    text = _remediation_steps("mariadb", "orders", ["status"], None, set())
    assert "ANALYZE TABLE orders PERSISTENT FOR COLUMNS (status) INDEXES ();" in text


def test_stale_statistics_time_threshold_just_under_and_at():
    def outcome(query_time_s: float):
        rows = run(QUEUE_SQL, query_time_s, 4, stats_info="task_queue:pseudo") + filler(5.0)
        return run_rule(stale_statistics.RULE, sql_input(rows))

    assert outcome(0.2475).status is Status.PASSED
    assert outcome(0.25).status is Status.FIRED


def test_stale_statistics_share_threshold_just_under_and_at():
    def outcome(filler_s: float):
        rows = run(QUEUE_SQL, 1.0, 1, stats_info="task_queue:pseudo") + filler(filler_s, count=99)
        return run_rule(stale_statistics.RULE, sql_input(rows))

    at = outcome(99.0)  # 1 s of 100 s
    assert at.status is Status.FIRED and at.findings[0].severity is Severity.WARNING
    assert outcome(99.1).status is Status.PASSED


def test_stale_statistics_leaves_out_internal_and_system_statements():
    rows = (
        run("SELECT VARIABLE_VALUE FROM mysql.global_variables", 2.0, 3, stats_info="GLOBAL_VARIABLES:pseudo")
        + run(QUEUE_SQL, 2.0, 3, stats_info="task_queue:pseudo", is_internal=True)
        + filler(1.0)
    )
    outcome = run_rule(stale_statistics.RULE, sql_input(rows))
    assert outcome.status is Status.SKIPPED
    assert outcome.missing[0].startswith(
        "no TiDB Stats line and no plan with both estimated and actual rows on user statements "
        "(6 internal or system-schema statement(s) left out)"
    )


def test_stale_statistics_passes_with_healthy_stats():
    rows = run(QUEUE_SQL, 1.0, 3, stats_info="task_queue:446183563574853633[100000;20]") + filler(1.0)
    outcome = run_rule(stale_statistics.RULE, sql_input(rows))
    assert outcome.status is Status.PASSED
    assert "3 statement(s) with TiDB Stats, no pseudo or outdated table" in outcome.measured


# ---- or-without-index-merge -----------------------------------------------------------------

OR_SQL = "SELECT id, amount FROM orders WHERE buyer_id = 7 OR seller_id = 9"
OR_SCAN = [{"node_type": "TableReader", "depth": 0, "est_rows": 20.0, "actual_rows": 3.0},
           {"node_type": "Selection", "depth": 1, "est_rows": 20.0, "actual_rows": 3.0, "filter": "or(eq(shop.orders.buyer_id, 7), eq(shop.orders.seller_id, 9))"},
           {"node_type": "TableFullScan", "depth": 2, "relation": "orders", "est_rows": 2_000_000.0, "actual_rows": 2_000_000.0}]


def test_or_without_index_merge_fires_on_tidb_full_scan():
    rows = run(OR_SQL, 0.8, 5, full_scan=True, index_names="[accounts:PRIMARY]") + filler(4.0)
    inp = sql_input(rows, plan_for(range(5), OR_SCAN))
    outcome = run_rule(or_without_index_merge.RULE, inp)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.subject == f"fingerprint {fp_id_of(inp, 'SELECT id, amount')}"
    assert finding.title == (
        "OR over buyer_id, seller_id of orders runs as a full scan without index merge: 50.0% of database time "
        "(4.0 s, 5 execution(s)); threshold 1% and 1 s"
    )
    assert finding.severity is Severity.CRITICAL
    assert _evidence(finding, "OR across columns").rows == (("orders", "buyer_id, seller_id", "buyer_id = ? OR seller_id = ?"),)
    indexes = _evidence(finding, "Indexes").text
    assert "Indexes on orders that the log shows in use: none." in indexes
    assert "SHOW INDEX FROM orders;" in indexes
    assert "SET GLOBAL tidb_enable_index_merge = ON;" in finding.remediation
    assert "/*+ USE_INDEX_MERGE(orders, idx_orders_buyer_id, idx_orders_seller_id) */" in finding.remediation
    assert "ALTER TABLE orders ADD INDEX idx_orders_buyer_id (buyer_id), ADD INDEX idx_orders_seller_id (seller_id);" in finding.remediation
    # literals replaced: the UNION rewrite would hold '?' and cannot run, so it is advice in prose
    assert "WHERE buyer_id = ?" not in finding.remediation and "one indexed query per branch joined with UNION" in finding.remediation


def test_or_without_index_merge_hint_uses_the_alias_of_the_table():
    rows = run("SELECT o.id FROM orders o WHERE o.buyer_id = 7 OR o.seller_id = 9", 2.0, 1, full_scan=True)
    finding = run_rule(or_without_index_merge.RULE, sql_input(rows)).findings[0]
    assert "/*+ USE_INDEX_MERGE(o, idx_orders_buyer_id, idx_orders_seller_id) */" in finding.remediation


def test_or_without_index_merge_shows_indexes_named_in_the_log():
    rows = run(OR_SQL, 0.8, 5, full_scan=True, index_names="[orders:idx_buyer]") + filler(4.0)
    finding = run_rule(or_without_index_merge.RULE, sql_input(rows)).findings[0]
    assert "Indexes on orders that the log shows in use: idx_buyer." in _evidence(finding, "Indexes").text


def test_or_with_index_merge_in_the_plan_passes():
    merged = [{"node_type": "IndexMerge", "depth": 0, "est_rows": 20.0, "actual_rows": 3.0},
              {"node_type": "IndexRangeScan", "depth": 1, "relation": "orders", "index_name": "idx_buyer", "est_rows": 10.0, "actual_rows": 2.0},
              {"node_type": "IndexRangeScan", "depth": 1, "relation": "orders", "index_name": "idx_seller", "est_rows": 10.0, "actual_rows": 1.0},
              {"node_type": "TableFullScan", "depth": 1, "relation": "currencies", "est_rows": 20_000.0, "actual_rows": 20_000.0}]
    rows = run(OR_SQL, 0.8, 5, full_scan=True) + filler(4.0)
    assert run_rule(or_without_index_merge.RULE, sql_input(rows, plan_for(range(5), merged))).status is Status.PASSED


def test_or_on_one_column_or_across_tables_passes():
    same_column = run("SELECT * FROM orders WHERE buyer_id = 7 OR buyer_id = 9", 1.0, 5, full_scan=True)
    two_tables = run("SELECT * FROM orders o JOIN users u ON u.id = o.buyer_id WHERE o.state = 1 OR u.vip = 1", 1.0, 5, full_scan=True)
    outcome = run_rule(or_without_index_merge.RULE, sql_input(same_column + two_tables))
    assert outcome.status is Status.PASSED
    assert "2 of them OR different columns" not in outcome.measured and "0 of them OR different columns of one table" in outcome.measured


def test_or_without_full_scan_passes():
    rows = run(OR_SQL, 0.8, 5, full_scan=False) + filler(4.0)
    outcome = run_rule(or_without_index_merge.RULE, sql_input(rows))
    assert outcome.status is Status.PASSED
    assert outcome.measured.startswith("no full-scan executions without index merge")


def test_or_without_index_merge_mysql_and_postgresql_remediation():
    mysql = run("SELECT * FROM t WHERE a = 1 OR b = 2", 1.0, 3, engine="mysql", full_scan=True) + filler(1.0, engine="mysql")
    finding = run_rule(or_without_index_merge.RULE, sql_input(mysql)).findings[0]
    assert "index_merge=on,index_merge_union=on,index_merge_sort_union=on" in finding.remediation
    assert "/*+ INDEX_MERGE(t idx_t_a, idx_t_b) */" in finding.remediation
    seq = [{"node_type": "Seq Scan", "depth": 0, "relation": "orders", "est_rows": 2.0, "actual_rows": 2.0, "loops": 1.0, "rows_removed_by_filter": 900_000.0}]
    pg = run("SELECT * FROM orders o WHERE (o.buyer_id = 7 OR o.seller_id = 9) AND o.state > 2 ORDER BY o.id", 1.0, 3, engine="postgresql") + filler(1.0, engine="postgresql")
    finding = run_rule(or_without_index_merge.RULE, sql_input(pg, plan_for(range(3), seq))).findings[0]
    assert "CREATE INDEX CONCURRENTLY idx_orders_buyer_id ON orders (buyer_id);" in finding.remediation
    assert "CREATE INDEX CONCURRENTLY idx_orders_seller_id ON orders (seller_id);" in finding.remediation
    assert "BitmapOr" in finding.remediation
    assert "\\d orders" in _evidence(finding, "Indexes").text


def test_or_without_index_merge_time_and_share_thresholds():
    def outcome(query_time_s: float, filler_s: float, filler_count: int = 10):
        rows = run(OR_SQL, query_time_s, 1, full_scan=True) + filler(filler_s, count=filler_count)
        return run_rule(or_without_index_merge.RULE, sql_input(rows)).status

    assert outcome(1.0, 1.0) is Status.FIRED
    assert outcome(0.99, 1.0) is Status.PASSED
    assert outcome(1.0, 99.0, 99) is Status.FIRED  # exactly 1% of 100 s
    assert outcome(1.0, 99.1, 99) is Status.PASSED


# ---- plan-cache-miss ----------------------------------------------------------------------------

def _prepared(sql: str, executions: int, hits: int, query_time_s: float = 0.4, **fields) -> list[dict]:
    return (
        run(sql, query_time_s, hits, prepared=True, plan_from_cache=True, **fields)
        + run(sql, query_time_s * 2, executions - hits, prepared=True, plan_from_cache=False, **fields)
    )


def test_plan_cache_miss_fires_at_the_demo_ratio():
    rows = (
        _prepared("SELECT * FROM accounts WHERE id = 1", 60, 60)
        + _prepared("UPDATE accounts SET balance = balance - 5 WHERE id = 2", 30, 20)
        + _prepared("SELECT * FROM txn WHERE account_id IN (SELECT id FROM accounts WHERE branch = 3)", 20, 0)
        + run("SELECT 1", 0.5, 7, prepared=False)
    )
    inp = sql_input(rows)
    outcome = run_rule(plan_cache_miss.RULE, inp)
    assert outcome.status is Status.FIRED
    assert outcome.measured == "plan cache hit ratio 72.7% over 110 prepared executions (fires below 80%)"
    finding = outcome.findings[0]
    assert finding.title == "Plan cache hit ratio 72.7% over 110 prepared executions; threshold 80%"
    assert finding.severity is Severity.WARNING
    assert finding.impact["hit_ratio_pct"] == 72.7 and finding.impact["misses"] == 30
    assert _evidence(finding, "Prepared executions").rows == ((110, 80, 30, 72.7, 80.0, "24.0 s", 7),)
    misses = _evidence(finding, "Fingerprints with the most misses").rows
    subquery_id, update_id = fp_id_of(inp, "SELECT * FROM txn"), fp_id_of(inp, "UPDATE accounts")
    assert [r[0] for r in misses] == [subquery_id, update_id]
    assert misses[0][1:5] == (20, 0, 20, 0.0)
    assert misses[0][7] == "never served from the cache: likely not cacheable (sub-query)"
    assert misses[1][1:5] == (30, 20, 10, 66.7)
    assert misses[1][7].startswith("served from the cache sometimes")
    assert misses[1][5:7] == ("800.0 ms", "400.0 ms")
    for command in (
        "tidb_enable_prepared_plan_cache",
        "tidb_session_plan_cache_size",
        "tidb_prepared_plan_cache_size",
        "SHOW WARNINGS",
        "SET GLOBAL tidb_enable_non_prepared_plan_cache = ON;",
        "useServerPrepStmts=true&cachePrepStmts=true",
        f"never served from the cache: {subquery_id}",
    ):
        assert command in finding.remediation


def test_plan_cache_hit_ratio_at_and_just_under_threshold():
    at = run_rule(plan_cache_miss.RULE, sql_input(_prepared("SELECT * FROM accounts WHERE id = 1", 100, 80)))
    assert at.status is Status.PASSED
    assert "80.0%" in at.measured
    under = run_rule(plan_cache_miss.RULE, sql_input(_prepared("SELECT * FROM accounts WHERE id = 1", 100, 79)))
    assert under.status is Status.FIRED


def test_plan_cache_needs_enough_prepared_executions():
    few = run_rule(plan_cache_miss.RULE, sql_input(_prepared("SELECT * FROM accounts WHERE id = 1", 99, 0)))
    assert few.status is Status.PASSED
    assert "judged from 100" in few.measured
    enough = run_rule(plan_cache_miss.RULE, sql_input(_prepared("SELECT * FROM accounts WHERE id = 1", 100, 0)))
    assert enough.status is Status.FIRED
    reason = _evidence(enough.findings[0], "Fingerprints with the most misses").rows[0][7]
    assert reason == "never served from the cache: likely not cacheable (no cause visible in the SQL: SHOW WARNINGS after EXECUTE tells)"


def test_plan_cache_names_uncacheable_functions_and_index_merge():
    rows = _prepared("SELECT * FROM t WHERE a = 1 OR b = last_insert_id()", 100, 0, plan="IndexMerge_8 root ...")
    reason = _evidence(run_rule(plan_cache_miss.RULE, sql_input(rows)).findings[0], "Fingerprints with the most misses").rows[0][7]
    assert reason == "never served from the cache: likely not cacheable (function last_insert_id(), IndexMerge plan)"


def test_plan_cache_leaves_out_internal_statements():
    internal = _prepared("SELECT * FROM mysql.stats_meta", 200, 0, is_internal=True)
    rows = _prepared("SELECT * FROM accounts WHERE id = 1", 100, 100) + internal
    assert run_rule(plan_cache_miss.RULE, sql_input(rows)).status is Status.PASSED
    only_internal = run_rule(plan_cache_miss.RULE, sql_input(internal))
    assert only_internal.status is Status.SKIPPED
    assert only_internal.missing[0].startswith("no TiDB user statements (200 internal ones left out)")


def test_plan_cache_skips_without_tidb_or_prepared_field():
    mysql = run_rule(plan_cache_miss.RULE, sql_input(run("SELECT 1", 1.0, 200, engine="mysql")))
    assert mysql.status is Status.SKIPPED
    assert mysql.missing[0].startswith("no TiDB user statements:")
    no_field = run_rule(plan_cache_miss.RULE, sql_input(run("SELECT 1", 1.0, 200)))
    assert no_field.status is Status.SKIPPED
    assert "no Prepared field" in no_field.missing[0]
