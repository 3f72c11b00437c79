"""MySQL / MariaDB / Percona Server slow query log (5.0 to 8.x, MariaDB 5.5 to 11.x).

Sample input (MariaDB 10.11, ``log_slow_verbosity=query_plan,explain``)::

    mariadbd, Version: 10.11.19-MariaDB-0+deb12u1-log (Debian 12). started with:
    Tcp port: 0  Unix socket: /tmp/rwc.zvzY/mysql.sock
    Time\t\t    Id Command\tArgument
    # Time: 261129 19:12:14
    # User@Host: root[root] @ localhost []
    # Thread_id: 8  Schema: sbtest  QC_hit: No
    # Query_time: 0.000290  Lock_time: 0.000093  Rows_sent: 1  Rows_examined: 1
    # Rows_affected: 0  Bytes_sent: 0
    #
    # explain: id\tselect_type\ttable\ttype\tpossible_keys\tkey\tkey_len\tref\trows\tr_rows\tfiltered\tr_filtered\tExtra
    # explain: 1\tSIMPLE\tsbtest3\tconst\tPRIMARY\tPRIMARY\t4\tconst\t1\tNULL\t100.00\tNULL\t
    #
    SET timestamp=1795979534;
    SELECT c FROM sbtest3 WHERE id=9148;

Also read: MySQL 5.0-5.6 (``# Time: 081127  8:51:20``, ``Id:`` on User@Host), MySQL 5.7/8.0 ISO times
(``2016-07-20T18:13:25.698433Z``, ``+08:00``) and ``log_slow_extra`` fields on the Query_time line
(``Thread_id Errno ... Start: End:``), Percona lines (``# Schema: db  Last_errno: 0  Killed: 0``,
``InnoDB_trx_id``, ``QC_Hit/Full_scan/Filesort`` flags, ``Log_slow_rate_type/limit``), ``# Client:``,
``# administrator command: Quit;``, server start header blocks anywhere, CRLF line ends.

Output tables (see ``dbdiag.tables``):

- ``statement``: one row per log entry. engine (``mariadb``/``percona``/``mysql`` for the whole file,
  from the server header and the fields present), start_ts, end_ts, query_time_s, lock_time_s,
  rows_sent/examined/affected, user, client_host, db, conn_id, txn_id (InnoDB_trx_id), full_scan,
  full_join, tmp_table, tmp_table_on_disk, filesort, plan, plan_signature, index_names, success,
  error_code, sql, source, line (1-based line of the entry's first header line). full_scan is also
  set by an explain row of access type ALL; with MariaDB's query_plan verbosity the Full_scan and
  Filesort lines are written only when a flag is Yes, so entries without them get No.
- ``host_fact``: ``db_version`` = engine and version of the last start banner (``mariadb
  10.11.19-MariaDB-0+deb12u1-log``), only when the log has a banner.
- ``plan_node``: one row per MariaDB ``# explain:`` data row: node_type = access type (``ALL``,
  ``ref``...), relation = table, index_name = key, est_rows = rows, actual_rows = r_rows,
  filter = Extra; node_id in row order, depth 0 (tabular EXPLAIN is a flat list in join order).

What an entry is, as pt-query-digest reads it: everything from a header (``# Time:``, or
``# User@Host:`` not right after a ``# Time:`` line, or a ``# Query_time:``/``# Thread_id:``/
``# Schema:``/``# Client:`` line that does not follow other header lines) to the next one. ``use db;``
before the statement and ``SET timestamp=N;`` are metadata, not statements; all the text after them
(several statements, blank lines, ``#`` comment lines) is the statement, its last ``;`` removed.
``# administrator command: Quit;`` gives ``administrator command: Quit``. A ``use x;`` after
``SET timestamp`` is the statement itself (the server writes its own ``use`` first). Server start
banners (``mysqld, Version: ... started with:`` + ``Tcp port`` + ``Time Id Command``) are skipped
wherever they are. Lines before the first header (a file cut at its start) make one statement
without timings; a last entry cut after its header is dropped; both with a warning.

Times. ``# Time:`` is when the entry was written (the end), except on MariaDB, which stamps it and
``SET timestamp`` with the statement's start (measured on 10.11.19; any log shows it when an entry's
``# Time`` is earlier than the one above it by no more than its own Query_time). Without a zone it is
server local time, read in ``ctx.tz`` (said in a note); ``2016-07-20T18:13:25.698433Z`` and ``+08:00``
are exact. ``SET timestamp`` is whole UTC seconds: the statement start for MySQL 8.0+ ("the slow log
always logs the query start time") and MariaDB, the write time, like ``# Time``, for MySQL <= 5.7 and
Percona <= 5.7; the banner's version decides, else statements of 2 s or more show it.
``log_slow_extra`` ``Start:``/``End:`` are exact and win.
end_ts = End, else the entry's ``# Time``, else SET timestamp (plus Query_time if it is the start),
else the last ``# Time`` above (the server writes one only when the second changed, so entries
without one take the previous entry's, as pt-query-digest does); start_ts = Start, else SET
timestamp when it is the start (unless ``# Time`` has microseconds), else end_ts - Query_time.
When zone-less ``# Time`` lines disagree with SET timestamp by a whole zone offset, ``--tz`` is not
the server's zone: the ``# Time`` lines are moved by that offset, with a warning. The database
carries over the same way: the server writes ``use`` only when it changed.

Speed (hundreds of MB): the log is cut into entry-aligned pieces read on two threads. The C kernel
``dbdiag._line_scan`` (analyzer/native/line_scan.c) reads a piece without the GIL: its lines as Arrow
string views over the log's own bytes (``parse_bytes`` takes the member's bytes: no decoded copy), their
kinds, the entries, numbers for the header and explain texts that repeat, the values of plain Query_time
lines, the statements. Without it (a package installed with no C compiler) polars' CSV reader, numpy and
hashes do the same: slower, same tables. The distinct header and explain texts of the whole log are then
read once, what an entry shows of its explain lines once per distinct sequence of them, and each column
of the log's table of entries is made once, from the pieces' numbers (the plan nodes on the other thread
meanwhile). Query_time lines the kernel does not read are split at positions learnt from the first one.
No Python loop runs per line or per entry.

Many small logs (``parse_batch``): they are read as one log, each after a boundary line, and every
choice made above for a whole file (server and version, what SET timestamp means, zone agreement,
the # Time and database carried over, head fragments and cut tails, warnings and their caps, notes)
is made per member from the same columns: 5,000 logs of three entries cost about one parse, not
5,000. Each member keeps its own line numbers, inventory line and errors.
"""

from __future__ import annotations

import codecs
import functools
import importlib
import io
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, NamedTuple

import polars as pl

from dbdiag import tables as T
from dbdiag.arrow_capsule import series as arrow_series
from dbdiag.distinct import numbered
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning, decode_text
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS, cap_warnings
from dbdiag.timebounds import MAX_EPOCH_S


class _OnFirstUse:
    """A module imported when an attribute is first read: numpy and pyarrow take a tenth of a second
    to import, which runs without a MySQL slow log need not pay."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        module = sys.modules.get(self._name)  # a dict lookup once imported
        if module is None or getattr(module.__spec__, "_initializing", False):  # another thread may be importing it
            module = importlib.import_module(self._name)
        return getattr(module, attr)


np = _OnFirstUse("numpy")
pa = _OnFirstUse("pyarrow")

CHUNK_CHARS = 16 * 1024 * 1024  # entry-aligned pieces: bounds the per-line memory (peak RSS)
WORKERS = 2  # pieces parsed at once
MAX_PIECE_BYTES = 2**31 - 1  # string views hold 32-bit offsets: a bigger piece (no entry start in it) takes the polars path
TZ_MISMATCH_S = 30 * 60  # # Time vs SET timestamp differing by more than this means --tz is wrong
MAX_ZONE_OFFSET_S = 14 * 3600  # the widest UTC offset in use; a larger gap is not a zone problem

# Line kinds.
SQL, BLANK, TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN, ADMIN, USE, SET_META, SERVER = range(12)
BANNER_CANDIDATE = 12  # the kernel's mark for an SQL line next to a "Tcp port" line (maybe a banner line)
HEADER_KINDS = (TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN)

# log_slow_extra (MySQL 8) and Percona fields that may follow Rows_examined on the Query_time line.
QT_EXTRA_KEYS = (
    "Rows_affected", "Thread_id", "Errno", "Killed", "Start", "End",
    "Created_tmp_tables", "Created_tmp_disk_tables", "Sort_scan_count", "Sort_range_count",
)
QT_RE = (  # the first four fields, always in this order, one or two spaces apart
    r"^# Query_time: (?<qt_text>\S+) +Lock_time: (?<lock_text>\S+) +Rows_sent: (?<rows_sent_text>\S+)"
    r" +Rows_examined: (?<rows_examined_text>\S+)"
)
QT_FIELDS = {
    "qt_text": "Query_time", "lock_text": "Lock_time", "rows_sent_text": "Rows_sent", "rows_examined_text": "Rows_examined",
}
QT_EXTRA = pl.col("t").str.count_matches(": ", literal=True) > 4


EXPLAIN_COLUMNS = ("table", "type", "key", "rows", "r_rows", "Extra")

SERVER_HEADER_RE = (  # the three lines a server writes when it (re)opens the log
    r"^(?:.*(?:mysqld|mariadbd|mysqld\.exe), Version: .*(?:started with:|embedded library)"
    r"|T[cC][pP] [pP]ort: \d+.*|Time\s+Id\s+Command\s+Argument)\s*$"
)
USER_HOST_RE = (
    r"^\s*(?P<priv>[^\[@]*?)\s*(?:\[(?P<login>[^\]]*)\])?\s*@\s*(?P<host>[^\s\[]*)\s*"
    r"(?:\[(?P<ip>[^\]]*)\])?(?:\s+Id:\s*(?P<id>\d+))?"
)
OLD_TIME_RE = (  # 081127  8:51:20, 120315 18:01:58.479076, 121123 19:56:06.0000001967
    r"^(?P<yy>\d{2})(?P<mo>\d{2})(?P<dd>\d{2})\s+(?P<hh>\d{1,2}):(?P<mi>\d{2}):(?P<ss>\d{2})(?:\.(?P<frac>\d+))?$"
)
ISO_TIME_RE = (
    r"^(?P<yyyy>\d{4})-(?P<mo>\d{2})-(?P<dd>\d{2})[T ](?P<hh>\d{2}):(?P<mi>\d{2}):(?P<ss>\d{2})"
    r"(?:\.(?P<frac>\d+))?(?P<zone>Z|[+-]\d{2}:?\d{2})?$"
)

DETECT_TIDB_RE = re.compile(
    r"^# (?:Txn_start_ts|Conn_ID|Digest|Plan_digest|Is_internal|Cop_\w+|Num_cop_tasks|Process_time|"
    r"Plan|Binary_plan|Succ|Mem_max|Wait_TS|KV_total|Index_names|Prewrite_time|Backoff_time): ",
    re.M,
)
# [ \t], not \s, in these multi-line patterns: \s runs on over every blank line that follows
DETECT_QT_RE = re.compile(r"^# Query_time: [\d.]+[ \t]+Lock_time: [\d.]+", re.M)
DETECT_QT_BARE_RE = re.compile(r"^# Query_time: [\d.]+", re.M)
DETECT_UH_RE = re.compile(r"^# (?:Time: .*)?User@Host: .*@", re.M)
DETECT_TIME_RE = re.compile(r"^# Time: (?:\d{6}[ \t]+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T)", re.M)
DETECT_SERVER_RE = re.compile(r"^.*(?:mysqld|mariadbd), Version: .*started with:[ \t]*$", re.M)
DETECT_GENERAL_LOG_RE = re.compile(
    r"^(?:\d{6}[ \t]+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\S+|\t)[ \t]+\d+ (?:Query|Connect|Quit|Init DB)\b", re.M
)


# ---- detection --------------------------------------------------------------------------------


def detect(head: str, name: str) -> float:
    if DETECT_TIDB_RE.search(head):
        return 0.1  # TiDB writes "# Time:" and "# Query_time:" too; its own fields give it away
    hinted = "slow" in name.lower()
    if DETECT_QT_RE.search(head):
        return 0.95
    if DETECT_UH_RE.search(head) and (DETECT_TIME_RE.search(head) or DETECT_QT_BARE_RE.search(head)):
        return 0.9
    if DETECT_QT_BARE_RE.search(head) or DETECT_UH_RE.search(head):
        return 0.75
    if DETECT_SERVER_RE.search(head):
        # the general query log starts with the same banner
        if DETECT_GENERAL_LOG_RE.search(head):
            return 0.1
        return 0.6 if hinted else 0.4
    if DETECT_TIME_RE.search(head):
        return 0.55 if hinted else 0.3
    return 0.0


# ---- reading lines ----------------------------------------------------------------------------


def _chunk_bounds(text: str | bytes, size: int, begin: int = 0) -> list[tuple[int, int]]:
    """Cut ``text[begin:]`` into pieces of about ``size`` characters (bytes), each starting at an entry start."""
    bounds, start = [], begin
    while len(text) - start > size + size // 2:
        cut = _next_entry_start(text, start + size)
        if cut is None or cut <= start:  # <=: a "# Time:" line longer than ``size`` opens the piece itself
            break
        bounds.append((start, cut))
        start = cut
    bounds.append((start, len(text)))
    return bounds


def _next_entry_start(text: str | bytes, after: int) -> int | None:
    spell = (lambda s: s.encode()) if isinstance(text, bytes) else (lambda s: s)  # noqa: E731
    at = text.find(spell("\n# User@Host: "), after)
    if at < 0:
        at = text.find(spell("\n# Time: "), after)
    if at < 0:
        return None
    line_start = at + 1
    previous = text.rfind(spell("\n"), 0, at) + 1
    # a User@Host right after "# Time:" belongs to that Time line's entry
    return previous if text.startswith(spell("# Time:"), previous) else line_start


@functools.cache
def _line_scan():
    """The C kernel ``dbdiag._line_scan``, or None when the package was built without a compiler
    (then the polars path reads the lines: slower, same tables)."""
    try:
        from dbdiag import _line_scan
    except ImportError:
        return None
    return _line_scan


# (line, reason, the line that places it in its file of a batch) of a warning a piece found
PieceWarning = tuple[int | None, str, int | None]
# a piece's lines, their byte lengths, first four bytes (uint32) and kinds, and the kernel that read them (None: polars did)
Lines = tuple[pl.Series, "np.ndarray", "np.ndarray", "np.ndarray", "_Kernel | None"]


def _text_lines(text: str, start: int, end: int) -> Lines:
    """The lines of ``text[start:end]``, their byte lengths, first four bytes and kinds."""
    kernel = _line_scan()
    data = text[start:end].encode("utf-8", "backslashreplace")  # UTF-8 (lone surrogates become escapes)
    scanned = _scanned(kernel, data, 0, len(data), cr_mode=1) if kernel is not None and len(data) <= MAX_PIECE_BYTES else None
    if scanned is not None:
        return scanned
    lines = _read_lines(data)
    length, prefix = _heads(lines)
    return lines, length, prefix, _classify(lines, length, prefix), None


def _raw_lines(data: bytes, start: int, end: int) -> Lines:
    """``_text_lines`` of ``pipeline.decode(data)`` (for ``parse_bytes``; needs the kernel): strict
    UTF-8 is scanned as it is, CRLF ends read as the decoded LF; other bytes are decoded first."""
    kernel = _line_scan()
    scanned = _scanned(kernel, data, start, end, cr_mode=2) if end - start <= MAX_PIECE_BYTES else None
    if scanned is None:
        text = _decode(data[start:end])  # pieces start at a line start: decoding them one by one is the same
        return _text_lines(text, 0, len(text))
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
    return lines, heads[:, 0], heads[:, 1], kind, _Kernel(kernel, data, start, end, views)


class _Kernel(NamedTuple):
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
        """``_header_codes`` in one pass."""
        starts, groups = _group_starts()
        names = list(LINE_GROUPS)
        first, line, group = self.module.header_codes(
            self.data, self.start, self.end, self.views, kind, marks["role"], n_entries, starts, groups,
            (names.index("user_host"), names.index("use"), names.index("set")),
        )
        first = np.frombuffer(first, dtype=np.uint32).reshape(len(names), n_entries)  # int32 >= 0: same bits
        return first.astype(_index_dtype(), copy=False), lines.gather(np.frombuffer(line, dtype=np.int64)), np.frombuffer(group, dtype=np.int8)

    def statements(self, kind: np.ndarray, owner: np.ndarray, at: np.ndarray, n_entries: int) -> pl.DataFrame:
        """``_sql`` placed at the entries (``n_entries`` rows; null without statement lines): the
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


def _code(start: str) -> int:
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
# What an entry takes from its first line of each group: fields, or values worked out from one field
# (``HEADER_TYPED``); a field that two groups have is taken from the first group that has a line.
ENTRY_FIELDS = {
    "thread": ("Thread_id", "Schema", "Last_errno"),
    "schema": ("Schema", "Last_errno"),
    "rows": ("rows_affected_number",),
    "tmp": ("tmp_tables_positive", "tmp_disk_tables_positive"),
    "flags": ("full_scan_flag", "full_join_flag", "tmp_table_flag", "tmp_table_on_disk_flag"),
    "filesort": ("filesort_flag",),
    "trx": ("txn_id",),
    "rate": ("Log_slow_rate_type", "Log_slow_rate_limit"),
    "client": ("client_host_of_client",),
    "user_host": ("user", "client_host", "uh_id"),
    "use": ("use_db",),
    "set": ("set_ts",),
}
KEYED_COLUMNS = tuple(c for g, (starts, columns) in LINE_GROUPS.items() if starts for c in columns)


def _classify(lines: pl.Series, length: np.ndarray, prefix: np.ndarray) -> np.ndarray:
    kind = np.full(len(length), SQL, dtype=np.uint8)
    kind[length == 0] = BLANK
    kind[((prefix & 0xFFFF) == _code("# ")) | ((length == 1) & (prefix == _code("#")))] = ATTR
    for start, (line_kind, confirm) in LINE_STARTS.items():
        at = np.flatnonzero(prefix == _code(start))
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
    tcp = np.flatnonzero((prefix == _code("Tcp ")) | (prefix == _code("TCP ")))
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


def _mark(kind: np.ndarray, prefix: np.ndarray, kernel: _Kernel | None) -> dict[str, object]:
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
        "time": _first_in_entry(np.flatnonzero(kind == TIME), entry, n_entries),
        "query_time": _first_in_entry(np.flatnonzero(kind == QUERY_TIME), entry, n_entries),
        "head": int(head[0]) if head.size else -1, "explain_kind": bool((kind == EXPLAIN).any()),
        "innodb": bool(((prefix == _code("#   ")) & ~is_sql).any()),
        "entry": entry, "is_sql": is_sql, "use_meta": use & ~plain_before & ~set_before, "set_meta": set_meta & ~plain_before,
    }


# ---- field helpers ----------------------------------------------------------------------------


def _first_in_entry(at: np.ndarray, entry: np.ndarray, n_entries: int) -> np.ndarray:
    """For each entry the first of the (ascending) line numbers ``at`` inside it, or -1."""
    position = np.full(n_entries, -1, dtype=np.int64)
    if at.size:
        owner = entry[at]
        first = np.ones(at.size, dtype=bool)
        first[1:] = owner[1:] != owner[:-1]
        position[owner[first]] = at[first]
    return position


def _nulls(name: str, dtype: pl.DataType, n: int) -> pl.Series:
    return pl.Series(name, [None], dtype=dtype).new_from_index(0, n)  # ten times cheaper than extend_constant


def _take(series: pl.Series, position: np.ndarray) -> pl.Series:
    """``series[position]`` with -1 giving null."""
    return series.gather(_index(position))


@functools.cache
def _index_dtype() -> type:
    return np.uint64 if pl.get_index_type() == pl.UInt64 else np.uint32


def _index(position: np.ndarray) -> pl.Series:
    """Row numbers for a gather in polars' own index type (then it converts nothing, once per
    column); -1 gives null."""
    index = pl.Series(position.astype(_index_dtype()))
    missing = position < 0
    return index.set(pl.Series(missing), None) if missing.any() else index


def _value(expr: pl.Expr, key: str) -> pl.Expr:
    """The token after ``" Key: "`` in a line; "" when the value is empty, null when the key is absent."""
    needle = f" {key}: "
    rest = expr.str.slice(expr.str.find(needle, literal=True) + len(needle)).str.strip_chars_start(" ")
    token = rest.str.split_exact(" ", 1).struct.field("field_0")
    return pl.when(token.str.ends_with(":")).then(pl.lit("")).otherwise(token)


# Built once: constructing polars expressions costs more than running them on a few distinct lines.
VALUE_EXPRS = {
    key: _value(pl.col("t"), key)
    for key in {*QT_EXTRA_KEYS, *QT_FIELDS.values(), *KEYED_COLUMNS}
}
QT_VALUE_EXPRS = {field: VALUE_EXPRS[key] for field, key in QT_FIELDS.items()}


def _user_host_exprs() -> dict[str, pl.Expr]:
    fields = pl.col("t").str.split_exact("User@Host:", 1).struct.field("field_1").str.extract_groups(USER_HOST_RE)
    part = fields.struct.field
    user = pl.when(part("priv") != "").then(part("priv")).otherwise(part("login"))
    host = pl.when(part("host") != "").then(part("host")).otherwise(part("ip"))
    return {"user": pl.when(user != "").then(user), "client_host": pl.when(host != "").then(host), "uh_id": part("id")}


def _db_name(line: pl.Expr) -> pl.Expr:
    name = line.str.slice(4).str.strip_chars_end().str.strip_suffix(";").str.strip_chars()
    return name.str.strip_prefix("`").str.strip_suffix("`")


# Evaluated on every distinct header line; an entry then takes only its group's columns.
HEADER_EXPRS = {
    **{c: VALUE_EXPRS[c] for c in KEYED_COLUMNS},
    **_user_host_exprs(),
    "use_db": _db_name(pl.col("t")),
    "set_ts": pl.col("t").str.extract(r"timestamp=(\d+)").cast(pl.Int64, strict=False),
}


def _flag(key: str) -> pl.Expr:
    return pl.when(pl.col(key) == "Yes").then(True).when(pl.col(key) == "No").then(False)


def _positive(key: str) -> pl.Expr:
    return _number(pl.col(key), pl.Int64) > 0


def _number(text: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    return text.cast(dtype, strict=False)


def _header_typed() -> dict[str, pl.Expr]:
    trx = pl.col("InnoDB_trx_id")
    client = pl.col("Client").str.replace(r":\d+$", "")
    return {
        "rows_affected_number": _number(pl.col("Rows_affected"), pl.Int64),
        "tmp_tables_positive": _positive("Tmp_tables"),
        "tmp_disk_tables_positive": _positive("Tmp_disk_tables"),
        **{f"{key.lower()}_flag": _flag(key) for key in ("Full_scan", "Full_join", "Tmp_table", "Tmp_table_on_disk", "Filesort")},
        "txn_id": pl.when(trx.is_not_null() & (trx != "0") & (trx != "")).then(trx),  # 0 = no InnoDB transaction
        "client_host_of_client": pl.when(client != "").then(client),
    }


# Evaluated on every distinct header line after HEADER_EXPRS: values of one field each.
HEADER_TYPED = _header_typed()


def _by_distinct(values: pl.Series, exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """``exprs`` (over ``pl.col(values.name)``) for every row of ``values``, evaluated once per distinct
    value (logs repeat these lines a lot) and once for null; values are matched by their 64-bit hash."""
    present = np.flatnonzero(values.is_not_null().to_numpy())  # often few: # Time is written once a second
    code, distinct = _distinct_codes(values.gather(present))
    # one chunk: a gather from several chunks copies the bytes of every string
    null_first = pl.concat([pl.Series(values.name, [None], dtype=values.dtype), distinct], rechunk=True)
    table = pl.DataFrame({values.name: null_first}).with_columns(**exprs).drop(values.name)
    index = np.zeros(values.len(), dtype=_index_dtype())
    index[present] = code + 1
    return table.select(pl.all().gather(pl.Series(index)))


def _join_lines(frame: pl.DataFrame, column: str, separator: str, distinct: bool = False) -> pl.DataFrame:
    """``column`` of consecutive rows joined per ``entry`` (rows in order, an entry's rows together;
    ``distinct``: each value once). Most entries have one or two rows: those are gathered directly,
    the rest go through group_by."""
    owner = frame["entry"].to_numpy()
    if not owner.size:
        return frame.select("entry", column)
    first = np.ones(owner.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, owner.size))
    text = frame[column]
    single, pair = starts[sizes == 1], starts[sizes == 2]
    parts = [
        pl.DataFrame({"entry": owner[single], column: text.gather(single)}),
        pl.DataFrame({"entry": owner[pair], column: text.gather(pair), "_next": text.gather(pair + 1)}).select(
            "entry",
            pl.when(pl.lit(distinct) & (pl.col(column) == pl.col("_next"))).then(pl.col(column))
            .otherwise(pl.concat_str([pl.col(column), pl.col("_next")], separator=separator)).alias(column),
        ),
    ]
    more = np.repeat(sizes > 2, sizes)
    if more.any():
        rows = frame.filter(pl.Series(more)).select("entry", column)
        values = pl.col(column).unique(maintain_order=True) if distinct else pl.col(column)
        parts.append(rows.group_by("entry", maintain_order=True).agg(values.str.join(separator)))
    return pl.concat(parts, how="vertical_relaxed")


def _distinct_codes(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(for each row the number of its distinct value, the distinct values in first-seen order)."""
    code, distinct = numbered(values)
    return code.to_numpy(), distinct


def _line_codes(lines: pl.Series, at: np.ndarray, kernel: _Kernel | None) -> tuple[np.ndarray, pl.Series]:
    """``_distinct_codes`` of the lines ``at``: the kernel compares their bytes, polars their hashes."""
    if kernel is None:
        return _distinct_codes(lines.gather(at))
    code, first = kernel.distinct(at)
    return code, lines.gather(at[first])


def _join_coded(owner: np.ndarray, code: np.ndarray, texts: pl.Series, column: str, separator: str) -> pl.DataFrame:
    """Like ``_join_lines`` for rows given as codes into ``texts``: each distinct pair is joined once
    and the entries share its bytes."""
    first = np.ones(owner.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, owner.size))
    single, pair = starts[sizes == 1], starts[sizes == 2]
    pair_key = code[pair] * texts.len() + code[pair + 1]
    keys, to_key = np.unique(pair_key, return_inverse=True)
    joined = pl.DataFrame({"a": texts.gather(keys // texts.len()), "b": texts.gather(keys % texts.len())}).select(
        pl.concat_str(["a", "b"], separator=separator)
    ).to_series()
    parts = [
        pl.DataFrame({"entry": owner[single], column: texts.gather(code[single])}),
        pl.DataFrame({"entry": owner[pair], column: joined.gather(to_key.reshape(-1))}),
    ]
    more = np.repeat(sizes > 2, sizes)
    if more.any():
        rows = pl.DataFrame({"entry": owner[more], column: texts.gather(code[more])})
        parts.append(rows.group_by("entry", maintain_order=True).agg(pl.col(column).str.join(separator)))
    return pl.concat(parts, how="vertical_relaxed")


def _merged_texts(texts: list[pl.Series]) -> tuple[list[np.ndarray], pl.Series]:
    """The distinct texts of the pieces as one list: (for each piece the number in it of each of its
    texts, the texts)."""
    code, distinct = _distinct_codes(pl.concat(texts))
    bounds = np.cumsum([0] + [t.len() for t in texts])
    return [code[a:b] for a, b in zip(bounds[:-1], bounds[1:])], distinct


def _align(frame: pl.DataFrame, n_entries: int) -> pl.DataFrame:
    """Rows of ``frame`` (one per local ``entry`` at most) placed at their entry: ``n_entries`` rows."""
    position = np.full(n_entries, -1, dtype=np.int64)
    position[frame["entry"].to_numpy()] = np.arange(frame.height)
    return frame.drop("entry").select(pl.all().gather(_index(position)))


# ---- per chunk ---------------------------------------------------------------------------------


def _parse_chunk(read: Callable[[], Lines], is_first: bool, boundaries: np.ndarray) -> dict[str, object]:
    """Entries of the piece that ``read`` reads (which starts at an entry, or is the file's beginning)
    with local entry numbers: 0 holds what comes before the first header, the rest count from 1.
    ``entries`` holds the values read from the piece's own lines, for the entries from ``kept`` on
    (entry 0 only when it has lines); line numbers are kept as line indices of the piece (``lines``).

    Header and explain lines come back as numbers of the piece's distinct texts: their fields are
    read once per distinct text of the whole file (``_header_columns``, ``_explain``).

    ``boundaries``: the line indices of the boundary lines of a batch (``parse_batch``), each one
    the start of the entry that holds what its file has before its first header."""
    lines, length, prefix, kind, kernel = read()
    marks = _mark(kind, prefix, kernel)
    starts = marks["starts"]
    n_entries = starts.size + 1

    line_of = np.full(n_entries, -1, dtype=np.int64)
    line_of[1:] = starts
    if marks["head"] >= 0 and is_first:
        line_of[0] = marks["head"]
    kept = 0 if line_of[0] >= 0 else 1  # entry 0 holds lines only before the first header of the file
    first_line = 1

    numbers, qt_extras, warnings = _query_time(lines, marks["query_time"], first_line, kernel, boundaries + first_line)
    first, header_texts, header_groups = (_header_codes if kernel is None else kernel.header_codes)(
        lines, kind, prefix, marks, n_entries
    )
    if kernel is None:
        sql = _align(_sql(lines, kind, marks["sql_entry"], marks["sql"]), n_entries)
    else:
        sql = kernel.statements(kind, marks["sql_entry"], marks["sql"], n_entries)
    entries = pl.concat([pl.DataFrame(numbers), sql], how="horizontal").slice(kept)
    at, owner = marks["explain"], marks["explain_entry"]
    explain_codes, explain_texts = _line_codes(lines, at, kernel)
    data_rows, head_rows = _explain_data(owner, explain_codes, _explain_heads(explain_texts))
    # what an entry shows of its explain lines depends on them only: one entry of each distinct
    # sequence of them (``plans``) goes on to be read for the whole file
    plan_of, reps, n_plans = _plans(owner, explain_codes, n_entries)
    is_rep = np.zeros(n_entries, dtype=bool)
    is_rep[reps] = True
    rep_rows = np.flatnonzero(is_rep[owner])
    server = marks["server"]
    return {
        "entries": entries,
        "kept": kept,
        "lines": {"line": line_of, "time_line": marks["time"], "qt_line": marks["query_time"]},
        "times": _time_texts(lines, marks["time"]),
        "qt_extras": qt_extras,
        "header": (header_texts, header_groups, first),
        # the data rows of the explain lines: entry, text and header row's text
        "explain": (owner[data_rows], explain_codes[data_rows], explain_codes[head_rows], explain_texts),
        "plans": (plan_of, n_plans, plan_of[owner[rep_rows]], explain_codes[rep_rows]),
        "n_entries": n_entries,
        "n_lines": lines.len(),
        "warnings": warnings,
        "server": pl.DataFrame({"line": server + first_line, "t": lines.gather(_index(server))}),
        "innodb_lines": _innodb_lines(prefix, marks) + first_line,
        "explain_lines": (np.flatnonzero(kind == EXPLAIN) if marks["explain_kind"] else np.zeros(0, np.int64)) + first_line,
        "boundaries": _boundary_entries(kind, starts, boundaries),
    }


def _innodb_lines(prefix: np.ndarray, marks: dict[str, object]) -> np.ndarray:
    """The header lines that start with "#   " (Percona's ``#   InnoDB_IO_r_ops: ...``)."""
    if not marks["innodb"]:
        return np.zeros(0, dtype=np.int64)
    at = np.flatnonzero(prefix == _code("#   "))
    return at[~np.isin(at, marks["sql"])]


def _boundary_entries(kind: np.ndarray, starts: np.ndarray, boundaries: np.ndarray) -> tuple[np.ndarray, ...]:
    """For each boundary line: its entry (local number), the first line after it in that entry that is
    not blank or a banner (-1: none), and whether that entry is its file's head (what comes before
    the first header, like entry 0 of a single file) rather than an entry its first line starts."""
    entry = np.searchsorted(starts, boundaries) + 1
    lead = np.flatnonzero((kind != BLANK) & (kind != SERVER))
    at = np.searchsorted(lead, boundaries, side="right")
    first = np.where(at < lead.size, lead[np.minimum(at, max(lead.size - 1, 0))] if lead.size else -1, -1)
    next_start = np.append(starts, kind.size)[np.searchsorted(starts, boundaries, side="right")]
    first = np.where((first >= 0) & (first < next_start), first, -1)
    opens = np.isin(kind[np.maximum(first, 0)], (USER_HOST, QUERY_TIME, ATTR_START)) & (first >= 0)
    return entry, first, ~opens


# ---- whole file ---------------------------------------------------------------------------------


class _Stitch(NamedTuple):
    """Where the pieces' entries go in the file's table of entries: the local entries of each piece
    from its first one kept on (``_parse_chunk``'s ``kept``), in file order."""

    kept: list[int]  # per piece, its first local entry kept
    n_entries: list[int]  # per piece, its number of local entries
    entry_bases: np.ndarray  # per piece, the file's number of its local entry 0
    line_bases: np.ndarray  # per piece, the file's index of its first line

    @property
    def rows(self) -> int:
        return sum(self.n_entries) - sum(self.kept)

    def spans(self) -> list[tuple[int, int, int]]:
        """Per piece: its first local entry kept, and where its entries start and end in the table."""
        sizes = np.subtract(self.n_entries, self.kept)
        stops = np.cumsum(sizes)
        return list(zip(self.kept, (stops - sizes).tolist(), stops.tolist()))


def _by_name(frame: pl.DataFrame) -> dict[str, pl.Series]:
    return dict(zip(frame.columns, frame.iter_columns()))


def _int64_column(name: str, values: np.ndarray, valid: np.ndarray) -> pl.Series:
    """``values`` as a polars column on the same memory, null where not ``valid``."""
    if valid.all():
        return pl.Series(name, values)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return arrow_series(pa.Array.from_buffers(pa.int64(), values.size, [bitmap, pa.py_buffer(values)]), name)


LINE_COLUMNS = ("line", "time_line", "qt_line")


def _number_columns(pieces: list[dict[str, object]], stitch: _Stitch) -> dict[str, pl.Series]:
    """entry (the file's entry numbers) and line, time_line, qt_line (1-based line numbers in the file;
    null: no such line). One allocation for the four: numpy asks for huge pages past 4 MB."""
    numbers = np.empty((1 + len(LINE_COLUMNS), stitch.rows), dtype=np.int64)
    valid = np.empty((len(LINE_COLUMNS), stitch.rows), dtype=bool)
    for piece, (kept, start, stop), entry_base, line_base in zip(pieces, stitch.spans(), stitch.entry_bases, stitch.line_bases):
        numbers[0, start:stop] = np.arange(entry_base + kept, entry_base + piece["n_entries"])
        for row, name in enumerate(LINE_COLUMNS):
            position = piece["lines"][name][kept:]
            np.add(position, line_base + 1, out=numbers[row + 1, start:stop])  # -1 (no line) is masked below
            np.greater_equal(position, 0, out=valid[row, start:stop])
    return {"entry": pl.Series("entry", numbers[0])} | {
        name: _int64_column(name, numbers[row + 1], valid[row]) for row, name in enumerate(LINE_COLUMNS)
    }


def _qt_extra_columns(pieces: list[dict[str, object]], stitch: _Stitch, entry: pl.Series) -> dict[str, pl.Series]:
    """The ``qt_*`` keys read after Rows_examined, for every entry kept; only the keys some line has."""
    extras = [p["qt_extras"].with_columns(pl.col("entry") + int(b)) for p, b in zip(pieces, stitch.entry_bases)]
    # one chunk: a gather from several copies the bytes of every string
    extras = pl.concat([e for e in extras if e.width > 1] or extras[:1], how="diagonal_relaxed", rechunk=True)
    if extras.width == 1:
        return {}
    if extras.height == entry.len() and extras["entry"].equals(entry, check_names=False):  # every entry has them
        return {c: extras[c] for c in extras.columns if c != "entry"}
    position = np.full(int(stitch.entry_bases[-1]), -1, dtype=np.int64)
    position[extras["entry"].to_numpy()] = np.arange(extras.height)
    index = _index(position[entry.to_numpy()])
    return {c: extras[c].gather(index) for c in extras.columns if c != "entry"}


def _entry_table(
    pieces: list[dict[str, object]], stitch: _Stitch, header: dict[str, object],
    plans: tuple[np.ndarray, np.ndarray, pl.DataFrame], tz: str,
) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Every entry kept, numbered in the file (``entry``), with the values of its lines, its header
    fields (``header``: the table of the log's distinct header texts, each piece's numbers in it,
    the groups present) and plan (``plans``: the file's plan of each piece's plans, where each piece's
    numbers start, the table of plans), flags and ids (``_typed``); and per entry what tells the
    server (``_flavour_evidence``). Each column is made once for the whole file."""
    table, remaps, groups = header["table"], header["remaps"], sorted(header["present"])
    plan_of, plan_bases, per_plan = plans
    # last row: no plan; one chunk (a gather from several copies the bytes of every string)
    per_plan = pl.concat([per_plan, pl.DataFrame({"plan_full_scan": [False]})], how="diagonal", rechunk=True)
    # for each group with lines and each entry, the row of its line's text in ``table`` (its last,
    # empty row: none); last, the entry's row in ``per_plan``: one allocation (huge pages)
    rows = np.empty((len(groups) + 1, stitch.rows), dtype=_index_dtype())
    for piece, remap, plan_base, (kept, start, stop) in zip(pieces, remaps, plan_bases, stitch.spans()):
        texts = np.append(remap, table.height - 1)  # a piece numbers "no line" as its number of texts
        for row, group in enumerate(groups):
            np.take(texts, piece["header"][2][group, kept:], out=rows[row, start:stop], mode="clip")
        plan_rows = np.append(plan_of[plan_base : plan_base + piece["plans"][1]], per_plan.height - 1)
        np.take(plan_rows, piece["plans"][0][kept:], out=rows[-1, start:stop], mode="wrap")  # -1 (no plan): the last
    base = pl.concat([p["entries"] for p in pieces], how="vertical_relaxed", rechunk=True)
    numbers = _number_columns(pieces, stitch)
    times = _time_columns(pieces, stitch, tz)
    header_columns = _header_columns(dict(zip(groups, rows[:-1])), table, header["groups"])
    plans = per_plan.select(pl.all().gather(pl.Series(rows[-1]))) if per_plan.height > 1 else pl.DataFrame()
    extras = _qt_extra_columns(pieces, stitch, numbers["entry"])
    columns = {**numbers, **_by_name(base), **times, **header_columns, **_by_name(plans), **extras}
    names = list(LINE_GROUPS)
    evidence = _flavour_evidence(table, {names[group]: rows[row] for row, group in enumerate(groups)})
    if not groups:
        evidence = {name: np.zeros(stitch.rows, dtype=bool) for name in ("mariadb", "percona", "flag_line")}
    return _typed(pl.DataFrame(columns)), evidence


def _time_texts(lines: pl.Series, position: np.ndarray) -> tuple[np.ndarray, pl.Series]:
    """The entries with a ``# Time`` line (``position``: each entry's line, or -1) and its text."""
    present = np.flatnonzero(position >= 0)  # few: the server writes # Time once a second
    text = lines.gather(_index(position[present])).str.slice(len("# Time:"))
    return present, text.str.split_exact(" # User@Host:", 1).struct.field("field_0").str.strip_chars().alias("time_text")


def _time_columns(pieces: list[dict[str, object]], stitch: _Stitch, tz: str) -> dict[str, pl.Series]:
    """The entries' ``# Time`` texts read once per distinct text: ``time_text_utc`` (null without one),
    ``time_text_zoned``, ``time_text_subsecond``; the texts themselves too when one is unreadable (its
    warning shows it)."""
    counts = np.cumsum([0] + [piece["times"][0].size for piece in pieces])
    position = np.full(stitch.rows, counts[-1], dtype=_index_dtype())  # each entry's row in ``texts``; the last: none
    for piece, (kept, start, _), count in zip(pieces, stitch.spans(), counts):
        entries = piece["times"][0]  # an entry with a # Time line starts with it: never entry 0
        position[entries - kept + start] = np.arange(count, count + entries.size)
    texts = pl.concat([*(piece["times"][1] for piece in pieces), pl.Series("time_text", [None], dtype=pl.String)], rechunk=True)
    read = pl.concat([texts.to_frame(), _by_distinct(texts, _parse_time_text("time_text", tz))], how="horizontal")
    if read["time_text_utc"].null_count() == 1:  # only the last row's
        read = read.drop("time_text")
    return dict(zip(read.columns, read.select(pl.all().gather(pl.Series(position))).iter_columns()))


def _query_time_layout(line: str) -> tuple[str, dict[str, int]] | None:
    """How the four values sit in a ``# Query_time:`` line: ("  ", {}) when the fields are two spaces
    apart (MariaDB, Percona), else (" ", token index of each value), or None."""
    keys = ["# Query_time", "Lock_time", "Rows_sent", "Rows_examined"]
    if [part.split(": ", 1)[0] for part in line.split("  ")[:4]] == keys:
        return "  ", {}
    tokens = line.split(" ")
    keys = {field: f"{key}:" for field, key in QT_FIELDS.items()}
    if not all(key in tokens for key in keys.values()):
        return None
    return " ", {field: tokens.index(key) + 1 for field, key in keys.items()}


def _query_time(
    lines: pl.Series, position: np.ndarray, first_line: int, kernel: _Kernel | None, files: np.ndarray
) -> tuple[dict[str, pl.Series], pl.DataFrame, list[PieceWarning]]:
    """Query_time, Lock_time, Rows_sent, Rows_examined as numbers (with a warning per unreadable
    value); what follows them (Percona Rows_affected, MySQL 8 log_slow_extra) is read by
    key as text on the lines that have it: a frame of ``entry`` and the ``qt_*`` keys found.
    ``position``: each entry's Query_time line, or -1.

    The kernel reads the plain lines (the four numbers and nothing after them); the rest are split:
    a server writes every such line with the same spacing, so the layout is learnt from the first
    line and checked on each (a split is much cheaper than a regex); other lines use the regex."""
    present = np.flatnonzero(position >= 0)
    layout = _query_time_layout(lines[int(position[present[0]])]) if present.size else None
    if kernel is None:
        out, warnings, extras = _query_time_texts(lines, position, first_line, layout, files)
        del out["qt_line"]  # the file's line numbers are made for all pieces at once (``_number_columns``)
        return out, extras, warnings
    plain, *numbers = kernel.query_times(position)
    rest = np.flatnonzero(~plain & (position >= 0))
    if rest.size:
        out, warnings, extras = _query_time_texts(lines, position[rest], first_line, layout, files)
    else:
        out, warnings, extras = {}, [], pl.DataFrame(schema={"entry": pl.Int64})
    missing = pl.Series(~plain)
    for (_, _, column, dtype), values in zip(NUMBER_FIELDS, numbers):
        number = pl.Series(column, values, dtype=dtype).set(missing, None)
        out[column] = number.scatter(rest, out[column]) if rest.size else number
    out.pop("qt_line", None)
    return out, extras.with_columns(entry=pl.Series(rest[extras["entry"].to_numpy()], dtype=pl.Int64)), warnings


def _query_time_texts(
    lines: pl.Series, position: np.ndarray, first_line: int, layout: tuple[str, dict[str, int]] | None, files: np.ndarray
) -> tuple[dict[str, pl.Series], pl.DataFrame, list[PieceWarning]]:
    """``_query_time`` read with polars expressions."""
    text = _take(lines, position).alias("t")
    t = pl.col("t")
    if layout and layout[0] == "  ":
        parts = text.str.splitn("  ", 5).struct.unnest()
        values, checks = {}, []
        for number, (field, key) in enumerate(QT_FIELDS.items()):
            label = f"# {key}: " if number == 0 else f"{key}: "
            value = parts[f"field_{number}"].str.strip_prefix(label)
            # the prefix was there when stripping it shortened the field (lengths are stored: no pass over bytes)
            shortened = parts[f"field_{number}"].str.len_bytes() - value.str.len_bytes()
            checks.append((shortened == len(label)).fill_null(False).to_numpy())
            values[field] = value
        # MySQL 8 log_slow_extra follows Rows_examined after one space
        extra = parts["field_4"].is_not_null() | values["rows_examined_text"].str.contains(" ", literal=True)
        frame = pl.DataFrame(values).with_columns(regular=pl.Series(np.logical_and.reduce(checks)), extra=extra)
        spaced = np.flatnonzero(extra.fill_null(False).to_numpy())
        if spaced.size:
            first = frame["rows_examined_text"].gather(spaced).str.split_exact(" ", 1).struct.field("field_0")
            frame = frame.with_columns(frame["rows_examined_text"].scatter(spaced, first))
    elif layout:
        last = max(layout[1].values())
        parts = text.str.splitn(" ", last + 2).struct.unnest()
        checks = [parts[f"field_{at - 1}"] == f"{QT_FIELDS[field]}:" for field, at in layout[1].items()]
        frame = pl.DataFrame({field: parts[f"field_{at}"] for field, at in layout[1].items()}).with_columns(
            regular=pl.Series(np.logical_and.reduce([c.fill_null(False).to_numpy() for c in checks])),
            extra=parts[f"field_{last + 1}"].is_not_null(),
        )
    else:
        frame = pl.DataFrame({f: _nulls(f, pl.String, text.len()) for f in QT_FIELDS}).with_columns(
            regular=pl.lit(False), extra=pl.lit(False)
        )
    odd = np.flatnonzero((text.is_not_null() & ~frame["regular"]).to_numpy())
    if odd.size:  # other spacing, "# Query_time: 1" alone...: regex, then each key on its own
        texts = text.gather(odd)
        fixed = pl.DataFrame({"t": texts}).select(t.str.extract_groups(QT_RE).alias("g"), extra=QT_EXTRA).unnest("g")
        loose = np.flatnonzero(fixed["qt_text"].is_null().to_numpy())
        if loose.size:
            by_key = pl.DataFrame({"t": texts.gather(loose)}).select(**QT_VALUE_EXPRS)
            fixed = fixed.with_columns(*[fixed[c].scatter(loose, by_key[c]) for c in QT_FIELDS])
        frame = frame.with_columns(*[frame[c].scatter(odd, fixed[c]) for c in (*QT_FIELDS, "extra")])
    out = {c: frame[c] for c in QT_FIELDS}
    extra_at = np.flatnonzero(frame["extra"].fill_null(False).to_numpy())
    extras = pl.DataFrame({"t": text.gather(extra_at)})
    keys = [k for k in QT_EXTRA_KEYS if extra_at.size and extras["t"].str.contains(f" {k}: ", literal=True).any()]
    extras = extras.select(entry=pl.Series(extra_at, dtype=pl.Int64), **{f"qt_{k}": VALUE_EXPRS[k] for k in keys})
    out["qt_line"] = _line_numbers(position, first_line)
    return *_numbers(out, files), extras


def _line_numbers(position: np.ndarray, first_line: int) -> pl.Series:
    """Line numbers of the line indices ``position`` (-1: null)."""
    line = pl.Series(np.where(position < 0, -1, position + first_line))
    return line.set(line < 0, None)


def _numbers(out: dict[str, pl.Series], files: np.ndarray) -> tuple[dict[str, pl.Series], list[PieceWarning]]:
    """The four texts of ``_query_time_texts`` as numbers, with a warning per unreadable value (at
    most MAX_WARNINGS per file: ``files`` are the lines where the files of a batch start)."""
    warnings: list[PieceWarning] = []
    for text, label, parsed, dtype in NUMBER_FIELDS:
        texts = out.pop(text)
        out[parsed] = number = texts.cast(dtype, strict=False).alias(parsed)
        bad = (number.is_null() & texts.is_not_null() & (texts != "")).to_numpy()
        if not bad.any():
            continue
        rows = np.flatnonzero(bad)
        lines = out["qt_line"].gather(rows).to_numpy()
        file = np.searchsorted(files, lines, side="right")
        first = np.flatnonzero(np.diff(file, prepend=-1))
        rank = np.arange(rows.size) - np.repeat(first, np.diff(np.append(first, rows.size)))
        shown = np.flatnonzero(rank < MAX_WARNINGS)
        for line, value in zip(lines[shown].tolist(), texts.gather(rows[shown]).to_list()):
            warnings.append((line, f"{label} {value!r} is not a number (server overflow bug?); left empty", line))
        for start, count in zip(first.tolist(), np.diff(np.append(first, rows.size)).tolist()):
            if count > MAX_WARNINGS:
                warnings.append((None, f"{count - MAX_WARNINGS} more unreadable {label} values", int(lines[start])))
    return out, warnings




def _header_table(texts: pl.Series) -> pl.DataFrame:
    """The fields of every distinct header line of the log and what ``HEADER_TYPED`` works out from
    them, and a last all-null row (for entries without a line of a group: a gather without null indices)."""
    # one chunk: a gather from several chunks copies the bytes of every string
    return pl.DataFrame({"t": texts.extend_constant(None, 1).rechunk()}).with_columns(**HEADER_EXPRS).with_columns(**HEADER_TYPED)


def _header_columns(codes: dict[int, np.ndarray], table: pl.DataFrame, group_of_text: np.ndarray) -> dict[str, pl.Series]:
    """What entries take from the header lines that repeat a lot (User@Host, Thread_id, Rows_affected,
    flags, use, SET timestamp...), read once per distinct text (``table``; ``group_of_text``: the group
    of each of its rows): each entry takes ``ENTRY_FIELDS`` from its first line of each group.
    ``codes``: for each group that has lines in the log, per entry the row of that line's text in
    ``table`` (its last, empty row: none), as polars row numbers. A field that no line of its group
    has is left out (null), like the fields of groups without lines."""
    names = list(LINE_GROUPS)
    gathers: list[tuple[str, pl.Expr]] = []
    for group, index in codes.items():
        index = pl.Series(index)
        texts = table.filter(pl.Series(np.append(group_of_text == group, False)))
        gathers += [
            (column, pl.col(column).gather(index).alias(f"{column}#{group}"))
            for column in ENTRY_FIELDS[names[group]] if texts[column].null_count() < texts.height
        ]
    taken = table.select(expr for _, expr in gathers)
    found: dict[str, list[pl.Series]] = {}
    for (column, _), series in zip(gathers, taken.iter_columns()):
        found.setdefault(column, []).append(series)
    return {
        column: (series[0] if len(series) == 1 else pl.select(pl.coalesce(series)).to_series()).alias(column)
        for column, series in found.items()
    }


def _header_codes(
    lines: pl.Series, kind: np.ndarray, prefix: np.ndarray, marks: dict[str, np.ndarray], n_entries: int
) -> tuple[np.ndarray, pl.Series, np.ndarray]:
    """The header lines of ``LINE_GROUPS`` put in groups and their texts numbered (first seen first):
    (for every group and entry the number of the text of the entry's first line of the group, or the
    number of texts when it has none, as polars row numbers; the texts; the group of each text).
    What ``_Kernel.header_codes`` computes in one pass."""
    names = list(LINE_GROUPS)
    header = np.flatnonzero(((kind == ATTR) | (kind == ATTR_START)) & ~marks["is_sql"])
    header_prefix = prefix[header]
    group = np.full(len(kind), -1, dtype=np.int8)
    starts, group_of_start = _group_starts()
    slot = np.minimum(np.searchsorted(starts, header_prefix), starts.size - 1)
    known = starts[slot] == header_prefix
    group[header[known]] = group_of_start[slot[known]]
    user_host = kind == USER_HOST
    times = np.flatnonzero(kind == TIME)
    if times.size:  # "# Time: 071218 11:48:27 # User@Host: [SQL_SLAVE] @  []" on one line
        user_host[times[lines.gather(times).str.contains("User@Host:", literal=True).to_numpy()]] = True
    group[user_host] = names.index("user_host")
    group[marks["use_meta"]] = names.index("use")
    group[marks["set_meta"]] = names.index("set")
    at = np.flatnonzero(group >= 0)
    to_distinct, texts = _distinct_codes(lines.gather(at))
    group_of_text = np.empty(texts.len(), dtype=np.int8)
    group_of_text[to_distinct] = group[at]
    line_group, owner = group[at], marks["entry"][at]
    first = np.full((len(names), n_entries), texts.len(), dtype=_index_dtype())
    for code in range(len(names)):
        mine = np.flatnonzero(line_group == code)
        if mine.size:
            position = _first_in_entry(mine, owner, n_entries)  # a row of `at` for each entry, or -1
            first[code] = np.where(position < 0, texts.len(), to_distinct[np.maximum(position, 0)])
    return first, texts, group_of_text




@functools.cache
def _group_starts() -> tuple[np.ndarray, np.ndarray]:
    """The four-byte starts of the keyed header lines, sorted, and the number of each one's group."""
    pairs = sorted((_code(start), code) for code, (starts, _) in enumerate(LINE_GROUPS.values()) for start in starts)
    return np.array([p[0] for p in pairs], dtype=np.uint32), np.array([p[1] for p in pairs], dtype=np.int8)


def _flavour_evidence(table: pl.DataFrame, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per entry, what tells which server wrote it, from its first line of each group (``rows``: per
    group with lines, each entry's row in ``table``, the last row meaning none): MariaDB's Thread_id
    line has QC_hit; Percona's has none, or Last_errno, and Percona writes Schema, InnoDB_trx_id,
    Log_slow_rate and ``# QC_Hit:`` lines (and ``#   InnoDB_IO_r_ops`` ones: ``_innodb_lines``);
    ``flag_line``: a Full_scan line."""
    none = table.height - 1
    n_entries = next(iter(rows.values())).size if rows else 0
    no = np.zeros(n_entries, dtype=bool)

    def has(group: str, column: str | None = None, values: np.ndarray | None = None) -> np.ndarray:
        if group not in rows:
            return no
        if values is None:
            values = table[column].is_not_null().to_numpy() if column else np.ones(table.height, dtype=bool)
        return values[rows[group]] & (rows[group] != none)

    thread, qc = has("thread"), has("thread", "QC_hit")
    percona = (thread & ~qc) | has("thread", "Last_errno") | has("schema") | has("trx") | has("rate")
    percona |= has("flags", values=table["t"].str.starts_with("# QC_Hit:").fill_null(False).to_numpy())
    return {"mariadb": qc, "percona": percona, "flag_line": has("flags", "Full_scan")}


def _sql(lines: pl.Series, kind: np.ndarray, owner: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """Each entry's statement: its statement lines (``at``, of entries ``owner``) joined, the server's
    closing ";" removed."""
    text = lines.gather(_index(at))
    admin = np.flatnonzero(kind[at] == ADMIN)
    if admin.size:  # "# administrator command: Quit;" -> "administrator command: Quit" (as pt-query-digest)
        text = text.scatter(admin, text.gather(admin).str.slice(2))
    joined = _join_lines(pl.DataFrame({"entry": owner, "text": text}), "text", "\n")
    # the server adds ";" after every statement; its absence at the end means the text was cut
    sql = joined["text"]
    terminated = sql.str.ends_with(";")
    untidy = np.flatnonzero((~terminated).to_numpy())  # trailing blanks, or cut: the slow path
    sql = sql.str.strip_suffix(";")
    if untidy.size:
        body = sql.gather(untidy).str.strip_chars_end()
        sql = sql.scatter(untidy, body.str.strip_suffix(";"))
        terminated = terminated.scatter(untidy, body.str.ends_with(";"))
    return pl.DataFrame({"entry": joined["entry"], "sql": sql, "terminated": terminated})


class _ExplainTexts(NamedTuple):
    """The distinct ``# explain:`` lines of a log, read once."""

    body: pl.Series  # each text without "# explain: "
    is_head: np.ndarray  # whether it is a header row ("id select_type table ...")
    header_of: np.ndarray  # for a header row, the number of its text among the distinct header rows; else -1
    cells: list[pl.DataFrame]  # for each distinct header row, the cells of every text read under it


def _explain_heads(texts: pl.Series) -> np.ndarray:
    """Whether each ``# explain:`` text is a header row ("id select_type table ...")."""
    body = texts.str.strip_prefix("# explain: ")
    return (body.str.starts_with("id\t") | body.str.starts_with("id ")).to_numpy()


def _explain_texts(distinct: pl.Series) -> _ExplainTexts:
    body = distinct.str.strip_prefix("# explain: ")
    is_head = _explain_heads(distinct)
    head_codes = np.flatnonzero(is_head)
    heads = body.gather(head_codes)
    header_of = np.full(distinct.len(), -1, dtype=np.int64)
    cells = []
    for number, header in enumerate(heads.unique().to_list()):  # one or two distinct headers per file
        header_of[head_codes[(heads == header).to_numpy()]] = number
        cells.append(pl.DataFrame({"body": body}).select(**_cell_exprs(header)))
    return _ExplainTexts(body, is_head, header_of, cells)


PLAN_SCHEMA = {"plan": pl.String, "plan_signature": pl.String, "index_names": pl.String, "plan_full_scan": pl.Boolean}
NODE_SCHEMA = {
    "row": pl.Int64, "entry": pl.Int64, **{c: pl.String for c in EXPLAIN_COLUMNS if c not in ("rows", "r_rows")},
    "est_rows": pl.Float64, "actual_rows": pl.Float64, "sig": pl.String,
}


def _explain_data(owner: np.ndarray, code: np.ndarray, is_head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The data rows among ``# explain:`` rows given as their entries (``owner``, in order) and the
    numbers (``code``) of their texts (``is_head``: whether each text is a header row): (the data rows,
    the header row of each), a data row being read through the nearest header row above it in its entry."""
    head = is_head[code]
    header_row = np.maximum.accumulate(np.where(head, np.arange(owner.size), -1))
    data = ~head & (header_row >= 0)
    data &= owner[np.maximum(header_row, 0)] == owner
    rows = np.flatnonzero(data)
    return rows, header_row[rows]


def _explain_cells(
    owner: np.ndarray, code: np.ndarray, head: np.ndarray, texts: _ExplainTexts, columns: tuple[str, ...]
) -> pl.DataFrame:
    """One row per ``# explain:`` data row, given as its entry (``owner``), the number of its text and
    of its header row's text in ``texts`` (``code``, ``head``): its number among the rows, its entry and
    its cells (``columns`` of them)."""
    header_of_row = texts.header_of[head]
    parts = []
    for number, cells in enumerate(texts.cells):
        mine = np.flatnonzero(header_of_row == number) if len(texts.cells) > 1 else np.arange(owner.size)
        parts.append(pl.concat([
            pl.DataFrame({"row": mine, "entry": owner[mine]}), cells.select(pl.col(columns).gather(_index(code[mine])))
        ], how="horizontal"))
    nodes = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=NODE_SCHEMA).select("row", "entry", *columns)
    return nodes.sort("row") if len(parts) > 1 else nodes


def _explain_nodes(
    owner: np.ndarray, code: np.ndarray, texts: _ExplainTexts, columns: tuple[str, ...] = tuple(NODE_SCHEMA)[2:]
) -> pl.DataFrame:
    """MariaDB ``# explain:`` rows -> one row per data row (``_explain_cells``). The rows are given as
    their entries (``owner``, in order) and the numbers (``code``) of their texts in ``texts``."""
    rows, heads = _explain_data(owner, code, texts.is_head)
    return _explain_cells(owner[rows], code[rows], code[heads], texts, columns)


def _plan_table(owner: np.ndarray, code: np.ndarray, texts: _ExplainTexts, n_entries: int) -> tuple[np.ndarray, pl.DataFrame]:
    """What entries show of their ``# explain:`` rows (given as for ``_explain_nodes``): (for each entry
    its plan number, or -1 without rows; per plan: plan, plan_signature, index_names, plan_full_scan).
    It depends only on an entry's explain lines: worked out once per distinct sequence of them (the
    pieces of a log give one entry per plan of theirs)."""
    if not owner.size:
        return np.full(n_entries, -1, dtype=np.int64), pl.DataFrame(schema=PLAN_SCHEMA)
    plan_of, reps, n_plans = _plans(owner, code, n_entries)
    is_rep = np.zeros(n_entries, dtype=bool)
    is_rep[reps] = True
    rows = np.flatnonzero(is_rep[owner])
    plan_owner, plan_code = plan_of[owner[rows]], code[rows]
    plan = _join_coded(plan_owner, plan_code, texts.body, "plan", "\n")
    named = _explain_nodes(plan_owner, plan_code, texts).filter(pl.col("table").is_not_null())
    signature = _join_lines(named.select("entry", plan_signature="sig"), "plan_signature", "|")
    keys = named.filter(pl.col("key").is_not_null()).select("entry", index_names="key")
    full = np.zeros(n_plans, dtype=bool)
    full[named.filter(pl.col("type") == "ALL")["entry"].to_numpy()] = True
    return plan_of, pl.concat([
        _align(plan, n_plans), _align(signature, n_plans),
        _align(_join_lines(keys, "index_names", ",", distinct=True), n_plans),
        pl.DataFrame({"plan_full_scan": full}),
    ], how="horizontal")


def _plans(owner: np.ndarray, code: np.ndarray, n_entries: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(for each entry the number of its sequence of ``code`` rows, or -1 without rows; for each
    number an entry that has it; how many numbers). The kernel numbers the distinct sequences, so
    that entries with the same explain lines share their plan's work; without it each entry is its
    own number (same result, more work)."""
    kernel = _line_scan()
    if kernel is not None:
        plan, first = kernel.sequences(owner, code, n_entries)
        first = np.frombuffer(first, dtype=np.int64)
        return np.frombuffer(plan, dtype=np.int64), first, first.size
    plan_of = np.full(n_entries, -1, dtype=np.int64)
    plan_of[owner] = owner
    return plan_of, np.unique(owner), n_entries


@functools.cache
def _cell_exprs(header: str) -> dict[str, pl.Expr]:
    """The server separates cells with tabs; a copy with tabs expanded to spaces is split on
    whitespace, the last column (Extra) taking the rest."""
    tabbed = "\t" in header
    names = header.split("\t") if tabbed else header.split()
    if tabbed:
        cells = pl.col("body").str.split("\t")
    else:  # two-word select types would shift the columns after them
        two_words = r"^(\S+\s+(?:DEPENDENT|UNCACHEABLE|UNION|LATERAL))\s+"
        merged = pl.col("body").str.strip_chars().str.replace(two_words, "${1}_")
        cells = merged.str.replace_all(r"\s+", "\t").str.split("\t")
    exprs = {}
    for column in EXPLAIN_COLUMNS:
        if column not in names:
            exprs[column] = pl.lit(None, pl.String)
            continue
        at = names.index(column)
        cell = cells.list.get(at, null_on_oob=True)
        if column == names[-1] and not tabbed:
            cell = cells.list.slice(at).list.join(" ")
        exprs[column] = pl.when(cell.is_in(["NULL", ""])).then(None).otherwise(cell)
    exprs["est_rows"] = exprs["rows"].cast(pl.Float64, strict=False)
    exprs["actual_rows"] = exprs["r_rows"].cast(pl.Float64, strict=False)
    del exprs["rows"], exprs["r_rows"]
    key = exprs["key"]
    exprs["sig"] = (
        exprs["table"] + ":" + exprs["type"].fill_null("NULL")
        + pl.when(key.is_not_null()).then("(" + key + ")").otherwise(pl.lit(""))
    )
    return exprs


# ---- whole file ---------------------------------------------------------------------------------


CRLF_NOTE = "CRLF line ends (file passed through Windows); read as plain lines"
CRLF_HEAD_CHARS = 65536  # CRLF line ends are looked for in the first characters only


def parse(text: str, ctx: ParseContext) -> ParseResult:
    text = text.removeprefix("\ufeff")
    if not text or text.isspace():
        raise ParseError("empty file")
    notes = [CRLF_NOTE] if "\r\n" in text[:CRLF_HEAD_CHARS] else []
    reads = [functools.partial(_text_lines, text, start, end) for start, end in _chunk_bounds(text, CHUNK_CHARS)]
    return _one(_parse_pieces(reads, ctx.tz, _Files([ctx.source], [notes], np.zeros(1, dtype=np.int64))))


def _one(results: list[ParseResult | ParseError]) -> ParseResult:
    if isinstance(results[0], ParseError):
        raise results[0]
    return results[0]


BOUNDARY = b"# Time: (dbdiag: the next file of the batch starts below)\n"  # a # Time line starts an entry


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_bytes`` of each member (all in one zone), in one parse: thousands of small logs cost
    one fixed cost, not one each. The members are joined, each after a ``BOUNDARY`` line that starts
    an entry; every choice made for a whole file (server, version, what SET timestamp means, zone
    agreement, carried # Time and database, warnings and their caps, notes) is made per member, and
    line numbers are the member's own. A member ending in a lone CR (which the joining LF would
    turn into a CRLF end) is parsed alone."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    # the Query_time layout is learnt from a file's first such line: one joined parse per layout
    by_layout: dict[object, list[int]] = {}
    for index, (data, ctx) in enumerate(members):
        begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        if _is_blank(data, begin):
            results[index] = ParseError("empty file")
        elif data.endswith(b"\r"):
            results[index] = _alone(data, ctx)
        else:
            by_layout.setdefault(_layout_key(data, begin), []).append(index)
    for indices in by_layout.values():
        for index, result in zip(indices, _parse_joined([members[i] for i in indices])):
            results[index] = result
    return results


def _layout_key(data: bytes, begin: int) -> object:
    """``_query_time_layout`` of the first line that starts with "# Qu" (the kind QUERY_TIME), as a key."""
    at = begin if data.startswith(b"# Qu", begin) else data.find(b"\n# Qu", begin) + 1
    if at <= 0 and not data.startswith(b"# Qu", begin):
        return None
    end = data.find(b"\n", at)
    line = data[at : end if end >= 0 else len(data)]
    layout = _query_time_layout(_decode(line.removesuffix(b"\r")))
    return None if layout is None else (layout[0], tuple(layout[1].items()))


def _parse_joined(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_batch`` of members that are not blank and do not end in a CR."""
    parts: list[bytes] = []
    notes: list[list[str]] = []
    starts: list[int] = []
    line = 0
    for data, ctx in members:
        begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        head = data[begin : begin + 4 * CRLF_HEAD_CHARS + 8]
        notes.append([CRLF_NOTE] if b"\r\r\n" in head and "\r\n" in _decode(head)[:CRLF_HEAD_CHARS] else [])
        body = data[begin:] if data.endswith(b"\n") else data[begin:] + b"\n"
        if parts:
            parts.append(BOUNDARY)
            line += 1
        starts.append(line)
        parts.append(body)
        line += body.count(b"\n")
    text = b"".join(parts)
    parts.clear()
    if _line_scan() is None:
        decoded = _decode(text)
        reads = [functools.partial(_text_lines, decoded, 0, len(decoded))]
    else:
        reads = [functools.partial(_raw_lines, text, 0, len(text))]
    files = _Files([ctx.source for _, ctx in members], notes, np.array(starts, dtype=np.int64))
    return _parse_pieces(reads, members[0][1].tz, files)


def _alone(data: bytes, ctx: ParseContext) -> ParseResult | ParseError:
    try:
        return parse_bytes(data, ctx)
    except ParseError as error:
        return error


def parse_bytes(data: bytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of the text that ``pipeline.decode`` makes of ``data``, without decoding it whole:
    the kernel reads strict UTF-8 pieces as they are (the lines are views of ``data``)."""
    if _line_scan() is None:
        return parse(_decode(data), ctx)
    begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    if _is_blank(data, begin):
        raise ParseError("empty file")
    # pipeline.decode turned CRLF into LF, but "\r\r\n" still reads as "\r" + LF: parse notes that
    head = data[begin : begin + 4 * CRLF_HEAD_CHARS + 8]  # covers the characters parse looks at
    notes = [CRLF_NOTE] if b"\r\r\n" in head and "\r\n" in _decode(head)[:CRLF_HEAD_CHARS] else []
    reads = [functools.partial(_raw_lines, data, start, end) for start, end in _chunk_bounds(data, CHUNK_CHARS, begin)]
    return _one(_parse_pieces(reads, ctx.tz, _Files([ctx.source], [notes], np.zeros(1, dtype=np.int64))))


_decode = decode_text  # what ``pipeline.decode`` makes of the bytes


SPACE_BYTES = re.compile(rb"[\t\n\x0b\x0c\r\x1c-\x1f ]*")  # the ASCII characters str.isspace() accepts


def _is_blank(data: bytes, begin: int) -> bool:
    """Whether ``data[begin:]`` decodes to nothing but whitespace (``str.isspace``), decoding only
    from the first byte that is not ASCII whitespace, and only as far as needed."""
    at = SPACE_BYTES.match(data, begin).end()
    if at == len(data):
        return True
    if data[at] < 0x80:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
    for window in range(at, len(data), 65536):
        text = decoder.decode(data[window : window + 65536], final=window + 65536 >= len(data))
        if text and not text.isspace():
            return False
    return True


class _Files(NamedTuple):
    """The logs one parse reads: one file, or the small files of a batch (``parse_batch``) joined,
    each after a boundary line but the first. ``starts``: per file, the line number in the parse
    that its own line numbers count from (0, then each one's boundary line)."""

    sources: list[str]
    notes: list[list[str]]
    starts: np.ndarray

    def of(self, line: np.ndarray) -> np.ndarray:
        """The file of each line number (1-based, in the parse)."""
        return np.searchsorted(self.starts, line, side="right") - 1


def _parse_pieces(
    reads: list[Callable[[], Lines]], tz: str, files: _Files
) -> list[ParseResult | ParseError]:
    """The tables of each file of a log given as entry-aligned pieces (``reads`` give each one's
    lines; a batch is one piece)."""
    tz, tz_warning = check_tz(tz)
    warnings = [tz_warning] if tz_warning else []
    boundaries = files.starts[1:] - 1  # line indices of the boundary lines
    jobs = [(read, index == 0, boundaries if index == 0 else boundaries[:0]) for index, read in enumerate(reads)]
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:  # polars, numpy and the kernel release the GIL
        pieces = [_parse_chunk(*jobs[0])] if len(jobs) == 1 else list(pool.map(lambda job: _parse_chunk(*job), jobs))
        return _parse_whole(pieces, pool, tz, files, warnings)


def _parse_whole(
    pieces: list[dict[str, object]], pool: ThreadPoolExecutor, tz: str, files: _Files, warnings: list[ParseWarning],
) -> list[ParseResult | ParseError]:
    """The tables of each file from the pieces (``_parse_chunk``); the plan nodes are read on ``pool``
    while the entries are put together."""
    # the header and explain lines of all pieces, each distinct text read once
    header_remaps, header_texts = _merged_texts([p["header"][0] for p in pieces])
    header_groups = np.zeros(header_texts.len(), dtype=np.int8)
    for remap, piece in zip(header_remaps, pieces):
        header_groups[remap] = piece["header"][1]
    header_table = _header_table(header_texts)
    explain_remaps, explain_distinct = _merged_texts([p["explain"][3] for p in pieces])
    explain_texts = _explain_texts(explain_distinct)
    # pieces number their entries and lines from 0; the file's numbers shift them by what came before
    entry_bases = np.cumsum([0] + [p["n_entries"] for p in pieces])
    n_total = int(entry_bases[-1])
    stitch = _Stitch([p["kept"] for p in pieces], [p["n_entries"] for p in pieces], entry_bases,
                     np.cumsum([0] + [p["n_lines"] for p in pieces]))
    # the pieces' plans (numbered per piece) numbered again for the whole file
    plan_bases = np.cumsum([0] + [p["plans"][1] for p in pieces])
    plan_of, per_plan = _plan_table(
        np.concatenate([p["plans"][2] + b for p, b in zip(pieces, plan_bases)]),
        np.concatenate([remap[p["plans"][3]] for p, remap in zip(pieces, explain_remaps)]),
        explain_texts, int(plan_bases[-1]),
    )
    header = {
        "table": header_table, "groups": header_groups, "remaps": header_remaps,
        "present": set(np.unique(header_groups).tolist()),
    }
    plan_nodes = pool.submit(
        _explain_cells,
        np.concatenate([p["explain"][0] + b for p, b in zip(pieces, entry_bases)]),
        *[np.concatenate([remap[p["explain"][k]] for p, remap in zip(pieces, explain_remaps)]) for k in (1, 2)],
        explain_texts, ("type", "table", "key", "est_rows", "actual_rows", "Extra"),
    )
    entries, evidence = _entry_table(pieces, stitch, header, (plan_of, plan_bases, per_plan), tz)
    entries = pl.concat([entries, *_times_read(entries, tz)], how="horizontal")
    entries, head = _boundaries_read(entries, pieces, stitch)
    n_files = len(files.sources)
    file = files.of(entries["line"].to_numpy())
    lines_of = lambda name: np.concatenate([p[name] + int(b) for p, b in zip(pieces, stitch.line_bases)])  # noqa: E731
    flavour = {
        "mariadb": _any_per(file[evidence["mariadb"]], n_files) | _any_per(files.of(lines_of("explain_lines")), n_files),
        "percona": _any_per(file[evidence["percona"]], n_files) | _any_per(files.of(lines_of("innodb_lines")), n_files),
        "flag_lines": _any_per(file[evidence["flag_line"]], n_files),
    }
    server = pl.concat([p["server"].with_columns(pl.col("line") + int(b)) for p, b in zip(pieces, stitch.line_bases)])
    by_file = _Warnings(files, warnings)
    for piece, base in zip(pieces, stitch.line_bases):
        for line, reason, anchor in piece["warnings"]:
            by_file.add(None if line is None else line + int(base), reason, anchor + int(base))
    pieces.clear()  # their tables are copied into ``entries`` (and the caller's list is this one): let them go

    entries = entries.with_columns(file=pl.Series(file, dtype=pl.Int64), is_head=pl.Series(head))
    errors: dict[int, str] = {
        f: "no slow-log entry found (no # Time, # User@Host or # Query_time header)"
        for f in np.flatnonzero(~_any_per(file[~head], n_files)).tolist()
    }
    entries, first_warning = _keep_entries(entries, by_file)
    kept = _any_per(entries["file"].to_numpy(), n_files)
    for f in np.flatnonzero(~kept).tolist():
        errors.setdefault(f, _nothing_reason(first_warning.get(f)))
    if errors:
        entries = entries.filter(~pl.col("file").is_in(list(errors)))
    banners = _banners(server, files)
    engines = [_engine(banner["text"], flavour["mariadb"][f], flavour["percona"][f]) for f, banner in enumerate(banners)]
    statement, notes = _statement(entries, engines, tz, files, [b["version"] for b in banners], flavour["flag_lines"], by_file)
    for f, banner in enumerate(banners):
        notes[f] += _server_notes(banner)
    for f, rate in _rate_notes(entries).items():
        notes[f] += rate
    plan_node = _plan_node(plan_nodes.result().drop("row"), entries["entry"].to_numpy(), n_total, statement, files)
    # the server's version, for remedies in its syntax (derive.engine_version)
    versions = {f: f"{engines[f]} {banner['version']}" for f, banner in enumerate(banners) if banner["version"]}
    return _results(statement, plan_node, files, notes, by_file, errors, versions)


def _any_per(owner: np.ndarray, n: int) -> np.ndarray:
    """For each of ``n`` numbers, whether ``owner`` holds it."""
    present = np.zeros(n, dtype=bool)
    present[owner] = True
    return present


class _Warnings:
    """The warnings of each file, line numbers made its own."""

    def __init__(self, files: _Files, common: list[ParseWarning]) -> None:
        self.files = files
        self.of_file: list[list[ParseWarning]] = [list(common) for _ in files.sources]

    def add(self, line: int | None, reason: str, anchor: int | None = None) -> None:
        """A warning at ``line`` (1-based, in the parse), or without one but in the file of ``anchor``."""
        where = line if line is not None else anchor
        file = int(self.files.of(np.array([where]))[0]) if where is not None and len(self.files.sources) > 1 else 0
        own = None if line is None else line - int(self.files.starts[file])
        self.of_file[file].append(ParseWarning(own, reason))

    def rows(self, rows: pl.DataFrame, reason: str, line_column: str = "line") -> dict[int, ParseWarning]:
        """A warning for each row (at most MAX_WARNINGS per file, then one counting the rest); the
        first of each file."""
        first: dict[int, ParseWarning] = {}
        counts: dict[int, int] = {}
        for file, line in rows.select("file", line_column).iter_rows():
            counts[file] = counts.get(file, 0) + 1
            if counts[file] <= MAX_WARNINGS:
                warning = ParseWarning(line - int(self.files.starts[file]), reason)
                self.of_file[file].append(warning)
                first.setdefault(file, warning)
        for file, count in counts.items():
            if count > MAX_WARNINGS:
                self.of_file[file].append(ParseWarning(None, f"{count - MAX_WARNINGS} more entries like this: {reason}"))
        return first


def _boundaries_read(entries: pl.DataFrame, pieces: list[dict[str, object]], stitch: _Stitch) -> tuple[pl.DataFrame, np.ndarray]:
    """The entries with the boundary lines of a batch undone: the entry a boundary line starts is
    its file's head (like entry 0 of a single file) or its first entry, its line the first one of
    the file that is not blank or a banner, and it has no ``# Time`` line. Also which entries are heads."""
    entry = entries["entry"].to_numpy()
    head = entry == 0
    at, lines, heads = [], [], []
    for piece, base, line_base in zip(pieces, stitch.entry_bases, stitch.line_bases):
        local, first, is_head = piece["boundaries"]
        at.append(local + base)
        lines.append(np.where(first >= 0, first + line_base + 1, -1))
        heads.append(is_head)
    at, lines, heads = np.concatenate(at), np.concatenate(lines), np.concatenate(heads)
    if not at.size:
        return entries, head
    rows = np.searchsorted(entry, at)
    head[rows] = heads
    boundary = np.zeros(entry.size, dtype=bool)
    boundary[rows] = True
    line = entries["line"].to_numpy().copy()
    line[rows] = np.where(lines >= 0, lines, line[rows])  # none: an empty head, dropped
    mask = pl.Series(boundary)
    timed = [c for c in ("time_line", "time_text", "time_text_utc", "time_text_zoned", "time_text_subsecond") if c in entries.columns]
    # the line stays for the file of the entry (``_Files.of``); ``_keep_entries`` drops empty heads
    return entries.with_columns(
        pl.Series("line", line), *[pl.when(mask).then(None).otherwise(pl.col(c)).alias(c) for c in timed]
    ), head


def _results(
    statement: pl.DataFrame, plan_node: pl.DataFrame, files: _Files, notes: list[list[str]], warnings: _Warnings,
    errors: dict[int, str], versions: dict[int, str],
) -> list[ParseResult | ParseError]:
    """One result per file: its rows (a slice of each table), records, warnings, notes, time range, and
    its banner's ``db_version`` fact."""
    n_files = len(files.sources)
    file = statement["file"].to_numpy()
    counts = np.bincount(file, minlength=n_files)
    offsets = np.cumsum(np.append(0, counts))
    node_counts = np.bincount(plan_node["file"].to_numpy(), minlength=n_files)
    node_offsets = np.cumsum(np.append(0, node_counts))
    ranges = _time_ranges(statement, n_files)
    statement, plan_node = T.conform(T.STATEMENT, statement), T.conform(T.PLAN_NODE, plan_node)
    results: list[ParseResult | ParseError] = []
    for f in range(n_files):
        if f in errors:
            results.append(ParseError(errors[f]))
            continue
        tables = {
            T.STATEMENT: statement.slice(int(offsets[f]), int(counts[f])),
            T.PLAN_NODE: plan_node.slice(int(node_offsets[f]), int(node_counts[f])),
        }
        if f in versions:
            tables[T.HOST_FACT] = T.host_fact_frame([("db_version", versions[f])], files.sources[f])
        results.append(ParseResult(
            tables=tables,
            records=int(counts[f]),
            warnings=cap_warnings(warnings.of_file[f]),
            notes=list(dict.fromkeys(files.notes[f] + notes[f])),
            time_range=ranges.get(f),
        ))
    return results


def _time_ranges(statement: pl.DataFrame, n_files: int) -> dict[int, tuple[object, object]]:
    """Per file, its earliest start and latest end (files with neither have none)."""
    if n_files == 1:
        starts, ends = statement["start_ts"].drop_nulls(), statement["end_ts"].drop_nulls()
        return {0: (starts.min(), ends.max())} if starts.len() and ends.len() else {}
    spans = statement.group_by("file").agg(pl.col("start_ts").min(), pl.col("end_ts").max())
    return {f: (a, b) for f, a, b in spans.iter_rows() if a is not None and b is not None}


def _keep_entries(entries: pl.DataFrame, warnings: _Warnings) -> tuple[pl.DataFrame, dict[int, ParseWarning]]:
    """Drop what is not a statement (cut headers, empty head fragments), with a warning each; the
    first warning of each file."""
    last = np.ones(entries.height, dtype=bool)
    file = entries["file"].to_numpy()
    last[:-1] = file[1:] != file[:-1]  # each file's last entry
    masks = entries.select(  # each read once; the checks combine them
        has_sql=pl.col("sql").is_not_null() & (pl.col("sql") != ""),
        has_qt=pl.col("qt_line").is_not_null(),
        is_head="is_head",
        is_last=pl.Series(last),
        unterminated=~pl.col("terminated").fill_null(True),
    )
    has_sql, has_qt, is_head, is_last = pl.col("has_sql"), pl.col("has_qt"), pl.col("is_head"), pl.col("is_last")
    first: dict[int, ParseWarning] = {}
    checks = [
        (is_head & has_sql, "the file starts inside an entry (no header above this line); kept without timings"),
        (~is_head & has_qt & ~has_sql & is_last, "the last entry ends after its header (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & is_last, "the last entry has neither # Query_time nor statement text (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & ~is_last, "entry has neither # Query_time nor statement text; skipped"),
        (~is_head & has_qt & ~has_sql & ~is_last, "entry has no statement text; kept without sql"),
        (~is_head & ~has_qt & has_sql, "entry has no # Query_time line; kept without timings"),
        (is_last & has_sql & pl.col("unterminated"),
         "the last statement has no closing ';' (the server always writes one): the file may be cut; kept as is"),
    ]
    found = masks.select(*[condition.any().alias(str(n)) for n, (condition, _) in enumerate(checks)]).row(0)
    for (condition, reason), any_row in zip(checks, found):
        if any_row:  # rare: filter only then
            for f, warning in warnings.rows(entries.filter(masks.select(condition).to_series()), reason).items():
                first.setdefault(f, warning)
    keep = masks.select((is_head & has_sql) | (~is_head & (has_qt | has_sql) & ~(is_last & ~has_sql))).to_series()
    return (entries if keep.all(ignore_nulls=False) else entries.filter(keep)), first  # usually all: no copy


def _nothing_reason(warning: ParseWarning | None) -> str:
    if warning is not None:
        return f"no complete slow-log entry: {warning.reason} (line {warning.line})"
    return "no slow-log entry found (no # Time, # User@Host or # Query_time header)"


def _banners(server: pl.DataFrame, files: _Files) -> list[dict[str, object]]:
    """Per file, its server banner lines: all their text, the last version, the start lines."""
    out = [{"text": "", "version": None, "starts": [], "versions": []} for _ in files.sources]
    if not server.height:
        return out
    rows = server.with_columns(file=pl.Series(files.of(server["line"].to_numpy())), version=pl.col("t").str.extract(r", Version: (\S+)"))
    for file, line, text, version in rows.select("file", "line", "t", "version").iter_rows():
        banner = out[file]
        banner["text"] += " " + text if banner["text"] else text
        if ", Version: " in text:
            banner["starts"].append(line - int(files.starts[file]))
            if version is not None:
                banner["version"] = version
                banner["versions"].append(version)
    return out


def _engine(banner: str, mariadb: bool, percona: bool) -> str:
    if "MariaDB" in banner or "mariadbd" in banner or mariadb:
        return "mariadb"
    if "Percona" in banner or percona:
        return "percona"
    return "mysql"


def _typed_exprs(have: frozenset[str]) -> dict[str, pl.Expr]:
    """Flags and ids of an entry from its fields; the fields not in ``have`` are null (no line of the
    log has them: no column was made), a value made of them only is left out."""

    def first(*exprs: pl.Expr | None) -> pl.Expr | None:
        exprs = [e for e in exprs if e is not None]
        return pl.coalesce(exprs) if len(exprs) > 1 else exprs[0] if exprs else None

    def col(name: str) -> pl.Expr | None:
        return pl.col(name) if name in have else None

    def positive(name: str) -> pl.Expr | None:
        return _number(pl.col(name), pl.Int64) > 0 if name in have else None

    error_code = first(col("Last_errno"), col("qt_Errno"))
    rows_affected = col("rows_affected_number")
    if "qt_Rows_affected" in have:
        qt_rows = pl.col("qt_Rows_affected")
        rows_affected = pl.when(qt_rows.is_not_null()).then(_number(qt_rows, pl.Int64)).otherwise(rows_affected)
    full_scan = col("full_scan_flag")
    if "plan_full_scan" in have:  # filled: False where the entry has no plan
        full_scan = pl.when(pl.col("plan_full_scan")).then(True).otherwise(full_scan)
    sorts = None
    if {"qt_Sort_scan_count", "qt_Sort_range_count"} <= have:
        sorts = (_number(pl.col("qt_Sort_scan_count"), pl.Int64) + _number(pl.col("qt_Sort_range_count"), pl.Int64)) > 0
    exprs = {
        "rows_affected": rows_affected,
        "client_host": first(col("client_host"), col("client_host_of_client")),
        # "use" in this entry, else Schema ("" = no database); entries with neither carry the last one
        "db_written": first(col("use_db"), col("Schema")),
        "conn_id": first(col("uh_id"), col("Thread_id"), col("qt_Thread_id")),
        "txn_id": col("txn_id"),
        "full_scan": full_scan,
        "full_join": col("full_join_flag"),
        "tmp_table": first(col("tmp_table_flag"), col("tmp_tables_positive"), positive("qt_Created_tmp_tables")),
        "tmp_table_on_disk": first(
            col("tmp_table_on_disk_flag"), col("tmp_disk_tables_positive"), positive("qt_Created_tmp_disk_tables")
        ),
        "filesort": first(col("filesort_flag"), sorts),
        "success": pl.lit(True) if error_code is None else error_code.is_null() | (error_code == "0"),
        "error_code": error_code,
    }
    return {name: expr for name, expr in exprs.items() if expr is not None}


TYPED_KEPT = (
    "entry", "line", "qt_line", "time_line", "time_text", "time_text_utc", "time_text_zoned", "time_text_subsecond",
    "set_ts", "sql", "terminated", "plan", "plan_signature",
    "index_names", "Log_slow_rate_type", "Log_slow_rate_limit", "user", "qt_Start", "qt_End",
)
FLAG_COLUMNS = ("full_scan", "full_join", "tmp_table", "tmp_table_on_disk", "filesort")


NUMBER_FIELDS = (  # text column, label in warnings, typed column, type
    ("qt_text", "Query_time", "query_time_s", pl.Float64),
    ("lock_text", "Lock_time", "lock_time_s", pl.Float64),
    ("rows_sent_text", "Rows_sent", "rows_sent", pl.Int64),
    ("rows_examined_text", "Rows_examined", "rows_examined", pl.Int64),
)


def _typed(entries: pl.DataFrame) -> pl.DataFrame:
    """Row-local work on the entries: flags and ids (times are read afterwards)."""
    kept = [c for c in (*TYPED_KEPT, *[parsed for _, _, parsed, _ in NUMBER_FIELDS]) if c in entries.columns]
    return entries.select(*kept, **_typed_exprs(frozenset(entries.columns)))


def _times_read(entries: pl.DataFrame, tz: str) -> list[pl.DataFrame]:
    """``Start:`` and ``End:`` texts read (``*_utc``), once per distinct text, when some line has them."""
    times = []
    for column in ("qt_Start", "qt_End"):
        if column in entries.columns and entries[column].null_count() < entries.height:
            times.append(_by_distinct(entries[column], _parse_time_text(column, tz)).select(f"{column}_utc"))
    return times


def _statement(
    entries: pl.DataFrame, engines: list[str], tz: str, files: _Files, versions: list[str | None],
    flag_lines: np.ndarray, warnings: _Warnings,
) -> tuple[pl.DataFrame, list[list[str]]]:
    """The statement table (with its ``file``): times inherited and combined, the database carried
    over, flags completed; and each file's notes."""
    have = set(entries.columns)
    file = entries["file"].to_numpy()
    times, notes = _timestamps(
        entries.select(
            "file", "time_line", "time_text_utc", "time_text_zoned", "time_text_subsecond", "query_time_s",
            *[c for c in ("time_text", "qt_Start_utc", "qt_End_utc") if c in have],
            pl.col("set_ts") if "set_ts" in have else pl.lit(None, pl.Int64).alias("set_ts"),
        ), tz, versions, files, warnings,
    )
    flags = []
    # MariaDB (log_slow_verbosity=query_plan) writes the Full_scan/Filesort lines only when a flag is Yes
    fill = np.array([engine == "mariadb" for engine in engines]) & flag_lines
    if fill.any():
        filled = pl.lit(pl.Series(fill[file]))
        flags = [
            pl.when(filled).then(pl.col(c).fill_null(False) if c in have else pl.lit(False)).otherwise(pl.col(c) if c in have else None).alias(c)
            for c in FLAG_COLUMNS
        ]
    db = pl.col("db_written").forward_fill().over("file")
    first_row = np.searchsorted(file, file)  # rows are in file order
    statement = entries.with_columns(
        *flags,
        *times,
        *([pl.when(db != "").then(db).alias("db")] if "db_written" in have else []),
        stmt_id=pl.Series(np.arange(file.size, dtype=np.int64) - first_row),
        engine=pl.Series(engines, dtype=pl.String).gather(pl.Series(file)),
        source=pl.Series(files.sources, dtype=pl.String).gather(pl.Series(file)),
        line=pl.col("line") - pl.lit(_per_entry(files.starts, file, pl.Int64)),  # the file's own line numbers
    )
    return statement, notes


def _per_entry(values: list[object] | np.ndarray, file: np.ndarray, dtype: pl.DataType = pl.Boolean) -> pl.Series:
    """A value of each file, for each of its entries."""
    return pl.Series(values, dtype=dtype).gather(pl.Series(file))


@functools.cache
def _parse_time_text(column: str, tz: str) -> dict[str, pl.Expr]:
    """Expressions turning a ``# Time:``/``Start:`` text into UTC (``*_utc``) and whether it had a zone."""
    old = pl.col(column).str.extract_groups(OLD_TIME_RE)
    iso = pl.col(column).str.extract_groups(ISO_TIME_RE)
    yy = old.struct.field("yy").cast(pl.Int32, strict=False)
    year = pl.coalesce(iso.struct.field("yyyy").cast(pl.Int32, strict=False), pl.when(yy < 70).then(yy + 2000).otherwise(yy + 1900))
    pick = lambda f: pl.coalesce(iso.struct.field(f), old.struct.field(f))  # noqa: E731
    frac = pick("frac").fill_null("").str.slice(0, 6).str.pad_end(6, "0")
    text = pl.format("{}-{}-{} {}:{}:{}.{}", year, pick("mo"), pick("dd"), pick("hh").str.zfill(2), pick("mi"), pick("ss"), frac)
    naive = text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)
    zone = iso.struct.field("zone")
    offset = zone.str.replace(":", "", literal=True)
    offset_min = pl.when(zone == "Z").then(0).otherwise(
        (offset.str.slice(1, 2).cast(pl.Int32, strict=False) * 60 + offset.str.slice(3, 2).cast(pl.Int32, strict=False))
        * pl.when(offset.str.starts_with("-")).then(-1).otherwise(1)
    )
    utc_zoned = (naive - pl.duration(minutes=offset_min)).dt.replace_time_zone("UTC")
    return {
        f"{column}_utc": pl.when(zone.is_not_null()).then(utc_zoned).otherwise(local_to_utc(naive, tz)).cast(T.UTC_TIME),
        f"{column}_zoned": zone.is_not_null(),
        f"{column}_subsecond": pick("frac").is_not_null() | zone.is_not_null(),
    }


def _timestamps(
    frame: pl.DataFrame, tz: str, versions: list[str | None], files: _Files, warnings: _Warnings
) -> tuple[pl.DataFrame, list[list[str]]]:
    """start_ts and end_ts of every entry (see the module docstring for the order of preference),
    each file's choices its own; and each file's notes."""
    n_files = len(files.sources)
    file = frame["file"].to_numpy()
    notes: list[list[str]] = [[] for _ in range(n_files)]
    set_is_start = _set_timestamp_is_start(frame, versions)
    time_is_start = _time_line_is_start(frame, versions)
    set_is_start |= time_is_start  # a server that stamps # Time with the start stamps SET timestamp with it too
    if "time_text" in frame.columns:  # there when a # Time line is unreadable
        bad = frame.select("file", "time_line", "time_text", "time_text_utc").filter(
            pl.col("time_line").is_not_null() & pl.col("time_text_utc").is_null()
        )
        counts: dict[int, int] = {}
        for f, line, value in bad.select("file", "time_line", "time_text").iter_rows():
            counts[f] = counts.get(f, 0) + 1
            if counts[f] <= MAX_WARNINGS:
                warnings.of_file[f].append(ParseWarning(
                    line - int(files.starts[f]), f"unreadable # Time {value!r}; entries up to the next # Time have no time from it"
                ))
        for f, count in counts.items():
            if count > MAX_WARNINGS:
                warnings.of_file[f].append(ParseWarning(None, f"{count - MAX_WARNINGS} more unreadable # Time lines"))

    has_time = pl.col("time_line").is_not_null()
    frame = _inherit_time(frame, file)
    bogus, offset_s = _set_timestamp_agreement(frame, tz, set_is_start & ~time_is_start, file, warnings)
    if offset_s.any():  # zone-less # Time lines were read in the wrong zone: move them onto SET timestamp's UTC
        shifted = pl.col("time_text_utc") - pl.duration(seconds=pl.lit(_per_entry(offset_s, file, pl.Int64)))
        frame = _inherit_time(frame.with_columns(
            time_text_utc=pl.when(pl.col("time_text_zoned")).then(pl.col("time_text_utc")).otherwise(shifted)
        ), file)
    is_start = pl.lit(_per_entry(set_is_start, file))
    query_time = pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round(0).cast(pl.Int64, strict=False))
    # an epoch past MAX_EPOCH_S is a corrupt field: null before any arithmetic on it can overflow
    sane_set = pl.when(pl.col("set_ts").is_between(0, MAX_EPOCH_S)).then(pl.col("set_ts"))
    set_ts = pl.from_epoch(sane_set, time_unit="s").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if bogus.any():
        set_ts = pl.when(pl.lit(_per_entry(bogus, file))).then(pl.lit(None, T.UTC_TIME)).otherwise(set_ts)
    own_time = pl.when(has_time).then(pl.col("written"))
    set_start = [pl.when(is_start & ~pl.col("own_subsecond")).then(set_ts)] if set_is_start.any() else []
    set_end = pl.when(is_start).then(set_ts + query_time).otherwise(set_ts) if set_is_start.any() else set_ts
    exact = lambda column: [pl.col(column)] if column in frame.columns else []  # noqa: E731  (Start:/End: read)
    if time_is_start.any():  # MariaDB: # Time is when the statement started; its end is that plus Query_time
        started = pl.lit(_per_entry(time_is_start, file))
        own_end = pl.when(started).then(own_time + query_time).otherwise(own_time)
        own_start = [pl.when(started).then(own_time)]
        written_end = [pl.when(~started).then(pl.col("written"))]  # an inherited start belongs to another statement
    else:
        own_end, own_start, written_end = own_time, [], [pl.col("written")]
    frame = frame.with_columns(
        end_ts=pl.coalesce(*exact("qt_End_utc"), own_end, set_end, *written_end).cast(T.UTC_TIME)
    ).with_columns(
        start_ts=pl.coalesce(*exact("qt_Start_utc"), *own_start, *set_start, pl.col("end_ts") - query_time).cast(T.UTC_TIME)
    )
    counted = frame.select(
        a=has_time & ~pl.col("time_text_zoned").fill_null(True),
        b=~has_time & pl.col("written").is_not_null(),
        c=pl.col("end_ts").is_null(),
    )
    zone_less, inherited, timeless = (np.bincount(file, weights=counted[c].to_numpy(), minlength=n_files).astype(int) for c in "abc")
    for f in np.flatnonzero(zone_less | inherited | timeless).tolist():
        if zone_less[f]:
            notes[f].append(zone_note(tz))
        if inherited[f]:
            notes[f].append(
                f"{inherited[f]} entries have no # Time line of their own (the server writes one only when the second "
                "changes); they take the previous entry's time, as pt-query-digest does"
            )
        if timeless[f]:
            notes[f].append(f"{timeless[f]} statements have no time at all (no readable # Time, SET timestamp or Start/End)")
    return frame.select("start_ts", "end_ts"), notes


def _set_timestamp_is_start(frame: pl.DataFrame, versions: list[str | None]) -> np.ndarray:
    """Per file, whether ``SET timestamp`` is the statement start (MySQL 8.0+; MariaDB, see
    ``_time_line_is_start``) or the write time like ``# Time`` (MySQL <= 5.7, Percona <= 5.7).

    The banner's version decides; without one, statements of 2 s or more show it: their
    ``# Time`` minus ``SET timestamp`` is about Query_time when SET timestamp is the start."""
    is_start = np.zeros(len(versions), dtype=bool)
    for f, version in enumerate(versions):
        if version:
            major = re.match(r"(\d+)\.", version)
            is_start[f] = bool(major) and int(major.group(1)) >= 8 and "MariaDB" not in version
    unknown = [f for f, version in enumerate(versions) if not version]
    if not unknown:
        return is_start
    long = frame.select("file", "time_line", "set_ts", "query_time_s", "time_text_utc").filter(
        pl.col("file").is_in(unknown) & pl.col("time_line").is_not_null() & pl.col("set_ts").is_not_null()
        & (pl.col("query_time_s") >= 2)
    ).select("file", gap=pl.col("time_text_utc").dt.epoch("s") - pl.col("set_ts"), query_time_s="query_time_s")
    if not long.height:
        return is_start
    medians = long.group_by("file").agg(
        behind=(pl.col("gap") - pl.col("query_time_s")).abs().median(), level=pl.col("gap").abs().median()
    )
    for f, behind, level in medians.iter_rows():
        is_start[f] = behind is not None and behind <= 1 < level
    return is_start


def _time_line_is_start(frame: pl.DataFrame, versions: list[str | None]) -> np.ndarray:
    """Per file, whether ``# Time`` is the statement's start, not the time the entry was written.

    MariaDB stamps both ``# Time`` and ``SET timestamp`` with the start (measured on 10.11.19: a
    ``DO SLEEP(3)`` logged with the second it began, and an UPDATE that waited 1.9 s for a row lock
    with ``# Time`` 2 s earlier than the entry above it). Any file shows it the same way: an entry whose
    own ``# Time`` is more than a second earlier than the one above it, but by no more than its own
    Query_time, started before the entry above it was written (an end-stamped log only moves forward).
    A MariaDB file whose long statements have ``# Time`` = ``SET timestamp`` + Query_time is end-stamped."""
    is_start = np.array(["MariaDB" in (version or "") for version in versions], dtype=bool)
    own = frame.select(
        "file", "query_time_s", "set_ts", at=pl.col("time_text_utc").dt.epoch("s"), own=pl.col("time_line").is_not_null(),
    ).filter(pl.col("own") & pl.col("at").is_not_null())
    if not own.height:
        return is_start
    steps = own.with_columns(back=(pl.col("at").shift(1).over("file") - pl.col("at")))
    earlier = steps.filter((pl.col("back") > 1) & (pl.col("back") <= pl.col("query_time_s") + 1))
    for f in earlier["file"].unique().to_list():
        is_start[f] = True
    long = own.filter(pl.col("set_ts").is_not_null() & (pl.col("query_time_s") >= 2)).group_by("file").agg(
        ahead=((pl.col("at") - pl.col("set_ts") - pl.col("query_time_s")).abs() <= 1).mean()
    )
    for f, ahead in long.iter_rows():
        if ahead is not None and ahead > 0.5 and f not in set(earlier["file"].to_list()):
            is_start[f] = False  # # Time = SET timestamp + Query_time: written at the end
    return is_start


def _inherit_time(frame: pl.DataFrame, file: np.ndarray) -> pl.DataFrame:
    """``written``: the entry's own # Time, else the last one above it in its file (null when that
    one was unreadable)."""
    has_time = frame["time_line"].is_not_null().to_numpy()
    last_time = np.where(has_time, np.arange(has_time.size, dtype=np.int32), -1)  # int32: half the memory to touch
    np.maximum.accumulate(last_time, out=last_time)
    if file.size and file[-1] != file[0]:  # not across files
        last_time[last_time < np.searchsorted(file, file)] = -1
    return frame.with_columns(
        written=frame["time_text_utc"].gather(_index(last_time)),
        own_subsecond=pl.col("time_line").is_not_null() & pl.col("time_text_subsecond").fill_null(False),
    )


def _set_timestamp_agreement(
    frame: pl.DataFrame, tz: str, set_is_start: np.ndarray, file: np.ndarray, warnings: _Warnings
) -> tuple[np.ndarray, np.ndarray]:
    """Per file, do ``# Time`` and ``SET timestamp`` (UTC epoch) tell the same time?

    Returns (bogus, offset_s) per file, with a warning in the files where they do not: ``offset_s``
    when zone-less # Time lines read in ``tz`` are off by a whole zone offset (to subtract: the
    server ran in another zone); ``bogus`` when off by more than any zone (SET timestamp is then not
    used). Both 0 when they agree or no entry has both."""
    n_files = set_is_start.size
    bogus, offset = np.zeros(n_files, dtype=bool), np.zeros(n_files, dtype=np.int64)
    has_both = (frame["written"].is_not_null() & frame["set_ts"].is_not_null()).to_numpy()
    if not has_both.any():
        return bogus, offset
    # a sample of a few thousand entries of each file tells the offset as well as all of them
    first_row = np.searchsorted(file, file)
    size = np.bincount(file, minlength=n_files)
    step = np.maximum(1, size // 4000)
    sampled = has_both & ((np.arange(file.size) - first_row) % step[file] == 0)
    sampled |= has_both & ~_any_per(file[sampled], n_files)[file]  # none sampled: all of them
    both = frame.select("written", "set_ts", "query_time_s", "time_text_zoned").with_columns(
        file=pl.Series(file), is_start=pl.Series(set_is_start[file])
    ).filter(pl.Series(sampled))
    lag = pl.when(pl.col("is_start")).then(pl.col("query_time_s").fill_null(0)).otherwise(pl.lit(0.0))
    gaps = both.group_by("file").agg(
        gap=(pl.col("written").dt.epoch("s") - pl.col("set_ts") - lag).median(),
        zoned=pl.col("time_text_zoned").fill_null(False).any(),
    )
    for f, gap, zoned in gaps.sort("file").iter_rows():
        if abs(gap) <= TZ_MISMATCH_S:
            continue
        if not zoned and abs(gap) <= MAX_ZONE_OFFSET_S:
            offset[f] = offset_s = int(round(gap / 900) * 900)
            sign, minutes = ("+" if offset_s >= 0 else "-"), abs(offset_s) // 60
            warnings.of_file[f].append(ParseWarning(None, (
                f"zone-less # Time lines read in {tz} are {gap / 3600:+.2f} h off the SET timestamp values (UTC): "
                f"the server ran at UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}, not {tz}; # Time lines were "
                "moved by that offset (pass --tz with the server's zone to avoid this guess)"
            )))
            continue
        bogus[f] = True
        warnings.of_file[f].append(ParseWarning(None, (
            f"SET timestamp values are {-gap / 3600:+.1f} h off the # Time lines, more than a time zone explains; "
            "SET timestamp is not used for times"
        )))
    return bogus, offset


def _server_notes(banner: dict[str, object]) -> list[str]:
    starts = banner["starts"]
    if not starts:
        return []
    versions = list(dict.fromkeys(banner["versions"]))
    where = ", ".join(map(str, starts[:5])) + ("..." if len(starts) > 5 else "")
    return [f"{len(starts)} server start banner(s) (lines {where}; version {', '.join(versions)}): "
            "the server (re)started or reopened the log; banners are not statements"]


def _rate_notes(entries: pl.DataFrame) -> dict[int, list[str]]:
    """Per file whose log is sampled (log_slow_rate_limit), the note saying so."""
    if "Log_slow_rate_limit" not in entries.columns:
        return {}
    rated = entries.filter(pl.col("Log_slow_rate_limit").is_not_null())
    if not rated.height:
        return {}
    # a log_slow_rate_limit line without log_slow_rate_type (Percona 5.5) has no such column
    kind = pl.col("Log_slow_rate_type") if "Log_slow_rate_type" in rated.columns else pl.lit(None, pl.String)
    limits: dict[int, list[tuple[object, object]]] = {}
    for f, rate_kind, limit in rated.select("file", kind.alias("kind"), "Log_slow_rate_limit").unique().rows():
        limits.setdefault(f, []).append((rate_kind, limit))
    notes = {}
    for f, pairs in limits.items():
        described = ", ".join(f"log_slow_rate_limit={limit} per {kind}" for kind, limit in sorted(pairs, key=str))
        notes[f] = [f"the log is sampled ({described}): only about 1 in N statements is written, so counts and totals "
                    "are a sample of the workload"]
    return notes


def _plan_node(
    nodes: pl.DataFrame, kept_entries: np.ndarray, n_entries: int, statement: pl.DataFrame, files: _Files
) -> pl.DataFrame:
    """plan_node rows (with their ``file``) of the statements kept; node_id counts the rows of each
    statement from 0."""
    stmt_of = np.full(n_entries, -1, dtype=np.int64)
    stmt_of[kept_entries] = np.arange(kept_entries.size)
    stmt = stmt_of[nodes["entry"].to_numpy()]
    keep = stmt >= 0
    if not keep.all():
        stmt, nodes = stmt[keep], nodes.filter(pl.Series(keep))
    if not stmt.size:
        return T.empty(T.PLAN_NODE).with_columns(file=pl.lit(0, pl.Int64)).clear()
    first = np.ones(stmt.size, dtype=bool)
    first[1:] = stmt[1:] != stmt[:-1]
    index = np.arange(stmt.size, dtype=np.int32)  # node_id's type
    node_id = index - np.maximum.accumulate(np.where(first, index, 0))
    file = statement["file"].to_numpy()[stmt]
    node = nodes.select(
        stmt_id=pl.Series(statement["stmt_id"].to_numpy()[stmt]),
        node_id=pl.Series(node_id),
        depth=pl.lit(0, pl.Int32),
        node_type="type",
        relation="table",
        index_name="key",
        est_rows="est_rows",
        actual_rows="actual_rows",
        filter="Extra",
        source=pl.Series(files.sources, dtype=pl.String).gather(pl.Series(file)),
        file=pl.Series(file, dtype=pl.Int64),
    )
    return node


SPEC = ParserSpec(
    kind="mysql-slowlog",
    description="MySQL / MariaDB / Percona Server slow query log (statements, MariaDB explain plans)",
    detect=detect,
    parse=parse,
    parse_bytes=parse_bytes,
    parse_batch=parse_batch,
)
