"""``dbdiag fleet DIR [DIR...]``: many captures' tables (``analyze --tables DIR``) read together.

The Parquet files are scanned lazily (``pl.scan_parquet``, Hive partitions ``host`` and ``day`` from
the paths) and collected with the streaming engine; only the answers are held in memory::

    fleet: 2 capture(s), 2 host(s), 934 statement(s), 5 finding(s)

    Top fingerprints by total time
       #   total s   calls  hosts    p95 ms  fp_id             fingerprint
       1     5.260     320      1    40.099  C377A83C693AA353  select id, price from items where sku = ? ...

    Slowest hosts per top fingerprint (p95)
       1  C377A83C693AA353  mariadb-plan-flip 40.099 ms (320 calls, 5.260 s)

    Findings by host
      mariadb-plan-flip  1 critical, 1 warning, 0 info: plan-flip (critical), full-table-scan (warning)

``calls`` count the statements that work (sleeps aside, as the report's profile); percentiles are exact
(linear interpolation over every call, as the report's). A capture found in several DIRs (the same
``capture_id``) is counted once, from the first DIR that has it.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import polars as pl

from dbdiag.capture import printable_name
from dbdiag.tables import export as x

FLEET_SCHEMA_VERSION = 1
HIVE_SCHEMA = {"host": pl.String, "day": pl.String}
SEVERITIES = ("critical", "warning", "info")  # worst first
SLOWEST_HOSTS = 3
SHOWN_TEXT_CHARS = 80


class FleetError(Exception):
    """No tables to read, or a file that cannot be read: one line."""


def table_files(folders: list[Path], table: str) -> list[Path]:
    """The files of ``table`` in ``folders`` (``TABLE/host=*/day=*/*.parquet``; hidden partial files left out)."""
    return [p for folder in folders for p in sorted((folder / table).glob("host=*/day=*/*.parquet")) if not p.name.startswith(".")]


Skips = dict[Path, list[str]]  # folder -> the capture ids an earlier folder has


def scan(folders: list[Path], table: str, skips: Skips | None = None) -> pl.LazyFrame | None:
    """``table`` over ``folders`` in its declared schema plus ``host`` and ``day`` (each folder without
    the captures ``skips`` names for it); None when no file has it."""
    parts = []
    for folder in folders:
        files = table_files([folder], table)
        if not files:
            continue
        frame = pl.scan_parquet(
            files, hive_partitioning=True, hive_schema=HIVE_SCHEMA, glob=False, schema=x.EXPORT_SCHEMAS[table],
            missing_columns="insert", extra_columns="ignore",
        )
        skipped = (skips or {}).get(folder)
        parts.append(frame.filter(~pl.col("capture_id").is_in(skipped)) if skipped else frame)
    return pl.concat(parts) if parts else None


def summarize(folders: list[Path], top: int = 10) -> dict[str, Any]:
    """What a fleet owner asks first, JSON-ready (see the module docstring)."""
    unique: dict[str, Path] = {}
    for folder in folders:  # a folder named twice is read once
        unique.setdefault(os.path.realpath(folder), folder)
    folders = list(unique.values())
    for folder in folders:
        if not folder.is_dir():
            raise FleetError(f"{printable_name(str(folder))}: not a folder of dbdiag tables")
    try:
        return _summary(folders, top)
    except (pl.exceptions.PolarsError, OSError) as error:
        raise FleetError(_unreadable(folders, error)) from None


def _unreadable(folders: list[Path], error: Exception) -> str:
    """The error in one line, naming the first file whose Parquet footer cannot be read, if one is why."""
    for table in x.EXPORT_SCHEMAS:
        for path in table_files(folders, table):
            try:
                pl.read_parquet_schema(path)
            except (pl.exceptions.PolarsError, OSError):
                return f"{printable_name(str(path))}: cannot read the tables: not a readable Parquet file (damaged or cut short?)"
    first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
    return f"cannot read the tables: {printable_name(first)}"


def _collect(frame: pl.LazyFrame) -> pl.DataFrame:
    return frame.collect(engine="streaming")


def _summary(folders: list[Path], top: int) -> dict[str, Any]:
    captures = _captures(folders)
    duplicates = captures.filter(pl.col("duplicate"))
    skip: Skips = {folders[n]: ids for n, ids in duplicates.group_by("folder").agg("capture_id").iter_rows()}
    captures = captures.filter(~pl.col("duplicate"))
    statements = scan(folders, x.STATEMENT, skip)
    working = statements.filter(~pl.col("is_sleep").fill_null(False)) if statements is not None else None
    summary: dict[str, Any] = {
        "fleet_schema_version": FLEET_SCHEMA_VERSION,
        "folders": [str(f) for f in folders],
        "captures": captures.height,
        "duplicates_skipped": duplicates.height,
        "hosts": sorted(captures["host"].unique().to_list()),
        "statements": int(_collect(working.select(pl.len())).item()) if working is not None else 0,
        "top_fingerprints": _top(folders, working, skip, top) if working is not None else [],
        "findings_by_host": _findings(folders, skip, captures["host"].unique().to_list()),
    }
    summary["findings"] = sum(f["count"] for rows in summary["findings_by_host"].values() for f in rows)
    return summary


def _captures(folders: list[Path]) -> pl.DataFrame:
    """One row per export found, ``duplicate`` when an earlier folder has the same capture_id."""
    parts = []
    for order, folder in enumerate(folders):
        frame = scan([folder], x.CAPTURE)
        if frame is not None:
            parts.append(_collect(frame.select("capture_id", "host", "analyzed_at")).with_columns(folder=pl.lit(order)))
    if not parts:
        shown = ", ".join(printable_name(str(f)) for f in folders)
        raise FleetError(f"{shown}: no dbdiag tables here (capture/host=*/day=*/*.parquet, written by 'dbdiag analyze --tables DIR')")
    found = pl.concat(parts).sort("folder", "analyzed_at")
    return found.with_columns(duplicate=pl.col("capture_id").is_first_distinct().not_())


def _latency(q: pl.Expr) -> list[pl.Expr]:
    return [
        pl.len().alias("calls"), q.sum().alias("total_s"), (q.mean() * 1000).alias("avg_ms"),
        (q.quantile(0.95, "linear") * 1000).alias("p95_ms"), (q.max() * 1000).alias("max_ms"),
    ]


def _top(folders: list[Path], working: pl.LazyFrame, skip: Skips, top: int) -> list[dict[str, Any]]:
    """The heaviest fingerprints over all hosts, each with its slowest hosts by p95."""
    q = pl.col("query_time_s")
    heaviest = _collect(
        working.group_by("fp_id").agg(*_latency(q), pl.col("host").n_unique().alias("hosts"))
        .sort("total_s", "fp_id", descending=[True, False], nulls_last=True).head(top)
    )
    ids = heaviest["fp_id"].to_list()
    classes = scan(folders, x.STATEMENT_CLASS, skip)
    texts: dict[str, str] = {}
    if classes is not None:
        text = _collect(classes.filter(pl.col("fp_id").is_in(ids)).group_by("fp_id").agg(pl.col("fingerprint").drop_nulls().first()))
        texts = dict(zip(text["fp_id"].to_list(), text["fingerprint"].to_list()))
    per_host = _collect(
        working.filter(pl.col("fp_id").is_in(ids)).group_by("fp_id", "host").agg(*_latency(q))
        .sort("p95_ms", "host", descending=[True, False], nulls_last=True)
    )
    rows = []
    for entry in heaviest.to_dicts():
        hosts = per_host.filter(pl.col("fp_id") == entry["fp_id"]).drop("fp_id").head(SLOWEST_HOSTS).to_dicts()
        rows.append({**entry, "fingerprint": texts.get(entry["fp_id"]), "slowest_hosts": hosts})
    return rows


def _findings(folders: list[Path], skip: Skips, hosts: list[str]) -> dict[str, list[dict[str, Any]]]:
    """host -> its rules that fired, one row per rule and severity (worst first), with how many findings."""
    by_host: dict[str, list[dict[str, Any]]] = {host: [] for host in sorted(hosts)}
    findings = scan(folders, x.FINDING, skip)
    if findings is None:
        return by_host
    rank = pl.col("severity").replace_strict({s: i for i, s in enumerate(SEVERITIES)}, default=len(SEVERITIES), return_dtype=pl.Int32)
    matrix = _collect(
        findings.with_columns(rank=rank).group_by("host", "rule", "rank").agg(pl.len().alias("count")).sort("host", "rank", "rule")
    )
    for row in matrix.to_dicts():
        severity = SEVERITIES[row["rank"]] if row["rank"] < len(SEVERITIES) else "unknown"
        by_host.setdefault(row["host"], []).append({"rule": row["rule"], "severity": severity, "count": row["count"]})
    return by_host


def _shown(text: Any, limit: int = SHOWN_TEXT_CHARS) -> str:
    """Hostile text on one line: whitespace runs as one space, control characters escaped, cut."""
    one = printable_name(re.sub(r"\s+", " ", str(text if text is not None else "")).strip())
    return one if len(one) <= limit else one[: limit - 3] + "..."


def _num(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _severity_counts(rows: list[dict[str, Any]]) -> str:
    return ", ".join(f"{sum(r['count'] for r in rows if r['severity'] == s)} {s}" for s in SEVERITIES)


def _times(count: int) -> str:
    return f" x{count}" if count > 1 else ""


def render_text(summary: dict[str, Any]) -> str:
    lines = [f"fleet: {summary['captures']} capture(s), {len(summary['hosts'])} host(s), "
             f"{summary['statements']} statement(s), {summary['findings']} finding(s)"]
    if summary["duplicates_skipped"]:
        lines.append(f"({summary['duplicates_skipped']} capture(s) found in more than one folder, counted once)")
    lines += ["", "Top fingerprints by total time"]
    if not summary["top_fingerprints"]:
        lines.append("  (no statements)")
    else:
        lines.append(f"  {'#':>2}  {'total s':>8}  {'calls':>6}  {'hosts':>5}  {'p95 ms':>8}  {'fp_id':<16}  fingerprint")
    for n, row in enumerate(summary["top_fingerprints"], 1):
        lines.append(f"  {n:>2}  {_num(row['total_s']):>8}  {row['calls']:>6}  {row['hosts']:>5}  {_num(row['p95_ms']):>8}  "
                     f"{_shown(row['fp_id'])[:16]:<16}  {_shown(row['fingerprint'])}")
    lines += ["", f"Slowest hosts per top fingerprint (p95, at most {SLOWEST_HOSTS})"]
    for n, row in enumerate(summary["top_fingerprints"], 1):
        hosts = "; ".join(f"{_shown(h['host'], 40)} {_num(h['p95_ms'])} ms ({h['calls']} calls, {_num(h['total_s'])} s)" for h in row["slowest_hosts"])
        lines.append(f"  {n:>2}  {_shown(row['fp_id'])[:16]:<16}  {hosts}")
    lines += ["", "Findings by host"]
    width = max((len(_shown(h, 40)) for h in summary["findings_by_host"]), default=0)
    for host, rows in summary["findings_by_host"].items():
        rules = ", ".join(f"{_shown(r['rule'], 40)} ({r['severity']}{_times(r['count'])})" for r in rows) or "none"
        lines.append(f"  {_shown(host, 40):<{width}}  {_severity_counts(rows)}: {rules}")
    return "\n".join(lines) + "\n"


def _cell(text: Any, limit: int = SHOWN_TEXT_CHARS) -> str:
    return _shown(text, limit).replace("\\", "\\\\").replace("|", "\\|").replace("`", "'")


def render_md(summary: dict[str, Any]) -> str:
    out = [f"# Fleet: {summary['captures']} capture(s), {len(summary['hosts'])} host(s)", "",
           f"{summary['statements']} statement(s), {summary['findings']} finding(s).", "", "## Top fingerprints by total time", "",
           "| # | total s | calls | hosts | p95 ms | fingerprint | slowest hosts (p95 ms) |", "| ---: | ---: | ---: | ---: | ---: | --- | --- |"]
    for n, row in enumerate(summary["top_fingerprints"], 1):
        slow = ", ".join(f"{_cell(h['host'], 40)} {_num(h['p95_ms'])}" for h in row["slowest_hosts"])
        out.append(f"| {n} | {_num(row['total_s'])} | {row['calls']} | {row['hosts']} | {_num(row['p95_ms'])} | `{_cell(row['fingerprint'])}` | {slow} |")
    rules = sorted({r["rule"] for rows in summary["findings_by_host"].values() for r in rows})
    out += ["", "## Findings by host", "", "| host | " + " | ".join(_cell(r, 40) for r in rules) + " |",
            "| --- |" + " --- |" * len(rules)]
    for host, rows in summary["findings_by_host"].items():
        seen: dict[str, str] = {}
        for r in rows:  # worst first: a rule that fired at two severities shows its worst
            seen.setdefault(r["rule"], r["severity"])
        out.append(f"| {_cell(host, 40)} | " + " | ".join(seen.get(r, "") for r in rules) + " |")
    return "\n".join(out) + "\n"


def render(summary: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(summary, indent=2, ensure_ascii=False, default=str) + "\n"
    return render_md(summary) if fmt == "md" else render_text(summary)
