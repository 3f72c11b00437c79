"""``metrics.pg_stat_database`` (derive/pg_stat_database.py): the buffer hit ratio and commit rate per database,
on the real snapshots of the shared_buffers pair and on the windows one snapshot or a reset gives."""

from __future__ import annotations

import json

import jsonschema
import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.pg_stat_database import pg_stat_database_delta
from dbdiag.parsers import pg_stat_database
from dbdiag.parsers.base import ParseContext
from tests.conftest import REPO
from tests.parser_cases import case_bytes

PAIR = "pair:postgres-pgbench-shared-buffers-{}/capture/db/pg_stat_database.{}"
SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
METRIC_SCHEMA = SCHEMA["properties"]["metrics"]["properties"]["pg_stat_database"]


def _tables(*members: tuple[str, str]) -> dict[str, pl.DataFrame]:
    """The pg_stat_database table of some of the pair's members, as the pipeline concatenates them."""
    frames = []
    for size, which in members:
        source = f"capture/db/pg_stat_database.{which}"
        text = case_bytes(PAIR.format(size, which)).decode()
        frames.append(pg_stat_database.SPEC.parse(text, ParseContext(source=source)).tables[t.PG_STAT_DATABASE])
    return {t.PG_STAT_DATABASE: pl.concat(frames)}


def _database(metric: dict, name: str) -> dict:
    return next(d for d in metric["databases"] if d["datname"] == name)


@pytest.mark.parametrize("size, low, high", [("256MB", 99.9, 100.0), ("128kB", 45.0, 55.0)])
def test_hit_ratio_and_commits_between_the_pair_snapshots(size, low, high) -> None:
    """The after file is listed first: the order comes from the names (.before, .after), not the member order."""
    metric = pg_stat_database_delta(_tables((size, "after"), (size, "before")))
    jsonschema.validate(json.loads(json.dumps(metric, default=str)), METRIC_SCHEMA)
    assert metric["window"] == "between snapshots" and metric["snapshots"] == 2
    assert (metric["first_source"], metric["last_source"]) == ("capture/db/pg_stat_database.before", "capture/db/pg_stat_database.after")
    assert 10.0 < metric["seconds"] < 10.5  # pgbench -T 10 between the two psql calls
    bench = _database(metric, "bench")
    assert metric["databases"][0] is bench  # the busiest first
    before = _tables((size, "before"))[t.PG_STAT_DATABASE].filter(pl.col("datname") == "bench").row(0, named=True)
    after = _tables((size, "after"))[t.PG_STAT_DATABASE].filter(pl.col("datname") == "bench").row(0, named=True)
    hit, read = after["blks_hit"] - before["blks_hit"], after["blks_read"] - before["blks_read"]
    assert (bench["blks_hit"], bench["blks_read"]) == (hit, read)
    assert bench["hit_ratio_pct"] == round(hit / (hit + read) * 100, 2) and low < bench["hit_ratio_pct"] <= high
    commits = after["xact_commit"] - before["xact_commit"]
    assert bench["xact_commit"] == commits and bench["commits_per_s"] == pytest.approx(commits / metric["seconds"], abs=0.02)
    assert _database(metric, "template0")["hit_ratio_pct"] is None  # no block asked for: no ratio
    assert all(d["datname"] is not None for d in metric["databases"])  # the shared objects' row is left out


def test_a_loop_of_snapshots_dated_by_date_lines() -> None:
    """fixtures/dbconfig/pg15-stat-database-loop.txt: two snapshots 3 s apart, bench under pgbench -T 1 between."""
    text = (REPO / "fixtures/dbconfig/pg15-stat-database-loop.txt").read_text(encoding="utf-8")
    tables = pg_stat_database.SPEC.parse(text, ParseContext(source="stat")).tables
    metric = pg_stat_database_delta(tables)
    jsonschema.validate(json.loads(json.dumps(metric, default=str)), METRIC_SCHEMA)
    assert (metric["window"], metric["snapshots"], metric["seconds"]) == ("between snapshots", 2, 3.0)
    bench = metric["databases"][0]
    assert bench["datname"] == "bench" and bench["window"] == "between snapshots"  # its stats_reset did not change
    assert (bench["blks_hit"], bench["blks_read"], bench["xact_commit"]) == (90242 - 49380, 42 - 23, 5873 - 3214)
    assert bench["hit_ratio_pct"] == round(40862 / (40862 + 19) * 100, 2) and bench["commits_per_s"] == round(2659 / 3, 2)
    assert _database(metric, "template0")["hit_ratio_pct"] is None  # no block asked for: no ratio
    assert all(d["datname"] is not None for d in metric["databases"])  # the shared objects' row is left out


def test_one_snapshot_counts_since_stats_reset_and_says_so() -> None:
    metric = pg_stat_database_delta(_tables(("128kB", "after")))
    assert metric["window"] == "since stats_reset" and metric["seconds"] is None and metric["from"] is None
    assert metric["note"].startswith("one snapshot: counts since stats_reset")
    bench = _database(metric, "bench")
    assert bench["window"] == "since stats_reset" and bench["commits_per_s"] is None  # stats_reset is null: since when?
    assert bench["blks_hit"] == 411360 and bench["blks_read"] == 420712  # the after file's own values


def test_a_reset_between_snapshots_and_snapshots_without_times() -> None:
    """A database whose counters went back was reset: its counts are since its stats_reset (rates over the time
    since it); without times the growth is counted and no rate given."""
    frame = pl.DataFrame({
        "snapshot": [0, 0, 0, 0], "datname": ["a", "b", "a", "b"], "blks_hit": [500, 900, 800, 90], "blks_read": [100, 100, 100, 10],
        "xact_commit": [10, 50, 40, 5], "source": ["s.0", "s.0", "s.1", "s.1"],
        "ts": ["2026-12-04 10:00:00+00:00", "2026-12-04 10:00:00+00:00", "2026-12-04 10:00:10+00:00", "2026-12-04 10:00:10+00:00"],
        "stats_reset": [None, None, None, "2026-12-04 10:00:05+00:00"],
    }).with_columns(pl.col("ts", "stats_reset").str.to_datetime(time_zone="UTC"))
    metric = pg_stat_database_delta({t.PG_STAT_DATABASE: t.conform(t.PG_STAT_DATABASE, frame)})
    a, b = _database(metric, "a"), _database(metric, "b")
    assert (a["window"], a["blks_hit"], a["hit_ratio_pct"], a["commits_per_s"]) == ("between snapshots", 300, 100.0, 3.0)
    assert (b["window"], b["blks_hit"], b["hit_ratio_pct"], b["seconds"], b["commits_per_s"]) == ("since stats_reset", 90, 90.0, 5.0, 1.0)
    untimed = pg_stat_database_delta({t.PG_STAT_DATABASE: t.conform(t.PG_STAT_DATABASE, frame.drop("ts", "stats_reset"))})
    assert untimed["seconds"] is None and _database(untimed, "a")["commits_per_s"] is None
    assert untimed["note"] == "the snapshots carry no time: counts over the capture, no rates"
    assert pg_stat_database_delta({}) is None


def test_the_metric_is_in_the_report_of_the_pair() -> None:
    """In the JSON (valid against its schema) and as a line per busy database in the HTML and the Markdown."""
    from dbdiag.pipeline import Options, analyze
    from dbdiag.report import build_document, render_html, render_markdown

    document = build_document(analyze(REPO / "fixtures/compare/postgres-pgbench-shared-buffers-128kB.tar.gz", Options()))
    jsonschema.validate(document, SCHEMA)
    assert _database(document["metrics"]["pg_stat_database"], "bench")["hit_ratio_pct"] == 50.85
    markdown = render_markdown(document)
    assert "| bench | 408,615 | 395,029 | 50.85 | 20,092 | 1,988 | between snapshots |" in markdown
    assert "| template0 |" not in markdown  # asked for no block, committed nothing
    html = render_html(document)
    assert '<h2 id="buffer-cache">' in html and "<td>bench</td>" in html
