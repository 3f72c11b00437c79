"""Derive: parsed tables -> derived tables and JSON-ready metrics. Pure; reads nothing else.

``DERIVATIONS`` is the whole stage: each ``Derivation`` names what it reads (``requires``: parsed or
derived tables and metrics), what it writes (``produces``: names and schemas in ``dbdiag.tables``) and
its ``compute``. ``derive_all`` runs them in dependency order, independent ones at the same time
(polars releases the GIL: the SQL branch, the plan nodes and the idle gaps take most of the time on a
big statement log and run beside the rest). Each derivation sees the parsed tables plus the derived
ones it requires, nothing else, so its result does not depend on what finished first; the metrics
come out in the order of ``tables.METRICS``.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import polars as pl

from dbdiag import tables as t
from dbdiag.derive import steps
from dbdiag.derive.sql import SqlOptions

# A step that fails on odd data (a value out of range somewhere) costs its own output, never the
# report: polars' panics derive from BaseException, so they are named beside Exception.
STEP_ERRORS: tuple[type[BaseException], ...] = (Exception, pl.exceptions.PanicException)
MAX_WORKERS = 4  # derivations at once: the three big-log ones and the rest in turn


@dataclass(frozen=True)
class DeriveOptions:
    sql: SqlOptions = SqlOptions()
    window_s: float = 10.0


@dataclass(frozen=True)
class Derivation:
    """``compute(view, options)`` -> {name in ``produces``: table or metric}; a None value means "nothing to say".

    ``view``: the parsed tables, with the derived tables and metrics named in ``requires`` over them.
    ``guarded``: a failure becomes one line in ``metrics.derive_errors`` (and ``fallback()`` its outputs);
    unguarded, it stops the analysis.
    """

    name: str
    requires: tuple[str, ...]
    produces: tuple[str, ...]
    compute: Callable[[Mapping[str, Any], DeriveOptions], dict[str, Any]]
    guarded: bool = True
    fallback: Callable[[], dict[str, Any]] = dict


PUBLIC_TEXT = t.PUBLIC_TEXT_TABLES
DERIVATIONS: tuple[Derivation, ...] = (
    # Unguarded: if the literals of log lines and labels cannot be replaced, no report may show them.
    Derivation("public_text", (t.EVENT, t.LOAD_SAMPLE, t.LOAD_STATEMENT_LATENCY), PUBLIC_TEXT, steps.public_text, guarded=False),
    Derivation("sql", (t.STATEMENT, t.LOCK_WAIT), (t.FINGERPRINTED_STATEMENT, t.SQL_PROFILE_METRIC, t.SQL_SUMMARY_METRIC, t.SQL_TIMELINE_METRIC), steps.sql),
    Derivation("plan_nodes", (t.PLAN_NODE,), (t.PUBLIC_PLAN_NODE,), steps.plan_nodes),
    Derivation("lock_waits", (t.LOCK_WAIT,), (t.PUBLIC_LOCK_WAIT,), steps.lock_waits),
    Derivation("idle_gaps", (t.STATEMENT, t.METRIC_SAMPLE, t.LOAD_RUN, t.LOAD_STATEMENT_LATENCY), (t.IDLE_GAPS_METRIC,), steps.idle_gaps),
    Derivation("changes", (t.STATEMENT, t.EVENT), (t.CHANGE,), steps.changes),
    # Rules read the per-CPU table's columns: it is there, empty, even when its step fails.
    Derivation("per_cpu", (t.CPU_UTIL, t.SOFTIRQ_RATE, t.SOFTIRQ_COUNT, t.IRQ_COUNT, t.TOPOLOGY), (t.PER_CPU, t.CPU_NODE, t.IRQ_DELTA, t.CPU_METRIC),
               steps.cpu, fallback=steps.cpu_fallback),
    Derivation("device_interrupts", (t.IRQ_DELTA,), (t.DEVICE_INTERRUPT, t.INTERRUPTS_METRIC), steps.device_interrupts),
    Derivation("host", (t.HOST_FACT,), (t.HOST_METRIC,), steps.host),
    Derivation("host_counts", (t.TOPOLOGY, t.CPU_UTIL, t.NUMA_NODE, t.NUMA_COUNTER, t.HOST_FACT, t.HOST_METRIC), (t.HOST_COUNT,), steps.host_counts),
    Derivation("cpu_profile", (t.PERF_STACK, t.PERF_SYMBOL, t.PERF_CALLCHAIN), (t.CPU_PROFILE_STACK, t.CPU_PROFILE_SYMBOL, t.CPU_PROFILE_METRIC), steps.cpu_profile),
    Derivation("numa_remote", (t.NUMA_COUNTER,), (t.NUMA_REMOTE,), steps.numa_remote),
    Derivation("numa_process_memory", (t.NUMA_COUNTER,), (t.NUMA_PROCESS_MEMORY,), steps.numa_process_memory),
    Derivation("vmstat_numa", (t.VMSTAT_COUNT,), (t.VMSTAT_NUMA_METRIC,), steps.vmstat_numa),
    Derivation("proc_stat", (t.PROC_STAT_COUNT,), (t.PROC_STAT_METRIC,), steps.proc_stat),
    Derivation("pg_stat_database", (t.PG_STAT_DATABASE,), (t.PG_STAT_DATABASE_METRIC,), steps.pg_stat_database),
    Derivation("disks", (t.DISK_IO, t.DISK_COUNT, t.HOST_SETTING, t.MOUNT, t.DB_SETTING), (t.DISKS_METRIC,), steps.disks),
    Derivation("memory_pressure", (t.VMSTAT_COUNT, t.PRESSURE, t.MEMINFO_COUNT, t.VMSTAT_SAMPLE), (t.MEMORY_PRESSURE_METRIC,), steps.memory_pressure),
    Derivation("host_config", (t.HOST_FACT, t.HOST_SETTING, t.DB_SETTING, t.NUMA_NODE, t.NUMA_COUNTER, t.STATEMENT), (t.HOST_CONFIG_METRIC,), steps.host_config),
    Derivation("host_config_values", (t.HOST_SETTING, t.STATEMENT, t.DB_SETTING, t.PERF_STACK, t.PERF_SYMBOL),
               (t.HOST_CONFIG_VALUE, t.DATABASE_EVIDENCE, t.BLOCK_DEVICE, t.DATABASE_AFFINITY),
               steps.host_config_values),
    Derivation(
        "time_accounting",
        (t.STATEMENT, t.STATEMENT_SUMMARY, t.METRIC_SAMPLE, t.DB_SETTING, t.LOAD_RUN, t.LOAD_INTERVAL, t.LOAD_SAMPLE, t.LOAD_STATEMENT_LATENCY),
        (t.TIME_ACCOUNTING_METRIC, t.TIME_ACCOUNTING_WINDOW),
        steps.time_accounting,
    ),
    Derivation(
        "timeline",
        (t.CPU_UTIL, t.EVENT, t.LOAD_INTERVAL, t.LOAD_SAMPLE, t.LOAD_STATEMENT_LATENCY, t.METRIC_SAMPLE, t.PROXY_STAT, t.STATEMENT,
         t.TIME_ACCOUNTING_METRIC, t.CHANGE, t.DISK_IO, t.VMSTAT_SAMPLE),
        (t.TIMELINE, t.TIMELINE_METRIC),
        steps.timeline,
    ),
    Derivation("database_memory", (t.DB_SETTING, t.NUMA_NODE, t.NUMA_COUNTER, t.NUMA_PROCESS_MEMORY, t.HOST_SETTING, t.HOST_FACT),
               (t.DATABASE_MEMORY_SETTING, t.NODE_MEMORY, t.DATABASE_MEMORY_BINDING), steps.database_memory),
    Derivation("histogram_windows", (t.METRIC_SAMPLE, t.TIME_ACCOUNTING_METRIC), (t.HISTOGRAM_WINDOW,), steps.histogram_windows),
    Derivation("background_activity", (t.METRIC_SAMPLE,), (t.BACKGROUND_ACTIVITY,), steps.background_activity),
    Derivation("engine_version", (t.DB_SETTING, t.STATEMENT), (t.ENGINE_VERSION_METRIC,), steps.engine_version),
    Derivation("statements", (t.FINGERPRINTED_STATEMENT, t.PUBLIC_PLAN_NODE), (t.WORKING_STATEMENT, t.STATEMENT_LAYOUT), steps.statements),
    Derivation("full_scans", (t.WORKING_STATEMENT, t.STATEMENT_LAYOUT, t.PUBLIC_PLAN_NODE), (t.FULL_SCAN,), steps.full_scans),
)


@dataclass(frozen=True)
class Derived:
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)


def derive_all(
    tables: Mapping[str, pl.DataFrame], sql_options: SqlOptions = SqlOptions(), window_s: float = 10.0,
    derivations: tuple[Derivation, ...] = DERIVATIONS,
) -> Derived:
    """Every derivation's tables and metrics (see the module docstring); failures in ``metrics.derive_errors``."""
    options = DeriveOptions(sql_options, window_s)
    outputs, errors = run_in_order(derivations, tables, options)
    derived_tables: dict[str, pl.DataFrame] = {}
    metrics: dict[str, Any] = {}
    for derivation in derivations:
        for name, value in outputs.get(derivation.name, {}).items():
            (derived_tables if isinstance(value, pl.DataFrame) else metrics)[name] = value
    order = {name: index for index, name in enumerate(t.METRICS)}
    metrics = dict(sorted(metrics.items(), key=lambda item: order.get(item[0], len(order))))
    if errors:
        metrics[t.DERIVE_ERRORS_METRIC] = sorted(errors)
    return Derived(tables=derived_tables, metrics=metrics)


def run_in_order(
    derivations: tuple[Derivation, ...], tables: Mapping[str, pl.DataFrame], options: DeriveOptions
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{derivation name: its outputs}, and one line per failed derivation: each starts once the
    derivations producing what it requires are done (the policy of what runs at once is here only)."""
    producer = {name: d.name for d in derivations for name in d.produces}
    waits_for = {d.name: {producer[name] for name in d.requires if name in producer and producer[name] != d.name} for d in derivations}
    outputs: dict[str, dict[str, Any]] = {}
    errors: list[str] = []
    pending = list(derivations)
    running: dict[Future[dict[str, Any]], Derivation] = {}
    with ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="dbdiag-derive") as pool:
        while pending or running:
            for derivation in [d for d in pending if waits_for[d.name] <= outputs.keys()]:
                pending.remove(derivation)
                running[pool.submit(_run_one, derivation, _view(derivation, tables, outputs, producer), options, errors)] = derivation
            if not running:
                raise ValueError(f"derivations wait for each other: {sorted(d.name for d in pending)}")
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                outputs[running.pop(future).name] = future.result()
    return outputs, errors


def _view(derivation: Derivation, tables: Mapping[str, pl.DataFrame], outputs: dict[str, dict[str, Any]], producer: dict[str, str]) -> dict[str, Any]:
    view: dict[str, Any] = dict(tables)
    for name in derivation.requires:
        if name in producer and name in outputs.get(producer[name], {}):
            view[name] = outputs[producer[name]][name]
    return view


def _run_one(derivation: Derivation, view: Mapping[str, Any], options: DeriveOptions, errors: list[str]) -> dict[str, Any]:
    """The derivation's outputs without the None ones; {} and a line in ``errors`` when a guarded one fails."""
    try:
        produced = derivation.compute(view, options)
    except STEP_ERRORS as error:
        if not derivation.guarded:
            raise
        first_line = (str(error).strip().split("\n", 1)[0] or type(error).__name__)[:300]
        errors.append(f"derive step {derivation.name} failed: {type(error).__name__}: {first_line}")  # list.append is atomic
        return derivation.fallback()
    unknown = set(produced) - set(derivation.produces)
    if unknown:
        raise ValueError(f"derivation {derivation.name} produced undeclared {sorted(unknown)}")
    return {name: value for name, value in produced.items() if value is not None}
