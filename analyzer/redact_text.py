"""SQL inside log lines and load-test labels, with its literals replaced like statements' (``?``).

Log lines carry statements and row values in a few well-known shapes::

    [2024/05/14 10:09:00.000 +08:00] [FATAL] [conn.go:1046] ["panic"] [sql="SELECT * FROM t WHERE card = '4111'"]
    [2024/05/14 10:09:00.000 +08:00] [FATAL] [lib.rs:465] ["key is locked"] [key=7480000000000000FF3F5F698000000000000001]
    ERROR:  duplicate key value violates unique constraint "users_email_key"
    DETAIL:  Key (email)=(ann@example.com) already exists.
    DETAIL:  Failing row contains (7, ann, 1200.00).
    DETAIL:  parameters: $1 = 'ann', $2 = '42'
    STATEMENT:  INSERT INTO users (email) VALUES ('ann@example.com')
    LOG:  duration: 0.274 ms  execute <unnamed>: UPDATE t SET a = 5 WHERE id = 12
    [ERROR] Slave SQL: Error 'Duplicate entry '42' for key 'PRIMARY'' on query. Default database: 'bank'. Query: 'INSERT INTO t VALUES (42)'
    [ERROR] mysqld: Table './bank/acct' is marked as crashed; query: SELECT * FROM acct WHERE ssn = '078-05-1120'

Each shape is one pattern below; the SQL it finds goes through ``sqlnorm.redact_literals`` and row
values (a key, a failing row, bind parameters, a duplicate entry, an encoded TiKV key) become ``?``. A last pattern
catches a statement anywhere else in the line (an upper-case ``SELECT ... FROM``, ``INSERT INTO``,
``UPDATE ... SET``, ``DELETE FROM``): from there to the end of the line is redacted. Every pattern
scans the line once from each place it may start; event messages are at most 400 characters and any
text over ``MAX_LINE_CHARS`` is cut first.

JMeter labels: a JDBC sampler is often labelled with its SQL. A label that reads as SQL (a statement
keyword and a clause keyword: ``SELECT ... FROM``, ``UPDATE ... SET``, ``CALL f(``) is redacted like
a statement; any other label ("Login", "HTTP Request 2") is kept as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from dbdiag import sqlnorm
from dbdiag.patterns import lazy_compile

# TiDB/TiKV unified-log fields holding SQL: [sql="..."] [prev_stmt=...] [txn_sql=...] [query=...]
_KV_SQL = lazy_compile(
    r'\[(?P<key>[\w.-]*?(?:sql|stmt|query|statement)s?)=(?:"(?P<quoted>(?:[^"\\]|\\.)*)(?P<close>"?)|(?P<bare>[^\]"]*))',
    re.IGNORECASE,
)
# TiKV/TiDB row and index keys encode column values: [key=7480000000000000FF3F5F72...] [start_key="t\200..."]
_KV_KEY = lazy_compile(r'\[(?P<key>[\w.-]*?(?:key|keys|lock)s?)=(?:"(?:[^"\\]|\\.)*"?|[^\]"]*)', re.IGNORECASE)
_PG_SQL = lazy_compile(r"(?P<head>\b(?:STATEMENT|QUERY):\s+|\b(?:statement|(?:execute|parse|bind) [^\s:]+):\s+)(?P<sql>.+)", re.DOTALL)
_PG_KEY = lazy_compile(r"(?P<head>\bKey \((?:[^()]|\([^()]*\))*\)=\().*\)")
_PG_ROW = lazy_compile(r"(?P<head>\bFailing row contains \().*\)")
_PG_PARAMETERS = lazy_compile(r"(?P<head>\bparameters:\s+)(?P<sql>.+)", re.DOTALL)
_PG_INPUT = lazy_compile(r'(?P<head>\binvalid input (?:syntax|value) for [^:"]*: )"(?:[^"]|"")*(?:"|\Z)')
_MY_DUPLICATE = lazy_compile(r"(?P<head>\bDuplicate entry ')(?:[^']|'(?! for key))*'(?= for key)")
_MY_VALUE = lazy_compile(r"(?P<head>\b(?:Incorrect \w+ value|Truncated incorrect \w+ value): ')(?:[^']|'(?! for))*'")
_MY_QUOTED_QUERY = lazy_compile(r"(?P<head>\bQuery: ')(?P<sql>.*)'")
_MY_QUERY = lazy_compile(r"(?P<head>\b(?:[Qq]uery|[Ss]tatement)(?: \(0x[0-9A-Fa-f]+\))?: )(?!')(?P<sql>.+)", re.DOTALL)
_ANY_VERB = lazy_compile(r"\b(?:SELECT|INSERT|UPDATE|DELETE|REPLACE)\b")
_ANY_CLAUSE = lazy_compile(r"\b(?:FROM|INTO|SET)\b")
MAX_LINE_CHARS = 16_384  # event lines are 400 at most; a longer text is cut (with "…") before it is read
# Rust-regex prefilter: a line with none of these words goes through untouched (most lines of a log)
_TRIGGER = (
    r"(?i)sql|stmt|query|statement|key|lock|failing row|parameters:|invalid input|duplicate entry|incorrect|"
    r"execute |parse |bind |select|insert|update|delete|replace"
)

# "Process 15355: UPDATE ..." lines of a PostgreSQL deadlock DETAIL (split before each, the pid kept)
_PG_DEADLOCK_PROCESS = lazy_compile(r"(?m)(?=^Process \d{1,10}: )")
_LABEL_VERB = lazy_compile(r"(?i)\b(?:select|insert|update|delete|replace|merge|upsert|call|exec|execute|with|values)\b")
_LABEL_CLAUSE = lazy_compile(r"(?i)\b(?:from|into|set|where|values|using|join|as)\b|\(")


def redact_log_line(text: str, dialect: str = "mysql") -> str:
    """``text`` with the SQL and row values it quotes replaced (``dialect`` for the SQL lexer).

    >>> redact_log_line('[FATAL] [conn.go:1] ["panic"] [sql="SELECT * FROM t WHERE card = \\'4111\\' AND pin = 9"] [conn=5]')
    '[FATAL] [conn.go:1] ["panic"] [sql="SELECT * FROM t WHERE card = ? AND pin = ?"] [conn=5]'
    >>> redact_log_line("DETAIL:  Key (email)=(ann@example.com) already exists.", "postgresql")
    'DETAIL:  Key (email)=(?) already exists.'
    >>> redact_log_line("DETAIL:  parameters: $1 = 'ann', $2 = NULL", "postgresql")
    'DETAIL:  parameters: $1 = ?, $2 = NULL'
    >>> redact_log_line("[ERROR] Error 'Duplicate entry '42' for key 'PRIMARY'' on query. Query: 'INSERT INTO t VALUES (42, 'x')'")
    "[ERROR] Error 'Duplicate entry '?' for key 'PRIMARY'' on query. Query: 'INSERT INTO t VALUES (?, ?)'"
    >>> print(redact_log_line("Process 15354: UPDATE t SET a = 1 WHERE id = 7;\\nProcess 15355: UPDATE t SET a = 2;", "postgresql"))
    Process 15354: UPDATE t SET a = ? WHERE id = ?;
    Process 15355: UPDATE t SET a = ?;
    """
    if len(text) > MAX_LINE_CHARS:
        text = text[: MAX_LINE_CHARS - 1] + "…"
    # a deadlock's DETAIL: each "Process N: <statement>" is its own statement (its pid kept)
    return "".join(_redact_piece(piece, dialect) for piece in _PG_DEADLOCK_PROCESS.split(text) if piece)


def _redact_piece(text: str, dialect: str) -> str:
    redact = _redactor(dialect)
    original = text
    text = _KV_SQL.sub(lambda m: _kv_field(m, redact), text)
    text = _KV_KEY.sub(lambda m: f"[{m['key']}=?", text)
    text = _PG_KEY.sub(r"\g<head>?)", text)
    text = _PG_ROW.sub(r"\g<head>?)", text)
    text = _PG_INPUT.sub(r'\g<head>"?"', text)
    text = _PG_PARAMETERS.sub(lambda m: m["head"] + sqlnorm.redact_literals(m["sql"], "postgresql"), text)
    text = _MY_DUPLICATE.sub(r"\g<head>?'", text)
    text = _MY_VALUE.sub(r"\g<head>?'", text)
    text = _MY_QUOTED_QUERY.sub(lambda m: m["head"] + redact(m["sql"]) + "'", text)
    text = _MY_QUERY.sub(lambda m: m["head"] + redact(m["sql"]), text)
    text = _PG_SQL.sub(lambda m: m["head"] + redact(m["sql"]), text)
    if text != original:
        return text
    verb = _ANY_VERB.search(text)  # a statement in no known shape: from its verb to the end
    if verb and _ANY_CLAUSE.search(text, verb.end()):
        return text[: verb.start()] + redact(text[verb.start() :])
    return text


def _redactor(dialect: str) -> Callable[[str], str]:
    family = "postgresql" if dialect == "postgresql" else "mysql"
    return lambda sql: sqlnorm.redact_literals(sql, family)


def _kv_field(match: re.Match[str], redact: Callable[[str], str]) -> str:
    """One ``[key="value"]`` field with its SQL redacted; Go's quoting (``\\"``, ``\\\\``) undone and redone."""
    if match["quoted"] is None:
        return f"[{match['key']}={redact(match['bare'])}"
    sql = re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m[1], m[1]), match["quoted"])
    quoted = redact(sql).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'[{match["key"]}="{quoted}' + match["close"]


def redact_log_series(lines: pl.Series, dialects: pl.Series | None = None) -> pl.Series:
    """``redact_log_line`` of every element (nulls stay null); ``dialects`` per element, else mysql.

    Only lines that hold one of the trigger words go through Python, each distinct (line, dialect) once.
    """
    dialect = dialects if dialects is not None else pl.Series([None] * lines.len(), dtype=pl.String)
    frame = pl.DataFrame({"text": lines.cast(pl.String), "dialect": dialect.cast(pl.String).fill_null("mysql")})
    candidates = frame.filter(pl.col("text").str.contains(_TRIGGER)).unique()
    if candidates.height == 0:
        return lines
    redacted = [redact_log_line(text, dialect) for text, dialect in candidates.iter_rows()]
    done = candidates.with_columns(pl.Series("redacted", redacted, dtype=pl.String))
    return (
        frame.join(done, on=["text", "dialect"], how="left", maintain_order="left")
        .select(pl.coalesce("redacted", "text").alias(lines.name))
        .to_series()
    )


def looks_like_sql(label: str) -> bool:
    """A label that reads as a statement (a verb and a clause keyword).

    >>> looks_like_sql("SELECT * FROM acct WHERE id = 7"), looks_like_sql("call transfer(1, 2)"), looks_like_sql("Login 2")
    (True, True, False)
    """
    return bool(_LABEL_VERB.search(label)) and bool(_LABEL_CLAUSE.search(label))


def redact_label(label: str) -> str:
    """A load-test label: redacted like a statement when it reads as SQL, else as it is.

    >>> redact_label("SELECT * FROM acct WHERE card = '4111' AND amount > 31337"), redact_label("Step 2")
    ('SELECT * FROM acct WHERE card = ? AND amount > ?', 'Step 2')
    """
    return sqlnorm.redact_literals(label, "mysql") if looks_like_sql(label) else label


def redact_label_series(labels: pl.Series) -> pl.Series:
    """``redact_label`` of every element, each distinct label once (a JTL has millions of rows, few labels)."""
    distinct = labels.cast(pl.String).drop_nulls().unique()
    changed = {label: redact_label(label) for label in distinct.to_list()}
    changed = {label: safe for label, safe in changed.items() if safe != label}
    if not changed:
        return labels
    return labels.cast(pl.String).replace(changed)
