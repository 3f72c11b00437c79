"""Numbers and SQL samples as a person reads them in findings and reports."""

from __future__ import annotations

import math


def seconds(value: float | None) -> str:
    """A duration at a glance; ``—`` when unknown.

    >>> [seconds(v) for v in (38.24, 0.062, 0.00085, 0.99999, 0.0009999, None)]
    ['38.2 s', '62.0 ms', '850 µs', '1.0 s', '1.0 ms', '—']
    """
    if value is None:
        return "—"
    # Thresholds sit where rounding would otherwise print "1000.0 ms" or "1000 µs".
    if value >= 0.99995:
        return f"{value:,.1f} s"
    if value >= 0.0009995:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1_000_000:.0f} µs"


def gib(size_bytes_: float) -> str:
    """Bytes for a reader: ``1.5 GiB``, ``256 MiB``; below a MiB in KiB (PostgreSQL's 128kB is not "0 MiB").

    >>> gib(268435456), gib(3 * 2**30 // 2), gib(131072), gib(512)
    ('256 MiB', '1.5 GiB', '128 KiB', '512 B')
    """
    if size_bytes_ >= 2**30:
        return f"{size_bytes_ / 2**30:.1f} GiB"
    if size_bytes_ >= 2**20:
        return f"{size_bytes_ / 2**20:.0f} MiB"
    if size_bytes_ >= 2**10:
        return f"{size_bytes_ / 2**10:.0f} KiB"
    return f"{size_bytes_:.0f} B"


def share_text(pct: float) -> str:
    """A percentage for a reader: one decimal; two significant digits where one decimal would say "0.0%" of a share above 0.

    >>> share_text(12.345), share_text(0.098), share_text(0.0017), share_text(0.000095), share_text(0.0)
    ('12.3%', '0.1%', '0.0017%', '0.000095%', '0.0%')
    """
    if 0 < abs(pct) < 0.05:
        return f"{pct:.{1 - math.floor(math.log10(abs(pct)))}f}%"  # two significant digits, never an exponent
    return f"{pct:.1f}%"


SAMPLE_CHARS = 2000  # SQL samples in metrics and evidence: blanks collapsed, cut with "…"


def short_sample(sql: str | None) -> str:
    """``sql`` with its blanks collapsed, cut at SAMPLE_CHARS with "…" (how every SQL sample is shown).

    >>> short_sample("SELECT  *\t  FROM t"), len(short_sample("x" * 3000))
    ('SELECT * FROM t', 2000)
    """
    text = " ".join((sql or "").split())
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"
