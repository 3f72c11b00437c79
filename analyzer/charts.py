"""Chart data shared by rules and the report overview, and the time-panel geometry of the report.

Rules build :class:`~dbdiag.findings.Chart` data (not drawings); :func:`time_panels` turns
time series into SVG coordinates for the report's aligned small multiples.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dbdiag.findings import Bar, BarGroup, Chart


def per_cpu_by_node(
    per_cpu: pl.DataFrame,
    value_column: str,
    title: str,
    unit: str,
    highlight_cpus: set[int] = frozenset(),
    threshold: float | None = None,
    threshold_label: str | None = None,
) -> Chart:
    """One bar per CPU, grouped by NUMA node (``node ?`` when the topology is unknown)."""
    rows = per_cpu.select("cpu", "node", pl.col(value_column).fill_null(0.0)).sort("node", "cpu", nulls_last=True)
    groups: dict[str, list[Bar]] = {}
    for cpu, node, value in rows.iter_rows():
        label = f"node {node}" if node is not None else "node ?"
        groups.setdefault(label, []).append(Bar(f"CPU {cpu}", round(float(value), 2), cpu in highlight_cpus))
    return Chart(
        title=title,
        unit=unit,
        groups=tuple(BarGroup(label, tuple(bars)) for label, bars in groups.items()),
        threshold=threshold,
        threshold_label=threshold_label,
    )


# ---------------------------------------------------------------- time panels (report geometry)

PANEL_WIDTH_PX = 1160
PANEL_LEFT_PX = 72
PANEL_RIGHT_PX = 16
PANEL_PLOT_PX = 96
PANEL_HEAD_PX = 22  # the panel's title and legend above its plot
PANEL_GAP_PX = 12
PANEL_AXIS_PX = 24  # the shared time axis under the last panel
MARKER_HEAD_PX = 16  # a row of marker labels above the first panel
MARKER_ROWS = 3  # labels that find no free row are left to the line's tooltip
LEGEND_CHAR_PX = 6.2  # width of a legend character at 11 px sans-serif, for laying out keys
TITLE_CHAR_PX = 7.4  # the same for a panel title (12 px bold)
LEGEND_ROW_PX = 14
PANEL_LOG_SPREAD = 100.0
MAX_DOTS = 150  # points of a series drawn as dots (with their tooltip)


def time_panels(
    panels: list[dict[str, Any]], start: datetime, end: datetime, markers: list[dict[str, Any]] | None = None,
    width: int = PANEL_WIDTH_PX,
) -> dict[str, Any] | None:
    """Small multiples over one time axis, in SVG pixels.

    ``panels``: [{"title", "unit", "series": [{"label", "points": [(datetime, value)], "kind": "line"|"bar"}],
    "log": bool (allowed), "top": float | None (fixed top, e.g. 100 for %), "slot_s": window width for bars}].
    A line is drawn through the points and broken where more than one window is missing (a gap over
    2.5 slots, and over 1.5 times the series' usual step: metrics scraped every 15 s on 10 s windows
    skip a window now and then without a break); bars of a panel share each window's slot side by side.
    ``markers``: [{"ts": datetime, "label", "title"}] as vertical lines across all panels.
    Empty panels are dropped; None when none is left.

    >>> from datetime import timezone
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> g = time_panels([{"title": "TPS", "unit": "1/s", "series": [{"label": "a", "points": [(t0, 1.0), (t0 + timedelta(seconds=10), 3.0)]}]}],
    ...                 t0, t0 + timedelta(seconds=10))
    >>> [len(s["segments"][0].split()) for s in g["panels"][0]["lines"]], g["panels"][0]["y_ticks"][-1]["label"]
    ([2], '5')
    """
    kept = [p for p in panels if any(v is not None for s in p["series"] for _, v in s["points"])]
    if not kept or end <= start:
        return None
    t0, t1 = start.timestamp(), end.timestamp()
    plot_w = width - PANEL_LEFT_PX - PANEL_RIGHT_PX

    def x_of(when: datetime) -> float:
        return round(PANEL_LEFT_PX + plot_w * (when.timestamp() - t0) / (t1 - t0), 1)

    out_markers = []
    rows_end = [-1e9] * MARKER_ROWS  # where each row of marker labels is taken up to
    for marker in sorted(markers or [], key=lambda m: m["ts"]):
        if not start <= marker["ts"] <= end:
            continue
        x = x_of(marker["ts"])
        label_w = len(marker["label"]) * LEGEND_CHAR_PX
        anchor = "end" if x + label_w > width - 4 else "start"
        left, right = (x - label_w, x) if anchor == "end" else (x, x + label_w)
        row = next((i for i, taken in enumerate(rows_end) if left > taken + 6), None)
        if row is not None:
            rows_end[row] = right
        out_markers.append({**marker, "x": x, "anchor": anchor, "label_x": x - 3 if anchor == "end" else x + 3,
                            "row": row, "hidden_label": row is None})
    rows_used = 1 + max((m["row"] for m in out_markers if m["row"] is not None), default=-1)
    top_offset = MARKER_HEAD_PX * rows_used
    for m in out_markers:
        m["label_y"] = MARKER_HEAD_PX * (m["row"] or 0) + 11
    out_panels = []
    y = top_offset
    for panel in kept:
        out_panels.append(_panel(panel, y, x_of, t0, t1, plot_w, width - PANEL_RIGHT_PX))
        y = out_panels[-1]["plot_bottom"] + PANEL_GAP_PX
    height = y - PANEL_GAP_PX + PANEL_AXIS_PX
    x_ticks = _time_ticks(start, end, x_of, width - 2)
    return {
        "width": width, "height": height, "left": PANEL_LEFT_PX, "right": width - PANEL_RIGHT_PX,
        "top": top_offset, "axis_y": height - PANEL_AXIS_PX + 16, "bottom": height - PANEL_AXIS_PX,
        "panels": out_panels, "x_ticks": x_ticks, "markers": out_markers,
    }


def _legend(title: str, labels: list[str], head_top: float, right: float) -> tuple[list[tuple[float, float]], float]:
    """(x, baseline y) of each legend key after the title, wrapping onto more rows; and the plot's top."""
    x, y = PANEL_LEFT_PX + len(title) * TITLE_CHAR_PX + 18, head_top + PANEL_HEAD_PX - 7
    spots = []
    for label in labels:
        size = 16 + len(label) * LEGEND_CHAR_PX
        if x + size > right and x > PANEL_LEFT_PX + len(title) * TITLE_CHAR_PX + 18:
            x, y = PANEL_LEFT_PX + len(title) * TITLE_CHAR_PX + 18, y + LEGEND_ROW_PX
        spots.append((round(x, 1), y))
        x += size + 14
    return spots, y + 7


def _panel(panel: dict[str, Any], head_top: float, x_of: Any, t0: float, t1: float, plot_w: float, right: float) -> dict[str, Any]:
    values = [v for s in panel["series"] for _, v in s["points"] if v is not None]
    positive = [v for v in values if v > 0]
    high = max(values) if values else 1.0
    # zeros sit on the bottom of a log axis: a throughput of 0 in one window must not flatten the rest
    log_y = bool(panel.get("log") and positive and high / min(positive) > PANEL_LOG_SPREAD)
    title = panel["title"] + (" (log scale)" if log_y else "") + f" ({panel['unit']})"
    spots, plot_top = _legend(title, [s["label"] for s in panel["series"]], head_top, right)
    bottom = plot_top + PANEL_PLOT_PX
    if log_y:
        lo, hi = math.floor(math.log10(min(positive))), math.ceil(math.log10(high))
        hi = max(hi, lo + 1)
        tick_values = [10.0**e for e in range(lo, hi + 1)]

        def y_of(v: float) -> float:
            return round(bottom - PANEL_PLOT_PX * (math.log10(max(v, 10.0**lo)) - lo) / (hi - lo), 1)
    else:
        top = panel.get("top") or nice_ceiling(high)
        top = max(top, high)
        tick_values = [top * i / 2 for i in range(3)]

        def y_of(v: float) -> float:
            return round(bottom - PANEL_PLOT_PX * v / top, 1)

    slot_s = panel.get("slot_s") or 0.0
    bar_series = [s for s in panel["series"] if s.get("kind") == "bar"]
    lines, bars, legend = [], [], []
    for index, s in enumerate(panel["series"]):
        css = s.get("css") or f"s{index % 6}"
        legend.append({"label": s["label"], "css": css, "x": spots[index][0], "y": spots[index][1]})
        points = sorted((w, v) for w, v in s["points"] if v is not None)
        if s.get("kind") == "bar":
            slot_w = plot_w * slot_s / (t1 - t0) if t1 > t0 else 8.0
            bar_w = max(slot_w * 0.8 / max(len(bar_series), 1), 1.0)
            offset = bar_series.index(s)
            for when, value in points:
                x0 = x_of(when) + slot_w * 0.1 + offset * bar_w
                y_top = y_of(value)
                bars.append({"x": round(x0, 1), "w": round(bar_w, 1), "y": y_top, "h": round(bottom - y_top, 1), "css": css,
                             "title": f"{s['label']} {when:%H:%M:%S}: {s['format'].format(value) if s.get('format') else value_text(value)} {panel['unit']}"})
            continue
        segments: list[list[str]] = []
        dots = []
        previous = None
        steps = sorted((b[0] - a[0]).total_seconds() for a, b in zip(points, points[1:]))
        # a series sampled every 15 s on 10 s windows skips windows: break only past its own usual step
        gap = max(2.5 * slot_s, 1.5 * (steps[len(steps) // 2] if steps else 0.0)) if slot_s else None
        for when, value in points:
            centre = when + timedelta(seconds=slot_s / 2) if slot_s else when
            x, yv = x_of(centre), y_of(value)
            if previous is None or (gap is not None and (when - previous).total_seconds() > gap):
                segments.append([])
            segments[-1].append(f"{x},{yv}")
            dots.append({"x": x, "y": yv, "title": f"{s['label']} {when:%H:%M:%S}: {s['format'].format(value) if s.get('format') else value_text(value)} {panel['unit']}"})
            previous = when
        # past MAX_DOTS points the dots would hide the line; their values stay in the tables
        lines.append({"label": s["label"], "css": css, "segments": [" ".join(seg) for seg in segments],
                      "dots": dots if len(dots) <= MAX_DOTS else []})
    return {
        "title": title, "unit": panel["unit"], "title_y": head_top + PANEL_HEAD_PX - 7,
        "plot_top": plot_top, "plot_bottom": bottom, "legend": legend, "lines": lines, "bars": bars,
        "y_ticks": [{"y": y_of(v), "label": tick_label(v)} for v in tick_values],
    }


def _time_ticks(start: datetime, end: datetime, x_of: Any, right_edge: float) -> list[dict[str, Any]]:
    span = (end - start).total_seconds()
    step = next((s for s in (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
                 if span / s <= 8), 86400 * math.ceil(span / 86400 / 8))
    first = math.ceil(start.timestamp() / step) * step
    fmt = "%H:%M:%S" if step < 60 else "%H:%M"
    if span > 86400:
        fmt = "%m-%d %H:%M"
    ticks = []
    value = first
    while value <= end.timestamp() + 1e-9:
        when = datetime.fromtimestamp(value, tz=start.tzinfo)
        x = x_of(when)
        label = when.strftime(fmt)
        half = len(label) * LEGEND_CHAR_PX / 2
        anchor = "start" if x - half < PANEL_LEFT_PX - 30 else "end" if x + half > right_edge else "middle"
        ticks.append({"x": x, "label": label, "anchor": anchor})
        value += step
    return ticks


def nice_ceiling(value: float) -> float:
    """The round number (1, 2, 2.5, 5 x 10^n) at or above ``value``.

    >>> nice_ceiling(37.0), nice_ceiling(0.012), nice_ceiling(0)
    (50.0, 0.02, 1.0)
    """
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude * (1 + 1e-12):
            return float(round(step * magnitude, 12))
    return float(10 * magnitude)


def value_text(value: float) -> str:
    """A value in a tooltip: whole numbers from 100 up, two decimals from 1, else three digits.

    >>> value_text(34567.2), value_text(24.95), value_text(0.0415)
    ('34,567', '24.95', '0.0415')
    """
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def tick_label(value: float) -> str:
    """Short axis labels: 1.5M, 250k, 25, 0.04.

    >>> tick_label(2500.0), tick_label(0.04), tick_label(0)
    ('2.5k', '0.04', '0')
    """
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"
