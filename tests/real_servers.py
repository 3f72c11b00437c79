"""Real MariaDB 10.11 and PostgreSQL 15 servers for tests that run a remedy's SQL on the real engine.

The fixtures ``mariadb`` and ``postgres`` are registered once, in ``tests/conftest.py`` (imported into each
test module, each module would start its own pair of servers); import the helpers (``run_sql``...)
and ask for them by name::

    def test_remedy_runs(mariadb):
        run_sql(mariadb, "CREATE TABLE t (a INT, KEY i (a)); ALTER TABLE t ALTER INDEX i IGNORED;")

Each server is private to the test session: a data directory under a fresh temporary directory, a
unix socket only (no TCP port), started once per session and stopped at its end, also when tests
fail (the fixture's ``finally``; the server also gets SIGTERM if the test process dies, by
``PR_SET_PDEATHSIG``). Each comes with a scratch database (``dbdiag_scratch``) the fixture creates;
``scratch_database(server)`` gives a fresh one for a test that wants its own tables.

When the binaries are absent every test that asks for a server is skipped with one reason naming the
missing file and the Debian package that provides it. When run as root, the servers run as root
(MariaDB ``--user=root``) or as the ``postgres`` user (PostgreSQL refuses root).

The clients are the engines' own command-line clients (``mariadb``, ``psql``): no Python driver is
needed, and what runs is exactly what a DBA would paste.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MARIADBD = Path("/usr/sbin/mariadbd")
MARIADB_INSTALL_DB = "mariadb-install-db"
MARIADB_CLIENT = "mariadb"
POSTGRES_BIN_DIRS = (Path("/usr/lib/postgresql/15/bin"),)
SCRATCH_DATABASE = "dbdiag_scratch"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
STATEMENT_TIMEOUT_S = 60.0
_PR_SET_PDEATHSIG = 1
_fresh_names = itertools.count(1)


class SqlError(AssertionError):
    """A statement the real server refused; the message quotes the statement and the server's error."""


@dataclass(frozen=True)
class RealServer:
    """One running server: its engine (``mariadb`` / ``postgres``), socket, scratch database, version."""

    engine: str
    socket_dir: Path
    socket: Path
    database: str
    version: str
    client_user: str
    run_as: str | None  # OS user the client runs as (None: the test's own user)


def _missing(path: Path | str, package: str) -> str | None:
    found = Path(path).exists() if os.sep in str(path) else shutil.which(str(path)) is not None
    return None if found else f"real servers: {path} not found (Debian package {package}): test skipped"


def _postgres_bin() -> Path | None:
    for folder in POSTGRES_BIN_DIRS:
        if (folder / "postgres").exists() and (folder / "initdb").exists():
            return folder
    return None


def _as_user(user: str | None):
    """A ``preexec_fn``: become ``user`` (when given), then die with the test process."""
    ids = pwd.getpwnam(user) if user else None

    def prepare() -> None:
        if ids is not None:
            os.setgid(ids.pw_gid)
            os.setuid(ids.pw_uid)
        # After setuid: changing credentials clears the parent-death signal.
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)

    return prepare


def _run(argv: list[str], user: str | None = None, stdin: str | None = None,
         timeout_s: float = START_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout_s,
                          preexec_fn=_as_user(user), check=False)


def _checked(argv: list[str], user: str | None = None) -> str:
    done = _run(argv, user)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout


def _wait_for_socket(socket: Path, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while not socket.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            _stop(process)
            raise RuntimeError(f"server did not start (socket {socket}); log tail:\n{tail}")
        time.sleep(0.2)


def _stop(process: subprocess.Popen, stop_signal: int = signal.SIGTERM) -> None:
    if process.poll() is not None:
        return
    process.send_signal(stop_signal)
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT_S)


def _work_dir(prefix: str, owner: str | None) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))  # short: unix socket paths < 108 bytes
    folder.chmod(0o755)
    if owner:
        ids = pwd.getpwnam(owner)
        os.chown(folder, ids.pw_uid, ids.pw_gid)
    return folder


def _start_mariadb(folder: Path) -> tuple[subprocess.Popen, RealServer]:
    as_root = os.geteuid() == 0
    user_opt = ["--user=root"] if as_root else []
    data, socket, log = folder / "data", folder / "mysql.sock", folder / "error.log"
    _checked([MARIADB_INSTALL_DB, *user_opt, f"--datadir={data}", "--auth-root-authentication-method=normal",
              "--skip-test-db"])
    process = subprocess.Popen(
        [str(MARIADBD), "--no-defaults", *user_opt, f"--datadir={data}", f"--socket={socket}",
         "--skip-networking", f"--pid-file={folder / 'mariadbd.pid'}", f"--log-error={log}",
         "--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=_as_user(None))
    _wait_for_socket(socket, process, log)
    server = RealServer("mariadb", folder, socket, SCRATCH_DATABASE, "", "root", None)
    run_sql(server, f"CREATE DATABASE {SCRATCH_DATABASE}", database="")
    version = run_sql(server, "SELECT VERSION()").strip().splitlines()[-1]
    return process, RealServer("mariadb", folder, socket, SCRATCH_DATABASE, version, "root", None)


def _start_postgres(folder: Path, bin_dir: Path) -> tuple[subprocess.Popen, RealServer]:
    owner = "postgres" if os.geteuid() == 0 else None
    data, log = folder / "data", folder / "postgresql.log"
    _checked([str(bin_dir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], owner)
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(data), "-k", str(folder), "-c", "listen_addresses=",
             "-c", "fsync=off", "-c", "logging_collector=off", "-c", "shared_buffers=32MB"],
            stdout=subprocess.DEVNULL, stderr=log_file, preexec_fn=_as_user(owner))
    socket = folder / ".s.PGSQL.5432"
    _wait_for_socket(socket, process, log)
    server = RealServer("postgres", folder, socket, "postgres", "", "postgres", owner)
    _wait_for_postgres(server)
    run_sql(server, f"CREATE DATABASE {SCRATCH_DATABASE}")
    version = run_sql(server, "SHOW server_version").strip().splitlines()[-1]
    return process, RealServer("postgres", folder, socket, SCRATCH_DATABASE, version, "postgres", owner)


def _wait_for_postgres(server: RealServer) -> None:
    # The socket appears a moment before the server accepts queries (startup recovery).
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            run_sql(server, "SELECT 1")
            return
        except SqlError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def _serve(start, folder: Path, stop_signal: int) -> Iterator[RealServer]:
    process = None
    try:
        process, server = start()
        yield server
    finally:
        if process is not None:
            _stop(process, stop_signal)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def mariadb() -> Iterator[RealServer]:
    """A running MariaDB (``/usr/sbin/mariadbd``) with the scratch database ``dbdiag_scratch``."""
    reason = _missing(MARIADBD, "mariadb-server") or _missing(MARIADB_INSTALL_DB, "mariadb-server") \
        or _missing(MARIADB_CLIENT, "mariadb-client")
    if reason:
        pytest.skip(reason)
    folder = _work_dir("dbdiag-mariadb.", None)
    yield from _serve(lambda: _start_mariadb(folder), folder, signal.SIGTERM)


@pytest.fixture(scope="session")
def postgres() -> Iterator[RealServer]:
    """A running PostgreSQL 15 with the scratch database ``dbdiag_scratch``."""
    bin_dir = _postgres_bin()
    reason = (None if bin_dir else f"real servers: {POSTGRES_BIN_DIRS[0]}/postgres not found (Debian package "
              "postgresql-15): test skipped") or _missing("psql", "postgresql-client-15")
    if not reason and os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            reason = "real servers: running as root and no 'postgres' user to run PostgreSQL: test skipped"
    if reason:
        pytest.skip(reason)
    owner = "postgres" if os.geteuid() == 0 else None
    folder = _work_dir("dbdiag-pg.", owner)
    # SIGINT: PostgreSQL's "fast" shutdown (SIGTERM is "smart": it waits for clients).
    yield from _serve(lambda: _start_postgres(folder, bin_dir), folder, signal.SIGINT)


def scratch_database(server: RealServer) -> RealServer:
    """A new empty database on ``server`` (same server, another name) for a test's own tables."""
    name = f"{SCRATCH_DATABASE}_{os.getpid()}_{next(_fresh_names)}"
    run_sql(server, f"CREATE DATABASE {name}")
    return RealServer(server.engine, server.socket_dir, server.socket, name, server.version,
                      server.client_user, server.run_as)


# A statement ends at a ';' outside quotes, quoted names, comments and PostgreSQL dollar quotes.
_TOKEN = re.compile(
    r"""'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|`[^`]*`|--[^\n]*|\#[^\n]*|/\*.*?\*/"""
    r"""|(?P<dollar>\$[A-Za-z_]?\w*\$).*?(?P=dollar)|;""", re.S)


def split_statements(sql_text: str) -> list[str]:
    """The statements of ``sql_text``, each without its ``;``; comments and blank parts dropped.

    >>> split_statements("SELECT ';'; -- a; comment\\nANALYZE t;; DO $$ BEGIN PERFORM 1; END $$")
    ["SELECT ';'", 'ANALYZE t', 'DO $$ BEGIN PERFORM 1; END $$']
    """
    statements, start = [], 0
    for token in _TOKEN.finditer(sql_text):
        if token.group() == ";":
            statements.append(sql_text[start:token.start()])
            start = token.end()
    statements.append(sql_text[start:])
    return [text for text in (_strip_comments(part).strip() for part in statements) if text]


def _strip_comments(text: str) -> str:
    def keep(token: re.Match) -> str:
        value = token.group()
        return " " if value.startswith(("--", "#", "/*")) else value

    return _TOKEN.sub(keep, text)


def _client_argv(server: RealServer, database: str) -> list[str]:
    if server.engine == "mariadb":
        return [MARIADB_CLIENT, "--no-defaults", f"--socket={server.socket}", f"--user={server.client_user}",
                "--batch", "--skip-column-names", *([database] if database else [])]
    return ["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", str(server.socket_dir),
            "-U", server.client_user, "-d", database or "postgres", "-f", "-"]


def run_sql(server: RealServer, sql_text: str, database: str | None = None) -> str:
    """Run every statement of ``sql_text`` on ``server`` in one session, in order; return the output.

    Statements are split here (``split_statements``) and sent one per line group, each ended by
    ``;``, so the client runs each on its own (psql: each in autocommit, so ``CREATE INDEX
    CONCURRENTLY`` works). The first statement the server refuses raises ``SqlError`` quoting that
    statement and the server's message; the statements after it do not run.
    """
    statements = split_statements(sql_text)
    if not statements:
        raise SqlError(f"no SQL statement in {sql_text!r}")
    script, first_line = [], []
    line = 1
    for statement in statements:
        first_line.append(line)
        script.append(statement + ";\n")
        line += statement.count("\n") + 1
    argv = _client_argv(server, server.database if database is None else database)
    done = _run(argv, server.run_as, "".join(script), STATEMENT_TIMEOUT_S)
    if done.returncode != 0 or "ERROR" in done.stderr:
        raise SqlError(f"{server.engine} {server.version}: {_failed(statements, first_line, done.stderr)}")
    return done.stdout


def _failed(statements: list[str], first_line: list[int], stderr: str) -> str:
    """Which statement failed (from the client's ``at line N`` / ``<stdin>:N:``) and the server's words."""
    found = re.search(r"at line (\d+)|<stdin>:(\d+):", stderr)
    # The mariadb client echoes the failed statement between dashes: keep the server's words only.
    errors = [line for line in stderr.splitlines() if "ERROR" in line]
    message = "\n".join(errors) if errors else stderr.strip()
    if not found:
        return message
    error_line = int(found.group(1) or found.group(2))
    index = max(i for i, start in enumerate(first_line) if start <= error_line)
    return f"{statements[index]!r} refused: {message}"
