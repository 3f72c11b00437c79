"""The compare HTML's chart geometry: the mirrored per-CPU bars, grouped by NUMA node when the reports say
which CPU is on which node."""

from __future__ import annotations

import pytest

from dbdiag.compare.charts import NODE_LABEL_MIN_PX, mirrored_per_cpu


def _rows(values: dict[int, tuple[float, float]], measure: str = "soft") -> list[dict]:
    return [{"key": f"cpu {cpu} {measure} %", "baseline": up, "capture": down} for cpu, (up, down) in values.items()]


def test_bars_in_cpu_order_without_nodes() -> None:
    chart = mirrored_per_cpu(_rows({2: (10.0, 90.0), 0: (50.0, 0.0), 1: (0.0, 100.0)}))
    assert [b["cpu"] for b in chart["bars"]] == [0, 1, 2] and chart["nodes"] == []
    assert chart["title"] == "%soft per CPU: baseline up, capture down (0-100%)"
    first, second = chart["bars"][0], chart["bars"][1]
    assert first["up_h"] > 0 and first["down_h"] == 0 and second["up_h"] == 0 and second["down_h"] == 2 * first["up_h"]


def test_bars_grouped_by_node_with_a_gap_and_a_label_each() -> None:
    rows = _rows({0: (1.0, 1.0), 1: (2.0, 2.0), 2: (3.0, 3.0), 3: (4.0, 4.0)})
    chart = mirrored_per_cpu(rows, "soft", {0: 1, 1: 0, 2: 1, 3: 0})
    assert [b["cpu"] for b in chart["bars"]] == [1, 3, 0, 2]  # node 0's CPUs, then node 1's
    xs = [b["x"] for b in chart["bars"]]
    step = xs[1] - xs[0]
    assert xs[2] - xs[1] == pytest.approx(2 * step, abs=0.2)  # one bar's width between the nodes
    assert xs[3] - xs[2] == pytest.approx(step, abs=0.2)
    assert [n["node"] for n in chart["nodes"]] == [0, 1]
    assert chart["nodes"][0]["x"] == pytest.approx(xs[0] + step, abs=0.2)  # centred under its two CPUs
    assert chart["title"].startswith("%soft per CPU by NUMA node")
    expected = "node 0" if 2 * step >= NODE_LABEL_MIN_PX else "0"
    assert chart["nodes"][0]["text"] == expected


def test_no_chart_without_both_sides() -> None:
    assert mirrored_per_cpu([{"key": "cpu 0 soft %", "baseline": 3.0, "capture": None}]) is None
    assert mirrored_per_cpu(_rows({0: (1.0, 2.0)}, "busy"), "soft") is None


def test_one_node_keeps_the_cpu_numbers() -> None:
    chart = mirrored_per_cpu(_rows({0: (1.0, 2.0), 1: (3.0, 4.0)}), "soft", {0: 0, 1: 0})
    assert chart["nodes"] == [] and chart["title"].startswith("%soft per CPU:")
