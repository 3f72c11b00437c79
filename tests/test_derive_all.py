"""derive_all runs its branches in threads: the result must not depend on it, nor on which branch ends first."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import Future
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import dbdiag.derive as derive
from dbdiag import tables as t
from dbdiag.capture import read_capture
from dbdiag.derive import derive_all, idle_gaps, sql
from dbdiag.pipeline import analyze_capture

DEMO = Path(__file__).resolve().parent.parent / "fixtures" / "demo" / "bank-core-demo.tar.gz"


class _InOrder:
    """A stand-in for the thread pool that runs each branch at once, in the calling thread."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    def __enter__(self) -> _InOrder:
        return self

    def __exit__(self, *exc) -> None:
        return None

    def submit(self, function, *args) -> Future:
        future: Future = Future()
        future.set_result(function(*args))
        return future


@pytest.fixture(scope="module")
def demo_tables() -> dict[str, pl.DataFrame]:
    return analyze_capture(read_capture(DEMO)).tables


def _same(one: derive.Derived, other: derive.Derived) -> None:
    assert list(one.metrics) == list(other.metrics)
    assert json.dumps(one.metrics, default=str) == json.dumps(other.metrics, default=str)  # key order too
    assert list(one.tables) == list(other.tables)
    for name, frame in one.tables.items():
        assert_frame_equal(frame, other.tables[name])


def test_threads_give_what_one_thread_gives(demo_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    threaded = derive_all(demo_tables)
    monkeypatch.setattr(derive, "ThreadPoolExecutor", _InOrder)
    _same(threaded, derive_all(demo_tables))
    assert {"time_accounting", "idle_gaps", "timeline", "sql_profile"} <= set(threaded.metrics)
    assert {t.FINGERPRINTED_STATEMENT, t.PUBLIC_PLAN_NODE, t.WORKING_STATEMENT, t.FULL_SCAN} <= set(threaded.tables)


def test_every_derived_name_is_declared_and_produced_once() -> None:
    """Each derivation writes names ``dbdiag.tables`` declares (a table schema or a metric), no two the same name."""
    produced = [name for d in derive.DERIVATIONS for name in d.produces]
    assert len(produced) == len(set(produced))
    declared = set(t.DERIVED_SCHEMAS) | set(t.METRICS) | set(t.PUBLIC_TEXT_TABLES)
    assert set(produced) <= declared, set(produced) - declared
    assert set(t.DERIVED_SCHEMAS) | (set(t.METRICS) - {t.DERIVE_ERRORS_METRIC}) <= set(produced)


def test_derived_tables_have_their_declared_columns(demo_tables) -> None:
    for name, frame in derive_all(demo_tables).tables.items():
        declared = t.schema_of(name)
        assert {c: frame.schema[c] for c in frame.columns} == {c: declared[c] for c in frame.columns}, name


def test_derivations_wait_for_what_they_require(demo_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    """A derivation that reads a derived table runs after the one producing it, however late that ends."""
    original = derive.steps.sql

    def late(*args):
        time.sleep(0.2)
        return original(*args)

    monkeypatch.setattr(derive, "DERIVATIONS", tuple(
        derive.Derivation(d.name, d.requires, d.produces, late if d.name == "sql" else d.compute, d.guarded, d.fallback) for d in derive.DERIVATIONS))
    derived = derive_all(demo_tables, derivations=derive.DERIVATIONS)
    assert derived.tables[t.WORKING_STATEMENT].height == derived.tables[t.FINGERPRINTED_STATEMENT].height > 0
    assert "derive_errors" not in derived.metrics


@pytest.mark.parametrize("slow", ["sql", "gaps"])
def test_a_slow_branch_changes_nothing(demo_tables, monkeypatch: pytest.MonkeyPatch, slow: str) -> None:
    expected = derive_all(demo_tables)
    module, name = (sql, "derive_sql") if slow == "sql" else (idle_gaps, "idle_gaps")
    original = getattr(module, name)

    def late(*args):
        time.sleep(0.2)  # the other branches end first
        return original(*args)

    monkeypatch.setattr(module, name, late)
    _same(derive_all(demo_tables), expected)


def test_a_failing_branch_costs_its_own_output_only(demo_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_):
        raise RuntimeError("broken branch")

    monkeypatch.setattr(idle_gaps, "idle_gaps", boom)
    derived = derive_all(demo_tables)
    assert derived.metrics["derive_errors"] == ["derive step idle_gaps failed: RuntimeError: broken branch"]
    assert "idle_gaps" not in derived.metrics and "sql_profile" in derived.metrics
    assert not [t for t in threading.enumerate() if t.name.startswith("dbdiag-derive")]  # none left running


@pytest.mark.parametrize("error", [ValueError("year 0 is out of range"), pl.exceptions.PanicException("boom")])
def test_a_derive_step_that_fails_costs_only_its_own_output(monkeypatch: pytest.MonkeyPatch, error: BaseException) -> None:
    """One step's crash (odd data in one input) must not lose the report: the other steps still run,
    and the failure is named on one line, which makes the analysis partial."""
    whole = analyze_capture(read_capture(DEMO))

    def broken(*args):
        raise error

    monkeypatch.setattr(derive.timeline, "timeline", broken)
    damaged = analyze_capture(read_capture(DEMO))
    assert damaged.derived.metrics["derive_errors"] == [f"derive step timeline failed: {type(error).__name__}: {error}"]
    assert "timeline" not in damaged.derived.metrics and "timeline" in whole.derived.metrics
    assert damaged.derived.metrics["cpu_profile"] == whole.derived.metrics["cpu_profile"]
    assert f"derive step timeline failed: {type(error).__name__}: {error}" in damaged.partial_reasons


def test_perf_report_percentages_past_any_count_do_not_crash_the_profile() -> None:
    from dbdiag import tables as t

    rows = {"event": ["cycles"] * 2, "comm": ["mysqld"] * 2, "pid": [1, 1], "dso": ["mysqld"] * 2,
            "symbol": ["do_scan", "do_sort"], "kernel": [False, False], "self_pct": [3.7e40, 10.0],
            "children_pct": [None, None], "samples": [None, None], "event_samples": [1000, 1000],
            "source": ["perf-report.txt"] * 2}
    symbols = t.conform(t.PERF_SYMBOL, pl.DataFrame(rows, schema_overrides={"children_pct": pl.Float64, "samples": pl.Int64}))
    _, metric = derive.cpu_profile.cpu_profile({t.PERF_SYMBOL: symbols})  # was InvalidOperationError (f64 -> i64)
    assert metric is not None


def test_the_empty_per_cpu_table_is_defined_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """No per-CPU input and a per-CPU step that fails give the same empty table (rules read its columns)."""
    from dbdiag.derive import cpu

    without_input = derive_all({}).tables["per_cpu"]

    def broken(*args):
        raise ValueError("odd data")

    monkeypatch.setattr(cpu, "per_cpu_summary", broken)
    after_failure = derive_all({})
    assert after_failure.metrics["derive_errors"] == ["derive step per_cpu failed: ValueError: odd data"]
    assert without_input.schema == after_failure.tables["per_cpu"].schema == pl.Schema(cpu.EMPTY_PER_CPU_SCHEMA)
    assert after_failure.tables["per_cpu"].height == 0
