"""Entry-aligned pieces of a log and the reading of one piece (its lines, entries, and the numbers of
its distinct header and explain texts).

>>> chunk_bounds("# Time: 1\\nSELECT 1;\\n" * 4, 20)
[(0, 40), (40, 80)]
"""

from __future__ import annotations

from typing import Callable

import polars as pl

from dbdiag.native.lazy import np
from dbdiag.native.slowlog_lines import (
    ATTR_START,
    BLANK,
    EXPLAIN,
    Lines,
    QUERY_TIME,
    SERVER,
    USER_HOST,
    detached,
    line_code,
    mark,
)
from dbdiag.parsers.mysql_slowlog.columns import align, gather_index, line_codes
from dbdiag.parsers.mysql_slowlog.explain import explain_data, explain_heads, plans_of
from dbdiag.parsers.mysql_slowlog.fields import header_codes, query_time_columns, statement_texts
from dbdiag.parsers.mysql_slowlog.times import time_texts


CHUNK_CHARS = 16 * 1024 * 1024  # entry-aligned pieces: bounds the per-line memory (peak RSS)
WORKERS = 2  # pieces parsed at once


def chunk_bounds(text: str | bytes, size: int, begin: int = 0) -> list[tuple[int, int]]:
    """Cut ``text[begin:]`` into pieces of about ``size`` characters (bytes), each starting at an entry start."""
    bounds, start = [], begin
    while len(text) - start > size + size // 2:
        cut = next_entry_start(text, start + size)
        if cut is None or cut <= start:  # <=: a "# Time:" line longer than ``size`` opens the piece itself
            break
        bounds.append((start, cut))
        start = cut
    bounds.append((start, len(text)))
    return bounds


def entry_pieces(text: str | bytes, begin: int = 0) -> list[tuple[int, int]]:
    """``chunk_bounds`` of pieces of CHUNK_CHARS."""
    return chunk_bounds(text, CHUNK_CHARS, begin)


def next_entry_start(text: str | bytes, after: int) -> int | None:
    spell = (lambda s: s.encode()) if isinstance(text, bytes) else (lambda s: s)  # noqa: E731
    at = text.find(spell("\n# User@Host: "), after)
    if at < 0:
        at = text.find(spell("\n# Time: "), after)
    if at < 0:
        return None
    line_start = at + 1
    previous = text.rfind(spell("\n"), 0, at) + 1
    # a User@Host right after "# Time:" belongs to that Time line's entry
    return previous if text.startswith(spell("# Time:"), previous) else line_start


def parse_chunk(read: Callable[[], Lines], is_first: bool, boundaries: np.ndarray) -> dict[str, object]:
    """Entries of the piece that ``read`` reads (which starts at an entry, or is the file's beginning)
    with local entry numbers: 0 holds what comes before the first header, the rest count from 1.
    ``entries`` holds the values read from the piece's own lines, for the entries from ``kept`` on
    (entry 0 only when it has lines); line numbers are kept as line indices of the piece (``lines``).

    Header and explain lines come back as numbers of the piece's distinct texts: their fields are
    read once per distinct text of the whole file (``header_columns_of``, ``_explain``).

    ``boundaries``: the line indices of the boundary lines of a batch (``parse_batch``), each one
    the start of the entry that holds what its file has before its first header."""
    lines, length, prefix, kind, kernel = read()
    marks = mark(kind, prefix, kernel)
    starts = marks["starts"]
    n_entries = starts.size + 1

    line_of = np.full(n_entries, -1, dtype=np.int64)
    line_of[1:] = starts
    if marks["head"] >= 0 and is_first:
        line_of[0] = marks["head"]
    kept = 0 if line_of[0] >= 0 else 1  # entry 0 holds lines only before the first header of the file
    first_line = 1

    numbers, qt_extras, warnings = query_time_columns(lines, marks["query_time"], first_line, kernel, boundaries + first_line)
    first, header_texts, header_groups = (header_codes if kernel is None else kernel.header_codes)(
        lines, kind, prefix, marks, n_entries
    )
    if kernel is None:
        sql = align(statement_texts(lines, kind, marks["sql_entry"], marks["sql"]), n_entries)
    else:
        sql = kernel.statements(kind, marks["sql_entry"], marks["sql"], n_entries)
    entries = pl.concat([pl.DataFrame(numbers), sql], how="horizontal").slice(kept)
    at, owner = marks["explain"], marks["explain_entry"]
    explain_codes, explain_texts = line_codes(lines, at, kernel)
    data_rows, head_rows = explain_data(owner, explain_codes, explain_heads(explain_texts))
    # what an entry shows of its explain lines depends on them only: one entry of each distinct
    # sequence of them (``plans``) goes on to be read for the whole file
    plan_of, reps, n_plans = plans_of(owner, explain_codes, n_entries)
    is_rep = np.zeros(n_entries, dtype=bool)
    is_rep[reps] = True
    rep_rows = np.flatnonzero(is_rep[owner])
    server = marks["server"]
    present, time_text = time_texts(lines, marks["time"])
    # the texts below outlive the piece: copied, they do not keep the log's bytes (``lines``) alive
    return {
        "entries": entries,
        "kept": kept,
        "lines": {"line": line_of, "time_line": marks["time"], "qt_line": marks["query_time"]},
        "times": (present, detached(time_text)),
        "qt_extras": qt_extras,
        "header": (detached(header_texts), header_groups, first),
        # the data rows of the explain lines: entry, text and header row's text
        "explain": (owner[data_rows], explain_codes[data_rows], explain_codes[head_rows], detached(explain_texts)),
        "plans": (plan_of, n_plans, plan_of[owner[rep_rows]], explain_codes[rep_rows]),
        "n_entries": n_entries,
        "n_lines": lines.len(),
        "warnings": warnings,
        "server": pl.DataFrame({"line": server + first_line, "t": detached(lines.gather(gather_index(server)))}),
        "innodb_lines": _innodb_lines(prefix, marks) + first_line,
        "explain_lines": (np.flatnonzero(kind == EXPLAIN) if marks["explain_kind"] else np.zeros(0, np.int64)) + first_line,
        "boundaries": _boundary_entries(kind, starts, boundaries),
    }


def _innodb_lines(prefix: np.ndarray, marks: dict[str, object]) -> np.ndarray:
    """The header lines that start with "#   " (Percona's ``#   InnoDB_IO_r_ops: ...``)."""
    if not marks["innodb"]:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(prefix == line_code("#   "))
    return at[~np.isin(at, marks["sql"])]


def _boundary_entries(kind: np.ndarray, starts: np.ndarray, boundaries: np.ndarray) -> tuple[np.ndarray, ...]:
    """For each boundary line: its entry (local number), the first line after it in that entry that is
    not blank or a banner (-1: none), and whether that entry is its file's head (what comes before
    the first header, like entry 0 of a single file) rather than an entry its first line starts."""
    entry = np.searchsorted(starts, boundaries) + 1
    lead = np.flatnonzero((kind != BLANK) & (kind != SERVER))
    at = np.searchsorted(lead, boundaries, side="right")
    first = np.where(at < lead.size, lead[np.minimum(at, max(lead.size - 1, 0))] if lead.size else -1, -1)
    next_start = np.append(starts, kind.size)[np.searchsorted(starts, boundaries, side="right")]
    first = np.where((first >= 0) & (first < next_start), first, -1)
    opens = np.isin(kind[np.maximum(first, 0)], (USER_HOST, QUERY_TIME, ATTR_START)) & (first >= 0)
    return entry, first, ~opens
