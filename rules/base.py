"""What a rule is and what it sees.

A rule module holds its documentation as the module docstring (the fixed sections
What it detects / Why it matters / How it is detected / Remediation / References) and one
``RULE = Rule(...)``. ``check`` receives a ``RuleInput`` and returns a ``Verdict``; it may
raise ``Skip`` when the inputs are present but not enough (e.g. a single snapshot).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

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


SharedValue = TypeVar("SharedValue")


@dataclass(frozen=True)
class RuleInput:
    """The read-only view a rule gets: parsed tables, derived tables and JSON-ready metrics (by name)."""

    tables: dict[str, pl.DataFrame]
    derived: dict[str, pl.DataFrame]
    metrics: dict[str, Any]
    _shared: dict[Callable[..., Any], Any] = field(default_factory=dict, init=False, repr=False, compare=False)
    _locks: dict[Callable[..., Any], threading.Lock] = field(default_factory=dict, init=False, repr=False, compare=False)

    def table(self, name: str) -> pl.DataFrame | None:
        frame = self.tables.get(name)
        return frame if frame is not None and frame.height > 0 else None

    def shared(self, compute: Callable[[RuleInput], SharedValue]) -> SharedValue:
        """``compute(self)``, computed once for all the rules that ask (``compute`` must be a pure function of the input).

        For what several rules derive from the same big tables (e.g. the full-scan executions). Rules
        may run at the same time: the first to ask computes while the others wait. An exception is not
        kept: the next rule to ask computes again (and meets it again).
        """
        lock = self._locks.setdefault(compute, threading.Lock())  # setdefault is atomic under the GIL
        with lock:
            if compute not in self._shared:
                self._shared[compute] = compute(self)
            return self._shared[compute]


@dataclass(frozen=True)
class Verdict:
    """A rule's answer: findings (empty = passed) and one line on what was measured."""

    findings: list[Finding] = field(default_factory=list)
    measured: str = ""


@dataclass(frozen=True)
class Rule:
    """``requires``: all-of groups of any-of table names, e.g. ``(("cpu_util", "softirq_rate"),)``."""

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
