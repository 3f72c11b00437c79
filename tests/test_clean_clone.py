"""The suite in a newcomer's clone: no ``../shared/corpus`` beside it, no ``dbdiag`` on PATH.

The corpus checks run pytest on a small tree made of this conftest, this pyproject and three tests
(one plain, one reading the corpus, one parametrised over corpus files), in a folder with no
``../shared`` beside it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import CORPUS_ABSENT, REPO

SMALL_SUITE = '''
import pytest
from conftest import CORPUS, corpus_names

def test_plain():
    assert 1 + 1 == 2

def test_reads_the_corpus():
    assert (CORPUS / "SOURCES.md").read_text()

def test_uses_the_fixture(corpus):
    assert corpus.is_dir()

@pytest.mark.parametrize("name", corpus_names("perf", "flamegraph__*"))
def test_each_perf_file(name):
    assert (CORPUS / "perf" / name).read_bytes()
'''


def _run_small_suite(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    root = tmp_path / "clone" / "repo"  # tmp_path/clone/shared does not exist
    (root / "tests").mkdir(parents=True)
    shutil.copy(REPO / "pyproject.toml", root)  # the strict empty_parameter_set_mark with it
    shutil.copy(REPO / "tests" / "conftest.py", root / "tests")
    shutil.copy(REPO / "tests" / "real_servers.py", root / "tests")  # the conftest registers its fixtures
    (root / "tests" / "test_small.py").write_text(SMALL_SUITE, encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if key != "CI"}
    if ci is not None:
        env["CI"] = ci
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_without_corpus_the_rest_runs_and_corpus_tests_skip_with_one_reason(tmp_path: Path):
    run = _run_small_suite(tmp_path, ci=None)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.search(r"^1 passed, 3 skipped in ", run.stdout, re.MULTILINE), run.stdout
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped == [f"SKIPPED [3] tests/conftest.py:{_skip_line()}: {CORPUS_ABSENT}"], run.stdout


def test_without_corpus_ci_stops_at_once(tmp_path: Path):
    run = _run_small_suite(tmp_path, ci="true")
    assert run.returncode == 4, run.stdout + run.stderr
    assert "CI must lay ../shared/corpus beside the repo" in run.stderr


def _skip_line() -> int:
    from tests.conftest import skip_without_corpus

    return skip_without_corpus.__code__.co_firstlineno


def test_no_test_runs_dbdiag_from_path():
    """A bare ``dbdiag`` resolves through PATH, which a fresh venv's README command never sets."""
    bare = re.compile(r"""\(\s*\[\s*["']dbdiag["']|which\(\s*["']dbdiag["']""")  # run(["dbdiag", ...]), which("dbdiag")
    offenders = [
        f"{path.relative_to(REPO)}:{number}"
        for path in sorted((REPO / "tests").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if bare.search(line) and path.name != "test_clean_clone.py"
    ]
    assert offenders == []
