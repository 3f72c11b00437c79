"""``metrics.pg_stat_database`` (derive/pg_stat_database.py): the buffer hit ratio and commit rate per database,
on real psql snapshots and on the windows a reset or missing times give."""

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

SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
METRIC_SCHEMA = SCHEMA["properties"]["metrics"]["properties"]["pg_stat_database"]


def _database(metric: dict, name: str) -> dict:
    return next(d for d in metric["databases"] if d["datname"] == name)


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
