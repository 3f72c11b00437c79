from __future__ import annotations

import threading
import time

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


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_outcomes_come_in_rule_order_whatever_finishes_first(workers: int):
    def sleeps(seconds: float, measured: str):
        def check(_: RuleInput) -> Verdict:
            time.sleep(seconds)
            return Verdict(measured=measured)
        return check

    rules = [_rule("slow", sleeps(0.05, "slow")), _rule("boom", _boom), _rule("quick", sleeps(0.0, "quick")), _rule("lacking", _lacking)]
    outcomes = run_rules(rules, _input(t1=pl.DataFrame({"a": [1]})), workers=workers)
    assert [o.rule for o in outcomes] == ["slow", "boom", "quick", "lacking"]
    assert [o.status for o in outcomes] == [Status.PASSED, Status.ERRORED, Status.PASSED, Status.SKIPPED]
    assert [o.measured for o in outcomes if o.status is Status.PASSED] == ["slow", "quick"]
    assert outcomes[1].error.startswith("ZeroDivisionError: division by zero (at test_engine.py:")


def test_rules_run_at_the_same_time():
    both = threading.Barrier(2, timeout=5)  # a rule waiting for the other would time out if they ran one by one

    def meets(_: RuleInput) -> Verdict:
        both.wait()
        return Verdict(measured="met")

    outcomes = run_rules([_rule("a", meets), _rule("b", meets)], _input(t1=pl.DataFrame({"a": [1]})), workers=2)
    assert [o.measured for o in outcomes] == ["met", "met"]


def test_a_rule_may_require_a_derived_table_and_is_skipped_without_it():
    """``requires`` names parsed and derived tables alike; a missing derived one is named by the parsed table a user can add."""
    from dbdiag import tables as t

    rule = _rule("sql", lambda inp: Verdict(measured=str(inp.table(t.FINGERPRINTED_STATEMENT).height)), requires=((t.FINGERPRINTED_STATEMENT,),))
    frame = pl.DataFrame({"a": [1, 2]})
    (found,) = run_rules([rule], RuleInput(tables={}, derived={t.FINGERPRINTED_STATEMENT: frame}, metrics={}))
    assert found.status is Status.PASSED and found.measured == "2"
    (lacking,) = run_rules([rule], RuleInput(tables={t.STATEMENT: frame}, derived={t.FINGERPRINTED_STATEMENT: frame.head(0)}, metrics={}))
    assert lacking.status is Status.SKIPPED and lacking.missing == ("statement",) and not lacking.examined


def test_a_derived_table_with_a_parsed_name_is_the_one_rules_see():
    """The text made safe to show (derive's public_text) takes the parsed name: a rule never sees the raw log line."""
    raw, public = pl.DataFrame({"message": ["card = '4111'"]}), pl.DataFrame({"message": ["card = ?"]})
    inp = RuleInput(tables={"event": raw}, derived={"event": public}, metrics={"m": 1})
    assert inp.table("event")["message"][0] == "card = ?" and inp.metric("m") == 1 and inp.metric("other") is None

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
