"""auto_explain plans (text and JSON format) -> ``plan_node`` rows and a per-plan summary.

Input: what follows ``duration: X ms  plan:`` in a log entry (stderr continuation lines already
stripped of their leading TAB; csvlog/jsonlog messages as they are). Text format::

    Query Text: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7;
    Update on pgbench_accounts  (cost=0.29..8.31 rows=0 width=0) (actual time=6.179..6.180 rows=0 loops=1)
      ->  Index Scan using pgbench_accounts_pkey on pgbench_accounts  (cost=0.29..8.31 rows=1 width=10) (actual time=6.100..6.108 rows=1 loops=1)
            Index Cond: (aid = 7)
            Filter: (pg_sleep('0.006'::double precision) IS NOT NULL)
            Rows Removed by Filter: 0

JSON format: ``{"Query Text": "...", "Plan": {"Node Type": ..., "Plans": [...]}}``.

Node rows (``plan_node`` columns, keyed here by the entry's ``rec``): node_id (0 = root, depth-first
= line order), depth (text: from the indentation, 6 columns a level), node_type (``Seq Scan``,
``Index Scan``, ``Hash Join``, ``Update``...; JSON names are rewritten the way the text format
prints them: ``HashAggregate``, ``Hash Left Join``, ``Parallel Seq Scan``), relation, index_name,
est_rows (``rows=`` of the cost part), actual_rows (per loop), loops, rows_removed_by_filter, filter
(every condition of the node, labelled: ``Index Cond: (aid = 7); Filter: (...)``).

Summary per plan: query_text, plan (the plan text without the Query Text), plan_signature (node
types with relation.index in tree order, no costs/rows/times:
``Update(pgbench_accounts)>Index Scan(pgbench_accounts.pgbench_accounts_pkey)``), index_names,
full_scan (a Seq Scan node), filesort (a Sort node). YAML and XML plans are kept as text only.

Text plans are parsed with vectorised expressions (every statement may carry a plan); JSON plans
are decoded one by one with ``json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit import json_text

NODE_RE = (
    r"^(?P<ind> *)(?P<arrow>->  ?)?(?P<body>[^ (].*?)"
    r"(?: +\(cost=[\d.]+\.\.[\d.]+ rows=(?P<est>[\d.]+) width=\d+\))?"
    r"(?: ?\((?:actual (?:time=[\d.]+\.\.[\d.]+ )?rows=(?P<act>[\d.]+) loops=(?P<loops>[\d.]+)|(?P<never>never executed))\))?$"
)
NODE_BODY_RE = r'^(?P<type>.+?)(?: using (?P<idx>"[^"]+"|\S+))?(?: on (?P<rel>"[^"]+"|\S+)(?: (?P<alias>"[^"]+"|\S+))?)?$'
CONDITIONS = ("Index Cond", "Recheck Cond", "Hash Cond", "Merge Cond", "Join Filter", "Filter", "TID Cond", "One-Time Filter")
ATTR_RE = r"^ *(?P<key>" + "|".join(CONDITIONS) + r"|Rows Removed by Filter): (?P<val>.*)$"
LEVEL_WIDTH = 6  # text EXPLAIN indents each level by 6 columns ("  ->  ")
# a real plan is tens of levels deep; a 1 MB indent made one of 166,666, and rules walk plans level by level
MAX_PLAN_DEPTH = 1_000

SUMMARY_SCHEMA = {
    "rec": pl.Int64,
    "query_text": pl.String,
    "plan": pl.String,
    "plan_signature": pl.String,
    "index_names": pl.String,
    "full_scan": pl.Boolean,
    "filesort": pl.Boolean,
}
NODE_SCHEMA = {
    "rec": pl.Int64,
    "node_id": pl.Int32,
    "depth": pl.Int32,
    "node_type": pl.String,
    "relation": pl.String,
    "index_name": pl.String,
    "est_rows": pl.Float64,
    "actual_rows": pl.Float64,
    "loops": pl.Float64,
    "rows_removed_by_filter": pl.Float64,
    "filter": pl.String,
}


@dataclass
class ParsedPlans:
    summary: pl.DataFrame
    nodes: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)


def plan_format(body: pl.Expr) -> pl.Expr:
    """json / xml / yaml / text, from the first characters of the plan entry."""
    head = body.fill_null("").str.strip_chars_start()
    return (
        pl.when(head.str.starts_with("{") | head.str.starts_with("[")).then(pl.lit("json"))
        .when(head.str.starts_with("<")).then(pl.lit("xml"))
        .when(head.str.contains(r"(?m)^\s*Plan:\s*$")).then(pl.lit("yaml"))
        .otherwise(pl.lit("text"))
    )


def parse_plans(entries: pl.DataFrame) -> ParsedPlans:
    """``entries`` (rec, body) -> summary and node frames (see module docstring)."""
    typed = entries.with_columns(pl.col("body").str.strip_chars_start("\n")).with_columns(plan_format(pl.col("body")).alias("format"))
    text = _text_plans(typed.filter(pl.col("format") == "text"))
    parsed_json = _json_plans(typed.filter(pl.col("format") == "json"))
    other = typed.filter(pl.col("format").is_in(["xml", "yaml"]))
    other_summary = other.select(
        "rec",
        pl.col("body").str.extract(r'(?s)Query Text: "?(.*?)"?\n\s*Plan:', 1).alias("query_text"),
        pl.col("body").alias("plan"),
    )
    notes = [f"{other.height} auto_explain plans in YAML/XML format kept as text (no plan nodes)"] if other.height else []
    summary = pl.concat(
        [_empty(SUMMARY_SCHEMA), text.summary, parsed_json.summary, other_summary], how="diagonal_relaxed"
    )
    nodes = pl.concat([_empty(NODE_SCHEMA), text.nodes, parsed_json.nodes], how="diagonal_relaxed")
    nodes, too_deep = _within_depth(nodes)
    return ParsedPlans(summary, nodes, notes + parsed_json.notes, parsed_json.warnings + too_deep)


def _within_depth(nodes: pl.DataFrame) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """The nodes of plans at most ``MAX_PLAN_DEPTH`` deep, and a warning for the others (kept as text)."""
    deep = nodes.group_by("rec").agg(pl.col("depth").max()).filter(pl.col("depth") > MAX_PLAN_DEPTH)
    if deep.is_empty():
        return nodes, []
    warning = ParseWarning(
        None,
        f"{deep.height} plans nested deeper than {MAX_PLAN_DEPTH} levels (the deepest {deep['depth'].max()}): "
        "their nodes not read, the plans kept as text",
    )
    return nodes.join(deep.select("rec"), on="rec", how="anti"), [warning]


def _empty(schema: dict) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)


# ---- text format --------------------------------------------------------------------------------


def _text_plans(plans: pl.DataFrame) -> ParsedPlans:
    if plans.is_empty():
        return ParsedPlans(_empty(SUMMARY_SCHEMA), _empty(NODE_SCHEMA))
    lines = (
        plans.select("rec", pl.col("body").str.strip_chars_end().str.split("\n").alias("text"))
        .explode("text")
        .with_columns(pl.col("text").str.strip_chars_end("\r"))
    )
    node = pl.col("text").str.extract_groups(NODE_RE)
    attr = pl.col("text").str.extract_groups(ATTR_RE)
    lines = lines.with_columns(
        node.struct.field("ind").str.len_chars().alias("ind"),
        node.struct.field("arrow").is_not_null().alias("arrow"),
        node.struct.field("body").alias("node_body"),
        node.struct.field("est").cast(pl.Float64).alias("est_rows"),
        node.struct.field("act").cast(pl.Float64).alias("actual_rows"),
        node.struct.field("loops").cast(pl.Float64).alias("loops"),
        node.struct.field("never").is_not_null().alias("never"),
        attr.struct.field("key").alias("attr_key"),
        attr.struct.field("val").alias("attr_val"),
    )
    is_node = pl.col("est_rows").is_not_null() | pl.col("actual_rows").is_not_null() | pl.col("never")
    lines = lines.with_columns(is_node.alias("is_node")).with_columns(
        (pl.col("is_node").cast(pl.Int32).cum_sum().over("rec") - 1).alias("node_id")
    )
    query_text = (
        lines.filter(pl.col("node_id") < 0)
        .group_by("rec", maintain_order=True)
        .agg(pl.col("text").str.join("\n"))
        .select(
            "rec",
            pl.col("text").str.strip_chars_start().str.replace(r"^Query Text: ?", "")
            .str.replace(r"(?s)\n\s*Query (?:Parameters|Identifier): .*$", "").str.strip_chars().alias("query_text"),
        )
    )
    nodes = _text_nodes(lines)
    plan_text = (
        lines.filter(pl.col("node_id") >= 0)
        .group_by("rec", maintain_order=True)
        .agg(pl.col("text").str.join("\n").alias("plan"))
    )
    summary = plans.select("rec").join(query_text, on="rec", how="left").join(plan_text, on="rec", how="left")
    return ParsedPlans(summary.join(summarise(nodes), on="rec", how="left"), nodes)


def _text_nodes(lines: pl.DataFrame) -> pl.DataFrame:
    conditions = (
        lines.filter((pl.col("node_id") >= 0) & pl.col("attr_key").is_in(CONDITIONS))
        .group_by("rec", "node_id", maintain_order=True)
        .agg((pl.col("attr_key") + ": " + pl.col("attr_val")).str.join("; ").alias("filter"))
    )
    removed = (
        lines.filter((pl.col("node_id") >= 0) & (pl.col("attr_key") == "Rows Removed by Filter"))
        .group_by("rec", "node_id")
        .agg(pl.col("attr_val").first().cast(pl.Float64, strict=False).alias("rows_removed_by_filter"))
    )
    node_lines = lines.filter(pl.col("is_node"))
    root_ind = pl.col("ind").first().over("rec")
    depth = pl.when(pl.col("node_id") == 0).then(0).otherwise(
        ((pl.col("ind") - root_ind + 4) / LEVEL_WIDTH).round(0).cast(pl.Int32).clip(lower_bound=1)
    )
    body = pl.col("node_body").str.extract_groups(NODE_BODY_RE)
    node_type, rel, idx = body.struct.field("type"), body.struct.field("rel"), body.struct.field("idx")
    bitmap_index = node_type.str.ends_with("Bitmap Index Scan")
    nodes = node_lines.select(
        "rec",
        pl.col("node_id").cast(pl.Int32),
        depth.cast(pl.Int32).alias("depth"),
        node_type.alias("node_type"),
        pl.when(bitmap_index).then(None).otherwise(rel).str.strip_chars('"').alias("relation"),
        pl.when(bitmap_index).then(rel).otherwise(idx).str.strip_chars('"').alias("index_name"),
        "est_rows",
        "actual_rows",
        "loops",
    )
    return (
        nodes.join(conditions, on=["rec", "node_id"], how="left")
        .join(removed, on=["rec", "node_id"], how="left")
        .select(list(NODE_SCHEMA))
        .sort("rec", "node_id")
    )


def summarise(nodes: pl.DataFrame) -> pl.DataFrame:
    """Per plan: signature, index names, full scan and sort flags, from its nodes in order."""
    target = pl.when(pl.col("relation").is_not_null() & pl.col("index_name").is_not_null()).then(
        pl.col("relation") + "." + pl.col("index_name")
    ).otherwise(pl.coalesce(pl.col("relation"), pl.col("index_name")))
    label = pl.when(target.is_not_null()).then(pl.col("node_type") + "(" + target + ")").otherwise(pl.col("node_type"))
    return (
        nodes.sort("rec", "node_id")
        .group_by("rec", maintain_order=True)
        .agg(
            label.str.join(">").alias("plan_signature"),
            pl.col("index_name").drop_nulls().unique(maintain_order=True).str.join(",").alias("index_names"),
            pl.col("node_type").str.ends_with("Seq Scan").any().alias("full_scan"),
            pl.col("node_type").is_in(["Sort", "Incremental Sort"]).any().alias("filesort"),
        )
        .with_columns(pl.when(pl.col("index_names") != "").then(pl.col("index_names")).alias("index_names"))
    )


# ---- JSON format --------------------------------------------------------------------------------


def _json_plans(plans: pl.DataFrame) -> ParsedPlans:
    summaries, nodes, warnings = [], [], []
    for rec, body in plans.select("rec", "body").iter_rows():
        try:
            document = json_text.loads(body)
        except ValueError as error:  # not JSON, or nested past the recursion limit (json_text)
            reason = error.msg if isinstance(error, json.JSONDecodeError) else str(error)
            warnings.append(ParseWarning(None, f"auto_explain JSON plan unreadable ({reason}); kept as text"))
            summaries.append({"rec": rec, "query_text": None, "plan": body})
            continue
        if isinstance(document, list) and document:
            document = document[0]
        if not isinstance(document, dict) or not isinstance(document.get("Plan"), dict):
            warnings.append(ParseWarning(None, "auto_explain JSON plan without a \"Plan\" object; kept as text"))
            summaries.append({"rec": rec, "query_text": None, "plan": body})
            continue
        query = document.get("Query Text")
        summaries.append({"rec": rec, "query_text": query.strip() if isinstance(query, str) else None, "plan": body})
        nodes.extend({"rec": rec, **row} for row in _walk_json(document["Plan"]))
    node_frame = pl.DataFrame(nodes, schema=NODE_SCHEMA, orient="row") if nodes else _empty(NODE_SCHEMA)
    summary = pl.DataFrame(summaries, schema={k: SUMMARY_SCHEMA[k] for k in ("rec", "query_text", "plan")})
    summary = summary.join(summarise(node_frame), on="rec", how="left")
    return ParsedPlans(summary, node_frame, [], warnings)


def _walk_json(root: dict) -> list[dict]:
    """Depth-first node rows of a JSON plan (explicit stack: plans can be deep)."""
    rows: list[dict] = []
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        conditions = [f"{key}: {node[key]}" for key in CONDITIONS if isinstance(node.get(key), str)]
        relation = node.get("Relation Name") or node.get("CTE Name") or node.get("Function Name")
        index = node.get("Index Name")
        rows.append({
            "node_id": len(rows),
            "depth": depth,
            "node_type": json_node_type(node),
            "relation": relation if isinstance(relation, str) else None,
            "index_name": index if isinstance(index, str) else None,
            "est_rows": _number(node.get("Plan Rows")),
            "actual_rows": _number(node.get("Actual Rows")),
            "loops": _number(node.get("Actual Loops")),
            "rows_removed_by_filter": _number(node.get("Rows Removed by Filter")),
            "filter": "; ".join(conditions) or None,
        })
        children = node.get("Plans")
        if isinstance(children, list):
            stack.extend((child, depth + 1) for child in reversed(children) if isinstance(child, dict))
    return rows


def _number(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


AGGREGATE_NAMES = {"Plain": "Aggregate", "Sorted": "GroupAggregate", "Hashed": "HashAggregate", "Mixed": "MixedAggregate"}


def json_node_type(node: dict) -> str:
    """The name the text format prints for a JSON plan node (explain.c's rules, main cases)."""
    name = str(node.get("Node Type", "?"))
    if name == "ModifyTable" and node.get("Operation"):
        name = str(node["Operation"])
    elif name == "Aggregate":
        name = AGGREGATE_NAMES.get(str(node.get("Strategy")), "Aggregate")
        partial = node.get("Partial Mode")
        if partial in ("Partial", "Finalize"):
            name = f"{partial} {name}"
    elif name == "SetOp" and node.get("Strategy") == "Hashed":
        name = "HashSetOp"
    elif name in ("Nested Loop", "Hash Join", "Merge Join"):
        join_type = node.get("Join Type")
        if join_type and join_type != "Inner":
            name = f"{name.removesuffix(' Join')} {join_type} Join"
    elif name == "Custom Scan" and node.get("Custom Plan Provider"):
        name = f"Custom Scan ({node['Custom Plan Provider']})"
    if node.get("Scan Direction") == "Backward":
        name = f"{name} Backward"
    if node.get("Parallel Aware") is True:
        name = f"Parallel {name}"
    return name
