"""End to end on REAL captures of SQL problems (fixtures/real/*.tar.gz, made by
fixtures/real/make_real_captures.sh on a private PostgreSQL 15 / MariaDB 10.11 server).

The numbers asserted here come from the workload the script runs (row counts, statement counts,
which plan each phase must get) and were checked in the logs themselves; timings are only held
against the rules' thresholds, with the margins the script builds in (see its header).
"""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag.cli import app
from tests.conftest import REPO

REAL = REPO / "fixtures" / "real"
SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
MAX_FIXTURE_BYTES = 150_000

PG = "pg-stale-stats-full-scan"
PG_LOG = "capture/db/postgresql.log"
PG_STATEMENTS = 529  # 1 CREATE DATABASE + 7 setup + 260 stale phase + ANALYZE + 260 fresh phase
PG_PLANS = 522  # every statement but the 7 utility ones (CREATE DATABASE/TABLE/INDEX x2, ALTER, ANALYZE x2)
PG_PENDING_ROWS = 171_429  # status = 0: i % 7 <> 0 for i in 1..200,000
PG_LOOKUP = "select id, amount from orders where status = ? and customer_id = ?"
PG_COUPON = "select id, amount from orders where coupon = ?"
PG_COUNT = "select count(*) from orders where status = ?"
PG_SLOW_PLAN = "Index Scan(orders.orders_status_idx)"
PG_FAST_PLAN = "Bitmap Heap Scan(orders)>Bitmap Index Scan(orders_customer_idx)"

MARIADB = "mariadb-plan-flip"
MARIADB_LOG = "capture/db/mariadb-slow.log"
MARIADB_STATEMENTS = 405  # 1 CREATE DATABASE + 3 setup + 160 good phase + ALTER ... IGNORED + 240 bad phase
MARIADB_LOOKUP = "select id, price from items where sku = ? and category_id = ?"
MARIADB_SCAN = "select count(*) from items where supplier_code = ?"
# pt-query-digest's fingerprint: "1 + (seq % 500)" -> "? ? (seq % ?)", seq_1_to_400000 -> seq_?_to_?
MARIADB_LOAD = "insert into items select seq, concat(?, seq), seq % ?, concat(?, seq % ?), ? ? (seq % ?), concat(?, seq, ?) from seq_?_to_?"
MARIADB_FAST_PLAN = "items:ref(idx_sku)"
MARIADB_SLOW_PLAN = "items:ref(idx_category)"
ITEMS_ROWS = 400_000


def _analyze(name: str, out_dir: Path) -> dict:
    out = out_dir / f"{name}.json"
    result = CliRunner().invoke(app, ["analyze", str(REAL / f"{name}.tar.gz"), "--format", "json", "-o", str(out)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return document


@pytest.fixture(scope="module")
def pg(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _analyze(PG, tmp_path_factory.mktemp("pg"))


@pytest.fixture(scope="module")
def mariadb(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return _analyze(MARIADB, tmp_path_factory.mktemp("mariadb"))


def _member(name: str, path: str) -> str:
    with tarfile.open(REAL / f"{name}.tar.gz") as archive:
        member = archive.extractfile(path)
        assert member is not None, path
        return member.read().decode("utf-8")


def _findings(document: dict, rule: str) -> list[dict]:
    return [f for f in document["findings"] if f["rule"] == rule]


def _profile(document: dict, fingerprint: str) -> dict:
    rows = [row for row in document["metrics"]["sql_profile"] if row["fingerprint"] == fingerprint]
    assert len(rows) == 1, [row["fingerprint"] for row in document["metrics"]["sql_profile"]]
    return rows[0]


def _evidence(finding: dict, title_start: str) -> dict:
    matches = [e for e in finding["evidence"] if (e.get("title") or "").startswith(title_start)]
    assert len(matches) == 1, [e.get("title") for e in finding["evidence"]]
    return matches[0]


def _status(document: dict, rule: str) -> str:
    return {r["id"]: r["status"] for r in document["rules"]}[rule]


# ---- the fixtures themselves ---------------------------------------------------------------------


@pytest.mark.parametrize(("name", "log", "statements"), [(PG, PG_LOG, PG_STATEMENTS), (MARIADB, MARIADB_LOG, MARIADB_STATEMENTS)])
def test_fixture_is_small_and_holds_the_log_and_a_utc_manifest(name: str, log: str, statements: int):
    archive_path = REAL / f"{name}.tar.gz"
    assert archive_path.stat().st_size < MAX_FIXTURE_BYTES
    with tarfile.open(archive_path) as archive:
        files = sorted(m.name for m in archive.getmembers() if m.isfile())
    assert files == sorted([log, "capture/manifest.txt"])
    manifest = dict(line.split("=", 1) for line in _member(name, "capture/manifest.txt").splitlines())
    assert manifest["TZ"] == "UTC"
    assert manifest["SCENARIO"] == name
    assert int(manifest["WORKLOAD_STATEMENTS"]) == statements


# ---- PostgreSQL: stale statistics, full scan, plan flip -----------------------------------------


def test_pg_every_statement_of_the_workload_is_read_once(pg: dict):
    log = _member(PG, PG_LOG)
    durations = re.findall(r"^\S+ \S+ UTC \[\d+\] \S+ LOG:  duration: ([\d.]+) ms  statement: ", log, re.M)
    assert len(durations) == PG_STATEMENTS
    assert len(re.findall(r" LOG:  duration: [\d.]+ ms  plan:$", log, re.M)) == PG_PLANS
    (entry,) = [i for i in pg["inputs"] if i["path"] == PG_LOG]
    assert entry["kind"] == "postgresql-log" and entry["records"] == PG_STATEMENTS and not entry["warnings"]
    attached = f"{PG_PLANS} auto_explain plans; {PG_PLANS} attached to the duration entry of the same execution (counted once)"
    assert attached in entry["notes"]
    summary = pg["metrics"]["sql_summary"]
    assert summary["statements"] == summary["timed_statements"] == PG_STATEMENTS
    assert summary["db_time_s"] == pytest.approx(sum(float(d) for d in durations) / 1000, abs=1e-6)
    assert {fp: _profile(pg, fp)["calls"] for fp in (PG_LOOKUP, PG_COUPON, PG_COUNT)} == {PG_LOOKUP: 300, PG_COUPON: 200, PG_COUNT: 20}


def test_pg_stale_statistics_on_orders_with_estimates_from_the_plans(pg: dict):
    assert _status(pg, "stale-statistics") == "fired"
    (finding,) = _findings(pg, "stale-statistics")
    assert finding["subject"] == "table orders"
    assert finding["title"].startswith("Stale statistics on orders after a bulk INSERT on orders at ")
    assert "(capture/db/postgresql.log:25): estimates up to 171,429x off" in finding["title"]
    # exactly the 260 statements of the stale phase (150 lookups, 100 coupon scans, 10 counts); none after ANALYZE
    assert finding["impact"]["statements"] == 260
    assert finding["impact"]["max_misestimate"] == PG_PENDING_ROWS
    # the cost is measured against the runs after the ANALYZE that fixed the plans (no run before the INSERT)
    assert "longer than after ANALYZE of orders (capture/db/postgresql.log:1746)" in finding["impact"]["description"]
    impact = finding["impact"]
    assert impact["step_at"] == "fix" and impact["fixed_by"]
    assert impact["calls_before"] == impact["calls_after"] == 150  # the lookup: 150 slow runs before the ANALYZE, 150 fast after
    assert impact["median_before_s"] > 10 * impact["median_after_s"]
    assert 1.0 <= impact["db_time_s"] < 4.4  # not the whole 4.4 s those statements took
    nodes = _evidence(finding, "Plan nodes on orders")
    columns = nodes["columns"]
    rows = [dict(zip(columns, row)) for row in nodes["rows"]]
    by_type = {}
    for row in rows:
        by_type.setdefault(row["node"], []).append(row)
    assert set(by_type) == {"Index Scan", "Index Only Scan", "Seq Scan"}
    # the lookup: 1 row expected from orders_status_idx; every pending row read, all but the customer's thrown away
    for row in by_type["Index Scan"]:
        assert (row["index"], row["estimated rows"], row["loops"]) == ("orders_status_idx", 1.0, 1.0)
        assert row["actual rows"] + row["removed by filter"] == PG_PENDING_ROWS
        assert row["filter"] == "Index Cond: (status = ?); Filter: (customer_id = ?)"
    assert sum(row["statements"] for row in by_type["Index Scan"]) == 150
    (count,) = by_type["Index Only Scan"]
    counted = (count["index"], count["estimated rows"], count["actual rows"], count["statements"])
    assert counted == ("orders_status_idx", 1.0, PG_PENDING_ROWS, 10)
    (scan,) = by_type["Seq Scan"]
    assert (scan["estimated rows"], scan["actual rows"], scan["removed by filter"], scan["statements"]) == (1.0, 200.0, 199_900.0, 100)
    assert "ANALYZE orders;" in finding["remediation"]


def test_pg_full_table_scan_of_orders_suggests_an_index_on_coupon(pg: dict):
    assert _status(pg, "full-table-scan") == "fired"
    (finding,) = _findings(pg, "full-table-scan")
    assert finding["subject"] == f"fingerprint {_profile(pg, PG_COUPON)['fp_id']}"
    assert finding["title"].startswith("Full table scan of orders takes ")
    assert "in 200 execution(s)" in finding["title"]
    assert finding["impact"]["db_time_s"] >= 1.0 and finding["impact"]["share_pct"] >= 5.0
    signals = dict(_evidence(finding, "How the scan shows in the log")["rows"])
    assert signals["full-scan plan node reading >= 10,000 rows (or an unknown number)"] == 200
    (node,) = _evidence(finding, "Full-scan plan nodes of the slowest execution")["rows"]
    assert (node[0], node[1], node[3], node[5]) == ("Seq Scan", "orders", 200.0, 199_900.0)
    assert "CREATE INDEX CONCURRENTLY idx_orders_coupon ON orders (coupon);" in finding["remediation"]


def test_pg_plan_flip_after_analyze_slow_plan_first(pg: dict):
    assert _status(pg, "plan-flip") == "fired"
    (finding,) = _findings(pg, "plan-flip")
    lookup = _profile(pg, PG_LOOKUP)
    assert finding["subject"] == f"fingerprint {lookup['fp_id']}"
    plans = {p["plan_key"]: p for p in lookup["plans"]}
    assert set(plans) == {PG_SLOW_PLAN, PG_FAST_PLAN}
    assert plans[PG_SLOW_PLAN]["calls"] == plans[PG_FAST_PLAN]["calls"] == 150
    assert plans[PG_SLOW_PLAN]["last_seen"] < plans[PG_FAST_PLAN]["first_seen"]  # stale plan, ANALYZE, fresh plan
    assert finding["impact"]["slowdown"] >= 10 and finding["impact"]["lost_db_time_s"] >= 1.0
    shown = [row[0] for row in _evidence(finding, "Plans of this statement")["rows"]]
    assert shown == [PG_FAST_PLAN, PG_SLOW_PLAN]  # fastest first; signatures shown whole (they name the indexes)
    assert "Bitmap Index Scan on orders_customer_idx" in _evidence(finding, "Fast plan")["text"]
    assert "Index Scan using orders_status_idx on orders  (cost=0.29..4.32 rows=1 " in _evidence(finding, "Slow plan")["text"]
    # the slow plan came first and ANALYZE fixed it within the capture: a recovery, told as one, not a problem
    assert finding["severity"] == "info"
    assert finding["title"].startswith("Plan recovered after ANALYZE of orders (capture/db/postgresql.log:1746)")
    assert finding["remediation"].startswith("Already fixed within the capture after ANALYZE of orders")


def test_pg_plan_flip_remediation_names_the_table(pg: dict):
    (finding,) = _findings(pg, "plan-flip")
    assert "ANALYZE orders;" in finding["remediation"]
    assert "<table>" not in finding["remediation"]


# ---- MariaDB: plan flip after ALTER INDEX ... IGNORED, full scans -------------------------------


def test_mariadb_every_statement_of_the_workload_is_read_once(mariadb: dict):
    log = _member(MARIADB, MARIADB_LOG)
    query_times = re.findall(r"^# Query_time: ([\d.]+) ", log, re.M)
    assert len(query_times) == MARIADB_STATEMENTS
    (entry,) = [i for i in mariadb["inputs"] if i["path"] == MARIADB_LOG]
    assert entry["kind"] == "mysql-slowlog" and entry["records"] == MARIADB_STATEMENTS and not entry["warnings"]
    summary = mariadb["metrics"]["sql_summary"]
    assert summary["statements"] == summary["timed_statements"] == MARIADB_STATEMENTS
    assert summary["engines"] == ["mariadb"]
    assert summary["db_time_s"] == pytest.approx(sum(float(q) for q in query_times), abs=1e-6)
    assert _profile(mariadb, MARIADB_LOOKUP)["calls"] == 320
    scan = _profile(mariadb, MARIADB_SCAN)
    assert (scan["calls"], scan["rows_examined"], scan["rows_sent"]) == (80, 80 * ITEMS_ROWS, 80)


def test_mariadb_plan_flip_from_idx_sku_to_idx_category(mariadb: dict):
    assert _status(mariadb, "plan-flip") == "fired"
    (finding,) = _findings(mariadb, "plan-flip")
    lookup = _profile(mariadb, MARIADB_LOOKUP)
    assert finding["subject"] == f"fingerprint {lookup['fp_id']}"
    plans = {p["plan_key"]: p for p in lookup["plans"]}
    assert set(plans) == {MARIADB_FAST_PLAN, MARIADB_SLOW_PLAN}
    assert (plans[MARIADB_FAST_PLAN]["calls"], plans[MARIADB_SLOW_PLAN]["calls"]) == (120, 200)
    assert plans[MARIADB_FAST_PLAN]["first_seen"] <= plans[MARIADB_SLOW_PLAN]["first_seen"]
    assert finding["impact"]["slowdown"] >= 10 and finding["impact"]["lost_db_time_s"] >= 1.0
    assert "200 run(s) after the change against 120 before" in finding["impact"]["description"]
    shown = [row[0] for row in _evidence(finding, "Plans of this statement")["rows"]]
    assert shown == [MARIADB_FAST_PLAN, MARIADB_SLOW_PLAN]
    fast = _evidence(finding, "Fast plan")["text"].splitlines()[1].split("\t")
    slow = _evidence(finding, "Slow plan")["text"].splitlines()[1].split("\t")
    # table, type, key, rows, r_rows: 1 row through idx_sku, then 10,000 rows through idx_category to return 1
    assert (fast[2], fast[3], fast[5], fast[8], fast[9]) == ("items", "ref", "idx_sku", "1", "1.00")
    assert (slow[2], slow[3], slow[5], slow[9]) == ("items", "ref", "idx_category", "10000.00")
    assert "idx_sku" in finding["remediation"] and "NOT IGNORED" in finding["remediation"]


def test_mariadb_full_table_scan_on_supplier_code(mariadb: dict):
    assert _status(mariadb, "full-table-scan") == "fired"
    scan_fp = _profile(mariadb, MARIADB_SCAN)["fp_id"]
    (finding,) = [f for f in _findings(mariadb, "full-table-scan") if f["subject"] == f"fingerprint {scan_fp}"]
    assert finding["title"].startswith("Full table scan of items takes ")
    assert "in 80 execution(s)" in finding["title"]
    assert (finding["impact"]["rows_examined"], finding["impact"]["rows_returned"]) == (80 * ITEMS_ROWS, 80)
    (node,) = _evidence(finding, "Full-scan plan nodes of the slowest execution")["rows"]
    assert (node[0], node[1], node[3], node[6]) == ("ALL", "items", float(ITEMS_ROWS), "Using where")
    assert "ALTER TABLE items ADD INDEX idx_items_supplier_code (supplier_code);" in finding["remediation"]


def test_mariadb_statistics_are_fresh_so_stale_statistics_passes(mariadb: dict):
    # ANALYZE TABLE ran after the load: estimates and r_rows agree within a few times
    assert _status(mariadb, "stale-statistics") == "passed"


def test_mariadb_bulk_load_is_not_a_full_table_scan_finding(mariadb: dict):
    load_fp = _profile(mariadb, MARIADB_LOAD)["fp_id"]
    subjects = {f["subject"] for f in _findings(mariadb, "full-table-scan")}
    assert f"fingerprint {load_fp}" not in subjects
