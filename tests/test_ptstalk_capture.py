"""A real pt-stalk collection (``fixtures/ptstalk``): every file it wrote is read, or named in the inventory
with what it is and why dbdiag does not judge it; its iostat and diskstats feed the disks metric."""

from __future__ import annotations

import tarfile

import pytest

from dbdiag.pipeline import analyze
from tests.conftest import REPO

CAPTURE = REPO / "fixtures" / "ptstalk" / "mariadb-ptstalk.tar.gz"
# what pt-stalk writes that dbdiag parses today, by the file's suffix
READ = {"iostat": "iostat-text", "iostat-overall": "iostat-text", "diskstats": "proc-diskstats", "mpstat": "mpstat-text",
        "mpstat-overall": "mpstat-text", "interrupts": "proc-interrupts", "procstat": "proc-stat", "procvmstat": "proc-vmstat",
        "sysctl": "sysctl", "variables": "mysql-variables", "mysqladmin": "mysql-variables",  # mysqladmin ext: status rows
        "vmstat": "vmstat", "vmstat-overall": "vmstat", "meminfo": "proc-meminfo"}


@pytest.fixture(scope="module")
def analysis():
    return analyze(CAPTURE)


def test_every_file_is_read_or_said_what_it_is(analysis):
    with tarfile.open(CAPTURE) as archive:
        files = sorted(m.name for m in archive.getmembers() if m.isfile())
    assert len(files) == 31
    records = {record.path: record for record in analysis.inputs}
    for name in files:
        record, what = records[name], name.split("-", 1)[1]
        if what in READ:
            assert record.kind == READ[what] and record.records > 0, name
        elif record.kind is None:
            assert any("pt-stalk's" in note or "not analysis input" in note for note in record.notes), (name, record.notes)


def test_its_iostat_gives_the_disks_without_the_report_since_boot(analysis):
    disks = {d["device"]: d for d in analysis.derived.metrics["disks"]}
    vda = disks["vda"]
    assert vda["measured_by"] == "iostat" and vda["busy_reports"] >= 8 and vda["await_ms"] < 5
    # iostat -dx 1 N prints the average since boot first: loop0's earlier throttled runs (30 ms) are not in it
    assert (disks["loop0"]["await_ms"] or 0.0) < 5
    outcome = next(o for o in analysis.outcomes if o.rule == "disk-latency-high")
    assert outcome.findings == ()
