"""``metrics.cpu_profile`` from per-(process, leaf symbol, category) rows: shares, hot symbols, processes, tooling.

Input rows (one per ``comm``, ``symbol``, ``category``)::

    comm      symbol                category       kernel  tooling  samples  weight
    mariadbd  row_search_mvcc       database       false   false    412      4.16e9
    swapper   pv_native_safe_halt   idle           true    false    4977     5.02e10
    gzip      deflate_slow          other          false   true     1039     1.05e10

``weight`` is what the shares are of: the sum of the sample periods when every sample printed
one (perf's own "Overhead"; in frequency mode and for hardware events the period differs from
sample to sample), else the sample count, or a printed percentage (perf report). ``samples``
stays the count. The samples split three ways: ``idle`` (the idle loop), ``tooling`` (the
capture's own tools, :mod:`dbdiag.derive.cpu_tooling`) and ``busy`` (the rest: the workload).
``categories``, ``top_symbols`` and ``processes`` are of the idle and busy samples only, and
``busy_share_pct`` is of the busy weight; the tooling is listed apart under ``tooling``.

>>> rows = pl.DataFrame({"comm": ["db", "db", "db", "gzip", "swapper"], "symbol": ["f", "f", "g", "deflate", "halt"],
...     "category": ["database", "locks-futex", "database", "other", "idle"], "kernel": False,
...     "tooling": [False, False, False, True, False], "samples": [30, 10, 20, 40, 100], "weight": [30.0, 10, 20, 40, 100]})
>>> metric = summarise(rows, weight="samples")
>>> metric["samples"], metric["idle_samples"], metric["tooling_samples"], metric["busy_samples"]
(200, 100, 40, 60)
>>> [(s["symbol"], s["samples"], s["busy_share_pct"], [c["category"] for c in s["categories"]]) for s in metric["top_symbols"]]
[('f', 40, 66.67, ['database', 'locks-futex']), ('g', 20, 33.33, ['database'])]
>>> metric["tooling"]["processes"][0]["comm"], metric["tooling"]["non_idle_share_pct"]
('gzip', 40.0)
"""

from __future__ import annotations

from typing import Any

import polars as pl

IDLE = "idle"
OTHER = "other"
TOP_SYMBOLS = 30
TOP_PROCESSES = 15
TOP_SYMBOLS_PER_CATEGORY = 5
SYMBOL_PROCESSES = 5
WEIGHT_NOTES = {
    "period": "shares are of the summed sample periods (the event count each sample stands for, as perf report's Overhead)",
    "samples": "shares are of sample counts (the samples carry no period)",
    "percent": "shares are of the percentages perf printed (its Overhead, by period)",
}


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def summarise(rows: pl.DataFrame, *, weight: str, categories: tuple[str, ...] = (), total_weight: float | None = None) -> dict[str, Any]:
    """The metric's share fields from ``rows`` (see the module docstring).

    ``categories``: every category name, listed with zeros when absent (in this order on ties);
    ``total_weight``: the whole profile's weight when ``rows`` do not hold all of it (a perf
    report lists only some symbols: 100 percent).
    """
    rows = rows.with_columns(pl.col("weight").cast(pl.Float64).fill_null(0.0), pl.col("samples").fill_null(0).cast(pl.Int64))
    idle_rows = rows.filter(pl.col("category") == IDLE)
    tool_rows = rows.filter(pl.col("tooling") & (pl.col("category") != IDLE))
    busy_rows = rows.filter(~pl.col("tooling") & (pl.col("category") != IDLE))
    total_w = float(total_weight if total_weight is not None else rows["weight"].sum())
    idle_w, tool_w = float(idle_rows["weight"].sum()), float(tool_rows["weight"].sum())
    busy_w = max(total_w - idle_w - tool_w, 0.0)
    samples = {name: int(frame["samples"].sum()) for name, frame in (("all", rows), ("idle", idle_rows), ("tooling", tool_rows), ("busy", busy_rows))}
    kernel = busy_rows.filter(pl.col("kernel").fill_null(False))
    all_kernel = rows.filter(pl.col("kernel").fill_null(False) & ~pl.col("tooling"))
    return {
        "weight": weight,
        "weight_note": WEIGHT_NOTES[weight],
        "total_weight": total_w,
        "busy_weight": busy_w,
        "samples": samples["all"],
        "idle_samples": samples["idle"],
        "tooling_samples": samples["tooling"],
        "busy_samples": samples["busy"],
        "busy_pct": _pct(busy_w, total_w),
        "kernel": {
            "samples": int(all_kernel["samples"].sum()), "share_pct": _pct(float(all_kernel["weight"].sum()), total_w),
            "busy_samples": int(kernel["samples"].sum()), "busy_share_pct": _pct(float(kernel["weight"].sum()), busy_w),
        },
        "categories": _categories(pl.concat([idle_rows, busy_rows]), categories, total_w, busy_w),
        "top_symbols": _top_symbols(busy_rows, total_w, busy_w),
        "processes": _processes(busy_rows, total_w, busy_w, "busy_share_pct"),
        "tooling": {
            "samples": samples["tooling"],
            "weight": tool_w,
            "share_pct": _pct(tool_w, total_w) or 0.0,
            "non_idle_share_pct": _pct(tool_w, tool_w + busy_w),
            "processes": _processes(tool_rows, total_w, tool_w + busy_w, "non_idle_share_pct"),
        },
    }


def _shares(frame: pl.DataFrame, total_w: float, busy_w: float) -> pl.DataFrame:
    return frame.with_columns(
        (100.0 * pl.col("weight") / total_w).round(2).alias("share_pct") if total_w else pl.lit(None, pl.Float64).alias("share_pct"),
        pl.when(pl.col("category") != IDLE).then((100.0 * pl.col("weight") / busy_w).round(2) if busy_w else None).alias("busy_share_pct"),
    )


def _categories(rows: pl.DataFrame, names: tuple[str, ...], total_w: float, busy_w: float) -> list[dict[str, Any]]:
    by_category = _shares(rows.group_by("category", maintain_order=True).agg(pl.col("samples", "weight").sum()), total_w, busy_w)
    present = {row["category"]: row for row in by_category.to_dicts()}
    order = list(names) + sorted(set(present) - set(names))
    result = []
    for name in order:
        row = present.get(name, {"samples": 0, "weight": 0.0, "share_pct": 0.0, "busy_share_pct": None if name == IDLE else 0.0})
        top = _shares(
            rows.filter(pl.col("category") == name).group_by("symbol", "category", maintain_order=True).agg(pl.col("samples", "weight").sum())
            .sort(["weight", "symbol"], descending=[True, False]).head(TOP_SYMBOLS_PER_CATEGORY),
            total_w, busy_w,
        )
        result.append({
            "category": name,
            "samples": int(row["samples"] or 0),
            "weight": float(row["weight"] or 0.0),
            "share_pct": row["share_pct"] or 0.0,
            "busy_share_pct": row["busy_share_pct"],
            "top_symbols": [
                {"symbol": s["symbol"], "samples": int(s["samples"]), "share_pct": s["share_pct"], "busy_share_pct": s["busy_share_pct"]}
                for s in top.to_dicts()
            ],
        })
    result.sort(key=lambda c: (-c["weight"], order.index(c["category"])))
    return result


def _top_symbols(busy_rows: pl.DataFrame, total_w: float, busy_w: float) -> list[dict[str, Any]]:
    """One row per leaf symbol (whatever categories its stacks fell in), the categories as its breakdown."""
    per_category = (
        busy_rows.group_by("symbol", "category", maintain_order=True).agg(pl.col("samples", "weight").sum())
        .sort(["weight", "category"], descending=[True, False])
    )
    processes = (
        busy_rows.filter(pl.col("comm").is_not_null()).group_by("symbol", "comm", maintain_order=True).agg(pl.col("weight").sum())
        .sort(["symbol", "weight", "comm"], descending=[False, True, False])
        .group_by("symbol", maintain_order=True).agg(pl.col("comm").head(SYMBOL_PROCESSES).alias("processes"))
    )
    symbols = _shares(
        busy_rows.group_by("symbol", maintain_order=True)
        .agg(pl.col("samples", "weight").sum(), pl.col("kernel").any())
        .join(processes, on="symbol", how="left")
        .with_columns(pl.lit(OTHER).alias("category"), pl.col("processes").fill_null([]))  # category: any non-idle value gives the busy share
        .sort(["weight", "symbol"], descending=[True, False])
        .head(TOP_SYMBOLS),
        total_w, busy_w,
    )
    breakdown: dict[str, list[dict[str, Any]]] = {}
    for symbol, category, samples, weight in per_category.filter(pl.col("symbol").is_in(symbols["symbol"].implode())).iter_rows():
        breakdown.setdefault(symbol, []).append({"category": category, "samples": int(samples), "busy_share_pct": _pct(weight, busy_w)})
    return [
        {
            "symbol": row["symbol"], "category": breakdown[row["symbol"]][0]["category"], "categories": breakdown[row["symbol"]],
            "samples": int(row["samples"]), "share_pct": row["share_pct"], "busy_share_pct": row["busy_share_pct"],
            "kernel": row["kernel"], "processes": row["processes"],
        }
        for row in symbols.to_dicts()
    ]


def _processes(rows: pl.DataFrame, total_w: float, whole_w: float, share_name: str) -> list[dict[str, Any]]:
    """Processes by weight with their share of ``whole_w`` under ``share_name`` and their top category."""
    named = rows.filter(pl.col("comm").is_not_null())
    if not named.height:
        return []
    top_category = (
        named.group_by("comm", "category", maintain_order=True).agg(pl.col("weight").sum())
        .sort(["weight", "category"], descending=[True, False])
        .group_by("comm", maintain_order=True).agg(pl.col("category").first().alias("top_category"))
    )
    ranked = (
        named.group_by("comm", maintain_order=True).agg(pl.col("samples", "weight").sum())
        .join(top_category, on="comm", how="left")
        .sort(["weight", "comm"], descending=[True, False])
        .head(TOP_PROCESSES)
    )
    return [
        {"comm": comm, "samples": int(samples), "share_pct": _pct(weight, total_w), share_name: _pct(weight, whole_w), "top_category": category}
        for comm, samples, weight, category in ranked.iter_rows()
    ]
