"""The whole analysis, stage after stage, as in DESIGN.md (``_analyze`` is one line a stage):

capture (read) -> detect (a parser per member) -> context (zone, capture time: --tz and the manifest)
-> parse (bytes freed as it goes; small members of a kind together) -> merge tables -> derive -> rules
-> Analysis

The report stage (``report.py``) renders an ``Analysis``; nothing here writes files.
"""

from __future__ import annotations

import zoneinfo
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl

from dbdiag import collectors, tables as t
from dbdiag.capture import Capture, Limits, Member, read_capture
from dbdiag.derive import Derived, derive_all
from dbdiag.derive.sql import SqlOptions
from dbdiag.detect import detect
from dbdiag.engine import run_rules
from dbdiag.file_bytes import FileBytes
from dbdiag.findings import RuleOutcome
from dbdiag.memory import release_freed_memory
from dbdiag.parsers import PARSERS, manifest
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, decode_text
from dbdiag.progress import NO_PROGRESS, Progress
from dbdiag.rules import RULES
from dbdiag.rules.base import Rule, RuleInput
from dbdiag.timebounds import _range_inside, inside, within_time_bounds

DEFAULT_TZ = "UTC"
# Members up to this size go to their parser's ``parse_batch`` together, in batches up to BATCH_BYTES:
# 5,000 small slow logs cost one parse's fixed cost (tens of ms), not 5,000 of them.
BATCH_MEMBER_BYTES = 256 * 1024
BATCH_BYTES = 8 * 1024 * 1024
# Memory freed by parsing is given back (a full garbage collection, ~40 ms with polars and numpy loaded)
# only after parsing this much: what a smaller capture's parse frees is not worth a small run's time.
RELEASE_MEMORY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Options:
    tz: str | None = None  # zone for zone-less times; None = the manifest's, else UTC
    show_literals: bool = False  # SQL samples keep their literals (default: placeholders)
    limits: Limits = field(default_factory=Limits)
    window_s: float = 10.0  # width of the time windows of time accounting and the timeline
    pseudonymize: bool = False  # host names, IP addresses, users and databases replaced by stable pseudonyms


@dataclass
class InputRecord:
    """One line of the inventory: a member, what it was read as, and what came of it."""

    path: str
    size_bytes: int
    kind: str | None = None
    records: int = 0
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    lost: bool = False  # skipped for a cap, damage or a failed read (``Member.lost``): the capture is partial
    error: str | None = None
    time_range: tuple[Any, Any] | None = None

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "unreadable"
        return "read" if self.kind else "not recognised"


@dataclass
class Analysis:
    capture: Capture
    inputs: list[InputRecord]
    tables: dict[str, pl.DataFrame]
    derived: Derived
    outcomes: list[RuleOutcome]
    tz: str
    tz_origin: str
    options: Options = field(default_factory=Options)  # how it was run: the report states the privacy modes

    @property
    def recognised(self) -> list[InputRecord]:
        return [record for record in self.inputs if record.kind and not record.error]

    @property
    def partial_reasons(self) -> list[str]:
        reasons = [self.capture.partial] if self.capture.partial else []
        reasons += [f"{r.path}: {r.error}" for r in self.inputs if r.error]
        reasons += [f"{r.path}: {r.skipped}" for r in self.inputs if r.skipped and r.lost]
        reasons += self.derived.metrics.get("derive_errors", [])  # an analysis step lost to odd data
        return reasons


def decode(data: bytes | FileBytes) -> str:
    """UTF-8 that cannot fail; CRLF becomes LF (lone CR stays: it may sit inside SQL literals)."""
    return decode_text(bytes(data))  # a FileBytes read whole here; bytes stay the same object


UTF16_BOMS = {b"\xff\xfe": "utf-16-le", b"\xfe\xff": "utf-16-be"}


def utf16_as_utf8(data: bytes) -> tuple[bytes, str | None]:
    """UTF-16 text with a byte-order mark (PowerShell 5's ``>``, Excel's "Unicode text" exports) as
    UTF-8 bytes, and a note saying so; other bytes are returned as they are, with no note.

    >>> utf16_as_utf8("CPU %usr\\n".encode("utf-16"))
    (b'CPU %usr\\n', 'UTF-16 (little-endian) text: read as UTF-8')
    >>> utf16_as_utf8(b"plain")
    (b'plain', None)
    """
    codec = UTF16_BOMS.get(data[:2])
    if codec is None:
        return data, None
    # "replace": a lone surrogate cannot be written as UTF-8 at all
    text = data[2:].decode(codec, "replace")
    order = "little" if codec.endswith("le") else "big"
    return text.encode("utf-8"), f"UTF-16 ({order}-endian) text: read as UTF-8"


def parse_member(member: Member, spec: ParserSpec, tz: str) -> tuple[ParseResult | None, str | None]:
    return parse_text(decode(member.data or b""), member.path, spec, tz)


def parse_text(
    text: str, path: str, spec: ParserSpec, tz: str, ref_time: datetime | None = None, on_bytes: Callable[[int], None] | None = None,
) -> tuple[ParseResult | None, str | None]:
    context = ParseContext(source=path, tz=tz, ref_time=ref_time, on_bytes=on_bytes)
    return _guarded(lambda: spec.parse(text, context), spec)


def parse_bytes(
    data: bytes, path: str, spec: ParserSpec, tz: str, ref_time: datetime | None = None, on_bytes: Callable[[int], None] | None = None,
) -> tuple[ParseResult | None, str | None]:
    """``parse_text`` for a parser that reads raw bytes itself (``ParserSpec.parse_bytes``)."""
    assert spec.parse_bytes is not None
    context = ParseContext(source=path, tz=tz, ref_time=ref_time, on_bytes=on_bytes)
    return _guarded(lambda: spec.parse_bytes(data, context), spec)


def parse_bytes_owned(
    box: list[bytes], path: str, spec: ParserSpec, tz: str, ref_time: datetime | None = None, on_bytes: Callable[[int], None] | None = None,
) -> tuple[ParseResult | None, str | None]:
    """``parse_bytes`` for a parser that takes the bytes out of ``box`` (``ParserSpec.parse_bytes_owned``)
    and lets them go while it parses: the caller holds them in ``box`` only."""
    assert spec.parse_bytes_owned is not None
    context = ParseContext(source=path, tz=tz, ref_time=ref_time, on_bytes=on_bytes)
    return _guarded(lambda: spec.parse_bytes_owned(box, context), spec)


def _guarded(parse: Callable[[], ParseResult], spec: ParserSpec) -> tuple[ParseResult | None, str | None]:
    """The parse, with rows timed outside 1970-2200 dropped (``timebounds``), or why the member could
    not be read. A panic in polars' native code is a ``PanicException``, which derives from
    BaseException, not Exception: it is caught too (KeyboardInterrupt and SystemExit are not)."""
    try:
        return within_time_bounds(parse()), None
    except ParseError as error:
        return None, str(error)
    # polars' PanicException derives from BaseException: named beside Exception, or a native panic on
    # one member would end the whole run
    except (Exception, pl.exceptions.PanicException) as error:  # noqa: BLE001 - one bad member must not stop the capture
        first_line = str(error).strip().split("\n", 1)[0]  # polars appends the failing expression on more lines
        return None, f"parser {spec.kind} failed: {type(error).__name__}: {first_line}"


Outcome = tuple[int, "InputRecord", ParseResult | None, str | None]  # (order, record, result, why not read)


def _keep(outcomes: list[Outcome], results: dict[int, ParseResult]) -> None:
    """Each member's result into its inventory line, and into ``results`` when it was read."""
    for order, record, result, error in outcomes:
        if result is None:
            record.error = error
            continue
        record.records = result.records
        record.warnings = [w.as_text() for w in result.warnings]
        record.notes += result.notes
        record.time_range = result.time_range
        results[order] = result


@dataclass
class _Batch:
    """Small members of one kind waiting for their parser's ``parse_batch``."""

    spec: ParserSpec
    members: list[tuple[int, Member, InputRecord]] = field(default_factory=list)
    size_bytes: int = 0

    def add(self, order: int, member: Member, record: InputRecord) -> None:
        self.members.append((order, member, record))
        self.size_bytes += len(member.data or b"")

    def parse(self, tz: str, ref_time: datetime | None) -> list[Outcome]:
        """Each member's result, as ``parse_bytes`` alone would give it."""
        members, self.members = self.members, []
        return _parse_together(self.spec, members, tz, ref_time)


def _parse_together(
    spec: ParserSpec, members: list[tuple[int, Member, InputRecord]], tz: str, ref_time: datetime | None
) -> list[Outcome]:
    """``parse_batch`` of the members; when it fails as a whole, each half is parsed again the same
    way, down to single members parsed alone (which say what failed): a bad member costs itself and
    a few batches, not a parse of every other member alone."""
    if len(members) == 1:
        order, member, record = members[0]
        return [(order, record, *_parse_alone(member, spec, tz, ref_time))]
    items = [(m.data or b"", ParseContext(source=m.path, tz=tz, ref_time=ref_time)) for _, m, _ in members]
    try:
        return _outcomes(members, spec.parse_batch(items))
    # as in _guarded: polars' PanicException derives from BaseException
    except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - the halves say which member failed
        half = len(members) // 2
        return _parse_together(spec, members[:half], tz, ref_time) + _parse_together(spec, members[half:], tz, ref_time)


def _outcomes(members: list[tuple[int, Member, InputRecord]], parsed: list[ParseResult | ParseError]) -> list[Outcome]:
    """Each member's result (times out of bounds dropped) or why it was not read."""
    bounded = _within_time_bounds([r for r in parsed if isinstance(r, ParseResult)])
    outcomes: list[Outcome] = []
    for (order, _, record), result in zip(members, parsed, strict=True):
        if isinstance(result, ParseResult):
            outcomes.append((order, record, next(bounded), None))
        else:
            outcomes.append((order, record, None, str(result)))
    return outcomes


def _parse_alone(member: Member, spec: ParserSpec, tz: str, ref_time: datetime | None) -> tuple[ParseResult | None, str | None]:
    if spec.parse_bytes is not None:
        return parse_bytes(member.data or b"", member.path, spec, tz, ref_time)
    return parse_text(decode(member.data or b""), member.path, spec, tz, ref_time)


def _within_time_bounds(results: list[ParseResult]) -> Iterator[ParseResult]:
    """``within_time_bounds`` of each result, checking the rows of all of them at once first: usually
    none is out of bounds, and then only time ranges need a look."""
    outside = False
    for name in {name for result in results for name in result.tables}:
        frames = [r.tables[name] for r in results if name in r.tables and r.tables[name].height]
        columns = [c for c, dtype in frames[0].schema.items() if isinstance(dtype, pl.Datetime)] if frames else []
        if columns:
            rows = pl.concat(frames, how="vertical_relaxed").select(columns)  # one select, not one a member
            outside |= bool(rows.select(pl.any_horizontal(inside(pl.col(c)).not_().fill_null(False) for c in columns).any()).item())
    for result in results:
        yield within_time_bounds(result) if outside or not _range_inside(result.time_range) else result


def _resolve_tz(manifests: list[tuple[str, ParseResult | None]], requested: str | None) -> tuple[str, str]:
    """The zone for zone-less times: --tz (must exist), else the manifest's (if it exists), else UTC.
    ``manifests``: (path, parse result) of each manifest member."""
    if requested:
        _check_tz(requested, "--tz")
        return requested, "--tz"
    for path, result in manifests:
        zone = manifest.manifest_tz(result) if result else None
        if zone and _is_known_tz(zone):
            return zone, f"manifest {path}"
        if zone:
            return DEFAULT_TZ, f"default: manifest {path} names unknown zone {zone!r}"
    return DEFAULT_TZ, "default (no --tz, no manifest)"


def _capture_time(manifests: list[tuple[str, ParseResult | None]], zone: str) -> datetime | None:
    """When the capture was taken, from the manifest's ``taken_at`` (read in ``zone`` if it has no offset)."""
    for _, result in manifests:
        text = manifest.manifest_taken_at(result) if result else None
        if not text:
            continue
        try:
            taken = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            continue
        return taken if taken.tzinfo else taken.replace(tzinfo=zoneinfo.ZoneInfo(zone))
    return None


class UnknownTimeZone(ValueError):
    """--tz names a zone this system's tz database does not know."""


def _is_known_tz(zone: str) -> bool:
    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _check_tz(zone: str, origin: str) -> None:
    if not _is_known_tz(zone):
        raise UnknownTimeZone(f"unknown time zone {zone!r} (from {origin})")


def merge_tables(results: list[ParseResult]) -> dict[str, pl.DataFrame]:
    """Concatenate each named table over all members, in capture order, in its declared schema."""
    merged: dict[str, list[pl.DataFrame]] = {}
    for result in results:
        for name, frame in result.tables.items():
            merged.setdefault(name, []).append(frame)
    return {name: _merged(name, frames) for name, frames in merged.items()}


def _merged(name: str, frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Frames of one schema (the usual case) are stacked, then cast once; only mixed ones are cast
    one by one. With 5,000 small members, casting each (and asking each for its schema) took seconds."""
    try:
        stacked = pl.concat(frames, how="vertical")
    except (pl.exceptions.ShapeError, pl.exceptions.SchemaError):
        frames = [t.conform(name, frame) for frame in frames] if name in t.SCHEMAS else frames
        return pl.concat(frames, how="diagonal_relaxed")
    declared = t.SCHEMAS.get(name)
    if declared is None or list(stacked.schema.items()) == list(declared.items()):  # names, order and types
        return stacked
    return t.conform(name, stacked)


def analyze_capture(
    capture: Capture,
    options: Options = Options(),
    parsers: tuple[ParserSpec, ...] = PARSERS,
    rules: tuple[Rule, ...] = RULES,
    progress: Progress | None = None,
) -> Analysis:
    """Analyze a capture that stays the caller's (its member bytes are kept)."""
    return _analyze(capture, list(capture.members), options, parsers, rules, progress)


def analyze(path: Path, options: Options = Options(), progress: Progress | None = None) -> Analysis:
    """Read and analyze a capture, letting go of each member's bytes once it is decoded.

    A 200 MB slow log would otherwise sit in memory three times (bytes, text, parsed lines).
    """
    return analyze_read(read_capture(path, options.limits), options, progress)


def analyze_read(capture: Capture, options: Options = Options(), progress: Progress | None = None) -> Analysis:
    """``analyze`` of a capture already read (``read_capture``), which it consumes: its members are
    taken out of it and each one's bytes let go once parsed."""
    members = list(capture.members)
    capture.members.clear()
    info = replace(capture, members=[replace(member, data=None) for member in members])
    del capture
    return _analyze(info, members, options, PARSERS, RULES, progress)


def _analyze(
    capture: Capture,
    members: list[Member],
    options: Options,
    parsers: tuple[ParserSpec, ...],
    rules: tuple[Rule, ...],
    progress: Progress | None,
) -> Analysis:
    """The stages; ``members`` is consumed (emptied) so that bytes are freed as parsing goes."""
    progress = progress or NO_PROGRESS
    progress.stage("detect")
    inputs, detected = _detect_all(members, parsers)
    context = _context(detected, options.tz)
    parse_size = sum(len(member.data or b"") for member, _, _ in detected)
    progress.stage("parse", parse_size)
    results = _parse_all(detected, context, progress)
    tables = merge_tables(results)
    del results
    if parse_size >= RELEASE_MEMORY_BYTES:
        release_freed_memory()  # what parsing freed, before derive builds on it
    progress.stage("derive")
    derived = derive_all(tables, SqlOptions(show_literals=options.show_literals), options.window_s)
    progress.stage("rules")
    outcomes = run_rules(rules, RuleInput(tables=tables, derived=derived.tables, metrics=derived.metrics))
    return Analysis(capture, inputs, tables, derived, outcomes, context.zone, context.zone_origin, options)


Detected = tuple[Member, ParserSpec, InputRecord]  # a member to parse, its parser, its inventory line


def _detect_all(members: list[Member], parsers: tuple[ParserSpec, ...]) -> tuple[list[InputRecord], list[Detected]]:
    """Every member's inventory line, and the members some parser reads (UTF-16 ones as UTF-8);
    ``members`` is emptied."""
    inputs: list[InputRecord] = []
    detected: list[Detected] = []
    for member in members:
        record = InputRecord(path=member.path, size_bytes=member.size, skipped=member.skipped, lost=member.lost)
        inputs.append(record)
        if member.skipped or member.data is None:
            continue
        own = collectors.own_file(member.path)
        if own is not None:
            record.notes.append(own)  # a collector's record of its own run: no parser is asked
            continue
        data, note = utf16_as_utf8(member.data)
        if note:
            member = replace(member, data=data)
            record.notes.append(note)
        detection = detect(member.data, member.path.rsplit("/", 1)[-1], parsers)
        if detection.spec is None:
            if detection.reason and detection.reason != "not recognised":
                record.notes.append(detection.reason)
            elif (known := collectors.describe(member.path)) is not None:
                record.notes.append(known)  # a collector's file dbdiag does not parse: say what it is
            continue
        record.kind = detection.spec.kind
        detected.append((member, detection.spec, record))
    members.clear()
    return inputs, detected


@dataclass(frozen=True)
class Context:
    """What every parser is told: the zone of zone-less times (and where it came from) and when the
    capture was taken (for times without a year or date)."""

    zone: str
    zone_origin: str
    taken_at: datetime | None


def _context(detected: list[Detected], requested_tz: str | None) -> Context:
    """The parse context, from --tz and the capture's manifest (read once, here)."""
    manifests = [(member, spec) for member, spec, _ in detected if spec.kind == manifest.SPEC.kind]
    read = [(member.path, parse_member(member, spec, DEFAULT_TZ)[0]) for member, spec in manifests]
    zone, origin = _resolve_tz(read, requested_tz)
    return Context(zone, origin, _capture_time(read, zone))


def _parse_all(detected: list[Detected], context: Context, progress: Progress) -> list[ParseResult]:
    """Each detected member parsed (small ones of a kind together: ``parse_batch``), its inventory
    line filled; the results in capture order. ``detected`` is emptied, each member's bytes let go
    once parsed."""
    zone, taken_at = context.zone, context.taken_at
    by_order: dict[int, ParseResult] = {}
    batches: dict[str, _Batch] = {}
    detected.reverse()  # popped from the end, in capture order
    while detected:
        member, spec, record = detected.pop()
        order, size_bytes = len(detected), len(member.data or b"")
        progress.advance(0, member.path)
        if spec.parse_batch is not None and size_bytes <= BATCH_MEMBER_BYTES:
            batch = batches.setdefault(spec.kind, _Batch(spec))
            batch.add(order, member, record)
            if batch.size_bytes >= BATCH_BYTES:
                _keep(batches.pop(spec.kind).parse(zone, taken_at), by_order)
            progress.advance(size_bytes)
            continue
        told: list[int] = []  # bytes the parser said are done (pieces of a big log), from its threads

        def on_bytes(done_bytes: int) -> None:
            told.append(done_bytes)
            progress.advance(done_bytes)

        if isinstance(member.data, FileBytes) and not spec.reads_file_bytes:
            member = replace(member, data=bytes(member.data))  # this parser reads a member whole
        if spec.parse_bytes_owned is not None:
            box, path = [member.data or b""], member.path
            del member  # the bytes are in ``box`` only: the parser lets them go once it has read them
            result, error = parse_bytes_owned(box, path, spec, zone, taken_at, on_bytes)
        elif spec.parse_bytes is not None:
            data, path = member.data or b"", member.path
            del member
            result, error = parse_bytes(data, path, spec, zone, taken_at, on_bytes)
            del data
        else:
            text, path = decode(member.data or b""), member.path
            del member  # the bytes go now, before the parser builds its tables
            result, error = parse_text(text, path, spec, zone, taken_at, on_bytes)
            del text
        _keep([(order, record, result, error)], by_order)
        progress.advance(max(size_bytes - sum(told), 0))
    for batch in batches.values():
        _keep(batch.parse(zone, taken_at), by_order)
    return [by_order[order] for order in sorted(by_order, reverse=True)]  # in capture order: ``order`` counts down
