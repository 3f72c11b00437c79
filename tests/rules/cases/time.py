"""Declarative cases of the time-accounting rules (``tests/rules/rule_cases.py``).

bottleneck-outside-database reads the derived ``time_accounting`` metric: the cases set it (the
builders of ``tests/rules/test_time_rules.py``) over a one-row metric table that satisfies ``requires``.
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.time.bottleneck_outside_database import DB_SHARE_MAX_PCT
from tests.rules.rule_cases import RuleCase
from tests.rules.test_time_rules import _accounting

USER_S = 1000.0


def _metric_table() -> dict:
    return {t.METRIC_SAMPLE: t.conform(t.METRIC_SAMPLE, pl.DataFrame({"metric": ["x"], "value": [1.0], "source": ["m.json"]}))}


def _db_share(pct: float) -> dict:
    """The time account of a run where the database worked ``pct`` % of the users' waiting."""
    return {t.TIME_ACCOUNTING_METRIC: _accounting(USER_S, USER_S * pct / 100.0)}


CASES = (
    # 0.1 point under DB_SHARE_MAX_PCT fires (a warning: not under the critical share)
    RuleCase("bottleneck-outside-database", "fires", _metric_table,
             (("application / network / proxy", "warning",
               f"of the time users waited ({USER_S * (DB_SHARE_MAX_PCT - 0.1) / 100:,.1f} s of {USER_S:,.1f} s); threshold {DB_SHARE_MAX_PCT:.0f}%"),),
             metrics=_db_share(DB_SHARE_MAX_PCT - 0.1)),
    RuleCase("bottleneck-outside-database", "passes", _metric_table, metrics=_db_share(80.0)),
    # exactly DB_SHARE_MAX_PCT: the rule fires only below it
    RuleCase("bottleneck-outside-database", "just-under", _metric_table, metrics=_db_share(DB_SHARE_MAX_PCT)),
)
