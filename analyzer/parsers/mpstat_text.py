"""mpstat text output (``mpstat -P ALL 1``, ``mpstat -A``, ``-I SCPU``, ``-N``, ``-T``, ``-U``).

Also reads the CPU table of ``sar -u [ALL] -P ALL`` text, which has the same shape.

Sample input (sysstat 12, 24 h clock; 12 h ``03:14:20 PM`` and epoch ``-U`` times also read)::

    Linux 6.1.0-57-amd64 (db-numa-01) \t2026-11-29 \t_x86_64_\t(4 CPU)

    19:51:19     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
    19:51:20     all    1.75    0.00    0.25    0.00    0.00    0.00    0.00    0.00    0.00   98.00
    19:51:20       0    3.00    0.00    0.00    0.00    0.00    0.00    0.00    0.00    0.00   97.00

    19:51:19     CPU       HI/s    TIMER/s   NET_TX/s   NET_RX/s    BLOCK/s IRQ_POLL/s  TASKLET/s ...
    19:51:20       0       0.00       2.97       0.00       0.00       0.00       0.00       0.00 ...

    Average:     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
    Average:     all    3.57    0.00   19.10    0.00    0.00   16.52    0.00    0.00    0.00   60.81

Output tables (see ``dbdiag.tables``):

- ``cpu_util``: ts, cpu (``all`` -> -1), usr_pct, nice_pct, sys_pct, iowait_pct, irq_pct, soft_pct,
  steal_pct, guest_pct, gnice_pct, idle_pct, source. Columns are found by header name, so old
  column sets (no %gnice, ``%user``/``%system``) give nulls for what they lack.
- ``node_util`` (``-N``, header ``NODE``): ts, node, the same percent columns, source.
- ``softirq_rate`` (``-I SCPU``): ts, cpu, softirq (``NET_RX``...), per_s, source.
- ``irq_rate`` (``-I CPU``): ts, cpu, irq (``25``, ``LOC``...), per_s, source.
- ``topology`` (``-T``: CORE SOCK NODE columns): cpu, core, socket, node, source; one row per cpu.
- ``host_fact`` from the banner: hostname, os, kernel, arch, cpu_count.
- ``event`` (sar text): one ``host-restart`` row per ``LINUX RESTART`` line (sadc's mark of a boot):
  ts, host, component ``host``, message, line.

``Average:`` blocks are skipped (they would count every interval twice); the ``-I SUM`` table
(``intr/s``) is not kept (irq_rate has the per-IRQ rates). Data rows carry the interval's end
time; the banner gives the date, and a time lower than the previous one by more than 12 h
means the run crossed midnight. Times have no zone: they are read in ``ctx.tz`` (said in a
note) and stored as UTC; ``-U`` epoch seconds are UTC already.
"""

from __future__ import annotations

import re
from datetime import date

import polars as pl

from dbdiag import tables as T
from dbdiag.native.lazy import np
from dbdiag.parsers._sysstat import (
    HALF_DAY_S,
    PCT_COLUMNS,
    SYSTEM_INCLUDES_IRQ_NOTE,
    clock_seconds,
    cpu_number,
    host_facts,
    midnight_wraps,
    parse_sysstat_date,
    to_float,
)
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning, decode_text
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

BANNER_RE = (
    r"^(?P<os>Linux)\s+(?P<kernel>\S+)\s+\((?P<host>[^)]*)\)\s+(?P<bdate>\S+)"
    r"(?:\s+_(?P<arch>\S+)_)?(?:\s+\((?P<ncpu>\d+)\s+CPU\))?"
)
# The time column: 24 h or ISO ``19:51:20``, 12 h ``03:14:20 PM``, ``-U`` epoch seconds, or a
# summary label. ``rest`` is everything after it.
TIMED_RE = (
    r"^(?:(?P<hh>\d{1,2}):(?P<mi>\d{2}):(?P<ss>\d{2})(?:\s*(?P<ampm>[AaPp][Mm]))?"
    r"|(?P<epoch>\d{9,11})|(?P<summary>Average:|Summary:))\s+(?P<rest>\S.*)$"
)
NUMBER_TOKEN_RE = r"(?:^|\s)[-+]?\d+(?:[.,]\d+)?(?:\s|$)"


SOFTIRQ_NAME_RE = lazy_compile(r"[A-Z][A-Z_]*")
# Per-IRQ column names: numbers, old ``i025`` spelling, or kernel abbreviations (LOC, NMI, IPI0, Err).
# Lower-case names (sar's softnet ``total/s dropd/s``) are other tables.
IRQ_NAME_RE = lazy_compile(r"\d+|i\d{3}|[A-Z][A-Za-z0-9_]*")


# ---- detection --------------------------------------------------------------------------------


def classify_header(names: list[str]) -> str:
    """Which table a header row starts: cpu, node, softirq, irq, sum, restart or other."""
    if names[:2] == ["LINUX", "RESTART"]:
        return "restart"
    if len(names) < 2:
        return "other"
    key, rest = names[0], names[1:]
    if key in ("CPU", "NODE") and "%idle" in rest and ({"%usr", "%user"} & set(rest)):
        return "cpu" if key == "CPU" else "node"
    if key != "CPU" or not all(n.endswith("/s") and len(n) > 2 for n in rest):
        return "other"
    bare = [n[:-2] for n in rest]
    if bare == ["intr"]:
        return "sum"
    if {"TIMER", "NET_RX"} <= set(bare) and all(SOFTIRQ_NAME_RE.fullmatch(b) for b in bare):
        return "softirq"
    if all(IRQ_NAME_RE.fullmatch(b) for b in bare):
        return "irq"
    return "other"


def detect(head: str, name: str) -> float:
    lines = head.lstrip("\ufeff").split("\n")[:300]
    first = next((ln for ln in lines if ln.strip()), "")
    banner = re.match(BANNER_RE, first) is not None
    timed = re.compile(TIMED_RE)
    tables = set()
    for line in lines:
        m = timed.match(line.rstrip())
        if m and not m.group("summary") and not re.search(NUMBER_TOKEN_RE, m.group("rest")):
            tables.add(classify_header(m.group("rest").split()))
    tables -= {"other", "restart"}
    hinted = any(h in name.lower() for h in ("mpstat", "sar"))
    if banner and tables:
        return 0.95
    if tables:
        return 0.75
    if banner:
        return 0.55 if hinted else 0.3
    return 0.0


# ---- parsing ----------------------------------------------------------------------------------


def _lines(text: str) -> pl.DataFrame:
    """One row per line with what the line is: banner fields, time fields, header/data/summary."""
    df = pl.DataFrame({"text": text.lstrip("\ufeff").split("\n")}, schema={"text": pl.String})
    df = df.with_row_index("line", offset=1)
    df = df.with_columns(pl.col("line").cast(pl.Int64), pl.col("text").str.strip_chars_end())
    df = df.with_columns(
        pl.col("text").str.extract_groups(BANNER_RE).alias("banner"),
        pl.col("text").str.extract_groups(TIMED_RE).alias("timed"),
    ).unnest("banner", "timed")
    is_banner = pl.col("kernel").is_not_null()
    is_timed = pl.col("rest").is_not_null() & ~is_banner
    is_summary = is_timed & pl.col("summary").is_not_null()
    is_header = is_timed & ~is_summary & ~pl.col("rest").str.contains(NUMBER_TOKEN_RE)
    return df.with_columns(
        seg=is_banner.cum_sum(),
        # a table runs from its header to the next header, banner or summary line
        block=(is_banner | is_summary | is_header).cum_sum(),
        kind=pl.when(is_banner).then(pl.lit("banner"))
        .when(is_summary).then(pl.lit("summary"))
        .when(is_header).then(pl.lit("header"))
        .when(is_timed).then(pl.lit("data"))
        .when(pl.col("text") == "").then(pl.lit("blank"))
        .otherwise(pl.lit("unknown")),
        tod=clock_seconds(pl.col("hh"), pl.col("mi"), pl.col("ss"), pl.col("ampm")),
        epoch_s=pl.col("epoch").cast(pl.Int64, strict=False),
    )


def _cells(rows: pl.DataFrame, names: list[str]) -> tuple[pl.DataFrame, list[tuple[int, ParseWarning]]]:
    """Rows under one header -> string cells ``c0..cN`` (c0 is the CPU/NODE key), plus warnings
    (each with its ``file``).

    mpstat -T leaves CORE/SOCK/NODE blank on the ``all`` row: such rows are 3 fields short and
    their numbers belong to the right-hand columns.
    """
    n = len(names)
    topo = names[1:4] == ["CORE", "SOCK", "NODE"]
    rows = rows.with_columns(toks=pl.col("rest").str.extract_all(r"\S+"))
    rows = rows.with_columns(ntok=pl.col("toks").list.len())
    short = (pl.col("ntok") == n - 3) & (pl.col("toks").list.first() == "all") if topo else pl.lit(False)
    rows = rows.with_columns(short=short)
    fits = (pl.col("ntok") == n) | pl.col("short")
    warnings = [
        (file, ParseWarning(line, f"{ntok} fields where the {names[0]} header above has {n}; row skipped"))
        for file, line, ntok in rows.filter(~fits).select("file", "line", "ntok").iter_rows()
    ]
    cells = []
    for i in range(n):
        index = pl.when(pl.col("short") & (i >= 4)).then(i - 3).when(pl.col("short") & (i >= 1)).then(None).otherwise(i)
        cells.append(pl.col("toks").list.get(index, null_on_oob=True).alias(f"c{i}"))
    good = rows.filter(fits).select("file", "source", "line", "ts", *cells)
    good = good.with_columns(key=cpu_number(pl.col("c0")))
    warnings += [
        (file, ParseWarning(line, f"{names[0]} {key!r} is not a number; row skipped"))
        for file, line, key in good.filter(pl.col("key").is_null()).select("file", "line", "c0").iter_rows()
    ]
    return good.filter(pl.col("key").is_not_null()), warnings


def _bad_numbers(cells: pl.DataFrame, columns: dict[str, str]) -> list[tuple[int, ParseWarning]]:
    """Warnings for cells that are present but are not numbers (``columns``: cell -> header name)."""
    warnings = []
    for cell, header in columns.items():
        bad = cells.filter(pl.col(cell).is_not_null() & to_float(pl.col(cell)).is_null())
        for file, line, value in bad.select("file", "line", cell).iter_rows():
            warnings.append((file, ParseWarning(line, f"{header} value {value!r} is not a number; left empty")))
    return warnings


def _conformed(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in ``table``'s schema, with the ``file`` of each row kept."""
    return T.conform(table, frame).with_columns(frame["file"])


def _util(cells: pl.DataFrame, names: list[str], key_name: str) -> pl.DataFrame:
    found = {}
    for column, spellings in PCT_COLUMNS.items():
        index = next((names.index(s) for s in spellings if s in names), None)
        if index is not None:
            found[column] = to_float(pl.col(f"c{index}"))
    frame = cells.select("ts", pl.col("key").alias(key_name), **found, source="source", file="file")
    return _conformed(T.CPU_UTIL if key_name == "cpu" else T.NODE_UTIL, frame)


def _long(cells: pl.DataFrame, names: list[str], name_column: str, table: str) -> pl.DataFrame:
    labels = [n[:-2] for n in names[1:]]
    if name_column == "irq":  # old sysstat spelt IRQ 25 as i025
        labels = [str(int(x[1:])) if re.fullmatch(r"i\d{3}", x) else x for x in labels]
    frame = cells.select(
        "ts",
        pl.col("key").alias("cpu"),
        pl.lit(labels, dtype=pl.List(pl.String)).alias(name_column),
        pl.concat_list([to_float(pl.col(f"c{i}")) for i in range(1, len(names))]).alias("per_s"),
        source="source", file="file",
    ).explode([name_column, "per_s"])
    return _conformed(table, frame)


def _topology(cells: pl.DataFrame) -> pl.DataFrame:
    frame = cells.filter(pl.col("key") >= 0).select(
        pl.col("key").alias("cpu"),
        core=pl.col("c1").cast(pl.Int32, strict=False),
        socket=pl.col("c2").cast(pl.Int32, strict=False),
        node=pl.col("c3").cast(pl.Int32, strict=False),
        source="source", file="file",
    )
    return _conformed(T.TOPOLOGY, frame)


def _timestamps(data: pl.DataFrame, dates: pl.DataFrame, tz: str) -> pl.DataFrame:
    """Add ``ts`` (UTC) and ``wraps`` (midnights passed) to data rows."""
    data = data.join(dates, on="seg", how="left")
    data = data.with_columns(wraps=midnight_wraps(pl.col("tod")).over(["seg", "cls"]))
    return _utc(data, tz)


def _utc(data: pl.DataFrame, tz: str) -> pl.DataFrame:
    """``ts`` (UTC) from the banner ``date``, the ``wraps`` midnights passed and ``tod``, or ``epoch_s``."""
    day = pl.col("date").fill_null(date(1970, 1, 1)).cast(pl.Datetime("us"))
    naive = day + pl.duration(days=pl.col("wraps"), seconds=pl.col("tod"))
    from_epoch = pl.from_epoch(pl.col("epoch_s"), time_unit="s").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    return data.with_columns(ts=pl.coalesce(from_epoch, local_to_utc(naive, tz)).cast(T.UTC_TIME))


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text.strip():
        raise ParseError("empty file")
    df = _lines(text).with_columns(file=pl.lit(0, pl.Int64), source=pl.lit(ctx.source))
    result = _parse_files(df, [ctx.source], ctx.tz)[0]
    if isinstance(result, ParseError):
        raise result
    return result


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse`` of each member's text (all in one zone), in one parse: the texts are joined, each
    after an empty line that starts a segment and a table of its own (as the start of a file does);
    every choice and count made for a file (dates, warnings and their caps, notes, host facts,
    topology, records, time range) is each member's own, and so are line numbers."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    texts, joined, starts, line = [], [], [], 0
    for index, (data, _) in enumerate(members):
        text = decode_text(data)
        if not text.strip():
            results[index] = ParseError("empty file")
            continue
        if joined:
            line += 1  # the boundary line
        starts.append(line)
        texts.append(text.lstrip("\ufeff"))
        line += text.lstrip("\ufeff").count("\n") + 1
        joined.append(index)
    if not joined:
        return results
    df = _lines("\n\n".join(texts))  # each boundary an empty line
    file = np.searchsorted(np.array(starts[1:]), df["line"].to_numpy(), side="left")  # a boundary: the file after it
    boundary = np.zeros(df.height, dtype=bool)
    boundary[np.array(starts[1:], dtype=np.int64) - 1] = True  # lines count from 1
    kind, is_boundary = pl.col("kind"), pl.lit(pl.Series(boundary))
    sources = [members[i][1].source for i in joined]
    df = df.with_columns(
        file=pl.Series(file, dtype=pl.Int64),
        source=pl.Series(sources, dtype=pl.String).gather(pl.Series(file)),
        line=pl.col("line") - pl.Series(np.array([0] + starts[1:], dtype=np.int64)[file]),
        seg=((kind == "banner") | is_boundary).cum_sum(),
        block=(kind.is_in(["banner", "summary", "header"]) | is_boundary).cum_sum(),
    ).filter(~is_boundary)
    for index, result in zip(joined, _parse_files(df, sources, members[joined[0]][1].tz)):
        results[index] = result
    return results


READ_CLASSES = ("cpu", "node", "softirq", "irq")


def _parse_files(df: pl.DataFrame, sources: list[str], tz: str) -> list[ParseResult | ParseError]:
    """The tables of each file of ``df`` (``_lines`` of one file, or of the files of a batch with
    their ``file`` and ``source``; segments and tables never span two files)."""
    n_files = len(sources)
    tz, tz_warning = check_tz(tz)
    warnings: list[list[ParseWarning]] = [[tz_warning] if tz_warning else [] for _ in range(n_files)]
    notes: list[list[str]] = [[] for _ in range(n_files)]
    readable = set(df.filter(pl.col("kind").is_in(["header", "banner"]))["file"].unique().to_list())
    errors = {f: "no mpstat banner or table header found" for f in range(n_files) if f not in readable}
    if errors:
        df = df.filter(pl.col("file").is_in(list(readable)))
    for f, line in df.filter(pl.col("kind") == "unknown").select("file", "line").iter_rows():
        warnings[f].append(ParseWarning(line, "unrecognised line (no time column); skipped"))

    headers = df.filter(pl.col("kind") == "header").select(
        "file", "block", "line", header=pl.col("rest"), header_tod=pl.col("tod"), header_epoch=pl.col("epoch_s")
    )
    classes = {h: classify_header(h.split()) for h in headers["header"].unique(maintain_order=True).to_list()}
    headers = headers.with_columns(cls=pl.col("header").replace_strict(classes, default="other", return_dtype=pl.String))
    file_classes: dict[int, set[str]] = {}
    for f, cls in headers.select("file", "cls").unique().iter_rows():
        file_classes.setdefault(f, set()).add(cls)
    # a file's tables list their rows header by header, in the order the file first shows each header
    ranks = headers.group_by("file", "header").agg(rank=pl.col("line").min())
    data = df.filter(pl.col("kind") == "data").join(headers.drop("file", "line"), on="block", how="left")
    for f, line in data.filter(pl.col("header").is_null()).select("file", "line").iter_rows():
        warnings[f].append(ParseWarning(line, "data row without a table header above it; skipped"))
    data = data.filter(pl.col("cls").is_in(READ_CLASSES))

    banners = df.filter(pl.col("kind") == "banner")
    seg_dates = {seg: parse_sysstat_date(d) for seg, d in banners.select("seg", "bdate").iter_rows()}
    dates = pl.DataFrame(
        {"seg": list(seg_dates), "date": list(seg_dates.values())}, schema={"seg": df["seg"].dtype, "date": pl.Date}
    )
    epochless = data.filter(pl.col("epoch_s").is_null())
    if epochless.height:
        bannered = set(banners["file"].unique().to_list())
        undated = epochless.join(dates.drop_nulls(), on="seg", how="anti")
        for f, first, count in undated.group_by("file", maintain_order=True).agg(pl.col("line").first(), pl.len()).iter_rows():
            why = "no 'Linux ... (N CPU)' banner" if f not in bannered else "the banner date cannot be read"
            warnings[f].append(ParseWarning(first, f"{why}; {count} rows dated 1970-01-01"))
        for f in epochless["file"].unique().to_list():
            notes[f].append(zone_note(tz))
    data = _timestamps(data, dates, tz)
    for f, line, clock_ok in data.filter(pl.col("ts").is_null()).select("file", "line", pl.col("tod").is_not_null()).iter_rows():
        why = f"time does not exist in {tz} (DST change)" if clock_ok else "unreadable time"
        warnings[f].append(ParseWarning(line, f"{why}; row skipped"))
    data = data.filter(pl.col("ts").is_not_null())

    out: dict[str, list[pl.DataFrame]] = {}
    has: dict[str, set[int]] = {}  # the files that have each table (perhaps with no row left)
    for header, cls in classes.items():
        rows = data.filter(pl.col("header") == header)
        if cls not in READ_CLASSES or not rows.height:
            continue
        names = header.split()
        files = set(rows["file"].unique().to_list())
        cells, row_warnings = _cells(rows, names)
        numeric = {f"c{i}": name for i, name in enumerate(names) if i and name not in ("CORE", "SOCK", "NODE")}
        for f, warning in row_warnings + _bad_numbers(cells, numeric):
            warnings[f].append(warning)
        rank = ranks.filter(pl.col("header") == header).select("file", "rank")
        if cls in ("cpu", "node"):
            table = T.CPU_UTIL if cls == "cpu" else T.NODE_UTIL
            out.setdefault(table, []).append(_util(cells, names, cls).join(rank, on="file", how="left", maintain_order="left"))
            has.setdefault(table, set()).update(files)
            if "%system" in names and "%irq" not in names:
                for f in files:
                    notes[f].append(SYSTEM_INCLUDES_IRQ_NOTE)
            if cls == "cpu" and names[1:4] == ["CORE", "SOCK", "NODE"]:
                out.setdefault(T.TOPOLOGY, []).append(_topology(cells).join(rank, on="file", how="left", maintain_order="left"))
                has.setdefault(T.TOPOLOGY, set()).update(files)
        else:
            table = T.SOFTIRQ_RATE if cls == "softirq" else T.IRQ_RATE
            out.setdefault(table, []).append(
                _long(cells, names, cls, table).join(rank, on="file", how="left", maintain_order="left")
            )
            has.setdefault(table, set()).update(files)
    tables = {name: pl.concat(frames, how="vertical").sort("file", "rank", maintain_order=True).drop("rank")
              for name, frames in out.items()}
    for f in range(n_files):
        if f not in errors and not any(f in files for files in has.values()):
            found = sorted(file_classes.get(f, set()) - {"other", "restart"})
            detail = f" (only {', '.join(found)} tables)" if found else ""
            errors[f] = f"no CPU, node, softirq or IRQ data rows could be read{detail}"
    if T.TOPOLOGY in tables:
        tables[T.TOPOLOGY], topology_notes = _dedupe_topology(tables[T.TOPOLOGY])
        for f, note in topology_notes.items():
            notes[f].append(note)
    tables[T.HOST_FACT] = _host_facts(banners, sources)
    restarts = _restart_events(df, data, dates, banners, tz, sources)
    if restarts.height:
        tables[T.EVENT] = restarts
        has[T.EVENT] = set(restarts["file"].unique().to_list())
    for f, summary in _summary_notes(df, data, file_classes).items():
        notes[f] += summary
    return _results(tables, has, n_files, warnings, notes, errors)


def _host_facts(banners: pl.DataFrame, sources: list[str]) -> pl.DataFrame:
    """host_fact rows of each file's banners (``host_facts``, with the ``file``)."""
    by_file: dict[int, list[dict[str, object]]] = {}
    for f, h, o, k, a, n in banners.select("file", "host", "os", "kernel", "arch", "ncpu").iter_rows():
        by_file.setdefault(f, []).append({"hostname": h, "os": o, "kernel": k, "arch": a, "cpu_count": n})
    frames = [host_facts(rows, sources[f]).with_columns(file=pl.lit(f, pl.Int64)) for f, rows in by_file.items()]
    if len(by_file) > 1:  # one frame: a batch has thousands of files
        pairs = [(f, key, str(value)) for f, rows in by_file.items()
                 for key, value in dict.fromkeys((k, str(v)) for row in rows for k, v in row.items() if v not in (None, ""))]
        return T.host_fact_frame([(k, v) for _, k, v in pairs], "").with_columns(
            source=pl.Series([sources[f] for f, _, _ in pairs], dtype=pl.String),
            file=pl.Series([f for f, _, _ in pairs], dtype=pl.Int64),
        )
    return frames[0] if frames else T.host_fact_frame([], "").with_columns(file=pl.lit(0, pl.Int64))


def _restart_events(
    df: pl.DataFrame, data: pl.DataFrame, dates: pl.DataFrame, banners: pl.DataFrame, tz: str, sources: list[str]
) -> pl.DataFrame:
    """``02:05:05     LINUX RESTART\t(2 CPU)`` (sar text: sadc's mark of a boot) -> ``event`` rows of kind
    ``host-restart``; dated like the data rows: the banner's date plus the midnights passed above it."""
    marks = df.filter((pl.col("kind") == "header") & pl.col("rest").str.starts_with("LINUX RESTART"))
    if marks.is_empty():
        return T.empty(T.EVENT)
    above = data.select("file", "seg", "line", wraps_above=pl.col("wraps"), tod_above=pl.col("tod"), mark=pl.lit(False))
    marks = marks.select("file", "seg", "line", "tod", "epoch_s", "rest", mark=pl.lit(True))
    marks = (
        pl.concat([above, marks], how="diagonal_relaxed")
        .sort("file", "line")
        .with_columns(pl.col("wraps_above", "tod_above").forward_fill().over("seg"))
        .filter(pl.col("mark"))
    )
    passed = ((pl.col("tod_above") - pl.col("tod")) > HALF_DAY_S).fill_null(False).cast(pl.Int32)
    marks = marks.join(dates, on="seg", how="left").with_columns(wraps=pl.col("wraps_above").fill_null(0) + passed)
    marks = _utc(marks, tz).filter(pl.col("ts").is_not_null())
    hosts = banners.select("seg", "host").unique(subset="seg", keep="first")
    events = marks.join(hosts, on="seg", how="left").select(
        "ts",
        "host",
        component=pl.lit("host"),
        kind=pl.lit("host-restart"),
        message=pl.col("rest").str.replace_all(r"\s+", " "),
        source=pl.col("file").replace_strict(dict(enumerate(sources)), return_dtype=pl.String),
        line="line",
        file="file",
    ).sort("file", "line")
    # (not log_events.event_frame: that module imports this one); ``file`` stays for the split per member
    return T.conform(T.EVENT, events).with_columns(events["file"])


def _results(
    tables: dict[str, pl.DataFrame], has: dict[str, set[int]], n_files: int, warnings: list[list[ParseWarning]],
    notes: list[list[str]], errors: dict[int, str],
) -> list[ParseResult | ParseError]:
    """One result per file: a slice of each table it has, its records (distinct times), time range."""
    bounds = {}
    for name, frame in tables.items():
        counts = np.bincount(frame["file"].to_numpy(), minlength=n_files)
        bounds[name] = (np.cumsum(np.append(0, counts)), counts)
        tables[name] = frame.drop("file")
    timed = [pl.DataFrame({"file": tables_file, "ts": frame["ts"]}) for frame, tables_file in (
        # records and time range are the measured intervals': a reboot mark is an event, not a sample
        (tables[name], np.repeat(np.arange(n_files), bounds[name][1])) for name in tables
        if "ts" in tables[name].columns and name != T.EVENT
    )]
    spans = pl.concat(timed).group_by("file").agg(
        records=pl.col("ts").n_unique(), first=pl.col("ts").min(), last=pl.col("ts").max()
    ) if timed else pl.DataFrame()
    span = {f: (records, first, last) for f, records, first, last in spans.iter_rows()} if spans.height else {}
    results: list[ParseResult | ParseError] = []
    for f in range(n_files):
        if f in errors:
            results.append(ParseError(errors[f]))
            continue
        mine = {
            name: frame.slice(int(bounds[name][0][f]), int(bounds[name][1][f]))
            for name, frame in tables.items() if name == T.HOST_FACT or f in has.get(name, ())
        }
        records, first, last = span.get(f, (0, None, None))
        results.append(ParseResult(
            tables=mine, records=records, warnings=cap_warnings(warnings[f]),
            notes=list(dict.fromkeys(notes[f])), time_range=(first, last),
        ))
    return results


def _dedupe_topology(topo: pl.DataFrame) -> tuple[pl.DataFrame, dict[int, str]]:
    changed = topo.unique().group_by("file", "cpu").len().filter(pl.col("len") > 1).sort("file", "cpu")
    notes: dict[int, list[int]] = {}
    for f, cpu in changed.select("file", "cpu").iter_rows():
        notes.setdefault(f, []).append(cpu)
    note = {f: f"topology of CPU {', '.join(map(str, cpus))} changed during the run; the last one is kept" for f, cpus in notes.items()}
    return topo.unique(subset=["file", "cpu"], keep="last", maintain_order=True).sort("file", "cpu"), note


def _summary_notes(df: pl.DataFrame, data: pl.DataFrame, classes: dict[int, set[str]]) -> dict[int, list[str]]:
    """Per file, what its lines show beside the tables read."""
    notes: dict[int, list[str]] = {}
    for f, summary in df.filter(pl.col("kind") == "summary").group_by("file").len().sort("file").iter_rows():
        notes.setdefault(f, []).append(f"{summary} Average:/Summary: lines skipped (they repeat the intervals)")
    wraps = data.group_by("file", "seg").agg(pl.col("wraps").max()).group_by("file").agg(pl.col("wraps").sum())
    for f, count in wraps.sort("file").iter_rows():
        if count:
            notes.setdefault(f, []).append(f"the run passed midnight {count} time(s); dates advanced")
    same = (pl.col("tod") == pl.col("header_tod")) | (pl.col("epoch_s") == pl.col("header_epoch"))
    for f, since_boot in data.group_by("file").agg(same.fill_null(False).all()).sort("file").iter_rows():
        if since_boot:
            notes.setdefault(f, []).append("a single since-boot sample: values are averages since boot, not a measured interval")
    for f, found in sorted(classes.items()):
        if "sum" in found:
            notes.setdefault(f, []).append("the intr/s table (mpstat -I SUM) is not kept; irq_rate has the per-IRQ rates")
        if "other" in found:
            notes.setdefault(f, []).append("tables other than CPU, node, softirq and IRQ rates are not read")
    for f in df.filter(pl.col("rest").str.starts_with("LINUX RESTART"))["file"].unique().sort().to_list():
        notes.setdefault(f, []).append("the output contains LINUX RESTART lines (the host rebooted during the recording): host-restart events")
    return notes


SPEC = ParserSpec(
    kind="mpstat-text",
    description="mpstat text output (CPU, -N node, -I SCPU softirq, -I CPU per-IRQ, -T topology); sar -u text",
    detect=detect,
    parse=parse,
    parse_batch=parse_batch,
)
