"""Numbers and SQL samples as a person reads them in findings and reports."""

from __future__ import annotations


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
    """Bytes for a reader: ``1.5 GiB``, ``256 MiB``.

    >>> gib(268435456), gib(3 * 2**30 // 2)
    ('256 MiB', '1.5 GiB')
    """
    if size_bytes_ >= 2**30:
        return f"{size_bytes_ / 2**30:.1f} GiB"
    return f"{size_bytes_ / 2**20:.0f} MiB"


SAMPLE_CHARS = 2000  # SQL samples in metrics and evidence: blanks collapsed, cut with "…"


def short_sample(sql: str | None) -> str:
    """``sql`` with its blanks collapsed, cut at SAMPLE_CHARS with "…" (how every SQL sample is shown).

    >>> short_sample("SELECT  *\t  FROM t"), len(short_sample("x" * 3000))
    ('SELECT * FROM t', 2000)
    """
    text = " ".join((sql or "").split())
    return text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"
