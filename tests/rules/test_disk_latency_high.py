"""disk-latency-high on real captures made here (``fixtures/disk/make_disk_capture.sh``): MariaDB with its data
and redo log on a loop-device volume whose writes the blkio controller caps at 30 per second, and the same
volume unthrottled. The numbers asserted are recomputed from the capture's own iostat text."""

from __future__ import annotations

import tarfile

import pytest

from dbdiag.findings import Status
from dbdiag.pipeline import analyze
from dbdiag.rules.disk import disk_latency_high
from dbdiag.rules.base import DOC_SECTIONS, split_doc_sections
from tests.conftest import REPO

DISK = REPO / "fixtures" / "disk"
THROTTLED, HEALTHY = DISK / "mariadb-loop-throttled.tar.gz", DISK / "mariadb-loop-healthy.tar.gz"


def _member(archive, name: str) -> str:
    with tarfile.open(archive) as tar:
        return tar.extractfile(name).read().decode()


def _iostat_rows(text: str, device: str) -> list[dict[str, float]]:
    """The device's rows of iostat -x text, by header name (a reading of our own, not the parser's)."""
    rows, names = [], None
    for line in text.splitlines():
        cells = line.split()
        if cells[:1] == ["Device"]:
            names = cells[1:]
        elif names and cells[:1] == [device]:
            rows.append(dict(zip(names, map(float, cells[1:]))))
    return rows


def _outcome(analysis, rule_id: str):
    return next(o for o in analysis.outcomes if o.rule == rule_id)


@pytest.fixture(scope="module")
def throttled():
    return analyze(THROTTLED)


def test_the_throttled_log_volume_is_named_first_with_what_it_holds(throttled):
    outcome = _outcome(throttled, "disk-latency-high")
    assert outcome.status is Status.FIRED and len(outcome.findings) == 1
    finding = outcome.findings[0]
    assert finding.subject == "loop0" and finding.severity.value == "critical"
    # our own reading of the same iostat text, each report's await weighted by its requests; derive leaves out a
    # member's first report (without -y it is the average since boot)
    rows = _iostat_rows(_member(THROTTLED, "capture/os/iostat-x.txt"), "loop0")[1:]
    busy = [r for r in rows if r["r/s"] + r["w/s"] + r["d/s"] >= 5]
    mean = sum(r["w/s"] * r["w_await"] + r["r/s"] * r["r_await"] for r in busy) / sum(r["w/s"] + r["r/s"] for r in busy)
    assert finding.impact["await_ms"] == pytest.approx(mean, rel=0.02) and finding.impact["await_ms"] > 15
    assert finding.impact["util_pct"] > 95 and finding.impact["saturated"] is True
    assert "which holds the data directory, the redo log" in finding.title and "saturated" in finding.title
    # the commits wait on it: their share of DB time is the finding's cost
    assert finding.impact["share_of_db_time"] > 0.9 and "COMMIT holds" in finding.impact["description"]
    assert "SET GLOBAL innodb_flush_log_at_trx_commit = 2;" in finding.remediation and "losetup -l" in finding.remediation
    assert "fio --name=logsync --directory=/tmp/" in finding.remediation
    # vda, the disk under the volume's file, is fast: not judged slow
    assert "vda (hdd): await 0." in outcome.measured


def test_the_disk_is_the_verdict_of_the_throttled_capture(throttled):
    from dbdiag import report

    document = report.build_document(throttled)
    assert document["verdict"]["headline"].startswith("Critical: loop0")
    first = document["findings"][0]
    assert first["rule"] == "disk-latency-high"
    # COMMIT holds the DB time because of the volume: the dominant-statement finding is linked to it, not a second cause
    assert [r for r in first["related"] if r.startswith("dominant-statement/")]


def test_the_same_volume_unthrottled_fires_nothing():
    analysis = analyze(HEALTHY)
    outcome = _outcome(analysis, "disk-latency-high")
    assert outcome.status is Status.PASSED, outcome.measured
    loop0 = next(d for d in analysis.derived.metrics["disks"] if d["device"] == "loop0")
    assert loop0["await_ms"] < 1 and loop0["holds_log"] is True and loop0["busy_reports"] >= 10


def test_the_rule_documents_its_sections():
    sections = split_doc_sections(disk_latency_high.RULE.doc)
    assert all(sections.get(name) for name in DOC_SECTIONS)


@pytest.mark.parametrize("order", ["healthy first", "throttled first"])
def test_compare_names_the_slow_volume_as_why_throughput_fell(order):
    from dbdiag.pipeline import Options
    from dbdiag.report import build_document
    from tests.compare_fixtures import compared

    healthy, throttled = (build_document(analyze(path, Options())) for path in (HEALTHY, THROTTLED))
    baseline, capture = (healthy, throttled) if order == "healthy first" else (throttled, healthy)
    verdict = compared(baseline, capture)["verdict"]
    slow = "capture" if order == "healthy first" else "baseline"
    assert verdict["slow_side"] == slow
    # both sides' sysbench summaries: the throttled run's TPS is a few percent of the other's
    assert verdict["outcome"]["key"].startswith("tps (sysbench")
    assert verdict["outcome"][slow] < 0.05 * verdict["outcome"]["capture" if slow == "baseline" else "baseline"]
    first = verdict["explained"][0]
    assert first["key"] == "disk-latency-high/loop0"
    assert "sql:commit | DB time per second" in first["effects"]
    assert any("innodb_flush_log_at_trx_commit" in r["text"] for r in first["remediation"])


def test_the_timeline_shows_each_busy_device_over_time(throttled):
    series = {s["series"]: s for s in throttled.derived.metrics["timeline"]["series"]}
    await_loop0, util_loop0 = series["disk_await[loop0]"], series["disk_util[loop0]"]
    assert (await_loop0["unit"], util_loop0["unit"]) == ("ms", "%")
    values = [value for _, value in await_loop0["points"] if value is not None]
    assert len(values) >= 5 and min(values) > 15 and max(values) < 30  # every window of the run, as in the finding
    assert all(0 <= value <= 100 for _, value in util_loop0["points"])
    assert max(value for _, value in series["disk_await[vda]"]["points"]) < 1
