"""The lines of a PostgreSQL stderr log -> the record frame of ``pg_messages`` (vectorised): which
lines start an entry, the prefix fields and severity of each, the continuation lines and sub-entries
(DETAIL, STATEMENT, CONTEXT...) each entry takes, and its time in UTC.

Sample (prefix ``%m [%p] %q%u@%d ``)::

    2026-11-29 20:51:34.451 UTC [3317] postgres@bench LOG:  duration: 0.844 ms  statement: SELECT a.aid
    \t  FROM pgbench_accounts a                                       <- continues the entry above
    2026-11-29 20:51:34.458 UTC [3317] postgres@bench ERROR:  division by zero
    2026-11-29 20:51:34.458 UTC [3317] postgres@bench STATEMENT:  SELECT 1/0;   <- sub-entry of the ERROR

With several logs read as one (``pg_messages.Files``), a line continues and a sub-entry belongs to an
entry of its own log only.
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers import pg_messages as M
from dbdiag.parsers import pg_prefix as P
from dbdiag.parsers.kit import zones as Z
from dbdiag.parsers.pg_prefix import KeyedLead, Prefix

def scan(lines: pl.DataFrame, prefix: Prefix, wrapper: str | None) -> pl.DataFrame:
    """Per line: wrapper fields, and the prefix fields, severity and ``lead`` (prefix and severity) of entry starts."""
    if wrapper:
        parts = pl.col("text").str.extract_groups(P.WRAPPERS[wrapper])
        lines = lines.with_columns(
            parts.struct.field("wts").alias("wts"),
            parts.struct.field("wzone").alias("wzone"),
            parts.struct.field("wpid").alias("wpid"),
            pl.coalesce(parts.struct.field("rest").str.replace(r"^#011", "\t"), pl.col("text")).alias("text"),
        )
    frame = _lead_fields(lines, prefix.lead_regexes)
    # the regex takes any upper-case word before the colon (cheaper than the alternation): keep severities
    return frame.with_columns(pl.when(pl.col("sev").is_in(M.SEVERITIES)).then(pl.col("sev")).alias("sev"))


def _lead_fields(lines: pl.DataFrame, regexes: tuple[str, ...]) -> pl.DataFrame:
    """The groups of the first of ``regexes`` that matches each line (null where none does). Each regex
    after the first reads only the lines the ones before it missed, and its few hits are written in
    place (rebuilding whole columns with ``when`` costs more than that regex)."""
    frame = lines.with_columns(pl.col("text").str.extract_groups(regexes[0]).alias("fields")).unnest("fields")
    for regex in regexes[1:]:
        missed = pl.when(pl.col("sev").is_null()).then(pl.col("text"))
        found = frame.select(missed.str.extract_groups(regex).alias("fields")).unnest("fields")
        hits = found["sev"].is_not_null().arg_true()
        if hits.len():
            frame = frame.with_columns(frame[name].clone().scatter(hits, found[name].gather(hits)) for name in found.columns)
    return frame


def _entries(frame: pl.DataFrame, wrapped: bool) -> pl.DataFrame:
    """``is_start`` and the entry (``rec``, its first line's idx) each line belongs to."""
    owner = pl.when(pl.col("sev").is_not_null()).then(pl.col("idx"))
    owner = owner.forward_fill().over("wpid") if wrapped else owner.forward_fill()
    return frame.with_columns(pl.col("sev").is_not_null().alias("is_start"), owner.alias("rec"))


def continuation(rest: pl.DataFrame) -> pl.DataFrame:
    """Continuation lines (of ``rest``, the lines that start no entry) joined per entry (one leading
    TAB removed: PostgreSQL adds it)."""
    return (
        rest.filter(pl.col("rec").is_not_null())
        .group_by("rec", maintain_order=True)
        .agg(pl.col("text").str.strip_prefix("\t").str.join("\n").alias("cont"))
    )


def records(
    starts: pl.DataFrame, continuation: pl.DataFrame, tz: str, wrapped: bool, recognised: bool = True, files: M.Files = M.ONE_LOG
) -> tuple[pl.DataFrame, list[dict]]:
    """The record frame of ``pg_messages`` and, per log, the zone counts of the entries' times
    (``recognised``: the prefix was inferred, so that its time has a space before the hour, never a T)."""
    cols = set(starts.columns)

    def col(name: str) -> pl.Expr:
        return pl.col(name) if name in cols else pl.lit(None, dtype=pl.String)

    frame = starts.with_columns(_messages(starts, continuation)).drop("msg")
    zones: list[dict] = [{} for _ in files.first_lines]
    if "epoch" in cols:
        ts = pl.from_epoch((pl.col("epoch").cast(pl.Float64) * 1e6).cast(pl.Int64), time_unit="us").dt.replace_time_zone("UTC")
        zones = _zone_counts(frame, pl.lit("UTC"), files)
    elif "stamp" in cols or wrapped:
        stamp, zone = ("stamp", "zone") if "stamp" in cols else ("wts", "wzone")
        zones = _zone_counts(frame, col(zone), files)
        with_t = stamp not in cols or (
            (stamp == "wts" or not recognised) and frame[stamp].str.contains("T", literal=True).any()
        )
        ts = Z.stamp_to_utc(pl.col(stamp), col(zone), tz, list(dict.fromkeys(z for log in zones for z in log)), with_t)
    else:
        ts = pl.lit(None, dtype=M.T.UTC_TIME)
    pid = pl.coalesce(col("pid"), col("wpid"))
    unknown = ["", "[unknown]"]
    frame = frame.with_columns(
        ts.alias("ts"),
        pid.alias("pid"),
        *[pl.when(~col(c).is_in(unknown)).then(col(c)).alias(c) for c in ("user", "db", "app", "host")],
        *[col(c).alias(c) for c in ("session", "xid", "vxid", "sqlstate", "query_id")],
    )
    records = _with_sub_entries(frame, files).with_columns((pl.col("idx") + 1).alias("line"))
    return records.select([pl.col(name).cast(dtype) for name, dtype in M.RECORD_SCHEMA.items()]), zones


def _zone_counts(frame: pl.DataFrame, zone: pl.Expr, files: M.Files) -> list[dict]:
    """Per log, how many entries carry each zone text (None: no zone)."""
    if len(files) == 1:
        return [Z.zone_counts(frame.select("idx", zone.alias("zone"))["zone"])]  # idx: the literal spans every row
    counted = frame.select(files.of(pl.col("idx") + 1).alias("file"), zone.alias("zone")).group_by("file", "zone").len()
    zones: list[dict] = [{} for _ in files.first_lines]
    for log, text, count in counted.sort("file").iter_rows():
        zones[log][text] = count
    return zones


def _messages(starts: pl.DataFrame, continuation: pl.DataFrame) -> pl.Series:
    """Each entry's ``message``: its first line's message, and its continuation lines when it has some
    (written in place: most entries have none, a join would copy them all)."""
    message = starts["msg"].alias("message")
    if continuation.is_empty():
        return message
    at = starts["rec"].search_sorted(continuation["rec"])  # entries are in line order
    joined = (message.gather(at) + "\n" + continuation["cont"]).str.strip_chars_end(" \t\n")
    return message.clone().scatter(at, joined)


def _with_sub_entries(frame: pl.DataFrame, files: M.Files) -> pl.DataFrame:
    """The main entries, each with the ``statement`` and ``context`` of its sub-entries."""
    attached = pl.DataFrame()
    if frame["sev"].is_in(M.SUB_SEVERITIES).any():  # else every entry is a main one: nothing to filter or join
        frame = frame.with_columns(_parent(frame, files))  # entries are in file order already
        is_main = pl.col("parent") == pl.col("rec")
        attached = _attached(frame.filter(~is_main & pl.col("parent").is_not_null()))
        frame = frame.filter(is_main)
    if attached.is_empty():
        return frame.with_columns(*(pl.lit(None, dtype=pl.String).alias(name) for name in ("statement", "context", "detail")))
    return frame.join(attached, left_on="rec", right_on="parent", how="left", maintain_order="left")


def _attached(subs: pl.DataFrame) -> pl.DataFrame:
    """The STATEMENT text and the CONTEXT lines of each main entry (``parent``) that has them."""
    return (
        subs.filter(pl.col("sev").is_in(["STATEMENT", "CONTEXT", "DETAIL"]))
        .group_by("parent", maintain_order=True)
        .agg(
            pl.col("message").filter(pl.col("sev") == "STATEMENT").first().alias("statement"),
            pl.col("message").filter(pl.col("sev") == "CONTEXT").str.join("\n").alias("context"),
            pl.col("message").filter(pl.col("sev") == "DETAIL").first().alias("detail"),
        )
        .with_columns(pl.when(pl.col("context") != "").then(pl.col("context")).alias("context"))
    )


def _parent(frame: pl.DataFrame, files: M.Files) -> pl.Expr:
    """The main entry (LOG, ERROR...) each DETAIL/STATEMENT/CONTEXT... entry belongs to: the previous
    main entry of the same pid, in the same log. Sub-entries follow their main entry directly unless
    processes interleave (syslog), so the cheap global fill is kept when it agrees on the pid."""
    is_main = ~pl.col("sev").is_in(M.SUB_SEVERITIES)
    parent = pl.when(is_main).then(pl.col("rec"))
    if frame["pid"].null_count() == frame.height:
        parent = parent.forward_fill()
    else:
        pid_of_main = pl.when(is_main).then(pl.col("pid")).forward_fill()
        interleaved = frame.select((~is_main & (pid_of_main != pl.col("pid"))).any()).item()
        parent = parent.forward_fill().over(pl.col("pid").fill_null("")) if interleaved else parent.forward_fill()
    if len(files) > 1:  # a main entry of the log before is no parent
        parent = pl.when(parent >= files.first_line_of(pl.col("rec") + 1) - 1).then(parent)
    return parent.alias("parent")


def scanned_starts(lines: pl.DataFrame, prefix: Prefix, wrapper: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(entry starts with their fields and ``msg``, the other lines with the entry ``rec`` they continue),
    every line read by the prefix regexes."""
    frame = _entries(scan(lines, prefix, wrapper), wrapper is not None)
    rest = frame.filter(~pl.col("is_start")).select("idx", "text", "rec")
    starts = frame.filter(pl.col("is_start")).with_columns(_message()).drop("text", "lead", "is_start")
    return starts, rest


def _message() -> pl.Expr:
    """An entry's first line without its lead (prefix and severity) and the blanks after it."""
    return pl.col("text").str.strip_prefix(pl.col("lead")).str.strip_chars_start(" \t").alias("msg")


def keyed_starts(lines: pl.DataFrame, prefix: Prefix) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``scanned_starts`` with the lines of a known key read once per key (see ``KeyedLead``); only the
    others (continuation lines, lines of another shape) go through the prefix regexes."""
    keyed = prefix.keyed
    assert keyed is not None
    width, text, cut = keyed.stamp_chars, pl.col("text"), pl.col("cut")
    timed = lines.with_columns(text.str.head(width).alias("stamp"), text.str.find(":  ", literal=True).alias("cut"))
    timed = timed.filter((cut >= width) & pl.col("stamp").str.contains(keyed.stamp_regex))
    # the cut is an offset in bytes: the key is cut from the bytes (after the ASCII time, up to the colon)
    timed = timed.with_columns(text.cast(pl.Binary).bin.slice(width, cut + 1 - width).cast(pl.String).alias("key"))
    fields = key_fields(timed["key"].unique(), keyed)
    read = timed.join(fields, on="key", how="left", maintain_order="left").filter(pl.col("matched"))
    scanned = scan(lines.filter(~_at(read["idx"], lines.height)), prefix, None)
    is_start = pl.col("sev").is_not_null()
    starts = read.filter(is_start).with_columns(text.str.slice(width + pl.col("key_chars") + 2).alias("msg"))  # after ":  "
    starts = starts.drop("text", "cut", "key", "key_chars", "matched")
    starts = starts.with_columns(_stripped(starts["msg"]))
    more = scanned.filter(is_start).with_columns(_message()).select(starts.columns)
    if more.height:
        starts = pl.concat([starts, more]).sort("idx")
    rest = read.filter(~is_start).select("idx", "text")
    rest = pl.concat([rest, scanned.filter(~is_start).select("idx", "text")]).sort("idx")
    return starts.with_columns(pl.col("idx").alias("rec")), rest.with_columns(_owner(starts["idx"], rest["idx"]))


def _stripped(messages: pl.Series) -> pl.Series:
    """``messages`` without leading blanks; rebuilt only where there are some (almost never after ``:  ``)."""
    blank = (messages.str.starts_with(" ") | messages.str.starts_with("\t")).arg_true()
    if blank.is_empty():
        return messages
    return messages.scatter(blank, messages.gather(blank).str.strip_chars_start(" \t"))


def key_fields(keys: pl.Series, keyed: KeyedLead) -> pl.DataFrame:
    """The prefix fields and severity of each distinct key the key regex matches whole; with ``%q``,
    of the keys it does not match at all, the ones the part before ``%q`` matches whole."""

    def fields(frame: pl.DataFrame, regex: str) -> pl.DataFrame:
        return frame.with_columns(pl.col("key").str.extract_groups(regex).alias("fields")).unnest("fields")

    found = fields(keys.to_frame("key"), keyed.key_regex)
    read = found.filter(pl.col("keyed") == pl.col("key"))
    if keyed.short_regex:
        short = fields(found.filter(pl.col("keyed").is_null()).select("key"), keyed.short_regex)
        read = pl.concat([read, short.filter(pl.col("keyed") == pl.col("key"))], how="diagonal")
    return read.drop("keyed").with_columns(  # one chunk: joining every line to a table in pieces costs 3 times more
        pl.when(pl.col("sev").is_in(M.SEVERITIES)).then(pl.col("sev")).alias("sev"),
        pl.col("key").str.len_chars().alias("key_chars"),
        pl.lit(True).alias("matched"),
    ).rechunk()


def _at(positions: pl.Series, size: int) -> pl.Series:
    """A mask of ``size`` rows, true at ``positions``."""
    return pl.zeros(size, dtype=pl.Boolean, eager=True).scatter(positions, True)


def _owner(starts: pl.Series, lines: pl.Series) -> pl.Series:
    """The entry (``rec``) each of ``lines`` continues: the last of ``starts`` before it (both sorted), as
    ``_entries`` fills it forward."""
    if starts.is_empty():
        return pl.repeat(None, lines.len(), dtype=pl.Int64, eager=True).alias("rec")
    before = starts.search_sorted(lines).cast(pl.Int64) - 1  # no line is in both
    found = starts.gather(before.clip(lower_bound=0)).cast(pl.Int64)
    return pl.select(pl.when(before >= 0).then(found)).to_series().alias("rec")


def fallback_fields(starts: pl.DataFrame) -> pl.DataFrame:
    """Time, zone and pid of entry lines whose prefix was not recognised, from the text before the
    severity (``pre``). An offset ends at a word boundary: ``-11111111...`` (a corrupt number) is no
    zone ``-1111``."""
    stamp = pl.col("pre").str.extract_groups(
        r"(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)(?: ?(?P<zone>[A-Z]{1,5}\b|[+-]\d\d(?::?\d\d)?\b))?"
    )
    return starts.with_columns(
        stamp.struct.field("stamp").alias("stamp"),
        stamp.struct.field("zone").alias("zone"),
        pl.col("pre").str.extract(r"\[(\d+)\]", 1).alias("pid"),
    )
