"""pg_stat_database as psql prints it: the real snapshots of the shared_buffers pair (their goldens are
``tests/golden/postgresql-stat-database.jsonl``), what they say read by hand, and odd or hostile input.

The pair's files are ``capture/db/pg_stat_database.before`` and ``.after`` of
``fixtures/compare/postgres-pgbench-shared-buffers-{256MB,128kB}.tar.gz`` (``fixtures/compare/README.md``,
copy F: ``psql -X -d postgres -c "SELECT now() AS snapshot_time, * FROM pg_stat_database"``).
"""

from __future__ import annotations

from datetime import datetime, timezone

import polars as pl
import pytest

from dbdiag import tables as T
from dbdiag.detect import detect
from dbdiag.parsers import pg_stat_database, registry
from dbdiag.parsers.base import ParseContext, ParseError
from dbdiag.parsers.kit.psql_tables import read_tables
from tests.parser_cases import case_bytes

PAIR = "pair:postgres-pgbench-shared-buffers-{}/capture/db/pg_stat_database.{}"


def _parse(text: str, tz: str = "UTC"):
    return pg_stat_database.SPEC.parse(text, ParseContext(source="stat", tz=tz))


def _snapshot(size: str, which: str) -> str:
    return case_bytes(PAIR.format(size, which)).decode()


def _bench(size: str, which: str) -> dict:
    table = _parse(_snapshot(size, which)).tables[T.PG_STAT_DATABASE]
    return table.filter(pl.col("datname") == "bench").row(0, named=True)


def test_the_pair_snapshots_read_as_psql_printed_them() -> None:
    """Values checked against the raw lines: bench's row of the 128kB side's last snapshot is
    ``2026-12-04 19:34:53.305627+00 | 16384 | bench | 0 | 20124 | 0 | 420712 | 411360 | ...``."""
    text = _snapshot("128kB", "after")
    result = _parse(text)
    table = result.tables[T.PG_STAT_DATABASE]
    assert result.records == 1 and result.warnings == [] and result.notes == ["layout: aligned; 1 snapshot(s) of 4 database(s)"]
    assert table["datname"].to_list() == [None, "postgres", "bench", "template1", "template0"]  # the shared objects' row first
    line = next(line for line in text.split("\n") if "| bench " in line)
    cells = [cell.strip() for cell in line.split("|")]
    row = table.row(2, named=True)
    assert (row["datid"], row["xact_commit"], row["blks_read"], row["blks_hit"]) == tuple(int(c) for c in (cells[1], cells[4], cells[6], cells[7]))
    assert row["ts"] == datetime.fromisoformat(cells[0]).astimezone(timezone.utc) and row["stats_reset"] is None
    assert row["line"] == text.split("\n").index(line) + 1
    assert dict(table.schema) == T.SCHEMAS[T.PG_STAT_DATABASE]


def test_the_pair_differs_in_the_share_of_blocks_shared_buffers_served() -> None:
    """The point of the pair: 128kB of shared buffers serve about half of bench's block requests, 256MB all but a few."""
    ratios = {}
    for size in ("256MB", "128kB"):
        before, after = _bench(size, "before"), _bench(size, "after")
        hit, read = after["blks_hit"] - before["blks_hit"], after["blks_read"] - before["blks_read"]
        ratios[size] = hit / (hit + read) * 100
    assert ratios["256MB"] > 99.9 and 45 < ratios["128kB"] < 55


def test_every_layout_is_claimed_by_this_parser_alone() -> None:
    for ref in ("fixture:dbconfig/pg15-stat-database.csv", "fixture:dbconfig/pg15-stat-database-A-comma.txt",
                "fixture:dbconfig/pg15-stat-database-A.txt", "fixture:dbconfig/pg15-stat-database-loop.txt",
                PAIR.format("256MB", "before")):
        assert detect(case_bytes(ref), "member", registry()).spec.kind == "postgresql-stat-database", ref


def test_a_loop_of_snapshots_is_dated_by_its_date_lines() -> None:
    result = _parse(case_bytes("fixture:dbconfig/pg15-stat-database-loop.txt").decode())
    table = result.tables[T.PG_STAT_DATABASE].filter(pl.col("datname") == "bench")
    assert result.records == 2 and table["snapshot"].to_list() == [0, 1]
    assert [ts.isoformat() for ts in table["ts"]] == ["2026-12-04T19:36:02+00:00", "2026-12-04T19:36:05+00:00"]
    assert table["xact_commit"].to_list() == [3214, 5873] and table["tup_returned"].null_count() == 2  # not selected


def test_csv_and_unaligned_give_the_rows_and_the_stats_reset() -> None:
    csv = _parse(case_bytes("fixture:dbconfig/pg15-stat-database.csv").decode())
    unaligned = _parse(case_bytes("fixture:dbconfig/pg15-stat-database-A.txt").decode())
    for result in (csv, unaligned):
        bench = result.tables[T.PG_STAT_DATABASE].filter(pl.col("datname") == "bench").row(0, named=True)
        assert bench["stats_reset"] == datetime(2026, 12, 4, 19, 36, 0, 825663, tzinfo=timezone.utc)
        assert (bench["xact_commit"], bench["blks_hit"], bench["session_time_ms"]) == (3214, 49380, 1014.045)
    assert csv.tables[T.PG_STAT_DATABASE]["ts"].null_count() == 0
    assert unaligned.tables[T.PG_STAT_DATABASE]["ts"].null_count() == 5
    assert "the snapshots carry no time (no now() column, no time line before them): no rates" in unaligned.notes


def test_times_without_an_offset_are_read_in_the_zone_and_said_so() -> None:
    text = " snapshot_time | datname | blks_read | blks_hit\n---------------+---------+-----------+----------\n" \
           " 2026-12-04 20:00:00 | bench | 1 | 2\n(1 row)\n"
    result = _parse(text, tz="Europe/Paris")
    assert result.tables[T.PG_STAT_DATABASE]["ts"].to_list() == [datetime(2026, 12, 4, 19, 0, tzinfo=timezone.utc)]
    assert "times have no zone; read as Europe/Paris (--tz)" in result.notes


def test_pg_stat_database_hostile_inputs() -> None:
    """Nothing readable is a ParseError; a row cut short, a value that is no number or a footer that lies is a
    warning, and the rest of the table is read."""
    for text in ("", "\x00\xff binary" * 1000, "datname|blks_read\nbench|3\n", " datname | blks_hit | blks_read\n"):
        with pytest.raises(ParseError):
            _parse(text)
    # a sentence naming the columns (fixtures/dbconfig/README.md quotes a query) is no header
    assert pg_stat_database.detect("`$P -c \"SELECT datname, xact_commit, blks_read, blks_hit FROM pg_stat_database\"`\n", "x") == 0.0
    text = ("datname|blks_read|blks_hit|xact_commit\nbench|3|4|99999999999999999999999\ncut|1\n"
            "x|y|z|1\n" + "w" * 100_000 + "\n(7 rows)\n")
    result = _parse(text)
    table = result.tables[T.PG_STAT_DATABASE]
    assert table.select("datname", "blks_read", "blks_hit", "xact_commit").rows() == [("bench", 3, 4, None), ("x", None, None, 1)]
    assert [w.as_text() for w in result.warnings] == [
        "line 1: footer says 7 rows but 2 were read", "line 2: xact_commit: '99999999999999999999999' is not a number; left null",
        "line 3: 2 cells where the header has 4; row skipped", "line 4: blks_read: 'y' is not a number; left null",
        "line 4: blks_hit: 'z' is not a number; left null", "line 5: 1 cells where the header has 4; row skipped"]


def test_psql_tables_pass_over_other_output_and_keep_a_table_per_header() -> None:
    text = "SELECT 1;\nTime: 0.512 ms\n a | b\n---+---\n 1 | 2\n(1 row)\n\n a,b\n3,4\n"
    tables = read_tables(text, lambda names: names == ["a", "b"], "UTC")
    assert [(t.layout, t.line, t.rows, t.footer) for t in tables] == [
        ("aligned", 3, [(5, ["1", "2"])], 1), ("csv", 8, [(9, ["3", "4"])], None)]
