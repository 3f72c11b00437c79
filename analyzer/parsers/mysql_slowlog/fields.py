"""The header fields of an entry: ``# Query_time`` numbers, ``# User@Host``, the keyed ``# Key: value``
lines (read once per distinct text), the statement text, and their typing.

Sample header lines::

    # User@Host: root[root] @ localhost []
    # Thread_id: 8  Schema: sbtest  QC_hit: No
    # Query_time: 0.000290  Lock_time: 0.000093  Rows_sent: 1  Rows_examined: 1
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.native.lazy import np
from dbdiag.native.slowlog_lines import (
    ADMIN,
    ATTR,
    ATTR_START,
    Kernel,
    LINE_GROUPS,
    TIME,
    USER_HOST,
    first_in_entry,
    group_starts,
    index_dtype,
)
from dbdiag.parsers.mysql_slowlog.columns import distinct_codes, gather_index, join_lines, nulls, take
from dbdiag.parsers.mysql_slowlog.files import PieceWarning


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
USER_HOST_RE = (
    r"^\s*(?P<priv>[^\[@]*?)\s*(?:\[(?P<login>[^\]]*)\])?\s*@\s*(?P<host>[^\s\[]*)\s*"
    r"(?:\[(?P<ip>[^\]]*)\])?(?:\s+Id:\s*(?P<id>\d+))?"
)
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


def query_time_layout(line: str) -> tuple[str, dict[str, int]] | None:
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


def query_time_columns(
    lines: pl.Series, position: np.ndarray, first_line: int, kernel: Kernel | None, files: np.ndarray
) -> tuple[dict[str, pl.Series], pl.DataFrame, list[PieceWarning]]:
    """Query_time, Lock_time, Rows_sent, Rows_examined as numbers (with a warning per unreadable
    value); what follows them (Percona Rows_affected, MySQL 8 log_slow_extra) is read by
    key as text on the lines that have it: a frame of ``entry`` and the ``qt_*`` keys found.
    ``position``: each entry's Query_time line, or -1.

    The kernel reads the plain lines (the four numbers and nothing after them); the rest are split:
    a server writes every such line with the same spacing, so the layout is learnt from the first
    line and checked on each (a split is much cheaper than a regex); other lines use the regex."""
    present = np.flatnonzero(position >= 0)
    layout = query_time_layout(lines[int(position[present[0]])]) if present.size else None
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
    """``query_time_columns`` read with polars expressions."""
    text = take(lines, position).alias("t")
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
        frame = pl.DataFrame({f: nulls(f, pl.String, text.len()) for f in QT_FIELDS}).with_columns(
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


def header_table_of(texts: pl.Series) -> pl.DataFrame:
    """The fields of every distinct header line of the log and what ``HEADER_TYPED`` works out from
    them, and a last all-null row (for entries without a line of a group: a gather without null indices)."""
    # one chunk: a gather from several chunks copies the bytes of every string
    return pl.DataFrame({"t": texts.extend_constant(None, 1).rechunk()}).with_columns(**HEADER_EXPRS).with_columns(**HEADER_TYPED)


def header_columns_of(codes: dict[int, np.ndarray], table: pl.DataFrame, group_of_text: np.ndarray) -> dict[str, pl.Series]:
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


def header_codes(
    lines: pl.Series, kind: np.ndarray, prefix: np.ndarray, marks: dict[str, np.ndarray], n_entries: int
) -> tuple[np.ndarray, pl.Series, np.ndarray]:
    """The header lines of ``LINE_GROUPS`` put in groups and their texts numbered (first seen first):
    (for every group and entry the number of the text of the entry's first line of the group, or the
    number of texts when it has none, as polars row numbers; the texts; the group of each text).
    What ``Kernel.header_codes`` computes in one pass."""
    names = list(LINE_GROUPS)
    header = np.flatnonzero(((kind == ATTR) | (kind == ATTR_START)) & ~marks["is_sql"])
    header_prefix = prefix[header]
    group = np.full(len(kind), -1, dtype=np.int8)
    starts, group_of_start = group_starts()
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
    to_distinct, texts = distinct_codes(lines.gather(at))
    group_of_text = np.empty(texts.len(), dtype=np.int8)
    group_of_text[to_distinct] = group[at]
    line_group, owner = group[at], marks["entry"][at]
    first = np.full((len(names), n_entries), texts.len(), dtype=index_dtype())
    for code in range(len(names)):
        mine = np.flatnonzero(line_group == code)
        if mine.size:
            position = first_in_entry(mine, owner, n_entries)  # a row of `at` for each entry, or -1
            first[code] = np.where(position < 0, texts.len(), to_distinct[np.maximum(position, 0)])
    return first, texts, group_of_text


def flavour_evidence(table: pl.DataFrame, rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
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


def statement_texts(lines: pl.Series, kind: np.ndarray, owner: np.ndarray, at: np.ndarray) -> pl.DataFrame:
    """Each entry's statement: its statement lines (``at``, of entries ``owner``) joined, the server's
    closing ";" removed."""
    text = lines.gather(gather_index(at))
    admin = np.flatnonzero(kind[at] == ADMIN)
    if admin.size:  # "# administrator command: Quit;" -> "administrator command: Quit" (as pt-query-digest)
        text = text.scatter(admin, text.gather(admin).str.slice(2))
    joined = join_lines(pl.DataFrame({"entry": owner, "text": text}), "text", "\n")
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


def typed_entries(entries: pl.DataFrame) -> pl.DataFrame:
    """Row-local work on the entries: flags and ids (times are read afterwards)."""
    kept = [c for c in (*TYPED_KEPT, *[parsed for _, _, parsed, _ in NUMBER_FIELDS]) if c in entries.columns]
    return entries.select(*kept, **_typed_exprs(frozenset(entries.columns)))
