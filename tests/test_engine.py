from __future__ import annotations

import polars as pl
import pytest

from dbdiag.engine import run_rules
from dbdiag.findings import Status
from dbdiag.rules import RULES
from dbdiag.rules.base import DOC_SECTIONS, Rule, RuleInput, Skip, Verdict, split_doc_sections


def _rule(rule_id: str, check, requires=(("t1",),)) -> Rule:
    return Rule(id=rule_id, title=rule_id, area="test", requires=requires, check=check, doc="")


def _input(**tables: pl.DataFrame) -> RuleInput:
    return RuleInput(tables=dict(tables), derived={}, metrics={})


def _boom(_: RuleInput) -> Verdict:
    raise ZeroDivisionError("division by zero")


def _lacking(_: RuleInput) -> Verdict:
    raise Skip("one snapshot only")


def test_a_failing_rule_is_errored_and_the_others_still_run():
    frame = pl.DataFrame({"a": [1]})
    outcomes = run_rules(
        [_rule("boom", _boom), _rule("fine", lambda _: Verdict(measured="ok")), _rule("lacking", _lacking)],
        _input(t1=frame),
    )
    assert [o.status for o in outcomes] == [Status.ERRORED, Status.PASSED, Status.SKIPPED]
    assert outcomes[0].error.startswith("ZeroDivisionError: division by zero (at test_engine.py:")
    assert outcomes[2].missing == ("one snapshot only",)


def test_empty_table_counts_as_missing():
    outcomes = run_rules([_rule("needs", lambda _: Verdict(), requires=(("t1", "t2"), ("t3",)))], _input(t1=pl.DataFrame({"a": []})))
    assert outcomes[0].status is Status.SKIPPED
    assert outcomes[0].missing == ("t1 or t2", "t3")


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_every_rule_documents_all_sections(rule: Rule):
    sections = split_doc_sections(rule.doc)
    for name in DOC_SECTIONS:
        assert sections.get(name), f"{rule.id}: docstring lacks a non-empty '{name}:' section"


def test_rule_ids_are_unique_kebab_case():
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert all(rule_id == rule_id.lower() and " " not in rule_id and "_" not in rule_id for rule_id in ids)
    assert {"softirq-concentration", "irq-affinity-skew"} <= set(ids)
