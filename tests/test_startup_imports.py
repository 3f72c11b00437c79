"""Start-up: the heavy libraries are imported where a run first needs them, never by importing the command line,
and no module of dbdiag compiles a regular expression when it is imported.

Each probe is a fresh interpreter (``sys.modules`` of this test process says nothing). No timing here:
the speed target (a 3 KB log in under 0.5 s) is measured by ``benchmarks/bench_startup.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.captures import capture_text

HEAVY = ("polars", "numpy", "pyarrow", "sqlglot", "jinja2", "rich")
# Prints the heavy modules loaded, after a JSON analysis of argv[1] (when given) into argv[2].
PROBE = (
    "import sys\n"
    "from dbdiag.cli import run\n"
    "if len(sys.argv) > 1:\n"
    "    assert run(['analyze', sys.argv[1], '-f', 'json', '-o', sys.argv[2]]) == 0\n"
    f"print(' '.join(m for m in {HEAVY!r} if m in sys.modules))\n"
)


# Every module body of dbdiag that a run executes (the command line, the pipeline with every registered parser,
# derivation and rule, the report), imported with ``re._compile`` watched (what re.compile, re.match...
# go through): prints each compile made while one of dbdiag's module bodies runs (itself or a module it imports).
COMPILE_PROBE = (
    "import importlib.util, re, traceback\n"
    "import polars, typer  # patterns of their own, compiled when they load\n"
    "import tarfile, zipfile  # the stdlib's archive readers (Debian's 3.11.2 tarfile compiles its pax-length pattern)\n"
    "ours = tuple(importlib.util.find_spec(name).submodule_search_locations[0] for name in ('dbdiag', 'dbdiag.rules'))\n"
    "plain = re._compile\n"
    "def watched(pattern, flags):\n"
    "    bodies = [f for f in traceback.extract_stack() if f.name == '<module>' and f.filename.startswith(ours)]\n"
    "    if bodies:\n"
    "        print(f'{bodies[-1].filename}:{bodies[-1].lineno} {str(pattern)[:60]!r}')\n"
    "    return plain(pattern, flags)\n"
    "re._compile = watched\n"
    "import dbdiag.cli, dbdiag.pipeline, dbdiag.report\n"
)


def loaded_after(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def head(capture: str, member: str, lines: int) -> str:
    return "".join(capture_text(capture, member).splitlines(keepends=True)[:lines])


def test_importing_the_command_line_loads_no_heavy_library() -> None:
    assert loaded_after() == set()


def test_a_small_postgresql_log_needs_polars_only(tmp_path: Path) -> None:
    """The first lines of pgbench's log (start-up, CREATE DATABASE, connections): no SQL is parsed with sqlglot,
    no numpy or pyarrow path is taken, and JSON needs no templates."""
    log = tmp_path / "postgresql.log"
    log.write_text(head("postgres-pgbench-debian12.tar.gz", "capture/db/postgresql.log", 10))
    assert loaded_after(str(log), str(tmp_path / "r.json")) == {"polars"}


def test_a_small_mariadb_slow_log_parses_no_sql_with_sqlglot(tmp_path: Path) -> None:
    """The server banners, BEGIN and two point SELECTs with their ``# explain:`` rows of sysbench's slow log:
    no write is a candidate row-lock wait, so lock-wait parses nothing. numpy and pyarrow are the slow-log
    scanner's own (its arrays and Arrow string views), not checked here."""
    log = tmp_path / "mariadb-slow.log"
    log.write_text(head("mariadb-sysbench-debian12.tar.gz", "capture/db/mariadb-slow.log", 34))
    assert loaded_after(str(log), str(tmp_path / "r.json")) & {"sqlglot", "jinja2", "rich"} == set()


def test_no_module_compiles_a_pattern_when_imported() -> None:
    """Patterns are compiled on first use (``dbdiag.patterns.lazy_compile``), and modules that compile their own
    when imported (``tomllib``, ``shlex``) are imported where they are used."""
    done = subprocess.run([sys.executable, "-c", COMPILE_PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
