"""Who held a table, from a statement log: the holds of ``lock-wait`` and the row-lock waits MariaDB does not count.

A hold is a stretch of one connection's statements that keeps a table locked: ``LOCK TABLES t ...`` to
``UNLOCK TABLES``, a transaction (``BEGIN``/``START TRANSACTION`` to ``COMMIT``/``ROLLBACK``) that wrote to
``t``, a DDL on ``t``. Read from the fingerprints of the derived statements, per connection in end order::

    thread 6:  lock tables accounts write | do sleep(?) | unlock tables          -> LOCK TABLES hold
    thread 11: start transaction | update accounts set ... | do sleep(?) | commit -> transaction hold

MariaDB's slow-log ``Lock_time`` counts table and metadata locks, not InnoDB row locks: a point UPDATE
that waited 1 s for a row shows Lock_time 0.001. :func:`inferred_row_lock_waits` finds such statements:
a write (or locking read) of a table that ran inside another connection's transaction hold on it for at
least HOLD_COVER_PCT = 50% of its time, and took at least ROW_LOCK_SLOWDOWN = 10 times the median of
the same fingerprint's runs outside any hold (at least MIN_BASELINE_RUNS = 3 of them); its inferred wait
is its query time minus that median.
"""

from __future__ import annotations

import re
from datetime import timedelta

import polars as pl

from dbdiag.patterns import lazy_compile

HOLD_COVER_PCT = 50.0
ROW_LOCK_SLOWDOWN = 10.0
MIN_BASELINE_RUNS = 3
ROW_LOCK_ENGINES = ("mariadb",)  # MySQL 8.0.28+ counts row-lock waits in Lock_time; Percona logs InnoDB_rec_lock_wait

HOLD_OPENERS = lazy_compile(r"^(?:lock tables?\s+(?P<tables>.+)|begin\b.*|start transaction\b.*)$")
CLOSERS = lazy_compile(r"^(?:unlock tables?|commit\b.*|rollback\b.*|end)$")
WRITE = lazy_compile(r"^(?:update|delete|insert|replace|select\b.*\bfor (?:update|share)\b|lock table\b)")
DDL = lazy_compile(r"^(?:alter table|optimize table|truncate(?: table)?|rename table|drop table|create (?:unique )?index\b.*\bon)\s+`?(?P<table>[\w.$]+)")


def may_hold(table: str) -> pl.Expr:
    """Statements that open, close or make a hold on ``table`` (the Python walk below sees only these)."""
    text = pl.col("fingerprint").fill_null("")
    control = text.str.contains(r"^(?:begin|start transaction|lock tables?|unlock tables?|commit|rollback|end$|alter table|optimize table|truncate|rename table|drop table|create (?:unique )?index)")
    # a plain SELECT neither opens, closes nor makes a hold: only one that locks rows (WRITE) is walked
    writes = text.str.contains(r"^(?:update|delete|insert|replace)\b|^select\b.*\bfor (?:update|share)\b")
    return control | (writes & text.str.contains(rf"\b{re.escape(table.lower())}\b"))


def holds(everything: pl.DataFrame, table: str, waiting_conns: set) -> list[tuple]:
    """(connection, from, to, how) for each hold of ``table`` by a connection that is not one of the waiters'."""
    columns = everything.select("conn_id", "start_ts", "end_ts", "query_time_s", "fingerprint", "source", "line").filter(
        pl.col("conn_id").is_not_null(), ~pl.col("conn_id").is_in(list(waiting_conns)), pl.col("end_ts").is_not_null()
    ).sort("conn_id", "end_ts", "source", "line")  # log order within a second: times on whole seconds tie
    name = table.lower()
    # a connection none of whose statements names the table holds nothing on it: only the others are walked
    naming = columns.filter(pl.col("fingerprint").fill_null("").str.contains(name, literal=True))["conn_id"].unique()
    columns = columns.filter(pl.col("conn_id").is_in(naming.implode()))
    found = []
    for (conn_id,), group in columns.group_by("conn_id", maintain_order=True):
        opened = None
        for row in group.iter_rows(named=True):
            text = (row["fingerprint"] or "").strip().rstrip(";")
            begin = row["start_ts"] or row["end_ts"]
            ddl = DDL.match(text)
            if ddl and ddl.group("table").split(".")[-1].strip("`\"") == name:
                found.append((conn_id, begin, row["end_ts"], f"DDL on {table}"))
            opener = HOLD_OPENERS.match(text)
            if opener:
                locked = opener.group("tables") or ""
                opened = (begin, "LOCK TABLES" if locked else "transaction", name in re.findall(r"[\w$]+", locked), row["end_ts"])
                continue
            if opened and WRITE.match(text) and re.search(rf"\b{re.escape(name)}\b", text):
                opened = (opened[0], opened[1], True, opened[3])
            if opened and CLOSERS.match(text):
                if opened[2]:
                    how = f"LOCK TABLES {table} ... UNLOCK TABLES" if opened[1] == "LOCK TABLES" else f"open transaction that wrote to {table}"
                    found.append((conn_id, opened[0], row["end_ts"], how))
                opened = None
    return found


def inferred_row_lock_waits(everything: pl.DataFrame, table_of: dict[str, str | None], already: pl.Series) -> pl.DataFrame:
    """The statements of ROW_LOCK_ENGINES that most likely waited for InnoDB row locks (see the module doc), with
    ``lock_time_s`` replaced by the inferred wait and ``table``. ``table_of``: fp_id -> table; ``already``: the
    rows (of ``everything``) counted as waiting from their own lock time, left out here."""
    writes = pl.col("fingerprint").fill_null("").str.contains(r"^(?:update|delete|insert|replace)\b|\bfor (?:update|share)\b")
    candidates = everything.with_columns(already.alias("_counted")).filter(
        pl.col("engine").is_in(ROW_LOCK_ENGINES), writes, pl.col("query_time_s").is_not_null(), pl.col("end_ts").is_not_null(), ~pl.col("_counted"),
    ).drop("_counted")
    if candidates.height == 0:
        return candidates.with_columns(pl.lit(None, dtype=pl.String).alias("table"))
    coarse = everything["end_ts"].drop_nulls().dt.microsecond().eq(0).all()
    margin = timedelta(seconds=1 if coarse else 0)
    found = []
    spans_of: dict[str, list[tuple]] = {}  # per table: the fingerprints writing one table share its holds
    for (fp_id,), runs in candidates.group_by("fp_id", maintain_order=True):
        table = table_of.get(fp_id)
        if table is None:
            continue
        if table not in spans_of:
            held = holds(everything.filter(may_hold(table)), table, set())
            spans_of[table] = [(conn, begin - margin, end + margin) for conn, begin, end, how in held if how.startswith("open transaction")]
        spans = spans_of[table]
        if not spans:  # no other connection's transaction held the table: no run can have waited inside one
            continue
        cover = [_covered(row, spans) for row in runs.select("conn_id", "start_ts", "end_ts", "query_time_s").iter_rows(named=True)]
        inside = pl.Series(cover) >= HOLD_COVER_PCT / 100.0
        baseline = runs.filter(~inside)["query_time_s"]
        if baseline.len() < MIN_BASELINE_RUNS or not inside.any():
            continue
        median_s = float(baseline.median())
        slow = runs.filter(inside & (pl.col("query_time_s") >= ROW_LOCK_SLOWDOWN * median_s))
        found.append(slow.with_columns((pl.col("query_time_s") - median_s).alias("lock_time_s"), pl.lit(table).alias("table")))
    if not found:
        return candidates.head(0).with_columns(pl.lit(None, dtype=pl.String).alias("table"))
    return pl.concat(found)


def _covered(row: dict, spans: list[tuple]) -> float:
    """The largest share of the statement's time one hold of another connection covers."""
    end = row["end_ts"]
    start = row["start_ts"] or end - timedelta(seconds=row["query_time_s"])
    length = max((end - start).total_seconds(), 1e-9)
    best = 0.0
    for conn, begin, until in spans:
        if conn != row["conn_id"]:
            best = max(best, max(0.0, (min(end, until) - max(start, begin)).total_seconds()) / length)
    return best
