"""Golden files for parser output: one JSON file per (parser kind, input), regenerated, never hand-edited.

Run ``pytest --update-goldens`` to rewrite them after a deliberate change, then read the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from dbdiag.parsers.base import ParseResult

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"


def _frame_as_json(frame: pl.DataFrame) -> dict:
    rows = frame.with_columns(
        [pl.col(c).cast(pl.String) for c, t in frame.schema.items() if t.is_temporal()]
    ).rows()
    return {"schema": {c: str(t) for c, t in frame.schema.items()}, "height": frame.height, "rows": rows}


def result_as_json(result: ParseResult) -> dict:
    return {
        "records": result.records,
        "warnings": [w.as_text() for w in result.warnings],
        "notes": list(result.notes),
        "tables": {name: _frame_as_json(frame) for name, frame in sorted(result.tables.items())},
    }


def check_golden(name: str, result: ParseResult, update: bool) -> None:
    """Compare ``result`` with ``tests/golden/<name>.json`` (or write it when ``update``)."""
    path = GOLDEN_DIR / f"{name}.json"
    actual = json.loads(json.dumps(result_as_json(result), default=str))
    if update or not path.exists():
        if not update:
            raise AssertionError(f"golden {path.name} is missing; run pytest --update-goldens and review it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(actual, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        return
    expected = json.loads(path.read_text(encoding="utf-8"))
    assert actual == expected, f"{name}: parser output differs from golden {path.name}"
