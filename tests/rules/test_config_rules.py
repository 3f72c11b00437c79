"""The host/database configuration rules on hand-built tables, and on the real captures' files."""

from __future__ import annotations

import tarfile

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive import derive_all
from dbdiag.engine import run_rule
from dbdiag.findings import Severity, Status
from dbdiag.parsers import mysql_variables, numactl, proc_cmdline, sys_choice, sysctl
from dbdiag.parsers.base import ParseContext
from dbdiag.rules.base import DOC_SECTIONS, RuleInput, split_doc_sections
from dbdiag.rules.config import (
    buffer_pool_exceeds_numa_node,
    buffer_pool_undersized,
    io_scheduler_not_none,
    no_cpu_isolation,
    numa_balancing_enabled,
    transparent_hugepages_enabled,
)
from tests.conftest import CORPUS

GIB = 2**30
MODULES = (
    transparent_hugepages_enabled,
    numa_balancing_enabled,
    io_scheduler_not_none,
    no_cpu_isolation,
    buffer_pool_undersized,
    buffer_pool_exceeds_numa_node,
)


def host(*rows: tuple) -> pl.DataFrame:
    """host_setting rows as (category, subject, name, value[, choices])."""
    records = [
        {"category": r[0], "subject": r[1], "name": r[2], "value": r[3], "choices": r[4] if len(r) > 4 else None,
         "source": {"sysctl": "os/sysctl.txt", "cmdline": "os/cmdline.txt", "thp": "os/thp.txt", "block": "os/block.txt",
                    "process_affinity": "os/status.txt"}[r[0]]}
        for r in rows
    ]
    return t.conform(t.HOST_SETTING, pl.DataFrame(records))


def nodes(count: int, size_mb: int | None = 65536, cpus_per_node: int = 4) -> dict[str, pl.DataFrame]:
    cpus = list(range(count * cpus_per_node))
    return {
        t.TOPOLOGY: t.conform(t.TOPOLOGY, pl.DataFrame({"cpu": cpus, "node": [c // cpus_per_node for c in cpus], "source": "os/lscpu.txt"})),
        t.NUMA_NODE: t.conform(t.NUMA_NODE, pl.DataFrame({
            "node": list(range(count)),
            "cpus": [f"{n * cpus_per_node}-{n * cpus_per_node + cpus_per_node - 1}" for n in range(count)],
            "size_mb": [size_mb] * count, "source": "os/numactl-hardware.txt",
        })),
    }


def db(*rows: tuple, engine: str = "mariadb") -> pl.DataFrame:
    """db_setting rows as (kind, name, value[, unit])."""
    return t.conform(t.DB_SETTING, pl.DataFrame([
        {"engine": engine, "kind": r[0], "name": r[1], "value": r[2], "unit": r[3] if len(r) > 3 else None,
         "source": "db/global_status.tsv" if r[0] == "status" else "db/global_variables.tsv"}
        for r in rows
    ]))


def derived(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The derived tables the config rules read, as the derive stage makes them."""
    return derive_all(tables).tables


def run(module, tables: dict[str, pl.DataFrame], metrics: dict | None = None):
    return run_rule(module.RULE, RuleInput(tables=tables, derived=derived(tables), metrics=metrics or {}))


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.RULE_ID)
def test_rule_documents_every_section_and_its_thresholds(module):
    sections = split_doc_sections(module.RULE.doc)
    assert all(sections.get(name) for name in DOC_SECTIONS), module.RULE_ID
    assert module.RULE.id == module.RULE_ID and module.RULE.area == "config"


# --- transparent-hugepages-enabled -------------------------------------------------------------

THP_VMSTAT = t.conform(t.VMSTAT_COUNT, pl.DataFrame({
    "snapshot": [0, 0, 0], "counter": ["thp_fault_alloc", "thp_split_page", "pgfault"], "value": [8123, 97, 10**9],
    "source": "os/vmstat.after",
}))


def test_thp_always_fires_with_defrag_and_vmstat_counters():
    tables = {t.HOST_SETTING: host(("thp", None, "enabled", "always", "always madvise never"),
                                   ("thp", None, "defrag", "always", "always defer defer+madvise madvise never"),
                                   ("thp", "khugepaged", "defrag", "1")),
              t.VMSTAT_COUNT: THP_VMSTAT}
    outcome = run(transparent_hugepages_enabled, tables)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.WARNING
    assert "enabled = always; defrag = always" in finding.title and "never or madvise" in finding.title
    settings, counters = finding.evidence[0], finding.evidence[1]
    assert ("defrag", "always", "always defer defer+madvise madvise never", "os/thp.txt") in settings.rows
    assert [row[:3] for row in counters.rows] == [("thp_fault_alloc", 0, 8123), ("thp_split_page", 0, 97)]
    assert "echo never > /sys/kernel/mm/transparent_hugepage/enabled" in finding.remediation
    assert "echo never > /sys/kernel/mm/transparent_hugepage/defrag" in finding.remediation
    assert "transparent_hugepage=never" in finding.remediation
    assert finding.sources == ("os/thp.txt", "os/vmstat.after")


@pytest.mark.parametrize("value", ["madvise", "never"])
def test_thp_madvise_or_never_passes(value):
    outcome = run(transparent_hugepages_enabled, {t.HOST_SETTING: host(("thp", None, "enabled", value, "always madvise never"))})
    assert outcome.status is Status.PASSED
    assert f"THP enabled = {value}" in outcome.measured


def test_thp_from_the_kernel_command_line_when_the_file_is_absent():
    outcome = run(transparent_hugepages_enabled, {t.HOST_SETTING: host(("cmdline", None, "transparent_hugepage", "always"))})
    assert outcome.status is Status.FIRED
    assert outcome.findings[0].impact["from"] == "kernel command line"


def test_thp_runtime_file_wins_over_the_boot_parameter():
    tables = {t.HOST_SETTING: host(("cmdline", None, "transparent_hugepage", "always"), ("thp", None, "enabled", "madvise"))}
    outcome = run(transparent_hugepages_enabled, tables)
    assert outcome.status is Status.PASSED
    assert "overridden at runtime" in outcome.measured


def test_thp_per_size_directory_is_not_the_setting_and_absence_skips():
    tables = {t.HOST_SETTING: host(("thp", "hugepages-2048kB", "enabled", "always"), ("sysctl", None, "vm.swappiness", "60"))}
    outcome = run(transparent_hugepages_enabled, tables)
    assert outcome.status is Status.SKIPPED
    assert "transparent_hugepage/enabled" in outcome.missing[0]


# --- numa-balancing-enabled --------------------------------------------------------------------

VMSTAT_NUMA = {"counters": {"numa_hint_faults": 1_234_567, "numa_pages_migrated": 45_678, "numa_pte_updates": 2_000_000},
               "sources": ["os/vmstat.before", "os/vmstat.after"]}


def test_numa_balancing_on_two_nodes_fires_with_vmstat_growth():
    tables = {t.HOST_SETTING: host(("sysctl", None, "kernel.numa_balancing", "1")), **nodes(2)}
    outcome = run(numa_balancing_enabled, tables, {"vmstat_numa": VMSTAT_NUMA})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title.startswith("Automatic NUMA balancing on (kernel.numa_balancing = 1) on 2 NUMA nodes, 1,234,567 hinting faults")
    assert "recommended: 0" in finding.title
    growth = finding.evidence[1]
    assert growth.rows == (("numa_pte_updates", 2_000_000), ("numa_hint_faults", 1_234_567), ("numa_pages_migrated", 45_678))
    assert "sysctl -w kernel.numa_balancing=0" in finding.remediation and "/etc/sysctl.d/" in finding.remediation
    assert "os/vmstat.after" in finding.sources


def test_numa_balancing_never_fires_on_one_node():
    tables = {t.HOST_SETTING: host(("sysctl", None, "kernel.numa_balancing", "1")), **nodes(1)}
    outcome = run(numa_balancing_enabled, tables, {"vmstat_numa": VMSTAT_NUMA})
    assert outcome.status is Status.PASSED
    assert "1 NUMA node(s)" in outcome.measured and "one node" in outcome.measured


@pytest.mark.parametrize("value", ["0", "2"])  # 2 = memory tiering only, no hinting-fault balancing between nodes
def test_numa_balancing_off_or_tiering_only_passes(value):
    outcome = run(numa_balancing_enabled, {t.HOST_SETTING: host(("sysctl", None, "kernel.numa_balancing", value)), **nodes(2)})
    assert outcome.status is Status.PASSED


def test_numa_balancing_from_cmdline_and_sysctl_wins():
    only_boot = {t.HOST_SETTING: host(("cmdline", None, "numa_balancing", "enable")), **nodes(4)}
    assert run(numa_balancing_enabled, only_boot).status is Status.FIRED
    both = {t.HOST_SETTING: host(("cmdline", None, "numa_balancing", "enable"), ("sysctl", None, "kernel.numa_balancing", "0")), **nodes(4)}
    assert run(numa_balancing_enabled, both).status is Status.PASSED


def test_numa_balancing_skips_without_nodes_or_setting():
    no_nodes = run(numa_balancing_enabled, {t.HOST_SETTING: host(("sysctl", None, "kernel.numa_balancing", "1"))})
    assert no_nodes.status is Status.SKIPPED and "topology" in no_nodes.missing[0]
    no_setting = run(numa_balancing_enabled, {t.HOST_SETTING: host(("sysctl", None, "vm.swappiness", "1")), **nodes(2)})
    assert no_setting.status is Status.SKIPPED and "kernel.numa_balancing" in no_setting.missing[0]


# --- io-scheduler-not-none ---------------------------------------------------------------------

def _disk(device: str, scheduler: str, rotational: str | None) -> list[tuple]:
    rows = [("block", device, "scheduler", scheduler, "none mq-deadline kyber bfq")]
    return rows + ([("block", device, "rotational", rotational)] if rotational is not None else [])


def test_nvme_and_ssd_on_a_scheduler_fire_rotational_passes():
    rows = _disk("nvme0n1", "mq-deadline", "0") + _disk("sda", "bfq", "0") + _disk("sdb", "mq-deadline", "1") + _disk("nvme1n1", "none", "0")
    outcome = run(io_scheduler_not_none, {t.HOST_SETTING: host(*rows)})
    assert outcome.status is Status.FIRED
    assert [f.subject for f in outcome.findings] == ["nvme0n1", "sda"]
    nvme = outcome.findings[0]
    assert nvme.title == "nvme0n1 (NVMe) uses the mq-deadline I/O scheduler; expected: none"
    assert "echo none > /sys/block/nvme0n1/queue/scheduler" in nvme.remediation
    assert 'ATTR{queue/scheduler}="none"' in nvme.remediation
    assert outcome.findings[1].title.startswith("sda (SSD, rotational = 0) uses the bfq")
    assert "sdb (rotational): mq-deadline, a scheduler is right for it" in outcome.measured


def test_flash_on_none_passes_and_unknown_type_is_not_judged():
    rows = _disk("nvme0n1", "none", None) + _disk("vda", "mq-deadline", None) + _disk("loop0", "mq-deadline", "0")
    outcome = run(io_scheduler_not_none, {t.HOST_SETTING: host(*rows)})
    assert outcome.status is Status.PASSED
    assert "nvme0n1 (nvme): none" in outcome.measured
    assert "vda: mq-deadline, not judged (rotational flag not captured, not nvme)" in outcome.measured
    assert "loop0" not in outcome.measured


def test_io_scheduler_skips_without_disks():
    outcome = run(io_scheduler_not_none, {t.HOST_SETTING: host(*_disk("loop3", "none", "0"))})
    assert outcome.status is Status.SKIPPED and "queue/scheduler" in outcome.missing[0]


# --- no-cpu-isolation --------------------------------------------------------------------------

STATEMENTS = t.conform(t.STATEMENT, pl.DataFrame({"stmt_id": [0, 1], "engine": ["mariadb"] * 2, "source": "db/slow.log"}))
PLAIN_CMDLINE = (("cmdline", None, "BOOT_IMAGE", "/vmlinuz"), ("cmdline", None, "quiet", None))


def test_multi_node_database_host_without_isolation_is_info():
    tables = {t.HOST_SETTING: host(*PLAIN_CMDLINE), t.STATEMENT: STATEMENTS, **nodes(2)}
    outcome = run(no_cpu_isolation, tables)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.severity is Severity.INFO
    assert finding.title.startswith("2-node database host of 8 CPUs (0-7): no isolcpus/nohz_full/rcu_nocbs/irqaffinity")
    assert ("database process affinity", "not captured (/proc/PID/status)", "") in finding.evidence[0].rows
    assert "2 SQL statements (mariadb)" in finding.evidence[1].text


def test_database_on_every_cpu_fires_and_bound_database_passes():
    perf = t.conform(t.PERF_STACK, pl.DataFrame({"comm": ["mariadbd", "swapper"], "samples": [10, 5], "source": "os/perf-script.txt"}))
    everywhere = host(*PLAIN_CMDLINE, ("process_affinity", "mariadbd 4242", "Cpus_allowed_list", "0-7"))
    fired = run(no_cpu_isolation, {t.HOST_SETTING: everywhere, t.PERF_STACK: perf, **nodes(2)})
    assert fired.status is Status.FIRED
    assert ("mariadbd 4242 Cpus_allowed_list", "0-7", "os/status.txt") in fired.findings[0].evidence[0].rows
    bound = host(*PLAIN_CMDLINE, ("process_affinity", "mariadbd 4242", "Cpus_allowed_list", "0-3"))
    passed = run(no_cpu_isolation, {t.HOST_SETTING: bound, t.PERF_STACK: perf, **nodes(2)})
    assert passed.status is Status.PASSED and "mariadbd 4242 on CPUs 0-3" in passed.measured


def test_isolation_on_the_command_line_passes():
    tables = {t.HOST_SETTING: host(*PLAIN_CMDLINE, ("cmdline", None, "nohz_full", "2-7")), t.STATEMENT: STATEMENTS, **nodes(2)}
    outcome = run(no_cpu_isolation, tables)
    assert outcome.status is Status.PASSED and "nohz_full=2-7" in outcome.measured


def test_no_cpu_isolation_never_fires_on_one_node():
    outcome = run(no_cpu_isolation, {t.HOST_SETTING: host(*PLAIN_CMDLINE), t.STATEMENT: STATEMENTS, **nodes(1)})
    assert outcome.status is Status.PASSED and "1 NUMA node" in outcome.measured


def test_no_cpu_isolation_skips_without_cmdline_or_database():
    no_cmdline = run(no_cpu_isolation, {t.HOST_SETTING: host(("sysctl", None, "vm.swappiness", "1")), t.STATEMENT: STATEMENTS, **nodes(2)})
    assert no_cmdline.status is Status.SKIPPED and "/proc/cmdline" in no_cmdline.missing[0]
    no_db = run(no_cpu_isolation, {t.HOST_SETTING: host(*PLAIN_CMDLINE), **nodes(2)})
    assert no_db.status is Status.SKIPPED and "no database seen" in no_db.missing[0]


# --- buffer-pool-undersized --------------------------------------------------------------------

def _innodb(pool_bytes: int, reads: int | None = None, requests: int | None = None) -> pl.DataFrame:
    rows = [("variable", "innodb_buffer_pool_size", str(pool_bytes)), ("variable", "version", "10.11.6-MariaDB")]
    if reads is not None:
        rows += [("status", "Innodb_buffer_pool_reads", str(reads)), ("status", "Innodb_buffer_pool_read_requests", str(requests))]
    return db(*rows)


def test_small_innodb_pool_with_misses_fires_with_a_computed_target():
    tables = {t.DB_SETTING: _innodb(1 * GIB, reads=50_000, requests=1_000_000), **nodes(1, size_mb=65536)}
    outcome = run(buffer_pool_undersized, tables)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title == (
        "InnoDB buffer pool 1.0 GiB is 1.6% of 64.0 GiB RAM, 5.0% of page reads missed it; "
        "threshold: < 50% of RAM with misses > 1%"
    )
    target = 42496 * 2**20  # 65% of 65,536 MiB = 42,598.4 MiB, down to a multiple of the 128 MiB default chunk
    assert f"SET GLOBAL innodb_buffer_pool_size = {target};" in finding.remediation
    assert "innodb_buffer_pool_size = 42496M under [mysqld]" in finding.remediation
    rows = {row[0]: row for row in finding.evidence[0].rows}
    assert rows["RAM"][3] == "os/numactl-hardware.txt"
    assert rows["Innodb_buffer_pool_reads (misses)"][2] == "miss ratio 5.00%"


def test_innodb_just_inside_both_thresholds():
    ram = 64 * GIB
    half = ram // 2
    # At 50% of RAM the pool is not small, whatever the misses.
    assert run(buffer_pool_undersized, {t.DB_SETTING: _innodb(half, 50_000, 1_000_000), **nodes(1)}).status is Status.PASSED
    assert run(buffer_pool_undersized, {t.DB_SETTING: _innodb(half - 2**20, 50_000, 1_000_000), **nodes(1)}).status is Status.FIRED
    # A miss ratio of exactly 1% is not above the threshold; 1.001% is.
    assert run(buffer_pool_undersized, {t.DB_SETTING: _innodb(GIB, 10_000, 1_000_000), **nodes(1)}).status is Status.PASSED
    assert run(buffer_pool_undersized, {t.DB_SETTING: _innodb(GIB, 10_010, 1_000_000), **nodes(1)}).status is Status.FIRED


def test_innodb_without_status_fires_only_below_a_quarter_of_ram():
    quarter = 16 * GIB
    passed = run(buffer_pool_undersized, {t.DB_SETTING: _innodb(quarter), **nodes(1)})
    assert passed.status is Status.PASSED and "no SHOW GLOBAL STATUS" in passed.measured
    fired = run(buffer_pool_undersized, {t.DB_SETTING: _innodb(quarter - 2**20), **nodes(1)})
    assert fired.status is Status.FIRED and "threshold: < 25% of RAM (no SHOW GLOBAL STATUS)" in fired.findings[0].title
    # Too few read requests to trust the ratio: judged as without status.
    few = run(buffer_pool_undersized, {t.DB_SETTING: _innodb(quarter - 2**20, 5_000, 9_999), **nodes(1)})
    assert few.status is Status.FIRED and "only 9,999 read requests" in few.findings[0].title


def test_postgres_default_shared_buffers_on_a_big_vm_fires():
    settings = db(("variable", "shared_buffers", "16384", "8kB"), engine="postgresql")
    counters = t.conform(t.NUMA_COUNTER, pl.DataFrame({
        "snapshot": [0, 0], "scope": ["meminfo"] * 2, "node": [0, 0], "counter": ["MemTotal", "MemFree"],
        "value": [131072.0, 1000.0], "unit": ["MB"] * 2, "source": "os/numastat-m.txt",
    }))
    outcome = run(buffer_pool_undersized, {t.DB_SETTING: settings, t.NUMA_COUNTER: counters})
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title == (
        "PostgreSQL shared_buffers 128 MiB (the compiled-in default) is 0.1% of 128.0 GiB RAM; threshold: < 10% (advice ~25%)"
    )
    assert "ALTER SYSTEM SET shared_buffers = '32GB';" in finding.remediation
    assert "effective_cache_size = '96GB'" in finding.remediation
    assert "vm.nr_hugepages = 16876" in finding.remediation  # 32 GiB / 2 MiB x 1.03, rounded up
    assert "os/numastat-m.txt" in finding.sources


def test_postgres_shared_buffers_at_the_threshold_passes_and_just_under_fires():
    ram_mb = 10240
    at = db(("variable", "shared_buffers", "1GB"), engine="postgresql")
    assert run(buffer_pool_undersized, {t.DB_SETTING: at, **nodes(1, size_mb=ram_mb)}).status is Status.PASSED
    under = db(("variable", "shared_buffers", "1023MB"), engine="postgresql")
    assert run(buffer_pool_undersized, {t.DB_SETTING: under, **nodes(1, size_mb=ram_mb)}).status is Status.FIRED


def test_buffer_pool_skips_without_ram_or_setting_and_ignores_tidb():
    no_ram = run(buffer_pool_undersized, {t.DB_SETTING: _innodb(GIB)})
    assert no_ram.status is Status.SKIPPED and "numactl --hardware" in no_ram.missing[0]
    zero_sized = run(buffer_pool_undersized, {t.DB_SETTING: _innodb(GIB), **nodes(2, size_mb=0)})
    assert zero_sized.status is Status.SKIPPED and "RAM unknown" in zero_sized.missing[0]
    tidb = db(("variable", "innodb_buffer_pool_size", "134217728"), ("variable", "version", "8.0.11-TiDB-v7.5.1"), engine=None)
    skipped = run(buffer_pool_undersized, {t.DB_SETTING: tidb, **nodes(1)})
    assert skipped.status is Status.SKIPPED and "innodb_buffer_pool_size or shared_buffers" in skipped.missing[0]


# --- buffer-pool-exceeds-numa-node -------------------------------------------------------------

def test_pool_larger_than_the_bound_node_fires():
    tables = {
        t.DB_SETTING: _innodb(100 * GIB),
        t.HOST_SETTING: host(("process_affinity", "mariadbd 4242", "Mems_allowed_list", "0"),
                             ("process_affinity", "mariadbd 4242", "Cpus_allowed_list", "0-3")),
        **nodes(2, size_mb=65536),
    }
    outcome = run(buffer_pool_exceeds_numa_node, tables)
    assert outcome.status is Status.FIRED
    finding = outcome.findings[0]
    assert finding.title.startswith("innodb_buffer_pool_size 100.0 GiB exceeds the 64.0 GiB of node(s) 0 that mariadbd 4242 is bound to")
    assert "numactl --interleave=all" in finding.remediation and "innodb_numa_interleave = ON" in finding.remediation
    assert f"SET GLOBAL innodb_buffer_pool_size = {52352 * 2**20};" in finding.remediation  # 80% of 65,536 MiB = 52,428.8 MiB, down to 128 MiB steps
    assert finding.evidence[1].rows == ((0, "65,536 MB", "yes"), (1, "65,536 MB", "no"))


def test_pool_that_fits_the_bound_node_or_an_unbound_process_passes():
    bound = host(("process_affinity", "mariadbd 4242", "Mems_allowed_list", "0"))
    fits = run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: _innodb(64 * GIB), t.HOST_SETTING: bound, **nodes(2)})
    assert fits.status is Status.PASSED and "mariadbd 4242: nodes 0" in fits.measured
    assert run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: _innodb(64 * GIB + 2**20), t.HOST_SETTING: bound, **nodes(2)}).status is Status.FIRED
    both = host(("process_affinity", "mariadbd 4242", "Mems_allowed_list", "0-1"))
    assert run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: _innodb(100 * GIB), t.HOST_SETTING: both, **nodes(2)}).status is Status.PASSED


def test_numastat_p_with_the_process_on_one_node_counts_as_bound():
    counters = t.conform(t.NUMA_COUNTER, pl.DataFrame({
        "snapshot": [0] * 4, "scope": ["process"] * 4, "pid": [77] * 4, "process": ["postgres"] * 4,
        "node": [0, 1, 0, 1], "counter": ["Private", "Private", "Heap", "Heap"],
        "value": [2000.0, 10.0, 40.0, 0.0], "unit": ["MB"] * 4, "source": "os/numastat-p.txt",
    }))
    settings = db(("variable", "shared_buffers", "3GB"), engine="postgresql")
    outcome = run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: settings, t.NUMA_COUNTER: counters, **nodes(2, size_mb=2048)})
    assert outcome.status is Status.FIRED
    assert "numastat -p: 100% of 2,050 MB on node 0" in outcome.findings[0].evidence[0].rows[1][1]
    assert "ALTER SYSTEM SET shared_buffers = '1536MB'" in outcome.findings[0].remediation  # 80% of 2 GiB in 128 MiB steps


def test_pool_rule_never_fires_on_one_node_and_skips_without_binding():
    bound = host(("process_affinity", "mariadbd 4242", "Mems_allowed_list", "0"))
    one = run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: _innodb(100 * GIB), t.HOST_SETTING: bound, **nodes(1)})
    assert one.status is Status.PASSED and "1 NUMA node" in one.measured
    unknown = run(buffer_pool_exceeds_numa_node, {t.DB_SETTING: _innodb(100 * GIB), **nodes(2)})
    assert unknown.status is Status.SKIPPED and "Mems_allowed_list" in unknown.missing[0]


def test_numactl_show_counts_only_with_a_bind_policy():
    def facts(policy: str) -> pl.DataFrame:
        return t.host_fact_frame([("numactl_show_policy", policy), ("numactl_show_membind", "1")], "os/numactl-show.txt")

    tables = {t.DB_SETTING: _innodb(100 * GIB), **nodes(2)}
    bound = run(buffer_pool_exceeds_numa_node, {**tables, t.HOST_FACT: facts("bind")})
    assert bound.status is Status.FIRED and "node(s) 1 that numactl --show" in bound.findings[0].title
    default = run(buffer_pool_exceeds_numa_node, {**tables, t.HOST_FACT: facts("default")})
    assert default.status is Status.SKIPPED


# --- the real captures' files through the real parsers ------------------------------------------

CAPTURE_PARSERS = {
    "sysctl.txt": sysctl, "thp_enabled.txt": sys_choice, "cmdline.txt": proc_cmdline,
    "global_variables.tsv": mysql_variables, "global_status.tsv": mysql_variables, "numactl-hardware.txt": numactl,
}


def _capture_tables(capture: str) -> dict[str, pl.DataFrame]:
    frames: dict[str, list[pl.DataFrame]] = {}
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        for member in tar.getmembers():
            parser = CAPTURE_PARSERS.get(member.name.rsplit("/", 1)[-1])
            if parser is None or not member.isfile():
                continue
            text = tar.extractfile(member).read().decode("utf-8", "backslashreplace")
            for name, frame in parser.parse(text, ParseContext(source=member.name)).tables.items():
                frames.setdefault(name, []).append(frame)
    return {name: pl.concat(parts, how="diagonal_relaxed") for name, parts in frames.items()}


def _outcomes(capture: str) -> dict[str, object]:
    captured = _capture_tables(capture)
    inp = RuleInput(tables=captured, derived=derived(captured), metrics={})
    return {module.RULE_ID: run_rule(module.RULE, inp) for module in MODULES}


def test_one_node_mariadb_capture_fires_nothing():
    outcomes = _outcomes("mariadb-sysbench-debian12.tar.gz")
    assert {rule: o.status for rule, o in outcomes.items()} == {
        "transparent-hugepages-enabled": Status.PASSED,  # thp_enabled.txt: always [madvise] never
        "numa-balancing-enabled": Status.PASSED,  # kernel.numa_balancing = 0, and 1 node
        "io-scheduler-not-none": Status.SKIPPED,  # no /sys/block listing in the capture
        "no-cpu-isolation": Status.PASSED,  # 1 node
        "buffer-pool-undersized": Status.PASSED,  # 256 MiB of 6,490 MB, but 170 misses of 284,972 reads
        "buffer-pool-exceeds-numa-node": Status.PASSED,  # 1 node
    }
    assert "1 NUMA node(s)" in outcomes["numa-balancing-enabled"].measured
    assert outcomes["buffer-pool-undersized"].measured.startswith(
        "innodb_buffer_pool_size 256 MiB = 3.9% of 6.3 GiB RAM, miss ratio 0.06% (170 of 284,972 reads)"
    )


def test_one_node_postgres_capture_fires_no_numa_rule():
    outcomes = _outcomes("postgres-pgbench-debian12.tar.gz")
    for rule in ("numa-balancing-enabled", "no-cpu-isolation"):
        assert outcomes[rule].status is Status.PASSED, rule
    assert outcomes["transparent-hugepages-enabled"].status is Status.PASSED


def test_two_node_guest_fires_thp_and_numa_balancing():
    outcomes = _outcomes("numa2-guest-iperf-debian12.tar.gz")
    thp, balancing = outcomes["transparent-hugepages-enabled"], outcomes["numa-balancing-enabled"]
    assert thp.status is Status.FIRED and "enabled = always" in thp.findings[0].title  # [always] madvise never
    assert balancing.status is Status.FIRED and "on 2 NUMA nodes" in balancing.findings[0].title  # kernel.numa_balancing = 1
    assert outcomes["no-cpu-isolation"].status is Status.SKIPPED  # an iperf guest: no database in it


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.RULE_ID)
def test_junk_settings_never_error(module):
    junk = host(
        ("sysctl", None, None, None), ("sysctl", None, "kernel.numa_balancing", "\x00yes"), ("thp", None, "enabled", None),
        ("cmdline", None, "isolcpus", None), ("block", None, "scheduler", "none"), ("block", "nvme0n1", "rotational", "x"),
        ("process_affinity", "mariadbd 1", "Mems_allowed_list", "zz"), ("process_affinity", "mariadbd 1", "Cpus_allowed_list", "-"),
    )
    settings = db(("variable", "innodb_buffer_pool_size", "lots"), ("variable", "shared_buffers", None),
                  ("status", "Innodb_buffer_pool_reads", "x"), ("status", "Innodb_buffer_pool_read_requests", None))
    outcome = run(module, {t.HOST_SETTING: junk, t.DB_SETTING: settings, t.STATEMENT: STATEMENTS, **nodes(2)})
    assert outcome.status is not Status.ERRORED, outcome.error


def test_a_shared_buffers_below_a_mib_is_said_in_kib_with_its_share():
    """shared_buffers = 16 (x 8kB = 128 KiB) on 128 GiB: the title says 128 KiB and 0.000095%, not "0 MiB is 0.0%"."""
    settings = db(("variable", "shared_buffers", "16", "8kB"), engine="postgresql")
    counters = t.conform(t.NUMA_COUNTER, pl.DataFrame({
        "snapshot": [0], "scope": ["meminfo"], "node": [0], "counter": ["MemTotal"], "value": [131072.0], "unit": ["MB"],
        "source": "os/numastat-m.txt",
    }))
    (finding,) = run(buffer_pool_undersized, {t.DB_SETTING: settings, t.NUMA_COUNTER: counters}).findings
    assert finding.title.startswith("PostgreSQL shared_buffers 128 KiB is 0.000095% of 128.0 GiB RAM; ")
