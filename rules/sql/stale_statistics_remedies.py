"""stale-statistics, the remediation: the statements that refresh (or pin) a table's statistics on each engine,
with the columns the misestimated filters name."""

from __future__ import annotations

import re

import polars as pl

from dbdiag import sqlnorm
from dbdiag.rules.sql import cause as cause_module
from dbdiag.rules.sql.full_table_scan import sqlnorm_dialect, suggest_index

def filter_columns(nodes: pl.DataFrame, engine: str | None) -> list[str]:
    """Column names in the misestimated nodes' filter text (PostgreSQL ``(status = 1)``, TiDB ``eq(test.t.status, 1)``)."""
    from sqlglot import exp

    names: list[str] = []
    for text in nodes["filter"].drop_nulls().unique(maintain_order=True).to_list() if nodes.height else []:
        tree = sqlnorm.parse_statement(text, sqlnorm_dialect(engine))
        if tree is None:
            continue  # too long, too deep or unreadable: the other filters are still read
        try:
            columns = [column.name for column in tree.find_all(exp.Column) if column.name]
        except sqlnorm.tree_errors():
            continue
        names += [name for name in dict.fromkeys(columns) if name not in names]
    return names


def where_columns(statement: dict, table: str) -> list[str]:
    suggestion = suggest_index(statement["sample_sql"], statement["engine"], table)
    return list(suggestion.columns) if suggestion else []


def remediation(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str], cause: dict | None = None,
                 changes: pl.DataFrame | None = None, sample_sql: str | None = None) -> str:
    text = _remediation_steps(engine, table, columns, index, kinds)
    if cause is None:
        return text
    undo = cause_module.undo(engine, cause, changes if changes is not None else pl.DataFrame(), sample_sql)
    lead = f"The plans went wrong after {cause_module.label(cause)} ({cause_module.where(cause)})."
    if undo and not all("Collect statistics" in line for line in undo):
        return "\n".join([lead, *undo, text])
    return "\n".join([f"{lead} Step 1 collects statistics on the data as it is now.", text])


def _remediation_steps(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str]) -> str:
    """The numbered steps; steps that need a column are left out when none is known (no placeholder to fill in)."""
    steps = _steps(engine, table, columns, index, kinds).splitlines()
    numbers = iter(range(1, len(steps) + 1))
    return "\n".join(re.sub(r"^\d+\. ", lambda _: f"{next(numbers)}. ", line) for line in steps)


def _steps(engine: str | None, table: str, columns: list[str], index: str | None, kinds: set[str]) -> str:
    if engine == "tidb":
        lines = [
            f"1. Collect statistics while {table} holds representative data: ANALYZE TABLE {table};",
            f"2. Check them: SHOW STATS_META WHERE table_name = '{table}';  SHOW STATS_HEALTHY WHERE table_name = '{table}';",
            f"3. If {table} is a queue (filled and drained), statistics taken while it is empty mislead every plan: after step 1, "
            f"LOCK STATS {table};  (TiDB 6.5+) so auto-analyze cannot retake them at the wrong moment.",
            "4. Make sure auto-analyze keeps up: SHOW VARIABLES LIKE 'tidb_enable_auto_analyze'; SHOW VARIABLES LIKE 'tidb_auto_analyze%';"
            " (tidb_auto_analyze_ratio, default 0.5; tidb_auto_analyze_start_time / end_time window).",
        ]
        if "pseudo" in kinds:
            lines.append(f"Pseudo statistics mean the optimizer guessed: SHOW ANALYZE STATUS WHERE table_name = '{table}'; shows whether analyze ever ran or failed.")
        return "\n".join(lines)
    if engine == "postgresql":
        targets = " ".join(f"ALTER TABLE {table} ALTER COLUMN {c} SET STATISTICS 1000;" for c in columns)
        lines = [
            f"1. Refresh the statistics: ANALYZE {table};",
            *([f"2. If estimates stay off for skewed columns, sample more: {targets} ANALYZE {table};"] if columns else []),
            f"3. Keep them fresh on a fast-changing table: ALTER TABLE {table} SET (autovacuum_analyze_scale_factor = 0.02);",
        ]
        if len(columns) > 1:
            lines.append(
                f"4. The filter combines correlated columns: CREATE STATISTICS {table}_{'_'.join(columns[:3])}_stats (dependencies, ndistinct, mcv) "
                f"ON {', '.join(columns[:3])} FROM {table}; ANALYZE {table};"
            )
        lines.append("Check with EXPLAIN (ANALYZE) that estimated and actual rows now agree within 10x.")
        return "\n".join(lines)
    if engine == "mariadb":
        indexes = f" INDEXES ({index})" if index else " INDEXES ()"  # the grammar wants COLUMNS (...) and INDEXES (...) together
        persistent = f"FOR COLUMNS ({', '.join(columns)}){indexes}" if columns else "FOR ALL"
        return "\n".join(
            [
                f"1. Collect engine-independent statistics with histograms: ANALYZE TABLE {table} PERSISTENT {persistent};",
                "2. Make histograms precise enough: SET GLOBAL histogram_size = 254; (and histogram_type = DOUBLE_PREC_HB, or JSON_HB on 10.8+);"
                " SET GLOBAL use_stat_tables = 'preferably_for_queries';",
                f"3. Refresh InnoDB statistics too: ANALYZE TABLE {table};",
                "Check with ANALYZE FORMAT=JSON <statement> that rows and r_rows now agree within 10x.",
            ]
        )
    return "\n".join(
        [
            f"1. Refresh the statistics: ANALYZE TABLE {table};",
            *([f"2. For skewed columns (MySQL 8.0+): ANALYZE TABLE {table} UPDATE HISTOGRAM ON {', '.join(columns)} WITH 1024 BUCKETS;"] if columns else []),
            f"3. Sample more pages if estimates stay off: ALTER TABLE {table} STATS_SAMPLE_PAGES = 200; ANALYZE TABLE {table};",
            "Check with EXPLAIN ANALYZE that estimated and actual rows now agree within 10x.",
        ]
    )
