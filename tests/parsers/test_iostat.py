"""iostat -x text and JSON (``dbdiag.parsers.iostat_text``, ``iostat_json``) and /proc/mounts: what the goldens
of the real outputs made here do not show (``tests/parsers/cases/iostat-*.cases``).

``SYSSTAT10_12H`` is typed here in the layout of sysstat 10 and 11 (``Device:``, ``avgrq-sz avgqu-sz await
svctm``, ``rMB/s`` with ``-m``, the 12-hour ``%X`` of an en_US locale): this machine's sysstat is 12.6, and
public samples cannot be committed. Its numbers are made up; its columns and times are those releases'.
"""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from dbdiag.parsers import iostat_json, iostat_text, proc_diskstats, proc_mounts
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import REPO

DISK = REPO / "fixtures" / "disk"

SYSSTAT10_12H = """Linux 3.10.0-1160.el7.x86_64 (db7) \t05/31/2018 \t_x86_64_\t(8 CPU)

05/31/2018 10:04:45 AM
avg-cpu:  %user   %nice %system %iowait  %steal   %idle
           4.85    0.00   27.47   15.98    0.00   51.71

Device:         rrqm/s   wrqm/s     r/s     w/s    rMB/s    wMB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0.00     2.00   10.00  700.00     0.50    27.88     8.00     0.80    1.20    4.00    1.16   0.11  79.60
dm-0              0.00     0.00    0.00  700.00     0.00    27.88     8.00     0.78    0.11    0.00    0.11   0.11  77.87

05/31/2018 10:04:48 PM
avg-cpu:  %user   %nice %system %iowait  %steal   %idle
           4.85    0.00   27.47   15.98    0.00   51.71

Device:         rrqm/s   wrqm/s     r/s     w/s    rMB/s    wMB/s avgrq-sz avgqu-sz   await r_await w_await  svctm  %util
sda               0,00     2,00   10,00  712,00     0,50    27,90     8,00     0,82    1,25    4,00    1,21   0,11  80,10
dm-0              0.00     0.00    0.00  712.00     0.00    27.90     8.00     0.79  0.12 0.00
"""


def test_sysstat_10_columns_units_and_12_hour_times():
    result = iostat_text.parse(SYSSTAT10_12H, ParseContext("os/iostat", tz="America/New_York"))
    rows = result.tables["disk_io"]
    assert result.records == 2 and rows.height == 3  # the cut dm-0 line is skipped with a warning
    assert [w.line for w in result.warnings] == [17] and "values under" in result.warnings[0].reason
    first = rows.row(0, named=True)
    assert first["read_kb_per_s"] == pytest.approx(512.0) and first["write_kb_per_s"] == pytest.approx(27.88 * 1024)
    assert (first["await_ms"], first["queue_size"], first["svctm_ms"], first["util_pct"]) == (1.2, 0.8, 0.11, 79.6)
    assert first["ts"] == datetime(2018, 5, 31, 14, 4, 45, tzinfo=timezone.utc)  # 10:04:45 AM EDT
    pm = rows.row(2, named=True)
    assert pm["ts"] == datetime(2018, 6, 1, 2, 4, 48, tzinfo=timezone.utc) and pm["util_pct"] == 80.1  # PM, comma decimals
    assert result.notes == ["times have no zone; read as America/New_York (--tz)"]


def test_iso_times_carry_their_offset_and_every_report_is_numbered():
    result = iostat_text.parse((DISK / "iostat-x-t-iso.txt").read_text(), ParseContext("os/iostat", tz="Asia/Tokyo"))
    rows = result.tables["disk_io"]
    assert result.records == 3 and sorted(set(rows["sample"])) == [0, 1, 2]
    assert result.notes == []  # +0000 on every line: --tz does not apply
    assert rows["ts"].dt.second().n_unique() == 3


def test_json_and_text_of_one_run_give_the_same_rows():
    text = iostat_text.parse((DISK / "iostat-x-t.txt").read_text(), ParseContext("t", tz="UTC")).tables["disk_io"]
    json = iostat_json.parse((DISK / "iostat-x-t.json").read_text(), ParseContext("j", tz="UTC")).tables["disk_io"]
    columns = ["device", "w_per_s", "w_await_ms", "queue_size", "util_pct"]
    assert text.height == json.height > 20
    # two iostat processes started together: their reports are the same seconds, a tick apart at most
    loop_text, loop_json = (frame.filter(frame["device"] == "loop0").select(columns) for frame in (text, json))
    assert (loop_text["util_pct"] - loop_json["util_pct"]).abs().max() < 15
    assert json["ts"].null_count() == 0 and text["ts"].null_count() == 0


def test_not_iostat_is_refused_with_a_reason():
    with pytest.raises(ParseError, match="no iostat -x device rows"):
        iostat_text.parse("Linux 6.1 (h) \t01/01/26 \t_x86_64_\t(2 CPU)\n\navg-cpu: %user\n 1.0\n", ParseContext("x"))
    with pytest.raises(ParseError, match="sysstat.hosts"):
        iostat_json.parse('{"sysstat": {}}', ParseContext("x"))
    with pytest.raises(ParseError, match="not JSON"):
        iostat_json.parse('{"sysstat": ', ParseContext("x"))


def test_mount_output_and_escaped_mountpoints():
    text = "/dev/sdb1 on /srv/my data type xfs (rw,noatime)\n/dev/sdc /var/lib/pg\\040wal ext4 rw 0 0\ngarbage\n"
    result = proc_mounts.parse(text, ParseContext("os/mount"))
    rows = result.tables["mount"].to_dicts()
    assert [(r["device"], r["mountpoint"], r["fstype"]) for r in rows] == [("/dev/sdb1", "/srv/my data", "xfs"), ("/dev/sdc", "/var/lib/pg wal", "ext4")]
    assert [w.line for w in result.warnings] == [3]


def test_hostile_iostat_and_mounts_inputs_raise_parse_error_only():
    junk = "".join(chr(c) for c in range(1, 256)) * 50
    for parser in (iostat_text, iostat_json, proc_mounts, proc_diskstats):
        assert parser.SPEC.detect(junk[:8192], "iostat.txt") < 0.5
        with pytest.raises(ParseError):
            parser.parse(junk, ParseContext("x"))
    # a header with a huge line under it, numbers that are not numbers, a year 9999 date
    text = ("Linux 6.1 (h) \t12/31/99 \t_x86_64_\t(2 CPU)\n\n12/31/9999 23:59:59\nDevice r/s w/s r_await w_await aqu-sz %util\n"
            "sda 1 2 x 4 5 6\n" + "sdb " + "9" * 100_000 + " 1 1 1 1 1\n" + "sdc 1e308 -1 nan inf 0 0\n")
    result = iostat_text.parse(text, ParseContext("x"))
    rows = result.tables["disk_io"]
    assert rows["device"].to_list() == ["sda", "sdb", "sdc"]
    assert rows["r_await_ms"].to_list() == [None, 1.0, None] and rows["r_per_s"].to_list() == [1.0, None, 1e308]
    assert sum("is not a number" in w.reason for w in result.warnings) == 4  # x, 9...9 (inf), nan, inf
    hostile_json = '{"sysstat": {"hosts": [{"date": "99/99/99", "statistics": [{"timestamp": "xx", "disk": [{"disk_device": "sda", "r/s": "1", "util": 1e308}, 5]}]}]}}'
    rows = iostat_json.parse(hostile_json, ParseContext("x")).tables["disk_io"]
    assert rows.height == 1 and rows["ts"][0] is None


def test_diskstats_snapshots_become_iostat_reports_with_iostat_formulas():
    from dbdiag.derive.disks import diskstat_reports

    text = (DISK / "2026_12_06_22_40_00-diskstats").read_text()
    counts = proc_diskstats.parse(text, ParseContext("os/diskstats", tz="UTC")).tables["disk_count"]
    assert counts["snapshot"].n_unique() == 8 and counts["ts"].null_count() == 0
    reports = diskstat_reports(counts).filter(pl.col("device") == "vda").sort("sample")
    assert reports.height == 7  # consecutive pairs
    first, second = (counts.filter((pl.col("device") == "vda") & (pl.col("snapshot") == n)).row(0, named=True) for n in (0, 1))
    seconds = (second["ts"] - first["ts"]).total_seconds()
    row = reports.row(0, named=True)
    assert row["w_per_s"] == pytest.approx((second["writes"] - first["writes"]) / seconds)
    assert row["w_await_ms"] == pytest.approx((second["write_ms"] - first["write_ms"]) / (second["writes"] - first["writes"]))
    assert row["util_pct"] == pytest.approx((second["io_ms"] - first["io_ms"]) / seconds / 10)
    # a snapshot without its time line, and a counter that went back (a reboot): no report from them
    shuffled = counts.with_columns(pl.when(pl.col("snapshot") == 3).then(None).otherwise(pl.col("ts")).alias("ts"))
    assert diskstat_reports(shuffled).filter(pl.col("device") == "vda").height == 5
