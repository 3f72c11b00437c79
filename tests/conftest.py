"""Shared test fixtures: where the shared corpus lives and the golden-file switch."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


def pytest_configure(config: pytest.Config) -> None:
    # Tests parametrised over corpus files would silently collect nothing without it.
    if not CORPUS.is_dir() or not any(CORPUS.iterdir()):
        raise pytest.UsageError(f"shared corpus not found at {CORPUS}: tests need ../shared/corpus beside the repo")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        help="rewrite tests/golden/* from the current parser output instead of comparing",
    )


@pytest.fixture
def update_goldens(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update-goldens"))


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.fail(f"shared corpus not found at {CORPUS}; CI lays it beside the repo")
    return CORPUS
