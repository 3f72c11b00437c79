"""The compare document -> JSON, Markdown (short, for a ticket) and HTML (self-contained, offline).

Templates do the markup (``report_templates/compare.html.j2``, ``compare.md.j2``, the analyze
report's ``style.css`` and ``compare.css``); this module only picks what they show. HTML is
autoescaped (SQL and log text are hostile input), Markdown goes through ``dbdiag.markdown``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dbdiag.compare import flame_diff
from dbdiag.compare.charts import mirrored_per_cpu, overlay
from dbdiag.compare.verdict import value_text
from dbdiag.report import render_json, template_env

if TYPE_CHECKING:
    from jinja2 import Environment

MD_MAX_CAUSES = 5
MD_MAX_ROWS = 15
MD_MAX_REMEDY_LINES = 4


def _environment() -> Environment:
    """The analyze report's environment (autoescaped HTML, Markdown filters), plus ``val``: a value with its unit."""
    env = template_env()
    env.filters["val"] = lambda value, unit=None: value_text(value, unit)
    return env


def _view(document: dict[str, Any]) -> dict[str, Any]:
    """What both templates read: the document, plus each area's differing and other rows."""
    areas = []
    for area in document["areas"]:
        differing = [r for r in area["rows"] if r["differs"]]
        areas.append({**area, "differing": differing, "same": [r for r in area["rows"] if not r["differs"]]})
    by_ref = {f"{d['area']}:{d['key']}": d for d in document["differences"]}
    charts = [overlay(t) for t in document.get("timelines") or [] if t["baseline"] and t["capture"]]
    activity = next((a["rows"] for a in document["areas"] if a["area"] == "activity"), [])
    cpu_nodes = {cpu: node for cpu, node in document["baseline"].get("cpu_nodes") or document["capture"].get("cpu_nodes") or []}
    mirrors = [m for m in (mirrored_per_cpu(activity, "soft", cpu_nodes), mirrored_per_cpu(activity, "busy", cpu_nodes)) if m]
    return {"doc": document, "verdict": document["verdict"], "areas": areas, "by_ref": by_ref, "charts": charts,
            "mirrors": mirrors, "flame": flame_diff.geometry(document.get("flame_diff")),
            "flame_points": {"same": flame_diff.SAME_POINTS, "full": flame_diff.FULL_COLOUR_POINTS}}


def render_html(document: dict[str, Any]) -> str:
    return _environment().get_template("compare.html.j2").render(view=_view(document))


def render_markdown(document: dict[str, Any]) -> str:
    view = _view(document)
    view["limits"] = {"causes": MD_MAX_CAUSES, "rows": MD_MAX_ROWS, "remedy_lines": MD_MAX_REMEDY_LINES}
    return _environment().get_template("compare.md.j2").render(view=view)


def render(document: dict[str, Any], fmt: str) -> str:
    return {"html": render_html, "json": render_json, "md": render_markdown}[fmt](document)
