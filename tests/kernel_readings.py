"""What the C-kernel tests compare: one input read four ways (decoded text and raw bytes, with and
without the kernel), which must all give the same outcome (tables, warnings and notes as JSON, or the
ParseError's text)."""

from __future__ import annotations

from typing import NamedTuple


class Readings(NamedTuple):
    """The four readings of one input: text and bytes, without and with the kernel."""

    text_without_kernel: dict | str
    text: dict | str
    bytes: dict | str
    bytes_without_kernel: dict | str
    fell_back: tuple[str, ...]  # what in the two kernel readings went the slow way (each test module says)


def assert_read_alike(readings: Readings) -> dict | str:
    """The one outcome of the four readings."""
    expected = readings.text_without_kernel
    assert readings.text == expected
    assert readings.bytes == expected
    assert readings.bytes_without_kernel == expected
    return expected
