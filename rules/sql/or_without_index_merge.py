"""OR across different columns of one table, executed as a full table scan.

What it detects:
    Statements whose WHERE clause ORs conditions on different columns of the same table
    (``WHERE a = ? OR b = ?``) and that read that table with a full scan, without an index-merge
    plan (TiDB ``IndexMerge``, MySQL/MariaDB access type ``index_merge``, PostgreSQL
    ``BitmapOr``), costing real database time.

Why it matters:
    A single B-tree index serves one leading column: for ``a = ? OR b = ?`` no composite index
    helps, and without index merge the optimizer falls back to reading the whole table. With an
    index on each column, index merge (union) reads both small ranges and combines them, or the
    statement can be split into one indexed query per branch. The difference is a lookup of a
    few rows against a scan of millions.

How it is detected:
    Input: ``statement`` rows (fingerprinted; the SQL read only from ``sample_sql``), and
    ``plan_node`` when plans were logged. An execution qualifies when it ran as a full scan (the
    log's full-scan flag, or a full-scan plan node: TiDB ``TableFullScan``, PostgreSQL
    ``Seq Scan``, MariaDB ``ALL`` — as in full-table-scan, small scans excepted) and neither its
    plan nodes nor its plan text show an index merge. Per fingerprint, those executions must
    total at least MIN_TOTAL_S = 1 s and MIN_SHARE_PCT = 1% of all statement time. The sample
    SQL of the heaviest MAX_PARSED_FINGERPRINTS = 200 such fingerprints is parsed with sqlglot
    (dialect of the engine); it fires when a WHERE clause holds an OR whose branches compare at
    least two different columns of the same table and no column is compared in every branch
    (``a = 1 OR a = 2`` is an IN list, not this problem). At most MAX_FINDINGS = 5 findings;
    critical from CRITICAL_SHARE_PCT = 25% of statement time.
    A slow log does not list a table's indexes, so whether the columns are separately indexed
    is usually unknown: the evidence shows the indexes the log names (TiDB ``Index_names``,
    index names in plan nodes) and says so.

Remediation:
    Give each OR-ed column its own index, then let the optimizer merge them: TiDB
    ``SET GLOBAL tidb_enable_index_merge = ON`` or the hint
    ``/*+ USE_INDEX_MERGE(t, idx_a, idx_b) */``; MySQL/MariaDB ``index_merge_union`` /
    ``index_merge_sort_union`` in ``optimizer_switch`` (MySQL 8.0.20+ hint
    ``/*+ INDEX_MERGE(t idx_a, idx_b) */``); PostgreSQL plans ``BitmapOr`` by itself once both
    indexes exist. Or rewrite the statement as one query per branch joined with UNION (or
    UNION ALL when the later branches exclude rows of the earlier ones). The hinted statement and
    the TiDB binding are printed in full only when the captured statement's literals are shown
    (a ``?`` sample cannot run); else the same in prose. The MySQL hint is left out for a server
    the capture shows older than 8.0.20.

References:
    TiDB docs "Explain Statements Using Index Merge", system variable
    ``tidb_enable_index_merge``, "Optimizer Hints" (USE_INDEX_MERGE), "CREATE [GLOBAL|SESSION]
    BINDING"; MySQL 8.0 manual "Index Merge Optimization"; MariaDB KB "Index Merge"; PostgreSQL manual "Combining Multiple
    Indexes" (BitmapOr).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import polars as pl

from dbdiag import sqlnorm
from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.patterns import lazy_compile
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql import plan_check
from dbdiag.rules.sql.common import db_time_s, from_one_source, short_sql, statement_evidence, statements
from dbdiag.rules.sql.full_table_scan import (
    column_table,
    index_ddl,
    index_name,
    known_sum,
    parse_sql,
    sqlnorm_dialect,
    table_aliases,
    timed_full_scan_executions,
)
from dbdiag.statement_keys import has_statement
from dbdiag.units import seconds
from dbdiag.versions import at_least
from dbdiag.vocabulary.dialects import SQLGLOT_DIALECT

if TYPE_CHECKING:  # sqlglot is imported when a statement is parsed: most runs never need it
    from sqlglot import exp

RULE_ID = "or-without-index-merge"

MIN_TOTAL_S = 1.0
MIN_SHARE_PCT = 1.0
CRITICAL_SHARE_PCT = 25.0
MAX_FINDINGS = 5
MAX_PARSED_FINGERPRINTS = 200
MYSQL_INDEX_MERGE_HINT = (8, 0, 20)  # the INDEX_MERGE hint (MySQL 8.0 manual "Index Merge Optimization")

INDEX_MERGE_NODE_TYPES = ("IndexMerge", "index_merge", "BitmapOr")
_INDEX_MERGE_TEXT = r"IndexMerge|index_merge|BitmapOr"
_OR_TOKEN = lazy_compile(r"(?i)(?<![a-z_$])or(?![a-z0-9_$])|\|\|")  # "1OR" too: a number may touch it


@lru_cache(maxsize=1)
def _comparisons() -> tuple[type, ...]:
    from sqlglot import exp

    return (exp.EQ, exp.NullSafeEQ, exp.In, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.Like, exp.Is)


@dataclass(frozen=True)
class OrPredicate:
    table: str
    qualifier: str  # how the statement names the table (alias or name), for hints
    columns: tuple[str, ...]
    branch_columns: tuple[str, ...]  # one column per OR branch: what each branch's index would lead with
    text: str
    union_rewrite: str | None


def check(inp: RuleInput) -> Verdict:
    everything = statements(inp)
    timed = int(everything["query_time_s"].is_not_null().sum())
    total_s = db_time_s(everything) or 1.0
    full_scans = timed_full_scan_executions(inp).filter(pl.col("scan_by_plan") | pl.col("scan_by_flag"))
    scans = _without_index_merge(inp, full_scans).filter(~pl.col("index_merge"))
    if scans.height == 0:
        return Verdict(measured=f"no full-scan executions without index merge among {timed:,} timed statement(s)")
    per_class = (
        scans.group_by("fp_id")
        .agg(
            pl.len().alias("calls"),
            pl.col("exec_time_s").sum().alias("total_s"),  # lock wait left out: the plan is judged on execution
            pl.col("exec_time_s").mean().alias("avg_s"),
            known_sum("rows_examined"),
            known_sum("rows_sent"),
        )
        .with_columns((100.0 * pl.col("total_s") / total_s).alias("share_pct"))
        .filter(pl.col("total_s") >= MIN_TOTAL_S, pl.col("share_pct") >= MIN_SHARE_PCT)
        .sort("total_s", descending=True)
        .head(MAX_PARSED_FINGERPRINTS)
    )
    findings = []
    with_or = unreadable = 0
    for row in per_class.iter_rows(named=True):
        runs = scans.filter(pl.col("fp_id") == row["fp_id"]).sort("exec_time_s", "query_time_s", descending=True)
        worst = runs.row(0, named=True)
        try:
            predicate = find_or_predicate(worst["sample_sql"], worst["engine"], worst["scan_table"])
        except sqlnorm.tree_errors():  # one statement too deep to walk: the others are still judged
            unreadable += 1
            continue
        if predicate is None:
            unreadable += worst["sample_sql"] is not None and sqlnorm.refusal(worst["sample_sql"]) is not None
            continue
        with_or += 1
        if len(findings) < MAX_FINDINGS:
            findings.append(_finding(inp, runs, row, predicate))
    measured = (
        f"{scans['fp_id'].n_unique()} fingerprint(s) ran full scans without index merge; {per_class.height} cost at least "
        f"{MIN_TOTAL_S:.0f} s and {MIN_SHARE_PCT:.0f}% of statement time; {with_or} of them OR different columns of one table"
        + (f"; {unreadable} statement(s) too long, too deep or unreadable for the SQL parser, not judged" if unreadable else "")
    )
    return Verdict(findings=findings, measured=measured)


def _without_index_merge(inp: RuleInput, executions: pl.DataFrame) -> pl.DataFrame:
    in_text = pl.col("plan").fill_null("").str.contains(_INDEX_MERGE_TEXT)
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    if nodes is None:
        return executions.with_columns(in_text.alias("index_merge"))
    merge_nodes = nodes.filter(pl.col("node_type").is_in(INDEX_MERGE_NODE_TYPES))
    merged = has_statement(executions, merge_nodes, one_source=from_one_source(inp))
    return executions.with_columns((pl.lit(merged) | in_text).alias("index_merge"))


def _compared_columns(branch: exp.Expression) -> list[exp.Column]:
    from sqlglot import exp

    comparisons = _comparisons()
    columns = []
    for comparison in [branch] if isinstance(branch, comparisons) else list(branch.find_all(*comparisons)):
        for side in (comparison.this, comparison.args.get("expression")):
            if isinstance(side, exp.Column) and side.name:
                columns.append(side)
    return columns


def find_or_predicate(sql: str | None, engine: str | None, scanned_table: str | None) -> OrPredicate | None:
    """The first OR in a WHERE clause whose branches compare different columns of one table (the scanned one when known)."""
    if not sql or not _OR_TOKEN.search(sql):
        return None  # no OR (MySQL also reads || as OR) for sqlglot to find: spares importing and parsing
    from sqlglot import exp

    tree = parse_sql(sql, engine)
    if tree is None:
        return None
    aliases = table_aliases(tree)
    for where in tree.find_all(exp.Where):
        for node in where.find_all(exp.Or):
            if isinstance(node.parent, exp.Or) or (isinstance(node.parent, exp.Paren) and isinstance(node.parent.parent, exp.Or)):
                continue  # inner link of a longer OR chain, judged from its top
            found = _judge_or(tree, node, aliases, engine, scanned_table)
            if found is not None:
                return found
    return None


def _judge_or(tree: exp.Expression, node: exp.Or, aliases: dict[str, str], engine: str | None, scanned_table: str | None) -> OrPredicate | None:
    branches = [branch.unnest() for branch in node.flatten()]
    per_branch: list[set[str]] = []
    leads: list[str] = []
    owners: set[str] = set()
    for branch in branches:
        columns = _compared_columns(branch)
        if not columns:
            return None
        names = set()
        for column in columns:
            owner = column_table(column, aliases)
            if owner is None:
                return None
            owners.add(owner.lower())
            names.add(column.name.lower())
        per_branch.append(names)
        leads.append(columns[0].name.lower())
    if len(owners) != 1:
        return None
    table = next(name for name in aliases.values() if name.lower() in owners)
    if scanned_table and scanned_table.split(".")[-1].lower() != table.lower():
        return None
    everywhere = set.intersection(*per_branch)
    columns = tuple(dict.fromkeys(name for names in per_branch for name in sorted(names)))
    if len(columns) < 2 or everywhere:
        return None
    dialect = SQLGLOT_DIALECT[sqlnorm_dialect(engine)]
    return OrPredicate(
        table=table,
        qualifier=_name_in_statement(tree, table),
        columns=columns,
        branch_columns=tuple(dict.fromkeys(leads)),
        text=node.sql(dialect=dialect),
        union_rewrite=_union_rewrite(tree, node, branches, dialect),
    )


def _name_in_statement(tree: exp.Expression, table: str) -> str:
    """The alias the statement gives ``table`` (hints must use it), else its name."""
    from sqlglot import exp

    for node in tree.find_all(exp.Table):
        if node.name.lower() == table.lower():
            return node.alias_or_name
    return table


def _union_rewrite(tree: exp.Expression, node: exp.Or, branches: list[exp.Expression], dialect: str) -> str | None:
    """One SELECT per OR branch joined with UNION; only for an OR in the WHERE of a plain SELECT (no ORDER BY/LIMIT to carry over)."""
    from sqlglot import exp

    if not isinstance(tree, exp.Select) or tree.args.get("order") or tree.args.get("limit") or node.find_ancestor(exp.Select) is not tree:
        return None
    position = list(tree.find_all(exp.Or)).index(node)
    selects = []
    for branch in branches:
        copy = tree.copy()
        target = list(copy.find_all(exp.Or))[position]
        target.replace(branch.copy())
        selects.append(copy.sql(dialect=dialect))
    return "\nUNION\n".join(selects)


def _shown_indexes(inp: RuleInput, runs: pl.DataFrame, table: str) -> str:
    names = []
    for text in runs["index_names"].drop_nulls().unique().to_list():
        names += [m.group(2) for m in re.finditer(r"([\w$]+):([\w$]+)", text) if m.group(1).lower() == table.lower()]
    nodes = inp.table(t.PUBLIC_PLAN_NODE)
    if nodes is not None:
        used = nodes.join(runs.select("source", "stmt_id"), on=["source", "stmt_id"], how="semi").filter(
            pl.col("relation").str.to_lowercase() == table.lower(), pl.col("index_name").is_not_null()
        )
        names += used["index_name"].unique().to_list()
    return ", ".join(sorted(set(names))) if names else "none"


def _finding(inp: RuleInput, runs: pl.DataFrame, row: dict, predicate: OrPredicate) -> Finding:
    worst = runs.row(0, named=True)
    engine = worst["engine"]
    share = row["share_pct"]
    shown = _shown_indexes(inp, runs, predicate.table)
    columns = ", ".join(predicate.columns)
    evidence = [
        statement_evidence(inp, worst["sample_sql"]),
        Evidence(
            title="OR across columns",
            columns=("table", "columns", "predicate"),
            rows=((predicate.table, columns, short_sql(predicate.text)),),
        ),
        Evidence(
            title="Full-scan executions without index merge",
            columns=("calls", "total", "avg", "share of statement time %", "rows examined", "rows sent", "scanned table"),
            rows=((row["calls"], seconds(row["total_s"]), seconds(row["avg_s"]), round(share, 1), row["rows_examined"], row["rows_sent"], worst["scan_table"] or predicate.table),),
        ),
        Evidence(
            title="Indexes",
            text=(
                f"Indexes on {predicate.table} that the log shows in use: {shown}. "
                f"Whether {', '.join(predicate.branch_columns)} each have their own index is not in the log: check "
                + (f"\\d {predicate.table}" if engine == "postgresql" else f"SHOW INDEX FROM {predicate.table};")
            ),
        ),
    ]
    return Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        severity=Severity.CRITICAL if share >= CRITICAL_SHARE_PCT else Severity.WARNING,
        title=(
            f"OR over {columns} of {predicate.table} runs as a full scan without index merge: {share:.1f}% of database time "
            f"({seconds(row['total_s'])}, {row['calls']:,} execution(s)); threshold {MIN_SHARE_PCT:.0f}% and {MIN_TOTAL_S:.0f} s"
        ),
        subject=f"fingerprint {row['fp_id']}",
        impact={
            "share_pct": round(share, 1),
            "db_time_s": round(row["total_s"], 3),
            "description": (
                f"{row['calls']:,} execution(s) read all of {predicate.table} to evaluate {short_sql(predicate.text)[:200]}, "
                f"{seconds(row['total_s'])} in all ({seconds(row['avg_s'])} each)"
            ),
            "table": predicate.table,
            "columns": list(predicate.columns),
        },
        evidence=tuple(evidence),
        remediation=_remediation(engine, predicate, plan_check.runnable_sample(
            worst["sample_sql"], (inp.metric(t.SQL_SUMMARY_METRIC) or {}).get("literals_shown", False)), inp.metric(t.ENGINE_VERSION_METRIC)),
        sources=tuple(f"{r['source']}:{r['line']}" for r in runs.head(3).iter_rows(named=True)),
    )


def _remediation(engine: str | None, predicate: OrPredicate, sample: str | None = None, version: dict | None = None) -> str:
    """``sample``: the captured statement when it can be printed to run (:func:`plan_check.runnable_sample`), else None."""
    table = predicate.table
    names = [index_name(table, (column,)) for column in predicate.branch_columns]
    if engine == "postgresql":
        lines = [
            "1. Index each OR-ed column (PostgreSQL combines them with a BitmapOr by itself):",
            *(f"   {index_ddl(engine, table, (column,))}" for column in predicate.branch_columns),
            f"2. ANALYZE {table}; then EXPLAIN (ANALYZE) should show BitmapOr over the two Bitmap Index Scans instead of a Seq Scan.",
        ]
    elif engine == "tidb":
        add = ", ".join(f"ADD INDEX {name} ({column})" for name, column in zip(names, predicate.branch_columns))
        hint = f"/*+ USE_INDEX_MERGE({predicate.qualifier}, {', '.join(names)}) */"
        hinted = _hinted(sample, hint)
        lines = [
            f"1. If the columns are not indexed separately: ALTER TABLE {table} {add};",
            "2. Let the optimizer merge them: SET GLOBAL tidb_enable_index_merge = ON;  (default ON from v5.4; check with SHOW VARIABLES LIKE 'tidb_enable_index_merge')",
            *((f"3. Or force it for this statement: {hinted};",
               f"   and pin it for all sessions: CREATE GLOBAL BINDING FOR {sample} USING {hinted};") if hinted else
              (f"3. Or force it for this statement with the hint {hint} after its SELECT,",
               "   and pin it for all sessions with CREATE GLOBAL BINDING FOR the captured statement USING the hinted one.")),
            "4. Check: EXPLAIN ANALYZE shows IndexMerge with one partial IndexRangeScan per column instead of TableFullScan.",
        ]
    else:
        add = ", ".join(f"ADD INDEX {name} ({column})" for name, column in zip(names, predicate.branch_columns))
        lines = [
            f"1. Give each OR-ed column its own index (index merge union needs single-column indexes): ALTER TABLE {table} {add};",
            "2. Make sure index merge is allowed: SELECT @@optimizer_switch;  must contain index_merge=on,index_merge_union=on,index_merge_sort_union=on",
        ]
        if engine != "mariadb" and at_least(version, engine or "mysql", MYSQL_INDEX_MERGE_HINT) is not False:
            hint = f"/*+ INDEX_MERGE({predicate.qualifier} {', '.join(names)}) */"
            hinted = _hinted(sample, hint)
            known = at_least(version, engine or "mysql", MYSQL_INDEX_MERGE_HINT)
            lines.append(f"3. {'MySQL 8.0.20+ can' if not known else 'Or'} force it: {f'{hinted};' if hinted else f'the hint {hint} after the SELECT'}")
        lines.append("Check: EXPLAIN shows type index_merge with 'Using union(...)' instead of type ALL.")
    # With '?' for its literals the rewrite cannot run; on one line, so that it reads as one statement.
    rewrite = predicate.union_rewrite.replace("\nUNION\n", " UNION ") if sample is not None and predicate.union_rewrite else None
    if rewrite and "\n" not in rewrite and len(rewrite) <= plan_check.MAX_PRINTED_SQL_CHARS:
        lines.append("Or rewrite as one indexed query per branch (UNION removes duplicates; UNION ALL is faster when the later branches exclude rows of the earlier ones):")
        lines.append(f"   {rewrite};")
    else:
        lines.append("Or rewrite the OR as one indexed query per branch joined with UNION (UNION ALL when the branches cannot match the same row).")
    return "\n".join(lines)


def _hinted(sample: str | None, hint: str) -> str | None:
    """The sample with ``hint`` after its first SELECT, or None without a sample that starts with SELECT."""
    if sample is None or not re.match(r"\s*SELECT\b", sample, re.I):
        return None
    return re.sub(r"^\s*SELECT\b", f"SELECT {hint}", sample, count=1, flags=re.I)


RULE = Rule(
    id=RULE_ID,
    title="OR across columns of one table runs as a full scan without index merge",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
