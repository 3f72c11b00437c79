"""Literal redaction of plan texts (auto_explain, TiDB, MariaDB explain) and plan filter texts.

A plan mixes the statement's values (``Filter: (amount + 42 > 0)``, TiDB's ``handle:123``,
``eq(t.a, 7)``, projected constants) with the engine's estimates and timings (``rows=1``,
``time:3.77s``). Where the layout says which part is an expression, every number there goes:
a PostgreSQL condition line (``Filter:``, ``Index Cond:``, ``Output:``...), a TiDB row's
operator-info column, a plan node's filter text. Elsewhere numbers go where they are operands
(after a spaced operator, inside a call or a range). Quoted strings go everywhere; one that
never closes runs to the end.
"""

from __future__ import annotations

import json
import re

from dbdiag.patterns import lazy_compile
from dbdiag.sqlnorm_redact import redact_literals

_QUOTED = lazy_compile(r"'(?:[^'\\]|\\.|'')*(?:'|\\?\Z)|\"(?:[^\"\\]|\\.|\"\")*(?:\"|\\?\Z)", re.DOTALL)
# Any number that is not part of a name (t1, Column#5, $1, TableFullScan_5) or of a version.
_ANY_NUMBER = lazy_compile(r"(?<![\w#$.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
# Numbers that are compared with or passed as values: after a spaced comparison or arithmetic
# operator (plans print estimates unspaced: rows=1), inside a TiDB function call eq(col, 42) /
# in(col, 1, 2), inside a TiDB range [1,5) and in IN lists; before a separator, an operator or a cast.
_PLAN_VALUE = lazy_compile(
    r"(?:(?<=[=<>+*/%-] )|(?<=[(,\[] )|(?<=[(,\[]))-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?"
    r"(?=\s*[,)\]]|\s*$|\s+(?:AND|OR|and|or)\b|\s+[=<>!+*/%|-]|::)",
    re.MULTILINE,
)
# PostgreSQL's expression lines (EXPLAIN's labels for conditions, keys and output lists). The indent is
# spaces and tabs: ``\s*`` crossed line ends, which made blank lines quadratic (10 s for 20,000).
_PG_EXPRESSION_LINE = lazy_compile(
    r"^([ \t]*(?:Index Cond|Recheck Cond|Hash Cond|Merge Cond|Join Filter|Filter|TID Cond|One-Time Filter|Run Condition"
    r"|Output|Sort Key|Group Key|Presorted Key|Cache Key|Hash Key|Order By|Conflict Filter|Sampling): )(.*)$",
    re.MULTILINE,
)
# A TiDB plan row: id, task, estRows, then operator info (tab-separated, as tidb_decode_plan prints it).
_TIDB_ROW = lazy_compile(r"^(\t?[^\t\n]*\t(?:root|(?:cop|batchCop|mpp)\[\w+\])\t[^\t\n]*\t)([^\t\n]*)", re.MULTILINE)


def redact_plan_filter(text: str) -> str:
    """An expression text (a plan node's filter or condition) with every string and number replaced by ``?``.

    >>> redact_plan_filter("Filter: ((amount + 173205080757) > 0); Index Cond: (t1.id = 42)")
    'Filter: ((amount + ?) > ?); Index Cond: (t1.id = ?)'
    >>> redact_plan_filter("eq(test.t.a, 7), in(Column#5, 1, 2)")
    'eq(test.t.a, ?), in(Column#5, ?, ?)'
    """
    return _ANY_NUMBER.sub("?", _QUOTED.sub("?", text))


def _expression_tail(match: re.Match[str]) -> str:
    return match.group(1) + redact_plan_filter(match.group(2))


def redact_plan(plan: str) -> str:
    """A plan text (auto_explain, TiDB, MariaDB explain) with the values it holds replaced by ``?``.

    Quoted strings always go; numbers go in expressions (see the module docstring), not where
    they are estimates or timings (``rows=1``, ``time:3.77s``, ``cost=0.29..8.31``).

    >>> redact_plan("Index Scan using t_pkey on t  (cost=0.29..8.31 rows=1 width=4)\\n  Index Cond: (aid = 42)")
    'Index Scan using t_pkey on t  (cost=0.29..8.31 rows=1 width=4)\\n  Index Cond: (aid = ?)'
    >>> redact_plan("Nested Loop (note = 'x'::text) (cost=0.29..8.31 rows=1)")
    'Nested Loop (note = ?::text) (cost=0.29..8.31 rows=1)'
    >>> redact_plan("range:[6228480007993755552,6228480007993755552], keep order:false")
    'range:[?,?], keep order:false'
    >>> redact_plan('Selection 8 eq(bank.t.acct_no, "6228480007993755552"), eq(t.k, 7) time:3.77s')
    'Selection 8 eq(bank.t.acct_no, ?), eq(t.k, ?) time:3.77s'
    >>> print(redact_plan("Seq Scan on t  (cost=0.00..1.10 rows=5 width=4)\\n  Filter: ((amount + 173205080757) > 0)"))
    Seq Scan on t  (cost=0.00..1.10 rows=5 width=4)
      Filter: ((amount + ?) > ?)
    >>> redact_plan("\\tBatch_Point_Get_1\\troot\\t3\\ttable:t, handle:[17 29 31], keep order:false\\t3\\ttime:1ms, loops:2")
    '\\tBatch_Point_Get_1\\troot\\t3\\ttable:t, handle:[? ? ?], keep order:false\\t3\\ttime:1ms, loops:2'
    """
    if plan.lstrip().startswith(("{", "[")) and (document := _json_document(plan)) is not None:
        try:
            return json.dumps(_redacted_json(document), indent=2)
        except RecursionError:  # decoded near the recursion limit: redacted as text
            pass
    plan = _QUOTED.sub("?", plan)
    plan = _TIDB_ROW.sub(_expression_tail, plan)
    plan = _PG_EXPRESSION_LINE.sub(_expression_tail, plan)
    return _PLAN_VALUE.sub("?", plan)


# Keys of a JSON plan whose text is the statement itself (auto_explain's log_format = json).
_JSON_SQL_KEYS = frozenset({"Query Text", "Query Parameters"})


def _json_document(plan: str) -> object | None:
    """A JSON plan's document; None when it is not JSON (cut short: redacted as text) or too deep."""
    try:
        return json.loads(plan)
    except (ValueError, RecursionError):
        return None


def _redacted_json(value: object, key: str | None = None) -> object:
    """Keys and numbers (estimates, timings, counts) as they are; every string as an expression
    (``redact_plan_filter``), the statement's text as SQL. Recursive: the decoder bounds the depth.
    """
    if isinstance(value, dict):
        return {k: _redacted_json(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [_redacted_json(item, key) for item in value]
    if isinstance(value, str):
        return redact_literals(value, "postgresql") if key in _JSON_SQL_KEYS else redact_plan_filter(value)
    return value
