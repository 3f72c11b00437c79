"""``target_tables``: the tables a statement writes, locks or alters, by their real names, per statement.

The fingerprint writes digits in names as ``?`` (``update sbtest? set ...``, as pt-query-digest does) and
the SQL sample is one per fingerprint, so neither tells ``sbtest1`` from ``sbtest2``; a rule that asks
"which connection held this table" needs the name each statement used. Read from the statement's own
SQL (before its literals are replaced): the table after ``UPDATE``, ``DELETE FROM``, ``INSERT``/``REPLACE
INTO``, the DDL verbs (``ALTER``/``TRUNCATE``/``OPTIMIZE``/``RENAME``/``DROP TABLE``, ``CREATE INDEX ..
ON``), every table of ``LOCK TABLES``, and the first table after ``FROM`` of a locking read (``SELECT ...
FOR UPDATE``/``FOR SHARE``/``LOCK IN SHARE MODE``: the rows it locks are that table's, unless it reads a
subquery first); lowercased, without schema and quotes, comma-separated; null for other statements.

>>> frame = pl.DataFrame({"sql": ["UPDATE sbtest1 SET k=k+1 WHERE id=5", "insert ignore into `shop`.`Orders_2024` values (1)",
...                               "LOCK TABLES t1 WRITE, t2 AS x READ", "SELECT * FROM sbtest1", "alter table sbtest3 add index (k)",
...                               "select c from sbtest2 where id = 7 for update", "SELECT k FROM (SELECT 1) AS d FOR SHARE"]})
>>> frame.select(target_tables(pl.col("sql"))).to_series().to_list()
['sbtest1', 'orders_2024', 't1,t2', None, 'sbtest3', 'sbtest2', None]
"""

from __future__ import annotations

import polars as pl

_NAME = r"[`\"]?(?:[\w$]+[`\"]?\.[`\"]?)?([\w$]+)[`\"]?"  # [schema.]table, quoted or not: the table
_VERB = (
    r"(?i)^\s*(?:update(?:\s+(?:low_priority|ignore))*|delete(?:\s+(?:low_priority|quick|ignore))*\s+from"
    r"|(?:insert|replace)(?:\s+(?:low_priority|delayed|high_priority|ignore))*(?:\s+into)?"
    r"|alter(?:\s+(?:online|ignore))*\s+table|truncate(?:\s+table)?|optimize(?:\s+(?:no_write_to_binlog|local))?\s+table"
    r"|rename\s+table|drop(?:\s+temporary)?\s+table(?:\s+if\s+exists)?|create(?:\s+(?:unique|fulltext|spatial))?\s+index\s+\S+\s+on)\s+"
)
_LOCK_LIST = r"(?i)^\s*lock\s+tables?\s+(.*)$"
_LOCKED = r"(?:^|,)\s*" + _NAME  # each "t [AS a] READ|WRITE" of the list starts after a comma
_LOCKING_READ = r"(?is)\bfor\s+(?:update|share)\b|\block\s+in\s+share\s+mode\b"
_READ_FROM = r"(?is)^\s*select\b.*?\bfrom\s+" + _NAME  # the first table after FROM ("(": a subquery, none)


def target_tables(sql: pl.Expr) -> pl.Expr:
    """The ``target_tables`` of each statement (see the module docstring); one anchored regex per row."""
    single = sql.str.extract(_VERB + _NAME, 1).str.to_lowercase()
    locked = sql.str.extract(_LOCK_LIST, 1).str.extract_all(_LOCKED)
    listed = locked.list.eval(pl.element().str.extract(_LOCKED, 1).str.to_lowercase()).list.join(",")
    locking_read = pl.when(sql.str.contains(_LOCKING_READ)).then(sql.str.extract(_READ_FROM, 1).str.to_lowercase())
    return pl.coalesce(single, pl.when(locked.list.len() > 0).then(listed), locking_read).alias("target_tables")
