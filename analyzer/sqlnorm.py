"""SQL fingerprints (statement classes), literal redaction and WHERE-column extraction.

A fingerprint is the text of a statement's class: the statement with its literals abstracted,
so that ``SELECT c FROM sbtest1 WHERE id=5012`` and ``select c from sbtest1 where id = 7`` are
counted together. For the MySQL family it is pt-query-digest's fingerprint (Percona Toolkit,
``QueryRewriter::fingerprint``), re-implemented step by step so that classes and their
checksums match the ones a DBA sees in pt-query-digest's reports::

    >>> fingerprint("SELECT c FROM sbtest1 WHERE id=5012")
    'select c from sbtest? where id=?'
    >>> fingerprint("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y')")
    'insert into t (a, b) values(?+)'
    >>> fingerprint("SELECT * FROM t WHERE id IN (1, 2, 3) LIMIT 10, 20")
    'select * from t where id in(?+) limit ?'
    >>> fingerprint("SELECT $1::int, 'a'::text, E'\\\\n' FROM \\"Users\\"", "postgresql")
    'select ?::int, ?::text, ? from "users"'
    >>> fingerprint_id("select c from sbtest? where id=?")
    'E81D0B3DB4FB31BC558CAEF5F387E929'

pt-query-digest's rules (MySQL, MariaDB, Percona, TiDB), in its order: comments removed
(``/* */`` but not ``/*!version */``, ``--`` and ``#`` to the end of the line); ``use db``
becomes ``use ?``; ``administrator command: X`` and ``call proc(`` are kept as such; multi-row
INSERT/REPLACE cut after the first row; quoted strings, TRUE/FALSE, and anything starting with
a digit, ``+`` or ``-`` (numbers, hex, *and digits inside names*: ``sbtest1`` -> ``sbtest?``,
``db2.t`` -> ``d?t``) become ``?``; whitespace collapsed; lower-cased; NULL -> ``?``;
``IN (...)`` and ``VALUES (...)`` lists -> ``in(?+)``/``values(?+)``; repeated ``UNION``
branches folded; ``LIMIT ?, ?`` / ``LIMIT ? OFFSET ?`` -> ``limit ?``; ``ASC`` dropped after
``ORDER BY``. Backticks are kept.

Deliberate differences from pt-query-digest (tests/test_sqlnorm.py pins each one):

- Trailing ``;`` and whitespace are ignored (pt keeps trailing blanks: ``select ? `` and
  ``select ?`` would be two classes there). Our slow-log parser may or may not keep the ``;``.
- An escaped backslash (``'C:\\\\'``) is removed before quotes are matched; pt removes only
  ``\\'`` and so runs a string ending in a backslash into the next one.
- ``# administrator command: Quit`` (the raw slow-log line) gives ``administrator command: Quit``.
- Nothing of a comment or a string shows (pt shows what it leaves open): a ``--``/``#`` comment
  holding a quote is dropped like any other (comments are lexed around strings), an unterminated
  ``/*`` comment is dropped to the end, and an unterminated string is one ``?`` to the end.
- Every step is linear in the text. Where pt's UNION folding would cost more than
  ``UNION_EXACT_WORK`` ("select"s x characters), equal neighbouring branches are folded one by
  one (the same on plain chains); PostgreSQL texts over ``TOKENIZER_MAX_CHARS`` that need more
  than the regex lexer take a one-pass lexer instead of sqlglot's tokenizer.
- PostgreSQL (``dialect="postgresql"``) is not pt's algorithm but a lexer: literals of every
  kind (``'..'`` with doubled quotes, ``E'..'`` with backslash escapes, ``B'..'``, ``X'..'``,
  ``U&'..'``, dollar-quoted ``$tag$..$tag$``) and ``$1`` parameters -> ``?``; ``::type`` casts
  and digits inside names are kept (``t1`` stays ``t1``); ``#`` is an operator, not a comment;
  ``"Quoted"`` identifiers are kept but lower-cased like everything else (as pgBadger does);
  a sign right after an operator joins its number (``= -1`` -> ``= ?``); ``ARRAY[..]`` lists
  -> ``array[?+]``. The IN/VALUES/UNION/LIMIT/ASC rules are the same as for MySQL.

Deliberately kept from pt: digits inside names (``sbtest1`` and ``sbtest2`` are one class),
``'it''s'`` -> ``??``, ``0xFF`` -> ``?ff``, ``-1.5E-3`` -> ``?e?``: changing them would break
the checksum match for the many statements they appear in.

Speed: :func:`fingerprint_series` first groups the rows by their text with every digit zeroed
(a byte translation: ``id=9148`` and ``id=10046`` are one text there), then maps each group's
text to a cheap *key* that provably has the same fingerprint (digit runs -> ``0``, plain quoted
strings -> ``?`` where no earlier step looks inside them; see ``_KEY_DIGITS``), so half a
million sysbench or pgbench statements become a few dozen distinct keys; the full steps then
run as polars expressions on the distinct keys only. Zeroing keeps the fingerprint for MySQL
but for the early returns (a procedure's name keeps its digits), which read the rows' own
texts; for PostgreSQL in the groups where no digit touches a letter or ``_`` (``t1`` keeps its
digits), the other groups' rows are keyed one by one. Python sees only the distinct keys the
regex engine cannot finish (repeated UNION branches need a back-reference, ``ORDER BY .. ASC``
an anchored loop, non-ASCII text ASCII-only lower-casing, PostgreSQL dollar quotes or nested
comments sqlglot's tokenizer). Every step is one pattern written in the syntax common to
Python's ``re`` and Rust's ``regex`` (see :mod:`dbdiag.sqlnorm_regex`) and run by both, so
:func:`fingerprint` and the series agree by construction; tests check it on random texts,
sysbench-like rows, texts differing in their digits only and the corpus.

Modules: ``sqlnorm_regex`` (the pattern table and its two engines, the shared tail steps),
``sqlnorm_mysql`` and ``sqlnorm_pg`` (the dialects' steps), ``sqlnorm_series`` (the vectorised
bookkeeping), ``sqlnorm_redact``, ``sqlnorm_plan`` and ``sqlnorm_tree`` (sqlglot); this module is
their public face.

:func:`redact_literals` keeps the statement as written (case, line breaks, identifiers,
optimizer hints and executable comments), drops comments and replaces literals by ``?``; it
uses a dialect-aware regex lexer (~15 µs per statement) rather than sqlglot's tokenizer (~110
µs, and it raises on the truncated statements that logs contain). :func:`redact_plan` replaces
the values of plan texts. :func:`parse_statement` and :func:`where_columns` give sqlglot only
statements within bounds (size, nesting).
"""

from __future__ import annotations

import hashlib

import polars as pl

from dbdiag.sqlnorm_mysql import _mysql, _mysql_classes
from dbdiag.sqlnorm_pg import _postgresql, _postgresql_classes
from dbdiag.sqlnorm_plan import redact_plan, redact_plan_filter
from dbdiag.sqlnorm_redact import redact_literals, redact_series
from dbdiag.sqlnorm_regex import DIALECTS, _check_dialect
from dbdiag.sqlnorm_tree import SQLGLOT_MAX_CHARS, SQLGLOT_MAX_DEPTH, parse_statement, refusal, tree_errors, where_columns

__all__ = [
    "DIALECTS", "fingerprint", "fingerprint_classes", "fingerprint_id", "fingerprint_series",
    "redact_literals", "redact_plan", "redact_plan_filter", "redact_series", "where_columns",
    "SQLGLOT_MAX_CHARS", "SQLGLOT_MAX_DEPTH", "parse_statement", "refusal", "tree_errors",
]


def fingerprint(sql: str, dialect: str = "mysql") -> str:
    """The class text of one statement (see the module docstring for the rules)."""
    _check_dialect(dialect)
    return _postgresql(sql) if dialect == "postgresql" else _mysql(sql)


def fingerprint_series(sql: pl.Series, dialect: str = "mysql") -> pl.Series:
    """:func:`fingerprint` of every element (nulls stay null), vectorised; named ``fingerprint``."""
    numbers, names = fingerprint_classes(sql, dialect)
    return names.gather(numbers).alias("fingerprint")


def fingerprint_classes(sql: pl.Series, dialect: str = "mysql") -> tuple[pl.Series, pl.Series]:
    """(each element's class number, the fingerprint of each class): :func:`fingerprint_series` without a text per element.

    Numbers run from 0 (null for a null element); every class is some element's. Who goes on to group
    the elements by class spares hashing each element's fingerprint again.

    >>> numbers, names = fingerprint_classes(pl.Series(["SELECT 1", "select 2", None, "BEGIN"]))
    >>> numbers.to_list(), names.to_list()
    ([0, 0, None, 1], ['select ?', 'begin'])
    """
    _check_dialect(dialect)
    sql = sql.cast(pl.String)
    if sql.len() == 0:
        return pl.Series("class", [], dtype=pl.Int64), pl.Series("fingerprint", [], dtype=pl.String)
    return _postgresql_classes(sql) if dialect == "postgresql" else _mysql_classes(sql)


def fingerprint_id(fingerprint: str) -> str:
    """pt-query-digest's checksum of a fingerprint: MD5, 32 upper-case hex digits.

    pt-query-digest 3.x prints this as the query ID (``0x`` + these digits; its profile table
    shows the first 28); pt-query-digest 2.x printed the last 16 of them.
    """
    return hashlib.md5(fingerprint.encode("utf-8", "backslashreplace")).hexdigest().upper()
