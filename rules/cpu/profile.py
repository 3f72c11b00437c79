"""What the CPU-profile rules share: a category's share of the profile and where its samples came from.

The profile is ``metrics["cpu_profile"]`` with the derived tables ``cpu_profile_stacks`` (folded
perf script stacks of the chosen event, each with one ``category``) and ``cpu_profile_symbols``
(leaf symbols per process and category). See ``dbdiag.derive.cpu_profile``.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence
from dbdiag.rules.base import RuleInput, Skip

MIN_BUSY_SAMPLES = 200  # fewer non-idle samples than this are too few to judge a share
CALLER_FRAMES = 3  # frames shown above the category's own frames in a "path into" row
TOP_ROWS = 10


@dataclass(frozen=True)
class CategoryShare:
    """One category's weight in the profile: samples and their share of busy (non-idle) samples."""

    category: str
    samples: int
    busy_samples: int
    busy_share_pct: float
    event: str | None
    source_kind: str


def category_share(inp: RuleInput, category: str) -> CategoryShare:
    """The category's share of the busy samples; Skip when there is no usable profile."""
    profile = inp.metrics.get("cpu_profile")
    if not profile:
        raise Skip("no CPU profile could be built from the perf input")
    busy = int(profile.get("busy_samples") or 0)
    if busy < MIN_BUSY_SAMPLES:
        raise Skip(f"{busy} busy (non-idle) samples in the CPU profile; shares are judged from {MIN_BUSY_SAMPLES}")
    row = next((c for c in profile.get("categories", []) if c.get("category") == category), {})
    samples = int(row.get("samples") or 0)
    return CategoryShare(
        category=category,
        samples=samples,
        busy_samples=busy,
        busy_share_pct=100.0 * samples / busy,
        event=profile.get("event"),
        source_kind=str(profile.get("source_kind") or "perf"),
    )


def judge(inp: RuleInput, category: str, threshold_pct: float) -> tuple[CategoryShare, str, bool]:
    """The category's share, the rule's "measured" line, and whether it reaches ``threshold_pct``."""
    share = category_share(inp, category)
    measured = (
        f"{category} {share.busy_share_pct:.1f}% of {share.busy_samples:,} busy samples "
        f"({share.event or 'event unknown'}, {share.source_kind}); threshold {threshold_pct:.0f}%"
    )
    return share, measured, share.busy_share_pct >= threshold_pct


def category_evidence(inp: RuleInput, share: CategoryShare, own_frame_regex: str) -> tuple[list[Evidence], str | None]:
    """Hot symbols, and with perf script stacks the processes and the paths into the category's own
    frames (``own_frame_regex``); with the busiest process's name (None without stacks)."""
    evidence = [top_symbols(inp, share.category, share.busy_samples)]
    stacks = category_stacks(inp, share.category)
    if stacks is None or stacks.height == 0:
        return evidence, None
    by_process = processes(stacks, share.busy_samples)
    evidence.append(by_process)
    evidence.append(paths_into(stacks, pl.col("frames").str.contains(own_frame_regex), share.busy_samples))
    return evidence, (by_process.rows[0][0] if by_process.rows else None)


def category_stacks(inp: RuleInput, category: str) -> pl.DataFrame | None:
    stacks = inp.derived.get("cpu_profile_stacks")
    if stacks is None or stacks.height == 0:
        return None
    return stacks.filter(pl.col("category") == category)


def top_symbols(inp: RuleInput, category: str, busy_samples: int) -> Evidence:
    """The category's hottest leaf symbols with their share of busy samples."""
    symbols = inp.derived.get("cpu_profile_symbols")
    rows: list[tuple] = []
    if symbols is not None and symbols.height:
        ranked = (
            symbols.filter(pl.col("category") == category)
            .group_by("symbol")
            .agg(pl.col("samples").sum(), pl.col("comm").sort_by("samples", descending=True).unique(maintain_order=True).head(3))
            .sort(["samples", "symbol"], descending=[True, False])
            .head(TOP_ROWS)
        )
        rows = [
            (symbol, int(samples), round(100.0 * samples / busy_samples, 1), ", ".join(comms))
            for symbol, samples, comms in ranked.rows()
        ]
    return Evidence(
        title=f"Hottest {category} symbols (leaf frames)",
        columns=("symbol", "samples", "% of busy samples", "processes"),
        rows=tuple(rows),
    )


def processes(stacks: pl.DataFrame, busy_samples: int) -> Evidence:
    by_comm = (
        stacks.group_by("comm").agg(pl.col("samples").sum()).sort(["samples", "comm"], descending=[True, False]).head(TOP_ROWS)
    )
    return Evidence(
        title="Processes whose samples fall in it",
        columns=("process", "samples", "% of busy samples"),
        rows=tuple((comm, int(n), round(100.0 * n / busy_samples, 1)) for comm, n in by_comm.rows()),
    )


def paths_into(stacks: pl.DataFrame, own_frames: pl.Expr, busy_samples: int) -> Evidence:
    """How samples got into the category: the CALLER_FRAMES frames above its own frames at the leaf end.

    ``own_frames`` tests one frame (an element of the split stack) for membership in the category.
    """
    split = stacks.select(
        "comm",
        "samples",
        pl.col("stack").str.split(";").alias("frames"),
    ).with_row_index("row")
    exploded = split.explode("frames").with_columns(pl.int_range(pl.len()).over("row").alias("depth"))
    first_own = (
        exploded.filter(own_frames.not_())
        .group_by("row")
        .agg(pl.col("depth").max().alias("last_caller"))
    )
    callers = (
        exploded.join(first_own, on="row", how="left")
        .filter(
            pl.col("last_caller").is_not_null(),
            pl.col("depth") <= pl.col("last_caller"),
            pl.col("depth") > pl.col("last_caller") - CALLER_FRAMES,
        )
        .group_by("row", maintain_order=True)
        .agg(pl.col("frames").str.join(" > ").alias("path"), pl.col("comm").first(), pl.col("samples").first())
    )
    ranked = (
        callers.group_by("path", "comm")
        .agg(pl.col("samples").sum())
        .sort(["samples", "path", "comm"], descending=[True, False, False])
        .head(TOP_ROWS)
    )
    return Evidence(
        title=f"Paths into it (the {CALLER_FRAMES} caller frames above, root first)",
        columns=("callers", "process", "samples", "% of busy samples"),
        rows=tuple((path, comm, int(n), round(100.0 * n / busy_samples, 1)) for path, comm, n in ranked.rows()),
    )


def profile_sources(inp: RuleInput) -> tuple[str, ...]:
    for name in (t.PERF_STACK, t.PERF_SYMBOL):
        frame = inp.table(name)
        if frame is not None:
            return tuple(sorted(frame["source"].unique().to_list()))
    return ()
