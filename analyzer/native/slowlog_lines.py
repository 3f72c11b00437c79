"""The slow-log C kernel ``dbdiag._line_scan`` (``line_scan.c`` beside this file) and its polars fallback.

A piece of a slow log becomes its lines (Arrow string views over the log's own bytes when the kernel
reads it), their byte lengths, first four bytes and kinds (``SQL``, ``TIME``... the numbering of the
kernel's ``enum``), then ``mark`` tells the entries and what each line is to them. Without the
kernel (a package built with no C compiler) polars' CSV reader and numpy do the same: slower, same
result. ``Kernel`` wraps the kernel with the piece it read, for the passes that follow (distinct
texts, header codes, statements, Query_time values).

>>> lines, length, prefix, kind, _ = text_lines("# Time: 261129 19:12:14\\nSELECT 1;\\n", 0, 34)
>>> [int(k) for k in kind] == [TIME, SQL]
True
"""

from __future__ import annotations

import codecs
import functools
import io
from typing import NamedTuple

import polars as pl

from dbdiag.arrow_capsule import series as arrow_series
from dbdiag.parsers.base import decode_text
from dbdiag.native.lazy import np, pa


MAX_PIECE_BYTES = 2**31 - 1  # string views hold 32-bit offsets: a bigger piece (no entry start in it) takes the polars path
# Line kinds.
SQL, BLANK, TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN, ADMIN, USE, SET_META, SERVER = range(12)
BANNER_CANDIDATE = 12  # the kernel's mark for an SQL line next to a "Tcp port" line (maybe a banner line)
HEADER_KINDS = (TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN)
SERVER_HEADER_RE = (  # the three lines a server writes when it (re)opens the log
    r"^(?:.*(?:mysqld|mariadbd|mysqld\.exe), Version: .*(?:started with:|embedded library)"
    r"|T[cC][pP] [pP]ort: \d+.*|Time\s+Id\s+Command\s+Argument)\s*$"
)


@functools.cache
def line_scan():
    """The C kernel ``dbdiag._line_scan``, or None when the package was built without a compiler
    (then the polars path reads the lines: slower, same tables)."""
    try:
        from dbdiag import _line_scan
    except ImportError:
        return None
    return _line_scan


# a piece's lines, their byte lengths, first four bytes (uint32) and kinds, and the kernel that read them (None: polars did)
Lines = tuple[pl.Series, "np.ndarray", "np.ndarray", "np.ndarray", "Kernel | None"]


def text_lines(text: str, start: int, end: int) -> Lines:
    """The lines of ``text[start:end]``, their byte lengths, first four bytes and kinds."""
    kernel = line_scan()
    data = text[start:end].encode("utf-8", "backslashreplace")  # UTF-8 (lone surrogates become escapes)
    scanned = _scanned(kernel, data, 0, len(data), cr_mode=1) if kernel is not None and len(data) <= MAX_PIECE_BYTES else None
    if scanned is not None:
        return scanned
    lines = _read_lines(data)
    length, prefix = _heads(lines)
    return lines, length, prefix, _classify(lines, length, prefix), None


def raw_lines(data: bytes, start: int, end: int) -> Lines:
    """``text_lines`` of ``pipeline.decode(data)`` (for ``parse_bytes``; needs the kernel): strict
    UTF-8 is scanned as it is, CRLF ends read as the decoded LF; other bytes are decoded first."""
    kernel = line_scan()
    scanned = _scanned(kernel, data, start, end, cr_mode=2) if end - start <= MAX_PIECE_BYTES else None
    if scanned is None:
        text = decode(data[start:end])  # pieces start at a line start: decoding them one by one is the same
        return text_lines(text, 0, len(text))
    return scanned


def _scanned(kernel, data: bytes, start: int, end: int, cr_mode: int) -> Lines | None:
    """The kernel's pass over ``data[start:end]``, None if that is not UTF-8: the lines are Arrow
    string views over ``data`` itself (no copy), and their first 8 bytes are the length and the
    first four bytes."""
    scanned = kernel.lines(data, start, end, cr_mode)
    if scanned is None:
        return None
    views, kinds = scanned
    heads = np.frombuffer(views, dtype="<u4").reshape(-1, 4)
    array = pa.Array.from_buffers(
        pa.string_view(), heads.shape[0], [None, pa.py_buffer(views), pa.py_buffer(data).slice(start, end - start)]
    )
    lines = arrow_series(array, "t")
    kind = np.frombuffer(kinds, dtype=np.uint8).copy()
    candidates = np.flatnonzero(kind == BANNER_CANDIDATE)
    kind[candidates] = SQL
    _mark_banners(lines, kind, candidates)
    return lines, heads[:, 0], heads[:, 1], kind, Kernel(kernel, data, start, end, views)


def detached(texts: pl.Series) -> pl.Series:
    """``texts`` copied into buffers of their own: the lines of ``raw_lines`` are views of the log's
    bytes, and a few of them (distinct header, time, explain and banner texts) outlive the piece;
    copied, they no longer hold the whole log in memory once its pieces are read.

    >>> detached(pl.Series("t", ["# Time: 1"])).to_list()
    ['# Time: 1']
    """
    if texts.dtype != pl.String:
        return texts
    # the oldest Arrow layout is one contiguous buffer (not views): polars writes the bytes anew, and takes
    # that array back without a copy (through the capsule: pyarrow's cast would import pyarrow.compute)
    return arrow_series(texts.to_arrow(compat_level=pl.CompatLevel.oldest()), texts.name)


class Kernel(NamedTuple):
    """The kernel with the piece it read: line numbers given to it are those of ``lines``."""

    module: object
    data: bytes
    start: int
    end: int
    views: bytes

    def distinct(self, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(for each line of ``at`` the number of its text, the position in ``at`` where each text is first seen)."""
        code, first = self.module.distinct(self.data, self.start, self.end, self.views, at.astype(np.int64))
        return np.frombuffer(code, dtype=np.int64), np.frombuffer(first, dtype=np.int64)

    def header_codes(
        self, lines: pl.Series, kind: np.ndarray, prefix: np.ndarray, marks: dict[str, np.ndarray], n_entries: int
    ) -> tuple[np.ndarray, pl.Series, np.ndarray]:
        """``header_codes`` in one pass."""
        starts, groups = group_starts()
        names = list(LINE_GROUPS)
        first, line, group = self.module.header_codes(
            self.data, self.start, self.end, self.views, kind, marks["role"], n_entries, starts, groups,
            (names.index("user_host"), names.index("use"), names.index("set")),
        )
        first = np.frombuffer(first, dtype=np.uint32).reshape(len(names), n_entries)  # int32 >= 0: same bits
        return first.astype(index_dtype(), copy=False), lines.gather(np.frombuffer(line, dtype=np.int64)), np.frombuffer(group, dtype=np.int8)

    def statements(self, kind: np.ndarray, owner: np.ndarray, at: np.ndarray, n_entries: int) -> pl.DataFrame:
        """``statement_texts`` placed at the entries (``n_entries`` rows; null without statement lines): the
        statements as string views over a buffer of their bytes."""
        views, status, text = self.module.statements(
            self.data, self.start, self.end, self.views, at.astype(np.int64), kind, owner.astype(np.int64), n_entries
        )
        status = np.frombuffer(status, dtype=np.uint8)
        present = status > 0
        validity = pa.py_buffer(np.packbits(present, bitorder="little"))
        sql = arrow_series(
            pa.Array.from_buffers(pa.string_view(), n_entries, [validity, pa.py_buffer(views), pa.py_buffer(text)]), "sql"
        )
        terminated = pl.Series("terminated", status == 1)
        if not present.all():
            terminated = terminated.set(pl.Series(~present), None)
        untidy = np.flatnonzero(status == 2)  # no closing ";": trailing blanks, or cut
        if untidy.size:
            body = sql.gather(untidy).str.strip_chars_end()
            sql = sql.scatter(untidy, body.str.strip_suffix(";"))
            terminated = terminated.scatter(untidy, body.str.ends_with(";"))
        return pl.DataFrame([sql, terminated])

    def query_times(self, at: np.ndarray) -> tuple[np.ndarray, ...]:
        """(plain: bool, query_time_s, lock_time_s, rows_sent, rows_examined) of the Query_time lines ``at``."""
        plain, *numbers = self.module.query_times(self.data, self.start, self.end, self.views, at.astype(np.int64))
        dtypes = (np.float64, np.float64, np.int64, np.int64)
        return np.frombuffer(plain, dtype=bool), *(np.frombuffer(n, dtype=d) for n, d in zip(numbers, dtypes))


def _read_lines(data: bytes) -> pl.Series:
    """The lines of UTF-8 ``data`` as one string column: CRLF ends removed, blank lines kept (line numbers stay exact)."""
    separator = next((chr(c) for c in (0, *range(1, 32), 127) if data.find(bytes([c])) < 0), None)
    if separator is None:  # every control byte occurs: binary garbage, split the slow way
        lines = data.decode().split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return pl.Series("t", [ln.removesuffix("\r") for ln in lines], dtype=pl.String)
    # the reader drops a byte order mark that starts its input: it is text here (parse removed the file's own)
    bom = data.startswith(codecs.BOM_UTF8)
    if bom and len(data) == len(codecs.BOM_UTF8):
        return pl.Series("t", ["\ufeff"], dtype=pl.String)
    frame = pl.read_csv(
        io.BytesIO(data), has_header=False, separator=separator, quote_char=None,
        new_columns=["t"], schema={"t": pl.String},
    )
    # the reader returns several chunks; gathers on one chunk are much faster
    lines = frame["t"].fill_null("").rechunk()
    return lines.scatter(0, "\ufeff" + lines[0]) if bom else lines


def _heads(lines: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    """Byte length and first four bytes (little-endian uint32) of every line.

    Read from the string views polars already holds (length and a 4-byte prefix are stored inline
    for every string), so classifying 5 million lines costs a few numpy operations."""
    arrow = lines.to_arrow(compat_level=pl.CompatLevel.newest())
    chunks = arrow.chunks if isinstance(arrow, pa.ChunkedArray) else [arrow]
    parts = []
    for chunk in chunks:
        if chunk.type != pa.string_view():
            chunk = chunk.cast(pa.string_view())
        views = np.frombuffer(chunk.buffers()[1], dtype="<u4").reshape(-1, 4)
        parts.append(views[chunk.offset : chunk.offset + len(chunk), :2])
    heads = np.concatenate(parts) if parts else np.zeros((0, 2), "<u4")
    length, prefix = heads[:, 0].copy(), heads[:, 1].copy()
    short = np.flatnonzero(length < 4)  # keep only their own bytes
    prefix[short] &= np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)[length[short]]
    return length, prefix


def line_code(start: str) -> int:
    """A line start of up to four bytes as the uint32 that ``_heads`` gives."""
    return int.from_bytes(start.encode()[:4].ljust(4, b"\0"), "little")


# First four bytes of a line -> (kind, full prefixes one of which must match; None: four bytes suffice)
LINE_STARTS = {
    "# Ti": (TIME, ("# Time:",)),
    "# Us": (USER_HOST, None),  # no other header line starts with these four bytes;
    "# Qu": (QUERY_TIME, None),  # confirming one line per entry would cost more than it protects
    "# ex": (EXPLAIN, None),  # no other header starts so; confirming 2 lines per entry costs too much
    "# ad": (ADMIN, ("# administrator command:",)),
    "# Th": (ATTR_START, None),
    "# Sc": (ATTR_START, ("# Schema:",)),
    "# Cl": (ATTR_START, ("# Client:",)),
    "SET ": (SET_META, ("SET timestamp=", "SET insert_id=", "SET last_insert_id=")),
    "use ": (USE, None),
}
# Header lines read per distinct text: group -> (first four bytes of its "# Key: value" lines, the
# fields read from them). The last three are found by kind instead.
LINE_GROUPS = {
    "thread": (("# Th",), ("Thread_id", "Schema", "Last_errno", "Killed", "QC_hit")),
    "schema": (("# Sc",), ("Schema", "Last_errno", "Killed")),
    "rows": (("# Ro",), ("Rows_affected",)),
    "tmp": (("# Tm", "# By"), ("Tmp_tables", "Tmp_disk_tables")),
    "flags": (("# Fu", "# QC"), ("Full_scan", "Full_join", "Tmp_table", "Tmp_table_on_disk")),
    "filesort": (("# Fi",), ("Filesort",)),
    "trx": (("# In",), ("InnoDB_trx_id",)),
    "rate": (("# Lo",), ("Log_slow_rate_type", "Log_slow_rate_limit")),
    "client": (("# Cl",), ("Client",)),
    "user_host": ((), ("user", "client_host", "uh_id")),
    "use": ((), ("use_db",)),
    "set": ((), ("set_ts",)),
}


def _classify(lines: pl.Series, length: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    kind = np.full(len(length), SQL, dtype=np.uint8)
    kind[length == 0] = BLANK
    kind[((prefix & 0xFFFF) == line_code("# ")) | ((length == 1) & (prefix == line_code("#")))] = ATTR
    for start, (line_kind, confirm) in LINE_STARTS.items():
        at = np.flatnonzero(prefix == line_code(start))
        if at.size and confirm:
            texts = lines.gather(at)
            ok = texts.str.starts_with(confirm[0]).to_numpy()
            rest = np.flatnonzero(~ok)
            if rest.size and len(confirm) > 1:  # the common start first, the others only on the rest
                others = texts.gather(rest)
                ok[rest] = np.logical_or.reduce([others.str.starts_with(o).to_numpy() for o in confirm[1:]])
            at = at[ok]
        kind[at] = line_kind
    # a server start banner is three lines around "Tcp port: N  Unix socket: ..."
    tcp = np.flatnonzero((prefix == line_code("Tcp ")) | (prefix == line_code("TCP ")))
    around = np.unique(np.concatenate([tcp - 1, tcp, tcp + 1]))
    around = around[(around >= 0) & (around < len(kind))]
    _mark_banners(lines, kind, around[kind[around] == SQL])
    return kind


def _mark_banners(lines: pl.Series, kind: np.ndarray, candidates: np.ndarray) -> None:
    """Set the candidate lines (SQL lines next to a ``Tcp port`` line) that are banner lines to SERVER."""
    if candidates.size:
        kind[candidates[lines.gather(candidates).str.contains(SERVER_HEADER_RE).to_numpy()]] = SERVER


def _before_in_entry(flag: np.ndarray, entry: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Whether a flagged line occurs earlier in the same entry."""
    seen = np.cumsum(flag, dtype=np.int32) - flag
    base = np.zeros(len(starts) + 1, dtype=np.int32)
    base[1:] = seen[starts]
    return seen - base[entry] > 0


@functools.cache
def _is_header_table() -> np.ndarray:
    """Indexed by a line kind: whether it is a header kind (a lookup is cheaper than ``np.isin``)."""
    table = np.zeros(256, dtype=bool)
    table[list(HEADER_KINDS)] = True
    return table


def mark(kind: np.ndarray, prefix: np.ndarray, kernel: Kernel | None) -> dict[str, object]:
    """The entries (numbered from their start lines: 0 = lines before the first header) and what each
    entry and line is: line numbers of the entry ``starts``, of the statement text (``sql``; its
    entries: ``sql_entry``), of the explain lines that are not statement text (``explain``,
    ``explain_entry``), of the ``server`` banner lines; per entry the first ``time`` and ``query_time``
    line (-1: none); ``head``: the first line of entry 0 that is not blank or a banner (-1: none);
    ``explain_kind``: an explain line exists; ``innodb``: a header line starts "#   ".
    The kernel also gives each line's ``role`` bits (see its mark()); here ``entry`` (per line),
    ``is_sql``, ``use_meta`` and ``set_meta`` tell the same."""
    if kernel is not None:
        marks = kernel.module.mark(kind, kernel.views)
        for name in ("starts", "sql", "sql_entry", "explain", "explain_entry", "server", "time", "query_time"):
            marks[name] = np.frombuffer(marks[name], dtype=np.int64)
        marks["role"] = np.frombuffer(marks["role"], dtype=np.uint8)
        return marks
    previous = np.empty_like(kind)
    previous[:1] = 255
    previous[1:] = kind[:-1]
    previous_header = _is_header_table()[previous]
    start = (
        (kind == TIME)
        | ((kind == USER_HOST) & (previous != TIME))
        | (((kind == QUERY_TIME) | (kind == ATTR_START)) & ~previous_header)
    )
    entry = np.cumsum(start, dtype=np.int64)
    starts = np.flatnonzero(start)
    plain = (kind == SQL) | (kind == ADMIN)
    set_meta = kind == SET_META
    use = kind == USE
    plain_before = _before_in_entry(plain, entry, starts)
    set_before = _before_in_entry(set_meta, entry, starts)
    # The server writes "use db;" before "SET timestamp" and the statement: a "use" after them is the statement.
    is_sql = (
        plain
        | (use & (plain_before | set_before))
        | (set_meta & plain_before)
        | (((kind == ATTR) | (kind == EXPLAIN) | (kind == BLANK)) & plain_before)
    )
    n_entries = int(entry[-1]) + 1 if entry.size else 1
    head = np.flatnonzero((entry == 0) & (kind != BLANK) & (kind != SERVER))
    sql, explain = np.flatnonzero(is_sql), np.flatnonzero((kind == EXPLAIN) & ~is_sql)
    return {
        "starts": starts, "sql": sql, "sql_entry": entry[sql], "explain": explain, "explain_entry": entry[explain],
        "server": np.flatnonzero(kind == SERVER),
        "time": first_in_entry(np.flatnonzero(kind == TIME), entry, n_entries),
        "query_time": first_in_entry(np.flatnonzero(kind == QUERY_TIME), entry, n_entries),
        "head": int(head[0]) if head.size else -1, "explain_kind": bool((kind == EXPLAIN).any()),
        "innodb": bool(((prefix == line_code("#   ")) & ~is_sql).any()),
        "entry": entry, "is_sql": is_sql, "use_meta": use & ~plain_before & ~set_before, "set_meta": set_meta & ~plain_before,
    }


def first_in_entry(at: np.ndarray, entry: np.ndarray, n_entries: int) -> np.ndarray:
    """For each entry the first of the (ascending) line numbers ``at`` inside it, or -1."""
    position = np.full(n_entries, -1, dtype=np.int64)
    if at.size:
        owner = entry[at]
        first = np.ones(at.size, dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        position[owner[first]] = at[first]
    return position


@functools.cache
def index_dtype() -> type:
    return np.uint64 if pl.get_index_type() == pl.UInt64 else np.uint32


@functools.cache
def group_starts() -> tuple[np.ndarray, np.ndarray]:
    """The four-byte starts of the keyed header lines, sorted, and the number of each one's group."""
    pairs = sorted((line_code(start), code) for code, (starts, _) in enumerate(LINE_GROUPS.values()) for start in starts)
    return np.array([p[0] for p in pairs], dtype=np.uint32), np.array([p[1] for p in pairs], dtype=np.int8)


decode = decode_text  # what ``pipeline.decode`` makes of the bytes
