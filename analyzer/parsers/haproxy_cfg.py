"""HAProxy configuration (``haproxy.cfg``): every directive with its section and line, and the session limits.

Raw input::

    global
        stats socket /run/haproxy/admin.sock mode 600 level admin
        maxconn 256

    defaults
        mode tcp
        timeout queue 60s

    frontend fe_pg
        bind 127.0.0.1:6432
        default_backend be_pg

    backend be_pg
        server pg1 10.0.0.5:5432 maxconn 2 check
        default-server maxconn 50

Sections start at a line whose first word is ``global``, ``defaults``, ``frontend``, ``backend``,
``listen`` or another HAProxy section keyword (``peers``, ``resolvers``, ``userlist``, ``cache``,
``program``, ``http-errors``, ``ring``, ``mailers``); the directives below it belong to it. ``#``
starts a comment outside quotes. Lines before the first section are skipped with a warning.

Output table ``proxy_config`` (one row per directive; ``records`` is their number)::

    section   String  "global", "defaults", "frontend", "backend", "listen", ...
    proxy     String  the section's name (fe_pg, be_pg), null for an unnamed global/defaults
    keyword   String  the directive's first word ("maxconn", "server", "bind", "timeout", ...)
    server    String  the server's name on ``server`` lines, else null
    args      String  the rest of the line, comments removed
    maxconn   Int64   the session limit the line sets: ``maxconn N`` as a directive, or the
                      ``maxconn N`` parameter of a ``server`` / ``default-server`` line; else null
    line      Int64   line number in the member
    source    String  member path

>>> from dbdiag.parsers.base import ParseContext
>>> text = "backend be_pg\\n    server pg1 127.0.0.1:5432 maxconn 2  # the cap\\n"
>>> parse(text, ParseContext("haproxy.cfg")).tables["proxy_config"].select("section", "proxy", "server", "maxconn", "line").rows()
[('backend', 'be_pg', 'pg1', 2, 2)]
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.lines import is_script
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PROXY_CONFIG, conform

SECTIONS = (
    "global", "defaults", "frontend", "backend", "listen", "peers", "resolvers", "userlist", "cache",
    "program", "http-errors", "ring", "mailers", "namespace_list", "traces",
)
_SECTION_LINE_RE = lazy_compile(r"^(?:global|defaults|frontend|backend|listen)(?:[ \t]+[^ \t\n#]+)?[ \t]*(?:#[^\n]*)?$", re.MULTILINE)
_DIRECTIVE_LINE_RE = lazy_compile(
    r"^[ \t]+(?:maxconn|server|bind|mode|balance|default_backend|use_backend|timeout|fullconn|default-server|option)[ \t]",
    re.MULTILINE,
)
_MAXCONN_PARAM_RE = lazy_compile(r"(?:^|[ \t])maxconn[ \t]+(\d+)(?=[ \t]|$)")


def _without_comment(line: str) -> str:
    """The line up to an unquoted, unescaped ``#``."""
    quote = ""
    escaped = False
    for index, char in enumerate(line):
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "#":
            return line[:index]
    return line


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows: list[dict[str, object]] = []
    section: str | None = None
    proxy: str | None = None
    skipped: list[tuple[int, str]] = []
    for number, raw in enumerate(text.lstrip("\ufeff").split("\n"), 1):
        words = _without_comment(raw.rstrip("\r")).split()
        if not words:
            continue
        if not raw[:1].isspace() and words[0] in SECTIONS:
            section, proxy = words[0], (words[1] if len(words) > 1 else None)
            continue
        if section is None:
            skipped.append((number, raw.strip()[:60]))
            continue
        keyword, args = words[0], " ".join(words[1:])
        maxconn = None
        if keyword == "maxconn" and len(words) > 1 and words[1].isdigit():
            maxconn = int(words[1])
        elif keyword in ("server", "default-server"):
            found = _MAXCONN_PARAM_RE.search(" ".join(words[1:]))
            maxconn = int(found.group(1)) if found else None
        rows.append({
            "section": section, "proxy": proxy, "keyword": keyword,
            "server": words[1] if keyword == "server" and len(words) > 1 else None,
            "args": args, "maxconn": maxconn, "line": number, "source": ctx.source,
        })
    warnings: list[ParseWarning] = []
    if not rows:
        raise ParseError("no directive inside a global/defaults/frontend/backend/listen section: not an HAProxy configuration")
    if skipped:
        warnings.append(ParseWarning(skipped[0][0], f"{len(skipped)} line(s) before the first section skipped, the first: {skipped[0][1]!r}"))
    frame = conform(PROXY_CONFIG, pl.DataFrame(rows, infer_schema_length=None))
    limits = frame.filter(pl.col("maxconn").is_not_null()).height
    return ParseResult(
        tables={PROXY_CONFIG: frame},
        records=frame.height,
        warnings=warnings,
        notes=[f"{frame['proxy'].drop_nulls().n_unique()} named sections, {limits} maxconn settings"],
    )


def detect(head: str, name: str) -> float:
    if is_script(head):
        return 0.0  # a script writing a haproxy.cfg (a heredoc) is not one
    sections = len(_SECTION_LINE_RE.findall(head))
    directives = len(_DIRECTIVE_LINE_RE.findall(head))
    if sections >= 2 and directives >= 2:
        return 0.9
    if sections >= 1 and directives >= 1 and "haproxy" in name.lower():
        return 0.8
    return 0.0


SPEC = ParserSpec(
    kind="haproxy-cfg",
    description="HAProxy configuration: directives per section with their lines, maxconn of frontends and servers",
    detect=detect,
    parse=parse,
)
