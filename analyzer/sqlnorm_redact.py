"""Literal redaction of statements: the text as written, each literal replaced by ``?``."""

from __future__ import annotations

import re

import polars as pl

from dbdiag.patterns import lazy_compile
from dbdiag.sqlnorm_pg import _comment_end
from dbdiag.sqlnorm_regex import _check_dialect


_NUMBER = r"(?<![\w$.])(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w$])"
# One lexer per family, read left to right with one search from where the last lexeme ended: every
# alternative that opens (a comment, a string) also closes at the end of the text, so no text is
# scanned twice. Optimizer hints (/*+ */) and MySQL executable comments (/*!50000 */) are code:
# their opening is kept and their body read as SQL; other comments are dropped (their words may
# be anything). An unterminated backtick or PostgreSQL quoted name is no name: what follows is lexed.
_REDACT_MYSQL = lazy_compile(
    r"""(?P<hint>/\*(?:\+|![0-9]*))
      | (?P<block>/\*.*?(?:\*/|\Z)) | (?P<line>(?:--(?=\s|\Z)|\#)[^\n]*)
      | (?P<keep>`(?:[^`]|``)*`)
      | (?P<literal>(?:_[A-Za-z0-9]+\s*)?[nN]?'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)
          | "(?:[^"\\]|\\.|"")*(?:"|\\?\Z)
          | \b0x[0-9A-Fa-f]+\b | \b[xX]'[0-9A-Fa-f]*' | \b0b[01]+\b | \b[bB]'[01]*'
          | """
    + _NUMBER
    + r")",
    re.VERBOSE | re.DOTALL,
)
_REDACT_POSTGRESQL = lazy_compile(
    r"""(?P<hint>/\*\+)
      | (?P<nested>/\*) | (?P<line>--[^\n]*)
      | (?P<keep>"(?:[^"]|"")*"|\$\d+)
      | (?P<literal>\b[eE]'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)
          | (?:\b(?:[uU]&|[bBxXnN]))?'(?:[^']|'')*(?:'|\Z)
          | \$(?P<tag>(?:[A-Za-z_][A-Za-z0-9_]{0,62})?)\$.*?(?:\$(?P=tag)\$|\Z)
          | """
    + _NUMBER
    + r")",
    re.VERBOSE | re.DOTALL,
)


def redact_literals(sql: str, dialect: str = "mysql") -> str:
    """The statement as written, with each literal (string, number, hex/bit, dollar-quoted) -> ``?`` and comments dropped.

    Identifiers (``t1``, backticked, double-quoted in PostgreSQL), placeholders, ``$1``
    parameters, case and layout are kept; an unterminated string is redacted to the end. A
    comment becomes one space (a line comment nothing: its line break stays); optimizer hints
    and executable comments stay, with their literals replaced.

    >>> redact_literals("SELECT name\\nFROM `t1` WHERE id = 42 AND note = 'it''s'")
    'SELECT name\\nFROM `t1` WHERE id = ? AND note = ?'
    >>> redact_literals("SELECT /*+ MAX_EXECUTION_TIME(1000) */ a /* by alice */ FROM t /*!50000 WHERE b = 'x' */ # pw: x")
    'SELECT /*+ MAX_EXECUTION_TIME(?) */ a   FROM t /*!50000 WHERE b = ? */ '
    """
    _check_dialect(dialect)
    lexer = _REDACT_POSTGRESQL if dialect == "postgresql" else _REDACT_MYSQL
    parts, pos = [], 0
    while (lexeme := lexer.search(sql, pos)) is not None:
        parts.append(sql[pos : lexeme.start()])
        pos = lexeme.end()
        kind = lexeme.lastgroup  # the alternative that matched: the outermost group closes last
        if kind in ("hint", "keep"):
            parts.append(lexeme.group())
        elif kind == "literal":
            parts.append("?")
        elif kind == "block":
            parts.append(" ")
        elif kind == "nested":  # PostgreSQL nests comments
            parts.append(" ")
            pos = _comment_end(sql, pos)
    parts.append(sql[pos:])
    return "".join(parts)


# Vectorised redaction for whole columns: the same result as redact_literals on the texts the
# patterns can read safely (Rust regex has no look-behind, so the character before a number is
# matched and put back). Texts with comments, backslashes in PostgreSQL, dollar quotes or
# unterminated quotes go through redact_literals one by one.
_FAST_STRING = {
    "mysql": (r"'(?:[^'\\]|\\.|'')*'", r'"(?:[^"\\]|\\.|"")*"'),
    "postgresql": (r"'(?:[^']|'')*'",),
}
_FAST_NUMBER = r"(^|[^\w$.])(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?\b"
_FAST_HEX = r"\b0x[0-9A-Fa-f]+\b"
_FAST_UNSAFE = {
    "mysql": r"/\*|--|#|`|\b[xXbBnN]'|_[A-Za-z0-9]+'|\b0b[01]",
    "postgresql": r"/\*|--|\$[A-Za-z_]*\$|\\|\b[eEuUbBxXnN]'|&'",
}


def redact_series(sql: pl.Series, dialect: str = "mysql") -> pl.Series:
    """:func:`redact_literals` of every element (nulls stay null), vectorised for the common texts."""
    _check_dialect(dialect)
    family = "postgresql" if dialect == "postgresql" else "mysql"
    text = pl.col("sql")
    redacted = text
    for pattern in _FAST_STRING[family]:
        redacted = redacted.str.replace_all(pattern, "?")
    if family == "mysql":
        redacted = redacted.str.replace_all(_FAST_HEX, "?")
    redacted = redacted.str.replace_all(_FAST_NUMBER, "${1}?")
    # A quote left over means an unterminated or unusual string: let the lexer decide.
    leftover_quote = redacted.str.contains("'") | (redacted.str.contains('"') if family == "mysql" else pl.lit(False))
    frame = sql.cast(pl.String).rename("sql").to_frame().with_columns(
        redacted.alias("fast"), (text.str.contains(_FAST_UNSAFE[family]) | leftover_quote).alias("slow")
    )
    slow = frame.filter(pl.col("slow") & pl.col("sql").is_not_null())["sql"].unique()
    if slow.len() == 0:
        return frame["fast"].rename("redacted")
    exact = pl.DataFrame({"sql": slow, "lexed": [redact_literals(t, dialect) for t in slow.to_list()]})
    return (
        frame.join(exact, on="sql", how="left", maintain_order="left")
        .select(pl.when(pl.col("slow")).then(pl.col("lexed")).otherwise(pl.col("fast")).alias("redacted"))
        .to_series()
    )
