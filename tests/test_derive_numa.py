"""NUMA derivations (numa_remote, numa_process_memory, vmstat_numa_delta) on the real captures."""

from __future__ import annotations

import tarfile

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive import numa
from dbdiag.parsers import numastat, proc_vmstat, sys_node
from dbdiag.parsers.base import ParseContext
from tests.conftest import CORPUS, REPO

SPECS = (numastat.SPEC, sys_node.SPEC, proc_vmstat.SPEC)
REMOTE_COLUMNS = ["node", "numa_hit", "numa_miss", "numa_foreign", "interleave_hit", "local_node", "other_node",
                  "remote_pct", "miss_pct", "since_boot", "first_source", "last_source"]


def _tables(capture: str, keep=lambda name: True) -> dict[str, pl.DataFrame]:
    """Parse the NUMA members of a capture (detected by content) and merge them like the pipeline does."""
    frames: dict[str, list[pl.DataFrame]] = {}
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        for member in tar.getmembers():
            name = member.name.rsplit("/", 1)[-1]
            if not member.isfile() or not keep(name):
                continue
            text = tar.extractfile(member).read().decode("utf-8", "backslashreplace")
            for spec in SPECS:
                if spec.detect(text[:8192], name) > 0.5:
                    for table, frame in spec.parse(text, ParseContext(source=member.name)).tables.items():
                        frames.setdefault(table, []).append(frame)
    return {table: pl.concat(parts, how="diagonal_relaxed") for table, parts in frames.items()}


def _node(frame: pl.DataFrame, node: int) -> dict:
    return frame.filter(pl.col("node") == node).row(0, named=True)


def test_numa2_remote_growth_on_node_1() -> None:
    remote = numa.numa_remote(_tables("numa2-guest-iperf-debian12.tar.gz"))
    assert remote.columns == REMOTE_COLUMNS and remote["node"].to_list() == [0, 1]
    one = _node(remote, 1)
    # numastat.0 -> numastat.1, node1: numa_hit 86319 -> 218274, local 84922 -> 201269, other 1397 -> 17005
    assert (one["numa_hit"], one["local_node"], one["other_node"]) == (131955, 116347, 15608)
    assert one["remote_pct"] == pytest.approx(100 * 15608 / (116347 + 15608))
    assert one["miss_pct"] == 0.0 and one["since_boot"] is False
    assert (one["first_source"], one["last_source"]) == ("capture/os/numastat.0", "capture/os/numastat.1")
    zero = _node(remote, 0)
    assert (zero["numa_hit"], zero["other_node"], zero["remote_pct"]) == (3646, 0, 0.0)
    assert remote.schema["numa_hit"] == pl.Int64 and remote.schema["node"] == pl.Int32


def test_numa2x2_remote_growth() -> None:
    remote = numa.numa_remote(_tables("numa2x2-guest-iperf-debian12.tar.gz"))
    one = _node(remote, 1)
    # node1: numa_hit 3982 -> 151920, other_node 1556 -> 2075 (the -p pattern file in MB is not mixed in)
    assert (one["numa_hit"], one["other_node"], one["local_node"]) == (147938, 519, 147419)
    assert one["last_source"] == "capture/os/numastat.1"


@pytest.mark.parametrize("capture", ["mariadb-sysbench-debian12.tar.gz", "postgres-pgbench-debian12.tar.gz"])
def test_single_node_captures_claim_no_remote_traffic(capture: str) -> None:
    remote = numa.numa_remote(_tables(capture))
    assert remote.height == 1 and remote["node"].to_list() == [0]
    row = remote.row(0, named=True)
    assert row["other_node"] == 0 and row["remote_pct"] == 0.0 and row["numa_hit"] > 0
    assert (row["first_source"], row["last_source"]) == ("capture/os/numastat.before", "capture/os/numastat.after")


def test_mariadb_growth_by_hand() -> None:
    row = numa.numa_remote(_tables("mariadb-sysbench-debian12.tar.gz")).row(0, named=True)
    assert row["numa_hit"] == 6205244 - 6192619 and row["interleave_hit"] == 0


def test_since_boot_when_one_snapshot() -> None:
    remote = numa.numa_remote(_tables("numa2-guest-iperf-debian12.tar.gz", keep=lambda n: n == "numastat.1"))
    assert remote["since_boot"].to_list() == [True, True]
    one = _node(remote, 1)
    assert (one["numa_hit"], one["other_node"], one["local_node"]) == (218274, 17005, 201269)
    assert one["first_source"] == one["last_source"] == "capture/os/numastat.1"


def test_sysfs_used_only_without_the_command() -> None:
    remote = numa.numa_remote(_tables("numa2-guest-iperf-debian12.tar.gz", keep=lambda n: n.startswith("node-numastat")))
    one = _node(remote, 1)
    # node-numastat.0 -> .1, second block: numa_hit 86326 -> 218327, other_node 1397 -> 17005
    assert (one["numa_hit"], one["other_node"]) == (132001, 15608)
    assert one["last_source"] == "capture/os/node-numastat.1"
    both = numa.numa_remote(_tables("numa2-guest-iperf-debian12.tar.gz"))
    assert set(both["first_source"]) == {"capture/os/numastat.0"}


def test_sysfs_per_node_files_since_boot() -> None:
    frames = []
    for node in (0, 1):
        text = (CORPUS / "numastat" / f"node_exporter__sys_node{node}_numastat").read_text()
        source = ParseContext(source=f"sys/devices/system/node/node{node}/numastat")
        frames.append(sys_node.SPEC.parse(text, source).tables[t.NUMA_COUNTER])
    remote = numa.numa_remote({t.NUMA_COUNTER: pl.concat(frames)})
    assert remote["node"].to_list() == [0, 1] and remote["since_boot"].to_list() == [True, True]
    one = _node(remote, 1)
    assert one["remote_pct"] == pytest.approx(100 * 59860526920 / (326719046550 + 59860526920))
    assert one["miss_pct"] == pytest.approx(100 * 59858626709 / (326720946761 + 59858626709))


def test_no_page_counters_gives_none() -> None:
    only_mb = _tables("numa2x2-guest-iperf-debian12.tar.gz", keep=lambda n: n == "numastat-p-python3.txt")
    assert only_mb[t.NUMA_COUNTER].height == 12
    assert numa.numa_remote(only_mb) is None
    assert numa.numa_process_memory(only_mb) is None
    assert numa.numa_remote({}) is None and numa.numa_remote({t.NUMA_COUNTER: t.empty(t.NUMA_COUNTER)}) is None


def test_no_traffic_gives_null_ratios() -> None:
    frame = pl.DataFrame({"node": [0] * 6, "counter": list(numa.SYSTEM_COUNTERS), "value": [0.0] * 6}).with_columns(
        snapshot=pl.lit(0, pl.Int32), scope=pl.lit("system"), unit=pl.lit("pages"), source=pl.lit("numastat"))
    row = numa.numa_remote({t.NUMA_COUNTER: t.conform(t.NUMA_COUNTER, frame)}).row(0, named=True)
    assert row["remote_pct"] is None and row["miss_pct"] is None


def test_counter_reset_is_clamped() -> None:
    frames = []
    for source, hit in (("numastat.before", 500.0), ("numastat.after", 100.0)):
        frames.append(pl.DataFrame({"node": [0, 0], "counter": ["numa_hit", "other_node"], "value": [hit, 1.0]}).with_columns(
            snapshot=pl.lit(0, pl.Int32), scope=pl.lit("system"), unit=pl.lit("pages"), source=pl.lit(source)))
    row = numa.numa_remote({t.NUMA_COUNTER: t.conform(t.NUMA_COUNTER, pl.concat(frames))}).row(0, named=True)
    assert row["numa_hit"] == 0 and row["local_node"] is None and row["remote_pct"] is None


def test_process_memory_bound_to_node_1() -> None:
    # numa2: python3 ran on node 0's CPUs with --membind=1: its memory is on node 1.
    memory = numa.numa_process_memory(_tables("numa2-guest-iperf-debian12.tar.gz"))
    assert memory.columns == ["pid", "process", "node", "private_mb", "total_mb", "share_pct", "source"]
    one = memory.filter(pl.col("node") == 1).row(0, named=True)
    assert (one["pid"], one["process"], one["private_mb"]) == (183, "python3", 121.27)
    assert one["total_mb"] == pytest.approx(0.00 + 0.45 + 0.04 + 121.27)
    assert one["share_pct"] == 100.0
    assert memory.filter(pl.col("node") == 0)["total_mb"].item() == 0.0


def test_process_memory_latest_snapshot_and_summary_form() -> None:
    text = (REPO / "fixtures" / "numa" / "numastat-p-postgres.txt").read_text()
    frame = numastat.SPEC.parse(text, ParseContext(source="numastat-p-postgres.txt")).tables[t.NUMA_COUNTER]
    later = frame.with_columns(pl.col("value") * 2, pl.lit("numastat-p-postgres.after").alias("source"))
    memory = numa.numa_process_memory({t.NUMA_COUNTER: pl.concat([frame.with_columns(
        pl.lit("numastat-p-postgres.before").alias("source")), later])})
    row = memory.filter(pl.col("pid") == 26535).row(0, named=True)
    assert row["total_mb"] == 57.64 and row["private_mb"] is None and row["share_pct"] == 100.0
    assert row["source"] == "numastat-p-postgres.after" and memory.height == 6


def test_vmstat_delta_single_node_captures() -> None:
    delta = numa.vmstat_numa_delta(_tables("mariadb-sysbench-debian12.tar.gz"))
    assert (delta["first_source"], delta["last_source"]) == ("capture/os/vmstat.before", "capture/os/vmstat.after")
    assert delta["counters"]["numa_hint_faults"] == 0 and delta["counters"]["pgmigrate_success"] == 0
    assert "thp_fault_alloc" in delta["counters"] and "nr_free_pages" not in delta["counters"]
    assert delta["seconds"] is None and delta["hint_faults_local_pct"] is None


def test_vmstat_delta_with_times_and_growth() -> None:
    text = (REPO / "fixtures" / "numa" / "procvmstat-ts.txt").read_text()
    tables = proc_vmstat.SPEC.parse(text, ParseContext(source="procvmstat")).tables
    delta = numa.vmstat_numa_delta(tables)
    assert delta["seconds"] == pytest.approx(1.013723)
    assert (delta["first_snapshot"], delta["last_snapshot"]) == (0, 1)
    frame = pl.DataFrame({"snapshot": [0, 0, 1, 1], "counter": ["numa_pages_migrated", "thp_fault_alloc"] * 2,
                          "value": [10, 5, 2010, 4], "source": ["vmstat"] * 4})
    grown = numa.vmstat_numa_delta({t.VMSTAT_COUNT: t.conform(t.VMSTAT_COUNT, frame)})
    assert grown["counters"] == {"numa_pages_migrated": 2000, "thp_fault_alloc": 0}


def test_vmstat_delta_needs_two_snapshots() -> None:
    assert numa.vmstat_numa_delta(_tables("mariadb-sysbench-debian12.tar.gz", keep=lambda n: n == "vmstat.after")) is None
    assert numa.vmstat_numa_delta({}) is None


def test_sysfs_before_after_wins_over_a_single_command_snapshot() -> None:
    keep = lambda n: n.startswith("node-numastat") or n == "numastat.1"  # noqa: E731
    remote = numa.numa_remote(_tables("numa2-guest-iperf-debian12.tar.gz", keep=keep))
    assert remote["since_boot"].to_list() == [False, False]
    assert set(remote["first_source"]) == {"capture/os/node-numastat.0"}
    assert _node(remote, 1)["other_node"] == 15608
