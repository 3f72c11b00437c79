"""A differential flame graph: the capture's flame graph, each frame coloured by how its share of busy
CPU changed against the same stack in the baseline (red: grew, blue: shrank, grey: about the same).

``tree(baseline, capture)`` keeps the data (in the compare JSON): the capture's nodes from
``metrics.cpu_profile.flame`` with both shares::

    {"parent": 3, "frame": "handler::ha_rnd_next", "depth": 7, "samples": 40, "weight": 4.0e8,
     "category": "database", "baseline_share_pct": 0.4, "capture_share_pct": 22.1}

``geometry(tree)`` draws it with the analyze report's flame layout (``dbdiag.flamegraph.layout``).
A stack is "the same" when its frames from the root match; a frame the baseline never sampled has 0%.
"""

from __future__ import annotations

from typing import Any

from dbdiag.flamegraph import layout

FULL_COLOUR_POINTS = 10.0  # a change of this many points of busy CPU or more gets the strongest colour
SAME_POINTS = 0.5  # within this, a frame is drawn grey: the same share on both sides


def tree(baseline: dict[str, Any], capture: dict[str, Any]) -> dict[str, Any] | None:
    flames = [((doc.get("metrics") or {}).get("cpu_profile") or {}).get("flame") for doc in (baseline, capture)]
    if not all(flame and flame.get("nodes") for flame in flames):
        return None
    before = _shares_by_path(flames[0]["nodes"])
    after_paths = _paths(flames[1]["nodes"])
    after = _shares_by_path(flames[1]["nodes"])
    nodes = [{**node, "baseline_share_pct": before.get(path, 0.0), "capture_share_pct": after[path]}
             for node, path in zip(flames[1]["nodes"], after_paths)]
    keep = ("total_samples", "total_weight", "weight_unit", "min_share_pct", "max_depth", "dropped_frames",
            "collapsed_recursion", "capped_stacks")
    return {**{k: flames[1].get(k) for k in keep}, "nodes": nodes}


def geometry(diff: dict[str, Any] | None) -> dict[str, Any] | None:
    if not diff:
        return None
    drawn = layout({**diff, "dropped_frames": diff.get("dropped_frames") or 0}, width_px=1160.0)
    for rect, node in zip(drawn["rects"], diff["nodes"]):
        change = node["capture_share_pct"] - node["baseline_share_pct"]
        rect["fill"] = change_colour(change)
        rect["note"] = f"{node['baseline_share_pct']:.1f}% of busy CPU in baseline, {node['capture_share_pct']:.1f}% in capture ({change:+.1f} points)"
    return drawn


def change_colour(change_points: float) -> str:
    """-10 points or less: full blue; within 0.5: grey; +10 or more: full red.

    >>> change_colour(12.0), change_colour(0.2), change_colour(-3.0)
    ('hsl(4,80%,45%)', 'hsl(0,0%,82%)', 'hsl(214,48%,70%)')
    """
    if abs(change_points) <= SAME_POINTS:
        return "hsl(0,0%,82%)"
    strength = min(abs(change_points) / FULL_COLOUR_POINTS, 1.0)
    hue = 4 if change_points > 0 else 214
    return f"hsl({hue},{round(35 + 45 * strength)}%,{round(80 - 35 * strength)}%)"


def _paths(nodes: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    """Each node's frames from the root (nodes list parents before children, as fold_tree writes them)."""
    paths: list[tuple[str, ...]] = []
    for node in nodes:
        parent = node["parent"]
        paths.append((paths[parent] if parent >= 0 else ()) + (node["frame"],))
    return paths


def _shares_by_path(nodes: list[dict[str, Any]]) -> dict[tuple[str, ...], float]:
    total = float(nodes[0].get("weight", nodes[0]["samples"])) or 1.0
    shares: dict[tuple[str, ...], float] = {}
    for node, path in zip(nodes, _paths(nodes)):
        shares[path] = shares.get(path, 0.0) + 100.0 * float(node.get("weight", node["samples"])) / total
    return shares
