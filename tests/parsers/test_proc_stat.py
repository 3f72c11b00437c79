"""/proc/stat parser and its metric: goldens on a public sample and on this machine's own /proc/stat,
snapshots with pt-stalk time lines, and what other parsers must not take for it."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.proc_stat import proc_stat_rates
from dbdiag.parsers import proc_interrupts, proc_softirqs, proc_stat, proc_vmstat
from dbdiag.parsers.base import ParseContext, ParseError

LIVE = Path("/proc/stat")


def _counters(text: str, source: str = "os/stat") -> pl.DataFrame:
    return proc_stat.parse(text, ParseContext(source=source)).tables[t.PROC_STAT_COUNT]


def test_jc_sample_gives_every_counter(corpus: Path) -> None:
    text = (corpus / "proc" / "jc__linux-proc__stat").read_text()
    assert proc_stat.detect(text[:4096], "stat") == 0.95
    result = proc_stat.parse(text, ParseContext(source="proc/stat"))
    assert result.warnings == [] and result.records == 1
    values = dict(result.tables[t.PROC_STAT_COUNT].select("counter", "value").rows())
    # the numbers of the file's own lines (intr and softirq: their first number, the total)
    assert values == {"intr": 2496709, "ctxt": 4622716, "btime": 1662154781, "processes": 9831, "procs_running": 1,
                      "procs_blocked": 0, "softirq": 3478985}


@pytest.mark.skipif(not LIVE.exists(), reason="no /proc/stat on this machine")
def test_this_machines_proc_stat_twice_gives_its_context_switches() -> None:
    first, second = LIVE.read_text(), LIVE.read_text()
    text = f"TS 1700000000.000000000 2023-11-14 22:13:20\n{first}TS 1700000002.500000000 2023-11-14 22:13:22\n{second}"
    frame = _counters(text)
    ctxt = frame.filter(pl.col("counter") == "ctxt").sort("snapshot")
    expected = [int(line.split()[1]) for chunk in (first, second) for line in chunk.splitlines() if line.startswith("ctxt ")]
    assert ctxt["value"].to_list() == expected
    assert ctxt["ts"].to_list() == [datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc),
                                    datetime(2023, 11, 14, 22, 13, 22, 500000, tzinfo=timezone.utc)]
    rates = proc_stat_rates({t.PROC_STAT_COUNT: frame})
    assert rates["seconds"] == 2.5 and rates["context_switches"] == expected[1] - expected[0]
    assert rates["context_switches_per_s"] == pytest.approx((expected[1] - expected[0]) / 2.5, abs=0.01)


def test_two_members_before_and_after_are_one_window() -> None:
    before = "TS 1700000000.0 2023-11-14 22:13:20\ncpu  1 2 3 4 5 6 7 0 0 0\nctxt 1000\nprocesses 50\nprocs_running 3\n"
    after = "TS 1700000060.0 2023-11-14 22:14:20\ncpu  9 9 9 9 9 9 9 0 0 0\nctxt 61000\nprocesses 110\nprocs_running 9\n"
    frame = pl.concat([_counters(before, "os/stat.before"), _counters(after, "os/stat.after")])
    rates = proc_stat_rates({t.PROC_STAT_COUNT: frame})
    assert (rates["first_source"], rates["last_source"]) == ("os/stat.before", "os/stat.after")
    assert (rates["context_switches_per_s"], rates["forks_per_s"], rates["procs_running_max"]) == (1000.0, 1.0, 9)
    assert rates["interrupts"] is None  # no intr line: not 0


def test_a_reboot_between_snapshots_is_no_negative_growth() -> None:
    frame = _counters("ctxt 5000\nbtime 1700000000\nctxt 20\nbtime 1700009000\n")
    assert proc_stat_rates({t.PROC_STAT_COUNT: frame})["context_switches"] == 0
    assert proc_stat_rates({t.PROC_STAT_COUNT: _counters("ctxt 5000\n")}) is None  # one snapshot: since boot, not the capture


def test_unknown_lines_warn_and_cpu_rows_do_not() -> None:
    result = proc_stat.parse("cpu  1 2 3 4\ncpu0 1 2 3 4\nctxt 7\nsomething else\n", ParseContext(source="s"))
    assert [(w.line, w.reason) for w in result.warnings] == [(4, "not a /proc/stat line; skipped: 'something else'")]
    with pytest.raises(ParseError, match="no /proc/stat lines"):
        proc_stat.parse("cpu  1 2 3 4\n", ParseContext(source="s"))


def test_neighbours_do_not_take_each_other(corpus: Path) -> None:
    stat = (corpus / "proc" / "jc__linux-proc__stat").read_text()[:4096]
    for spec in (proc_vmstat.SPEC, proc_softirqs.SPEC, proc_interrupts.SPEC):
        assert spec.detect(stat, "stat") < 0.5, spec.kind
    for name in ("jc__linux-proc__softirqs", "jc__linux-proc__interrupts"):
        assert proc_stat.detect((corpus / "proc" / name).read_text()[:4096], name) == 0.0
    assert proc_stat.detect("nr_free_pages 944094\nnuma_hit 6192709\npgfault 1\n", "vmstat") == 0.0


@pytest.mark.parametrize("text", ["", "\x00\x01binary\xff", "ctxt\n", "ctxt abc\n", "procs_running -1\n", "cpu  1 2 3\n" * 50, "<html>ctxt 5</html>\n"])
def test_proc_stat_hostile_inputs(text: str) -> None:
    with pytest.raises(ParseError):
        proc_stat.parse(text, ParseContext(source="stat"))
