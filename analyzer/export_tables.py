"""``dbdiag analyze CAPTURE --tables DIR``: this capture's narrow tables as Parquet, for ``dbdiag fleet``.

The schemas, the partitions and the day of a row are in :mod:`dbdiag.tables.export`. Here the
frames are built from an ``Analysis`` and its report document, and written::

    folder = check_tables_dir("fleet", capture)     # before the analysis: a bad DIR fails at once
    export = build_export(analysis, document, analyzed_at, version)
    write_export(folder, export)                    # -> fleet/statement/host=db03/day=2026-11-29/<capture_id>.parquet ...

Privacy: the text comes from the public derived tables only (``fingerprinted_statement``'s
``fingerprint`` and ``sample_sql``, ``public_plan_node``, the public ``event`` and ``load_sample``),
redacted unless ``--show-literals``; with ``--pseudonymize`` every string column goes through the same
pseudonymizer as the report (and the host is its pseudonym). The findings are the document's.

``capture_id``: 16 hex digits of a SHA-256 of the capture's base name and its inventory (each member's
path and size, each input's kind and record count). The same capture gives the same id whatever
the run, its options or its place on disk (a copy too); changed content changes a size or a count.
A capture is in DIR at most once: if any file of that id is there already (any table, host or day),
nothing is written and the error names it (remove those files to export it again).

Safety: files are written only under DIR, under names built here (host percent-encoded: no ``/``,
no ``..``); each is written beside its place and linked in (``os.link`` never replaces a file), and
if anything fails, every file of this export is removed again.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import polars as pl

from dbdiag import pseudonymize
from dbdiag import tables as t
from dbdiag.capture import printable_name
from dbdiag.pipeline import Analysis
from dbdiag.python_values import mapped
from dbdiag.tables import export as x

CAPTURE_ID_HEX = 16
MAX_PARTITION_CHARS = 200  # a partition value is one path component (255 bytes at most with "host=")
PARTITION_PREFIX_CHARS = 16  # of a longer one, encoded (4-byte characters: 12 each), then a hash
ARCHIVE_SUFFIXES = (".tar.gz", ".tar.xz", ".tar.bz2", ".tar.zst", ".tgz", ".tar", ".zip")


class ExportError(Exception):
    """The tables cannot be written: one line naming the path and the reason."""


@dataclass(frozen=True)
class Export:
    capture_id: str
    host: str
    frames: dict[str, pl.DataFrame]  # table -> rows in its export schema, plus ``day``


def check_tables_dir(given: str, capture: Path) -> Path:
    """The tables folder, created; refused when empty (``Path("")`` is the current folder), a file, in the
    capture folder, or not writable."""
    if not given:
        raise ExportError("--tables: the folder name is empty; name a folder")
    folder, shown = Path(given), printable_name(given)
    real, capture_real = os.path.realpath(folder), os.path.realpath(capture)
    if real == capture_real or (os.path.isdir(capture_real) and os.path.commonpath([real, capture_real]) == capture_real):
        raise ExportError(f"{shown}: --tables must be outside the capture")
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise ExportError(f"{shown}: --tables needs a folder; this is a file")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ExportError(f"{shown}: cannot create the tables folder: {_reason(error)}") from None
    probe = folder / f".dbdiag-probe.{os.getpid()}.partial"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        raise ExportError(f"{shown}: cannot write in the tables folder: {_reason(error)}") from None
    probe.unlink()
    return folder


def capture_id(analysis: Analysis) -> str:
    """The capture's id (see the module docstring)."""
    inventory = {
        "name": Path(analysis.capture.source).name,
        "members": [[m.path, m.size] for m in analysis.capture.members],
        "inputs": [[r.path, r.kind, r.records] for r in analysis.inputs],
    }
    text = json.dumps(inventory, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:CAPTURE_ID_HEX]


def capture_host(analysis: Analysis) -> str:
    """The host name a parser found (``host_fact``), else the capture's file name without its suffixes."""
    facts = analysis.tables.get(t.HOST_FACT)
    if facts is not None:
        names = facts.filter(pl.col("key").is_in(pseudonymize.HOST_FACT_KEYS) & pl.col("value").str.strip_chars().ne(""))
        if names.height:
            return names["value"][0].strip()
    name = Path(analysis.capture.source.rstrip("/")).name
    for suffix in ARCHIVE_SUFFIXES:
        if name.lower().endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return Path(name).stem or "unknown"


def build_export(analysis: Analysis, document: dict[str, Any], analyzed_at: datetime, version: str) -> Export:
    """Every exported table of this analysis (empty ones left out), in its schema, with its ``day``."""
    ident, host = capture_id(analysis), capture_host(analysis)
    derived = analysis.derived.tables
    statements = _frame(derived, t.FINGERPRINTED_STATEMENT)
    times = [r.time_range for r in analysis.inputs if r.time_range]
    first = min((lo for lo, _ in times if lo is not None), default=None)
    last = max((hi for _, hi in times if hi is not None), default=None)
    capture_day = first.astimezone(timezone.utc).strftime("%Y-%m-%d") if first is not None else x.UNKNOWN_DAY
    frames = {
        x.STATEMENT: statements.with_columns(is_sleep=pl.col("statement_class").eq("sleep")),
        x.STATEMENT_CLASS: _classes(statements),
        x.PLAN_NODE: _frame(derived, t.PUBLIC_PLAN_NODE),
        x.EVENT: _frame(derived, t.EVENT).rename({"host": "logged_host"}, strict=False),
        x.PER_CPU: _frame(derived, t.PER_CPU),
        x.SOFTIRQ_RATE: _frame(analysis.tables, t.SOFTIRQ_RATE),
        x.NUMA_COUNTER: _frame(analysis.tables, t.NUMA_COUNTER),
        x.LOAD_SAMPLE: _frame(derived, t.LOAD_SAMPLE),
        x.METRIC_SAMPLE: _frame(analysis.tables, t.METRIC_SAMPLE),
        x.FINDING: _findings(document["findings"]),
        x.CAPTURE: pl.DataFrame([{
            "capture_name": Path(analysis.capture.source.rstrip("/")).name, "analyzed_at": analyzed_at,
            "dbdiag_version": version, "export_schema_version": x.EXPORT_SCHEMA_VERSION, "first_ts": first, "last_ts": last,
            "statements": statements.height, "literals_shown": analysis.options.show_literals,
            "pseudonymized": analysis.options.pseudonymize,
        }], schema={k: v for k, v in x.CAPTURE_SCHEMA.items() if k != "capture_id"}),
    }
    frames = {name: _conformed(name, frame.with_columns(capture_id=pl.lit(ident))) for name, frame in frames.items() if frame.height}
    dated = {x.STATEMENT: with_day(x.STATEMENT, frames[x.STATEMENT], None, capture_day)} if x.STATEMENT in frames else {}
    frames = {name: dated.get(name) if name in dated else with_day(name, frame, dated.get(x.STATEMENT), capture_day)
              for name, frame in frames.items()}
    if analysis.options.pseudonymize:
        host, frames = _pseudonymized(analysis, host, frames)
    return Export(ident, host, frames)


def _frame(tables: dict[str, pl.DataFrame], name: str) -> pl.DataFrame:
    frame = tables.get(name)
    return frame if frame is not None else pl.DataFrame()


def _conformed(name: str, frame: pl.DataFrame) -> pl.DataFrame:
    schema = x.EXPORT_SCHEMAS[name]
    return frame.select(
        (pl.col(c).cast(dtype) if c in frame.columns else pl.lit(None, dtype=dtype)).alias(c) for c, dtype in schema.items()
    )


def _classes(statements: pl.DataFrame) -> pl.DataFrame:
    """One row per fp_id: its fingerprint and the sample of its slowest execution (as the report's profile)."""
    if statements.height == 0:
        return statements
    return statements.group_by("fp_id").agg(
        pl.col("engine").first(), pl.col("fingerprint").first(),
        pl.col("sample_sql").sort_by(pl.col("query_time_s").fill_null(-1.0), descending=True).first(),
        pl.col("end_ts").min().alias("first_seen_ts"), pl.col("end_ts").max().alias("last_seen_ts"),
    ).sort("fp_id")


def _findings(findings: list[dict[str, Any]]) -> pl.DataFrame:
    rows = [{
        "finding_id": f["id"], "rule": f["rule"], "severity": f["severity"], "subject": f.get("subject"), "title": f.get("title"),
        "rank": rank, "db_time_s": (f.get("impact") or {}).get("db_time_s"),
    } for rank, f in enumerate(findings, 1)]
    return pl.DataFrame(rows, schema={k: v for k, v in x.FINDING_SCHEMA.items() if k != "capture_id"})


def with_day(name: str, frame: pl.DataFrame, statements: pl.DataFrame | None, capture_day: str) -> pl.DataFrame:
    """``frame`` with ``day``: the UTC date of its day columns, else ``unknown`` (see ``tables.export``)."""
    columns = x.DAY_COLUMNS[name]
    if columns:
        moment = pl.coalesce([pl.col(c) for c in columns])
        return frame.with_columns(day=moment.dt.convert_time_zone("UTC").dt.strftime("%Y-%m-%d").fill_null(x.UNKNOWN_DAY))
    if name == x.PLAN_NODE and statements is not None:
        days = statements.select("source", "stmt_id", "day").unique(["source", "stmt_id"])
        return frame.join(days, on=["source", "stmt_id"], how="left", nulls_equal=True).with_columns(pl.col("day").fill_null(x.UNKNOWN_DAY))
    return frame.with_columns(day=pl.lit(x.UNKNOWN_DAY if name == x.PLAN_NODE else capture_day))


def _pseudonymized(analysis: Analysis, host: str, frames: dict[str, pl.DataFrame]) -> tuple[str, dict[str, pl.DataFrame]]:
    """The host and every string column through the report's pseudonymizer; ids, days and the findings
    (the document's, pseudonymized already: a second pass would map its addresses again) stay."""
    paths = [analysis.capture.source] + [r.path for r in analysis.inputs]
    names = pseudonymize.collect_names(analysis.tables, paths)
    kept = ("capture_id", "fp_id", "day")
    columns = {name: [c for c, d in f.schema.items() if d == pl.String and c not in kept] if name != x.FINDING else []
               for name, f in frames.items()}
    texts = {v for name, f in frames.items() for c in columns[name] for v in f[c].drop_nulls().unique().to_list()}
    replace, _ = pseudonymize.pseudonymizer(names, sorted(texts | {host}), paths)
    out = {name: f.with_columns(mapped(f[c], replace, pl.String).alias(c) for c in columns[name]) for name, f in frames.items()}
    return replace(host), out


def partition_value(value: str) -> str:
    """A Hive partition value as one safe path component: percent-encoded, and a long one cut with a
    hash of the whole (two long names stay apart).

    >>> partition_value("db/03 ..")
    'db%2F03%20..'
    >>> partition_value("é" * 200)[-13:]
    '~df20b2aa6262'
    """
    encoded = urllib.parse.quote(value, safe="", errors="backslashreplace")
    if len(encoded) <= MAX_PARTITION_CHARS:
        return encoded or "unknown"
    digest = hashlib.sha256(value.encode("utf-8", "backslashreplace")).hexdigest()[:12]
    return f"{urllib.parse.quote(value[:PARTITION_PREFIX_CHARS], safe='', errors='backslashreplace')}~{digest}"


def export_paths(folder: Path, export: Export) -> dict[tuple[str, str], Path]:
    """(table, day) -> the file each part of ``export`` goes to."""
    host = f"host={partition_value(export.host)}"
    return {
        (name, day): folder / name / host / f"day={partition_value(day)}" / f"{export.capture_id}.parquet"
        for name, frame in export.frames.items() for day in sorted(frame["day"].unique().to_list())
    }


def existing_files(folder: Path, ident: str) -> list[Path]:
    """Files of capture ``ident`` already in ``folder`` (any table, host or day)."""
    return sorted(p for table in x.EXPORT_SCHEMAS for p in (folder / table).glob(f"host=*/day=*/{ident}.parquet"))


def write_export(folder: Path, export: Export) -> list[Path]:
    """Write every file of ``export`` under ``folder`` (all or none); the paths written."""
    there = existing_files(folder, export.capture_id)
    if there:
        raise ExportError(f"{printable_name(str(there[0]))}: capture {export.capture_id} is already in {printable_name(str(folder))}; "
                          "remove its files to export it again")
    written: list[Path] = []
    try:
        for (name, day), path in export_paths(folder, export).items():
            part = export.frames[name].filter(pl.col("day") == day).drop("day")
            _write_new(path, part)
            written.append(path)
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    return written


def _write_new(path: Path, frame: pl.DataFrame) -> None:
    """Write ``frame`` to a new file ``path``: beside it first, then linked in (never over a file)."""
    temporary = path.parent / f".{path.name}.{os.getpid()}.partial"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(temporary, compression="zstd", statistics=True)
        try:
            os.link(temporary, path)
        except (FileExistsError, IsADirectoryError):
            raise
        except OSError:  # a file system without hard links: a new file written in place ("x": never an old one)
            with open(path, "xb") as out:
                frame.write_parquet(out, compression="zstd", statistics=True)
    except (FileExistsError, IsADirectoryError):
        raise ExportError(f"{printable_name(str(path))}: already exists; not replaced") from None
    except OSError as error:
        raise ExportError(f"{printable_name(str(path))}: cannot write: {_reason(error)}") from None
    finally:
        temporary.unlink(missing_ok=True)


def _reason(error: OSError) -> str:
    return (error.strerror or str(error)).lower()
