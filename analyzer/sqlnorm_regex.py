"""The pattern table the fingerprints are written in, run by two regex engines, and the steps every dialect shares.

Each step is one pattern in the syntax common to Python's ``re`` and Rust's ``regex`` (polars): the
scalar fingerprint runs it with ``re`` (:func:`_apply`), the vectorised one with polars
(:func:`_apply_expr`), so both agree by construction::

    >>> _apply((_LIMIT,), "select ? limit ?, ?")
    'select ? limit ?'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import polars as pl

DIALECTS = ("mysql", "tidb", "postgresql")
_SQLGLOT_DIALECT = {"mysql": "mysql", "tidb": "mysql", "postgresql": "postgres"}


def _check_dialect(dialect: str) -> None:
    if dialect not in DIALECTS:
        raise ValueError(f"unknown SQL dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")


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
