"""Flame graph: folded stacks -> a pruned call tree (data, in the JSON) -> rectangles (for the SVG).

Two steps, so the JSON carries the same tree the HTML draws:

- :func:`fold_tree` (used by derive): merges folded stacks (``"comm;main;f;g"``, samples, category)
  into a tree, level by level in polars. A frame narrower than ``min_share`` of all samples is
  not kept (its samples stay in its parent's width, as FlameGraph's ``--minwidth`` does), and at
  most ``max_nodes`` frames are kept (the widest; a parent is always at least as wide as its
  children, so the kept set stays a tree). Each node takes the category with most samples
  under it.
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
"""

from __future__ import annotations

import zlib
from typing import Any

import polars as pl

ROW_HEIGHT_PX = 17
CHAR_WIDTH_PX = 6.6  # 11px sans-serif, average glyph
MIN_LABEL_WIDTH_PX = 24
UNKNOWN_FRAME = "[unknown]"

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


def fold_tree(stacks: pl.DataFrame, min_share: float = 0.001, max_nodes: int = 3000) -> dict[str, Any]:
    """The pruned call tree of ``stacks`` (columns ``stack``, ``samples``, optional ``category``).

    Nodes are listed parents first; ``parent`` is the index of the parent node (-1 for the root
    ``all``).
    """
    total = int(stacks["samples"].sum()) if stacks.height else 0
    root = {"parent": -1, "frame": "all", "depth": 0, "samples": total, "category": _top_category(stacks)}
    result = {"total_samples": total, "min_share_pct": round(100 * min_share, 3), "max_nodes": max_nodes, "dropped_frames": 0, "nodes": [root]}
    if not total:
        return result
    min_samples = max(total * min_share, 1)
    active = stacks.select(
        pl.col("stack").fill_null("").str.split(";").alias("_frames"),
        pl.col("samples").cast(pl.Int64),
        (pl.col("category") if "category" in stacks.columns else pl.lit("other")).fill_null("other").alias("category"),
        pl.lit(0, dtype=pl.Int64).alias("_parent"),
    ).filter(pl.col("samples") > 0)
    nodes = [root]
    dropped = 0
    depth = 0
    while active.height:
        active = active.filter(pl.col("_frames").list.len() > depth).with_columns(
            pl.col("_frames").list.get(depth).str.strip_chars().replace("", UNKNOWN_FRAME).alias("_name")
        )
        if not active.height:
            break
        groups = active.group_by("_parent", "_name").agg(pl.col("samples").sum())
        dropped += groups.filter(pl.col("samples") < min_samples).height
        kept = groups.filter(pl.col("samples") >= min_samples).sort("_parent", "_name")
        if not kept.height:
            break
        categories = (
            active.group_by("_parent", "_name", "category").agg(pl.col("samples").sum())
            .sort(["samples", "category"], descending=[True, False])
            .group_by("_parent", "_name", maintain_order=True).agg(pl.col("category").first())
        )
        kept = kept.join(categories, on=["_parent", "_name"], how="left").sort("_parent", "_name")
        kept = kept.with_columns((pl.int_range(0, pl.len()) + len(nodes)).cast(pl.Int64).alias("_id"))
        for parent, name, samples, category, _ in kept.iter_rows():
            nodes.append({"parent": int(parent), "frame": name, "depth": depth + 1, "samples": int(samples), "category": category})
        active = active.join(kept.select("_parent", "_name", "_id"), on=["_parent", "_name"], how="inner").with_columns(
            pl.col("_id").alias("_parent")
        ).drop("_id", "_name")
        depth += 1
    if len(nodes) > max_nodes:
        nodes, extra = _cap(nodes, max_nodes)
        dropped += extra
    result["nodes"] = nodes
    result["dropped_frames"] = dropped
    return result


def _top_category(stacks: pl.DataFrame) -> str:
    if "category" not in stacks.columns or not stacks.height:
        return "other"
    top = stacks.group_by("category").agg(pl.col("samples").sum()).sort(["samples", "category"], descending=[True, False])
    return top["category"][0] or "other"


def _cap(nodes: list[dict[str, Any]], max_nodes: int) -> tuple[list[dict[str, Any]], int]:
    """Keep the ``max_nodes`` widest nodes (ancestors first on ties, so the set stays a tree)."""
    order = sorted(range(len(nodes)), key=lambda i: (-nodes[i]["samples"], nodes[i]["depth"], i))
    keep = sorted(order[:max_nodes])
    new_index = {old: new for new, old in enumerate(keep)}
    capped = [{**nodes[old], "parent": new_index.get(nodes[old]["parent"], -1)} for old in keep]
    return capped, len(nodes) - len(keep)


def layout(tree: dict[str, Any], width_px: float = 1160.0) -> dict[str, Any]:
    """Rectangles of ``tree`` (from :func:`fold_tree`): x, width, y, label, tooltip and colour."""
    nodes = tree["nodes"]
    total = tree["total_samples"] or 1
    scale = width_px / total
    max_depth = max((n["depth"] for n in nodes), default=0)
    height = (max_depth + 1) * ROW_HEIGHT_PX
    x_of = [0.0] * len(nodes)
    next_child_x = [0.0] * len(nodes)
    rects = []
    for index, node in enumerate(nodes):
        parent = node["parent"]
        if parent >= 0:
            x_of[index] = next_child_x[parent]
            next_child_x[parent] += node["samples"] * scale
        next_child_x[index] = x_of[index]
        width = node["samples"] * scale
        share = 100.0 * node["samples"] / total
        rects.append({
            "x": round(x_of[index], 2),
            "width": round(width, 2),
            "y": height - (node["depth"] + 1) * ROW_HEIGHT_PX,
            "depth": node["depth"],
            "label": node["frame"],
            "text": _fit(node["frame"], width),
            "samples": node["samples"],
            "share_pct": round(share, 2),
            "category": node["category"],
            "fill": colour(node["frame"], node["category"]),
        })
    return {"width": width_px, "height": height, "row_height": ROW_HEIGHT_PX, "rects": rects,
            "total_samples": tree["total_samples"], "dropped_frames": tree["dropped_frames"], "min_share_pct": tree["min_share_pct"]}


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
