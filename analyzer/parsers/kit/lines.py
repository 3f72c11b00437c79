"""Line splitting shared by the parsers that read a member line by line in Python."""

from __future__ import annotations

from typing import Callable, Iterator

MAX_LINE_CHARS = 4096  # snapshot_lines: a longer line is no counter row (binary, a runaway write)


def snapshot_lines(text: str, warn: Callable[[int | None, str], None]) -> Iterator[tuple[int, str]]:
    """(1-based number, line without its CR) of every non-blank line; one longer than MAX_LINE_CHARS
    is handed to ``warn`` and skipped.

    >>> list(snapshot_lines("numa_hit 5\\r\\n\\n   \\n" + "x" * 5000 + "\\nlocal_node 4", print))
    4 line of 5000 characters; skipped
    [(1, 'numa_hit 5'), (5, 'local_node 4')]
    """
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        if len(line) > MAX_LINE_CHARS:
            warn(number, f"line of {len(line)} characters; skipped")
            continue
        yield number, line


