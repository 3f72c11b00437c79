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
    assert list(threaded.tables)[-2:] == ["statements", "plan_nodes"]


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


def test_a_failing_branch_fails_derive_all(demo_tables, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_):
        raise RuntimeError("broken branch")

    monkeypatch.setattr(idle_gaps, "idle_gaps", boom)
    with pytest.raises(RuntimeError, match="broken branch"):
        derive_all(demo_tables)
    assert not [t for t in threading.enumerate() if t.name.startswith("dbdiag-derive")]  # none left running
