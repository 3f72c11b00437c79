"""mpstat text/JSON and sadf parsers: goldens on the corpus and captures, plus targeted cases."""

from __future__ import annotations

import random
import tarfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from conftest import ABSENT_NAME, CORPUS, corpus_names, corpus_present

from dbdiag import tables as T
from dbdiag.parsers import mpstat_json, mpstat_text, sadf
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError
from dbdiag.parsers._sysstat import parse_sysstat_date

PARSERS = {"mpstat-text": mpstat_text.SPEC, "mpstat-json": mpstat_json.SPEC, "sadf-csv": sadf.SPEC}
CORPUS_FILES = {  # corpus path -> the parser that owns it
    **{f"mpstat/{name}": ("mpstat-json" if name.endswith(".json") else "mpstat-text") for name in corpus_names("mpstat", exclude=())},
    "sar/sysstat__expected.sar-all.txt": "mpstat-text",
    "sar/sysstat__expected.sadf-d.csv": "sadf-csv",
    "sar/sysstat__expected.sadf-d-tz.csv": "sadf-csv",
    "sar/sysstat__expected.sadf-dh.csv": "sadf-csv",
    "sar/sysstat__expected.sadf-j.json": "mpstat-json",
}
CAPTURE_MEMBERS = {"capture/os/mpstat.txt": "mpstat-text", "capture/os/mpstat.json": "mpstat-json"}


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _capture_members() -> list[tuple[str, str, str]]:
    """(capture name, member path, kind) for the mpstat members of every real capture."""
    if not corpus_present():  # listed at collection: one case, which skips when it reads the capture
        return [(ABSENT_NAME, "capture/os/mpstat.txt", "mpstat-text")]
    found = []
    for archive in sorted((CORPUS / "captures").glob("*.tar.gz")):
        with tarfile.open(archive) as tar:
            names = set(tar.getnames())
        found += [(archive.name.removesuffix(".tar.gz"), m, k) for m, k in CAPTURE_MEMBERS.items() if m in names]
    return found


def _read_member(capture: str, member: str) -> str:
    with tarfile.open(CORPUS / "captures" / f"{capture}.tar.gz") as tar:
        data = tar.extractfile(member).read()  # in memory, never to disk
    return data.decode("utf-8", "backslashreplace")


def _corpus_text(corpus: Path, rel: str) -> str:
    return (corpus / rel).read_bytes().decode("utf-8", "backslashreplace")


def _parse(kind: str, text: str, source: str = "test", tz: str = "UTC"):
    return PARSERS[kind].parse(text, ParseContext(source=source, tz=tz))


# ---- goldens ----------------------------------------------------------------------------------


def test_every_corpus_file_is_covered(corpus: Path) -> None:
    on_disk = {f"mpstat/{p.name}" for p in (corpus / "mpstat").iterdir()} | {f"sar/{p.name}" for p in (corpus / "sar").iterdir()}
    assert on_disk == set(CORPUS_FILES)
    assert len(_capture_members()) >= 4


# ---- detection --------------------------------------------------------------------------------


def _detect_cases() -> list[tuple[str, str, str]]:
    cases = [("corpus", rel, kind) for rel, kind in CORPUS_FILES.items()]
    return cases + [(capture, member, kind) for capture, member, kind in _capture_members()]


@pytest.mark.parametrize(("where", "path", "kind"), _detect_cases())
def test_detect_own_kind_only(where: str, path: str, kind: str) -> None:
    text = _corpus_text(CORPUS, path) if where == "corpus" else _read_member(where, path)
    head = text[:DETECT_HEAD_BYTES]
    # a neutral name: content alone must decide
    scores = {k: spec.detect(head, "member") for k, spec in PARSERS.items()}
    assert scores[kind] > 0.5, scores
    assert all(score < 0.5 for k, score in scores.items() if k != kind), scores


def test_detect_other_sysstat_text_is_not_mpstat() -> None:
    iostat = "Linux 6.1.0 (h) \t11/29/26 \t_x86_64_\t(4 CPU)\n\navg-cpu:  %user   %nice %system %iowait  %steal   %idle\n           1.00    0.00    1.00    0.00    0.00   98.00\n"
    assert mpstat_text.detect(iostat, "iostat.txt") < 0.5
    pidstat = "Linux 6.1.0 (h) \t11/29/26 \t_x86_64_\t(4 CPU)\n\n10:00:01      UID       PID    %usr %system  %guest   %wait    %CPU   CPU  Command\n"
    assert mpstat_text.detect(pidstat, "pidstat") < 0.5


# ---- the numbers an issue relies on -----------------------------------------------------------


def _average_soft_pct(text: str) -> dict[int, float]:
    """mpstat's own Average: %soft per CPU, read here independently of the parser."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("Average:") and "%soft" in ln)
    col = lines[start].split().index("%soft")
    block = [ln.split() for ln in lines[start + 1:]]
    block = block[: next((i for i, r in enumerate(block) if not r), len(block))]  # up to the blank line
    return {int(r[1]): float(r[col]) for r in block if r[1].isdigit()}


def test_numa2x2_softirq_concentrated_on_cpu3() -> None:
    text = _read_member("numa2x2-guest-iperf-debian12", "capture/os/mpstat.txt")
    result = _parse("mpstat-text", text)
    mean_soft = dict(result.tables[T.CPU_UTIL].group_by("cpu").agg(pl.col("soft_pct").mean()).iter_rows())
    average = _average_soft_pct(text)
    assert average[3] == pytest.approx(63.61)
    # mpstat's Average weighs intervals by their jiffies; the plain mean of 1 s intervals is close
    assert mean_soft[3] == pytest.approx(average[3], abs=1.0)
    assert all(average[cpu] < 3.0 and mean_soft[cpu] <= 3.0 for cpu in (0, 1, 2))
    net_rx = result.tables[T.SOFTIRQ_RATE].filter(pl.col("softirq") == "NET_RX")
    rx_by_cpu = dict(net_rx.group_by("cpu").agg(pl.col("per_s").sum()).iter_rows())
    assert rx_by_cpu[2] > 0 and rx_by_cpu[3] > 0
    assert rx_by_cpu[0] == rx_by_cpu[1] == 0
    assert result.records == 20
    facts = dict(result.tables[T.HOST_FACT].select("key", "value").iter_rows())
    assert facts == {"hostname": "db-numa-01", "os": "Linux", "kernel": "6.1.0-57-amd64", "arch": "x86_64", "cpu_count": "4"}


def test_average_blocks_are_not_data(corpus: Path) -> None:
    result = _parse("mpstat-text", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-A.txt"))
    cpu = result.tables[T.CPU_UTIL]
    assert result.records == 4
    assert cpu.height == 9 + 8 + 9 + 10  # CPU 6 offline in interval 2, CPU 8 online from interval 3
    assert cpu["ts"].max() == _utc(2020, 6, 1, 12, 53, 24)
    assert any("Average" in n for n in result.notes)


# ---- clocks and dates -------------------------------------------------------------------------


def test_12h_clock(corpus: Path) -> None:
    result = _parse("mpstat-text", _corpus_text(corpus, "mpstat/jc__centos-7.7__mpstat-A-2-5.out"))
    ts = result.tables[T.CPU_UTIL]["ts"].unique().sort().to_list()
    assert ts[0] == _utc(2022, 3, 11, 15, 16, 17) and ts[-1] == _utc(2022, 3, 11, 15, 16, 25)
    morning = _parse("mpstat-text", _corpus_text(corpus, "mpstat/jc__ubuntu-18.04__mpstat-A.out"))
    assert morning.tables[T.CPU_UTIL]["ts"][0] == _utc(2022, 3, 14, 8, 50, 55)
    assert morning.tables[T.SOFTIRQ_RATE].filter((pl.col("softirq") == "NET_RX"))["per_s"].to_list() == [470.58]


def test_epoch_clock_is_utc_without_zone_note(corpus: Path) -> None:
    result = _parse("mpstat-text", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-U.txt"), tz="Asia/Tokyo")
    assert result.tables[T.CPU_UTIL]["ts"].to_list() == [_utc(2020, 6, 1, 12, 53, 21), _utc(2020, 6, 1, 12, 53, 22)]
    assert not any("no zone" in n for n in result.notes)


BANNER = "Linux 6.1.0-57-amd64 (db1) \t11/29/26 \t_x86_64_\t(2 CPU)\n\n"
CPU_HEADER = "     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"


def _interval(start: str, end: str, soft: str = "0.00") -> str:
    row = "    {cpu}    1.00    0.00    1.00    0.00    0.00    " + soft + "    0.00    0.00    0.00   98.00\n"
    return start + CPU_HEADER + "".join(end + row.format(cpu=c) for c in ("all", "  0", "  1")) + "\n"


def test_midnight_rollover_24h() -> None:
    text = BANNER + _interval("23:59:58", "23:59:59") + _interval("23:59:59", "00:00:00") + _interval("00:00:00", "00:00:01")
    result = _parse("mpstat-text", text)
    assert result.tables[T.CPU_UTIL]["ts"].unique().sort().to_list() == [
        _utc(2026, 11, 29, 23, 59, 59), _utc(2026, 11, 30, 0, 0, 0), _utc(2026, 11, 30, 0, 0, 1)]
    assert any("midnight" in n for n in result.notes)


def test_midnight_rollover_12h_and_local_zone() -> None:
    text = BANNER + _interval("11:59:58 PM", "11:59:59 PM") + _interval("11:59:59 PM", "12:00:00 AM")
    result = _parse("mpstat-text", text, tz="Europe/Berlin")
    # Berlin is UTC+1 in November: local midnight is 23:00 UTC the day before
    assert result.tables[T.CPU_UTIL]["ts"].unique().sort().to_list() == [_utc(2026, 11, 29, 22, 59, 59), _utc(2026, 11, 29, 23, 0, 0)]
    assert "times have no zone; read as Europe/Berlin (--tz)" in result.notes


def test_small_backward_step_is_not_a_new_day() -> None:
    text = BANNER + _interval("10:00:05", "10:00:06") + _interval("10:00:06", "10:00:04")
    days = _parse("mpstat-text", text).tables[T.CPU_UTIL]["ts"].dt.day().unique().to_list()
    assert days == [29]


@pytest.mark.parametrize(("text", "expected"), [
    ("11/29/26", (2026, 11, 29)), ("01/02/2020", (2020, 1, 2)), ("2026-11-29", (2026, 11, 29)),
    ("29.11.2026", (2026, 11, 29)), ("29/11/26", (2026, 11, 29)), ("13/13/26", None), ("garbage", None), ("", None),
])
def test_banner_dates(text: str, expected: tuple[int, int, int] | None) -> None:
    parsed = parse_sysstat_date(text)
    assert (parsed.timetuple()[:3] if parsed else None) == expected


# ---- column sets and tables -------------------------------------------------------------------


def test_old_column_set_mapped_by_name() -> None:
    # sysstat 8/9: %user, no %guest/%gnice, an intr/s column in the CPU table
    text = (
        "Linux 2.6.18-194.el5 (old) \t01/02/2011\n\n"
        "10:00:00 AM  CPU   %user   %nice    %sys %iowait    %irq   %soft  %steal   %idle    intr/s\n"
        "10:00:01 AM  all    5.00    1.00    2.00    3.00    0.50    0.25    0.00   88.25   1021.00\n"
        "10:00:01 AM    0    6.00    1.00    2.00    3.00    0.50    0.50    0.00   87.00    510.00\n"
    )
    result = _parse("mpstat-text", text)
    cpu = result.tables[T.CPU_UTIL]
    assert cpu.columns == list(T.CPU_UTIL_SCHEMA)
    first = cpu.row(0, named=True)
    assert (first["cpu"], first["usr_pct"], first["soft_pct"], first["idle_pct"]) == (-1, 5.0, 0.25, 88.25)
    assert first["guest_pct"] is None and first["gnice_pct"] is None
    assert first["ts"] == _utc(2011, 1, 2, 10, 0, 1)
    facts = dict(result.tables[T.HOST_FACT].select("key", "value").iter_rows())
    assert facts["hostname"] == "old" and "cpu_count" not in facts


def test_sar_text_reads_cpu_table_only(corpus: Path) -> None:
    result = _parse("mpstat-text", _corpus_text(corpus, "sar/sysstat__expected.sar-all.txt"))
    assert set(result.tables) == {T.CPU_UTIL, T.HOST_FACT, T.EVENT}
    restart = result.tables[T.EVENT].row(0, named=True)  # line 762: "13:37:29     LINUX RESTART\t(9 CPU)"
    assert (restart["kind"], restart["ts"], restart["host"], restart["line"]) == (
        "host-restart", _utc(2019, 4, 18, 13, 37, 29), "SYSSTAT.TEST", 762
    )
    cpu = result.tables[T.CPU_UTIL]
    assert cpu.height == 36 and result.records == 4
    # sar orders %steal before %irq: columns must follow the header, not a fixed order
    cpu8 = cpu.filter((pl.col("cpu") == 8) & (pl.col("ts") == _utc(2019, 4, 18, 13, 20, 49))).row(0, named=True)
    assert (cpu8["steal_pct"], cpu8["irq_pct"], cpu8["guest_pct"], cpu8["gnice_pct"]) == (4.50, 0.0, 6.75, 1.13)
    assert not result.warnings


def test_node_table(corpus: Path) -> None:
    nodes = _parse("mpstat-text", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-A.txt")).tables[T.NODE_UTIL]
    assert nodes.height == 12 and sorted(nodes["node"].unique().to_list()) == [-1, 0, 1]
    first = nodes.filter((pl.col("node") == 1) & (pl.col("ts") == _utc(2020, 6, 1, 12, 53, 21))).row(0, named=True)
    assert first["nice_pct"] == 25.01 and first["idle_pct"] == 70.83


def test_topology_columns(corpus: Path) -> None:
    result = _parse("mpstat-text", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-T.txt"))
    topo = result.tables[T.TOPOLOGY]
    assert topo["cpu"].to_list() == list(range(8))
    assert topo.filter(pl.col("cpu") == 3).select("core", "socket", "node").row(0) == (3, 0, 1)
    # the test data moves CPU 2 from socket 4 to socket 0: the last one wins, with a note
    assert topo.filter(pl.col("cpu") == 2)["socket"].item() == 0
    assert any("CPU 2 changed" in n for n in result.notes)
    # the 'all' row has blank CORE/SOCK/NODE: its numbers must land under the percent columns
    all_row = result.tables[T.CPU_UTIL].filter(pl.col("cpu") == -1).row(0, named=True)
    assert (all_row["usr_pct"], all_row["nice_pct"], all_row["idle_pct"]) == (2.15, 12.50, 82.88)


def test_per_irq_table(corpus: Path) -> None:
    irq = _parse("mpstat-text", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-dec.txt")).tables[T.IRQ_RATE]
    assert irq.filter((pl.col("cpu") == 2) & (pl.col("irq") == "24"))["per_s"].item() == 30.7
    assert {"LOC", "NMI", "0"} <= set(irq["irq"].unique().to_list())
    assert not irq["irq"].str.ends_with("/s").any()


# ---- JSON -------------------------------------------------------------------------------------


def test_json_tables(corpus: Path) -> None:
    result = _parse("mpstat-json", _corpus_text(corpus, "mpstat/sysstat__expected.mpstat-A-JSON.json"))
    assert result.records == 1
    soft = result.tables[T.SOFTIRQ_RATE]
    assert soft.filter((pl.col("cpu") == 0) & (pl.col("softirq") == "SCHED"))["per_s"].item() == 19.44
    assert result.tables[T.IRQ_RATE].filter((pl.col("cpu") == 4) & (pl.col("irq") == "19"))["per_s"].item() == 25.92
    assert result.tables[T.NODE_UTIL].height == 3
    assert result.tables[T.CPU_UTIL]["ts"][0] == _utc(2020, 6, 1, 12, 53, 21)


def test_json_matches_text_of_same_run() -> None:
    """The mariadb capture ran mpstat text and JSON side by side: their CPU rows agree in shape."""
    txt = _parse("mpstat-text", _read_member("mariadb-sysbench-debian12", "capture/os/mpstat.txt"))
    js = _parse("mpstat-json", _read_member("mariadb-sysbench-debian12", "capture/os/mpstat.json"))
    assert txt.records == js.records == 10
    assert txt.tables[T.CPU_UTIL].height == js.tables[T.CPU_UTIL].height


def test_sadf_json_cpu_and_interrupts(corpus: Path) -> None:
    result = _parse("mpstat-json", _corpus_text(corpus, "sar/sysstat__expected.sadf-j.json"), tz="Asia/Tokyo")
    cpu = result.tables[T.CPU_UTIL]
    assert cpu["ts"].min() == _utc(2019, 4, 18, 13, 20, 19)  # "tz": "UTC" in the file, --tz ignored
    assert not any("no zone" in n for n in result.notes)
    assert result.records == 5
    assert "sum" not in result.tables[T.IRQ_RATE]["irq"].to_list()


def test_json_cut_short_keeps_complete_samples() -> None:
    text = _read_member("postgres-pgbench-debian12", "capture/os/mpstat.json")
    cut = text[: len(text) * 2 // 3]
    result = _parse("mpstat-json", cut)
    assert 0 < result.records < 10
    assert any("cut short" in w.reason for w in result.warnings)


# ---- sadf CSV ---------------------------------------------------------------------------------


def test_sadf_restart_and_comment_rows_skipped(corpus: Path) -> None:
    result = _parse("sadf-csv", _corpus_text(corpus, "sar/sysstat__expected.sadf-d.csv"))
    cpu = result.tables[T.CPU_UTIL]
    assert result.records == 5 and cpu.height == 47
    assert cpu["ts"].max() == _utc(2019, 4, 18, 13, 54, 35)
    assert not result.warnings
    assert any("LINUX-RESTART" in n for n in result.notes)


def test_sadf_user_system_variant(corpus: Path) -> None:
    result = _parse("sadf-csv", _corpus_text(corpus, "sar/sysstat__expected.sadf-d-tz.csv"), tz="America/New_York")
    row = result.tables[T.CPU_UTIL].row(0, named=True)
    assert (row["cpu"], row["usr_pct"], row["sys_pct"], row["irq_pct"]) == (-1, 2.15, 2.36, None)
    assert row["ts"] == _utc(2019, 4, 18, 13, 20, 19)
    assert any("%system" in n for n in result.notes)


def test_sadf_dh_groups(corpus: Path) -> None:
    cpu = _parse("sadf-csv", _corpus_text(corpus, "sar/sysstat__expected.sadf-dh.csv")).tables[T.CPU_UTIL]
    assert cpu.height == 10 and sorted(cpu["cpu"].unique().to_list()) == [-1, 3]
    assert cpu.filter(pl.col("cpu") == 3)["nice_pct"][0] == 99.55


def test_sadf_local_times_use_tz() -> None:
    text = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle\nh;10;2024-01-01 10:00:00;-1;1.00;0.00;1.00;0.00;0.00;98.00\n"
    result = _parse("sadf-csv", text, tz="Europe/Paris")
    assert result.tables[T.CPU_UTIL]["ts"][0] == _utc(2024, 1, 1, 9, 0, 0)
    assert "times have no zone; read as Europe/Paris (--tz)" in result.notes


# ---- hostile input ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(PARSERS))
@pytest.mark.parametrize("text", [
    "",
    "\n \n",
    bytes(random.Random(7).randrange(256) for _ in range(4000)).decode("utf-8", "backslashreplace"),
    "\x00" * 50,
    "Linux 6.1.0 (h) \t11/29/26 \t_x86_64_\t(4 CPU)\n",
    '{"sysstat": {"hosts": [',
    '{"sysstat": {"hosts": [{"statistics": [{"timestamp": {"date": 5}}]}]}}',
    "# hostname;interval;timestamp;proc/s;cswch/s\nh;1;2024-01-01 00:00:00 UTC;1;2\n",
], ids=["empty", "blank", "random-bytes", "nul", "banner-only", "json-head", "json-no-data", "sadf-no-cpu"])
def test_hostile_input_raises_parse_error_only(kind: str, text: str) -> None:
    with pytest.raises(ParseError):
        _parse(kind, text)


def test_truncated_and_bad_rows_are_warned_not_fatal() -> None:
    text = (
        BANNER + "10:00:00" + CPU_HEADER
        + "10:00:01     all    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n"
        + "10:00:01       0    1.00    0.00    1.00    0.00    0.00    x.yz    0.00    0.00    0.00   98.00\n"
        + "10:00:01       1    1.00    0.00    1.00    0.0\n"
        + "10:00:0"
    )
    result = _parse("mpstat-text", text)
    assert result.tables[T.CPU_UTIL]["cpu"].to_list() == [-1, 0]
    reasons = {w.line: w.reason for w in result.warnings}
    assert "not a number" in reasons[5] and "fields" in reasons[6] and "unrecognised" in reasons[7]


def test_warnings_are_capped() -> None:
    text = BANNER + "10:00:00" + CPU_HEADER + "".join(f"10:00:01 {i} 1 2\n" for i in range(500))
    result = _parse("mpstat-text", text + "10:00:01     all    1.00    0.00    1.00    0.00    0.00    0.00    0.00    0.00    0.00   98.00\n")
    assert len(result.warnings) == 51 and "more warnings" in result.warnings[-1].reason


def test_unknown_tz_falls_back_to_utc_with_warning() -> None:
    result = _parse("mpstat-text", BANNER + _interval("10:00:00", "10:00:01"), tz="Mars/Olympus")
    assert result.tables[T.CPU_UTIL]["ts"][0] == _utc(2026, 11, 29, 10, 0, 1)
    assert any("Mars/Olympus" in w.reason for w in result.warnings)
