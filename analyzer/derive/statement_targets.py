"""``target_tables``: the tables a statement writes, locks or alters, by their real names, per statement.

The fingerprint writes digits in names as ``?`` (``update sbtest? set ...``, as pt-query-digest does) and
the SQL sample is one per fingerprint, so neither tells ``sbtest1`` from ``sbtest2``; a rule that asks
"which connection held this table" needs the name each statement used. Read from the statement's own
SQL (before its literals are replaced): the table after ``UPDATE``, ``DELETE FROM``, ``INSERT``/``REPLACE
INTO``, the DDL verbs (``ALTER``/``TRUNCATE``/``OPTIMIZE``/``RENAME``/``DROP TABLE``, ``CREATE INDEX ..
ON``), and every table of ``LOCK TABLES``; lowercased, without schema and quotes, comma-separated; null
for other statements (a ``SELECT ... FOR UPDATE`` included: rules fall back on its fingerprint).

>>> frame = pl.DataFrame({"sql": ["UPDATE sbtest1 SET k=k+1 WHERE id=5", "insert ignore into `shop`.`Orders_2024` values (1)",
...                               "LOCK TABLES t1 WRITE, t2 AS x READ", "SELECT * FROM sbtest1", "alter table sbtest3 add index (k)"]})
>>> frame.select(target_tables(pl.col("sql"))).to_series().to_list()
['sbtest1', 'orders_2024', 't1,t2', None, 'sbtest3']
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


def target_tables(sql: pl.Expr) -> pl.Expr:
    """The ``target_tables`` of each statement (see the module docstring); one anchored regex per row."""
    single = sql.str.extract(_VERB + _NAME, 1).str.to_lowercase()
    locked = sql.str.extract(_LOCK_LIST, 1).str.extract_all(_LOCKED)
    listed = locked.list.eval(pl.element().str.extract(_LOCKED, 1).str.to_lowercase()).list.join(",")
    return pl.coalesce(single, pl.when(locked.list.len() > 0).then(listed)).alias("target_tables")
