"""The "Host configuration" table: one row per captured setting, with a recommendation and a status."""

from __future__ import annotations

import tarfile

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.database_memory import database_memory_bindings, database_memory_settings, node_memory
from dbdiag.derive.host_config import host_config_checks, node_count, ram_mb
from dbdiag.derive.host_counts import host_counts
from dbdiag.derive.numa import numa_process_memory
from dbdiag.parsers import mysql_variables, numactl, numastat, proc_cmdline, sys_choice, sysctl
from dbdiag.parsers.base import ParseContext
from tests.conftest import CORPUS

KEYS = ("setting", "value", "recommended", "why", "status", "source")


def _host(*rows: tuple) -> pl.DataFrame:
    return t.conform(t.HOST_SETTING, pl.DataFrame([
        {"category": r[0], "subject": r[1], "name": r[2], "value": r[3], "source": f"os/{r[0]}.txt"} for r in rows
    ]))


def _nodes(count: int, size_mb: int = 65536) -> dict[str, pl.DataFrame]:
    return {t.NUMA_NODE: t.conform(t.NUMA_NODE, pl.DataFrame({
        "node": list(range(count)), "cpus": [str(n) for n in range(count)], "size_mb": [size_mb] * count, "source": "os/numactl.txt",
    }))}


def _by_setting(rows: list[dict]) -> dict[str, dict]:
    assert all(tuple(row) == KEYS for row in rows)
    assert all(row["status"] in ("ok", "attention", "unknown") and row["why"] for row in rows)
    return {row["setting"]: row for row in rows}


def test_only_captured_settings_get_a_row():
    assert host_config_checks({}) == []
    rows = _by_setting(host_config_checks({t.HOST_SETTING: _host(("sysctl", None, "vm.zone_reclaim_mode", "1"))}))
    assert list(rows) == ["vm.zone_reclaim_mode"]
    assert rows["vm.zone_reclaim_mode"]["status"] == "attention" and rows["vm.zone_reclaim_mode"]["recommended"] == "0"


def test_sysctl_rows_and_their_status():
    settings = _host(
        ("sysctl", None, "vm.swappiness", "60"), ("sysctl", None, "net.core.somaxconn", "128"),
        ("sysctl", None, "vm.dirty_ratio", "20"), ("sysctl", None, "kernel.sched_autogroup_enabled", "0"),
        ("sysctl", None, "kernel.sched_migration_cost_ns", "500000"), ("sysctl", None, "kernel.sched_rr_timeslice_ms", "100"),
    )
    rows = _by_setting(host_config_checks({t.HOST_SETTING: settings, **_nodes(2)}))
    assert rows["vm.swappiness"]["status"] == "attention" and rows["vm.swappiness"]["recommended"] == "1-10"
    assert rows["net.core.somaxconn"]["status"] == "attention"
    assert "at most 25.6 GiB of 128.0 GiB RAM" in rows["vm.dirty_ratio"]["why"]  # 20% of 2 x 64 GiB
    assert rows["kernel.sched_autogroup_enabled"]["status"] == "ok"
    assert rows["kernel.sched_migration_cost_ns"]["recommended"] == "informational"
    assert "kernel.sched_rr_timeslice_ms" not in rows
    low = _by_setting(host_config_checks({t.HOST_SETTING: _host(("sysctl", None, "vm.swappiness", "10"))}))
    assert low["vm.swappiness"]["status"] == "ok"


def test_numa_balancing_row_depends_on_the_node_count():
    balancing = _host(("sysctl", None, "kernel.numa_balancing", "1"))
    one = _by_setting(host_config_checks({t.HOST_SETTING: balancing, **_nodes(1)}))["kernel.numa_balancing"]
    assert (one["recommended"], one["status"]) == ("n/a (1 node)", "ok")
    two = _by_setting(host_config_checks({t.HOST_SETTING: balancing, **_nodes(2)}))["kernel.numa_balancing"]
    assert two["status"] == "attention" and two["why"].startswith("2 nodes")
    unknown = _by_setting(host_config_checks({t.HOST_SETTING: balancing}))["kernel.numa_balancing"]
    assert unknown["status"] == "unknown"


def test_thp_block_and_cmdline_rows():
    settings = _host(
        ("thp", None, "enabled", "always"), ("thp", None, "defrag", "madvise"), ("thp", "khugepaged", "defrag", "1"),
        ("block", "nvme0n1", "scheduler", "mq-deadline"), ("block", "sda", "scheduler", "mq-deadline"),
        ("block", "sda", "rotational", "1"), ("block", "vda", "scheduler", "none"), ("block", "loop0", "scheduler", "none"),
        ("cmdline", None, "quiet", None), ("cmdline", None, "nohz_full", "2-7"), ("cmdline", None, "transparent_hugepage", "never"),
    )
    rows = _by_setting(host_config_checks({t.HOST_SETTING: settings, **_nodes(2)}))
    assert rows["transparent_hugepage/enabled"]["status"] == "attention"
    assert rows["transparent_hugepage/defrag"]["status"] == "ok"
    assert rows["nvme0n1 queue/scheduler"]["status"] == "attention" and rows["nvme0n1 queue/scheduler"]["recommended"] == "none"
    assert rows["sda queue/scheduler"]["status"] == "ok"
    assert rows["vda queue/scheduler"]["status"] == "unknown"
    assert "loop0 queue/scheduler" not in rows
    assert rows["cmdline isolcpus / nohz_full / rcu_nocbs / irqaffinity"]["value"] == "nohz_full=2-7"
    assert rows["cmdline transparent_hugepage"]["status"] == "ok"


def test_buffer_pool_rows_against_ram():
    settings = t.conform(t.DB_SETTING, pl.DataFrame({
        "engine": ["mariadb"] * 2, "kind": ["variable"] * 2, "name": ["innodb_buffer_pool_size", "innodb_numa_interleave"],
        "value": [str(8 * 2**30), "OFF"], "source": "db/vars.tsv",
    }))
    rows = _by_setting(host_config_checks({t.DB_SETTING: settings, **_nodes(2)}))
    assert rows["innodb_buffer_pool_size"]["value"] == "8.0 GiB (6.2% of 128.0 GiB RAM)"
    assert rows["innodb_buffer_pool_size"]["status"] == "attention"
    assert rows["innodb_numa_interleave"]["status"] == "attention"
    single = _by_setting(host_config_checks({t.DB_SETTING: settings, **_nodes(1, size_mb=10240)}))
    assert single["innodb_buffer_pool_size"]["status"] == "ok"  # 8 of 10 GiB
    assert single["innodb_numa_interleave"]["recommended"] == "n/a (1 node)"
    no_ram = _by_setting(host_config_checks({t.DB_SETTING: settings}))
    assert no_ram["innodb_buffer_pool_size"]["status"] == "unknown"


def test_node_count_and_ram_sources():
    assert node_count({}) is None and ram_mb({}) is None
    facts = t.host_fact_frame([("numa_node_count", "4"), ("mem_total_kb", "16384000")], "manifest.json")
    assert node_count({t.HOST_FACT: facts}).value == 4
    assert (ram_mb({t.HOST_FACT: facts}).value, ram_mb({t.HOST_FACT: facts}).source) == (16000, "manifest.json")
    lscpu_only = t.conform(t.NUMA_NODE, pl.DataFrame({"node": [0, 1], "cpus": ["0", "1"], "source": "lscpu.txt"}))
    assert ram_mb({t.NUMA_NODE: lscpu_only}) is None  # lscpu gives no sizes


def test_real_mariadb_capture_rows():
    tables: dict[str, list[pl.DataFrame]] = {}
    parsers = {"sysctl.txt": sysctl, "thp_enabled.txt": sys_choice, "cmdline.txt": proc_cmdline,
               "global_variables.tsv": mysql_variables, "numactl-hardware.txt": numactl}
    with tarfile.open(CORPUS / "captures" / "mariadb-sysbench-debian12.tar.gz", "r:gz") as tar:
        for member in tar.getmembers():
            parser = parsers.get(member.name.rsplit("/", 1)[-1])
            if parser is not None and member.isfile():
                text = tar.extractfile(member).read().decode()
                for name, frame in parser.parse(text, ParseContext(source=member.name)).tables.items():
                    tables.setdefault(name, []).append(frame)
    rows = _by_setting(host_config_checks({name: pl.concat(parts, how="diagonal_relaxed") for name, parts in tables.items()}))
    # Verified by hand: thp_enabled.txt "always [madvise] never"; sysctl.txt numa_balancing 0, swappiness 60;
    # numactl: 1 node of 6490 MB; innodb_buffer_pool_size 268435456, innodb_numa_interleave OFF.
    assert (rows["transparent_hugepage/enabled"]["value"], rows["transparent_hugepage/enabled"]["status"]) == ("madvise", "ok")
    assert rows["kernel.numa_balancing"]["recommended"] == "n/a (1 node)"
    assert (rows["vm.swappiness"]["value"], rows["vm.swappiness"]["status"]) == ("60", "attention")
    assert rows["innodb_buffer_pool_size"]["value"] == "256 MiB (3.9% of 6.3 GiB RAM)"
    assert rows["innodb_buffer_pool_size"]["source"] == "capture/db/global_variables.tsv"
    assert rows["innodb_numa_interleave"]["recommended"] == "n/a (1 node)"
    assert rows["cmdline isolcpus / nohz_full / rcu_nocbs / irqaffinity"]["value"] == "not set"


def test_database_memory_tables_take_the_running_value_and_size_every_node():
    settings = t.conform(t.DB_SETTING, pl.DataFrame([
        {"engine": "mariadb", "kind": "config", "name": "innodb_buffer_pool_size", "value": "8G", "source": "etc/my.cnf"},
        {"engine": "mariadb", "kind": "variable", "name": "INNODB_BUFFER_POOL_SIZE", "value": " 134217728 ", "source": "db/variables.tsv"},
        {"engine": "mariadb", "kind": "variable", "name": "innodb_buffer_pool_instances", "value": "x", "source": "db/variables.tsv"},
    ]))
    table = database_memory_settings({t.DB_SETTING: settings})
    assert table.schema == pl.Schema(t.DATABASE_MEMORY_SETTING_SCHEMA)
    assert table.select("name", "value", "size_bytes", "source").rows() == [
        ("innodb_buffer_pool_size", "134217728", 134217728, "db/variables.tsv"),  # the server's value, not my.cnf's
        ("innodb_buffer_pool_instances", "x", None, "db/variables.tsv"),
    ]
    nodes = node_memory(_nodes(2, size_mb=1024))
    assert nodes.select("node", "size_mb").rows() == [(0, 1024), (1, 1024)]
    counts = host_counts(_nodes(2, size_mb=1024))
    assert counts.filter(pl.col("fact") == "ram_mb").select("value", "source").row(0) == (2048, "os/numactl.txt")


NUMASTAT_ONE_PROCESS = """Per-node process memory usage (in MBs) for PID 812 (mariadbd)
                           Node 0          Node 1           Total
                  --------------- --------------- ---------------
Huge                         0.00            0.00            0.00
Heap                        10.00            0.00           10.00
Stack                        0.05            0.00            0.05
Private                   2030.00           40.00         2070.00
----------------  --------------- --------------- ---------------
Total                     2040.05           40.00         2080.05
"""
NUMASTAT_SUMMARY = """Per-node process memory usage (in MBs)
PID                        Node 0          Node 1           Total
----------------  --------------- --------------- ---------------
812 (mariadbd)            2040.05           40.00         2080.05
----------------  --------------- --------------- ---------------
Total                     2040.05           40.00         2080.05
"""


def test_database_memory_binding_counts_a_process_once_when_numastat_printed_it_twice():
    """A collector that runs ``numastat -p PID`` and ``numastat -p mariadbd`` prints the process's memory in two
    tables: its per-part table and the summary's Total row. The binding reads the derived per-process memory
    (the parts, else the Total): 2,080 MB, 98% on node 0, not twice that."""
    frames = [
        numastat.parse(text, ParseContext(source=name)).tables[t.NUMA_COUNTER]
        for name, text in (("os/numastat-p-812.txt", NUMASTAT_ONE_PROCESS), ("os/numastat-p-mariadbd.txt", NUMASTAT_SUMMARY))
    ]
    tables = {t.NUMA_COUNTER: pl.concat(frames)}
    tables[t.NUMA_PROCESS_MEMORY] = numa_process_memory(tables)
    bindings = database_memory_bindings(tables)
    assert bindings.select("process", "nodes", "how").rows() == [("mariadbd 812", [0], "numastat -p: 98% of 2,080 MB on node 0")]
