"""The real capture pairs of ``fixtures/compare`` (README.md there says how each was made), for the compare tests:
each capture analyzed once per module, two reports compared and checked against the compare schema."""

from __future__ import annotations

import json

import jsonschema

from dbdiag.compare.document import compare_documents
from dbdiag.pipeline import Options, analyze
from dbdiag.report import build_document
from tests.conftest import REPO

PAIRS = REPO / "fixtures" / "compare"
SCHEMA = json.loads((REPO / "analyzer/schema/compare.schema.json").read_text(encoding="utf-8"))
MAX_FIXTURE_BYTES = 300_000  # a fixture capture stays small (tests/test_compare_fixtures.py)


def reports_of(*names: str) -> dict[str, dict]:
    """Each named capture's analyze report document."""
    return {name: build_document(analyze(PAIRS / f"{name}.tar.gz", Options())) for name in names}


def compared(baseline: dict, capture: dict) -> dict:
    """The compare document of two reports, valid against the schema."""
    document = compare_documents(baseline, capture)
    jsonschema.validate(document, SCHEMA)
    return document
