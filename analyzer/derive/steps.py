"""The ``compute`` of each derivation in ``DERIVATIONS``: the derive modules' functions, their results
by the names ``dbdiag.tables`` declares. ``view`` holds the parsed tables and the derived inputs the
derivation requires; ``options`` is a ``DeriveOptions``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import changes as changes_module
from dbdiag.derive import database_memory as database_memory_module
from dbdiag.derive import disks as disks_module
from dbdiag.derive import memory_pressure as memory_pressure_module
from dbdiag.derive import cpu as cpu_module
from dbdiag.derive import cpu_profile as cpu_profile_module
from dbdiag.derive import engine_version as engine_version_module
from dbdiag.derive import background_activity as background_activity_module
from dbdiag.derive import histogram_windows as histogram_windows_module
from dbdiag.derive import full_scans as full_scans_module, host as host_module, host_config as host_config_module, idle_gaps as idle_gaps_module
from dbdiag.derive import host_counts as host_counts_module
from dbdiag.derive import numa, proc_stat as proc_stat_module, public_text as public_text_module, sql as sql_module, sql_statements
from dbdiag.derive import pg_stat_database as pg_stat_database_module
from dbdiag.derive import time_accounting as time_accounting_module
from dbdiag.derive import timeline as timeline_module

if TYPE_CHECKING:
    from dbdiag.derive import DeriveOptions

View = Mapping[str, Any]


def public_text(view: View, options: DeriveOptions) -> dict[str, Any]:
    return public_text_module.public_text_tables(dict(view), options.sql.show_literals)


def sql(view: View, options: DeriveOptions) -> dict[str, Any]:
    statements, metrics = sql_module.derive_sql(dict(view), options.sql)
    return {t.FINGERPRINTED_STATEMENT: statements, **metrics}


def plan_nodes(view: View, options: DeriveOptions) -> dict[str, Any]:
    nodes = view.get(t.PLAN_NODE)
    return {t.PUBLIC_PLAN_NODE: sql_module.public_plan_nodes(nodes, options.sql) if nodes is not None else None}


def lock_waits(view: View, options: DeriveOptions) -> dict[str, Any]:
    waits = view.get(t.LOCK_WAIT)
    return {t.PUBLIC_LOCK_WAIT: sql_module.public_lock_waits(waits, options.sql.show_literals) if waits is not None else None}


def device_interrupts(view: View, options: DeriveOptions) -> dict[str, Any]:
    irq_delta = view.get(t.IRQ_DELTA)
    if irq_delta is None or irq_delta.height == 0:
        return {}
    devices = cpu_module.device_interrupts(irq_delta)
    return {t.DEVICE_INTERRUPT: devices, t.INTERRUPTS_METRIC: cpu_module.interrupts_per_node(devices) or None}


def idle_gaps(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.IDLE_GAPS_METRIC: idle_gaps_module.idle_gaps(dict(view))}


def changes(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.CHANGE: changes_module.changes(dict(view), options.sql.show_literals)}


def cpu(view: View, options: DeriveOptions) -> dict[str, Any]:
    """Per CPU (always a table, empty without input), CPU -> node, IRQ growth, and the ``cpu`` metric."""
    tables = dict(view)
    softirq_delta, softirq_sources = cpu_module.softirq_count_delta(tables)
    per_cpu = cpu_module.per_cpu_summary(tables, softirq_delta)
    irq_delta, irq_sources = cpu_module.irq_delta(tables)
    metric = None
    if per_cpu.height:
        metric = {
            "cpus": per_cpu.height,
            "nodes": per_cpu["node"].drop_nulls().n_unique(),
            "softirq_snapshots": softirq_sources,
            "interrupt_snapshots": irq_sources,
            "per_cpu": _rounded_rows(per_cpu),
        }
    return {t.PER_CPU: per_cpu, t.CPU_NODE: cpu_module.cpu_nodes(tables), t.IRQ_DELTA: irq_delta, t.CPU_METRIC: metric}


def cpu_fallback() -> dict[str, Any]:
    return {t.PER_CPU: cpu_module.empty_per_cpu()}


def _rounded_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    floats = [name for name, dtype in frame.schema.items() if dtype.is_float()]
    return frame.with_columns(pl.col(floats).round(2)).to_dicts()


def host(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.HOST_METRIC: host_module.host_summary(dict(view)) or None}


def host_counts(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.HOST_COUNT: host_counts_module.host_counts(view)}


def cpu_profile(view: View, options: DeriveOptions) -> dict[str, Any]:
    tables, metric = cpu_profile_module.cpu_profile(dict(view))
    return {**tables, t.CPU_PROFILE_METRIC: metric}


def numa_remote(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.NUMA_REMOTE: numa.numa_remote(dict(view))}


def numa_process_memory(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.NUMA_PROCESS_MEMORY: numa.numa_process_memory(dict(view))}


def vmstat_numa(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.VMSTAT_NUMA_METRIC: numa.vmstat_numa_delta(dict(view))}


def proc_stat(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.PROC_STAT_METRIC: proc_stat_module.proc_stat_rates(dict(view))}


def disks(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.DISKS_METRIC: disks_module.disk_summary(dict(view))}


def memory_pressure(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.MEMORY_PRESSURE_METRIC: memory_pressure_module.memory_pressure(dict(view))}


def pg_stat_database(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.PG_STAT_DATABASE_METRIC: pg_stat_database_module.pg_stat_database_delta(dict(view))}


def host_config(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.HOST_CONFIG_METRIC: host_config_module.host_config_checks(dict(view)) or None}


def host_config_values(view: View, options: DeriveOptions) -> dict[str, Any]:
    tables = dict(view)
    return {
        t.HOST_CONFIG_VALUE: host_config_module.config_values(tables),
        t.DATABASE_EVIDENCE: host_config_module.database_evidence_table(tables),
        t.BLOCK_DEVICE: host_config_module.block_device_table(tables),
        t.DATABASE_AFFINITY: host_config_module.database_affinity_table(tables),
    }


def time_accounting(view: View, options: DeriveOptions) -> dict[str, Any]:
    metric, windows = time_accounting_module.time_accounting(dict(view), options.window_s)
    return {t.TIME_ACCOUNTING_METRIC: metric, t.TIME_ACCOUNTING_WINDOW: windows}


def timeline(view: View, options: DeriveOptions) -> dict[str, Any]:
    table, metric = timeline_module.timeline(
        dict(view), options.window_s, view.get(t.TIME_ACCOUNTING_METRIC), timeline_module.MIN_WINDOWS, view.get(t.CHANGE)
    )
    return {t.TIMELINE: table, t.TIMELINE_METRIC: metric}


def engine_version(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.ENGINE_VERSION_METRIC: engine_version_module.engine_version(dict(view))}


def statements(view: View, options: DeriveOptions) -> dict[str, Any]:
    return sql_statements.derive_statements(view)


def full_scans(view: View, options: DeriveOptions) -> dict[str, Any]:
    return full_scans_module.derive_full_scans(view)


def histogram_windows(view: View, options: DeriveOptions) -> dict[str, Any]:
    """Windows as wide as time accounting's (it widens them to a sparse scrape step), else ``--window``."""
    accounting = view.get(t.TIME_ACCOUNTING_METRIC)
    width = accounting.get("window_s") if isinstance(accounting, dict) else None
    width_s = float(width) if isinstance(width, (int, float)) and width > 0 else options.window_s
    return {t.HISTOGRAM_WINDOW: histogram_windows_module.histogram_windows(view.get(t.METRIC_SAMPLE), width_s)}


def background_activity(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {t.BACKGROUND_ACTIVITY: background_activity_module.background_activity(view.get(t.METRIC_SAMPLE))}


def database_memory(view: View, options: DeriveOptions) -> dict[str, Any]:
    return {
        t.DATABASE_MEMORY_SETTING: database_memory_module.database_memory_settings(view),
        t.NODE_MEMORY: database_memory_module.node_memory(view),
        t.DATABASE_MEMORY_BINDING: database_memory_module.database_memory_bindings(view),
    }
