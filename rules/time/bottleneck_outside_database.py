"""The database is a small part of the time users wait: the bottleneck is outside it.

What it detects:
    Either (a) the time the database spent executing statements (DB time) is a small share of
    the time users waited for their transactions (user response time), or (b) inside
    transactions, connections sit idle between statements far longer than the statements take,
    or (c) most of the users' time went into opening connections (a load tool that measured it:
    pgbench -C "average connection time", JMeter Connect): the application, the network, a
    proxy or the connection set-up is where the time goes.

Why it matters:
    Tuning SQL cannot help when the database does 13% of the work: in the field case behind this
    rule the application saw 300 TPS at 1 s while the database served 30,000 QPS at 1.3 ms
    (39 s of DB time per second against 300 s of user time). Inside transactions, 3.8 ms of SQL
    was followed by 25 ms of waiting for the next statement: the time was spent in softirq-bound
    network paths, a saturated proxy and application threads, while row locks stayed held.

How it is detected:
    Inputs: ``metrics.time_accounting`` (user response time from JMeter samples, sysbench/pgbench
    summaries or application latency metrics; DB time from a complete statement log or DB-time
    metrics — see ``dbdiag.derive.time_accounting``) and ``metrics.idle_gaps`` (gaps between a
    connection's statements, in and out of transactions, against statement latency).
    (a) fires when DB time / user response time < DB_SHARE_MAX_PCT = 30%; critical below
    CRITICAL_SHARE_PCT = 15%.
    (b) fires when the in-transaction idle p80 >= IDLE_FACTOR = 3 x the SQL latency p80, from at
    least MIN_GAPS = 100 gaps; critical from CRITICAL_IDLE_FACTOR = 5x.
    (c) fires when connecting takes at least CONNECT_DOMINATES_PCT = 50% of user response time
    (``connection_time_s`` of the time accounting: pgbench -C transactions x average connection
    time, added to its latency when the latency was measured after connecting); critical.
    Impact: ``user_time_s`` = user response time - DB time (the time outside the database),
    ``share_of_user_time`` = 1 - DB time / user response time; ``db_time_s`` = 0 and
    ``share_of_db_time`` = 0 (no database time is explained: the problem is outside it); the
    account it reads is ``measured_user_time_s`` / ``measured_db_time_s``, the numbers of
    ``metrics.time_accounting`` (one DB time for the report), with ``connection_time_s``,
    ``connection_share_of_user_time`` and ``connection_ms_per_transaction`` when measured.

Remediation:
    When connecting dominates: keep connections open (an application pool, PgBouncer in transaction
    mode, pgbench without -C) and check the limit new connections wait behind (connection-ceiling:
    HAProxy server maxconn queues them). Otherwise look outside the database, in this order: the network path and its CPUs (softirqs on a few
    CPUs, NIC queue affinity — see softirq-concentration and irq-affinity-skew), the proxy
    (session limits, thread counts — connection-ceiling), the client (application CPU, GC pauses,
    pool waits, N+1 round trips: batch statements, move loops into one statement or a stored
    procedure, keep transactions short and never wait on remote calls while one is open), and
    the load generator itself (load-test-inflation).

References:
    Cary Millsap, "Optimizing Oracle Performance" (response time analysis); Oracle ADDM
    (DB time); TiDB "Performance Tuning Methods" (database time vs. connection idle duration).
"""

from __future__ import annotations

from typing import Any

from dbdiag import tables as t
from dbdiag.findings import DB_TIME_S, SHARE_OF_DB_TIME, SHARE_OF_USER_TIME, USER_TIME_S, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

RULE_ID = "bottleneck-outside-database"

DB_SHARE_MAX_PCT = 30.0
CRITICAL_SHARE_PCT = 15.0
IDLE_FACTOR = 3.0
CRITICAL_IDLE_FACTOR = 5.0
MIN_GAPS = 100
CONNECT_DOMINATES_PCT = 50.0
SEE_ALSO = ("softirq-concentration", "irq-affinity-skew", "connection-ceiling", "context-switch-overhead", "load-test-inflation")


def check(inp: RuleInput) -> Verdict:
    accounting = inp.metric(t.TIME_ACCOUNTING_METRIC)
    gaps = inp.metric(t.IDLE_GAPS_METRIC)
    share = _db_share_pct(accounting)
    connect = _connect_share_pct(accounting)
    factor, gap_count = _idle_factor(gaps)
    measured_parts = []
    if share is not None:
        measured_parts.append(f"DB time {share:.1f}% of user response time (fires under {DB_SHARE_MAX_PCT:.0f}%)")
    if connect is not None:
        measured_parts.append(f"connecting {connect:.1f}% of user response time (fires from {CONNECT_DOMINATES_PCT:.0f}%)")
    elif accounting:
        measured_parts.append(f"no ratio: {accounting.get('unavailable_reason') or 'one side missing'}")
    if factor is not None:
        measured_parts.append(f"in-transaction idle p80 {factor:.1f}x SQL p80 over {gap_count:,} gaps (fires from {IDLE_FACTOR:.0f}x)")
    elif gaps:
        measured_parts.append(f"idle gaps: {gaps.get('unavailable_reason') or 'too few in-transaction gaps'}")
    if not measured_parts:
        raise Skip("needs a load test or application latency metrics plus a complete statement log or DB-time metrics")
    measured = "; ".join(measured_parts)
    low_share = share is not None and share < DB_SHARE_MAX_PCT
    long_idle = factor is not None and factor >= IDLE_FACTOR
    connecting = connect is not None and connect >= CONNECT_DOMINATES_PCT
    if not (low_share or long_idle or connecting):
        return Verdict(measured=measured)
    return Verdict(findings=[_finding(accounting, gaps, share, factor, low_share, long_idle, connecting)], measured=measured)


def _db_share_pct(accounting: dict[str, Any] | None) -> float | None:
    if not accounting or accounting.get("db_time_ratio") is None:
        return None
    return 100.0 * float(accounting["db_time_ratio"])


def _connect_share_pct(accounting: dict[str, Any] | None) -> float | None:
    if not accounting or accounting.get("connection_share_of_user_time") is None:
        return None
    return 100.0 * float(accounting["connection_share_of_user_time"])


def _pct(value: float) -> str:
    """A share as a person reads it: one decimal under 10%.

    >>> _pct(0.77), _pct(29.4), _pct(98.03)
    ('0.8%', '29%', '98%')
    """
    return f"{value:.1f}%" if value < 10 else f"{value:.0f}%"


def _idle_factor(gaps: dict[str, Any] | None) -> tuple[float | None, int]:
    if not gaps:
        return None, 0
    in_txn = gaps.get("in_txn") or {}
    sql = gaps.get("sql_latency") or {}
    count = int(in_txn.get("count") or 0)
    if count < MIN_GAPS or not in_txn.get("p80_ms") or not sql.get("p80_ms"):
        return None, count
    return float(in_txn["p80_ms"]) / float(sql["p80_ms"]), count


def _finding(
    accounting: dict[str, Any] | None,
    gaps: dict[str, Any] | None,
    share: float | None,
    factor: float | None,
    low_share: bool,
    long_idle: bool,
    connecting: bool = False,
) -> Finding:
    critical = connecting or (low_share and share is not None and share < CRITICAL_SHARE_PCT) or (
        long_idle and factor is not None and factor >= CRITICAL_IDLE_FACTOR
    )
    parts = []
    if connecting and accounting:
        parts.append(_connect_text(accounting))
    if low_share and accounting and connecting:
        parts.append(f"the database worked {_pct(share)} of it ({_seconds(accounting['db_time_s'])}); threshold {DB_SHARE_MAX_PCT:.0f}%")
    elif low_share and accounting:
        parts.append(
            f"the database worked {_pct(share)} of the time users waited "
            f"({_seconds(accounting['db_time_s'])} of {_seconds(accounting['user_response_time_s'])}); threshold {DB_SHARE_MAX_PCT:.0f}%"
        )
    if long_idle and gaps:
        parts.append(
            f"in-transaction idle p80 {gaps['in_txn']['p80_ms']:.1f} ms is {factor:.1f}x the SQL p80 "
            f"{gaps['sql_latency']['p80_ms']:.2f} ms; threshold {IDLE_FACTOR:.0f}x"
        )
    evidence: list[Evidence] = []
    sources: list[str] = []
    if accounting:
        evidence.extend(_accounting_evidence(accounting))
        sources += [s["source"] for s in accounting.get("sources", []) if s.get("source")]
    if gaps and gaps.get("in_txn"):
        evidence.append(_gap_evidence(gaps))
        gap_sources = gaps.get("source") or []
        sources += [gap_sources] if isinstance(gap_sources, str) else list(gap_sources)
    outside_pct = round(100.0 - share, 1) if share is not None else None
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.CRITICAL if critical else Severity.WARNING,
        title="Bottleneck outside the database: " + "; ".join(parts),
        subject="application / network / proxy",
        impact={
            # not "share_pct": this finding says where the time went; the findings that explain it
            # (softirqs, proxy limits...) carry the shares and sort first
            "outside_share_pct": outside_pct,
            "description": (
                f"{outside_pct:.0f}% of the users' waiting happened outside the database"
                if outside_pct is not None
                else "connections wait between statements inside transactions far longer than the statements run"
            ),
            "db_time_ratio": None if share is None else round(share / 100.0, 4),
            "idle_to_sql_p80": None if factor is None else round(factor, 2),
            "see_also": list(SEE_ALSO),
            **_cost(accounting),
        },
        evidence=tuple(evidence),
        remediation=_remediation(accounting if connecting else None),
        sources=tuple(dict.fromkeys(sources)),
    )


def _connect_text(accounting: dict[str, Any]) -> str:
    per_txn = accounting.get("connection_ms_per_transaction")
    how = f"{per_txn:,.1f} ms per transaction" if per_txn is not None else "connection set-up"
    latency = _transaction_latency_ms(accounting)
    if per_txn is not None and latency and per_txn >= 2 * latency:
        how += f" ({per_txn / latency:,.0f}x the transaction's own {latency:,.2f} ms)"
    connect_s, user_s = float(accounting["connection_time_s"]), float(accounting["user_response_time_s"])
    return (f"connecting took {how}, {_pct(100.0 * connect_s / user_s)} of the time users waited "
            f"({_seconds(connect_s)} of {_seconds(user_s)}); threshold {CONNECT_DOMINATES_PCT:.0f}%")


def _transaction_latency_ms(accounting: dict[str, Any]) -> float | None:
    """Per-transaction latency without the connection, from a -C run's user time (ms), when it is per transaction."""
    per_txn, user_s, connect_s = (accounting.get(k) for k in ("connection_ms_per_transaction", "user_response_time_s", "connection_time_s"))
    if per_txn is None or not connect_s or not user_s:
        return None
    transactions = 1000.0 * float(connect_s) / float(per_txn)
    return 1000.0 * (float(user_s) - float(connect_s)) / transactions if transactions else None


def _seconds(value: Any) -> str:
    return f"{float(value):,.1f} s"


def _cost(accounting: dict[str, Any] | None) -> dict[str, Any]:
    """The measured cost (findings' fixed names) from the one time account of the report."""
    if not accounting or accounting.get("user_response_time_s") is None:
        return {}
    user_s = float(accounting["user_response_time_s"])
    db_s = accounting.get("db_time_s")
    cost: dict[str, Any] = {"measured_user_time_s": round(user_s, 6), "measured_db_time_s": db_s}
    if db_s is not None and user_s > 0:
        outside_s = max(0.0, user_s - float(db_s))
        cost.update({USER_TIME_S: round(outside_s, 6), SHARE_OF_USER_TIME: round(outside_s / user_s, 4),
                     DB_TIME_S: 0.0, SHARE_OF_DB_TIME: 0.0})
    for key in ("connection_time_s", "connection_share_of_user_time", "connection_ms_per_transaction"):
        if accounting.get(key) is not None:
            cost[key] = accounting[key]
    return cost


def _accounting_evidence(accounting: dict[str, Any]) -> list[Evidence]:
    rows = [
        ("user response time (s)", round(float(accounting["user_response_time_s"]), 3)),
        ("DB time (s)", round(float(accounting["db_time_s"]), 3)),
        ("DB time / user response time", f"{100.0 * float(accounting['db_time_ratio']):.1f}%"),
        ("period", f"{accounting.get('from') or '?'} .. {accounting.get('to') or '?'}"),
    ]
    if accounting.get("connection_time_s") is not None:
        rows.insert(2, ("of which connecting (s)", round(float(accounting["connection_time_s"]), 3)))
        share = accounting.get("connection_share_of_user_time")
        if share is not None:
            rows.insert(3, ("connecting / user response time", f"{100.0 * float(share):.1f}%"))
        if accounting.get("connection_ms_per_transaction") is not None:
            rows.insert(4, ("connection time per transaction (ms)", accounting["connection_ms_per_transaction"]))
        rows.append(("connection time measured as", accounting.get("connection_detail") or "?"))
    if accounting.get("alignment"):
        rows.append(("alignment", accounting["alignment"]))
    out = [Evidence(title="Where the time went", columns=("measure", "value"), rows=tuple(rows))]
    out.append(
        Evidence(
            title="Sources of both sides",
            columns=("side", "what", "source", "from", "to"),
            rows=tuple(
                (s.get("side"), s.get("detail"), s.get("source"), s.get("from"), s.get("to")) for s in accounting.get("sources", [])
            ),
        )
    )
    windows = accounting.get("windows") or []
    if windows:
        worst = sorted(windows, key=lambda w: (w.get("ratio") is None, w.get("ratio") or 0.0))[:12]
        out.append(
            Evidence(
                title=f"Windows of {accounting.get('window_s', 10):g} s with the lowest DB share",
                columns=("window start", "user response time (s)", "DB time (s)", "DB share"),
                rows=tuple(
                    (
                        w.get("window_start"),
                        round(float(w.get("user_response_time_s") or 0.0), 3),
                        round(float(w.get("db_time_s") or 0.0), 3),
                        None if w.get("ratio") is None else f"{100.0 * float(w['ratio']):.1f}%",
                    )
                    for w in worst
                ),
            )
        )
    return out


def _gap_evidence(gaps: dict[str, Any]) -> Evidence:
    def row(name: str, stats: dict[str, Any] | None) -> tuple:
        stats = stats or {}
        return (name, stats.get("count"), stats.get("p50_ms"), stats.get("p80_ms"), stats.get("p99_ms"))

    return Evidence(
        title=f"Idle gaps between a connection's statements vs. statement latency ({gaps.get('method') or 'statements'})",
        columns=("what", "count", "p50 (ms)", "p80 (ms)", "p99 (ms)"),
        rows=(
            row("idle inside transactions", gaps.get("in_txn")),
            row("idle outside transactions", gaps.get("not_in_txn")),
            row("SQL latency", gaps.get("sql_latency")),
        ),
    )


def _remediation(connecting: dict[str, Any] | None = None) -> str:
    first = []
    if connecting is not None:
        per_txn = connecting.get("connection_ms_per_transaction")
        first = [
            "0. Connecting is the cost" + (f" ({per_txn:,.1f} ms per transaction)" if per_txn is not None else "") + ": keep connections "
            "open instead of opening one per transaction (an application pool; PgBouncer pool_mode = transaction in front of "
            "PostgreSQL; pgbench without -C). Then find what new connections wait behind: a proxy's server maxconn queues them "
            "(connection-ceiling: HAProxy 'show stat' qcur > 0 with scur = slim), and the server's own start-up cost per "
            "connection (PostgreSQL forks a backend: log_connections shows 'connection received' to 'connection authorized').",
        ]
    return "\n".join(
        [
            *first,
            "The database is not where users wait. Follow the time outside it:",
            "1. Network path: softirqs and NIC interrupts on few CPUs (see softirq-concentration, irq-affinity-skew);",
            "   mpstat -P ALL 1 (%soft), cat /proc/interrupts, ethtool -l IFACE; spread queues, enable RPS.",
            "2. Proxy: sessions at a limit or too few threads (see connection-ceiling): echo 'show stat' | socat ... ;",
            "   compare scur with slim, qcur with 0.",
            "3. Application: time between statements inside a transaction is client time (CPU, GC, remote calls,",
            "   row-by-row loops). Batch statements, push loops into one statement, keep no remote call inside an",
            "   open transaction; check pool wait time (HikariCP connectionTimeout / pending threads).",
            "4. Load generator: a test with no think time and one transaction type measures itself (see load-test-inflation).",
        ]
    )


RULE = Rule(
    id=RULE_ID,
    title="Bottleneck outside the database (DB time vs user response time, idle gaps)",
    area="time",
    requires=((t.STATEMENT, t.METRIC_SAMPLE, t.LOAD_RUN, t.LOAD_SAMPLE),),
    check=check,
    doc=__doc__ or "",
)
