"""derive.sql fingerprints big tables by class numbers and groups the metrics by them: the results are
the row-by-row fingerprints and the metrics grouped by the texts themselves."""

from __future__ import annotations

import random
import re
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from dbdiag import sqlnorm
from dbdiag import tables as t
from dbdiag.derive.sql import (
    PROFILE_LIMIT,
    TIMELINE_BUCKETS,
    TIMELINE_TOP,
    SqlOptions,
    _classes,
    _latency_aggregations,
    derive_sql,
    fingerprinted,
)
from dbdiag.units import SAMPLE_CHARS

TEXTS = [
    "SELECT c FROM sbtest1 WHERE id=42",
    "SELECT c FROM sbtest1 WHERE id=7",
    "SELECT c FROM sbtest1 WHERE id=42",
    "",
    "UPDATE t SET a = 'x' WHERE b IN (1, 2, 3)",
    "select c from sbtest1 where id = 99;",
    "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
    "UPDATE t SET a = 'x' WHERE b IN (1, 2, 3)",
]


def _expected(texts: list[str], dialect: str) -> list[tuple[str, str]]:
    return [(sqlnorm.fingerprint(text, dialect), sqlnorm.fingerprint_id(sqlnorm.fingerprint(text, dialect))) for text in texts]


@pytest.mark.parametrize("dialect", ["mysql", "postgresql"])
def test_classes_match_row_by_row_fingerprints(dialect: str) -> None:
    classes = _classes(pl.Series(TEXTS, dtype=pl.String), dialect)
    assert classes.columns == ["fingerprint", "fp_id"]
    assert list(classes.iter_rows()) == _expected(TEXTS, dialect)


def test_classes_survive_a_hash_collision(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every text hashing to the same value: the texts themselves must decide.
    monkeypatch.setattr(pl.Series, "hash", lambda self, *args, **kwargs: pl.Series([0] * self.len(), dtype=pl.UInt64))
    classes = _classes(pl.Series(TEXTS, dtype=pl.String), "mysql")
    assert list(classes.iter_rows()) == _expected(TEXTS, "mysql")
    assert classes["fp_id"].n_unique() > 1


def test_classes_of_no_text() -> None:
    assert _classes(pl.Series([], dtype=pl.String), "mysql").height == 0


# --- the metrics: grouped by class numbers, the same as grouped by the texts -------------------


def _statements(rows: int = 3000, seed: int = 9) -> pl.DataFrame:
    """Two engines, more classes than the profile shows, nulls everywhere a log can leave them."""
    rng = random.Random(seed)
    start = datetime(2024, 5, 14, 2, 0, tzinfo=timezone.utc)
    words = ["".join(rng.choice("abcdefgh") for _ in range(5)) for _ in range(70)]
    data = []
    for index in range(rows):
        word = rng.choice(words[: 10 + index % 60])
        engine = "postgresql" if rng.random() < 0.3 else "mariadb"
        planned = rng.random()
        data.append(
            {
                "stmt_id": index,
                "engine": engine,
                "sql": rng.choice([
                    f"SELECT {word} FROM t{rng.randint(1, 3)} WHERE id = {rng.randint(1, 99)}", f"UPDATE {word} SET a = 'x{index}'", "BEGIN",
                    f"SELECT {word}, '{'y' * 3000}' FROM t WHERE  id = {index}", rng.choice(["DO SLEEP(2)", "select pg_sleep(1.5);", "SELECT SLEEP(1) AS s"]),
                ]),
                "query_time_s": None if rng.random() < 0.05 else round(rng.random() * 2, rng.choice([1, 6])),
                "end_ts": None if rng.random() < 0.02 else start + timedelta(seconds=rng.randint(0, 7200)),
                "plan_digest": rng.choice(["d1", "d2", None]) if planned < 0.3 else None,
                "plan_signature": rng.choice([f"{word}:ALL", f"{word}:ref(k)"]) if planned < 0.6 else None,
                "plan": f"Seq Scan on {word}  (cost=0.00..{index}.00 rows=1) Filter: (id = {index})" if 0.1 < planned < 0.8 else None,
                "db": rng.choice(["sbtest", "shop", None]),
                "user": "app",
                "rows_examined": rng.choice([None, rng.randint(0, 1000)]),
                "rows_sent": rng.randint(0, 10),
                "lock_time_s": rng.random() / 100,
                "full_scan": rng.choice([True, False, None]),
                "success": rng.choice([True, True, False, None]),
                "digest": rng.choice([None, "abc"]),
                "source": "db/slow.log",
                "line": index * 20,
            }
        )
    return t.conform(t.STATEMENT, pl.DataFrame(data, infer_schema_length=None))


PLAIN_SLEEP = re.compile(r"\s*(select|do)\s+(pg_)?sleep(_for|_until)?\s*\([^()]*\)(\s*(as\s+)?\w+)?(\s+from\s+dual)?\s*;?\s*", re.I)


def _plain_short(sql: str) -> str:
    text = " ".join(sql.split())
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"


def _plain_metrics(frame: pl.DataFrame, options: SqlOptions) -> dict:
    """The metrics computed the plain way: grouped by the fp_id and plan_key texts; sleep statements apart."""
    sleeping = pl.Series([bool(PLAIN_SLEEP.fullmatch(sql or "")) for sql in frame["sql"].to_list()])
    assert frame["statement_class"].to_list() == ["sleep" if s else "work" for s in sleeping]
    assert frame["exec_time_s"].to_list() == [
        None if q is None else max(0.0, q - (lock or 0.0)) for q, lock in frame.select("query_time_s", "lock_time_s").iter_rows()
    ]
    sleeps, frame_all, frame = frame.filter(sleeping), frame, frame.filter(~sleeping)
    timed = work = frame.filter(pl.col("query_time_s").is_not_null())
    db_time_s = float(timed["query_time_s"].sum()) or 1.0
    per_class = (
        timed.group_by("fp_id")
        .agg(
            pl.col("fingerprint").first(),
            *_latency_aggregations(),
            pl.col("rows_examined").sum(),
            pl.col("rows_sent").sum(),
            pl.col("rows_affected").sum(),
            pl.col("lock_time_s").sum(),
            pl.col("exec_time_s").sum(),
            pl.col("engine").drop_nulls().unique().sort().alias("engines"),
            pl.col("db").drop_nulls().unique().sort().head(5).alias("dbs"),
            pl.col("user").drop_nulls().unique().sort().head(5).alias("users"),
            pl.col("digest").drop_nulls().first().alias("engine_digest"),
            pl.col("full_scan").fill_null(False).sum().alias("full_scans"),
            (~pl.col("success").fill_null(True)).sum().alias("errors"),
        )
        .with_columns((100.0 * pl.col("total_time_s") / db_time_s).alias("share_of_db_time_pct"))
        .sort("total_time_s", "fp_id", descending=[True, False])
        .head(PROFILE_LIMIT)
    )
    profile = []
    for row in per_class.to_dicts():
        rows = timed.filter(pl.col("fp_id") == row["fp_id"])
        worst = rows.row(rows["query_time_s"].arg_max(), named=True)
        row["worst_sample"] = {
            "sql": _plain_short(worst["sample_sql"]), "query_time_s": worst["query_time_s"], "at": worst["end_ts"], "where": f"{worst['source']}:{worst['line']}",
        }  # fmt: skip
        row["plans"] = (
            rows.filter(pl.col("plan_key").is_not_null())
            .group_by("plan_key")
            .agg(*_latency_aggregations(), pl.col("plan").drop_nulls().first())
            .sort("first_seen", "plan_key")
            .to_dicts()
        )
        profile.append(row)
    top = [row["fp_id"] for row in profile[:TIMELINE_TOP]]
    timed = timed.filter(pl.col("end_ts").is_not_null(), pl.col("fp_id").is_in(top))
    span_s = max((timed["end_ts"].max() - timed["end_ts"].min()).total_seconds(), 1.0)
    bucketed = (
        timed.with_columns(pl.col("end_ts").dt.truncate(f"{max(1, int(span_s // TIMELINE_BUCKETS) + 1)}s").alias("bucket"))
        .group_by("fp_id", "bucket")
        .agg(
            pl.len().alias("calls"),
            pl.col("query_time_s").quantile(0.5, "linear").alias("p50_s"),
            pl.col("query_time_s").quantile(0.99, "linear").alias("p99_s"),
        )
        .sort("fp_id", "bucket")
    )
    timeline = {fp_id: group.drop("fp_id").to_dicts() for (fp_id,), group in bucketed.group_by("fp_id", maintain_order=True)}
    sleep_classes = sleeps.group_by("fp_id").agg(pl.col("fingerprint").first(), pl.len().alias("calls"), pl.col("query_time_s").sum().alias("time_s"))
    summary = {
        "statements": frame_all.height,
        "timed_statements": work.height,
        "fingerprints": frame_all["fp_id"].n_unique(),
        "db_time_s": float(work["query_time_s"].sum()),
        "lock_time_s": float(work["lock_time_s"].sum()),
        "exec_time_s": float(work["exec_time_s"].sum()),
        "sleep": {
            "statements": sleeps.height,
            "time_s": float(sleeps["query_time_s"].sum()),
            "fingerprints": sleep_classes.sort("time_s", "fp_id", descending=[True, False]).to_dicts(),
        },
        "engines": sorted(frame_all["engine"].drop_nulls().unique().to_list()),
        "first_seen": frame_all["end_ts"].min(),
        "last_seen": frame_all["end_ts"].max(),
        "literals": "shown (--show-literals)" if options.show_literals else "replaced by placeholders",
        "literals_shown": options.show_literals,
    }
    return {"sql_profile": profile, "sql_summary": summary, "sql_timeline": timeline}


def _plain_redaction(statements: pl.DataFrame, frame: pl.DataFrame) -> pl.DataFrame:
    """``sql`` and ``plan`` of each row (by stmt_id), redacted the plain way: the slowest row of its class,
    and of its (class, plan_key) among the rows with a plan, stands for it."""
    raw = statements.select("stmt_id", raw_sql="sql", raw_plan="plan")
    rows = frame.select("stmt_id", "fp_id", "plan_key", "engine", pl.col("query_time_s").fill_null(-1.0)).join(raw, on="stmt_id", maintain_order="left")
    expected = []
    for (_,), group in rows.group_by("fp_id"):
        slowest = group.row(group["query_time_s"].arg_max(), named=True)
        dialect = "postgresql" if slowest["engine"] == "postgresql" else "mysql"
        sql = sqlnorm.redact_literals(slowest["raw_sql"] or "", dialect)
        planned = group.filter(pl.col("raw_plan").is_not_null())
        plans = {}
        for (plan_key,), members in planned.group_by("plan_key"):
            plans[plan_key] = sqlnorm.redact_plan(members.row(members["query_time_s"].arg_max(), named=True)["raw_plan"])
        for row in group.iter_rows(named=True):
            expected.append((row["stmt_id"], sql, plans[row["plan_key"]] if row["raw_plan"] is not None else None))
    return pl.DataFrame(expected, schema=["stmt_id", "sql", "plan"], orient="row").sort("stmt_id")


@pytest.mark.parametrize("show_literals", [False, True])
@pytest.mark.parametrize("collision", [False, True])
def test_metrics_are_the_plain_text_grouped_ones(show_literals: bool, collision: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if collision:  # every (class, plan_key) pair hashing to the same value: the pairs themselves must decide
        monkeypatch.setattr(pl.DataFrame, "hash_rows", lambda self, *args, **kwargs: pl.Series([0] * self.height, dtype=pl.UInt64))
    statements = _statements()
    options = SqlOptions(show_literals=show_literals)
    frame, metrics = derive_sql({t.STATEMENT: statements}, options)
    assert frame.columns == fingerprinted(statements, options).columns
    assert metrics == _plain_metrics(frame, options)
    assert len(metrics["sql_profile"]) == PROFILE_LIMIT < frame["fp_id"].n_unique()
    assert sum(len(row["plans"]) for row in metrics["sql_profile"]) > PROFILE_LIMIT
    assert len(metrics["sql_timeline"]) == TIMELINE_TOP
    if not show_literals:
        assert_frame_equal(frame.select("stmt_id", "sql", "plan").sort("stmt_id"), _plain_redaction(statements, frame))
        assert frame["sql"].equals(frame["sample_sql"])
