"""No Python function runs inside a polars expression (``map_elements``, ``map_batches``,
``map_groups``, ``map_rows``) anywhere in dbdiag.

Derivations, rules and big-log pieces run on threads. A Python function inside an expression runs on
polars' own threads and needs the GIL there; a thread that holds the GIL in a polars call that waits
for those threads (``Series.median`` did) then never gets it back. A clean-clone CI run hung for good
so (py-spy: the derive threads on rayon latches, the two rayon workers waiting for the GIL). Python
work is done on distinct values in the calling thread instead and mapped with ``replace_strict``.
"""

from __future__ import annotations

import ast

from tests.conftest import REPO

UDF_METHODS = {"map_elements", "map_batches", "map_groups", "map_rows"}


def udf_calls(source: str) -> list[int]:
    """Lines of ``source`` that call one of UDF_METHODS."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in UDF_METHODS
    ]


def test_no_python_function_inside_a_polars_expression() -> None:
    found = []
    for folder in ("analyzer", "rules"):
        for path in sorted((REPO / folder).rglob("*.py")):
            found += [f"{path.relative_to(REPO)}:{line}" for line in udf_calls(path.read_text(encoding="utf-8"))]
    assert found == []


def test_the_scan_sees_a_call() -> None:
    assert udf_calls("x = pl.col('a').map_elements(str)\ny = frame.map_rows(len)\n") == [1, 2]
