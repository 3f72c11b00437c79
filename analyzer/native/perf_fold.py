"""The perf script C kernel ``dbdiag._perf_fold`` (``perf_fold.c`` beside this file): record-aligned
pieces of a member, read by the kernel without the GIL on ``KERNEL_THREADS`` threads, and the
stacks of its Folders spelled as ``perf_stack`` rows. A piece the kernel refuses (not ASCII, not
as perf prints it) is read by ``perf_fold_polars``: slower, same rows.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from dbdiag.file_bytes import FileBytes
from dbdiag.native.perf_fold_polars import SPELLED_SCHEMA, frame_names, key_fields


# Record-aligned pieces of this many characters (bytes) keep the per-line frames of the line-by-line
# reading small on big files; under glibc's 32 MB mmap threshold, a piece's buffers reuse the
# previous piece's memory (fewer page faults). Small enough that the kernel's threads get about
# as many bytes each.
CHUNK_CHARS = 16 * 1024 * 1024
# The C kernel reads pieces on this many threads, one Folder each.
KERNEL_THREADS = 2


def kernel():
    """The C kernel ``dbdiag._perf_fold``, or None when the package was installed without it."""
    try:
        from dbdiag import _perf_fold
    except ImportError:
        return None
    return _perf_fold


@dataclass(frozen=True)
class TextPiece:
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
class BytesPiece:
    """``data[start:end]``, a piece of a member's bytes without carriage returns (or of a ``FileBytes``)."""

    data: bytes | FileBytes
    start: int
    end: int

    def kernel_input(self) -> tuple[bytes, int, int]:
        # The kernel refuses any byte that is not ASCII: decoding would not change the others.
        if not isinstance(self.data, FileBytes):
            return self.data, self.start, self.end
        piece = self.data[self.start : self.end]  # a FileBytes: this piece only, read now (in the kernel's thread)
        return piece, 0, len(piece)

    def text(self) -> str:
        return decoded(self.data[self.start : self.end])

    def first_line(self) -> int:
        if isinstance(self.data, FileBytes):  # counts on from the piece before
            return self.data.newlines_before(self.start) + 1
        # A window at a time: an mmap has no count().
        starts = range(0, self.start, CHUNK_CHARS)
        return sum(self.data[at : min(at + CHUNK_CHARS, self.start)].count(b"\n") for at in starts) + 1


def decoded(data: bytes) -> str:
    """Bytes without carriage returns as ``dbdiag.pipeline.decode`` decodes them."""
    return str(data, "utf-8", "backslashreplace")


@dataclass(frozen=True)
class _Scan:
    """One piece read by the kernel: ``counts`` (key_id, stack_id, samples) in the ids of Folder ``lane``."""

    lane: int
    samples: int
    time_range: tuple[float, float] | None
    counts: pl.DataFrame


def scan_pieces(kernel, pieces: list[TextPiece] | list[BytesPiece]) -> tuple[list, list[_Scan | None]]:
    """The kernel's Folders, each with the fields of its header keys (``_folder_keys``), and per piece
    its ``_Scan`` (None when the piece is not regular).

    Regular: ``perf script`` output as perf prints it (ASCII; comment lines only before the first
    sample; every sample a header line, its indented frame lines, empty lines), which the kernel
    reads without the GIL, ``KERNEL_THREADS`` pieces at a time, each thread with a Folder of its
    own. A piece also goes the line-by-line way when one of its headers does not read as one
    (``key_fields``).
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
    return key_fields(keys).drop("key")


def kernel_stacks(folders: list, scans: list[_Scan]) -> pl.DataFrame:
    """The kernel's counts summed per Folder, stacks spelled from the names of their symbols (``SPELLED_SCHEMA``).

    A Folder's symbols are frame bodies (one per group of bodies named alike): each distinct one is named once.
    """
    from array import array

    bodies = [pl.Series("body", folder.symbols(), pl.String) for folder, _ in folders]
    named = frame_names(pl.concat([*bodies, *(keys["rest"] for _, keys in folders)]).drop_nulls().unique())
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
            .cast(SPELLED_SCHEMA)
        )
    return pl.concat(tables) if tables else pl.DataFrame(schema={"file": pl.Int64, **SPELLED_SCHEMA})


def chunks(text: str | bytes, chunk_chars: int):
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
