"""Small PostgreSQL stderr logs of one shape read as one log (``pg_stderr.parse_batch``), and what each
of them keeps of its own: its summary, its server events, its warnings' lines.

Thousands of small logs (one per hour, host or instance) each read alone cost about 35 ms of fixed
work apiece (some 160 small frame operations); read as one they cost one reading. The texts are
joined in order, each starting at its own first line::

    log 0:  2024-01-01 00:00:00.000 UTC [4000] LOG:  duration: 10.000 ms  statement: SELECT 0    line 1
    log 1:  2024-01-01 00:01:00.000 UTC [4001] LOG:  duration: 11.000 ms  statement: SELECT 1    line 2

and ``pg_messages.Files`` (the first line of each) keeps what pairs entries within one log: a
continuation line, a STATEMENT/DETAIL sub-entry, a connection (``conn``), a lock wait. The rest is
read over all of them and cut per log at the end, each log's lines counted from 1.
"""

from __future__ import annotations

from typing import Callable, TypeVar

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers import pg_assemble, pg_events
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers.base import ParseResult, ParseWarning

Read = TypeVar("Read")


def joined(texts: list[str | bytes]) -> tuple[str | bytes, M.Files]:
    """The logs as one text (each without its last newline, one newline between them; text when any
    of them is text, else bytes) and where each starts."""
    trimmed = [t[:-1] if t[-1:] in ("\n", b"\n") else t for t in texts]
    if any(isinstance(t, str) for t in trimmed):
        trimmed = [t if isinstance(t, str) else t.decode("ascii") for t in trimmed]
        body: str | bytes = "\n".join(trimmed)  # type: ignore[arg-type]
        newline: str | bytes = "\n"
    else:
        body = b"\n".join(trimmed)  # type: ignore[arg-type]
        newline = b"\n"
    first_lines, line = [], 1
    for text in trimmed:
        first_lines.append(line)
        line += text.count(newline) + 1  # type: ignore[arg-type]
    return body, M.Files(tuple(first_lines))


def per_log(lines: pl.DataFrame, files: M.Files, read: Callable[[pl.DataFrame], Read | None]) -> list[Read | None]:
    """``read`` of each log's rows of ``lines`` (0-based ``idx``, in line order; ``idx`` counted
    within the log), None for a log without rows."""
    if len(files) == 1:
        return [read(lines)]
    found: list[Read | None] = [None] * len(files)
    if lines.is_empty():
        return found
    for log, part in files.parts(lines.with_columns((pl.col("idx") + 1).alias("line"))):
        found[log] = read(part.with_columns((pl.col("line") - 1).alias("idx")).drop("line"))
    return found


def summaries(records: pl.DataFrame, entries: M.StatementEntries, files: M.Files) -> list[M.EntrySummary]:
    """``summarise_entries`` of each log. A log's summary matters when it gave no statement row with a
    time (its time range and the note on why it has no statements), or when any log has translated
    messages or unreadable durations (its warnings): only those logs are summarised apart, the others
    get an empty one."""
    whole = M.summarise_entries(records, True)
    with_rows = set(_logs(entries.rows, files)) | set(_logs(entries.others.filter(pl.col("kind").is_in(M.ROW_KINDS)), files))
    # a time Python cannot hold (year 0) gives no time range: such a log is summarised too
    stamped = set(_logs(entries.rows.filter(pl.col("end_ts").dt.year().is_between(1, 9999)), files))
    wanted = range(len(files)) if whole.translated or whole.unusable_durations else [f for f in range(len(files)) if f not in stamped]
    found = [M.EntrySummary() for _ in range(len(files))]
    if not wanted:
        return found
    logs = records.with_columns(files.of(pl.col("line")).alias("file"))
    parts = logs.filter(pl.col("file").is_in(list(wanted))).partition_by("file", as_dict=True, maintain_order=True)
    for log in wanted:
        part = parts.get((log,))
        records_of_log = part.drop("file") if part is not None else records.head(0)
        found[log] = M.summarise_entries(records_of_log, log in with_rows)
    return found


def events(records: pl.DataFrame, files: M.Files) -> list[pl.DataFrame]:
    """The server events of each log (``pg_events``), drop of repeats and caps within each log."""
    matched = pg_events.matched_lines(records)
    tables = [T.empty(T.EVENT)] * len(files)  # one empty frame shared: frames are not changed in place
    if matched.is_empty():
        return tables
    for log, part in files.parts(matched.sort("idx").with_columns((pl.col("idx") + 1).alias("line"))):
        tables[log] = pg_events.event_table(part.with_columns((pl.col("line") - 1).alias("idx")).drop("line"), "")[0]
    return tables


def _logs(frame: pl.DataFrame, files: M.Files) -> list[int]:
    """The logs that ``frame``'s rows (with a 1-based ``line``) are in."""
    return frame.select(files.of(pl.col("line")).unique().alias("file"))["file"].to_list()


def results_of_records(
    logs: list[tuple[pl.DataFrame, int]], sources: list[str], notes: list[list[str]], warnings: list[list[ParseWarning]]
) -> list[ParseResult]:
    """The ParseResults of logs each already turned into a record frame (csvlog, jsonlog: ``logs`` holds
    each log's records and line count), their statements made in one pass: each log's lines and
    entry order (``rec``) are moved past the logs before it, then everything is cut per log again."""
    if len(logs) == 1:
        (records, _), source = logs[0], sources[0]
        result = pg_assemble.result(records, source, notes[0], warnings[0])
        events, event_notes = pg_events.postgres_events(records, source)
        result.tables[T.EVENT] = events
        result.notes.extend(event_notes)
        return [result]
    first_lines, moved, line, rec = [], [], 1, 0
    for records, line_count in logs:
        first_lines.append(line)
        moved.append(records.with_columns(pl.col("line") + (line - 1), pl.col("rec") + rec))
        line += max(line_count, 1)
        rec += int(records["rec"].max()) + 1 if records.height else 0
    files = M.Files(tuple(first_lines))
    records = pl.concat(moved)
    entries = M.statement_entries(records, files)
    results = pg_assemble.finish_logs(entries, summaries(records, entries, files), sources, notes, warnings, files)
    for result, (events, event_notes) in zip(results, _event_tables(records, files, sources)):
        result.tables[T.EVENT] = events
        result.notes.extend(event_notes)
    return results


def _event_tables(records: pl.DataFrame, files: M.Files, sources: list[str]) -> list[tuple[pl.DataFrame, list[str]]]:
    """The ``event`` table and notes of each log, its source set."""
    matched = pg_events.matched_lines(records)
    no_events = T.empty(T.EVENT)  # shared: frames are not changed in place
    tables: list[tuple[pl.DataFrame, list[str]]] = [(no_events, []) for _ in sources]
    if matched.is_empty():
        return tables
    for log, part in files.parts(matched.sort("idx").with_columns((pl.col("idx") + 1).alias("line"))):
        tables[log] = pg_events.event_table(part.with_columns((pl.col("line") - 1).alias("idx")).drop("line"), sources[log])
    return tables
