"""The PostgreSQL fingerprint: a lexer in regex passes, sqlglot's tokenizer when that is not enough (see :mod:`dbdiag.sqlnorm`).

    >>> _postgresql("SELECT $1::int, 'a'::text FROM Users WHERE id = -1")
    'select ?::int, ?::text from users where id = ?'
"""

from __future__ import annotations

import re
from functools import lru_cache

import polars as pl

from dbdiag.distinct import numbered
from dbdiag.patterns import lazy_compile
from dbdiag.sqlnorm_regex import (
    _LISTS,
    _NON_ASCII,
    _TRAILING_CHARS,
    _WS,
    _WS_CHARS,
    _Step,
    _apply,
    _apply_expr,
    _contains_any,
    _lower_ascii,
    _matches,
    _matches_expr,
    _tail,
)
from dbdiag.sqlnorm_series import _classes_of, _finish, _zeroed_groups


# The lexing pass wraps every lexeme of interest in markers (\x01..\x03 never occur in the
# text: such texts take the tokenizer path); _PG_UNMARK turns the marked forms into their
# result: comment -> " ", quoted identifier -> itself, literal -> "?". A comment or string that
# is never closed runs to the end (the lexeme is found in one pass: no rescan from each later
# opening, and none of its words shows); a quoted identifier that is never closed is no
# identifier: what follows is lexed.
_PG_LEX = _Step(
    r"(/\*(?s:.*?)(?:\*/|\z)|--[^\n]*)"
    r'|("(?:[^"]|"")*")'
    r"|\b(?i:E)'(?:[^'\\]|\\(?s:.)|'')*(?:'|\\?\z)"
    r"|(?:\b(?i:U&|[BXN]))?'(?:[^']|'')*(?:'|\z)"
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


_WORD_BEFORE = lazy_compile(r"[A-Za-z0-9_](?=\.)")


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


TOKENIZER_MAX_CHARS = 64 * 1024  # sqlglot's tokenizer takes ~2 µs a character, _pg_lexed a tenth of it


def _postgresql(text: str) -> str:
    text = text.rstrip(_TRAILING_CHARS)
    marked = _apply((_PG_LEX,), text)
    if _matches(_PG_NEEDS_TOKENIZER, text) or _matches(_PG_LEFT_COMMENT, marked):
        if len(text) <= TOKENIZER_MAX_CHARS and (tokenized := _pg_tokenized(text)) is not None:
            return _pg_after_lex(tokenized)
        # Not for the tokenizer (too long, or unterminated: it refuses): the same lexemes in one pass.
        return _pg_after_lex(_pg_lexed(text))
    return _pg_from_marked(marked)


# What _pg_lexed reads: comment openings (their end is found by nesting), then the _PG_LEX lexemes
# and dollar quotes (a tag is at most an identifier's 63 characters); literals and what never closes
# run to the end.
_PG_LEXEME = lazy_compile(
    r"""(?P<comment>/\*) | (?P<line>--[^\n]*)
      | (?P<name>"(?:[^"]|"")*")
      | (?P<literal>\b[eE]'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)
          | (?:\b(?:[uU]&|[bBxXnN]))?'(?:[^']|'')*(?:'|\Z)
          | \$(?P<tag>(?:[A-Za-z_][A-Za-z0-9_]{0,62})?)\$.*?(?:\$(?P=tag)\$|\Z)
          | \B\$[0-9]+ | \b0[xX][0-9A-Fa-f_]+
          | \b[0-9][0-9_]*(?:\.[0-9_]*)?(?:[eE][+-]?[0-9]+)? | \B\.[0-9][0-9_]*(?:[eE][+-]?[0-9]+)?)""",
    re.VERBOSE | re.DOTALL | re.ASCII,
)
_COMMENT_MARK = lazy_compile(r"/\*|\*/")


def _pg_lexed(text: str) -> str:
    """Comments (nested, as PostgreSQL nests them) -> one space, literals and dollar quotes -> ``?``, the rest as written.

    What :func:`_pg_tokenized` gives, spacing aside, in one linear pass: for texts the tokenizer
    refuses (something never closed) or that are too long for it.

    >>> _pg_lexed("SELECT $$a$$, 'b /* c */' /* d /* e */ f */ FROM t WHERE x = $tag$never closed")
    'SELECT ?, ?   FROM t WHERE x = ?'
    """
    parts, pos = [], 0
    while (lexeme := _PG_LEXEME.search(text, pos)) is not None:
        parts.append(text[pos : lexeme.start()])
        if lexeme.group("comment") is not None:
            parts.append(" ")
            pos = _comment_end(text, lexeme.end())
            continue
        if lexeme.group("line") is not None:
            parts.append(" ")
        elif lexeme.group("name") is not None:
            parts.append(lexeme.group("name"))
        else:
            parts.append("?")
        pos = lexeme.end()
    parts.append(text[pos:])
    return "".join(parts)


def _comment_end(text: str, pos: int) -> int:
    """Where the comment opened just before ``pos`` ends (after its ``*/``, nesting counted); the end if never."""
    depth = 1
    for mark in _COMMENT_MARK.finditer(text, pos):
        depth += 1 if mark.group() == "/*" else -1
        if depth == 0:
            return mark.end()
    return len(text)


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
