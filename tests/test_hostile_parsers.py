"""Hostile members of the SQL-table exports, PostgreSQL logs and JSON parsers: bounded memory, linear
time, one-line warnings or errors naming the file, and the good mpstat beside each bad member read.

Each case ran out of memory, took seconds to minutes, or ended in a traceback before (issue 11); each
is run through the real CLI (``python -m dbdiag``) under a 3 GB address-space cap, or, for the
plan-reading helpers, called directly.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dbdiag.parsers import pg_stderr
from tests.conftest import CORPUS, REPO
from tests.fuzz_mutations import extreme_numbers
from tests.test_sql_hostile import pg_log
from tests.test_hostile_values import GOOD_MPSTAT, _capped, member, run_cli, warnings_of

STATEMENTS_TSV = REPO / "fixtures" / "dashboards" / "tidb-statements__cluster_statements_summary_history.tsv"


# ---- SQL table exports (TiDB SLOW_QUERY, statements_summary) ------------------------------------


def test_export_with_a_header_of_a_million_columns_is_refused_in_one_line(tmp_path: Path):
    """A 2 MB header line of tabs: 1.9 GB RSS, then SIGABRT (a polars column per field)."""
    header, *rows = STATEMENTS_TSV.read_text().split("\n")
    text = "\n".join([header + "\tc" * 1_000_000, *rows])
    report = run_cli(tmp_path, "statements.tsv", text.encode(), exits=(3,))
    record = member(report, "statements.tsv")
    assert record["kind"] == "tidb-dashboard-statements" and record["records"] == 0
    assert record["error"] == "header has more than 1000 columns: not an export of a SQL table"


def test_export_with_a_row_of_a_million_fields_reads_the_table(tmp_path: Path):
    header, first, *rows = STATEMENTS_TSV.read_text().split("\n")
    text = "\n".join([header, first + "\tz" * 1_000_000, *rows])
    report = run_cli(tmp_path, "statements.tsv", text.encode())
    assert member(report, "statements.tsv")["records"] == 3


def test_export_with_a_first_seen_in_year_0_drops_that_row_with_a_warning(tmp_path: Path):
    """polars' minimum of a year-0 Datetime is no Python datetime: a ValueError lost the member."""
    text = STATEMENTS_TSV.read_text().replace("2024-05-14 10:00:01", "0000-05-14 10:00:01")
    report = run_cli(tmp_path, "statements.tsv", text.encode())
    assert warnings_of(report, "statements.tsv") == "time 0000-05-14 10:00:01 out of range (1970 to 2200): statement_summary row dropped"
    assert member(report, "statements.tsv")["time_range"] == ["2024-05-14 10:00:02+00:00", "2024-05-14 10:59:59+00:00"]



# ---- PostgreSQL stderr logs -----------------------------------------------------------------------

FORTY_DIGITS = "1234567890123456789012345678901234567890"


def test_forty_digit_numbers_in_log_line_prefixes_are_linear(tmp_path: Path):
    """The fuzzer's 40-digit numbers in a logplex log (times, sqlstate, line numbers): the prefix
    shapes became regexes of adjacent number parts, and checking them on 5 lines took 30 s of CPU."""
    lines = gzip.decompress((CORPUS / "postgres" / "pgbadger__logplex.gz").read_bytes()).split(b"\n")
    text = extreme_numbers(b"\n".join(lines[:40]) + b"\n", FORTY_DIGITS, 0.3, 1)
    started = time.perf_counter()
    report = run_cli(tmp_path, "postgresql.log", text)
    assert time.perf_counter() - started < 20.0  # about 1.5 s; before: 190 s for the whole file
    assert member(report, "postgresql.log")["kind"] == "postgresql-log"
    # a 40-digit duration failed the cast to Int64 microseconds and the member was lost
    assert "1 durations not read (not a number, negative or over 366 days): no statement row from them" in warnings_of(
        report, "postgresql.log")
    assert member(report, "postgresql.log")["records"] == 4


def test_pieces_of_a_big_log_start_at_the_same_entries_whatever_the_window(monkeypatch: pytest.MonkeyPatch):
    """Where a piece starts is found by polars a window at a time (Python's regex search backtracked
    on the prefix regex at every line); a line cut by the window is read again from its start."""
    entry = "2024-01-01 00:00:00.000 UTC [7] LOG:  duration: 1.000 ms  statement: SELECT 1\n\tFROM t\n"
    text = "".join(entry.replace("[7]", f"[{n}]") for n in range(2000))
    prefix = pg_stderr.infer_prefix(text.split("\n")[:100])
    monkeypatch.setattr(pg_stderr, "CHUNK_CHARS", 5000)
    wide = pg_stderr._chunk_bounds(text, len(text), prefix, None)
    monkeypatch.setattr(pg_stderr, "BOUNDARY_WINDOW_CHARS", 57)
    assert pg_stderr._chunk_bounds(text, len(text), prefix, None) == wide and len(wide) > 20
    assert all(text[start - 1] == "\n" and text[start:].startswith("2024-01-01") for start, _ in wide[1:])
    assert all(end - start >= 5000 for start, end in wide[:-1])


# ---- JSON nested past the recursion limit ----------------------------------------------------------

DEEP_JSON_LEVELS = 100_000


def test_json_members_nested_100k_deep_are_refused_in_one_line_each(tmp_path: Path):
    """``[[[[...`` 100,000 deep: a RecursionError reported as "parser failed" (mpstat JSON), or in
    words of each parser's own; now one message from the shared reader for every JSON parser."""
    deep = "[" * DEEP_JSON_LEVELS + "]" * DEEP_JSON_LEVELS
    members = {
        "mpstat.json": '{"sysstat": {"hosts": ' + deep + "}}",
        "prometheus.json": '{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":' + deep + "}]}}",
        "statements.json": '[{"digest_text":"select ?","exec_count":1,"sum_latency":' + deep + "}]",
    }
    capture = tmp_path / "capture"
    capture.mkdir()
    for name, text in members.items():
        (capture / name).write_text(text)
    (capture / "mpstat.txt").write_bytes(GOOD_MPSTAT.read_bytes())
    out = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", str(out)],
                          capture_output=True, text=True, timeout=120, preexec_fn=_capped, check=False)
    assert done.returncode == 3 and "Traceback" not in done.stderr, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert member(report, "mpstat.txt")["records"] > 0
    for name in members:
        assert member(report, name)["error"] == "JSON nested deeper than 1000 levels (Python's limit): not read", name


# ---- PostgreSQL plan depth ---------------------------------------------------------------------------


def test_text_plan_indented_600k_columns_is_cut_with_a_warning(tmp_path: Path):
    """A node indented 600,000 columns is 100,000 levels deep: stale-statistics walked it level by level."""
    deep_node = " " * 600_000 + "->  Seq Scan on u  (cost=0.00..1.00 rows=1 width=4) (actual time=0.01..0.02 rows=1 loops=1)"
    plan = "Seq Scan on t  (cost=0.00..35.50 rows=10 width=4) (actual time=0.01..9.2 rows=10 loops=1)\n" + deep_node
    log = pg_log(["SELECT a FROM t WHERE b = 1"], [plan])
    started = time.perf_counter()
    report = run_cli(tmp_path, "postgresql.log", log.encode())
    assert time.perf_counter() - started < 30.0  # about 3 s
    assert "1 plans nested deeper than 1000 levels (the deepest 100001): their nodes not read, the plans kept as text" in (
        warnings_of(report, "postgresql.log"))
    assert all(rule["status"] != "errored" for rule in report["rules"])
