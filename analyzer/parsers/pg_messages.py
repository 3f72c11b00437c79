"""PostgreSQL log messages -> ``statement`` and ``plan_node`` rows, shared by the stderr, csvlog and
jsonlog parsers (each of them only turns its format into the *record frame* described below).

What PostgreSQL writes for a statement depends on the settings; all of these are read::

    duration: 0.287 ms  statement: drop table if exists pgbench_accounts    log_min_duration_statement
    duration: 0.274 ms  execute <unnamed>: UPDATE t SET a = $1              extended protocol (+ DETAIL parameters)
    duration: 0.375 ms  parse <unnamed>: UPDATE ... / bind <unnamed>: ...   extended-protocol phases
    statement: SELECT 42;   ...   duration: 0.373 ms                        log_statement=all + log_duration
    duration: 17.304 ms  plan:\\nQuery Text: SELECT ...\\nAggregate (...)     auto_explain (text or JSON)
    ERROR:  division by zero  +  STATEMENT:  SELECT 1/0;                    failed statement

How they become statement rows (one row per executed statement, none counted twice):

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

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers import pg_explain, pg_lock_waits
from dbdiag.parsers.base import ParseResult, ParseWarning
from dbdiag.parsers.kit.times import check_tz, local_to_utc
from dbdiag.parsers.kit.warning_caps import cap_warnings

ENGINE = "postgresql"
CSV_READER_MIN_CHARS = 1_000_000  # from this size lines are split by polars' CSV reader
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

# Fixed offsets of zone abbreviations PostgreSQL prints with %t/%m (log_timezone). Ambiguous ones
# (CST: US or China, IST: India, Israel or Ireland) are left out on purpose: read in --tz instead.
ZONE_OFFSETS_S = {
    "UTC": 0, "GMT": 0, "UT": 0, "Z": 0, "WET": 0, "WEST": 3600, "BST": 3600,
    "CET": 3600, "CEST": 7200, "MET": 3600, "MEST": 7200, "EET": 7200, "EEST": 10800, "MSK": 10800,
    "SAST": 7200, "EAT": 10800, "WAT": 3600, "CAT": 7200, "PKT": 18000, "WIB": 25200, "HKT": 28800,
    "AWST": 28800, "JST": 32400, "KST": 32400, "ACST": 34200, "ACDT": 37800, "AEST": 36000, "AEDT": 39600,
    "NZST": 43200, "NZDT": 46800, "HST": -36000, "AKST": -32400, "AKDT": -28800, "PST": -28800, "PDT": -25200,
    "MST": -25200, "MDT": -21600, "CDT": -18000, "EST": -18000, "EDT": -14400, "AST": -14400, "ADT": -10800,
    "NST": -12600, "NDT": -9000,
}


@dataclass
class Assembled:
    """Statement and plan-node tables of one member, plus what the inventory should say about them."""

    statements: pl.DataFrame
    plan_nodes: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)


# ---- times --------------------------------------------------------------------------------------


def zone_offset_s(zone: str) -> int | None:
    """Seconds east of UTC for ``UTC``/``CEST``/``+03``/``-0530``/``+05:30``; None when unknown."""
    match = re.fullmatch(r"([+-])(\d\d):?(\d\d)?", zone)
    if match:
        seconds = int(match.group(2)) * 3600 + int(match.group(3) or 0) * 60
        return -seconds if match.group(1) == "-" else seconds
    return ZONE_OFFSETS_S.get(zone.upper())


def stamp_to_utc(stamp: pl.Expr, zone: pl.Expr, tz: str, zones: list[str | None], with_t: bool = True) -> pl.Expr:
    """``2024-01-01 10:00:00[.123]`` (or with ``T`` when ``with_t``) and a zone text -> Datetime(us, UTC).

    ``zones`` lists the distinct zone texts, None for entries without one (offsets are looked up once
    each). A known zone gives a fixed offset; no zone or an unknown/ambiguous one is read in ``tz``.
    When every zone is known (the usual case) the reading in ``tz`` is left out of the expression."""
    if with_t:
        stamp = stamp.str.replace("T", " ", literal=True)
    naive = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    offsets = {z: zone_offset_s(z) for z in zones if z is not None}
    if offsets and None not in zones and None not in offsets.values() and set(offsets.values()) == {0}:
        return naive.dt.replace_time_zone("UTC")
    offset = zone.replace_strict(offsets, default=None, return_dtype=pl.Int64) if offsets else pl.lit(None, dtype=pl.Int64)
    fixed = (naive - pl.duration(seconds=offset)).dt.replace_time_zone("UTC")
    if offsets and None not in zones and None not in offsets.values():
        return fixed
    return pl.when(offset.is_not_null()).then(fixed).otherwise(local_to_utc(naive, tz))


def zone_notes(zone_counts: dict[str | None, int], tz: str) -> list[str]:
    """Notes on how zones were read (``zone_counts``: zone text or None -> entries): which
    abbreviations were converted, which fell back to ``tz``."""
    names = sorted(z for z in zone_counts if z is not None)
    unknown = [z for z in names if zone_offset_s(z) is None]
    notes = []
    if zone_counts.get(None):
        notes.append(f"{zone_counts[None]} log times have no zone; read as {tz} (--tz)")
    if unknown:
        notes.append(f"zone abbreviation(s) {', '.join(unknown[:5])} unknown or ambiguous; those times read as {tz} (--tz)")
    known = [z for z in names if z not in unknown]
    if known:
        notes.append(f"log times carry zone {', '.join(known[:5])}; converted to UTC")
    return notes


def zone_counts(zones: pl.Series) -> dict[str | None, int]:
    return {zone: count for zone, count in zones.value_counts().iter_rows()}


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


def split_lines(body: str | bytes) -> pl.DataFrame:
    """One row per line (``idx`` 0-based, ``text`` without its CR). ``body`` is the text or its UTF-8
    bytes. Big texts go through polars' CSV reader (multi-threaded; NUL as separator, no quoting),
    which refuses lines holding a NUL: those texts are split in Python instead."""
    series = None
    has_cr = ("\r" if isinstance(body, str) else b"\r") in body
    if len(body) > CSV_READER_MIN_CHARS:
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        try:
            series = pl.read_csv(
                data, has_header=False, separator="\x00", quote_char=None,
                new_columns=["text"], infer_schema=False, truncate_ragged_lines=False,
            )["text"].fill_null("")
        except pl.exceptions.PolarsError:
            series = None
        if series is not None and not _all_lines(series, data, has_cr):
            series = None
    if series is None:
        text = body if isinstance(body, str) else body.decode("utf-8", "surrogatepass")
        series = pl.Series("text", text.split("\n"), dtype=pl.String)
    frame = pl.DataFrame({"text": series}).with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64))
    return frame.with_columns(pl.col("text").str.strip_suffix("\r")) if has_cr else frame


def _all_lines(lines: pl.Series, data: bytes, has_cr: bool) -> bool:
    """Whether the CSV reader gave one row per line of ``data``. Without CR (which it may read as a line
    end) the line lengths and the newlines between them adding up to the size tells it cheaply; else
    (and when it drops bytes: a leading BOM) the newlines are counted."""
    if not has_cr and lines.str.len_bytes().sum() + lines.len() - 1 == len(data):
        return True
    return lines.len() == data.count(b"\n") + 1


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


def _normalised_sql(expr: pl.Expr) -> pl.Expr:
    return expr.str.replace_all(r"\s+", " ").str.strip_chars(" ;")


def _pair_openers(frame: pl.DataFrame) -> pl.DataFrame:
    """For each log_statement opener, the closer (bare duration, or the ERROR of the same SQL) that ends it."""
    frame = frame.filter(pl.col("kind").is_in(["stmt_only", "dur_only", "error"]))  # the only kinds that pair
    with_open = frame.with_columns(
        pl.when(pl.col("kind") == "stmt_only").then(pl.col("rec")).forward_fill().over("conn").alias("open_rec")
    )
    openers = frame.filter(pl.col("kind") == "stmt_only").select(
        pl.col("rec").alias("open_rec"), _normalised_sql(pl.col("body")).alias("open_sql")
    )
    closers = (
        with_open.filter(pl.col("kind").is_in(["dur_only", "error"]) & pl.col("open_rec").is_not_null())
        .join(openers, on="open_rec", how="left")
        .filter((pl.col("kind") == "dur_only") | (_normalised_sql(pl.col("statement")) == pl.col("open_sql")))
    )
    return (
        closers.group_by("open_rec")
        .agg(pl.col("rec").min().alias("close_rec"))
        .join(
            closers.select(
                pl.col("rec").alias("close_rec"), "kind", "ts", "start_ts", "query_time_s", "sqlstate", "txn_id", "digest"
            ),
            on="close_rec",
        )
        .rename({"kind": "close_kind", "ts": "close_ts", "start_ts": "close_start_ts", "query_time_s": "close_query_time_s",
                 "sqlstate": "close_sqlstate", "txn_id": "close_txn_id", "digest": "close_digest"})
    )


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


def _statement_rows(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Rows from log_statement openers and errors (duration entries are rows already; plans come later)."""
    base = BASE_COLUMNS
    no_time = pl.lit(None, dtype=pl.Float64)
    openers = frame.filter(pl.col("kind") == "stmt_only").join(pairs, left_on="rec", right_on="open_rec", how="left")
    by_duration = pl.col("close_kind") == "dur_only"
    by_error = pl.col("close_kind") == "error"
    opened = openers.select(
        *base,
        pl.col("close_ts").alias("end_ts"),
        pl.when(by_duration).then(pl.col("close_start_ts")).otherwise(pl.col("ts")).alias("start_ts"),
        pl.when(by_duration).then(pl.col("close_query_time_s")).otherwise(no_time).alias("query_time_s"),
        pl.col("body").alias("sql"), (pl.col("verb") == "execute").alias("prepared"),
        (~by_error.fill_null(False)).alias("success"),
        pl.when(by_error).then(pl.col("close_sqlstate")).alias("error_code"),
        pl.when(by_duration).then(pl.col("close_rec")).alias("close_rec"),
        pl.col("close_txn_id"),
        pl.col("close_digest"),
    ).with_columns(  # a log_statement line is written before query_id is computed: the closer has it
        pl.coalesce("txn_id", "close_txn_id").alias("txn_id"), pl.coalesce("digest", "close_digest").alias("digest")
    ).drop("close_txn_id", "close_digest")
    paired_errors = pairs.filter(pl.col("close_kind") == "error").select(pl.col("close_rec").alias("rec"))
    errors = frame.filter(pl.col("kind") == "error").join(paired_errors, on="rec", how="anti").select(
        *base, pl.col("ts").alias("end_ts"), pl.lit(None, dtype=T.UTC_TIME).alias("start_ts"), no_time.alias("query_time_s"),
        pl.col("statement").alias("sql"), pl.lit(None, dtype=pl.Boolean).alias("prepared"),
        pl.lit(False).alias("success"), pl.col("sqlstate").alias("error_code"),
        pl.lit(None, dtype=pl.Int64).alias("close_rec"),
    )
    return pl.concat([opened, errors], how="diagonal_relaxed").with_columns(pl.lit(False).alias("is_internal"))


def _closes(rows: pl.DataFrame, conns: pl.Series) -> pl.DataFrame:
    """Entries that close a statement row (its duration or error entry) on the connections ``conns``, in log
    order; ``row_at`` is the row's position in ``rows`` (its SQL is fetched for the few rows matched).
    ``conn_key`` is a hash of the connection, cheaper to match than its text: rows of another connection
    with the same hash may be among them (``row_conn`` tells)."""
    keyed = rows.with_row_index("row_at").with_columns(pl.col("conn").hash().alias("conn_key"))
    closes = keyed.filter(pl.col("close_rec").is_not_null() & pl.col("conn_key").is_in(conns.hash().unique().implode()))
    closes = closes.select(
        pl.col("close_rec").alias("next_close"), "conn_key", pl.col("conn").alias("row_conn"), pl.col("rec").alias("row_rec"), "row_at"
    )
    return _sorted(closes, "next_close")


def _next_close(entries: pl.DataFrame, closes: pl.DataFrame) -> pl.DataFrame:
    """``entries`` with the first of ``closes`` at or after each of them on its connection (``row_rec``,
    ``row_at``), matched on ``conn_key``; on the text when two connections share a hash."""

    def after(left: pl.DataFrame, right: pl.DataFrame, by: str) -> pl.DataFrame:
        return left.join_asof(
            right, left_on="rec", right_on="next_close", by=by, strategy="forward", coalesce=False, check_sortedness=False
        )

    found = after(entries.with_columns(pl.col("conn").hash().alias("conn_key")), closes, "conn_key")
    if (found["row_conn"] != found["conn"]).any():
        found = after(entries, closes.drop("conn_key").rename({"row_conn": "conn"}), "conn")
    return found.drop("conn_key", "row_conn", "next_close", strict=False)


def _attach_plans(frame: pl.DataFrame, rows: list[pl.DataFrame], plans: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Match each plan entry to the statement row (of ``rows``) it belongs to; return (plan-only rows, plan -> row key)."""
    if plans.is_empty():
        return pl.DataFrame(), pl.DataFrame(schema={"rec": pl.Int64, "row_rec": pl.Int64})
    entries = frame.filter(pl.col("kind") == "plan")
    closing = pl.concat([part.select("close_rec", "conn", "rec") for part in rows])
    sql = pl.concat([part["sql"] for part in rows])  # the texts stay where they are until a row is matched
    entries = entries.join(plans.select("rec", "query_text"), on="rec", how="left", maintain_order="left")
    entries = _next_close(entries, _closes(closing, entries["conn"]))
    entries = entries.drop("row_at").with_columns(_normalised_sql(sql.gather(entries["row_at"])).alias("row_sql"))
    nested = pl.col("context").is_not_null()
    matches = ~nested & pl.col("row_rec").is_not_null() & (_normalised_sql(pl.col("query_text")) == pl.col("row_sql"))
    entries = entries.with_columns(matches.fill_null(False).alias("matched"))
    # Several plans for one entry (a query string with several statements): the last one is its plan.
    chosen = entries.filter(pl.col("matched")).group_by("row_rec").agg(pl.col("rec").max().alias("plan_rec"))
    attached = chosen.select(pl.col("plan_rec").alias("rec"), "row_rec")
    own = entries.join(attached, on="rec", how="anti")
    internal = nested | pl.col("matched")
    own_rows = own.select(
        *BASE_COLUMNS,
        pl.col("ts").alias("end_ts"),
        "start_ts",
        "query_time_s",
        pl.col("query_text").alias("sql"),
        pl.lit(None, dtype=pl.Boolean).alias("prepared"),
        pl.lit(True).alias("success"),
        pl.lit(None, dtype=pl.String).alias("error_code"),
        internal.alias("is_internal"),
    ).with_columns(pl.when(pl.col("is_internal")).then(None).otherwise(pl.col("query_time_s")).alias("query_time_s"))
    plan_owner = pl.concat([attached, own.select("rec", pl.col("rec").alias("row_rec"))])
    return own_rows, plan_owner


def _sorted(frame: pl.DataFrame, first: str, *then: str) -> pl.DataFrame:
    """``frame`` sorted by ``first`` then ``then``; not copied when ``first`` already rises strictly
    (the usual case: entries come in log order, and sorting a frame of SQL texts is costly)."""
    if frame.select((pl.col(first).diff() > 0).all()).item():
        return frame
    return frame.sort(first, *then)


def _in_line_order(rows: pl.DataFrame, more: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (the bulk, in log order already) and ``more`` (a few rows) in line order: merged, so
    that the bulk is not sorted again (an entry's line is its own: no two rows share one)."""
    rows = _sorted(rows, "line", "rec")
    if more.is_empty():
        return rows
    more = pl.concat([rows.head(0), more], how="diagonal_relaxed").select(
        [pl.col(name).cast(dtype) for name, dtype in rows.schema.items()]
    )
    return rows.merge_sorted(more.sort("line", "rec"), key="line")


def assemble(entries: StatementEntries, source: str) -> Assembled:
    """Statement and plan-node rows from ``statement_entries`` output (see module docstring)."""
    frame = _sorted(entries.others, "rec")
    pairs = _pair_openers(frame)
    paired = _statement_rows(frame, pairs)
    plan_entries = frame.filter(pl.col("kind") == "plan").select("rec", "body")
    parsed = pg_explain.parse_plans(plan_entries)
    own_rows, plan_owner = _attach_plans(frame, [entries.rows, paired], parsed.summary)
    rows = _in_line_order(entries.rows, pl.concat([paired, own_rows], how="diagonal_relaxed"))
    rows = rows.with_row_index("stmt_id").with_columns(pl.col("stmt_id").cast(pl.Int64))
    planned = rows.filter(pl.col("rec").is_in(plan_owner["row_rec"].implode())).select(pl.col("rec").alias("row_rec"), "stmt_id")
    owner = plan_owner.join(planned, on="row_rec")
    summary = parsed.summary.join(owner.select("rec", "stmt_id"), on="rec")
    statements = rows.hstack(_placed(summary.drop("rec", "query_text"), rows.height)).with_columns(
        pl.lit(ENGINE).alias("engine"), pl.lit(source).alias("source"), pl.col("is_internal").fill_null(False)
    )
    nodes = parsed.nodes.join(owner.select("rec", "stmt_id"), on="rec").sort("stmt_id", "node_id").with_columns(source=pl.lit(source))
    notes = _notes(frame, pairs, plan_owner, rows)
    # one chunk per column: with mixed chunking, every later expression would copy the whole table
    statement = T.conform(T.STATEMENT, statements).rechunk()
    return Assembled(statement, T.conform(T.PLAN_NODE, nodes), notes + parsed.notes, parsed.warnings)


def _placed(plans: pl.DataFrame, height: int) -> pl.DataFrame:
    """The plan columns of ``height`` statement rows: each plan's values at its row (``stmt_id``, one plan
    a row), null elsewhere; written in place, as a join would go through every row."""
    at = plans["stmt_id"]
    return pl.DataFrame([
        pl.repeat(None, height, dtype=dtype, eager=True).alias(name).scatter(at, plans[name])
        for name, dtype in plans.drop("stmt_id").schema.items()
    ])


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


def statement_entries(records: pl.DataFrame) -> StatementEntries:
    """The entries statements are made of (a small part of a log), with the row columns they decide
    alone (``_entry_columns``); duration entries already turned into rows."""
    entries = _kinds(records).with_columns(_entry_columns()).drop("pid", "session", "host", "app", "xid", "vxid", "query_id")
    is_row = pl.col("kind") == "dur_stmt"
    return StatementEntries(entries.filter(is_row).select(_duration_row()), entries.filter(~is_row), pg_lock_waits.lock_wait_entries(records))


def _notes(frame: pl.DataFrame, pairs: pl.DataFrame, plan_owner: pl.DataFrame, rows: pl.DataFrame) -> list[str]:
    counts = dict(frame.group_by("kind").len().iter_rows())
    notes = []
    phases = frame.filter(pl.col("kind") == "phase")
    if phases.height:
        notes.append(
            f"{phases.height} parse/bind durations ({phases['dur_ms'].sum():.3f} ms in all) are phases of extended-protocol "
            "executions: not counted as statements (as pgBadger does), their time is in no row"
        )
    paired_by_duration = pairs.filter(pl.col("close_kind") == "dur_only").height
    if paired_by_duration:
        notes.append(f"{paired_by_duration} log_statement lines paired with the bare duration line that followed them")
    stray = counts.get("dur_only", 0) - paired_by_duration
    if stray:
        notes.append(f"{stray} bare duration lines with no open statement before them (parse/bind under log_duration) not counted")
    unpaired = _count(rows, pl.col("query_time_s").is_null() & pl.col("success") & ~pl.col("is_internal").fill_null(False))
    if unpaired:
        notes.append(f"{unpaired} statements logged without a duration (log_statement only): query_time_s is null")
    attached = plan_owner.filter(pl.col("rec") != pl.col("row_rec")).height
    if counts.get("plan"):
        notes.append(
            f"{counts['plan']} auto_explain plans; {attached} attached to the duration entry of the same execution "
            "(counted once)"
        )
    internal = _count(rows, pl.col("is_internal").fill_null(False))
    if internal:
        notes.append(
            f"{internal} plans of statements run inside another one (CONTEXT), or of an earlier statement of the same "
            "query string, kept as is_internal rows with no query_time_s (their time is in the caller's)"
        )
    errors = _count(rows, ~pl.col("success").fill_null(True))
    if errors:
        notes.append(f"{errors} failed statements (ERROR/FATAL with their statement text)")
    return notes


def _count(frame: pl.DataFrame, condition: pl.Expr) -> int:
    """Rows where ``condition`` holds, counted without building the filtered frame."""
    return frame.select(condition.fill_null(False).sum()).item()


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


def summarise_entries(records: pl.DataFrame, entries: StatementEntries | None = None) -> EntrySummary:
    """Counts over all entries: translated duration messages (lc_messages) and the commonest messages.

    The commonest messages only explain a result without statements: they are not counted when
    ``entries`` (``statement_entries`` of the same records) hold an entry that always makes a row."""
    message = pl.col("message")
    log = records.filter((pl.col("sev") == "LOG") & ~message.str.starts_with("duration: "))["message"]
    candidates = log.filter(log.str.contains(" ", literal=True) & log.str.contains(r"\d[.,]\d"))
    translated = candidates.filter(candidates.str.contains(TRANSLATED_DURATION_RE))
    heads = pl.DataFrame(schema={"head": pl.String, "count": pl.UInt32})
    if entries is None or not entries.make_rows():
        heads = records["message"].head(HEAD_SAMPLE).str.extract(r"^([a-z ]{3,30}?)(?: of| for|:|$)", 1).drop_nulls().value_counts(sort=True).head(5)
    stamps = records["ts"].drop_nulls()
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


def finish(entries: StatementEntries, summary: EntrySummary, source: str, notes: list[str], warnings: list[ParseWarning]) -> ParseResult:
    """The ParseResult every PostgreSQL parser returns."""
    assembled = assemble(entries, source)
    if summary.translated:
        warnings = warnings + [ParseWarning(
            None,
            f"{summary.translated} messages look translated (lc_messages is not English), e.g. "
            f"{summary.translated_sample!r}: their statements cannot be read; set lc_messages = 'C' on the server",
        )]
    if summary.unusable_durations:
        warnings = warnings + [ParseWarning(
            None,
            f"{summary.unusable_durations} durations not read (not a number, negative or over {MAX_DURATION_MS / 8.64e7:.0f} days): "
            "no statement row from them",
        )]
    statements = assembled.statements
    stamps = pl.concat([statements["start_ts"], statements["end_ts"]]).drop_nulls()
    time_range = (stamps.min(), stamps.max()) if stamps.len() else None
    if time_range is None and summary.first_ts is not None:
        time_range = (summary.first_ts, summary.last_ts)
    if statements.is_empty():
        notes = notes + [_why_no_statements(summary)]
    return ParseResult(
        tables={
            T.STATEMENT: statements,
            T.PLAN_NODE: assembled.plan_nodes,
            # only when the log has lock waits: the tables of every other log stay as they were
            **({T.LOCK_WAIT: _lock_waits(entries.locks, source)} if entries.locks.height else {}),
        },
        records=statements.height,
        warnings=cap_warnings(warnings + assembled.warnings),
        notes=notes + assembled.notes,
        time_range=time_range,
    )


def _lock_waits(locks: pl.DataFrame, source: str) -> pl.DataFrame:
    return T.conform(T.LOCK_WAIT, locks.head(pg_lock_waits.MAX_ROWS).with_columns(pl.lit(source).alias("source")))


def result(records: pl.DataFrame, source: str, notes: list[str], warnings: list[ParseWarning]) -> ParseResult:
    """``finish`` for a record frame read in one piece (csvlog, jsonlog)."""
    entries = statement_entries(records)
    return finish(entries, summarise_entries(records, entries), source, notes, warnings)


def _why_no_statements(summary: EntrySummary) -> str:
    if not summary.entries:
        return "no statements: no log entries"
    what = ", ".join(f"{w!r} x{n}" for w, n in summary.messages.most_common(3)) or "none recognised"
    return (
        f"no statements: none of the {summary.entries} entries is a statement duration, log_statement line, plan or "
        f"failed statement (most common: {what}); log_min_duration_statement/log_statement were probably off"
    )
