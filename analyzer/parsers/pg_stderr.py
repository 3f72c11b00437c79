"""PostgreSQL stderr logs (``log_destination = 'stderr'``, any ``log_line_prefix``), Heroku logplex
and RFC 3339 syslog copies of them -> ``statement`` and ``plan_node`` rows.

Sample input (prefix ``%m [%p] %q%u@%d ``; continuation lines start with a TAB)::

    2026-11-29 19:12:25.939 UTC [21681] LOG:  starting PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu
    2026-11-29 19:12:26.235 UTC [21693] postgres@bench LOG:  duration: 0.287 ms  statement: drop table if exists t
    2026-11-29 20:51:34.451 UTC [3317] postgres@bench LOG:  duration: 0.844 ms  statement: SELECT a.aid, b.bbalance
    \t  FROM pgbench_accounts a
    2026-11-29 20:51:34.458 UTC [3317] postgres@bench ERROR:  division by zero
    2026-11-29 20:51:34.458 UTC [3317] postgres@bench STATEMENT:  SELECT 1/0;
    2019-03-14T00:23:00+00:00 app[postgres.4849]: [GREEN] [19-1]  sql_error_code = 40P01 ERROR:  deadlock detected

The prefix is inferred from the lines (the text before ``LOG:``, ``ERROR:``, ``STATEMENT:``...): each
line's prefix is cut into recognisable values (timestamps, ``[pid]``, ``user@db``, ``key=value``
pairs, session ids, numbers) and literals; the most common shape, checked against the sample,
becomes ``log_line_prefix`` (``%m %t %n %p %c %l %u %d %a %h %r %x %v %e %Q``; ``%q`` where
background-process lines stop; ``%*`` stands for a value it could not name). It is reported in a note.
Values it does not map (``%l %i %s %b``, ``%*``) are matched and dropped. With no usable prefix only
the time and ``[pid]`` found in each line's head are read, with a warning.

A line is a new entry when it matches the prefix followed by a severity; any other line continues
the entry above (of the same pid in logplex/syslog, where lines of processes interleave). DETAIL,
HINT, CONTEXT, STATEMENT... entries belong to the previous main entry of the same pid. Statement
rules and output columns: see ``pg_messages``; plans: ``pg_explain``. Times: ``%m``/``%t`` with the
zone abbreviation PostgreSQL prints (fixed offsets for unambiguous ones, else ``--tz``), ``%n``
epoch seconds, or the logplex/syslog time.

Big logs are read in pieces of about ``CHUNK_CHARS`` that start at a main entry, two at a time
(one per core); each piece turns its ``duration ... statement`` entries into statement rows and
keeps its other statement entries, which are paired over the whole log. An ASCII log is read from
its bytes (``parse_bytes``: no decoded copy). With a prefix that starts with the time and has no
value that may hold a space (the usual ones), the prefix fields of an entry line are read once per
distinct text between its time and its severity (``KeyedLead``); only the other lines (continuation
lines, mostly) meet the prefix regexes.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import polars as pl

from dbdiag.parsers import log_events, pg_assemble, pg_batch, pg_events
from dbdiag.parsers import pg_lines
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers import pg_prefix as P
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import zones as Z
from dbdiag.parsers.kit.lines import split_lines
from dbdiag.parsers.pg_prefix import Prefix, infer_prefix
from dbdiag.patterns import lazy_compile

CHUNK_CHARS = 16_000_000  # pieces read two at a time (one per core); bounds the working memory
BOUNDARY_WINDOW_CHARS = 1_000_000  # text read at a time when looking for where a piece starts

LOOKS_LIKE_PG_HEAD_RE = lazy_compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S* (?:\S+ )?\[\d+\]")
# two letters, not {2,}: the same lines, and with .*? before it {2,} was quadratic on a long word
FOREIGN_SEVERITY_RE = lazy_compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d.*?[^\W\d_]{2}\s?:  \S")


# ---- lines and entries (vectorised) ---------------------------------------------------------------


@dataclass
class Chunk:
    """What one record-aligned piece of a log (or the logs of a batch, joined) gives: statement entries
    and, per log, small counts. A piece numbers its lines from 0 (counting the lines before it would
    hold up the start of every piece); ``shifted`` numbers them in the whole log once the line counts
    of the pieces before are known."""

    lines: int
    entries: M.StatementEntries
    summaries: list[M.EntrySummary]  # per log
    zones: list[dict]  # per log: zone text -> entries
    orphans: list[tuple[int, int, str] | None]  # per log: (count, first line, text)
    unmatched: list[tuple[int, int] | None]  # per log: (count, first line)
    events: list[pl.DataFrame]  # per log: server events (start, shutdown, killed backends...)

    def shifted(self, lines_before: int) -> Chunk:
        """The piece of one log, numbered ``lines_before`` lines further on."""
        if not lines_before:
            return self
        orphans = [(o[0], o[1] + lines_before, o[2]) if o else None for o in self.orphans]
        unmatched = [(u[0], u[1] + lines_before) if u else None for u in self.unmatched]
        events = [e.with_columns(pl.col("line") + lines_before) for e in self.events]
        return Chunk(self.lines, self.entries.shifted(lines_before), self.summaries, self.zones, orphans, unmatched, events)


def _chunk_bounds(text: str | bytes, size: int, prefix: Prefix, wrapper: str | None) -> list[tuple[int, int]]:
    """[start, end) offsets of pieces of about CHUNK_CHARS of ``text[:size]`` (or of its ASCII bytes), each
    starting at a main entry (LOG, ERROR...: never at a DETAIL/STATEMENT that belongs to the entry before it)."""
    if wrapper or not prefix.recognised or size <= CHUNK_CHARS:
        return [(0, size)]
    main = prefix.line_regex.replace("(?P<sev>[A-Z]+[1-5]?)", "(?P<sev>" + "|".join(M.MAIN_SEVERITIES) + ")")
    bounds = [0]
    while bounds[-1] + CHUNK_CHARS < size:
        found = _next_entry_line(text, bounds[-1] + CHUNK_CHARS, size, main)
        if found is None:
            break
        bounds.append(found)
    return list(zip(bounds, bounds[1:] + [size]))


def _next_entry_line(text: str | bytes, start: int, size: int, line_regex: str) -> int | None:
    """Where the first line after ``text[start]``'s line that matches ``line_regex`` starts (None: no
    such line before ``size``). Read by polars a window at a time: Python's regex search backtracks
    on prefix regexes of adjacent number parts, at every line."""
    at = start
    while at < size:
        piece = text[at : min(at + BOUNDARY_WINDOW_CHARS, size)]
        piece = piece if isinstance(piece, str) else piece.decode("ascii")  # bytes only when ASCII
        first_end = piece.find("\n")
        if first_end < 0:
            at += len(piece)
            continue
        lines = pl.Series(piece[first_end + 1 :].split("\n"), dtype=pl.String)
        hits = lines.str.contains(line_regex).arg_true()
        if hits.len():
            before = lines.head(hits[0]).str.len_chars().sum() + hits[0]  # the lines before it and their newlines
            return at + first_end + 1 + before
        if at + len(piece) >= size:
            return None
        last_end = piece.rfind("\n")
        at += last_end if last_end > first_end else len(piece)  # from the last line again: it may be cut
    return None


def _read_chunk(body: str | bytes, prefix: Prefix, wrapper: str | None, tz: str, files: M.Files = M.ONE_LOG) -> Chunk:
    """One piece of a log (text, or its UTF-8 bytes), or the logs of a batch joined (``files``), its
    lines numbered from 0. The frame of all lines is let go as soon as the entry starts and the other
    lines are apart (two pieces are read at a time, each of them needs several times its size)."""
    lines = split_lines(body)
    count = lines.height
    if prefix.keyed and not wrapper:
        starts, rest = pg_lines.keyed_starts(lines, prefix)
    else:
        starts, rest = pg_lines.scanned_starts(lines, prefix, wrapper)
    del lines
    if len(files) > 1:  # a line continues an entry of its own log only
        rest = rest.with_columns(pl.when(pl.col("rec") >= files.first_line_of(pl.col("idx") + 1) - 1).then(pl.col("rec")).alias("rec"))
    if not prefix.recognised:
        starts = pg_lines.fallback_fields(starts)
    records, zones = pg_lines.records(starts, pg_lines.continuation(rest), tz, wrapper is not None, prefix.recognised, files)
    del starts
    entries = M.statement_entries(records, files)
    if len(files) == 1:
        summaries = [M.summarise_entries(records, entries.make_rows())]
        events = [pg_events.postgres_events(records, "")[0]]  # capped once over the whole log in parse()
    else:
        summaries, events = pg_batch.summaries(records, entries, files), pg_batch.events(records, files)
    orphans = pg_batch.per_log(rest.filter(pl.col("rec").is_null() & (pl.col("text").str.strip_chars() != "")), files, _orphans)
    return Chunk(count, entries, summaries, zones, orphans, pg_batch.per_log(_unmatched(rest, prefix), files, _counted), events)


def _orphans(orphans: pl.DataFrame) -> tuple[int, int, str] | None:
    """(count, first line, its text) of the non-blank lines before the first entry."""
    if orphans.is_empty():
        return None
    first = orphans.row(0, named=True)
    return orphans.height, int(first["idx"]) + 1, first["text"]


def _unmatched(rest: pl.DataFrame, prefix: Prefix) -> pl.DataFrame:
    """Lines that start like an entry (time + [pid]) but did not match the prefix: a mixed or changed prefix."""
    if not prefix.recognised or rest.is_empty():
        return rest.head(0)
    return rest.filter(pl.col("text").str.contains(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S* (?:\S+ )?\[\d+\]"))


def _counted(lines: pl.DataFrame) -> tuple[int, int] | None:
    """(count, first line) of ``lines``; None when there are none."""
    return (lines.height, int(lines["idx"][0]) + 1) if lines.height else None


def _chunk_warnings(orphans: list[tuple[int, int, str] | None], unmatched: list[tuple[int, int] | None], prefix: Prefix) -> list[ParseWarning]:
    """The warnings of one log on the lines before its first entry and the lines that look like entries
    but do not match the prefix (``orphans`` and ``unmatched`` of its pieces)."""
    warnings = []
    orphans = [o for o in orphans if o]
    if orphans:
        count, line, text = orphans[0]
        warnings.append(ParseWarning(line, f"{sum(o[0] for o in orphans)} lines before the first log entry skipped: {text[:60]!r}"))
    unmatched = [u for u in unmatched if u]
    if unmatched:
        warnings.append(ParseWarning(
            unmatched[0][1],
            f"{sum(u[0] for u in unmatched)} lines look like log entries but do not match the inferred prefix "
            f"{prefix.template!r}; they were read as continuation lines",
        ))
    return warnings


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text or text.isspace():  # isspace stops at the first visible character
        raise ParseError("empty PostgreSQL log")
    return _parse(text, ctx)


def parse_bytes(data: bytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of the member's bytes, read as ``pipeline.decode`` reads them (UTF-8 that cannot fail,
    CRLF -> LF, a lone CR kept). An ASCII log, the usual case, is read from its bytes: neither a decoded
    copy of it nor the UTF-8 copy the CSV reader needs is made. Any other is decoded."""
    return _parse(_body(data), ctx)


def _body(data: bytes) -> str | bytes:
    """What ``parse_bytes`` reads of ``data``: its ASCII bytes, or its text; ParseError when blank."""
    if not data.isascii():
        text = data.decode("utf-8", "backslashreplace")
        text = text.replace("\r\n", "\n") if "\r" in text else text
        if not text or text.isspace():
            raise ParseError("empty PostgreSQL log")
        return text
    if not data or ASCII_BLANK_RE.match(data):  # str.isspace on its ASCII: \x1c-\x1f are blanks too
        raise ParseError("empty PostgreSQL log")
    return data.replace(b"\r\n", b"\n") if b"\r" in data else data


ASCII_BLANK_RE = lazy_compile(rb"[ \t\n\r\x0b\x0c\x1c-\x1f]*\Z")


@dataclass(frozen=True)
class Shape:
    """How a log is written: its wrapper (logplex, syslog) and its inferred prefix."""

    wrapper: str | None
    prefix: Prefix


def _shape(text: str | bytes) -> Shape | ParseResult:
    """The shape of a log that is not blank, from a sample of its lines; the result of a log whose
    lines have no severity (``_no_severity``)."""
    sample = P.sample_lines(text)
    wrapper = P.wrapper_of(sample)
    if wrapper:
        pattern = re.compile(P.WRAPPERS[wrapper])
        sample = [m.group("rest") for m in map(pattern.match, sample) if m]
    prefix = infer_prefix(sample)
    if prefix is None:
        return _no_severity(sample)
    return Shape(wrapper, prefix)


def _parse(text: str | bytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of a text that is not blank, or of its bytes when they are ASCII."""
    tz, warnings = M.safe_tz(ctx.tz)
    shape = _shape(text)
    if isinstance(shape, ParseResult):
        return shape
    return _read_logs([text], [ctx.source], shape, tz, warnings, ctx.report_bytes)[0]


def _read_logs(
    texts: list[str | bytes], sources: list[str], shape: Shape, tz: str, tz_warnings: list[ParseWarning],
    report_bytes: Callable[[int], None] = lambda done_bytes: None,
) -> list[ParseResult]:
    """The results of one log, read in pieces (``report_bytes`` told of each), or of several small logs
    of one shape read as one."""
    prefix, wrapper = shape.prefix, shape.wrapper
    notes = [f"{wrapper} lines: time and pid read from the {wrapper} header"] if wrapper else []
    warnings = list(tz_warnings)
    if prefix.recognised:
        notes.append(f"log_line_prefix looks like {prefix.template!r}" if prefix.template else "log_line_prefix is empty")
    else:
        warnings.append(ParseWarning(None, prefix.notes[0]))
    if len(texts) == 1:
        files, chunks = M.ONE_LOG, _read_pieces(texts[0], prefix, wrapper, tz, report_bytes)
    else:
        body, files = pg_batch.joined(texts)
        chunks = [_read_chunk(body, prefix, wrapper, tz, files)]
    entries = M.StatementEntries.concat([c.entries for c in chunks])
    notes_each, warnings_each, summaries = [], [], []
    for log in range(len(files)):
        zones: Counter = Counter()
        for chunk in chunks:
            zones.update(chunk.zones[log])
        if zones:
            notes_each.append(notes + Z.zone_notes(dict(zones), tz))
        else:
            notes_each.append(notes + ["log lines carry no time (log_line_prefix has no %m/%t/%n): statements have no timestamps"])
        warnings_each.append(warnings + _chunk_warnings([c.orphans[log] for c in chunks], [c.unmatched[log] for c in chunks], prefix))
        summaries.append(functools.reduce(M.EntrySummary.merge, [c.summaries[log] for c in chunks]))
    results = pg_assemble.finish_logs(entries, summaries, sources, notes_each, warnings_each, files)
    no_events = M.T.empty(M.T.EVENT)  # shared by the logs of a batch without events: frames are not changed in place
    for log, (result, source) in enumerate(zip(results, sources)):
        events = pl.concat([c.events[log] for c in chunks])
        if events.is_empty() and len(files) > 1:
            result.tables[M.T.EVENT] = no_events
            continue
        events, event_notes = log_events.cap_kinds(events.with_columns(pl.lit(source).alias("source")))
        result.tables[M.T.EVENT] = events
        result.notes.extend(event_notes)
    return results


def _read_pieces(
    text: str | bytes, prefix: Prefix, wrapper: str | None, tz: str, report_bytes: Callable[[int], None]
) -> list[Chunk]:
    """The chunks of one log: one, or record-aligned pieces read two at a time (one per core);
    ``report_bytes`` is told each piece's size once read."""
    size = len(text) - 1 if text[-1:] in ("\n", b"\n") else len(text)  # no copy of a GB text to drop one newline
    bounds = _chunk_bounds(text, size, prefix, wrapper)

    def read(index: int) -> Chunk:
        start, end = bounds[index]
        end = end - 1 if index + 1 < len(bounds) else end  # the newline before the next piece
        chunk = _read_chunk(text[start:end], prefix, wrapper, tz)
        report_bytes(end - start)
        return chunk

    if len(bounds) == 1:
        return [read(0)]
    with ThreadPoolExecutor(max_workers=2) as pool:  # polars releases the GIL: one piece per core
        chunks = list(pool.map(read, range(len(bounds))))
    firsts = itertools.accumulate((chunk.lines for chunk in chunks[:-1]), initial=0)
    return [chunk.shifted(first) for chunk, first in zip(chunks, firsts)]


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_bytes`` of each member, the small logs of one shape (prefix, zone) read as one log
    (``pg_batch``): each gets what it gets alone -- rows with its own stmt_id and lines, its notes,
    warnings and time range. Wrapped logs (logplex, syslog) and logs of a shape of their own are
    read alone."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    groups: dict[tuple[str, str], list[tuple[int, str | bytes]]] = {}
    shapes: dict[tuple[str, str], Shape] = {}
    for index, (data, ctx) in enumerate(members):
        try:
            body = _body(data)
            shape = _shape(body)
        except ParseError as error:
            results[index] = error
            continue
        if isinstance(shape, ParseResult):
            results[index] = shape
            continue
        key = (ctx.tz, repr(shape))
        if shape.wrapper:
            key = (ctx.tz, f"{index}:{key[1]}")  # its lines interleave by pid: read alone
        shapes[key] = shape
        groups.setdefault(key, []).append((index, body))
    for key, shape in shapes.items():
        group = groups[key]
        tz, warnings = M.safe_tz(key[0])
        read = _read_logs([body for _, body in group], [members[index][1].source for index, _ in group], shape, tz, warnings)
        for (index, _), result in zip(group, read):
            results[index] = result
    return results  # type: ignore[return-value]


def _no_severity(sample: list[str]) -> ParseResult:
    foreign = [line for line in sample if FOREIGN_SEVERITY_RE.match(line)]
    if not foreign:
        raise ParseError("no PostgreSQL log entry found (no 'LOG:', 'ERROR:', 'STATEMENT:'... after a log_line_prefix)")
    return ParseResult(
        tables={M.T.STATEMENT: M.T.empty(M.T.STATEMENT), M.T.PLAN_NODE: M.T.empty(M.T.PLAN_NODE)},
        records=0,
        warnings=[ParseWarning(
            None,
            f"lines look like a PostgreSQL log but no severity is in English (e.g. {foreign[0][:70]!r}): "
            "lc_messages is not English, nothing can be read; set lc_messages = 'C' on the server",
        )],
        notes=["no statements read: messages are not in English"],
    )


# ---- detection ------------------------------------------------------------------------------------

_SEV_TWO_SPACES_RE = lazy_compile(r"(?m)(?:^|[^\w])(?:LOG|ERROR|FATAL|PANIC|WARNING|STATEMENT|DETAIL|HINT|CONTEXT|NOTICE|INFO):  \S")
_SEV_ONE_SPACE_RE = lazy_compile(r"(?m)(?:^|[^\w])(?:LOG|ERROR|FATAL|STATEMENT):\s\S")
_PG_WORDS_RE = lazy_compile(
    r"duration: \d|statement: |checkpoint (?:starting|complete)|database system|connection (?:received|authorized)|"
    r"disconnection: |automatic (?:vacuum|analyze)|temporary file: |sql_error_code = "
)


def detect(head: str, name: str) -> float:
    """Every member's head meets this: the regexes, which try their alternations at every position,
    run only where a cheap test leaves a chance (``":  "``, the two spaces PostgreSQL writes after a
    severity; a PostgreSQL word before a severity with one space)."""
    if head.lstrip().startswith("{"):
        return 0.0  # jsonlog
    two_spaces = ":  " in head
    two = len(_SEV_TWO_SPACES_RE.findall(head)) if two_spaces else 0
    if two >= 2:
        return 0.9
    words = len(_PG_WORDS_RE.findall(head))
    if two and words:
        return 0.9
    if words and _SEV_ONE_SPACE_RE.search(head):
        return 0.75
    if not two_spaces:
        return 0.0
    foreign = sum(1 for line in head.split("\n") if FOREIGN_SEVERITY_RE.match(line) and LOOKS_LIKE_PG_HEAD_RE.match(line))
    return 0.6 if foreign >= 2 else 0.0


SPEC = ParserSpec(
    kind="postgresql-log",
    description="PostgreSQL stderr log (any log_line_prefix; Heroku logplex, syslog): statements, errors, auto_explain plans",
    detect=detect,
    parse=parse,
    parse_bytes=parse_bytes,
    parse_batch=parse_batch,
)
