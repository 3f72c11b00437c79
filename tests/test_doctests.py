"""Run the examples in docstrings of every dbdiag module (they are documentation that must stay true)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import dbdiag
import dbdiag.rules


def _modules() -> list[str]:
    # dbdiag.rules lives in another folder (rules/), so it is walked on its own.
    names = {info.name for info in pkgutil.walk_packages(dbdiag.__path__, "dbdiag.")}
    names |= {info.name for info in pkgutil.walk_packages(dbdiag.rules.__path__, "dbdiag.rules.")}
    return sorted(name for name in names if not name.endswith("__main__"))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name: str):
    module = importlib.import_module(name)
    failures, _ = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert failures == 0, f"{name}: {failures} docstring example(s) failed (python -m doctest -v)"
