"""Warning caps shared by every parser: at most ``MAX_WARNINGS`` per member, then one warning counting the rest.

A file whose every line has the same fault must cost neither a report of a million warnings nor a
million ParseWarning objects: ``row_warnings`` builds the first ``limit`` and stands ``HIDDEN`` for
the others, which ``cap_warnings`` counts without showing.

>>> many = [ParseWarning(n, "bad") for n in range(60, 0, -1)]
>>> capped = cap_warnings(many)
>>> len(capped), capped[0].line, capped[-1].reason
(51, 1, '10 more warnings not shown')
>>> cap_skipped_lines(many)[-1].reason
'10 more lines skipped'
"""

from __future__ import annotations

from typing import Callable

import polars as pl

from dbdiag.parsers.base import ParseWarning

MAX_WARNINGS = 50  # per member; the rest are counted in one last warning
HIDDEN = ParseWarning(None, "")  # stands for a warning counted but not built (see row_warnings)


def row_warnings(frame: pl.DataFrame, reason: Callable, limit: int | None = MAX_WARNINGS) -> list[ParseWarning]:
    """One warning per row of (line, value), made by ``reason(value)``, for the first ``limit``
    rows; the other rows become HIDDEN placeholders that cap_warnings() counts without showing, so
    a file whose every entry has the same fault costs no per-row Python. (A batch takes them all,
    then caps them per file.)"""
    shown = [ParseWarning(line, reason(value)) for line, value in (frame if limit is None else frame.head(limit)).iter_rows()]
    return shown + [HIDDEN] * (frame.height - len(shown))


def cap_warnings(warnings: list[ParseWarning]) -> list[ParseWarning]:
    """At most MAX_WARNINGS in line order (HIDDEN ones never shown), then one saying how many more there were."""
    real = sorted((w for w in warnings if w is not HIDDEN), key=lambda w: (w.line is None, w.line or 0))
    rest = len(warnings) - min(len(real), MAX_WARNINGS)
    return real[:MAX_WARNINGS] + ([ParseWarning(None, f"{rest} more warnings not shown")] if rest else [])


def cap_skipped_lines(warnings: list[ParseWarning]) -> list[ParseWarning]:
    """The first ``MAX_WARNINGS`` warnings as given, then one saying how many more lines were skipped."""
    if len(warnings) <= MAX_WARNINGS:
        return warnings
    return warnings[:MAX_WARNINGS] + [ParseWarning(None, f"{len(warnings) - MAX_WARNINGS} more lines skipped")]


def more_not_listed(dropped: int) -> ParseWarning:
    """The last warning of a reader that stopped keeping warnings at MAX_WARNINGS."""
    return ParseWarning(None, f"{dropped} more warnings not listed (capped at {MAX_WARNINGS})")
