"""What sqlglot reads from a statement: its tree (within bounds), the columns its WHERE clauses compare.

sqlglot's parser is recursive (about 25 Python frames per level of parentheses: some 40 levels
exhaust Python's stack) and not linear on pathological text; statements from logs are hostile
input. :func:`parse_statement` hands it only statements within SQLGLOT_MAX_CHARS and
SQLGLOT_MAX_DEPTH (counted on the parentheses, in one pass) and turns its failures into None;
callers that walk a tree catch :func:`tree_errors` around each statement.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from dbdiag.patterns import lazy_compile
from dbdiag.sqlnorm_regex import _check_dialect
from dbdiag.vocabulary.dialects import SQLGLOT_DIALECT

if TYPE_CHECKING:  # sqlglot is imported on first use: most runs never need it
    from sqlglot import exp

SQLGLOT_MAX_CHARS = 64 * 1024  # sqlglot parses ~250 KB a second: the longest statement is parsed in about 0.25 s
SQLGLOT_MAX_DEPTH = 20  # levels of parentheses; sqlglot's recursion fails from about 38 on a shallow stack
_PARENTHESES = lazy_compile(r"[()]+")


def nesting_depth(sql: str) -> int:
    """The deepest level of parentheses (unbalanced closing ones ignored), in one pass.

    >>> nesting_depth("SELECT (1 + (2)) FROM t WHERE a IN ((3))")
    2
    """
    depth = deepest = 0
    for run in _PARENTHESES.finditer(sql):
        for char in run.group():
            depth = depth + 1 if char == "(" else max(depth - 1, 0)
            deepest = max(deepest, depth)
    return deepest


def refusal(sql: str) -> str | None:
    """Why :func:`parse_statement` does not hand ``sql`` to sqlglot (too long, too deep), or None.

    >>> refusal("SELECT " + "(" * 30 + "1" + ")" * 30)
    'nested 30 levels deep (parsed up to 20)'
    """
    if len(sql) > SQLGLOT_MAX_CHARS:
        return f"{len(sql):,} characters long (parsed up to {SQLGLOT_MAX_CHARS:,})"
    depth = nesting_depth(sql)
    return f"nested {depth} levels deep (parsed up to {SQLGLOT_MAX_DEPTH})" if depth > SQLGLOT_MAX_DEPTH else None


@lru_cache(maxsize=1)
def tree_errors() -> tuple[type[BaseException], ...]:
    """What sqlglot raises on a hostile statement: its own errors, a stack exhausted by a deep tree, and the
    plain errors its code has raised on malformed input (an index or key it expected, a None it did not)."""
    from sqlglot.errors import SqlglotError

    return (SqlglotError, RecursionError, ValueError, IndexError, KeyError, TypeError, AttributeError)


def parse_statement(sql: str | None, dialect: str = "mysql") -> exp.Expression | None:
    """sqlglot's tree of ``sql``, or None: empty, refused (see :func:`refusal`) or unreadable.

    >>> parse_statement("SELECT a FROM t").sql()
    'SELECT a FROM t'
    >>> parse_statement("SELECT a FROM t WHERE " + "(" * 500 + "a = 1" + ")" * 500) is None
    True
    """
    import sqlglot

    _check_dialect(dialect)
    if not sql or refusal(sql) is not None:
        return None
    try:
        return sqlglot.parse_one(sql, read=SQLGLOT_DIALECT[dialect])
    except tree_errors():
        return None


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
    order of appearance; [] when sqlglot cannot (or may not: :func:`parse_statement`) parse the statement.

    >>> where_columns("SELECT * FROM orders o JOIN users u ON u.id = o.user_id WHERE o.status = 'x' AND u.age > 3")
    [('orders', 'status'), ('users', 'age')]
    """
    from sqlglot import exp

    tree = parse_statement(sql, dialect)
    if tree is None:
        return []
    found: list[tuple[str | None, str]] = []
    try:
        for node in tree.find_all(exp.Select, exp.Update, exp.Delete):
            found += _where_columns_of(node)
    except tree_errors():  # a tree deeper than Python recurses
        return []
    return list(dict.fromkeys(found))
