"""The findings contract: what rules return and what every report format is built from.

Everything here is plain data that serialises to the JSON described in DESIGN.md
(``findings[]`` and ``rules[]``). Rules build ``Finding`` objects; they never produce HTML.
Charts are data too (``Chart``): the report templates draw them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


class Severity(str, Enum):
    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 3, "warning": 2, "info": 1}[self.value]


class Scope(str, Enum):
    """How much of the system a finding touches; wider comes first among equally severe findings.

    A host-wide problem (softirqs on a few CPUs) slows every statement, including the one a
    statement-level finding is about, so it is listed before it.
    """

    HOST = "host"
    DATABASE = "database"
    STATEMENT = "statement"

    @property
    def rank(self) -> int:
        return {"host": 3, "database": 2, "statement": 1}[self.value]


class Status(str, Enum):
    FIRED = "fired"
    PASSED = "passed"
    SKIPPED = "skipped"
    ERRORED = "errored"


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence: a small table (``columns`` + ``rows``) or a text block.

    ``rows`` hold plain values (str, int, float, None) so that JSON, Markdown and HTML
    all show the same numbers.
    """

    title: str
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Any, ...], ...] = ()
    text: str | None = None


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    highlight: bool = False


@dataclass(frozen=True)
class BarGroup:
    label: str
    bars: tuple[Bar, ...]


@dataclass(frozen=True)
class Chart:
    """A grouped bar chart: bars (e.g. CPUs) in groups (e.g. NUMA nodes), values in ``unit``."""

    title: str
    unit: str
    groups: tuple[BarGroup, ...]
    threshold: float | None = None
    threshold_label: str | None = None
    kind: str = "grouped-bars"


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: Severity
    title: str
    subject: str
    impact: dict[str, Any]
    evidence: tuple[Evidence, ...]
    remediation: str
    sources: tuple[str, ...]
    charts: tuple[Chart, ...] = ()
    scope: Scope = Scope.DATABASE

    @property
    def impact_score(self) -> float:
        """Sort key within a severity: the share (percent) the problem explains, when given."""
        value = self.impact.get("share_pct")
        return float(value) if isinstance(value, (int, float)) else 0.0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["severity"] = self.severity.value
        data["scope"] = self.scope.value
        return data


@dataclass(frozen=True)
class RuleOutcome:
    """What happened when one rule ran: its status, findings, and what it measured."""

    rule: str
    title: str
    status: Status
    findings: tuple[Finding, ...] = ()
    missing: tuple[str, ...] = ()
    measured: str = ""
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.rule,
            "title": self.title,
            "status": self.status.value,
            "missing": list(self.missing),
            "measured": self.measured,
            "error": self.error,
        }


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Most severe first, then the widest scope, then by the share of time the finding explains."""
    return sorted(findings, key=lambda f: (-f.severity.rank, -f.scope.rank, -f.impact_score, f.rule, f.subject))
