"""Declarative cases of the time rules (``tests/rules/rule_cases.py``), built with ``tests/rules/test_time_rules.py``.

bottleneck-outside-database reads the derived ``time_accounting`` metric: the cases set it over a
one-row metric table that satisfies ``requires``. oom-restart reads ``event`` rows beside a statement
log of 02:00:00 .. 02:01:59 (``_events``), which makes the capture window.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.time.bottleneck_outside_database import DB_SHARE_MAX_PCT
from dbdiag.rules.time.oom_restart import WINDOW_MARGIN_S
from tests.rules.rule_cases import RuleCase
from tests.rules.test_time_rules import T0, _accounting, _events

USER_S = 1000.0


def _metric_table() -> dict:
    return {t.METRIC_SAMPLE: t.conform(t.METRIC_SAMPLE, pl.DataFrame({"metric": ["x"], "value": [1.0], "source": ["m.json"]}))}


def _db_share(pct: float) -> dict:
    """The time account of a run where the database worked ``pct`` % of the users' waiting."""
    return {t.TIME_ACCOUNTING_METRIC: _accounting(USER_S, USER_S * pct / 100.0)}


def _restart(before_window_s: float) -> dict:
    """mariadbd stopped, then started ``before_window_s`` before the first statement of the capture."""
    start = T0 - timedelta(seconds=before_window_s)
    return _events([
        {"ts": start - timedelta(seconds=30), "component": "mariadbd", "kind": "shutdown", "process": "mariadbd", "source": "error.log", "line": 8},
        {"ts": start, "component": "mariadbd", "kind": "start", "process": "mariadbd", "source": "error.log", "line": 9},
    ]).tables


def _server_log_begins_with_start() -> dict:
    return _events([{"ts": T0 + timedelta(seconds=1), "component": "postgres", "kind": "start", "process": "postgres", "source": "pg.log", "line": 4}]).tables


CASES = (
    # 0.1 point under DB_SHARE_MAX_PCT fires (a warning: not under the critical share)
    RuleCase("bottleneck-outside-database", "fires", _metric_table,
             (("application / network / proxy", "warning",
               f"of the time users waited ({USER_S * (DB_SHARE_MAX_PCT - 0.1) / 100:,.1f} s of {USER_S:,.1f} s); threshold {DB_SHARE_MAX_PCT:.0f}%"),),
             metrics=_db_share(DB_SHARE_MAX_PCT - 0.1)),
    RuleCase("bottleneck-outside-database", "passes", _metric_table, metrics=_db_share(80.0)),
    # exactly DB_SHARE_MAX_PCT: the rule fires only below it
    RuleCase("bottleneck-outside-database", "just-under", _metric_table, metrics=_db_share(DB_SHARE_MAX_PCT)),
    # a restart WINDOW_MARGIN_S before the capture window still counts
    RuleCase("oom-restart", "fires", lambda: _restart(WINDOW_MARGIN_S), (("mariadbd", "warning", "mariadbd restarted during the capture"),)),
    RuleCase("oom-restart", "passes", _server_log_begins_with_start),
    # one second earlier than WINDOW_MARGIN_S before the window: history, not this capture
    RuleCase("oom-restart", "just-under", lambda: _restart(WINDOW_MARGIN_S + 1)),
)
