"""Golden files for parser output: one compact file per parser kind, regenerated, never hand-edited.

Run ``pytest --update-goldens`` to rewrite them after a deliberate change, then read the diff.

``tests/golden/<kind>.jsonl`` holds one section per case (``tests/parser_cases.py``), in the order of
``tests/parsers/cases/<kind>.cases``: a header object (the case's input, records, warnings, notes),
then per table a schema object and one JSON array per row, so a changed value is one changed line.
A column whose value is the same in every row is given once in the schema line (``same``) and left
out of the rows; a value of 3 characters or more (as JSON) equal to the one in the row above is
written ``"^"``. Sample::

    {"case":"capture:mariadb-sysbench-debian12/capture/db/mariadb-error.log","records":1,"warnings":[],"notes":[]}
    {"table":"event","schema":{"ts":"Datetime(time_unit='us', time_zone='UTC')","kind":"String","source":"String"},"height":2,"same":{"source":"capture/db/mariadb-error.log"}}
    ["2026-11-29 19:12:12.000000+00:00","start"]
    ["^","stop"]
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import polars as pl

from dbdiag.parsers.base import ParseResult

GOLDEN_DIR = Path(__file__).resolve().parent / "golden"
DITTO = "^"
DITTO_MIN_CHARS = 3  # shorter values are written out: "^" would save nothing


def _frame_as_json(frame: pl.DataFrame) -> dict:
    rows = frame.with_columns(
        [pl.col(c).cast(pl.String) for c, t in frame.schema.items() if t.is_temporal()]
    ).rows()
    return {"schema": {c: str(t) for c, t in frame.schema.items()}, "height": frame.height, "rows": rows}


def result_as_json(result: ParseResult) -> dict:
    """The result as plain data: what a golden section holds (``decode_golden`` gives it back)."""
    return {
        "records": result.records,
        "warnings": [w.as_text() for w in result.warnings],
        "notes": list(result.notes),
        "tables": {name: _frame_as_json(frame) for name, frame in sorted(result.tables.items())},
    }


def as_plain(result: ParseResult) -> dict:
    """``result_as_json`` as JSON reads it back (tuples as lists, odd values as their ``str``)."""
    return json.loads(json.dumps(result_as_json(result), default=str))


def _line(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _dittoed(value: object, above: object) -> bool:
    return type(value) is type(above) and value == above and len(_line(value)) >= DITTO_MIN_CHARS


def _table_lines(name: str, table: dict) -> list[str]:
    columns, rows = list(table["schema"]), table["rows"]
    same = [i for i in range(len(columns)) if len(rows) > 1 and all(row[i] == rows[0][i] for row in rows)]
    head = {"table": name, "schema": table["schema"], "height": table["height"]}
    if same:
        head["same"] = {columns[i]: rows[0][i] for i in same}
    lines, above = [_line(head)], None
    for row in rows:
        kept = [value for i, value in enumerate(row) if i not in same]
        shown = kept if above is None else [DITTO if _dittoed(v, a) else v for v, a in zip(kept, above)]
        lines.append(_line(shown))
        above = kept
    return lines


def encode_section(key: str, data: dict) -> list[str]:
    """The lines of one case's section; raises when they would not decode to ``data``."""
    lines = [_line({"case": key, "records": data["records"], "warnings": data["warnings"], "notes": data["notes"]})]
    for name, table in data["tables"].items():
        lines.extend(_table_lines(name, table))
    if decode_golden("\n".join(lines)) != {key: data}:  # a literal "^" where a ditto would go
        raise ValueError(f"golden section {key!r} does not encode reversibly")
    return lines


def _row(shown: list, above: list | None, columns: list[str], same: dict) -> list:
    kept = shown if above is None else [a if v == DITTO else v for v, a in zip(shown, above)]
    values = iter(kept)
    return [same[c] if c in same else next(values) for c in columns], kept


def decode_golden(text: str) -> dict[str, dict]:
    """Golden text back to ``{case: result_as_json data}`` (rows as lists, as JSON gives them)."""
    sections: dict[str, dict] = {}
    rows: list = []
    columns: list[str] = []
    same: dict = {}
    above = None
    for line in text.splitlines():
        value = json.loads(line)
        if isinstance(value, list):
            row, above = _row(value, above, columns, same)
            rows.append(row)
        elif "case" in value:
            current = {k: value[k] for k in ("records", "warnings", "notes")} | {"tables": {}}
            sections[value["case"]] = current
        else:
            rows, columns, same, above = [], list(value["schema"]), value.get("same", {}), None
            current["tables"][value["table"]] = {"schema": value["schema"], "height": value["height"], "rows": rows}
    return sections


def golden_path(kind: str) -> Path:
    return GOLDEN_DIR / f"{kind}.jsonl"


def read_golden(kind: str) -> dict[str, dict]:
    """The sections of ``<kind>.jsonl``, decoded once per version of the file (do not change them)."""
    path = golden_path(kind)
    return _decoded(path, path.stat().st_mtime_ns) if path.exists() else {}


@cache
def _decoded(path: Path, mtime_ns: int) -> dict[str, dict]:
    return decode_golden(path.read_text(encoding="utf-8"))


def write_golden_section(kind: str, key: str, data: dict, order: list[str]) -> None:
    """Put ``key``'s section into ``<kind>.jsonl``; sections are kept in ``order`` and the ones not in it dropped."""
    path = golden_path(kind)
    sections = decode_golden(path.read_text(encoding="utf-8")) if path.exists() else {}  # not the cache: written a moment ago
    sections[key] = data
    lines = [line for name in order if name in sections for line in encode_section(name, sections[name])]
    golden_path(kind).write_text("\n".join(lines) + "\n", encoding="utf-8")


def check_golden(kind: str, key: str, result: ParseResult, update: bool, order: list[str] | None = None) -> None:
    """Compare ``result`` with section ``key`` of ``tests/golden/<kind>.jsonl`` (or write it when ``update``).

    ``order``: every section the file should hold, in file order (default: the file's own, plus ``key``).
    """
    actual = as_plain(result)
    if update:
        existing = list(decode_golden(golden_path(kind).read_text(encoding="utf-8"))) if golden_path(kind).exists() else []
        write_golden_section(kind, key, actual, order or (existing + [key] if key not in existing else existing))
        return
    expected = read_golden(kind).get(key)
    if expected is None:
        raise AssertionError(f"golden {kind}.jsonl has no section {key!r}; run pytest --update-goldens and review it")
    assert actual == expected, f"parser output differs from golden {kind}.jsonl section {key!r}"
