"""Declarative rule cases: per rule, an input that fires, one that passes, and one just under the
threshold (or the nearest input that must not fire). Compared on subject, severity and a title
fragment, not on whole prose. Sample (``tests/rules/cases/config.py``)::

    RuleCase("transparent-hugepages-enabled", "fires", lambda: _thp("always"), (("", "warning", "enabled = always"),))
    RuleCase("transparent-hugepages-enabled", "just-under", lambda: _thp("madvise"))

``build`` returns the parsed tables; the derive stage runs on them as in the pipeline
(``tests/rules/synthetic.rule_input``), and ``metrics`` replaces derived metrics where a case sets them;
``expect`` is one (subject, severity, title fragment) per finding, in order; empty for a pass.
The case modules are ``tests/rules/cases/*.py``, each with a ``CASES`` tuple.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

import polars as pl

ROLES = ("fires", "passes", "just-under")


@dataclass(frozen=True)
class RuleCase:
    rule: str
    role: str  # one of ROLES
    build: Callable[[], dict[str, pl.DataFrame]]
    expect: tuple[tuple[str, str, str], ...] = ()
    metrics: dict = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.rule}/{self.role}"


def all_rule_cases() -> tuple[RuleCase, ...]:
    """The ``CASES`` of every module in ``tests/rules/cases``."""
    package = importlib.import_module("tests.rules.cases")
    cases = []
    for module in pkgutil.iter_modules(package.__path__):
        cases += importlib.import_module(f"tests.rules.cases.{module.name}").CASES
    return tuple(cases)
