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

from dbdiag.patterns import lazy_compile
from dbdiag.vocabulary.dialects import SQLNORM_DIALECTS as DIALECTS


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
# few distinct texts that contain their trigger. The texts have no line breaks (collapsed before).
_UNION_RE = lazy_compile(r"\b(select\s.*?)(?:(\sunion(?:\sall)?)\s\1)+", re.ASCII)
_UNION_TRIGGER = rf"[{_WS}]union"
# pt's pattern tries every "select" against the rest of the text: its cost grows with both. Up to
# this product (about 50 ms) it runs as pt runs it; past it, equal neighbouring branches are folded
# one by one (the same on plain chains; a repeat of several branches at once is left as it is).
UNION_EXACT_WORK = 2_000_000  # "select"s x characters
_UNION_SEPARATOR = lazy_compile(r"(\sunion(?:\sall)?\s)", re.ASCII)
_ORDER_BY_RE = lazy_compile(r"\border by ", re.ASCII | re.IGNORECASE)
_SPACE_ASC_RE = lazy_compile(r"\sasc", re.ASCII | re.IGNORECASE)
_ASC_TRIGGER = rf"\border by .*[{_WS}]asc"


def _fold_unions(text: str) -> str:
    r"""pt's ``s/\b(select\s.*?)(?:(\sunion(?:\sall)?)\s\1)+/$1 \/*repeat$2*\//gi``, linear past UNION_EXACT_WORK.

    >>> _fold_unions("select a union select a union all select a union select b")
    'select a /*repeat union all*/ union select b'
    """
    if text.count("select") * len(text) <= UNION_EXACT_WORK:
        return _UNION_RE.sub(r"\1 /*repeat\2*/", text)
    pieces = _UNION_SEPARATOR.split(text)  # branch, separator, branch, ...
    kept, at = [pieces[0]], 1
    while at < len(pieces):
        separator, branch = pieces[at], pieces[at + 1]
        if branch == kept[-1] and branch.startswith("select") and branch[6:7].isspace():
            last = separator
            while at + 2 < len(pieces) and pieces[at + 3] == branch:
                at += 2
                last = pieces[at]
            kept[-1] = f"{branch} /*repeat{last.rstrip(_WS_CHARS)}*/"
            kept.append("")  # the folded branch ends the run: no second fold onto its marker
        else:
            kept += [separator, branch]
        at += 2
    return "".join(kept)


def _drop_asc(text: str) -> str:
    r"""pt's ``if (m/\bORDER BY /gi) { 1 while s/\G(.+?)\s+ASC/$1/gi && pos }``: one anchored pass after the first "ORDER BY ".

    Each step drops the first whitespace run followed by "asc" (at least one character on), found
    by a search for one whitespace character and "asc" then a walk back over the run: linear, where
    the pattern itself retries the run from each of its characters.

    >>> _drop_asc("select a from t order by a asc, b asc")
    'select a from t order by a, b'
    """
    found = _ORDER_BY_RE.search(text)
    if found is None:
        return text
    pos, kept = found.end(), [text[: found.end()]]
    while (step := _SPACE_ASC_RE.search(text, pos + 1)) is not None:
        run_start = step.start()
        while run_start > pos + 1 and text[run_start - 1] in _WS_CHARS:
            run_start -= 1
        if "\n" in text[pos:run_start]:  # "." stops at a line break
            break
        kept.append(text[pos:run_start])
        pos = step.end()
    kept.append(text[pos:])
    return "".join(kept)


def _tail(text: str) -> str:
    text = _fold_unions(text)
    text = _apply((_LIMIT,), text)
    return _drop_asc(text)
