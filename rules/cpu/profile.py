"""What the CPU-profile rules share: a category's share of the profile and where its samples came from.

The profile is ``metrics["cpu_profile"]`` with the derived tables ``cpu_profile_stacks`` (folded
perf script stacks of the chosen event, each with one ``category``, its ``weight`` and whether it
is the capture's own ``tooling``) and ``cpu_profile_symbols`` (leaf symbols per process and
category). See ``dbdiag.derive.cpu_profile``. Shares are of the weight (the summed sample periods
when the samples carry them, else the sample counts) of the busy samples: the idle loop and the
capture's tooling are left out.
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
    """One category's weight in the profile: its samples, its share of the busy weight
    (``busy_share_pct``) and of the whole profile's (``cpu_share``, 0..1: the host's CPU time
    the profile covered, idle and tooling included)."""

    category: str
    samples: int
    busy_samples: int
    busy_share_pct: float
    cpu_share: float
    weight: str
    tooling_samples: int
    event: str | None
    source_kind: str

    @property
    def basis(self) -> str:
        """How the share was counted, for titles: "by period" or "by samples"."""
        return "by samples" if self.weight == "samples" else "by period"


def category_share(inp: RuleInput, category: str) -> CategoryShare:
    """The category's share of the busy weight; Skip when there is no usable profile."""
    profile = inp.metric(t.CPU_PROFILE_METRIC)
    if not profile:
        raise Skip("no CPU profile could be built from the perf input")
    busy = int(profile.get("busy_samples") or 0)
    if busy < MIN_BUSY_SAMPLES:
        raise Skip(f"{busy} busy (non-idle, non-tooling) samples in the CPU profile; shares are judged from {MIN_BUSY_SAMPLES}")
    row = next((c for c in profile.get("categories", []) if c.get("category") == category), {})
    samples = int(row.get("samples") or 0)
    weight = float(row.get("weight", samples) or 0.0)
    busy_weight = float(profile.get("busy_weight", busy) or 0.0)
    total_weight = float(profile.get("total_weight", profile.get("samples") or 0) or 0.0)
    return CategoryShare(
        category=category,
        samples=samples,
        busy_samples=busy,
        busy_share_pct=100.0 * weight / busy_weight if busy_weight else 0.0,
        cpu_share=round(weight / total_weight, 4) if total_weight else 0.0,
        weight=str(profile.get("weight") or "samples"),
        tooling_samples=int(profile.get("tooling_samples") or 0),
        event=profile.get("event"),
        source_kind=str(profile.get("source_kind") or "perf"),
    )


def judge(inp: RuleInput, category: str, threshold_pct: float) -> tuple[CategoryShare, str, bool]:
    """The category's share, the rule's "measured" line, and whether it reaches ``threshold_pct``."""
    share = category_share(inp, category)
    tooling = f"; {share.tooling_samples:,} samples of the capture's own tooling left out" if share.tooling_samples else ""
    measured = (
        f"{category} {share.busy_share_pct:.1f}% of {share.busy_samples:,} busy samples {share.basis} "
        f"({share.event or 'event unknown'}, {share.source_kind}{tooling}); threshold {threshold_pct:.0f}%"
    )
    return share, measured, share.busy_share_pct >= threshold_pct


def busy_weight(inp: RuleInput) -> float:
    """The weight the busy shares are of (the busy samples' summed periods, or their count)."""
    profile = inp.metric(t.CPU_PROFILE_METRIC) or {}
    return float(profile.get("busy_weight", profile.get("busy_samples") or 0) or 0.0)


def category_evidence(inp: RuleInput, share: CategoryShare, own_frame_regex: str) -> tuple[list[Evidence], str | None]:
    """Hot symbols, and with perf script stacks the processes and the paths into the category's own
    frames (``own_frame_regex``); with the busiest process's name (None without stacks)."""
    whole = busy_weight(inp)
    evidence = [top_symbols(inp, share.category, whole)]
    stacks = category_stacks(inp, share.category)
    if stacks is None or stacks.height == 0:
        return evidence, None
    by_process = processes(stacks, whole)
    evidence.append(by_process)
    evidence.append(paths_into(stacks, pl.col("frames").str.contains(own_frame_regex), whole))
    return evidence, (by_process.rows[0][0] if by_process.rows else None)


def _weighted(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``weight`` column (the sample count where derive gave none)."""
    return frame if "weight" in frame.columns else frame.with_columns(pl.col("samples").cast(pl.Float64).alias("weight"))


def _workload(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` without the capture's own tooling."""
    return frame.filter(~pl.col("tooling").fill_null(False)) if "tooling" in frame.columns else frame


def category_stacks(inp: RuleInput, category: str) -> pl.DataFrame | None:
    """The busy stacks (tooling left out) of ``category``, with their ``weight``."""
    stacks = inp.table(t.CPU_PROFILE_STACK, keep_empty=True)
    if stacks is None or stacks.height == 0:
        return None
    return _weighted(_workload(stacks.filter(pl.col("category") == category)))


def top_symbols(inp: RuleInput, category: str, whole_weight: float) -> Evidence:
    """The category's hottest leaf symbols with their share of the busy weight."""
    symbols = inp.table(t.CPU_PROFILE_SYMBOL, keep_empty=True)
    rows: list[tuple] = []
    if symbols is not None and symbols.height and whole_weight > 0:
        ranked = (
            _weighted(_workload(symbols.filter(pl.col("category") == category)))
            .group_by("symbol")
            .agg(pl.col("samples").sum(), pl.col("weight").sum(), pl.col("comm").sort_by("weight", descending=True).unique(maintain_order=True).head(3))
            .sort(["weight", "symbol"], descending=[True, False])
            .head(TOP_ROWS)
        )
        rows = [
            (symbol, int(samples), round(100.0 * weight / whole_weight, 1), ", ".join(c for c in comms if c is not None))
            for symbol, samples, weight, comms in ranked.rows()
        ]
    return Evidence(
        title=f"Hottest {category} symbols (leaf frames)",
        columns=("symbol", "samples", "% of busy samples", "processes"),
        rows=tuple(rows),
    )


def processes(stacks: pl.DataFrame, whole_weight: float) -> Evidence:
    by_comm = (
        _weighted(stacks).group_by("comm").agg(pl.col("samples").sum(), pl.col("weight").sum())
        .sort(["weight", "comm"], descending=[True, False]).head(TOP_ROWS)
    )
    return Evidence(
        title="Processes whose samples fall in it",
        columns=("process", "samples", "% of busy samples"),
        rows=tuple((comm, int(n), round(100.0 * w / whole_weight, 1) if whole_weight else 0.0) for comm, n, w in by_comm.rows()),
    )


def paths_into(stacks: pl.DataFrame, own_frames: pl.Expr, whole_weight: float) -> Evidence:
    """How samples got into the category: the CALLER_FRAMES frames above its own frames at the leaf end.

    ``own_frames`` tests one frame (an element of the split stack) for membership in the category.
    """
    split = _weighted(stacks).select(
        "comm",
        "samples",
        "weight",
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
        .agg(pl.col("frames").str.join(" > ").alias("path"), pl.col("comm").first(), pl.col("samples").first(), pl.col("weight").first())
    )
    ranked = (
        callers.group_by("path", "comm")
        .agg(pl.col("samples").sum(), pl.col("weight").sum())
        .sort(["weight", "path", "comm"], descending=[True, False, False])
        .head(TOP_ROWS)
    )
    return Evidence(
        title=f"Paths into it (the {CALLER_FRAMES} caller frames above, root first)",
        columns=("callers", "process", "samples", "% of busy samples"),
        rows=tuple((path, comm, int(n), round(100.0 * w / whole_weight, 1) if whole_weight else 0.0) for path, comm, n, w in ranked.rows()),
    )


def profile_sources(inp: RuleInput) -> tuple[str, ...]:
    for name in (t.PERF_STACK, t.PERF_SYMBOL):
        frame = inp.table(name)
        if frame is not None:
            return tuple(sorted(frame["source"].unique().to_list()))
    return ()
