"""What sqlglot reads from a statement: the columns its WHERE clauses compare."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from dbdiag.sqlnorm_regex import _SQLGLOT_DIALECT, _check_dialect

if TYPE_CHECKING:  # sqlglot is imported on first use: most runs never need it
    from sqlglot import exp


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
