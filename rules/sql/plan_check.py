"""The statement that shows how a captured statement runs, in the syntax of the capture's engine and version.

A remedy prints runnable SQL or prose, never half-SQL (``EXPLAIN ANALYZE <statement>;``). The
captured sample is printed only when it can run as it is: its literals are shown (``--show-literals``;
a sample with ``?`` in place of its values cannot run), it is one line (remedies are read line by
line), and it is a query (``SELECT`` / ``WITH``): ANALYZE / EXPLAIN ANALYZE execute the statement, and
a DBA should not run a captured UPDATE again to see its plan. Otherwise the same advice in prose.

Syntax by engine (the sources are the engines' manuals):

- MariaDB: ``ANALYZE FORMAT=JSON stmt`` (MariaDB KB "ANALYZE FORMAT=JSON", 10.1+); MariaDB 10.11
  refuses ``EXPLAIN ANALYZE`` (ERROR 1064 on the real server, tests/test_remedies_on_real_engines.py).
- MySQL / Percona: ``EXPLAIN ANALYZE stmt`` from 8.0.18 (MySQL 8.0 manual "EXPLAIN Statement",
  "Obtaining Information with EXPLAIN ANALYZE"); before it ``EXPLAIN FORMAT=JSON stmt``.
- PostgreSQL: ``EXPLAIN (ANALYZE, BUFFERS) stmt`` (PostgreSQL 15 manual "EXPLAIN").
- TiDB: ``EXPLAIN ANALYZE stmt`` (PingCAP docs "EXPLAIN ANALYZE").

>>> plan_check("mariadb", None, "SELECT id FROM t WHERE a = 3", True)
'ANALYZE FORMAT=JSON SELECT id FROM t WHERE a = 3;'
>>> plan_check("postgresql", None, "SELECT id FROM t WHERE a = ?", False)
'run EXPLAIN (ANALYZE, BUFFERS) on one captured execution of this statement, with its literals (the sample shown has them replaced)'
"""

from __future__ import annotations

import re
from typing import Any

from dbdiag.patterns import lazy_compile
from dbdiag.versions import MYSQL_FAMILY, at_least

MAX_PRINTED_SQL_CHARS = 2000
MYSQL_EXPLAIN_ANALYZE = (8, 0, 18)
_QUERY_RE = lazy_compile(r"^\s*(?:SELECT|WITH)\b", re.I)
_QUOTED_RE = lazy_compile(r"""'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`[^`]*`""")


def explain_verb(engine: str | None, version: dict[str, Any] | None) -> str:
    """The words that run a statement and show its plan with actual rows and times, on this engine.

    >>> explain_verb("mysql", {"engine": "mysql", "number": [8, 0, 15]}), explain_verb("mysql", None)
    ('EXPLAIN FORMAT=JSON', 'EXPLAIN ANALYZE')
    """
    if engine == "mariadb":
        return "ANALYZE FORMAT=JSON"
    if engine == "postgresql":
        return "EXPLAIN (ANALYZE, BUFFERS)"
    if engine in MYSQL_FAMILY and at_least(version, engine, MYSQL_EXPLAIN_ANALYZE) is False:
        return "EXPLAIN FORMAT=JSON"
    return "EXPLAIN ANALYZE"


def version_note(engine: str | None, version: dict[str, Any] | None) -> str:
    """`` (MySQL 8.0.18+; before: EXPLAIN FORMAT=JSON)`` when the syntax needs a version the capture does not show."""
    if engine in MYSQL_FAMILY and engine != "mariadb" and at_least(version, engine, MYSQL_EXPLAIN_ANALYZE) is None:
        return " (MySQL 8.0.18+; before: EXPLAIN FORMAT=JSON)"
    return ""


def runnable_sample(sample_sql: str | None, literals_shown: bool) -> str | None:
    """The sample as a statement a DBA can paste and run again safely, or None (see the module docstring)."""
    text = (sample_sql or "").strip().rstrip(";").strip()
    if not (literals_shown and text and _QUERY_RE.match(text)) or "\n" in text or len(text) > MAX_PRINTED_SQL_CHARS:
        return None
    bare = _QUOTED_RE.sub("''", text)
    if "?" in bare or ";" in bare or "…" in text:
        return None
    return text


def plan_check(engine: str | None, version: dict[str, Any] | None, sample_sql: str | None, literals_shown: bool) -> str:
    """The statement (with its ``;``) that shows the captured statement's plan as it runs, or the same in prose."""
    verb = explain_verb(engine, version)
    sample = runnable_sample(sample_sql, literals_shown)
    if sample is not None:
        return f"{verb} {sample};{version_note(engine, version)}"
    why = "with its literals (the sample shown has them replaced)" if not literals_shown else (
        "(the sample cannot be printed as one runnable query: it changes data, spans lines or is cut)")
    return f"run {verb} on one captured execution of this statement, {why}{version_note(engine, version)}"
