"""JMeter JTL results in CSV (``-l results.jtl`` with ``jmeter.save.saveservice.output_format=csv``).

Sample input (JMeter 5.x defaults: a header line, epoch-ms timeStamp, ``,`` delimiter; fields
holding the delimiter, a quote or a line break are double-quoted)::

    timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect
    1551783627191,351,JR-OK,200,Good request,Thread Group 1-1,text,true,,18,8,1,1,null,0,0,0
    1551783628395,279,TC-Buy,200,"Number of samples in transaction : 2, number of failing samples : 0",Thread Group 1-1,,true,,36,16,1,1,null,270,12,0

Also read: any subset and order of JMeter's columns (``jmeter_jtl.FIELDS``) plus custom
variables (quoted names, ignored); other delimiters (``default_delimiter``: ``\\t`` ``;`` ``|``
...); ``timestamp_format`` patterns (``yyyy/MM/dd HH:mm:ss.SSS``... zone-less ones are read in
--tz, said in a note); files WITHOUT a header when their column count is one of JMeter's default
layouts (10: 2.1-2.11, 12: 2.12-2.13, 14: 3.0, 16: 3.1-4.0, 17: 5.0+; ``jmeter_jtl.DEFAULT_LAYOUTS``).
A headerless file with another column set is refused with the reason: its columns cannot be known.

Output ``load_sample``, one row per CSV row: start_ts = timeStamp (the sample start), elapsed_ms,
label, success, response_code, thread_name, latency_ms = Latency, connect_ms = Connect,
idle_ms = IdleTime, bytes, sent_bytes, all_threads, grp_threads, is_transaction (responseMessage
``Number of samples in transaction : N, number of failing samples : M``); ``line`` is the line
the row starts on. A transaction's children are rows of their own (without "Generate parent
sample" always; with it, JMeter 5.5+ writes them after the parent, older versions not at all).
JMeter 5.5+ also writes redirects and embedded resources as rows after their parent; the CSV does
not mark any row as a child. Columns absent from the file are null.
"""

from __future__ import annotations

import csv
import io
import re

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.jmeter_jtl import DEFAULT_LAYOUTS, FIELDS, finish_table, load_sample_frame, pick_time_format
from dbdiag.parsers.kit.times import check_tz
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

DELIMITERS = (",", "\t", ";", "|")
# JMeter's own header sniffing (CSVSaveService.DELIMITER_PATTERN): words joined by one non-word character.
_HEADER_DELIMITER_RE = lazy_compile(r'\w+((\W)\w+)?(\2\w+)*(\2"\w+")*')
_EPOCH_MS_RE = lazy_compile(r"^\d{9,14}$")
_KNOWN = frozenset(FIELDS)
_TRANSACTION_MARK = "Number of samples in transaction : "
_BARE = frozenset({  # fields JMeter writes as bare numbers or booleans: never quoted, never a line break
    "timeStamp", "elapsed", "success", "bytes", "sentBytes", "grpThreads", "allThreads", "Latency", "SampleCount",
    "ErrorCount", "IdleTime", "Connect",
})


def _first_line(text: str) -> tuple[int, int, int, str]:
    """(0-based line number, start offset, offset after its line end, text) of the first non-blank line."""
    number, start, limit = 0, 0, min(len(text), 65536)
    while start < limit:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        if text[start:end].strip():
            return number, start, end + 1, text[start:end].rstrip("\r").lstrip("\ufeff")
        number, start = number + 1, end + 1
    return number, start, start, ""


def _header(line: str) -> tuple[str, list[str]] | None:
    """(delimiter, column names) when ``line`` is a JMeter CSV header."""
    matched = _HEADER_DELIMITER_RE.fullmatch(line)
    candidates = DELIMITERS + ((matched.group(2),) if matched and matched.group(2) else ())
    for delimiter in dict.fromkeys(candidates):
        raw = [name.strip() for name in line.split(delimiter)]
        # JMeter quotes only variable names; a file re-saved by a spreadsheet may quote every name
        names = [n[1:-1] if len(n) > 2 and n[0] == n[-1] == '"' else n for n in raw]
        variables = [n for r, n in zip(raw, names) if r != n and n not in _KNOWN]
        known = [n for n in names if n in _KNOWN]
        if len(known) >= 3 and {"elapsed", "label"} & set(known) and 2 * len(known) >= len(names) - len(variables):
            return delimiter, names
    return None


def _first_record(head: str, delimiter: str) -> list[str]:
    try:
        return next(csv.reader(io.StringIO(head), delimiter=delimiter, strict=False), [])
    except csv.Error:
        return []


def _headerless(head: str) -> tuple[str, str, tuple[str, ...]] | None:
    """(delimiter, JMeter versions, columns) when the first record fits a default layout."""
    for delimiter in DELIMITERS:
        fields = [f.strip() for f in _first_record(head, delimiter)]
        layout = DEFAULT_LAYOUTS.get(len(fields))
        if layout is None or not fields[1].isdigit() or fields[7].lower() not in ("true", "false"):
            continue
        if _EPOCH_MS_RE.match(fields[0]) or pick_time_format(pl.Series([fields[0]])) is not None:
            return delimiter, layout[0], layout[1]
    return None


def _unclosed_quote_cut(body: str) -> int | None:
    """Offset of the line holding a quote that is never closed (file cut inside a quoted field)."""
    if body.count('"') % 2 == 0:
        return None
    return body.rfind("\n", 0, body.rfind('"')) + 1


def _read_polars(body: str, delimiter: str, names: list[str]) -> pl.DataFrame:
    """Rows of ``body`` with ``_lines``, the number of lines each spans (quoted line breaks)."""
    frame = pl.read_csv(
        io.BytesIO(body.encode("utf-8", "surrogatepass")),
        has_header=False,
        separator=delimiter,
        quote_char='"',
        schema={name: pl.String for name in names},
        truncate_ragged_lines=True,
    )
    if '"' not in body:  # no quoted field, so no field holds a line break
        return frame.with_columns(_lines=pl.lit(1, pl.Int64))
    text_columns = [c for c in names if c not in _BARE]
    newlines = pl.sum_horizontal(pl.col(c).fill_null("").str.count_matches("\n", literal=True) for c in text_columns)
    return frame.with_columns(_lines=(newlines + 1).cast(pl.Int64))


def _read_python(body: str, delimiter: str, names: list[str]) -> pl.DataFrame:
    """Slow path for text polars refuses (a stray quote inside an unquoted field)."""
    reader = csv.reader(io.StringIO(body, newline=""), delimiter=delimiter, strict=False)
    rows, spans, previous = [], [], 0
    for fields in reader:
        rows.append((fields + [None] * len(names))[: len(names)] if fields else [None] * len(names))
        spans.append(reader.line_num - previous)
        previous = reader.line_num
    frame = pl.DataFrame(rows, schema={name: pl.String for name in names}, orient="row")
    return frame.with_columns(
        pl.col(c).replace("", None) for c in names
    ).with_columns(_lines=pl.Series(spans, dtype=pl.Int64))


def _read(body: str, delimiter: str, names: list[str], notes: list[str]) -> tuple[pl.DataFrame, int | None]:
    """(rows with ``_lines``, offset where an unclosed quoted field made us stop, or None)."""
    refused = (pl.exceptions.ComputeError, pl.exceptions.NoDataError)
    if not body.strip():
        return pl.DataFrame(schema={**{n: pl.String for n in names}, "_lines": pl.Int64}), None
    try:
        return _read_polars(body, delimiter, names), None
    except refused as error:
        reason = str(error).splitlines()[0][:80]
    cut = _unclosed_quote_cut(body)
    if cut is not None:
        try:
            return _read_polars(body[:cut], delimiter, names), cut
        except refused:
            pass
    notes.append(f"read row by row: the CSV reader refused the text ({reason})")
    return _read_python(body, delimiter, names), None


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}__{seen[name]}")
    return out


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    first_number, offset, after, first = _first_line(text)
    if not first:
        raise ParseError("empty JTL")
    header = _header(first)
    if header is not None:
        delimiter, names = header
        body_line, offset = first_number + 2, after
        notes = [f"header with {len(names)} columns, delimiter {delimiter!r}"]
    else:
        headerless = _headerless(text[offset : offset + 65536])
        if headerless is None:
            fields = max((_first_record(first, d) for d in DELIMITERS), key=len)
            raise ParseError(
                f"no JMeter header line, and the first row's {len(fields)} fields match none of JMeter's default "
                f"layouts ({', '.join(str(n) for n in DEFAULT_LAYOUTS)} columns starting timeStamp,elapsed): "
                "a custom column set cannot be read without its header (print_field_names=true)"
            )
        delimiter, versions, layout = headerless
        names = list(layout)
        body_line = first_number + 1
        notes = [f"no header: {len(names)} columns read as {versions}'s default layout ({','.join(names)})"]
    names = _unique(names)
    body = text[offset:]
    frame, cut = _read(body, delimiter, names, notes)
    if cut is not None:
        reason = "a quoted field is never closed (file cut short?); text from here skipped"
        warnings.append(ParseWarning(body_line + body[:cut].count("\n"), reason))
        body = body[:cut]
    frame = frame.with_columns(line=(body_line + pl.col("_lines").cum_sum() - pl.col("_lines")))
    if not body.endswith("\n") and frame.height and frame.row(-1, named=True)[names[-1]] is None:
        last_line = frame.row(-1, named=True)["line"]
        warnings.append(ParseWarning(last_line, "last row cut short (no line end, fields missing); skipped"))
        frame = frame.head(-1)
    frame = frame.filter(~pl.all_horizontal(pl.col(c).is_null() for c in names))
    repeated = pl.all_horizontal(pl.col(c) == pl.lit(c) for c in names[:2])
    for line in frame.filter(repeated).get_column("line").head(5).to_list():
        warnings.append(ParseWarning(line, "header line repeated (several results files appended?); skipped"))
    frame = frame.filter(~repeated.fill_null(False))
    raw = frame.select([c for c in frame.columns if c in _KNOWN or c == "line"])
    extra = [n for n in names if n not in _KNOWN]
    if extra:
        notes.append(f"columns not read: {', '.join(extra[:10])}")
    if raw.is_empty():
        raise ParseError("JMeter CSV with no sample rows")
    typed, row_warnings, typing_notes = load_sample_frame(raw, tz, ctx.source)
    table, time_range = finish_table(typed)
    return ParseResult(
        tables={T.LOAD_SAMPLE: table},
        records=table.height,
        warnings=cap_warnings(warnings + row_warnings),
        notes=notes + typing_notes,
        time_range=time_range,
    )


def detect(head: str, name: str) -> float:
    _, start, _, first = _first_line(head)
    header = _header(first)
    if header is not None:
        return 0.95 if {"elapsed", "label"} <= set(header[1]) else 0.8
    if first.lstrip().startswith("<"):
        return 0.0
    if _headerless(head[start:]) is not None:
        return 0.9
    if _TRANSACTION_MARK in head and re.search(r"(?m)[,\t;|](?:true|false)[,\t;|]", head):
        return 0.6  # a JMeter CSV with a custom column set and no header: recognised, refused with the reason
    return 0.0


SPEC = ParserSpec(
    kind="jmeter-jtl-csv",
    description="JMeter JTL results as CSV (with or without header, any delimiter): one row per sample",
    detect=detect,
    parse=parse,
)
