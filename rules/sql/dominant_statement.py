"""One statement holds more than half of the database time.

What it detects:
    A single SQL fingerprint whose executions add up to more than half of all statement time
    in the capture.

Why it matters:
    When one statement dominates, it is where tuning pays first: a better index, a cached
    result or fewer calls from the application move the whole server. It is information, not a
    fault: a load test that runs one transaction, or a batch job, looks like this too (and a
    test that measures one hot statement says little about production).

How it is detected:
    Input: ``statement`` rows with durations, fingerprinted; sleep statements (``SELECT SLEEP``,
    ``pg_sleep``) are not statement time. It fires (info) when the heaviest fingerprint's execution
    time (query time minus lock wait: a statement that mostly waited is lock-wait's case) is more
    than DOMINANT_SHARE_PCT = 50% of all statement time and the capture has at least
    MIN_STATEMENTS = 20 timed statements.

Remediation:
    Look at this statement first: its plan as it runs, in the engine's syntax (MariaDB ``ANALYZE
    FORMAT=JSON``, MySQL 8.0.18+ / TiDB ``EXPLAIN ANALYZE``, PostgreSQL ``EXPLAIN (ANALYZE, BUFFERS)``;
    the captured query when its literals are shown, see plan_check), the indexes on the
    columns it filters on, how often the application calls it and whether calls can be batched
    or cached. If the capture is a load test, check that it mixes the transactions production
    runs.

References:
    pt-query-digest's profile ("Response time" share per class); Oracle ADDM's "SQL statements
    consuming significant database time".
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Verdict
from dbdiag.rules.sql import plan_check
from dbdiag.rules.sql.common import db_time_s, exec_time_column, short_sql, statements
from dbdiag.units import seconds

RULE_ID = "dominant-statement"

DOMINANT_SHARE_PCT = 50.0
MIN_STATEMENTS = 20


def check(inp: RuleInput) -> Verdict:
    frame = statements(inp).filter(pl.col("query_time_s").is_not_null())
    total_s = db_time_s(frame)
    if frame.height < MIN_STATEMENTS or total_s <= 0:
        return Verdict(measured=f"{frame.height} timed statement(s); judged from {MIN_STATEMENTS}")
    executing = pl.col(exec_time_column(frame))
    per_class = (
        frame.group_by("fp_id")
        .agg(pl.len().alias("calls"), executing.sum().alias("total_s"), executing.mean().alias("avg_s"))
        .sort("total_s", "fp_id", descending=[True, False])
    )
    top = per_class.row(0, named=True)
    share_pct = 100.0 * top["total_s"] / total_s
    measured = f"heaviest fingerprint {top['fp_id']} holds {share_pct:.1f}% of {seconds(total_s)} (fires above {DOMINANT_SHARE_PCT:.0f}%)"
    if share_pct <= DOMINANT_SHARE_PCT:
        return Verdict(measured=measured)
    sample = frame.filter(pl.col("fp_id") == top["fp_id"]).sort("query_time_s", descending=True).row(0, named=True)
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.STATEMENT,
        severity=Severity.INFO,
        title=f"One statement holds {share_pct:.0f}% of database time; threshold {DOMINANT_SHARE_PCT:.0f}%",
        subject=f"fingerprint {top['fp_id']}",
        impact={
            "share_pct": round(share_pct, 1),
            "db_time_s": round(top["total_s"], 3),
            "share_of_db_time": round(share_pct / 100.0, 4),
            "description": f"{top['calls']:,} calls, {seconds(top['total_s'])} executing of {seconds(total_s)} statement time, {seconds(top['avg_s'])} on average",
        },
        evidence=(
            Evidence(title="Statement", text=short_sql(sample["sample_sql"])),
            Evidence(
                title="Heaviest fingerprints",
                columns=("fingerprint id", "calls", "total", "share %", "avg"),
                rows=tuple(
                    (row["fp_id"], row["calls"], seconds(row["total_s"]), round(100.0 * row["total_s"] / total_s, 1), seconds(row["avg_s"]))
                    for row in per_class.head(5).iter_rows(named=True)
                ),
            ),
        ),
        remediation=_remediation(inp, sample),
        sources=(f"{sample['source']}:{sample['line']}",),
    )
    return Verdict(findings=[finding], measured=measured)


def _remediation(inp: RuleInput, sample: dict) -> str:
    engine = sample.get("engine")
    check_plan = plan_check.plan_check(engine, inp.metric(t.ENGINE_VERSION_METRIC), sample["sample_sql"],
                                       (inp.metric(t.SQL_SUMMARY_METRIC) or {}).get("literals_shown", False))
    return (
        f"Start tuning here. See its plan as it runs: {check_plan}\n"
        "Check indexes on the columns it filters and joins on, and whether the application can call it less often "
        "(batching, caching). If this capture is a load test, make sure it mixes the transactions production runs."
    )


RULE = Rule(
    id=RULE_ID,
    title="One statement holds more than half of the database time",
    area="sql",
    requires=((t.FINGERPRINTED_STATEMENT,),),
    check=check,
    doc=__doc__ or "",
)
