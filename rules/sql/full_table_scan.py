"""Statements that read whole tables and cost real database time.

What it detects:
    SQL fingerprints whose executions scanned entire tables — the slow log's ``Full_scan: Yes``
    (Percona, or the TiDB parser when the plan has a ``TableFullScan``), a full-scan node in the
    logged plan (TiDB ``TableFullScan``, PostgreSQL ``Seq Scan``, MariaDB explain access type
    ``ALL``), or far more rows examined than returned — and that add up to a large share of all
    statement time.

Why it matters:
    A full scan reads every row to find a few: its cost grows with the table, not with the
    answer. A statement that was fast on a small table becomes the server's main load as the
    table grows, burns CPU and I/O (on TiDB, coprocessor time on every TiKV), evicts useful pages
    from the buffer pool and, in a transaction, holds locks longer. An index on the columns the
    statement filters on usually turns the scan into a few lookups.

How it is detected:
    Input: ``statement`` rows (fingerprinted), and ``plan_node`` when plans were logged.
    An execution counts as a full scan when any of:
    - a plan node of a full-scan type (TiDB ``TableFullScan``, PostgreSQL ``Seq Scan``, MariaDB
      ``ALL``) read at least MIN_SCANNED_ROWS = 10,000 rows (PostgreSQL: (actual rows + rows
      removed by filter) x loops, as both are per loop; TiDB: actRows, already a total; MariaDB:
      r_rows x loops, else the estimate), or read an unknown number of rows;
    - the log's full-scan flag is set, unless the plan shows that every full scan in it read
      fewer than MIN_SCANNED_ROWS rows (a scan of a small lookup table);
    - no plan was logged for it, and rows examined >= MIN_SCANNED_ROWS and >=
      EXAMINED_PER_RETURNED = 100 x the rows returned (rows sent + rows affected, at least 1).
      This also catches aggregates over a large range and scans of a large index; the evidence
      says which signal applied.
    Per fingerprint, the scanning executions must total at least MIN_TOTAL_S = 1 s and at least
    MIN_SHARE_PCT = 5% of all statement time, counting their execution time only (query time minus
    lock wait, ``exec_time_s``): a statement that waited for a lock is not blamed on its plan (see
    lock-wait); sleep statements are not statement time. One finding per fingerprint, at most
    MAX_FINDINGS = 5 (heaviest first); critical from CRITICAL_SHARE_PCT = 25% of statement time.
    The index suggested is built from the columns compared in the WHERE clause (``=``/``IN``
    first, then one range column, at most MAX_INDEX_COLUMNS = 4). A slow log does not list the
    indexes a table has: an index may exist and not be chosen (see stale-statistics).

Remediation:
    Add an index on the filtered columns (equality columns first, then the range column):
    TiDB/MySQL/MariaDB ``ALTER TABLE t ADD INDEX idx_t_a_b (a, b);``, PostgreSQL
    ``CREATE INDEX CONCURRENTLY idx_t_a_b ON t (a, b);``. First check what exists
    (``SHOW INDEX FROM t`` / ``\\d t``) and the plan as it runs, in the engine's syntax
    (:mod:`dbdiag.rules.sql.plan_check`: MariaDB ``ANALYZE FORMAT=JSON``, MySQL 8.0.18+ and TiDB
    ``EXPLAIN ANALYZE``, PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)``), on the captured statement when its
    literals are shown, else in prose; if a fitting index exists but is not used, look at statistics
    and at functions or type casts on the column.
    If the statement really needs every row (report, export), move it to a replica or off-peak.

References:
    MySQL 8.0 manual "How MySQL Uses Indexes", "EXPLAIN Output Format" (type ALL); MariaDB KB
    "ANALYZE Statement" (r_rows); TiDB docs "Explain Statements That Use Indexes", "Understand the
    Query Execution Plan" (TableFullScan); PostgreSQL manual "Using EXPLAIN", "CREATE INDEX"
    (CONCURRENTLY); pt-query-digest (Rows_examined vs Rows_sent).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from dbdiag import sqlnorm
from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql import plan_check
from dbdiag.rules.sql.common import db_time_s, plan_nodes_of, short_plan, statement_evidence, statements, timed_full_scan_executions
from dbdiag.units import seconds
from dbdiag.vocabulary.dialects import DEFAULT_SQLNORM_DIALECT, MYSQL_FAMILY, SQLNORM_DIALECT_OF_ENGINE

if TYPE_CHECKING:  # sqlglot is imported when a statement is parsed: most runs never need it
    from sqlglot import exp

RULE_ID = "full-table-scan"

MIN_SCANNED_ROWS = t.FULL_SCAN_MIN_ROWS  # 10,000: the derived full_scan table is defined by these two
EXAMINED_PER_RETURNED = t.FULL_SCAN_EXAMINED_PER_RETURNED  # 100
MIN_TOTAL_S = 1.0
MIN_SHARE_PCT = 5.0
CRITICAL_SHARE_PCT = 25.0
MAX_FINDINGS = 5
MAX_INDEX_COLUMNS = 4
MAX_IDENTIFIER_CHARS = 63  # PostgreSQL's limit; MySQL/TiDB allow 64

FULL_SCAN_NODE_TYPES = t.FULL_SCAN_NODE_TYPES


# ---- shared with the other SQL rules of this package (full scans, WHERE columns, index DDL) ----


def sqlnorm_dialect(engine: str | None) -> str:
    return SQLNORM_DIALECT_OF_ENGINE.get(engine or "", DEFAULT_SQLNORM_DIALECT)


def parse_sql(sql: str | None, engine: str | None) -> exp.Expression | None:
    """The statement's syntax tree (sample SQL, literals replaced), or None when sqlglot cannot (or may not) read it."""
    return sqlnorm.parse_statement(sql, sqlnorm_dialect(engine))


def table_aliases(tree: exp.Expression) -> dict[str, str]:
    """alias or name (lower case) -> table name, for every table the statement reads."""
    from sqlglot import exp

    aliases: dict[str, str] = {}
    for table in tree.find_all(exp.Table):
        if table.name:
            aliases[table.alias_or_name.lower()] = table.name
            aliases.setdefault(table.name.lower(), table.name)
    return aliases


def column_table(column: exp.Column, aliases: dict[str, str]) -> str | None:
    """The table a column belongs to: its qualifier resolved, else the only table of the statement."""
    if column.table:
        return aliases.get(column.table.lower(), column.table)
    names = set(aliases.values())
    return next(iter(names)) if len(names) == 1 else None


def known_sum(column: str) -> pl.Expr:
    """Sum of a count column, null (not 0) when the log never gave it."""
    return pl.when(pl.col(column).is_not_null().any()).then(pl.col(column).sum()).alias(column)


@dataclass(frozen=True)
class IndexSuggestion:
    table: str
    equality: tuple[str, ...]
    range_column: str | None

    @property
    def columns(self) -> tuple[str, ...]:
        return self.equality + ((self.range_column,) if self.range_column else ())


def where_predicates(tree: exp.Expression) -> dict[tuple[str | None, str], str]:
    """(table, column), lower case, -> "eq" or "range" for the top-level AND terms of the first WHERE; OR terms are left out."""
    from sqlglot import exp

    where = tree.find(exp.Where)
    if where is None:
        return {}
    aliases = table_aliases(tree)
    condition = where.this.unnest()
    terms = condition.flatten() if isinstance(condition, exp.And) else [condition]
    kinds: dict[tuple[str | None, str], str] = {}
    for term in terms:
        term = term.unnest()
        if isinstance(term, (exp.EQ, exp.In, exp.NullSafeEQ)):
            kind = "eq"
        elif isinstance(term, (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between)):
            kind = "range"
        else:
            continue
        for side in (term.this, term.args.get("expression")):
            if isinstance(side, exp.Column) and side.name:
                owner = column_table(side, aliases)
                key = (owner.lower() if owner else None, side.name.lower())
                if kinds.get(key) != "eq":
                    kinds[key] = kind
    return kinds


def suggest_index(sql: str | None, engine: str | None, table: str | None) -> IndexSuggestion | None:
    """Columns of ``table`` (or of the statement's only table) compared in WHERE: equality first, then one range column.

    None also when the statement's tree cannot be walked (one hostile statement does not stop the rule).
    """
    try:
        return _suggest_index(sql, engine, table)
    except sqlnorm.tree_errors():
        return None


def _suggest_index(sql: str | None, engine: str | None, table: str | None) -> IndexSuggestion | None:
    tree = parse_sql(sql, engine)
    if tree is None:
        return None
    aliases = table_aliases(tree)
    tables = set(aliases.values())
    target = table or (next(iter(tables)) if len(tables) == 1 else None)
    if target is None:
        return None
    bare_target = target.split(".")[-1].lower()
    # where_columns gives the sargable columns with aliases resolved; where_predicates says which
    # are top-level equality or range terms, in written order (a column only under OR cannot lead).
    sargable = {
        column.lower()
        for owner, column in sqlnorm.where_columns(sql or "", sqlnorm_dialect(engine))
        if owner is not None and aliases.get(owner.lower(), owner).lower() == bare_target
    }
    equality: list[str] = []
    ranges: list[str] = []
    for (owner, column), kind in where_predicates(tree).items():
        if owner == bare_target and column in sargable:
            (equality if kind == "eq" else ranges).append(column)
    if not equality and not ranges:
        return None
    equality = equality[:MAX_INDEX_COLUMNS]
    range_column = ranges[0] if ranges and len(equality) < MAX_INDEX_COLUMNS else None
    return IndexSuggestion(table=target, equality=tuple(equality), range_column=range_column)


def index_name(table: str, columns: tuple[str, ...]) -> str:
    bare = table.split(".")[-1]
    return f"idx_{bare}_{'_'.join(columns)}"[:MAX_IDENTIFIER_CHARS]


def index_ddl(engine: str | None, table: str, columns: tuple[str, ...]) -> str:
    name, column_list = index_name(table, columns), ", ".join(columns)
    if engine == "postgresql":
        return f"CREATE INDEX CONCURRENTLY {name} ON {table} ({column_list});"
    return f"ALTER TABLE {table} ADD INDEX {name} ({column_list});"


# ---- the rule ----------------------------------------------------------------------------------


def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    total_s = db_time_s(everything) or 1.0
    scans = timed_full_scan_executions(inp)
    if scans.height == 0:
        timed = everything.height - everything["query_time_s"].null_count()
        return Verdict(measured=f"no full scans among {timed:,} timed statement(s)")
    per_class = (
        scans.group_by("fp_id")
        .agg(
            pl.len().alias("calls"),
            pl.col("exec_time_s").sum().alias("total_s"),
            pl.col("exec_time_s").mean().alias("avg_s"),
            (pl.col("query_time_s") - pl.col("exec_time_s")).sum().alias("lock_wait_s"),
            known_sum("rows_examined"),
            known_sum("rows_sent"),
            known_sum("rows_affected"),
            pl.col("scan_by_plan").sum().alias("by_plan"),
            pl.col("scan_by_flag").sum().alias("by_flag"),
            pl.col("scan_by_rows").sum().alias("by_rows"),
            pl.col("scan_table").drop_nulls().mode().sort().first().alias("table"),
            pl.col("scan_rows").max().alias("max_scan_rows"),
        )
        .with_columns((100.0 * pl.col("total_s") / total_s).alias("share_pct"))
        .sort("total_s", descending=True)
    )
    heavy = per_class.filter(pl.col("total_s") >= MIN_TOTAL_S, pl.col("share_pct") >= MIN_SHARE_PCT).head(MAX_FINDINGS)
    top = per_class.row(0, named=True)
    measured = (
        f"{per_class.height} fingerprint(s) with full scans; heaviest {top['fp_id']}: {seconds(top['total_s'])}, "
        f"{top['share_pct']:.1f}% of statement time (fires from {MIN_TOTAL_S:.0f} s and {MIN_SHARE_PCT:.0f}%)"
        + (f"; execution time, {seconds(top['lock_wait_s'])} of lock wait left out" if top["lock_wait_s"] else "")
    )
    findings = [_finding(inp, scans, _with_all_calls(everything, row)) for row in heavy.iter_rows(named=True)]
    return Verdict(findings=findings, measured=measured)


def _with_all_calls(everything: pl.DataFrame, row: dict) -> dict:
    """``row`` plus all_calls: the fingerprint's timed executions (counted for the few findings, not for every fingerprint)."""
    if row["fp_id"] is None:
        return {**row, "all_calls": None, "used_indexes": set()}
    calls = everything.select(((pl.col("fp_id") == row["fp_id"]) & pl.col("query_time_s").is_not_null()).sum()).item()
    used = set()
    if "index_names" in everything.columns:  # the indexes its other runs used: one set aside explains the scan
        names = everything.filter(pl.col("fp_id") == row["fp_id"])["index_names"].drop_nulls().unique().to_list()
        used = {name.strip().lower() for text in names for name in text.split(",") if name.strip()}
    return {**row, "all_calls": calls, "used_indexes": used}


def _finding(inp: RuleInput, scans: pl.DataFrame, row: dict) -> Finding:
    runs = scans.filter(pl.col("fp_id") == row["fp_id"]).sort("exec_time_s", "query_time_s", descending=True)
    worst = runs.row(0, named=True)
    engine = worst["engine"]
    table = row["table"] or _only_table(worst["sample_sql"], engine)
    suggestion = suggest_index(worst["sample_sql"], engine, table)
    table_text = table or (suggestion.table if suggestion else None)
    set_aside = _set_aside_index(inp, table_text, row["used_indexes"])
    returned = None if row["rows_sent"] is None and row["rows_affected"] is None else (row["rows_sent"] or 0) + (row["rows_affected"] or 0)
    examined = row["rows_examined"]
    per_returned = round(examined / max(returned or 0, 1), 1) if examined is not None else None
    rows_text = (
        f"{examined:,} rows examined for {returned:,} returned" if examined is not None and returned is not None
        else "rows examined and returned are not in the log"
    )
    share = row["share_pct"]
    return Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        severity=Severity.CRITICAL if share >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"Full table scan{f' of {table_text}' if table_text else ''} takes {share:.1f}% of database time "
            f"({seconds(row['total_s'])} in {row['calls']:,} execution(s)); threshold {MIN_SHARE_PCT:.0f}% and {MIN_TOTAL_S:.0f} s"
        ),
        subject=f"fingerprint {row['fp_id']}",
        impact={
            "share_pct": round(share, 1),
            "db_time_s": round(row["total_s"], 3),
            "share_of_db_time": round(share / 100.0, 4),
            "description": (
                f"{row['calls']:,} of {row['all_calls']:,} execution(s) scanned whole tables, {seconds(row['total_s'])} executing in all, "
                f"{seconds(row['avg_s'])} each on average; {rows_text}"
                + (f"; {seconds(row['lock_wait_s'])} of lock wait not counted (see lock-wait)" if row["lock_wait_s"] else "")
            ),
            "rows_examined": examined,
            "rows_returned": returned,
        },
        evidence=(
            statement_evidence(inp, worst["sample_sql"]),
            Evidence(
                title="Scanning executions",
                columns=("calls", "of all calls", "total", "avg", "rows examined", "rows returned", "examined per returned row", "table"),
                rows=((row["calls"], row["all_calls"], seconds(row["total_s"]), seconds(row["avg_s"]), examined, returned, per_returned, table_text),),
            ),
            Evidence(
                title="How the scan shows in the log",
                columns=("signal", "executions"),
                rows=(
                    (f"full-scan plan node reading >= {MIN_SCANNED_ROWS:,} rows (or an unknown number)", row["by_plan"]),
                    ("no plan logged; the log's Full_scan flag", row["by_flag"]),
                    (f"no plan logged; rows examined >= {MIN_SCANNED_ROWS:,} and >= {EXAMINED_PER_RETURNED:.0f}x rows returned", row["by_rows"]),
                ),
            ),
            *_plan_evidence(inp, worst),
            Evidence(
                title="Index that would help",
                text=_suggestion_text(engine, suggestion, table_text, sqlnorm.refusal(worst["sample_sql"] or "")),
            ),
        ),
        remediation=_remediation(engine, suggestion, table_text, plan_check.plan_check(
            engine, inp.metric(t.ENGINE_VERSION_METRIC), worst["sample_sql"], (inp.metric(t.SQL_SUMMARY_METRIC) or {}).get("literals_shown", False)),
            set_aside, _undo(inp, engine, set_aside, worst["sample_sql"])),
        sources=tuple(f"{r['source']}:{r['line']}" for r in runs.head(3).iter_rows(named=True)),
    )


def _only_table(sql: str | None, engine: str | None) -> str | None:
    tree = parse_sql(sql, engine)
    try:
        names = set(table_aliases(tree).values()) if tree is not None else set()
    except sqlnorm.tree_errors():
        return None
    return next(iter(names)) if len(names) == 1 else None


def _plan_evidence(inp: RuleInput, worst: dict) -> tuple[Evidence, ...]:
    nodes = plan_nodes_of(inp, worst["source"], worst["stmt_id"]).filter(pl.col("node_type").is_in(FULL_SCAN_NODE_TYPES))
    pieces = []
    if nodes.height:
        pieces.append(
            Evidence(
                title="Full-scan plan nodes of the slowest execution",
                columns=("node", "table", "estimated rows", "actual rows", "loops", "removed by filter", "filter"),
                rows=tuple(
                    (n["node_type"], n["relation"], n["est_rows"], n["actual_rows"], n["loops"], n["rows_removed_by_filter"], n["filter"])
                    for n in nodes.iter_rows(named=True)
                ),
            )
        )
    if worst["plan"]:
        pieces.append(Evidence(title=f"Plan of the slowest execution ({seconds(worst['query_time_s'])})", text=short_plan(worst["plan"])))
    return tuple(pieces)


def _suggestion_text(engine: str | None, suggestion: IndexSuggestion | None, table: str | None, refused: str | None = None) -> str:
    if suggestion is None and refused is not None:
        return f"The statement was not parsed (it is {refused}): no index is derived from it; read its WHERE clause above."
    if suggestion is None:
        return (
            f"No column of {table or 'the scanned table'} is compared with =, IN or a range at the top level of the WHERE "
            "clause (no WHERE, functions on the column, or OR between columns — see or-without-index-merge): an index "
            "cannot be derived from the statement alone."
        )
    parts = [f"equality: {', '.join(suggestion.equality)}" if suggestion.equality else "", f"range: {suggestion.range_column}" if suggestion.range_column else ""]
    return "\n".join(
        [
            f"Columns of {suggestion.table} the WHERE clause filters on ({'; '.join(p for p in parts if p)}):",
            f"  {index_ddl(engine, suggestion.table, suggestion.columns)}",
            "The slow log does not list the table's indexes: check first whether one on these columns exists and is not chosen.",
        ]
    )


SET_ASIDE_ACTIONS = ("index-ignored", "index-invisible", "drop-index")
RESTORE_ACTIONS = ("index-not-ignored", "index-visible", "create-index")


def _set_aside_index(inp: RuleInput, table: str | None, used: set[str]) -> dict | None:
    """The last index of ``table`` made IGNORED / INVISIBLE or dropped in the capture and not restored after,
    when the statement's other runs used it (``used``: lower-case index names)."""
    changes = inp.table(t.CHANGE, keep_empty=True)
    if table is None or not used or changes is None or not changes.height:
        return None
    mine = changes.filter(
        pl.col("table").str.to_lowercase() == table.lower(), pl.col("action").is_in(SET_ASIDE_ACTIONS + RESTORE_ACTIONS)
    )
    last = mine.tail(1).row(0, named=True) if mine.height else None
    if last is None or last["action"] not in SET_ASIDE_ACTIONS or (last["object"] or "").lower() not in used:
        return None
    return last


def _undo(inp: RuleInput, engine: str | None, set_aside: dict | None, sample_sql: str | None) -> list[str]:
    """The statements that undo an index set aside (plan-flip's, so that this remedy stands alone when no flip
    shows inside the capture: the index was set aside before its first statement)."""
    if set_aside is None:
        return []
    from dbdiag.rules.sql.cause import undo  # cause reads this module's SQL helpers: imported when used

    return undo(engine, set_aside, inp.table(t.CHANGE, keep_empty=True), sample_sql)


def _remediation(engine: str | None, suggestion: IndexSuggestion | None, table: str | None, explain: str,
                 set_aside: dict | None = None, undo_lines: list[str] | tuple[str, ...] = ()) -> str:
    """``explain``: the plan check of :func:`plan_check.plan_check` (a statement or prose); ``set_aside``:
    an index of the table the capture shows set aside (then undoing that is the fix, not a new index), with
    ``undo_lines`` the statements that undo it on this engine."""
    table_text = suggestion.table if suggestion else table
    if table_text is None:
        show = "the indexes of the tables the statement reads"
    else:
        show = f"\\d {table_text}   (psql)" if engine == "postgresql" else f"SHOW INDEX FROM {table_text};"
    lines = [f"1. See which indexes exist: {show}"]
    if set_aside is not None:
        what = {"index-ignored": "made IGNORED", "index-invisible": "made INVISIBLE", "drop-index": "dropped"}[set_aside["action"]]
        how = ":" if undo_lines else " (recreate it as it was: its definition is not in the capture)."
        lines.append(
            f"2. Index {set_aside['object']} of {set_aside['table']} was {what} during the capture "
            f"({set_aside['source']}:{set_aside['line']}): undo that rather than add another index{how}"
        )
        lines += [f"   {line}" for line in undo_lines]
    elif suggestion is not None:
        lines.append("2. Add an index on the filtered columns (equality columns first, then the range column):")
        lines.append(f"   {index_ddl(engine, suggestion.table, suggestion.columns)}")
        if engine in MYSQL_FAMILY:
            lines.append("   (InnoDB builds it online: add ', ALGORITHM=INPLACE, LOCK=NONE' to be sure it does not block writes)")
    else:
        lines.append("2. Give the statement a selective, indexable WHERE clause (no function or cast on the column), or an index on the expression it filters on.")
    lines.append(f"3. Check the plan no longer scans the table: {explain}")
    if engine == "tidb":
        lines.append("   (TiDB: the plan should show IndexRangeScan / IndexLookUp instead of TableFullScan)")
    lines.append("If an index on these columns already exists and is not chosen, refresh statistics (see stale-statistics); if the statement needs every row, run it on a replica or off-peak.")
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="Statements scanning whole tables cost real database time",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
