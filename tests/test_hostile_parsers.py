"""Hostile members of the SQL-table exports, PostgreSQL logs and JSON parsers: bounded memory, linear
time, one-line warnings or errors naming the file, and the good mpstat beside each bad member read.

Each case ran out of memory, took seconds to minutes, or ended in a traceback before (issue 11); each
is run through the real CLI (``python -m dbdiag``) under a 3 GB address-space cap, or, for the
plan-reading helpers, called directly.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO
from tests.test_hostile_values import GOOD_MPSTAT, _capped, member, warnings_of

STATEMENTS_TSV = REPO / "fixtures" / "dashboards" / "tidb-statements__cluster_statements_summary_history.tsv"


def run_cli(tmp_path: Path, name: str, data: bytes, exits: tuple[int, ...] = (0,)) -> dict:
    """``dbdiag analyze`` of a folder holding the bad member and the good mpstat: the JSON report
    (exit 3, partial, where the bad member is refused)."""
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / name).write_bytes(data)
    (capture / "mpstat.txt").write_bytes(GOOD_MPSTAT.read_bytes())
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", str(out)],
        capture_output=True, text=True, timeout=120, preexec_fn=_capped, check=False,
    )
    assert "Traceback" not in done.stderr and done.returncode in exits, done.stderr[-2000:]
    report = json.loads(out.read_text())
    good = member(report, "mpstat.txt")
    assert good["kind"] == "mpstat-text" and good["records"] > 0
    return report


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
