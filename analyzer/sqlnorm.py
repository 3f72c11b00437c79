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
Python's ``re`` and Rust's ``regex`` (see ``_rust``/``_python``) and run by both, so
:func:`fingerprint` and the series agree by construction; tests check it on random texts,
sysbench-like rows, texts differing in their digits only and the corpus.

:func:`redact_literals` keeps the statement as written (case, line breaks, comments,
identifiers) and replaces only literals by ``?``; it uses a dialect-aware regex lexer
(~15 µs per statement) rather than sqlglot's tokenizer (~110 µs, and it raises on the
truncated statements that logs contain). :func:`where_columns` parses with sqlglot.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache

from typing import TYPE_CHECKING

import polars as pl

from dbdiag.arrow_capsule import series as arrow_series
from dbdiag.distinct import numbered

if TYPE_CHECKING:  # sqlglot is imported on first use: most runs never need it
    from sqlglot import exp

DIALECTS = ("mysql", "tidb", "postgresql")
_SQLGLOT_DIALECT = {"mysql": "mysql", "tidb": "mysql", "postgresql": "postgres"}

# ASCII whitespace as Perl's \s sees it (pt-query-digest reads bytes). Written out because
# Rust's \s is Unicode-aware; ``tr`` in pt's whitespace collapse leaves out \v.
_WS = r"\t\n\x0b\x0c\r "
_WS_TR = r"\t\n\x0c\r "
_NON_WS = rf"[^{_WS}]"


# --- one pattern table, two regex engines -----------------------------------------------


@dataclass(frozen=True)
class _Step:
    """One regex replacement, in the syntax both engines accept.

    Conventions: ``\\b`` and ``\\B`` are ASCII word boundaries, ``(?i:...)`` wraps only literal letters
    (ASCII case-insensitive), ``\\z`` is the very end, replacements use ``${n}``.
    """

    pattern: str
    replacement: str
    first_only: bool = False


def _rust(pattern: str) -> str:
    return pattern.replace(r"\b", r"(?-u:\b)").replace(r"\B", r"(?-u:\B)").replace("(?i:", "(?i-u:")


def _python(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern.replace(r"\z", r"\Z"), re.ASCII)


def _python_replacement(replacement: str) -> str:
    return re.sub(r"\$\{(\d+)\}", r"\\g<\1>", replacement.replace("\\", "\\\\"))


@lru_cache(maxsize=None)
def _compiled(step: _Step) -> tuple[re.Pattern[str], str]:
    return _python(step.pattern), _python_replacement(step.replacement)


def _apply(steps: tuple[_Step, ...], text: str) -> str:
    for step in steps:
        pattern, replacement = _compiled(step)
        text = pattern.sub(replacement, text, count=1 if step.first_only else 0)
    return text


def _apply_expr(steps: tuple[_Step, ...], expr: pl.Expr) -> pl.Expr:
    for step in steps:
        pattern = _rust(step.pattern)
        if step.first_only:
            expr = expr.str.replace(pattern, step.replacement, n=1)
        else:
            expr = expr.str.replace_all(pattern, step.replacement)
    return expr


def _matches(pattern: str, text: str) -> bool:
    return _python(pattern).search(text) is not None


def _matches_expr(pattern: str, expr: pl.Expr) -> pl.Expr:
    return expr.str.contains(_rust(pattern))


def _contains_any(literals: list[str], expr: pl.Expr) -> pl.Expr:
    """``expr`` holds one of ``literals``: as a regex alternation, several times faster than ``str.contains_any``."""
    return expr.str.contains("|".join(re.escape(literal) for literal in literals))


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _lower_ascii(text: str) -> str:
    # Perl's lc on bytes: only A-Z change. polars' to_lowercase is Unicode, hence _NON_ASCII.
    return text.translate(_ASCII_LOWER)


_NON_ASCII = r"[^\x00-\x7f]"

# --- steps shared by every dialect --------------------------------------------------------

_WS_CHARS = "\t\n\x0b\x0c\r "
_TRAILING_CHARS = _WS_CHARS + ";"  # deliberate: "select 1;" and "select 1 " are "select ?"
_LISTS = _Step(rf"\b(in|values?)(?:[{_WS},]*\([{_WS}?,]*\))+", "${1}(?+)")
_LIMIT = _Step(r"\blimit \?(?:, ?\?| offset \?)?", "limit ?", first_only=True)

# Tail steps that Rust's regex cannot express (back-reference; \G loop): Python only, on the
# few distinct texts that contain their trigger.
_UNION_RE = re.compile(r"\b(select\s.*?)(?:(\sunion(?:\sall)?)\s\1)+", re.ASCII)
_UNION_TRIGGER = rf"[{_WS}]union"
_ORDER_BY_RE = re.compile(r"\border by ", re.ASCII | re.IGNORECASE)
_ASC_RE = re.compile(r"(.+?)\s+asc", re.ASCII | re.IGNORECASE)
_ASC_TRIGGER = rf"\border by .*[{_WS}]asc"


def _drop_asc(text: str) -> str:
    # pt: `if (m/\bORDER BY /gi) { 1 while s/\G(.+?)\s+ASC/$1/gi && pos }` — one anchored
    # s///g pass starting right after the first "ORDER BY ".
    found = _ORDER_BY_RE.search(text)
    if found is None:
        return text
    pos, kept = found.end(), [text[: found.end()]]
    while (step := _ASC_RE.match(text, pos)) is not None:
        kept.append(step.group(1))
        pos = step.end()
    kept.append(text[pos:])
    return "".join(kept)


def _tail(text: str) -> str:
    text = _UNION_RE.sub(r"\1 /*repeat\2*/", text)
    text = _apply((_LIMIT,), text)
    return _drop_asc(text)


# --- MySQL family: pt-query-digest's steps -------------------------------------------------

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
_MYSQL_COMMENTS = (
    _Step(r"/\*[^!](?s:.*?)\*/", ""),
    _Step(r"(?:--|#)[^'\"\r\n]*([\r\n]|\z)", "${1}"),
)
_MYSQL_LITERALS = (
    # pt removes \' and \" only; taking \\ out in the same pass is deliberate (see docstring).
    _Step(r"\\[\\\"']", ""),
    _Step(r'"(?s:.*?)"', "?"),
    _Step(r"'(?s:.*?)'", "?"),
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
    return _mysql_main(_apply((_MYSQL_SHORTEN_INSERT,), text))


def _mysql_main(text: str) -> str:
    """pt's steps after the early returns and the INSERT shortening."""
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


def _zeroed_groups(sql: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(each element's group, each group's text): the elements whose texts are the same once every digit is ``0``.

    Groups are numbered from 0 in first-seen order; null elements have a group whose text is null.
    """
    # Zeroing every text first costs about as much as finding the distinct texts first where a text
    # repeats 4.5 times on average (sysbench), and less where it repeats 1.6 times (pgbench)
    return numbered(_zero_digits(sql))


def _classes_of(group: pl.Series, fp_of_group: pl.Series, rows: pl.Series, fp_of_rows: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(class number of each element, fingerprint of each class), numbered in first-seen order.

    An element's fingerprint is its group's (``group`` numbers them in first-seen order), except for
    the elements ``rows`` whose ``fp_of_rows`` is not null.
    """
    names = pl.concat([fp_of_group, fp_of_rows]).drop_nulls().unique(maintain_order=True)
    own = _numbered(fp_of_rows, names)
    if own.null_count() == own.len():  # groups are numbered in first-seen order: so are their classes
        numbers, names = _in_first_seen_order(_numbered(fp_of_group, names), names)
        return numbers.gather(group), names
    numbers = _numbered(fp_of_group, names).gather(group).scatter(rows.filter(own.is_not_null()), own.drop_nulls())
    return _in_first_seen_order(numbers, names)


def _numbered(fingerprints: pl.Series, names: pl.Series) -> pl.Series:
    """Each fingerprint's position in ``names`` (nulls stay null)."""
    return fingerprints.replace_strict(names, pl.int_range(names.len(), dtype=pl.Int64, eager=True), default=None, return_dtype=pl.Int64)


def _in_first_seen_order(numbers: pl.Series, names: pl.Series) -> tuple[pl.Series, pl.Series]:
    """(numbers, names) renumbered in the order the elements first have them; names no element has are left out."""
    seen = numbers.gather(numbers.arg_unique()).drop_nulls()
    renumbered = pl.repeat(None, names.len(), dtype=pl.Int64, eager=True)
    renumbered.scatter(seen, pl.int_range(seen.len(), dtype=pl.Int64, eager=True))
    return renumbered.gather(numbers).alias("class"), names.gather(seen).alias("fingerprint")


_BIG = 20_000  # rows from which zeroing digits byte-wise beats a regex (and pyarrow is worth loading)
_ZERO_DIGITS = bytes.maketrans(b"123456789", b"000000000")


def _zero_digits(texts: pl.Series) -> pl.Series:
    """Every ASCII digit replaced by ``0`` (same lengths; nulls stay null)."""
    if texts.len() < _BIG:
        return texts.str.replace_all("[1-9]", "0")
    import pyarrow as pa

    arrow = texts.to_arrow(compat_level=pl.CompatLevel.oldest())
    if isinstance(arrow, pa.ChunkedArray):
        arrow = arrow.combine_chunks()
    validity, offsets, data = arrow.buffers()
    zeroed = pa.py_buffer(data.to_pybytes().translate(_ZERO_DIGITS) if data is not None else b"")
    array = pa.LargeStringArray.from_buffers(len(arrow), offsets, zeroed, validity, arrow.null_count, arrow.offset)
    return arrow_series(array, texts.name)



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


# --- PostgreSQL: a lexer in regex passes, sqlglot's tokenizer when that is not enough -------

# The lexing pass wraps every lexeme of interest in markers (\x01..\x03 never occur in the
# text: such texts take the tokenizer path); _PG_UNMARK turns the marked forms into their
# result: comment -> " ", quoted identifier -> itself, literal -> "?".
_PG_LEX = _Step(
    r"(/\*(?s:.*?)\*/|--[^\n]*)"
    r'|("(?:[^"]|"")*")'
    r"|\b(?i:E)'(?:[^'\\]|\\(?s:.)|'')*'"
    r"|(?:\b(?i:U&|[BXN]))?'(?:[^']|'')*'"
    r"|\B\$[0-9]+"
    r"|\b0(?i:X)[0-9A-Fa-f_]+"
    r"|\b[0-9][0-9_]*(?:\.[0-9_]*)?(?:(?i:E)[+-]?[0-9]+)?"
    r"|\B\.[0-9][0-9_]*(?:(?i:E)[+-]?[0-9]+)?",
    "\x03${1}\x01${2}\x02",
)
_PG_UNMARK = (
    _Step("\x03\x01\x02", "?"),
    _Step("\x03\x01([^\x02]*)\x02", "${1}"),
    _Step("\x03[^\x01]*\x01\x02", " "),
)
# Dollar quotes and nested or unterminated comments (a /* or */ outside a marked comment).
_PG_NEEDS_TOKENIZER = r"[\x00-\x03]|\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$"
_PG_LEFT_COMMENT = r"(?:\A|[^\x03])/\*|\*/(?:[^\x01]|\z)"
_PG_AFTER_LOWER = (
    _Step(r"\b(?:true|false|null)\b", "?"),
    # A sign right after an operator or an opening is part of the number: "= -1", "+ -1".
    _Step(r"([(,=<>!*/%|&^~+-]|\A)( ?)[-+] ?\?", "${1}${2}?"),
    _LISTS,
    _Step(rf"\barray\[[{_WS}?,]*\]", "array[?+]"),
)
_PG_FLATTEN = _Step(rf"[{_WS}]{{2,}}|[\t\n\x0b\x0c\r]", " ")
# Series only: a cheap key with the same fingerprint (see _KEY_DIGITS for the idea). Numbers
# starting 1-9 -> "1" (never "0", which could start a 0x literal) and strings -> '' keep
# every lexing decision where no double quote (identifiers may hold digits), backslash
# (E'' escapes), comment or dollar quote is in the text; such texts are their own key.
_PG_KEY_UNSAFE = ['"', "\\", "--", "/*", "*/"]
_PG_KEY_STEPS = (_Step(r"'[^']*'", "''"), _Step(r"\b[1-9][0-9]*", "1"))
@lru_cache(maxsize=1)
def _pg_literal_tokens() -> frozenset:
    from sqlglot.tokens import TokenType

    return frozenset(
        {
            TokenType.STRING,
            TokenType.NUMBER,
            TokenType.BIT_STRING,
            TokenType.HEX_STRING,
            TokenType.BYTE_STRING,
            TokenType.NATIONAL_STRING,
            TokenType.RAW_STRING,
            TokenType.HEREDOC_STRING,
            TokenType.UNICODE_STRING,
        }
    )


_WORD_BEFORE = re.compile(r"[A-Za-z0-9_](?=\.)")


def _pg_tokenized(text: str) -> str | None:
    """Literals -> ?, comments -> one space, via sqlglot's tokenizer; None if it cannot read it."""
    from sqlglot.dialects import Dialect
    from sqlglot.errors import TokenError
    from sqlglot.tokens import TokenType

    literal_tokens = _pg_literal_tokens()
    try:
        tokens = Dialect.get_or_raise("postgres").tokenize(text)
    except TokenError:
        return None
    parts: list[str] = []
    previous_end = -1
    skip_next = False
    for index, token in enumerate(tokens):
        if skip_next:
            skip_next, previous_end = False, token.end
            continue
        if token.start > previous_end + 1:
            parts.append(" ")
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        number_follows = (
            following is not None and following.token_type == TokenType.NUMBER and following.start == token.end + 1
        )
        # "$1" is PARAMETER + NUMBER; ".5" is DOT + NUMBER unless the dot follows a name.
        leading_dot = token.token_type == TokenType.DOT and not _WORD_BEFORE.match(text, max(token.start - 1, 0))
        if number_follows and (token.token_type == TokenType.PARAMETER or leading_dot):
            parts.append("?")
            skip_next = True
        elif token.token_type in literal_tokens:
            parts.append("?")
        else:
            parts.append(text[token.start : token.end + 1])
        previous_end = token.end
    return "".join(parts)


def _postgresql(text: str) -> str:
    text = text.rstrip(_TRAILING_CHARS)
    marked = _apply((_PG_LEX,), text)
    if _matches(_PG_NEEDS_TOKENIZER, text) or _matches(_PG_LEFT_COMMENT, marked):
        if (tokenized := _pg_tokenized(text)) is not None:
            return _pg_after_lex(tokenized)
        # Not even the tokenizer reads it (unterminated quote...): best effort, without
        # the control characters that would be mistaken for the lexer's markers.
        marked = _apply((_PG_LEX,), re.sub(r"[\x00-\x03]", " ", text))
    return _pg_from_marked(marked)


def _pg_from_marked(marked: str) -> str:
    return _pg_after_lex(_apply(_PG_UNMARK, marked))


def _pg_after_lex(lexed: str) -> str:
    flat = _apply((_PG_FLATTEN,), lexed).strip(_WS_CHARS)
    return _tail(_apply(_PG_AFTER_LOWER, _lower_ascii(flat)))


# Where every digit run stands alone (no letter or "_" right before or after it), digits are
# only ever read as part of a number, which becomes "?" whatever its digits: texts that are the
# same once their digits are zeroed have one fingerprint, the zeroed text's. Names with digits
# ("t1", "1e5", "0x1F", "1_000"), quoted identifiers and what the key leaves alone are read as written.
_PG_DIGITS_IN_WORDS = r"[A-Za-z_][0-9]|[0-9][A-Za-z_]"
_PROBE = 2_000  # texts sampled to guess whether zeroing digits would merge texts
_DIGITS_IN_WORDS_SHARE = 0.5  # from this share of the sample with digits in words, zeroing is not tried


def _postgresql_classes(sql: pl.Series) -> tuple[pl.Series, pl.Series]:
    sample = sql.gather_every(max(1, sql.len() // _PROBE))
    if (sample.str.contains(_PG_DIGITS_IN_WORDS).mean() or 0.0) > _DIGITS_IN_WORDS_SHARE:
        # names with digits (sysbench's sbtest1, partitions) everywhere: zeroing would merge few texts
        text, distinct = numbered(sql)
        return _classes_of(text, _pg_fingerprints(distinct), pl.Series([], dtype=pl.Int64), pl.Series([], dtype=pl.String))
    group, texts = _zeroed_groups(sql)
    raw = pl.col("raw")
    as_written = (
        _contains_any(_PG_KEY_UNSAFE, raw) | _matches_expr(_PG_NEEDS_TOKENIZER, raw) | _matches_expr(_PG_DIGITS_IN_WORDS, raw)
    )
    own = texts.rename("raw").to_frame().select(as_written).to_series()
    blind = own.not_()
    fp_of_group = pl.repeat(None, texts.len(), dtype=pl.String, eager=True)
    fp_of_group.scatter(blind.arg_true(), _pg_fingerprints(texts.filter(blind)))
    rows = own.gather(group).arg_true()
    text_of_row, distinct = numbered(sql.gather(rows))
    return _classes_of(group, fp_of_group, rows, _pg_fingerprints(distinct).gather(text_of_row))


def _pg_fingerprints(sql: pl.Series) -> pl.Series:
    """:func:`_postgresql` of each element (nulls stay null), once per distinct key."""
    stripped = pl.col("raw").str.strip_chars_end(_TRAILING_CHARS)
    # what makes a text unsafe (quotes, backslashes, comment and dollar-quote markers, control characters) is never
    # among the trailing characters stripped: the raw text tells as well, without stripping it once more
    unsafe = _contains_any(_PG_KEY_UNSAFE, pl.col("raw")) | _matches_expr(_PG_NEEDS_TOKENIZER, pl.col("raw"))
    key = pl.when(unsafe).then(stripped).otherwise(_apply_expr(_PG_KEY_STEPS, stripped))
    frame = sql.rename("raw").to_frame().lazy().select(key.alias("key")).collect(engine="streaming")
    keys = frame["key"].drop_nulls().unique()
    return frame["key"].replace_strict(keys, _pg_keys(keys), default=None, return_dtype=pl.String)


def _pg_keys(keys: pl.Series) -> pl.Series:
    """:func:`_postgresql` of each distinct key, vectorised where the regex lexer is enough."""
    marked = _apply_expr((_PG_LEX,), pl.col("key"))
    flat = _apply_expr((_PG_FLATTEN,), _apply_expr(_PG_UNMARK, marked)).str.strip_chars(_WS_CHARS)
    frame = keys.rename("key").to_frame().select(
        "key",
        _apply_expr(_PG_AFTER_LOWER, flat.str.to_lowercase()).alias("fp"),
        (
            _matches_expr(_PG_NEEDS_TOKENIZER, pl.col("key"))
            | _matches_expr(_PG_LEFT_COMMENT, marked)
            | flat.str.contains(_NON_ASCII)
        ).alias("redo"),
    )
    return _finish(frame, _postgresql)


# --- the per-key driver -----------------------------------------------------------------------


def _finish(frame: pl.DataFrame, scalar) -> pl.Series:
    """The fingerprint of each distinct key, in order.

    ``frame`` has ``key``, ``fp`` (regex steps done, tail not) and ``redo`` (``scalar(key)``
    must be computed in Python instead). The tail's Python-only steps run on the keys whose
    text contains their trigger, the vectorised LIMIT step on the others.
    """
    tail_needed = _matches_expr(_UNION_TRIGGER, pl.col("fp")) | _matches_expr(_ASC_TRIGGER, pl.col("fp"))
    frame = frame.with_columns(_apply_expr((_LIMIT,), pl.col("fp")).alias("limited"), tail_needed.alias("tail"))
    todo = frame.filter(pl.col("redo") | pl.col("tail")).select("key", "fp", "redo")
    if todo.is_empty():
        return frame["limited"]
    python = [scalar(key) if redo else _tail(fp) for key, fp, redo in todo.iter_rows()]
    done = todo.select("key", pl.Series("python", python, dtype=pl.String))
    return (
        frame.join(done, on="key", how="left", maintain_order="left")
        .select(pl.coalesce("python", "limited"))
        .to_series()
    )


# --- public API --------------------------------------------------------------------------------


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")


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


# --- redaction ------------------------------------------------------------------------------

_NUMBER = r"(?<![\w$.])(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?(?![\w$])"
_REDACT_MYSQL = re.compile(
    r"""(?P<keep>/\*.*?\*/|(?:--(?=\s|$)|\#)[^\n]*|`(?:[^`]|``)*`)
      | (?P<literal>(?:_[A-Za-z0-9]+\s*)?[nN]?'(?:[^'\\]|\\.|'')*(?:'|\Z)
          | "(?:[^"\\]|\\.|"")*(?:"|\Z)
          | \b0x[0-9A-Fa-f]+\b | \b[xX]'[0-9A-Fa-f]*' | \b0b[01]+\b | \b[bB]'[01]*'
          | """
    + _NUMBER
    + r")",
    re.VERBOSE | re.DOTALL,
)
_REDACT_POSTGRESQL = re.compile(
    r"""(?P<keep>/\*.*?\*/|--[^\n]*|"(?:[^"]|"")*"|\$\d+)
      | (?P<literal>\b[eE]'(?:[^'\\]|\\.|'')*(?:'|\Z)
          | (?:\b(?:[uU]&|[bBxXnN]))?'(?:[^']|'')*(?:'|\Z)
          | \$(?P<tag>(?:[A-Za-z_]\w*)?)\$.*?(?:\$(?P=tag)\$|\Z)
          | """
    + _NUMBER
    + r")",
    re.VERBOSE | re.DOTALL,
)


def _redact_match(match: re.Match[str]) -> str:
    return match.group(0) if match.group("keep") is not None else "?"


def redact_literals(sql: str, dialect: str = "mysql") -> str:
    """The statement as written, with each literal (string, number, hex/bit, dollar-quoted) -> ``?``.

    Identifiers (``t1``, backticked, double-quoted in PostgreSQL), comments, placeholders,
    ``$1`` parameters, case and layout are kept; an unterminated string is redacted to the end.

    >>> redact_literals("SELECT name\\nFROM `t1` WHERE id = 42 AND note = 'it''s'")
    'SELECT name\\nFROM `t1` WHERE id = ? AND note = ?'
    """
    _check_dialect(dialect)
    lexer = _REDACT_POSTGRESQL if dialect == "postgresql" else _REDACT_MYSQL
    return lexer.sub(_redact_match, sql)


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


_PLAN_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"")
# Numbers that are compared with or passed as values: after a spaced comparison operator (plans
# print estimates unspaced: rows=1), inside a
# TiDB function call eq(col, 42) / in(col, 1, 2), inside a TiDB range [1,5) and in IN lists.
_PLAN_VALUE = re.compile(r"(?:(?<=[=<>] )|(?<=[(,\[] )|(?<=[(,\[]))-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?=\s*[,)\]]|\s*$|\s+(?:AND|OR|and|or)\b|::)")


def redact_plan(plan: str) -> str:
    """A plan text (auto_explain, TiDB, MariaDB explain) with the values it compares replaced by ``?``.

    Quoted strings always go; numbers go where they are operands (``aid = 42``,
    ``eq(t.acct_no, 6228480007993755552)``, ``range:[5,10]``), not where they are estimates or
    timings (``rows=1``, ``time:3.77s``, ``cost=0.29..8.31``).

    >>> redact_plan("Index Cond: (aid = 42) Filter: (note = 'x'::text)  (cost=0.29..8.31 rows=1)")
    'Index Cond: (aid = ?) Filter: (note = ?::text)  (cost=0.29..8.31 rows=1)'
    >>> redact_plan("range:[6228480007993755552,6228480007993755552], keep order:false")
    'range:[?,?], keep order:false'

    >>> redact_plan('Selection 8 eq(bank.t.acct_no, "6228480007993755552"), eq(t.k, 7) time:3.77s')
    'Selection 8 eq(bank.t.acct_no, ?), eq(t.k, ?) time:3.77s'
    """
    return _PLAN_VALUE.sub("?", _PLAN_QUOTED.sub("?", plan))


# --- WHERE columns -----------------------------------------------------------------------------

@lru_cache(maxsize=1)
def _comparisons() -> tuple[type, ...]:
    from sqlglot import exp

    return (exp.EQ, exp.NullSafeEQ, exp.In, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)


def _scope_tables(node: exp.Expression) -> dict[str, str]:
    """Alias (or name) -> table name for the tables this SELECT/UPDATE/DELETE reads directly."""
    from sqlglot import exp

    tables: dict[str, str] = {}
    candidates = [node.args.get("this")] if isinstance(node, (exp.Update, exp.Delete)) else []
    if (source := node.args.get("from") or node.args.get("from_")) is not None:
        candidates.append(source.this)
    candidates += [join.this for join in node.args.get("joins") or []]
    for candidate in candidates:
        if isinstance(candidate, exp.Table):
            tables[candidate.alias_or_name] = candidate.name
    return tables


def _where_columns_of(node: exp.Expression) -> list[tuple[str | None, str]]:
    from sqlglot import exp

    where = node.args.get("where")
    if where is None:
        return []
    tables = _scope_tables(node)
    only_table = next(iter(tables.values())) if len(set(tables.values())) == 1 else None
    found: list[tuple[str | None, str]] = []
    for comparison in where.find_all(*_comparisons()):
        if comparison.find_ancestor(exp.Select, exp.Update, exp.Delete) is not node:
            continue  # belongs to a subquery, handled with its own scope
        operands = [comparison.this] + ([comparison.expression] if comparison.args.get("expression") else [])
        for column in operands:
            if isinstance(column, exp.Column) and column.name:
                qualifier = column.table or None
                table = tables.get(qualifier, qualifier) if qualifier else only_table
                found.append((table, column.name))
    return found


def where_columns(sql: str, dialect: str = "mysql") -> list[tuple[str | None, str]]:
    """(table, column) for the columns a statement's WHERE clauses compare with =, <=>, IN or a range.

    Aliases are resolved to table names where the statement names the table; an unqualified
    column gets the table when its SELECT/UPDATE/DELETE reads exactly one; otherwise the
    qualifier as written, or None. Subqueries count with their own tables. Each pair once, in
    order of appearance; [] when sqlglot cannot parse the statement.

    >>> where_columns("SELECT * FROM orders o JOIN users u ON u.id = o.user_id WHERE o.status = 'x' AND u.age > 3")
    [('orders', 'status'), ('users', 'age')]
    """
    import sqlglot
    from sqlglot import exp

    _check_dialect(dialect)
    try:
        tree = sqlglot.parse_one(sql, read=_SQLGLOT_DIALECT[dialect])
        found: list[tuple[str | None, str]] = []
        for node in tree.find_all(exp.Select, exp.Update, exp.Delete):
            found += _where_columns_of(node)
    # Statements from logs are hostile input: unparseable, or nested deeper than Python recurses.
    except (sqlglot.errors.SqlglotError, RecursionError):
        return []
    return list(dict.fromkeys(found))
