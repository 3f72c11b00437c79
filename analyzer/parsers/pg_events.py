"""PostgreSQL server events (start, shutdown, backend killed, crash recovery, PANIC, out of memory,
too many clients) from the *record frame* the PostgreSQL log parsers build (see ``pg_messages``).

Not a parser of its own: PostgreSQL logs are read once, by ``pg_stderr`` / ``pg_csvlog`` /
``pg_jsonlog``, which call ``postgres_events(records, source)`` and add its ``event`` table to their
result. Sample entries (stderr, prefix ``%m [%p] ``)::

    2026-11-29 22:54:11.326 UTC [8983] LOG:  database system is ready to accept connections
    2026-11-29 22:54:12.751 UTC [8983] LOG:  server process (PID 8997) was terminated by signal 9: Killed
    2026-11-29 22:54:12.773 UTC [9011] LOG:  database system was interrupted; last known up at 2026-11-29 22:54:11 UTC
    2026-11-29 22:54:12.809 UTC [9011] LOG:  database system was not properly shut down; automatic recovery in progress
    2026-11-29 22:54:16.804 UTC [9100] postgres@postgres FATAL:  sorry, too many clients already
    2026-11-29 22:54:19.730 UTC [8983] LOG:  received fast shutdown request
    2026-11-29 22:54:19.884 UTC [8983] LOG:  database system is shut down

``event`` rows (component and process ``postgres``; ``pid`` the pid of the entry, except for a killed
process: its own ``(PID n)``; ``message`` ``SEVERITY:  message``):

- ``start``: ``database system is ready to accept [read-only] connections``.
- ``shutdown``: ``received smart|fast|immediate shutdown request``, ``database system is shut down``
  (one row per stop: the second right after the first is dropped).
- ``crash``: ``<process> (PID n) was terminated by signal|exception`` and ``exited with exit code``
  other than 0 and 1 (the postmaster then restarts every backend: the OOM killer's usual mark).
- ``recovery``: ``database system was interrupted`` / ``was not properly shut down`` (one row).
- ``fatal``: PANIC entries. ``error``: ``out of memory``, ``could not fork``, ``sorry, too many
  clients already``. ``auto-analyze``: ``automatic analyze of table "db.schema.table"`` (with
  ``log_autovacuum_min_duration``). Floods keep their first 10,000 rows (note).

>>> import polars as pl
>>> records = pl.DataFrame({"line": [4, 5], "ts": [None, None], "pid": ["8983", "8983"], "sev": ["LOG", "LOG"],
...     "message": ["database system is ready to accept connections",
...                 "server process (PID 8997) was terminated by signal 9: Killed"]})
>>> events, notes = postgres_events(records, "postgresql.log")
>>> events.select("kind", "pid", "line").rows()
[('start', 8983, 4), ('crash', 8997, 5)]
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers import log_events as E

RULES = (
    E.Rule("start", r"^LOG:  database system is ready to accept (?:read[- ]only )?connections"),
    E.Rule("shutdown", r"^LOG:  received (?:smart|fast|immediate) shutdown request", repeat_of="shutdown"),
    E.Rule("shutdown", r"^LOG:  database system is shut down", repeat_of="shutdown"),
    E.Rule("crash", r"^LOG:  .*?\(PID (?P<pid>\d+)\) (?:was terminated by (?:signal|exception)|exited with exit code (?:[2-9]|\d\d))"),
    E.Rule("recovery", r"^LOG:  database system was (?:interrupted|not properly shut down)", repeat_of="recovery"),
    E.Rule("fatal", r"^PANIC:  "),
    E.Rule("error", r"^(?:ERROR|FATAL|LOG):  (?:out of memory|could not fork|sorry, too many clients already)"),
    # statistics taken by autovacuum: a cause a plan change can be traced to (derive/changes.py)
    E.Rule("auto-analyze", r'^LOG:  automatic analyze of table "'),
)


def postgres_events(records: pl.DataFrame, source: str) -> tuple[pl.DataFrame, list[str]]:
    """The ``event`` table of one PostgreSQL log and its notes (capped kinds), from its record frame
    (columns used: ``line`` 1-based, ``ts``, ``pid``, ``sev``, ``message``; file order)."""
    return event_table(matched_lines(records), source)


def matched_lines(records: pl.DataFrame) -> pl.DataFrame:
    """The entries of a record frame that are events, with their kind (``idx``: 0-based line)."""
    # most entries of a big log are statement durations: the cheap prefix test drops them first
    candidates = records.filter(
        pl.col("sev").is_in(["LOG", "ERROR", "FATAL", "PANIC"]) & ~pl.col("message").str.starts_with("duration: ")
    )
    lines = candidates.select(
        (pl.col("line").cast(pl.Int64) - 1).alias("idx"),
        pl.col("ts"),
        pl.col("pid").cast(pl.String).alias("entry_pid"),
        (pl.col("sev") + ":  " + pl.col("message").str.slice(0, E.MESSAGE_CHARS)).alias("text"),
    ).filter(pl.col("text").is_not_null())
    return E.match_rules(lines, RULES, "text")


def event_table(rows: pl.DataFrame, source: str) -> tuple[pl.DataFrame, list[str]]:
    """The ``event`` table and notes of the ``matched_lines`` of one log."""
    if rows.is_empty():  # the usual case for a piece of a big log: nothing else to build
        return T.empty(T.EVENT), []
    rows = rows.with_columns(
        pl.coalesce(pl.col("pid"), pl.col("entry_pid")).alias("pid"),
        pl.lit("postgres").alias("process"),
        pl.lit("postgres").alias("component"),
        pl.lit(None, pl.String).alias("host"),
        pl.col("text").str.extract(r"^([^\n]*)", 1).alias("message"),
    )
    rows, notes = E.cap_kinds(E.drop_repeats(rows))
    return E.event_frame(rows, source), notes
