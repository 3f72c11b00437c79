"""Chart geometry of the report: bar charts, line charts and horizontal bars as SVG coordinates
(jinja would make this arithmetic unreadable). Input: the chart data of a finding or a view, e.g.
``{"title": "softirq per CPU", "unit": "%", "groups": [{"label": "node 0", "bars": [...]}]}``;
output: the same with x/y/width/height of every bar, axis ticks and labels.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

CHART_WIDTH_PX = 1160


CHART_HEIGHT_PX = 260


CHART_MARGIN_LEFT_PX = 48


CHART_MARGIN_BOTTOM_PX = 44


BAR_GAP_PX = 1


GROUP_GAP_PX = 10


MAX_BAR_WIDTH_PX = 48


MIN_PERCENT_SCALE = 10.0


def chart_geometry(chart: dict[str, Any]) -> dict[str, Any]:
    """Bar rectangles for a grouped bar chart (dict form of ``findings.Chart``), in SVG pixels."""
    groups = chart["groups"]
    bar_count = sum(len(g["bars"]) for g in groups) or 1
    plot_width = CHART_WIDTH_PX - CHART_MARGIN_LEFT_PX - GROUP_GAP_PX * max(len(groups) - 1, 0)
    bar_width = min(max(plot_width / bar_count - BAR_GAP_PX, 1.0), MAX_BAR_WIDTH_PX)
    values = [b["value"] for g in groups for b in g["bars"]] + [chart.get("threshold") or 0.0]
    top = nice_ceiling(max(values) if values else 1.0)
    if chart["unit"] == "%":
        # A 0.1% maximum must not look like a full bar: percent charts span at least 0-10%.
        top = max(top, MIN_PERCENT_SCALE)
    plot_height = CHART_HEIGHT_PX - CHART_MARGIN_BOTTOM_PX - 10
    x = float(CHART_MARGIN_LEFT_PX)
    out_groups = []
    for group in groups:
        start = x
        bars = []
        for bar in group["bars"]:
            height = plot_height * (bar["value"] / top) if top else 0.0
            bars.append({**bar, "x": round(x, 1), "w": round(bar_width, 1), "h": round(height, 1), "y": round(10 + plot_height - height, 1)})
            x += bar_width + BAR_GAP_PX
        out_groups.append({"label": group["label"], "bars": bars, "x0": round(start, 1), "x1": round(x - BAR_GAP_PX, 1)})
        x += GROUP_GAP_PX
    ticks = [{"value": top * i / 4, "y": round(10 + plot_height - plot_height * i / 4, 1)} for i in range(5)]
    threshold = chart.get("threshold")
    return {
        "title": chart["title"],
        "unit": chart["unit"],
        "width": CHART_WIDTH_PX,
        "height": CHART_HEIGHT_PX,
        "left": CHART_MARGIN_LEFT_PX,
        "plot_bottom": 10 + plot_height,
        "groups": out_groups,
        "ticks": ticks,
        "show_bar_labels": bar_count <= 32,
        "threshold": threshold,
        "threshold_y": round(10 + plot_height - plot_height * threshold / top, 1) if threshold else None,
        "threshold_label": chart.get("threshold_label"),
    }


def nice_ceiling(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


LINE_CHART_WIDTH_PX = 1160


LINE_CHART_HEIGHT_PX = 240


LINE_MARGIN_LEFT_PX = 64


LINE_MARGIN_BOTTOM_PX = 28


LOG_SCALE_SPREAD = 100.0  # y on a log scale when max/min of the values exceeds this


def line_chart_geometry(title: str, unit: str, series: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Polylines for time series: ``series`` = [{"label", "points": [(datetime, value)]}] in SVG pixels."""
    points = [(when, value) for s in series for when, value in s["points"] if when is not None and value is not None and value > 0]
    if len(points) < 2:
        return None
    times = [when.timestamp() for when, _ in points]
    values = [value for _, value in points]
    t0, t1 = min(times), max(times)
    low, high = min(values), max(values)
    log_y = high / low > LOG_SCALE_SPREAD
    if log_y:
        y_low, y_high = math.floor(math.log10(low)), math.ceil(math.log10(high))
        y_high = max(y_high, y_low + 1)
        ticks_values = [10.0**e for e in range(y_low, y_high + 1)]
        def scale(v: float) -> float:
            return (math.log10(v) - y_low) / (y_high - y_low)
    else:
        top = nice_ceiling(high)
        ticks_values = [top * i / 4 for i in range(5)]
        def scale(v: float) -> float:
            return v / top
    plot_w = LINE_CHART_WIDTH_PX - LINE_MARGIN_LEFT_PX - 10
    plot_h = LINE_CHART_HEIGHT_PX - LINE_MARGIN_BOTTOM_PX - 10
    def x_of(ts: float) -> float:
        return LINE_MARGIN_LEFT_PX + (plot_w * (ts - t0) / (t1 - t0) if t1 > t0 else plot_w / 2)
    def y_of(v: float) -> float:
        return 10 + plot_h - plot_h * scale(v)
    out_series = []
    for index, s in enumerate(series):
        pts = [(x_of(w.timestamp()), y_of(v), w, v) for w, v in s["points"] if w is not None and v is not None and v > 0]
        out_series.append({
            "label": s["label"],
            "css": f"s{index % 6}",
            "path": " ".join(f"{x:.1f},{y:.1f}" for x, y, _, _ in pts),
            "dots": [{"x": round(x, 1), "y": round(y, 1), "title": f"{w:%H:%M:%S} {tick_text(v)} {unit}"} for x, y, w, v in pts],
        })
    x_ticks = [
        {
            "x": round(x_of(t0 + (t1 - t0) * i / 4), 1),
            "label": datetime.fromtimestamp(t0 + (t1 - t0) * i / 4, tz=points[0][0].tzinfo).strftime("%H:%M:%S"),
            "anchor": ("start", "middle", "middle", "middle", "end")[i],
        }
        for i in range(5)
    ]
    return {
        "title": title + (" (log scale)" if log_y else ""),
        "unit": unit,
        "width": LINE_CHART_WIDTH_PX,
        "height": LINE_CHART_HEIGHT_PX,
        "left": LINE_MARGIN_LEFT_PX,
        "plot_bottom": 10 + plot_h,
        "series": out_series,
        "y_ticks": [{"y": round(y_of(v), 1), "label": tick_text(v)} for v in ticks_values],
        "x_ticks": x_ticks,
    }


HBAR_WIDTH_PX = 1160


HBAR_LABEL_PX = 190


HBAR_NOTE_PX = 250


HBAR_ROW_PX = 22


FLAME_WIDTH_PX = 1160


def hbar_geometry(title: str, unit: str, rows: list[dict[str, Any]], top: float | None = None) -> dict[str, Any]:
    """Horizontal (optionally stacked) bars: ``rows`` = [{"label", "note", "segments": [{"value", "fill", "title"}]}].

    The scale runs from 0 to ``top`` (default: round steps just above the longest bar).

    >>> g = hbar_geometry("t", "%", [{"label": "a", "note": "", "segments": [{"value": 30.0, "fill": "red", "title": "a"}]}], top=100)
    >>> g["rows"][0]["segments"][0]["w"], g["rows"][0]["y"]
    (216.0, 6)
    >>> [tick["label"] for tick in hbar_geometry("t", "%", [{"label": "a", "note": "", "segments": [{"value": 31.8, "fill": "red", "title": "a"}]}])["ticks"]]
    ['0', '10', '20', '30', '40']
    """
    longest = max((sum(seg["value"] for seg in row["segments"]) for row in rows), default=0.0)
    if top:
        step = top / 4
    else:
        step = nice_ceiling(longest / 4)  # round steps: 0 10 20 30 40, not 0 12.5 25 37.5 50
        top = step * max(math.ceil(longest / step - 1e-9), 1)
    plot_w = HBAR_WIDTH_PX - HBAR_LABEL_PX - HBAR_NOTE_PX
    out_rows = []
    for index, row in enumerate(rows):
        x = float(HBAR_LABEL_PX)
        segments = []
        for seg in row["segments"]:
            w = plot_w * seg["value"] / top
            segments.append({**seg, "x": round(x, 1), "w": round(w, 1)})
            x += w
        out_rows.append({**row, "y": 6 + index * HBAR_ROW_PX, "segments": segments})
    ticks = [{"x": round(HBAR_LABEL_PX + plot_w * step * i / top, 1), "label": tick_text(step * i)} for i in range(round(top / step) + 1)]
    return {
        "title": title,
        "unit": unit,
        "width": HBAR_WIDTH_PX,
        "height": 12 + len(rows) * HBAR_ROW_PX + 16,
        "left": HBAR_LABEL_PX,
        "right": HBAR_LABEL_PX + plot_w,
        "bar_h": HBAR_ROW_PX - 6,
        "rows": out_rows,
        "ticks": ticks,
        "axis_y": 6 + len(rows) * HBAR_ROW_PX,
    }


def tick_text(value: float) -> str:
    """Axis labels: short (1.5M, 250k, 25)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"
