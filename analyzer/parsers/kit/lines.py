"""Line splitting shared by the parsers: a member line by line in Python (``snapshot_lines``), or into
a frame of lines for the vectorised readers (``split_lines``)."""

from __future__ import annotations

from typing import Callable, Iterator

import polars as pl

CSV_READER_MIN_CHARS = 1_000_000  # split_lines: from this size lines are split by polars' CSV reader
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


def split_lines(body: str | bytes) -> pl.DataFrame:
    """One row per line (``idx`` 0-based, ``text`` without its CR). ``body`` is the text or its UTF-8
    bytes. Big texts go through polars' CSV reader (multi-threaded; NUL as separator, no quoting),
    which refuses lines holding a NUL: those texts are split in Python instead."""
    series = None
    has_cr = ("\r" if isinstance(body, str) else b"\r") in body
    if len(body) > CSV_READER_MIN_CHARS:
        data = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        try:
            series = pl.read_csv(
                data, has_header=False, separator="\x00", quote_char=None,
                new_columns=["text"], infer_schema=False, truncate_ragged_lines=False,
            )["text"].fill_null("")
        except pl.exceptions.PolarsError:
            series = None
        if series is not None and not _all_lines(series, data, has_cr):
            series = None
    if series is None:
        text = body if isinstance(body, str) else body.decode("utf-8", "surrogatepass")
        series = pl.Series("text", text.split("\n"), dtype=pl.String)
    frame = pl.DataFrame({"text": series}).with_row_index("idx").with_columns(pl.col("idx").cast(pl.Int64))
    return frame.with_columns(pl.col("text").str.strip_suffix("\r")) if has_cr else frame


def _all_lines(lines: pl.Series, data: bytes, has_cr: bool) -> bool:
    """Whether the CSV reader gave one row per line of ``data``. Without CR (which it may read as a line
    end) the line lengths and the newlines between them adding up to the size tells it cheaply; else
    (and when it drops bytes: a leading BOM) the newlines are counted."""
    if not has_cr and lines.str.len_bytes().sum() + lines.len() - 1 == len(data):
        return True
    return lines.len() == data.count(b"\n") + 1


def is_script(head: str) -> bool:
    """Whether a member is a script (``#!`` first): the config lines a script writes (a heredoc of
    ``name = value``) are no configuration the server runs with.

    >>> is_script("#!/bin/bash\\ncat > pg.conf <<EOF\\nshared_buffers = 1GB\\n"), is_script("shared_buffers = 1GB\\n")
    (True, False)
    """
    return head.lstrip("\ufeff").startswith("#!")
