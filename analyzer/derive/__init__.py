"""Derive: parsed tables -> derived tables and JSON-ready metrics. Pure; reads nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import cpu, cpu_profile, host, host_config, idle_gaps, numa, sql, time_accounting, timeline
from dbdiag.derive.sql import SqlOptions


@dataclass(frozen=True)
class Derived:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


def derive_all(
    tables: dict[str, pl.DataFrame], sql_options: SqlOptions = SqlOptions(), window_s: float = 10.0
) -> Derived:
    softirq_delta, softirq_sources = cpu.softirq_count_delta(tables)
    per_cpu = cpu.per_cpu_summary(tables, softirq_delta)
    irq_delta, irq_sources = cpu.irq_delta(tables)
    derived_tables = {"per_cpu": per_cpu, "cpu_nodes": cpu.cpu_nodes(tables)}
    if irq_delta is not None:
        derived_tables["irq_delta"] = irq_delta
    metrics: dict[str, Any] = {}
    host_summary = host.host_summary(tables)
    if host_summary:
        metrics["host"] = host_summary
    if per_cpu.height:
        metrics["cpu"] = {
            "cpus": per_cpu.height,
            "nodes": per_cpu["node"].drop_nulls().n_unique(),
            "softirq_snapshots": softirq_sources,
            "interrupt_snapshots": irq_sources,
            "per_cpu": _rounded_rows(per_cpu),
        }
    profile_tables, profile_metric = cpu_profile.cpu_profile(tables)
    derived_tables.update(profile_tables)
    if profile_metric is not None:
        metrics["cpu_profile"] = profile_metric
    remote = numa.numa_remote(tables)
    if remote is not None:
        derived_tables["numa_remote"] = remote
    process_memory = numa.numa_process_memory(tables)
    if process_memory is not None:
        derived_tables["numa_process_memory"] = process_memory
    vmstat_numa = numa.vmstat_numa_delta(tables)
    if vmstat_numa is not None:
        metrics["vmstat_numa"] = vmstat_numa
    checks = host_config.host_config_checks(tables)
    if checks:
        metrics["host_config"] = checks
    accounting, accounting_windows = time_accounting.time_accounting(tables, window_s)
    if accounting is not None:
        metrics["time_accounting"] = accounting
    if accounting_windows is not None:
        derived_tables["time_accounting_windows"] = accounting_windows
    gaps = idle_gaps.idle_gaps(tables)
    if gaps is not None:
        metrics["idle_gaps"] = gaps
    timeline_table, timeline_metric = timeline.timeline(tables, window_s, accounting)
    if timeline_table is not None:
        derived_tables["timeline"] = timeline_table
    if timeline_metric is not None:
        metrics["timeline"] = timeline_metric
    statements, sql_metrics = sql.derive_sql(tables, sql_options)
    if statements is not None:
        derived_tables["statements"] = statements
    plan_nodes = tables.get(t.PLAN_NODE)
    if plan_nodes is not None:
        derived_tables["plan_nodes"] = sql.public_plan_nodes(plan_nodes, sql_options)
    metrics.update(sql_metrics)
    return Derived(tables=derived_tables, metrics=metrics)


def _rounded_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    floats = [name for name, dtype in frame.schema.items() if dtype.is_float()]
    return frame.with_columns(pl.col(floats).round(2)).to_dicts()
