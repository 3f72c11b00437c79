"""Derive: parsed tables -> derived tables and JSON-ready metrics. Pure; reads nothing else.

The SQL branch (fingerprints, profile), the public plan nodes and the idle gaps read only the parsed
tables and take most of the time on a big statement log: they run in threads beside the rest (polars
releases the GIL); the results are put together in the same order whatever finishes first.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import changes, cpu, cpu_profile, engine_version, host, host_config, idle_gaps, numa, public_text, sql, time_accounting, timeline
from dbdiag.derive.sql import SqlOptions

# A step that fails on odd data (a value out of range somewhere) costs its own output, never the
# report: polars' panics derive from BaseException, so they are named beside Exception.
STEP_ERRORS: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)


@dataclass(frozen=True)
class Derived:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    public: dict[str, pl.DataFrame] = field(default_factory=dict)  # parsed tables in the form safe to show


def derive_all(
    tables: dict[str, pl.DataFrame], sql_options: SqlOptions = SqlOptions(), window_s: float = 10.0
) -> Derived:
    public = public_text.public_text_tables(tables, sql_options.show_literals)
    tables = {**tables, **public}  # every step below sees log lines and labels with their literals replaced
    errors: list[str] = []
    step = _stepper(errors)
    change_table = step("changes", None, changes.changes, tables, sql_options.show_literals)
    with ThreadPoolExecutor(max_workers=3, thread_name_prefix="dbdiag-derive") as pool:
        sql_branch = pool.submit(step, "sql", (None, {}), sql.derive_sql, tables, sql_options)
        gaps_branch = pool.submit(step, "idle_gaps", None, idle_gaps.idle_gaps, tables)
        plan_nodes = tables.get(t.PLAN_NODE)
        public_nodes = (
            pool.submit(step, "plan_nodes", None, sql.public_plan_nodes, plan_nodes, sql_options)
            if plan_nodes is not None
            else None
        )
        derived_tables, metrics = _host_and_time(tables, window_s, gaps_branch.result, step, change_table)
        if change_table is not None:
            derived_tables[t.CHANGE] = change_table
        statements, sql_metrics = sql_branch.result()
        if statements is not None:
            derived_tables["statements"] = statements
        nodes = public_nodes.result() if public_nodes is not None else None
        if nodes is not None:
            derived_tables["plan_nodes"] = nodes
        metrics.update(sql_metrics)
    version = step("engine_version", None, engine_version.engine_version, tables)
    if version is not None:
        metrics["engine_version"] = version
    if errors:
        metrics["derive_errors"] = sorted(errors)
    return Derived(tables=derived_tables, metrics=metrics, public=public)


def _stepper(errors: list[str]) -> Callable[..., Any]:
    """``step(name, default, function, *args)``: the function's result, or ``default`` with one line
    in ``errors`` when it fails."""

    def step(name: str, default: Any, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return function(*args)
        except STEP_ERRORS as error:
            first_line = (str(error).strip().split("\n", 1)[0] or type(error).__name__)[:300]
            errors.append(f"derive step {name} failed: {type(error).__name__}: {first_line}")
            return default

    return step


def _host_and_time(
    tables: dict[str, pl.DataFrame],
    window_s: float,
    idle_gaps_result: Callable[[], dict[str, Any] | None],
    step: Callable[..., Any],
    change_table: pl.DataFrame | None = None,
) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """(derived tables, metrics) but the SQL ones; ``idle_gaps_result()`` waits for the idle gaps (another thread's)."""
    softirq_delta, softirq_sources = step("softirq_delta", (None, []), cpu.softirq_count_delta, tables)
    per_cpu = step("per_cpu", cpu.empty_per_cpu(), cpu.per_cpu_summary, tables, softirq_delta)
    irq_delta, irq_sources = step("irq_delta", (None, []), cpu.irq_delta, tables)
    derived_tables = {"per_cpu": per_cpu, "cpu_nodes": step("cpu_nodes", None, cpu.cpu_nodes, tables)}
    if derived_tables["cpu_nodes"] is None:
        del derived_tables["cpu_nodes"]
    if irq_delta is not None:
        derived_tables["irq_delta"] = irq_delta
    metrics: dict[str, Any] = {}
    host_summary = step("host", None, host.host_summary, tables)
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
    profile_tables, profile_metric = step("cpu_profile", ({}, None), cpu_profile.cpu_profile, tables)
    derived_tables.update(profile_tables)
    if profile_metric is not None:
        metrics["cpu_profile"] = profile_metric
    remote = step("numa_remote", None, numa.numa_remote, tables)
    if remote is not None:
        derived_tables["numa_remote"] = remote
    process_memory = step("numa_process_memory", None, numa.numa_process_memory, tables)
    if process_memory is not None:
        derived_tables["numa_process_memory"] = process_memory
    vmstat_numa = step("vmstat_numa", None, numa.vmstat_numa_delta, tables)
    if vmstat_numa is not None:
        metrics["vmstat_numa"] = vmstat_numa
    checks = step("host_config", None, host_config.host_config_checks, tables)
    if checks:
        metrics["host_config"] = checks
    accounting, accounting_windows = step("time_accounting", (None, None), time_accounting.time_accounting, tables, window_s)
    timeline_table, timeline_metric = step("timeline", (None, None), timeline.timeline, tables, window_s, accounting, timeline.MIN_WINDOWS, change_table)
    gaps = idle_gaps_result()  # waited for only now: the timeline does not need it
    if accounting is not None:
        metrics["time_accounting"] = accounting
    if accounting_windows is not None:
        derived_tables["time_accounting_windows"] = accounting_windows
    if gaps is not None:
        metrics["idle_gaps"] = gaps
    if timeline_table is not None:
        derived_tables["timeline"] = timeline_table
    if timeline_metric is not None:
        metrics["timeline"] = timeline_metric
    return derived_tables, metrics


def _rounded_rows(frame: pl.DataFrame) -> list[dict[str, Any]]:
    floats = [name for name, dtype in frame.schema.items() if dtype.is_float()]
    return frame.with_columns(pl.col(floats).round(2)).to_dicts()
