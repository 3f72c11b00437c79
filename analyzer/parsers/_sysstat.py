"""Helpers of the sysstat family (``mpstat_text``, ``mpstat_json``, ``sadf``): the banner date, clock
fields, midnight wraps, the percent-column names shared by mpstat, sar and sadf, and the banner's host facts.

>>> parse_sysstat_date("11/29/26")
datetime.date(2026, 11, 29)
"""

from __future__ import annotations

import re
from datetime import date

import polars as pl

from dbdiag import tables as T

HALF_DAY_S = 12 * 3600

# Header name -> column, for mpstat, sar and sadf/JSON key spellings alike.
PCT_COLUMNS = {
    "usr_pct": ("%usr", "%user", "usr", "user"),
    "nice_pct": ("%nice", "nice"),
    "sys_pct": ("%sys", "%system", "sys", "system"),
    "iowait_pct": ("%iowait", "iowait"),
    "irq_pct": ("%irq", "irq"),
    "soft_pct": ("%soft", "soft"),
    "steal_pct": ("%steal", "steal"),
    "guest_pct": ("%guest", "guest"),
    "gnice_pct": ("%gnice", "gnice"),
    "idle_pct": ("%idle", "idle"),
}
SYSTEM_INCLUDES_IRQ_NOTE = "CPU table has %system (sar -u): irq and softirq time are inside sys_pct, not split out"


def parse_sysstat_date(text: str | None) -> date | None:
    """The banner date: ``11/29/26``, ``01/02/2020``, ``2026-11-29``, ``29.11.2026`` (locale %x)."""
    m = re.fullmatch(r"(\d{1,4})([/.\-])(\d{1,2})\2(\d{1,4})", (text or "").strip())
    if not m:
        return None
    first, sep, second, third = m.group(1), m.group(2), int(m.group(3)), int(m.group(4))
    if len(first) == 4:
        year, month, day = int(first), second, third
    elif sep == ".":
        day, month, year = int(first), second, third
    else:
        month, day, year = int(first), second, third
        if month > 12 >= day:  # en_GB and similar print DD/MM/YY
            month, day = day, month
    if year < 100:
        year += 2000 if year < 70 else 1900
    try:
        return date(year, month, day)
    except ValueError:
        return None


def clock_seconds(hh: pl.Expr, mi: pl.Expr, ss: pl.Expr, ampm: pl.Expr) -> pl.Expr:
    """Seconds since midnight from text clock fields (12 h when ``ampm`` is set); null if invalid."""
    h, m, s = (e.cast(pl.Int32, strict=False) for e in (hh, mi, ss))
    pm = ampm.str.to_uppercase() == "PM"
    am = ampm.str.to_uppercase() == "AM"
    h24 = pl.when(pm & (h < 12)).then(h + 12).when(am & (h == 12)).then(0).otherwise(h)
    valid = (h24 < 24) & (m < 60) & (s < 60) & (ampm.is_null() | ((h >= 1) & (h <= 12)))
    return pl.when(valid).then(h24 * 3600 + m * 60 + s)


def midnight_wraps(tod: pl.Expr) -> pl.Expr:
    """Running count of midnights passed: a time more than 12 h lower than the previous one.

    Small steps back (a clock adjustment) are not a new day. Use with ``.over(...)``.
    """
    wrapped = (tod.shift(1) - tod) > HALF_DAY_S
    return wrapped.fill_null(False).cast(pl.Int32).cum_sum()



def host_facts(rows: list[dict[str, object]], source: str) -> pl.DataFrame:
    """host_fact rows from dicts of {key: value}; empty values dropped, duplicates once."""
    pairs = [(k, str(v)) for row in rows for k, v in row.items() if v not in (None, "")]
    return T.host_fact_frame(list(dict.fromkeys(pairs)), source)


def to_float(expr: pl.Expr) -> pl.Expr:
    """Text number -> Float64 (decimal comma accepted, as some locales print it); null if not one."""
    return expr.str.replace(",", ".", literal=True).cast(pl.Float64, strict=False)


def cpu_number(expr: pl.Expr) -> pl.Expr:
    """``all`` (or sadf's ``-1``) -> -1, a number -> itself, anything else -> null."""
    return pl.when(expr == "all").then(pl.lit(-1, pl.Int32)).otherwise(expr.cast(pl.Int32, strict=False))


# ---- detection --------------------------------------------------------------------------------
