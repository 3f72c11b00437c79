"""The SQL statements a remediation text prints, for the tests that run them on the real engines.

A remedy mixes prose, shell commands and SQL. A statement is the part of a line that starts with an
upper-case SQL keyword (``SELECT``, ``ALTER``, ``ANALYZE`` ...) and ends at the first ``;`` outside
quotes, quoted names and comments; after it the line is searched again, so one line may hold several::

    Refresh the statistics: ANALYZE orders;   -- then
      SET GLOBAL lock_wait_timeout = 60;   -- seconds; SHOW VARIABLES LIKE 'x'

gives ``ANALYZE orders`` and ``SET GLOBAL lock_wait_timeout = 60`` (the ``;`` in a comment ends
nothing, and ``SHOW ...`` without its ``;`` is prose). Keywords are matched in upper case only, so prose
("set the limit; then ...") is not taken for SQL. ``placeholders`` names what makes a statement
half-SQL (``<statement>``, ``?``): a remedy must print runnable SQL or prose.
"""

from __future__ import annotations

import re

# Statement verbs of MariaDB/MySQL, PostgreSQL and TiDB that remedies print (upper case only).
KEYWORDS = (
    "ADMIN", "ALTER", "ANALYZE", "BEGIN", "CALL", "CHECK", "CLUSTER", "COMMIT", "CREATE", "DELETE", "DO", "DROP",
    "EXPLAIN", "FLUSH", "GRANT", "INSERT", "KILL", "LOCK", "OPTIMIZE", "PURGE", "REINDEX", "RESET", "REVOKE",
    "ROLLBACK", "SELECT", "SET", "SHOW", "TRUNCATE", "UNLOCK", "UPDATE", "VACUUM", "WITH",
)
_START = re.compile(r"(?<![\w.$'\"`=-])(?:" + "|".join(KEYWORDS) + r")(?=[ (\t]|;|$)")
# Quoted strings, quoted names, comments and PostgreSQL dollar quotes, or a ";" (the end of a statement).
_TOKEN = re.compile(
    r"""'(?:[^'\\\n]|\\.|'')*'|"(?:[^"\\\n]|\\.|"")*"|`[^`\n]*`|--[^\n]*|/\*.*?\*/"""
    r"""|(?P<dollar>\$[A-Za-z_]?\w*\$).*?(?P=dollar)|;"""
)
_QUOTED = re.compile(r"""'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`[^`]*`""")
_ANGLE = re.compile(r"<[A-Za-z][^<>;]*>")


def statements(remediation: str) -> list[str]:
    """Every SQL statement ``remediation`` prints, in order, each without its ``;``.

    >>> statements("1. See them: SHOW INDEX FROM t;\\n2. ANALYZE t; then EXPLAIN (ANALYZE) shows it")
    ['SHOW INDEX FROM t', 'ANALYZE t']
    >>> statements("Undo: ALTER TABLE t ALTER INDEX i NOT IGNORED;   -- MariaDB 10.6+; SELECT 1")
    ['ALTER TABLE t ALTER INDEX i NOT IGNORED']
    >>> statements("set the limit; then restart")
    []
    """
    found: list[str] = []
    for line in remediation.split("\n"):
        found += _line_statements(line)
    return found


def _line_statements(line: str) -> list[str]:
    found, position = [], 0
    while (start := _START.search(line, position)) is not None:
        end = _statement_end(line, start.start())
        if end is None:
            break
        found.append(line[start.start():end].strip())
        position = end + 1
    return found


def _statement_end(line: str, start: int) -> int | None:
    """Where the statement starting at ``start`` ends (its ``;``), or None: a line ends before its ``;``."""
    for token in _TOKEN.finditer(line, start):
        if token.group() == ";":
            return token.start()
        if token.group().startswith("--"):
            return None  # a comment before the ';': the rest of the line is the comment
    return None


def placeholders(statement: str) -> list[str]:
    """What a reader would have to fill in before ``statement`` runs: ``<...>`` names and ``?`` outside quotes.

    >>> placeholders("EXPLAIN ANALYZE <statement>")
    ['<statement>']
    >>> placeholders("SELECT * FROM t WHERE a = ? AND b = '?'")
    ['?']
    """
    bare = _QUOTED.sub("''", statement)
    return _ANGLE.findall(bare) + ["?"] * bare.count("?")
