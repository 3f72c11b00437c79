"""Both sides loaded, compared, and the exit code: what ``dbdiag compare`` runs (``cli.py`` stays thin).

Exit codes as ``analyze``'s: 2 when a side has nothing readable or is not a report (raised by
``load.py`` as ``CompareInputError``, before anything is written), else 1 when a finding new or more
severe on the capture side reaches ``--fail-on``, else 3 when a side is a partial capture, else 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dbdiag.compare.document import compare_documents, side_names
from dbdiag.compare.load import Side, load_side

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_PARTIAL = 3
SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


@dataclass
class Comparison:
    baseline: Side
    capture: Side
    document: dict[str, Any]


def compare_paths(baseline: Path, capture: Path, options: Any, generated_at: datetime | None = None) -> Comparison:
    """Load (analyze) both sides one after the other and compare their report documents.

    One after the other, not in parallel: polars already spreads one analysis over every core,
    and two at once would hold both captures' tables in memory together.
    """
    left = load_side(baseline, options, generated_at)
    right = load_side(capture, options, generated_at)
    names = side_names(left.document, right.document)
    return Comparison(left, right, compare_documents(left.document, right.document, names, generated_at))


def exit_code(comparison: Comparison, fail_on: str | None) -> int:
    if fail_on is not None:
        new = set(comparison.document["verdict"]["findings_new_in_capture"])
        floor = SEVERITY_RANK[fail_on]
        findings = comparison.capture.document.get("findings") or []
        if any(f["id"] in new and SEVERITY_RANK.get(f["severity"], 0) >= floor for f in findings):
            return EXIT_FINDINGS
    if comparison.document["baseline"]["partial"] or comparison.document["capture"]["partial"]:
        return EXIT_PARTIAL
    return EXIT_OK


def summary_line(comparison: Comparison) -> str:
    verdict = comparison.document["verdict"]
    return f"{len(comparison.document['differences'])} difference(s); {verdict['headline']}"
