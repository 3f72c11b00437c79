"""sar data exported with ``sadf -d`` (semicolon CSV, one activity per ``#`` header) or ``sadf -dh``.

Only the CPU activity (``sar -u`` / ``-u ALL``) is read; other activities are skipped, as are
``COM`` (comment) rows. ``LINUX-RESTART`` rows (sadc's mark of a boot) become ``event`` rows.

Sample input (``sadf -d -- -u ALL -P ALL``)::

    # hostname;interval;timestamp;CPU;%usr;%nice;%sys;%iowait;%steal;%irq;%soft;%guest;%gnice;%idle
    SYSSTAT.TEST;31;2019-04-18 13:20:19 UTC;-1;2.15;12.50;1.84;0.12;0.00;0.34;0.19;0.00;0.00;82.88
    SYSSTAT.TEST;31;2019-04-18 13:20:19 UTC;0;2.71;0.03;2.16;0.00;0.00;0.32;0.64;0.00;0.00;94.14
    # hostname;interval;timestamp;proc/s;cswch/s
    SYSSTAT.TEST;31;2019-04-18 13:20:19 UTC;3.56;68409.30
    SYSSTAT.TEST;-1;2019-04-18 13:37:29 UTC;LINUX-RESTART\t(9 CPU)

``sadf -dh`` puts all activities of an interval on one line; a ``[...]`` in the header marks a
group repeated once per CPU (``CPU;%usr;...;%idle[...];INTR;CPU*[...]``). Where another group
follows the CPU group, the CPU groups are told apart by their content: an integer CPU number
and percentages adding up to about 100 (or all zero for an offline CPU).

Output tables (see ``dbdiag.tables``):

- ``cpu_util``: ts, cpu (``-1`` = all), usr_pct ... idle_pct by header name (plain ``sar -u``
  has ``%user``/``%system``: irq and soft are then inside sys_pct and null), source.
- ``host_fact``: hostname.
- ``event``: one ``host-restart`` row per ``LINUX-RESTART`` record (ts, host, component ``host``,
  message ``LINUX-RESTART (9 CPU)``, line); the same record repeated under several activities once.

Timestamps are UTC (``2019-04-18 13:20:19 UTC``). ``sadf -T`` prints local times without a zone:
those are read in ``ctx.tz`` (said in a note); ``-U`` epoch seconds are UTC.
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers import log_events as E
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers._sysstat import PCT_COLUMNS, SYSTEM_INCLUDES_IRQ_NOTE, host_facts, to_float
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

HEADER_PREFIX = "# hostname;interval;timestamp;"
STAMP_RE = r"^(?P<clock>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?: (?P<zone>\S+))?$|^(?P<epoch>\d{9,11})$"
DATA_RE = lazy_compile(r"^[^;\s]+;-?\d+;(?:\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?: \S+)?|\d{9,11});")
GROUP_MARK = "[...]"
RESTART_RE = r"^(?P<host>[^;]*);-1;(?P<stamp>[^;]*);LINUX-RESTART(?:\s+\((?P<ncpu>\d+) CPU\))?"
PCT_SUM_TOLERANCE = 1.5


def _is_cpu_header(fields: list[str]) -> bool:
    return bool(fields) and fields[0] == "CPU" and "%idle" in fields and bool({"%usr", "%user"} & set(fields))


def detect(head: str, name: str) -> float:
    lines = [ln.rstrip("\r") for ln in head.lstrip("\ufeff").split("\n") if ln.strip()]
    if not lines:
        return 0.0
    if lines[0].startswith(HEADER_PREFIX):
        fields = lines[0][len(HEADER_PREFIX):].replace(GROUP_MARK, "").split(";")
        return 0.95 if _is_cpu_header(fields) else 0.6
    if DATA_RE.match(lines[0]):
        return 0.3  # sadf rows without their header: columns cannot be named
    return 0.0


def _timestamps(stamp: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr]:
    """(ts in UTC, is_zone_less) from sadf's timestamp column."""
    parts = stamp.str.extract_groups(STAMP_RE)
    clock = parts.struct.field("clock").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False).cast(pl.Datetime("us"))
    zone = parts.struct.field("zone")
    utc_zone = zone.is_in(["UTC", "GMT", "Z"])
    epoch = pl.from_epoch(parts.struct.field("epoch").cast(pl.Int64, strict=False), time_unit="s")
    ts = pl.coalesce(
        epoch.cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
        pl.when(utc_zone).then(clock.dt.replace_time_zone("UTC")),
        pl.when(zone.is_null()).then(local_to_utc(clock, tz)),
    ).cast(T.UTC_TIME)
    return ts, clock.is_not_null() & zone.is_null()


def _cpu_columns(names: list[str]) -> dict[str, int]:
    """Schema column -> index of its field in ``names`` (the header fields after the timestamp)."""
    found = {}
    for column, spellings in PCT_COLUMNS.items():
        index = next((names.index(s) for s in spellings if s in names), None)
        if index is not None:
            found[column] = index
    return found


def _rows_d(lines: pl.DataFrame) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """``sadf -d``: rows under CPU headers -> cpu_util columns (plus line, host)."""
    is_header = pl.col("text").str.starts_with("# ")
    lines = lines.with_columns(block=is_header.cum_sum())
    headers = lines.filter(is_header).select("block", header=pl.col("text"))
    cpu_headers = {
        h: h[len(HEADER_PREFIX):].split(";")
        for h in headers["header"].unique().to_list()
        if h.startswith(HEADER_PREFIX) and _is_cpu_header(h[len(HEADER_PREFIX):].split(";"))
    }
    rows = lines.filter(~is_header & (pl.col("text") != "")).join(headers, on="block", how="inner")
    rows = rows.filter(pl.col("header").is_in(list(cpu_headers)))
    fields = pl.col("text").str.split(";")
    rows = rows.with_columns(fields=fields, nfields=fields.list.len())
    # restart and comment records: interval -1 and a text in the 4th field
    marker = pl.col("fields").list.get(1, null_on_oob=True) == "-1"
    rows = rows.filter(~marker)
    frames, warnings = [], []
    for header, names in cpu_headers.items():
        block = rows.filter(pl.col("header") == header)
        n = len(names) + 3
        warnings += [
            ParseWarning(line, f"{k} fields where the CPU header has {n}; row skipped")
            for line, k in block.filter(pl.col("nfields") != n).select("line", "nfields").iter_rows()
        ]
        block = block.filter(pl.col("nfields") == n)
        get = lambda i: pl.col("fields").list.get(i, null_on_oob=True)  # noqa: E731
        frames.append(block.select(
            "line",
            host=get(0),
            stamp=get(2),
            cpu_text=get(3),
            **{column: to_float(get(3 + i)) for column, i in _cpu_columns(names).items()},
        ))
    frame = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return frame, warnings


def _rows_dh(lines: list[tuple[int, str]]) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """``sadf -dh``: one line per interval; cut the repeated CPU group into one row per CPU."""
    records, warnings = [], []
    names: list[str] | None = None
    last_group = False
    for line_no, text in lines:
        if text.startswith("# "):
            groups = text[len(HEADER_PREFIX):].split(GROUP_MARK) if text.startswith(HEADER_PREFIX) else [""]
            first = groups[0].split(";")
            names = first if _is_cpu_header(first) and len(groups) > 1 else None
            last_group = len(groups) == 2 and groups[1] == ""
            continue
        fields = text.split(";")
        if names is None or not text or (len(fields) > 1 and fields[1] == "-1"):
            continue
        width = len(names)
        values = fields[3:]
        if last_group and len(values) % width:
            warnings.append(ParseWarning(line_no, f"{len(values)} CPU fields, not a multiple of {width}; row skipped"))
            continue
        count = 0
        while len(values) >= width * (count + 1):
            group = values[count * width:(count + 1) * width]
            if not last_group and not _looks_like_cpu_group(group):
                break
            records.append({"line": line_no, "host": fields[0], "stamp": fields[2], "cpu_text": group[0],
                            **{column: group[i] for column, i in _cpu_columns(names).items()}})
            count += 1
        if not count:
            warnings.append(ParseWarning(line_no, "no CPU group could be read; row skipped"))
    if not records:
        return pl.DataFrame(), warnings
    frame = pl.DataFrame(records, infer_schema_length=None)
    return frame.with_columns(to_float(pl.col(c)) for c in PCT_COLUMNS if c in frame.columns), warnings


def _looks_like_cpu_group(group: list[str]) -> bool:
    if not re.fullmatch(r"-?\d+", group[0]) or int(group[0]) < -1:
        return False
    try:
        total = sum(float(v.replace(",", ".")) for v in group[1:])
    except ValueError:
        return False
    return total == 0 or abs(total - 100) <= PCT_SUM_TOLERANCE


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text.strip():
        raise ParseError("empty file")
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    notes: list[str] = []
    lines = pl.DataFrame({"text": text.lstrip("\ufeff").split("\n")}, schema={"text": pl.String})
    lines = lines.with_row_index("line", offset=1)
    lines = lines.with_columns(pl.col("line").cast(pl.Int64), pl.col("text").str.strip_chars_end())
    header_lines = lines.filter(pl.col("text").str.starts_with(HEADER_PREFIX))["text"]
    if not header_lines.len():
        raise ParseError("no '# hostname;interval;timestamp;...' header line")
    if header_lines.str.contains(GROUP_MARK, literal=True).any():
        rows, row_warnings = _rows_dh(lines.select("line", "text").rows())
    else:
        rows, row_warnings = _rows_d(lines)
    warnings += row_warnings
    if not rows.height:
        raise ParseError("no CPU activity (sar -u) rows; other sar activities are not read")

    ts, zone_less = _timestamps(pl.col("stamp"), tz)
    rows = rows.with_columns(ts=ts, zone_less=zone_less, cpu=pl.col("cpu_text").cast(pl.Int32, strict=False))
    bad = rows.filter(pl.col("ts").is_null() | pl.col("cpu").is_null())
    for line, stamp, cpu in bad.select("line", "stamp", "cpu_text").iter_rows():
        warnings.append(ParseWarning(line, f"unreadable timestamp {stamp!r} or CPU {cpu!r}; row skipped"))
    rows = rows.filter(pl.col("ts").is_not_null() & pl.col("cpu").is_not_null())
    if not rows.height:
        raise ParseError("no CPU row with a readable timestamp")
    if rows["zone_less"].any():
        notes.append(zone_note(tz))
    if "sys_pct" in rows.columns and "irq_pct" not in rows.columns:
        notes.append(SYSTEM_INCLUDES_IRQ_NOTE)
    restarts = _restart_events(lines, tz, ctx.source)
    if restarts.height:
        notes.append(f"{restarts.height} LINUX-RESTART records (the host rebooted during the recording): host-restart events")
    activities = [h[len(HEADER_PREFIX):].replace(GROUP_MARK, "").split(";") for h in header_lines.to_list()]
    if not all(_is_cpu_header(fields) and len(fields) == 1 + len(_cpu_columns(fields)) for fields in activities):
        notes.append("activities other than CPU utilisation are not read")

    cpu_util = T.conform(T.CPU_UTIL, rows.with_columns(source=pl.lit(ctx.source)))
    hosts = rows["host"].unique(maintain_order=True).to_list()
    return ParseResult(
        tables={
            T.CPU_UTIL: cpu_util,
            T.HOST_FACT: host_facts([{"hostname": h} for h in hosts], ctx.source),
            **({T.EVENT: restarts} if restarts.height else {}),
        },
        records=cpu_util["ts"].n_unique(),
        warnings=cap_warnings(warnings),
        notes=notes,
        time_range=(cpu_util["ts"].min(), cpu_util["ts"].max()),
    )


def _restart_events(lines: pl.DataFrame, tz: str, source: str) -> pl.DataFrame:
    """``host;-1;2019-04-18 13:37:29 UTC;LINUX-RESTART\t(9 CPU)`` -> ``event`` rows (kind host-restart)."""
    rows = lines.filter(pl.col("text").str.contains(r"^[^;]*;-1;[^;]*;LINUX-RESTART"))
    parts = rows.select("line", "text", pl.col("text").str.extract_groups(RESTART_RE).alias("p")).unnest("p")
    ts, _ = _timestamps(pl.col("stamp"), tz)
    parts = parts.with_columns(ts=ts).filter(pl.col("ts").is_not_null()).unique(subset=["host", "ts"], keep="first", maintain_order=True)
    events = parts.select(
        "ts",
        "host",
        component=pl.lit("host"),
        kind=pl.lit("host-restart"),
        process=pl.lit(None, pl.String),
        pid=pl.lit(None, pl.String),
        message=pl.concat_str(pl.lit("LINUX-RESTART"), pl.lit(" (") + pl.col("ncpu") + pl.lit(" CPU)"), ignore_nulls=True),
        idx=pl.col("line") - 1,
    )
    return E.event_frame(events, source)


SPEC = ParserSpec(
    kind="sadf-csv",
    description="sar data as sadf -d / sadf -dh semicolon CSV (CPU utilisation only)",
    detect=detect,
    parse=parse,
)
