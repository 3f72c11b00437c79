"""The ``log_line_prefix`` of a PostgreSQL stderr log, inferred from a sample of its lines, and the
wrapper (Heroku logplex, syslog) its lines may sit in (see ``pg_stderr``'s docstring for how).

Sample lines and what is inferred from them::

    2026-11-29 19:12:26.235 UTC [21693] postgres@bench LOG:  duration: 0.287 ms  statement: ...
    -> log_line_prefix '%m [%p] %q%u@%d ' (time, pid; user@db after %q: background lines stop there)
    2019-03-14T00:23:00+00:00 app[postgres.4849]: [GREEN] [19-1]  sql_error_code = 40P01 ERROR:  ...
    -> Heroku logplex, prefix 'sql_error_code = %e '
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers import pg_messages as M
from dbdiag.patterns import lazy_compile

SAMPLE_LINES = 8000
SHAPE_SAMPLE = 400  # prefixes cut into tokens (the others only check the result)
MIN_PREFIX_MATCH = 0.8  # share of sampled severity lines the inferred prefix must match
# longer text before a severity is no log_line_prefix (a real one is under 200 characters); cutting
# tokens from it costs its length squared (the user@db token looks for an "@" from every position)
MAX_PREFIX_CHARS = 512
# an entry line's prefix ends at the first severity after a character that is not a letter, digit or _
# (else the line may start with it): searched for, cheaper than a lazy prefix regex on every line
SEV_AFTER_RE = lazy_compile(r"[^A-Za-z0-9_](?:" + M.SEVERITY_ALTERNATION + r"):")
SEV_FIRST_RE = lazy_compile(r"(?:" + M.SEVERITY_ALTERNATION + r"):")
LOGPLEX_RE = (
    r"^(?P<wts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<wzone>Z|[+-]\d\d:?\d\d)? (?:\S+ )?app\[[^\]]*?\.(?P<wpid>\d+)\]:? "
    r"\[[A-Z_]+\] \[\d+-\d+\] ?(?P<rest>.*)$"
)
SYSLOG_RE = (
    r"^(?P<wts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<wzone>Z|[+-]\d\d:?\d\d)? \S+ [\w./-]+\[(?P<wpid>\d+)\]: "
    r"\[\d+-\d+\] ?(?P<rest>.*)$"
)
WRAPPERS = {"Heroku logplex": LOGPLEX_RE, "syslog": SYSLOG_RE}
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
    ("ts_ms", lazy_compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+" + _ZONE)),
    ("ts", lazy_compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d" + _ZONE)),
    ("epoch", lazy_compile(r"\d{10}\.\d{3}(?![\d.])")),
    ("linenum", lazy_compile(r"\[\d+-(\d+)\]")),
    ("keyed", lazy_compile(r"(?P<key>[A-Za-z_]+)(?P<eq> ?= ?)(?P<val>\[[^\]\s]*\]|[^\s,\[\]()]*)(?P<port>\(\d*\))?")),
    ("userdb", lazy_compile(r"(?:\[unknown\]|[^\s@\[\]:,]*)@(?:\[unknown\]|[^\s@\[\]:,]*)")),
    ("session", lazy_compile(r"[0-9a-f]{4,8}\.[0-9a-f]{1,8}(?![\w.])")),
    ("vxid", lazy_compile(r"\d+/\d+(?![\d/])")),
    ("hostport", lazy_compile(r"(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9a-fA-F]*:[0-9a-fA-F:]+|\[local\]|[A-Za-z][\w.-]*)\(\d+\)")),
    ("ip", lazy_compile(r"\d{1,3}(?:\.\d{1,3}){3}(?![\d.])|\[local\]")),
    ("sqlstate", lazy_compile(r"(?:0\d{4}|(?=[0-9A-Z]{0,4}[A-Z])[0-9A-Z]{5})(?![0-9A-Za-z])")),
    ("number", lazy_compile(r"-?\d+(?![\d.])")),
    ("word", lazy_compile(r"[^\s\[\]():@,=|;<>{}]+")),
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
ANY_TOKEN_RE = lazy_compile("|".join(f"(?P<{kind}>{pattern.pattern})" for kind, pattern in TOKENS))
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

def sample_lines(text: str | bytes) -> list[str]:
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


def wrapper_of(sample: list[str]) -> str | None:
    for name, pattern in WRAPPERS.items():
        compiled = re.compile(pattern)
        hits = sum(1 for line in sample[:2000] if compiled.match(line))
        if hits and hits >= 0.5 * sum(1 for line in sample[:2000] if line.strip()):
            return name
    return None
