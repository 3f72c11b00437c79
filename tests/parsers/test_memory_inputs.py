"""vmstat (procps) and /proc/pressure (PSI) parsers: what the goldens of the real outputs made here
(``tests/parsers/cases/vmstat.cases``, ``proc-pressure.cases``) do not show."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from dbdiag.parsers import proc_meminfo, proc_pressure, vmstat
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import REPO

MEMORY = REPO / "fixtures" / "memory"


def test_vmstat_wide_with_times_reads_every_column_in_its_unit():
    result = vmstat.parse((MEMORY / "vmstat-w-t.txt").read_text(), ParseContext("os/vmstat.txt", tz="Asia/Tokyo"))
    rows = result.tables["vmstat_sample"]
    assert result.records == rows.height == 20 and result.notes == []  # the header says UTC: --tz does not apply
    first = rows.row(0, named=True)
    assert first["ts"].tzinfo is not None and rows["ts"].is_sorted()
    assert rows["swap_in_kb_per_s"].max() > 1000 and rows["swap_used_kb"].max() > 0  # the cgroup-limited run swaps
    assert {"runnable", "context_switches_per_s", "idle_pct"} <= {c for c in rows.columns if rows[c].null_count() == 0}


def test_vmstat_repeated_headers_and_a_local_time_column():
    text = ("procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu----- -----timestamp-----\n"
            " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st                 CET\n"
            " 1  0      0 100 10 1000    0    0     1     2   30   40  1  2 97  0  0 2026-12-06 10:00:00\n"
            "procs -----------memory---------- ---swap-- -----io---- -system-- ------cpu----- -----timestamp-----\n"
            " r  b   swpd   free   buff  cache   si   so    bi    bo   in   cs us sy id wa st                 CET\n"
            " 2  1      8 90 10 1000    4    8     1     2   30   40  1  2 97  0  0 2026-12-06 10:00:01\n"
            " x  y\n")
    result = vmstat.parse(text, ParseContext("os/vmstat", tz="Europe/Paris"))
    rows = result.tables["vmstat_sample"]
    assert rows["sample"].to_list() == [0, 1] and rows["swap_out_kb_per_s"].to_list() == [0, 8]
    assert rows["ts"][0] == datetime(2026, 12, 6, 9, 0, tzinfo=timezone.utc)  # CET read through --tz
    assert [w.line for w in result.warnings] == [7] and result.notes == ["times have no zone; read as Europe/Paris (--tz)"]


def test_pressure_lines_with_and_without_their_file_prefix():
    grep = proc_pressure.parse((MEMORY / "pressure-grep.txt").read_text(), ParseContext("os/pressure.txt")).tables["pressure"]
    assert sorted(set(grep["resource"])) == ["cpu", "io", "memory"] and grep["snapshot"].n_unique() == 1
    bare = proc_pressure.parse("some avg10=1.00 avg60=0.50 avg300=0.10 total=42\n", ParseContext("os/psi.txt"))
    assert bare.tables["pressure"]["resource"].to_list() == [None] and "not judged" in bare.notes[-1]


def test_hostile_memory_inputs_raise_parse_error_only():
    junk = "".join(chr(c) for c in range(1, 256)) * 50
    for parser in (vmstat, proc_pressure, proc_meminfo):
        assert parser.SPEC.detect(junk[:8192], "vmstat.txt") < 0.5
        with pytest.raises(ParseError):
            parser.parse(junk, ParseContext("x"))
    huge = " r b swpd free buff cache si so bi bo in cs us sy id wa st\n" + " ".join(["9" * 40] * 17) + "\n"
    result = vmstat.parse(huge, ParseContext("x"))
    assert result.tables["vmstat_sample"]["runnable"].to_list() == [None] and len(result.warnings) == 17


def test_meminfo_snapshots_in_one_file_with_time_lines():
    one = (MEMORY / "meminfo.after").read_text()
    result = proc_meminfo.parse(one + one.replace("MemAvailable:", "MemAvailable: ", 1), ParseContext("os/meminfo"))
    counts = result.tables["meminfo_count"]
    assert result.records == 2 and counts["ts"].null_count() == 0
    assert counts.filter(counts["counter"] == "HugePages_Total")["value"].to_list() == [0, 0]  # a count, no kB


def test_counters_past_int64_are_left_empty_with_a_warning_and_derive_still_runs():
    from dbdiag.derive.memory_pressure import memory_pressure
    from dbdiag.parsers import proc_diskstats

    psi = proc_pressure.parse("some avg10=0.00 avg60=0.00 avg300=0.00 total=99999999999999999999\n"
                              "full avg10=0.00 avg60=0.00 avg300=0.00 total=5\n", ParseContext("os/pressure-memory"))
    assert psi.tables["pressure"]["kind"].to_list() == ["full"] and "past any counter" in psi.warnings[0].reason
    disk = proc_diskstats.parse("   8 0 sda " + " ".join(["18446744073709551616"] + ["1"] * 16) + "\n", ParseContext("os/diskstats"))
    assert disk.tables["disk_count"]["reads"].to_list() == [None] and disk.tables["disk_count"]["writes"].to_list() == [1]
    meminfo = proc_meminfo.parse("MemTotal: 99999999999999999999 kB\nMemFree: 10 kB\nMemAvailable: 10 kB\n", ParseContext("os/meminfo"))
    swap = vmstat.parse(" r b swpd free buff cache si so bi bo in cs us sy id wa st\n" + " ".join(["9" * 40] * 17) + "\n"
                        + " ".join(["9" * 40] * 17) + "\n", ParseContext("os/vmstat"))
    tables = {**meminfo.tables, **swap.tables, **psi.tables}
    summary = memory_pressure(tables)
    assert "mem_total_kb" not in summary and summary["vmstat"]["swap_in_kb_per_s_mean"] is None
