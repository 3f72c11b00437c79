"""MariaDB ``# explain:`` lines: the plan of an entry (text, signature, index names, full scan) and its
``plan_node`` rows, read once per distinct sequence of explain lines.

Sample::

    # explain: id\tselect_type\ttable\ttype\tpossible_keys\tkey\tkey_len\tref\trows\tr_rows\tfiltered\tr_filtered\tExtra
    # explain: 1\tSIMPLE\tsbtest3\tconst\tPRIMARY\tPRIMARY\t4\tconst\t1\tNULL\t100.00\tNULL\t
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import polars as pl

from dbdiag import tables as T
from dbdiag.native import slowlog_lines
from dbdiag.native.lazy import np
from dbdiag.parsers.mysql_slowlog.columns import align, gather_index, join_coded, join_lines
from dbdiag.parsers.mysql_slowlog.files import Files


EXPLAIN_COLUMNS = ("table", "type", "key", "rows", "r_rows", "Extra")


class _ExplainTexts(NamedTuple):
    """The distinct ``# explain:`` lines of a log, read once."""

    body: pl.Series  # each text without "# explain: "
    is_head: np.ndarray  # whether it is a header row ("id select_type table ...")
    header_of: np.ndarray  # for a header row, the number of its text among the distinct header rows; else -1
    cells: list[pl.DataFrame]  # for each distinct header row, the cells of every text read under it


def explain_heads(texts: pl.Series) -> np.ndarray:
    """Whether each ``# explain:`` text is a header row ("id select_type table ...")."""
    body = texts.str.strip_prefix("# explain: ")
    return (body.str.starts_with("id\t") | body.str.starts_with("id ")).to_numpy()


def explain_texts_of(distinct: pl.Series) -> _ExplainTexts:
    body = distinct.str.strip_prefix("# explain: ")
    is_head = explain_heads(distinct)
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


def explain_data(owner: np.ndarray, code: np.ndarray, is_head: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The data rows among ``# explain:`` rows given as their entries (``owner``, in order) and the
    numbers (``code``) of their texts (``is_head``: whether each text is a header row): (the data rows,
    the header row of each), a data row being read through the nearest header row above it in its entry."""
    head = is_head[code]
    header_row = np.maximum.accumulate(np.where(head, np.arange(owner.size), -1))
    data = ~head & (header_row >= 0)
    data &= owner[np.maximum(header_row, 0)] == owner
    rows = np.flatnonzero(data)
    return rows, header_row[rows]


def explain_cells(
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
            pl.DataFrame({"row": mine, "entry": owner[mine]}), cells.select(pl.col(columns).gather(gather_index(code[mine])))
        ], how="horizontal"))
    nodes = pl.concat(parts, how="vertical_relaxed") if parts else pl.DataFrame(schema=NODE_SCHEMA).select("row", "entry", *columns)
    return nodes.sort("row") if len(parts) > 1 else nodes


def _explain_nodes(
    owner: np.ndarray, code: np.ndarray, texts: _ExplainTexts, columns: tuple[str, ...] = tuple(NODE_SCHEMA)[2:]
) -> pl.DataFrame:
    """MariaDB ``# explain:`` rows -> one row per data row (``explain_cells``). The rows are given as
    their entries (``owner``, in order) and the numbers (``code``) of their texts in ``texts``."""
    rows, heads = explain_data(owner, code, texts.is_head)
    return explain_cells(owner[rows], code[rows], code[heads], texts, columns)


def plan_table(owner: np.ndarray, code: np.ndarray, texts: _ExplainTexts, n_entries: int) -> tuple[np.ndarray, pl.DataFrame]:
    """What entries show of their ``# explain:`` rows (given as for ``_explain_nodes``): (for each entry
    its plan number, or -1 without rows; per plan: plan, plan_signature, index_names, plan_full_scan).
    It depends only on an entry's explain lines: worked out once per distinct sequence of them (the
    pieces of a log give one entry per plan of theirs)."""
    if not owner.size:
        return np.full(n_entries, -1, dtype=np.int64), pl.DataFrame(schema=PLAN_SCHEMA)
    plan_of, reps, n_plans = plans_of(owner, code, n_entries)
    is_rep = np.zeros(n_entries, dtype=bool)
    is_rep[reps] = True
    rows = np.flatnonzero(is_rep[owner])
    plan_owner, plan_code = plan_of[owner[rows]], code[rows]
    plan = join_coded(plan_owner, plan_code, texts.body, "plan", "\n")
    named = _explain_nodes(plan_owner, plan_code, texts).filter(pl.col("table").is_not_null())
    signature = join_lines(named.select("entry", plan_signature="sig"), "plan_signature", "|")
    keys = named.filter(pl.col("key").is_not_null()).select("entry", index_names="key")
    full = np.zeros(n_plans, dtype=bool)
    full[named.filter(pl.col("type") == "ALL")["entry"].to_numpy()] = True
    return plan_of, pl.concat([
        align(plan, n_plans), align(signature, n_plans),
        align(join_lines(keys, "index_names", ",", distinct=True), n_plans),
        pl.DataFrame({"plan_full_scan": full}),
    ], how="horizontal")


def plans_of(owner: np.ndarray, code: np.ndarray, n_entries: int) -> tuple[np.ndarray, np.ndarray, int]:
    """(for each entry the number of its sequence of ``code`` rows, or -1 without rows; for each
    number an entry that has it; how many numbers). The kernel numbers the distinct sequences, so
    that entries with the same explain lines share their plan's work; without it each entry is its
    own number (same result, more work)."""
    kernel = slowlog_lines.line_scan()
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


def plan_node_table(
    nodes: pl.DataFrame, kept_entries: np.ndarray, n_entries: int, statement: pl.DataFrame, files: Files
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
