"""``perf script`` call stacks folded FlameGraph-style (what ``stackcollapse-perf.pl`` computes).

Raw input (``perf record -g`` then ``perf script``; the ``# ====`` header block from
``perf script --header`` or perf 3.x is optional)::

    # ========
    # captured on: Thu Nov 19 01:36:57 2015
    # hostname : db-01
    # os release : 3.13.0-49-generic
    # nrcpus online : 32
    # ========
    #
    mariadbd 21596/21626 [001]  1291.146818:   10101010 cpu-clock:pppH:
    \tffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])
    \t          83d61f do_command+0x13f (/usr/sbin/mariadbd)
    \t          ee550a [unknown] (/usr/sbin/mariadbd)
    \t           891f5 start_thread+0x305 (/usr/lib/x86_64-linux-gnu/libc.so.6)

Sample header layouts read: ``comm pid/tid [cpu] time: period event:``, ``comm tid [cpu] time:
event:``, ``comm tid event:`` (no time), perf 3.x/4.x/5.x/6.x, LBR call graphs, JIT map frames whose
symbols hold spaces (``LazyCompile:~body_0 evalmachine.<anonymous>:1``), tracepoint events with
text after the event, the old layout with frames not indented (``java 19983 cycles:`` then
``7f72421d2d76 JavaMain (/usr/lib/libjli.so)``), and samples recorded without ``-g`` (the symbol
printed on the header line, if any, is the one-frame stack, else ``[unknown]``). A single number
after the command name is perf script's default ``tid`` field: it fills ``tid`` and ``pid`` stays
null.

Frames are named as ``stackcollapse-perf.pl`` names them, so stacks compare one to one with
its output: ``+0x..`` offsets dropped, ``[unknown]`` symbols become ``[<dso basename>]``,
``;`` becomes ``:``, C++ argument lists ``(...)`` and quotes are dropped, ``Ljava/..`` loses its
``L`` in ``java*`` processes, and frames whose symbol starts with ``(`` are skipped. Where this
parser and ``stackcollapse-perf.pl`` differ: it counts every event (the script keeps only the
first one it meets unless told ``--event-filter``), it counts a last sample not followed by a
blank line (the script drops it), it reads exited tasks' ``:-1  -1`` headers as comm ``:-1``
(the script folds the time into the name), a sample without frames is ``[unknown]`` rather than
the bare process name, and ``a->b`` inline chains are not split.

The text (or, from ``parse_bytes``, the raw bytes) is cut after blank lines into pieces of about
``CHUNK_CHARS``; the pieces' counts are summed at the end. A piece of regular ``perf script``
output (ASCII; comments only on top; every sample a header line, its indented frame lines, blank
lines) is read by a C kernel (``dbdiag._perf_fold``, analyzer/native/perf_fold.c), two pieces at a
time on two threads: it numbers the distinct frame bodies (``sym+0x1f (dso)``) and, among them,
the symbols (bodies named alike: same symbol without offset, same dso), the distinct stacks
(symbol numbers) and the distinct header lines (their time left out), and counts samples per
header and stack. Python then names each symbol once, the kernel spells each distinct stack from
the names, and polars reads each distinct header once. Any other piece, and every piece when
the kernel was not built, is one polars column of lines; a line is keyed by a hash so every
distinct line is classified once (frame lines once per member); samples are numbered by a
cumulative sum over header lines and their frame ids gathered per sample. Both readings give the
same table (tests compare them on every corpus file).

Output table ``perf_stack`` (one row per distinct comm, pid, tid, event and stack)::

    comm         String   process/thread name ("mariadbd", "swapper")
    pid          Int32    null unless printed as pid/tid
    tid          Int32
    event        String   "cycles", "cpu-clock:pppH", "page-faults"... (null when not printed)
    stack        String   frames root-first joined by ";"
    leaf         String   the sampled frame (last of ``stack``)
    leaf_kernel  Boolean  the leaf's dso is the kernel ([kernel.kallsyms], vmlinux, [module]);
                          null for samples with no frame at all
    samples      Int64    samples that ended in this stack
    period       Int64    sum of their periods when printed, else null
    source       String   member path

``records`` is the number of samples. Notes give the events with their sample counts, the
span of the sample times (seconds since boot, not wall-clock) and the ``# captured on`` /
``# hostname`` / ``# os release`` / ``# nrcpus`` header values.

>>> text = "dd 29776 666709.771979:   10101010 cpu-clock: \\n" \\
...        "\\t414b3b fsnotify+0x1b (/lib/modules/4.1.0/build/vmlinux)\\n" \\
...        "\\t e5f70 read (/lib/x86_64-linux-gnu/libc-2.15.so)\\n" \\
...        "\\t     0 [unknown] (/usr/bin/dd)\\n\\n"
>>> result = parse(text, ParseContext(source="perf-script.txt"))
>>> result.tables["perf_stack"].select("tid", "stack", "leaf_kernel", "samples", "period").rows()
[(29776, '[dd];read;fsnotify', True, 1, 10101010)]
"""

from __future__ import annotations

import re
from dataclasses import replace

import polars as pl

from dbdiag.native.lazy import np
from dbdiag.file_bytes import FileBytes
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.patterns import lazy_compile
from dbdiag.tables import PERF_STACK, conform

from dbdiag.native import perf_fold, perf_fold_polars
from dbdiag.native.perf_fold import (
    BytesPiece,
    CHUNK_CHARS,
    TextPiece,
    chunks,
    decoded,
    kernel_stacks,
    scan_pieces,
)
from dbdiag.native.perf_fold_polars import (
    HEADER_PATTERN,
    SAMPLE_KEYS,
    SPELLED_SCHEMA,
    STACK_KEYS,
    SeenFrames,
)

MAX_THREAD_ID = 2**31 - 1  # pids and tids are Int32 in perf_stack; Linux's pid_max is at most 2^22
_META_KEYS = ("captured on", "hostname", "os release", "nrcpus online", "nrcpus avail")
_HEADER_RE = lazy_compile(HEADER_PATTERN)
_REPORT_RE = lazy_compile(r"^# (?:To display the perf\.data header info|Overhead|Samples: |Children )|PerfTop:", re.M)
# "[^(]*\(" (the first parenthesis), not ".*\(": the same lines, without trying every "(" of a long line
_FRAME_DETECT_RE = lazy_compile(r"^[ \t]+[0-9a-fA-F]+ [^(]*\(.*\)[ \t]*$")
_OLD_FRAME_DETECT_RE = lazy_compile(r"^[0-9a-fA-F]{6,} \S[^(]*\(.*\)[ \t]*$")


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return parse_chunked(text, ctx, CHUNK_CHARS)


def parse_bytes(data: bytes | FileBytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of a member's raw bytes (``bytes``, or a big file read a piece at a time: ``FileBytes``), read as
    ``dbdiag.pipeline.decode`` reads them."""
    return parse_bytes_chunked(data, ctx, CHUNK_CHARS)


def parse_chunked(text: str, ctx: ParseContext, chunk_chars: int) -> ParseResult:
    """``parse`` with the text cut into record-aligned pieces of about ``chunk_chars`` characters."""
    pieces = [TextPiece(text, start, end) for start, end in chunks(text, chunk_chars)]
    return _one(_parse_pieces(pieces, [0] * len(pieces), [text], [ctx.source]))


def _one(results: list[ParseResult | ParseError]) -> ParseResult:
    if isinstance(results[0], ParseError):
        raise results[0]
    return results[0]


def parse_batch(members: list[tuple[bytes, ParseContext]]) -> list[ParseResult | ParseError]:
    """``parse_bytes`` of each member, in one parse: every member is read as pieces of its own (as
    alone), and the counts, warnings (capped per member), notes and records are summed and made per
    member. A member with a carriage return is parsed alone (it is decoded whole first)."""
    results: list[ParseResult | ParseError | None] = [None] * len(members)
    pieces: list[BytesPiece] = []
    files: list[int] = []
    joined: list[int] = []
    for index, (data, ctx) in enumerate(members):
        if data.find(b"\r") >= 0:
            try:
                results[index] = parse_bytes(data, ctx)
            except ParseError as error:
                results[index] = error
            continue
        for start, end in chunks(data, CHUNK_CHARS):
            pieces.append(BytesPiece(data, start, end))
            files.append(len(joined))
        joined.append(index)
    if joined:
        heads = [decoded(members[i][0][: _comment_block_end(members[i][0])]) for i in joined]
        for index, result in zip(joined, _parse_pieces(pieces, files, heads, [members[i][1].source for i in joined])):
            results[index] = result
    return results


def parse_bytes_chunked(data: bytes, ctx: ParseContext, chunk_bytes: int) -> ParseResult:
    """``parse_bytes`` with the bytes cut into record-aligned pieces of about ``chunk_bytes`` bytes.

    Without a carriage return, decoding (UTF-8, undecodable bytes as ``\\xNN``) keeps every line
    break where it is: the pieces are cut in the bytes and only those the kernel cannot read are
    decoded. With one, the whole member is decoded first (CRLF becomes LF), as the pipeline does.
    """
    if data.find(b"\r") >= 0:
        text = str(bytes(data), "utf-8", "backslashreplace").replace("\r\n", "\n")
        return parse_chunked(text, ctx, chunk_bytes)
    pieces = [BytesPiece(data, start, end) for start, end in chunks(data, chunk_bytes)]
    return _one(_parse_pieces(pieces, [0] * len(pieces), [decoded(data[: _comment_block_end(data)])], [ctx.source]))


def _parse_pieces(
    pieces: list[TextPiece] | list[BytesPiece], files: list[int], heads: list[str], sources: list[str]
) -> list[ParseResult | ParseError]:
    """The pieces folded and summed per file (``files``: the file of each piece, in order); ``heads``:
    each file's leading comment lines (for the notes).

    The C kernel reads the pieces it can (see ``scan_pieces``); the others are read line by line
    (``fold_chunk``), in file order.
    """
    kernel = perf_fold.kernel()  # read through the module: tests take it away
    folders, scans = scan_pieces(kernel, pieces) if kernel is not None else ([], [None] * len(pieces))
    n_files = len(sources)
    seen = SeenFrames()  # frame names numbered across the files: their stacks are spelled together
    folded: list[pl.DataFrame] = []
    warnings: list[list[tuple[int, str]]] = [[] for _ in range(n_files)]
    dropped = [0] * n_files
    times: list[list[tuple[float, float]]] = [[] for _ in range(n_files)]
    headers = [0] * n_files
    for index, (file, scan) in enumerate(zip(files, scans)):
        if scan is not None:
            headers[file] += scan.samples
            if scan.time_range is not None:
                times[file].append(scan.time_range)
            if n_files > 1:
                scans[index] = replace(scan, counts=scan.counts.with_columns(file=pl.lit(file, pl.Int64)))
    for piece, file, scan in zip(pieces, files, scans):
        if scan is not None:
            continue
        part = perf_fold_polars.fold_chunk(piece.text(), piece.first_line(), seen)
        headers[file] += part.headers
        if part.stacks.height:
            folded.append(part.stacks.with_columns(file=pl.lit(file, pl.Int64)))
        if part.time_range is not None:
            times[file].append(part.time_range)
        room = MAX_WARNINGS - len(warnings[file])
        warnings[file].extend(part.warnings[:room])
        dropped[file] += part.warning_count - min(room, len(part.warnings))
    regular = [scan for scan in scans if scan is not None]
    stacks = _merge(folded, [kernel_stacks(folders, regular)] if regular else [], seen.names, sources)
    counts = np.bincount(stacks["file"].to_numpy(), minlength=n_files)
    offsets = np.cumsum(np.append(0, counts))
    notes = _notes(heads, stacks, times)
    odd_ids = dict(stacks.group_by("file").agg(pl.col("odd_id_samples").sum()).iter_rows())
    stacks = stacks.drop("file", "odd_id_samples")
    results: list[ParseResult | ParseError] = []
    for f in range(n_files):
        if headers[f] == 0:
            results.append(ParseError("no perf script sample header line (comm pid [cpu] time: event:) found"))
            continue
        mine = stacks.slice(int(offsets[f]), int(counts[f]))
        result_warnings = [ParseWarning(line, reason) for line, reason in warnings[f]]
        if dropped[f] > 0:
            result_warnings.append(ParseWarning(None, f"{dropped[f]} more warnings not shown"))
        if odd_ids.get(f):
            result_warnings.append(ParseWarning(
                None, f"{odd_ids[f]} samples with a pid or tid over {MAX_THREAD_ID:,} (no Linux thread has one: a damaged "
                "header line); counted with an unknown id",
            ))
        results.append(ParseResult(
            tables={PERF_STACK: mine}, records=int(mine["samples"].sum()), warnings=result_warnings, notes=notes[f]
        ))
    return results


def _comment_block_end(data: bytes) -> int:
    """Where the leading ``#`` lines that ``_header_notes`` reads end."""
    end = 0
    for _ in range(500):
        if data[end : end + 1] != b"#":
            break
        newline = data.find(b"\n", end)
        if newline < 0:
            return len(data)
        end = newline + 1
    return end


def _merge(folded: list[pl.DataFrame], spelled: list[pl.DataFrame], names: pl.DataFrame, sources: list[str]) -> pl.DataFrame:
    """Sum the chunks' counts per file and stack (rows of each file together, in file order).

    ``folded``: ``_Part`` tables, stacks as frame ids (spelled root first here, named by ``names``);
    ``spelled``: tables of ``SPELLED_SCHEMA``, stacks already spelled; both with their ``file``.
    """
    if not folded and not spelled:
        return conform(PERF_STACK, pl.DataFrame()).with_columns(file=pl.lit(0, pl.Int64), odd_id_samples=pl.lit(0, pl.Int64))
    stacks = pl.concat([*([_spelled(folded, names)] if folded else []), *spelled]).with_columns(
        pl.when(pl.col("stack") == "").then(None).otherwise(pl.col("stack")).fill_null("[unknown]").alias("stack"),
        pl.col("leaf").fill_null("[unknown]"),
    )
    if stacks["comm"].str.starts_with("java").any():
        stacks = stacks.with_columns(_tidy_java(pl.col("stack")), _tidy_java(pl.col("leaf")))
    # Stacks spelled alike mostly share their leaf; when not ("[unknown]" from a sample without
    # frames and from a frame named so), the least leaf, kernel flag known first, whatever the order.
    leaf_first = pl.col("leaf", "leaf_kernel").sort_by("leaf", "leaf_kernel", nulls_last=True).first()
    # an id no Linux thread has (pid_max is at most 2^22) is a damaged header: read as unknown, counted
    fits = {c: pl.col(c).is_between(0, MAX_THREAD_ID) for c in ("pid", "tid")}
    odd = pl.any_horizontal(pl.col(c).is_not_null() & ~fit for c, fit in fits.items())
    stacks = stacks.with_columns(
        (pl.col("samples") * odd.cast(pl.Int64)).alias("odd_id_samples"), *(pl.when(fit).then(pl.col(c)).alias(c) for c, fit in fits.items())
    )
    stacks = stacks.group_by("file", *STACK_KEYS).agg(pl.col("samples", "period", "period_n", "odd_id_samples").sum(), leaf_first)
    stacks = stacks.with_columns(
        pl.when(pl.col("period_n") > 0).then(pl.col("period")).alias("period"),
        (pl.lit(sources[0]) if len(sources) == 1 else pl.col("file").replace_strict(
            list(range(len(sources))), sources, return_dtype=pl.String)).alias("source"),
    ).sort(
        ["file", "samples", "comm", "pid", "tid", "event", "stack"],
        descending=[False, True, False, False, False, False, False],
        nulls_last=True,
    )
    return conform(PERF_STACK, stacks).with_columns(stacks["file"], stacks["odd_id_samples"])


def _spelled(folded: list[pl.DataFrame], names: pl.DataFrame) -> pl.DataFrame:
    """The ``_Part`` tables summed per frame ids, their stacks spelled root first (``SPELLED_SCHEMA``)."""
    parts = pl.concat(folded)
    # Samples without frames take the symbol of their header line, if any, as a one-frame stack.
    bare = pl.col("stack_ids").is_null()
    stacks = (
        pl.concat([
            parts.filter(~bare),
            parts.filter(bare).with_columns(
                pl.concat_list("rest_nid").list.drop_nulls().alias("stack_ids"), pl.col("rest_nid").alias("leaf_id")
            ),
        ])
        .group_by("file", *SAMPLE_KEYS)
        .agg(pl.col("samples", "period", "period_n").sum(), pl.col("leaf_id").first())
    )
    frames = names.filter(pl.col("frame").is_not_null())
    spelled = pl.col("stack_ids").list.eval(
        pl.element().replace_strict(frames["nid"], frames["frame"], return_dtype=pl.String)
    ).list.join(";").alias("stack")
    leaves = names.select(
        pl.col("nid").alias("leaf_id"), pl.col("frame").alias("leaf"), pl.col("kernel").alias("leaf_kernel")
    )
    stacks = stacks.with_columns(spelled).join(leaves, on="leaf_id", how="left")
    return stacks.select("file", *SPELLED_SCHEMA).cast(SPELLED_SCHEMA)


def _tidy_java(frames: pl.Expr) -> pl.Expr:
    """``Ljava/io/File:::write`` -> ``java/io/File:::write`` in java processes, as stackcollapse-perf.pl does."""
    return (
        pl.when(pl.col("comm").str.starts_with("java"))
        .then(frames.str.replace_all(r"(^|;)L([^;]*/)", "${1}${2}"))
        .otherwise(frames)
    )


def _notes(heads: list[str], stacks: pl.DataFrame, times: list[list[tuple[float, float]]]) -> list[list[str]]:
    """Per file: its header block, its time span, samples per event, whether pids are missing."""
    per_event: dict[int, list[str]] = {}
    summed = stacks.group_by("file", "event").agg(pl.col("samples").sum())
    for file, event, count in summed.sort(["file", "samples", "event"], descending=[False, True, False]).rows():
        per_event.setdefault(file, []).append(f"{event or '(no event)'} {count}")
    no_pid = set(stacks.group_by("file").agg(pl.col("pid").is_null().all()).filter(pl.col("pid"))["file"].to_list())
    out = []
    for file, (head, spans) in enumerate(zip(heads, times)):
        notes = _header_notes(head)
        if spans:
            first, last = min(t[0] for t in spans), max(t[1] for t in spans)
            notes.append(
                f"perf sample times are seconds since boot, not wall-clock time: {first:.6f} to {last:.6f} "
                f"({last - first:.1f} s)"
            )
        else:
            notes.append("perf samples carry no timestamps")
        notes.append(f"samples per event: {', '.join(per_event.get(file, []))}")
        if file in no_pid:
            notes.append("one id per sample header: read as the thread id (perf script's default tid field); pid is null")
        out.append(notes)
    return out


def _header_notes(text: str) -> list[str]:
    """The ``# captured on:`` / ``# hostname :`` ... values of the ``perf script --header`` block."""
    notes: list[str] = []
    start = 0
    for _ in range(500):
        end = text.find("\n", start)
        line = text[start:] if end < 0 else text[start:end]
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].partition(":")
        if sep and key.strip() in _META_KEYS and value.strip():
            notes.append(f"{key.strip()}: {value.strip()}")
        if end < 0:
            break
        start = end + 1
    return notes


def detect(head: str, name: str) -> float:
    if _REPORT_RE.search(head):
        return 0.1
    lines = head.split("\n")[:400]
    with_frame = old_layout = timed = 0
    for line, following in zip(lines, lines[1:]):
        if not line or line[0] in "# \t":
            continue
        match = _HEADER_RE.match(line)
        if match is None or not (match["time"] or match["event"]):
            continue
        if _FRAME_DETECT_RE.match(following):
            with_frame += 1
        elif _OLD_FRAME_DETECT_RE.match(following):
            old_layout += 1
        elif match["time"] and match["event"]:
            timed += 1
    lowered = name.lower()
    hinted = "perf" in lowered and "script" in lowered
    if with_frame:
        return 0.95
    if old_layout:
        return 0.9
    if timed >= 2:
        return 0.8
    if head.startswith("# ========") and "# captured on" in head and not any(
        line and line[0] not in "#" for line in lines
    ):
        return 0.7 if hinted else 0.55
    return 0.0


SPEC = ParserSpec(
    kind="perf-script",
    description="perf script call stacks (perf 3.x-6.x) folded into per-stack sample counts",
    detect=detect,
    parse=parse,
    parse_bytes=parse_bytes,
    parse_batch=parse_batch,
    reads_file_bytes=True,
)
