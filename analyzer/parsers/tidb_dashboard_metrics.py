"""TiDB (Cloud) Dashboard metrics API responses: Prometheus range queries wrapped per panel query.

Sample input (``data`` is a list, one entry per query of the panel; samples are objects, not pairs)::

    {"status": "success",
     "data": [{"expr": "irate(process_cpu_seconds_total{ job=\\"tidb\\",}[1m])",
               "legend": "{instance}",
               "result": [{"metric": {"instance": "tidb-810cad05/172.18.3.6:10080", "sqlType": "", "job": "tidb"},
                           "values": [{"timestamp": 1734188847, "value": "0.03933333333358557"}, ...]}]}]}

Output table ``metric_sample`` (as ``prometheus-json``): ts (epoch seconds, or milliseconds when
every timestamp is past 1e11, noted), metric = ``__name__`` when the series has one, else the
query (``expr``) as written, labels (sorted ``k=v``; the empty labels the dashboard adds for its
legends are dropped), instance, value (NaN/Inf kept), source. ``records`` is the number of samples.

>>> from dbdiag.parsers.base import ParseContext
>>> text = '{"status":"success","data":[{"expr":"up","legend":"","result":[{"metric":{"instance":"a:1","type":""},"values":[{"timestamp":1734188847,"value":"1"}]}]}]}'
>>> parse(text, ParseContext("m.json")).tables["metric_sample"].select("metric", "labels", "value").rows()
[('up', 'instance=a:1', 1.0)]
"""

from __future__ import annotations


from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.prometheus_json import (
    MAX_REASON_VALUE,
    SampleColumns,
    load_json,
    sample_frame,
    sample_result,
    series_labels,
)
from dbdiag.patterns import lazy_compile

_DATA_LIST_RE = lazy_compile(r'"data"\s*:\s*\[')
_EXPR_RE = lazy_compile(r'"expr"\s*:\s*"')
_SAMPLE_OBJECT_RE = lazy_compile(r'\{\s*"timestamp"\s*:\s*-?\d')


def _read_series(item: object, expr: str, where: str, cols: SampleColumns) -> None:
    if not isinstance(item, dict) or not isinstance(item.get("metric", {}), dict) or not isinstance(item.get("values"), list):
        cols.warnings.append(ParseWarning(None, f"{where}: not a series with metric and values; skipped"))
        return
    labels = series_labels(item)
    samples = item["values"]
    good = [s for s in samples if isinstance(s, dict) and "timestamp" in s and "value" in s]
    if len(good) < len(samples):
        cols.warnings.append(ParseWarning(None, f"{where}: {len(samples) - len(good)} samples without timestamp/value; skipped"))
    if good:
        cols.add_series(labels.get("__name__") or expr, labels, [s["timestamp"] for s in good], [s["value"] for s in good])


def parse(text: str, ctx: ParseContext) -> ParseResult:
    document = load_json(text)
    if not isinstance(document, dict) or not isinstance(document.get("data"), list):
        raise ParseError("not a TiDB Dashboard metrics response (no \"data\" list)")
    if document.get("status") not in (None, "success"):
        raise ParseError(f"status {str(document.get('status'))[:MAX_REASON_VALUE]!r}: {str(document.get('error') or '')[:200]}")
    cols = SampleColumns()
    queries = 0
    for number, query in enumerate(document["data"]):
        if not isinstance(query, dict) or not isinstance(query.get("result"), list):
            cols.warnings.append(ParseWarning(None, f"query {number}: no result list; skipped"))
            continue
        queries += 1
        expr = str(query.get("expr") or f"query {number}")
        for index, item in enumerate(query["result"]):
            _read_series(item, expr, f"query {number} series {index}", cols)
    if not queries:
        raise ParseError("TiDB Dashboard metrics response holds no query with a result list")
    frame, notes = sample_frame(cols, ctx.source)
    notes.insert(0, f"{queries} queries, {cols.series} series, {frame.height} samples; metric = the query (expr) when no __name__")
    return sample_result(frame, cols, notes)


def detect(head: str, name: str) -> float:
    stripped = head.lstrip("\ufeff \t\r\n")
    if not stripped.startswith("{") or not _DATA_LIST_RE.search(stripped) or not _EXPR_RE.search(stripped):
        return 0.0
    if '"result"' in stripped and _SAMPLE_OBJECT_RE.search(stripped):
        return 0.9
    return 0.6 if '"legend"' in stripped else 0.3


SPEC = ParserSpec(
    kind="tidb-dashboard-metrics",
    description="TiDB Dashboard metrics API JSON (Prometheus range queries per panel query): metric samples",
    detect=detect,
    parse=parse,
)
