"""The shortcuts the SQL rules take on big logs give what the plain filters and joins give: rows taken by
a gather, statements found by their position, and the user statements judged among the few that matter."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal, assert_series_equal

from dbdiag import tables as t
from dbdiag.derive.full_scans import full_scan_executions
from dbdiag.derive.sql_statements import statement_layout
from dbdiag.engine import run_rule
from dbdiag.findings import Status
from dbdiag.rules.base import RuleInput
from dbdiag.rules.sql import full_table_scan, stale_statistics
from dbdiag.rules.sql.common import statements, statements_numbered
from dbdiag.statement_keys import has_statement, rows_where
from tests.rules.sql_synthetic import filler, plan_for, run, sql_input


def _texts(count: int) -> pl.DataFrame:
    return pl.DataFrame({"stmt_id": list(range(count)), "sql": [f"SELECT {i} FROM t" for i in range(count)], "source": "a.log"})


@pytest.mark.parametrize("keep", [[True, True, True, True], [False, False, False, False], [False, True, False, True], [True, False, False, False]])
def test_rows_where_is_the_filter(keep: list[bool]) -> None:
    frame, mask = _texts(4), pl.Series(keep)
    assert_frame_equal(rows_where(frame, mask), frame.filter(mask))


def test_rows_where_keeps_the_frame_when_every_row_is_kept() -> None:
    frame = _texts(3)
    assert rows_where(frame, pl.Series([True, True, True])) is frame


def test_has_statement_by_position_is_the_keyed_lookup() -> None:
    frame = _texts(6)
    others = pl.DataFrame({"stmt_id": [4, 1, 1, None, -1, 6, 99], "source": "a.log"}, schema_overrides={"stmt_id": pl.Int64})
    by_position = has_statement(frame, others, one_source=True, numbered=True)
    assert by_position.to_list() == [False, True, False, False, True, False]
    assert_series_equal(by_position, has_statement(frame, others, one_source=True), check_names=False)
    assert has_statement(frame, others.head(0), one_source=True, numbered=True).to_list() == [False] * 6


def _input(ids: list[int | None], sources: list[str] | None = None, node_source: str = "a.log") -> RuleInput:
    frame = pl.DataFrame({"stmt_id": ids, "source": sources or ["a.log"] * len(ids)}, schema_overrides={"stmt_id": pl.Int64})
    nodes = pl.DataFrame({"stmt_id": [0], "source": [node_source]}, schema_overrides={"stmt_id": pl.Int64})
    derived = {t.WORKING_STATEMENT: frame, t.PUBLIC_PLAN_NODE: nodes, t.STATEMENT_LAYOUT: statement_layout(frame, nodes)}
    return RuleInput(tables={}, derived=derived, metrics={})


@pytest.mark.parametrize(
    ("ids", "sources", "node_source", "expected"),
    [
        ([0, 1, 2, 3], None, "a.log", True),
        ([1, 2, 3, 4], None, "a.log", False),  # numbered from 1
        ([0, 2, 1, 3], None, "a.log", False),  # not in order
        ([0, 1, None, 3], None, "a.log", False),
        ([0, 1, 2, 3], ["a.log", "a.log", "b.log", "b.log"], "a.log", False),  # two sources
        ([0, 1, 2, 3], None, "b.log", False),  # plan nodes of another source
    ],
)
def test_statements_numbered(ids, sources, node_source, expected) -> None:
    assert statements_numbered(_input(ids, sources, node_source)) is expected


def _full_scan_input() -> RuleInput:
    seq_scan = [{"node_type": "Seq Scan", "depth": 0, "relation": "archive", "est_rows": 1.0, "actual_rows": 20_000.0, "loops": 1.0}]
    small_scan = [{"node_type": "Seq Scan", "depth": 0, "relation": "codes", "est_rows": 9.0, "actual_rows": 9.0, "loops": 1.0}]
    index_scan = [{"node_type": "Index Scan", "depth": 0, "relation": "orders", "est_rows": 1.0, "actual_rows": 1.0, "loops": 1.0}]
    rows = (
        run("SELECT id FROM archive WHERE note = 'x'", 1.0, 3, engine="postgresql")  # 0-2: big scan in the plan
        + run("SELECT id FROM codes WHERE code = 'x'", 0.5, 2, engine="postgresql", full_scan=True)  # 3-4: flagged, small scan planned
        + run("SELECT id FROM orders WHERE id = 1", 0.1, 2, engine="postgresql")  # 5-6: indexed
        + run("UPDATE jobs SET state = 'done' WHERE state = 'run'", 2.0, 2, engine="postgresql", rows_examined=50_000, rows_affected=3)  # 7-8
        + run("SELECT * FROM logs WHERE day = 1", 1.0, 2, engine="postgresql", full_scan=True)  # 9-10: flagged, no plan
        + filler(1.0, engine="postgresql")
    )
    nodes = plan_for(range(3), seq_scan) + plan_for(range(3, 5), small_scan) + plan_for(range(5, 7), index_scan)
    return sql_input(rows, nodes)


def test_full_scan_executions_by_position_are_the_joined_ones() -> None:
    inp = _full_scan_input()
    everything = statements(inp)
    assert statements_numbered(inp)
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    scans = full_scan_executions(everything, nodes, one_source=True, numbered=True)
    assert_frame_equal(scans, full_scan_executions(everything, nodes))
    assert_frame_equal(scans, full_table_scan.timed_full_scan_executions(inp))  # what the rules read
    assert scans["stmt_id"].to_list() == [0, 1, 2, 7, 8, 9, 10]
    assert scans.select("scan_by_plan", "scan_by_flag", "scan_by_rows").rows() == (
        [(True, False, False)] * 3 + [(False, False, True)] * 2 + [(False, True, False)] * 2
    )
    assert scans["scan_table"].to_list() == ["archive"] * 3 + [None] * 4
    assert scans["scan_rows"].to_list() == [20_000.0] * 3 + [None] * 4


SYSTEM_SQL = "SELECT relname FROM pg_catalog.pg_class WHERE relname = 'orders'"
USER_SQL = "SELECT * FROM orders WHERE status = 1"
NODE = {"node_type": "Index Scan", "depth": 0, "relation": "orders", "index_name": "orders_status_idx", "loops": 1.0}


def _system_first(user_rows: int, user_actual: float) -> RuleInput:
    """120 system-schema statements with estimated plan nodes first, then ``user_rows`` user statements."""
    rows = run(SYSTEM_SQL, 0.01, 120, engine="postgresql") + run(USER_SQL, 1.0, user_rows, engine="postgresql") + filler(1.0, engine="postgresql")
    nodes = plan_for(range(120), [{**NODE, "est_rows": 1.0, "actual_rows": 1.0}])
    nodes += plan_for(range(120, 120 + user_rows), [{**NODE, "est_rows": 10.0, "actual_rows": user_actual}])
    return sql_input(rows, nodes)


def test_stale_statistics_finds_user_statements_after_many_system_ones() -> None:
    healthy = run_rule(stale_statistics.RULE, _system_first(3, 20.0))
    assert healthy.status is Status.PASSED
    assert healthy.measured == "no table-reading plan node with estimates 100x off"
    off = run_rule(stale_statistics.RULE, _system_first(3, 5_000.0))
    assert off.status is Status.FIRED
    assert off.findings[0].impact["statements"] == 3


def test_stale_statistics_with_estimates_on_system_statements_only_skips() -> None:
    outcome = run_rule(stale_statistics.RULE, _system_first(0, 0.0))
    assert outcome.status is Status.SKIPPED
    assert "(120 internal or system-schema statement(s) left out)" in outcome.missing[0]
