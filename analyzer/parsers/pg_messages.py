"""PostgreSQL log messages -> ``statement`` and ``plan_node`` rows, shared by the stderr, csvlog and
jsonlog parsers (each of them only turns its format into the *record frame* described below).

What PostgreSQL writes for a statement depends on the settings; all of these are read::

    duration: 0.287 ms  statement: drop table if exists pgbench_accounts    log_min_duration_statement
    duration: 0.274 ms  execute <unnamed>: UPDATE t SET a = $1              extended protocol (+ DETAIL parameters)
    duration: 0.375 ms  parse <unnamed>: UPDATE ... / bind <unnamed>: ...   extended-protocol phases
    statement: SELECT 42;   ...   duration: 0.373 ms                        log_statement=all + log_duration
    duration: 17.304 ms  plan:\\nQuery Text: SELECT ...\\nAggregate (...)     auto_explain (text or JSON)
    ERROR:  division by zero  +  STATEMENT:  SELECT 1/0;                    failed statement

How they become statement rows (one row per executed statement, none counted twice; this module
classifies the entries and makes the rows of duration entries, ``pg_assemble`` pairs and finishes):

- ``duration ... statement:``/``execute <name>:``: one row; ``query_time_s`` = ms / 1000, ``end_ts`` = log
  time (the line is written when the statement ends), ``start_ts`` = end - duration. ``execute`` rows
  are ``prepared`` (extended protocol); bind parameters stay out of ``sql``.
- ``parse``/``bind`` durations are phases of one extended-protocol execution: like pgBadger, they are
  not statements; their count and total time are given in a note (their time is not in any row).
- ``statement:``/``execute <name>:`` without a duration (log_statement) is paired, on the same
  connection, with the first bare ``duration: X ms`` that follows it (log_duration) or with the
  ERROR of the same SQL; unpaired ones stay rows with a null ``query_time_s`` (the statement ran, its
  time was not logged; ``start_ts`` is the log time, ``end_ts`` null). Bare durations with no open
  statement before them (parse/bind phases under log_duration) are only counted in a note.
- auto_explain ``plan:`` entries are written at executor end, before the duration line of the same
  execution: a plan is attached to the next duration entry of the same connection when its Query
  Text is that statement's SQL (so the statement is counted once, with its plan). A plan with no
  such entry becomes a row of its own (query time from the plan's duration). Plans of statements run
  inside another one (``log_nested_statements``: the entry carries a CONTEXT), or a second plan
  for the same entry, become rows with ``is_internal`` True and a null ``query_time_s``: their time is
  already inside the calling statement's, so sums over ``query_time_s`` stay right.
- ERROR/FATAL/PANIC with the statement text (STATEMENT line, csv ``query``, json ``statement``): a row
  with ``success`` False, ``error_code`` the SQLSTATE when the format gives it, ``end_ts`` the error
  time and a null ``query_time_s`` (PostgreSQL logs no duration for failed statements).

The record frame (``RECORD_SCHEMA``) has one row per log entry, in file order: ``rec`` (order used
for pairing), ``line`` (1-based first line), ``ts`` (UTC), ``pid``, ``session``, ``user``, ``db``,
``host``, ``app``, ``xid``, ``vxid``, ``sqlstate``, ``query_id``, ``sev``, ``message`` (with its
continuation lines), ``statement`` (the STATEMENT text attached to it), ``context``.

Statement columns set: engine "postgresql", start_ts, end_ts, query_time_s, user, client_host, db,
conn_id (session id when the log has it, else pid), txn_id (virtual xid, else xid when not 0), digest
(query_id when not 0), plan, plan_signature, index_names, full_scan (plan has a Seq Scan), filesort
(plan has a Sort), prepared, is_internal, success, error_code, sql, source, line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers import pg_lock_waits
from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.times import check_tz
from dbdiag.parsers.kit.zones import stamp_to_utc, zone_counts, zone_notes

ENGINE = "postgresql"
VERB_WINDOW = 200  # characters after the duration that hold "execute <statement/portal name>: "
HEAD_SAMPLE = 20_000  # entries whose message heads are counted for the "no statements" note
# a longer duration is no statement's (a corrupt line): its microseconds would not fit an Int64 either
MAX_DURATION_MS = 366 * 24 * 3600 * 1000.0
MAIN_SEVERITIES = ("DEBUG1", "DEBUG2", "DEBUG3", "DEBUG4", "DEBUG5", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "LOG", "FATAL", "PANIC")
SUB_SEVERITIES = ("DETAIL", "HINT", "QUERY", "CONTEXT", "LOCATION", "STATEMENT")
SEVERITY_ALTERNATION = "|".join(("DEBUG[1-5]", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "LOG", "FATAL", "PANIC", *SUB_SEVERITIES))
ERROR_SEVERITIES = ("ERROR", "FATAL", "PANIC")
SEVERITIES = MAIN_SEVERITIES + SUB_SEVERITIES
ROW_KINDS = ("dur_stmt", "stmt_only", "plan", "error")  # statement entries that always make a statement row

RECORD_SCHEMA = {
    "rec": pl.Int64,
    "line": pl.Int64,
    "ts": T.UTC_TIME,
    "pid": pl.String,
    "session": pl.String,
    "user": pl.String,
    "db": pl.String,
    "host": pl.String,
    "app": pl.String,
    "xid": pl.String,
    "vxid": pl.String,
    "sqlstate": pl.String,
    "query_id": pl.String,
    "sev": pl.String,
    "message": pl.String,
    "statement": pl.String,
    "context": pl.String,
    "detail": pl.String,
}

# A duration message in another language (lc_messages not English): "durée : 0.285 ms, instruction : ...",
# "Dauer: 0.1 ms  Anweisung: ...". Such messages cannot be read; they are counted in a warning.
TRANSLATED_DURATION_RE = r"^[^\W\d_][^\s:]*(?: [^\W\d_][^\s:]*)?\s?: ?\d+[.,]\d+ ?\S{1,3}[,\s]"

@dataclass(frozen=True)
class Files:
    """The logs one parse reads: one log (``first_lines == (1,)``), or the small logs of a batch joined
    in order (``pg_stderr.parse_batch``), each starting at its 1-based line of ``first_lines``. What
    pairs entries (connections, sub-entries, continuation lines) stays within one log."""

    first_lines: tuple[int, ...] = (1,)

    def __len__(self) -> int:
        return len(self.first_lines)

    def of(self, line: pl.Expr) -> pl.Expr:
        """The 0-based log of each 1-based ``line``."""
        if len(self.first_lines) == 1:
            return pl.lit(0, dtype=pl.Int64)
        return (pl.lit(pl.Series(self.first_lines, dtype=pl.Int64)).search_sorted(line, side="right") - 1).cast(pl.Int64)

    def first_line_of(self, line: pl.Expr) -> pl.Expr:
        """The first line (1-based) of the log each 1-based ``line`` is in."""
        return pl.lit(pl.Series(self.first_lines, dtype=pl.Int64)).gather(self.of(line))

    def split(self, frame: pl.DataFrame, line: str = "line") -> list[pl.DataFrame]:
        """``frame`` (rows in line order) cut into one frame per log, each log's ``line`` counted from 1."""
        if len(self.first_lines) == 1:
            return [frame]
        parts = [frame.head(0)] * len(self.first_lines)
        for log, part in self.parts(frame, line):
            parts[log] = part
        return parts

    def parts(self, frame: pl.DataFrame, line: str = "line") -> Iterator[tuple[int, pl.DataFrame]]:
        """(log, its rows) of each log that has rows in ``frame`` (rows in line order), each log's
        ``line`` counted from 1."""
        logs = pl.Series(self.first_lines, dtype=pl.Int64).search_sorted(frame[line], side="right").cast(pl.Int64) - 1
        counts = logs.rle()  # rows in line order: each log's rows are together
        start = 0
        for log, size in zip(counts.struct.field("value").to_list(), counts.struct.field("len").to_list()):
            yield log, frame.slice(start, size).with_columns(pl.col(line) - (self.first_lines[log] - 1))
            start += size


ONE_LOG = Files()


# ---- times --------------------------------------------------------------------------------------


def records_from_fields(fields: pl.DataFrame, tz: str) -> tuple[pl.DataFrame, list[str]]:
    """Record frame from csvlog/jsonlog fields: string columns named as in RECORD_SCHEMA, the time as
    text in ``ts_text`` (``2021-01-22 10:03:22.785 CET``), ``idx`` the 0-based entry number and
    ``line`` its first line. Entries written newest first (CloudNativePG) are paired in time order."""
    parts = fields["ts_text"].str.extract_groups(
        r"^\s*(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)\s?(?P<zone>[A-Za-z]{1,6}|[+-]\d\d(?::?\d\d)?)?\s*$"
    )
    frame = fields.with_columns(parts.struct.field("stamp").alias("stamp"), parts.struct.field("zone").alias("zone"))
    zones = zone_counts(frame["zone"])
    frame = frame.with_columns(stamp_to_utc(pl.col("stamp"), pl.col("zone"), tz, list(zones)).alias("ts"))
    notes = zone_notes(zones, tz)
    steps = frame.select(pl.col("ts").diff().dt.total_microseconds().alias("step"))["step"].drop_nulls()
    backwards, forwards = int((steps < 0).sum()), int((steps > 0).sum())
    order = pl.col("idx")
    if backwards > forwards:
        order = pl.len() - 1 - pl.col("idx")
        notes.append("entries are written newest first; paired in time order")
    frame = frame.with_columns(order.cast(pl.Int64).alias("rec"))
    for name in RECORD_SCHEMA:
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.String).alias(name))
    blank = pl.col("statement").is_null() | (pl.col("statement") == "")
    frame = frame.with_columns(
        pl.when(blank).then(None).otherwise(pl.col("statement")).alias("statement"),
        pl.when(pl.col("context") == "").then(None).otherwise(pl.col("context")).alias("context"),
        *[pl.when(pl.col(c).is_in(["", "[unknown]"])).then(None).otherwise(pl.col(c)).alias(c) for c in ("user", "db", "app", "host", "session")],
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in RECORD_SCHEMA.items()]), notes


def safe_tz(tz: str) -> tuple[str, list[ParseWarning]]:
    zone, warning = check_tz(tz)
    return zone, [warning] if warning else []


# ---- statements ---------------------------------------------------------------------------------


def _kinds(records: pl.DataFrame) -> pl.DataFrame:
    """Entries that matter for statements, classified; the rest (connections, checkpoints...) dropped.

    Offsets and short windows rather than one regex or full copies: this runs on every entry of
    GB-sized logs. ``duration: 0.287 ms  statement: SQL``: the "rest" starts after ``ms`` and its
    spaces; the verb is read in its first characters (the usual two spaces and ``statement: `` are
    told at once, only the other entries are read blank by blank), the statement name (``execute
    <name>:``) in a longer window taken only where there is one; the body is sliced once."""
    msg, sev = pl.col("message"), pl.col("sev")
    # what several expressions read is made a column first: each expression would compute it again
    frame = records.with_columns(msg.str.starts_with("duration: ").alias("is_dur"))
    is_dur = pl.col("is_dur")
    candidate = (sev == "LOG") & (is_dur | msg.str.starts_with("statement: ") | msg.str.starts_with("execute "))
    frame = frame.filter(candidate | (sev.is_in(ERROR_SEVERITIES) & pl.col("statement").is_not_null()))
    frame = frame.with_columns(msg.str.find(" ms", literal=True).cast(pl.Int64).alias("ms_at"))  # bytes = characters: ASCII before it
    ms_at = pl.col("ms_at")
    frame = frame.with_columns(  # the rest starts after "ms" and at most 4 blanks: one window holds them and the verb
        msg.str.slice(pl.when(is_dur).then(ms_at + 3).otherwise(0), 4 + max(len(m) for _, m in VERBS)).alias("window")
    )
    usual = is_dur & pl.col("window").str.starts_with("  statement: ")
    dur_ms = pl.when(is_dur).then(msg.str.slice(10, ms_at - 10)).cast(pl.Float64, strict=False)
    frame = frame.with_columns(  # "nan", "inf", a negative number or over a year is no duration (an edited or corrupt line)
        pl.when(_usable(dur_ms)).then(dur_ms).alias("dur_ms"), usual.alias("usual")
    )
    # most entries are "duration: X ms  statement: ...": their verb and offset are known, the others are read apart
    others = (~frame["usual"]).arg_true()
    verbs = frame.select(
        pl.when(pl.col("usual")).then(pl.lit("statement")).alias("verb"),
        (ms_at + 5).alias("rest_at"),
        pl.lit(False).alias("nothing_after"),
    )
    if others.len():
        read = _verbs(frame[others])
        verbs = verbs.with_columns(verbs[name].scatter(others, read[name]) for name in read.columns)
    frame = frame.hstack(verbs)
    verb = pl.col("verb")
    body_at = pl.when(verb == "plan").then(5).when(verb == "statement").then(11)
    has_name = verb.is_in(["execute", "parse", "bind"])
    if frame.select(has_name.any()).item():
        window = msg.str.slice(pl.col("rest_at"), pl.when(has_name).then(VERB_WINDOW).otherwise(0))
        body_at = body_at.otherwise(window.str.splitn(": ", 2).struct.field("field_0").str.len_chars() + 2)  # "execute <name>: "
    body = pl.when(verb.is_not_null()).then(msg.str.slice(pl.col("rest_at") + body_at))
    dur = pl.col("dur_ms")
    is_log = sev == "LOG"
    kind = (
        pl.when(sev.is_in(ERROR_SEVERITIES) & pl.col("statement").is_not_null()).then(pl.lit("error"))
        .when(~is_log).then(None)
        .when(dur.is_not_null() & verb.is_in(["statement", "execute"])).then(pl.lit("dur_stmt"))
        .when(dur.is_not_null() & verb.is_in(["parse", "bind"])).then(pl.lit("phase"))
        .when(dur.is_not_null() & (verb == "plan")).then(pl.lit("plan"))
        .when(dur.is_not_null() & verb.is_null() & pl.col("nothing_after")).then(pl.lit("dur_only"))
        .when(~is_dur & verb.is_in(["statement", "execute"])).then(pl.lit("stmt_only"))
    )
    return (
        frame.with_columns(kind.alias("kind"))
        .filter(pl.col("kind").is_not_null())
        .with_columns(body.alias("body"))
        .drop("is_dur", "ms_at", "window", "usual", "rest_at", "nothing_after", "message")
    )


VERBS = (("statement", "statement: "), ("execute", "execute "), ("parse", "parse "), ("bind", "bind "), ("plan", "plan:"))


def _usable(dur_ms: pl.Expr) -> pl.Expr:
    return dur_ms.is_finite() & (dur_ms >= 0) & (dur_ms <= MAX_DURATION_MS)


def _verbs(frame: pl.DataFrame) -> pl.DataFrame:
    """``verb``, ``rest_at`` (where the text after the verb's blanks starts) and ``nothing_after`` of
    ``_kinds`` entries (``is_dur``, ``ms_at``, ``window``)."""
    is_dur, window = pl.col("is_dur"), pl.col("window")
    blanks = window.str.len_bytes() - window.str.strip_chars_start(" \t").str.len_bytes()  # one byte each
    frame = frame.select(is_dur, "ms_at", window, pl.when(is_dur).then(blanks.clip(upper_bound=4)).fill_null(0).alias("spaces"))
    frame = frame.select(
        pl.when(is_dur).then(pl.col("ms_at") + 3 + pl.col("spaces")).otherwise(0).alias("rest_at"),
        window.str.slice(pl.col("spaces"), max(len(m) for _, m in VERBS)).alias("head"),
    )
    head = pl.col("head")
    verb = pl.lit(None, dtype=pl.String)
    for word, marker in VERBS:
        verb = pl.when(head.str.starts_with(marker)).then(pl.lit(word)).otherwise(verb)
    return frame.select(verb.alias("verb"), "rest_at", (head == "").alias("nothing_after"))


def _ids() -> list[pl.Expr]:
    """txn_id (virtual xid, else a real xid) and digest (query_id; 0 means not computed)."""
    vxid = pl.col("vxid")
    real_vxid = pl.when(vxid.is_not_null() & (vxid != "") & ~vxid.str.ends_with("/0")).then(vxid)
    real_xid = pl.when(pl.col("xid").is_not_null() & ~pl.col("xid").is_in(["0", ""])).then(pl.col("xid"))
    query_id = pl.when(~pl.col("query_id").is_in(["0", ""])).then(pl.col("query_id"))
    return [pl.coalesce(real_vxid, real_xid).alias("txn_id"), query_id.alias("digest")]


def _entry_columns() -> list[pl.Expr]:
    """The columns of a statement row that depend on its entry alone (``statement_entries`` adds them:
    each chunk of a big log computes its own, in parallel). ``start_ts`` and ``query_time_s`` are
    those of a duration entry (null without a duration); ``conn`` keys the pairing per connection."""
    host = pl.col("host").str.replace(r"\(\d*\)$", "").str.replace(r"^(\d{1,3}(?:\.\d{1,3}){3}):\d+$", "$1")
    dur_ms = pl.col("dur_ms")
    return [
        pl.coalesce(pl.col("session"), pl.col("pid"), pl.lit("")).alias("conn"),
        host.alias("client_host"),
        pl.coalesce(pl.col("session"), pl.col("pid")).alias("conn_id"),
        *_ids(),
        (pl.col("ts") - pl.duration(microseconds=(dur_ms * 1000).round(0).cast(pl.Int64))).alias("start_ts"),
        seconds(dur_ms).alias("query_time_s"),
    ]


BASE_COLUMNS = ("rec", "line", "conn", "user", "db", "client_host", "conn_id", "txn_id", "digest")  # from the SQL's entry


def seconds(dur_ms: pl.Expr) -> pl.Expr:
    """Milliseconds (PostgreSQL prints 3 decimals) -> seconds, the double nearest to the printed value:
    whole microseconds over 1e6 in a true division. The divisor is a column on purpose: polars divides
    by a constant as a multiplication by its inverse, which lands one ulp off."""
    microseconds = (dur_ms * 1000).round(0).cast(pl.Int64).cast(pl.Float64)
    return microseconds / (microseconds * 0.0 + 1e6)


def _duration_row() -> list[pl.Expr]:
    """The statement row of a ``duration ... statement/execute`` entry: its own time and SQL."""
    return [
        *BASE_COLUMNS, pl.col("ts").alias("end_ts"), "start_ts", "query_time_s",
        pl.col("body").alias("sql"), (pl.col("verb") == "execute").alias("prepared"),
        pl.lit(True).alias("success"), pl.lit(None, dtype=pl.String).alias("error_code"),
        pl.col("rec").alias("close_rec"), pl.lit(False).alias("is_internal"),
    ]


@dataclass
class StatementEntries:
    """What ``assemble`` reads; each chunk of a big log hands over its own. ``rows``: the statement
    rows of ``duration ... statement/execute`` entries, ready (most of a log, so they are made per
    chunk, in parallel); ``others``: the other statement entries (log_statement openers, bare
    durations, errors, plans, parse/bind phases), classified, to be paired over the whole log."""

    rows: pl.DataFrame
    others: pl.DataFrame
    locks: pl.DataFrame = field(default_factory=pg_lock_waits.empty)  # lock waits, deadlocks (pg_lock_waits)

    @staticmethod
    def concat(parts: list["StatementEntries"]) -> "StatementEntries":
        # one chunk per column: rows are most of the statements table, and every step of ``assemble`` reads them
        return StatementEntries(
            pl.concat([p.rows for p in parts], rechunk=True), pl.concat([p.others for p in parts]), pl.concat([p.locks for p in parts])
        )

    def shifted(self, lines: int) -> StatementEntries:
        """The same entries numbered ``lines`` lines further on (``rec`` counts lines in a stderr log)."""
        moved = [pl.col(name) + lines for name in ("rec", "line", "close_rec")]
        return StatementEntries(self.rows.with_columns(moved), self.others.with_columns(moved[:2]), self.locks.with_columns(moved[1]))

    def make_rows(self) -> bool:
        """Whether these entries give at least one statement row."""
        return self.rows.height > 0 or self.others["kind"].is_in(ROW_KINDS).any()


def statement_entries(records: pl.DataFrame, files: Files = ONE_LOG) -> StatementEntries:
    """The entries statements are made of (a small part of a log), with the row columns they decide
    alone (``_entry_columns``); duration entries already turned into rows. With several logs
    (``files``), a connection is one of its own log: ``conn`` is prefixed with the log's number."""
    entries = _kinds(records).with_columns(_entry_columns()).drop("pid", "session", "host", "app", "xid", "vxid", "query_id")
    if len(files) > 1:
        entries = entries.with_columns((files.of(pl.col("line")).cast(pl.String) + "/" + pl.col("conn")).alias("conn"))
    is_row = pl.col("kind") == "dur_stmt"
    locks = pg_lock_waits.lock_wait_entries(records, files.of(pl.col("line")) if len(files) > 1 else None)
    return StatementEntries(entries.filter(is_row).select(_duration_row()), entries.filter(~is_row), locks)


@dataclass
class EntrySummary:
    """What the inventory needs to know about all entries of a member (chunks are merged)."""

    entries: int = 0
    translated: int = 0
    translated_sample: str | None = None
    first_ts: object = None
    last_ts: object = None
    messages: Counter = field(default_factory=Counter)
    unusable_durations: int = 0  # "duration: X ms" with X not a duration (see _usable)

    def merge(self, other: "EntrySummary") -> "EntrySummary":
        stamps = [t for t in (self.first_ts, self.last_ts, other.first_ts, other.last_ts) if t is not None]
        return EntrySummary(
            self.entries + other.entries,
            self.translated + other.translated,
            self.translated_sample or other.translated_sample,
            min(stamps) if stamps else None,
            max(stamps) if stamps else None,
            self.messages + other.messages,
            self.unusable_durations + other.unusable_durations,
        )


def summarise_entries(records: pl.DataFrame, makes_rows: bool = False) -> EntrySummary:
    """Counts over all entries: translated duration messages (lc_messages) and the commonest messages.

    The commonest messages only explain a result without statements: they are not counted when the
    ``statement_entries`` of the same records hold an entry that always makes a row (``makes_rows``)."""
    message = pl.col("message")
    log = records.filter((pl.col("sev") == "LOG") & ~message.str.starts_with("duration: "))["message"]
    candidates = log.filter(log.str.contains(" ", literal=True) & log.str.contains(r"\d[.,]\d"))
    translated = candidates.filter(candidates.str.contains(TRANSLATED_DURATION_RE))
    heads = pl.DataFrame(schema={"head": pl.String, "count": pl.UInt32})
    if not makes_rows:
        heads = records["message"].head(HEAD_SAMPLE).str.extract(r"^([a-z ]{3,30}?)(?: of| for|:|$)", 1).drop_nulls().value_counts(sort=True).head(5)
    stamps = python_times(records["ts"])
    durations = records.filter((pl.col("sev") == "LOG") & message.str.starts_with("duration: "))["message"]
    dur_ms = durations.str.slice(10, durations.str.find(" ms", literal=True) - 10).cast(pl.Float64, strict=False)
    return EntrySummary(
        records.height,
        translated.len(),
        translated[0][:60] if translated.len() else None,
        stamps.min() if stamps.len() else None,
        stamps.max() if stamps.len() else None,
        Counter(dict(heads.iter_rows())),
        dur_ms.len() - dur_ms.to_frame("d").select(_usable(pl.col("d")).fill_null(False).sum()).item(),
    )


def python_times(stamps: pl.Series) -> pl.Series:
    """The times of ``stamps`` that Python can hold (years 1-9999; a corrupt line can say year 0): their
    minimum and maximum become the time range, and the rows out of range are dropped with a warning by
    the pipeline's time bounds."""
    return stamps.filter(stamps.dt.year().is_between(1, 9999))
