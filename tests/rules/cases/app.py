"""Declarative cases of the application-side rules (``tests/rules/rule_cases.py``), built with the
builders of ``tests/rules/test_app_rules.py``: ``_stat`` (HAProxy ``show stat`` snapshots 10 s apart),
``_runs`` (sysbench runs: threads, TPS, average latency), ``_jmeter_windows`` (JMeter samples per 10 s
window; ``_window(slow=...)`` puts the last 3 of 2,000 samples at ``slow`` ms: p99 20 ms, p999 ``slow``).

rate-limit-advice has no case: it is advice (always info) for every type with enough samples, and
without them it is skipped, never passed.
"""

from __future__ import annotations

import math

from dbdiag import tables as t
from dbdiag.rules.app.connection_ceiling import AT_LIMIT_SHARE_PCT
from dbdiag.rules.app.connection_pool_oversized import MAX_MARGINAL_EFFICIENCY_PCT
from dbdiag.rules.app.tail_latency_spikes import TAIL_FACTOR
from tests.rules.rule_cases import RuleCase
from tests.rules.synthetic import topology
from tests.rules.test_app_rules import _frontend, _jmeter_windows, _runs, _stat, _window

MAXCONN = 2000
AT_LIMIT = math.ceil(MAXCONN * AT_LIMIT_SHARE_PCT / 100)  # the fewest sessions at the limit


def _frontend_sessions(scur: int) -> dict:
    """Three snapshots of frontend mysql-in with ``scur`` of its maxconn 2,000 sessions."""
    return {t.PROXY_STAT: _stat([[_frontend(scur, slim=MAXCONN)]] * 3)}


def _doubling(gain_pct: float) -> dict:
    """sysbench on 2 CPUs: 16 threads at 1,000 TPS, then 32 threads (beyond 4 per CPU) at ``gain_pct`` % more,
    latency up: for a doubling the marginal efficiency is the gain."""
    return {t.LOAD_RUN: _runs([(16, 1000.0, 16.0), (32, 1000.0 + 10.0 * gain_pct, 30.0)]), t.TOPOLOGY: topology(2, 1)}


P99_MS = 20.0


def _tail(p999_factor: float | None) -> dict:
    """One JMeter window of 2,000 samples with p99 20 ms and p999 ``p999_factor`` x that."""
    return {t.LOAD_SAMPLE: _jmeter_windows([_window(base=P99_MS, slow=None if p999_factor is None else P99_MS * p999_factor)])}


CASES = (
    RuleCase("connection-ceiling", "fires", lambda: _frontend_sessions(AT_LIMIT),
             (("mysql-in/FRONTEND", "warning", f"HAProxy frontend mysql-in: {AT_LIMIT:,} sessions at its maxconn 2,000 in 3 of 3 snapshots"),)),
    RuleCase("connection-ceiling", "passes", lambda: _frontend_sessions(MAXCONN // 2)),
    # one session under AT_LIMIT_SHARE_PCT of maxconn in every snapshot
    RuleCase("connection-ceiling", "just-under", lambda: _frontend_sessions(AT_LIMIT - 1)),
    # exactly MAX_MARGINAL_EFFICIENCY_PCT: "at most" fires
    RuleCase("connection-pool-oversized", "fires", lambda: _doubling(MAX_MARGINAL_EFFICIENCY_PCT),
             (("sysbench oltp_read_write", "warning", f"32 threads (16 per CPU) gave +{MAX_MARGINAL_EFFICIENCY_PCT:.1f}% TPS over 16"),)),
    RuleCase("connection-pool-oversized", "passes", lambda: _doubling(90.0)),
    # 0.1 point more throughput than MAX_MARGINAL_EFFICIENCY_PCT: the added threads still pay
    RuleCase("connection-pool-oversized", "just-under", lambda: _doubling(MAX_MARGINAL_EFFICIENCY_PCT + 0.1)),
    RuleCase("tail-latency-spikes", "fires", lambda: _tail(TAIL_FACTOR),
             (("JMeter label 'buy'", "warning", f"p999 {P99_MS * TAIL_FACTOR:.0f} ms = {TAIL_FACTOR:.1f}x p99 (20.0 ms) in window 2024-05-14T02:00:00Z"),)),
    RuleCase("tail-latency-spikes", "passes", lambda: _tail(None)),
    # p999 at 0.1 under TAIL_FACTOR x p99 (and over TAIL_FLOOR_MS)
    RuleCase("tail-latency-spikes", "just-under", lambda: _tail(TAIL_FACTOR - 0.1)),
)
