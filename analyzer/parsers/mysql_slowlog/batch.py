"""Reading a log, its bytes, or a batch of small logs as one: pieces on two threads, then the whole
log's choices per file.
"""

from __future__ import annotations

import codecs
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import polars as pl

from dbdiag import tables as T
from dbdiag.native import slowlog_lines
from dbdiag.native.lazy import np
from dbdiag.native.slowlog_lines import Lines, decode, raw_lines, text_lines
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParseWarning
from dbdiag.parsers.kit.times import check_tz
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.parsers.mysql_slowlog.columns import any_per, merged_texts
from dbdiag.parsers.mysql_slowlog.entries import (
    banners_of,
    engine_of,
    keep_entries,
    nothing_reason,
    rate_notes,
    server_notes,
    statement_table,
    time_ranges,
)
from dbdiag.parsers.mysql_slowlog.explain import explain_cells, explain_texts_of, plan_node_table, plan_table
from dbdiag.parsers.mysql_slowlog.fields import header_table_of, query_time_layout
from dbdiag.parsers.mysql_slowlog.files import Files, Warnings
from dbdiag.parsers.mysql_slowlog.pieces import WORKERS, entry_pieces, parse_chunk
from dbdiag.parsers.mysql_slowlog.stitch import Stitch, boundaries_read, entry_table
from dbdiag.parsers.mysql_slowlog.times import times_read
from dbdiag.patterns import lazy_compile


CRLF_NOTE = "CRLF line ends (file passed through Windows); read as plain lines"
CRLF_HEAD_CHARS = 65536  # CRLF line ends are looked for in the first characters only


def parse(text: str, ctx: ParseContext) -> ParseResult:
    text = text.removeprefix("\ufeff")
    if not text or text.isspace():
        raise ParseError("empty file")
    notes = [CRLF_NOTE] if "\r\n" in text[:CRLF_HEAD_CHARS] else []
    bounds = entry_pieces(text)
    reads = [functools.partial(text_lines, text, start, end) for start, end in bounds]
    files = Files([ctx.source], [notes], np.zeros(1, dtype=np.int64))
    return _one(_parse_pieces(reads, ctx.tz, files, [end - start for start, end in bounds], ctx.report_bytes))


def _one(results: list[ParseResult | ParseError]) -> ParseResult:
    if isinstance(results[0], ParseError):
        raise results[0]
    return results[0]


BOUNDARY = b"# Time: (dbdiag: the next file of the batch starts below)\n"  # a # Time line starts an entry


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_bytes`` of each member (all in one zone), in one parse: thousands of small logs cost
    one fixed cost, not one each. The members are joined, each after a ``BOUNDARY`` line that starts
    an entry; every choice made for a whole file (server, version, what SET timestamp means, zone
    agreement, carried # Time and database, warnings and their caps, notes) is made per member, and
    line numbers are the member's own. A member ending in a lone CR (which the joining LF would
    turn into a CRLF end) is parsed alone."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    # the Query_time layout is learnt from a file's first such line: one joined parse per layout
    by_layout: dict[object, list[int]] = {}
    for index, (data, ctx) in enumerate(members):
        begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        if _is_blank(data, begin):
            results[index] = ParseError("empty file")
        elif data.endswith(b"\r"):
            results[index] = _alone(data, ctx)
        else:
            by_layout.setdefault(_layout_key(data, begin), []).append(index)
    for indices in by_layout.values():
        for index, result in zip(indices, _parse_joined([members[i] for i in indices])):
            results[index] = result
    return results


def _layout_key(data: bytes, begin: int) -> object:
    """``query_time_layout`` of the first line that starts with "# Qu" (the kind QUERY_TIME), as a key."""
    at = begin if data.startswith(b"# Qu", begin) else data.find(b"\n# Qu", begin) + 1
    if at <= 0 and not data.startswith(b"# Qu", begin):
        return None
    end = data.find(b"\n", at)
    line = data[at : end if end >= 0 else len(data)]
    layout = query_time_layout(decode(line.removesuffix(b"\r")))
    return None if layout is None else (layout[0], tuple(layout[1].items()))


def _parse_joined(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_batch`` of members that are not blank and do not end in a CR."""
    parts: list[bytes] = []
    notes: list[list[str]] = []
    starts: list[int] = []
    line = 0
    for data, ctx in members:
        begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
        head = data[begin : begin + 4 * CRLF_HEAD_CHARS + 8]
        notes.append([CRLF_NOTE] if b"\r\r\n" in head and "\r\n" in decode(head)[:CRLF_HEAD_CHARS] else [])
        body = data[begin:] if data.endswith(b"\n") else data[begin:] + b"\n"
        if parts:
            parts.append(BOUNDARY)
            line += 1
        starts.append(line)
        parts.append(body)
        line += body.count(b"\n")
    text = b"".join(parts)
    parts.clear()
    if slowlog_lines.line_scan() is None:
        decoded = decode(text)
        reads = [functools.partial(text_lines, decoded, 0, len(decoded))]
    else:
        reads = [functools.partial(raw_lines, text, 0, len(text))]
    files = Files([ctx.source for _, ctx in members], notes, np.array(starts, dtype=np.int64))
    return _parse_pieces(reads, members[0][1].tz, files)


def _alone(data: bytes, ctx: ParseContext) -> ParseResult | ParseError:
    try:
        return parse_bytes(data, ctx)
    except ParseError as error:
        return error


def parse_bytes(data: bytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of the text that ``pipeline.decode`` makes of ``data``, without decoding it whole:
    the kernel reads strict UTF-8 pieces as they are (the lines are views of ``data``)."""
    return parse_bytes_owned([data], ctx)


def parse_bytes_owned(box: list[bytes], ctx: ParseContext) -> ParseResult:
    """``parse_bytes`` of the bytes in ``box``, which it empties: once the pieces are read the log's
    bytes go (unless the caller holds them too), before the tables of the whole log are put together."""
    data = box.pop()
    if slowlog_lines.line_scan() is None:
        text = decode(data)
        del data
        return parse(text, ctx)
    begin = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    if _is_blank(data, begin):
        raise ParseError("empty file")
    # pipeline.decode turned CRLF into LF, but "\r\r\n" still reads as "\r" + LF: parse notes that
    head = data[begin : begin + 4 * CRLF_HEAD_CHARS + 8]  # covers the characters parse looks at
    notes = [CRLF_NOTE] if b"\r\r\n" in head and "\r\n" in decode(head)[:CRLF_HEAD_CHARS] else []
    bounds = entry_pieces(data, begin)
    reads = [functools.partial(raw_lines, data, start, end) for start, end in bounds]
    del data  # only the pieces' reads hold it now: _parse_pieces lets them go once read
    files = Files([ctx.source], [notes], np.zeros(1, dtype=np.int64))
    return _one(_parse_pieces(reads, ctx.tz, files, [end - start for start, end in bounds], ctx.report_bytes))


SPACE_BYTES = lazy_compile(rb"[\t\n\x0b\x0c\r\x1c-\x1f ]*")  # the ASCII characters str.isspace() accepts


def _is_blank(data: bytes, begin: int) -> bool:
    """Whether ``data[begin:]`` decodes to nothing but whitespace (``str.isspace``), decoding only
    from the first byte that is not ASCII whitespace, and only as far as needed."""
    at = SPACE_BYTES.match(data, begin).end()
    if at == len(data):
        return True
    if data[at] < 0x80:
        return False
    decoder = codecs.getincrementaldecoder("utf-8")("backslashreplace")
    for window in range(at, len(data), 65536):
        text = decoder.decode(data[window : window + 65536], final=window + 65536 >= len(data))
        if text and not text.isspace():
            return False
    return True


def _parse_pieces(
    reads: list[Callable[[], Lines]], tz: str, files: Files, piece_bytes: list[int] | None = None,
    report_bytes: Callable[[int], None] | None = None,
) -> list[ParseResult | ParseError]:
    """The tables of each file of a log given as entry-aligned pieces (``reads`` give each one's
    lines; a batch is one piece; emptied once read); ``report_bytes`` is told each piece's ``piece_bytes`` once read."""
    tz, tz_warning = check_tz(tz)
    warnings = [tz_warning] if tz_warning else []
    boundaries = files.starts[1:] - 1  # line indices of the boundary lines
    jobs = [(read, index == 0, boundaries if index == 0 else boundaries[:0]) for index, read in enumerate(reads)]
    sizes = piece_bytes or [0] * len(jobs)

    def read_piece(index: int) -> dict[str, object]:
        piece = parse_chunk(*jobs[index])
        if report_bytes is not None:
            report_bytes(sizes[index])
        return piece

    with ThreadPoolExecutor(max_workers=WORKERS) as pool:  # polars, numpy and the kernel release the GIL
        pieces = [read_piece(0)] if len(jobs) == 1 else list(pool.map(read_piece, range(len(jobs))))
        jobs.clear()
        reads.clear()  # the reads hold the log's bytes; the pieces hold none of them (``detached`` texts)
        return _parse_whole(pieces, pool, tz, files, warnings)


def _parse_whole(
    pieces: list[dict[str, object]], pool: ThreadPoolExecutor, tz: str, files: Files, warnings: list[ParseWarning],
) -> list[ParseResult | ParseError]:
    """The tables of each file from the pieces (``parse_chunk``); the plan nodes are read on ``pool``
    while the entries are put together."""
    # the header and explain lines of all pieces, each distinct text read once
    header_remaps, header_texts = merged_texts([p["header"][0] for p in pieces])
    header_groups = np.zeros(header_texts.len(), dtype=np.int8)
    for remap, piece in zip(header_remaps, pieces):
        header_groups[remap] = piece["header"][1]
    header_table = header_table_of(header_texts)
    explain_remaps, explain_distinct = merged_texts([p["explain"][3] for p in pieces])
    explain_texts = explain_texts_of(explain_distinct)
    # pieces number their entries and lines from 0; the file's numbers shift them by what came before
    entry_bases = np.cumsum([0] + [p["n_entries"] for p in pieces])
    n_total = int(entry_bases[-1])
    stitch = Stitch([p["kept"] for p in pieces], [p["n_entries"] for p in pieces], entry_bases,
                     np.cumsum([0] + [p["n_lines"] for p in pieces]))
    # the pieces' plans (numbered per piece) numbered again for the whole file
    plan_bases = np.cumsum([0] + [p["plans"][1] for p in pieces])
    plan_of, per_plan = plan_table(
        np.concatenate([p["plans"][2] + b for p, b in zip(pieces, plan_bases)]),
        np.concatenate([remap[p["plans"][3]] for p, remap in zip(pieces, explain_remaps)]),
        explain_texts, int(plan_bases[-1]),
    )
    header = {
        "table": header_table, "groups": header_groups, "remaps": header_remaps,
        "present": set(np.unique(header_groups).tolist()),
    }
    plan_nodes = pool.submit(
        explain_cells,
        np.concatenate([p["explain"][0] + b for p, b in zip(pieces, entry_bases)]),
        *[np.concatenate([remap[p["explain"][k]] for p, remap in zip(pieces, explain_remaps)]) for k in (1, 2)],
        explain_texts, ("type", "table", "key", "est_rows", "actual_rows", "Extra"),
    )
    entries, evidence = entry_table(pieces, stitch, header, (plan_of, plan_bases, per_plan), tz)
    entries = pl.concat([entries, *times_read(entries, tz)], how="horizontal")
    entries, head = boundaries_read(entries, pieces, stitch)
    n_files = len(files.sources)
    file = files.of(entries["line"].to_numpy())
    lines_of = lambda name: np.concatenate([p[name] + int(b) for p, b in zip(pieces, stitch.line_bases)])  # noqa: E731
    flavour = {
        "mariadb": any_per(file[evidence["mariadb"]], n_files) | any_per(files.of(lines_of("explain_lines")), n_files),
        "percona": any_per(file[evidence["percona"]], n_files) | any_per(files.of(lines_of("innodb_lines")), n_files),
        "flag_lines": any_per(file[evidence["flag_line"]], n_files),
    }
    server = pl.concat([p["server"].with_columns(pl.col("line") + int(b)) for p, b in zip(pieces, stitch.line_bases)])
    by_file = Warnings(files, warnings)
    for piece, base in zip(pieces, stitch.line_bases):
        for line, reason, anchor in piece["warnings"]:
            by_file.add(None if line is None else line + int(base), reason, anchor + int(base))
    pieces.clear()  # their tables are copied into ``entries`` (and the caller's list is this one): let them go

    entries = entries.with_columns(file=pl.Series(file, dtype=pl.Int64), is_head=pl.Series(head))
    errors: dict[int, str] = {
        f: "no slow-log entry found (no # Time, # User@Host or # Query_time header)"
        for f in np.flatnonzero(~any_per(file[~head], n_files)).tolist()
    }
    entries, first_warning = keep_entries(entries, by_file)
    kept = any_per(entries["file"].to_numpy(), n_files)
    for f in np.flatnonzero(~kept).tolist():
        errors.setdefault(f, nothing_reason(first_warning.get(f)))
    if errors:
        entries = entries.filter(~pl.col("file").is_in(list(errors)))
    banners = banners_of(server, files)
    engines = [engine_of(banner["text"], flavour["mariadb"][f], flavour["percona"][f]) for f, banner in enumerate(banners)]
    statement, notes = statement_table(entries, engines, tz, files, [b["version"] for b in banners], flavour["flag_lines"], by_file)
    for f, banner in enumerate(banners):
        notes[f] += server_notes(banner)
    for f, rate in rate_notes(entries).items():
        notes[f] += rate
    plan_node = plan_node_table(plan_nodes.result().drop("row"), entries["entry"].to_numpy(), n_total, statement, files)
    # the server's version, for remedies in its syntax (derive.engine_version)
    versions = {f: f"{engines[f]} {banner['version']}" for f, banner in enumerate(banners) if banner["version"]}
    return _results(statement, plan_node, files, notes, by_file, errors, versions)


def _results(
    statement: pl.DataFrame, plan_node: pl.DataFrame, files: Files, notes: list[list[str]], warnings: Warnings,
    errors: dict[int, str], versions: dict[int, str],
) -> list[ParseResult | ParseError]:
    """One result per file: its rows (a slice of each table), records, warnings, notes, time range, and
    its banner's ``db_version`` fact."""
    n_files = len(files.sources)
    file = statement["file"].to_numpy()
    counts = np.bincount(file, minlength=n_files)
    offsets = np.cumsum(np.append(0, counts))
    node_counts = np.bincount(plan_node["file"].to_numpy(), minlength=n_files)
    node_offsets = np.cumsum(np.append(0, node_counts))
    ranges = time_ranges(statement, n_files)
    statement, plan_node = T.conform(T.STATEMENT, statement), T.conform(T.PLAN_NODE, plan_node)
    results: list[ParseResult | ParseError] = []
    for f in range(n_files):
        if f in errors:
            results.append(ParseError(errors[f]))
            continue
        tables = {
            T.STATEMENT: statement.slice(int(offsets[f]), int(counts[f])),
            T.PLAN_NODE: plan_node.slice(int(node_offsets[f]), int(node_counts[f])),
        }
        if f in versions:
            tables[T.HOST_FACT] = T.host_fact_frame([("db_version", versions[f])], files.sources[f])
        results.append(ParseResult(
            tables=tables,
            records=int(counts[f]),
            warnings=cap_warnings(warnings.of_file[f]),
            notes=list(dict.fromkeys(files.notes[f] + notes[f])),
            time_range=ranges.get(f),
        ))
    return results
