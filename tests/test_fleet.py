"""``dbdiag fleet DIR...`` over two real captures' tables (MariaDB and PostgreSQL): calls equal the statements
exported, findings per host equal the JSON reports', the same files read by polars and by DuckDB agree."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import polars as pl
import pytest

from dbdiag.tables import export as x
from tests.cli_in_process import run
from tests.conftest import REPO

CAPTURES = {
    "mariadb-plan-flip": REPO / "fixtures" / "real" / "mariadb-plan-flip.tar.gz",
    "pg-stale-stats-full-scan": REPO / "fixtures" / "real" / "pg-stale-stats-full-scan.tar.gz",
    "pg-queue-stale-stats": REPO / "fixtures" / "causes" / "pg-queue-stale-stats.tar.gz",  # plan-flip critical and warning
}


@pytest.fixture(scope="module")
def fleet_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    """Both captures exported into one folder; each host's JSON report."""
    root = tmp_path_factory.mktemp("fleet")
    reports = {}
    for host, capture in CAPTURES.items():
        code, _, err = run("analyze", str(capture), "-f", "json", "-o", str(root / f"{host}.json"), "--tables", str(root / "tables"))
        assert code == 0, err
        reports[host] = json.loads((root / f"{host}.json").read_text(encoding="utf-8"))
    return root / "tables", reports


def summary(*folders: Path, top: int = 1000) -> dict:
    code, out, err = run("fleet", *map(str, folders), "--format", "json", "--top", str(top))
    assert code == 0, err
    return json.loads(out)


def exported_statements(tables: Path) -> pl.DataFrame:
    return pl.scan_parquet(tables / x.STATEMENT / "**" / "*.parquet", hive_partitioning=True, hive_schema={"host": pl.String, "day": pl.String}).collect()


def test_calls_are_the_statements_exported(fleet_dir):
    tables, _ = fleet_dir
    result = summary(tables)
    working = exported_statements(tables).filter(~pl.col("is_sleep"))
    assert working.height > 900  # 405 + 529 + the queue capture's statements, none of them a sleep
    assert result["statements"] == working.height == sum(row["calls"] for row in result["top_fingerprints"])
    assert result["captures"] == len(CAPTURES) and result["hosts"] == sorted(CAPTURES)
    per_host = {h: n for h, n in working.group_by("host").len().iter_rows()}
    assert per_host == {h: sum(s["calls"] for row in result["top_fingerprints"] for s in row["slowest_hosts"] if s["host"] == h) for h in CAPTURES}


def test_findings_per_host_are_the_reports(fleet_dir):
    tables, reports = fleet_dir
    result = summary(tables)
    for host, report in reports.items():
        expected: dict[tuple[str, str], int] = {}
        for finding in report["findings"]:
            key = (finding["rule"], finding["severity"])
            expected[key] = expected.get(key, 0) + 1
        assert {(row["rule"], row["severity"]): row["count"] for row in result["findings_by_host"][host]} == expected
        assert expected  # every capture shows problems
        counted = {s: sum(n for (_, severity), n in expected.items() if severity == s) for s in ("critical", "warning", "info")}
        assert counted == {s: report["verdict"]["findings_by_severity"][s] for s in counted}
    assert result["findings"] == sum(len(r["findings"]) for r in reports.values())


def test_top_fingerprint_is_the_reports_heaviest(fleet_dir):
    tables, reports = fleet_dir
    top = summary(tables, top=1)["top_fingerprints"]
    heaviest = max((entry for r in reports.values() for entry in r["metrics"]["sql_profile"]), key=lambda e: e["total_time_s"])
    assert len(top) == 1 and top[0]["fp_id"] == heaviest["fp_id"] and top[0]["fingerprint"] == heaviest["fingerprint"]
    assert top[0]["p95_ms"] == pytest.approx(heaviest["p95_s"] * 1000)  # exact, as the report's


def test_duckdb_reads_the_same_rows(fleet_dir):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install -e '.[test]'): the DuckDB read is not checked")
    tables, _ = fleet_dir
    result = summary(tables, top=1)
    pattern = str(tables / x.STATEMENT / "**" / "*.parquet")
    rows = duckdb.sql(
        f"SELECT fp_id, count(*) AS calls, sum(query_time_s) AS total_s, quantile_cont(query_time_s, 0.95) * 1000 AS p95_ms, "
        f"count(DISTINCT host) AS hosts FROM read_parquet('{pattern}', hive_partitioning = true) WHERE NOT is_sleep "
        f"GROUP BY fp_id ORDER BY total_s DESC LIMIT 1"
    ).fetchall()
    fp_id, calls, total_s, p95_ms, hosts = rows[0]
    top = result["top_fingerprints"][0]
    assert (fp_id, calls, hosts) == (top["fp_id"], top["calls"], top["hosts"])
    assert total_s == pytest.approx(top["total_s"]) and p95_ms == pytest.approx(top["p95_ms"])
    count = duckdb.sql(f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning = true)").fetchall()[0][0]
    assert count == exported_statements(tables).height


def test_text_and_markdown(fleet_dir):
    tables, _ = fleet_dir
    code, text, _ = run("fleet", str(tables))
    assert code == 0 and text.startswith(f"fleet: {len(CAPTURES)} capture(s), {len(CAPTURES)} host(s)")
    assert "Top fingerprints by total time" in text and "Findings by host" in text and "pg-stale-stats-full-scan" in text
    code, md, _ = run("fleet", str(tables), "--format", "md")
    assert code == 0 and md.startswith(f"# Fleet: {len(CAPTURES)} capture(s)") and "| host | " in md


def test_a_capture_in_two_folders_is_counted_once(fleet_dir, tmp_path: Path):
    tables, _ = fleet_dir
    copy = tmp_path / "copy"
    shutil.copytree(tables, copy)
    once, twice = summary(tables), summary(tables, copy)
    assert twice["duplicates_skipped"] == len(CAPTURES) and summary(tables, tables)["statements"] == once["statements"]
    assert (twice["statements"], twice["findings"], twice["captures"]) == (once["statements"], once["findings"], once["captures"])


def test_no_tables_is_one_line_exit_2(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    for folder in (tmp_path / "empty", tmp_path / "missing"):
        code, out, err = run("fleet", str(folder))
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and "dbdiag: error:" in err


def test_a_damaged_file_is_one_line_exit_2(fleet_dir, tmp_path: Path):
    tables, _ = fleet_dir
    copy = tmp_path / "damaged"
    shutil.copytree(tables, copy)
    victim = next((copy / x.STATEMENT).rglob("*.parquet"))
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    code, _, err = run("fleet", str(copy))
    assert code == 2 and "cannot read the tables" in err and len(err.strip().splitlines()) == 1


def test_the_readme_duckdb_queries_run(fleet_dir):
    duckdb = pytest.importorskip("duckdb", reason="duckdb is not installed (pip install -e '.[test]'): the README's SQL is not checked")
    tables, _ = fleet_dir
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Fleets\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, flags=re.DOTALL)
    statements = [q for block in blocks for q in block.split(";") if "SELECT" in q]
    assert len(statements) == 2
    heaviest = summary(tables, top=1)["top_fingerprints"][0]
    rows = [duckdb.sql(q.replace("'fleet/", f"'{tables}/")).fetchall() for q in statements]
    assert rows[0][0][0] == heaviest["fp_id"] and rows[0][0][2] == heaviest["calls"]
    findings = pl.scan_parquet(tables / x.FINDING / "**" / "*.parquet", hive_partitioning=True,
                               hive_schema={"host": pl.String, "day": pl.String}).collect()
    critical = findings.filter((pl.col("severity") == "critical") & (pl.col("day") == "2026-11-29"))
    assert {host for host, _ in rows[1]} == set(critical["host"].to_list()) and len(rows[1]) >= 2
