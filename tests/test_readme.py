"""The README stays true: its input and rule tables match the registries; CI runs its test command."""

from __future__ import annotations

import re

from dbdiag.parsers import PARSERS
from dbdiag.rules import RULES
from tests.conftest import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")


def _table_ids(heading: str) -> set[str]:
    section = README.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE))


def test_supported_inputs_table_lists_exactly_the_parsers():
    assert _table_ids("Supported inputs") == {spec.kind for spec in PARSERS}


def test_rules_table_lists_exactly_the_rules():
    assert _table_ids("Rules") == {rule.id for rule in RULES}


def test_ci_runs_the_readme_test_command():
    command = (REPO / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert command in README
    assert "pytest" in command


def test_architecture_names_only_paths_that_exist():
    """Every repository path ARCHITECTURE.md names in backticks exists (placeholders like ``<kind>``
    and file patterns aside), so the map cannot drift from the tree."""
    text = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:analyzer|rules|tests|benchmarks|report_templates|fixtures)/[^`\s]*)`", text))
    concrete = {path.rstrip("/") for path in named if "<" not in path and "*" not in path}
    assert len(concrete) > 20
    assert sorted(p for p in concrete if not (REPO / p).exists()) == []
