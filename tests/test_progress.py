"""The progress line: the stage and the bytes on a terminal, nothing when standard error is not one."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import subprocess
import sys
import tarfile
from pathlib import Path

from rich.console import Console
from rich.progress import Progress as Bar

from dbdiag.progress import NO_PROGRESS, TerminalProgress
from tests.conftest import REPO
from tests.hostile import OK_LOG

SGR_COLOUR = re.compile(rb"\x1b\[[0-9;]*3[0-9](?:;[0-9]+)*m")  # a foreground colour


def test_stages_reset_the_bytes_and_advance_names_the_member() -> None:
    bar = Bar(console=Console(file=io.StringIO(), force_terminal=True), auto_refresh=False)
    progress = TerminalProgress(bar)
    progress.stage("parse", 1000)
    progress.advance(0, "db/slow.log")
    progress.advance(400)
    [task] = bar.tasks
    assert (task.description, task.total, task.completed) == ("parse db/slow.log", 1000, 400)
    progress.advance(600, "x" * 200)
    assert task.completed == 1000 and task.description.startswith("parse …") and len(task.description) == len("parse ") + 48
    progress.stage("derive")
    [task] = bar.tasks
    assert (task.description, task.total, task.completed) == ("derive", None, 0)
    NO_PROGRESS.stage("parse", 10)  # the silent one takes the same calls
    NO_PROGRESS.advance(10, "db/slow.log")


def _run_on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bytes]:
    """dbdiag with its standard error on a pseudo-terminal: the return code and every byte written there."""
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "dbdiag", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the follower side closed: the process is done
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    return process.wait(timeout=60), seen


def test_a_terminal_sees_the_stages_and_a_pipe_sees_none(tmp_path: Path) -> None:
    log = tmp_path / "softirqs.txt"
    log.write_bytes(OK_LOG * 200)
    env = {**os.environ, "COLUMNS": "120", "NO_COLOR": "1"}
    code, seen = _run_on_a_terminal(["analyze", str(log), "-f", "json", "-o", str(tmp_path / "r.json")], tmp_path, env)
    assert code == 0, seen
    assert b"parse" in seen and b"report" in seen and b"%" in seen
    assert not SGR_COLOUR.search(seen), "NO_COLOR is set: no colours"
    assert b"wrote " in seen  # the summary lines come after the line is gone
    piped = subprocess.run([sys.executable, "-m", "dbdiag", "analyze", str(log), "-f", "json", "-o", str(tmp_path / "p.json")],
                           cwd=tmp_path, capture_output=True, timeout=60, env=env)
    assert piped.returncode == 0
    assert b"\x1b" not in piped.stderr and b"parse" not in piped.stderr


def _member(archive: str, name: str) -> bytes:
    with tarfile.open(REPO / "fixtures" / "lockwait" / archive) as tar:
        return tar.extractfile(name).read()


def test_the_big_log_parsers_tell_the_bytes_of_each_piece(monkeypatch) -> None:
    from dbdiag.parsers import mysql_slowlog, pg_stderr, tidb_slowlog
    from dbdiag.parsers.base import ParseContext
    from dbdiag.parsers.mysql_slowlog import pieces

    with tarfile.open(REPO / "fixtures" / "demo" / "bank-core-demo.tar.gz") as tar:
        tidb = next(tar.extractfile(m).read() for m in tar.getmembers() if m.name.endswith("tidb_slow_query.log"))
    for module, spec, data in (
        (pieces, mysql_slowlog.SPEC, _member("mariadb-lock-wait.tar.gz", "capture/db/mariadb-slow.log")),
        (pg_stderr, pg_stderr.SPEC, _member("pg-lock-wait.tar.gz", "capture/db/postgresql.log")),
        (tidb_slowlog, tidb_slowlog.SPEC, tidb),
    ):
        read = (lambda data, ctx: spec.parse_bytes(data, ctx)) if spec.parse_bytes else (lambda data, ctx: spec.parse(data.decode(), ctx))
        whole = read(data, ParseContext("db/log"))
        monkeypatch.setattr(module, "CHUNK_CHARS", 4096)  # pieces of a few KB: several of them
        told: list[int] = []
        cut = read(data, ParseContext("db/log", on_bytes=told.append))
        assert len(told) > 3, spec.kind
        assert sum(told) <= len(data) and sum(told) >= len(data) - len(told), spec.kind  # the newline between pieces at most
        for name, frame in whole.tables.items():  # being told changes nothing read
            assert cut.tables[name].equals(frame), (spec.kind, name)
