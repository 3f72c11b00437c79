"""Chart geometry for the compare HTML: both sides' timelines drawn over each other as SVG polylines.

    {"series": "tps", "unit": "1/s", "baseline": [[0.0, 50.0], [1.0, 49.0]], "capture": [[0.0, 23.0], ...]}
      -> {"title": "tps (1/s)", "baseline": "40.0,20.0 80.0,21.2", "capture": "40.0,95.1 ...",
          "y_ticks": [(y_px, "0"), ...], "x_ticks": [(x_px, "0 s"), ...], ...}

The templates only place what this returns (jinja would make the arithmetic unreadable).
"""

from __future__ import annotations

from typing import Any

WIDTH_PX, HEIGHT_PX = 560, 170
LEFT_PX, RIGHT_PX, TOP_PX, BOTTOM_PX = 52, 10, 10, 26
TICKS = 4


def overlay(timeline: dict[str, Any]) -> dict[str, Any]:
    points = timeline["baseline"] + timeline["capture"]
    x_max = max(p[0] for p in points) or 1.0
    y_max = max(p[1] for p in points) or 1.0
    plot_w, plot_h = WIDTH_PX - LEFT_PX - RIGHT_PX, HEIGHT_PX - TOP_PX - BOTTOM_PX

    def x(seconds: float) -> float:
        return LEFT_PX + seconds / x_max * plot_w

    def y(value: float) -> float:
        return TOP_PX + plot_h - value / y_max * plot_h

    def line(side: list[list[float]]) -> str:
        return " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in side)

    return {
        "title": f"{timeline['series']} ({timeline['unit']})" if timeline.get("unit") else timeline["series"],
        "width": WIDTH_PX, "height": HEIGHT_PX, "left": LEFT_PX, "right": WIDTH_PX - RIGHT_PX,
        "top": TOP_PX, "bottom": HEIGHT_PX - BOTTOM_PX,
        "baseline": line(timeline["baseline"]), "capture": line(timeline["capture"]),
        "y_ticks": [(round(y(y_max * i / TICKS), 1), f"{y_max * i / TICKS:.3g}") for i in range(TICKS + 1)],
        "x_ticks": [(round(x(x_max * i / TICKS), 1), _seconds_tick(x_max * i / TICKS, x_max)) for i in range(TICKS + 1)],
        "sources": timeline["sources"],
    }


def _seconds_tick(seconds: float, span: float) -> str:
    """A tick of a time axis: whole seconds when the axis is long enough that they differ ("0 s" ... "880 s"),
    else as many digits as tell the ticks apart ("0.75 s", "1.5 s" on a 3 s axis).

    >>> [_seconds_tick(3.0 * i / 4, 3.0) for i in range(5)], _seconds_tick(440.0, 880.0)
    (['0 s', '0.75 s', '1.5 s', '2.25 s', '3 s'], '440 s')
    """
    return f"{seconds:.0f} s" if span >= 10 * TICKS else f"{seconds:.3g} s"


MIRROR_HEIGHT_PX = 200
MIRROR_BAR_MAX_PX = 12
NODE_LABEL_MIN_PX = 44  # "node 12" needs about this much width at the chart's font size


def mirrored_per_cpu(rows: list[dict[str, Any]], measure: str = "soft", cpu_nodes: dict[int, int] | None = None) -> dict[str, Any] | None:
    """Per-CPU %soft (or %busy) of both hosts as mirrored bars: the baseline up, the capture down, CPU by CPU,
    grouped by NUMA node when ``cpu_nodes`` (cpu -> node) says (a gap between nodes, each node named under its
    CPUs). None without per-CPU rows on both.

    rows: the activity area's rows, {"key": "cpu 3 soft %", "baseline": 64.0, "capture": 1.2, ...}
    """
    per_cpu = []
    for row in rows:
        parts = row["key"].split(" ")
        if parts[:1] == ["cpu"] and len(parts) == 4 and parts[1].isdigit() and parts[2:] == [measure, "%"]:
            per_cpu.append((int(parts[1]), row["baseline"], row["capture"]))
    nodes = cpu_nodes if cpu_nodes and len(set(cpu_nodes.values())) > 1 else {}  # one node: CPU numbers say more
    per_cpu = sorted((p for p in per_cpu if p[1] is not None and p[2] is not None), key=lambda p: (nodes.get(p[0], -1), p[0]))
    if not per_cpu:
        return None
    groups = [nodes.get(cpu) for cpu, _, _ in per_cpu]
    gaps = sum(1 for a, b in zip(groups, groups[1:]) if a != b) if nodes else 0
    plot_w = WIDTH_PX - LEFT_PX - RIGHT_PX
    bar_w = min(MIRROR_BAR_MAX_PX, plot_w / (len(per_cpu) + gaps))
    middle = MIRROR_HEIGHT_PX / 2
    half = middle - TOP_PX - 6
    bars, node_labels = [], []
    x = float(LEFT_PX)
    for i, (cpu, up, down) in enumerate(per_cpu):
        if i and nodes and groups[i] != groups[i - 1]:
            x += bar_w  # a bar's width between two nodes
        if nodes and (i == 0 or groups[i] != groups[i - 1]) and groups[i] is not None:
            node_labels.append({"node": groups[i], "x": round(x, 1), "cpus": 0})
        if node_labels:
            node_labels[-1]["cpus"] += 1
        bars.append({"cpu": cpu, "x": round(x, 1), "w": round(max(bar_w - 1, 1), 1),
                     "up_y": round(middle - up / 100 * half, 1), "up_h": round(up / 100 * half, 1),
                     "down_y": middle, "down_h": round(down / 100 * half, 1), "baseline": up, "capture": down})
        x += bar_w
    for label in node_labels:  # centred under its CPUs; the node number alone where "node N" does not fit
        width = label.pop("cpus") * bar_w
        label["x"] = round(label["x"] + width / 2, 1)
        label["text"] = f"node {label['node']}" if width >= NODE_LABEL_MIN_PX else str(label["node"])
    grouped = " by NUMA node" if node_labels else ""
    return {"title": f"%{measure} per CPU{grouped}: baseline up, capture down (0-100%)", "width": WIDTH_PX, "height": MIRROR_HEIGHT_PX,
            "left": LEFT_PX, "right": WIDTH_PX - RIGHT_PX, "middle": middle, "bars": bars, "nodes": node_labels,
            "label_every": max(1, len(bars) // 16)}
