"""Nothing secret in any output by default (issue 11, item 4), and ``--pseudonymize``.

Secrets are planted in every kind of log line and label a capture holds; every output of the real
CLI (``-f html -f json -f md``) is searched for them. With ``--show-literals`` the same tokens must
show up, which proves each one reaches an output when it is not redacted.
"""

from __future__ import annotations

import html
import json
import re
import time
from pathlib import Path

import jsonschema
import pytest
from typer.testing import CliRunner

from dbdiag import markdown, pseudonymize, redact_text
from dbdiag.cli import app
from tests.conftest import REPO

SCHEMA = json.loads((REPO / "analyzer/schema/findings.schema.json").read_text(encoding="utf-8"))
DEMO = REPO / "fixtures/demo/bank-core-demo.tar.gz"

TIDB_LOG = """\
[2024/05/14 10:00:01.123 +08:00] [INFO] [printer.go:34] ["Welcome to TiDB."] ["Release Version"=v7.5.1] [Edition=Community]
[2024/05/14 10:09:00.000 +08:00] [FATAL] [conn.go:1046] ["connection running loop panic"] [conn=2097154] [user=tidbs3cretuser] [ip=10.77.1.9] [sql="SELECT * FROM acct WHERE card_no = 'S3CRET-TIDB-CARD' AND pin = 918273"] [err="runtime error"]
[2024/13/45 99:99:99] [FATAL] [x] [sql="SELECT 'S3CRET-INVENTORY'"]
"""
PG_LOG = """\
2026-11-29 20:51:30.000 UTC [3300] LOG:  database system is ready to accept connections
2026-11-29 20:51:34.458 UTC [3317] pgs3cretuser@pgs3cretdb ERROR:  duplicate key value violates unique constraint "users_email_key"
2026-11-29 20:51:34.458 UTC [3317] pgs3cretuser@pgs3cretdb DETAIL:  Key (email)=(s3cret-pg-key@example.com) already exists.
2026-11-29 20:51:34.458 UTC [3317] pgs3cretuser@pgs3cretdb STATEMENT:  INSERT INTO users (email) VALUES ('s3cret-pg-key@example.com');
2026-11-29 20:51:35.000 UTC [3318] pgs3cretuser@pgs3cretdb ERROR:  new row for relation "t" violates check constraint "t_check"
2026-11-29 20:51:35.000 UTC [3318] pgs3cretuser@pgs3cretdb DETAIL:  Failing row contains (7, S3CRET-PG-ROW).
2026-11-29 20:51:35.000 UTC [3318] pgs3cretuser@pgs3cretdb STATEMENT:  INSERT INTO t VALUES (7, 'S3CRET-PG-ROW');
2026-11-29 20:51:36.000 UTC [3319] pgs3cretuser@pgs3cretdb LOG:  duration: 0.274 ms  execute <unnamed>: UPDATE t SET a = $1 WHERE id = 12
2026-11-29 20:51:36.000 UTC [3319] pgs3cretuser@pgs3cretdb DETAIL:  parameters: $1 = 'S3CRET-PG-PARAM'
2026-11-29 20:51:36.500 UTC [3319] pgs3cretuser@pgs3cretdb LOG:  duration: 12.500 ms  statement: SELECT * FROM acct WHERE card = 'S3CRET-PG-STMT'
2026-11-29 20:51:38.000 UTC [3321] pgs3cretuser@pgs3cretdb PANIC:  could not write to file "pg_wal/xlogtemp.123": No space left on device
2026-11-29 20:51:38.000 UTC [3321] pgs3cretuser@pgs3cretdb STATEMENT:  UPDATE acct SET balance = 99 WHERE card = 'S3CRET-PG-PANIC'
"""
MYSQL_ERROR_LOG = """\
2026-11-29 22:53:48 0 [Note] mariadbd: ready for connections.
2026-11-29 22:53:49 4 [Warning] Aborted connection 4 to db: 'mys3cretdb' user: 'mys3cretuser' host: '10.88.7.6' (Got timeout reading communication packets)
2026-11-29 22:53:50 7 [ERROR] Slave SQL: Error 'Duplicate entry 'S3CRET-MY-DUP' for key 'PRIMARY'' on query. Default database: 'mys3cretdb'. Query: 'INSERT INTO acct VALUES (5, 'S3CRET-MY-QUERY')', Gtid 0-1-5, Internal MariaDB error code: 1062
2026-11-29 22:53:51 8 [ERROR] mariadbd: Table './mys3cretdb/acct' is marked as crashed; query: SELECT * FROM acct WHERE ssn = 'S3CRET-MY-SSN'
2026-11-29 22:53:52 0 [ERROR] [FATAL] InnoDB: Unable to read page [page id: space=5, page number=3] into the buffer pool; query: SELECT * FROM acct WHERE ssn = 'S3CRET-MY-FATAL'
"""
JTL_HEADER = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n"
JTL_SQL_LABEL = "SELECT * FROM acct WHERE card = 'S3CRET-JMETER' AND amount > 31337"
MANIFEST = '{"host": "prod-s3cret-host", "tz": "UTC"}\n'
# every setting line reaches metrics.settings (for dbdiag compare): the passwords among them must not
PG_CONF = """\
shared_buffers = 128MB
password_encryption = scram-sha-256
primary_conninfo = 'host=10.0.0.2 port=5432 user=rep password=S3CRET-PG-CONNINFO application_name=r1'
"""

# token -> reaches an output when literals are shown (the others are redacted or dropped on every path)
LITERALS = {
    "S3CRET-TIDB-CARD": True, "918273": True, "S3CRET-INVENTORY": True, "S3CRET-JMETER": True, "31337": True,
    "S3CRET-MY-FATAL": True, "S3CRET-PG-STMT": True,
    "s3cret-pg-key": False, "S3CRET-PG-ROW": False, "S3CRET-PG-PARAM": False, "S3CRET-PG-PANIC": False,
    "S3CRET-MY-DUP": False, "S3CRET-MY-QUERY": False, "S3CRET-MY-SSN": False,
}
NAMES = ("prod-s3cret-host", "tidbs3cretuser", "10.77.1.9", "pgs3cretuser", "pgs3cretdb", "mys3cretdb", "mys3cretuser", "10.88.7.6")
NAMES_SHOWN = NAMES[:5]  # an aborted connection is no timeline event and no finding's evidence: its names reach no output


def _jtl() -> str:
    rows = []
    for i in range(20):
        start_ms = 1716000000000 + i * 500
        rows.append(f"{start_ms},12,Login,200,OK,Thread Group 1-1,text,true,,100,50,1,1,null,10,0,1\n")
        rows.append(f'{start_ms + 100},30,"{JTL_SQL_LABEL}",200,OK,Thread Group 1-1,text,true,,100,50,1,1,null,28,0,1\n')
    return JTL_HEADER + "".join(rows)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("planted") / "capture"
    files = {"manifest.json": MANIFEST, "db/tidb.log": TIDB_LOG, "db/postgresql.log": PG_LOG,
             "db/mysql-error.log": MYSQL_ERROR_LOG, "app/results.jtl": _jtl(), "db/postgresql.conf": PG_CONF}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def run_all_formats(capture: Path | None, out: Path, *flags: str) -> dict[str, str]:
    """The three outputs of one run of the CLI (``analyze``, or ``demo`` when ``capture`` is None)."""
    out.mkdir(parents=True, exist_ok=True)
    command = ["analyze", str(capture)] if capture else ["demo"]
    result = CliRunner().invoke(app, [*command, *flags, "-f", "html", "-f", "json", "-f", "md", "-o", str(out / "report")])
    assert result.exit_code in (0, 1, 3), result.output
    texts = {fmt: (out / f"report.{fmt}").read_text(encoding="utf-8") for fmt in ("html", "json", "md")}
    jsonschema.validate(json.loads(texts["json"]), SCHEMA)
    return texts


@pytest.fixture(scope="module")
def outputs(planted: Path, tmp_path_factory: pytest.TempPathFactory):
    cache: dict[tuple[str, ...], dict[str, str]] = {}

    def run(*flags: str) -> dict[str, str]:
        if flags not in cache:
            cache[flags] = run_all_formats(planted, tmp_path_factory.mktemp("out"), *flags)
        return cache[flags]

    return run


def found(texts: dict[str, str], token: str) -> list[str]:
    return [fmt for fmt, text in texts.items() if token in text]


# --- literals in log lines and labels -------------------------------------------------------


def test_no_planted_literal_in_any_output_by_default(outputs):
    texts = outputs()
    assert {token: found(texts, token) for token in LITERALS if found(texts, token)} == {}


def test_the_planted_literals_reach_the_outputs_with_show_literals(outputs):
    texts = outputs("--show-literals")
    missing = {token: found(texts, token) for token, reaches in LITERALS.items() if reaches and len(found(texts, token)) < 2}
    assert missing == {}  # each token in at least two formats: its path to the reader is real
    assert json.loads(texts["json"])["capture"]["privacy"]["literals"] == "shown"


def test_a_password_in_a_config_line_is_in_no_output_unless_literals_are_shown(outputs):
    """postgresql.conf's primary_conninfo reaches the JSON's metrics.settings (for compare) with its password
    replaced; the settings around it keep their values; --show-literals shows it as written."""
    assert found(outputs(), "S3CRET-PG-CONNINFO") == []
    settings = {row["name"]: row["value"] for row in json.loads(outputs()["json"])["metrics"]["settings"]}
    assert settings["primary_conninfo"] == "host=10.0.0.2 port=5432 user=rep password=[redacted] application_name=r1"
    assert settings["password_encryption"] == "scram-sha-256"
    assert found(outputs("--show-literals"), "S3CRET-PG-CONNINFO") == ["json"]


def test_redacted_log_lines_and_labels_keep_their_shape(outputs):
    document = json.loads(outputs()["json"])
    messages = [e["message"] for e in document["metrics"]["timeline"]["events"]]
    assert any('[sql="SELECT * FROM acct WHERE card_no = ? AND pin = ?"] [err="runtime error"]' in m for m in messages)
    assert any(m.endswith("query: SELECT * FROM acct WHERE ssn = ?") for m in messages)
    text = outputs()["json"]
    assert "SELECT * FROM acct WHERE card = ? AND amount > ?" in text  # the JDBC label, redacted
    assert "Login" in text  # a plain label is kept
    assert document["capture"]["privacy"]["literals"] == "replaced"


@pytest.mark.parametrize(
    ("line", "dialect", "expected"),
    [
        ('[FATAL] [conn.go:1] ["panic"] [sql="SELECT a FROM t WHERE b = \\"x\\" AND c = \'S\'"] [conn=5]', "mysql",
         '[FATAL] [conn.go:1] ["panic"] [sql="SELECT a FROM t WHERE b = ? AND c = ?"] [conn=5]'),
        ("[WARN] [x.go:9] [prev_stmt=\"UPDATE t SET a = 'S' WHERE id = 5\"] [txn_sql=DELETE FROM t WHERE id=7]", "mysql",
         "[WARN] [x.go:9] [prev_stmt=\"UPDATE t SET a = ? WHERE id = ?\"] [txn_sql=DELETE FROM t WHERE id=?]"),
        ('[FATAL] [x.go:1] [sql="SELECT * FROM t WHERE card = \'S3CRET cut at 400 characters', "mysql",
         '[FATAL] [x.go:1] [sql="SELECT * FROM t WHERE card = ?'),
        ("[FATAL] [lib.rs:465] [\"key is locked\"] [key=7480000000000000FF3F5F698000000000000001] [primary_lock=\"t\\200\\000S\"] [region_id=8]",
         "mysql", "[FATAL] [lib.rs:465] [\"key is locked\"] [key=?] [primary_lock=?] [region_id=8]"),
        ("DETAIL:  Key (email)=(s@example.com) already exists.", "postgresql", "DETAIL:  Key (email)=(?) already exists."),
        ("DETAIL:  Key (lower(email::text))=(s@x (y)) already exists.", "postgresql", "DETAIL:  Key (lower(email::text))=(?) already exists."),
        ("DETAIL:  Key (acct_id)=(42) is not present in table \"acct\".", "postgresql",
         "DETAIL:  Key (acct_id)=(?) is not present in table \"acct\"."),
        ("DETAIL:  Failing row contains (7, S, null, 1200.00).", "postgresql", "DETAIL:  Failing row contains (?)."),
        ("DETAIL:  parameters: $1 = 'S', $2 = '42', $3 = NULL", "postgresql", "DETAIL:  parameters: $1 = ?, $2 = ?, $3 = NULL"),
        ("STATEMENT:  INSERT INTO users (email) VALUES ('S');", "postgresql", "STATEMENT:  INSERT INTO users (email) VALUES (?);"),
        ("ERROR:  invalid input syntax for type integer: \"S\"", "postgresql", "ERROR:  invalid input syntax for type integer: \"?\""),
        ("LOG:  duration: 0.274 ms  execute S_1: UPDATE t SET a = 5 WHERE b = 'S'", "postgresql",
         "LOG:  duration: 0.274 ms  execute S_1: UPDATE t SET a = ? WHERE b = ?"),
        ("LOG:  statement: SELECT $$S$$, E'S\\'s'", "postgresql", "LOG:  statement: SELECT ?, ?"),
        ("[ERROR] Slave SQL: Error 'Duplicate entry 'S' for key 'PRIMARY'' on query. Default database: 'bank'. "
         "Query: 'INSERT INTO t VALUES (5, 'S')', Gtid 0-1-5", "mysql",
         "[ERROR] Slave SQL: Error 'Duplicate entry '?' for key 'PRIMARY'' on query. Default database: 'bank'. "
         "Query: 'INSERT INTO t VALUES (?, ?)', Gtid 0-1-5"),
        ("[ERROR] mariadbd: Table './bank/acct' is marked as crashed; query: SELECT * FROM acct WHERE ssn = 'S'", "mysql",
         "[ERROR] mariadbd: Table './bank/acct' is marked as crashed; query: SELECT * FROM acct WHERE ssn = ?"),
        ("Query (0x7f3b2c01a8b0): UPDATE acct SET pin = 1234 WHERE id = 9", "mysql", "Query (0x7f3b2c01a8b0): UPDATE acct SET pin = ? WHERE id = ?"),
        ("[ERROR] Incorrect integer value: 'S' for column 'a' at row 1", "mysql", "[ERROR] Incorrect integer value: '?' for column 'a' at row 1"),
        ("[Warning] something about SELECT name FROM acct WHERE card = 'S' LIMIT 1", "mysql",
         "[Warning] something about SELECT name FROM acct WHERE card = ? LIMIT ?"),
    ],
)
def test_log_line_shapes_are_redacted(line: str, dialect: str, expected: str):
    assert redact_text.redact_log_line(line, dialect) == expected


@pytest.mark.parametrize(
    "line",
    [
        "[2024/05/14 10:00:01.123 +08:00] [INFO] [printer.go:34] [\"Welcome to TiDB.\"] [\"Release Version\"=v7.5.1]",
        "2024-05-14T10:09:00,123456+08:00 Out of memory: Killed process 4242 (tikv-server) total-vm:1234kB",
        "LOG:  server process (PID 8997) was terminated by signal 9: Killed",
        "2026-11-29 22:53:49 4 [Warning] Aborted connection 4 to db: 'bank' user: 'app' host: '10.1.2.3' (Got timeout)",
    ],
)
def test_lines_without_sql_are_kept(line: str):
    assert redact_text.redact_log_line(line) == line


def test_labels_that_read_as_sql_are_redacted_others_kept():
    assert redact_text.redact_label("update acct set pin = 1234 where id = 5") == "update acct set pin = ? where id = ?"
    assert redact_text.redact_label("CALL transfer(5, 'S')") == "CALL transfer(?, ?)"
    for plain in ("Login", "HTTP Request", "Step 2", "Transfer 1-278", "select account"):
        assert redact_text.redact_label(plain) == plain


def test_log_line_redaction_is_linear():
    for piece in ("[sql=\"\\'", " Key (", "Failing row contains (", "Query: '", "SELECT ", "[a" * 50, "invalid input syntax for x: \""):
        hostile = piece * (200_000 // len(piece))
        started = time.perf_counter()
        redacted = redact_text.redact_log_line(hostile)
        assert time.perf_counter() - started < 5.0, piece  # ~0.05 s measured each: a quadratic path takes minutes here
        assert len(redacted) <= redact_text.MAX_LINE_CHARS


# --- --pseudonymize ---------------------------------------------------------------------------


def test_pseudonymize_replaces_the_planted_names_in_every_output(outputs):
    plain, texts = outputs(), outputs("--pseudonymize")
    assert [name for name in NAMES_SHOWN if not found(plain, name)] == []  # they reach an output without the option
    assert {name: found(texts, name) for name in NAMES if found(texts, name)} == {}
    document = json.loads(texts["json"])
    privacy = document["capture"]["privacy"]
    assert privacy["names"] == "pseudonymized" and privacy["pseudonyms"]["hosts"] >= 1 and privacy["pseudonyms"]["ipv4"] >= 1
    fatal = next(e["message"] for e in document["metrics"]["timeline"]["events"] if "[FATAL] [conn.go" in e["message"])
    pseudonym = re.search(r"\[user=(user_\d+)\] \[ip=(10\.\d+\.\d+\.9)\]", fatal)
    assert pseudonym, fatal
    # the same line, with the same pseudonyms, in the other formats (Markdown escapes its brackets)
    assert pseudonym.group(0) in html.unescape(texts["html"])
    assert markdown.inline(pseudonym.group(0)) in texts["md"]


def test_the_report_states_both_modes(outputs):
    for flags, literals, names in (((), "replaced by ?", "as captured"), (("--show-literals", "--pseudonymize"), "shown as captured", "replaced by pseudonyms")):
        texts = outputs(*flags)
        for fmt in ("html", "md"):
            line = next(x for x in texts[fmt].splitlines() if "Privacy:" in x)
            assert literals in line and names in line, (fmt, line)


@pytest.fixture(scope="module")
def demo_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, str], dict[str, str]]:
    return (run_all_formats(None, tmp_path_factory.mktemp("demo")),
            run_all_formats(None, tmp_path_factory.mktemp("demo-p"), "--pseudonymize"))


IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d]|\.\w)")


def test_demo_pseudonymized_has_none_of_its_names_or_addresses(demo_runs):
    plain, texts = demo_runs
    addresses = {a for text in plain.values() for a in IPV4.findall(text)}
    assert len(addresses) >= 5 and sum(len(IPV4.findall(t)) for t in (plain["html"],)) >= 100
    assert {a: found(texts, a) for a in addresses if found(texts, a)} == {}
    document = json.loads(texts["json"])
    assert "bank-core-db03" in plain["html"] and not found(texts, "bank-core-db03")
    assert document["metrics"]["host"]["hostname"] == "host-1"
    profile = document["metrics"]["sql_profile"][0]
    assert profile["users"] == ["user_1"] and profile["dbs"] == ["db_1"]  # app, bank
    for fmt, text in texts.items():  # app and bank are left only in member paths and the capture's file name
        stripped = text.replace("capture/app/", "").replace("bank-core-demo.tar.gz", "")
        assert not re.search(r"(?<![A-Za-z0-9_])(?:app|bank)(?![A-Za-z0-9_])", stripped), fmt


def test_demo_pseudonyms_are_the_same_in_every_format(demo_runs):
    _, texts = demo_runs
    document = json.loads(texts["json"])
    titles = [f["title"] for f in document["findings"] if re.search(r"10\.0\.\d+\.\d+|host-\d", f["title"])]
    assert titles  # findings naming instances (HAProxy servers, TiDB instances)
    for title in titles:
        assert title in html.unescape(texts["html"]), title
        assert title.replace("|", "\\|") in texts["md"] or title in texts["md"], title
    mapped = {fmt: set(re.findall(r"10\.0\.\d+\.\d+|(?:host|user|db)-\d+", text)) for fmt, text in texts.items()}
    assert mapped["html"] <= mapped["json"] and mapped["md"] <= mapped["json"]


# --- pseudonyms, unit -------------------------------------------------------------------------


def test_ipv4_pseudonyms_keep_subnets_and_never_equal_a_real_address():
    names = pseudonymize.Names(hosts=("db01.corp", "vm"), dbs=("bank",))
    text = ("10.0.0.5 and 10.0.0.6, 192.168.7.5 talk to db01.corp (not db01.corpus, not mydb01.corp_x); 127.0.0.1, "
            "kernel 5.10.0-136.12.0.86.oe; vm.swappiness on vm; bank.acct, bank_audit")
    replace, counts = pseudonymize.pseudonymizer(names, [text])
    assert replace(text) == (
        "10.0.1.5 and 10.0.1.6, 10.0.2.5 talk to host-1 (not db01.corpus, not mydb01.corp_x); 127.0.0.1, "
        "kernel 5.10.0-136.12.0.86.oe; vm.swappiness on host-2; db_1.acct, bank_audit")
    assert (counts.hosts, counts.dbs, counts.ipv4) == (2, 1, 3)
    assert replace("db01.corp at 192.168.7.5") == "host-1 at 10.0.2.5"  # the same pseudonym everywhere


def test_ipv6_addresses_are_replaced_and_code_symbols_kept():
    text = "from [2001:db8::5]:4000 and 2001:0db8:0:0:0:0:0:5, fe80::1ff:fe23:4567:890a; std::vector ab::cd 10:00:01 ::1"
    replace, counts = pseudonymize.pseudonymizer(pseudonymize.Names(), [text])
    assert replace(text) == "from [fd00::1]:4000 and fd00::1, fd00::2; std::vector ab::cd 10:00:01 ::1"
    assert counts.ipv6 == 2


def test_names_are_collected_from_tables_and_log_lines():
    import polars as pl

    from dbdiag import tables as t

    tables = {
        t.HOST_FACT: pl.DataFrame({"key": ["hostname", "kernel"], "value": ["db_07.corp", "6.1"], "source": ["m", "m"]}),
        t.STATEMENT: pl.DataFrame({"user": ["app[app]", "root"], "client_host": ["web-3", "10.1.1.1"], "db": ["bank", None],
                                   "instance": ["tidb-0.peer:4000", None]}),
        t.EVENT: pl.DataFrame({"host": [None], "message": ["Access denied for user 'eve'@'jump-1' (using password: YES)"]}),
        t.PROXY_STAT: pl.DataFrame({"server": ["FRONTEND", "tidb-10.20.1.11", "tidb_b"], "type": ["frontend", "server", "server"]}),
    }
    names = pseudonymize.collect_names(tables, ["sosreport-dbhost9-2024-05-14-abcdef/sos_commands/x"])
    assert names == pseudonymize.Names(hosts=("db_07.corp", "dbhost9", "jump-1", "tidb-0.peer", "tidb_b", "web-3"),
                                       users=("app", "eve"), dbs=("bank",))


def test_pseudonymizing_a_big_document_is_quick():
    hosts = tuple(f"node{i:04d}.example.com" for i in range(2_000))
    document = {"lines": [f"{hosts[i % 2000]} 10.{i % 250}.{i % 7}.{i % 200} SELECT std::move app{i}" for i in range(50_000)]}
    started = time.perf_counter()
    out, counts = pseudonymize.pseudonymize_document(document, pseudonymize.Names(hosts=hosts))
    assert time.perf_counter() - started < 20.0  # ~1 s measured (3 MB of text, 2,000 names)
    assert counts.hosts == 2_000 and not any("example.com" in line for line in out["lines"])


def test_a_deadlock_detail_keeps_its_pids_and_loses_its_literals():
    from dbdiag import redact_text

    detail = ("Process 15354 waits for ShareLock on transaction 747; blocked by process 15355.\n"
              "Process 15354: UPDATE accounts SET balance = balance - 4111 WHERE id = 1;\n"
              "Process 15355: UPDATE accounts SET note = 'card 4111111111111111'\n  WHERE id = 2;")
    redacted = redact_text.redact_log_line(detail, "postgresql")
    assert "Process 15354: UPDATE" in redacted and "Process 15355: UPDATE" in redacted  # was "Process ?:"
    assert "4111" not in redacted and "card" not in redacted
