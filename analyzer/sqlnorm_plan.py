"""Literal redaction of plan texts (auto_explain, TiDB, MariaDB explain) and plan filter texts."""

from __future__ import annotations

import re


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
