"""perf script read line by line with polars: the reading of a piece the C kernel refuses, or of every
piece when the package was built without it. Sample lines::

    dd 29776 666709.771979:   10101010 cpu-clock:
    \t414b3b fsnotify+0x1b (/lib/modules/4.1.0/build/vmlinux)
    \t e5f70 read (/lib/x86_64-linux-gnu/libc-2.15.so)
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import polars as pl

from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS


# Shared by Python (detect, on the head) and polars (Rust regex, on every header line). Lazy texts end on
# \S ((?:.*?\S)?, not .*?): the same captures, and Python's backtracking stays linear in a run of spaces.
HEADER_PATTERN = (
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
# Bracketed dsos that are user space, not kernel modules.
_USER_PSEUDO_DSOS = ["[unknown]", "[vdso]", "[vsyscall]", "[vvar]", "[heap]", "[stack]", "[anon]", "[jit]",
                     "[uprobes]", "[vectors]", "[sigpage]"]
STACK_KEYS = ["comm", "pid", "tid", "event", "stack"]
SAMPLE_KEYS = ["comm", "pid", "tid", "event", "stack_ids"]
_HEADER_COLUMNS = ["comm", "pid", "tid", "event", "period", "time", "rest_nid"]
_PART_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack_ids": pl.List(pl.UInt32),
                "rest_nid": pl.UInt32, "samples": pl.UInt32, "period": pl.Int64, "period_n": pl.UInt32,
                "leaf_id": pl.UInt32}
SPELLED_SCHEMA = {"comm": pl.String, "pid": pl.Int64, "tid": pl.Int64, "event": pl.String, "stack": pl.String,
                   "leaf": pl.String, "leaf_kernel": pl.Boolean, "samples": pl.Int64, "period": pl.Int64,
                   "period_n": pl.Int64}


class SeenFrames:
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
            named = frame_names(fresh["body"]).with_row_index("nid", offset=self.names.height)
            named = named.with_columns(_copied(pl.col("body")), _copied(pl.col("frame")))
            self.names = pl.concat([self.names, named.select(self.names.columns)])
        return self.names.select("body", pl.when(pl.col("frame").is_not_null()).then(pl.col("nid")).alias("nid"))


def _copied(strings: pl.Expr) -> pl.Expr:
    """The strings in fresh buffers (see ``SeenFrames``)."""
    return pl.concat_str([strings, pl.lit("\x00")]).str.head(-1)


@dataclass(frozen=True)
class _Part:
    """One chunk read line by line: its distinct stacks (``_PART_SCHEMA``) with counts, and what it had to skip."""

    stacks: pl.DataFrame
    headers: int
    warnings: list[tuple[int, str]]
    warning_count: int
    time_range: tuple[float, float] | None


def fold_chunk(chunk: str, first_line: int, seen: SeenFrames, exact: bool = False) -> _Part:
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
        return fold_chunk(chunk, first_line, seen, exact=True)
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
    stacks = samples.group_by([*SAMPLE_KEYS, "rest_nid"]).agg(
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
    keys = key_fields(flush.select(pl.col("key").unique()))
    return flush.join(keys, on="key", how="inner", maintain_order="left").drop("key")


def key_fields(keys: pl.DataFrame) -> pl.DataFrame:
    """The rows of ``keys`` whose ``key`` (a header line, its time as ``0.0``) reads as a sample header, with its fields.

    Adds comm, pid, tid, period, event and rest: the body of a frame printed on the header line
    (samples recorded without ``-g``).
    """
    fields = keys.with_columns(pl.col("key").str.extract_groups(HEADER_PATTERN).alias("h")).unnest("h")
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


def frame_names(bodies: pl.Series) -> pl.DataFrame:
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
