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

Times. ``# Time:`` is when the entry was written (the end). Without a zone it is server local time,
read in ``ctx.tz`` (said in a note); ``2016-07-20T18:13:25.698433Z`` and ``+08:00`` are exact.
``SET timestamp`` is whole UTC seconds: the statement start for MySQL 8.0+ ("the slow log always
logs the query start time"), but the write time, like ``# Time``, for MySQL <= 5.7, Percona <= 5.7
and MariaDB ("now we always write current timestamp"); the banner's version decides, else
statements of 2 s or more show it. ``log_slow_extra`` ``Start:``/``End:`` are exact and win.
end_ts = End, else the entry's ``# Time``, else SET timestamp (plus Query_time if it is the start),
else the last ``# Time`` above (the server writes one only when the second changed, so entries
without one take the previous entry's, as pt-query-digest does); start_ts = Start, else SET
timestamp when it is the start (unless ``# Time`` has microseconds), else end_ts - Query_time.
When zone-less ``# Time`` lines disagree with SET timestamp by a whole zone offset, ``--tz`` is not
the server's zone: the ``# Time`` lines are moved by that offset, with a warning. The database
carries over the same way: the server writes ``use`` only when it changed.

Speed (hundreds of MB): the text is cut into entry-aligned pieces parsed on two threads; each piece
is read as a column of lines by polars' CSV reader; line kinds come from the 4-byte prefixes polars
keeps inline in its string views (numpy, no pass over the text); header lines that repeat (User@Host,
Thread_id, flags, use, SET timestamp, explain rows) are parsed once per distinct text, and a plan is
joined once per distinct pair of explain lines (entries share its bytes); Query_time lines are split at
positions learnt from the first one. No Python loop runs per line or per entry.
"""

from __future__ import annotations

import functools
import importlib
import io
import re
import sys
from concurrent.futures import ThreadPoolExecutor

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.mpstat_text import cap_warnings, check_tz, local_to_utc, zone_note


class _OnFirstUse:
    """A module imported when an attribute is first read: numpy and pyarrow take a tenth of a second
    to import, which runs without a MySQL slow log need not pay."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str):
        module = sys.modules.get(self._name) or importlib.import_module(self._name)  # a dict lookup once imported
        return getattr(module, attr)


np = _OnFirstUse("numpy")
pa = _OnFirstUse("pyarrow")

MAX_WARNINGS = 50
CHUNK_CHARS = 16 * 1024 * 1024  # entry-aligned pieces: bounds the per-line memory (peak RSS)
WORKERS = 2  # pieces parsed at once
TZ_MISMATCH_S = 30 * 60  # # Time vs SET timestamp differing by more than this means --tz is wrong
MAX_ZONE_OFFSET_S = 14 * 3600  # the widest UTC offset in use; a larger gap is not a zone problem

# Line kinds.
SQL, BLANK, TIME, USER_HOST, QUERY_TIME, ATTR_START, ATTR, EXPLAIN, ADMIN, USE, SET_META, SERVER = range(12)
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
DETECT_QT_RE = re.compile(r"^# Query_time: [\d.]+\s+Lock_time: [\d.]+", re.M)
DETECT_QT_BARE_RE = re.compile(r"^# Query_time: [\d.]+", re.M)
DETECT_UH_RE = re.compile(r"^# (?:Time: .*)?User@Host: .*@", re.M)
DETECT_TIME_RE = re.compile(r"^# Time: (?:\d{6}\s+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T)", re.M)
DETECT_SERVER_RE = re.compile(r"^.*(?:mysqld|mariadbd), Version: .*started with:\s*$", re.M)
DETECT_GENERAL_LOG_RE = re.compile(
    r"^(?:\d{6}\s+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\S+|\t)\s+\d+ (?:Query|Connect|Quit|Init DB)\b", re.M
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


def _chunk_bounds(text: str, size: int) -> list[tuple[int, int]]:
    """Cut ``text`` into pieces of about ``size`` characters, each starting at an entry start."""
    bounds, start = [], 0
    while len(text) - start > size + size // 2:
        cut = _next_entry_start(text, start + size)
        if cut is None:
            break
        bounds.append((start, cut))
        start = cut
    bounds.append((start, len(text)))
    return bounds


def _next_entry_start(text: str, after: int) -> int | None:
    at = text.find("\n# User@Host: ", after)
    if at < 0:
        at = text.find("\n# Time: ", after)
    if at < 0:
        return None
    line_start = at + 1
    previous = text.rfind("\n", 0, at) + 1
    # a User@Host right after "# Time:" belongs to that Time line's entry
    return previous if text.startswith("# Time:", previous) else line_start


def _read_lines(chunk: str) -> pl.Series:
    """The chunk's lines as one string column: CRLF ends removed, blank lines kept (line numbers stay exact)."""
    data = chunk.encode("utf-8", "backslashreplace")
    separator = next((chr(c) for c in (0, *range(1, 32), 127) if data.find(bytes([c])) < 0), None)
    if separator is None:  # every control byte occurs: binary garbage, split the slow way
        lines = chunk.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        return pl.Series("t", [ln.removesuffix("\r") for ln in lines], dtype=pl.String)
    frame = pl.read_csv(
        io.BytesIO(data), has_header=False, separator=separator, quote_char=None,
        new_columns=["t"], schema={"t": pl.String},
    )
    # the reader returns several chunks; gathers on one chunk are much faster
    return frame["t"].fill_null("").rechunk()


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
# fields an entry takes from its first line of the group). The last three are found by kind instead.
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
OUTPUT_COLUMNS = tuple(dict.fromkeys(c for _, columns in LINE_GROUPS.values() for c in columns))
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
    around = around[kind[around] == SQL]
    if around.size:
        kind[around[lines.gather(around).str.contains(SERVER_HEADER_RE).to_numpy()]] = SERVER
    return kind


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


def _mark(kind: np.ndarray) -> dict[str, np.ndarray]:
    """Entry numbers (0 = lines before the first header) and the role of each line in its entry."""
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
    return {
        "entry": entry, "starts": starts, "is_sql": is_sql,
        "use_meta": use & ~plain_before & ~set_before, "set_meta": set_meta & ~plain_before,
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
    return pl.Series(name, dtype=dtype).extend_constant(None, n)


def _take(series: pl.Series, position: np.ndarray) -> pl.Series:
    """``series[position]`` with -1 giving null."""
    index = pl.Series(position)
    return series.gather(index.set(index < 0, None))


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


def _by_distinct(values: pl.Series, exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """``exprs`` (over ``pl.col(values.name)``) for every row of ``values``, evaluated once per distinct
    value (logs repeat these lines a lot) and once for null; values are matched by their 64-bit hash."""
    present = np.flatnonzero(values.is_not_null().to_numpy())  # often few: # Time is written once a second
    code, distinct = _distinct_codes(values.gather(present))
    null_first = pl.concat([pl.Series(values.name, [None], dtype=values.dtype), distinct])
    table = pl.DataFrame({values.name: null_first}).with_columns(**exprs).drop(values.name)
    index = np.zeros(values.len(), dtype=np.int64)
    index[present] = code + 1
    return table.select(pl.all().gather(index))


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
    """(for each row the number of its distinct value, the distinct values in first-seen order);
    values are matched by their 64-bit hash."""
    keyed = pl.DataFrame({"_h": values.hash()})
    firsts = keyed.with_row_index("_r").unique(subset="_h", keep="first", maintain_order=True)
    numbered = firsts.select("_h", _d=pl.int_range(pl.len(), dtype=pl.Int64))
    code = keyed.join(numbered, on="_h", how="left", maintain_order="left")["_d"].to_numpy()
    return code, values.gather(firsts["_r"])


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


def _align(frame: pl.DataFrame, n_entries: int) -> pl.DataFrame:
    """Rows of ``frame`` (one per local ``entry`` at most) placed at their entry: ``n_entries`` rows."""
    position = np.full(n_entries, -1, dtype=np.int64)
    position[frame["entry"].to_numpy()] = np.arange(frame.height)
    index = pl.Series(position)
    return frame.drop("entry").select(pl.all().gather(index.set(index < 0, None)))


# ---- per chunk ---------------------------------------------------------------------------------


def _parse_chunk(text: str, start: int, end: int, is_first: bool) -> dict[str, object]:
    """Entries of ``text[start:end]`` (which starts at an entry, or is the file's beginning) with local
    entry numbers: 0 holds what comes before the first header, the rest count from 1."""
    lines = _read_lines(text[start:end])
    length, prefix = _heads(lines)
    kind = _classify(lines, length, prefix)
    marks = _mark(kind)
    entry, starts = marks["entry"], marks["starts"]
    n_entries = int(entry[-1]) + 1 if entry.size else 1

    line_of = np.full(n_entries, -1, dtype=np.int64)
    line_of[entry[starts]] = starts
    head = np.flatnonzero((entry == 0) & (kind != BLANK) & (kind != SERVER))
    if head.size and is_first:
        line_of[0] = head[0]
    first_line = 1
    line_number = pl.Series(np.where(line_of < 0, -1, line_of + first_line))

    columns: dict[str, pl.Series] = {
        "entry": pl.Series(np.arange(n_entries, dtype=np.int64)),
        "line": line_number.set(line_number < 0, None),
    }
    pick = lambda mask: _first_in_entry(np.flatnonzero(mask), entry, n_entries)  # noqa: E731
    columns |= _times(lines, kind, pick, first_line)
    columns |= _query_time(lines, pick(kind == QUERY_TIME), first_line)
    fields, markers = _header_fields(lines, kind, prefix, entry, marks, n_entries)
    columns |= fields
    entries = pl.DataFrame(columns)
    sql = _sql(lines, kind, entry, marks["is_sql"])
    plans, nodes = _explain(lines, kind, entry, marks["is_sql"], n_entries)
    entries = pl.concat([entries, _align(sql, n_entries), plans], how="horizontal")
    if line_of[0] < 0:  # nothing before the first header
        entries = entries.slice(1)
    server = np.flatnonzero(kind == SERVER)
    markers["mariadb"] = markers.get("mariadb", False) or bool((kind == EXPLAIN).any())
    markers["flag_lines"] = bool(entries["Full_scan"].is_not_null().any())
    typed, warnings = _typed(entries)
    return {
        "entries": typed,
        "n_entries": n_entries,
        "n_lines": lines.len(),
        "warnings": warnings,
        "plan_nodes": nodes,
        "server": pl.DataFrame({"line": server + first_line, "t": lines.gather(server)}),
        "markers": pl.DataFrame({k: [v] for k, v in markers.items()}),
    }


def _times(lines: pl.Series, kind: np.ndarray, pick, first_line: int) -> dict[str, pl.Series]:
    position = pick(kind == TIME)
    text = _take(lines, position).str.slice(len("# Time:"))
    text = text.str.split_exact(" # User@Host:", 1).struct.field("field_0").str.strip_chars()
    line = pl.Series(np.where(position < 0, -1, position + first_line))
    return {"time_line": line.set(line < 0, None), "time_text": text.alias("time_text")}


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


def _query_time(lines: pl.Series, position: np.ndarray, first_line: int) -> dict[str, pl.Series]:
    """Query_time, Lock_time, Rows_sent, Rows_examined; what follows them (Percona Rows_affected,
    MySQL 8 log_slow_extra) is read by key on the lines that have it.

    A server writes every such line with the same spacing, so the layout is learnt from the first
    line and checked on each (a split is much cheaper than a regex); other lines use the regex."""
    text = _take(lines, position).alias("t")
    t = pl.col("t")
    present = text.drop_nulls()
    layout = _query_time_layout(present[0]) if present.len() else None
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
    extras = extras.select(**{f"qt_{k}": VALUE_EXPRS[k] for k in keys})
    position_extra = np.full(len(position), -1, dtype=np.int64)
    position_extra[extra_at] = np.arange(extra_at.size)
    nulls = _nulls("", pl.String, len(position))
    for key in QT_EXTRA_KEYS:
        column = f"qt_{key}"
        out[column] = (
            _take(extras[column], position_extra) if column in extras.columns else nulls.alias(column)
        )
    line = pl.Series(np.where(position < 0, -1, position + first_line))
    return out | {"qt_line": line.set(line < 0, None)}


def _header_fields(
    lines: pl.Series, kind: np.ndarray, prefix: np.ndarray, entry: np.ndarray,
    marks: dict[str, np.ndarray], n_entries: int,
) -> tuple[dict[str, pl.Series], dict[str, bool]]:
    """Fields of the header lines that repeat a lot (User@Host, Thread_id, Rows_affected, flags, use,
    SET timestamp...): parsed once per distinct text, then each entry takes the fields of its first
    line of each group."""
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
    # a last all-null row: entries without a line of a group take it (a gather without null indices)
    null_row = texts.len()
    distinct = pl.DataFrame({"t": texts.extend_constant(None, 1)}).with_columns(**HEADER_EXPRS)

    line_group, owner = group[at], entry[at]
    rows: dict[str, np.ndarray] = {}
    gathers: list[tuple[str, pl.Expr]] = []
    for code, (name, (_, columns)) in enumerate(LINE_GROUPS.items()):
        mine = np.flatnonzero(line_group == code)
        if not mine.size:
            continue
        rows[name] = to_distinct[mine]
        position = _first_in_entry(mine, owner, n_entries)  # a row of `at` for each entry, or -1
        index = pl.Series(np.where(position < 0, null_row, to_distinct[np.maximum(position, 0)]))
        gathers += [(column, pl.col(column).gather(index).alias(f"{column}#{code}")) for column in columns]
    taken = distinct.select(expr for _, expr in gathers)
    found: dict[str, list[pl.Series]] = {}
    for (column, _), series in zip(gathers, taken.iter_columns()):
        found.setdefault(column, []).append(series)
    out = {}
    for column in OUTPUT_COLUMNS:
        series = found.get(column)
        out[column] = (
            _nulls(column, HEADER_DTYPES.get(column, pl.String), n_entries) if not series
            else series[0] if len(series) == 1
            else pl.DataFrame({str(i): s for i, s in enumerate(series)}).select(pl.coalesce(pl.all()))[:, 0]
        ).alias(column)
    return out, _flavour(distinct, rows, bool((header_prefix == _code("#   ")).any()))


HEADER_DTYPES = {"set_ts": pl.Int64}


@functools.cache
def _group_starts() -> tuple[np.ndarray, np.ndarray]:
    """The four-byte starts of the keyed header lines, sorted, and the number of each one's group."""
    pairs = sorted((_code(start), code) for code, (starts, _) in enumerate(LINE_GROUPS.values()) for start in starts)
    return np.array([p[0] for p in pairs], dtype=np.uint32), np.array([p[1] for p in pairs], dtype=np.int8)


def _flavour(distinct: pl.DataFrame, rows: dict[str, np.ndarray], innodb_lines: bool) -> dict[str, bool]:
    """Which server wrote the lines: MariaDB's Thread_id line has QC_hit; Percona's fields and lines
    (``#   InnoDB_IO_r_ops: ...``) give it away."""
    def lines_of(name: str) -> pl.DataFrame:
        return distinct[np.unique(rows[name])] if name in rows else distinct.clear()

    thread = lines_of("thread")
    qc = thread["QC_hit"].is_not_null()
    percona = bool((~qc).any())  # the Percona patch's "# Thread_id: N  Schema: db" lines
    percona |= bool(thread["Last_errno"].is_not_null().any()) or bool(rows.keys() & {"schema", "trx", "rate"})
    percona |= bool(lines_of("flags")["t"].str.starts_with("# QC_Hit:").any()) or innodb_lines
    return {"mariadb": bool(qc.any()), "percona": percona}


def _sql(lines: pl.Series, kind: np.ndarray, entry: np.ndarray, is_sql: np.ndarray) -> pl.DataFrame:
    at = np.flatnonzero(is_sql)
    text = lines.gather(at)
    admin = np.flatnonzero(kind[at] == ADMIN)
    if admin.size:  # "# administrator command: Quit;" -> "administrator command: Quit" (as pt-query-digest)
        text = text.scatter(admin, text.gather(admin).str.slice(2))
    joined = _join_lines(pl.DataFrame({"entry": entry[at], "text": text}), "text", "\n")
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


def _explain(
    lines: pl.Series, kind: np.ndarray, entry: np.ndarray, is_sql: np.ndarray, n_entries: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """MariaDB ``# explain:`` rows -> (per entry: plan, plan_signature, index_names, plan_full_scan;
    plan nodes: entry and the cells of each data row, found through the entry's header row)."""
    plan_schema = {
        "plan": pl.String, "plan_signature": pl.String, "index_names": pl.String, "plan_full_scan": pl.Boolean,
    }
    node_schema = {"entry": pl.Int64, **{c: pl.String for c in EXPLAIN_COLUMNS}, "sig": pl.String}
    at = np.flatnonzero((kind == EXPLAIN) & ~is_sql)
    if not at.size:
        return pl.DataFrame([_nulls(c, t, n_entries) for c, t in plan_schema.items()]), pl.DataFrame(schema=node_schema)
    owner = entry[at]
    # explain lines repeat a lot: every step below works on the distinct lines, rows only carry a code
    code, distinct = _distinct_codes(lines.gather(at))
    body = distinct.str.strip_prefix("# explain: ")
    is_head = (body.str.starts_with("id\t") | body.str.starts_with("id ")).to_numpy()[code]
    # each data row belongs to the nearest header row above it in the same entry
    header_row = np.maximum.accumulate(np.where(is_head, np.arange(at.size), -1))
    data = ~is_head & (header_row >= 0)
    data &= owner[np.maximum(header_row, 0)] == owner
    head_codes = np.unique(code[is_head])
    heads = body.gather(head_codes)
    header_of_code = np.full(distinct.len(), -1, dtype=np.int64)
    parts = []
    for number, header in enumerate(heads.unique().to_list()):  # one or two distinct headers per file
        header_of_code[head_codes[(heads == header).to_numpy()]] = number
        mine = np.flatnonzero(data & (header_of_code[code[np.maximum(header_row, 0)]] == number))
        cells = pl.DataFrame({"body": body}).select(**_cell_exprs(header))
        parts.append(pl.concat([
            pl.DataFrame({"row": mine, "entry": owner[mine]}), cells.select(pl.all().gather(code[mine]))
        ], how="horizontal"))
    nodes = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema={"row": pl.Int64, **node_schema})
    if len(parts) > 1:
        nodes = nodes.sort("row")
    nodes = nodes.drop("row")

    plan = _join_coded(owner, code, body, "plan", "\n")
    named = nodes.filter(pl.col("table").is_not_null())
    signature = _join_lines(named.select("entry", plan_signature="sig"), "plan_signature", "|")
    keys = named.filter(pl.col("key").is_not_null()).select("entry", index_names="key")
    full = np.zeros(n_entries, dtype=bool)
    full[named.filter(pl.col("type") == "ALL")["entry"].to_numpy()] = True
    per_entry = pl.concat([
        _align(plan, n_entries), _align(signature, n_entries),
        _align(_join_lines(keys, "index_names", ",", distinct=True), n_entries),
        pl.DataFrame({"plan_full_scan": full}),
    ], how="horizontal")
    return per_entry, nodes


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
    key = exprs["key"]
    exprs["sig"] = (
        exprs["table"] + ":" + exprs["type"].fill_null("NULL")
        + pl.when(key.is_not_null()).then("(" + key + ")").otherwise(pl.lit(""))
    )
    return exprs


# ---- whole file ---------------------------------------------------------------------------------


def parse(text: str, ctx: ParseContext) -> ParseResult:
    text = text.removeprefix("\ufeff")
    if not text or text.isspace():
        raise ParseError("empty file")
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    notes: list[str] = []
    if "\r\n" in text[:65536]:
        notes.append("CRLF line ends (file passed through Windows); read as plain lines")

    jobs = [(text, start, end, index == 0) for index, (start, end) in enumerate(_chunk_bounds(text, CHUNK_CHARS))]
    if len(jobs) == 1:
        pieces = [_parse_chunk(*jobs[0])]
    else:
        with ThreadPoolExecutor(max_workers=WORKERS) as pool:  # polars and numpy release the GIL
            pieces = list(pool.map(lambda job: _parse_chunk(*job), jobs))
    # pieces number their entries and lines from 0; shift them by what came before
    entry_bases = np.cumsum([0] + [p["n_entries"] for p in pieces])
    line_bases = np.cumsum([0] + [p["n_lines"] for p in pieces])
    line_columns = ("line", "qt_line", "time_line")
    entries = pl.concat([
        p["entries"].with_columns(pl.col("entry") + int(e), *[pl.col(c) + int(b) for c in line_columns])
        for p, e, b in zip(pieces, entry_bases, line_bases)
    ], how="vertical_relaxed", rechunk=True)  # one chunk: later steps would each copy mixed chunks again
    entries = pl.concat([entries, *_times_read(entries, tz)], how="horizontal").drop("qt_Start", "qt_End")
    plan_nodes = pl.concat([p["plan_nodes"].with_columns(pl.col("entry") + int(e)) for p, e in zip(pieces, entry_bases)])
    n_total = int(entry_bases[-1])
    server = pl.concat([p["server"].with_columns(pl.col("line") + int(b)) for p, b in zip(pieces, line_bases)])
    markers = pl.concat([p["markers"] for p in pieces], how="diagonal_relaxed")
    for piece, base in zip(pieces, line_bases):
        warnings += [ParseWarning(None if line is None else line + int(base), reason) for line, reason in piece["warnings"]]
    del pieces, jobs  # the pieces' tables are copied into ``entries``: let them go before the next copies

    if not (entries["entry"] > 0).any():
        raise ParseError("no slow-log entry found (no # Time, # User@Host or # Query_time header)")
    entries, entry_warnings = _keep_entries(entries)
    warnings += entry_warnings
    if not entries.height:
        raise ParseError(_nothing_reason(entry_warnings))
    engine = _engine(server, markers)
    statement, time_warnings, time_notes = _statement(entries, engine, tz, ctx.source, _version(server), markers)
    warnings += time_warnings
    notes += time_notes
    notes += _server_notes(server)
    notes += _rate_notes(entries)
    plan_node = _plan_node(plan_nodes, entries["entry"].to_numpy(), n_total, ctx.source)

    starts = statement["start_ts"].drop_nulls()
    ends = statement["end_ts"].drop_nulls()
    time_range = (starts.min(), ends.max()) if starts.len() and ends.len() else None
    return ParseResult(
        tables={T.STATEMENT: statement, T.PLAN_NODE: plan_node},
        records=statement.height,
        warnings=cap_warnings(warnings),
        notes=list(dict.fromkeys(notes)),
        time_range=time_range,
    )


def _keep_entries(entries: pl.DataFrame) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """Drop what is not a statement (cut headers, empty head fragments), with a warning each."""
    last_entry = entries["entry"].max()
    has_sql = pl.col("sql").is_not_null() & (pl.col("sql") != "")
    has_qt = pl.col("qt_line").is_not_null()
    is_head = pl.col("entry") == 0
    is_last = pl.col("entry") == last_entry
    warnings: list[ParseWarning] = []
    checks = [
        (is_head & has_sql, "the file starts inside an entry (no header above this line); kept without timings"),
        (~is_head & has_qt & ~has_sql & is_last, "the last entry ends after its header (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & is_last, "the last entry has neither # Query_time nor statement text (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & ~is_last, "entry has neither # Query_time nor statement text; skipped"),
        (~is_head & has_qt & ~has_sql & ~is_last, "entry has no statement text; kept without sql"),
        (~is_head & ~has_qt & has_sql, "entry has no # Query_time line; kept without timings"),
        (is_last & has_sql & ~pl.col("terminated").fill_null(True),
         "the last statement has no closing ';' (the server always writes one): the file may be cut; kept as is"),
    ]
    for condition, reason in checks:
        warnings += _warn_rows(entries.filter(condition), reason)
    keep = entries.select((is_head & has_sql) | (~is_head & (has_qt | has_sql) & ~(is_last & ~has_sql))).to_series()
    return (entries if keep.all(ignore_nulls=False) else entries.filter(keep)), warnings  # usually all: no copy


def _warn_rows(rows: pl.DataFrame, reason: str, line_column: str = "line") -> list[ParseWarning]:
    shown = [ParseWarning(line, reason) for line in rows[line_column].head(MAX_WARNINGS).to_list()]
    if rows.height > MAX_WARNINGS:
        shown.append(ParseWarning(None, f"{rows.height - MAX_WARNINGS} more entries like this: {reason}"))
    return shown


def _nothing_reason(warnings: list[ParseWarning]) -> str:
    if warnings:
        return f"no complete slow-log entry: {warnings[0].reason} (line {warnings[0].line})"
    return "no slow-log entry found (no # Time, # User@Host or # Query_time header)"


def _engine(server: pl.DataFrame, markers: pl.DataFrame) -> str:
    banner = " ".join(server["t"].to_list())
    if "MariaDB" in banner or "mariadbd" in banner or bool(markers["mariadb"].any()):
        return "mariadb"
    if "Percona" in banner or bool(markers["percona"].any()):
        return "percona"
    return "mysql"


def _number(text: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    return text.cast(dtype, strict=False)


def _version(server: pl.DataFrame) -> str | None:
    """The server version of the last start banner (``8.0.15-5``, ``10.11.19-MariaDB-0+deb12u1-log``)."""
    versions = server["t"].str.extract(r", Version: (\S+)").drop_nulls()
    return versions[-1] if versions.len() else None


def _flag(key: str) -> pl.Expr:
    return pl.when(pl.col(key) == "Yes").then(True).when(pl.col(key) == "No").then(False)


def _positive(key: str) -> pl.Expr:
    return _number(pl.col(key), pl.Int64) > 0


def _typed_exprs() -> dict[str, pl.Expr]:
    error_code = pl.coalesce(pl.col("Last_errno"), pl.col("qt_Errno"))
    trx = pl.col("InnoDB_trx_id")
    client = pl.col("Client").str.replace(r":\d+$", "")
    return {
        "rows_affected": _number(pl.coalesce(pl.col("qt_Rows_affected"), pl.col("Rows_affected")), pl.Int64),
        "client_host": pl.coalesce(pl.col("client_host"), pl.when(client != "").then(client)),
        # "use" in this entry, else Schema ("" = no database); entries with neither carry the last one
        "db_written": pl.coalesce(pl.col("use_db"), pl.col("Schema")),
        "conn_id": pl.coalesce(pl.col("uh_id"), pl.col("Thread_id"), pl.col("qt_Thread_id")),
        "txn_id": pl.when(trx.is_not_null() & (trx != "0") & (trx != "")).then(trx),  # 0 = no InnoDB transaction
        "full_scan": pl.when(pl.col("plan_full_scan").fill_null(False)).then(True).otherwise(_flag("Full_scan")),
        "full_join": _flag("Full_join"),
        "tmp_table": pl.coalesce(_flag("Tmp_table"), _positive("Tmp_tables"), _positive("qt_Created_tmp_tables")),
        "tmp_table_on_disk": pl.coalesce(
            _flag("Tmp_table_on_disk"), _positive("Tmp_disk_tables"), _positive("qt_Created_tmp_disk_tables")
        ),
        "filesort": pl.coalesce(
            _flag("Filesort"),
            (_number(pl.col("qt_Sort_scan_count"), pl.Int64) + _number(pl.col("qt_Sort_range_count"), pl.Int64)) > 0,
        ),
        "success": error_code.is_null() | (error_code == "0"),
        "error_code": error_code,
    }


TYPED_KEPT = (
    "entry", "line", "qt_line", "time_line", "time_text", "set_ts", "sql", "terminated", "plan", "plan_signature",
    "index_names", "Log_slow_rate_type", "Log_slow_rate_limit", "user", "qt_Start", "qt_End",
)
TYPED_EXPRS = _typed_exprs()


NUMBER_FIELDS = (  # text column, label in warnings, typed column, type
    ("qt_text", "Query_time", "query_time_s", pl.Float64),
    ("lock_text", "Lock_time", "lock_time_s", pl.Float64),
    ("rows_sent_text", "Rows_sent", "rows_sent", pl.Int64),
    ("rows_examined_text", "Rows_examined", "rows_examined", pl.Int64),
)


def _typed(entries: pl.DataFrame) -> tuple[pl.DataFrame, list[tuple[int, str]]]:
    """Row-local work on one piece's entries: numbers and flags (times are read for the whole file)."""
    warnings: list[tuple[int, str]] = []
    numbers = entries.select(
        "qt_line", *[text for text, *_ in NUMBER_FIELDS],
        **{parsed: _number(pl.col(text), dtype) for text, _, parsed, dtype in NUMBER_FIELDS},
    )
    unreadable = numbers.select(**{
        parsed: (pl.col(parsed).is_null() & pl.col(text).is_not_null() & (pl.col(text) != "")).sum()
        for text, _, parsed, _ in NUMBER_FIELDS
    }).row(0, named=True)
    for column, label, parsed, _ in NUMBER_FIELDS:
        if not unreadable[parsed]:
            continue
        bad = (numbers[parsed].is_null() & numbers[column].is_not_null() & (numbers[column] != "")).to_numpy()
        rows = np.flatnonzero(bad)[:MAX_WARNINGS]
        for line, value in zip(numbers["qt_line"].gather(rows).to_list(), numbers[column].gather(rows).to_list()):
            warnings.append((line, f"{label} {value!r} is not a number (server overflow bug?); left empty"))
        if unreadable[parsed] > MAX_WARNINGS:
            warnings.append((None, f"{unreadable[parsed] - MAX_WARNINGS} more unreadable {label} values"))
    typed = entries.select(*TYPED_KEPT, **TYPED_EXPRS)
    return pl.concat([typed, numbers.select(parsed for _, _, parsed, _ in NUMBER_FIELDS)], how="horizontal"), warnings


def _times_read(entries: pl.DataFrame, tz: str) -> list[pl.DataFrame]:
    """``# Time``, ``Start:`` and ``End:`` texts read (``*_utc``; not yet inherited), once per distinct text."""
    times = [_by_distinct(entries["time_text"], _parse_time_text("time_text", tz))]
    for column in ("qt_Start", "qt_End"):
        if entries[column].null_count() < entries.height:
            times.append(_by_distinct(entries[column], _parse_time_text(column, tz)).select(f"{column}_utc"))
        else:
            times.append(pl.DataFrame([_nulls(f"{column}_utc", T.UTC_TIME, entries.height)]))
    return times


def _statement(
    entries: pl.DataFrame, engine: str, tz: str, source: str, version: str | None, markers: pl.DataFrame
) -> tuple[pl.DataFrame, list[ParseWarning], list[str]]:
    """The statement table: times inherited and combined, the database carried over, flags completed."""
    times, warnings, notes = _timestamps(
        entries.select("time_line", "time_text", "time_text_utc", "time_text_zoned", "time_text_subsecond",
                       "set_ts", "query_time_s", "qt_Start_utc", "qt_End_utc"), tz, version
    )
    db = pl.col("db_written").forward_fill()
    flags = []
    if engine == "mariadb" and bool(markers["flag_lines"].any()):
        # MariaDB (log_slow_verbosity=query_plan) writes the Full_scan/Filesort lines only when a flag is Yes
        flags = [pl.col("full_scan", "full_join", "tmp_table", "tmp_table_on_disk", "filesort").fill_null(False)]
    statement = entries.with_columns(
        *flags,
        *times,
        stmt_id=pl.int_range(pl.len(), dtype=pl.Int64),
        engine=pl.lit(engine),
        db=pl.when(db != "").then(db),
        source=pl.lit(source),
    )
    return T.conform(T.STATEMENT, statement), warnings, notes


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


def _timestamps(frame: pl.DataFrame, tz: str, version: str | None) -> tuple[pl.DataFrame, list[ParseWarning], list[str]]:
    """start_ts and end_ts of every entry (see the module docstring for the order of preference)."""
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    set_is_start = _set_timestamp_is_start(frame, version)
    bad = frame.select("time_line", "time_text", "time_text_utc").filter(
        pl.col("time_line").is_not_null() & pl.col("time_text_utc").is_null()
    )
    for line, value in bad.select("time_line", "time_text").head(MAX_WARNINGS).iter_rows():
        warnings.append(ParseWarning(line, f"unreadable # Time {value!r}; entries up to the next # Time have no time from it"))
    if bad.height > MAX_WARNINGS:
        warnings.append(ParseWarning(None, f"{bad.height - MAX_WARNINGS} more unreadable # Time lines"))

    has_time = pl.col("time_line").is_not_null()
    frame = _inherit_time(frame)
    agreement, offset_s, agreement_warnings = _set_timestamp_agreement(frame, tz, set_is_start)
    warnings += agreement_warnings
    if offset_s:  # zone-less # Time lines were read in the wrong zone: move them onto SET timestamp's UTC
        shifted = pl.col("time_text_utc") - pl.duration(seconds=offset_s)
        frame = _inherit_time(frame.with_columns(
            time_text_utc=pl.when(pl.col("time_text_zoned")).then(pl.col("time_text_utc")).otherwise(shifted)
        ))
    query_time = pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round(0).cast(pl.Int64, strict=False))
    set_ts = pl.from_epoch(pl.col("set_ts"), time_unit="s").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if agreement == "bogus":
        set_ts = pl.lit(None, T.UTC_TIME)
    own_time = pl.when(has_time).then(pl.col("written"))
    set_start = pl.when(~pl.col("own_subsecond")).then(set_ts) if set_is_start else pl.lit(None, T.UTC_TIME)
    frame = frame.with_columns(
        end_ts=pl.coalesce(
            pl.col("qt_End_utc"), own_time, (set_ts + query_time) if set_is_start else set_ts, pl.col("written")
        ).cast(T.UTC_TIME)
    ).with_columns(
        start_ts=pl.coalesce(pl.col("qt_Start_utc"), set_start, pl.col("end_ts") - query_time).cast(T.UTC_TIME)
    )
    zone_less, inherited, timeless = frame.select(
        a=(has_time & ~pl.col("time_text_zoned").fill_null(True)).sum(),
        b=(~has_time & pl.col("written").is_not_null()).sum(),
        c=pl.col("end_ts").is_null().sum(),
    ).row(0)
    if zone_less:
        notes.append(zone_note(tz))
    if inherited:
        notes.append(
            f"{inherited} entries have no # Time line of their own (the server writes one only when the second "
            "changes); they take the previous entry's time, as pt-query-digest does"
        )
    if timeless:
        notes.append(f"{timeless} statements have no time at all (no readable # Time, SET timestamp or Start/End)")
    return frame.select("start_ts", "end_ts"), warnings, notes


def _set_timestamp_is_start(frame: pl.DataFrame, version: str | None) -> bool:
    """Whether ``SET timestamp`` is the statement start (MySQL 8.0+) or the write time like ``# Time``
    (MySQL <= 5.7, Percona <= 5.7, MariaDB: "we always write current timestamp to the slow log").

    The banner's version decides; without one, statements of 2 s or more show it: their
    ``# Time`` minus ``SET timestamp`` is about Query_time when SET timestamp is the start."""
    if version:
        major = re.match(r"(\d+)\.", version)
        return bool(major) and int(major.group(1)) >= 8 and "MariaDB" not in version
    long = frame.select("time_line", "set_ts", "query_time_s", "time_text_utc").filter(
        pl.col("time_line").is_not_null() & pl.col("set_ts").is_not_null() & (pl.col("query_time_s") >= 2)
    ).select(gap=pl.col("time_text_utc").dt.epoch("s") - pl.col("set_ts"), query_time_s="query_time_s")
    if not long.height:
        return False
    behind = long.select((pl.col("gap") - pl.col("query_time_s")).abs().median()).item()
    level = long.select(pl.col("gap").abs().median()).item()
    return behind is not None and behind <= 1 < level


def _inherit_time(frame: pl.DataFrame) -> pl.DataFrame:
    """``written``: the entry's own # Time, else the last one above it (null when that one was unreadable)."""
    has_time = frame["time_line"].is_not_null().to_numpy()
    last_time = np.maximum.accumulate(np.where(has_time, np.arange(has_time.size), -1))
    index = pl.Series(last_time)
    return frame.with_columns(
        written=frame["time_text_utc"].gather(index.set(index < 0, None)),
        own_subsecond=pl.col("time_line").is_not_null() & pl.col("time_text_subsecond").fill_null(False),
    )


def _set_timestamp_agreement(frame: pl.DataFrame, tz: str, set_is_start: bool) -> tuple[str | None, int, list[ParseWarning]]:
    """Do ``# Time`` and ``SET timestamp`` (UTC epoch) tell the same time?

    Returns (verdict, offset_s, warnings). ``agree``; ``zone``: zone-less # Time lines read in
    ``tz`` are off by a whole zone offset (``offset_s``, to subtract), i.e. the server ran in another
    zone; ``bogus``: off by more than any zone, SET timestamp is then not used; None when no entry
    has both."""
    columns = frame.select("written", "set_ts", "query_time_s", "time_text_zoned")
    has_both = pl.col("written").is_not_null() & pl.col("set_ts").is_not_null()
    # a sample of a few thousand entries tells the offset as well as all of them
    both = columns.gather_every(max(1, frame.height // 4000)).filter(has_both)
    if not both.height:
        both = columns.filter(has_both)
    if not both.height:
        return None, 0, []
    lag = pl.col("query_time_s").fill_null(0) if set_is_start else pl.lit(0.0)
    gap = both.select((pl.col("written").dt.epoch("s") - pl.col("set_ts") - lag).median()).item()
    zoned = bool(both["time_text_zoned"].fill_null(False).any())
    if abs(gap) <= TZ_MISMATCH_S:
        return "agree", 0, []
    if not zoned and abs(gap) <= MAX_ZONE_OFFSET_S:
        offset_s = int(round(gap / 900) * 900)
        sign, minutes = ("+" if offset_s >= 0 else "-"), abs(offset_s) // 60
        return "zone", offset_s, [ParseWarning(None, (
            f"zone-less # Time lines read in {tz} are {gap / 3600:+.2f} h off the SET timestamp values (UTC): "
            f"the server ran at UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}, not {tz}; # Time lines were "
            "moved by that offset (pass --tz with the server's zone to avoid this guess)"
        ))]
    return "bogus", 0, [ParseWarning(None, (
        f"SET timestamp values are {-gap / 3600:+.1f} h off the # Time lines, more than a time zone explains; "
        "SET timestamp is not used for times"
    ))]


def _server_notes(server: pl.DataFrame) -> list[str]:
    banners = server.filter(pl.col("t").str.contains(", Version: ", literal=True))
    if not banners.height:
        return []
    versions = banners["t"].str.extract(r", Version: (\S+)").drop_nulls().unique(maintain_order=True).to_list()
    lines = banners["line"].head(5).to_list()
    where = ", ".join(map(str, lines)) + ("..." if banners.height > 5 else "")
    return [f"{banners.height} server start banner(s) (lines {where}; version {', '.join(versions)}): "
            "the server (re)started or reopened the log; banners are not statements"]


def _rate_notes(entries: pl.DataFrame) -> list[str]:
    rated = entries.filter(pl.col("Log_slow_rate_limit").is_not_null())
    if not rated.height:
        return []
    limits = rated.select("Log_slow_rate_type", "Log_slow_rate_limit").unique().rows()
    described = ", ".join(f"log_slow_rate_limit={limit} per {kind}" for kind, limit in sorted(limits, key=str))
    return [f"the log is sampled ({described}): only about 1 in N statements is written, so counts and totals "
            "are a sample of the workload"]


def _plan_node(nodes: pl.DataFrame, kept_entries: np.ndarray, n_entries: int, source: str) -> pl.DataFrame:
    """plan_node rows of the statements kept; node_id counts the rows of each statement from 0."""
    stmt_of = np.full(n_entries, -1, dtype=np.int64)
    stmt_of[kept_entries] = np.arange(kept_entries.size)
    stmt = stmt_of[nodes["entry"].to_numpy()]
    keep = stmt >= 0
    stmt = stmt[keep]
    if not stmt.size:
        return T.empty(T.PLAN_NODE)
    first = np.ones(stmt.size, dtype=bool)
    first[1:] = stmt[1:] != stmt[:-1]
    index = np.arange(stmt.size)
    node_id = index - np.maximum.accumulate(np.where(first, index, 0))
    node = nodes.filter(pl.Series(keep)).select(
        stmt_id=pl.Series(stmt),
        node_id=pl.Series(node_id, dtype=pl.Int32),
        depth=pl.lit(0, pl.Int32),
        node_type="type",
        relation="table",
        index_name="key",
        est_rows=pl.col("rows").cast(pl.Float64, strict=False),
        actual_rows=pl.col("r_rows").cast(pl.Float64, strict=False),
        filter="Extra",
        source=pl.lit(source),
    )
    return T.conform(T.PLAN_NODE, node)


SPEC = ParserSpec(
    kind="mysql-slowlog",
    description="MySQL / MariaDB / Percona Server slow query log (statements, MariaDB explain plans)",
    detect=detect,
    parse=parse,
)
