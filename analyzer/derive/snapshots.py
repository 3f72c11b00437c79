"""Order counter snapshots taken in several files and turn them into deltas.

Captures keep ``/proc/softirqs`` and ``/proc/interrupts`` as ``softirqs.before`` /
``softirqs.after``, ``interrupts.0`` / ``interrupts.1``, or many snapshots in one file.
File names carry the order; alphabetical order would put "after" before "before".
"""

from __future__ import annotations

import re
from typing import NamedTuple

import polars as pl

from dbdiag.patterns import lazy_compile

_ORDER_WORDS = {"before": 0, "start": 0, "begin": 0, "first": 0, "pre": 0, "after": 1, "end": 1, "last": 1, "post": 1}
_TRAILING_NUMBER = lazy_compile(r"(\d+)(?:\.txt)?$")


def source_order_key(source: str) -> tuple[int, int, str]:
    """Sort key for a snapshot file: before/after words first, then a trailing number, then the name."""
    name = source.rsplit("/", 1)[-1].lower()
    for word, rank in _ORDER_WORDS.items():
        if re.search(rf"(^|[._-]){word}([._-]|$)", name):
            return (rank, 0, name)
    number = _TRAILING_NUMBER.search(name)
    return (0, int(number.group(1)) if number else 0, name)


def ordered_snapshots(frame: pl.DataFrame) -> pl.DataFrame:
    """Add ``seq`` (0..n-1): the global order of (source, snapshot) pairs."""
    pairs = frame.select("source", "snapshot").unique()
    ordered = sorted(pairs.rows(), key=lambda pair: (source_order_key(pair[0]), pair[1]))
    order = pl.DataFrame(
        {"source": [p[0] for p in ordered], "snapshot": [p[1] for p in ordered], "seq": list(range(len(ordered)))},
        schema={"source": pl.String, "snapshot": pl.Int32, "seq": pl.Int32},
    )
    return frame.join(order, on=["source", "snapshot"], how="left")


class SnapshotEnds(NamedTuple):
    first: pl.DataFrame  # the rows of the first snapshot
    last: pl.DataFrame  # of the last
    seconds: float | None  # between their time lines (None when one has none)


def first_and_last(frame: pl.DataFrame | None) -> SnapshotEnds | None:
    """The first and the last snapshot of a counter table (``ordered_snapshots``' order), or None with fewer than two."""
    if frame is None or frame.height == 0:
        return None
    seq = ordered_snapshots(frame)
    first, last = seq["seq"].min(), seq["seq"].max()
    if first == last:
        return None
    start, end = seq.filter(pl.col("seq") == first), seq.filter(pl.col("seq") == last)
    first_ts, last_ts = start["ts"][0], end["ts"][0]
    seconds = (last_ts - first_ts).total_seconds() if first_ts is not None and last_ts is not None else None
    return SnapshotEnds(start, end, seconds)


def first_to_last_delta(frame: pl.DataFrame, keys: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """Counter growth from the first to the last snapshot per ``keys``, with the sources used.

    Returns (frame with ``keys`` + ``delta``, [first source, last source]). Negative growth
    (counter reset by a reboot) is clamped to 0 rather than reported as a huge number.
    """
    seq = ordered_snapshots(frame)
    first, last = seq["seq"].min(), seq["seq"].max()
    if first == last:
        return pl.DataFrame(), []
    start = seq.filter(pl.col("seq") == first).group_by(keys).agg(pl.col("count").sum().alias("start"))
    end = seq.filter(pl.col("seq") == last).group_by(keys).agg(pl.col("count").sum().alias("end"))
    delta = end.join(start, on=keys, how="left").with_columns(
        (pl.col("end") - pl.col("start").fill_null(0)).clip(lower_bound=0).alias("delta")
    )
    sources = [
        seq.filter(pl.col("seq") == first)["source"][0],
        seq.filter(pl.col("seq") == last)["source"][0],
    ]
    return delta.drop("start", "end"), sources
