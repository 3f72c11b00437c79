"""Declarative cases of load-test-inflation (``tests/rules/rule_cases.py``) on JMeter samples.

``_jmeter(labels, pause_ms, seconds, threads)`` (``tests/rules/test_time_rules.py``): each thread runs
100 ms samples cycling through ``labels`` with ``pause_ms`` between them. One thread for 700 s is no
ramp-up problem and not too short, so the problems are exactly the ones a case sets up.
"""

from __future__ import annotations

from dbdiag.rules.loadtest.load_test_inflation import MIN_PROBLEMS, THINK_TIME_MIN_MS
from tests.rules.rule_cases import RuleCase
from tests.rules.test_time_rules import _jmeter

LONG_RUN_S = 700


def _one_thread(labels: list[str], pause_ms: float) -> dict:
    return _jmeter(labels, pause_ms, LONG_RUN_S, threads=1).tables


CASES = (
    # MIN_PROBLEMS = 2 problems: one label, and a pause 1 ms under THINK_TIME_MIN_MS
    RuleCase("load-test-inflation", "fires", lambda: _one_thread(["transfer"], THINK_TIME_MIN_MS - 1),
             (("load test", "warning", f"one transaction type, no think time; threshold {MIN_PROBLEMS} problems"),)),
    RuleCase("load-test-inflation", "passes", lambda: _one_thread(["query", "update", "report"], 1500.0)),
    # a pause of exactly THINK_TIME_MIN_MS is think time: one problem left, MIN_PROBLEMS - 1
    RuleCase("load-test-inflation", "just-under", lambda: _one_thread(["transfer"], THINK_TIME_MIN_MS)),
)
