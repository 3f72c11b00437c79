"""What a rule is and what it sees.

A rule module holds its documentation as the module docstring (the fixed sections
What it detects / Why it matters / How it is detected / Remediation / References) and one
``RULE = Rule(...)``. ``check`` receives a ``RuleInput`` and returns a ``Verdict``; it may
raise ``Skip`` when the inputs are present but not enough (e.g. a single snapshot).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import polars as pl

from dbdiag.findings import Finding

DOC_SECTIONS = (
    "What it detects",
    "Why it matters",
    "How it is detected",
    "Remediation",
    "References",
)


class Skip(Exception):
    """Raised by a rule whose inputs exist but cannot answer; the message says what is lacking."""


@dataclass(frozen=True)
class RuleInput:
    """The read-only view a rule gets: one namespace of tables (parsed and derived, by the names in
    ``dbdiag.tables``) and the derived JSON-ready metrics.

    ``tables`` are the parsed tables, ``derived`` what derive made of them (``DERIVATIONS``); a derived table
    with a parsed name (the text made safe to show, ``tables.PUBLIC_TEXT_TABLES``) is the one rules see.
    """

    tables: Mapping[str, pl.DataFrame]
    derived: Mapping[str, pl.DataFrame] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)

    def table(self, name: str, keep_empty: bool = False) -> pl.DataFrame | None:
        """The table ``name``, derived or parsed; None when absent, or empty unless ``keep_empty``."""
        frame = self.derived.get(name)
        if frame is None:
            frame = self.tables.get(name)
        return frame if frame is not None and (keep_empty or frame.height > 0) else None

    def metric(self, name: str) -> Any:
        """The derived metric ``name`` (``tables.METRICS``), None when derive had nothing to say."""
        return self.metrics.get(name)

    def available(self) -> set[str]:
        """The names of the tables with rows, parsed and derived."""
        return {name for frames in (self.tables, self.derived) for name, frame in frames.items() if frame.height > 0}


@dataclass(frozen=True)
class Verdict:
    """A rule's answer: findings (empty = passed) and one line on what was measured."""

    findings: list[Finding] = field(default_factory=list)
    measured: str = ""


@dataclass(frozen=True)
class Rule:
    """``requires``: all-of groups of any-of table names (parsed or derived), e.g. ``(("cpu_util", "softirq_rate"),)``;
    a rule whose group has no table with rows is skipped without running, naming the group."""

    id: str
    title: str
    area: str
    requires: tuple[tuple[str, ...], ...]
    check: Callable[[RuleInput], Verdict]
    doc: str

    def missing_inputs(self, available: set[str]) -> list[str]:
        return [" or ".join(group) for group in self.requires if not available.intersection(group)]

    def doc_section(self, name: str) -> str:
        """The text under ``name:`` in the docstring (up to the next section)."""
        return split_doc_sections(self.doc).get(name, "")


def split_doc_sections(doc: str) -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in doc.splitlines():
        heading = line.strip().rstrip(":")
        if line.strip().endswith(":") and heading in DOC_SECTIONS:
            current = heading
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {name: "\n".join(lines).strip() for name, lines in sections.items()}
