"""Shared test fixtures: where the shared corpus lives, what happens without it, the golden-file switch.

The corpus of real tool outputs lies beside the repository (``../shared/corpus``). CI always has it
and fails at once without it. A plain clone may not: then every test that reads it is skipped with
one reason, and the rest of the suite runs.
"""

from __future__ import annotations

import compileall
import os
from pathlib import Path

import pytest

# The real-server session fixtures, registered here once: imported into each test module instead,
# each module got its own FixtureDef and started its own pair of servers (six pairs in one run).
from tests.real_servers import mariadb, postgres  # noqa: E402,F401  (pytest fixtures)

REPO = Path(__file__).resolve().parent.parent
CORPUS_ABSENT = "../shared/corpus not beside the repo: corpus tests skipped"
# The one name a corpus listing gives without the corpus: a parametrisation still has a case, and
# that case skips when it reads its file (empty_parameter_set_mark = fail_at_collect stays strict).
ABSENT_NAME = "corpus-absent"


def skip_without_corpus() -> None:
    """Skip the running test for want of the corpus (one line, so ``-ra`` groups every such skip)."""
    pytest.skip(CORPUS_ABSENT)


class AbsentCorpus(type(Path())):
    """A path under a corpus that is not there: any disk access skips the test instead of failing.

    Every read goes through ``os.fspath`` (``open``, ``tarfile.open``, ``iterdir``, ``glob``,
    ``stat``), so tests that build paths from ``CORPUS`` need no marker of their own.
    """

    def __fspath__(self) -> str:
        skip_without_corpus()
        return super().__fspath__()  # not reached: skip raises


def _corpus_root(folder: Path) -> Path:
    """The corpus folder, or an ``AbsentCorpus`` for it when it is missing or empty."""
    present = folder.is_dir() and any(folder.iterdir())
    return folder if present else AbsentCorpus(folder)


CORPUS = _corpus_root(REPO.parent / "shared" / "corpus")


def corpus_present() -> bool:
    return not isinstance(CORPUS, AbsentCorpus)


def corpus_names(folder: str, pattern: str = "*", exclude: tuple[str, ...] = ("SOURCES.md",)) -> list[str]:
    """Sorted names of the files in ``CORPUS / folder`` matching ``pattern``, for parametrising.

    Without the corpus: ``[ABSENT_NAME]``, one case that skips when it reads its file.
    ``corpus_names("perf", "flamegraph__*")`` -> ``["flamegraph__perf-dd-stacks-01.txt", ...]``.
    """
    if not corpus_present():
        return [ABSENT_NAME]
    return sorted(path.name for path in (CORPUS / folder).glob(pattern) if path.name not in exclude)


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pytest_configure(config: pytest.Config) -> None:
    if not corpus_present() and _in_ci():
        raise pytest.UsageError(f"shared corpus not found at {CORPUS}: CI must lay ../shared/corpus beside the repo")
    # The dbdiag processes tests start read bytecode: with PYTHONDONTWRITEBYTECODE set (as on the machines
    # CI runs on) each of them compiled the ~180 modules it imports anew, about 0.5 s a process.
    for package in ("analyzer", "rules", "report_templates"):
        compileall.compile_dir(REPO / package, quiet=1)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/* from the current parser output instead of comparing",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    """Report every corpus skip at one place: pytest puts skips from fixtures at each test, and
    ``-ra`` would list one line per test module instead of the one reason."""
    report = yield
    if report.skipped and isinstance(report.longrepr, tuple) and report.longrepr[2].endswith(CORPUS_ABSENT):
        report.longrepr = (__file__, skip_without_corpus.__code__.co_firstlineno, report.longrepr[2])
    return report


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not corpus_present():
        skip_without_corpus()
    return CORPUS
