"""Prometheus HTTP API ``/api/v1/query_range`` and ``/api/v1/query`` responses (JSON).

Sample input (a ``matrix`` from query_range; a ``vector`` from query has ``"value": [ts, "v"]``
per series instead of ``values``; a ``scalar`` is ``"result": [ts, "v"]``)::

    {"status": "success",
     "data": {"resultType": "matrix",
              "result": [{"metric": {"__name__": "go_goroutines", "job": "prometheus"},
                          "values": [[1641889533, "21"], [1641889534, "32"], [1641889537, "43"]]}]}}

Also read: the bare ``data`` object, a list of responses in one file, and a folder of such
files as ``tiup diag`` writes them (one query per metric and time block, in
``monitor/metrics/<prometheus>/<metric>_<begin>_<end>.json``: the metric name comes from the
file name when the series has no ``__name__``).

Output table ``metric_sample`` (one row per sample; a missing step is simply absent):

    ts        Datetime  sample time (UTC): epoch seconds, or milliseconds when every
                        timestamp is past 1e11 (a note says so)
    metric    String    ``__name__``, else the file name up to its first dot
    labels    String    the other labels as ``k1=v1,k2=v2`` sorted by key ("" when none);
                        labels with an empty value are dropped (Prometheus treats them as absent)
    instance  String    the ``instance`` label, else null
    value     Float64   "NaN", "+Inf", "-Inf" kept as float values
    source    String    member path

``records`` is the number of samples. A ``"status": "error"`` response raises ParseError with
Prometheus' error text (in a list, failed responses are warnings and the others are read).

>>> from dbdiag.parsers.base import ParseContext
>>> text = '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"up","instance":"db1:9100"},"value":[1700000000.5,"1"]}]}}'
>>> parse(text, ParseContext("up.json")).tables["metric_sample"].select("ts", "metric", "labels", "value").rows()
[(datetime.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=zoneinfo.ZoneInfo(key='UTC')), 'up', 'instance=db1:9100', 1.0)]
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import json_text
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.timebounds import BOUNDS_TEXT, epoch_inside

# Epoch seconds reach 1e11 in the year 5138; epoch milliseconds passed 1e11 in 1973.
MS_EPOCH_THRESHOLD = 1e11
MAX_REASON_VALUE = 40

_RESULT_TYPE_RE = lazy_compile(r'"resultType"\s*:\s*"(matrix|vector|scalar|string)"')
_ERROR_RE = lazy_compile(r'"status"\s*:\s*"error"')
_ERROR_TYPE_RE = lazy_compile(r'"errorType"\s*:')
_DIAG_RANGE_RE = lazy_compile(r"_\d{4}-\d{2}-\d{2}T[^_/]*_\d{4}-\d{2}-\d{2}T[^_/]*?(?=\.json|\.zst|\.gz|$)")


@dataclass
class SampleColumns:
    """Samples gathered column by column (one list per output column), and what was skipped."""

    ts: list[object] = field(default_factory=list)
    metric: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    instance: list[str | None] = field(default_factory=list)
    value: list[object] = field(default_factory=list)
    series: int = 0
    warnings: list[ParseWarning] = field(default_factory=list)

    def add_series(self, metric: str, labels: dict, times: list, values: list) -> None:
        """One series: ``labels`` without __name__, ``times``/``values`` as given (parallel lists)."""
        canonical = canonical_labels(labels)
        instance = labels.get("instance") or None
        count = len(times)
        self.ts.extend(times)
        self.value.extend(values)
        self.metric.extend([metric] * count)
        self.labels.extend([canonical] * count)
        self.instance.extend([instance] * count)
        self.series += 1


def canonical_labels(labels: dict) -> str:
    """``k=v`` pairs sorted by key, comma-joined, without ``__name__`` and empty values.

    >>> canonical_labels({"job": "tidb", "__name__": "up", "instance": "a:1", "type": ""})
    'instance=a:1,job=tidb'
    """
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "__name__" and v not in ("", None))


def series_labels(series: dict) -> dict[str, str]:
    """A series' ``metric`` object as text labels (null values as "").

    >>> series_labels({"metric": {"__name__": "up", "shard": 3, "zone": None}})
    {'__name__': 'up', 'shard': '3', 'zone': ''}
    """
    return {str(k): ("" if v is None else str(v)) for k, v in (series.get("metric") or {}).items()}


def metric_from_source(source: str) -> str:
    """The metric name a file name carries: the base name without tiup diag's ``_<begin>_<end>``
    RFC 3339 range (``monitor/metrics/<prometheus>/<metric>_<begin>_<end>.json``), up to its first dot.

    >>> metric_from_source("metrics/tidb_server_handle_query_duration_seconds_bucket.json")
    'tidb_server_handle_query_duration_seconds_bucket'
    >>> metric_from_source("monitor/metrics/10.0.1.9-9090/tidb_server_query_total_2024-05-14T10:00:00+08:00_2024-05-14T11:00:00+08:00.json")
    'tidb_server_query_total'
    """
    base = source.replace("\\", "/").rsplit("/", 1)[-1]
    base = _DIAG_RANGE_RE.sub("", base)
    return base.split(".", 1)[0] or base


def _texts(items: list[object]) -> pl.Series:
    """JSON scalars as text; all-string or all-number columns are converted without a Python loop."""
    for dtype in (pl.String, pl.Float64):
        try:
            return pl.Series(items, dtype=dtype, strict=True).cast(pl.String)
        except (TypeError, ValueError, pl.exceptions.PolarsError):
            continue
    return pl.Series([None if item is None else str(item) for item in items], dtype=pl.String)


def sample_frame(cols: SampleColumns, source: str) -> tuple[pl.DataFrame, list[str]]:
    """The ``metric_sample`` table from gathered columns; epoch unit detected over the whole member."""
    raw = pl.DataFrame(
        {
            "ts_raw": _texts(cols.ts),
            "metric": pl.Series(cols.metric, dtype=pl.String),
            "labels": pl.Series(cols.labels, dtype=pl.String),
            "instance": pl.Series(cols.instance, dtype=pl.String),
            "value_raw": _texts(cols.value),
        }
    )
    epoch = pl.col("ts_raw").str.strip_chars().cast(pl.Float64, strict=False)
    raw = raw.with_columns(epoch_s=epoch, value=pl.col("value_raw").str.strip_chars().cast(pl.Float64, strict=False))
    notes = []
    finite = raw["epoch_s"].drop_nulls().drop_nans()
    if finite.len() and finite.abs().min() > MS_EPOCH_THRESHOLD:
        raw = raw.with_columns(epoch_s=pl.col("epoch_s") / 1000.0)
        notes.append("timestamps are epoch milliseconds (every one is past 1e11); read as ms")
    # a time outside 1970-2200 (8,000 years out) is unreadable: as a Python datetime it overflows
    ts = pl.when(epoch_inside(pl.col("epoch_s"))).then(
        (pl.col("epoch_s") * 1e6).round(0).cast(pl.Int64, strict=False).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    )
    frame = raw.with_columns(ts=ts, source=pl.lit(source))
    bad = frame.filter(pl.col("ts").is_null() | pl.col("value").is_null())
    if bad.height:
        first = bad.row(0, named=True)
        cols.warnings.append(
            ParseWarning(
                None,
                f"{bad.height} samples with an unreadable time or value skipped (a time outside {BOUNDS_TEXT} "
                f"is unreadable; first: metric {first['metric']!r}, "
                f"time {str(first['ts_raw'])[:MAX_REASON_VALUE]!r}, value {str(first['value_raw'])[:MAX_REASON_VALUE]!r})",
            )
        )
        frame = frame.filter(pl.col("ts").is_not_null() & pl.col("value").is_not_null())
    return T.conform(T.METRIC_SAMPLE, frame), notes


def sample_result(frame: pl.DataFrame, cols: SampleColumns, notes: list[str]) -> ParseResult:
    """The result for a ``metric_sample`` table: ``records`` counts samples, the time range spans them."""
    start, end = frame["ts"].min(), frame["ts"].max()
    return ParseResult(
        tables={T.METRIC_SAMPLE: frame},
        records=frame.height,
        warnings=cap_warnings(cols.warnings),
        notes=notes,
        time_range=(start, end) if start is not None else None,
    )


def load_json(text: str) -> object:
    try:
        return json_text.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as error:
        raise ParseError(f"not JSON ({error.msg} at line {error.lineno})") from None


def _pair(sample: object) -> tuple[object, object] | None:
    if isinstance(sample, (list, tuple)) and len(sample) == 2 and not isinstance(sample[0], (list, dict)):
        return sample[0], sample[1]
    return None


def _read_series(item: object, kind: str, fallback: str, where: str, cols: SampleColumns) -> None:
    if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict):
        cols.warnings.append(ParseWarning(None, f"{where}: not a series object; skipped"))
        return
    labels = series_labels(item)
    metric = labels.get("__name__") or fallback
    samples = item.get("values") if kind == "matrix" else [item.get("value")]
    if not isinstance(samples, list):
        if "histograms" in item or "histogram" in item:
            cols.warnings.append(ParseWarning(None, f"{where}: native histogram samples are not read; skipped"))
        else:
            cols.warnings.append(ParseWarning(None, f"{where}: no {'values' if kind == 'matrix' else 'value'}; skipped"))
        return
    try:  # the usual case, at C speed: every sample a pair (bad cells are caught as unreadable later)
        times, values = zip(*samples) if samples else ((), ())
    except (TypeError, ValueError):
        pairs = [_pair(s) for s in samples]
        good = [p for p in pairs if p is not None]
        cols.warnings.append(ParseWarning(None, f"{where}: {len(pairs) - len(good)} samples not [time, \"value\"] pairs; skipped"))
        times, values = zip(*good) if good else ((), ())
    if times:
        cols.add_series(metric, labels, list(times), list(values))


def _read_data(data: dict, fallback: str, where: str, cols: SampleColumns) -> None:
    kind = data.get("resultType")
    result = data.get("result")
    if kind == "scalar":
        pair = _pair(result)
        if pair is None:
            cols.warnings.append(ParseWarning(None, f"{where}: scalar result is not [time, \"value\"]; skipped"))
        else:
            cols.add_series(fallback, {}, [pair[0]], [pair[1]])
        return
    if kind not in ("matrix", "vector"):
        cols.warnings.append(ParseWarning(None, f"{where}: resultType {str(kind)[:MAX_REASON_VALUE]!r} holds no samples; skipped"))
        return
    if not isinstance(result, list):
        cols.warnings.append(ParseWarning(None, f"{where}: result is not a list; skipped"))
        return
    for number, item in enumerate(result):
        _read_series(item, kind, fallback, f"{where} series {number}", cols)


def _error_text(response: dict) -> str:
    kind = str(response.get("errorType") or "error")[:MAX_REASON_VALUE]
    return f"Prometheus {kind}: {str(response.get('error') or 'no error text')[:200]}"


def parse(text: str, ctx: ParseContext) -> ParseResult:
    document = load_json(text)
    responses = document if isinstance(document, list) else [document]
    fallback = metric_from_source(ctx.source)
    cols = SampleColumns()
    errors = []
    readable = 0
    for number, response in enumerate(responses):
        where = f"response {number}" if isinstance(document, list) else "response"
        if not isinstance(response, dict):
            cols.warnings.append(ParseWarning(None, f"{where}: not a JSON object; skipped"))
            continue
        if response.get("status") == "error":
            errors.append(_error_text(response))
            cols.warnings.append(ParseWarning(None, f"{where}: {errors[-1]}"))
            continue
        data = response.get("data") if "data" in response else response
        if not isinstance(data, dict) or "resultType" not in data:
            cols.warnings.append(ParseWarning(None, f"{where}: no data.resultType; skipped"))
            continue
        readable += 1
        _read_data(data, fallback, where, cols)
    if errors and not cols.series:
        raise ParseError(errors[0] if len(errors) == 1 else f"{len(errors)} error responses; first: {errors[0]}")
    if not readable:
        raise ParseError("no Prometheus response (no data.resultType) in the JSON")
    frame, notes = sample_frame(cols, ctx.source)
    if (frame["metric"] == fallback).any():
        notes.append(f"series without __name__ named after the file: {fallback}")
    notes.insert(0, f"{cols.series} series, {frame.height} samples")
    return sample_result(frame, cols, notes)


def detect(head: str, name: str) -> float:
    stripped = head.lstrip("\ufeff \t\r\n")
    if not stripped.startswith(("{", "[")):
        return 0.0
    if _RESULT_TYPE_RE.search(stripped) and '"result"' in stripped:
        return 0.95
    if _RESULT_TYPE_RE.search(stripped):
        return 0.8  # a huge first label set can push "result" out of the head
    if _ERROR_RE.search(stripped) and _ERROR_TYPE_RE.search(stripped):
        return 0.7  # an error response: recognised so the inventory shows Prometheus' error
    return 0.0


SPEC = ParserSpec(
    kind="prometheus-json",
    description="Prometheus HTTP API query/query_range JSON (matrix, vector, scalar): metric samples",
    detect=detect,
    parse=parse,
)
