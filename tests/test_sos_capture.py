"""A real ``sos report`` archive (``fixtures/sos``): every member is read, or named in the inventory with what
it is; sos's own logs are never given to a parser (its ui.log reads like a PostgreSQL log)."""

from __future__ import annotations

import pytest

from dbdiag.pipeline import analyze
from tests.conftest import REPO

CAPTURE = REPO / "fixtures" / "sos" / "sosreport-numa-memory-block-logs.tar.xz"


@pytest.fixture(scope="module")
def analysis():
    return analyze(CAPTURE)


def test_every_member_is_read_or_said_what_it_is(analysis):
    assert len(analysis.inputs) > 600
    for record in analysis.inputs:
        assert record.kind or record.skipped or record.notes, record.path
    kinds = {record.path.split("/", 1)[1]: record.kind for record in analysis.inputs if record.kind}
    assert kinds["proc/meminfo"] == "proc-meminfo" and kinds["proc/diskstats"] == "proc-diskstats"
    assert kinds["sos_commands/numa/numactl_--hardware"] == "numactl-hardware"


def test_sos_own_files_are_not_parsed(analysis):
    own = [r for r in analysis.inputs if "/sos_logs/" in r.path or "/sos_reports/" in r.path]
    assert own and all(r.kind is None for r in own)
    assert all(any("sos report's own" in note for note in r.notes) for r in own)
    assert "postgresql-log" not in {r.kind for r in analysis.inputs}


def test_a_command_sos_ran_is_named_by_its_words(analysis):
    notes = {r.path.split("/", 1)[1]: r.notes for r in analysis.inputs}
    lsblk = next(path for path in notes if path.startswith("sos_commands/block/lsblk"))
    assert notes[lsblk] == [f"sos report's {lsblk.rsplit('/', 1)[1].replace('_', ' ')} (plugin block): not read by dbdiag yet"]
