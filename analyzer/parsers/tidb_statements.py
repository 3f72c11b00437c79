"""TiDB statement summaries: TiDB Dashboard "SQL Statements" exports and ``statements_summary`` tables.

Sample inputs. ``information_schema.(cluster_)statements_summary(_history)`` as ``mysql -B`` TSV
(or CSV with a header; latencies in nanoseconds, times in the session zone without offset)::

    INSTANCE	SUMMARY_BEGIN_TIME	SUMMARY_END_TIME	STMT_TYPE	SCHEMA_NAME	DIGEST	DIGEST_TEXT	...	EXEC_COUNT	...	SUM_LATENCY	MAX_LATENCY	MIN_LATENCY	AVG_LATENCY	...	AVG_PROCESSED_KEYS	...	FIRST_SEEN	LAST_SEEN	...	PLAN_DIGEST	...
    10.0.1.5:10080	2024-05-14 10:00:00	2024-05-14 10:30:00	Select	sbtest	0611cc2f...	select * from `sbtest1` where `id` = ?	...	120000	...	156000000000	...

The Dashboard's ``/statements/list`` and ``/statements/plan/detail`` JSON (one object or a list,
lower-case keys, latencies in ns, ``first_seen``/``last_seen`` as epoch seconds)::

    [{"digest_text": "select * from `sbtest1` where `id` = ?", "digest": "0611cc2f...", "exec_count": 120000,
      "sum_latency": 156000000000, "avg_latency": 1300000, "max_latency": 48000000, ..., "first_seen": 1715680931, ...}]

and its "Export" CSV (all those keys as the header; ``first_seen``/``last_seen`` printed as
``01-02 15:04:05``: no year, no zone).

Output table ``statement_summary`` (one row per input row; a ``_history`` table has one row per
digest and time window):

    digest, digest_text, schema_name, plan_digest   String  as exported ("" read as null)
    instance                 String    INSTANCE (cluster_ tables), else null
    exec_count               Int64
    sum/avg/max/min_latency_s Float64  nanoseconds / 1e9
    avg_rows_examined        Float64   AVG_PROCESSED_KEYS (keys TiKV processed), else AVG_TOTAL_KEYS
    first_seen, last_seen    Datetime  epoch seconds as UTC; table times read in --tz (noted); the
                                       export CSV's year-less times are not kept (noted)
    source                   String    member path

In a Dashboard list, the API returns 0 or "" for every field it was not asked for: a field that is
0 or empty in every row of a list is read as unknown (null), and a note names those fields.

>>> from dbdiag.parsers.base import ParseContext
>>> text = '{"digest": "ab", "digest_text": "select ?", "exec_count": 4, "sum_latency": 2000000000, "first_seen": 1715680931}'
>>> parse(text, ParseContext("detail.json")).tables["statement_summary"].select("exec_count", "sum_latency_s", "first_seen").rows()
[(4, 2.0, datetime.datetime(2024, 5, 14, 10, 2, 11, tzinfo=zoneinfo.ZoneInfo(key='UTC')))]
"""

from __future__ import annotations

import json

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import json_text
from dbdiag.parsers.kit.numeric import true_divide
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.parsers.sql_table_export import header_names, read_export
from dbdiag.patterns import lazy_compile
from dbdiag.timebounds import inside

NS_PER_S = 1e9
LATENCIES = {"sum_latency_s": "sum_latency", "avg_latency_s": "avg_latency", "max_latency_s": "max_latency", "min_latency_s": "min_latency"}
TEXTS = {"digest": "digest", "digest_text": "digest_text", "schema_name": "schema_name", "plan_digest": "plan_digest"}
REQUIRED = {"digest_text", "exec_count"}
_JSON_KEY_RE = lazy_compile(r'"([a-z_]+)"\s*:')
_YEARLESS_RE = r"^\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"


def _is_summary(names: set[str]) -> bool:
    return REQUIRED <= names and bool({"sum_latency", "avg_latency"} & names) and "query_time" not in names


def _json_frame(text: str) -> tuple[pl.DataFrame, bool, list[ParseWarning]]:
    try:
        data = json_text.loads(text.lstrip("\ufeff"))
    except json.JSONDecodeError as error:
        raise ParseError(f"not JSON ({error.msg} at line {error.lineno})") from None
    is_list = isinstance(data, list)
    items = data if is_list else [data]
    objects, warnings = [], []
    for position, item in enumerate(items, start=1):
        if isinstance(item, dict) and "digest_text" in item and ({"exec_count", "sum_latency"} & item.keys()):
            objects.append({str(k).lower(): v for k, v in item.items()})
        else:
            warnings.append(ParseWarning(position, "item is not a statement summary object; skipped"))
    if not objects:
        raise ParseError("JSON has no statement summary object (digest_text with exec_count/sum_latency)")
    keys = list(dict.fromkeys(k for o in objects for k in o))

    def text_of(value: object) -> str | None:
        if value is None or isinstance(value, (list, dict)):
            return None
        return str(int(value)) if isinstance(value, bool) else str(value)

    columns = {k: [text_of(o.get(k)) for o in objects] for k in keys}
    return pl.DataFrame(columns, schema={k: pl.String for k in keys}), is_list, warnings


def _unselected(frame: pl.DataFrame) -> list[str]:
    """Numeric or time fields 0/empty in every row: a list API response did not select them."""
    candidates = ["exec_count", *LATENCIES.values(), "avg_processed_keys", "avg_total_keys", "first_seen", "last_seen"]
    present = [c for c in candidates if c in frame.columns]
    if not present or frame.is_empty():
        return []
    zero = frame.select(pl.col(c).fill_null("").is_in(["", "0", "0.0"]).all() for c in present).row(0)
    return [c for c, is_zero in zip(present, zero) if is_zero]


def _seen(column: str, tz: str) -> tuple[pl.Expr, pl.Expr, pl.Expr]:
    """(UTC time, read in --tz?, year-less?) for a FIRST_SEEN/LAST_SEEN column in any export form."""
    raw = pl.col(column).str.strip_chars()
    epoch = pl.when(raw.str.contains(r"^\d{9,11}(?:\.\d+)?$")).then(raw.cast(pl.Float64, strict=False))
    from_epoch = (epoch * 1e6).round(0).cast(pl.Int64).cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    naive = raw.str.replace(" ", "T", literal=True).str.to_datetime("%Y-%m-%dT%H:%M:%S%.f", strict=False, time_unit="us")
    local = local_to_utc(naive, tz)
    return pl.coalesce(from_epoch, local), from_epoch.is_null() & local.is_not_null(), raw.str.contains(_YEARLESS_RE).fill_null(False)


def _column(frame: pl.DataFrame, name: str) -> pl.Expr:
    # a full-length null column: a scalar literal would not broadcast through true_divide's map
    return pl.col(name) if name in frame.columns else pl.repeat(None, pl.len(), dtype=pl.String)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    stripped = text.lstrip("\ufeff \t\r\n")
    notes, warnings = [], []
    if stripped.startswith(("{", "[")):
        frame, is_list, warnings = _json_frame(text)
        if is_list:
            unknown = _unselected(frame)
            if unknown:
                frame = frame.with_columns(pl.lit(None, pl.String).alias(c) for c in unknown)
                notes.append(f"list response: fields 0 or empty in every row read as unknown (not requested): {', '.join(unknown)}")
    else:
        separator, names = header_names(text)
        if not _is_summary(set(names)):
            raise ParseError("header has no statement summary columns (DIGEST_TEXT, EXEC_COUNT and SUM_LATENCY/AVG_LATENCY)")
        frame = read_export(text, separator)
    if frame.is_empty():
        raise ParseError("statement summary export has a header but no rows")
    tz, tz_warning = check_tz(ctx.tz)
    if tz_warning:
        warnings.append(tz_warning)
    frame = frame.with_row_index("line", offset=1)
    rows_examined = "avg_processed_keys" if "avg_processed_keys" in frame.columns else "avg_total_keys"
    absent = (pl.lit(None, T.UTC_TIME), pl.lit(False), pl.lit(False))
    first, first_local, first_yearless = _seen("first_seen", tz) if "first_seen" in frame.columns else absent
    last, last_local, last_yearless = _seen("last_seen", tz) if "last_seen" in frame.columns else absent
    instance = "instance" if "instance" in frame.columns else "address"
    out = frame.select(
        "line",
        *(_column(frame, name).replace("", None).alias(column) for column, name in TEXTS.items()),
        _column(frame, instance).replace("", None).alias("instance"),
        exec_count=_column(frame, "exec_count").str.strip_chars().cast(pl.Int64, strict=False),
        exec_raw=_column(frame, "exec_count"),
        **{
            column: true_divide(_column(frame, name).str.strip_chars().cast(pl.Float64, strict=False), pl.lit(NS_PER_S))
            for column, name in LATENCIES.items()
        },
        avg_rows_examined=_column(frame, rows_examined).str.strip_chars().cast(pl.Float64, strict=False),
        first_seen=first,
        last_seen=last,
        local=pl.lit(False) | first_local.fill_null(False) | last_local.fill_null(False),
        yearless=pl.lit(False) | first_yearless | last_yearless,
        source=pl.lit(ctx.source),
    )
    for line, value in out.filter(pl.col("exec_raw").is_not_null() & pl.col("exec_count").is_null()).select("line", "exec_raw").head(20).iter_rows():
        warnings.append(ParseWarning(line, f"EXEC_COUNT {value[:20]!r} is not an integer; read as null"))
    notes.append(f"{out.height} statement summary rows; latencies read as nanoseconds")
    if out["local"].any():
        notes.append(zone_note(tz))
    if out["yearless"].any():
        notes.append("first_seen/last_seen printed without year or zone (Dashboard CSV export: 01-02 15:04:05); not kept")
    summary = T.conform(T.STATEMENT_SUMMARY, out)
    # within the time bounds: a year-0 time (a corrupt field) is no Python datetime; the pipeline drops its row
    start, end = summary.select(
        pl.col("first_seen").filter(inside(pl.col("first_seen"))).min(), pl.col("last_seen").filter(inside(pl.col("last_seen"))).max()
    ).row(0)
    return ParseResult(
        tables={T.STATEMENT_SUMMARY: summary},
        records=summary.height,
        warnings=cap_warnings(warnings),
        notes=notes,
        time_range=(start, end) if start is not None and end is not None else None,
    )


def detect(head: str, name: str) -> float:
    stripped = head.lstrip("\ufeff \t\r\n")
    if stripped.startswith(("{", "[")):
        keys = set(_JSON_KEY_RE.findall(stripped[:8192]))
        # a slow-query object has digest too, never digest_text with exec_count/sum_latency
        if "digest_text" in keys and keys & {"exec_count", "sum_latency"} and not keys & {"query_time", "connection_id"}:
            return 0.9
        return 0.0
    _, names = header_names(head)
    return 0.9 if _is_summary(set(names)) else 0.0


SPEC = ParserSpec(
    kind="tidb-dashboard-statements",
    description="TiDB statement summaries: Dashboard SQL Statements JSON/CSV, statements_summary(_history) CSV/TSV",
    detect=detect,
    parse=parse,
)
