"""Who held a table, from a statement log: the holds of ``lock-wait`` and the row-lock waits MariaDB does not count.

A hold is a stretch of one connection's statements that keeps a table locked: ``LOCK TABLES t ...`` to
``UNLOCK TABLES``, a transaction (``BEGIN``/``START TRANSACTION`` to ``COMMIT``/``ROLLBACK``) that wrote to
``t``, a DDL on ``t``. Read from the fingerprints of the derived statements (what a statement is) and their
``target_tables`` (which table, by its real name: the fingerprint writes ``sbtest1`` as ``sbtest?``), per
connection in end order::

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
from typing import Callable

import polars as pl

from dbdiag.patterns import lazy_compile

HOLD_COVER_PCT = 50.0
ROW_LOCK_SLOWDOWN = 10.0
MIN_BASELINE_RUNS = 3
ROW_LOCK_ENGINES = ("mariadb",)  # MySQL 8.0.28+ counts row-lock waits in Lock_time; Percona logs InnoDB_rec_lock_wait

HOLD_OPENERS = lazy_compile(r"^(?:lock tables?\s+(?P<tables>.+)|begin\b.*|start transaction\b.*)$")
CLOSERS = lazy_compile(r"^(?:unlock tables?|commit\b.*|rollback\b.*|end)$")
# A fingerprint that locks rows: a write, or a locking read (SELECT ... FOR UPDATE / FOR SHARE / LOCK IN SHARE MODE).
ROW_WRITE = r"^(?:update|delete|insert|replace)\b"
LOCKING_READ = r"\b(?:for (?:update|share)|lock in share mode)\b"
WRITE = lazy_compile(rf"^(?:update|delete|insert|replace|select\b.*{LOCKING_READ}|lock table\b)")
DDL = lazy_compile(r"^(?:alter table|optimize table|truncate(?: table)?|rename table|drop table|create (?:unique )?index\b.*\bon)\s+`?(?P<table>[\w.$]+)")


def names(table: str) -> pl.Expr:
    """Statements that name ``table``: in their derived ``target_tables`` (the real names: ``sbtest1``), else
    in their fingerprint (``select ... for update``; a fingerprint writes ``sbtest1`` as ``sbtest?``)."""
    name = re.escape(table.lower())
    targets = pl.col("target_tables")
    in_text = pl.col("fingerprint").fill_null("").str.contains(rf"\b{name}\b")
    return pl.when(targets.is_not_null()).then(targets.str.contains(rf"(?:^|,){name}(?:,|$)")).otherwise(in_text)


def may_hold(table: str) -> pl.Expr:
    """Statements that open, close or make a hold on ``table`` (the Python walk below sees only these)."""
    text = pl.col("fingerprint").fill_null("")
    control = text.str.contains(r"^(?:begin|start transaction|lock tables?|unlock tables?|commit|rollback|end$|alter table|optimize table|truncate|rename table|drop table|create (?:unique )?index)")
    # a plain SELECT neither opens, closes nor makes a hold: only one that locks rows (WRITE) is walked
    writes = text.str.contains(rf"{ROW_WRITE}|^select\b.*{LOCKING_READ}")
    return control | (writes & names(table))


HOLD_COLUMNS = ("conn_id", "start_ts", "end_ts", "query_time_s", "fingerprint", "target_tables", "source", "line")  # what holds() reads


def holds(everything: pl.DataFrame, table: str, waiting_conns: set) -> list[tuple]:
    """(connection, from, to, how) for each hold of ``table`` by a connection that is not one of the waiters',
    in connection order, each at its last statement.

    Per connection in log order: an opener (``BEGIN``, ``START TRANSACTION``, ``LOCK TABLES``) starts a
    stretch that its first closer (``COMMIT``, ``ROLLBACK``, ``UNLOCK TABLES``) ends; the stretch is a hold
    when the opener locked the table or a statement up to the closer wrote it. A DDL on the table is a hold
    of its own. What each statement is (opener, closer, write of the table...) is read once per distinct
    fingerprint and target (``_kinds``); the stretches are found column-wise.
    """
    columns = everything.select(HOLD_COLUMNS).filter(
        pl.col("conn_id").is_not_null(), ~pl.col("conn_id").is_in(list(waiting_conns)), pl.col("end_ts").is_not_null()
    ).sort("conn_id", "end_ts", "source", "line")  # log order within a second: times on whole seconds tie
    # a connection none of whose statements names the table holds nothing on it: only the others are read
    naming = columns.filter(names(table))["conn_id"].unique()
    rows = columns.filter(pl.col("conn_id").is_in(naming.implode())).with_row_index("_pos")
    if rows.height == 0:
        return []
    rows = rows.join(_kinds(rows.select("fingerprint", "target_tables").unique(), table.lower()),
                     on=["fingerprint", "target_tables"], how="left", nulls_equal=True, maintain_order="left")
    rows = rows.with_columns(
        pl.coalesce("start_ts", "end_ts").alias("_begin"), pl.col("_opener").cum_sum().over("conn_id").alias("_stretch"),
    )
    stretch = ["conn_id", "_stretch"]
    after = pl.col("_opener") == 0  # a stretch's statements after its opener (the opener is its first row)
    close_at = pl.when(pl.col("_closer") & after).then(pl.col("_pos")).min().over(stretch)
    opened = rows.filter(pl.col("_stretch") > 0).with_columns(close_at.alias("_close_at")).with_columns(
        (pl.col("_write") & after & (pl.col("_pos") <= pl.col("_close_at"))).any().over(stretch).alias("_wrote"),
        pl.when(pl.col("_pos") == pl.col("_close_at")).then(pl.col("end_ts")).max().over(stretch).alias("_end"),
    )
    stretches = opened.filter((pl.col("_opener") == 1) & pl.col("_close_at").is_not_null() & (pl.col("_mine") | pl.col("_wrote"))).select(
        "conn_id", pl.col("_begin").alias("begin"), pl.col("_lock").alias("lock"), pl.col("_close_at").alias("at"), pl.col("_end").alias("end"),
    )
    lock_how, write_how = f"LOCK TABLES {table} ... UNLOCK TABLES", f"open transaction that wrote to {table}"
    found = pl.concat([
        stretches.select("conn_id", "begin", "end", pl.when(pl.col("lock")).then(pl.lit(lock_how)).otherwise(pl.lit(write_how)).alias("how"), "at"),
        rows.filter(pl.col("_ddl")).select("conn_id", pl.col("_begin").alias("begin"), pl.col("end_ts").alias("end"),
                                           pl.lit(f"DDL on {table}").alias("how"), pl.col("_pos").alias("at")),
    ])
    return [row[:4] for row in found.sort("at").iter_rows()]


def _kinds(texts: pl.DataFrame, name: str) -> pl.DataFrame:
    """For each distinct (fingerprint, target_tables): whether it is a DDL on ``name``, an opener (a
    ``LOCK TABLES``, and of ``name``), a write of ``name``, a closer."""
    kinds = []
    for fingerprint, target_tables in texts.iter_rows():
        text = (fingerprint or "").strip().rstrip(";")
        targets = target_tables.split(",") if target_tables else None  # the real names, when read
        ddl = DDL.match(text)
        opener = HOLD_OPENERS.match(text)
        locked = (opener.group("tables") or "") if opener else ""
        kinds.append({
            "fingerprint": fingerprint, "target_tables": target_tables,
            "_ddl": bool(ddl) and (name in targets if targets else ddl.group("table").split(".")[-1].strip("`\"") == name),
            "_opener": bool(opener), "_lock": bool(locked),
            "_mine": bool(opener) and (name in targets if targets and locked else name in re.findall(r"[\w$]+", locked)),
            "_write": not opener and bool(WRITE.match(text)) and bool(name in targets if targets else re.search(rf"\b{re.escape(name)}\b", text)),
            "_closer": not opener and bool(CLOSERS.match(text)),
        })
    schema = {"fingerprint": pl.String, "target_tables": pl.String, **{k: pl.Boolean for k in ("_ddl", "_opener", "_lock", "_mine", "_write", "_closer")}}
    return pl.DataFrame(kinds, schema=schema).with_columns(pl.col("_opener").cast(pl.Int64))


def inferred_row_lock_waits(everything: pl.DataFrame, table_of: Callable[[str], str | None], already: pl.Series) -> pl.DataFrame:
    """The statements of ROW_LOCK_ENGINES that most likely waited for InnoDB row locks (see the module doc), with
    ``lock_time_s`` replaced by the inferred wait and ``table``. ``table_of``: fp_id -> table, called once for
    each fingerprint of a candidate write only; ``already``: the rows (of ``everything``) counted as waiting
    from their own lock time, left out here."""
    writes = pl.col("fingerprint").fill_null("").str.contains(f"{ROW_WRITE}|{LOCKING_READ}")
    # the columns the walk reads, and each run's row: only the runs found are taken whole (a copy of every
    # column of every write would cost more than the rest of the rule)
    candidates = everything.lazy().with_columns(already.alias("_counted")).with_row_index("_row").filter(
        pl.col("engine").is_in(ROW_LOCK_ENGINES), writes, pl.col("query_time_s").is_not_null(), pl.col("end_ts").is_not_null(), ~pl.col("_counted"),
    ).select("_row", "fp_id", "conn_id", "start_ts", "end_ts", "query_time_s").collect()
    none = everything.head(0).with_columns(pl.lit(None, dtype=pl.String).alias("table"))
    if candidates.height == 0:
        return none
    coarse = everything["end_ts"].drop_nulls().dt.microsecond().eq(0).all()
    margin = timedelta(seconds=1 if coarse else 0)
    found = []
    spans_of: dict[str, list[tuple]] = {}  # per table: the fingerprints writing one table share its holds
    for (fp_id,), runs in candidates.group_by("fp_id", maintain_order=True):
        table = table_of(fp_id)
        if table is None:
            continue
        if table not in spans_of:
            held = holds(everything.lazy().filter(may_hold(table)).select(HOLD_COLUMNS).collect(), table, set())
            spans_of[table] = [(conn, begin - margin, end + margin) for conn, begin, end, how in held if how.startswith("open transaction")]
        spans = spans_of[table]
        if not spans:  # no other connection's transaction held the table: no run can have waited inside one
            continue
        inside = _covered(runs, spans) >= HOLD_COVER_PCT / 100.0
        baseline = runs.filter(~inside)["query_time_s"]
        if baseline.len() < MIN_BASELINE_RUNS or not inside.any():
            continue
        median_s = float(baseline.median())
        slow = runs.filter(inside & (pl.col("query_time_s") >= ROW_LOCK_SLOWDOWN * median_s))
        found.append(everything[slow["_row"]].with_columns((pl.col("query_time_s") - median_s).alias("lock_time_s"), pl.lit(table).alias("table")))
    if not found:
        return none
    return pl.concat(found)


def _covered(runs: pl.DataFrame, spans: list[tuple]) -> pl.Series:
    """Per run, the largest share of its time one hold of another connection covers (0 when none does).

    An interval join (``join_where``): a sysbench log has tens of thousands of runs and of transaction
    holds, and each run overlaps only the few holds open while it ran."""
    run = runs.select(
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_run"), "conn_id", "end_ts",
        pl.coalesce("start_ts", pl.col("end_ts") - pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round().cast(pl.Int64))).alias("_start"),
    ).with_columns(pl.max_horizontal((pl.col("end_ts") - pl.col("_start")).dt.total_microseconds() / 1e6, pl.lit(1e-9)).alias("_length_s"))
    held = pl.DataFrame(spans, schema={"_holder": pl.String, "_begin": run.schema["end_ts"], "_until": run.schema["end_ts"]}, orient="row")
    overlaps = run.join_where(held, pl.col("_begin") < pl.col("end_ts"), pl.col("_until") > pl.col("_start")).filter(
        pl.col("_holder").ne_missing(pl.col("conn_id"))
    ).select(
        "_run",
        ((pl.min_horizontal("end_ts", "_until") - pl.max_horizontal("_start", "_begin")).dt.total_microseconds() / 1e6 / pl.col("_length_s")).alias("_share"),
    ).group_by("_run").agg(pl.col("_share").max())
    share = run.select("_run").join(overlaps, on="_run", how="left", maintain_order="left")["_share"]
    return share.fill_null(0.0).clip(lower_bound=0.0)
