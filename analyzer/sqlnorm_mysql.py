"""The MySQL-family fingerprint: pt-query-digest's ``QueryRewriter::fingerprint`` step by step (see :mod:`dbdiag.sqlnorm`).

    >>> _mysql("SELECT c FROM sbtest1 WHERE id=5012")
    'select c from sbtest? where id=?'
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.patterns import lazy_compile
from dbdiag.sqlnorm_regex import (
    _LISTS,
    _NON_ASCII,
    _NON_WS,
    _TRAILING_CHARS,
    _WS,
    _WS_CHARS,
    _WS_TR,
    _Step,
    _apply,
    _apply_expr,
    _contains_any,
    _lower_ascii,
    _matches,
    _matches_expr,
    _python,
    _tail,
)
from dbdiag.sqlnorm_series import _classes_of, _finish, _zeroed_groups


_MYSQLDUMP = r"\ASELECT /\*!40001 SQL_NO_CACHE \*/ \* FROM `"
_PT_TOOL = r"/\*[0-9A-Za-z_]+\.[0-9A-Za-z_]+:[0-9]/[0-9]\*/"
_ADMIN = r"\A(?:#[\t ]+)?(administrator command: (?s:.*))"
_CALL = rf"\A[{_WS}]*((?i:call)[{_WS}]+{_NON_WS}+)\("
# Cheap superset of the four above, to find the texts worth a closer look (two patterns: each
# alone lets the regex engine skip most of a text). Blind to digit values: it reads texts whose
# digits are zeroed.
_EARLY_HINTS = (
    rf"\A(?:SELECT /\*![0-9]+ |(?:#[\t ]+)?administrator command: |[{_WS}]*(?i:call)[{_WS}])",
    r":[0-9]/[0-9]\*/",
)
_USE = rf"\A(?i:use) {_NON_WS}+\n?\z"
_INSERT = r"\A(?i:INSERT|REPLACE)"

_MYSQL_SHORTEN_INSERT = _Step(
    rf"\A((?i:INSERT|REPLACE)(?i: IGNORE)?[{_WS}]+(?i:INTO)(?s:.+?)(?i:VALUES)[{_WS}]*\((?s:.*?)\))"
    rf"[{_WS}]*,[{_WS}]*\((?s:.*)",
    "${1}",
)
# The same in three linear searches for Python's engine, which retries the lazy ".*?" from each
# later VALUES: quadratic on a text of many "VALUES (" and no "), (" (see _shorten_insert).
_INSERT_HEAD = lazy_compile(rf"(?i:INSERT|REPLACE)(?i: IGNORE)?[{_WS}]+(?i:INTO)", re.ASCII)
_VALUES_OPEN = lazy_compile(rf"(?i:VALUES)[{_WS}]*\(", re.ASCII)
_NEXT_ROW = lazy_compile(rf"\)[{_WS}]*,[{_WS}]*\(", re.ASCII)
# pt's comment steps, as one lexer: strings (backslash escapes; an unterminated one runs to the
# end) are kept, and so are backslash-quote pairs outside them (pt takes them out before it reads
# strings); /* */ comments (an unterminated one runs to the end) and -- or # to the end of the line
# are dropped. pt drops a line comment only without a quote in it and keeps an unterminated /*
# comment: their words would show in the fingerprint (deliberate).
_STRINGS = r"""'(?:[^'\\]|\\(?s:.))*(?:'|\\?\z)|"(?:[^"\\]|\\(?s:.))*(?:"|\\?\z)"""
_MYSQL_COMMENTS = (_Step(rf"""({_STRINGS}|\\[\\'"])|/\*[^!](?s:.*?)(?:\*/|\z)|(?:--|#)[^\r\n]*""", "${1}"),)
_MYSQL_LITERALS = (
    # pt removes \' and \" only; taking \\ out in the same pass is deliberate (see docstring).
    _Step(r"\\[\\\"']", ""),
    _Step(r'"(?s:.*?)"', "?"),
    _Step(r"'(?s:.*?)'", "?"),
    # A quote left over opens a string that never ends: pt keeps it (and its words); it is one
    # literal to the end of the statement here (deliberate).
    _Step(r"""['"](?s:.*)""", "?"),
    _Step(r"\b(?i:false|true)\b", "?"),
    _Step(r"[0-9+-][0-9a-f.xb+-]*", "?"),
    _Step(r"[xb.+-]\?", "?"),
    # pt's tr/ \n\t\r\f/ /s; single spaces are left alone, which is the same and faster.
    _Step(rf"[{_WS_TR}]{{2,}}|[\t\n\x0c\r]", " "),
)
_MYSQL_AFTER_LOWER = (_Step(r"\bnull\b", "?"), _LISTS)

# Series only: a cheap key with the same fingerprint, so the steps above run once per
# distinct key instead of once per row. Digit runs -> "0" keeps every step's outcome (digits
# only matter as members of [0-9...] classes and \w; early returns are decided on the text
# itself). Quoted strings -> "?" keeps it where pt's string step reduces to '[^']*' -> ?
# and nothing before it looks inside strings: no double quote, backslash or comment marker,
# not a USE (``use 'a b'`` is not ``use \S+``), and INSERTs shortened first (the shortening
# looks for "), (" inside strings too).
_KEY_UNSAFE = ['"', "\\", "/*", "--", "#"]
_KEY_USE = r"\A(?i:use) "
_KEY_STRINGS = _Step(r"'[^']*'", "?")
_KEY_DIGITS = _Step(r"[0-9]+", "0")


def _mysql_early(text: str) -> str | None:
    if _matches(_MYSQLDUMP, text):
        return "mysqldump"
    if _matches(_PT_TOOL, text):
        return "percona-toolkit"
    if (admin := _python(_ADMIN).match(text)) is not None:
        return admin.group(1)
    if (call := _python(_CALL).match(text)) is not None:
        return _lower_ascii(call.group(1))
    return None


def _mysql(text: str) -> str:
    text = text.rstrip(_TRAILING_CHARS)
    if (early := _mysql_early(text)) is not None:
        return early
    return _mysql_main(_shorten_insert(text))


def _shorten_insert(text: str) -> str:
    """``_MYSQL_SHORTEN_INSERT`` in linear time: a multi-row INSERT/REPLACE cut after its first row.

    The pattern's first VALUES row that a ``), (`` follows decides; if none follows the first
    VALUES, none follows a later one.

    >>> _shorten_insert("INSERT INTO t (a) VALUES (1), (2), (3)")
    'INSERT INTO t (a) VALUES (1)'
    """
    head = _INSERT_HEAD.match(text)
    if head is None:
        return text
    values = _VALUES_OPEN.search(text, head.end() + 1)  # "(?s:.+?)": at least one character first
    if values is None:
        return text
    row = _NEXT_ROW.search(text, values.end())
    return text if row is None else text[: row.start() + 1]


def _mysql_main(text: str) -> str:
    """pt's steps after the early returns and the INSERT shortening."""
    if "/*" in text or "--" in text or "#" in text:  # else the lexer would only copy the text
        text = _apply(_MYSQL_COMMENTS, text)
    if _matches(_USE, text):
        return "use ?"
    flat = _apply(_MYSQL_LITERALS, text).strip(_WS_CHARS)
    return _tail(_apply(_MYSQL_AFTER_LOWER, _lower_ascii(flat)))


def _mysql_classes(sql: pl.Series) -> tuple[pl.Series, pl.Series]:
    # pt's steps read digits only as members of [0-9...] (see _KEY_DIGITS): statements that differ
    # in their digits only are one class, and the steps run once per zeroed text
    group, texts = _zeroed_groups(sql)
    stripped = pl.col("raw").str.strip_chars_end(_TRAILING_CHARS)
    shortened = pl.when(_matches_expr(_INSERT, stripped)).then(
        _apply_expr((_MYSQL_SHORTEN_INSERT,), stripped)
    ).otherwise(stripped)
    safe = ~(_contains_any(_KEY_UNSAFE, shortened) | _matches_expr(_KEY_USE, shortened))
    key = pl.when(safe).then(_apply_expr((_KEY_STRINGS,), shortened)).otherwise(shortened)
    maybe_early = _matches_expr(_EARLY_HINTS[0], stripped) | _matches_expr(_EARLY_HINTS[1], stripped)
    frame = texts.rename("raw").to_frame().select(_apply_expr((_KEY_DIGITS,), key).alias("key"), maybe_early.alias("early"))
    distinct_keys = frame["key"].drop_nulls().unique()
    fp_of_group = frame["key"].replace_strict(distinct_keys, _mysql_keys(distinct_keys), default=None)
    # the early returns read the text itself (a procedure's name keeps its digits)
    rows = frame["early"].gather(group).arg_true()
    early_texts = sql.gather(rows).str.strip_chars_end(_TRAILING_CHARS)
    distinct_early = early_texts.unique()
    early = pl.Series([_mysql_early(text) for text in distinct_early.to_list()], dtype=pl.String)
    return _classes_of(group, fp_of_group, rows, early_texts.replace_strict(distinct_early, early, default=None))


def _mysql_keys(keys: pl.Series) -> pl.Series:
    """:func:`_mysql_main` of each distinct key, vectorised."""
    body = _apply_expr(_MYSQL_COMMENTS, pl.col("key"))
    flat = _apply_expr(_MYSQL_LITERALS, body).str.strip_chars(_WS_CHARS)
    is_use = _matches_expr(_USE, body)
    frame = keys.rename("key").to_frame().select(
        "key",
        pl.when(is_use)
        .then(pl.lit("use ?"))
        .otherwise(_apply_expr(_MYSQL_AFTER_LOWER, flat.str.to_lowercase()))
        .alias("fp"),
        # Unicode lower-casing would differ from Perl's lc: such keys are redone in Python.
        (~is_use & flat.str.contains(_NON_ASCII)).alias("redo"),
    )
    return _finish(frame, _mysql_main)
