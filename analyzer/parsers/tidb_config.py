"""TiDB, TiKV and PD configuration files (TOML), flattened to one row per key.

Raw input (a TiKV file; TiDB has ``[performance]``/``[tikv-client]``/``token-limit``, PD has
``[schedule]``/``[replication]``/``initial-cluster``)::

    [server]
    grpc-concurrency = 5
    [storage.block-cache]
    capacity = "2GiB"
    [raftstore]
    sync-log = true
    [rocksdb]
    max-background-jobs = 8
    [[security.encryption.master-key]]   <- arrays (of tables too) stay whole, as JSON

Output table ``db_setting`` (one row per leaf key; ``records`` is their number)::

    engine String ("tidb" / "tikv" / "pd" by which component's keys the file holds, the member name
        ("tikv.toml", "pd-2379.toml") breaking ties; null when undecided), kind "config",
    name String (dotted path: "storage.block-cache.capacity"), value String ("2GiB", booleans
        "true"/"false", numbers as written by Python, arrays as JSON), unit null, source String

Only files with keys or tables of these components are claimed: a generic TOML file
(pyproject.toml, Cargo.toml) is not. A file that breaks at line N (a truncated copy) is read up to
line N - 1, with a warning; one that cannot be read at all raises ParseError.
"""

from __future__ import annotations

import datetime
import json
import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.patterns import lazy_compile
from dbdiag.tables import DB_SETTING, conform

# Tables and keys (dotted paths, or their first parts) that only one component has.
_MARKERS: dict[str, tuple[str, ...]] = {
    "tidb": (
        "performance", "tikv-client", "prepared-plan-cache", "opentracing", "pd-client", "proxy-protocol",
        "isolation-read", "token-limit", "mem-quota-query", "oom-action", "new_collations_enabled_on_first_bootstrap",
        "split-table", "enable-global-kill", "log.slow-threshold", "log.slow-query-file", "log.expensive-threshold",
        "log.query-log-max-len", "instance", "max-server-connections", "status.status-port", "status.report-status",
    ),
    "tikv": (
        "raftstore", "rocksdb", "raftdb", "raft-engine", "readpool", "storage.block-cache", "storage.flow-control",
        "coprocessor", "coprocessor-v2", "pessimistic-txn", "gc", "import", "backup", "log-backup", "cdc",
        "resolved-ts", "server.grpc-concurrency", "pd.endpoints", "storage.scheduler-worker-pool-size",
        "slow-log-threshold", "memory-usage-limit", "abort-on-panic", "quota.foreground-cpu-time",
        "memory.enable-heap-profiling",
    ),
    "pd": (
        "schedule", "replication", "pd-server", "dashboard", "keyspace", "initial-cluster", "initial-cluster-state",
        "client-urls", "peer-urls", "advertise-client-urls", "advertise-peer-urls", "tso-save-interval",
        "enable-prevote", "label-property",
    ),
}
# possessive runs (*+ ++): "[" then 4,000 spaces and no "]" made the old \s* [ ]+? \s* cubic (20 s per line);
# the name keeps its spaces and loses them where it is used
_TABLE_RE = lazy_compile(r"^[ \t]*+\[\[?+([A-Za-z0-9_.\-\" \t]++)\]\]?+[ \t]*+(?:#.*)?$")
_KEY_RE = lazy_compile(r"^\s*([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)\s*=")
_ERROR_LINE_RE = lazy_compile(r"\(at line (\d+), column \d+\)")
_COMMENTED_KEY_RE = lazy_compile(r"^\s*#\s?([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_\-]+)*)\s*=")


def _hits(paths: set[str]) -> dict[str, int]:
    """Number of distinct markers of each component among ``paths`` (dotted table and key paths)."""
    out = {}
    for engine, markers in _MARKERS.items():
        out[engine] = sum(any(p == m or p.startswith(m + ".") for p in paths) for m in markers)
    return out


def _name_hint(name: str) -> str | None:
    lowered = name.lower()
    for engine in ("tidb", "tikv", "pd"):
        if re.search(rf"(?:^|[^a-z]){engine}(?:[^a-z]|$)", lowered):
            return engine
    return None


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return json.dumps(value, default=str, ensure_ascii=False)
    return str(value)


def _flatten(table: dict, prefix: str, rows: list[tuple[str, str]], tables: set[str]) -> None:
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            tables.add(path)
            _flatten(value, path + ".", rows, tables)
        else:
            rows.append((path, _text(value)))


def _load(text: str) -> tuple[dict, list[ParseWarning]]:
    """The TOML document; when it breaks at line N (a truncated copy), the lines before N, with a warning."""
    import tomllib  # compiles its patterns when imported: only when a TOML file is read

    try:
        return tomllib.loads(text), []
    except (tomllib.TOMLDecodeError, RecursionError) as exc:
        reason = str(exc)[:120]
        at = _ERROR_LINE_RE.search(reason)
        lines = text.rstrip("\n").split("\n")
        bad = int(at.group(1)) if at is not None else len(lines) if "end of document" in reason else 0
        if bad > 1:
            try:
                document = tomllib.loads("\n".join(lines[: bad - 1]))
            except (tomllib.TOMLDecodeError, RecursionError):
                document = None
            if document:
                return document, [ParseWarning(bad, f"TOML error ({reason}); read the {bad - 1} lines before it")]
        raise ParseError(f"not valid TOML: {reason}") from exc


def parse(text: str, ctx: ParseContext) -> ParseResult:
    document, warnings = _load(text)
    rows: list[tuple[str, str]] = []
    tables: set[str] = set()
    _flatten(document, "", rows, tables)
    hits = _hits(tables | {name for name, _v in rows})
    hint = _name_hint(ctx.source.rsplit("/", 1)[-1])
    scores = {engine: n + (2 if engine == hint else 0) for engine, n in hits.items()}
    best = max(scores.values())
    leaders = [engine for engine, n in scores.items() if n == best]
    engine = leaders[0] if best > 0 and len(leaders) == 1 else None
    markers = ", ".join(f"{e} {n}" for e, n in hits.items())
    notes = [f"component {engine or 'undecided'} (markers: {markers}; name hint: {hint})"]
    if not rows:
        notes.append("no key set: every setting is left at its default")
    frame = pl.DataFrame(rows, schema={"name": pl.String, "value": pl.String}, orient="row").with_columns(
        pl.lit(engine, dtype=pl.String).alias("engine"), pl.lit("config").alias("kind"),
        pl.lit(ctx.source).alias("source"),
    )
    table = conform(DB_SETTING, frame)
    return ParseResult(tables={DB_SETTING: table}, records=table.height, warnings=warnings, notes=notes)


def detect(head: str, name: str) -> float:
    active: set[str] = set()
    commented: set[str] = set()  # "# key = value" lines: templates ship with every key commented out
    current = ""
    for line in head.split("\n"):
        m = _TABLE_RE.match(line)
        if m:
            current = m.group(1).replace('"', "").replace(" ", "").replace("\t", "")
            active.add(current)
            continue
        k = _KEY_RE.match(line)
        if k:
            active.add(f"{current}.{k.group(1)}" if current else k.group(1))
            continue
        k = _COMMENTED_KEY_RE.match(line)
        if k:
            commented.add(f"{current}.{k.group(1)}" if current else k.group(1))
    if not active:
        return 0.0
    hits = _hits(active)
    best = max(hits.values())
    if best >= 2:
        return 0.9
    if best == 1:
        engine = next(e for e, n in hits.items() if n == 1)
        if _hits(active | commented)[engine] >= 3:
            return 0.8
        if _name_hint(name) is not None and name.lower().endswith(".toml"):
            return 0.7
        return 0.3
    return 0.0


SPEC = ParserSpec(
    kind="tidb-config",
    description="TiDB / TiKV / PD configuration (TOML), flattened to dotted keys",
    detect=detect,
    parse=parse,
)
