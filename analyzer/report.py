"""Report: an ``Analysis`` -> the findings JSON (the contract), then HTML and Markdown from templates.

The JSON document is built first; HTML and Markdown are rendered from it plus chart geometry,
so the three formats always carry the same numbers. Templates do the markup; this module
only arranges data (and computes bar positions, which jinja would make unreadable).
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from datetime import datetime
from typing import TYPE_CHECKING, Any

import dbdiag
from dbdiag import markdown, pseudonymize, redact_text
from dbdiag.proxy_settings import proxy_limit_rows
from dbdiag.redact_settings import secret_free
from dbdiag.report_geometry import tick_text
from dbdiag.report_view import build_view, duration_text
from dbdiag.findings import Finding
from dbdiag.verdict import rank_findings, verdict
from dbdiag.pipeline import Analysis
from dbdiag.units import seconds

if TYPE_CHECKING:  # jinja2 is imported for HTML and Markdown only: JSON runs skip it
    from jinja2 import Environment

SCHEMA_VERSION = 1
FORMATS = ("html", "json", "md")


def findings_of(analysis: Analysis) -> list[Finding]:
    return rank_findings(f for outcome in analysis.outcomes for f in outcome.findings)


def _json_safe(value: Any) -> Any:
    """Plain JSON values: NaN/inf become null, tuples lists, datetimes ISO strings."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def build_document(analysis: Analysis, generated_at: datetime | None = None) -> dict[str, Any]:
    """The findings JSON (DESIGN.md contract, schema in ``dbdiag/schema/findings.schema.json``)."""
    findings = findings_of(analysis)
    capture = analysis.capture
    document = {
        "schema_version": SCHEMA_VERSION,
        "dbdiag_version": dbdiag.__version__,
        "generated_at": generated_at.isoformat() if generated_at else None,
        "capture": {
            "source": capture.source,
            "container": capture.container,
            "members": len(capture.members),
            "partial": bool(analysis.partial_reasons),
            "partial_reasons": analysis.partial_reasons,
            "tz": analysis.tz,
            "tz_origin": analysis.tz_origin,
            "privacy": _privacy(analysis),
        },
        "verdict": verdict(findings, analysis.outcomes, bool(analysis.recognised)),
        "inputs": [
            {
                "path": r.path,
                "kind": r.kind,
                "status": r.status,
                "size_bytes": r.size_bytes,
                "records": r.records,
                "warnings": _inventory_text(r.warnings, analysis),
                "notes": _inventory_text(r.notes, analysis),
                "skipped": r.skipped,
                "error": r.error,
                "time_range": [str(v) for v in r.time_range] if r.time_range else None,
            }
            for r in analysis.inputs
        ],
        "rules": [o.to_json() for o in analysis.outcomes],
        "findings": [f.to_json() for f in findings],
        "metrics": _metrics(analysis),
    }
    document = _json_safe(document)
    if not analysis.options.pseudonymize:
        return document
    # the last step, on the whole document: every format rendered from it shows the same pseudonyms
    paths = [capture.source] + [r.path for r in analysis.inputs]
    names = pseudonymize.collect_names(analysis.tables, paths)
    document, counts = pseudonymize.pseudonymize_document(document, names, paths)
    document["capture"]["privacy"]["pseudonyms"] = dict(vars(counts))
    return document


def _privacy(analysis: Analysis) -> dict[str, Any]:
    """The two privacy modes of this report, in words for the reader and as fields for machines."""
    shown, pseudonymized = analysis.options.show_literals, analysis.options.pseudonymize
    return {
        "literals": "shown" if shown else "replaced",
        "literals_detail": ("SQL literals shown as captured (--show-literals)" if shown else
                            "SQL literals replaced by ? in statements, plans, log lines and load-test labels"),
        "names": "pseudonymized" if pseudonymized else "kept",
        "names_detail": ("host names, IP addresses, user and database names replaced by pseudonyms (--pseudonymize)"
                         if pseudonymized else "host names, IP addresses, user and database names as captured (--pseudonymize replaces them)"),
        "pseudonyms": None,
    }


def _inventory_text(texts: list[str], analysis: Analysis) -> list[str]:
    """Parse warnings and notes quote bits of lines: their SQL redacted like log lines'."""
    if analysis.options.show_literals:
        return texts
    return [redact_text.redact_log_line(text) for text in texts]


def _metrics(analysis: Analysis) -> dict[str, Any]:
    """The derived metrics, plus the per-node NUMA table when derive left it as a table only."""
    metrics = dict(analysis.derived.metrics)
    numa = analysis.derived.tables.get("numa_remote")
    if "numa_remote" not in metrics and numa is not None and numa.height:
        metrics["numa_remote"] = numa.to_dicts()
    settings = _settings(analysis)
    if settings:
        metrics["settings"] = settings
    runs = analysis.tables.get("load_run")
    if runs is not None and runs.height:  # what each load test offered (compare: throughput of unlike runs)
        metrics["load_runs"] = runs.select("tool", "test", "threads", "duration_s", "tps", "rate_limit_tps", "latency_avg_ms",
                                           "latency_pct_ms", "latency_pct", "source").to_dicts()
    return metrics


def _settings(analysis: Analysis) -> list[dict[str, Any]]:
    """Every OS, database and proxy setting the capture holds (sysctl, kernel command line, THP, schedulers,
    IRQ and process affinity; database variables and config files, not status counters; the proxies' session
    limits), one row each, for ``dbdiag compare``: {"scope": "host"|"database"|"proxy", "group", "subject", "name",
    "value", "source"}.
    Secrets in the values (passwords of config files, connection strings) are replaced unless literals are shown."""
    rows = []
    host = analysis.tables.get("host_setting")
    if host is not None:
        rows += [{"scope": "host", "group": r["category"], "subject": r["subject"], "name": r["name"], "value": r["value"],
                  "source": r["source"]} for r in host.iter_rows(named=True)]
    database = analysis.tables.get("db_setting")
    if database is not None:
        rows += [{"scope": "database", "group": f"{r['engine'] or 'database'} {r['kind']}", "subject": None, "name": r["name"],
                  "value": r["value"] if r["unit"] is None else f"{r['value']} {r['unit']}", "source": r["source"]}
                 for r in database.filter(database["kind"] != "status").iter_rows(named=True)]
    rows += proxy_limit_rows(analysis.tables.get("proxy_stat"), analysis.tables.get("proxy_config"))
    if analysis.options.show_literals:
        return rows
    return [{**row, "value": secret_free(row["name"], row["value"])} for row in rows]


def render_json(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def template_env() -> Environment:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    # Autoescape every HTML template (SQL and log text are hostile input); Markdown gets
    # its own escaping filter instead, since HTML entities would garble a pasted ticket.
    env = Environment(
        loader=PackageLoader("dbdiag.report_templates", "."),
        autoescape=lambda name: not (name or "").endswith(".md.j2"),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["md"] = markdown_cell
    env.filters["code"] = lambda value, table=False: markdown.code(str(value), table=table)
    env.filters["fenced"] = lambda value: markdown.fenced(str(value))
    env.filters["num"] = _number
    env.filters["tick"] = tick_text
    env.filters["secs"] = seconds
    env.filters["dur"] = duration_text
    return env


def markdown_cell(value: Any) -> str:
    """A value as inert Markdown text (numbers formatted as in the HTML); see ``dbdiag.markdown``."""
    return markdown.inline(_number(value))


def _number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def render_html(document: dict[str, Any]) -> str:
    env = template_env()
    view = build_view(document)
    view["flame_script"] = view["flame_script_hash"] = None
    if view["cpu_profile"] and view["cpu_profile"]["flame"]:
        view["flame_script"], view["flame_script_hash"] = flame_script(env)
    return env.get_template("report.html.j2").render(view=view)


def flame_script(env: Environment) -> tuple[Any, str]:
    """The flame graph's zoom/search script and its CSP source (``'sha256-...'``), hashed from the
    exact text put between the ``<script>`` tags, so the policy allows that script and nothing else."""
    from markupsafe import Markup

    text = env.get_template("flame.js.j2").render()
    digest = base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")
    return Markup(text), Markup(f"'sha256-{digest}'")


def render_markdown(document: dict[str, Any]) -> str:
    return template_env().get_template("report.md.j2").render(view=build_view(document))


def render(document: dict[str, Any], fmt: str) -> str:
    return {"html": render_html, "json": render_json, "md": render_markdown}[fmt](document)
