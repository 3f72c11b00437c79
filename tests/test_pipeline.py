"""The pipeline's own decisions: time zone choice, inventory entries, merging, partial captures."""

from __future__ import annotations

import stat
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from dbdiag import tables as t
from dbdiag.capture import Capture, Limits, Member, read_capture
from dbdiag.parsers import PARSERS
from dbdiag.pipeline import Options, UnknownTimeZone, analyze_capture

MPSTAT = (
    b"Linux 6.1.0 (db1) \t2024-05-14 \t_x86_64_\t(2 CPU)\n\n"
    b"10:00:00     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
    b"10:00:01     all    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
    b"10:00:01       0    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
    b"10:00:01       1    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
)


def capture_of(*members: tuple[str, bytes]) -> Capture:
    return Capture("test", "directory", [Member(path, data, len(data), None, None) for path, data in members])


def first_time(analysis) -> datetime:
    return analysis.tables[t.CPU_UTIL]["ts"].min()


def test_manifest_zone_applies_to_zone_less_times():
    analysis = analyze_capture(capture_of(("manifest.txt", b"TZ=Asia/Shanghai\n"), ("os/mpstat.txt", MPSTAT)))
    assert (analysis.tz, analysis.tz_origin) == ("Asia/Shanghai", "manifest manifest.txt")
    assert first_time(analysis) == datetime(2024, 5, 14, 2, 0, 1, tzinfo=timezone.utc)


def test_tz_option_beats_the_manifest():
    analysis = analyze_capture(
        capture_of(("manifest.json", b'{"tz": "Asia/Shanghai"}'), ("mpstat.txt", MPSTAT)), Options(tz="Europe/Berlin")
    )
    assert analysis.tz_origin == "--tz"
    assert first_time(analysis) == datetime(2024, 5, 14, 8, 0, 1, tzinfo=timezone.utc)


def test_unknown_manifest_zone_falls_back_to_utc_and_says_so():
    analysis = analyze_capture(capture_of(("manifest.txt", b"TZ=Mars/Olympus\n"), ("mpstat.txt", MPSTAT)))
    assert analysis.tz == "UTC"
    assert "unknown zone 'Mars/Olympus'" in analysis.tz_origin
    assert first_time(analysis) == datetime(2024, 5, 14, 10, 0, 1, tzinfo=timezone.utc)


def test_unknown_tz_option_is_refused():
    with pytest.raises(UnknownTimeZone, match="Mars/Olympus"):
        analyze_capture(capture_of(("mpstat.txt", MPSTAT)), Options(tz="Mars/Olympus"))


def test_inventory_names_every_member_and_why():
    capture = Capture(
        "test",
        "tar",
        [
            Member("os/mpstat.txt", MPSTAT, len(MPSTAT), None, None),
            Member("os/notes.txt", b"hello\n", 6, None, None),
            Member("os/empty", b"", 0, None, None),
            Member("os/blob", b"\x00\x01\x02", 3, None, None),
            Member("os/link", None, 0, "symbolic link (not followed)", None),
            Member("os/broken-mpstat.txt", b"Linux 6.1.0 (db1) \t2024-05-14 \t_x86_64_\t(2 CPU)\n\n10:00:00 CPU %usr %idle\nzz\n", 60, None, None),
        ],
    )
    analysis = analyze_capture(capture)
    by_path = {record.path: record for record in analysis.inputs}
    assert by_path["os/mpstat.txt"].status == "read" and by_path["os/mpstat.txt"].records == 1
    assert by_path["os/notes.txt"].status == "not recognised"
    assert by_path["os/empty"].notes == ["empty file"]
    assert by_path["os/blob"].notes == ["binary content (not a text format dbdiag reads)"]
    assert by_path["os/link"].status == "skipped"
    broken = by_path["os/broken-mpstat.txt"]
    assert broken.kind == "mpstat-text"
    assert broken.status in ("unreadable", "read")
    if broken.status == "unreadable":
        assert broken.error and analysis.partial_reasons


def test_text_and_json_of_one_run_are_counted_once(corpus: Path):
    from dbdiag.capture import read_capture

    analysis = analyze_capture(read_capture(corpus / "captures/mariadb-sysbench-debian12.tar.gz"))
    util = analysis.tables[t.CPU_UTIL]
    assert set(util["source"].unique().to_list()) == {"capture/os/mpstat.txt", "capture/os/mpstat.json"}
    per_cpu = analysis.derived.tables["per_cpu"]
    assert per_cpu["intervals"].to_list() == [10, 10]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be"])
def test_utf16_text_with_a_bom_is_read_like_utf8(encoding):
    """PowerShell 5's ``>`` and Excel's "Unicode text" write UTF-16 with a byte-order mark."""
    data = MPSTAT.decode().encode(encoding)
    if encoding == "utf-16-be":
        data = b"\xfe\xff" + data
    plain = analyze_capture(capture_of(("mpstat.txt", MPSTAT)))
    wide = analyze_capture(capture_of(("mpstat.txt", data)))
    assert wide.tables[t.CPU_UTIL].equals(plain.tables[t.CPU_UTIL])
    order = "little" if encoding == "utf-16" else "big"
    assert wide.inputs[0].kind == "mpstat-text"
    assert f"UTF-16 ({order}-endian) text: read as UTF-8" in wide.inputs[0].notes


def test_utf16_without_a_bom_stays_binary():
    analysis = analyze_capture(capture_of(("mpstat.txt", MPSTAT.decode().encode("utf-16-le"))))
    assert analysis.inputs[0].kind is None
    assert "binary content" in analysis.inputs[0].notes[0]


def test_a_parser_crash_is_reported_on_one_line():
    from dbdiag.parsers.base import ParserSpec

    def crash(text, ctx):
        raise ValueError("conversion failed\n\nThis error occurred in the following expression:\n\tcol('x')")

    spec = ParserSpec("crashy", "raises", lambda head, name: 1.0, crash)
    analysis = analyze_capture(capture_of(("x.log", b"anything\n")), parsers=(spec,))
    assert analysis.inputs[0].error == "parser crashy failed: ValueError: conversion failed"


def test_a_native_panic_in_a_parser_costs_that_member_only():
    import polars as pl

    from dbdiag.parsers.base import ParserSpec

    def panic(text, ctx):
        raise pl.exceptions.PanicException("index out of bounds")  # a BaseException, not an Exception

    spec = ParserSpec("panicky", "panics", lambda head, name: 1.0 if head.startswith("boom") else 0.0, panic)
    mpstat = next(p for p in PARSERS if p.kind == "mpstat-text")
    analysis = analyze_capture(capture_of(("x.log", b"boom\n"), ("os/mpstat.txt", MPSTAT)), parsers=(spec, mpstat))
    assert analysis.inputs[0].error == "parser panicky failed: PanicException: index out of bounds"
    assert analysis.inputs[1].kind == "mpstat-text" and analysis.inputs[1].error is None


@pytest.mark.parametrize(
    "reason",
    ["unreadable: input/output error", "directory not readable: permission denied", "worded any other way"],
)
def test_a_member_that_could_not_be_read_makes_the_capture_partial(reason: str):
    ok = Member("os/mpstat.txt", MPSTAT, len(MPSTAT), None, None)
    lost = Member("db/slow.log", None, 10, reason, None, lost=True)
    analysis = analyze_capture(Capture("cap", "directory", [ok, lost]))
    assert analysis.partial_reasons == [f"db/slow.log: {reason}"]
    assert [r.kind for r in analysis.inputs][0] is not None  # the good member is still read


def test_partial_is_the_lost_flag_not_the_wording_of_the_reason():
    ok = Member("os/mpstat.txt", MPSTAT, len(MPSTAT), None, None)
    skipped = Member("db/slow.log", None, 10, "unreadable, truncated, corrupt, over a cap", None, lost=False)
    assert analyze_capture(Capture("cap", "directory", [ok, skipped])).partial_reasons == []


def test_the_capture_readers_flag_members_lost_to_caps_and_damage(tmp_path: Path):
    long_name = "n" * 5000
    archive = tmp_path / "c.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr("os/mpstat.txt", MPSTAT)
        zipped.writestr(long_name, b"x")
        zipped.writestr("db/zeros.log", b"\0" * (3 * 1024 * 1024))  # 3 MiB in a few KB: over the ratio
        link = zipfile.ZipInfo("etc/link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        zipped.writestr(link, "/etc/passwd")
    capture = read_capture(archive, Limits(max_ratio=100.0))
    lost = {m.path[:20]: m.lost for m in capture.members if m.skipped}
    assert lost == {"n" * 20: True, "db/zeros.log": True, "etc/link": False}


def test_a_link_skip_is_not_partial():
    ok = Member("os/mpstat.txt", MPSTAT, len(MPSTAT), None, None)
    link = Member("etc", None, 0, "symbolic link (not followed)", None)
    assert analyze_capture(Capture("cap", "directory", [ok, link])).partial_reasons == []
