"""TiDB plans, private to the TiDB slow-query family (``tidb_slowlog``, ``tidb_cluster_slow_query``,
``tidb_dashboard``): the ``# Plan: tidb_decode_plan('...')`` payloads (base64 of snappy blocks) and
text plans made into ``plan_node`` rows and one plan text per statement.
"""

from __future__ import annotations

import cramjam
import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseResult, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS, cap_warnings, row_warnings


# Operator type codes of the encoded plan (pingcap/tidb util/plancodec/id.go). From v4.0 on the
# codes are fixed; v3.0 had HashLeftJoin/HashRightJoin at 17/18, shifting the codes after them.
MODERN_TYPES = dict(enumerate((
    "Selection", "Set", "Projection", "Aggregation", "StreamAgg", "HashAgg", "Show", "Join",
    "Union", "TableScan", "MemTableScan", "UnionScan", "IndexScan", "Sort", "TopN", "Limit",
    "HashJoin", "MergeJoin", "IndexJoin", "IndexMergeJoin", "IndexHashJoin", "Apply",
    "MaxOneRow", "Exists", "TableDual", "SelectLock", "Insert", "Update", "Delete",
    "IndexLookUp", "TableReader", "IndexReader", "Window", "TiKVSingleGather", "IndexMerge",
    "Point_Get", "ShowDDLJobs", "Batch_Point_Get", "ClusterMemTableReader", "DataSource",
    "LoadData", "TableSample", "TableFullScan", "TableRangeScan", "TableRowIDScan",
    "IndexFullScan", "IndexRangeScan", "ExchangeReceiver", "ExchangeSender", "CTEFullScan",
    "CTE", "CTETable", "PartitionUnion", "Shuffle", "ShuffleReceiver", "Foreign_Key_Check",
    "Foreign_Key_Cascade", "Expand", "ImportInto", "ScalarSubQuery",
), start=1))
LEGACY_TYPES = dict(enumerate((
    "Selection", "Set", "Projection", "Aggregation", "StreamAgg", "HashAgg", "Show", "Join",
    "Union", "TableScan", "MemTableScan", "UnionScan", "IndexScan", "Sort", "TopN", "Limit",
    "HashLeftJoin", "HashRightJoin", "MergeJoin", "IndexJoin", "IndexMergeJoin",
    "IndexHashJoin", "Apply", "MaxOneRow", "Exists", "TableDual", "SelectLock", "Insert",
    "Update", "Delete", "IndexLookUp", "TableReader", "IndexReader", "Window", "TableGather",
    "IndexMerge", "Point_Get", "ShowDDLJobs", "Batch_Point_Get",
), start=1))
STORE_TYPES = {"0": "tikv", "1": "tiflash", "2": "tidb", "3": "unspecified"}
PLAN_HEADER = ("id", "task", "estRows", "operator info", "actRows", "execution info", "memory", "disk")
# Bounds on what a plan may make us allocate: a 760-byte log whose plan row said depth 1,000,000,000
# asked polars for a 4 GiB indent; 2 M operator rows did the same. Real plans nest a few dozen deep,
# and TiDB discards an encoded plan over 1 MiB.
MAX_PLAN_DEPTH = 1_000
MAX_PLAN_OPERATORS = 10_000  # per statement; the rest are cut, with a warning
MAX_PLAN_TEXT_BYTES = 8 * 1024 * 1024  # decoded; a block announcing more is not decompressed


def snappy_length(block: bytes) -> int:
    """The decoded length a raw snappy block announces first (a little-endian base-128 varint).

    >>> snappy_length(bytes([0xFE, 0xFF, 0x7F]))
    2097150
    """
    length = 0
    for shift, byte in zip(range(0, 35, 7), block[:5]):
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
    return length


def snappy_text(block: bytes | None) -> str | None:
    """A raw snappy block -> text, or None when it is not one or announces over MAX_PLAN_TEXT_BYTES."""
    if block is None or snappy_length(block) > MAX_PLAN_TEXT_BYTES:
        return None
    try:
        return bytes(cramjam.snappy.decompress_raw(block)).decode("utf-8", "backslashreplace")
    except (ValueError, cramjam.DecompressionError):
        return None


def decode_plan_payloads(payloads: pl.Series) -> pl.Series:
    """``tidb_decode_plan`` payloads (base64 of a snappy block) -> the encoded plan rows, or null."""
    blocks = payloads.str.decode("base64", strict=False)
    # One decompression per plan: snappy has no vectorised form in polars.
    texts = pl.Series("encoded", [snappy_text(b) for b in blocks.to_list()], dtype=pl.String)
    return pl.when(texts.str.contains(r"^\d+\t\d+(?:_\d+)?\t")).then(texts).otherwise(None).alias("encoded")


def encoded_plan_rows(plans: pl.DataFrame) -> pl.DataFrame:
    """Decoded ``tidb_decode_plan`` rows -> one row per operator in plan order.

    ``plans`` has stmt_id, encoded (the decompressed text) and legacy_hint (bool: no
    Plan_digest in the entry). Output: stmt_id, depth, op_id, task, est_rows, operator_info,
    act_rows, exec_info, rest (the fields after task, tab-joined, for the rendered text).
    """
    rows = (
        plans.select("stmt_id", "legacy_hint", pl.col("encoded").str.strip_chars_end("\n").str.split("\n").alias("row"))
        .with_columns(operators=pl.col("row").list.len(), row=pl.col("row").list.head(MAX_PLAN_OPERATORS))
        .explode("row")
        .filter(pl.col("row") != "")
        .with_columns(pl.col("row").str.split("\t").alias("f"))
    )
    task_raw = pl.col("f").list.get(2, null_on_oob=True)
    code = pl.col("f").list.get(1, null_on_oob=True)
    rows = rows.with_columns(
        code=code.str.extract(r"^(\d+)").cast(pl.Int64, strict=False),
        num=code.str.extract(r"^\d+_(.+)$"),  # "8", or "8(Build)" with a join-side label
        task_raw=task_raw,
    ).with_columns(
        legacy=(
            (pl.col("task_raw") == "1").any()
            | (~pl.col("task_raw").str.starts_with("1_").any() & pl.col("legacy_hint").first())
        ).over("stmt_id"),
    )
    name = (
        pl.when(pl.col("legacy"))
        .then(pl.col("code").replace_strict(LEGACY_TYPES, default=None, return_dtype=pl.String))
        .otherwise(pl.col("code").replace_strict(MODERN_TYPES, default=None, return_dtype=pl.String))
        .fill_null(pl.concat_str(pl.lit("UnknownPlanID"), pl.col("code").cast(pl.String)))
    )
    store = pl.col("task_raw").str.extract(r"^1_(\d+)$")
    task = (
        pl.when(pl.col("task_raw") == "0").then(pl.lit("root"))
        .when(pl.col("task_raw") == "1").then(pl.lit("cop"))
        .when(store.is_not_null())
        .then(pl.concat_str(pl.lit("cop["), store.replace_strict(STORE_TYPES, default="unspecified"), pl.lit("]")))
        .otherwise(pl.col("task_raw"))
    )
    field = lambda i: pl.col("f").list.get(i, null_on_oob=True)  # noqa: E731
    return rows.select(
        "stmt_id",
        depth=field(0).cast(pl.Int32, strict=False),
        op_id=pl.when(pl.col("num").is_not_null()).then(pl.concat_str(name, pl.lit("_"), pl.col("num"))).otherwise(name),
        task=task,
        est_rows=field(3),
        operator_info=field(4),
        act_rows=field(5),
        exec_info=field(6),
        rest=pl.col("f").list.slice(3).list.join("\t"),
        width=pl.col("f").list.len() - 1,
        operators="operators",
    )


def checked_plan_rows(
    rows: pl.DataFrame, lines: pl.DataFrame, limit: int | None = MAX_WARNINGS
) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """Operator rows (with ``operators``, the plan's row count before the cut at MAX_PLAN_OPERATORS) ->
    the rows of the plans that can be read, and a warning for each plan cut or dropped (depth outside
    0..MAX_PLAN_DEPTH: nothing of it read). ``lines`` maps stmt_id to the entry's line."""
    per_plan = rows.group_by("stmt_id", maintain_order=True).agg(
        operators=pl.col("operators").first(), deepest=pl.col("depth").max(), shallowest=pl.col("depth").min()
    )
    too_deep = (pl.col("deepest") > MAX_PLAN_DEPTH) | (pl.col("shallowest") < 0)
    reason = (
        pl.when(too_deep)
        .then(pl.format("plan depth {} outside 0..{}: plan not read", pl.col("deepest"), pl.lit(MAX_PLAN_DEPTH)))
        .otherwise(pl.format("plan of {} operators: the first {} read", pl.col("operators"), pl.lit(MAX_PLAN_OPERATORS)))
    )
    faults = per_plan.filter(too_deep | (pl.col("operators") > MAX_PLAN_OPERATORS)).select(
        "stmt_id", dropped=too_deep, reason=reason
    )
    if faults.is_empty():
        return rows.drop("operators"), []
    warnings = row_warnings(faults.join(lines, on="stmt_id", how="left").select("line", "reason"), str, limit)
    kept = rows.join(faults.filter("dropped").select("stmt_id"), on="stmt_id", how="anti")
    return kept.drop("operators"), warnings


def render_plans(rows: pl.DataFrame) -> pl.DataFrame:
    """Operator rows -> stmt_id, plan: the text ``tidb_decode_plan()`` shows (without its padding)."""
    indent = pl.when(pl.col("depth") > 0).then(
        pl.concat_str(pl.lit("  ").repeat_by((pl.col("depth") - 1).clip(0)).list.join(""), pl.lit("└─"))
    ).otherwise(pl.lit(""))
    line = pl.concat_str(pl.lit("\t"), indent, pl.col("op_id"), pl.lit("\t"), pl.col("task"), pl.lit("\t"), pl.col("rest"))
    headers = {n: "\t" + "\t".join(PLAN_HEADER[:n]) for n in range(1, len(PLAN_HEADER) + 1)}
    return rows.group_by("stmt_id", maintain_order=True).agg(
        header=pl.col("width").first().clip(1, len(PLAN_HEADER)).replace_strict(headers, default=None, return_dtype=pl.String),
        body=line.fill_null("").str.join("\n"),
    ).select("stmt_id", plan=pl.concat_str("header", pl.lit("\n"), "body"))


def text_plan_rows(plans: pl.DataFrame) -> pl.DataFrame:
    """Decoded plan texts (``stmt_id``, ``plan``) as TiDB's SLOW_QUERY table and the dashboard show them
    (tab-separated, a header row, ids indented with ``└─``/``├─``/``│``) -> operator rows."""
    rows = (
        plans.select("stmt_id", pl.col("plan").str.split("\n").alias("row"))
        .with_columns(operators=pl.col("row").list.len() - 1, row=pl.col("row").list.head(MAX_PLAN_OPERATORS + 1))
        .explode("row")
        .with_columns(pl.col("row").str.strip_chars_end("\r").str.strip_prefix("\t").str.split("\t").alias("f"))
    )
    field = lambda i: pl.col("f").list.get(i, null_on_oob=True).str.strip_chars(" ")  # noqa: E731
    id_cell = pl.col("f").list.get(0, null_on_oob=True)
    prefix = id_cell.str.extract(r"^([ │├└─]*)", 1)
    rows = rows.with_columns(
        depth=(prefix.str.len_chars() // 2).cast(pl.Int32),
        op_id=id_cell.str.strip_chars_start(" │├└─").str.strip_chars_end(" "),
    ).filter(pl.col("op_id").is_not_null() & (pl.col("op_id") != "") & (pl.col("op_id") != "id"))
    return rows.select(
        "stmt_id", "depth", "op_id",
        task=field(1), est_rows=field(2), operator_info=field(3), act_rows=field(4), exec_info=field(5),
        operators="operators",  # the rows after the header
    )


def plan_tables(rows: pl.DataFrame, source: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Operator rows -> (plan_node table, per statement: stmt_id, plan_signature, full_scan)."""
    info = pl.col("operator_info").fill_null("")
    nodes = rows.with_columns(
        node_id=pl.int_range(pl.len(), dtype=pl.Int32).over("stmt_id"),
        node_type=pl.col("op_id").str.replace(r"_\d+(?:\(.*\))?$", ""),
        relation=info.str.extract(r"^table:([^\s,]+)", 1),
        index_name=info.str.extract(r"^table:[^\s,]+.*?, (?:clustered )?index:([^\s,(]+)", 1),
    )
    nodes = nodes.with_columns(
        est_rows=pl.col("est_rows").str.strip_chars().cast(pl.Float64, strict=False),
        actual_rows=pl.col("act_rows").str.strip_chars().cast(pl.Float64, strict=False),
        loops=pl.col("exec_info").str.extract(r"(?:^|[\s,{])loops:(\d+)", 1).cast(pl.Float64, strict=False),
        filter=pl.when(pl.col("node_type") == "Selection").then(pl.col("operator_info")),
        source=pl.lit(source),
    )
    access = pl.when(pl.col("index_name").is_not_null()).then(
        pl.concat_str(pl.col("relation"), pl.lit("."), pl.col("index_name"))
    ).otherwise(pl.col("relation"))
    piece = pl.when(access.is_not_null()).then(
        pl.concat_str(pl.col("node_type"), pl.lit("("), access, pl.lit(")"))
    ).otherwise(pl.col("node_type"))
    full = (pl.col("node_type") == "TableFullScan") | (
        (pl.col("node_type") == "TableScan") & info.str.contains("range:[-inf,+inf]", literal=True)
    )
    per_statement = nodes.group_by("stmt_id", maintain_order=True).agg(
        plan_signature=piece.str.join(">"),
        full_scan=full.any(),
    )
    return T.conform(T.PLAN_NODE, nodes), per_statement


def statements_with_text_plans(
    st: pl.DataFrame, source: str, warnings: list[ParseWarning], notes: list[str]
) -> ParseResult:
    """The result of a table export of statements (one row each, ``plan`` as TiDB's text table):
    plan nodes and signatures from the plans, the ``statement`` table, its time range."""
    rows = text_plan_rows(st.filter(pl.col("plan").is_not_null()).select("stmt_id", "plan"))
    rows, plan_warnings = checked_plan_rows(rows, st.select("stmt_id", "line"))
    warnings = cap_warnings(warnings + plan_warnings) if plan_warnings else warnings
    nodes, shape = plan_tables(rows, source)
    statement = T.conform(T.STATEMENT, st.join(shape, on="stmt_id", how="left").sort("stmt_id"))
    start, end = statement["start_ts"].min(), statement["end_ts"].max()
    return ParseResult(
        tables={T.STATEMENT: statement, T.PLAN_NODE: nodes},
        records=statement.height,
        warnings=warnings,
        notes=notes,
        time_range=(start, end) if start is not None and end is not None else None,
    )
