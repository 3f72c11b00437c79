"""TiDB, TiKV and PD logs in the unified log format (tikv/rfcs 2018-12-19-unified-log-format) -> ``event`` rows.

Sample input (one entry per line: ``[time] [LEVEL] [source file:line] [message] [key=value]...``)::

    [2024/05/14 10:00:01.123 +08:00] [INFO] [printer.go:34] ["Welcome to TiDB."] ["Release Version"=v7.5.1] [Edition=Community]
    [2024/05/14 10:05:00.001 +08:00] [WARN] [memory_usage_alarm.go:139] ["tidb-server has the risk of OOM because of memory usage exceeds alarm ratio. Running SQLs and heap profile will be recorded in record path"]
    [2024/05/14 10:07:12.502 +08:00] [INFO] [signal_posix.go:54] ["got signal to exit"] [signal=terminated]
    [2024/05/14 10:07:30.000 +08:00] [INFO] [lib.rs:80] ["Welcome to TiKV"]
    [2024/05/14 10:09:00.000 +08:00] [FATAL] [lib.rs:465] ["out of memory"] [backtrace="..."]

Output table ``event`` (``tables.EVENT_SCHEMA``):

- ``start``: the start banners ``Welcome to TiDB.``, ``Welcome to TiKV``, ``Welcome to Placement Driver (PD)``
  (also ``(API)``/``(TSO)`` modes), ``Welcome to TiFlash``.
- ``shutdown``: ``got signal to exit`` (TiDB, PD), ``receive signal N, stopping server`` (TiKV),
  ``server is shutting down``. ``fatal``: ``[FATAL]`` entries. ``crash``: a Go ``panic:`` or
  ``fatal error:`` line (``fatal error: runtime: out of memory``) as written to ``*_stderr.log`` (a
  stderr file holding only a Go crash dump, ``goroutine N [...]`` stacks, is read too; no times).
- ``memory-alarm``: ``risk of OOM`` / ``memory usage exceeds`` warnings of the server itself; the
  per-statement ``expensive_query`` and ``runaway`` entries are not events.

``component`` (tidb, tikv, pd, tiflash): the banner above the line, else the member name
(``tidb.log``, ``tikv-20160.log``, ``pd_stderr.log``), else the banner below it, else the source file
(``.rs`` -> tikv). ``process`` is the component's binary (``tidb-server``...), ``pid`` null.
Times carry their offset (exact). ``records`` = events.
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers import log_events as E
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.kit import zones as Z
from dbdiag.patterns import lazy_compile
from dbdiag.tables import EVENT
from dbdiag.vocabulary.processes import TIDB_PROCESS_OF_COMPONENT

_HEAD = r"^\[[^\]\n]*\] \[(?:DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\] \[[^\]\n]*\] "
RULES = (
    E.Rule("start", _HEAD + r'\["?Welcome to TiDB\.?"?\]', component="tidb"),
    E.Rule("start", _HEAD + r'\["?Welcome to TiKV\.?"?\]', component="tikv"),
    E.Rule("start", _HEAD + r'\["?Welcome to Placement Driver \(\w+\)\.?"?\]', component="pd"),
    E.Rule("start", _HEAD + r'\["?Welcome to TiFlash\.?"?\]', component="tiflash"),
    E.Rule("shutdown", _HEAD + r'\["?(?:got signal to exit|receive signal \d+, stopping server|server is shutting down)', repeat_of="shutdown"),
    E.Rule("fatal", r"^\[[^\]\n]*\] \[FATAL\] "),
    E.Rule("crash", r"^(?:panic: |fatal error: )"),
    E.Rule("memory-alarm", _HEAD + r"\[.*(?:risk of OOM|memory usage exceeds)"),
)
PROCESS = TIDB_PROCESS_OF_COMPONENT
STAMP_RE = r"^\[(?P<stamp>\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)?)(?: (?P<zone>[+-]\d\d:?\d\d|[A-Z]{1,5}))?\]"
_LINE_DETECT_RE = lazy_compile(
    r"(?m)^\[\d{4}/\d\d/\d\d \d\d:\d\d:\d\d(?:\.\d+)? [+-]\d\d:\d\d\] \[(?:DEBUG|INFO|WARN|ERROR|FATAL)\] \["
)
_NOT_EVENTS_RE = r"expensive_query|runaway"
_GO_CRASH_RE = lazy_compile(r"(?m)^(?:panic: |fatal error: )")
_GOROUTINE_RE = lazy_compile(r"(?m)^goroutine \d+ \[")


def component_from_name(name: str) -> str | None:
    """``tidb``/``tikv``/``pd``/``tiflash`` named in a member path (``tikv-20160.log``, ``pd_stderr.log``)."""
    base = name.lower().rsplit("/", 2)
    for part in reversed(base):
        for component in ("tiflash", "tikv", "tidb"):
            if component in part:
                return component
        if re.search(r"(?:^|[^a-z])pd(?:[^a-z]|$)", part):
            return "pd"
    return None


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text or text.isspace():
        raise ParseError("empty TiDB/TiKV/PD log")
    rows = E.match_rules(E.lines_frame(text), RULES, "text")
    rows = rows.filter(~((pl.col("kind") == "memory-alarm") & pl.col("text").str.contains(_NOT_EVENTS_RE)))
    if rows.is_empty():
        if not (_LINE_DETECT_RE.search(text[:200_000]) or _GOROUTINE_RE.search(text[:200_000])):
            raise ParseError("no unified-log-format line found ('[2024/05/14 10:00:01.123 +08:00] [INFO] [file:line] ...')")
        return ParseResult(tables={EVENT: E.event_frame(_no_rows(), ctx.source)}, notes=["no start, stop, fatal or OOM line"])
    by_name = component_from_name(ctx.source)
    by_file = pl.when(pl.col("text").str.contains(r"^\[[^\]]*\] \[\w+\] \[[^\]:]+\.rs:")).then(pl.lit("tikv"))
    stamp = pl.col("text").str.extract_groups(STAMP_RE)
    rows = rows.with_columns(stamp.struct.field("stamp").str.replace_all("/", "-", literal=True).alias("stamp"),
                             stamp.struct.field("zone").alias("zone"))
    zones = Z.zone_counts(rows.filter(pl.col("stamp").is_not_null())["zone"])
    rows = rows.with_columns(
        Z.stamp_to_utc(pl.col("stamp"), pl.col("zone"), ctx.tz, list(zones) or [None], with_t=False).alias("ts"),
        pl.coalesce(
            pl.col("component"), pl.col("component").forward_fill(), pl.lit(by_name, pl.String),
            pl.col("component").backward_fill(), by_file,
        ).alias("component"),
    ).with_columns(
        pl.col("component").replace_strict(PROCESS, default=None, return_dtype=pl.String).alias("process"),
        pl.lit(None, pl.String).alias("host"),
        pl.col("text").alias("message"),
    )
    notes = [f"{zones[None]} log times have no zone; read as {ctx.tz} (--tz)"] if zones.get(None) else []
    go_crash = pl.col("message").str.contains(r"^(?:panic: |fatal error: )")
    if rows.select(go_crash.any()).item():
        notes.append("Go panic / fatal error output carries no time: those crash events have none "
                     "(the next start banner in the server's log tells when it came back)")
    if rows["component"].is_null().any():
        notes.append("component not known for some events (no start banner, member name without tidb/tikv/pd)")
    rows, cap_notes = E.cap_kinds(E.drop_repeats(rows))
    events = E.event_frame(rows, ctx.source)
    return ParseResult(
        tables={EVENT: events}, records=events.height, notes=notes + cap_notes,
        warnings=E.untimed_warnings(events.filter(~pl.col("message").str.contains(r"^(?:panic: |fatal error: )"))),
        time_range=E.time_range(events),
    )


def _no_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={"idx": pl.Int64, "message": pl.String, "pid": pl.String})


def detect(head: str, name: str) -> float:
    hits = len(_LINE_DETECT_RE.findall(head))
    if hits >= 2:
        return 0.9
    if hits == 1:
        return 0.8 if component_from_name(name) else 0.6
    if _GO_CRASH_RE.search(head) and _GOROUTINE_RE.search(head):  # a Go server's stderr after a crash
        return 0.75 if component_from_name(name) else 0.55
    return 0.0


SPEC = ParserSpec(
    kind="tidb-log",
    description="TiDB/TiKV/PD log (unified log format): start banners, shutdown signals, FATAL, OOM alarms",
    detect=detect,
    parse=parse,
)
