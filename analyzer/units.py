"""Numbers as a person reads them in findings and reports."""

from __future__ import annotations


def seconds(value: float | None) -> str:
    """A duration at a glance: ``38.2 s``, ``62.0 ms``, ``850 µs``; ``—`` when unknown."""
    if value is None:
        return "—"
    if value >= 1:
        return f"{value:,.1f} s"
    if value >= 0.001:
        return f"{value * 1000:.1f} ms"
    return f"{value * 1_000_000:.0f} µs"
