"""What plan-flip and stale-statistics share: the change before a slowdown and the step it made.

The derived ``change`` table (see ``dbdiag.derive.changes``) lists DDL, statistics collection and
bulk changes with their ``file:line``. For a fingerprint whose latency changed, this module finds
the last change on a table it reads before the change of plan, and measures the step from the
fingerprint's own runs, all of them (with or without a logged plan): calls and median latency
between the change before it and this change, and between this change and the next one on the
same table. DB time lost = calls after x (median after - median before).

A run is before a change when it comes earlier in the same log (line order: MariaDB slow logs stamp
whole seconds) or, from another log, when it started before the change's time (a run in flight
when an index went away kept its plan).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence
from dbdiag.patterns import lazy_compile
from dbdiag.rules.base import RuleInput
from dbdiag.rules.sql.common import short_sql
from dbdiag.rules.sql.full_table_scan import parse_sql, suggest_index, table_aliases
from dbdiag.units import seconds

TABLE_KINDS = ("ddl", "statistics", "bulk-change")
STATEMENT_CHARS = 300


@dataclass(frozen=True)
class Step:
    """The fingerprint's runs on each side of a change."""

    calls_before: int
    median_before_s: float | None
    calls_after: int
    median_after_s: float | None
    after_s: float  # total time of the runs after

    @property
    def lost_s(self) -> float | None:
        """calls after x (median after - median before), not below 0; None without runs on both sides.

        Never more than the runs after took beyond the median before (when most runs after sit above
        their median, the product would count time that was not spent).
        """
        if not self.calls_before or not self.calls_after or self.median_before_s is None or self.median_after_s is None:
            return None
        by_median = self.calls_after * (self.median_after_s - self.median_before_s)
        spent = self.after_s - self.calls_after * self.median_before_s
        return max(0.0, min(by_median, spent))


def table_changes(inp: RuleInput) -> pl.DataFrame | None:
    """The changes on tables (DDL, statistics, bulk changes) in time order, or None."""
    frame = inp.table(t.CHANGE, keep_empty=True)
    if frame is None or not frame.height:
        return None
    frame = frame.filter(pl.col("kind").is_in(TABLE_KINDS))
    return frame if frame.height else None


def tables_read(inp: RuleInput, runs: pl.DataFrame, sample_sql: str | None, engine: str | None) -> set[str]:
    """Lower-case names of the tables the fingerprint reads: its plan nodes' relations, and its SQL's tables."""
    names: set[str] = set()
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    if nodes is not None:
        keys = runs.select("source", "stmt_id")
        used = nodes.join(keys, on=["source", "stmt_id"], how="semi")["relation"].drop_nulls().unique().to_list()
        names.update(name.split(".")[-1].strip('`"').lower() for name in used)
    tree = parse_sql(sample_sql, engine)
    if tree is not None:
        names.update(name.split(".")[-1].lower() for name in table_aliases(tree).values())
    return names


def on_tables(changes: pl.DataFrame, names: set[str]) -> pl.DataFrame:
    """Changes on one of ``names``, and statistics collected on every table (a bare ``ANALYZE``)."""
    whole_database = (pl.col("kind") == "statistics") & pl.col("table").is_null()
    return changes.filter(pl.col("table").str.to_lowercase().is_in(sorted(names)).fill_null(False) | whole_database)


def before(change: dict) -> pl.Expr:
    """Whether a run (``source``, ``line``, ``start_ts``, ``end_ts``) came before ``change``."""
    # a change without a line or a time (a log with no timestamps) orders nothing: comparing with None is null
    same_log = pl.col("source") == change["source"]
    started = pl.coalesce(pl.col("start_ts"), pl.col("end_ts"))
    by_line = pl.col("line") < change["line"] if change["line"] is not None else pl.lit(None, pl.Boolean)
    by_time = started < change["ts"] if change["ts"] is not None else pl.lit(None, pl.Boolean)
    return pl.when(same_log).then(by_line).otherwise(by_time).fill_null(False)


def change_before(row: dict, change: dict) -> bool:
    """Whether ``change`` came before the run ``row`` (same rule as :func:`before`)."""
    if row["source"] == change["source"] and row["line"] is not None and change["line"] is not None:
        return change["line"] < row["line"]
    started = row.get("start_ts") or row.get("end_ts")
    return started is not None and change["ts"] is not None and change["ts"] <= started


def at_run(row: dict) -> dict:
    """A run as a point in time that :func:`before` can compare others with (the run itself counts as after it)."""
    return {"source": row["source"], "line": row["line"], "ts": row.get("start_ts") or row.get("end_ts")}


def last_change_before(changes: pl.DataFrame, row: dict, after: dict | None = None) -> dict | None:
    """The last of ``changes`` before the run ``row`` (and after the run ``after``, when given)."""
    found = None
    for change in changes.iter_rows(named=True):
        if change_before(row, change) and (after is None or not change_before(after, change)):
            found = change
    return found


def neighbours(changes: pl.DataFrame, cause: dict) -> tuple[dict | None, dict | None]:
    """(the change on the same tables just before ``cause``, the one just after), from ``changes`` in time order."""
    rows = changes.rows(named=True)
    index = next(i for i, row in enumerate(rows) if row["source"] == cause["source"] and row["line"] == cause["line"])
    return (rows[index - 1] if index else None), (rows[index + 1] if index + 1 < len(rows) else None)


def step(runs: pl.DataFrame, cause: dict, previous: dict | None, following: dict | None) -> Step:
    """The runs (``source``, ``line``, ``start_ts``, ``end_ts``, ``query_time_s``) on each side of ``cause``, within its neighbours."""
    timed = runs.filter(pl.col("query_time_s").is_not_null())
    is_before = before(cause)
    side_before = timed.filter(is_before & (~before(previous) if previous else pl.lit(True)))
    side_after = timed.filter(~is_before & (before(following) if following else pl.lit(True)))
    return Step(
        calls_before=side_before.height,
        median_before_s=side_before["query_time_s"].median() if side_before.height else None,
        calls_after=side_after.height,
        median_after_s=side_after["query_time_s"].median() if side_after.height else None,
        after_s=float(side_after["query_time_s"].sum()),
    )


_BULK_ACTIONS = ("insert", "update", "delete", "copy", "load-data")


def label(change: dict) -> str:
    """What the change did, short: ``index idx_a made IGNORED on orders``, ``a bulk INSERT into jobs``."""
    action, table, obj = change["action"], change["table"] or "the database", change["object"]
    rows = f" ({change['rows']:,} rows)" if change["rows"] is not None else ""
    labels = {
        "index-ignored": f"index {obj} made IGNORED on {table}",
        "index-invisible": f"index {obj} made INVISIBLE on {table}",
        "index-not-ignored": f"index {obj} made NOT IGNORED on {table}",
        "index-visible": f"index {obj} made VISIBLE on {table}",
        "drop-index": f"DROP INDEX {obj} on {table}",
        "create-index": f"CREATE INDEX {obj} on {table}",
        "analyze": f"ANALYZE of {table}",
        "auto-analyze": f"auto analyze of {table}",
        "truncate": f"TRUNCATE of {table}",
    }
    if action in _BULK_ACTIONS:
        return f"a bulk {action.upper().replace('-', ' ')}{rows} on {table}"
    return labels.get(action, f"{action.upper().replace('-', ' ')} on {table}")


def statistics_before(changes: pl.DataFrame, cause: dict) -> dict | None:
    """The last statistics collection on the cause's table before a bulk change (the statistics it made stale)."""
    if cause["action"] not in _BULK_ACTIONS:
        return None
    collected = changes.filter(pl.col("kind") == "statistics")
    return last_change_before(collected, {"source": cause["source"], "line": cause["line"], "start_ts": cause["ts"]})


def step_numbers(found: Step) -> dict:
    """The step as impact fields."""
    return {
        "calls_before": found.calls_before,
        "median_before_s": round(found.median_before_s, 6),
        "calls_after": found.calls_after,
        "median_after_s": round(found.median_after_s, 6),
    }


def cause_summary(cause: dict) -> dict:
    """The cause as an impact field: what, on what, when, by which connection, where in the capture."""
    return {
        "action": cause["action"], "table": cause["table"], "object": cause["object"],
        "ts": cause["ts"].isoformat() if cause["ts"] else None, "conn_id": cause["conn_id"], "at": where(cause),
    }


def where(change: dict) -> str:
    return f"{change['source']}:{change['line']}"


def describe(change: dict) -> str:
    """``ALTER TABLE ... (db/slow.log:2038, 01:55:01 UTC, thread 6)``."""
    parts = [where(change)]
    if change["ts"] is not None:
        parts.append(f"{change['ts']:%Y-%m-%d %H:%M:%S} UTC")
    if change["conn_id"]:
        parts.append(f"connection {change['conn_id']}")
    return f"{_statement(change)} ({', '.join(parts)})"


def _statement(change: dict) -> str:
    text = short_sql(change["statement"]).rstrip(";")
    return text if len(text) <= STATEMENT_CHARS else text[: STATEMENT_CHARS - 1] + "…"


def step_text(found: Step) -> str:
    lost = found.lost_s
    return (
        f"{found.calls_before:,} run(s) before it at {seconds(found.median_before_s)} median, "
        f"{found.calls_after:,} after at {seconds(found.median_after_s)} median"
        + (f": {seconds(lost)} lost (calls after x the rise of the median)" if lost is not None else "")
    )


def cause_evidence(cause: dict, found: Step | None, changes_on_tables: pl.DataFrame) -> tuple[Evidence, ...]:
    """The change named as the cause with its step, and the changes on the same tables."""
    rows = [("change", cause["action"], cause["table"], cause["object"], cause["rows"], f"{cause['ts']:%H:%M:%S}" if cause["ts"] else None,
             cause["conn_id"], where(cause), _statement(cause))]
    step_rows = ()
    if found is not None:
        step_rows = (
            ("before", found.calls_before, seconds(found.median_before_s)),
            ("after", found.calls_after, seconds(found.median_after_s)),
        )
    listed = Evidence(
        title="Changes on these tables seen in the capture (oldest first)",
        columns=("time", "action", "table", "object", "rows", "connection", "at", "statement"),
        rows=tuple(
            (f"{c['ts']:%H:%M:%S}" if c["ts"] else None, c["action"], c["table"], c["object"], c["rows"], c["conn_id"], where(c), _statement(c))
            for c in changes_on_tables.head(20).iter_rows(named=True)
        ),
    )
    named = Evidence(
        title=f"Cause: the last change on {cause['table'] or 'the database'} before the plan changed",
        columns=("what", "action", "table", "object", "rows", "time", "connection", "at", "statement"),
        rows=tuple(rows),
    )
    out = [named]
    if step_rows:
        out.append(Evidence(title="Step of this statement at the change (all its runs)", columns=("side", "calls", "median"), rows=step_rows))
    return (*out, listed)


# ---- undoing a change, per engine ---------------------------------------------------------------------


def undo(engine: str | None, cause: dict, changes: pl.DataFrame, sample_sql: str | None) -> list[str]:
    """Remedy lines that undo ``cause`` on ``engine``, statements ending with ``;``; empty when none is known."""
    table, index, action = cause["table"], cause["object"], cause["action"]
    if not table:
        return []
    if action == "index-ignored" and engine == "mariadb":
        return [f"Undo it (MariaDB 10.6+): ALTER TABLE {table} ALTER INDEX {index} NOT IGNORED;"]
    if action == "index-invisible" and engine in ("mysql", "percona", "tidb"):
        return [f"Undo it ({'TiDB' if engine == 'tidb' else 'MySQL 8.0+'}): ALTER TABLE {table} ALTER INDEX {index} VISIBLE;"]
    if action == "drop-index":
        ddl = _recreate_index(engine, table, index, changes, sample_sql)
        return [f"Undo it, recreate the index: {ddl}"] if ddl else []
    if action == "create-index":
        return _set_aside(engine, table, index)
    if action in ("analyze", "auto-analyze", "insert", "update", "delete", "copy", "load-data", "truncate"):
        return analyze_lines(engine, table)
    return []


def analyze_lines(engine: str | None, table: str) -> list[str]:
    """Collect statistics on ``table`` now that it holds the data the plans run on."""
    if engine == "postgresql":
        return [f"Collect statistics on the data as it is now: ANALYZE {table};"]
    if engine == "mariadb":
        return [f"Collect statistics on the data as it is now: ANALYZE TABLE {table} PERSISTENT FOR ALL;"]
    if engine == "tidb":
        return [
            f"Collect statistics on the data as it is now: ANALYZE TABLE {table};",
            f"Keep auto-analyze from retaking them at the wrong moment (TiDB 6.5+, a queue table): LOCK STATS {table};",
        ]
    return [f"Collect statistics on the data as it is now: ANALYZE TABLE {table};"]


def _set_aside(engine: str | None, table: str, index: str | None) -> list[str]:
    """A new index the optimizer now prefers: set it aside without dropping it."""
    if not index:
        return []
    if engine == "mariadb":
        return [f"Set the new index aside (MariaDB 10.6+): ALTER TABLE {table} ALTER INDEX {index} IGNORED;"]
    if engine in ("mysql", "percona", "tidb"):
        return [f"Set the new index aside: ALTER TABLE {table} ALTER INDEX {index} INVISIBLE;"]
    if engine == "postgresql":
        return [f"Drop the new index if the old plan was better: DROP INDEX CONCURRENTLY {index};"]
    return []


_CREATE_INDEX = lazy_compile(r"(?is)^\s*create\s+(unique\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?")
_ADD_INDEX = lazy_compile(r"(?is)\badd\s+((?:unique\s+)?(?:index|key)\s+[`\"\w$]+\s*(?:using\s+\w+\s*)?\([^)]*\))")


def _recreate_index(engine: str | None, table: str, index: str | None, changes: pl.DataFrame, sample_sql: str | None) -> str | None:
    """The DDL that recreates a dropped index: its own definition when the capture created it, else the WHERE columns."""
    created = changes.filter(pl.col("action") == "create-index", pl.col("object").str.to_lowercase() == (index or "").lower())
    definition = created["statement"][-1] if created.height else None
    if definition and "?" not in definition:
        text = short_sql(definition).rstrip().rstrip(";")
        if engine == "postgresql" and _CREATE_INDEX.match(text):
            return _CREATE_INDEX.sub(lambda m: f"CREATE {m.group(1) or ''}INDEX CONCURRENTLY ", text, count=1) + ";"
        added = _ADD_INDEX.search(text)
        if added and engine != "postgresql":
            return f"ALTER TABLE {table} ADD {added.group(1)};"
        if _CREATE_INDEX.match(text):
            return text + ";"
    suggestion = suggest_index(sample_sql, engine, table)
    if suggestion is None or not index:
        return None
    columns = ", ".join(suggestion.columns)
    if engine == "postgresql":
        return f"CREATE INDEX CONCURRENTLY {index} ON {table} ({columns});"
    if engine == "tidb":
        return f"CREATE INDEX {index} ON {table} ({columns});"
    return f"ALTER TABLE {table} ADD INDEX {index} ({columns});"
