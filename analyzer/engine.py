"""Runs rules over the tables and metrics; a failing rule becomes an ``errored`` outcome, never a crash.

Rules are pure functions of their input and spend their time in polars, which releases the GIL:
they run in a few threads at once, and their outcomes come back in the rules' order.
"""

from __future__ import annotations

import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import RuleOutcome, Status
from dbdiag.rules.base import Rule, RuleInput, Skip

MAX_WORKERS = 4  # rule threads: the big rules are a handful, and more threads than cores only share them


def run_rule(rule: Rule, rule_input: RuleInput) -> RuleOutcome:
    available = rule_input.available()
    missing = [group for group in rule.requires if not available.intersection(group)]
    if missing:
        return RuleOutcome(rule.id, rule.title, Status.SKIPPED, missing=tuple(_shown(group) for group in missing))
    try:
        verdict = rule.check(rule_input)
    except Skip as lacking:
        return RuleOutcome(rule.id, rule.title, Status.SKIPPED, missing=(str(lacking),), examined=True)
    # polars' PanicException (native code) derives from BaseException, not Exception
    except (Exception, pl.exceptions.PanicException) as error:  # noqa: BLE001 - a rule bug must not stop the report
        where = traceback.extract_tb(error.__traceback__)[-1]
        return RuleOutcome(
            rule.id,
            rule.title,
            Status.ERRORED,
            error=f"{type(error).__name__}: {error} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})",
        )
    status = Status.FIRED if verdict.findings else Status.PASSED
    return RuleOutcome(rule.id, rule.title, status, findings=tuple(verdict.findings), measured=verdict.measured, examined=True)


def _shown(group: tuple[str, ...]) -> str:
    """A missing group as the report names it: a derived table by the parsed table a user can add."""
    return " or ".join(dict.fromkeys(t.SHOWN_AS.get(name, name) for name in group))


def run_rules(rules: Iterable[Rule], rule_input: RuleInput, workers: int | None = None) -> list[RuleOutcome]:
    """The outcome of each rule, in the order of ``rules``; ``workers`` threads (default: polars' thread count, at most MAX_WORKERS)."""
    rules = list(rules)
    workers = min(MAX_WORKERS, pl.thread_pool_size()) if workers is None else workers
    if workers <= 1 or len(rules) <= 1:
        return [run_rule(rule, rule_input) for rule in rules]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="dbdiag-rule") as pool:
        return list(pool.map(lambda rule: run_rule(rule, rule_input), rules))
