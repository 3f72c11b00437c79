"""End to end on a REAL capture of a connection ceiling: pgbench -C (a new connection per transaction,
16 clients) through HAProxy whose only server has maxconn 2, in front of PostgreSQL 15 logging every
statement and connection (fixtures/pgbench-haproxy-connect/make_capture.sh made it).

The numbers asserted are read from the capture's own files (pgbench's summary, the PostgreSQL log,
HAProxy's show stat rows), not typed in: a rerun of the script gives other timings and the same
relations. What must hold: one DB time in the whole report (the time account's, every statement of
the run), the connection time pgbench printed with its share of the users' time, and the ceiling
named with its server, its maxconn and the show stat row (file:line).
"""

from __future__ import annotations

import json
import re
import tarfile
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag.cli import app
from tests.conftest import REPO

FIXTURE = REPO / "fixtures" / "pgbench-haproxy-connect"
CAPTURE = FIXTURE / "pgbench-C-haproxy-maxconn2.tar.gz"
SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
MAX_FIXTURE_BYTES = 300_000
PGBENCH = "capture/app/pgbench.txt"
PG_LOG = "capture/db/postgresql.log"
STAT = "capture/proxy/haproxy-stat.txt"
CONFIG = "capture/app/haproxy.cfg"
RUN_STATEMENT = "SELECT abalance FROM pgbench_accounts WHERE aid = "  # -S: one statement per transaction


def _member(name: str) -> str:
    with tarfile.open(CAPTURE) as archive:
        member = archive.extractfile(name)
        assert member is not None
        return member.read().decode()


def _summary_ms(text: str, key: str) -> float:
    match = re.search(rf"^{key} = ([\d.]+) ms$", text, re.MULTILINE)
    assert match, key
    return float(match.group(1))


@pytest.fixture(scope="module")
def document(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("conn") / "report.json"
    result = CliRunner().invoke(app, ["analyze", str(CAPTURE), "--format", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    document = json.loads(out.read_text(encoding="utf-8"))
    jsonschema.validate(document, SCHEMA)
    return document


def _finding(document: dict, rule: str) -> dict:
    found = [f for f in document["findings"] if f["rule"] == rule]
    assert len(found) == 1, [f["rule"] for f in document["findings"]]
    return found[0]


def test_fixture_is_small_and_has_its_script() -> None:
    assert CAPTURE.stat().st_size < MAX_FIXTURE_BYTES
    assert (FIXTURE / "make_capture.sh").stat().st_mode & 0o100
    text = _member(PGBENCH)
    assert re.search(r"^\+ pgbench .* -C -c 16 -j 16 -S -T \d+ -P 1 -r", text, re.MULTILINE)


def test_user_time_counts_the_connection_time_pgbench_printed(document: dict) -> None:
    """-P measures each transaction's latency after its connection: user time = transactions x (latency + connection)."""
    text = _member(PGBENCH)
    transactions = int(re.search(r"^number of transactions actually processed: (\d+)$", text, re.MULTILINE).group(1))
    latency_ms, connect_ms = _summary_ms(text, "latency average"), _summary_ms(text, "average connection time")
    assert connect_ms > 10 * latency_ms  # the ceiling's cost: connecting, not the statement
    account = document["metrics"]["time_accounting"]
    assert account["user_response_time_s"] == pytest.approx(transactions * (latency_ms + connect_ms) / 1000.0, abs=1e-5)
    assert account["connection_time_s"] == pytest.approx(transactions * connect_ms / 1000.0, abs=1e-5)
    assert account["connection_ms_per_transaction"] == connect_ms and account["connection_per_transaction"] is True
    assert account["connection_share_of_user_time"] == pytest.approx(connect_ms / (latency_ms + connect_ms), abs=1e-4)
    # the 16 clients waited the whole run: user time is clients x the run's span, to within the span's rounding
    tps = float(re.search(r"^tps = ([\d.]+) \(including reconnection times\)$", text, re.MULTILINE).group(1))
    assert account["user_response_time_s"] == pytest.approx(16 * transactions / tps, rel=0.01)


def test_db_time_counts_every_statement_of_the_run(document: dict) -> None:
    """Every run statement of the log (one per transaction), not those of the few busiest connections;
    the only others in the run's span are pgbench's own set-up session (its vacuum), sent by the same run."""
    text = _member(PGBENCH)
    transactions = int(re.search(r"^number of transactions actually processed: (\d+)$", text, re.MULTILINE).group(1))
    account = document["metrics"]["time_accounting"]
    start, end = (datetime.fromisoformat(account[k]) for k in ("from", "to"))
    logged = [  # (start: the log line's time is the statement's end, pid, ms, statement)
        (datetime.fromisoformat(m.group(1) + "+00:00") - timedelta(milliseconds=float(m.group(3))), int(m.group(2)),
         float(m.group(3)), m.group(4))
        for m in re.finditer(r"^(\S+ \S+) UTC \[(\d+)\] \S+ LOG:  duration: ([\d.]+) ms  statement: (.*)$", _member(PG_LOG), re.MULTILINE)
    ]
    run = [row for row in logged if row[3].startswith(RUN_STATEMENT)]
    assert len(run) == transactions and all(start <= ts <= end for ts, *_ in run)
    counted = [row for row in logged if start <= row[0] < end]
    setup_pids = {pid for _, pid, _, sql in logged if sql.startswith("vacuum pgbench_")}
    assert {pid for _, pid, _, sql in counted if not sql.startswith(RUN_STATEMENT)} <= setup_pids
    db = [s for s in account["sources"] if s["side"] == "db"]
    assert [s["count"] for s in db] == [len(counted)]
    assert account["db_time_s"] == pytest.approx(sum(ms for _, _, ms, _ in counted) / 1000.0, abs=1e-5)
    assert "every statement of that stretch counts" in account["alignment"]


def test_one_db_time_in_the_report(document: dict) -> None:
    account = document["metrics"]["time_accounting"]
    stated = {f["rule"]: f["impact"]["measured_db_time_s"] for f in document["findings"] if "measured_db_time_s" in f["impact"]}
    assert set(stated) == {"bottleneck-outside-database", "connection-ceiling"}
    assert set(stated.values()) == {account["db_time_s"]}
    bottleneck = _finding(document, "bottleneck-outside-database")
    share = 100.0 * account["db_time_ratio"]
    assert f"the database worked {share:.1f}% of it ({account['db_time_s']:,.1f} s); threshold 30%" in bottleneck["title"]
    rows = dict(bottleneck["evidence"][0]["rows"])
    assert rows["DB time (s)"] == round(account["db_time_s"], 3)


def test_bottleneck_says_connecting_dominates(document: dict) -> None:
    account = document["metrics"]["time_accounting"]
    bottleneck = _finding(document, "bottleneck-outside-database")
    share = 100.0 * account["connection_share_of_user_time"]
    latency_ms = _summary_ms(_member(PGBENCH), "latency average")
    assert bottleneck["severity"] == "critical"
    assert bottleneck["title"].startswith(
        f"Bottleneck outside the database: connecting took {account['connection_ms_per_transaction']:,.1f} ms per transaction ("
    )
    assert (f"x the transaction's own {latency_ms:,.2f} ms), {share:.0f}% of the time users waited "
            f"({account['connection_time_s']:,.1f} s of {account['user_response_time_s']:,.1f} s); threshold 50%") in bottleneck["title"]
    impact = bottleneck["impact"]
    outside_s = account["user_response_time_s"] - account["db_time_s"]
    assert impact["user_time_s"] == pytest.approx(outside_s, abs=1e-5)
    assert impact["share_of_user_time"] == pytest.approx(outside_s / account["user_response_time_s"], abs=1e-4)
    assert (impact["db_time_s"], impact["share_of_db_time"]) == (0.0, 0.0)
    assert impact["connection_time_s"] == account["connection_time_s"]
    assert bottleneck["remediation"].startswith("0. Connecting is the cost")


def test_ceiling_names_the_server_its_maxconn_and_the_row(document: dict) -> None:
    account = document["metrics"]["time_accounting"]
    ceiling = _finding(document, "connection-ceiling")
    assert ceiling["title"].startswith("HAProxy backend be_pg: 1 of 1 servers at their maxconn 2 (2 in all)")
    assert ceiling["subject"] == "be_pg/pg1"
    where = ceiling["impact"]["limit_rows"]["pg1"]
    assert where in ceiling["sources"] and where in ceiling["remediation"]
    path, line = where.rsplit(":", 1)
    assert path == STAT
    row = _member(STAT).split("\n")[int(line) - 1].split(",")
    assert row[:2] == ["be_pg", "pg1"] and row[4] == row[6] == "2"  # scur = slim = 2: at the limit on that row
    assert "'server pg1 ... maxconn 4'" in ceiling["remediation"]
    # and the line of haproxy.cfg that sets it, first among the sources
    configured = ceiling["impact"]["limit_settings"]["pg1"]
    assert ceiling["sources"][0] == configured and configured.startswith(CONFIG + ":")
    text = _member(CONFIG).split("\n")[int(configured.rsplit(":", 1)[1]) - 1].split()
    assert text[:2] == ["server", "pg1"] and text[-2:] == ["maxconn", "2"]
    assert f"Set at pg1: {configured} 'server pg1 " in ceiling["remediation"]
    # its cost: the users' wait for a connection, in the findings' cost names
    impact = ceiling["impact"]
    assert impact["user_time_s"] == account["connection_time_s"]
    assert impact["share_of_user_time"] == account["connection_share_of_user_time"]
    assert (impact["db_time_s"], impact["share_of_db_time"]) == (0.0, 0.0)
    assert ceiling["severity"] == "critical"  # more than half of the users' time


def test_cost_ranks_the_ceiling_with_the_bottleneck(document: dict) -> None:
    """Both carry a share of user time well above every other finding's cost."""
    costs = {f["rule"]: f["impact"].get("share_of_user_time") for f in document["findings"]}
    assert costs["connection-ceiling"] > 0.5 and costs["bottleneck-outside-database"] > 0.5
    others = [v for rule, v in costs.items() if rule not in ("connection-ceiling", "bottleneck-outside-database")]
    assert all(v is None or v < 0.5 for v in others)


def test_pgbench_regimes_beside_the_capture() -> None:
    """The two other outputs the script made: without -P the latency holds the connection; with -R too."""
    from dbdiag.parsers import pgbench
    from dbdiag.parsers.base import ParseContext

    for name, includes in (("pgbench-C-no-progress.txt", True), ("pgbench-C-rate60.txt", True)):
        text = (FIXTURE / name).read_text()
        run = pgbench.parse(text, ParseContext(name)).tables["load_run"].row(0, named=True)
        assert run["connect_avg_ms"] == _summary_ms(text, "average connection time")
        assert run["latency_includes_connect"] is includes
        assert run["latency_avg_ms"] > run["connect_avg_ms"]  # the connection is inside the latency printed


def test_capture_path_is_not_written(document: dict) -> None:
    assert str(Path("/tmp/phc.")) not in json.dumps(document["inputs"])
