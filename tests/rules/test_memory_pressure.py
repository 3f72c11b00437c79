"""memory-pressure on real captures made here (``fixtures/memory/make_memory_capture.sh``): MariaDB with a 768 MiB
buffer pool in a cgroup of 100 MiB (its pages go to a zram swap and back), and the same run without the limit.
The rates asserted are recomputed from the captures' own /proc/vmstat and /proc/pressure files."""

from __future__ import annotations

import tarfile
from datetime import datetime

import pytest

from dbdiag.findings import Status
from dbdiag.pipeline import analyze
from tests.conftest import REPO

MEMORY = REPO / "fixtures" / "memory"


def _snapshot(archive, name: str) -> tuple[datetime, dict[str, str]]:
    """(the TS line's time, the file's "name value" pairs), read here independently of the parsers."""
    with tarfile.open(archive) as tar:
        lines = tar.extractfile(name).read().decode().splitlines()
    when = datetime.fromtimestamp(float(lines[0].split()[1]))
    return when, dict(line.split(None, 1) for line in lines[1:] if line.strip())


def _outcome(analysis, rule_id: str):
    return next(o for o in analysis.outcomes if o.rule == rule_id)


def test_the_limited_server_swaps_and_the_finding_says_how_fast():
    archive = MEMORY / "mariadb-memory-limited.tar.gz"
    (start, before), (end, after) = (_snapshot(archive, f"capture/os/vmstat.{n}") for n in ("before", "after"))
    swap_in_kb_per_s = (int(after["pswpin"]) - int(before["pswpin"])) * 4 / (end - start).total_seconds()
    (p_start, p_before), (p_end, p_after) = (_snapshot(archive, f"capture/os/pressure-memory.{n}") for n in ("before", "after"))
    total = {side: int(values["some"].rsplit("total=", 1)[1]) for side, values in (("before", p_before), ("after", p_after))}
    stalled_pct = (total["after"] - total["before"]) / ((p_end - p_start).total_seconds() * 1e6) * 100

    outcome = _outcome(analyze(archive), "memory-pressure")
    assert outcome.status is Status.FIRED and swap_in_kb_per_s > 1000
    finding = outcome.findings[0]
    assert finding.impact["swap_in_kb_per_s"] == pytest.approx(swap_in_kb_per_s, rel=0.01)
    assert finding.impact["psi_some_pct"] == pytest.approx(stalled_pct, abs=0.05)
    assert f"{swap_in_kb_per_s:,.0f} KiB/s swapped in" in finding.title
    assert "a cgroup or container limit is what is full" in finding.title  # the host had GiBs free
    assert "innodb_buffer_pool_size" in finding.remediation and "shared_buffers" not in finding.remediation


def test_the_same_run_without_the_limit_passes():
    outcome = _outcome(analyze(MEMORY / "mariadb-memory-unlimited.tar.gz"), "memory-pressure")
    assert outcome.status is Status.PASSED and "swap-in 0.0 KiB/s" in outcome.measured


def test_the_timeline_shows_the_swapping_vmstat_saw():
    analysis = analyze(MEMORY / "mariadb-memory-limited.tar.gz")
    series = {s["series"]: s for s in analysis.derived.metrics["timeline"]["series"]}
    swap_in = [value for _, value in series["swap_in"]["points"] if value is not None]
    vmstat = analysis.derived.metrics["memory_pressure"]["vmstat"]
    assert series["swap_in"]["unit"] == "KiB/s" and len(swap_in) == vmstat["samples"]  # one-second windows, one line each
    assert max(swap_in) == vmstat["swap_in_kb_per_s_max"] and min(swap_in) > 0
    assert series["runnable"]["unit"] == "tasks"
