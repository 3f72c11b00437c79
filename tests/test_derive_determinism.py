"""Derive gives the same floats on every run: a group_by's row order (not fixed unless asked) must
never decide the order of a float sum or mean (the byte-for-byte report check relies on it)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from dbdiag.derive import derive_all
from dbdiag.pipeline import analyze
from tests.conftest import skip_without_corpus

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"
RUNS = 12

# perf report with a pid column: 85.98 vs 85.98000000000002 in the profile's weights (summed per
# category from rows a group_by left in any order); mpstat -H: irq_pct 0.57 or 0.56 per CPU (a
# unique() before the mean).
INPUTS = [REPO / "fixtures/perf/perf-report-pid.txt", CORPUS / "mpstat/sysstat__expected.mpstat-H.txt"]


def _fingerprint(tables: dict[str, pl.DataFrame]) -> str:
    derived = derive_all(tables)
    frames = {name: frame.write_json() for name, frame in sorted(derived.tables.items())}
    return json.dumps({"metrics": derived.metrics, "tables": frames}, sort_keys=True, default=str)


@pytest.mark.parametrize("path", INPUTS, ids=lambda p: p.name)
def test_derive_is_the_same_on_every_run(path: Path) -> None:
    if not path.exists():
        skip_without_corpus()  # the one reason every corpus test gives
    tables = analyze(path).tables
    seen = {_fingerprint(tables) for _ in range(RUNS)}
    assert len(seen) == 1, f"{len(seen)} different derive results in {RUNS} runs of {path.name}"
