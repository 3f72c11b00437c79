"""Every rule case (``tests/rules/rule_cases.py``) gives its findings, and every rule has a firing, a
passing and a just-under case (or is on the list of rules still without them)."""

from __future__ import annotations

import pytest

from dbdiag.engine import run_rule
from dbdiag.findings import Status
from dbdiag.rules import RULES, rule_by_id
from dbdiag.rules.base import RuleInput
from tests.rules.rule_cases import ROLES, all_rule_cases
from tests.rules.synthetic import rule_input

CASES = all_rule_cases()

# Rules whose three cases are still hand-written tests (tests/rules/test_*.py) and not yet cases here;
# the list only shrinks: a rule with all three cases must leave it.
WITHOUT_CASES = {
    "rate-limit-advice",
}


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_rule_case(case) -> None:
    rule = rule_by_id(case.rule)
    assert rule is not None, f"{case.id}: no such rule"
    tables = case.build()
    derived = rule_input(tables)
    outcome = run_rule(rule, RuleInput(tables=tables, derived=derived.derived, metrics={**derived.metrics, **case.metrics}))
    assert outcome.status is (Status.FIRED if case.expect else Status.PASSED), f"{case.id}: {outcome.status} {outcome.missing or outcome.error}"
    got = [(f.subject, f.severity.value, f.title) for f in outcome.findings]
    assert [(s, sev) for s, sev, _ in got] == [(s, sev) for s, sev, _ in case.expect], f"{case.id}: {got}"
    for (_, _, title), (_, _, fragment) in zip(got, case.expect):
        assert fragment in title, f"{case.id}: {fragment!r} not in {title!r}"


def test_every_rule_has_the_three_cases_or_is_listed() -> None:
    roles = {rule.id: {case.role for case in CASES if case.rule == rule.id} for rule in RULES}
    assert {case.rule for case in CASES} <= set(roles), "a case names no registered rule"
    assert {case.role for case in CASES} <= set(ROLES)
    complete = {rule for rule, seen in roles.items() if seen == set(ROLES)}
    assert complete & WITHOUT_CASES == set(), "rules with all three cases must leave WITHOUT_CASES"
    assert set(roles) - complete - WITHOUT_CASES == set(), "rules without their three cases must be in WITHOUT_CASES"
    assert WITHOUT_CASES <= set(roles), "WITHOUT_CASES names a rule that is not registered"
