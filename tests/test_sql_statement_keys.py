"""The (source, stmt_id) join helpers of the SQL rules give what the plain two-column joins give."""

from __future__ import annotations

import polars as pl
import pytest
from polars.testing import assert_frame_equal, assert_series_equal

from dbdiag import tables as t
from dbdiag.derive.sql_statements import statement_layout
from dbdiag.rules.base import RuleInput
from dbdiag.rules.sql.common import from_one_source
from dbdiag.statement_keys import has_statement, join_statements


def _statements(sources: list[str | None], ids: list[int | None]) -> pl.DataFrame:
    return pl.DataFrame({"source": sources, "stmt_id": ids, "n": list(range(len(ids)))}, schema_overrides={"stmt_id": pl.Int64})


def _nodes(sources: list[str | None], ids: list[int | None]) -> pl.DataFrame:
    return pl.DataFrame({"stmt_id": ids, "node": [f"x{i}" for i in range(len(ids))], "source": sources}, schema_overrides={"stmt_id": pl.Int64})


CASES = {
    "one source": (["a.log"] * 4, [0, 1, 2, 3], ["a.log"] * 3, [3, 1, 9]),
    "two sources, same ids": (["a.log", "b.log", "a.log", "b.log"], [1, 1, 2, 2], ["b.log", "a.log", "c.log"], [1, 2, 2]),
    "null source and id": (["a.log", None, "a.log", "a.log"], [1, 1, None, 2], [None, "a.log", "a.log"], [1, None, 2]),
    "all sources null": ([None, None], [1, 2], [None], [1]),
    "ids beyond the packing": (["a.log", "b.log"], [1 << 41, 5], ["a.log", "b.log"], [1 << 41, 5]),
}


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("how", ["left", "inner", "semi"])
def test_join_statements_is_the_two_column_join(case: str, how: str) -> None:
    left_sources, left_ids, right_sources, right_ids = CASES[case]
    left, right = _statements(left_sources, left_ids), _nodes(right_sources, right_ids)
    expected = left.join(right, on=["source", "stmt_id"], how=how, maintain_order="left")
    assert_frame_equal(join_statements(left, right, how=how), expected)


@pytest.mark.parametrize("case", CASES)
def test_has_statement_marks_rows_with_a_match(case: str) -> None:
    left_sources, left_ids, right_sources, right_ids = CASES[case]
    left, right = _statements(left_sources, left_ids), _nodes(right_sources, right_ids)
    pairs = set(zip(right_sources, right_ids))
    expected = [s is not None and i is not None and (s, i) in pairs for s, i in zip(left_sources, left_ids)]
    assert_series_equal(has_statement(left, right), pl.Series(expected, dtype=pl.Boolean), check_names=False)


@pytest.mark.parametrize("how", ["left", "inner", "semi"])
def test_one_source_known_by_the_caller_gives_the_same_join(how: str) -> None:
    left_sources, left_ids, right_sources, right_ids = CASES["one source"]
    left, right = _statements(left_sources, left_ids), _nodes(right_sources, right_ids)
    assert_frame_equal(join_statements(left, right, how=how, one_source=True), join_statements(left, right, how=how))
    assert_series_equal(has_statement(left, right, one_source=True), has_statement(left, right))


@pytest.mark.parametrize(
    ("statement_sources", "node_sources", "expected"),
    [
        (["a.log", "a.log"], ["a.log"], True),
        (["a.log", "a.log"], None, True),  # no plan nodes
        (["a.log", "b.log"], ["a.log"], False),
        (["a.log", "a.log"], ["b.log"], False),
        (["a.log", None], ["a.log"], False),
    ],
)
def test_from_one_source_looks_at_statements_and_plan_nodes(statement_sources, node_sources, expected) -> None:
    nodes = None if node_sources is None else _nodes(node_sources, list(range(len(node_sources))))
    layout = statement_layout(_statements(statement_sources, list(range(len(statement_sources)))), nodes)
    assert from_one_source(RuleInput(tables={}, derived={t.STATEMENT_LAYOUT: layout}, metrics={})) is expected
