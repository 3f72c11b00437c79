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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers import log_events, pg_batch, pg_events
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning

SAMPLE_LINES = 8000
SHAPE_SAMPLE = 400  # prefixes cut into tokens (the others only check the result)
CHUNK_CHARS = 16_000_000  # pieces read two at a time (one per core); bounds the working memory
MIN_PREFIX_MATCH = 0.8  # share of sampled severity lines the inferred prefix must match
# longer text before a severity is no log_line_prefix (a real one is under 200 characters); cutting
# tokens from it costs its length squared (the user@db token looks for an "@" from every position)
MAX_PREFIX_CHARS = 512
BOUNDARY_WINDOW_CHARS = 1_000_000  # text read at a time when looking for where a piece starts

# an entry line's prefix ends at the first severity after a character that is not a letter, digit or _
# (else the line may start with it): searched for, cheaper than a lazy prefix regex on every line
SEV_AFTER_RE = re.compile(r"[^A-Za-z0-9_](?:" + M.SEVERITY_ALTERNATION + r"):")
SEV_FIRST_RE = re.compile(r"(?:" + M.SEVERITY_ALTERNATION + r"):")
LOGPLEX_RE = (
    r"^(?P<wts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<wzone>Z|[+-]\d\d:?\d\d)? (?:\S+ )?app\[[^\]]*?\.(?P<wpid>\d+)\]:? "
    r"\[[A-Z_]+\] \[\d+-\d+\] ?(?P<rest>.*)$"
)
SYSLOG_RE = (
    r"^(?P<wts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<wzone>Z|[+-]\d\d:?\d\d)? \S+ [\w./-]+\[(?P<wpid>\d+)\]: "
    r"\[\d+-\d+\] ?(?P<rest>.*)$"
)
WRAPPERS = {"Heroku logplex": LOGPLEX_RE, "syslog": SYSLOG_RE}
LOOKS_LIKE_PG_HEAD_RE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\S* (?:\S+ )?\[\d+\]")
# two letters, not {2,}: the same lines, and with .*? before it {2,} was quadratic on a long word
FOREIGN_SEVERITY_RE = re.compile(r"^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d.*?[^\W\d_]{2}\s?:  \S")

# Per escape: the regex for its value (named groups feed the record frame). ASCII classes ([0-9],
# [^ \t]) on purpose: Unicode \d and \S make the per-line pass markedly slower.
_ZONE_VALUE = r"(?P<zone>[A-Za-z]{1,6}|[+-][0-9][0-9](?::?[0-9][0-9])?)"
_STAMP = r"[0-9]{4}-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9]"
ESCAPE_REGEX = {
    "%m": r"(?P<stamp>" + _STAMP + r"\.[0-9]+) " + _ZONE_VALUE,  # PostgreSQL always prints the zone
    "%t": r"(?P<stamp>" + _STAMP + r") " + _ZONE_VALUE,
    "%m0": r"(?P<stamp>" + _STAMP + r"\.[0-9]+)",  # seen without a zone (edited logs)
    "%t0": r"(?P<stamp>" + _STAMP + r")",
    "%n": r"(?P<epoch>[0-9]+\.[0-9]+)",
    "%s": _STAMP + r"(?: (?:[A-Za-z]{1,6}|[+-][0-9][0-9](?::?[0-9][0-9])?))?",
    "%p": r"(?P<pid>[0-9]+)",
    "%c": r"(?P<session>[0-9a-f]+\.[0-9a-f]+)",
    "%l": r"[0-9]+",
    "%u": r"(?P<user>[^ \t]*?)",
    "%d": r"(?P<db>[^ \t]*?)",
    "%a": r"(?P<app>.*?)",
    "%h": r"(?P<host>[^ \t]*?)",
    "%r": r"(?P<host>[^ \t]*?)",
    "%x": r"(?P<xid>[0-9]*)",
    "%v": r"(?P<vxid>[0-9/]*)",
    "%e": r"(?P<sqlstate>[0-9A-Z]{5})",
    "%Q": r"(?P<query_id>-?[0-9]+)",
    "%i": r".*?",
    "%b": r".*?",
    "%P": r"[0-9]*",
    "%*": r".*?",
}
KEYED_ESCAPES = {
    "user": "%u", "usr": "%u", "u": "%u", "username": "%u",
    "db": "%d", "database": "%d", "dbname": "%d", "d": "%d",
    "app": "%a", "appli": "%a", "application": "%a", "application_name": "%a", "appname": "%a", "a": "%a",
    "client": "%h", "host": "%h", "remote": "%h", "client_addr": "%h", "clientaddr": "%h", "h": "%h", "r": "%h",
    "pid": "%p", "session": "%c", "sid": "%c", "session_id": "%c", "c": "%c",
    "xid": "%x", "txid": "%x", "tx": "%x", "x": "%x", "vxid": "%v", "v": "%v",
    "queryid": "%Q", "query_id": "%Q", "qid": "%Q", "q": "%Q",
    "sql_error_code": "%e", "sqlstate": "%e", "state": "%e", "err": "%e", "e": "%e",
    "line": "%l", "l": "%l", "tag": "%i", "cmd": "%i", "i": "%i", "backend": "%b", "backend_type": "%b", "b": "%b",
}
_ZONE = r"(?: ?(?:[A-Z]{1,5}|[+-]\d\d(?::?\d\d)?)(?![A-Za-z0-9]))?"
TOKENS = (
    ("ts_ms", re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+" + _ZONE)),
    ("ts", re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d" + _ZONE)),
    ("epoch", re.compile(r"\d{10}\.\d{3}(?![\d.])")),
    ("linenum", re.compile(r"\[\d+-(\d+)\]")),
    ("keyed", re.compile(r"(?P<key>[A-Za-z_]+)(?P<eq> ?= ?)(?P<val>\[[^\]\s]*\]|[^\s,\[\]()]*)(?P<port>\(\d*\))?")),
    ("userdb", re.compile(r"(?:\[unknown\]|[^\s@\[\]:,]*)@(?:\[unknown\]|[^\s@\[\]:,]*)")),
    ("session", re.compile(r"[0-9a-f]{4,8}\.[0-9a-f]{1,8}(?![\w.])")),
    ("vxid", re.compile(r"\d+/\d+(?![\d/])")),
    ("hostport", re.compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]*:[0-9a-fA-F:]+|\[local\]|[A-Za-z][\w.-]*)\(\d+\)")),
    ("ip", re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?![\d.])|\[local\]")),
    ("sqlstate", re.compile(r"(?:0\d{4}|(?=[0-9A-Z]{0,4}[A-Z])[0-9A-Z]{5})(?![0-9A-Za-z])")),
    ("number", re.compile(r"-?\d+(?![\d.])")),
    ("word", re.compile(r"[^\s\[\]():@,=|;<>{}]+")),
)


@dataclass
class Prefix:
    """The inferred log_line_prefix: its template (for the note), the regex of an entry's first line
    up to its severity, and the same as ``lead_regexes`` for the vectorised pass: a line's fields come
    from the first of them that matches (with ``%q``: the whole prefix, then the part before ``%q``)."""

    template: str
    line_regex: str
    recognised: bool
    match_share: float = 1.0
    notes: list[str] = field(default_factory=list)
    lead_regexes: tuple[str, ...] = ()
    keyed: KeyedLead | None = None


@dataclass(frozen=True)
class KeyedLead:
    """How most entry lines are read without a regex pass over every line, for a prefix that starts with
    the time (``%m``/``%t``, ``stamp_chars`` wide as PostgreSQL prints it) and holds no value that can
    contain a space (no ``%a %i %b``...) nor two spaces in a row.

    PostgreSQL writes two spaces after the severity's colon: a line's lead is taken to end at its first
    ``":  "``, and the text between the time and there (``" UTC [1232] postgres@bench LOG:"``), its
    *key*, is shared by many lines: ``key_regex`` (the prefix regex after the time) reads each distinct
    key once. A line is read so when its time matches ``stamp_regex`` and its key matches whole; any
    other line is read by ``lead_regexes``. Both give the same fields: the values of such a prefix
    cannot hold ``":  "``, so no match of the prefix can end after that first ``":  "``; one ending
    before it would match within the key, which then does not match whole. With ``%q``,
    ``short_regex`` (the prefix before ``%q``) reads the keys that no part of the whole prefix regex
    matches (background processes), as the second of ``lead_regexes`` does."""

    stamp_chars: int
    stamp_regex: str
    key_regex: str
    short_regex: str | None = None


# ---- prefix inference (on a bounded sample of lines, plain Python) ------------------------------


# the first of TOKENS that matches at a position, in one match (no token matches an empty text)
ANY_TOKEN_RE = re.compile("|".join(f"(?P<{kind}>{pattern.pattern})" for kind, pattern in TOKENS))
TOKEN_RES = dict(TOKENS)


def _tokens(prefix: str) -> list[tuple[str, str]]:
    """Cut a prefix into ("esc", "%x") values and ("lit", text) literals."""
    out: list[tuple[str, str]] = []
    used: set[str] = set()
    position = 0
    while position < len(prefix):
        found = ANY_TOKEN_RE.match(prefix, position)
        if found:
            kind = found.lastgroup
            out.extend(_classify(kind, TOKEN_RES[kind].match(prefix, position), used))
            position = found.end()
        else:
            out.append(("lit", prefix[position]))
            position += 1
    return out


def _classify(kind: str, match: re.Match, used: set[str]) -> list[tuple[str, str]]:
    text = match.group(0)
    if kind in ("ts_ms", "ts", "epoch"):
        escape = {"ts_ms": "%m", "ts": "%t", "epoch": "%n"}[kind]
        if {"%m", "%t", "%n", "%m0", "%t0"} & used:
            escape = "%s"
        elif kind != "epoch" and not re.search(r"[0-9] \S+$", text):
            escape += "0"  # no zone after the time
    elif kind == "linenum":
        return [("lit", "["), _use("%l", used), ("lit", f"-{match.group(1)}]")]
    elif kind == "keyed":
        key = match.group("key")
        escape = KEYED_ESCAPES.get(key.lower(), "%*")
        if escape == "%h" and match.group("port") is not None:
            escape = "%r"
        return [("lit", key + match.group("eq")), _use(escape, used)]
    elif kind == "userdb":
        return [_use("%u", used), ("lit", "@"), _use("%d", used)]
    elif kind in ("hostport", "ip"):
        escape = "%r" if kind == "hostport" else "%h"
    elif kind == "number":
        digits = text.lstrip("-")
        if text.startswith("-") or len(digits) >= 12:
            escape = "%Q"
        else:
            escape = next((e for e in ("%p", "%x") if e not in used), "%*")
    else:
        escape = {"session": "%c", "vxid": "%v", "sqlstate": "%e", "word": "%*"}[kind]
    return [_use(escape, used)]


def _use(escape: str, used: set[str]) -> tuple[str, str]:
    used.add(escape)
    return ("esc", escape)


def _template(tokens: list[tuple[str, str]]) -> str:
    return "".join(text.replace("%", "%%") if kind == "lit" else text.rstrip("0") for kind, text in tokens)


def _regex_parts(tokens: list[tuple[str, str]]) -> list[str]:
    """The regex of each token (a group name already used is not captured again)."""
    parts: list[str] = []
    groups: set[str] = set()
    for index, (kind, text) in enumerate(tokens):
        if kind == "lit":
            parts.append(re.escape(text))
            continue
        value = _value_regex(text, tokens[index + 1] if index + 1 < len(tokens) else None)
        names = re.findall(r"\(\?P<(\w+)>", value)
        if any(name in groups for name in names):
            value = re.sub(r"\(\?P<\w+>", "(?:", value)
        groups.update(names)
        parts.append(value)
    return parts


def _regex(parts: list[str], q_at: int | None) -> str:
    if q_at is None:
        return "".join(parts)
    return "".join(parts[:q_at]) + "(?:" + "".join(parts[q_at:]) + ")?"


def _value_regex(escape: str, following: tuple[str, str] | None) -> str:
    """The value regex of ``escape``; names and hosts stop at the literal that follows them (a negated
    class is much cheaper than a lazy ``\\S*?`` on millions of lines)."""
    value = ESCAPE_REGEX[escape]
    if escape in ("%u", "%d", "%h", "%r") and following and following[0] == "lit":
        stop = following[1][0]
        value = value.replace(r"[^ \t]*?", "[^ \\t" + re.escape(stop).replace("]", "\\]") + "]*")
    return value


def line_regex(prefix_regex: str) -> str:
    """An entry's first line: the prefix (captured whole as ``head``) then the severity and its colon."""
    return "^(?P<head>" + prefix_regex + r")(?P<sev>[A-Z]+[1-5]?):"


def lead_regexes(parts: list[str], q_at: int | None) -> tuple[str, ...]:
    """``line_regex`` for the vectorised pass, the optional part after ``%q`` tried as two regexes: the
    whole prefix, then the part before ``%q`` (the same match as ``(?:...)?``, and each of them can be
    one-pass where the optional one cannot: twice as fast). ``lead`` is the whole match, so that the
    message is the line without it; capturing the message instead costs twice as much."""
    whole = "^(?P<lead>" + "".join(parts) + r"(?P<sev>[A-Z]+[1-5]?):)"
    if q_at is None:
        return (whole,)
    return whole, "^(?P<lead>" + "".join(parts[:q_at]) + r"(?P<sev>[A-Z]+[1-5]?):)"


def _with_q(tokens: list[tuple[str, str]], shorter: list[list[tuple[str, str]]]) -> tuple[str, int | None]:
    """Where background lines stop (``%q``): the longest shorter shape that is a head of ``tokens``."""
    cut = max((len(s) for s in shorter if 0 < len(s) < len(tokens) and tokens[: len(s)] == s), default=None)
    if cut is None:
        return _template(tokens), None
    return _template(tokens[:cut]) + "%q" + _template(tokens[cut:]), cut


def infer_prefix(sample: list[str]) -> Prefix | None:
    """The log_line_prefix of the sampled entry lines; None when no line has a severity."""
    prefixes = []
    for line in sample:
        if not line or line.startswith("\t"):
            continue
        found = SEV_AFTER_RE.search(line)
        if found and found.start() < MAX_PREFIX_CHARS:
            prefixes.append(line[: found.start() + 1])
        elif SEV_FIRST_RE.match(line):
            prefixes.append("")
    if not prefixes:
        return None
    step = max(1, len(prefixes) // SHAPE_SAMPLE)
    shapes = Counter(tuple(_tokens(p)) for p in prefixes[::step])
    distinct = [list(shape) for shape, _ in shapes.most_common()]
    best: Prefix | None = None
    # checked by polars (Rust's regex, linear): shapes of adjacent number tokens (a 40-digit time or
    # pid) make regexes on which Python's backtracking took 30 s for 5 lines
    entry_lines = pl.Series([p + "LOG:  x" for p in prefixes], dtype=pl.String)
    for shape in distinct[:6]:
        template, q_at = _with_q(shape, distinct)
        parts = _regex_parts(shape)
        regex = line_regex(_regex(parts, q_at))
        share = float(entry_lines.str.contains(regex).mean() or 0.0)
        candidate = Prefix(
            template, regex, True, share, lead_regexes=lead_regexes(parts, q_at), keyed=keyed_lead(shape, parts, q_at)
        )
        if best is None or share > best.match_share + 1e-9:
            best = candidate
        if best.match_share == 1.0:
            break  # no other shape can do better
    if best is None or best.match_share < MIN_PREFIX_MATCH:
        share = best.match_share if best else 0.0
        fallback = Prefix("?", FALLBACK_LINE_RE, False, share, lead_regexes=(FALLBACK_LEAD_RE,))
        fallback.notes.append(
            f"log_line_prefix not recognised (best guess {best.template if best else '?'!r} matches {share:.0%} of "
            "sampled lines): entries split at the severity, only time and [pid] read from the prefix"
        )
        return fallback
    return best


# keyed leads: the time as PostgreSQL prints it (3 decimals for %m), then values with no space in them
KEYED_TIMES = {"%m": (_STAMP + r"\.[0-9]{3}", 23), "%t": (_STAMP, 19)}
KEYED_VALUES = frozenset({"%p", "%c", "%l", "%u", "%d", "%h", "%r", "%x", "%v", "%e", "%Q"})
MAYBE_EMPTY = frozenset({"%u", "%d", "%h", "%r", "%x", "%v"})


def keyed_lead(shape: list[tuple[str, str]], parts: list[str], q_at: int | None) -> KeyedLead | None:
    """The ``KeyedLead`` of a prefix shape (its tokens, their ``_regex_parts`` and where ``%q`` is), when it has one."""
    kind, first = shape[0] if shape else ("lit", "")
    if kind != "esc" or first not in KEYED_TIMES or any(k == "esc" and t not in KEYED_VALUES for k, t in shape[1:]):
        return None
    # the zone after the time, then the literals with the values that may be empty left out
    spaced = " zone" + "".join(t if k == "lit" else "" if t in MAYBE_EMPTY else "value" for k, t in shape[1:])
    if "  " in spaced:
        return None
    stamp, width = KEYED_TIMES[first]

    def key_regex(end: int | None) -> str:
        return "^(?P<keyed> " + _ZONE_VALUE + "".join(parts[1:end]) + r"(?P<sev>[A-Z]+[1-5]?):)"

    return KeyedLead(width, "^" + stamp + "$", key_regex(None), key_regex(q_at) if q_at else None)


FALLBACK_LINE_RE = r"^(?P<head>(?P<pre>(?:.*?[^A-Za-z0-9_])?))(?P<sev>" + M.SEVERITY_ALTERNATION + r"):"
FALLBACK_LEAD_RE = r"^(?P<lead>(?P<pre>(?:.*?[^A-Za-z0-9_])?)(?P<sev>" + M.SEVERITY_ALTERNATION + r"):)"


# ---- lines and entries (vectorised) ---------------------------------------------------------------


def _sample(text: str | bytes) -> list[str]:
    """Lines from the head, the middle and the tail (a prefix may show its full shape only later) of the
    text or of its bytes when they are ASCII."""

    def lines(piece: str | bytes) -> list[str]:
        return (piece if isinstance(piece, str) else piece.decode("ascii")).split("\n")

    if len(text) <= 2_000_000:
        return lines(text)[:SAMPLE_LINES]
    quarter = SAMPLE_LINES // 4
    head = lines(text[:1_000_000])[: 2 * quarter]
    middle = lines(text[len(text) // 2 : len(text) // 2 + 500_000])[1 : quarter + 1]
    tail = lines(text[-500_000:])[1:][-quarter:]
    return head + middle + tail


def _wrapper(sample: list[str]) -> str | None:
    for name, pattern in WRAPPERS.items():
        compiled = re.compile(pattern)
        hits = sum(1 for line in sample[:2000] if compiled.match(line))
        if hits and hits >= 0.5 * sum(1 for line in sample[:2000] if line.strip()):
            return name
    return None


def _scan(lines: pl.DataFrame, prefix: Prefix, wrapper: str | None) -> pl.DataFrame:
    """Per line: wrapper fields, and the prefix fields, severity and ``lead`` (prefix and severity) of entry starts."""
    if wrapper:
        parts = pl.col("text").str.extract_groups(WRAPPERS[wrapper])
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


def _continuation(rest: pl.DataFrame) -> pl.DataFrame:
    """Continuation lines (of ``rest``, the lines that start no entry) joined per entry (one leading
    TAB removed: PostgreSQL adds it)."""
    return (
        rest.filter(pl.col("rec").is_not_null())
        .group_by("rec", maintain_order=True)
        .agg(pl.col("text").str.strip_prefix("\t").str.join("\n").alias("cont"))
    )


def _records(
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
        ts = M.stamp_to_utc(pl.col(stamp), col(zone), tz, list(dict.fromkeys(z for log in zones for z in log)), with_t)
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
        return [M.zone_counts(frame.select("idx", zone.alias("zone"))["zone"])]  # idx: the literal spans every row
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
    lines = M.split_lines(body)
    count = lines.height
    if prefix.keyed and not wrapper:
        starts, rest = _keyed_starts(lines, prefix)
    else:
        starts, rest = _scanned_starts(lines, prefix, wrapper)
    del lines
    if len(files) > 1:  # a line continues an entry of its own log only
        rest = rest.with_columns(pl.when(pl.col("rec") >= files.first_line_of(pl.col("idx") + 1) - 1).then(pl.col("rec")).alias("rec"))
    if not prefix.recognised:
        starts = _fallback_fields(starts)
    records, zones = _records(starts, _continuation(rest), tz, wrapper is not None, prefix.recognised, files)
    del starts
    entries = M.statement_entries(records, files)
    if len(files) == 1:
        summaries = [M.summarise_entries(records, entries.make_rows())]
        events = [pg_events.postgres_events(records, "")[0]]  # capped once over the whole log in parse()
    else:
        summaries, events = pg_batch.summaries(records, entries, files), pg_batch.events(records, files)
    orphans = pg_batch.per_log(rest.filter(pl.col("rec").is_null() & (pl.col("text").str.strip_chars() != "")), files, _orphans)
    return Chunk(count, entries, summaries, zones, orphans, pg_batch.per_log(_unmatched(rest, prefix), files, _counted), events)


def _scanned_starts(lines: pl.DataFrame, prefix: Prefix, wrapper: str | None) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(entry starts with their fields and ``msg``, the other lines with the entry ``rec`` they continue),
    every line read by the prefix regexes."""
    frame = _entries(_scan(lines, prefix, wrapper), wrapper is not None)
    rest = frame.filter(~pl.col("is_start")).select("idx", "text", "rec")
    starts = frame.filter(pl.col("is_start")).with_columns(_message()).drop("text", "lead", "is_start")
    return starts, rest


def _message() -> pl.Expr:
    """An entry's first line without its lead (prefix and severity) and the blanks after it."""
    return pl.col("text").str.strip_prefix(pl.col("lead")).str.strip_chars_start(" \t").alias("msg")


def _keyed_starts(lines: pl.DataFrame, prefix: Prefix) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``_scanned_starts`` with the lines of a known key read once per key (see ``KeyedLead``); only the
    others (continuation lines, lines of another shape) go through the prefix regexes."""
    keyed = prefix.keyed
    assert keyed is not None
    width, text, cut = keyed.stamp_chars, pl.col("text"), pl.col("cut")
    timed = lines.with_columns(text.str.head(width).alias("stamp"), text.str.find(":  ", literal=True).alias("cut"))
    timed = timed.filter((cut >= width) & pl.col("stamp").str.contains(keyed.stamp_regex))
    # the cut is an offset in bytes: the key is cut from the bytes (after the ASCII time, up to the colon)
    timed = timed.with_columns(text.cast(pl.Binary).bin.slice(width, cut + 1 - width).cast(pl.String).alias("key"))
    fields = _key_fields(timed["key"].unique(), keyed)
    read = timed.join(fields, on="key", how="left", maintain_order="left").filter(pl.col("matched"))
    scanned = _scan(lines.filter(~_at(read["idx"], lines.height)), prefix, None)
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


def _key_fields(keys: pl.Series, keyed: KeyedLead) -> pl.DataFrame:
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


ASCII_BLANK_RE = re.compile(rb"[ \t\n\r\x0b\x0c\x1c-\x1f]*\Z")


@dataclass(frozen=True)
class Shape:
    """How a log is written: its wrapper (logplex, syslog) and its inferred prefix."""

    wrapper: str | None
    prefix: Prefix


def _shape(text: str | bytes) -> Shape | ParseResult:
    """The shape of a log that is not blank, from a sample of its lines; the result of a log whose
    lines have no severity (``_no_severity``)."""
    sample = _sample(text)
    wrapper = _wrapper(sample)
    if wrapper:
        pattern = re.compile(WRAPPERS[wrapper])
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
    return _read_logs([text], [ctx.source], shape, tz, warnings)[0]


def _read_logs(texts: list[str | bytes], sources: list[str], shape: Shape, tz: str, tz_warnings: list[ParseWarning]) -> list[ParseResult]:
    """The results of one log, read in pieces, or of several small logs of one shape read as one."""
    prefix, wrapper = shape.prefix, shape.wrapper
    notes = [f"{wrapper} lines: time and pid read from the {wrapper} header"] if wrapper else []
    warnings = list(tz_warnings)
    if prefix.recognised:
        notes.append(f"log_line_prefix looks like {prefix.template!r}" if prefix.template else "log_line_prefix is empty")
    else:
        warnings.append(ParseWarning(None, prefix.notes[0]))
    if len(texts) == 1:
        files, chunks = M.ONE_LOG, _read_pieces(texts[0], prefix, wrapper, tz)
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
            notes_each.append(notes + M.zone_notes(dict(zones), tz))
        else:
            notes_each.append(notes + ["log lines carry no time (log_line_prefix has no %m/%t/%n): statements have no timestamps"])
        warnings_each.append(warnings + _chunk_warnings([c.orphans[log] for c in chunks], [c.unmatched[log] for c in chunks], prefix))
        summaries.append(functools.reduce(M.EntrySummary.merge, [c.summaries[log] for c in chunks]))
    results = M.finish_logs(entries, summaries, sources, notes_each, warnings_each, files)
    for log, (result, source) in enumerate(zip(results, sources)):
        events, event_notes = log_events.cap_kinds(
            pl.concat([c.events[log] for c in chunks]).with_columns(pl.lit(source).alias("source"))
        )
        result.tables[M.T.EVENT] = events
        result.notes.extend(event_notes)
    return results


def _read_pieces(text: str | bytes, prefix: Prefix, wrapper: str | None, tz: str) -> list[Chunk]:
    """The chunks of one log: one, or record-aligned pieces read two at a time (one per core)."""
    size = len(text) - 1 if text[-1:] in ("\n", b"\n") else len(text)  # no copy of a GB text to drop one newline
    bounds = _chunk_bounds(text, size, prefix, wrapper)

    def read(index: int) -> Chunk:
        start, end = bounds[index]
        end = end - 1 if index + 1 < len(bounds) else end  # the newline before the next piece
        return _read_chunk(text[start:end], prefix, wrapper, tz)

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
    for (zone, _), shape in shapes.items():
        group = groups[(zone, _)]
        tz, warnings = M.safe_tz(zone)
        read = _read_logs([body for _, body in group], [members[i][1].source for i, _ in group], shape, tz, warnings)
        for (index, _), result in zip(group, read):
            results[index] = result
    return results  # type: ignore[return-value]


def _fallback_fields(starts: pl.DataFrame) -> pl.DataFrame:
    stamp = pl.col("pre").str.extract_groups(
        r"(?P<stamp>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?)(?: ?(?P<zone>[A-Z]{1,5}\b|[+-]\d\d(?::?\d\d)?))?"
    )
    return starts.with_columns(
        stamp.struct.field("stamp").alias("stamp"),
        stamp.struct.field("zone").alias("zone"),
        pl.col("pre").str.extract(r"\[(\d+)\]", 1).alias("pid"),
    )


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

_SEV_TWO_SPACES_RE = re.compile(r"(?m)(?:^|[^\w])(?:LOG|ERROR|FATAL|PANIC|WARNING|STATEMENT|DETAIL|HINT|CONTEXT|NOTICE|INFO):  \S")
_SEV_ONE_SPACE_RE = re.compile(r"(?m)(?:^|[^\w])(?:LOG|ERROR|FATAL|STATEMENT):\s\S")
_PG_WORDS_RE = re.compile(
    r"duration: \d|statement: |checkpoint (?:starting|complete)|database system|connection (?:received|authorized)|"
    r"disconnection: |automatic (?:vacuum|analyze)|temporary file: |sql_error_code = "
)


def detect(head: str, name: str) -> float:
    if head.lstrip().startswith("{"):
        return 0.0  # jsonlog
    two = len(_SEV_TWO_SPACES_RE.findall(head))
    words = len(_PG_WORDS_RE.findall(head))
    if two >= 2 or (two and words):
        return 0.9
    if _SEV_ONE_SPACE_RE.search(head) and words:
        return 0.75
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
