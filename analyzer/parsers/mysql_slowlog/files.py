"""The files of a batch read as one log (``parse_batch``), and the warnings kept per file.

A warning a piece found is ``PieceWarning``: (line, reason, the line that places it in its file).
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.native.lazy import np


# (line, reason, the line that places it in its file of a batch) of a warning a piece found
PieceWarning = tuple[int | None, str, int | None]


class Files(NamedTuple):
    """The logs one parse reads: one file, or the small files of a batch (``parse_batch``) joined,
    each after a boundary line but the first. ``starts``: per file, the line number in the parse
    that its own line numbers count from (0, then each one's boundary line)."""

    sources: list[str]
    notes: list[list[str]]
    starts: np.ndarray

    def of(self, line: np.ndarray) -> np.ndarray:
        """The file of each line number (1-based, in the parse)."""
        return np.searchsorted(self.starts, line, side="right") - 1


class Warnings:
    """The warnings of each file, line numbers made its own."""

    def __init__(self, files: Files, common: list[ParseWarning]) -> None:
        self.files = files
        self.of_file: list[list[ParseWarning]] = [list(common) for _ in files.sources]

    def add(self, line: int | None, reason: str, anchor: int | None = None) -> None:
        """A warning at ``line`` (1-based, in the parse), or without one but in the file of ``anchor``."""
        where = line if line is not None else anchor
        file = int(self.files.of(np.array([where]))[0]) if where is not None and len(self.files.sources) > 1 else 0
        own = None if line is None else line - int(self.files.starts[file])
        self.of_file[file].append(ParseWarning(own, reason))

    def rows(self, rows: pl.DataFrame, reason: str, line_column: str = "line") -> dict[int, ParseWarning]:
        """A warning for each row (at most MAX_WARNINGS per file, then one counting the rest); the
        first of each file."""
        first: dict[int, ParseWarning] = {}
        counts: dict[int, int] = {}
        for file, line in rows.select("file", line_column).iter_rows():
            counts[file] = counts.get(file, 0) + 1
            if counts[file] <= MAX_WARNINGS:
                warning = ParseWarning(line - int(self.files.starts[file]), reason)
                self.of_file[file].append(warning)
                first.setdefault(file, warning)
        for file, count in counts.items():
            if count > MAX_WARNINGS:
                self.of_file[file].append(ParseWarning(None, f"{count - MAX_WARNINGS} more entries like this: {reason}"))
        return first
