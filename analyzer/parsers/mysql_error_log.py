"""MySQL / MariaDB / Percona error log -> ``event`` rows (starts, shutdowns, crashes, crash recovery,
aborted connections, fatal and error lines).

Sample input (MariaDB 10.11; MySQL 5.7/8.0 write ``2024-05-14T02:00:01.123456Z 0 [System] [MY-010931]
[Server] ...``, MySQL 5.6 ``2024-05-14 10:00:01 1234 [Note] ...``, 5.5 and older ``240514 10:00:01 [Note]``)::

    2026-11-29 22:53:48 0 [Note] Starting MariaDB 10.11.19-MariaDB-0+deb12u1 source revision 5843d84... as process 7900
    2026-11-29 22:53:48 0 [Note] mariadbd: ready for connections.
    2026-11-29 22:53:49 4 [Warning] Aborted connection 4 to db: 'unconnected' user: 'root' host: 'localhost' (Got timeout reading communication packets)
    261129 22:53:53 [ERROR] mariadbd got signal 11 ;
    2026-11-29 22:53:56 0 [Note] InnoDB: Starting crash recovery from checkpoint LSN=44404
    2026-11-29 22:53:58 0 [Note] mariadbd (initiated by: root[root] @ localhost []): Normal shutdown
    2026-11-29 22:53:58 0 [Note] mariadbd: Shutdown complete

Output table ``event`` (``tables.EVENT_SCHEMA``), component ``mysqld``, ``process`` the server binary
(``mysqld``, ``mariadbd``; on lines that do not name it, the one named nearest before, else after),
``pid`` from the last ``starting as process N`` / ``as process N`` line:

- ``start``: ``<server>: ready for connections`` (not the X Plugin's).
- ``shutdown``: ``Normal shutdown``, ``Received SHUTDOWN from user``, ``Shutdown complete``,
  ``mysqld_safe ... ended``: one row per stop (a completion right after its request is dropped).
- ``crash``: ``<server> got signal N`` / ``got exception`` (MySQL 5.7 writes it as
  ``02:00:01 UTC - mysqld got signal 11 ;``: the date is the one of the line before).
- ``restart``: ``mysqld_safe mysqld restarted``. ``recovery``: ``Starting crash recovery`` /
  ``Database was not shutdown normally`` (the server stopped uncleanly at an unknown earlier time).
- ``fatal``: ``[FATAL]`` lines and ``[ERROR] Aborting``. ``aborted-connection``: ``Aborted connection N
  to db: ...``. ``error``: other ``[ERROR]`` lines. Floods keep their first 10,000 rows (note).

Times: ISO stamps with ``Z`` or an offset are exact; zone-less ones are read in ``--tz`` (note).
Lines written through syslog/journald (``May 14 10:00:01 host mariadbd[1234]: 2024-05-14 ...``) are
read by their inner stamp. ``records`` = events.
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers import log_events as E
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import zones as Z
from dbdiag.parsers.kit.times import check_tz, local_to_utc
from dbdiag.patterns import lazy_compile
from dbdiag.tables import EVENT

_SERVER = r"(?P<process>[\w./-]*?(?:mysqld|mariadbd)[\w.-]*)"
RULES = (
    E.Rule("_pid", r"\b(?:starting as process|as process) (?P<pid>\d+)"),
    E.Rule("start", _SERVER + r": ready for connections"),
    E.Rule("shutdown", _SERVER + r"(?: \(initiated by: [^)]*\))?: Normal shutdown", repeat_of="shutdown"),
    E.Rule("shutdown", r"Received SHUTDOWN from user \S+\. Shutting down (?P<process>mysqld|mariadbd)", repeat_of="shutdown"),
    E.Rule("shutdown", _SERVER + r": Shutdown complete\b", repeat_of="shutdown"),
    E.Rule("shutdown", r"mysqld_safe mysqld from pid file \S+ ended", process="mysqld", repeat_of="shutdown"),
    E.Rule("restart", r"mysqld_safe (?:mysqld )?restarted", process="mysqld"),
    E.Rule("crash", r"\b(?P<process>mysqld|mariadbd) got (?:signal \d+|exception)"),
    E.Rule("recovery", r"\bStarting crash recovery|\bDatabase was not shut ?down normally", repeat_of="recovery"),
    E.Rule("fatal", r"\[FATAL\]|\[ERROR\] (?:\[MY-\d+\] \[\w+\] )?Aborting\s*$"),
    E.Rule("aborted-connection", r"\bAborted connection \d+ to db: "),
    E.Rule("error", r"\[ERROR\] "),
)

_WRAPPER = r"(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \S+ [^\s:]+: )?"
STAMP_RE = (
    r"^" + _WRAPPER + r"(?:(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<zone>Z|[+-]\d\d:?\d\d)?"
    r"|(?P<local>\d{4}-\d\d-\d\d +\d{1,2}:\d\d:\d\d(?:\.\d+)?)|(?P<old>\d{6} +\d{1,2}:\d\d:\d\d)"
    r"|(?P<clock>\d\d:\d\d:\d\d) UTC - )"
)
_DATE_RE = r"^" + _WRAPPER + r"(?:(?P<d1>\d{4}-\d\d-\d\d)[T ]|(?P<d2>\d{6}) )"
_LINE_DETECT_RE = lazy_compile(
    r"(?m)^" + _WRAPPER + r"(?:\d{4}-\d\d-\d\d[T ]\s?\d{1,2}:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)?|\d{6} +\d{1,2}:\d\d:\d\d)"
    r" +(?:\d+ +)?\[(?:Note|Warning|ERROR|System|Info|Notice)\] "
)
_SAFE_DETECT_RE = lazy_compile(r"(?m)^(?:\d{6} +\d{1,2}:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) mysqld_safe ")


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text or text.isspace():
        raise ParseError("empty MySQL error log")
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    lines = E.lines_frame(text)
    rows = E.match_rules(lines, RULES, "text")
    if rows.is_empty():
        if not (_LINE_DETECT_RE.search(text[:200_000]) or _SAFE_DETECT_RE.search(text[:200_000])):
            raise ParseError("no MySQL/MariaDB error log line found ('<time> <thread> [Note|Warning|ERROR|System] ...')")
        return ParseResult(tables={EVENT: E.event_frame(_no_rows(), ctx.source)}, notes=["no start, stop, crash or error line"])
    rows, notes = _with_times(rows, lines, tz)
    server_pid = pl.when(pl.col("kind") == "_pid").then(pl.col("pid")).forward_fill()
    server = pl.col("process").str.extract(r"([^/]+)$", 1)
    rows = rows.with_columns(
        pl.coalesce(pl.col("pid"), server_pid).alias("pid"),
        pl.coalesce(server, server.forward_fill(), server.backward_fill(), pl.lit("mysqld")).alias("process"),
        pl.lit("mysqld").alias("component"),
        pl.lit(None, pl.String).alias("host"),
        pl.col("text").alias("message"),
    ).filter(pl.col("kind") != "_pid")
    rows, cap_notes = E.cap_kinds(E.drop_repeats(rows))
    events = E.event_frame(rows, ctx.source)
    return ParseResult(
        tables={EVENT: events}, records=events.height, warnings=warnings + E.untimed_warnings(events), notes=notes + cap_notes,
        time_range=E.time_range(events),
    )


def _no_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={"idx": pl.Int64, "message": pl.String, "pid": pl.String})


def _with_times(rows: pl.DataFrame, lines: pl.DataFrame, tz: str) -> tuple[pl.DataFrame, list[str]]:
    rows = rows.with_columns(pl.col("text").str.extract_groups(STAMP_RE).alias("s")).unnest("s")
    zones = Z.zone_counts(rows.filter(pl.col("iso").is_not_null())["zone"])
    iso_ts = Z.stamp_to_utc(pl.col("iso"), pl.col("zone"), tz, list(zones) or [None])
    local = pl.coalesce(
        pl.col("local").str.replace_all(r"\s+", " ").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us"),
        pl.col("old").str.replace_all(r"\s+", " ").str.to_datetime("%y%m%d %H:%M:%S", strict=False, time_unit="us"),
    )
    rows = rows.with_columns(pl.coalesce(iso_ts, local_to_utc(local, tz)).alias("ts"))
    notes = []
    zoneless = rows.filter(pl.col("local").is_not_null() | pl.col("old").is_not_null() | (pl.col("iso").is_not_null() & pl.col("zone").is_null())).height
    if zoneless:
        notes.append(f"error log times have no zone; read as {tz} (--tz)")
    if rows["clock"].is_not_null().any():
        rows = _clock_only_times(rows, lines)
    return rows, notes


def _clock_only_times(rows: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """``02:00:01 UTC - mysqld got signal 11 ;``: the date of the nearest dated line before it (UTC),
    a day later when the clock went past midnight."""
    dates = lines.select(
        "idx",
        pl.col("text").str.extract_groups(_DATE_RE).alias("d"),
    ).unnest("d").with_columns(
        pl.coalesce(
            pl.col("d1").str.to_date("%Y-%m-%d", strict=False),
            pl.col("d2").str.to_date("%y%m%d", strict=False),
        ).forward_fill().alias("date")
    ).select("idx", "date")
    rows = rows.join(dates, on="idx", how="left", maintain_order="left")
    clock = pl.col("clock").str.to_time("%H:%M:%S", strict=False)
    at = pl.col("date").dt.combine(clock).dt.replace_time_zone("UTC")
    previous = pl.col("ts").forward_fill().shift(1)
    at = pl.when(previous.is_not_null() & (at < previous - pl.duration(hours=1))).then(at + pl.duration(days=1)).otherwise(at)
    return rows.with_columns(pl.when(pl.col("clock").is_not_null()).then(at).otherwise(pl.col("ts")).alias("ts")).drop("date")


_SYSLOG_LINE_RE = lazy_compile(r"(?m)^[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \S+ [^\s:]+: ")


def detect(head: str, name: str) -> float:
    hits = len(_LINE_DETECT_RE.findall(head)) + len(_SAFE_DETECT_RE.findall(head))
    if hits and hits < 0.5 * len(_SYSLOG_LINE_RE.findall(head)):
        return 0.4  # a few server lines in a syslog of the whole host: the kernel-log parser reads it
    if hits >= 2:
        return 0.9
    if hits == 1:
        return 0.8 if re.search(r"err|mysql|maria", name, re.IGNORECASE) else 0.6
    return 0.0


SPEC = ParserSpec(
    kind="mysql-error-log",
    description="MySQL/MariaDB/Percona error log: starts, shutdowns, crashes, crash recovery, aborted connections",
    detect=detect,
    parse=parse,
)
