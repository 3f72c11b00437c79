"""One side of a comparison -> its analyze JSON report document: read from a saved report, or made
by analyzing a capture as ``dbdiag analyze`` does (``dbdiag.pipeline.analyze``, then
``dbdiag.report.build_document``).

A saved report is recognised by its name (``*.json``) or its content (``{`` first, after blanks); it is
refused in one line naming the file when it is cut short, is not an analyze report (a compare
report, any other JSON), or has another ``schema_version`` than this dbdiag writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dbdiag.capture import printable_name

REPORT_KEYS = ("schema_version", "capture", "inputs", "findings", "metrics", "verdict")
SNIFF_BYTES = 64
MAX_REPORT_BYTES = 1 << 30  # an analyze report of a huge capture is tens of MB; beyond this it is not one


class CompareInputError(Exception):
    """A side cannot be compared: one line naming the file and the reason (exit 2)."""


@dataclass
class Side:
    path: Path
    document: dict[str, Any]
    origin: str  # "json report" or "capture"


def is_json_report(path: Path) -> bool:
    """True when ``path`` is a file named ``*.json`` or whose first non-blank byte is ``{`` (a capture
    never starts so): it is then read as a report, and refused as one when it is not."""
    if not path.is_file():
        return False
    if path.suffix.lower() == ".json":
        return True
    with path.open("rb") as handle:
        head = handle.read(SNIFF_BYTES).lstrip(b" \t\r\n\xef\xbb\xbf")
    return head.startswith(b"{")


def read_report(path: Path) -> dict[str, Any]:
    """A saved analyze JSON report, checked to be one (module docstring)."""
    shown = printable_name(str(path))
    if path.stat().st_size > MAX_REPORT_BYTES:
        raise CompareInputError(f"{shown}: {path.stat().st_size:,} bytes is too large for a dbdiag JSON report")
    try:
        document = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise CompareInputError(f"{shown}: not a dbdiag JSON report (not UTF-8 text at byte {error.start})") from None
    except json.JSONDecodeError as error:
        # the parser stopped at the end of the text (an unterminated string runs to it): cut short
        cut = error.pos >= len(error.doc.rstrip()) - 1 or error.msg.startswith("Unterminated string")
        what = "truncated JSON (it ends before the document does)" if cut else f"not valid JSON ({error.msg} at line {error.lineno})"
        raise CompareInputError(f"{shown}: {what}; give a complete 'dbdiag analyze --format json' report") from None
    if not isinstance(document, dict):
        raise CompareInputError(f"{shown}: not a dbdiag analyze JSON report (a JSON {type(document).__name__}, not an object)")
    if "differences" in document and "baseline" in document:
        raise CompareInputError(f"{shown}: a dbdiag compare report, not an analyze report; compare the analyze reports or the captures")
    missing = [key for key in REPORT_KEYS if key not in document]
    if missing:
        raise CompareInputError(f"{shown}: not a dbdiag analyze JSON report (no {', '.join(missing)})")
    from dbdiag.report import SCHEMA_VERSION

    if document["schema_version"] != SCHEMA_VERSION:
        raise CompareInputError(
            f"{shown}: schema_version {document['schema_version']!r}; this dbdiag reads analyze reports of schema_version "
            f"{SCHEMA_VERSION} (re-run 'dbdiag analyze --format json' on the capture)"
        )
    return document


def load_side(path: Path, options: Any, generated_at: datetime | None = None) -> Side:
    """A saved report as it is, or a capture analyzed (``options``: ``dbdiag.pipeline.Options``)."""
    if is_json_report(path):
        return Side(path, read_report(path), "json report")
    from dbdiag.capture import CaptureError
    from dbdiag.pipeline import UnknownTimeZone, analyze
    from dbdiag.report import build_document

    try:
        analysis = analyze(path, options)
    except (CaptureError, UnknownTimeZone) as error:
        raise CompareInputError(str(error)) from None
    except OSError as error:
        raise CompareInputError(f"{printable_name(str(path))}: {(error.strerror or str(error)).lower()}") from None
    if not analysis.recognised:
        lost = next((f"; {r.path}: {r.error or r.skipped}" for r in analysis.inputs if r.error or (r.skipped and r.lost)), "")
        raise CompareInputError(
            f"{printable_name(str(path))}: neither a dbdiag JSON report nor a capture with anything dbdiag reads{lost}"
        )
    return Side(path, build_document(analysis, generated_at=generated_at), "capture")
