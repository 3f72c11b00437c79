"""PostgreSQL lock waits (``log_lock_waits = on``), deadlocks and lock timeouts from the *record frame* the
PostgreSQL log parsers build (see ``pg_messages``, which adds the ``lock_wait`` table to their result).

Not a parser of its own. Sample entries (stderr, prefix ``%m [%p] %q%u@%d ``, deadlock_timeout 100ms)::

    2026-12-02 02:04:31.512 UTC [3417] postgres@shop LOG:  process 3417 still waiting for ShareLock on transaction 735 after 100.118 ms
    2026-12-02 02:04:31.512 UTC [3417] postgres@shop DETAIL:  Process holding the lock: 3411. Wait queue: 3417.
    2026-12-02 02:04:31.512 UTC [3417] postgres@shop CONTEXT:  while updating tuple (0,7) in relation "accounts"
    2026-12-02 02:04:31.512 UTC [3417] postgres@shop STATEMENT:  UPDATE accounts SET balance = balance + 1 WHERE id = 7
    2026-12-02 02:04:32.523 UTC [3417] postgres@shop LOG:  process 3417 acquired ShareLock on transaction 735 after 1111.021 ms
    2026-12-02 02:04:35.101 UTC [3430] postgres@shop ERROR:  deadlock detected
    2026-12-02 02:04:35.101 UTC [3430] postgres@shop DETAIL:  Process 3430 waits for ShareLock on transaction 740; blocked by process 3429.
            Process 3429 waits for ShareLock on transaction 741; blocked by process 3430.
            Process 3430: UPDATE accounts SET balance = 2 WHERE id = 100
            Process 3429: UPDATE accounts SET balance = 1 WHERE id = 200
    ... ERROR:  canceling statement due to lock timeout

``lock_wait`` rows (columns: see ``tables.LOCK_WAIT_SCHEMA``): ``kind`` "waiting" (still waiting: the
wait had lasted ``wait_s`` when logged), "acquired" (the whole wait, ``wait_s``), "deadlock" (the
process was chosen as the victim; its statement failed), "timeout" (lock_timeout cancelled it).
``holders``: the pids holding the lock (DETAIL "Process(es) holding the lock", or "blocked by process"
of the victim's own line in a deadlock), comma-separated. ``relation``: the table name when the
CONTEXT names one. Floods keep their first MAX_ROWS rows.

>>> import polars as pl
>>> records = pl.DataFrame({"line": [7, 11], "ts": [None, None], "pid": ["3417", "3417"], "session": [None, None],
...     "sev": ["LOG", "LOG"], "statement": ["UPDATE t SET a = 1", None], "context": ['while updating tuple (0,7) in relation "t"', None],
...     "detail": ["Process holding the lock: 3411. Wait queue: 3417.", None],
...     "message": ["process 3417 still waiting for ShareLock on transaction 735 after 100.118 ms",
...                 "process 3417 acquired ShareLock on transaction 735 after 1111.021 ms"]})
>>> lock_wait_entries(records).select("kind", "conn_id", "lock_mode", "wait_s", "holders", "relation", "line").rows()
[('waiting', '3417', 'ShareLock', 0.100118, '3411', 't', 7), ('acquired', '3417', 'ShareLock', 1.111021, None, None, 11)]
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.kit.numeric import true_divide

MAX_ROWS = 100_000

WAIT_RE = (
    r"^process (?P<pid>\d+) (?P<verb>still waiting for|acquired|detected deadlock while waiting for) "
    r"(?P<mode>\w+) on (?P<object>.+?) after (?P<ms>[0-9.]+) ms"
)
KIND_OF_VERB = {"still waiting for": "waiting", "acquired": "acquired", "detected deadlock while waiting for": None}
HOLDERS_RE = r"Process(?:es)? holding the lock: (?P<pids>[0-9, ]+)\."
CONTEXT_RELATION_RE = r'in relation "(?P<relation>[^"]+)"'
COLUMNS = ("ts", "kind", "conn_id", "pid", "lock_mode", "lock_object", "wait_s", "holders", "relation", "statement", "detail", "line")


def lock_wait_entries(records: pl.DataFrame, log: pl.Expr | None = None) -> pl.DataFrame:
    """The lock-wait rows of a record frame (columns used: line, ts, pid, session, sev, message, detail,
    context, statement), without ``source``; in file order. ``log``: which log each row is of, when the
    records are of several (the first MAX_ROWS of each are kept)."""
    message = pl.col("message")
    candidates = records.filter(
        (pl.col("sev").is_in(["LOG", "ERROR"]))
        & (message.str.starts_with("process ") | message.str.starts_with("deadlock detected") | message.str.starts_with("canceling statement due to lock timeout"))
    )
    if candidates.is_empty():
        return empty()
    waits = message.str.extract_groups(WAIT_RE)
    frame = candidates.with_columns(waits.alias("wait"), pl.coalesce(pl.col("session"), pl.col("pid")).alias("conn_id"))
    verb = pl.col("wait").struct.field("verb")
    kind = (
        pl.when(message.str.starts_with("deadlock detected")).then(pl.lit("deadlock"))
        .when(message.str.starts_with("canceling statement due to lock timeout")).then(pl.lit("timeout"))
        .otherwise(verb.replace_strict(KIND_OF_VERB, default=None, return_dtype=pl.String))
    )
    frame = frame.with_columns(kind.alias("kind")).filter(pl.col("kind").is_not_null())
    own_blocker = [  # the victim's own line of a deadlock DETAIL names who blocked it
        _blocked_by(detail, pid) for detail, pid in frame.select("detail", "pid").iter_rows()
    ]
    holders = pl.col("detail").str.extract(HOLDERS_RE, 1).str.replace_all(" ", "")
    rows = frame.with_columns(
        pl.col("wait").struct.field("mode").alias("lock_mode"),
        pl.col("wait").struct.field("object").alias("lock_object"),
        true_divide(pl.col("wait").struct.field("ms").cast(pl.Float64, strict=False), pl.lit(1000.0)).alias("wait_s"),  # not ms * (1/1000)
        pl.coalesce(holders, pl.Series(own_blocker, dtype=pl.String)).alias("holders"),
        pl.col("context").str.extract(CONTEXT_RELATION_RE, 1).alias("relation"),
        pl.coalesce(pl.col("wait").struct.field("pid"), pl.col("pid")).alias("pid"),
    )
    rows = rows.select(COLUMNS)
    rows = rows.head(MAX_ROWS) if log is None else rows.filter(pl.int_range(pl.len()).over(log) < MAX_ROWS)
    return rows.cast(SCHEMA_WITHOUT_SOURCE)


def _blocked_by(detail: str | None, pid: str | None) -> str | None:
    """In a deadlock DETAIL, the process that blocked ``pid`` ("Process 3430 waits for ...; blocked by process 3429.")."""
    if not detail or not pid:
        return None
    marker = f"Process {pid} waits for "
    at = detail.find(marker)
    if at < 0:
        return None
    line = detail[at:].split("\n", 1)[0]
    _, found, rest = line.partition("; blocked by process ")
    return (rest.rstrip(".").strip() or None) if found else None


SCHEMA_WITHOUT_SOURCE = {
    "ts": pl.Datetime("us", "UTC"),
    "kind": pl.String,
    "conn_id": pl.String,
    "pid": pl.String,
    "lock_mode": pl.String,
    "lock_object": pl.String,
    "wait_s": pl.Float64,
    "holders": pl.String,
    "relation": pl.String,
    "statement": pl.String,
    "detail": pl.String,
    "line": pl.Int64,
}


def empty() -> pl.DataFrame:
    return pl.DataFrame(schema=SCHEMA_WITHOUT_SOURCE)
