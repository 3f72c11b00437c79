"""Every SQL statement of every finding's remedy, on the real engine of the capture it was found on.

For each real capture of the repository (and of the shared corpus, when present) whose engine is
MariaDB (MySQL family) or PostgreSQL: analyze it twice (literals replaced, the default, and shown,
which lets remedies print the captured statement), recreate its tables in a fresh scratch database by
replaying, in order, the DDL its own statement log holds (CREATE TABLE / CREATE INDEX / ALTER TABLE /
DROP INDEX / DROP TABLE), then run each statement ``tests.remedy_sql`` finds in each finding's
remediation on MariaDB 10.11 or PostgreSQL 15 (``tests.real_servers``). A statement with a placeholder
(``<statement>``, ``?``) fails: a remedy prints runnable SQL or prose.

What cannot be replayed from the log: tables created before it started, and the rows of every table
(statements run on empty tables). The load tools' own tables are made before the log starts
(``pgbench -i``, ``sysbench prepare``): when the capture's statements read them and its log does not
create them, they are created first with the DDL those tools run (``LOAD_TOOL_TABLES``). Any other table
a remedy names but the log does not create makes the test fail with the server's "does not exist".
Exceptions, by statement: ``KILL <id>`` of a MariaDB thread runs against a real sleeping session
instead of the captured id (that connection is gone); ``pg_terminate_backend(<pid>)`` runs as printed
(a pid that is gone gives a WARNING and false). No remedy on a MariaDB or PostgreSQL capture may name
the other engines' syntax or tools (``FOREIGN_WORDS``). Settings a remedy changes (``SET GLOBAL``, ``ALTER
SYSTEM``) are set back after each finding.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.pipeline import Analysis, Options, analyze
from tests.conftest import ABSENT_NAME, CORPUS, REPO, corpus_names
from tests.real_servers import MARIADB_CLIENT, RealServer, run_sql, scratch_database
from tests.remedy_sql import placeholders, statements


FIXTURES = REPO / "fixtures"
REPO_CAPTURES = (
    *sorted((FIXTURES / "real").glob("*.tar.gz")), *sorted((FIXTURES / "causes").glob("*.tar.gz")),
    *sorted((FIXTURES / "lockwait").glob("*.tar.gz")), *sorted((FIXTURES / "pgbench-haproxy-connect").glob("*.tar.gz")),
    *sorted((FIXTURES / "perf").glob("*.tar.xz")), *sorted(path for path in (FIXTURES / "edges").iterdir() if path.is_dir()),
    *sorted((FIXTURES / "compare").glob("*.tar.gz")), *sorted((FIXTURES / "disk").glob("*.tar.gz")),
    *sorted((FIXTURES / "memory").glob("*.tar.gz")), *sorted((FIXTURES / "ptstalk").glob("*.tar.gz")),
)
CORPUS_CAPTURES = corpus_names("captures")
SERVER_OF_ENGINE = {"mariadb": "mariadb", "mysql": "mariadb", "percona": "mariadb", "postgresql": "postgres"}
REPLAYED_DDL = re.compile(r"^\s*(?:CREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX)|ALTER\s+TABLE|DROP\s+(?:INDEX|TABLE))\b", re.I)
MARIADB_KILL = re.compile(r"^KILL (?:CONNECTION |QUERY )?\d+$")
SLEEPER = "SELECT SLEEP(30)"
# Words of other engines' remedies: none may appear in a remedy on a capture of this engine.
FOREIGN_WORDS = {
    "mariadb": ("EXPLAIN ANALYZE", "BINDING", "pg_", "CONCURRENTLY", "PgBouncer", "PostgreSQL", "TiDB", "tidb_", "SET PERSIST",
                "INVISIBLE", "shared_buffers", "ALTER SYSTEM"),
    "postgresql": ("SHOW INDEX", "SET GLOBAL", "innodb", "InnoDB", "MariaDB", "MySQL", "TiDB", "tidb_", "BINDING", "thread_handling",
                   "IGNORED"),
}


def _capture_path(name: str) -> Path:
    return CORPUS / "captures" / name if name in CORPUS_CAPTURES else REPO / name


CAPTURES = [str(path.relative_to(REPO)) for path in REPO_CAPTURES] + CORPUS_CAPTURES


def _engine(analysis: Analysis) -> str | None:
    """The capture's engine: the derived ``engine_version``, else the processes of its CPU profile."""
    metric = analysis.derived.metrics.get("engine_version")
    if metric:
        return metric["engine"]
    stacks = analysis.tables.get(t.PERF_STACK)
    comms = set(stacks["comm"].drop_nulls().unique()) if stacks is not None and "comm" in stacks.columns else set()
    return "mariadb" if {"mariadbd", "mysqld"} & comms else "postgresql" if "postgres" in comms else None


# The DDL pgbench -i runs (its initCreateTables and initCreatePKeys, as the corpus capture's log shows it)
# and sysbench prepare (oltp_common.lua, one table): table prefix -> (engine -> statements).
LOAD_TOOL_TABLES = {
    "pgbench_": {"postgresql": (
        "create table pgbench_history(tid int,bid int,aid int,delta int,mtime timestamp,filler char(22))",
        "create table pgbench_tellers(tid int not null,bid int,tbalance int,filler char(84)) with (fillfactor=100)",
        "create table pgbench_accounts(aid int not null,bid int,abalance int,filler char(84)) with (fillfactor=100)",
        "create table pgbench_branches(bid int not null,bbalance int,filler char(88)) with (fillfactor=100)",
        "alter table pgbench_branches add primary key (bid)", "alter table pgbench_tellers add primary key (tid)",
        "alter table pgbench_accounts add primary key (aid)")},
}
# sysbench's oltp tables (oltp_common.lua): sbtest1..N, id the PRIMARY KEY, or a secondary KEY xid with
# --secondary=on (the log's plans then name xid)
SYSBENCH_TABLE = ("CREATE TABLE {t}(id INTEGER NOT NULL AUTO_INCREMENT, k INTEGER DEFAULT '0' NOT NULL, "
                  "c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, {key} (id))")


def _sysbench_tables(frame: pl.DataFrame) -> list[str]:
    """The sbtest tables the log's statements name, made as sysbench prepare makes them."""
    names = sorted(set(frame["sql"].str.extract_all(r"\bsbtest\d+\b").explode().drop_nulls().to_list()))
    plans = frame["plan"] if "plan" in frame.columns else pl.Series([], dtype=pl.String)
    key = "KEY xid" if plans.drop_nulls().str.contains(r"\bxid\b").any() else "PRIMARY KEY"
    return [ddl for name in names for ddl in (SYSBENCH_TABLE.format(t=name, key=key), f"CREATE INDEX k_{name[6:]} ON {name}(k)")]


def _schema(analysis: Analysis, engine: str) -> list[str]:
    """The DDL of the capture's statement log, in log order, after the load tool's tables the log does not create."""
    frame = analysis.tables.get(t.STATEMENT)
    if frame is None or frame.height == 0:
        return []
    ddl = frame.filter(pl.col("sql").str.contains(REPLAYED_DDL.pattern)).sort("source", "line")
    logged = [sql.strip().rstrip(";") for sql in ddl["sql"].to_list()]
    tools = []
    for prefix, by_engine in LOAD_TOOL_TABLES.items():
        created = any(re.search(rf"(?i)create table (?:if not exists )?{prefix}", sql) for sql in logged)
        if not created and frame["sql"].str.contains(prefix, literal=True).any():
            tools += by_engine.get("postgresql" if engine == "postgresql" else "mariadb", ())
    if engine != "postgresql" and not any(re.search(r"(?i)create table (?:if not exists )?sbtest", sql) for sql in logged):
        tools += _sysbench_tables(frame)
    return [*tools, *logged]


def _remedies(analysis: Analysis) -> list[tuple[str, str]]:
    return [(f"{outcome.rule}: {finding.title[:80]}", finding.remediation or "") for outcome in analysis.outcomes
            for finding in outcome.findings]


@pytest.mark.parametrize("show_literals", [False, True], ids=["literals-replaced", "literals-shown"])
@pytest.mark.parametrize("name", CAPTURES)
def test_every_remedy_statement_runs_on_the_capture_s_engine(name: str, show_literals: bool, request):
    if name == ABSENT_NAME:
        _capture_path(name).stat()  # skips with the corpus reason
    analysis = analyze(_capture_path(name), Options(show_literals=show_literals))
    engine = _engine(analysis)
    foreign = [(finding, word) for finding, text in _remedies(analysis) for word in FOREIGN_WORDS.get(engine or "", ()) if word in text]
    assert not foreign, f"{name} ({engine}): remedies of another engine: {foreign}"
    remedies = [(finding, statements(text)) for finding, text in _remedies(analysis)]
    with_sql = [(finding, found) for finding, found in remedies if found]
    if not with_sql:
        return  # nothing to run: every remedy of this capture is prose and commands
    assert engine in SERVER_OF_ENGINE, f"{name}: remedies print SQL but the capture's engine is {engine!r}"
    half = [(finding, s, placeholders(s)) for finding, found in with_sql for s in found if placeholders(s)]
    assert not half, f"{name}: statements with placeholders: {half}"
    server: RealServer = request.getfixturevalue(SERVER_OF_ENGINE[engine])
    ddl = _schema(analysis, engine)
    for finding, found in with_sql:
        db = scratch_database(server)
        for statement in ddl:
            run_sql(db, statement)
        try:
            for statement in found:
                _run(db, statement, finding)
        finally:
            _reset_settings(db, found)


def _run(db: RealServer, statement: str, finding: str) -> None:
    if db.engine == "mariadb" and MARIADB_KILL.match(statement):
        _kill_a_sleeping_session(db)
        return
    try:
        run_sql(db, statement)
    except AssertionError as error:
        raise AssertionError(f"{finding}\n  {error}") from None


def _kill_a_sleeping_session(db: RealServer) -> None:
    """``KILL n`` of the captured thread, run on a real session that sleeps (the captured one is gone)."""
    sleeper = subprocess.Popen([MARIADB_CLIENT, "--no-defaults", f"--socket={db.socket}", f"--user={db.client_user}",
                                "-e", SLEEPER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        thread = ""
        for _ in range(100):
            thread = run_sql(db, f"SELECT id FROM information_schema.PROCESSLIST WHERE info = '{SLEEPER}'").strip()
            if thread:
                break
            time.sleep(0.1)
        assert thread, "the sleeping session did not show"
        run_sql(db, f"KILL {thread.splitlines()[0]}")
        assert sleeper.wait(timeout=10) != 0  # killed, not finished
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)


def _reset_settings(db: RealServer, found: list[str]) -> None:
    for statement in found:
        if match := re.match(r"SET GLOBAL (\w+)\s*=", statement):
            run_sql(db, f"SET GLOBAL {match.group(1)} = DEFAULT")
        elif match := re.match(r"ALTER SYSTEM SET (\w+)", statement):
            run_sql(db, f"ALTER SYSTEM RESET {match.group(1)}; SELECT pg_reload_conf()")
