"""A rule module reads its inputs from ``RuleInput`` (tables and metrics by name), never by importing
derive or parsers: what two rules need is a derived table (``dbdiag.derive.DERIVATIONS``)."""

from __future__ import annotations

import ast
from pathlib import Path

RULES = Path(__file__).resolve().parent.parent.parent / "rules"
FORBIDDEN = ("dbdiag.derive", "dbdiag.parsers")

def imported_modules(source: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` names, anywhere in the module (functions too).

    >>> sorted(imported_modules("import os\\nfrom dbdiag.derive import cpu\\ndef f():\\n    from dbdiag.parsers.base import X"))
    ['dbdiag.derive', 'dbdiag.parsers.base', 'os']
    """
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "dbdiag":  # from dbdiag import derive
                found.update(f"dbdiag.{alias.name}" for alias in node.names)
    return found


def offenders() -> set[str]:
    return {
        str(path.relative_to(RULES))
        for path in RULES.rglob("*.py")
        if any(name == f or name.startswith(f + ".") for name in imported_modules(path.read_text()) for f in FORBIDDEN)
    }


def test_no_rule_module_imports_derive_or_parsers() -> None:
    found = offenders()
    assert not found, f"rule modules importing {' or '.join(FORBIDDEN)}: {sorted(found)} (make it a derived table)"


def test_the_walk_finds_the_rule_modules() -> None:
    assert len(list(RULES.rglob("*.py"))) > 30


def test_the_check_sees_an_import() -> None:
    assert imported_modules("from dbdiag import derive") >= {"dbdiag.derive"}
    assert imported_modules("import dbdiag.parsers.mpstat_text as m") == {"dbdiag.parsers.mpstat_text"}
