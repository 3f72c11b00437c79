"""Connections or proxy sessions held flat at a configured limit while more clients wanted in.

What it detects:
    (a) HAProxy ``show stat`` snapshots where a frontend, listener or server has its current
        sessions (``scur``) at its session limit (``slim``: frontend/listener ``maxconn``,
        server ``maxconn``) in several snapshots, or at the limit with requests queued (``qcur``);
        and, as information, objects whose peak since the counters were reset (``smax``) reached
        the limit although they are below it now.
    (b) Connection series in dashboard exports (``metric_sample``) that sit on a plateau at a
        known limit (``max_connections``, the HAProxy session limit series) or at a round
        number such as 1000, 2000 or 4096 while demand grows: requests queue, connection errors
        rise, the load test adds threads, or the series climbs past the plateau once the limit
        was raised.

Why it matters:
    A connection limit does not slow the database down; it makes clients wait before they
    reach it (HAProxy keeps them in the kernel's accept backlog or its server queue, a database
    at ``max_connections`` refuses them with "Too many connections"). The database then looks
    idle or healthy while users see timeouts, and the time goes into queues no database metric
    shows. The field case: HAProxy sessions flat at 2000 (the frontend's maxconn) until someone
    raised it, while application latency climbed.

How it is detected:
    Inputs: ``proxy_stat`` (HAProxy ``show stat`` CSV, one or more snapshots), ``proxy_config``
    (``haproxy.cfg``, optional), ``metric_sample``
    (Prometheus/Grafana series with the names in CONNECTION_METRICS, limits in LIMIT_METRICS;
    other series whose name or file name says connection/session and that are not counters,
    durations or sizes, e.g. a Grafana "Connection Count" panel, count too but have no known limit),
    ``db_setting`` (``max_connections``, TiDB ``max-server-connections``, of the series' engine)
    for limits, ``load_sample`` (JMeter ``allThreads``) for growing demand.
    A value is at the limit when it is at least AT_LIMIT_SHARE_PCT = 99% of it.
    (a) Fires (warning) for a frontend, listener or server at its limit in at least
    MIN_SNAPSHOTS_AT_LIMIT = 2 snapshots, or in one snapshot with requests queued in its
    backend or server; one finding per frontend and one per backend's servers, with the limit
    in force when it was hit and, when the limit was raised later in the capture, the sessions
    reached after (the demand the old limit held back). A backend's ``slim`` is its
    ``fullconn`` (a tuning knob, not a limit) and is not judged; its queue is read as demand. ``smax`` >= ``slim`` alone gives an info
    finding (the limit was hit at some time since the counters were reset).
    The limit's line in ``haproxy.cfg`` (``proxy_config``, when the capture has the file: the
    server's ``maxconn`` parameter, else ``default-server maxconn`` of its backend or of defaults;
    a frontend's ``maxconn``, else the defaults' or the global one) is named with ``file:line``
    beside the first ``show stat`` row at the limit.
    Cost: when the load test measured its connection time (``metrics.time_accounting``:
    ``connection_time_s``, pgbench -C, JMeter Connect), connections queued behind the limit and a
    snapshot at the limit falls within PERIOD_MARGIN_S = 5 s of the account's period, the users'
    wait for a connection is the cost the finding explains: ``user_time_s`` = connection time,
    ``share_of_user_time`` its share of user response time, ``db_time_s`` = ``share_of_db_time``
    = 0 (the wait is outside the database); critical from CRITICAL_USER_SHARE_PCT = 50% of the
    users' time. The connection time includes the server's own set-up of each connection.
    (b) A plateau is a run of consecutive samples all within 1% of the run's highest value,
    lasting at least PLATEAU_MIN_SAMPLES = 5 samples and PLATEAU_MIN_S = 60 s. It fires when
    the plateau is at a known limit (warning: new connections are refused), or at a round
    number (a multiple of 500, or a power of two from 256) and demand grew during it: a queue
    series above 0 (QUEUE_METRIC_PATTERN), a connection-error counter rising
    (ERROR_METRIC_PATTERN), JMeter threads rising, or the series itself climbing more than 1%
    past the plateau afterwards (the limit was raised).

Remediation:
    Raise the limit that was hit, and the ones behind it, in order: HAProxy ``maxconn`` in the
    frontend (default 2000 in older HAProxy builds when unset in ``defaults``) and in the
    ``global`` section (a process-wide cap; with ``nbproc`` > 1 each process has its own limit and
    its own stats, prefer ``nbthread`` so that limits and stats cover the whole proxy), the server
    ``maxconn`` (requests beyond it queue in HAProxy; keep the sum of server maxconn over every
    HAProxy process under the database's ``max_connections``), the database ``max_connections``
    (MySQL/MariaDB ``SET GLOBAL max_connections``, PostgreSQL ``max_connections`` + restart, TiDB
    ``max-server-connections``/``max_connections``), and application pool sizes. Before raising
    it, check that the database can serve more concurrency (see ``connection-pool-oversized``):
    a limit near the CPUs' capacity is better moved to a queue than removed.

References:
    HAProxy Management Guide, "show stat" fields 4-6 (scur, smax, slim) and 2-3 (qcur, qmax);
    HAProxy Configuration Manual: maxconn (global, frontend, server), fullconn, nbthread;
    MySQL ``max_connections``; PostgreSQL ``max_connections``; TiDB ``max-server-connections``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import DB_TIME_S, SHARE_OF_DB_TIME, SHARE_OF_USER_TIME, USER_TIME_S, Evidence, Finding, Scope, Severity
from dbdiag.rules.app.common import haproxy_limit_line, iso
from dbdiag.rules.app.connection_ceiling_metrics import (  # noqa: F401 - the thresholds the docs quote live with the series
    AT_LIMIT_SHARE_PCT,
    CONNECTION_METRICS,
    PLATEAU_MIN_S,
    PLATEAU_MIN_SAMPLES,
    ROUND_MULTIPLE,
    ROUND_POWER_OF_TWO_FROM,
    RULE_ID,
    series_findings,
)
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict

MIN_SNAPSHOTS_AT_LIMIT = 2
MAX_SNAPSHOT_ROWS = 24
CRITICAL_USER_SHARE_PCT = 50.0  # of the users' time spent waiting for a connection behind the limit
PERIOD_MARGIN_S = 5.0  # a snapshot this close to the time account's period still counts as during it

def check(inp: RuleInput) -> Verdict:
    findings: list[Finding] = []
    measured: list[str] = []
    judged_any = False
    stats = inp.table(t.PROXY_STAT)
    if stats is not None:
        proxy_findings, proxy_measured, judged = _proxy_findings(stats, inp.metric(t.TIME_ACCOUNTING_METRIC), inp.table(t.PROXY_CONFIG),
                                                                  (inp.metric(t.ENGINE_VERSION_METRIC) or {}).get("engine"))
        findings += proxy_findings
        measured.append(proxy_measured)
        judged_any |= judged
    samples = inp.table(t.METRIC_SAMPLE)
    if samples is not None:
        metric_findings, metric_measured, judged = series_findings(inp, samples)
        findings += metric_findings
        if metric_measured:
            measured.append(metric_measured)
        judged_any |= judged
    if not judged_any:
        raise Skip(
            "no HAProxy frontend/listener/server with a session limit (slim) and no connection series "
            f"({', '.join(sorted(CONNECTION_METRICS))}) in the metrics"
        )
    return Verdict(findings=findings, measured="; ".join(m for m in measured if m))


# ---- HAProxy show stat ---------------------------------------------------------------------------


def _proxy_findings(stats: pl.DataFrame, accounting: dict[str, Any] | None = None,
                    config: pl.DataFrame | None = None, engine: str | None = None) -> tuple[list[Finding], str, bool]:
    limited = stats.filter(pl.col("type").is_in(["frontend", "listener", "server"]) & (pl.col("slim") > 0))
    if limited.height == 0:
        return [], "HAProxy: no frontend, listener or server with a session limit", False
    backend_queue = (
        stats.filter(pl.col("type") == "backend")
        .group_by("source", "snapshot", "proxy")
        .agg(pl.col("qcur").max().alias("backend_qcur"))
    )
    rows = (
        limited.join(backend_queue, on=["source", "snapshot", "proxy"], how="left")
        .with_columns(
            (pl.col("scur") * 100 >= pl.col("slim") * AT_LIMIT_SHARE_PCT).alias("at_limit"),
            pl.max_horizontal(pl.col("qcur").fill_null(0), pl.col("backend_qcur").fill_null(0)).alias("queued"),
            pl.when(pl.col("type") == "server").then(pl.lit("servers")).otherwise(pl.lit("frontend")).alias("unit"),
        )
        .sort("source", "proxy", "server", "snapshot")
    )
    findings: list[Finding] = []
    history: list[dict[str, Any]] = []
    snapshots = rows["snapshot"].n_unique()
    for (source, proxy, unit), members in rows.group_by("source", "proxy", "unit", maintain_order=True):
        hit: list[str] = []
        for (server,), group in members.group_by("server", maintain_order=True):
            at_limit = group.filter(pl.col("at_limit"))
            if at_limit.height >= MIN_SNAPSHOTS_AT_LIMIT or at_limit.filter(pl.col("queued") > 0).height > 0:
                hit.append(server)
            elif at_limit.height == 0 and (group["smax"] >= group["slim"]).any():
                history.append(group.row(-1, named=True))
        if hit:
            findings.append(_proxy_finding(source, proxy, unit, members, hit, accounting, config, engine))
    if history:
        findings.append(_history_finding(history))
    at_limit_count = rows.filter(pl.col("at_limit")).select("source", "proxy", "server").unique().height
    measured = (
        f"HAProxy: {rows.select('source', 'proxy', 'server').unique().height} limited frontends/listeners/servers in "
        f"{snapshots} snapshot(s), {at_limit_count} at {AT_LIMIT_SHARE_PCT:g}% of their limit or more, "
        f"{len(history)} with smax >= slim"
    )
    return findings, measured, True


def _proxy_finding(source: str, proxy: str, unit: str, members: pl.DataFrame, hit: list[str],
                   accounting: dict[str, Any] | None = None, config: pl.DataFrame | None = None, engine: str | None = None) -> Finding:
    """One finding per frontend (with its listeners) or per backend's servers: the limit in force when it was hit."""
    # A frontend's listeners carry the same sessions as the frontend: its own row speaks for it when it was hit.
    shown = ["FRONTEND"] if unit == "frontend" and "FRONTEND" in hit else hit
    rows = members.filter(pl.col("server").is_in(shown))
    per_snapshot = (
        rows.group_by("snapshot")
        .agg(
            pl.col("ts").first(), pl.col("scur").sum(), pl.col("slim").sum(), pl.col("smax").max(),
            pl.col("queued").max(), pl.col("at_limit").sum().alias("members_at_limit"), pl.col("stot").sum(),
        )
        .sort("snapshot")
    )
    at_limit_rows = rows.filter(pl.col("at_limit"))
    limit_then = int(at_limit_rows.sort("snapshot")["slim"][-1])  # per member; the same for every server in practice
    limit_total = int(per_snapshot.filter(pl.col("members_at_limit") > 0)["slim"][-1])
    snapshots_at_limit = per_snapshot.filter(pl.col("members_at_limit") > 0)
    last_at_limit = int(snapshots_at_limit["snapshot"][-1])
    after = per_snapshot.filter(pl.col("snapshot") > last_at_limit)
    raised = after.filter(pl.col("slim") > limit_total)
    max_queue = int(per_snapshot["queued"].max() or 0)
    queue_text = f", up to {max_queue:,} requests queued" if max_queue else ""
    times = snapshots_at_limit["ts"].drop_nulls()
    when = f" from {iso(times.min())} to {iso(times.max())}" if times.len() else ""
    raised_text = first_step = ""
    if raised.height:
        first = raised.row(0, named=True)
        per_member = int(rows.filter(pl.col("snapshot") == first["snapshot"])["slim"].max())
        at = iso(first["ts"]) or f"snapshot {first['snapshot']}"
        reached = int(raised["scur"].max())
        raised_text = f"; raised to {per_member:,} at {at}, after which sessions reached {reached:,}"
        first_step = (
            f"1. The limit was raised to {per_member:,} at {at}, and sessions then reached {reached:,}: the demand was above the "
            f"old {limit_total:,}. Keep the new value in the configuration file (a runtime 'set maxconn' is lost at the next reload)."
        )
    if unit == "frontend":
        what = f"frontend {proxy}"
        head = f"{int(snapshots_at_limit['scur'].max()):,} sessions at its maxconn {limit_then:,}"
        setting = f"'maxconn {limit_then * 2}' in frontend {proxy} (was {limit_then})"
    else:
        what = f"backend {proxy}"
        head = f"{len(hit)} of {members['server'].n_unique()} servers at their maxconn {limit_then:,} ({limit_total:,} in all)"
        named = hit[0] if len(hit) == 1 else "<name>"
        setting = f"'server {named} ... maxconn {limit_then * 2}' for each server of backend {proxy} (was {limit_then})"
    first_rows = at_limit_rows.sort("snapshot").group_by("server", maintain_order=True).first()
    where = {server: f"{source}:{line}" for server, line in first_rows.select("server", "line").iter_rows() if line is not None}
    cost = _wait_cost(accounting, times, max_queue)
    configured = {server: found for server in shown if (found := haproxy_limit_line(config, proxy, server)) is not None}
    errors = rows.select(*(pl.col(c).max() - pl.col(c).min() for c in ("ereq", "econ", "eresp") if c in rows.columns)).row(0, named=True)
    error_text = ", ".join(f"{name} +{int(v):,}" for name, v in errors.items() if v)
    first_step = first_step or f"1. Raise the limit that was hit: {setting}." + _config_text(configured, limit_then)
    cost_text = _cost_text(cost)
    remediation = "\n".join(
        [
            f"HAProxy {what} held {int(snapshots_at_limit['scur'].max()):,} sessions against {limit_total:,} in "
            f"{snapshots_at_limit.height} of {per_snapshot.height} snapshots{queue_text}"
            + (f" ({', '.join(f'{server}: {at}' for server, at in where.items())})" if where else "") + "."
            + (f" {cost_text[0].upper()}{cost_text[1:]}." if cost_text else ""),
            first_step,
            f"2. Keep global maxconn above the sum of the frontends' maxconn (at least {limit_total * 2:,} if this one doubles); "
            "'show info' prints Maxconn, and ulimit-n must follow.",
            "3. With nbproc > 1 (HAProxy <= 2.4) each process enforces maxconn and reports 'show stat' on its own: "
            "the real ceiling is nbproc x maxconn; run one process with nbthread N so that limits and stats are global.",
            "4. Behind it: the database must accept what HAProxy lets through: the sum of the servers' maxconn over every "
            f"HAProxy process stays under {_max_connections(engine)}, and application pools are sized to match. "
            "If the database is already at its CPU capacity, keep the limit and let requests queue in HAProxy instead "
            "(server maxconn + timeout queue).",
        ]
    )
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.CRITICAL if cost and cost[SHARE_OF_USER_TIME] * 100 >= CRITICAL_USER_SHARE_PCT else Severity.WARNING,
        title=(
            f"HAProxy {what}: {head} in {snapshots_at_limit.height} of {per_snapshot.height} snapshots{queue_text}{raised_text}"
            + (f"; {cost_text}" if cost_text else "")
            + f"; threshold {AT_LIMIT_SHARE_PCT:g}% of slim in {MIN_SNAPSHOTS_AT_LIMIT} snapshots, or with a queue"
        ),
        subject=f"{proxy}/FRONTEND" if unit == "frontend" and shown == ["FRONTEND"] else (f"{proxy}/{hit[0]}" if len(hit) == 1 else proxy),
        impact={
            "description": f"clients beyond {limit_total:,} sessions waited before reaching {what}{when}",
            "limit": limit_total,
            "snapshots_at_limit": snapshots_at_limit.height,
            "max_queue": max_queue,
            "objects": shown,
            "limit_rows": where,
            "limit_settings": {server: found["where"] for server, found in configured.items()},
            **cost,
        },
        evidence=(
            Evidence(
                title=f"HAProxy show stat: {what} ({', '.join(shown)}) per snapshot" + (", summed over the servers" if len(shown) > 1 else ""),
                columns=("snapshot", "time", "scur", "slim", "smax", "qcur (server or backend)", "stot", "at limit"),
                rows=tuple(
                    (r["snapshot"], iso(r["ts"]), r["scur"], r["slim"], r["smax"], r["queued"], r["stot"],
                     f"{r['members_at_limit']} of {len(shown)}" if len(shown) > 1 else ("yes" if r["members_at_limit"] else "no"))
                    for r in _evidence_rows(per_snapshot).iter_rows(named=True)
                ),
            ),
            Evidence(
                title="Where the limit is set",
                columns=("object", "limit when hit", "snapshots at it", "highest scur", "limit at the end", "setting",
                         "errors during the capture", "first row at the limit", "set in the configuration"),
                rows=tuple(
                    (
                        f"{proxy}/{server}",
                        int(group.filter(pl.col("at_limit"))["slim"][-1]) if group["at_limit"].any() else None,
                        int(group["at_limit"].sum()),
                        int(group["scur"].max()),
                        int(group["slim"][-1]),
                        "maxconn (frontend/listener)" if unit == "frontend" else "server ... maxconn",
                        error_text or "none counted",
                        where.get(server),
                        f"{configured[server]['where']}: {configured[server]['text']}" if server in configured else None,
                    )
                    for (server,), group in members.filter(pl.col("server").is_in(hit)).group_by("server", maintain_order=True)
                ),
            ),
            *_cost_evidence(cost),
        ),
        remediation=remediation,
        sources=tuple(dict.fromkeys([*(found["where"] for found in configured.values()), *where.values(), source])),
    )


def _max_connections(engine: str | None) -> str:
    """The database's connection limit, as the capture's engine sets it (every engine's when unknown)."""
    return {"mariadb": "max_connections (SET GLOBAL online, and in my.cnf)", "mysql": "max_connections (SET GLOBAL online, and in my.cnf)",
            "percona": "max_connections (SET GLOBAL online, and in my.cnf)", "postgresql": "max_connections (postgresql.conf, restart required)",
            "tidb": "max-server-connections (tidb.toml) / max_connections"}.get(
        engine or "", "max_connections (online in MySQL/MariaDB, a restart in PostgreSQL; TiDB max-server-connections)")


def _config_text(configured: dict[str, dict[str, Any]], limit: int) -> str:
    """Where the configuration in the capture sets the limit, and whether it agrees with show stat."""
    texts = []
    for server, found in configured.items():
        text = f" {server}: {found['where']} '{found['text']}'"
        if found["maxconn"] != limit:
            text += f" (maxconn {found['maxconn']} there, {limit} in show stat: the running process read another configuration)"
        texts.append(text)
    return (" Set at" + ";".join(texts) + ".") if texts else ""


def _wait_cost(accounting: dict[str, Any] | None, times: pl.Series, max_queue: int) -> dict[str, Any]:
    """The users' time spent waiting for a connection behind the limit, in the findings' cost names.

    Known when the load test measured its connection time (``metrics.time_accounting``:
    ``connection_time_s``, pgbench -C or JMeter Connect), connections queued at the limit, and the
    snapshots at the limit fall in the account's period (or the period has no clock: a single run
    without wall time, compared as a whole). The connection time includes the server's own
    set-up of each connection, which the limit does not cause: said in the evidence.
    """
    if not accounting or accounting.get("connection_time_s") is None or not max_queue:
        return {}
    user_s = accounting.get("user_response_time_s")
    if not user_s:
        return {}
    start, end = (_parse_iso(accounting.get(k)) for k in ("from", "to"))
    if start is not None and end is not None and times.len():
        low, high = start.timestamp() - PERIOD_MARGIN_S, end.timestamp() + PERIOD_MARGIN_S
        if not any(low <= ts.timestamp() <= high for ts in times.to_list()):
            return {}
    connect_s = float(accounting["connection_time_s"])
    cost: dict[str, Any] = {
        USER_TIME_S: round(connect_s, 6), SHARE_OF_USER_TIME: round(connect_s / float(user_s), 4),
        DB_TIME_S: 0.0, SHARE_OF_DB_TIME: 0.0,
        "measured_user_time_s": user_s, "measured_db_time_s": accounting.get("db_time_s"),
    }
    if accounting.get("connection_ms_per_transaction") is not None:
        cost["connection_ms_per_transaction"] = accounting["connection_ms_per_transaction"]
    cost["connection_detail"] = accounting.get("connection_detail")
    return cost


def _cost_text(cost: dict[str, Any]) -> str:
    if not cost:
        return ""
    per_txn = cost.get("connection_ms_per_transaction")
    how = f", {per_txn:,.1f} ms per transaction" if per_txn is not None else ""
    return (f"users waited {cost[USER_TIME_S]:,.1f} s for a connection behind it ({100.0 * cost[SHARE_OF_USER_TIME]:.0f}% of "
            f"their {float(cost['measured_user_time_s']):,.1f} s{how})")


def _cost_evidence(cost: dict[str, Any]) -> tuple[Evidence, ...]:
    if not cost:
        return ()
    return (
        Evidence(
            title="What the limit cost the users (the load test's own connection time)",
            columns=("measure", "value"),
            rows=(
                ("time users waited for a connection (s)", cost[USER_TIME_S]),
                ("share of the time users waited", f"{100.0 * cost[SHARE_OF_USER_TIME]:.1f}%"),
                ("connection time per transaction (ms)", cost.get("connection_ms_per_transaction")),
                ("user response time (s), DB time (s)", f"{cost['measured_user_time_s']}, {cost['measured_db_time_s']}"),
                ("measured as", cost.get("connection_detail") or "?"),
                ("includes", "the server's own connection set-up (PostgreSQL forks a backend per connection), which the limit does not cause"),
            ),
        ),
    )


def _parse_iso(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _evidence_rows(per_snapshot: pl.DataFrame) -> pl.DataFrame:
    """Every snapshot when there are few; else the first ones, those around the first and last at the limit, the last ones."""
    if per_snapshot.height <= MAX_SNAPSHOT_ROWS:
        return per_snapshot
    at = per_snapshot.with_row_index("_i").filter(pl.col("members_at_limit") > 0)["_i"]
    first, last, end = int(at.min()), int(at.max()), per_snapshot.height - 1
    keep = sorted({*range(0, 3), *range(max(0, first - 1), first + 2), *range(max(0, last - 1), min(end, last + 3) + 1), *range(end - 2, end + 1)})
    return per_snapshot[[i for i in keep if 0 <= i <= end]]


def _history_finding(rows: list[dict[str, Any]]) -> Finding:
    names = [f"{r['proxy']}/{r['server']}" for r in rows]
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.INFO,
        title=(
            f"HAProxy: {len(rows)} frontend/listener/server(s) reached their session limit at some time since the counters "
            f"were reset (smax >= slim: {', '.join(names[:4])}{'...' if len(names) > 4 else ''}); not at it in these snapshots"
        ),
        subject="haproxy",
        impact={"description": "the limit was hit before the capture; clients waited then", "objects": names},
        evidence=(
            Evidence(
                title="HAProxy objects whose peak sessions reached the limit",
                columns=("proxy/server", "type", "scur", "smax", "slim", "qmax"),
                rows=tuple((f"{r['proxy']}/{r['server']}", r["type"], r["scur"], r["smax"], r["slim"], r["qmax"]) for r in rows),
            ),
        ),
        remediation=(
            "Compare the time of the peak with the incident (HAProxy logs show the session counts per request: "
            "the actconn/feconn/beconn/srv_conn fields), and take 'show stat' every 10 s during the next one. "
            "If the peak is the incident, raise maxconn as for a limit hit during the capture."
        ),
        sources=tuple(sorted({r["source"] for r in rows})),
    )


RULE = Rule(
    id=RULE_ID,
    title="Connections or proxy sessions flat at a limit",
    area="app",
    requires=((t.PROXY_STAT, t.METRIC_SAMPLE),),
    check=check,
    doc=__doc__ or "",
)
