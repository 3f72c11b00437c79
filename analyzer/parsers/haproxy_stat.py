"""HAProxy ``show stat`` CSV (stats socket or the stats page ``;csv``), one or many snapshots.

Raw input (any HAProxy version: 1.4/1.5 print ~50 columns, 2.x over 100, 3.x more; every row
ends with a comma; a capture script may write a time line before each snapshot)::

    TS 1795992677.503363111 2026-11-29 22:51:17
    # pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,...,type,rate,rate_lim,rate_max,...
    fe_app,FRONTEND,,,20,20,20,80,0,0,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,,,0,20,0,20,...
    fe_app,lst_app,,,20,20,0,80,...,WAITING,...,3,...
    be_app,app1,0,0,10,10,10,40,...,no check,...,2,10,,10,...
    be_app,BACKEND,0,0,20,20,2,80,...,UP,...,1,20,,20,...

Output table ``proxy_stat`` (one row per snapshot and proxy/server line):

    snapshot  Int32     0, 1, ... in the order the ``# pxname`` headers appear
    ts        Datetime  the time line before the snapshot (``TS <epoch>``, epoch, ISO, ``date``
                        output; zone-less ones read in --tz and noted), else null
    proxy     String    pxname
    server    String    svname: FRONTEND, BACKEND, a server or a listener name
    type      String    the ``type`` column 0/1/2/3 as frontend/backend/server/listener (from
                        svname when the column is absent)
    status    String    OPEN, UP, DOWN, "UP 1/2", "no check", WAITING, ...
    scur smax slim stot qcur qmax qlimit rate rate_max ereq econ eresp
              Int64     as printed; an empty cell (not applicable to this row type) is null
    source    String    member path
    line      Int64     line of the row in the member

``records`` is the number of snapshots. Columns are found by the names in each snapshot's
header, so any column count reads. Rows before the first header are skipped with a warning.

>>> from dbdiag.parsers.base import ParseContext
>>> text = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,status,type,\\nfe,FRONTEND,,,20,20,20,80,OPEN,0,\\n"
>>> parse(text, ParseContext("stat.csv")).tables["proxy_stat"].select("proxy", "type", "scur", "slim", "qcur").rows()
[('fe', 'frontend', 20, 20, None)]
"""

from __future__ import annotations

import io
import re

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.times import check_tz, parse_time_line, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

_HEADER_RE = lazy_compile(r"^#\s*pxname,svname,", re.MULTILINE)
TYPE_NAMES = {"0": "frontend", "1": "backend", "2": "server", "3": "listener"}
INT_COLUMNS = ("scur", "smax", "slim", "stot", "qcur", "qmax", "qlimit", "rate", "rate_max", "ereq", "econ", "eresp")
TEXT_COLUMNS = ("pxname", "svname", "status", "type")


def _line_kinds(lines: pl.Series) -> pl.DataFrame:
    """Each line classified: header, data (a CSV row), blank or other (time lines, comments)."""
    frame = pl.DataFrame({"text": lines}).with_row_index("line", offset=1)
    stripped = pl.col("text").str.strip_chars()
    header = pl.col("text").str.contains(r"^#\s*pxname,svname,")
    data = ~header & (stripped != "") & ~stripped.str.starts_with("#") & stripped.str.contains(",")
    return frame.with_columns(
        header=header,
        data=data,
        snapshot=header.cast(pl.Int32).cum_sum() - 1,
    )


def _snapshot_times(lines: list[str], header_lines: list[int], tz: str, warnings: list[ParseWarning]) -> tuple[list, bool]:
    """The time line written before each header (blank lines between are allowed)."""
    times, zone_applied = [], False
    for number in header_lines:
        index = number - 2  # 0-based index of the line above the header
        while index >= 0 and not lines[index].strip():
            index -= 1
        parsed = parse_time_line(lines[index], tz) if index >= 0 and "," not in lines[index] else None
        if parsed is None and index >= 0 and not lines[index].lstrip().startswith("#") and "," not in lines[index]:
            warnings.append(ParseWarning(index + 1, f"not a time line: {lines[index].strip()[:40]!r}; snapshot kept without time"))
        times.append(parsed[0] if parsed else None)
        zone_applied = zone_applied or bool(parsed and parsed[1])
    return times, zone_applied


def _header_names(line: str) -> list[str]:
    return [name.strip() for name in re.sub(r"^#\s*", "", line.strip()).split(",")]


def _cells(data_lines: pl.DataFrame, width: int) -> pl.DataFrame:
    """The data rows split as CSV (HAProxy quotes cells holding commas), ``width`` columns."""
    # a first row of ``width`` empty cells fixes the column count (polars takes it from row one)
    body = "," * (width - 1) + "\n" + "\n".join(data_lines["text"].str.strip_suffix("\r").to_list()) + "\n"
    try:
        cells = pl.read_csv(
            io.StringIO(body),
            has_header=False,
            new_columns=[f"c{i}" for i in range(width)],
            infer_schema=False,
            truncate_ragged_lines=True,
            quote_char='"',
        ).slice(1)
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as error:
        raise ParseError(f"show stat rows not readable as CSV: {str(error).splitlines()[0][:120]}") from None
    if cells.height != data_lines.height:
        raise ParseError(f"show stat rows not readable as CSV ({cells.height} rows read of {data_lines.height})")
    return pl.concat([data_lines.select("line", "snapshot"), cells], how="horizontal")


def _typed(cells: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Rows of one header layout, with the output columns picked by name."""
    position = {}
    for index, name in enumerate(names):
        position.setdefault(name, index)

    def column(name: str) -> pl.Expr:
        return pl.col(f"c{position[name]}") if name in position else pl.lit(None, pl.String)

    text = {name: column(name).str.strip_chars() for name in TEXT_COLUMNS}
    svname_type = (
        pl.when(text["svname"] == "FRONTEND").then(pl.lit("frontend"))
        .when(text["svname"] == "BACKEND").then(pl.lit("backend"))
        .otherwise(pl.lit("server"))
    )
    return cells.select(
        "line",
        "snapshot",
        proxy=text["pxname"],
        server=text["svname"],
        type=text["type"].replace_strict(TYPE_NAMES, default=None).fill_null(svname_type) if "type" in position else svname_type,
        type_raw=text["type"],
        status=pl.when(text["status"] != "").then(text["status"]),
        **{name: column(name).str.strip_chars().replace("", None) for name in INT_COLUMNS},
    )


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if _HEADER_RE.search(text) is None:
        raise ParseError("no HAProxy show stat header (# pxname,svname,...) found")
    tz, tz_warning = check_tz(ctx.tz)
    warnings = [tz_warning] if tz_warning else []
    raw_lines = text.lstrip("\ufeff").split("\n")
    kinds = _line_kinds(pl.Series(raw_lines, dtype=pl.String))
    headers = kinds.filter(pl.col("header"))
    orphans = kinds.filter(pl.col("data") & (pl.col("snapshot") < 0))
    if orphans.height:
        warnings.append(ParseWarning(orphans["line"][0], f"{orphans.height} rows before the first # pxname header skipped"))
    data = kinds.filter(pl.col("data") & (pl.col("snapshot") >= 0))
    layouts = [_header_names(line) for line in headers["text"].to_list()]
    times, zone_applied = _snapshot_times(raw_lines, headers["line"].to_list(), tz, warnings)
    frames = []
    if data.height:
        cells = _cells(data, max(len(names) for names in layouts) + 1)
        layout_of = {}
        for snapshot, names in enumerate(layouts):
            layout_of.setdefault(tuple(names), []).append(snapshot)
        for names, snapshots in layout_of.items():
            part = cells.filter(pl.col("snapshot").is_in(snapshots))
            if part.height:
                frames.append(_typed(part, list(names)))
    if not frames:
        raise ParseError("HAProxy show stat header found but no proxy rows")
    rows = pl.concat(frames).sort("line")
    stamp = pl.DataFrame(
        {"snapshot": list(range(len(times))), "ts": pl.Series(times, dtype=T.UTC_TIME)},
        schema={"snapshot": pl.Int32, "ts": T.UTC_TIME},
    )
    typed = rows.with_columns(**{name: pl.col(name).cast(pl.Int64, strict=False) for name in INT_COLUMNS})
    bad = rows.select(
        pl.any_horizontal(pl.col(name).is_not_null() & typed[name].is_null() for name in INT_COLUMNS).alias("bad"), "line"
    ).filter(pl.col("bad"))
    for line in bad["line"].to_list():
        warnings.append(ParseWarning(line, "a counter is not an integer; read as null"))
    unknown_type = rows.filter(pl.col("type_raw").is_not_null() & (pl.col("type_raw") != "") & ~pl.col("type_raw").is_in(list(TYPE_NAMES)))
    for line, value in unknown_type.select("line", "type_raw").iter_rows():
        warnings.append(ParseWarning(line, f"unknown type {value[:10]!r}; type taken from svname"))
    frame = typed.join(stamp, on="snapshot", how="left").with_columns(source=pl.lit(ctx.source))
    plural = "" if len(layouts) == 1 else "s"
    notes = [f"{len(layouts)} snapshot{plural}, {frame.height} rows, {len(layouts[0])} columns in the first header"]
    if zone_applied:
        notes.append(zone_note(tz))
    stamped = [t for t in times if t is not None]
    return ParseResult(
        tables={T.PROXY_STAT: T.conform(T.PROXY_STAT, frame)},
        records=len(layouts),
        warnings=cap_warnings(warnings),
        notes=notes,
        time_range=(min(stamped), max(stamped)) if stamped else None,
    )


def detect(head: str, name: str) -> float:
    match = _HEADER_RE.search(head)
    if match is None:
        return 0.0
    line = head[match.start():].split("\n", 1)[0]
    return 0.95 if {"scur", "slim", "stot"} <= set(_header_names(line)) else 0.7


SPEC = ParserSpec(
    kind="haproxy-stat",
    description="HAProxy show stat CSV (any version's column set, several snapshots with time lines): sessions per proxy/server",
    detect=detect,
    parse=parse,
)
