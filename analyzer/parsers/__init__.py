"""The parser registry: every input format dbdiag reads. Adding one = a module with ``SPEC`` + a line here.

``PARSERS`` (detection order) imports the modules on first use, not when this package is imported:
a process that reads one format (a benchmark, a test of one parser) does not pay for compiling
every other parser's patterns.
"""

from __future__ import annotations

from importlib import import_module

from dbdiag.parsers.base import ParserSpec

MODULES = (
    "manifest",
    "mpstat_text",
    "mpstat_json",
    "iostat_text",
    "iostat_json",
    "proc_mounts",
    "proc_diskstats",
    "vmstat",
    "proc_pressure",
    "proc_meminfo",
    "sadf",
    "proc_softirqs",
    "proc_interrupts",
    "lscpu",
    "numactl",
    "numastat",
    "sys_node",
    "proc_vmstat",
    "proc_stat",
    "pg_stderr",
    "pg_csvlog",
    "pg_jsonlog",
    "mysql_slowlog",
    "tidb_slowlog",
    "tidb_cluster_slow_query",
    "tidb_dashboard",
    "sysctl",
    "proc_cmdline",
    "sys_choice",
    "irq_affinity",
    "ethtool_channels",
    "proc_status",
    "mysql_variables",
    "pg_settings",
    "pg_conf",
    "pg_stat_database",
    "tidb_config",
    "perf_script",
    "perf_report",
    "perf_top",
    "sysbench",
    "pgbench",
    "kernel_log",
    "mysql_error_log",
    "tidb_log",
    "prometheus_json",
    "tidb_dashboard_metrics",
    "grafana_csv",
    "tidb_statements",
    "haproxy_stat",
    "haproxy_cfg",
    "jmeter_jtl_csv",
    "jmeter_jtl_xml",
)


def registry() -> tuple[ParserSpec, ...]:
    """The ``SPEC`` of every parser module, in detection order."""
    return tuple(import_module(f"dbdiag.parsers.{name}").SPEC for name in MODULES)


def __getattr__(name: str) -> tuple[ParserSpec, ...]:
    if name == "PARSERS":
        return registry()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
