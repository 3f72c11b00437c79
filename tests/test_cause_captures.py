"""End to end on REAL captures whose cause is in the log (fixtures/causes/*.tar.gz, made by
fixtures/causes/make_cause_captures.sh on a private MariaDB 10.11 / PostgreSQL 15 server).

For each: the change table lists the cause with its ``file:line``; plan-flip / stale-statistics name
it; the step numbers in the finding's impact equal those computed here from the parsed statements
(every run of the fingerprint, split at the cause's line); and every SQL statement of the
remediation runs on the real engine, on a scratch database shaped like the capture's tables.
"""

from __future__ import annotations

import statistics

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.pipeline import Analysis, analyze
from dbdiag.report import build_document
from tests.conftest import REPO
from tests.real_servers import run_sql, scratch_database
from tests.remedy_sql import placeholders, statements


CAUSES = REPO / "fixtures" / "causes"
MAX_FIXTURE_BYTES = 300_000
MARIADB_LOG = "capture/db/mariadb-slow.log"
PG_LOG = "capture/db/postgresql.log"
MARIADB_ALTER_LINE = 2038  # "# Time:" line of the ALTER TABLE ... IGNORED entry
MARIADB_LOOKUP = r"^SELECT id, amount FROM orders WHERE customer_id = \d+ AND status = 1"
PG_JOBS_LOOKUP = r"^SELECT id, payload FROM jobs WHERE state = 0 AND queue_id = \d+"
PG_ACCOUNTS_LOOKUP = r"^SELECT id, name FROM accounts WHERE email = "

MARIADB_SCHEMA = """
CREATE TABLE orders (id INT UNSIGNED NOT NULL PRIMARY KEY, customer_id INT NOT NULL, status TINYINT NOT NULL,
  amount DECIMAL(10,2) NOT NULL, note VARCHAR(100) NOT NULL, KEY idx_customer_status (customer_id, status)) ENGINE=InnoDB;
INSERT INTO orders VALUES (1, 37, 1, 10.00, 'a'), (2, 74, 1, 11.00, 'b');
ALTER TABLE orders ALTER INDEX idx_customer_status IGNORED;
"""
PG_SCHEMA = """
CREATE TABLE jobs (id bigserial PRIMARY KEY, queue_id int NOT NULL, state smallint NOT NULL, payload text NOT NULL) WITH (autovacuum_enabled = false);
CREATE INDEX jobs_state_idx ON jobs (state);
CREATE INDEX jobs_queue_idx ON jobs (queue_id);
INSERT INTO jobs (queue_id, state, payload) SELECT i, 2, 'done job ' || i FROM generate_series(1, 20) AS i;
CREATE TABLE accounts (id serial PRIMARY KEY, email text NOT NULL, name text NOT NULL);
INSERT INTO accounts (email, name) SELECT 'user-' || i || '@example.com', 'Customer ' || i FROM generate_series(1, 100) AS i;
"""


@pytest.fixture(scope="module")
def maria() -> Analysis:
    return analyze(CAUSES / "mariadb-ignored-index.tar.gz")


@pytest.fixture(scope="module")
def pg() -> Analysis:
    return analyze(CAUSES / "pg-queue-stale-stats.tar.gz")


def _findings(analysis: Analysis, rule: str) -> list:
    return [finding for outcome in analysis.outcomes if outcome.rule == rule for finding in outcome.findings]


def _finding(analysis: Analysis, rule: str, subject_part: str):
    (found,) = [f for f in _findings(analysis, rule) if subject_part in f.title]
    return found


def _expected_step(analysis: Analysis, pattern: str, source: str, cause_line: int, until_line: int | None = None) -> dict:
    """Calls and medians of the statements matching ``pattern`` before and after ``cause_line`` (to ``until_line``)."""
    runs = analysis.tables[t.STATEMENT].filter(pl.col("sql").str.contains(pattern), pl.col("source") == source)
    before = runs.filter(pl.col("line") < cause_line)["query_time_s"].to_list()
    after = runs.filter(pl.col("line") > cause_line, pl.col("line") < (until_line or 1 << 40))["query_time_s"].to_list()
    median_before, median_after = statistics.median(before), statistics.median(after)
    return {"calls_before": len(before), "median_before_s": median_before, "calls_after": len(after),
            # capped by what the runs after took beyond the median before (see cause.Step.lost_s)
            "median_after_s": median_after, "lost_s": min(len(after) * (median_after - median_before), sum(after) - len(after) * median_before),
            "total_s": float(analysis.tables[t.STATEMENT]["query_time_s"].sum())}


def _assert_step(impact: dict, expected: dict) -> None:
    assert impact["calls_before"] == expected["calls_before"]
    assert impact["calls_after"] == expected["calls_after"]
    assert impact["median_before_s"] == pytest.approx(expected["median_before_s"], abs=1e-6)
    assert impact["median_after_s"] == pytest.approx(expected["median_after_s"], abs=1e-6)
    assert impact["db_time_s"] == pytest.approx(expected["lost_s"], abs=1e-3)
    assert impact["share_of_db_time"] == pytest.approx(expected["lost_s"] / expected["total_s"], abs=1e-4)


def _statements(remediation: str) -> list[str]:
    found = statements(remediation)
    assert found, remediation
    assert not [placeholders(statement) for statement in found if placeholders(statement)], found
    return found


def test_fixtures_are_small():
    for path in CAUSES.glob("*.tar.gz"):
        assert path.stat().st_size < MAX_FIXTURE_BYTES, path


# ---- MariaDB: ALTER TABLE orders ALTER INDEX idx_customer_status IGNORED --------------------------


def test_mariadb_change_table_lists_the_ddl_with_its_line(maria: Analysis):
    changes = maria.derived.tables[t.CHANGE]
    assert changes.select("action", "table", "line").rows() == [
        ("create-table", "orders", 11), ("insert", "orders", 18), ("analyze", "orders", 30),
        ("index-ignored", "orders", MARIADB_ALTER_LINE),
    ]
    ignored = changes.filter(pl.col("action") == "index-ignored").row(0, named=True)
    assert (ignored["kind"], ignored["object"], ignored["conn_id"], ignored["source"]) == ("ddl", "idx_customer_status", "6", MARIADB_LOG)
    assert changes.filter(pl.col("action") == "insert")["rows"].to_list() == [100_000]


def test_mariadb_plan_flip_names_the_ignored_index(maria: Analysis):
    finding = _finding(maria, "plan-flip", "IGNORED")
    where = f"{MARIADB_LOG}:{MARIADB_ALTER_LINE}"
    assert "index idx_customer_status made IGNORED on orders at " in finding.title and where in finding.title
    assert finding.sources[0] == where
    assert finding.impact["cause"] == {**finding.impact["cause"], "action": "index-ignored", "object": "idx_customer_status",
                                       "conn_id": "6", "at": where}
    assert "connection 6" in finding.impact["description"]


def test_mariadb_plan_flip_step_matches_the_runs(maria: Analysis):
    finding = _finding(maria, "plan-flip", "IGNORED")
    expected = _expected_step(maria, MARIADB_LOOKUP, MARIADB_LOG, MARIADB_ALTER_LINE)
    assert (expected["calls_before"], expected["calls_after"]) == (200, 200)
    _assert_step(finding.impact, expected)


def test_mariadb_remedy_is_mariadb_only(maria: Analysis):
    remediation = _finding(maria, "plan-flip", "IGNORED").remediation
    assert "ALTER TABLE orders ALTER INDEX idx_customer_status NOT IGNORED;" in remediation
    for foreign in ("EXPLAIN ANALYZE", "BINDING", "FORCE INDEX", "VISIBLE", "CONCURRENTLY"):
        assert foreign not in remediation


def test_mariadb_remedy_runs_and_undoes_the_change(maria: Analysis, mariadb):
    db = scratch_database(mariadb)
    run_sql(db, MARIADB_SCHEMA)
    for statement in _statements(_finding(maria, "plan-flip", "IGNORED").remediation):
        run_sql(db, statement)
    state = run_sql(db, "SELECT DISTINCT ignored FROM information_schema.statistics WHERE table_schema = DATABASE() "
                        "AND index_name = 'idx_customer_status'")
    assert state.split() == ["NO"]


def test_mariadb_timeline_marks_the_change(maria: Analysis):
    events = maria.derived.metrics["timeline"]["events"]
    marked = [e for e in events if e["kind"] == "index-ignored"]
    assert [(e["table"], e["source"], e["line"], e["change"]) for e in marked] == [("orders", MARIADB_LOG, MARIADB_ALTER_LINE, "ddl")]


# ---- PostgreSQL: ANALYZE of a nearly empty queue, a bulk load, a DROP INDEX ------------------------


def _pg_change(pg: Analysis, action: str, table: str) -> dict:
    (row,) = pg.derived.tables[t.CHANGE].filter(pl.col("action") == action, pl.col("table") == table).rows(named=True)
    return row


def test_pg_change_table_lists_analyze_bulk_load_and_drop(pg: Analysis):
    changes = pg.derived.tables[t.CHANGE]
    actions = changes.filter(pl.col("table") == "jobs")["action"].to_list()
    assert actions == ["create-table", "create-index", "create-index", "analyze", "insert"]
    dropped = _pg_change(pg, "drop-index", "accounts")  # the table comes from the CREATE INDEX earlier in the log
    assert dropped["object"] == "accounts_email_idx" and dropped["statement"] == "DROP INDEX accounts_email_idx"
    bulk = _pg_change(pg, "insert", "jobs")
    assert bulk["rows"] is None and "generate_series(?, ?)" in bulk["statement"]  # literals replaced
    assert set(changes.filter(pl.col("kind") == "restart")["action"]) == {"start", "shutdown"}


def test_pg_stale_statistics_names_the_bulk_load_and_the_analyze_before_it(pg: Analysis):
    (finding,) = _findings(pg, "stale-statistics")
    bulk, analyzed = _pg_change(pg, "insert", "jobs"), _pg_change(pg, "analyze", "jobs")
    assert finding.subject == "table jobs"
    assert f"after a bulk INSERT on jobs at {bulk['ts']:%H:%M:%S} UTC ({PG_LOG}:{bulk['line']})" in finding.title
    assert finding.sources[0] == f"{PG_LOG}:{bulk['line']}"
    assert f"ANALYZE jobs ({PG_LOG}:{analyzed['line']}" in finding.impact["description"]
    assert f"connection {bulk['conn_id']}" in finding.impact["description"]


def test_pg_stale_statistics_counts_every_run_not_only_the_logged_plans(pg: Analysis):
    (finding,) = _findings(pg, "stale-statistics")
    bulk = _pg_change(pg, "insert", "jobs")
    expected = _expected_step(pg, PG_JOBS_LOOKUP, PG_LOG, bulk["line"])
    assert (expected["calls_before"], expected["calls_after"]) == (150, 300)
    _assert_step(finding.impact, expected)
    assert finding.impact["statements"] < expected["calls_after"]  # auto_explain sampled a quarter of the plans
    assert "not in the log" not in finding.impact["description"]


def test_pg_plan_flip_after_drop_index_step_and_cause(pg: Analysis):
    finding = _finding(pg, "plan-flip", "DROP INDEX")
    dropped = _pg_change(pg, "drop-index", "accounts")
    where = f"{PG_LOG}:{dropped['line']}"
    assert f"DROP INDEX accounts_email_idx on accounts at {dropped['ts']:%H:%M:%S} UTC ({where})" in finding.title
    assert finding.sources[0] == where
    expected = _expected_step(pg, PG_ACCOUNTS_LOOKUP, PG_LOG, dropped["line"])
    assert (expected["calls_before"], expected["calls_after"]) == (300, 150)
    _assert_step(finding.impact, expected)
    assert "CREATE INDEX CONCURRENTLY accounts_email_idx ON accounts (email);" in finding.remediation


def test_pg_plan_flip_of_the_queue_lookup_names_the_bulk_load(pg: Analysis):
    finding = _finding(pg, "plan-flip", "bulk INSERT")
    bulk = _pg_change(pg, "insert", "jobs")
    _assert_step(finding.impact, _expected_step(pg, PG_JOBS_LOOKUP, PG_LOG, bulk["line"]))
    assert "ANALYZE jobs;" in finding.remediation


def test_pg_remedies_are_postgresql_only(pg: Analysis):
    remedies = [f.remediation for f in _findings(pg, "plan-flip") + _findings(pg, "stale-statistics")]
    for remediation in remedies:
        for foreign in ("ANALYZE TABLE", "IGNORED", "INVISIBLE", "BINDING", "FORCE INDEX", "LOCK STATS", "ALGORITHM="):
            assert foreign not in remediation


def test_pg_remedies_run_on_postgresql(pg: Analysis, postgres):
    db = scratch_database(postgres)
    run_sql(db, PG_SCHEMA)  # as the capture left them: accounts without its email index
    for finding in _findings(pg, "plan-flip") + _findings(pg, "stale-statistics"):
        for statement in _statements(finding.remediation):
            run_sql(db, statement)
    assert run_sql(db, "SELECT indexdef FROM pg_indexes WHERE indexname = 'accounts_email_idx'").strip() == (
        "CREATE INDEX accounts_email_idx ON public.accounts USING btree (email)"
    )


def test_pg_timeline_marks_the_changes(pg: Analysis):
    events = pg.derived.metrics["timeline"]["events"]
    kinds = [e["kind"] for e in events]
    assert kinds.index("analyze") < kinds.index("insert") < kinds.index("drop-index")
    (dropped,) = [e for e in events if e["kind"] == "drop-index"]
    assert (dropped["table"], dropped["object"], dropped["source"]) == ("accounts", "accounts_email_idx", PG_LOG)


# ---- stale-statistics steps without a cause, on the real engines ---------------------------------


def test_mariadb_statistics_steps_run_on_mariadb(mariadb):
    from dbdiag.rules.sql.stale_statistics_remedies import remediation as _remediation

    db = scratch_database(mariadb)
    run_sql(db, MARIADB_SCHEMA)
    for columns, index in ((["customer_id", "status"], "idx_customer_status"), (["status"], "PRIMARY"), ([], None)):
        text = _remediation("mariadb", "orders", columns, index, {"misestimate"})
        assert "EXPLAIN ANALYZE" not in text
        for statement in _statements(text):
            run_sql(db, statement)


def test_postgresql_statistics_steps_run_on_postgresql(postgres):
    from dbdiag.rules.sql.stale_statistics_remedies import remediation as _remediation

    db = scratch_database(postgres)
    run_sql(db, PG_SCHEMA)
    for columns in (["state", "queue_id"], ["state"], []):
        text = _remediation("postgresql", "jobs", columns, None, {"misestimate"})
        assert [line.split(".")[0] for line in text.splitlines()[:2]] == ["1", "2"]
        for statement in _statements(text):
            run_sql(db, statement)


def test_plan_flip_steps_without_a_cause_run_on_mariadb(mariadb):
    from dbdiag.rules.sql.plan_flip import _remediation

    db = scratch_database(mariadb)
    run_sql(db, MARIADB_SCHEMA)
    text = _remediation("mariadb", "SELECT id FROM orders WHERE customer_id = ? AND status = ?", ("orders", "idx_customer_status"), None)
    assert "EXPLAIN ANALYZE" not in text and "BINDING" not in text
    for statement in _statements(text):
        run_sql(db, statement)


def test_plan_flip_steps_without_a_cause_run_on_postgresql(postgres):
    from dbdiag.rules.sql.plan_flip import _remediation

    db = scratch_database(postgres)
    run_sql(db, PG_SCHEMA)
    text = _remediation("postgresql", "SELECT id FROM jobs WHERE state = ? AND queue_id = ?", (None, None), None, fallback_table="jobs")
    assert "<" not in text
    for statement in _statements(text):
        run_sql(db, statement)


def test_the_verdict_leads_with_the_cause_and_the_scan_of_the_flipped_statement_is_its_evidence(maria: Analysis):
    document = build_document(maria)
    first = document["findings"][0]
    assert document["verdict"]["findings"][0] == first["id"]
    assert first["rule"] == "plan-flip" and "IGNORED" in document["verdict"]["headline"]
    assert "capture/db/mariadb-slow.log:2038" in document["verdict"]["headline"]
    scan = next(f for f in document["findings"] if f["rule"] == "full-table-scan")
    assert scan["subject"] == first["subject"] and scan["id"] in first["related"] and first["id"] in scan["related"]
    ranks = document["verdict"]["findings"]
    assert ranks.index(scan["id"]) == 1  # right after the flip, not a headline of its own


def test_stale_statistics_lead_and_link_the_flip_they_explain(pg: Analysis):
    document = build_document(pg)
    first = document["findings"][0]
    assert first["rule"] == "stale-statistics" and first["subject"] == "table jobs"
    flip = document["findings"][1]
    assert flip["rule"] == "plan-flip" and flip["id"] in first["related"] and first["id"] in flip["related"]


def test_the_scan_of_a_statement_whose_index_was_set_aside_says_undo_not_add(maria: Analysis):
    (scan,) = _findings(maria, "full-table-scan")
    assert "Index idx_customer_status of orders was made IGNORED during the capture (capture/db/mariadb-slow.log:2038)" in scan.remediation
    assert "ADD INDEX" not in scan.remediation


def test_postgresql_autovacuum_analyze_is_a_statistics_change_of_its_table():
    # fixtures/causes/pg-autoanalyze (make_pg_autoanalyze.py, PostgreSQL 15.18 here): 20,000 rows loaded,
    # autovacuum analyzed jobs at line 84; its analyses of the system catalogs are not changes
    analysis = analyze(CAUSES / "pg-autoanalyze" / "postgresql.log")
    changes = analysis.derived.tables[t.CHANGE]
    analyzed = changes.filter(pl.col("action") == "auto-analyze")
    assert analyzed.select("kind", "table", "line").rows() == [("statistics", "jobs", 84)]
    events = analysis.tables[t.EVENT]
    assert events.filter(pl.col("kind") == "auto-analyze").height > 1  # the catalogs' too, as events
