"""``dbdiag compare`` on two real MariaDB sysbench runs made as an unseen check (fixtures/compare/README.md, copies
G and H): the redo log not flushed at commit (``innodb_flush_log_at_trx_commit = 0``) against flushed with the
binary log synced too (``= 1``, ``sync_binlog = 1``, ``log_bin``). The durability settings are named first, in both
orders, with the commits' time as their effect; before, compare found "no difference that explains it"."""

from __future__ import annotations

import json

import jsonschema
import pytest

from dbdiag.compare.document import compare_documents
from dbdiag.pipeline import Options, analyze
from dbdiag.report import build_document
from tests.conftest import REPO

PAIRS = REPO / "fixtures" / "compare"
SCHEMA = json.loads((REPO / "analyzer/schema/compare.schema.json").read_text(encoding="utf-8"))
LAZY, SYNCED = "mariadb-sysbench-flush-0", "mariadb-sysbench-flush-1-binlog"
DURABILITY = {"mariadb variable innodb_flush_log_at_trx_commit", "mariadb variable sync_binlog", "mariadb variable log_bin"}


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return {name: build_document(analyze(PAIRS / f"{name}.tar.gz", Options())) for name in (LAZY, SYNCED)}


def test_the_pair_is_small() -> None:
    for name in (LAZY, SYNCED):
        assert (PAIRS / f"{name}.tar.gz").stat().st_size < 300_000


@pytest.mark.parametrize("order", ["lazy-first", "synced-first"])
def test_durability_settings_explain_the_commit_time(reports, order: str) -> None:
    baseline, capture = (LAZY, SYNCED) if order == "lazy-first" else (SYNCED, LAZY)
    slow_side = "capture" if order == "lazy-first" else "baseline"
    document = compare_documents(reports[baseline], reports[capture])
    jsonschema.validate(document, SCHEMA)
    verdict = document["verdict"]
    assert verdict["slow_side"] == slow_side
    assert {e["key"] for e in verdict["explained"]} == DURABILITY
    first = verdict["explained"][0]
    assert first["key"] == "mariadb variable innodb_flush_log_at_trx_commit" and first[slow_side] == "1"
    assert "sql:commit | DB time per second" in first["effects"]
    commit = next(d for d in document["differences"] if d["key"] == "commit | median")
    fast_side = "baseline" if slow_side == "capture" else "capture"
    assert commit[slow_side] > 10 * commit[fast_side]
    # a setting moves the commits' time, not every statement's
    assert not [e for e in first["effects"] if e.startswith("sql:") and not e.startswith("sql:commit |")]
    # the binary log's index file is a path of the run, no setting
    assert not [d for d in document["differences"] if d["key"].endswith("log_bin_index")]
