"""One compared value of one report (``facts.facts_of`` makes them, ``differ.compare_facts`` sets two sides'
side by side)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Fact:
    area: str
    key: str
    value: Any
    unit: str | None
    kind: str  # rate | time | tail | pct | hit-pct | share | sql-time | sql-rate | sql-latency | sql-tail | counter | boot-sized | text | set | severity | events
    source: str | None
    finding_ids: tuple[str, ...] = ()
    subject: str | None = None  # what findings name it by: "fingerprint-e81d..." (a finding id's second part)
