"""MySQL / MariaDB / Percona ``SHOW GLOBAL VARIABLES`` and ``SHOW GLOBAL STATUS`` in the client's forms.

Raw input, any of (one or several blocks per member)::

    Variable_name	Value                      <- mysql -e / mysql -B (tab-separated; header optional
    innodb_buffer_pool_size	268435456              with -N; \\t \\n \\\\ \\0 are batch-mode escapes)
    version	10.11.19-MariaDB-0+deb12u1-log

    *************************** 1. row ***************************      <- \\G (vertical)
    Variable_name: innodb_buffer_pool_size
            Value: 268435456

    +-------------------------+-----------+                             <- mysql -t, mysqladmin
    | Variable_name           | Value     |                                variables / extended-status
    +-------------------------+-----------+
    | innodb_buffer_pool_size | 268435456 |
    +-------------------------+-----------+

Output table ``db_setting`` (one row per variable; ``records`` is their number)::

    engine String ("mariadb" / "percona" / "mysql" from version and version_comment; null when
        nothing tells), kind String ("variable" or "status"), name String, value String (unescaped;
        multi-line values keep their newlines), unit null, source String

Variables and status counters are told apart by content, per block (a header, a boxed table or a
``1. row`` starts a block): status counter names start with a capital (``Uptime``, ``Com_select``),
variable names do not (``version``, ``datadir``); ``wsrep_*`` names follow their neighbours. A
header-less batch output holding both (``mysql -N -e 'SHOW GLOBAL VARIABLES; SHOW GLOBAL STATUS'``)
is split where the names change case.
"""

from __future__ import annotations

import itertools
import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import DB_SETTING, conform

_TSV_HEADER_RE = lazy_compile(r"^Variable_name\tValue$")
_TSV_ROW_RE = lazy_compile(r"^([A-Za-z_][A-Za-z0-9_.$]*)\t(.*)$", re.DOTALL)
_VERTICAL_ROW_RE = lazy_compile(r"^\*+ (\d+)\. row \*+$")
_VERTICAL_NAME_RE = lazy_compile(r"^\s*Variable_name: ?(.*)$")
_VERTICAL_VALUE_RE = lazy_compile(r"^\s*Value: ?(.*)$")
_BOX_RULE_RE = lazy_compile(r"^\+-+\+-+\+$")
_BOX_HEADER_RE = lazy_compile(r"^\|\s*Variable_name\s*\|\s*Value\s*\|$")
_ESCAPE_RE = lazy_compile(r"\\([\\tn0])")
_ESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "0": "\0"}
_NAME_PREFIXES = (
    "innodb_", "com_", "handler_", "binlog_", "character_set_", "collation_", "aria_", "performance_schema_",
    "ssl_", "threads_", "max_", "log_", "query_cache_", "qcache_", "key_", "table_", "thread_", "tmp_",
    "aborted_", "bytes_", "created_tmp_", "select_", "sort_", "slow_", "open", "wsrep_", "auto", "back_log",
    "basedir", "datadir", "version", "uptime", "questions", "queries", "connections", "sql_mode", "autocommit",
    "access_denied_errors", "acl_", "big_tables", "bind_address", "wait_timeout", "server_id", "port", "socket",
)


def _unescape(value: str) -> str:
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(1)], value)


def _case_kind(name: str) -> str | None:
    if name.lower().startswith("wsrep"):
        return None  # Galera spells both its variables and its status counters in lower case
    return "status" if name[:1].isupper() else "variable"


def _block_kinds(names: list[str], headed: bool) -> list[str]:
    """Kind of each row of one block: its majority for a headed block, else per run of name case."""
    cases = [_case_kind(n) for n in names]
    if headed:
        status = sum(c == "status" for c in cases)
        variable = sum(c == "variable" for c in cases)
        kind = "status" if status > variable else "variable"
        return [kind] * len(names)
    kinds: list[str] = []
    previous = next((c for c in cases if c is not None), "variable")
    for case in cases:
        previous = case or previous
        kinds.append(previous)
    return kinds


def _engine(rows: list[tuple[int, str, str, int]]) -> tuple[str | None, str | None]:
    """(engine, note) from version/version_comment, else from MariaDB-only names, else (None, note)."""
    texts = [value.lower() for _b, name, value, _l in rows if name.lower() in ("version", "version_comment")]
    if texts:
        if any("mariadb" in t for t in texts):
            return "mariadb", None
        if any("percona" in t for t in texts):
            return "percona", None
        return "mysql", None
    if any(name.lower().startswith(("aria_", "feature_")) for _b, name, _v, _l in rows):
        return "mariadb", "engine mariadb inferred from MariaDB-only names (Aria_*/Feature_*): no version here"
    return None, "engine unknown: no version or version_comment in this member"


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    skipped = 0
    rows: list[tuple[int, str, str, int]] = []  # (block, name, value, line)
    headed: dict[int, bool] = {0: False}
    block = 0
    vertical_name: str | None = None
    vertical_open = False  # the last row seen is a \G value that may continue on the next lines
    box_pending: tuple[str, list[str], int] | None = None  # a boxed row whose value spans lines

    def new_block() -> None:
        nonlocal block
        if any(r[0] == block for r in rows[-1:]):
            block += 1
        headed[block] = True

    def skip(number: int, reason: str) -> None:
        nonlocal skipped
        skipped += 1
        if len(warnings) < MAX_WARNINGS:
            warnings.append(ParseWarning(number, reason))

    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the final newline does not start an empty continuation of a \G value
    for number, raw in enumerate(lines, 1):
        line = raw[:-1] if raw.endswith("\r") else raw
        if box_pending is not None:
            name, parts, start = box_pending
            if line.rstrip().endswith("|"):
                parts.append(line.rstrip()[:-1].rstrip())
                rows.append((block, name, "\n".join(parts), start))
                box_pending = None
            else:
                parts.append(line)
            continue
        m = _VERTICAL_ROW_RE.match(line)
        if m:
            if m.group(1) == "1":
                new_block()
            vertical_name, vertical_open = None, False
            continue
        m = _VERTICAL_NAME_RE.match(line)
        if m:
            vertical_name, vertical_open = m.group(1), False
            continue
        m = _VERTICAL_VALUE_RE.match(line)
        if m and vertical_name is not None:
            rows.append((block, vertical_name, m.group(1), number))
            vertical_name, vertical_open = None, True
            continue
        if vertical_open and not line.startswith(("|", "+")):
            b, name, value, start = rows[-1]
            rows[-1] = (b, name, value + "\n" + line, start)
            continue
        if _BOX_RULE_RE.match(line):
            continue
        if _BOX_HEADER_RE.match(line) or _TSV_HEADER_RE.match(line):
            new_block()
            continue
        if line.startswith("| "):
            body = line[2:]
            name, sep, value = body.partition(" | ")
            if not sep or not name.strip():
                skip(number, f"boxed row without a name | value pair; skipped: {line[:60]!r}")
                continue
            if value.rstrip().endswith("|"):
                rows.append((block, name.strip(), value.rstrip()[:-1].rstrip(), number))
            else:
                box_pending = (name.strip(), [value], number)
            continue
        m = _TSV_ROW_RE.match(line)
        if m:
            rows.append((block, m.group(1), _unescape(m.group(2)), number))
            continue
        if line.strip():
            skip(number, f"not a Variable_name/Value line; skipped: {line[:60]!r}")
    if box_pending is not None:
        skip(box_pending[2], "boxed row not closed before the end; skipped")
    if skipped > len(warnings):
        warnings.append(ParseWarning(None, f"{skipped - len(warnings)} more unreadable lines skipped"))
    if not rows:
        raise ParseError("no Variable_name/Value rows (SHOW GLOBAL VARIABLES / STATUS) found")

    kinds: list[str] = []
    for b, block_rows in itertools.groupby(rows, key=lambda r: r[0]):  # rows are in block order
        kinds.extend(_block_kinds([r[1] for r in block_rows], headed.get(b, False)))
    engine, note = _engine(rows)
    notes = [note] if note else []
    counts = {k: kinds.count(k) for k in ("variable", "status") if k in kinds}
    notes.append(", ".join(f"{n} {k} rows" for k, n in counts.items()))
    frame = pl.DataFrame(
        {"name": [r[1] for r in rows], "value": [r[2] for r in rows], "kind": kinds},
        schema={"name": pl.String, "value": pl.String, "kind": pl.String},
    ).with_columns(pl.lit(engine, dtype=pl.String).alias("engine"), pl.lit(ctx.source).alias("source"))
    table = conform(DB_SETTING, frame)
    return ParseResult(tables={DB_SETTING: table}, records=table.height, warnings=warnings, notes=notes)


def detect(head: str, name: str) -> float:
    if re.search(r"^Variable_name\tValue\r?$", head, re.MULTILINE):
        return 0.95
    if re.search(r"^\|[ \t]*Variable_name[ \t]*\|[ \t]*Value[ \t]*\|\r?$", head, re.MULTILINE):
        return 0.95
    if re.search(r"^\*+ 1\. row \*+\r?\n[ \t]*Variable_name: ", head, re.MULTILINE):
        return 0.95
    lines = [line.rstrip("\r") for line in head.split("\n")[:-1] if line.strip()]
    if len(lines) < 5:
        return 0.0
    pairs = [m.group(1).lower() for m in map(_TSV_ROW_RE.match, lines) if m and "\t" not in m.group(2)]
    if len(pairs) < 0.9 * len(lines):
        return 0.0
    known = sum(p.startswith(_NAME_PREFIXES) for p in pairs)
    if known >= 3 and known >= 0.2 * len(pairs):
        return 0.8
    hinted = re.search(r"variables|status", name, re.IGNORECASE)
    return 0.6 if hinted and known >= 1 else 0.0


SPEC = ParserSpec(
    kind="mysql-variables",
    description="MySQL/MariaDB SHOW GLOBAL VARIABLES / STATUS (batch, \\G, boxed, mysqladmin)",
    detect=detect,
    parse=parse,
)
