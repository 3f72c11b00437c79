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

import io
import re
from dataclasses import dataclass, replace

import numpy as np
import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.tables import PERF_STACK, conform

# Record-aligned pieces of this many characters (bytes) keep the per-line frames of the line-by-line
# reading small on big files; under glibc's 32 MB mmap threshold, a piece's buffers reuse the
# previous piece's memory (fewer page faults). Small enough that the kernel's threads get about
# as many bytes each.
CHUNK_CHARS = 16 * 1024 * 1024
# The C kernel reads pieces on this many threads, one Folder each.
KERNEL_THREADS = 2

# Shared by Python (detect, on the head) and polars (Rust regex, on every header line). Lazy texts end on
# \S ((?:.*?\S)?, not .*?): the same captures, and Python's backtracking stays linear in a run of spaces.
_HEADER_PATTERN = (
    r"^(?P<comm>\S(?:.*?\S)?)\s+(?P<id1>-?\d+)(?:/(?P<id2>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:(?P<time>\d+\.\d+):\s*)?(?:(?P<period>\d+)\s+)?(?:(?P<event>[^\s:]\S*?):)?"
    r"(?:\s+(?P<rest>\S(?:.*?\S)?))?\s*$"
)
# A frame line once its address is cut off: "symbol+0x1f (dso)"; the symbol may hold spaces and
# parentheses, the dso is the last parenthesised part (as stackcollapse-perf.pl reads it).
_BODY_PATTERN = r"^(?:(?P<sym>.*\S)\s+)?\((?P<dso>.*)\)\s*$"
_FRAME_PATTERN = r"^\s+[0-9a-fA-F]+\s.*\(.*\)\s*$"
_OLD_FRAME_PATTERN = r"^[0-9a-fA-F]+\s.*\(.*\)\s*$"
_TIME_PATTERN = r"\s(\d+\.\d+):"
_HASH_SEED, _CHECK_SEED = 0, 0x5EED
_NEVER = "\x1f"  # CSV separator for reading whole lines: perf script never prints it
_BLANK, _COMMENT, _HEADER, _FRAME, _OTHER = 0, 1, 2, 3, 4
_META_KEYS = ("captured on", "hostname", "os release", "nrcpus online", "nrcpus avail")
# Bracketed dsos that are user space, not kernel modules.
_USER_PSEUDO_DSOS = ["[unknown]", "[vdso]", "[vsyscall]", "[vvar]", "[heap]", "[stack]", "[anon]", "[jit]",
                     "[uprobes]", "[vectors]", "[sigpage]"]

_HEADER_RE = re.compile(_HEADER_PATTERN)
_REPORT_RE = re.compile(r"^# (?:To display the perf\.data header info|Overhead|Samples: |Children )|PerfTop:", re.M)
# "[^(]*\(" (the first parenthesis), not ".*\(": the same lines, without trying every "(" of a long line
_FRAME_DETECT_RE = re.compile(r"^[ \t]+[0-9a-fA-F]+ [^(]*\(.*\)[ \t]*$")
_OLD_FRAME_DETECT_RE = re.compile(r"^[0-9a-fA-F]{6,} \S[^(]*\(.*\)[ \t]*$")

_KEYS = ["comm", "pid", "tid", "event", "stack"]
_SAMPLE_KEYS = ["comm", "pid", "tid", "event", "stack_ids"]
_HEADER_COLUMNS = ["comm", "pid", "tid", "event", "period", "time", "rest_nid"]
_PART_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack_ids": pl.List(pl.UInt32),
                "rest_nid": pl.UInt32, "samples": pl.UInt32, "period": pl.Int64, "period_n": pl.UInt32,
                "leaf_id": pl.UInt32}
_SPELLED_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack": pl.String,
                   "leaf": pl.String, "leaf_kernel": pl.Boolean, "samples": pl.Int64, "period": pl.Int64,
                   "period_n": pl.Int64}


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return parse_chunked(text, ctx, CHUNK_CHARS)


def parse_bytes(data: bytes, ctx: ParseContext) -> ParseResult:
    """``parse`` of a member's raw bytes (``bytes`` or an ``mmap``), read as ``dbdiag.pipeline.decode`` reads them."""
    return parse_bytes_chunked(data, ctx, CHUNK_CHARS)


def parse_chunked(text: str, ctx: ParseContext, chunk_chars: int) -> ParseResult:
    """``parse`` with the text cut into record-aligned pieces of about ``chunk_chars`` characters."""
    pieces = [_TextPiece(text, start, end) for start, end in _chunks(text, chunk_chars)]
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
    pieces: list[_BytesPiece] = []
    files: list[int] = []
    joined: list[int] = []
    for index, (data, ctx) in enumerate(members):
        if data.find(b"\r") >= 0:
            try:
                results[index] = parse_bytes(data, ctx)
            except ParseError as error:
                results[index] = error
            continue
        for start, end in _chunks(data, CHUNK_CHARS):
            pieces.append(_BytesPiece(data, start, end))
            files.append(len(joined))
        joined.append(index)
    if joined:
        heads = [_decoded(members[i][0][: _comment_block_end(members[i][0])]) for i in joined]
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
        text = str(data, "utf-8", "backslashreplace").replace("\r\n", "\n")
        return parse_chunked(text, ctx, chunk_bytes)
    pieces = [_BytesPiece(data, start, end) for start, end in _chunks(data, chunk_bytes)]
    return _one(_parse_pieces(pieces, [0] * len(pieces), [_decoded(data[: _comment_block_end(data)])], [ctx.source]))


def _parse_pieces(
    pieces: list[_TextPiece] | list[_BytesPiece], files: list[int], heads: list[str], sources: list[str]
) -> list[ParseResult | ParseError]:
    """The pieces folded and summed per file (``files``: the file of each piece, in order); ``heads``:
    each file's leading comment lines (for the notes).

    The C kernel reads the pieces it can (see ``_scan_pieces``); the others are read line by line
    (``_fold_chunk``), in file order.
    """
    kernel = _kernel()
    folders, scans = _scan_pieces(kernel, pieces) if kernel is not None else ([], [None] * len(pieces))
    n_files = len(sources)
    seen = _Seen()  # frame names numbered across the files: their stacks are spelled together
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
        part = _fold_chunk(piece.text(), piece.first_line(), seen)
        headers[file] += part.headers
        if part.stacks.height:
            folded.append(part.stacks.with_columns(file=pl.lit(file, pl.Int64)))
        if part.time_range is not None:
            times[file].append(part.time_range)
        room = MAX_WARNINGS - len(warnings[file])
        warnings[file].extend(part.warnings[:room])
        dropped[file] += part.warning_count - min(room, len(part.warnings))
    regular = [scan for scan in scans if scan is not None]
    stacks = _merge(folded, [_kernel_stacks(folders, regular)] if regular else [], seen.names, sources)
    counts = np.bincount(stacks["file"].to_numpy(), minlength=n_files)
    offsets = np.cumsum(np.append(0, counts))
    notes = _notes(heads, stacks, times)
    stacks = stacks.drop("file")
    results: list[ParseResult | ParseError] = []
    for f in range(n_files):
        if headers[f] == 0:
            results.append(ParseError("no perf script sample header line (comm pid [cpu] time: event:) found"))
            continue
        mine = stacks.slice(int(offsets[f]), int(counts[f]))
        result_warnings = [ParseWarning(line, reason) for line, reason in warnings[f]]
        if dropped[f] > 0:
            result_warnings.append(ParseWarning(None, f"{dropped[f]} more warnings not shown"))
        results.append(ParseResult(
            tables={PERF_STACK: mine}, records=int(mine["samples"].sum()), warnings=result_warnings, notes=notes[f]
        ))
    return results


def _kernel():
    """The C kernel ``dbdiag._perf_fold``, or None when the package was installed without it."""
    try:
        from dbdiag import _perf_fold
    except ImportError:
        return None
    return _perf_fold


@dataclass(frozen=True)
class _TextPiece:
    """``text[start:end]``, a piece of a decoded member."""

    text_of: str
    start: int
    end: int

    def kernel_input(self) -> tuple[bytes, int, int] | None:
        chunk = self.text()
        return (chunk.encode("ascii"), 0, len(chunk)) if chunk.isascii() else None

    def text(self) -> str:
        return self.text_of[self.start : self.end]

    def first_line(self) -> int:
        return self.text_of.count("\n", 0, self.start) + 1


@dataclass(frozen=True)
class _BytesPiece:
    """``data[start:end]``, a piece of a member's bytes without carriage returns."""

    data: bytes
    start: int
    end: int

    def kernel_input(self) -> tuple[bytes, int, int]:
        # The kernel refuses any byte that is not ASCII: decoding would not change the others.
        return self.data, self.start, self.end

    def text(self) -> str:
        return _decoded(self.data[self.start : self.end])

    def first_line(self) -> int:
        # A window at a time: an mmap has no count().
        starts = range(0, self.start, CHUNK_CHARS)
        return sum(self.data[at : min(at + CHUNK_CHARS, self.start)].count(b"\n") for at in starts) + 1


def _decoded(data: bytes) -> str:
    """Bytes without carriage returns as ``dbdiag.pipeline.decode`` decodes them."""
    return str(data, "utf-8", "backslashreplace")


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


@dataclass(frozen=True)
class _Scan:
    """One piece read by the kernel: ``counts`` (key_id, stack_id, samples) in the ids of Folder ``lane``."""

    lane: int
    samples: int
    time_range: tuple[float, float] | None
    counts: pl.DataFrame


def _scan_pieces(kernel, pieces: list[_TextPiece] | list[_BytesPiece]) -> tuple[list, list[_Scan | None]]:
    """The kernel's Folders, each with the fields of its header keys (``_folder_keys``), and per piece
    its ``_Scan`` (None when the piece is not regular).

    Regular: ``perf script`` output as perf prints it (ASCII; comment lines only before the first
    sample; every sample a header line, its indented frame lines, empty lines), which the kernel
    reads without the GIL, ``KERNEL_THREADS`` pieces at a time, each thread with a Folder of its
    own. A piece also goes the line-by-line way when one of its headers does not read as one
    (``_key_fields``).
    """
    import threading
    from array import array

    lanes = max(1, min(KERNEL_THREADS, len(pieces)))
    folders = [kernel.Folder() for _ in range(lanes)]
    scans: list[_Scan | None] = [None] * len(pieces)

    def scan(lane: int) -> None:
        for index in range(lane, len(pieces), lanes):
            source = pieces[index].kernel_input()
            found = None if source is None else folders[lane].scan(*source)
            if found is None:
                continue
            samples, first, last, key_ids, stack_ids, counts = found
            table = pl.DataFrame([
                pl.Series("key_id", _unpacked(array("I"), key_ids), pl.UInt32),
                pl.Series("stack_id", _unpacked(array("I"), stack_ids), pl.UInt32),
                pl.Series("samples", _unpacked(array("Q"), counts), pl.Int64),
            ])
            scans[index] = _Scan(lane, samples, None if first is None else (first, last), table)

    failures: list[BaseException] = []

    def run(lane: int) -> None:
        try:
            scan(lane)
        except BaseException as error:  # noqa: BLE001 - raised again below, in the calling thread
            failures.append(error)

    threads = [threading.Thread(target=run, args=(lane,)) for lane in range(1, lanes)]
    for thread in threads:
        thread.start()
    run(0)
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    keys = [_folder_keys(folder) for folder in folders]
    for index, found in enumerate(scans):
        if found is not None and not found.counts["key_id"].is_in(keys[found.lane]["key_id"].implode()).all():
            scans[index] = None
    return list(zip(folders, keys)), scans


def _unpacked(values, packed: bytes):
    """``values`` (an empty ``array.array``) filled from the kernel's packed numbers."""
    values.frombytes(packed)
    return values


def _folder_keys(folder) -> pl.DataFrame:
    """The header fields of a Folder's keys that read as sample headers: key_id, comm, pid, tid, period, event, rest."""
    keys = pl.DataFrame({"key": folder.keys()}, schema={"key": pl.String}).with_row_index("key_id")
    return _key_fields(keys).drop("key")


def _kernel_stacks(folders: list, scans: list[_Scan]) -> pl.DataFrame:
    """The kernel's counts summed per Folder, stacks spelled from the names of their symbols (``_SPELLED_SCHEMA``).

    A Folder's symbols are frame bodies (one per group of bodies named alike): each distinct one is named once.
    """
    from array import array

    bodies = [pl.Series("body", folder.symbols(), pl.String) for folder, _ in folders]
    named = _frame_names(pl.concat([*bodies, *(keys["rest"] for _, keys in folders)]).drop_nulls().unique())
    named = named.select("body", "frame", "kernel")
    rests = named.rename({"body": "rest", "frame": "rest_frame", "kernel": "rest_kernel"})
    tables = []
    for lane, ((folder, keys), symbols) in enumerate(zip(folders, bodies)):
        counts = [scan.counts for scan in scans if scan.lane == lane]
        if not counts:
            continue
        by_file = ["file"] if "file" in counts[0].columns else []
        lines = symbols.to_frame().join(named, on="body", how="left", maintain_order="left")  # by symbol id
        spelled, leaves = folder.spell(lines["frame"].to_list())
        stacks = pl.DataFrame(
            [pl.Series("stack", spelled, pl.String), pl.Series("leaf_symbol", _unpacked(array("i"), leaves), pl.Int32)]
        ).with_row_index("stack_id")
        leaf_names = lines.select(
            pl.int_range(pl.len(), dtype=pl.Int32).alias("leaf_symbol"), pl.col("frame").alias("leaf"),
            pl.col("kernel").alias("leaf_kernel"),
        )
        stacks = stacks.join(leaf_names, on="leaf_symbol", how="left")
        # Samples without frames (or with only frames stackcollapse-perf.pl skips) take the symbol
        # of their header line, if any, as a one-frame stack.
        bare = pl.col("bare")
        rows = (
            pl.concat(counts)
            .join(keys.join(rests, on="rest", how="left"), on="key_id")
            .join(stacks.select("stack_id", pl.col("stack").is_null().alias("bare")), on="stack_id")
            # Summed per thread and stack id before the stacks' strings join: fewer rows carry them.
            .group_by(
                *by_file, "comm", "pid", "tid", "event", "stack_id", "bare",
                pl.when(bare).then(pl.col("rest_frame")).alias("rest_frame"),
                pl.when(bare).then(pl.col("rest_kernel")).alias("rest_kernel"),
            )
            .agg(
                pl.col("samples").sum(),
                (pl.col("period") * pl.col("samples")).sum().alias("period"),
                pl.col("samples").filter(pl.col("period").is_not_null()).sum().alias("period_n"),
            )
        )
        tables.append(
            rows.join(stacks, on="stack_id")
            .select(
                pl.col("file") if by_file else pl.lit(0, pl.Int64).alias("file"), "comm", "pid", "tid", "event",
                pl.when(bare).then(pl.col("rest_frame")).otherwise(pl.col("stack")).alias("stack"),
                pl.when(bare).then(pl.col("rest_frame")).otherwise(pl.col("leaf")).alias("leaf"),
                pl.when(~bare).then(pl.col("leaf_kernel"))
                .when(pl.col("rest_frame").is_not_null()).then(pl.col("rest_kernel")).alias("leaf_kernel"),
                "samples", "period", "period_n",
            )
            .cast(_SPELLED_SCHEMA)
        )
    return pl.concat(tables) if tables else pl.DataFrame(schema={"file": pl.Int64, **_SPELLED_SCHEMA})


class _Seen:
    """Frame lines and frame names already read line by line in this member, so later chunks only look at new ones.

    ``lines``: the two hashes of a frame line -> nid (null for frames stackcollapse-perf.pl skips);
    ``names``: body (``sym+0x1f (dso)``) -> nid, frame name, kernel flag; nid numbers names across
    the member. Strings kept here are copied, not views: a polars string view would keep its whole
    chunk's buffer alive and memory would grow with the file.
    """

    def __init__(self) -> None:
        self.lines = pl.DataFrame(schema={"uid": pl.UInt64, "check": pl.UInt64, "nid": pl.UInt32})
        self.names = pl.DataFrame(schema={"body": pl.String, "nid": pl.UInt32, "frame": pl.String, "kernel": pl.Boolean})

    def name_ids(self, bodies: pl.Series) -> pl.DataFrame:
        """body -> nid for ``bodies``, naming the ones not seen before."""
        fresh = bodies.drop_nulls().unique().to_frame("body").join(self.names, on="body", how="anti")
        if fresh.height:
            named = _frame_names(fresh["body"]).with_row_index("nid", offset=self.names.height)
            named = named.with_columns(_copied(pl.col("body")), _copied(pl.col("frame")))
            self.names = pl.concat([self.names, named.select(self.names.columns)])
        return self.names.select("body", pl.when(pl.col("frame").is_not_null()).then(pl.col("nid")).alias("nid"))


def _copied(strings: pl.Expr) -> pl.Expr:
    """The strings in fresh buffers (see ``_Seen``)."""
    return pl.concat_str([strings, pl.lit("\x00")]).str.head(-1)


@dataclass(frozen=True)
class _Part:
    """One chunk read line by line: its distinct stacks (``_PART_SCHEMA``) with counts, and what it had to skip."""

    stacks: pl.DataFrame
    headers: int
    warnings: list[tuple[int, str]]
    warning_count: int
    time_range: tuple[float, float] | None


def _chunks(text: str | bytes, chunk_chars: int):
    """Yield the (start, end) offsets of pieces of ``text`` (or bytes), cutting only after a blank line."""
    blank = "\n\n" if isinstance(text, str) else b"\n\n"
    start = 0
    size = len(text)
    while start < size:
        end = start + max(chunk_chars, 1)
        if end < size:
            cut = text.find(blank, end)
            end = size if cut < 0 else cut + 2
        yield start, min(end, size)
        start = end


def _fold_chunk(chunk: str, first_line: int, seen: _Seen, exact: bool = False) -> _Part:
    lines = _read_lines(chunk)
    keys, distinct = _line_keys(lines, exact)
    # Stacks repeat: each distinct line is classified once (frame lines once per member).
    # Exact mode keys lines by chunk-local numbers: nothing to share with other chunks then.
    seen_lines = seen.lines.clear() if exact else seen.lines
    known = distinct.join(seen_lines, on=["uid", "check"], how="inner").select(
        "uid", "check", "nid", pl.lit(_FRAME, pl.UInt8).alias("kind")
    )
    fresh = _classify(distinct.join(seen_lines, on=["uid", "check"], how="anti"))
    name_ids = seen.name_ids(pl.concat([fresh["body"], fresh["rest"]]))
    fresh = fresh.join(name_ids, on="body", how="left").join(
        name_ids.rename({"body": "rest", "nid": "rest_nid"}), on="rest", how="left"
    )
    if not exact:
        seen.lines = pl.concat([seen.lines, fresh.filter(pl.col("kind") == _FRAME).select("uid", "check", "nid")])
    attrs = pl.concat([known, fresh.drop("line", "body", "rest")], how="diagonal")

    per_line = keys.join(
        attrs.select("uid", pl.col("check").alias("check_distinct"), "kind", "nid"),
        on="uid",
        how="left",
        maintain_order="left",
    )
    if not exact and per_line.select((pl.col("check") != pl.col("check_distinct")).any()).item():
        return _fold_chunk(chunk, first_line, seen, exact=True)
    kind = pl.col("kind").fill_null(_BLANK)
    is_header = kind == _HEADER
    is_blank = kind == _BLANK
    # A frame belongs to the header above it unless a blank line came between them.
    block = is_blank.cum_sum()
    orphan = (kind == _FRAME) & (
        (is_header.cum_sum() == 0) | (block != pl.when(is_header).then(block).forward_fill())
    )
    rows = per_line.select(
        "uid",
        "nid",
        kind.alias("kind"),
        is_header.cum_sum().alias("sample"),
        orphan.alias("orphan"),
    ).lazy()
    frames = rows.filter((pl.col("kind") == _FRAME) & ~pl.col("orphan") & pl.col("nid").is_not_null())
    per_sample = frames.group_by("sample").agg(
        pl.col("nid").reverse().alias("stack_ids"), pl.col("nid").first().alias("leaf_id")
    )
    header_attrs = attrs.lazy().filter(pl.col("kind") == _HEADER).select("uid", *_HEADER_COLUMNS)
    samples = (
        rows.filter(pl.col("kind") == _HEADER)
        .select("uid")
        .join(header_attrs, on="uid", how="left", maintain_order="left")
        .with_row_index("sample", offset=1)
        .join(per_sample, on="sample", how="left")
    )
    # Samples without frame lines keep a null stack here; the merge gives them the header's symbol.
    stacks = samples.group_by([*_SAMPLE_KEYS, "rest_nid"]).agg(
        pl.len().alias("samples"),
        pl.col("period").sum(),
        pl.col("period").count().alias("period_n"),
        pl.col("leaf_id").first(),
        pl.col("time").min().alias("time_min"),
        pl.col("time").max().alias("time_max"),
    )
    warned = (
        rows.with_row_index("n")
        .filter(pl.col("orphan") | (pl.col("kind") == _OTHER))
        .join(attrs.lazy().select("uid", "reason"), on="uid", how="left")
        .select(
            "n",
            pl.when(pl.col("orphan"))
            .then(pl.lit("frame line outside any sample (no header line above it)"))
            .otherwise(pl.col("reason"))
            .alias("reason"),
        )
        .sort("n")
    )
    stacks, warned = pl.collect_all([stacks, warned], engine="in-memory")
    warnings = [(int(n) + first_line, reason) for n, reason in warned.head(MAX_WARNINGS).rows()]
    times = stacks.select(pl.col("time_min").min(), pl.col("time_max").max()).row(0)
    time_range = None if times[0] is None else (float(times[0]), float(times[1]))
    stacks = stacks.drop("time_min", "time_max").with_columns(_copied(pl.col("comm")), _copied(pl.col("event")))
    return _Part(stacks, int(stacks["samples"].sum()), warnings, warned.height, time_range)


def _line_keys(lines: pl.DataFrame, exact: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Per line: ``uid`` (its distinct line's key) and ``check``; the distinct non-empty lines (uid, check, line).

    Lines are keyed by a 64-bit hash, far cheaper than hashing strings twice for unique + join; a
    second, independent hash (``check``) must agree on every line or the chunk is redone with
    ``exact``, which keys lines by the exact string.
    """
    if exact:
        distinct = lines.select(pl.col("line").unique().drop_nulls()).with_row_index("uid")
        distinct = distinct.with_columns(pl.lit(0, pl.UInt64).alias("check"))
        keys = lines.join(distinct, on="line", how="left", maintain_order="left").select("uid", "check")
        return keys, distinct
    keys = lines.select(
        pl.col("line").hash(seed=_HASH_SEED).alias("uid"), pl.col("line").hash(seed=_CHECK_SEED).alias("check")
    )
    distinct = (
        pl.concat([lines, keys], how="horizontal")
        .unique(subset="uid", keep="any")
        .filter(pl.col("line").is_not_null())
    )
    return keys, distinct


def _read_lines(chunk: str) -> pl.DataFrame:
    """One String column ``line`` (null for empty lines), split by polars' multi-threaded CSV reader."""
    if not chunk or chunk.isspace():
        return pl.DataFrame(schema={"line": pl.String})
    return pl.read_csv(
        io.BytesIO(chunk.encode("utf-8", "surrogatepass")),
        has_header=False,
        separator=_NEVER,
        quote_char=None,
        new_columns=["line"],
        schema={"line": pl.String},
        truncate_ragged_lines=True,
        encoding="utf8-lossy",
        raise_if_empty=False,
    )


def _classify(distinct: pl.DataFrame) -> pl.DataFrame:
    """Kind of each distinct line; header fields for headers, ``body`` (``sym (dso)``) for frames."""
    head_char = pl.col("line").str.slice(0, 1)
    blank = pl.col("line").str.contains(r"^\s*$")
    indented = head_char.is_in(["\t", " "])
    flush = distinct.filter(~blank & ~indented & (head_char != "#")).select("uid", "line")
    header = _header_fields(flush).with_columns(pl.lit(True).alias("is_header"))
    old_frames = flush.join(header, on="uid", how="anti").filter(pl.col("line").str.contains(_OLD_FRAME_PATTERN))
    frames = pl.concat(
        [
            distinct.filter(indented).filter(pl.col("line").str.contains(_FRAME_PATTERN)).select("uid", "line"),
            old_frames.select("uid", "line"),
        ]
    ).select("uid", _body(pl.col("line")).alias("body"), pl.lit(True).alias("is_frame"))
    kind = (
        pl.when(pl.col("is_frame").is_not_null())
        .then(pl.lit(_FRAME))
        .when(pl.col("is_header").is_not_null())
        .then(pl.lit(_HEADER))
        .when(blank)
        .then(pl.lit(_BLANK))
        .when(head_char == "#")
        .then(pl.lit(_COMMENT))
        .otherwise(pl.lit(_OTHER))
        .cast(pl.UInt8)
    )
    out = distinct.join(header, on="uid", how="left").join(frames, on="uid", how="left").with_columns(kind.alias("kind"))
    return out.with_columns(
        pl.when(pl.col("kind") != _OTHER)
        .then(None)
        .when(indented)
        .then(pl.lit("indented line is not a frame ('address symbol (dso)'); skipped"))
        .otherwise(pl.lit("not a perf script sample header or frame line; skipped"))
        .alias("reason"),
    ).drop("is_header", "is_frame")


def _header_fields(flush: pl.DataFrame) -> pl.DataFrame:
    """The sample headers among ``flush`` lines (uid, line): uid, time, comm, pid, tid, period, event, rest.

    Header lines differ mostly by their time: the fields are read once per line without its time.
    """
    flush = flush.select(
        "uid",
        pl.col("line").str.extract(_TIME_PATTERN, 1).cast(pl.Float64, strict=False).alias("time"),
        pl.col("line").str.replace(_TIME_PATTERN, " 0.0:").alias("key"),
    )
    keys = _key_fields(flush.select(pl.col("key").unique()))
    return flush.join(keys, on="key", how="inner", maintain_order="left").drop("key")


def _key_fields(keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``keys`` whose ``key`` (a header line, its time as ``0.0``) reads as a sample header, with its fields.

    Adds comm, pid, tid, period, event and rest: the body of a frame printed on the header line
    (samples recorded without ``-g``).
    """
    fields = keys.with_columns(pl.col("key").str.extract_groups(_HEADER_PATTERN).alias("h")).unnest("h")
    return fields.filter(
        pl.col("id1").is_not_null() & (pl.col("time").is_not_null() | pl.col("event").is_not_null())
    ).select(
        *keys.columns,
        pl.col("comm").str.strip_chars(),
        pl.when(pl.col("id2").is_not_null()).then(pl.col("id1")).cast(pl.Int64, strict=False).alias("pid"),
        pl.coalesce("id2", "id1").cast(pl.Int64, strict=False).alias("tid"),
        pl.col("period").cast(pl.Int64, strict=False),
        "event",
        pl.when(pl.col("rest").str.contains(_OLD_FRAME_PATTERN)).then(_body(pl.col("rest"))).alias("rest"),
    )


def _body(line: pl.Expr) -> pl.Expr:
    """A frame line without its leading blanks and address: ``symbol+0x1f (dso)``."""
    return line.str.strip_chars_start(" \t").str.splitn(" ", 2).struct.field("field_1")


def _frame_names(bodies: pl.Series) -> pl.DataFrame:
    """Frame name and kernel flag for each distinct ``symbol+0x.. (dso)`` text, named like stackcollapse-perf.pl."""
    parts = bodies.to_frame("body").with_columns(pl.col("body").str.extract_groups(_BODY_PATTERN).alias("p")).unnest("p")
    sym = pl.col("sym").str.replace(r"\+0x[0-9a-fA-F]+$", "")
    dso_base = pl.col("dso").str.replace(r"^.*/", "")
    unknown = sym.is_null() | (sym == "[unknown]")
    named = (
        pl.when(unknown & (pl.col("dso") != "[unknown]") & (pl.col("dso") != ""))
        .then(pl.concat_str(pl.lit("["), dso_base, pl.lit("]")))
        .when(unknown)
        .then(pl.lit("[unknown]"))
        .otherwise(sym.str.replace_all(";", ":", literal=True))
    )
    tidy = (
        pl.when(pl.col("named").str.contains(r"\.\(.*\)\."))
        .then(pl.col("named"))
        .otherwise(
            pl.col("named")
            .str.replace_all("(anonymous namespace)", "\x00", literal=True)
            .str.replace(r"\(.*", "")
            .str.replace_all("\x00", "(anonymous namespace)", literal=True)
        )
        .str.replace_all(r"""["']""", "")
    )
    kernel = (
        pl.col("dso").str.starts_with("[kernel.")
        | pl.col("dso").str.starts_with("[guest.kernel.")
        | pl.col("dso").str.ends_with("vmlinux")
        | pl.col("dso").str.ends_with(".ko")
        | (pl.col("dso").str.contains(r"^\[[^\]]+\]$") & ~pl.col("dso").is_in(_USER_PSEUDO_DSOS))
    )
    return (
        parts.with_columns(named.alias("named"), kernel.alias("kernel"))
        .with_columns(pl.when(sym.str.starts_with("(")).then(None).otherwise(tidy).alias("frame"))
        .select("body", "frame", "kernel", "dso")
    )


def _merge(folded: list[pl.DataFrame], spelled: list[pl.DataFrame], names: pl.DataFrame, sources: list[str]) -> pl.DataFrame:
    """Sum the chunks' counts per file and stack (rows of each file together, in file order).

    ``folded``: ``_Part`` tables, stacks as frame ids (spelled root first here, named by ``names``);
    ``spelled``: tables of ``_SPELLED_SCHEMA``, stacks already spelled; both with their ``file``.
    """
    if not folded and not spelled:
        return conform(PERF_STACK, pl.DataFrame()).with_columns(file=pl.lit(0, pl.Int64))
    stacks = pl.concat([*([_spelled(folded, names)] if folded else []), *spelled]).with_columns(
        pl.when(pl.col("stack") == "").then(None).otherwise(pl.col("stack")).fill_null("[unknown]").alias("stack"),
        pl.col("leaf").fill_null("[unknown]"),
    )
    if stacks["comm"].str.starts_with("java").any():
        stacks = stacks.with_columns(_tidy_java(pl.col("stack")), _tidy_java(pl.col("leaf")))
    # Stacks spelled alike mostly share their leaf; when not ("[unknown]" from a sample without
    # frames and from a frame named so), the least leaf, kernel flag known first, whatever the order.
    leaf_first = pl.col("leaf", "leaf_kernel").sort_by("leaf", "leaf_kernel", nulls_last=True).first()
    stacks = stacks.group_by("file", *_KEYS).agg(pl.col("samples", "period", "period_n").sum(), leaf_first)
    stacks = stacks.with_columns(
        pl.when(pl.col("period_n") > 0).then(pl.col("period")).alias("period"),
        (pl.lit(sources[0]) if len(sources) == 1 else pl.col("file").replace_strict(
            list(range(len(sources))), sources, return_dtype=pl.String)).alias("source"),
    ).sort(
        ["file", "samples", "comm", "pid", "tid", "event", "stack"],
        descending=[False, True, False, False, False, False, False],
        nulls_last=True,
    )
    return conform(PERF_STACK, stacks).with_columns(stacks["file"])


def _spelled(folded: list[pl.DataFrame], names: pl.DataFrame) -> pl.DataFrame:
    """The ``_Part`` tables summed per frame ids, their stacks spelled root first (``_SPELLED_SCHEMA``)."""
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
        .group_by("file", *_SAMPLE_KEYS)
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
    return stacks.select("file", *_SPELLED_SCHEMA).cast(_SPELLED_SCHEMA)


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
)
