"""The findings contract: what rules return and what every report format is built from.

Everything here is plain data that serialises to the JSON described in DESIGN.md
(``findings[]`` and ``rules[]``). Rules build ``Finding`` objects; they never produce HTML.
Charts are data too (``Chart``): the report templates draw them.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from dbdiag.patterns import lazy_compile

# The measured cost of a finding, in ``Finding.impact`` under these names (fixed, DESIGN.md).
# Shares are fractions of 0..1; seconds are totals over the capture. A rule sets the ones it can measure.
DB_TIME_S = "db_time_s"  # database time the problem explains
SHARE_OF_DB_TIME = "share_of_db_time"  # db_time_s / all statement time of the capture
USER_TIME_S = "user_time_s"  # time users waited that the problem explains (load test / app side)
SHARE_OF_USER_TIME = "share_of_user_time"  # user_time_s / all time users waited
CPU_SHARE = "cpu_share"  # share of the host's CPU time the problem takes
COST_KEYS = (SHARE_OF_USER_TIME, SHARE_OF_DB_TIME, CPU_SHARE)

# Rules whose findings describe the test or the workload, never a problem of the system: they rank last.
TEST_NOTE_RULES = frozenset({"load-test-inflation", "rate-limit-advice", "dominant-statement"})

_ID_UNSAFE_RE = lazy_compile(r"[^a-z0-9._:=-]+")
MAX_ID_SUBJECT_CHARS = 80


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
    related: tuple[str, ...] = ()  # ids of findings about the same problem (cause, effect, evidence)
    objects: tuple[str, ...] = ()  # what else it is about, named like subjects ("table t1", "fingerprint 3f2a"): links findings

    @property
    def id(self) -> str:
        """Rule and subject, stable across runs and captures: ``plan-flip/fingerprint-3f2a9c01``."""
        return finding_id(self.rule, self.subject)

    def to_json(self) -> dict[str, Any]:
        data = {"id": self.id}
        data.update(asdict(self))
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
    examined: bool = False  # its inputs were there and it looked at them (fired, passed, or skipped by its own check)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.rule,
            "title": self.title,
            "status": self.status.value,
            "missing": list(self.missing),
            "measured": self.measured,
            "error": self.error,
        }


def finding_id(rule: str, subject: str) -> str:
    """``rule/subject-slug``; a long subject keeps its first characters and a hash of the whole."""
    slug = _ID_UNSAFE_RE.sub("-", subject.lower()).strip("-")
    if len(slug) > MAX_ID_SUBJECT_CHARS:
        digest = hashlib.sha1(subject.encode("utf-8", "surrogatepass")).hexdigest()[:10]
        slug = f"{slug[:MAX_ID_SUBJECT_CHARS].rstrip('-')}-{digest}"
    return f"{rule}/{slug}" if slug else rule
