"""What ``iostat_text`` and ``iostat_json`` share: iostat's column names (sysstat 10 to 12, text headers and
JSON keys alike) and the ``disk_io`` column each fills, with the factor to its unit.

>>> DISK_COLUMNS["rMB/s"], DISK_COLUMNS["%util"], DISK_COLUMNS["util"]
(('read_kb_per_s', 1024.0), ('util_pct', 1.0), ('util_pct', 1.0))
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseResult, ParseWarning
from dbdiag.parsers.kit.times import zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.tables import DISK_IO, conform

# header name or JSON key -> (disk_io column, factor to its unit)
DISK_COLUMNS: dict[str, tuple[str, float]] = {
    "r/s": ("r_per_s", 1.0),
    "w/s": ("w_per_s", 1.0),
    "d/s": ("d_per_s", 1.0),
    "f/s": ("f_per_s", 1.0),
    "rkB/s": ("read_kb_per_s", 1.0),
    "rMB/s": ("read_kb_per_s", 1024.0),
    "rsec/s": ("read_kb_per_s", 0.5),  # 512-byte sectors
    "wkB/s": ("write_kb_per_s", 1.0),
    "wMB/s": ("write_kb_per_s", 1024.0),
    "wsec/s": ("write_kb_per_s", 0.5),
    "r_await": ("r_await_ms", 1.0),
    "w_await": ("w_await_ms", 1.0),
    "d_await": ("d_await_ms", 1.0),
    "f_await": ("f_await_ms", 1.0),
    "await": ("await_ms", 1.0),
    "aqu-sz": ("queue_size", 1.0),
    "avgqu-sz": ("queue_size", 1.0),
    "%util": ("util_pct", 1.0),
    "util": ("util_pct", 1.0),
    "svctm": ("svctm_ms", 1.0),
}
# Columns whose presence says a table is iostat's extended statistics (-x).
EXTENDED_MARKS = ("r_await", "w_await", "await", "aqu-sz", "avgqu-sz", "%util", "util")


def disk_io_result(rows: list[dict[str, object]], ctx: ParseContext, tz: str, reports: int, warnings: list[ParseWarning],
                   zoned: bool) -> ParseResult:
    """The ``disk_io`` table of the rows read (each a dict of its columns), the member's path as ``source``."""
    frame = pl.DataFrame(rows, infer_schema_length=None).with_columns(pl.lit(ctx.source).alias("source"))
    notes = [zone_note(tz)] if zoned else []
    return ParseResult(tables={DISK_IO: conform(DISK_IO, frame)}, records=reports, warnings=cap_warnings(warnings), notes=notes)
