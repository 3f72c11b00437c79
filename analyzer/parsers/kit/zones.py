"""Times written with a zone abbreviation or offset (``2024-01-01 10:00:00.123 CEST``, ``+05:30``)
-> UTC, for the logs that print one (PostgreSQL's %t/%m, and the MySQL, TiDB and kernel logs that
read their times the same way), and the notes that say how each zone was read.

    >>> zone_offset_s("CEST"), zone_offset_s("-0530"), zone_offset_s("IST")
    (7200, -19800, None)
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers.kit.times import local_to_utc

# Fixed offsets of zone abbreviations PostgreSQL prints with %t/%m (log_timezone). Ambiguous ones
# (CST: US or China, IST: India, Israel or Ireland) are left out on purpose: read in --tz instead.
ZONE_OFFSETS_S = {
    "UTC": 0, "GMT": 0, "UT": 0, "Z": 0, "WET": 0, "WEST": 3600, "BST": 3600,
    "CET": 3600, "CEST": 7200, "MET": 3600, "MEST": 7200, "EET": 7200, "EEST": 10800, "MSK": 10800,
    "SAST": 7200, "EAT": 10800, "WAT": 3600, "CAT": 7200, "PKT": 18000, "WIB": 25200, "HKT": 28800,
    "AWST": 28800, "JST": 32400, "KST": 32400, "ACST": 34200, "ACDT": 37800, "AEST": 36000, "AEDT": 39600,
    "NZST": 43200, "NZDT": 46800, "HST": -36000, "AKST": -32400, "AKDT": -28800, "PST": -28800, "PDT": -25200,
    "MST": -25200, "MDT": -21600, "CDT": -18000, "EST": -18000, "EDT": -14400, "AST": -14400, "ADT": -10800,
    "NST": -12600, "NDT": -9000,
}


def zone_offset_s(zone: str) -> int | None:
    """Seconds east of UTC for ``UTC``/``CEST``/``+03``/``-0530``/``+05:30``; None when unknown."""
    match = re.fullmatch(r"([+-])(\d\d):?(\d\d)?", zone)
    if match:
        seconds = int(match.group(2)) * 3600 + int(match.group(3) or 0) * 60
        return -seconds if match.group(1) == "-" else seconds
    return ZONE_OFFSETS_S.get(zone.upper())


def stamp_to_utc(stamp: pl.Expr, zone: pl.Expr, tz: str, zones: list[str | None], with_t: bool = True) -> pl.Expr:
    """``2024-01-01 10:00:00[.123]`` (or with ``T`` when ``with_t``) and a zone text -> Datetime(us, UTC).

    ``zones`` lists the distinct zone texts, None for entries without one (offsets are looked up once
    each). A known zone gives a fixed offset; no zone or an unknown/ambiguous one is read in ``tz``.
    When every zone is known (the usual case) the reading in ``tz`` is left out of the expression."""
    if with_t:
        stamp = stamp.str.replace("T", " ", literal=True)
    naive = stamp.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="us")
    offsets = {z: zone_offset_s(z) for z in zones if z is not None}
    if offsets and None not in zones and None not in offsets.values() and set(offsets.values()) == {0}:
        return naive.dt.replace_time_zone("UTC")
    offset = zone.replace_strict(offsets, default=None, return_dtype=pl.Int64) if offsets else pl.lit(None, dtype=pl.Int64)
    fixed = (naive - pl.duration(seconds=offset)).dt.replace_time_zone("UTC")
    if offsets and None not in zones and None not in offsets.values():
        return fixed
    return pl.when(offset.is_not_null()).then(fixed).otherwise(local_to_utc(naive, tz))


def zone_notes(zone_counts: dict[str | None, int], tz: str) -> list[str]:
    """Notes on how zones were read (``zone_counts``: zone text or None -> entries): which
    abbreviations were converted, which fell back to ``tz``."""
    names = sorted(z for z in zone_counts if z is not None)
    unknown = [z for z in names if zone_offset_s(z) is None]
    notes = []
    if zone_counts.get(None):
        notes.append(f"{zone_counts[None]} log times have no zone; read as {tz} (--tz)")
    if unknown:
        notes.append(f"zone abbreviation(s) {', '.join(unknown[:5])} unknown or ambiguous; those times read as {tz} (--tz)")
    known = [z for z in names if z not in unknown]
    if known:
        notes.append(f"log times carry zone {', '.join(known[:5])}; converted to UTC")
    return notes


def zone_counts(zones: pl.Series) -> dict[str | None, int]:
    return {zone: count for zone, count in zones.value_counts().iter_rows()}
