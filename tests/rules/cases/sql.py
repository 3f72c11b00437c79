"""Declarative cases of the SQL rules (``tests/rules/rule_cases.py``): slow-log statements built with
``tests/rules/sql_synthetic.py`` (``run(sql, query_time_s, count, **columns)``, ``filler(total_s)``:
cheap point lookups) and the scenarios of the hand-written tests; the derive stage fingerprints them.
"""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.rules.sql.lock_wait import MIN_TOTAL_WAIT_S
from dbdiag.rules.sql.plan_flip import SLOWDOWN_FACTOR
from dbdiag.rules.sql.stale_statistics import OUTDATED_MODIFY_RATIO
from tests.rules.rule_cases import RuleCase
from tests.rules.sql_synthetic import filler, run, statement_table
from tests.rules.test_lock_wait import _lock_tables_scenario
from tests.rules.test_plan_flip_causes import FAST_PLAN, LOOKUP, SLOW_PLAN
from tests.rules.test_sql_rules import QUEUE_SQL

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
)
