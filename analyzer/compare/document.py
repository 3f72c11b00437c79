"""Two analyze report documents -> the compare document (schema ``dbdiag/schema/compare.schema.json``).

    {"schema_version": 1, "kind": "dbdiag-compare", "dbdiag_version": "...",
     "baseline": {"name": "good.tar.gz", "source": "...", "engine": "mariadb", ...},
     "capture":  {...},
     "verdict":  {"status": "differs", "headline": "...", "explained": [...], ...},
     "differences": [{"area": "plans", "key": "select c from sbtest? where id=?",
                      "baseline": "sbtest1:ref(xid), ...", "capture": "sbtest1:ALL, ...",
                      "effect": "...", "related_findings": [...], "sources": {"baseline": "...:46515", ...}}],
     "areas": [{"area": "outcome", "title": "Outcome", "rows": [{"key": ..., "differs": true, ...}]}]}

Both sides are compared only on the areas they share: two engines compare the host, what it did
and the outcome, not SQL, plans or database events (``not_compared`` says so).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import PurePath
from typing import Any

import dbdiag
from dbdiag.compare import differ, flame_diff
from dbdiag.compare.differ import Difference, Row, compare_facts
from dbdiag.compare.facts import SQL_MIN_CALLS, engine_of, facts_of
from dbdiag.compare.links import CAUSE_AREAS, link
from dbdiag.compare.verdict import build_verdict

COMPARE_SCHEMA_VERSION = 1
AREAS = (
    ("outcome", "Outcome (what the users got)"),
    ("load", "Load offered (load-test clients)"),
    ("settings", "Settings (host and database)"),
    ("host", "Host"),
    ("events", "Events (DDL, statistics, restarts)"),
    ("plans", "Plans per fingerprint"),
    ("sql", "SQL per fingerprint"),
    ("activity", "What the host did (CPU, softirq, NUMA)"),
    ("profile", "CPU profile (perf)"),
    ("findings", "Findings"),
)
ENGINE_AREAS = ("sql", "plans", "events")
# Rows about one CPU or one node, compared only between hosts of the same size: (key prefix, host field, what).
SIZE_BOUND_ROWS = (("cpu ", "cpus", "per-CPU rows"), ("node ", "numa_nodes", "per-node rows"))


def compare_documents(baseline: dict[str, Any], capture: dict[str, Any], names: dict[str, str] | None = None,
                      generated_at: datetime | None = None) -> dict[str, Any]:
    """The compare document of two analyze report documents (module docstring)."""
    names = names or side_names(baseline, capture)
    engines = {"baseline": engine_of(baseline), "capture": engine_of(capture)}
    areas, not_compared = _shared_areas(engines)
    left, right = facts_of(baseline), facts_of(capture)
    for prefix, field, what in SIZE_BOUND_ROWS:
        sizes = [(doc.get("metrics") or {}).get("host", {}).get(field) for doc in (baseline, capture)]
        if None not in sizes and sizes[0] != sizes[1]:
            left, right = [f for f in left if not f.key.startswith(prefix)], [f for f in right if not f.key.startswith(prefix)]
            not_compared.append({"area": "activity", "reason": (
                f"{what}: the hosts have {sizes[0]} and {sizes[1]} {field.replace('_', ' ')}, so CPU n or node n is not the "
                "same place on both; compared in total and per area only")})
    offered = {side: offered_rates(doc) for side, doc in (("baseline", baseline), ("capture", capture))}
    throughput_comparable = None in offered.values() or offered["baseline"] == offered["capture"]
    if not throughput_comparable:
        not_compared.append({"area": "outcome", "reason": (
            f"throughput: the load tests offered different rates ({offered['baseline']} in baseline, {offered['capture']} in capture), "
            "so TPS and statements per second measure what was offered, not the servers; the verdict judges latency")})
    not_compared += _settings_not_captured(baseline, capture, engines)
    differences, rows = compare_facts(left, right, tuple(areas))
    if engines["baseline"] != engines["capture"]:
        # each engine's own settings (innodb_* against shared_buffers) are not a difference of the two
        differences = [d for d in differences if not (d.area == "settings" and d.only_on)]
    link(differences, rows)
    partial = {side: doc["capture"].get("partial_reasons") or [] for side, doc in (("baseline", baseline), ("capture", capture))}
    outcome_rows = [r for r in rows if r.area == "outcome"]
    verdict = build_verdict(differences, baseline, capture, names, outcome_rows, not_compared, throughput_comparable)
    return {
        "schema_version": COMPARE_SCHEMA_VERSION,
        "kind": "dbdiag-compare",
        "dbdiag_version": dbdiag.__version__,
        "generated_at": generated_at.isoformat() if generated_at else None,
        "baseline": _side(baseline, names["baseline"], engines["baseline"]),
        "capture": _side(capture, names["capture"], engines["capture"]),
        "verdict": verdict,
        "noise": noise_bands(),
        "timelines": overlaid_timelines(baseline, capture),
        "flame_diff": flame_diff.tree(baseline, capture),
        "differences": [_difference_json(d, partial) for d in _ordered(differences)],
        "areas": [
            {"area": area, "title": title, "rows": [_row_json(r, partial) for r in _rows_differing_first(rows, area)]}
            for area, title in AREAS if area in areas
        ],
    }


# Timeline series drawn over each other (seconds from each side's first point), when both sides have them.
OVERLAID_SERIES = ("tps", "latency_avg", "latency_p99_reported", "latency_p99", "cpu_busy_mean", "cpu_soft_mean", "cpu_soft_max")


def overlaid_timelines(baseline: dict[str, Any], capture: dict[str, Any]) -> list[dict[str, Any]]:
    """[{"series": "tps", "unit": "1/s", "baseline": [[0.0, 50.0], [1.0, 49.0], ...], "capture": [...]}]:
    each side's points in seconds from its own first point, so runs at different hours overlay."""
    def by_name(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
        series = ((document.get("metrics") or {}).get("timeline") or {}).get("series") or []
        return {s["series"]: s for s in series if s.get("series") in OVERLAID_SERIES and s.get("points")}

    left, right = by_name(baseline), by_name(capture)
    result = []
    for name in OVERLAID_SERIES:
        if name in left and name in right:
            result.append({"series": name, "unit": left[name].get("unit"),
                           "sources": {"baseline": left[name].get("source"), "capture": right[name].get("source")},
                           "baseline": _relative(left[name]["points"]), "capture": _relative(right[name]["points"])})
    return result


def _relative(points: list[list[Any]]) -> list[list[float]]:
    start = datetime.fromisoformat(points[0][0])
    return [[(datetime.fromisoformat(t) - start).total_seconds(), v] for t, v in points if v is not None]


def noise_bands() -> dict[str, float]:
    """The thresholds a number must pass to differ (``differ.py``), for the reader of the report."""
    return {
        "rate_rel": differ.RATE_NOISE_REL, "time_rel": differ.TIME_NOISE_REL, "tail_rel": differ.TAIL_NOISE_REL,
        "time_floor_ms": differ.TIME_NOISE_FLOOR_MS, "pct_points": differ.PCT_NOISE_POINTS,
        "sql_ratio": differ.SQL_NOISE_RATIO, "sql_tail_ratio": differ.SQL_TAIL_NOISE_RATIO,
        "sql_time_floor_s_per_s": differ.SQL_TIME_FLOOR_S_PER_S, "sql_min_calls": SQL_MIN_CALLS,
        "hit_pct_floor_points": differ.HIT_PCT_FLOOR_POINTS,
    }


# The inputs that hold a database's settings (the variables or the config file).
DATABASE_SETTING_KINDS = ("mysql-variables", "postgresql-settings", "postgresql-conf", "tidb-config")
SETTING_SOURCES = {
    "postgresql": "SHOW ALL (psql -c 'SHOW ALL') or postgresql.conf",
    "tidb": "SHOW CONFIG / tidb.toml",
}


def _settings_not_captured(baseline: dict[str, Any], capture: dict[str, Any], engines: dict[str, str | None]) -> list[dict[str, str]]:
    """When neither side holds the database's settings, a setting that differs (synchronous_commit, a buffer size) cannot
    be seen: say so, with what to collect on both sides."""
    engine = engines["baseline"] or engines["capture"]
    if engine is None:
        return []
    held = [any(item.get("kind") in DATABASE_SETTING_KINDS and item.get("status") == "read" for item in doc.get("inputs") or [])
            for doc in (baseline, capture)]
    if any(held):
        return []
    source = SETTING_SOURCES.get(engine, "SHOW GLOBAL VARIABLES (mysql -e 'SHOW GLOBAL VARIABLES')")
    return [{"area": "settings", "reason": (
        f"the database's settings: neither capture holds them ({source}), so a setting that differs between the two servers "
        "cannot be seen; collect them on both sides")}]


def offered_rates(document: dict[str, Any]) -> str | None:
    """What a report's load tests were told to offer: "35/s", "unlimited", "35/s, unlimited"; None without a load test."""
    runs = (document.get("metrics") or {}).get("load_runs") or []
    if not runs:
        return None
    rates = sorted({f"{run['rate_limit_tps']:g}/s" if run.get("rate_limit_tps") else "unlimited" for run in runs})
    return ", ".join(rates)


def side_names(baseline: dict[str, Any], capture: dict[str, Any]) -> dict[str, str]:
    """'good.tar.gz' and 'slow.tar.gz'; two sources of one name get their side in front."""
    names = {side: PurePath(str(doc["capture"].get("source") or side)).name or side
             for side, doc in (("baseline", baseline), ("capture", capture))}
    if names["baseline"] == names["capture"]:
        return {side: f"{side} {name}" for side, name in names.items()}
    return names


def _shared_areas(engines: dict[str, str | None]) -> tuple[list[str], list[dict[str, str]]]:
    areas = [area for area, _ in AREAS]
    if engines["baseline"] == engines["capture"] or None in engines.values():
        return areas, []
    reason = (f"the engines differ ({engines['baseline']} in baseline, {engines['capture']} in capture): "
              "their statements, plans and database events are not the same things")
    return [a for a in areas if a not in ENGINE_AREAS], [{"area": a, "reason": reason} for a in ENGINE_AREAS]


def _side(document: dict[str, Any], name: str, engine: str | None) -> dict[str, Any]:
    capture = document.get("capture") or {}
    verdict = document.get("verdict") or {}
    return {
        "name": name,
        "source": capture.get("source"),
        "engine": engine,
        "dbdiag_version": document.get("dbdiag_version"),
        "generated_at": document.get("generated_at"),
        "partial": bool(capture.get("partial")),
        "partial_reasons": capture.get("partial_reasons") or [],
        "headline": verdict.get("headline"),
        "findings": len(document.get("findings") or []),
        "inputs": len(document.get("inputs") or []),
        # each CPU's NUMA node (the per-CPU charts group by it)
        "cpu_nodes": [[row["cpu"], row["node"]] for row in ((document.get("metrics") or {}).get("cpu") or {}).get("per_cpu") or []
                      if row.get("cpu") is not None and row.get("node") is not None],
    }


def _ordered(differences: list[Difference]) -> list[Difference]:
    """Causes with an observed effect first, then the effects, then the rest, each in area order."""
    order = {area: i for i, (area, _) in enumerate(AREAS)}

    def rank(d: Difference) -> tuple[int, int]:
        group = 0 if d.area in CAUSE_AREAS and d.explains else 1 if d.area not in CAUSE_AREAS else 2
        return group, order[d.area]

    return sorted(differences, key=rank)


def partial_notes(values: dict[str, Any], sources: dict[str, str | None], partial: dict[str, list[str]]) -> list[str]:
    """What a partial side may have lost of one row: the reasons naming its source file, or, when the
    value is absent there, every reason (the input it would come from may be the one lost).

    >>> partial_notes({"baseline": 1, "capture": None}, {"baseline": "a.log:3", "capture": None},
    ...               {"baseline": [], "capture": ["db/slow.log: truncated at 1.2 GB"]})
    ['capture is partial: db/slow.log: truncated at 1.2 GB']
    """
    notes = []
    for side, reasons in partial.items():
        source = (sources.get(side) or "").rsplit(":", 1)[0]
        hits = [r for r in reasons if source and source in r] if values.get(side) is not None else reasons
        notes.extend(f"{side} is partial: {reason}" for reason in hits)
    return notes


def _difference_json(d: Difference, partial: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "area": d.area,
        "key": d.key,
        "baseline": d.baseline,
        "capture": d.capture,
        "unit": d.unit,
        "change": d.change_text(),
        "role": "cause" if d.area in CAUSE_AREAS else "effect",
        "effect": d.effect,
        "explains": d.explains,
        "caused_by": d.caused_by,
        "related_findings": d.related_findings,
        "sources": d.sources,
        "partial": partial_notes({"baseline": d.baseline, "capture": d.capture}, d.sources, partial),
    }


def _rows_differing_first(rows: list[Row], area: str) -> list[Row]:
    mine = [r for r in rows if r.area == area]
    return [r for r in mine if r.differs] + [r for r in mine if not r.differs]


def _row_json(r: Row, partial: dict[str, list[str]]) -> dict[str, Any]:
    return {"key": r.key, "baseline": r.baseline, "capture": r.capture, "unit": r.unit, "differs": r.differs, "sources": r.sources,
            "partial": partial_notes({"baseline": r.baseline, "capture": r.capture}, r.sources, partial)}
