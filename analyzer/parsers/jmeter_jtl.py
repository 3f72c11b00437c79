"""What the JMeter JTL readers share: JMeter's field names, its default CSV layouts, and typing
raw string fields into ``load_sample`` rows (the CSV and XML readers are ``jmeter_jtl_csv`` and
``jmeter_jtl_xml``).

Facts from Apache JMeter's source (``CSVSaveService``, ``SampleSaveConfiguration``,
``SampleResultConverter``, ``TransactionController``; tags v2_3_4 ... rel/v5.6.3):

- Columns are always written in the order of ``FIELDS`` (any subset); custom variables
  (``sample_variables``) come last, their header names in double quotes.
- Numbers are Java ``long``/``int`` printed without grouping or decimals in every locale, and
  ``success`` is ``true``/``false``: there is no decimal comma to undo.
- ``timeStamp`` is epoch milliseconds unless ``jmeter.save.saveservice.timestamp_format`` names a
  ``SimpleDateFormat`` pattern, formatted in the JVM's zone with no offset. It is the sample START
  (``sampleresult.timestamp.start=true`` in the shipped jmeter.properties).
- A transaction controller's sample has the responseMessage
  ``Number of samples in transaction : N, number of failing samples : M``; its elapsed time spans
  its children, which are rows of their own unless "Generate parent sample" is set. Such rows get
  ``is_transaction`` (see ``load_sample_frame``).

>>> [name for name in default_layout(17)][:4], len(default_layout(12))
(['timeStamp', 'elapsed', 'label', 'responseCode'], 12)
>>> default_layout(11) is None
True
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.times import local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import row_warnings

FIELDS = (
    "timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType", "success",
    "failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Filename", "Latency", "Encoding",
    "SampleCount", "ErrorCount", "Hostname", "IdleTime", "Connect",
)

# Headerless files: the columns JMeter writes with its built-in saveservice defaults, by column count
# (each count belongs to one version range, so the count alone picks the layout).
_BASE = ("timeStamp", "elapsed", "label", "responseCode", "responseMessage", "threadName", "dataType", "success")
DEFAULT_LAYOUTS: dict[int, tuple[str, tuple[str, ...]]] = {
    10: ("JMeter 2.1-2.11", _BASE + ("bytes", "Latency")),
    12: ("JMeter 2.12-2.13", _BASE + ("bytes", "grpThreads", "allThreads", "Latency")),
    14: ("JMeter 3.0", _BASE + ("failureMessage", "bytes", "grpThreads", "allThreads", "Latency", "IdleTime")),
    16: (
        "JMeter 3.1-4.0",
        _BASE + ("failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "Latency", "IdleTime", "Connect"),
    ),
    17: (
        "JMeter 5.0+",
        _BASE
        + ("failureMessage", "bytes", "sentBytes", "grpThreads", "allThreads", "URL", "Latency", "IdleTime", "Connect"),
    ),
}

TRANSACTION_RE = r"^Number of samples in transaction : \d+, number of failing samples : \d+$"

# Java SimpleDateFormat patterns JMeter tries when reading a CSV (CSVSaveService.DATE_FORMAT_STRINGS),
# plus ISO-8601 ones; (pattern shown in notes, polars format, has a zone).
TIME_FORMATS = (
    ("yyyy/MM/dd HH:mm:ss.SSS", "%Y/%m/%d %H:%M:%S%.f", False),
    ("yyyy/MM/dd HH:mm:ss", "%Y/%m/%d %H:%M:%S", False),
    ("yyyy-MM-dd HH:mm:ss.SSS", "%Y-%m-%d %H:%M:%S%.f", False),
    ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S", False),
    ("MM/dd/yy HH:mm:ss", "%m/%d/%y %H:%M:%S", False),
    ("yyyy-MM-dd'T'HH:mm:ss.SSSZ", "%Y-%m-%dT%H:%M:%S%.f%z", True),
    ("yyyy-MM-dd'T'HH:mm:ss.SSS", "%Y-%m-%dT%H:%M:%S%.f", False),
    ("yyyy-MM-dd'T'HH:mm:ssZ", "%Y-%m-%dT%H:%M:%S%z", True),
    ("yyyy-MM-dd'T'HH:mm:ss", "%Y-%m-%dT%H:%M:%S", False),
    ("yyyy-MM-dd HH:mm:ss.SSS Z", "%Y-%m-%d %H:%M:%S%.f %z", True),
    ("yyyy/MM/dd HH:mm:ss.SSS Z", "%Y/%m/%d %H:%M:%S%.f %z", True),
)

_NUMBERS = {  # raw field -> (load_sample column, dtype)
    "elapsed": ("elapsed_ms", pl.Float64),
    "Latency": ("latency_ms", pl.Float64),
    "Connect": ("connect_ms", pl.Float64),
    "IdleTime": ("idle_ms", pl.Float64),
    "bytes": ("bytes", pl.Int64),
    "sentBytes": ("sent_bytes", pl.Int64),
    "allThreads": ("all_threads", pl.Int32),
    "grpThreads": ("grp_threads", pl.Int32),
    "SampleCount": ("sample_count", pl.Int64),
}
_STRINGS = {"label": "label", "responseCode": "response_code", "threadName": "thread_name"}


def default_layout(columns: int) -> tuple[str, ...] | None:
    """JMeter's built-in column list for a headerless file of ``columns`` columns, else None."""
    layout = DEFAULT_LAYOUTS.get(columns)
    return layout[1] if layout else None


_EPOCH_MS = r"^\d{1,14}$"  # up to year 5138: larger values would overflow microseconds
_DECIMAL = r"^-?\d{1,12}(?:\.\d{1,9})?$"  # JMeter writes integers; no inf/nan/exponent, nothing over 31 years


def _epoch_ms(raw: pl.Expr) -> pl.Expr:
    ms = pl.when(raw.str.contains(_EPOCH_MS)).then(raw.cast(pl.Int64, strict=False))
    return pl.from_epoch(ms, time_unit="ms").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")


def _number(raw: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    parsed = raw.cast(pl.Float64 if dtype == pl.Float64 else pl.Int64, strict=False)
    return pl.when(raw.str.contains(_DECIMAL)).then(parsed.cast(dtype, strict=False))


def pick_time_format(values: pl.Series) -> tuple[str, str, bool] | None:
    """The TIME_FORMATS entry that reads most of ``values`` (a sample of timeStamp texts), if any."""
    best, best_hits = None, 0
    for entry in TIME_FORMATS:
        hits = values.str.to_datetime(entry[1], strict=False).is_not_null().sum()
        if hits > best_hits:
            best, best_hits = entry, hits
    return best


def _start_ts(raw: pl.DataFrame, tz: str) -> tuple[pl.Expr, list[str]]:
    """start_ts expression for ``raw`` (with a stripped ``timeStamp`` column) and the notes it needs."""
    if "timeStamp" not in raw.columns:
        return pl.lit(None, T.UTC_TIME), ["no timeStamp column (timestamp_format=none): start_ts is null"]
    texts = raw.get_column("timeStamp").drop_nulls()
    sample = texts.head(2000)
    if sample.is_empty() or sample.str.contains(r"^-?\d+$").all():
        return _epoch_ms(pl.col("timeStamp")), []
    entry = pick_time_format(sample)
    if entry is None:
        unknown = f"timeStamp {sample[0][:40]!r} is neither epoch ms nor a known date format: start_ts is null"
        return pl.lit(None, T.UTC_TIME), [unknown]
    pattern, fmt, zoned = entry
    parsed = pl.col("timeStamp").str.to_datetime(fmt, strict=False)
    epoch = _epoch_ms(pl.col("timeStamp"))
    if zoned:
        return pl.coalesce(epoch, parsed.dt.convert_time_zone("UTC").cast(T.UTC_TIME)), [f"timeStamp formatted {pattern}"]
    return pl.coalesce(epoch, local_to_utc(parsed, tz)), [f"timeStamp formatted {pattern}; {zone_note(tz)}"]


def load_sample_frame(raw: pl.DataFrame, tz: str, source: str) -> tuple[pl.DataFrame, list[ParseWarning], list[str]]:
    """``load_sample`` rows from ``raw``: string columns named as JMeter's CSV header (``FIELDS``)
    plus ``line`` (and, from XML, ``nested_samples``). Returns (rows, warnings, notes).

    ``is_transaction`` marks a transaction controller's sample whose children are rows too, so that
    adding every row counts their time twice; a parent sample with its children nested (XML) is
    not marked: its children are not rows."""
    # JMeter pads nothing; stripping is for hand-edited files, and only where a value is parsed
    parsed = ("timeStamp", "success", *_NUMBERS)
    stripped = raw.with_columns(pl.col(c).str.strip_chars() for c in parsed if c in raw.columns)
    start_ts, notes = _start_ts(stripped, tz)
    present = set(stripped.columns)
    columns = [pl.col("line").cast(pl.Int64), start_ts.alias("start_ts"), pl.lit(source).alias("source")]
    columns += [_number(pl.col(name), dtype).alias(column) for name, (column, dtype) in _NUMBERS.items() if name in present]
    columns += [
        pl.when(pl.col(name) != "").then(pl.col(name)).alias(column) for name, column in _STRINGS.items() if name in present
    ]
    if "success" in present:
        lower = pl.col("success").str.to_lowercase()
        columns.append(pl.when(lower == "true").then(True).when(lower == "false").then(False).alias("success"))
    message = pl.col("responseMessage") if "responseMessage" in present else pl.lit(None, pl.String)
    transaction = message.str.contains(TRANSACTION_RE).fill_null(False)
    if "nested_samples" in present:  # XML: a parent sample whose children are nested, not rows of their own
        columns.append((transaction & (pl.col("nested_samples") > 0)).alias("parent_transaction"))
        transaction = transaction & (pl.col("nested_samples") == 0)
    columns.append(transaction.alias("is_transaction"))
    typed = stripped.select(columns)
    warnings = _warnings(stripped, typed)
    if "elapsed" not in present:
        notes.append("no elapsed column: elapsed_ms is null")
    notes += _transaction_notes(typed)
    if "sample_count" in typed.columns and typed.filter(pl.col("sample_count") > 1).height:
        notes.append(
            f"{typed.filter(pl.col('sample_count') > 1).height} rows stand for several samples each "
            "(SampleCount > 1: statistical/batch mode)"
        )
    missing = {c: pl.lit(None, t) for c, t in T.LOAD_SAMPLE_SCHEMA.items() if c not in typed.columns}
    return typed.with_columns(**missing), warnings, notes


def _warnings(stripped: pl.DataFrame, typed: pl.DataFrame) -> list[ParseWarning]:
    warnings: list[ParseWarning] = []
    readable_times = "timeStamp" in stripped.columns and typed.get_column("start_ts").is_not_null().any()
    checks = [("timeStamp", "start_ts", "timeStamp")] if readable_times else []
    checks += [(name, column, name) for name, (column, _) in _NUMBERS.items() if name in stripped.columns]
    for name, column, shown in checks:
        bad = pl.concat(
            [stripped.select("line", pl.col(name).alias("raw")), typed.select(pl.col(column).alias("value"))], how="horizontal"
        )
        bad = bad.filter(pl.col("raw").is_not_null() & (pl.col("raw") != "") & pl.col("value").is_null())
        warnings += row_warnings(
            bad.select("line", "raw"), lambda v, shown=shown: f"unreadable {shown} {str(v)[:40]!r}; sample kept without it"
        )
    return warnings


def _transaction_notes(typed: pl.DataFrame) -> list[str]:
    notes = []
    for column, what in (
        ("is_transaction", "each one's elapsed spans its child samples, which are rows too"),
        ("parent_transaction", "their child samples are nested in them, not rows"),
    ):
        tx = typed.filter(pl.col(column)) if column in typed.columns else typed.clear()
        if tx.is_empty():
            continue
        labels = tx.get_column("label").drop_nulls().unique(maintain_order=True).to_list() if "label" in tx.columns else []
        shown = ", ".join(repr(label) for label in labels[:10]) + (f" and {len(labels) - 10} more" if len(labels) > 10 else "")
        notes.append(f"{tx.height} transaction-controller sample{'s' if tx.height > 1 else ''} (labels {shown}): {what}")
    return notes


def finish_table(typed: pl.DataFrame) -> tuple[pl.DataFrame, tuple[object, object] | None]:
    """The conformed ``load_sample`` table and its time range (first start, last end)."""
    table = T.conform(T.LOAD_SAMPLE, typed)
    elapsed_us = (pl.col("elapsed_ms") * 1000).round().cast(pl.Int64, strict=False).fill_null(0)
    ends = table.select(
        pl.col("start_ts").min().alias("first"), (pl.col("start_ts") + pl.duration(microseconds=elapsed_us)).max().alias("last")
    ).row(0)
    return table, (ends if ends[0] is not None and ends[1] is not None else None)
