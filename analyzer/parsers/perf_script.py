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

The text is cut after blank lines into pieces of about ``CHUNK_CHARS``; the pieces' counts are
summed at the end. A piece of regular ``perf script`` output (ASCII; comments only on top; every
sample a header line, its indented frame lines, blank lines) is read from its bytes, two pieces at
a time on two threads: numpy finds the lines, each sample's frame lines stay one string (an Arrow
view of the bytes), samples are counted per header and distinct stack text (by two hashes), and
only stack texts not met in earlier pieces are split into frame lines; the calling thread then
names the frame lines not met before in the member. Any other piece is one polars column of
lines; a line is keyed by a hash so every distinct line is classified once (frame lines once per
member); samples are numbered by a cumulative sum over header lines and their frame ids gathered
per sample. Both readings give the same table (tests compare them on every corpus file).

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
from dataclasses import dataclass

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.tables import PERF_STACK, conform

MAX_WARNINGS = 50
# Record-aligned pieces of this many characters keep the per-line frames small on big files; under
# glibc's 32 MB mmap threshold, a piece's buffers reuse the previous piece's memory (fewer page faults).
CHUNK_CHARS = 30 * 1024 * 1024

# Shared by Python (detect, on the head) and polars (Rust regex, on every header line).
_HEADER_PATTERN = (
    r"^(?P<comm>\S.*?)\s+(?P<id1>-?\d+)(?:/(?P<id2>-?\d+))?\s+(?:\[(?P<cpu>\d+)\]\s+)?"
    r"(?:(?P<time>\d+\.\d+):\s*)?(?:(?P<period>\d+)\s+)?(?:(?P<event>[^\s:]\S*?):)?"
    r"(?:\s+(?P<rest>\S.*?))?\s*$"
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
_FRAME_DETECT_RE = re.compile(r"[ \t]+[0-9a-fA-F]+ .*\(.*\)[ \t]*$")
_OLD_FRAME_DETECT_RE = re.compile(r"[0-9a-fA-F]{6,} \S.*\(.*\)[ \t]*$")

_KEYS = ["comm", "pid", "tid", "event", "stack"]
_SAMPLE_KEYS = ["comm", "pid", "tid", "event", "stack_ids"]
_HEADER_COLUMNS = ["comm", "pid", "tid", "event", "period", "time", "rest_nid"]
_STACK_SCHEMA = {"stack_uid": pl.UInt64, "stack_check": pl.UInt64, "stack": pl.String, "leaf_id": pl.UInt32}
_PART_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack_ids": pl.List(pl.UInt32),
                "rest_nid": pl.UInt32, "samples": pl.UInt32, "period": pl.Int64, "period_n": pl.UInt32,
                "leaf_id": pl.UInt32}
_SPELLED_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack": pl.String,
                   "leaf_id": pl.UInt32, "samples": pl.UInt32, "period": pl.Int64, "period_n": pl.UInt32}
_TAB, _SPACE, _HASH, _NEWLINE = 9, 32, 35, 10


def parse(text: str, ctx: ParseContext) -> ParseResult:
    return parse_chunked(text, ctx, CHUNK_CHARS)


def parse_chunked(text: str, ctx: ParseContext, chunk_chars: int) -> ParseResult:
    """``parse`` with the text cut into record-aligned pieces of about ``chunk_chars`` characters."""
    seen = _Seen()
    folded: list[pl.DataFrame] = []
    spelled: list[pl.DataFrame] = []
    warnings: list[tuple[int, str]] = []
    dropped = 0
    times: list[tuple[float, float]] = []
    headers = 0
    for part in _folded_pieces(text, chunk_chars, seen):
        headers += part.headers
        if part.stacks.height:
            (spelled if part.spelled else folded).append(part.stacks)
        if part.time_range is not None:
            times.append(part.time_range)
        room = MAX_WARNINGS - len(warnings)
        warnings.extend(part.warnings[:room])
        dropped += part.warning_count - min(room, len(part.warnings))
    if headers == 0:
        raise ParseError("no perf script sample header line (comm pid [cpu] time: event:) found")
    stacks = _merge(folded, spelled, seen.names, ctx.source)
    result_warnings = [ParseWarning(line, reason) for line, reason in warnings]
    if dropped > 0:
        result_warnings.append(ParseWarning(None, f"{dropped} more warnings not shown"))
    records = int(stacks["samples"].sum())
    notes = _notes(text, stacks, times)
    return ParseResult(tables={PERF_STACK: stacks}, records=records, warnings=result_warnings, notes=notes)


def _folded_pieces(text: str, chunk_chars: int, seen: _Seen):
    """Yield the ``_Part`` of each piece, in file order.

    Two threads scan the next two pieces with ``_fold_regular`` (numpy and polars release the GIL
    in their heavy calls) while this thread names what the previous scans found; at most two
    pieces' bytes are alive at once. Pieces that are not regular are read by ``_fold_chunk`` here.
    The regular pieces' counts come last, summed in one part whose stacks are already spelled.
    """
    from collections import deque
    from concurrent.futures import ThreadPoolExecutor

    pieces = list(_chunks(text, chunk_chars))

    def general(start: int, end: int) -> _Part:
        return _fold_chunk(text[start:end], text.count("\n", 0, start) + 1, seen)

    if not text.isascii():
        for start, end in pieces:
            yield general(start, end)
        return

    def scan(index: int, known: pl.DataFrame) -> _Scan | None:
        start, end = pieces[index]
        return _fold_regular(text[start:end].encode("ascii"), known)

    counts: list[pl.DataFrame] = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        running = deque(pool.submit(scan, index, seen.known_stacks()) for index in range(min(2, len(pieces))))
        for index, (start, end) in enumerate(pieces):
            found = running.popleft().result()
            if found is not None and _name_scan(found, seen):
                counts.append(found.counts)
                part = _Part(pl.DataFrame(schema=_PART_SCHEMA), found.headers, [], 0, found.time_range)
            else:
                part = general(start, end)
            # Submitted after this piece is named: its stacks are known to the scan, whatever the timing.
            if index + 2 < len(pieces):
                running.append(pool.submit(scan, index + 2, seen.known_stacks()))
            yield part
    if counts:
        yield _Part(_regular_stacks(counts, seen), 0, [], 0, None, spelled=True)


class _Seen:
    """Frame lines, frame names and stack texts already read in this member, so later chunks only look at new ones.

    ``lines``: the two hashes of a frame line -> nid (null for frames stackcollapse-perf.pl skips);
    ``names``: body (``sym+0x1f (dso)``) -> nid, frame name, kernel flag; nid numbers names across
    the member; ``stacks``: the two hashes of a regular sample's frame lines (one string) -> the
    stack they spell (frame names root first joined by ``;``, null without frames) and its leaf's
    nid. Strings kept here are copied, not views: a polars string view would keep its whole
    chunk's buffer alive and memory would grow with the file.
    """

    def __init__(self) -> None:
        self.lines = pl.DataFrame(schema={"uid": pl.UInt64, "check": pl.UInt64, "nid": pl.UInt32})
        self.names = pl.DataFrame(schema={"body": pl.String, "nid": pl.UInt32, "frame": pl.String, "kernel": pl.Boolean})
        self.stacks = pl.DataFrame(schema=_STACK_SCHEMA)

    def name_ids(self, bodies: pl.Series) -> pl.DataFrame:
        """body -> nid for ``bodies``, naming the ones not seen before."""
        fresh = bodies.drop_nulls().unique().to_frame("body").join(self.names, on="body", how="anti")
        if fresh.height:
            named = _frame_names(fresh["body"]).with_row_index("nid", offset=self.names.height)
            named = named.with_columns(_copied(pl.col("body")), _copied(pl.col("frame")))
            self.names = pl.concat([self.names, named.select(self.names.columns)])
        return self.names.select("body", pl.when(pl.col("frame").is_not_null()).then(pl.col("nid")).alias("nid"))

    def known_stacks(self) -> pl.DataFrame:
        """The hashes of the stack texts read so far (a frame of its own, safe to hand to another thread)."""
        return self.stacks.select("stack_uid", "stack_check")


def _copied(strings: pl.Expr) -> pl.Expr:
    """The strings in fresh buffers (see ``_Seen``)."""
    return pl.concat_str([strings, pl.lit("\x00")]).str.head(-1)


@dataclass(frozen=True)
class _Part:
    """One chunk folded: its distinct stacks with counts, and what it had to skip.

    ``stacks``: ``_PART_SCHEMA`` (stacks as nid lists), or ``_SPELLED_SCHEMA`` when ``spelled``.
    """

    stacks: pl.DataFrame
    headers: int
    warnings: list[tuple[int, str]]
    warning_count: int
    time_range: tuple[float, float] | None
    spelled: bool = False


@dataclass(frozen=True)
class _Scan:
    """One regular piece read without naming anything (see ``_fold_regular``); all strings copied.

    ``counts``: samples per header fields and stack text (``stack_uid``, ``stack_check``: its two
    hashes); ``stacks``: the stack texts not known before, each as the ``uid`` hashes of its frame
    lines, leaf first (null without frames); ``lines``: their distinct frame lines (uid, check, line).
    """

    counts: pl.DataFrame
    stacks: pl.DataFrame
    lines: pl.DataFrame
    headers: int
    time_range: tuple[float, float] | None


def _chunks(text: str, chunk_chars: int):
    """Yield the (start, end) offsets of pieces of ``text``, cutting only after a blank line."""
    start = 0
    size = len(text)
    while start < size:
        end = start + max(chunk_chars, 1)
        if end < size:
            cut = text.find("\n\n", end)
            end = size if cut < 0 else cut + 2
        yield start, end
        start = end


def _fold_regular(data: bytes, known: pl.DataFrame) -> _Scan | None:
    """A piece's samples counted per header and stack text, or None when the piece has anything else.

    The usual shape, that of ``perf script`` output: comment lines only before the first sample,
    then samples, each a header line followed by its tab- or blank-indented frame lines and blank
    lines, and nothing else (ASCII text, every header and frame line readable); ``_fold_chunk``
    reads any other piece. Line bounds are found with numpy over the bytes; each sample's frame
    lines stay one string (a slice of the bytes, not a copy) and samples are counted per distinct
    stack text by its hashes, so frame lines are only split for the stack texts not in ``known``
    (stack_uid, stack_check). Nothing is named here, and nothing shared is touched: ``_name_scan``
    does that, so pieces can be scanned side by side.
    """
    import numpy as np  # here, not on top: most dbdiag runs never read a big perf script

    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == _NEWLINE)
    if raw.size and raw[-1] != _NEWLINE:
        ends = np.append(ends, raw.size)
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1] + 1
    empty = starts == ends
    first = raw[np.minimum(starts, max(raw.size - 1, 0))] if raw.size else np.zeros(0, np.uint8)
    indented = ~empty & ((first == _TAB) | (first == _SPACE))
    comment = ~empty & (first == _HASH)
    header = ~empty & ~indented & ~comment
    header_rows = np.flatnonzero(header)
    if header_rows.size == 0:
        return None
    begin = header_rows[0]
    after_blank = np.zeros_like(empty)
    after_blank[1:] = empty[:-1]
    if comment[begin:].any() or indented[:begin].any() or (indented & after_blank).any():
        return None
    # Frame lines follow their header directly: sample i's are lines header_rows[i] + 1 ... + frame_counts[i].
    frame_counts = np.bincount(np.cumsum(header)[indented], minlength=header_rows.size + 1)[1:]
    header_ends = ends[header_rows]
    stack_ends = ends[header_rows + frame_counts]
    samples = header_rows.size
    # Per sample: its header line, then its frame lines as one string (from the newline ending the header).
    texts = _byte_ranges(data, np.stack([starts[header_rows], header_ends, stack_ends], axis=1).ravel())
    headers, keys = _header_keys(texts.gather_every(3).to_frame("line").with_row_index("uid"))
    if headers.height != samples:
        return None
    stack_texts = texts.gather_every(3, offset=1)
    per_sample = headers.with_columns(
        stack_texts.hash(seed=_HASH_SEED).alias("stack_uid"), stack_texts.hash(seed=_CHECK_SEED).alias("stack_check")
    )
    distinct = per_sample.group_by("stack_uid").agg(
        pl.col("stack_check").n_unique().alias("checks"), pl.col("stack_check").first(), pl.col("uid").first()
    )
    if distinct["checks"].max() != 1:
        return None
    # In file order: the stacks' frame lines are then read as one increasing run of byte ranges.
    fresh = distinct.join(known, on=["stack_uid", "stack_check"], how="anti").sort("uid")
    rows = fresh["uid"].to_numpy()
    split = _stack_lines(fresh, header_rows[rows], frame_counts[rows], starts, ends, data)
    if split is None:
        return None
    stacks, lines = split
    # A header's period is in its key: the part multiplies it by the samples.
    counts = (
        per_sample.group_by("key_id", "stack_uid", "stack_check")
        .agg(pl.len().alias("samples"))
        .join(keys, on="key_id", how="left")
        .select(
            _copied(pl.col("comm")), "pid", "tid", "period", _copied(pl.col("event")), _copied(pl.col("rest")),
            "stack_uid", "stack_check", "samples",
        )
    )
    times = headers.select(pl.col("time").min().alias("first"), pl.col("time").max().alias("last")).row(0)
    time_range = None if times[0] is None else (float(times[0]), float(times[1]))
    return _Scan(counts, stacks, lines, samples, time_range)


def _stack_lines(fresh: pl.DataFrame, header_rows, frame_counts, starts, ends, data: bytes):
    """The ``stacks`` and ``lines`` of a ``_Scan`` for the ``fresh`` stack texts, read from one sample of each.

    None when one of these lines is not a frame line, or two of them share a hash.
    """
    import numpy as np

    owners = np.repeat(np.arange(frame_counts.size), frame_counts)
    first_row = np.repeat(header_rows + 1 - np.concatenate(([0], np.cumsum(frame_counts)[:-1])), frame_counts)
    rows = first_row + np.arange(owners.size)
    stacks = fresh.select("stack_uid", "stack_check").with_row_index("owner")
    if rows.size == 0:
        no_lines = pl.DataFrame(schema={"uid": pl.UInt64, "check": pl.UInt64, "line": pl.String})
        return stacks.select("stack_uid", "stack_check", pl.lit(None, pl.List(pl.UInt64)).alias("line_uids")), no_lines
    # Every other string is a line; the ones between are the newlines.
    lines = _byte_ranges(data, np.stack([starts[rows], ends[rows]], axis=1).ravel()).gather_every(2)
    keyed = lines.to_frame("line").select(
        pl.Series("owner", owners, pl.UInt32),
        pl.col("line").hash(seed=_HASH_SEED).alias("uid"),
        pl.col("line").hash(seed=_CHECK_SEED).alias("check"),
        "line",
    )
    distinct_lines = keyed.unique(subset=["uid", "check"], keep="any").select("uid", "check", "line")
    if distinct_lines["uid"].n_unique() != distinct_lines.height:
        return None
    # Indented lines: frames if they match _FRAME_PATTERN (what _classify concludes for them), else give up.
    if not distinct_lines.select(pl.col("line").str.contains(_FRAME_PATTERN).all()).item():
        return None
    per_stack = keyed.group_by("owner").agg(pl.col("uid").alias("line_uids"))
    stacks = stacks.join(per_stack, on="owner", how="left").select("stack_uid", "stack_check", "line_uids")
    return stacks, distinct_lines.with_columns(_copied(pl.col("line")))


def _name_scan(scan: _Scan, seen: _Seen) -> bool:
    """Name a scanned piece's new frame lines and spell its new stack texts, in ``seen``.

    False (and nothing added) when one of its frame lines shares a hash with a different line met before.
    """
    lines = scan.lines.join(seen.lines, on=["uid", "check"], how="anti")
    if lines.join(seen.lines, on="uid", how="semi").height:
        return False
    if lines.height:
        bodies = lines.select("uid", "check", _body(pl.col("line")).alias("body"))
        named = bodies.join(seen.name_ids(bodies["body"]), on="body", how="left")
        seen.lines = pl.concat([seen.lines, named.select("uid", "check", "nid")])
    # The other scan running meanwhile did not know this one's stacks: both may bring the same ones.
    fresh = scan.stacks.join(seen.stacks, on=["stack_uid", "stack_check"], how="anti")
    if fresh.height:
        by_line = seen.lines.join(seen.names.select("nid", "frame"), on="nid", how="left")

        def per_line(values: pl.Series) -> pl.Expr:
            """The stack's frame lines mapped to ``values``, leaf first; frames stackcollapse-perf.pl skips drop out."""
            return (
                pl.col("line_uids")
                .list.eval(pl.element().replace_strict(by_line["uid"], values, default=None))
                .list.drop_nulls()
            )

        stacks = fresh.select(
            "stack_uid", "stack_check", per_line(by_line["frame"]).alias("frames"),
            per_line(by_line["nid"]).list.first().alias("leaf_id"),
        ).select(
            "stack_uid",
            "stack_check",
            pl.when(pl.col("frames").list.len() > 0)
            .then(pl.col("frames").list.reverse().list.join(";"))
            .alias("stack"),
            "leaf_id",
        )
        seen.stacks = pl.concat([seen.stacks, stacks.cast(_STACK_SCHEMA)])
    return True


def _regular_stacks(counts: list[pl.DataFrame], seen: _Seen) -> pl.DataFrame:
    """The scanned pieces' ``counts`` summed, with their stacks spelled (``_SPELLED_SCHEMA``)."""
    fields = ["comm", "pid", "tid", "period", "event", "rest", "stack_uid", "stack_check"]
    summed = pl.concat(counts).group_by(fields).agg(pl.col("samples").sum())
    rest_ids = seen.name_ids(summed["rest"])
    rest_frames = rest_ids.join(seen.names.select("body", "frame"), on="body", how="left").rename(
        {"body": "rest", "nid": "rest_nid", "frame": "rest_frame"}
    )
    # Samples without frames take the symbol of their header line, if any, as a one-frame stack.
    bare = pl.col("stack").is_null()
    return (
        summed.with_columns(
            (pl.col("period") * pl.col("samples")).alias("period"),
            pl.when(pl.col("period").is_not_null()).then(pl.col("samples")).otherwise(0).alias("period_n"),
        )
        .join(seen.stacks, on=["stack_uid", "stack_check"], how="left")
        .join(rest_frames, on="rest", how="left")
        .with_columns(
            pl.when(bare).then(pl.col("rest_frame")).otherwise(pl.col("stack")).alias("stack"),
            pl.when(bare).then(pl.col("rest_nid")).otherwise(pl.col("leaf_id")).alias("leaf_id"),
        )
        .select(list(_SPELLED_SCHEMA))
        .cast(_SPELLED_SCHEMA)
    )


def _byte_ranges(data: bytes, bounds) -> pl.Series:
    """The strings ``data[bounds[i]:bounds[i + 1]]`` (ASCII ``data``; ``bounds`` never decreasing).

    One Arrow array whose offsets are ``bounds``, over ``data`` itself: no string is copied.
    """
    import pyarrow as pa  # here, not on top: most dbdiag runs never read a big perf script

    offsets = pa.py_buffer(bounds.astype("int64", copy=False))
    return pl.Series(_ArrowArray(pa.LargeStringArray.from_buffers(len(bounds) - 1, offsets, pa.py_buffer(data))))


class _ArrowArray:
    """An Arrow array handed to polars by the Arrow PyCapsule interface (``pl.from_arrow`` imports pyarrow.compute)."""

    def __init__(self, array) -> None:
        self.array = array

    def __arrow_c_array__(self, requested_schema=None):
        return self.array.__arrow_c_array__(requested_schema)


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

    ``rest`` is the body of a frame printed on the header line (samples recorded without ``-g``).
    """
    headers, keys = _header_keys(flush)
    return headers.join(keys, on="key_id", how="inner", maintain_order="left").drop("key_id")


def _header_keys(flush: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``_header_fields`` in two tables: the headers (uid, time, key_id) and their fields per key_id.

    Header lines differ mostly by their time: the fields are read once per line without its time.
    """
    flush = flush.select(
        "uid",
        pl.col("line").str.extract(_TIME_PATTERN, 1).cast(pl.Float64, strict=False).alias("time"),
        pl.col("line").str.replace(_TIME_PATTERN, " 0.0:").alias("key"),
    )
    keys = flush.select(pl.col("key").unique()).with_row_index("key_id")
    keys = keys.with_columns(pl.col("key").str.extract_groups(_HEADER_PATTERN).alias("h")).unnest("h")
    keys = keys.filter(
        pl.col("id1").is_not_null() & (pl.col("time").is_not_null() | pl.col("event").is_not_null())
    ).select(
        "key",
        "key_id",
        pl.col("comm").str.strip_chars(),
        pl.when(pl.col("id2").is_not_null()).then(pl.col("id1")).cast(pl.Int64, strict=False).alias("pid"),
        pl.coalesce("id2", "id1").cast(pl.Int64, strict=False).alias("tid"),
        pl.col("period").cast(pl.Int64, strict=False),
        "event",
        pl.when(pl.col("rest").str.contains(_OLD_FRAME_PATTERN)).then(_body(pl.col("rest"))).alias("rest"),
    )
    headers = flush.join(keys.select("key", "key_id"), on="key", how="inner", maintain_order="left")
    return headers.drop("key"), keys.drop("key")


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


def _merge(folded: list[pl.DataFrame], spelled: list[pl.DataFrame], names: pl.DataFrame, source: str) -> pl.DataFrame:
    """Sum the chunks' counts per stack.

    ``folded``: ``_Part`` tables, stacks as frame ids (spelled root first here); ``spelled``: tables
    of ``_SPELLED_SCHEMA``, stacks already spelled.
    """
    if not folded and not spelled:
        return conform(PERF_STACK, pl.DataFrame())
    stacks = pl.concat([*([_spelled(folded, names)] if folded else []), *spelled])
    leaves = names.select(pl.col("nid").alias("leaf_id"), pl.col("frame").alias("leaf"),
                          pl.col("kernel").alias("leaf_kernel"))
    stacks = (
        stacks.join(leaves, on="leaf_id", how="left")
        .with_columns(
            pl.when(pl.col("stack") == "").then(None).otherwise(pl.col("stack")).fill_null("[unknown]").alias("stack"),
            pl.col("leaf").fill_null("[unknown]"),
        )
    )
    if stacks["comm"].str.starts_with("java").any():
        stacks = stacks.with_columns(_tidy_java(pl.col("stack")), _tidy_java(pl.col("leaf")))
    stacks = (
        stacks.group_by(_KEYS)
        .agg(pl.col("samples", "period", "period_n").sum(), pl.col("leaf", "leaf_kernel").first())
    )
    stacks = stacks.with_columns(
        pl.when(pl.col("period_n") > 0).then(pl.col("period")).alias("period"),
        pl.lit(source).alias("source"),
    ).sort(
        ["samples", "comm", "pid", "tid", "event", "stack"],
        descending=[True, False, False, False, False, False],
        nulls_last=True,
    )
    return conform(PERF_STACK, stacks)


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
        .group_by(_SAMPLE_KEYS)
        .agg(pl.col("samples", "period", "period_n").sum(), pl.col("leaf_id").first())
    )
    frames = names.filter(pl.col("frame").is_not_null())
    spelled = pl.col("stack_ids").list.eval(
        pl.element().replace_strict(frames["nid"], frames["frame"], return_dtype=pl.String)
    ).list.join(";").alias("stack")
    return stacks.with_columns(spelled).select(list(_SPELLED_SCHEMA)).cast(_SPELLED_SCHEMA)


def _tidy_java(frames: pl.Expr) -> pl.Expr:
    """``Ljava/io/File:::write`` -> ``java/io/File:::write`` in java processes, as stackcollapse-perf.pl does."""
    return (
        pl.when(pl.col("comm").str.starts_with("java"))
        .then(frames.str.replace_all(r"(^|;)L([^;]*/)", "${1}${2}"))
        .otherwise(frames)
    )


def _notes(text: str, stacks: pl.DataFrame, times: list[tuple[float, float]]) -> list[str]:
    notes = _header_notes(text)
    if times:
        first, last = min(t[0] for t in times), max(t[1] for t in times)
        notes.append(
            f"perf sample times are seconds since boot, not wall-clock time: {first:.6f} to {last:.6f} "
            f"({last - first:.1f} s)"
        )
    else:
        notes.append("perf samples carry no timestamps")
    per_event = (
        stacks.group_by("event").agg(pl.col("samples").sum()).sort(["samples", "event"], descending=[True, False])
    )
    events = ", ".join(f"{event or '(no event)'} {count}" for event, count in per_event.rows())
    notes.append(f"samples per event: {events}")
    if stacks["pid"].null_count() == stacks.height and stacks.height:
        notes.append("one id per sample header: read as the thread id (perf script's default tid field); pid is null")
    return notes


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
)
