"""PostgreSQL ``postgresql.conf`` and ``postgresql.auto.conf``: the settings a file sets.

Raw input::

    # PostgreSQL configuration file
    max_connections = 100                   # (change requires restart)
    shared_buffers = 128MB                  # min 128kB
    #work_mem = 4MB                         # commented out: not read
    log_min_duration_statement = '200ms'
    search_path = '"$user", public'
    include_if_exists 'local.conf'

Only active lines count; the ``=`` is optional, as for the server. Quoted values lose their quotes
(``''`` and ``\\'`` are quotes inside them); ``include``, ``include_if_exists`` and ``include_dir``
are not followed (the file is not in hand) and are listed in the notes. A name set twice is kept
twice: the server uses the last one, and so does ``dbdiag.settings.setting``.

Output table ``db_setting`` (one row per active line; ``records`` is their number)::

    engine "postgresql", kind "config", name String (as written), value String ("128MB", "200ms"),
    unit null (units stay inside the value), source String
"""

from __future__ import annotations

import re
from collections import Counter

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.lines import is_script
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import DB_SETTING, conform

_NAME_RE = lazy_compile(r"^\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(=?)\s*")
_UNQUOTED_RE = lazy_compile(r"[^\s#']+")
_INCLUDES = ("include", "include_if_exists", "include_dir")
_SIGNATURES = ("# PostgreSQL configuration file", "# It will be overwritten by the ALTER SYSTEM command.")
_KNOWN = (
    "shared_buffers", "max_connections", "work_mem", "maintenance_work_mem", "effective_cache_size",
    "listen_addresses", "wal_level", "max_wal_size", "min_wal_size", "checkpoint_timeout",
    "checkpoint_completion_target", "log_min_duration_statement", "log_line_prefix", "shared_preload_libraries",
    "random_page_cost", "unix_socket_directories", "datestyle", "lc_messages", "hba_file", "data_directory",
    "dynamic_shared_memory_type", "default_text_search_config", "log_timezone", "synchronous_commit",
    "wal_buffers", "effective_io_concurrency", "huge_pages", "autovacuum_max_workers", "max_worker_processes",
    "max_parallel_workers", "log_destination", "logging_collector", "track_io_timing", "hot_standby",
)
# [ \t], not \s: \s crosses lines, and over 2,000 blank lines the three \s* made this cubic (100 s)
_KNOWN_LINE_RE = lazy_compile(r"^[ \t]*(?:#[ \t]*)?(" + "|".join(_KNOWN) + r")[ \t]*=", re.MULTILINE | re.IGNORECASE)
_SECTION_LINE_RE = lazy_compile(r"^[ \t]*\[[^\]\n]*\][ \t]*$", re.MULTILINE)
_FENCE_LINE_RE = lazy_compile(r"^[ \t]*```", re.MULTILINE)  # Markdown quoting settings (a README's diff), not a postgresql.conf


def _quoted(text: str, start: int) -> tuple[str, int] | None:
    """The quoted string starting at ``text[start] == "'"``: (value, index after it), or None if unclosed."""
    out, i = [], start + 1
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
        elif ch == "'" and text[i + 1:i + 2] == "'":
            out.append("'")
            i += 2
        elif ch == "'":
            return "".join(out), i + 1
        else:
            out.append(ch)
            i += 1
    return None


def _line(line: str) -> tuple[str, str] | str:
    """(name, value) of one active line, or the reason it cannot be read."""
    m = _NAME_RE.match(line)
    if m is None:
        return "no setting name"
    name, at = m.group(1), m.end()
    if at < len(line) and line[at] == "'":
        quoted = _quoted(line, at)
        if quoted is None:
            return f"unterminated quoted value for {name}"
        value, at = quoted
    else:
        u = _UNQUOTED_RE.match(line, at)
        if u is None:
            return f"no value for {name}"
        value, at = u.group(0), u.end()
    rest = line[at:].strip()
    if rest and not rest.startswith("#"):
        return f"unexpected text after the value of {name}: {rest[:30]!r}"
    if not m.group(2) and name.lower() not in _INCLUDES and not value:
        return f"no value for {name}"
    return name, value


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    rows: list[tuple[str, str]] = []
    comments = 0
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            comments += 1
            continue
        got = _line(line)
        if isinstance(got, str):
            if len(warnings) < MAX_WARNINGS:
                warnings.append(ParseWarning(number, f"{got}; skipped: {line[:60]!r}"))
            continue
        name, value = got
        if name.lower() in _INCLUDES:
            notes.append(f"line {number}: {name.lower()} '{value}' not followed (only this file is read)")
            continue
        rows.append(got)
    if not rows and not comments and not notes:
        raise ParseError("no name = value lines or comments: not a postgresql.conf")
    twice = sorted(name for name, count in Counter(n.lower() for n, _v in rows).items() if count > 1)
    if twice:
        notes.append(f"set more than once (the last line wins): {', '.join(twice)}")
    if not rows:
        notes.append("no active setting: every line is a comment")
    frame = pl.DataFrame(rows, schema={"name": pl.String, "value": pl.String}, orient="row").with_columns(
        pl.lit("postgresql").alias("engine"), pl.lit("config").alias("kind"), pl.lit(ctx.source).alias("source")
    )
    table = conform(DB_SETTING, frame)
    return ParseResult(tables={DB_SETTING: table}, records=table.height, warnings=warnings, notes=notes)


def detect(head: str, name: str) -> float:
    if is_script(head):
        return 0.0  # a script writing a postgresql.conf (a heredoc) is not one
    if _SECTION_LINE_RE.search(head):
        return 0.0  # sections: an INI/TOML file (my.cnf, tikv.toml), never a postgresql.conf
    if _FENCE_LINE_RE.search(head):
        return 0.0
    if any(head.lstrip().startswith(s) or f"\n{s}" in head[:400] for s in _SIGNATURES):
        return 0.95
    known = {m.lower() for m in _KNOWN_LINE_RE.findall(head)}
    if len(known) >= 2:
        return 0.9 if len(known) >= 3 else 0.7
    if known and re.search(r"postgresql(\.auto)?\.conf", name, re.IGNORECASE):
        return 0.7
    return 0.0


SPEC = ParserSpec(
    kind="postgresql-conf",
    description="postgresql.conf / postgresql.auto.conf: active name = value lines (includes noted)",
    detect=detect,
    parse=parse,
)
