"""Packaging: every folder with an __init__.py is installed, package data is declared, majors are capped."""

from __future__ import annotations

import re
import tomllib

from tests.conftest import REPO

PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PACKAGE_DIRS = PYPROJECT["tool"]["setuptools"]["package-dir"]


def _installed_name(folder: str) -> str | None:
    for package, root in sorted(PACKAGE_DIRS.items(), key=lambda item: -len(item[1])):
        if folder == root or folder.startswith(root + "/"):
            return package + folder[len(root):].replace("/", ".")
    return None


def test_every_python_package_folder_is_listed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    folders = {
        str(init.parent.relative_to(REPO))
        for root in ("analyzer", "rules", "report_templates", "fixtures/demo")
        for init in (REPO / root).rglob("__init__.py")
    }
    assert {_installed_name(folder) for folder in folders} == listed


def test_templates_schema_and_demo_are_package_data():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]
    assert (REPO / "analyzer/schema/findings.schema.json").is_file() and "schema/*.json" in data["dbdiag"]
    assert (REPO / "report_templates/report.html.j2").is_file() and "*.j2" in data["dbdiag.report_templates"]
    assert (REPO / "fixtures/demo/bank-core-demo.tar.gz").is_file() and "*.tar.gz" in data["dbdiag.demo_capture"]


def test_majors_that_change_apis_are_capped():
    """``"polars>=2.1,<3"``: floors come from benchmarks/check_lowest_deps.sh, caps stop the next major."""
    requirements = {re.match(r"[A-Za-z0-9_.-]+", spec).group(0): spec for spec in PYPROJECT["project"]["dependencies"]}
    for name in ("polars", "sqlglot", "typer"):
        assert re.search(r">=\s*\d", requirements[name]) and re.search(r",\s*<\s*\d", requirements[name]), requirements[name]
