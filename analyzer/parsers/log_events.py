"""What the event parsers share: line rules, the ``event`` frame, dedup of lifecycle lines, caps.

The event parsers (``kernel_log``, ``mysql_error_log``, ``tidb_log``, ``pg_events``) read big logs in
which a few lines matter. Each describes those lines as ``Rule``s (a regex on the message, the
event kind, where process and pid come from); ``match_rules`` keeps the lines that match any rule
(one vectorised pass over all lines) and classifies them (the first rule that matches wins), so the
per-format code only ever sees the few candidate lines.

Event kinds (``event.kind``): ``oom-kill`` (a process killed for lack of memory), ``start`` (server
ready), ``shutdown`` (requested stop), ``crash`` (process died on a signal or failed), ``restart``
(a supervisor restarts it), ``recovery`` (crash recovery at start: the server had stopped uncleanly
at an unknown earlier time), ``fatal`` (FATAL/PANIC log level), ``memory-alarm`` (a server warns it
is near its memory limit), ``aborted-connection``, ``error`` (other error lines worth a timeline),
``host-restart`` (the host booted: sysstat ``LINUX RESTART`` records, written by ``sadf`` and
``mpstat_text`` for sar text, component ``host``). Events of logs without times have a null ``ts``.

>>> import polars as pl
>>> lines = pl.DataFrame({"idx": [0, 1], "text": ["x: ready for connections.", "noise"]})
>>> rules = (Rule("start", r"(?P<process>\\w+): ready for connections"),)
>>> match_rules(lines, rules, "text").select("idx", "kind", "process").rows()
[(0, 'start', 'x')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.lines import split_lines

MESSAGE_CHARS = 400  # an event keeps at most this much of its log line
MAX_ROWS_PER_KIND = 10_000  # floods (aborted connections, errors) keep their first rows; a note gives the total
LIFECYCLE_KINDS = ("start", "shutdown", "crash", "restart", "recovery")


@dataclass(frozen=True)
class Rule:
    """One kind of event line. ``pattern`` is searched in the message; its optional groups
    ``process`` and ``pid`` fill those columns (else ``process`` is the fixed name given here);
    ``component`` is the table's component, when the rule alone tells it.
    ``repeat_of``: a key shared by lines that say the same lifecycle step (``Normal shutdown`` then
    ``Shutdown complete``): such a line right after another with the same key (no other lifecycle
    line between them, same component) is dropped, so that one stop is one event."""

    kind: str
    pattern: str
    process: str | None = None
    repeat_of: str | None = None
    component: str | None = None


def _ungrouped(pattern: str) -> str:
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


def match_rules(lines: pl.DataFrame, rules: tuple[Rule, ...], column: str) -> pl.DataFrame:
    """The rows of ``lines`` whose ``column`` matches a rule, with ``kind``, ``rule`` (its index),
    ``process``, ``pid`` (String), ``component`` and ``repeat_of`` added; file order kept."""
    any_rule = "|".join(f"(?:{_ungrouped(rule.pattern)})" for rule in rules)
    candidates = lines.filter(pl.col(column).str.contains(any_rule))
    if candidates.is_empty():
        return candidates.with_columns(
            pl.lit(None, pl.String).alias("kind"), pl.lit(None, pl.Int32).alias("rule"),
            pl.lit(None, pl.String).alias("process"), pl.lit(None, pl.String).alias("pid"),
            pl.lit(None, pl.String).alias("component"), pl.lit(None, pl.String).alias("repeat_of"),
        )
    which = pl.lit(None, pl.Int32)
    for index in reversed(range(len(rules))):  # the first rule that matches wins
        which = pl.when(pl.col(column).str.contains(_ungrouped(rules[index].pattern))).then(pl.lit(index, pl.Int32)).otherwise(which)
    candidates = candidates.with_columns(which.alias("rule"))
    parts = []
    for index, rule in enumerate(rules):
        rows = candidates.filter(pl.col("rule") == index)
        if rows.is_empty():
            continue
        names = re.findall(r"\(\?P<(\w+)>", rule.pattern)
        fields = []
        if names:
            groups = pl.col(column).str.extract_groups(rule.pattern)
            fields = [groups.struct.field(name).alias(name) for name in ("process", "pid") if name in names]
        rows = rows.with_columns(fields)
        if "process" not in names:
            rows = rows.with_columns(pl.lit(rule.process, pl.String).alias("process"))
        if "pid" not in names:
            rows = rows.with_columns(pl.lit(None, pl.String).alias("pid"))
        parts.append(rows.with_columns(
            pl.lit(rule.kind).alias("kind"),
            pl.lit(rule.component, pl.String).alias("component"),
            pl.lit(rule.repeat_of, pl.String).alias("repeat_of"),
        ).select(*lines.columns, "kind", "rule", "process", "pid", "component", "repeat_of"))
    return pl.concat(parts, how="vertical_relaxed").sort("idx")


def drop_repeats(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows without the lifecycle lines that repeat the step of the lifecycle line before them
    (same ``repeat_of`` key and component); see ``Rule.repeat_of``. Needs ``idx``, ``kind``,
    ``repeat_of`` and ``component``."""
    lifecycle = rows.filter(pl.col("kind").is_in(LIFECYCLE_KINDS)).select("idx", "repeat_of", "component")
    previous = pl.col("repeat_of").shift(1).over(pl.col("component").fill_null(""))
    repeats = lifecycle.filter(pl.col("repeat_of").is_not_null() & (pl.col("repeat_of") == previous))["idx"]
    return rows.filter(~pl.col("idx").is_in(repeats.implode()))


def cap_kinds(rows: pl.DataFrame) -> tuple[pl.DataFrame, list[str]]:
    """At most MAX_ROWS_PER_KIND rows of each kind (the first ones), and a note per capped kind."""
    counts = rows.group_by("kind").len()
    over = counts.filter(pl.col("len") > MAX_ROWS_PER_KIND).sort("kind")
    if over.is_empty():
        return rows, []
    kept = rows.filter(pl.int_range(pl.len()).over("kind") < MAX_ROWS_PER_KIND)
    notes = [
        f"{kind}: {count} lines, the first {MAX_ROWS_PER_KIND} kept as events" for kind, count in over.iter_rows()
    ]
    return kept, notes


def trimmed(message: pl.Expr) -> pl.Expr:
    """The log line for ``event.message``: trailing blanks off, at most MESSAGE_CHARS characters."""
    text = message.str.strip_chars_end()
    return pl.when(text.str.len_chars() > MESSAGE_CHARS).then(text.str.slice(0, MESSAGE_CHARS - 1) + "…").otherwise(text)


def event_frame(rows: pl.DataFrame, source: str) -> pl.DataFrame:
    """The ``event`` table from rows holding ts, host, component, kind, process, pid (text or int),
    message and ``idx`` (0-based line index; ``line`` is idx + 1)."""
    frame = rows.with_columns(
        pl.col("pid").cast(pl.Int32, strict=False),
        trimmed(pl.col("message")).alias("message"),
        pl.lit(source).alias("source"),
        (pl.col("idx").cast(pl.Int64) + 1).alias("line"),
    )
    return T.conform(T.EVENT, frame)


def untimed_warnings(events: pl.DataFrame) -> list[ParseWarning]:
    """One warning for the events whose time could not be read (a log whose lines all carry one)."""
    untimed = events.filter(pl.col("ts").is_null())
    if untimed.is_empty():
        return []
    first = untimed.row(0, named=True)
    return [ParseWarning(first["line"], f"{untimed.height} event line(s) with an unreadable time kept without one: {first['message'][:60]!r}")]


def time_range(events: pl.DataFrame) -> tuple[object, object] | None:
    times = events["ts"].drop_nulls()
    return (times.min(), times.max()) if times.len() else None


def lines_frame(text: str) -> pl.DataFrame:
    """One row per line: ``idx`` (0-based) and ``text`` (CR removed)."""
    return split_lines(text[:-1] if text.endswith("\n") else text)
