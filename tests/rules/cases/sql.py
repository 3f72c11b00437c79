"""Declarative cases of the SQL rules (``tests/rules/rule_cases.py``): slow-log statements built with
``tests/rules/sql_synthetic.py`` (``run(sql, query_time_s, count, **columns)``, ``filler(total_s)``:
cheap point lookups) and the scenarios of the hand-written tests; the derive stage fingerprints them.
"""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.rules.sql.dominant_statement import DOMINANT_SHARE_PCT
from dbdiag.rules.sql.full_table_scan import MIN_SCANNED_ROWS
from dbdiag.rules.sql.lock_wait import MIN_TOTAL_WAIT_S
from dbdiag.rules.sql.or_without_index_merge import MIN_TOTAL_S as OR_MIN_TOTAL_S
from dbdiag.rules.sql.plan_cache_miss import MIN_HIT_RATIO_PCT
from dbdiag.rules.sql.plan_flip import SLOWDOWN_FACTOR
from dbdiag.rules.sql.stale_statistics import OUTDATED_MODIFY_RATIO
from tests.rules.rule_cases import RuleCase
from tests.rules.sql_synthetic import filler, run, statement_table
from tests.rules.test_lock_wait import _lock_tables_scenario
from tests.rules.test_plan_flip_causes import FAST_PLAN, LOOKUP, SLOW_PLAN
from tests.rules.test_sql_rules import OR_SQL, QUEUE_SQL, _prepared

LOOKUP_FP = "fingerprint A1395B04AF97A24FFCC42CFFC19D77B4"  # the fingerprint of LOOKUP
FAST_S = 0.01


def _statements(rows: list[dict]) -> dict:
    return {t.STATEMENT: statement_table(rows)}


def _two_plans(slowdown: float) -> dict:
    """30 runs of LOOKUP at 10 ms with the index plan, then 30 with the seq scan ``slowdown`` x slower, beside 20 s of other work."""
    rows = run(LOOKUP, FAST_S, 30, engine="postgresql", plan_signature=FAST_PLAN)
    rows += run(LOOKUP, FAST_S * slowdown, 30, engine="postgresql", plan_signature=SLOW_PLAN)
    return _statements(rows + filler(20.0, engine="postgresql"))


TABLE_ROWS = 10_000


def _modified(rows_modified: int) -> dict:
    """Three 1 s statements on task_queue whose TiDB Stats line says ``rows_modified`` of its 10,000 rows changed."""
    stats = f"task_queue:446183563574853633[{TABLE_ROWS};{rows_modified}][idx_status:allLoaded,idx_flow:allEvicted][status:allEvicted]"
    return _statements(run(QUEUE_SQL, 1.0, 3, stats_info=stats) + filler(10.0))


def _waited(lock_time_s: float) -> dict:
    """One scan of orders waiting ``lock_time_s`` behind connection 6's LOCK TABLES orders WRITE."""
    return _statements(_lock_tables_scenario(waits=1, lock_time_s=lock_time_s))


AUDIT_SQL = "SELECT COUNT(*) FROM audit WHERE actor = 'x'"


def _examined(rows_examined: int) -> dict:
    """Two 2 s MySQL statements on audit that examined ``rows_examined`` rows for one sent, beside 1 s of lookups."""
    return _statements(run(AUDIT_SQL, 2.0, 2, engine="mysql", rows_examined=rows_examined, rows_sent=1) + filler(1.0, engine="mysql"))


def _or_scan(query_time_s: float, full_scan: bool = True) -> dict:
    """One TiDB execution of an OR over two columns of orders (a full scan when ``full_scan``), beside 1 s of lookups."""
    return _statements(run(OR_SQL, query_time_s, 1, full_scan=full_scan) + filler(1.0))


PREPARED = 100


def _cache_hits(hits: int) -> dict:
    """100 prepared executions of one TiDB statement, ``hits`` of them served from the plan cache."""
    return _statements(_prepared("SELECT * FROM accounts WHERE id = 1", PREPARED, hits))


def _heaviest(seconds: float, others: tuple[float, ...] = (10.0,)) -> dict:
    """Ten runs on orders taking ``seconds`` in all, and ten lookups of accounts (then branches) per entry of ``others``."""
    rows = run("SELECT * FROM orders WHERE id = ?", seconds / 10, 10, engine="mysql")
    for table, total_s in zip(("accounts", "branches"), others):
        rows += run(f"SELECT name FROM {table} WHERE id = 42", total_s / 10, 10, engine="mysql")
    return _statements(rows)


OUTDATED = round(TABLE_ROWS * OUTDATED_MODIFY_RATIO)

CASES = (
    # the seq scan exactly SLOWDOWN_FACTOR x slower, losing 2.7 s of 23.3 s: critical
    RuleCase("plan-flip", "fires", lambda: _two_plans(SLOWDOWN_FACTOR),
             ((LOOKUP_FP, "critical", f"Plan flip: one statement {SLOWDOWN_FACTOR:.0f}x slower with another plan (10.0 ms to 100.0 ms"),)),
    RuleCase("plan-flip", "passes", lambda: _two_plans(1.1)),
    # 0.1 under SLOWDOWN_FACTOR: two plans, no flip
    RuleCase("plan-flip", "just-under", lambda: _two_plans(SLOWDOWN_FACTOR - 0.1)),
    RuleCase("stale-statistics", "fires", lambda: _modified(OUTDATED),
             (("table task_queue", "warning", f"outdated statistics ({OUTDATED:,} rows modified, {TABLE_ROWS:,} in the table)"),)),
    RuleCase("stale-statistics", "passes", lambda: _modified(20)),
    # one modified row under OUTDATED_MODIFY_RATIO of the table
    RuleCase("stale-statistics", "just-under", lambda: _modified(OUTDATED - 1)),
    RuleCase("lock-wait", "fires", lambda: _waited(MIN_TOTAL_WAIT_S),
             (("table orders", "critical", f"Lock wait on orders: 1 statement(s) waited {MIN_TOTAL_WAIT_S:.1f} s"),)),
    RuleCase("lock-wait", "passes", lambda: _waited(0.001)),
    # 10 ms under MIN_TOTAL_WAIT_S (well over 5% of DB time)
    RuleCase("lock-wait", "just-under", lambda: _waited(MIN_TOTAL_WAIT_S - 0.01)),
    RuleCase("full-table-scan", "fires", lambda: _examined(MIN_SCANNED_ROWS),
             (("fingerprint 6020392765A163801CB83C386FE38E2A", "critical", "Full table scan of audit takes 80.0% of database time (4.0 s in 2 execution(s))"),)),
    RuleCase("full-table-scan", "passes", lambda: _examined(1)),
    # one row under MIN_SCANNED_ROWS examined (the rows signal of a log without plans)
    RuleCase("full-table-scan", "just-under", lambda: _examined(MIN_SCANNED_ROWS - 1)),
    RuleCase("or-without-index-merge", "fires", lambda: _or_scan(OR_MIN_TOTAL_S),
             (("fingerprint 778D7BC2DF9DB2BAF8C716EA163749B4", "critical", "OR over buyer_id, seller_id of orders runs as a full scan without index merge"),)),
    RuleCase("or-without-index-merge", "passes", lambda: _or_scan(OR_MIN_TOTAL_S, full_scan=False)),
    # 10 ms under MIN_TOTAL_S (half of statement time: the share is not what stops it)
    RuleCase("or-without-index-merge", "just-under", lambda: _or_scan(OR_MIN_TOTAL_S - 0.01)),
    # one hit under MIN_HIT_RATIO_PCT of 100 executions
    RuleCase("plan-cache-miss", "fires", lambda: _cache_hits(round(MIN_HIT_RATIO_PCT) - 1),
             (("TiDB prepared plan cache", "warning", f"over {PREPARED} prepared executions; threshold {MIN_HIT_RATIO_PCT:.0f}%"),)),
    RuleCase("plan-cache-miss", "passes", lambda: _cache_hits(PREPARED)),
    # exactly MIN_HIT_RATIO_PCT: the rule fires only below it
    RuleCase("plan-cache-miss", "just-under", lambda: _cache_hits(round(MIN_HIT_RATIO_PCT))),
    # 10 s of orders against 9.9 s of lookups: just over DOMINANT_SHARE_PCT
    RuleCase("dominant-statement", "fires", lambda: _heaviest(10.0, (9.9,)),
             (("fingerprint 9C05EA5686390AEB296E90D8F864A512", "info", f"One statement holds 50% of database time; threshold {DOMINANT_SHARE_PCT:.0f}%"),)),
    RuleCase("dominant-statement", "passes", lambda: _heaviest(10.0, (10.0, 10.0))),
    # exactly DOMINANT_SHARE_PCT (10 s of 20 s): the rule fires only above it
    RuleCase("dominant-statement", "just-under", lambda: _heaviest(10.0, (10.0,))),
)
