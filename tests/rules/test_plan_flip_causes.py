"""plan-flip and stale-statistics with the changes of the capture: the cause, the step, the undo."""

from __future__ import annotations

import re

import pytest
import sqlglot

from dbdiag import tables as t
from dbdiag.derive.changes import changes
from dbdiag.rules.base import RuleInput
from dbdiag.rules.sql import cause as cause_module
from dbdiag.rules.sql import plan_flip
from tests.rules.sql_synthetic import SOURCE, LINES_PER_ENTRY, node_table, run, sql_input

LOOKUP = "SELECT id FROM jobs WHERE queue_id = 7"
FAST_PLAN = "Index Scan(jobs.jobs_queue_idx)"
SLOW_PLAN = "Seq Scan(jobs)"
# TiDB grammar of LOCK STATS (docs.pingcap.com/tidb/stable/sql-statement-lock-stats): LOCK STATS TableNameList
TIDB_LOCK_STATS = re.compile(r"^LOCK STATS [\w`.]+(?:, [\w`.]+)*;$")


def _with_changes(inp: RuleInput) -> RuleInput:
    derived = {**inp.derived, t.CHANGE: changes(inp.tables)}
    return RuleInput(tables=inp.tables, derived=derived, metrics={})


def _sampled_runs(count: int, query_time_s: float, plan: str, every: int, engine: str = "postgresql") -> list[dict]:
    """``count`` runs of LOOKUP; one in ``every`` carries its logged plan (auto_explain.sample_rate)."""
    rows = run(LOOKUP, query_time_s, count, engine=engine)
    for index, row in enumerate(rows):
        if index % every == 0:
            row["plan_signature"] = plan
    return rows


def _flip_rows(change_sql: str | None, engine: str = "postgresql") -> list[dict]:
    """300 fast runs (plan logged on 1 in 10), the change, 300 runs 200x slower (same sampling)."""
    rows = _sampled_runs(300, 0.0001, FAST_PLAN, 10, engine)
    if change_sql:
        rows += run(change_sql, 0.02, engine=engine)
    return rows + _sampled_runs(300, 0.02, SLOW_PLAN, 10, engine)


def _check(rows: list[dict]) -> list:
    return plan_flip.check(_with_changes(sql_input(rows))).findings


def test_the_step_counts_every_run_not_only_the_sampled_plans():
    (finding,) = _check(_flip_rows("DROP INDEX jobs_queue_idx ON jobs", engine="mysql"))
    lost_s = 300 * (0.02 - 0.0001)
    assert finding.impact["db_time_s"] == pytest.approx(lost_s, abs=1e-3)
    assert (finding.impact["calls_before"], finding.impact["calls_after"]) == (300, 300)
    total_s = 300 * 0.0001 + 0.02 + 300 * 0.02
    assert finding.impact["share_of_db_time"] == pytest.approx(lost_s / total_s, abs=1e-4)
    change_line = 1 + 300 * LINES_PER_ENTRY
    assert finding.sources[0] == f"{SOURCE}:{change_line}"
    assert "DROP INDEX jobs_queue_idx on jobs at " in finding.title
    # the 30 sampled slow runs alone lose 0.6 s: under MIN_LOST_S, the flip would not have fired on them
    assert 30 * (0.02 - 0.0001) < plan_flip.MIN_LOST_S


def test_without_a_change_the_step_is_taken_where_the_plan_switched():
    (finding,) = _check(_flip_rows(None))
    assert "cause" not in finding.impact
    assert finding.title.startswith("Plan flip: ")
    assert finding.impact["db_time_s"] == pytest.approx(300 * (0.02 - 0.0001), abs=1e-3)


def test_a_change_before_the_last_fast_run_is_not_the_cause():
    rows = run("ANALYZE jobs", 0.01, engine="postgresql") + _flip_rows(None)
    (finding,) = _check(rows)
    assert "cause" not in finding.impact


def test_interleaved_plans_keep_the_per_plan_measure():
    rows = []
    for _ in range(100):
        rows += run(LOOKUP, 0.0001, engine="postgresql", plan_signature=FAST_PLAN)
        rows += run(LOOKUP, 0.02, engine="postgresql", plan_signature=SLOW_PLAN)
    (finding,) = _check(rows)
    assert "calls_before" not in finding.impact
    assert finding.impact["db_time_s"] == pytest.approx(100 * (0.02 - 0.0001), abs=1e-3)


def test_mariadb_ignored_index_is_undone_with_not_ignored_and_no_force_index():
    rows = _flip_rows("ALTER TABLE jobs ALTER INDEX jobs_queue_idx IGNORED", engine="mariadb")
    (finding,) = _check(rows)
    assert finding.remediation.splitlines()[0] == "Undo it (MariaDB 10.6+): ALTER TABLE jobs ALTER INDEX jobs_queue_idx NOT IGNORED;"
    assert "FORCE INDEX" not in finding.remediation and "EXPLAIN ANALYZE" not in finding.remediation


def test_mysql8_invisible_index_is_undone_with_visible_which_mysql_parses():
    (finding,) = _check(_flip_rows("ALTER TABLE jobs ALTER INDEX jobs_queue_idx INVISIBLE", engine="mysql"))
    statement = re.search(r"ALTER TABLE [^;]*;", finding.remediation).group()
    assert statement == "ALTER TABLE jobs ALTER INDEX jobs_queue_idx VISIBLE;"
    parsed = sqlglot.parse_one(statement.rstrip(";"), read="mysql")
    assert parsed.key == "alter" and parsed.sql("mysql") == statement.rstrip(";")


def test_tidb_bulk_change_gets_analyze_and_lock_stats():
    change = {"action": "insert", "table": "jobs", "object": None}
    lines = cause_module.undo("tidb", change, _empty_changes(), LOOKUP)
    statements = [re.search(r"(ANALYZE TABLE|LOCK STATS) [^;]*;", line).group() for line in lines]
    assert statements == ["ANALYZE TABLE jobs;", "LOCK STATS jobs;"]
    assert sqlglot.parse_one(statements[0].rstrip(";"), read="mysql").key == "analyze"
    assert TIDB_LOCK_STATS.match(statements[1])


def test_dropped_postgresql_index_is_recreated_concurrently_from_its_own_definition():
    rows = run("CREATE UNIQUE INDEX jobs_queue_idx ON jobs USING btree (queue_id, id)", 0.01, engine="postgresql")
    rows += _flip_rows("DROP INDEX jobs_queue_idx")  # PostgreSQL: no table named, the CREATE INDEX gives it
    (finding,) = _check(rows)
    assert "CREATE UNIQUE INDEX CONCURRENTLY jobs_queue_idx ON jobs USING btree (queue_id, id);" in finding.remediation


def test_dropped_index_without_definition_is_rebuilt_on_the_where_columns():
    rows = _flip_rows("ALTER TABLE jobs DROP INDEX jobs_queue_idx", engine="mariadb")
    (finding,) = _check(rows)
    assert "ALTER TABLE jobs ADD INDEX jobs_queue_idx (queue_id);" in finding.remediation


def test_a_dropped_index_takes_its_table_from_a_plan_that_used_it():
    rows = run("DROP INDEX jobs_queue_idx", 0.01, engine="postgresql")
    nodes = node_table([{"stmt_id": 0, "node_type": "Index Scan", "relation": "jobs", "index_name": "jobs_queue_idx"}])
    found = changes({t.STATEMENT: sql_input(rows).tables[t.STATEMENT], t.PLAN_NODE: nodes})
    assert found.select("action", "table", "object").rows() == [("drop-index", "jobs", "jobs_queue_idx")]


def _empty_changes():
    return t.empty(t.CHANGE)


def test_the_loss_never_exceeds_what_the_runs_after_took():
    # 3 runs after: 1 s, 1 s, 0.1 s; median 1 s: 3 x (1 - 0.01) = 2.97 s, but only 2.1 - 3 x 0.01 = 2.07 s was spent
    found = cause_module.Step(calls_before=5, median_before_s=0.01, calls_after=3, median_after_s=1.0, after_s=2.1)
    assert found.lost_s == pytest.approx(2.07)
    assert cause_module.Step(0, None, 3, 1.0, 3.0).lost_s is None


def test_fast_runs_still_arriving_after_the_change_do_not_hide_it():
    """TiDB: statistics reach each instance within its stats lease; a fast run of another server may end after the change."""
    rows = _flip_rows("ANALYZE TABLE jobs", engine="tidb")
    change_index = 300
    # the 5 runs after the change come from another instance's log and are still fast
    for row in rows[change_index + 1 : change_index + 6]:
        row.update(query_time_s=0.0001, plan_signature=FAST_PLAN, source="db/other-slow.log")
    (finding,) = _check(rows)
    assert finding.impact["cause"]["action"] == "analyze"
    assert "LOCK STATS jobs;" in finding.remediation


def test_stale_statistics_without_a_change_takes_the_step_at_the_first_misled_statement():
    from dbdiag.rules.sql import stale_statistics

    sql = "SELECT id FROM jobs WHERE state = 0 AND queue_id = 7"
    rows = run(sql, 0.0001, 300, engine="postgresql") + run(sql, 0.02, 300, engine="postgresql")
    bad = [{"stmt_id": i, "node_type": "Index Scan", "relation": "jobs", "index_name": "jobs_state_idx", "est_rows": 1.0,
            "actual_rows": 9.0, "rows_removed_by_filter": 171_420.0, "filter": "(queue_id = 7)"} for i in range(300, 600, 4)]
    (finding,) = stale_statistics.check(_with_changes(sql_input(rows, bad))).findings
    assert finding.impact["db_time_s"] == pytest.approx(300 * (0.02 - 0.0001), abs=1e-3)
    assert (finding.impact["calls_before"], finding.impact["calls_after"]) == (300, 300)
    assert "cause" not in finding.impact
    assert f"before the first misled statement ({SOURCE}:{1 + 300 * LINES_PER_ENTRY}, " in finding.impact["description"]


def _runs_on_tables(runs: list[tuple[str, int, float, str, str | None]]) -> RuleInput:
    """``SELECT c FROM <table> WHERE id = 7`` runs, one fingerprint (sbtest?): (table, count, seconds, access, index)
    in log order, each with its MariaDB plan node and signature."""
    rows, nodes = [], []
    for table, count, query_time_s, access, index in runs:
        for _ in range(count):
            nodes.append({"stmt_id": len(rows), "node_type": access, "relation": table, "index_name": index, "est_rows": 1.0})
            rows.extend(run(f"SELECT c FROM {table} WHERE id = 7", query_time_s, engine="mariadb",
                            plan_signature=f"{table}:{access}" + (f"({index})" if index else "")))
    return _with_changes(sql_input(rows, nodes))


def test_the_flip_of_one_table_is_found_when_another_table_of_the_fingerprint_is_slower():
    """sbtest1 always scans (20 ms), sbtest2 goes from its index (0.1 ms) to a scan (5 ms): the flip is sbtest2's,
    though sbtest1's plan is the slowest of the fingerprint."""
    inp = _runs_on_tables([
        ("sbtest3", 200, 0.0001, "ref", "k_3"), ("sbtest1", 200, 0.02, "ALL", None),
        ("sbtest2", 300, 0.0001, "ref", "k_2"), ("sbtest2", 300, 0.005, "ALL", None),
    ])
    (finding,) = plan_flip.check(inp).findings
    assert "sbtest2" in finding.remediation and "k_2" in finding.remediation and "sbtest1" not in finding.remediation
    assert finding.impact["db_time_s"] == pytest.approx(300 * (0.005 - 0.0001), abs=1e-3)


def _sharded(slow_table_flips: bool) -> RuleInput:
    """``SELECT c FROM sbtestN WHERE id = ?`` on sbtest1 and sbtest3 (one fingerprint: sbtest?). sbtest3 always
    reads its index in 0.1 ms; sbtest1 reads the whole table in 20 ms, having read its index first or not."""
    before = [("sbtest1", 200, 0.0001, "ref", "k_1")] if slow_table_flips else []
    return _runs_on_tables([("sbtest3", 200, 0.0001, "ref", "k_3"), *before, ("sbtest1", 200, 0.02, "ALL", None)])


def test_a_fingerprint_over_several_tables_compares_plans_of_the_same_table():
    """sbtest1's full scans against sbtest3's index reads is no plan flip (each table kept its plan); once
    sbtest1 read its own index first, it is, and the remediation names sbtest1 and its index, not sbtest3's."""
    assert plan_flip.check(_sharded(slow_table_flips=False)).findings == []
    (finding,) = plan_flip.check(_sharded(slow_table_flips=True)).findings
    assert "sbtest1" in finding.remediation and "k_1" in finding.remediation
    assert "sbtest3" not in finding.remediation and "k_3" not in finding.remediation
    assert finding.impact["db_time_s"] == pytest.approx(200 * (0.02 - 0.0001), abs=1e-3)
