"""Grafana panel CSV exports: "Inspect > Data > Download CSV" and the old graph panel "Export CSV".

Raw input, the layouts Grafana writes (``toCSV`` in ``@grafana/data``; ``file_export.ts`` in 5.x-6.x):

    "Time","tidb-0:10080","tidb-1:10080"            series joined by time (one row per time);
    2024-05-14 10:00:00,12.5 ms,1.02 s               "Formatted data" on: local time without a zone,
    2024-05-14 10:00:15,,980 ms                       values with their unit; off: epoch ms, numbers

    "Series";"Time";"Value"                          series per row (6.x "Export CSV", ``sep=;``
    "tidb-0";"2024-05-14T10:00:00+02:00";0.0125      line when saved "for Excel"; ``null`` cells)

A single-series download (``"Time","up{instance=""db1:9100"", job=""node""}"``) is the joined
layout with one column. Header names in the Prometheus form ``name{k="v", ...}`` give the metric
and labels; any other name is the metric itself.

Output table ``metric_sample`` (one row per non-empty cell):

    ts        Datetime  epoch ms (or s) as UTC; times with an offset converted to UTC; local times
                        without a zone read in --tz (noted)
    metric    String    the series name (the metric part of ``name{...}``)
    labels    String    ``k=v`` pairs from ``{...}`` sorted by key, else ""
    instance  String    the ``instance`` label when the name carries one
    value     Float64   the number; a unit Grafana appended is converted to the base unit when
                        the unit is unambiguous: durations (ns, µs, ms, s, min, hour, day, week) to
                        seconds, sizes (B, KiB, MiB, kB, MB, ...) to bytes, count scales (K, Mil, Bil,
                        Tri) to plain counts; ``%`` and other units keep the number. A note lists
                        each series' units. "NaN"/"Infinity" are kept as floats.
    source    String    member path

``records`` is the number of samples.

>>> from dbdiag.parsers.base import ParseContext
>>> text = '"Time","p99"\\r\\n1715680800000,12.5 ms\\r\\n1715680815000,1.5 s\\r\\n\\r\\n'
>>> parse(text, ParseContext("p99.csv")).tables["metric_sample"].select("metric", "value").rows()
[('p99', 0.0125), ('p99', 1.5)]
"""

from __future__ import annotations

import csv
import io
import re

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.numeric import true_divide
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.parsers.prometheus_json import canonical_labels
from dbdiag.patterns import lazy_compile

# unit as Grafana prints it -> (factor to the base unit, base unit); sub-units as 1/divisor, applied
# as a division so that "11.8 ms" reads as 0.0118, not 0.011800000000000001
UNIT_DIVISORS = {"ns": 1e9, "µs": 1e6, "us": 1e6, "ms": 1e3}
UNIT_FACTORS = {
    **{unit: (1 / divisor, "s") for unit, divisor in UNIT_DIVISORS.items()}, "s": (1.0, "s"),
    "min": (60.0, "s"), "hour": (3600.0, "s"), "day": (86400.0, "s"), "week": (604800.0, "s"), "year": (31536000.0, "s"),
    "B": (1.0, "bytes"), "KiB": (1024.0, "bytes"), "MiB": (1024.0**2, "bytes"), "GiB": (1024.0**3, "bytes"),
    "TiB": (1024.0**4, "bytes"), "PiB": (1024.0**5, "bytes"), "kB": (1e3, "bytes"), "KB": (1e3, "bytes"),
    "MB": (1e6, "bytes"), "GB": (1e9, "bytes"), "TB": (1e12, "bytes"), "PB": (1e15, "bytes"),
}
# Grafana's "short" scale words; the rest of the unit ("K req/s" -> "req/s") is kept
COUNT_SCALES = {"K": 1e3, "Mil": 1e6, "Bil": 1e9, "Tri": 1e12, "Quadr": 1e15}
_NUMBER_RE = r"^\s*(?P<prefix>[^\d.+-]*?)\s*(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*(?P<unit>.*?)\s*$"
_GROUPED_RE = r"^[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?(?:\s.*)?$"
_SPECIAL_FLOATS = {"NaN": "NaN", "Infinity": "inf", "+Infinity": "inf", "-Infinity": "-inf", "+Inf": "inf", "-Inf": "-inf", "Inf": "inf"}
_PROM_NAME_RE = lazy_compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)?\{(?P<body>.*)\}$")
_LABEL_RE = lazy_compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_HEADER_TIME_RE = lazy_compile(r'^(?:"Time"|Time)(?P<sep>[,;\t])')
_HEADER_LONG_RE = lazy_compile(r'^"?Series"?(?P<sep>[,;\t])"?Time"?(?P=sep)"?Value"?\s*$')
_EPOCH_MS_RE = r"^\d{12,14}(?:\.\d+)?$"
_EPOCH_S_RE = r"^\d{9,11}(?:\.\d+)?$"


def _lines_after_sep(text: str) -> tuple[str, str | None]:
    """The text without BOM and Excel's ``sep=X`` line, and X when that line was there."""
    body = text.lstrip("\ufeff")
    match = re.match(r"sep=(.)\r?\n", body)
    return (body[match.end():], match.group(1)) if match else (body, None)


def _header_line(body: str) -> str:
    return next((line.rstrip("\r") for line in body.split("\n", 20)[:20] if line.strip()), "")


def _layout(header: str, sep: str | None) -> tuple[str, str] | None:
    """("long" | "wide", separator) from the header line, or None when it is not Grafana's."""
    long = _HEADER_LONG_RE.match(header)
    if long and (sep is None or long.group("sep") == sep):
        return "long", long.group("sep")
    wide = _HEADER_TIME_RE.match(header)
    if wide and (sep is None or wide.group("sep") == sep):
        # modern exports quote every name; unquoted names only in the old ';' export
        if header.startswith('"') or wide.group("sep") == ";":
            return "wide", wide.group("sep")
    return None


def _series_name(raw: pl.Expr) -> pl.Expr:
    """The name as shown; 6.x prefixed names starting with - + = @ with a quote against spreadsheet formulas."""
    name = raw.str.strip_chars()
    return pl.when(name.str.contains(r"^'[-+=@]")).then(name.str.slice(1)).otherwise(name)


def split_series_name(name: str) -> tuple[str, dict[str, str]]:
    """Metric and labels from a Prometheus-style display name; other names are the metric.

    >>> split_series_name('up{instance="db1:9100", job="node"}')
    ('up', {'instance': 'db1:9100', 'job': 'node'})
    >>> split_series_name("tidb-0 p99")
    ('tidb-0 p99', {})
    """
    match = _PROM_NAME_RE.match(name)
    if match is None:
        return name, {}
    body = match.group("body")
    labels = {}
    position, end = 0, len(body.rstrip())
    while position < end:  # each pair where the last ended (a search would rescan the rest each time)
        pair = _LABEL_RE.match(body, position)
        if pair is None or pair.end() == position:
            return name, {}
        labels[pair.group(1)] = pair.group(2).replace('\\"', '"').replace("\\\\", "\\")
        position = pair.end()
    if position != end:
        return name, {}
    return match.group("name") or name, labels


def _header_names(header: str, separator: str) -> list[str]:
    """Header cells unquoted (polars keeps doubled quotes in header names), duplicates numbered."""
    names, seen = [], {}
    for cell in next(csv.reader([header], delimiter=separator, quotechar='"')):
        seen[cell] = seen.get(cell, 0) + 1
        names.append(cell if seen[cell] == 1 else f"{cell} ({seen[cell]})")
    return names


def _read(body: str, separator: str) -> pl.DataFrame:
    names = _header_names(_header_line(body), separator)
    try:
        frame = pl.read_csv(
            io.StringIO(body),
            separator=separator,
            has_header=True,
            infer_schema=False,
            quote_char='"',
            truncate_ragged_lines=True,
            null_values=["", "null"],
        )
        frame = frame.rename(dict(zip(frame.columns, names)))
    except (pl.exceptions.ComputeError, pl.exceptions.NoDataError) as error:
        raise ParseError(f"CSV not readable: {str(error).splitlines()[0][:120]}") from None
    return frame.with_row_index("line", offset=2)


def _long_cells(frame: pl.DataFrame) -> pl.DataFrame:
    names = {c.strip().strip('"'): c for c in frame.columns}
    return frame.select(
        "line",
        series=pl.col(names["Series"]),
        time_raw=pl.col(names["Time"]).str.strip_chars(),
        value_raw=pl.col(names["Value"]),
    )


def _wide_cells(frame: pl.DataFrame) -> pl.DataFrame:
    time_column, *series = [c for c in frame.columns if c != "line"]
    renamed = frame.rename({time_column: "time_raw"})
    if not series:
        raise ParseError("Grafana CSV has a Time column but no series column")
    return (
        renamed.with_columns(pl.col("time_raw").str.strip_chars())
        .unpivot(index=["line", "time_raw"], on=series, variable_name="series", value_name="value_raw")
        .sort("line", maintain_order=True)
    )


def _times(tz: str) -> tuple[pl.Expr, pl.Expr]:
    """(UTC time, whether --tz was applied) from ``time_raw`` in any of Grafana's time forms."""
    raw = pl.col("time_raw")
    epoch = raw.cast(pl.Float64, strict=False)
    from_epoch = (
        pl.when(raw.str.contains(_EPOCH_MS_RE)).then(epoch * 1e3)
        .when(raw.str.contains(_EPOCH_S_RE)).then(epoch * 1e6)
        .round(0).cast(pl.Int64, strict=False).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    )
    iso = raw.str.replace(r"[Zz]$", "+00:00").str.replace(" ", "T", literal=True)
    with_offset = iso.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f%z", strict=False, time_zone="UTC", time_unit="us")
    naive_text = pl.when(raw.str.contains(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?$")).then(iso)
    naive = pl.coalesce(
        naive_text.str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us"),
        naive_text.str.to_datetime("%Y-%m-%dT%H:%M", strict=False, time_unit="us"),
    )
    local = local_to_utc(naive, tz)
    return pl.coalesce(from_epoch, with_offset, local), from_epoch.is_null() & with_offset.is_null() & local.is_not_null()


def _values(cells: pl.DataFrame) -> pl.DataFrame:
    """Number, unit as printed, and the value in the base unit."""
    raw = pl.col("value_raw").str.strip_chars()
    # the "locale" unit groups thousands: "1,234,567.5" (the cell is quoted in the CSV)
    raw = pl.when(raw.str.contains(_GROUPED_RE)).then(raw.str.replace_all(",", "", literal=True)).otherwise(raw)
    parts = raw.str.extract_groups(_NUMBER_RE)
    special = raw.replace_strict(_SPECIAL_FLOATS, default=None).cast(pl.Float64, strict=False)
    cells = cells.with_columns(parts=parts, special=special).with_columns(
        number=pl.col("parts").struct.field("number").cast(pl.Float64, strict=False),
        unit=pl.col("parts").struct.field("prefix") + pl.col("parts").struct.field("unit"),
    )
    scale_word = pl.col("unit").str.extract(r"^(\S+)(?:\s|$)")
    rest = pl.col("unit").str.replace(r"^\S+\s*", "")
    count_factor = scale_word.replace_strict(COUNT_SCALES, default=None, return_dtype=pl.Float64)
    unit_factor = pl.col("unit").replace_strict({u: f for u, (f, _) in UNIT_FACTORS.items()}, default=None, return_dtype=pl.Float64)
    unit_divisor = pl.col("unit").replace_strict(UNIT_DIVISORS, default=None, return_dtype=pl.Float64)
    base = pl.col("unit").replace_strict({u: b for u, (_, b) in UNIT_FACTORS.items()}, default=None, return_dtype=pl.String)
    return cells.with_columns(
        value=pl.coalesce(
            pl.col("special"),
            true_divide(pl.col("number"), unit_divisor),
            pl.col("number") * pl.coalesce(unit_factor, count_factor, pl.lit(1.0)),
        ),
        base_unit=pl.when(unit_factor.is_not_null()).then(base)
        .when(count_factor.is_not_null()).then(pl.when(rest != "").then(rest).otherwise(pl.lit("count")))
        .when(pl.col("unit") != "").then(pl.col("unit")),
    ).drop("parts", "special")


def _unit_notes(samples: pl.DataFrame) -> tuple[list[str], list[ParseWarning]]:
    notes, warnings = [], []
    units = (
        samples.filter(pl.col("unit") != "")
        .group_by("series", maintain_order=True)
        .agg(pl.col("unit").unique(maintain_order=True), pl.col("base_unit").unique(maintain_order=True))
    )
    for series, printed, bases in units.iter_rows():
        bases = [b for b in bases if b is not None]
        shown = ", ".join(printed[:6]) + (" ..." if len(printed) > 6 else "")
        if len(bases) > 1:
            warnings.append(ParseWarning(None, f"series {series[:60]!r} mixes units that do not convert to one ({shown}); values kept as numbers"))
        elif bases and set(printed) != set(bases):
            notes.append(f"series {series[:60]!r}: values printed in {shown}; converted to {bases[0]}")
        else:
            notes.append(f"series {series[:60]!r}: unit {shown} (kept)")
    return notes, warnings


def parse(text: str, ctx: ParseContext) -> ParseResult:
    body, sep = _lines_after_sep(text)
    layout = _layout(_header_line(body), sep)
    if layout is None:
        raise ParseError('no Grafana CSV header ("Time",... or "Series";"Time";"Value") found')
    kind, separator = layout
    tz, tz_warning = check_tz(ctx.tz)
    warnings = [tz_warning] if tz_warning else []
    frame = _read(body, separator)
    cells = _long_cells(frame) if kind == "long" else _wide_cells(frame)
    cells = cells.with_columns(series=_series_name(pl.col("series")))
    ts, zoned_local = _times(tz)
    cells = _values(cells.filter(pl.col("value_raw").is_not_null()).with_columns(ts=ts, local=zoned_local))
    bad_time = cells.filter(pl.col("ts").is_null())
    bad_value = cells.filter(pl.col("ts").is_not_null() & pl.col("value").is_null())
    for line, value in bad_time.select("line", "time_raw").unique("line", keep="first", maintain_order=True).head(20).iter_rows():
        warnings.append(ParseWarning(line, f"unreadable time {str(value)[:40]!r}; row skipped"))
    for line, series, value in bad_value.select("line", "series", "value_raw").head(20).iter_rows():
        warnings.append(ParseWarning(line, f"{series[:40]!r}: not a number {value[:40]!r}; cell skipped"))
    samples = cells.filter(pl.col("ts").is_not_null() & pl.col("value").is_not_null())
    if samples.is_empty():
        raise ParseError("Grafana CSV has a header but no readable time/value cells")
    names = {s: split_series_name(s) for s in samples["series"].unique(maintain_order=True).to_list()}
    lookup = pl.DataFrame(
        {
            "series": list(names),
            "metric": [m for m, _ in names.values()],
            "labels": [canonical_labels(lb) for _, lb in names.values()],
            "instance": [lb.get("instance") or None for _, lb in names.values()],
        },
        schema={"series": pl.String, "metric": pl.String, "labels": pl.String, "instance": pl.String},
    )
    unit_notes, unit_warnings = _unit_notes(samples)
    warnings += unit_warnings
    out = samples.join(lookup, on="series", how="left", maintain_order="left").with_columns(source=pl.lit(ctx.source))
    layout_name = "series per row" if kind == "long" else "series joined by time"
    notes = [f"{layout_name}: {len(names)} series, {out.height} samples"]
    if samples["local"].any():
        notes.append(zone_note(tz))
    notes += unit_notes
    metric = T.conform(T.METRIC_SAMPLE, out)
    return ParseResult(
        tables={T.METRIC_SAMPLE: metric},
        records=metric.height,
        warnings=cap_warnings(warnings),
        notes=notes,
        time_range=(metric["ts"].min(), metric["ts"].max()),
    )


def detect(head: str, name: str) -> float:
    body, sep = _lines_after_sep(head)
    layout = _layout(_header_line(body), sep)
    if layout is None:
        return 0.0
    kind, separator = layout
    rows = [line.rstrip("\r") for line in body.split("\n", 6)[1:6] if line.strip()]
    first_cells = [row.split(separator)[1 if kind == "long" else 0].strip().strip('"') for row in rows if separator in row]
    time_like = re.compile(r"^(?:\d{9,14}(?:\.\d+)?|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}.*)$")
    if first_cells and all(time_like.match(cell) for cell in first_cells):
        return 0.9
    return 0.6 if not rows else 0.2


SPEC = ParserSpec(
    kind="grafana-csv",
    description="Grafana panel CSV export (series joined by time, series per row; units and local times handled): metric samples",
    detect=detect,
    parse=parse,
)
