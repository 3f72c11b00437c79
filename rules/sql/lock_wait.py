"""Statements that spent most of their time waiting for locks, and who held them.

What it detects:
    Statements whose time is mostly lock wait — MySQL/MariaDB/Percona slow log ``Lock_time`` (table
    locks, metadata locks; MariaDB 10.11 does not count InnoDB row-lock waits in it), TiDB's lock
    wait (``LockKeys_time``), PostgreSQL ``log_lock_waits`` entries ("still waiting for ShareLock on
    transaction 735 after 100.1 ms", "acquired ... after 1111.0 ms"), deadlocks and lock timeouts —
    grouped by the table they waited on: how many, how long in all and at p99, when, and the blocker
    when the capture shows it.

Why it matters:
    A waiting statement does no work: its plan is not the problem, and adding an index will not help.
    The time goes to whoever holds the lock — a long transaction left open, ``LOCK TABLES``, a DDL or
    a batch job — and every session queued behind it waits as long as it holds. Ending or shortening
    the blocker removes the whole wait at once.

How it is detected:
    Input: the derived ``statements`` (``lock_time_s``; PostgreSQL waits are added from the
    ``lock_wait`` rows the log wrote), and ``lock_wait`` when present. A statement counts as waiting
    when its lock time is at least MIN_WAIT_S = 0.05 s and at least MOSTLY_WAIT_PCT = 50% of its
    query time. Per table (from the lock-wait CONTEXT, else the statement's only table), it fires
    when the waits add up to at least MIN_TOTAL_WAIT_S = 1 s and MIN_SHARE_PCT = 5% of DB time
    (statement time, sleep left out); critical from CRITICAL_SHARE_PCT = 25%. At most
    MAX_FINDINGS = 3 tables. Deadlocks and lock timeouts of the table are counted beside.
    The blocker: PostgreSQL's "Process holding the lock" (followed to the first holder that is not
    itself waiting); otherwise the statements of another connection that hold the table while the
    waits run — ``LOCK TABLES ... UNLOCK TABLES``, a transaction (BEGIN/START TRANSACTION ...
    COMMIT/ROLLBACK) that wrote to it, a DDL on it — overlapping at least BLOCKER_OVERLAP_PCT = 20%
    of the wait time (times on whole seconds are widened by a second); at most MAX_BLOCKERS = 3,
    most wait first. MariaDB's ``Lock_time`` leaves InnoDB row-lock waits out: writes that ran
    inside another connection's open transaction on the table and took 10x their usual time are
    counted as inferred row-lock waits, said apart (see ``lock_holds``); alone they make a warning.

Remediation:
    Find the blocker while it holds and end it, then keep it from coming back: MariaDB/MySQL
    ``SHOW FULL PROCESSLIST``, ``information_schema.INNODB_LOCK_WAITS``/``INNODB_TRX`` (MariaDB; MySQL
    8 ``performance_schema.data_lock_waits``, 5.7 ``information_schema.innodb_lock_waits``),
    ``performance_schema.metadata_locks``, ``KILL <thread>``, ``lock_wait_timeout`` /
    ``innodb_lock_wait_timeout``; PostgreSQL ``pg_blocking_pids()``, ``pg_locks``,
    ``pg_terminate_backend()``, ``lock_timeout``, ``idle_in_transaction_session_timeout``; TiDB
    ``information_schema.DATA_LOCK_WAITS``, ``CLUSTER_TIDB_TRX``, ``KILL TIDB``. Commit sooner;
    run DDL and batch jobs off-peak or in small batches.

References:
    MariaDB KB "Information Schema INNODB_LOCK_WAITS Table", "Performance Schema metadata_locks
    Table", "lock_wait_timeout", "KILL"; MySQL 8.0 manual "The data_lock_waits Table"; PostgreSQL 15
    manual "log_lock_waits", "pg_locks", "pg_blocking_pids", "lock_timeout"; TiDB docs
    "Troubleshoot Lock Conflicts", "DATA_LOCK_WAITS", "KILL [TIDB]".
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql.common import db_time_s, short_sql, statements, where
from dbdiag.rules.sql.full_table_scan import parse_sql, table_aliases
from dbdiag.rules.sql.lock_holds import ROW_LOCK_ENGINES, holds, inferred_row_lock_waits, may_hold
from dbdiag.sqlnorm import tree_errors
from dbdiag.units import seconds

RULE_ID = "lock-wait"

MIN_WAIT_S = 0.05
MOSTLY_WAIT_PCT = 50.0
MIN_TOTAL_WAIT_S = 1.0
MIN_SHARE_PCT = 5.0
CRITICAL_SHARE_PCT = 25.0
MAX_FINDINGS = 3
BLOCKER_OVERLAP_PCT = 20.0
MAX_BLOCKERS = 3
MAX_CHAIN = 20  # holders followed at most this far (a chain of waiters)
HOLD_LOOKBACK = timedelta(hours=1)  # a hold is looked for from this long before the first wait
HOLD_LOOKAHEAD = timedelta(minutes=10)  # and its release until this long after the last one



def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    total_s = db_time_s(everything) or 1.0
    logged = inp.table(t.PUBLIC_LOCK_WAIT)
    mostly = (pl.col("lock_time_s").fill_null(0.0) >= MIN_WAIT_S) & (
        pl.col("lock_time_s").fill_null(0.0) >= MOSTLY_WAIT_PCT / 100.0 * pl.col("query_time_s")
    )
    counted = everything.select(mostly.fill_null(False)).to_series()
    waiting = everything.filter(counted)
    waiting = waiting.with_columns(_tables_of(waiting, logged), pl.lit(False).alias("inferred"))
    # the columns of the classes only (lazy): a filter of the whole frame would copy every column of every row
    writes = everything.lazy().filter(pl.col("engine").is_in(ROW_LOCK_ENGINES)).group_by("fp_id").agg(pl.col("sample_sql").first(), pl.col("engine").first()).collect()
    if writes.height:  # MariaDB's Lock_time leaves InnoDB row-lock waits out: inferred from the holds
        samples = {fp_id: (sql, engine) for fp_id, sql, engine in writes.iter_rows()}
        # parsed only for the fingerprints the walk asks for (its candidate writes): most logs have none, and sqlglot is costly
        rows = inferred_row_lock_waits(everything, lambda fp_id: only_table(*samples[fp_id]), counted).filter(pl.col("lock_time_s") >= MIN_WAIT_S)
        waiting = pl.concat([waiting, rows.with_columns(pl.lit(True).alias("inferred"))], how="vertical_relaxed")
    if waiting.height == 0:
        return Verdict(measured=f"no statement waited {MIN_WAIT_S} s or more for locks (most of its time) among {everything.height:,}")
    per_table = (
        waiting.group_by("table")
        .agg(pl.len().alias("waits"), pl.col("lock_time_s").sum().alias("wait_s"), pl.col("lock_time_s").filter(pl.col("inferred")).sum().alias("inferred_s"))
        .with_columns((100.0 * pl.col("wait_s") / total_s).alias("share_pct"))
        .sort("wait_s", "table", descending=[True, False], nulls_last=True)
    )
    measured = "; ".join(
        f"{row['table'] or 'unknown table'}: {row['waits']} wait(s), {seconds(row['wait_s'])}, {row['share_pct']:.1f}% of DB time"
        for row in per_table.head(5).iter_rows(named=True)
    ) or "no completed waits"
    measured += f" (fires from {MIN_TOTAL_WAIT_S:.0f} s and {MIN_SHARE_PCT:.0f}%)"
    heavy = per_table.filter(pl.col("wait_s") >= MIN_TOTAL_WAIT_S, pl.col("share_pct") >= MIN_SHARE_PCT).head(MAX_FINDINGS)
    findings = [
        _finding(inp, waiting.filter(pl.col("table").eq_missing(row["table"])), logged, row, total_s)
        for row in heavy.iter_rows(named=True)
    ]
    return Verdict(findings=findings, measured=measured)


def _tables_of(waiting: pl.DataFrame, logged: pl.DataFrame | None) -> pl.Series:
    """The table each waiting statement waited on: the PostgreSQL CONTEXT's relation (an entry of the same
    connection during the statement), else the statement's only table (parsed once per fingerprint)."""
    of_class = {fp_id: only_table(sql, engine) for fp_id, sql, engine in waiting.group_by("fp_id").agg(pl.col("sample_sql").first(), pl.col("engine").first()).iter_rows()}
    named: dict[str, list[tuple]] = {}
    if logged is not None and logged.height:
        for conn_id, ts, relation in logged.filter(pl.col("relation").is_not_null()).select("conn_id", "ts", "relation").iter_rows():
            named.setdefault(conn_id, []).append((ts, relation))
    tables = []
    for conn_id, end, query_s, fp_id in waiting.select("conn_id", "end_ts", "query_time_s", "fp_id").iter_rows():
        found = [
            relation for ts, relation in named.get(conn_id, [])
            if end is None or ts is None or end - timedelta(seconds=query_s or 0.0) <= ts <= end
        ]
        tables.append(found[0] if found else of_class.get(fp_id))
    return pl.Series("table", tables, dtype=pl.String)


def only_table(sql: str | None, engine: str | None) -> str | None:
    try:
        tree = parse_sql(sql, engine)
        names = {name.lower() for name in table_aliases(tree).values()} if tree is not None else set()
    except tree_errors():
        return None
    return next(iter(names)) if len(names) == 1 else None


def _finding(inp: RuleInput, waits: pl.DataFrame, logged: pl.DataFrame | None, row: dict, total_s: float) -> Finding:
    table = row["table"]
    engine = waits["engine"].drop_nulls().mode().sort()[0] if waits["engine"].drop_nulls().len() else "mysql"
    starts = waits.select(pl.coalesce("start_ts", pl.col("end_ts") - pl.duration(microseconds=(pl.col("query_time_s") * 1e6).cast(pl.Int64))).alias("at"))["at"]
    first, last = starts.min(), waits["end_ts"].max()
    p99_s = float(waits["lock_time_s"].quantile(0.99, "linear"))
    blockers = _blockers(inp, waits, logged, table)
    blocker = blockers[0] if blockers else None
    failed = _failed_waits(logged, table, waits)
    share = row["share_pct"]
    when = f" between {first:%H:%M:%S} and {last:%H:%M:%S} UTC" if first is not None and last is not None else ""
    blocker_text = blocker["summary"] if blocker else "no blocker visible in the capture"
    if len(blockers) > 1:
        blocker_text += f", and {len(blockers) - 1} more"
    inferred_s = row["inferred_s"] or 0.0
    inferred = (
        f"; {seconds(inferred_s)} of it inferred InnoDB row-lock waits (MariaDB's Lock_time does not count them: "
        "writes that ran inside another connection's open transaction on the table, far slower than their usual time)"
        if inferred_s else ""
    )
    per_class = (
        waits.group_by("fp_id").agg(pl.col("fingerprint").first(), pl.len().alias("waits"), pl.col("lock_time_s").sum().alias("wait_s"), pl.col("query_time_s").sum().alias("query_s"))
        .sort("wait_s", "fp_id", descending=[True, False]).head(5)
    )
    worst = waits.sort("lock_time_s", descending=True).head(3)
    evidence = [
        Evidence(
            title="Waiting statements",
            columns=("fingerprint", "waits", "lock wait", "query time", "wait share %"),
            rows=tuple((r["fingerprint"], r["waits"], seconds(r["wait_s"]), seconds(r["query_s"]), round(100.0 * r["wait_s"] / (r["query_s"] or 1.0), 1)) for r in per_class.iter_rows(named=True)),
        ),
        Evidence(
            title="Longest waits",
            columns=("connection", "started", "lock wait", "query time", "measured", "where"),
            rows=tuple(
                (r["conn_id"], _time(r["start_ts"]), seconds(r["lock_time_s"]), seconds(r["query_time_s"]), "inferred" if r["inferred"] else _measured_by(r.get("engine")), where(r))
                for r in worst.iter_rows(named=True)
            ),
        ),
    ]
    for each in blockers:
        evidence.append(Evidence(
            title=f"Blocker: connection {each['conn_id']} ({each['how']}; {each['share_pct']:.0f}% of the wait time)",
            columns=("time", "statement", "query time", "where"),
            rows=tuple(each["statements"]),
        ))
    if failed:
        evidence.append(Evidence(title="Waits that ended in an error", columns=("kind", "connection", "time", "detail", "where"), rows=tuple(failed)))
    sources = [each["where"] for each in blockers if each["where"]] + [where(r) for r in worst.iter_rows(named=True)]
    return Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        # inferred waits alone never make it critical
        severity=Severity.CRITICAL if share - 100.0 * inferred_s / total_s >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"Lock wait on {table or 'an unknown table'}: {row['waits']:,} statement(s) waited {seconds(row['wait_s'])} "
            f"({share:.1f}% of DB time); blocker: {blocker_text}; threshold {MIN_SHARE_PCT:.0f}% and {MIN_TOTAL_WAIT_S:.0f} s"
        ),
        subject=f"table {table}" if table else f"fingerprint {per_class['fp_id'][0]}",
        impact={
            "db_time_s": round(row["wait_s"], 3),
            "share_of_db_time": round(share / 100.0, 4),
            "share_pct": round(share, 1),
            "waits": row["waits"],
            "p99_wait_s": round(p99_s, 6),
            "max_wait_s": round(float(waits["lock_time_s"].max()), 6),
            "failed_waits": len(failed),
            "inferred_row_lock_wait_s": round(inferred_s, 3),
            "description": (
                f"{row['waits']:,} statement(s) spent {seconds(row['wait_s'])} waiting for locks on {table or 'one table'}{when} "
                f"(p99 {seconds(p99_s)}){inferred}; their execution took {seconds(float((waits['query_time_s'] - waits['lock_time_s']).sum()))}. "
                f"Blocker: {blocker_text}."
            ),
        },
        evidence=tuple(evidence),
        remediation=remediation(engine, table, blocker["conn_id"] if blocker else None),
        sources=tuple(dict.fromkeys(sources)),
    )


def _time(value) -> str | None:
    return f"{value:%H:%M:%S.%f}"[:-3] if value is not None else None


def _failed_waits(logged: pl.DataFrame | None, table: str | None, waits: pl.DataFrame) -> list[tuple]:
    """Deadlocks and lock timeouts on the table (PostgreSQL log): the statement failed, its wait is not in the sums."""
    if logged is None or logged.height == 0:
        return []
    failed = logged.filter(pl.col("kind").is_in(["deadlock", "timeout"]))
    if table is not None:
        failed = failed.filter(pl.col("relation").is_null() | (pl.col("relation") == table))
    return [(r["kind"], r["conn_id"], _time(r["ts"]), short_sql(r["detail"] or r["statement"])[:300], where(r)) for r in failed.head(10).iter_rows(named=True)]


def _blockers(inp: RuleInput, waits: pl.DataFrame, logged: pl.DataFrame | None, table: str | None) -> list[dict]:
    """The blockers of ``waits``, most wait time first (at most MAX_BLOCKERS): the log's holders, else overlapping holds."""
    # every statement, sleep too: a blocker often holds its lock while it sleeps (DO SLEEP, pg_sleep)
    everything = inp.table(t.FINGERPRINTED_STATEMENT, keep_empty=True)
    return (_logged_blockers(everything, waits, logged) or _overlapping_blockers(everything, waits, table))[:MAX_BLOCKERS]


def _logged_blockers(everything: pl.DataFrame, waits: pl.DataFrame, logged: pl.DataFrame | None) -> list[dict]:
    """PostgreSQL: the holders the log names for these waits, each followed to one that is not waiting itself."""
    if logged is None or logged.height == 0:
        return []
    conns = waits["conn_id"].drop_nulls().unique().implode()
    named = logged.filter(pl.col("conn_id").is_in(conns), pl.col("holders").is_not_null(), pl.col("kind") == "waiting")
    if named.height == 0:
        return []
    holder_of = {r["pid"]: r["holders"].split(",")[0] for r in logged.filter(pl.col("holders").is_not_null()).iter_rows(named=True)}
    root_of_conn: dict[str, str] = {}
    for conn_id, holders in named.select("conn_id", "holders").iter_rows():
        pid = holders.split(",")[0]
        for _ in range(MAX_CHAIN):
            if pid not in holder_of or holder_of[pid] == pid:
                break
            pid = holder_of[pid]
        root_of_conn.setdefault(conn_id, pid)
    roots = waits.with_columns(pl.col("conn_id").replace_strict(root_of_conn, default=None, return_dtype=pl.String).alias("_root"))
    total = float(waits["lock_time_s"].sum()) or 1.0
    ranked = roots.filter(pl.col("_root").is_not_null()).group_by("_root").agg(pl.col("lock_time_s").sum()).sort("lock_time_s", "_root", descending=[True, False])
    return [
        _described(everything, roots.filter(pl.col("_root") == root).drop("_root"), root, "named by the log as holding the lock", 100.0 * wait_s / total)
        for root, wait_s in ranked.iter_rows()
    ]


def _overlapping_blockers(everything: pl.DataFrame, waits: pl.DataFrame, table: str | None) -> list[dict]:
    """Other connections that held ``table`` (LOCK TABLES, a writing transaction, a DDL) while the waits ran."""
    first, last = waits["start_ts"].min() or waits["end_ts"].min(), waits["end_ts"].max()
    if table is None or first is None or last is None:
        return []
    window = everything.filter(pl.col("end_ts").is_between(first - HOLD_LOOKBACK, last + HOLD_LOOKAHEAD), may_hold(table))
    intervals = holds(window, table, set(waits.filter(~pl.col("inferred"))["conn_id"].drop_nulls().to_list()))
    coarse = everything["end_ts"].drop_nulls().dt.microsecond().eq(0).all()
    margin = timedelta(seconds=1 if coarse else 0)
    spans = [
        (r["start_ts"] or r["end_ts"] - timedelta(seconds=r["query_time_s"]), r["lock_time_s"], r["conn_id"], r["inferred"])
        for r in waits.select("start_ts", "end_ts", "query_time_s", "lock_time_s", "conn_id", "inferred").iter_rows(named=True)
        if (r["start_ts"] or r["end_ts"]) is not None
    ]
    total = sum(span[1] for span in spans) or 1.0
    found = []
    for conn_id, begin, end, how in intervals:
        begin, end = begin - margin, end + margin
        row_locks = how.startswith("open transaction")  # an inferred wait is a row-lock wait: only a transaction holds those
        overlaps = [
            max(0.0, (min(end, start + timedelta(seconds=wait)) - max(begin, start)).total_seconds()) if conn != conn_id and (row_locks or not inferred) else 0.0
            for start, wait, conn, inferred in spans
        ]
        share = 100.0 * sum(overlaps) / total
        if share >= BLOCKER_OVERLAP_PCT:
            overlapped = waits.filter(pl.Series([o > 0 for o in overlaps]))
            found.append(_described(everything, overlapped, conn_id, how, share, since=begin + margin))
    return sorted(found, key=lambda blocker: -blocker["share_pct"])


def _described(everything: pl.DataFrame, waits: pl.DataFrame, conn_id: str, how: str, share_pct: float, since=None) -> dict:
    """The blocker's statements while it held (from its BEGIN / LOCK TABLES before the waits, or ``since``, to the
    statement that released it after them)."""
    first = waits["start_ts"].min() or waits["end_ts"].min()
    last = waits["end_ts"].max()
    own = everything.filter(pl.col("conn_id") == conn_id).sort("end_ts", "source", "line")
    if own.height == 0:
        return {"conn_id": conn_id, "how": how, "share_pct": share_pct, "statements": [], "where": "",
                "summary": f"process {conn_id} ({how}; none of its statements is in the log)"}
    if since is None:
        before = own.filter(pl.col("end_ts") <= first)
        # back to the statement that opened the hold: the last BEGIN / START TRANSACTION / LOCK TABLE(S) before the waits
        openers = before.filter(pl.col("fingerprint").str.contains(r"^(?:begin|start transaction|lock tables?)\b"))
        since = openers["end_ts"].max() if openers.height else (before["end_ts"].max() if before.height else first)
    after = own.filter(pl.col("end_ts") >= last, pl.col("fingerprint").str.contains(r"^(?:commit|rollback|unlock tables?|end)\b"))
    until = after["end_ts"].min() if after.height else last + timedelta(seconds=1)  # up to the statement that released it
    during = own.filter(pl.col("end_ts") >= since, pl.col("end_ts") <= until)
    rows = [(_time(r["end_ts"]), short_sql(r["sample_sql"])[:200], seconds(r["query_time_s"]) if r["query_time_s"] is not None else None, where(r)) for r in during.head(12).iter_rows(named=True)]
    opener = during.row(0, named=True) if during.height else own.row(0, named=True)
    summary = f"connection {conn_id}, {short_sql(opener['sample_sql'])[:80]} at {where(opener)} ({how})"
    return {"conn_id": conn_id, "how": how, "share_pct": share_pct, "summary": summary, "statements": rows, "where": where(opener)}


def remediation(engine: str | None, table: str | None, blocker: str | None) -> str:
    """Commands to find the blocker while it holds, end it and bound future waits, for ``engine``."""
    name = table or "<table>"
    if engine == "postgresql":
        pid = blocker or "<blocking pid>"
        return "\n".join([
            "While the waits happen, see who blocks whom:",
            "  SELECT pid, pg_blocking_pids(pid) AS blocked_by, state, now() - xact_start AS xact_age, left(query, 80) AS query FROM pg_stat_activity WHERE cardinality(pg_blocking_pids(pid)) > 0;",
            f"  SELECT l.pid, l.mode, l.granted, a.state, now() - a.xact_start AS xact_age FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.relation = '{name}'::regclass;",
            f"End the blocker (its transaction rolls back): SELECT pg_terminate_backend({pid});",
            "Bound the waits and idle transactions:",
            "  SET lock_timeout = '5s';   -- per session, or ALTER ROLE ... SET lock_timeout",
            "  ALTER SYSTEM SET idle_in_transaction_session_timeout = '60s'; SELECT pg_reload_conf();",
            "Then: commit sooner in the blocking job, take LOCK TABLE only for short steps, run DDL with a lock_timeout and retry.",
        ])
    if engine == "tidb":
        conn = blocker or "<connection id>"
        return "\n".join([
            "While the waits happen, see who blocks whom (TiDB v5.1+):",
            "  SELECT * FROM information_schema.DATA_LOCK_WAITS;",
            "  SELECT INSTANCE, ID, START_TIME, SESSION_ID, CURRENT_SQL_DIGEST_TEXT FROM information_schema.CLUSTER_TIDB_TRX ORDER BY START_TIME;",
            f"End the blocker: KILL TIDB {conn};",
            "Bound pessimistic lock waits: SET GLOBAL innodb_lock_wait_timeout = 10;",
        ])
    thread = blocker or "<blocking thread id>"
    row_locks = (
        "  SELECT r.trx_mysql_thread_id AS waiting, b.trx_mysql_thread_id AS blocking, b.trx_started, b.trx_query "
        "FROM information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id "
        "JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id;"
    )
    if engine in ("mysql", "percona"):
        row_locks = "  SELECT * FROM sys.innodb_lock_waits;   -- MySQL 8 (performance_schema.data_lock_waits); 5.7: information_schema.innodb_lock_waits"
    return "\n".join([
        "While the waits happen, see who blocks whom:",
        "  SHOW FULL PROCESSLIST;   -- 'Waiting for table metadata lock' / 'Waiting for table level lock'",
        row_locks,
        f"  SELECT OWNER_THREAD_ID, LOCK_TYPE, LOCK_DURATION, LOCK_STATUS FROM performance_schema.metadata_locks WHERE OBJECT_NAME = '{name}';   -- with performance_schema on",
        f"End the blocker (its transaction rolls back): KILL {thread};",
        "Bound the waits: SET GLOBAL lock_wait_timeout = 60;   -- metadata and table locks, seconds",
        "                 SET GLOBAL innodb_lock_wait_timeout = 10;   -- InnoDB row locks, seconds",
        "Then: replace LOCK TABLES with short transactions, commit sooner in the blocking job, run DDL off-peak.",
    ])


def _measured_by(engine: str | None) -> str:
    """What a wait was read from, in the engine's words."""
    return {"postgresql": "log_lock_waits line", "tidb": "Lock wait time field"}.get(engine or "", "Lock_time")


RULE = Rule(
    id=RULE_ID,
    title="Statements spent most of their time waiting for locks",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)

