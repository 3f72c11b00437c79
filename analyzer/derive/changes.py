"""Changes seen in the capture: what happened to tables, statistics and settings, and when.

A plan that changes needs a cause, and the capture often holds it: the DDL, the ANALYZE, the bulk
load or the restart that came just before. This step gathers them into the derived table
``change`` (schema ``tables.CHANGE_SCHEMA``), one row per change, in time order.

Inputs and what they give (sample input -> ``kind`` / ``action``):

- ``statement`` rows (every engine), read by their first words::

      ALTER TABLE orders ALTER INDEX idx_customer_status IGNORED   -> ddl / index-ignored (MariaDB 10.6+)
      ALTER TABLE t ALTER INDEX i INVISIBLE                       -> ddl / index-invisible (MySQL 8, TiDB)
      CREATE INDEX CONCURRENTLY i ON t (a); DROP INDEX i           -> ddl / create-index, drop-index
      ALTER TABLE t ADD INDEX i (a) / DROP KEY i / ADD COLUMN ...  -> ddl / create-index, drop-index, alter-table
      CREATE / DROP / TRUNCATE / RENAME TABLE                      -> ddl / create-table ...
      ANALYZE [TABLE] t; VACUUM ANALYZE t; OPTIMIZE TABLE t        -> statistics / analyze
      LOCK STATS t / UNLOCK STATS t (TiDB)                         -> statistics / lock-stats, unlock-stats
      INSERT/UPDATE/DELETE/REPLACE/LOAD DATA/COPY ... FROM         -> bulk-change / insert ... when at least
          BULK_MIN_ROWS = 1,000 rows were affected, or, where the log gives no row count
          (PostgreSQL), a set-based write (INSERT ... SELECT, COPY FROM, LOAD DATA, UPDATE, DELETE)
          that ran BULK_MIN_TIME_S = 0.5 s or longer
      SET GLOBAL / SET PERSIST / SET @@global. / ALTER SYSTEM      -> config / set-global, alter-system
      SELECT pg_reload_conf()                                      -> config / reload

  MariaDB's ``ANALYZE SELECT ...`` / ``ANALYZE FORMAT=JSON ...`` run a query and are no statistics
  collection: left out. Internal statements count: TiDB's auto analyze is one, ``auto-analyze``.
- ``event`` rows: start, shutdown, crash, restart, recovery, host-restart (sysstat LINUX-RESTART) -> restart /
  <the event's kind>;
  oom-kill -> oom-kill / oom-kill; PostgreSQL's autovacuum analyze -> statistics / auto-analyze (its table).

Columns: ``ts`` (when the change took effect: the statement's end, the event's time), ``kind``,
``action``, ``table`` (the table's name without schema or quotes; null when the statement names
none, such as a PostgreSQL ``DROP INDEX i`` whose table the capture does not show), ``object`` (the
index, the setting, the process), ``rows`` (rows affected when known), ``engine``, ``statement``
(the SQL with literals replaced unless literals are shown; the log line for events), ``conn_id``
(thread id / backend pid / connection id), ``source`` and ``line`` (the statement's or event's
``file:line``). A ``DROP INDEX i`` without a table takes it from an earlier ``CREATE INDEX i`` in
the capture, else from a plan node that used index ``i``.
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import sqlnorm_redact
from dbdiag import tables as t
from dbdiag.patterns import lazy_compile

BULK_MIN_ROWS = 1_000
BULK_MIN_TIME_S = 0.5
RESTART_EVENTS = ("start", "shutdown", "crash", "restart", "recovery", "host-restart")

_NAME = r"(?:`[^`]+`|\"[^\"]+\"|\[[^\]]+\]|[\w$]+)"
_QUALIFIED = rf"(?P<table>{_NAME}(?:\s*\.\s*{_NAME}){{0,2}})"
_INDEX = rf"(?P<object>{_NAME})"
# The first words of a statement that can be a change: searched on the head of each text only.
_CANDIDATE = lazy_compile(
    r"(?is)^\s*(?:/\*.*?\*/\s*)*(?:alter|create|drop|truncate|rename|analyze|vacuum|optimize|lock\s+stats|unlock\s+stats"
    r"|set\s+(?:global|persist|@@global)|insert|update|delete|replace|load\s+data|copy|select\s+pg_reload_conf)\b"
)
_WRITE = lazy_compile(r"(?is)^\s*(?:/\*.*?\*/\s*)*(?:insert|update|delete|replace|load\s+data|copy)\b")
_HEAD_CHARS = 400
_ANALYZE_QUERY = lazy_compile(r"(?is)^\s*analyze\s+(?:format\s*=\s*\w+\s+)?(?:select|with|update|delete|insert|replace|\(\s*select)\b")

# (kind, action, pattern); the first that matches wins. Patterns run on the statement's head.
_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = tuple(
    (kind, action, lazy_compile(pattern, re.IGNORECASE | re.DOTALL))
    for kind, action, pattern in (
        ("ddl", "index-ignored", rf"^alter\s+(?:online\s+|ignore\s+)?table\s+(?:if\s+exists\s+)?{_QUALIFIED}.*?\balter\s+(?:index|key)\s+{_INDEX}\s+ignored\b"),
        ("ddl", "index-not-ignored", rf"^alter\s+(?:online\s+|ignore\s+)?table\s+(?:if\s+exists\s+)?{_QUALIFIED}.*?\balter\s+(?:index|key)\s+{_INDEX}\s+not\s+ignored\b"),
        ("ddl", "index-invisible", rf"^alter\s+table\s+{_QUALIFIED}.*?\balter\s+index\s+{_INDEX}\s+invisible\b"),
        ("ddl", "index-visible", rf"^alter\s+table\s+{_QUALIFIED}.*?\balter\s+index\s+{_INDEX}\s+visible\b"),
        ("ddl", "drop-index", rf"^alter\s+(?:online\s+|ignore\s+)?table\s+(?:if\s+exists\s+)?{_QUALIFIED}.*?\bdrop\s+(?:index|key)\s+(?:if\s+exists\s+)?{_INDEX}"),
        ("ddl", "create-index", rf"^alter\s+(?:online\s+|ignore\s+)?table\s+(?:if\s+exists\s+)?{_QUALIFIED}.*?\badd\s+(?:unique\s+|fulltext\s+|spatial\s+)?(?:index|key)\s+(?:if\s+not\s+exists\s+)?{_INDEX}"),
        ("ddl", "create-index", rf"^create\s+(?:unique\s+|fulltext\s+|spatial\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?{_INDEX}\s+(?:using\s+\w+\s+)?on\s+(?:only\s+)?{_QUALIFIED}"),
        ("ddl", "drop-index", rf"^drop\s+index\s+(?:concurrently\s+)?(?:if\s+exists\s+)?{_INDEX}(?:\s+on\s+{_QUALIFIED})?"),
        ("ddl", "alter-index", rf"^alter\s+index\s+(?:if\s+exists\s+)?{_INDEX}"),
        ("ddl", "alter-table", rf"^alter\s+(?:online\s+|ignore\s+)?table\s+(?:if\s+exists\s+)?(?:only\s+)?{_QUALIFIED}"),
        ("ddl", "create-table", rf"^create\s+(?:or\s+replace\s+)?(?:temporary\s+|unlogged\s+)?table\s+(?:if\s+not\s+exists\s+)?{_QUALIFIED}"),
        ("ddl", "drop-table", rf"^drop\s+(?:temporary\s+)?table\s+(?:if\s+exists\s+)?{_QUALIFIED}"),
        ("ddl", "truncate", rf"^truncate\s+(?:table\s+)?(?:only\s+)?{_QUALIFIED}"),
        ("ddl", "rename-table", rf"^rename\s+table\s+{_QUALIFIED}"),
        ("statistics", "analyze", rf"^analyze\s+(?:no_write_to_binlog\s+|local\s+|verbose\s+|\([^)]*\)\s*)*(?:table\s+|tables\s+)?{_QUALIFIED}"),
        ("statistics", "analyze", r"^analyze\s*;?\s*$"),
        ("statistics", "analyze", rf"^vacuum\s+(?:\([^)]*\banalyze\b[^)]*\)|(?:full\s+|freeze\s+|verbose\s+)*analyze)\s+(?:verbose\s+)?{_QUALIFIED}"),
        ("statistics", "optimize", rf"^optimize\s+(?:no_write_to_binlog\s+|local\s+)?table\s+{_QUALIFIED}"),
        ("statistics", "lock-stats", rf"^lock\s+stats\s+{_QUALIFIED}"),
        ("statistics", "unlock-stats", rf"^unlock\s+stats\s+{_QUALIFIED}"),
        ("config", "set-global", r"^set\s+(?:global\s+|persist\s+|persist_only\s+|@@global\.)(?P<object>[\w.@]+)"),
        ("config", "alter-system", r"^alter\s+system\s+(?:set|reset)\s+(?P<object>[\w.]+)"),
        ("config", "reload", r"^select\s+pg_reload_conf\s*\("),
        ("bulk-change", "insert", rf"^(?:insert|replace)\s+(?:low_priority\s+|delayed\s+|high_priority\s+|ignore\s+)*(?:into\s+)?{_QUALIFIED}"),
        ("bulk-change", "update", rf"^update\s+(?:low_priority\s+|ignore\s+|only\s+)*{_QUALIFIED}"),
        ("bulk-change", "delete", rf"^delete\s+(?:low_priority\s+|quick\s+|ignore\s+)*from\s+(?:only\s+)?{_QUALIFIED}"),
        ("bulk-change", "load-data", rf"^load\s+data\s+.*?\binto\s+table\s+{_QUALIFIED}"),
        ("bulk-change", "copy", rf"^copy\s+{_QUALIFIED}(?:\s*\([^)]*\))?\s+from\b"),
    )
)
# Set-based writes: bulk even when the log gives no row count, if they ran long.
_SET_BASED = lazy_compile(r"(?is)^(?:insert|replace)\b.*?\bselect\b|^(?:update|delete|load\s+data|copy)\b")

def changes(tables: dict[str, pl.DataFrame], show_literals: bool = False) -> pl.DataFrame | None:
    """The ``change`` table, oldest first; None when the capture has neither statements nor events."""
    statements, events = tables.get(t.STATEMENT), tables.get(t.EVENT)
    if (statements is None or not statements.height) and (events is None or not events.height):
        return None
    parts = []
    if statements is not None and statements.height:
        parts.append(_statement_changes(statements, show_literals))
    if events is not None and events.height:
        parts.append(_event_changes(events))
    frame = pl.concat([part for part in parts if part.height] or [t.empty(t.CHANGE)], how="vertical")
    frame = _tables_of_dropped_indexes(frame, tables.get(t.PLAN_NODE))
    # within a second, a log's own order: a log stamped in whole seconds of the start (MariaDB) gives ends
    # (second + Query_time) that do not order the statements of one second; the log wrote them as they ended
    return frame.sort(pl.col("ts").dt.truncate("1s"), "source", "line", nulls_last=True)


def _statement_changes(statements: pl.DataFrame, show_literals: bool) -> pl.DataFrame:
    head = pl.col("sql").str.slice(0, _HEAD_CHARS)
    # Writes are most of an OLTP log: only the bulk ones reach the per-statement reading below.
    is_write = head.str.contains(_WRITE.pattern)
    bulk = pl.when(pl.col("rows_affected").is_not_null()).then(pl.col("rows_affected") >= BULK_MIN_ROWS).otherwise(
        pl.col("query_time_s").fill_null(0.0) >= BULK_MIN_TIME_S
    )
    candidates = statements.filter((head.str.contains(_CANDIDATE.pattern) & (~is_write | bulk)).fill_null(False))
    if not candidates.height:
        return t.empty(t.CHANGE)
    rows = []
    columns = ("engine", "end_ts", "start_ts", "query_time_s", "rows_affected", "conn_id", "is_internal", "sql", "source", "line")
    for row in candidates.select(columns).iter_rows(named=True):
        found = classify(row["sql"] or "")
        if found is None or not _is_change(found, row):
            continue
        kind, action, table, obj = found
        if action == "analyze" and row["is_internal"]:
            action = "auto-analyze"  # the server's own job (TiDB's auto analyze is logged as an internal statement)
        rows.append({
            "ts": row["end_ts"] or row["start_ts"], "kind": kind, "action": action, "table": table, "object": obj,
            "rows": row["rows_affected"], "engine": row["engine"], "statement": row["sql"], "conn_id": row["conn_id"],
            "source": row["source"], "line": row["line"],
        })
    frame = pl.DataFrame(rows, schema=t.CHANGE_SCHEMA) if rows else t.empty(t.CHANGE)
    if show_literals or not frame.height:
        return frame
    dialects = frame.select(
        pl.when(pl.col("engine") == "postgresql").then(pl.lit("postgresql")).otherwise(pl.lit("mysql")).alias("dialect")
    )["dialect"]
    redacted = [
        sqlnorm_redact.redact_literals(text, dialect) if text is not None else None
        for text, dialect in zip(frame["statement"].to_list(), dialects.to_list())
    ]
    return frame.with_columns(pl.Series("statement", redacted, dtype=pl.String))


def classify(sql: str) -> tuple[str, str, str | None, str | None] | None:
    """(kind, action, table, object) of a statement that changes something, else None.

    >>> classify("ALTER TABLE `shop`.`orders` ALTER INDEX idx_a IGNORED")
    ('ddl', 'index-ignored', 'orders', 'idx_a')
    >>> classify("ANALYZE FORMAT=JSON SELECT * FROM t") is None, classify("analyze table t1")
    (True, ('statistics', 'analyze', 't1', None))
    >>> classify("DROP INDEX CONCURRENTLY IF EXISTS accounts_email_idx")
    ('ddl', 'drop-index', None, 'accounts_email_idx')
    """
    text = re.sub(r"(?s)^\s*(?:/\*.*?\*/\s*)*", "", sql[:_HEAD_CHARS])
    if _ANALYZE_QUERY.match(text):
        return None
    for kind, action, pattern in _PATTERNS:
        match = pattern.match(text)
        if match is None:
            continue
        groups = match.groupdict()
        return kind, action, _bare(groups.get("table")), _bare(groups.get("object"))
    return None


def _bare(name: str | None) -> str | None:
    """The last part of a (schema-)qualified name, without quotes: ```shop`.`orders``` -> ``orders``."""
    if not name:
        return None
    last = re.split(r"\s*\.\s*(?=(?:[^`\"]*[`\"][^`\"]*[`\"])*[^`\"]*$)", name)[-1]
    return last.strip("`\"[]") or None


def _is_change(found: tuple[str, str, str | None, str | None], row: dict) -> bool:
    kind = found[0]
    if kind != "bulk-change":
        return True
    if row["rows_affected"] is not None:
        return row["rows_affected"] >= BULK_MIN_ROWS
    return bool(_SET_BASED.match((row["sql"] or "").lstrip())) and (row["query_time_s"] or 0.0) >= BULK_MIN_TIME_S


def _event_changes(events: pl.DataFrame) -> pl.DataFrame:
    # autovacuum's analyze of the system catalogs is no change of the data a plan reads
    catalog = pl.col("message").str.contains(r'of table "[^"]*\.(?:pg_catalog|pg_toast|information_schema)\.').fill_null(False)
    wanted = events.filter(
        pl.col("kind").is_in([*RESTART_EVENTS, "oom-kill"]) | ((pl.col("kind") == "auto-analyze") & ~catalog)
    )
    kind = (
        pl.when(pl.col("kind") == "oom-kill").then(pl.lit("oom-kill"))
        .when(pl.col("kind") == "auto-analyze").then(pl.lit("statistics"))
        .otherwise(pl.lit("restart"))
    )
    # PostgreSQL names "db.schema.table": the table, as the statements name it
    analyzed = pl.col("message").str.extract(r'automatic analyze of table "(?:[^"]*\.)?([^".]+)"', 1)
    return wanted.select(
        "ts",
        kind.alias("kind"),
        pl.col("kind").alias("action"),
        pl.when(pl.col("kind") == "auto-analyze").then(analyzed).otherwise(pl.lit(None, dtype=pl.String)).alias("table"),
        pl.col("process").alias("object"),
        pl.lit(None, dtype=pl.Int64).alias("rows"),
        pl.col("component").alias("engine"),
        pl.col("message").alias("statement"),
        pl.col("pid").cast(pl.String).alias("conn_id"),
        "source",
        "line",
    ).cast(t.CHANGE_SCHEMA)


def _tables_of_dropped_indexes(frame: pl.DataFrame, plan_nodes: pl.DataFrame | None) -> pl.DataFrame:
    """A PostgreSQL ``DROP INDEX i`` / ``ALTER INDEX i`` names no table: the one of ``CREATE INDEX i`` or of a plan using ``i``."""
    missing = (pl.col("table").is_null()) & pl.col("action").is_in(["drop-index", "alter-index"])
    if not frame.select(missing.any()).item():
        return frame
    known: dict[str, str] = {}
    if plan_nodes is not None and plan_nodes.height:
        used = plan_nodes.filter(pl.col("index_name").is_not_null() & pl.col("relation").is_not_null())
        for index, relation in used.select("index_name", "relation").unique(maintain_order=True).iter_rows():
            known.setdefault(index.lower(), relation)
    created = frame.filter(pl.col("action") == "create-index", pl.col("table").is_not_null())
    for index, table in created.select("object", "table").iter_rows():
        known[index.lower()] = table
    return frame.with_columns(
        pl.when(missing)
        .then(pl.col("object").str.to_lowercase().replace_strict(known, default=None, return_dtype=pl.String))
        .otherwise(pl.col("table"))
        .alias("table")
    )
