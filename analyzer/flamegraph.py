"""Flame graph: folded stacks -> a pruned call tree (data, in the JSON) -> rectangles (for the SVG).

Two steps, so the JSON carries the same tree the HTML draws:

- :func:`fold_tree` (used by derive): merges folded stacks (``"comm;main;f;g"``, samples, optional
  weight, category) into a tree, level by level in polars. Widths are of ``weight`` (the summed
  sample periods when the profile has them) or else of ``samples``. Before merging, each stack
  is made readable at any depth:

  - **direct recursion collapsed**: a frame repeated consecutively (``parse;parse;parse``) is one
    frame with a count (``repeats``: the least and most repeats seen under that node, drawn
    ``parse ×3`` or ``parse ×2–5``); so is a run of frames perf could not name (``[mariadbd]``,
    ``[unknown]``: distinct functions of one dso, said so in the tooltip, not called recursion);
  - **depth capped** at ``max_depth`` frames: a deeper stack keeps its ``ROOT_FRAMES`` outermost
    frames (a quarter of ``max_depth`` at most) and its innermost ones (the leaf, where the CPU was), with one marker frame
    :data:`CUT_FRAME` between them (``hidden_frames``: how many it stands for, drawn
    ``… 87 frames``), so a 127-frame stack does not push the readable part 1,800 px down.

  A frame narrower than ``min_share`` of the whole weight is not kept (its weight stays in its
  parent's width, as FlameGraph's ``--minwidth`` does), and at most ``max_nodes`` frames are kept
  (the widest; a parent is always at least as wide as its children, so the kept set stays a
  tree). Each node takes the category with most weight under it.
- :func:`layout`: x/width/depth of every kept node; siblings in alphabetical order, as FlameGraph
  sorts them, so the picture is stable from run to run. Root at the bottom (flame orientation).

>>> import polars as pl
>>> stacks = pl.DataFrame({"stack": ["db;main;parse", "db;main;exec", "db;main;exec;memcpy", "db;tiny"],
...                        "samples": [30, 60, 9, 1], "category": ["database", "database", "memory-copy", "other"]})
>>> tree = fold_tree(stacks, min_share=0.05)
>>> [(n["frame"], n["samples"]) for n in tree["nodes"]]
[('all', 100), ('db', 100), ('main', 99), ('exec', 69), ('parse', 30), ('memcpy', 9)]
>>> tree["dropped_frames"]
1
>>> [(r["label"], r["x"], r["width"]) for r in layout(tree, width_px=100)["rects"]][:4]
[('all', 0.0, 100.0), ('db', 0.0, 100.0), ('main', 0.0, 99.0), ('exec', 0.0, 69.0)]
>>> deep = pl.DataFrame({"stack": ["db;" + ";".join(["eval"] * 50) + ";" + ";".join(f"f{i}" for i in range(60))], "samples": [5]})
>>> tree = fold_tree(deep, max_depth=12)
>>> [(n["frame"], n.get("repeats"), n.get("hidden_frames")) for n in tree["nodes"]][1:5]
[('db', None, None), ('eval', [50, 50], None), ('f0', None, None), ('[… frames]', None, [51, 51])]
>>> [r["label"] for r in layout(tree)["rects"]]
['all', 'db', 'eval ×50', 'f0', '… 51 frames', 'f52', 'f53', 'f54', 'f55', 'f56', 'f57', 'f58', 'f59']
"""

from __future__ import annotations

import zlib
from typing import Any

import polars as pl

ROW_HEIGHT_PX = 17
CHAR_WIDTH_PX = 6.6  # 11px sans-serif, average glyph
MIN_LABEL_WIDTH_PX = 24
UNKNOWN_FRAME = "[unknown]"
MAX_DEPTH = 40  # frames drawn per stack (below "all"), the depth-cap marker included
ROOT_FRAMES = 10  # outermost frames a capped stack keeps (process, thread entry, dispatch); the rest is its innermost
CUT_FRAME = "[… frames]"  # the marker a capped stack gets between its outer and inner frames
CUT_FILL = "#e8eaed"

# Hue per category (HSL degrees, saturation %): warm for code paths that burn CPU in the kernel,
# cool for user space, grey for what is not classified.
CATEGORY_HUES: dict[str, tuple[int, int]] = {
    "scheduler": (0, 70),
    "locks-futex": (330, 65),
    "softirq-network": (28, 85),
    "page-faults-numa": (48, 85),
    "memory-copy": (270, 45),
    "syscalls": (200, 55),
    "runtime-gc": (90, 45),
    "database": (140, 45),
    "idle": (0, 0),
    "other": (215, 15),
}


def fold_tree(
    stacks: pl.DataFrame,
    min_share: float = 0.001,
    max_nodes: int = 3000,
    max_depth: int = MAX_DEPTH,
    weight_unit: str = "samples",
) -> dict[str, Any]:
    """The pruned call tree of ``stacks`` (columns ``stack``, ``samples``, optional ``weight`` and ``category``).

    Nodes are listed parents first; ``parent`` is the index of the parent node (-1 for the root
    ``all``). ``weight_unit`` names what the widths are of (for the picture's tooltips).
    """
    if "weight" not in stacks.columns:
        stacks = stacks.with_columns(pl.col("samples").cast(pl.Float64).alias("weight"))
    positive = stacks.filter((pl.col("samples") > 0) & (pl.col("weight") > 0)) if stacks.height else stacks
    total = int(positive["samples"].sum()) if positive.height else 0
    total_weight = float(positive["weight"].sum()) if positive.height else 0.0
    root = {"parent": -1, "frame": "all", "depth": 0, "samples": total, "weight": total_weight, "category": _top_category(positive)}
    result = {
        "total_samples": total, "total_weight": total_weight, "weight_unit": weight_unit,
        "min_share_pct": round(100 * min_share, 3), "max_nodes": max_nodes, "max_depth": max_depth,
        "collapsed_recursion": 0, "capped_stacks": 0, "dropped_frames": 0, "nodes": [root],
    }
    if not total:
        return result
    active, collapsed, capped = _readable_stacks(positive, max_depth)
    result["collapsed_recursion"], result["capped_stacks"] = collapsed, capped
    min_weight = total_weight * min_share
    nodes = [root]
    dropped = 0
    depth = 0
    while active.height:
        active = active.filter(pl.col("_frames").list.len() > depth).with_columns(
            pl.col("_frames").list.get(depth).alias("_name"), pl.col("_repeats").list.get(depth).alias("_repeat")
        )
        if not active.height:
            break
        groups = active.group_by("_parent", "_name").agg(
            pl.col("samples", "weight").sum(), pl.col("_repeat").min().alias("_rmin"), pl.col("_repeat").max().alias("_rmax")
        )
        small = (pl.col("weight") < min_weight) | (pl.col("weight") <= 0)
        dropped += groups.filter(small).height
        kept = groups.filter(~small)
        if not kept.height:
            break
        categories = (
            active.group_by("_parent", "_name", "category").agg(pl.col("weight").sum())
            .sort(["weight", "category"], descending=[True, False])
            .group_by("_parent", "_name", maintain_order=True).agg(pl.col("category").first())
        )
        kept = kept.join(categories, on=["_parent", "_name"], how="left").sort("_parent", "_name")
        kept = kept.with_columns((pl.int_range(0, pl.len()) + len(nodes)).cast(pl.Int64).alias("_id"))
        for row in kept.select("_parent", "_name", "samples", "weight", "category", "_rmin", "_rmax").iter_rows(named=True):
            nodes.append(_node(row, depth + 1))
        active = active.join(kept.select("_parent", "_name", "_id"), on=["_parent", "_name"], how="inner").with_columns(
            pl.col("_id").alias("_parent")
        ).drop("_id", "_name", "_repeat")
        depth += 1
    if len(nodes) > max_nodes:
        nodes, extra = _cap(nodes, max_nodes)
        dropped += extra
    result["nodes"] = nodes
    result["dropped_frames"] = dropped
    return result


def _node(row: dict[str, Any], depth: int) -> dict[str, Any]:
    node = {"parent": int(row["_parent"]), "frame": row["_name"], "depth": depth, "samples": int(row["samples"]),
            "weight": float(row["weight"]), "category": row["category"]}
    span = [int(row["_rmin"]), int(row["_rmax"])]
    if row["_name"] == CUT_FRAME:
        node["hidden_frames"] = span
    elif span[1] > 1:
        node["repeats"] = span
    return node


def _readable_stacks(stacks: pl.DataFrame, max_depth: int) -> tuple[pl.DataFrame, int, int]:
    """Per stack its frames with direct recursion collapsed and the depth capped, the repeat count of
    each frame (hidden frames for the marker), and the ``_parent`` column of the level walk; with
    the number of stacks that had recursion collapsed and that were capped."""
    exploded = (
        stacks.with_row_index("_row")
        .select("_row", pl.col("stack").fill_null("").str.split(";").alias("_frame"))
        .explode("_frame")
        .with_columns(pl.col("_frame").fill_null("").str.strip_chars().replace("", UNKNOWN_FRAME))
    )
    runs = (
        exploded.with_columns((pl.col("_frame") != pl.col("_frame").shift(1).over("_row")).fill_null(True).cum_sum().over("_row").alias("_run"))
        .group_by("_row", "_run", maintain_order=True)
        .agg(pl.col("_frame").first(), pl.len().cast(pl.Int64).alias("_repeat"))
        .group_by("_row", maintain_order=True)
        .agg(pl.col("_frame").alias("_frames"), pl.col("_repeat").alias("_repeats"))
    )
    collapsed = runs.filter(pl.col("_repeats").list.max() > 1).height
    head = min(ROOT_FRAMES, max(max_depth // 4, 1))
    tail = max(max_depth - head - 1, 1)
    length = pl.col("_frames").list.len()
    cut = length > head + 1 + tail
    hidden = pl.col("_repeats").list.slice(head, length - head - tail).list.sum()
    runs = runs.with_columns(
        pl.when(cut).then(pl.concat_list(pl.col("_frames").list.head(head), pl.lit([CUT_FRAME]), pl.col("_frames").list.tail(tail)))
        .otherwise(pl.col("_frames")).alias("_frames"),
        pl.when(cut).then(pl.concat_list(pl.col("_repeats").list.head(head), hidden, pl.col("_repeats").list.tail(tail)))
        .otherwise(pl.col("_repeats")).alias("_repeats"),
        cut.alias("_cut"),
    )
    capped = int(runs["_cut"].sum())
    category = pl.col("category") if "category" in stacks.columns else pl.lit("other")
    attrs = stacks.with_row_index("_row").select(
        "_row", pl.col("samples").cast(pl.Int64), pl.col("weight").cast(pl.Float64), category.fill_null("other").alias("category")
    )
    active = runs.join(attrs, on="_row").select(
        "_frames", "_repeats", "samples", "weight", "category", pl.lit(0, dtype=pl.Int64).alias("_parent")
    )
    return active, collapsed, capped


def _top_category(stacks: pl.DataFrame) -> str:
    if "category" not in stacks.columns or not stacks.height:
        return "other"
    top = stacks.group_by("category").agg(pl.col("weight").sum()).sort(["weight", "category"], descending=[True, False])
    return top["category"][0] or "other"


def _cap(nodes: list[dict[str, Any]], max_nodes: int) -> tuple[list[dict[str, Any]], int]:
    """Keep the ``max_nodes`` widest nodes (ancestors first on ties, so the set stays a tree)."""
    order = sorted(range(len(nodes)), key=lambda i: (-nodes[i].get("weight", nodes[i]["samples"]), nodes[i]["depth"], i))
    keep = sorted(order[:max_nodes])
    new_index = {old: new for new, old in enumerate(keep)}
    capped = [{**nodes[old], "parent": new_index.get(nodes[old]["parent"], -1)} for old in keep]
    return capped, len(nodes) - len(keep)


def layout(tree: dict[str, Any], width_px: float = 1160.0) -> dict[str, Any]:
    """Rectangles of ``tree`` (from :func:`fold_tree`): x, width, y, label, tooltip and colour.

    Widths are of each node's ``weight`` (its samples in trees without one). ``label`` is what the
    frame stands for (``parse ×3``, ``… 87 frames``); ``cut`` marks the depth-cap marker.
    """
    nodes = tree["nodes"]

    def weight(node: dict[str, Any]) -> float:
        return float(node.get("weight", node["samples"]))

    total = weight(nodes[0]) if nodes else 0.0
    scale = width_px / total if total else 0.0
    max_depth = max((n["depth"] for n in nodes), default=0)
    height = (max_depth + 1) * ROW_HEIGHT_PX
    x_of = [0.0] * len(nodes)
    next_child_x = [0.0] * len(nodes)
    rects = []
    for index, node in enumerate(nodes):
        parent = node["parent"]
        if parent >= 0:
            x_of[index] = next_child_x[parent]
            next_child_x[parent] += weight(node) * scale
        next_child_x[index] = x_of[index]
        width = weight(node) * scale
        label = frame_label(node)
        rects.append({
            "x": round(x_of[index], 2),
            "width": round(width, 2),
            "y": height - (node["depth"] + 1) * ROW_HEIGHT_PX,
            "depth": node["depth"],
            "label": label,
            "text": _fit(label, width),
            "samples": node["samples"],
            "share_pct": round(100.0 * weight(node) / total, 2) if total else 0.0,
            "category": node["category"],
            "cut": node["frame"] == CUT_FRAME,
            "note": _note(node, tree.get("max_depth", MAX_DEPTH)),
            "fill": CUT_FILL if node["frame"] == CUT_FRAME else colour(node["frame"], node["category"]),
        })
    return {"width": width_px, "height": height, "row_height": ROW_HEIGHT_PX, "rects": rects,
            "total_samples": tree["total_samples"], "dropped_frames": tree["dropped_frames"], "min_share_pct": tree["min_share_pct"],
            "weight_unit": tree.get("weight_unit", "samples"), "max_depth": tree.get("max_depth", MAX_DEPTH),
            "collapsed_recursion": tree.get("collapsed_recursion", 0), "capped_stacks": tree.get("capped_stacks", 0)}


def _span(span: list[int]) -> str:
    return f"{span[0]}" if span[0] == span[1] else f"{span[0]}–{span[1]}"


def frame_label(node: dict[str, Any]) -> str:
    """What a node stands for: the frame, its direct recursion count, or the frames the depth cap hid.

    >>> frame_label({"frame": "parse", "repeats": [2, 5]}), frame_label({"frame": CUT_FRAME, "hidden_frames": [87, 87]})
    ('parse ×2–5', '… 87 frames')
    """
    if node["frame"] == CUT_FRAME:
        return f"… {_span(node.get('hidden_frames') or [0, 0])} frames"
    if node.get("repeats"):
        return f"{node['frame']} ×{_span(node['repeats'])}"
    return node["frame"]


def _note(node: dict[str, Any], max_depth: int) -> str | None:
    if node["frame"] == CUT_FRAME:
        return f"frames between the outermost and the innermost not drawn: the stack is deeper than {max_depth} levels"
    if node.get("repeats") and _unnamed(node["frame"]):
        return f"{_span(node['repeats'])} frames in a row without a symbol ({node['frame']}), drawn once"
    if node.get("repeats"):
        return f"direct recursion: {node['frame']} called itself, {_span(node['repeats'])} frames in a row, drawn once"
    return None


def _unnamed(frame: str) -> bool:
    """A frame perf could not name (``[unknown]``, ``[mariadbd]``: the dso only): a run of them is not recursion."""
    return frame.startswith("[") and frame.endswith("]")


def _fit(label: str, width_px: float) -> str:
    """The label cut to the rectangle, FlameGraph-style (``"mysql_pa.."``), or empty when too narrow.

    >>> _fit("dispatch_command", 200), _fit("dispatch_command", 60), _fit("dispatch_command", 10)
    ('dispatch_command', 'dispat..', '')
    """
    if width_px < MIN_LABEL_WIDTH_PX:
        return ""
    room = int((width_px - 6) / CHAR_WIDTH_PX)
    if len(label) <= room:
        return label
    return label[: room - 2] + ".." if room >= 3 else ""


def colour(frame: str, category: str | None) -> str:
    """A stable colour: the category's hue, lightness varied by the frame name (as FlameGraph varies it).

    >>> colour("mysql_parse", "database") == colour("mysql_parse", "database")
    True
    >>> colour("x", "idle")
    'hsl(0,0%,80%)'
    """
    hue, saturation = CATEGORY_HUES.get(category or "other", CATEGORY_HUES["other"])
    if category == "idle":
        return "hsl(0,0%,80%)"
    lightness = 62 + zlib.crc32(frame.encode("utf-8", "backslashreplace")) % 16
    return f"hsl({hue},{saturation}%,{lightness}%)"
