"""numastat, sysfs node (numastat/meminfo) and /proc/vmstat parsers: goldens, hand-checked values, detection, hostile input."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, numastat, proc_vmstat, sys_node
from dbdiag.parsers.base import ParseContext, ParseError
from tests.captures import capture_files, decoded
from tests.conftest import CORPUS, REPO, corpus_names

OURS = (numastat.SPEC, sys_node.SPEC, proc_vmstat.SPEC)
FIXTURES = REPO / "fixtures" / "numa"
CAPTURES = corpus_names("captures", "*.tar.gz")
CORPUS_FILES = {
    "insights-core__numastat.txt": numastat.SPEC,
    "insights-core__numastat-m.txt": numastat.SPEC,
    "node_exporter__sys_node0_numastat": sys_node.SPEC,
    "node_exporter__sys_node1_numastat": sys_node.SPEC,
    "node_exporter__sys_node0_meminfo": sys_node.SPEC,
}
NUMACTL_FILES = ("percona-toolkit__pt-summary-006__numactl.txt", "percona-toolkit__pt-summary-007__numactl.txt")
NOT_OURS_FIXTURES = ("vmstat-cmd.txt", "vmstat-w.txt", "README.md")


def _fixture_spec(name: str):
    if name.startswith("numastat"):
        return numastat.SPEC
    if "vmstat" in name:
        return proc_vmstat.SPEC
    return sys_node.SPEC


FIXTURE_FILES = sorted(p.name for p in FIXTURES.iterdir() if p.name not in NOT_OURS_FIXTURES)


def _capture_spec(name: str):
    if name.startswith("numastat"):
        return numastat.SPEC
    if name.startswith("node-numastat"):
        return sys_node.SPEC
    if name.startswith("vmstat"):
        return proc_vmstat.SPEC
    return None


def _capture_members(capture: str) -> dict[str, str]:
    """``capture/os/`` members of a capture that one of these parsers reads, in memory."""
    out = {}
    for path, data in capture_files(capture):
        name = path.rsplit("/", 1)[-1]
        if path.startswith("capture/os/") and _capture_spec(name) is not None:
            out[name] = decoded(data)
    return out


def _member(capture: str, name: str) -> str:
    return _capture_members(capture)[name]


def _parse(spec, text: str, source: str = "test", tz: str = "UTC"):
    return spec.parse(text, ParseContext(source=source, tz=tz))


def _rows(result, **where) -> pl.DataFrame:
    frame = next(iter(result.tables.values()))
    for column, value in where.items():
        frame = frame.filter(pl.col(column).is_null() if value is None else pl.col(column) == value)
    return frame


def _value(result, **where) -> float:
    frame = _rows(result, **where)
    assert frame.height == 1, (where, frame)
    return frame["value"].item()


def _assert_detection(spec, text: str, name: str) -> None:
    head = text[:8192]
    assert spec.detect(head, name) > 0.5
    assert spec.detect(head, "member") > 0.5, "content alone must be enough"
    for other in PARSERS:
        if other.kind != spec.kind:
            assert other.detect(head, name) <= 0.5, (other.kind, name)
    for other in OURS:
        if other.kind != spec.kind:
            assert other.detect(head, name) <= 0.5, (other.kind, name)


# ---------------------------------------------------------------- goldens


def test_fixtures_are_small_and_documented() -> None:
    readme = (FIXTURES / "README.md").read_text()
    for path in FIXTURES.iterdir():
        assert path.stat().st_size < 50_000, path.name
        if path.name != "README.md":
            assert f"`{path.name}`" in readme, path.name


# ---------------------------------------------------------------- detection against the rest


@pytest.mark.parametrize("name", NUMACTL_FILES)
def test_numactl_hardware_is_not_ours(name: str, corpus: Path) -> None:
    head = (corpus / "numastat" / name).read_text()[:8192]
    for spec in OURS:
        assert spec.detect(head, name) <= 0.5, spec.kind
    assert next(s for s in PARSERS if s.kind == "numactl-hardware").detect(head, name) > 0.5


def test_other_capture_members_are_not_ours() -> None:
    for capture in CAPTURES:
        for path, data in capture_files(capture):
            name = path.rsplit("/", 1)[-1]
            if _capture_spec(name) is not None:
                continue
            head = decoded(data[:8192])
            for spec in OURS:
                assert spec.detect(head, name) <= 0.5, (spec.kind, capture, path)


@pytest.mark.parametrize("name", ["vmstat-cmd.txt", "vmstat-w.txt"])
def test_vmstat_command_is_not_proc_vmstat(name: str) -> None:
    text = (FIXTURES / name).read_text()
    for spec in OURS:
        assert spec.detect(text[:8192], "vmstat") <= 0.5, spec.kind
    with pytest.raises(ParseError):
        _parse(proc_vmstat.SPEC, text)


def test_proc_vmstat_and_sysfs_numastat_do_not_claim_each_other() -> None:
    vmstat = _member("mariadb-sysbench-debian12.tar.gz", "vmstat.before")
    assert sys_node.SPEC.detect(vmstat[:8192], "numastat") <= 0.5  # has numa_hit lines, but numa_local not local_node
    sysfs = (CORPUS / "numastat" / "node_exporter__sys_node0_numastat").read_text()
    assert proc_vmstat.SPEC.detect(sysfs, "vmstat") <= 0.5


# ---------------------------------------------------------------- numastat: hand-checked values


def test_insights_default_two_nodes_in_pages(corpus: Path) -> None:
    result = _parse(numastat.SPEC, (corpus / "numastat" / "insights-core__numastat.txt").read_text())
    frame = _rows(result)
    assert frame.height == 12 and set(frame["unit"]) == {"pages"} and set(frame["scope"]) == {"system"}
    assert _value(result, node=0, counter="numa_hit") == 4735090719
    assert _value(result, node=1, counter="numa_miss") == 92981
    assert _value(result, node=0, counter="numa_foreign") == 92981
    assert _value(result, node=1, counter="other_node") == 690808
    assert frame["ts"].null_count() == 12 and frame["pid"].null_count() == 12


def test_insights_meminfo_drops_the_total_column(corpus: Path) -> None:
    result = _parse(numastat.SPEC, (corpus / "numastat" / "insights-core__numastat-m.txt").read_text())
    frame = _rows(result)
    assert set(frame["scope"]) == {"meminfo"} and set(frame["unit"]) == {"MB"}
    assert sorted(set(frame["node"])) == [0, 1] and frame.height == 29 * 2
    assert _value(result, node=1, counter="HugePages_Total") == 56320.0
    assert _value(result, node=0, counter="Active(anon)") == 415.30
    assert _value(result, node=1, counter="MemTotal") == 96732.40  # not 191989.64, the Total column


def test_numa2_process_memory_on_node_1() -> None:
    result = _parse(numastat.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", "numastat-p-python3.txt"))
    frame = _rows(result)
    assert set(frame["pid"]) == {183} and set(frame["process"]) == {"python3"} and set(frame["scope"]) == {"process"}
    assert sorted(set(frame["counter"])) == ["Heap", "Huge", "Private", "Stack"]  # no Total row
    assert _value(result, node=1, counter="Private") == 121.27
    assert _value(result, node=1, counter="Heap") == 0.45
    assert _value(result, node=0, counter="Private") == 0.0


def test_numa2x2_unmatched_pattern_falls_back_to_mb_counters() -> None:
    result = _parse(numastat.SPEC, _member("numa2x2-guest-iperf-debian12.tar.gz", "numastat-p-python3.txt"))
    assert result.notes == ['numastat found no process matching "python3"; no process table']
    frame = _rows(result)
    assert set(frame["scope"]) == {"system"} and set(frame["unit"]) == {"MB"}
    assert _value(result, node=1, counter="other_node") == 6.08
    assert _value(result, node=0, counter="numa_hit") == 350.96


def test_numa2_before_after_counters() -> None:
    before = _parse(numastat.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", "numastat.0"))
    after = _parse(numastat.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", "numastat.1"))
    assert _value(before, node=1, counter="other_node") == 1397 and _value(after, node=1, counter="other_node") == 17005
    assert _value(before, node=1, counter="numa_hit") == 86319 and _value(after, node=1, counter="numa_hit") == 218274


def test_meminfo_unknown_tokens_become_a_note() -> None:
    result = _parse(numastat.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", "numastat-m.txt"))
    assert result.notes == ["numastat did not know 4 meminfo field(s): SwapCached, SecPageTables, FileHugePages, FilePmdMapped"]
    assert _value(result, node=1, counter="Shmem") == 312.32


def test_summary_table_of_several_processes() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-p-postgres.txt").read_text())
    frame = _rows(result)
    assert frame["pid"].to_list() == [26535, 26536, 26537, 26539, 26540, 26541]
    assert set(frame["counter"]) == {"Total"} and set(frame["process"]) == {"postgres"}
    assert _value(result, pid=26535) == 28.82
    compact = _parse(numastat.SPEC, (FIXTURES / "numastat-c-p-postgres.txt").read_text())
    assert _value(compact, pid=26535) == 29.0


def test_verbose_several_process_tables_share_one_snapshot() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-v-p-postgres.txt").read_text())
    frame = _rows(result)
    assert result.records == 1 and set(frame["snapshot"]) == {0}
    assert frame["pid"].n_unique() == 6
    assert _value(result, pid=26539, counter="Private") == 9.66


def test_process_and_meminfo_tables_in_one_run() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-m-p.txt").read_text())
    frame = _rows(result)
    assert result.records == 1
    assert _value(result, scope="process", counter="Private") == 102.43
    assert _value(result, scope="meminfo", counter="MemTotal") == 13402.21
    assert _rows(result, scope="meminfo")["pid"].null_count() == _rows(result, scope="meminfo").height
    assert frame.height == 4 + 32


def test_numastat_n_is_in_mb_and_compact_rounds() -> None:
    mb = _parse(numastat.SPEC, (FIXTURES / "numastat-n.txt").read_text())
    assert _value(mb, counter="numa_hit") == 1018943.61 and set(_rows(mb)["unit"]) == {"MB"}
    compact = _parse(numastat.SPEC, (FIXTURES / "numastat-c.txt").read_text())
    assert _value(compact, counter="numa_hit") == 1018944.0 and _value(compact, counter="interleave_hit") == 4.0


def test_folded_table_joins_its_sections() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-n-folded-width40.txt").read_text())
    frame = _rows(result)
    assert result.records == 1 and frame.height == 6 and set(frame["node"]) == {0}
    assert _value(result, counter="local_node") == 1021996.11


def test_folded_default_form_with_eight_nodes() -> None:
    # numastat on an 80-column terminal prints node0-3, a blank line, then node4-7 (display_table folding).
    def section(nodes):
        head = " " * 16 + "".join(f"node{n}".rjust(16) for n in nodes)
        rows = [f"{name:<16}" + "".join(str(1000 * n + i).rjust(16) for n in nodes)
                for i, name in enumerate(("numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node"))]
        return "\n".join([head, *rows])

    text = section(range(4)) + "\n\n" + section(range(4, 8)) + "\n"
    result = _parse(numastat.SPEC, text)
    assert numastat.SPEC.detect(text, "x") > 0.5
    assert result.records == 1 and result.warnings == []
    assert sorted(set(_rows(result)["node"])) == list(range(8))
    assert _value(result, node=6, counter="other_node") == 6005
    twice = _parse(numastat.SPEC, text + text)
    assert twice.records == 2 and _value(twice, snapshot=1, node=7, counter="numa_hit") == 7000


def test_repeated_runs_with_time_lines() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-repeated-ts.txt").read_text())
    assert result.records == 2
    assert _value(result, snapshot=0, counter="numa_hit") == 261631590
    assert _value(result, snapshot=1, counter="numa_hit") == 261633971
    ts = _rows(result, snapshot=1, counter="numa_hit")["ts"].item()
    assert ts == datetime(2026, 11, 29, 22, 38, 11, 100637, tzinfo=timezone.utc)
    dated = _parse(numastat.SPEC, (FIXTURES / "numastat-n-repeated-date.txt").read_text())
    assert dated.records == 2
    assert _rows(dated, snapshot=0, counter="numa_hit")["ts"].item() == datetime(2026, 11, 29, 22, 38, 12, tzinfo=timezone.utc)
    assert result.time_range[0] < result.time_range[1]


def test_zone_less_time_lines_use_the_capture_zone() -> None:
    text = "2024-05-01 10:00:00\n" + (FIXTURES / "numastat.txt").read_text()
    result = _parse(numastat.SPEC, text, tz="Europe/Paris")
    assert _rows(result)["ts"][0] == datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert result.notes == ["snapshot times have no zone; read as Europe/Paris"]


def test_back_to_back_runs_without_time_lines() -> None:
    text = _member("numa2-guest-iperf-debian12.tar.gz", "numastat.0") + _member("numa2-guest-iperf-debian12.tar.gz", "numastat.1")
    result = _parse(numastat.SPEC, text)
    assert result.records == 2
    assert _value(result, snapshot=1, node=1, counter="other_node") == 17005


def test_unreadable_process_is_a_warning() -> None:
    result = _parse(numastat.SPEC, (FIXTURES / "numastat-p-unreadable.txt").read_text())
    assert _rows(result).height == 0 and result.records == 0
    assert [w.as_text() for w in result.warnings] == [
        "line 1: numastat could not read /proc/1/numa_maps: no memory figures for that pid",
        "numastat output without any table row",
    ]


# ---------------------------------------------------------------- numastat: hostile input


def test_numastat_hostile_inputs() -> None:
    with pytest.raises(ParseError):
        _parse(numastat.SPEC, "")
    with pytest.raises(ParseError):
        _parse(numastat.SPEC, "\x00\x01\x02binary\xff" * 100)
    with pytest.raises(ParseError):
        _parse(numastat.SPEC, "TS 1700000000.1\n")
    text = (FIXTURES / "numastat.txt").read_text()
    crlf = _parse(numastat.SPEC, text.replace("\n", "\r\n"))
    assert crlf.warnings == [] and _rows(crlf).height == 6
    truncated = _parse(numastat.SPEC, text[: text.index("local_node") + 16])
    assert _rows(truncated).height == 4 and len(truncated.warnings) == 1
    huge = _parse(numastat.SPEC, text + "x" * 100_000 + "\n" + "garbage line\n" * 200)
    assert _rows(huge).height == 6
    assert len(huge.warnings) == 51 and huge.warnings[-1].reason.startswith("151 more warnings")
    # truncated process name in a -c summary table ("123456 (mariadbd" without the parenthesis)
    summary = ("\nPer-node process memory usage (in MBs)\nPID              Node 0 Total\n"
               "---------------  ------ -----\n123456 (mariadbd     29    29\n")
    assert _rows(_parse(numastat.SPEC, summary)).select("pid", "process", "value").rows() == [(123456, "mariadbd", 29.0)]
    # a title whose process vanished: numastat prints "(null)"
    gone = "Per-node process memory usage (in MBs) for PID 99 ((null))\n                 Node 0  Total\n" \
           "                ------ ------\nPrivate          1.00   1.00\n"
    assert _rows(_parse(numastat.SPEC, gone)).select("pid", "process").row(0) == (99, None)


# ---------------------------------------------------------------- sysfs node files


def test_sysfs_node_from_path(corpus: Path) -> None:
    result = _parse(sys_node.SPEC, (corpus / "numastat" / "node_exporter__sys_node1_numastat").read_text(),
                    source="numastat/node_exporter__sys_node1_numastat")
    assert set(_rows(result)["node"]) == {1} and set(_rows(result)["unit"]) == {"pages"}
    assert _value(result, counter="other_node") == 59860526920
    assert _value(result, counter="numa_miss") == 59858626709
    unnamed = _parse(sys_node.SPEC, (corpus / "numastat" / "node_exporter__sys_node1_numastat").read_text(),
                     source="capture/os/numastat-node")
    assert _rows(unnamed)["node"].null_count() == 6
    assert [w.reason for w in unnamed.warnings] == [
        "node number unknown (not in the file nor in its path, one block): node left null; name the file nodeN/numastat"
    ]


@pytest.mark.parametrize(("path", "node"), [
    ("sys/devices/system/node/node1/numastat", 1), ("os/node1-numastat", 1), ("os/node12_numastat.txt", 12),
    ("os/node-numastat.1", None), ("os/numastat.1", None), ("node3/numastat.before", 3),
])
def test_node_from_path(path: str, node: int | None) -> None:
    assert sys_node.node_from_path(path) == node


def test_capture_node_numastat_suffix_is_a_snapshot_not_a_node() -> None:
    # node-numastat.0 holds both nodes (cat node*/numastat) and matches numastat.0 of the same run.
    for suffix in ("0", "1"):
        sysfs = _parse(sys_node.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", f"node-numastat.{suffix}"),
                       source=f"capture/os/node-numastat.{suffix}")
        command = _parse(numastat.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", f"numastat.{suffix}"))
        assert sorted(set(_rows(sysfs)["node"])) == [0, 1] and sysfs.records == 1
        assert "block order" in sysfs.notes[0]
        for node in (0, 1):  # read moments apart: same other_node, numa_hit a few pages further
            assert _value(sysfs, node=node, counter="other_node") == _value(command, node=node, counter="other_node")
            assert 0 <= _value(sysfs, node=node, counter="numa_hit") - _value(command, node=node, counter="numa_hit") < 100
    before = _parse(sys_node.SPEC, _member("numa2-guest-iperf-debian12.tar.gz", "node-numastat.0"))
    assert _value(before, node=0, counter="numa_hit") == 8000 and _value(before, node=1, counter="numa_hit") == 86326


def test_sysfs_meminfo_kb_to_mb(corpus: Path) -> None:
    result = _parse(sys_node.SPEC, (corpus / "numastat" / "node_exporter__sys_node0_meminfo").read_text())
    assert set(_rows(result)["scope"]) == {"meminfo"} and set(_rows(result)["node"]) == {0}
    assert _value(result, counter="MemTotal") == 134182340 / 1024
    assert _rows(result, counter="MemTotal")["unit"].item() == "MB"
    assert _rows(result, counter="HugePages_Total")["unit"].item() == "pages"
    assert _value(result, counter="AnonHugePages") == 144.0


def test_sysfs_listings_name_their_nodes() -> None:
    grep = _parse(sys_node.SPEC, (FIXTURES / "grep-node-numastat.txt").read_text())
    assert set(_rows(grep)["node"]) == {0} and _value(grep, counter="interleave_hit") == 1129
    head = _parse(sys_node.SPEC, (FIXTURES / "head-node.txt").read_text())
    assert set(_rows(head, scope="system")["node"]) == {0} and head.records == 1
    assert _value(head, scope="meminfo", counter="MemTotal") == 13723860 / 1024
    lines = [f"/sys/devices/system/node/node{n}/numastat:{c} {100 * n + i}"
             for i, c in enumerate(sys_node.SYSTEM_COUNTERS) for n in (0, 1)]
    twice = _parse(sys_node.SPEC, "\n".join(lines + ["TS 1700000000.5"] + lines))
    assert twice.records == 2 and _value(twice, snapshot=1, node=1, counter="other_node") == 105
    assert _rows(twice, snapshot=1)["ts"][0] == datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=timezone.utc)


def test_cat_of_eleven_nodes_follows_glob_order() -> None:
    block = "\n".join(f"{c} {i}" for i, c in enumerate(sys_node.SYSTEM_COUNTERS))
    result = _parse(sys_node.SPEC, "\n".join([block] * 11), source="capture/os/node-numastat.txt")
    nodes = _rows(result, counter="numa_hit")["node"].to_list()
    assert nodes == [0, 1, 10, 2, 3, 4, 5, 6, 7, 8, 9]


def test_sysfs_hostile_inputs() -> None:
    with pytest.raises(ParseError):
        _parse(sys_node.SPEC, "")
    with pytest.raises(ParseError):
        _parse(sys_node.SPEC, "\x00\xff" * 1000)
    result = _parse(sys_node.SPEC, "numa_hit 5\nnuma_hit x\n" + "y" * 50_000 + "\nlocal_node 3\r\n",
                    source="node2/numastat")
    assert _rows(result).select("counter", "value").rows() == [("numa_hit", 5.0), ("local_node", 3.0)]
    assert len(result.warnings) == 2


# ---------------------------------------------------------------- /proc/vmstat


def test_capture_vmstat_values() -> None:
    result = _parse(proc_vmstat.SPEC, _member("mariadb-sysbench-debian12.tar.gz", "vmstat.before"))
    frame = _rows(result)
    assert frame.height == 192 and result.records == 1 and frame["counter"].n_unique() == 192
    assert _value(result, counter="numa_hit") == 6192709
    assert _value(result, counter="nr_free_pages") == 944094
    assert _value(result, counter="numa_hint_faults") == 0
    after = _parse(proc_vmstat.SPEC, _member("mariadb-sysbench-debian12.tar.gz", "vmstat.after"))
    assert _value(after, counter="numa_hit") == 6205339


def test_vmstat_snapshots_with_time_lines() -> None:
    result = _parse(proc_vmstat.SPEC, (FIXTURES / "procvmstat-ts.txt").read_text())
    assert result.records == 2
    assert _value(result, snapshot=0, counter="numa_hit") == 261805460
    assert _value(result, snapshot=1, counter="numa_hit") == 261825556
    assert _rows(result, snapshot=1, counter="pgfault")["ts"].item() == datetime(
        2026, 11, 29, 22, 38, 19, 882914, tzinfo=timezone.utc)
    bare = (FIXTURES / "procvmstat-ts.txt").read_text().split("\n", 1)[1]
    bare = "\n".join(line for line in bare.split("\n") if not line.startswith("TS "))
    untimed = _parse(proc_vmstat.SPEC, bare)
    assert untimed.records == 2 and _rows(untimed)["ts"].null_count() == _rows(untimed).height


def test_vmstat_hostile_inputs() -> None:
    with pytest.raises(ParseError):
        _parse(proc_vmstat.SPEC, "")
    with pytest.raises(ParseError):
        _parse(proc_vmstat.SPEC, "\x00\xff binary" * 1000)
    text = "nr_free_pages 5\r\npgfault 99999999999999999999999\nnot a line\n" + "z" * 100_000 + "\nnuma_hit 7\n"
    result = _parse(proc_vmstat.SPEC, text)
    assert _rows(result).select("counter", "value").rows() == [("nr_free_pages", 5), ("pgfault", None), ("numa_hit", 7)]
    reasons = [w.reason for w in result.warnings]
    assert len(reasons) == 3 and reasons[-1] == "1 values too large for Int64; left null"
