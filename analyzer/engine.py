"""Runs rules over the tables and metrics; a failing rule becomes an ``errored`` outcome, never a crash."""

from __future__ import annotations

import traceback
from typing import Iterable

from dbdiag.findings import RuleOutcome, Status
from dbdiag.rules.base import Rule, RuleInput, Skip


def run_rule(rule: Rule, rule_input: RuleInput) -> RuleOutcome:
    available = {name for name, frame in rule_input.tables.items() if frame.height > 0}
    missing = rule.missing_inputs(available)
    if missing:
        return RuleOutcome(rule.id, rule.title, Status.SKIPPED, missing=tuple(missing))
    try:
        verdict = rule.check(rule_input)
    except Skip as lacking:
        return RuleOutcome(rule.id, rule.title, Status.SKIPPED, missing=(str(lacking),))
    except Exception as error:  # noqa: BLE001 - a rule bug must not stop the report
        where = traceback.extract_tb(error.__traceback__)[-1]
        return RuleOutcome(
            rule.id,
            rule.title,
            Status.ERRORED,
            error=f"{type(error).__name__}: {error} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
        )
    status = Status.FIRED if verdict.findings else Status.PASSED
    return RuleOutcome(rule.id, rule.title, status, findings=tuple(verdict.findings), measured=verdict.measured)


def run_rules(rules: Iterable[Rule], rule_input: RuleInput) -> list[RuleOutcome]:
    return [run_rule(rule, rule_input) for rule in rules]
