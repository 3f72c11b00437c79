"""Times of an entry: ``# Time`` (``261129 19:12:14``, ``2016-07-20T18:13:25.698433Z``), ``SET timestamp``,
``log_slow_extra`` Start/End; which of them is the start, zone disagreement with ``--tz``, the
``# Time`` carried over to entries without one. (The rules are in the package docstring.)
"""

from __future__ import annotations

import functools
import re

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.kit.times import local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.timebounds import MAX_EPOCH_S
from dbdiag.native.lazy import np
from dbdiag.parsers.mysql_slowlog.columns import any_per, by_distinct, gather_index, per_entry
from dbdiag.parsers.mysql_slowlog.files import Files, Warnings


TZ_MISMATCH_S = 30 * 60  # # Time vs SET timestamp differing by more than this means --tz is wrong
MAX_ZONE_OFFSET_S = 14 * 3600  # the widest UTC offset in use; a larger gap is not a zone problem
OLD_TIME_RE = (  # 081127  8:51:20, 120315 18:01:58.479076, 121123 19:56:06.0000001967
    r"^(?P<yy>\d{2})(?P<mo>\d{2})(?P<dd>\d{2})\s+(?P<hh>\d{1,2}):(?P<mi>\d{2}):(?P<ss>\d{2})(?:\.(?P<frac>\d+))?$"
)
ISO_TIME_RE = (
    r"^(?P<yyyy>\d{4})-(?P<mo>\d{2})-(?P<dd>\d{2})[T ](?P<hh>\d{2}):(?P<mi>\d{2}):(?P<ss>\d{2})"
    r"(?:\.(?P<frac>\d+))?(?P<zone>Z|[+-]\d{2}:?\d{2})?$"
)


def time_texts(lines: pl.Series, position: np.ndarray) -> tuple[np.ndarray, pl.Series]:
    """The entries with a ``# Time`` line (``position``: each entry's line, or -1) and its text."""
    present = np.flatnonzero(position >= 0)  # few: the server writes # Time once a second
    text = lines.gather(gather_index(position[present])).str.slice(len("# Time:"))
    return present, text.str.split_exact(" # User@Host:", 1).struct.field("field_0").str.strip_chars().alias("time_text")


def times_read(entries: pl.DataFrame, tz: str) -> list[pl.DataFrame]:
    """``Start:`` and ``End:`` texts read (``*_utc``), once per distinct text, when some line has them."""
    times = []
    for column in ("qt_Start", "qt_End"):
        if column in entries.columns and entries[column].null_count() < entries.height:
            times.append(by_distinct(entries[column], parse_time_text(column, tz)).select(f"{column}_utc"))
    return times


@functools.cache
def parse_time_text(column: str, tz: str) -> dict[str, pl.Expr]:
    """Expressions turning a ``# Time:``/``Start:`` text into UTC (``*_utc``) and whether it had a zone."""
    old = pl.col(column).str.extract_groups(OLD_TIME_RE)
    iso = pl.col(column).str.extract_groups(ISO_TIME_RE)
    yy = old.struct.field("yy").cast(pl.Int32, strict=False)
    year = pl.coalesce(iso.struct.field("yyyy").cast(pl.Int32, strict=False), pl.when(yy < 70).then(yy + 2000).otherwise(yy + 1900))
    pick = lambda f: pl.coalesce(iso.struct.field(f), old.struct.field(f))  # noqa: E731
    frac = pick("frac").fill_null("").str.slice(0, 6).str.pad_end(6, "0")
    text = pl.format("{}-{}-{} {}:{}:{}.{}", year, pick("mo"), pick("dd"), pick("hh").str.zfill(2), pick("mi"), pick("ss"), frac)
    naive = text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us", strict=False)
    zone = iso.struct.field("zone")
    offset = zone.str.replace(":", "", literal=True)
    offset_min = pl.when(zone == "Z").then(0).otherwise(
        (offset.str.slice(1, 2).cast(pl.Int32, strict=False) * 60 + offset.str.slice(3, 2).cast(pl.Int32, strict=False))
        * pl.when(offset.str.starts_with("-")).then(-1).otherwise(1)
    )
    utc_zoned = (naive - pl.duration(minutes=offset_min)).dt.replace_time_zone("UTC")
    return {
        f"{column}_utc": pl.when(zone.is_not_null()).then(utc_zoned).otherwise(local_to_utc(naive, tz)).cast(T.UTC_TIME),
        f"{column}_zoned": zone.is_not_null(),
        f"{column}_subsecond": pick("frac").is_not_null() | zone.is_not_null(),
    }


def timestamps_of(
    frame: pl.DataFrame, tz: str, versions: list[str | None], files: Files, warnings: Warnings
) -> tuple[pl.DataFrame, list[list[str]]]:
    """start_ts and end_ts of every entry (see the module docstring for the order of preference),
    each file's choices its own; and each file's notes."""
    n_files = len(files.sources)
    file = frame["file"].to_numpy()
    notes: list[list[str]] = [[] for _ in range(n_files)]
    set_is_start = _set_timestamp_is_start(frame, versions)
    time_is_start = _time_line_is_start(frame, versions)
    set_is_start |= time_is_start  # a server that stamps # Time with the start stamps SET timestamp with it too
    if "time_text" in frame.columns:  # there when a # Time line is unreadable
        bad = frame.select("file", "time_line", "time_text", "time_text_utc").filter(
            pl.col("time_line").is_not_null() & pl.col("time_text_utc").is_null()
        )
        counts: dict[int, int] = {}
        for f, line, value in bad.select("file", "time_line", "time_text").iter_rows():
            counts[f] = counts.get(f, 0) + 1
            if counts[f] <= MAX_WARNINGS:
                warnings.of_file[f].append(ParseWarning(
                    line - int(files.starts[f]), f"unreadable # Time {value!r}; entries up to the next # Time have no time from it"
                ))
        for f, count in counts.items():
            if count > MAX_WARNINGS:
                warnings.of_file[f].append(ParseWarning(None, f"{count - MAX_WARNINGS} more unreadable # Time lines"))

    has_time = pl.col("time_line").is_not_null()
    frame = _inherit_time(frame, file)
    bogus, offset_s = _set_timestamp_agreement(frame, tz, set_is_start & ~time_is_start, file, warnings)
    if offset_s.any():  # zone-less # Time lines were read in the wrong zone: move them onto SET timestamp's UTC
        shifted = pl.col("time_text_utc") - pl.duration(seconds=pl.lit(per_entry(offset_s, file, pl.Int64)))
        frame = _inherit_time(frame.with_columns(
            time_text_utc=pl.when(pl.col("time_text_zoned")).then(pl.col("time_text_utc")).otherwise(shifted)
        ), file)
    is_start = pl.lit(per_entry(set_is_start, file))
    query_time = pl.duration(microseconds=(pl.col("query_time_s") * 1e6).round(0).cast(pl.Int64, strict=False))
    # an epoch past MAX_EPOCH_S is a corrupt field: null before any arithmetic on it can overflow
    sane_set = pl.when(pl.col("set_ts").is_between(0, MAX_EPOCH_S)).then(pl.col("set_ts"))
    set_ts = pl.from_epoch(sane_set, time_unit="s").cast(pl.Datetime("us")).dt.replace_time_zone("UTC")
    if bogus.any():
        set_ts = pl.when(pl.lit(per_entry(bogus, file))).then(pl.lit(None, T.UTC_TIME)).otherwise(set_ts)
    own_time = pl.when(has_time).then(pl.col("written"))
    set_start = [pl.when(is_start & ~pl.col("own_subsecond")).then(set_ts)] if set_is_start.any() else []
    set_end = pl.when(is_start).then(set_ts + query_time).otherwise(set_ts) if set_is_start.any() else set_ts
    exact = lambda column: [pl.col(column)] if column in frame.columns else []  # noqa: E731  (Start:/End: read)
    if time_is_start.any():  # MariaDB: # Time is when the statement started; its end is that plus Query_time
        started = pl.lit(per_entry(time_is_start, file))
        own_end = pl.when(started).then(own_time + query_time).otherwise(own_time)
        own_start = [pl.when(started).then(own_time)]
        written_end = [pl.when(~started).then(pl.col("written"))]  # an inherited start belongs to another statement
    else:
        own_end, own_start, written_end = own_time, [], [pl.col("written")]
    frame = frame.with_columns(
        end_ts=pl.coalesce(*exact("qt_End_utc"), own_end, set_end, *written_end).cast(T.UTC_TIME)
    ).with_columns(
        start_ts=pl.coalesce(*exact("qt_Start_utc"), *own_start, *set_start, pl.col("end_ts") - query_time).cast(T.UTC_TIME)
    )
    counted = frame.select(
        a=has_time & ~pl.col("time_text_zoned").fill_null(True),
        b=~has_time & pl.col("written").is_not_null(),
        c=pl.col("end_ts").is_null(),
    )
    zone_less, inherited, timeless = (np.bincount(file, weights=counted[c].to_numpy(), minlength=n_files).astype(int) for c in "abc")
    for f in np.flatnonzero(zone_less | inherited | timeless).tolist():
        if zone_less[f]:
            notes[f].append(zone_note(tz))
        if inherited[f]:
            notes[f].append(
                f"{inherited[f]} entries have no # Time line of their own (the server writes one only when the second "
                "changes); they take the previous entry's time, as pt-query-digest does"
            )
        if timeless[f]:
            notes[f].append(f"{timeless[f]} statements have no time at all (no readable # Time, SET timestamp or Start/End)")
    return frame.select("start_ts", "end_ts"), notes


def _set_timestamp_is_start(frame: pl.DataFrame, versions: list[str | None]) -> np.ndarray:
    """Per file, whether ``SET timestamp`` is the statement start (MySQL 8.0+; MariaDB, see
    ``_time_line_is_start``) or the write time like ``# Time`` (MySQL <= 5.7, Percona <= 5.7).

    The banner's version decides; without one, statements of 2 s or more show it: their
    ``# Time`` minus ``SET timestamp`` is about Query_time when SET timestamp is the start."""
    is_start = np.zeros(len(versions), dtype=bool)
    for f, version in enumerate(versions):
        if version:
            major = re.match(r"(\d+)\.", version)
            is_start[f] = bool(major) and int(major.group(1)) >= 8 and "MariaDB" not in version
    unknown = [f for f, version in enumerate(versions) if not version]
    if not unknown:
        return is_start
    long = frame.select("file", "time_line", "set_ts", "query_time_s", "time_text_utc").filter(
        pl.col("file").is_in(unknown) & pl.col("time_line").is_not_null() & pl.col("set_ts").is_not_null()
        & (pl.col("query_time_s") >= 2)
    ).select("file", gap=pl.col("time_text_utc").dt.epoch("s") - pl.col("set_ts"), query_time_s="query_time_s")
    if not long.height:
        return is_start
    medians = long.group_by("file").agg(
        behind=(pl.col("gap") - pl.col("query_time_s")).abs().median(), level=pl.col("gap").abs().median()
    )
    for f, behind, level in medians.iter_rows():
        is_start[f] = behind is not None and behind <= 1 < level
    return is_start


def _time_line_is_start(frame: pl.DataFrame, versions: list[str | None]) -> np.ndarray:
    """Per file, whether ``# Time`` is the statement's start, not the time the entry was written.

    MariaDB stamps both ``# Time`` and ``SET timestamp`` with the start (measured on 10.11.19: a
    ``DO SLEEP(3)`` logged with the second it began, and an UPDATE that waited 1.9 s for a row lock
    with ``# Time`` 2 s earlier than the entry above it). Any file shows it the same way: an entry whose
    own ``# Time`` is more than a second earlier than the one above it, but by no more than its own
    Query_time, started before the entry above it was written (an end-stamped log only moves forward).
    A MariaDB file whose long statements have ``# Time`` = ``SET timestamp`` + Query_time is end-stamped."""
    is_start = np.array(["MariaDB" in (version or "") for version in versions], dtype=bool)
    own = frame.select(
        "file", "query_time_s", "set_ts", at=pl.col("time_text_utc").dt.epoch("s"), own=pl.col("time_line").is_not_null(),
    ).filter(pl.col("own") & pl.col("at").is_not_null())
    if not own.height:
        return is_start
    steps = own.with_columns(back=(pl.col("at").shift(1).over("file") - pl.col("at")))
    earlier = steps.filter((pl.col("back") > 1) & (pl.col("back") <= pl.col("query_time_s") + 1))
    for f in earlier["file"].unique().to_list():
        is_start[f] = True
    long = own.filter(pl.col("set_ts").is_not_null() & (pl.col("query_time_s") >= 2)).group_by("file").agg(
        ahead=((pl.col("at") - pl.col("set_ts") - pl.col("query_time_s")).abs() <= 1).mean()
    )
    for f, ahead in long.iter_rows():
        if ahead is not None and ahead > 0.5 and f not in set(earlier["file"].to_list()):
            is_start[f] = False  # # Time = SET timestamp + Query_time: written at the end
    return is_start


def _inherit_time(frame: pl.DataFrame, file: np.ndarray) -> pl.DataFrame:
    """``written``: the entry's own # Time, else the last one above it in its file (null when that
    one was unreadable)."""
    has_time = frame["time_line"].is_not_null().to_numpy()
    last_time = np.where(has_time, np.arange(has_time.size, dtype=np.int32), -1)  # int32: half the memory to touch
    np.maximum.accumulate(last_time, out=last_time)
    if file.size and file[-1] != file[0]:  # not across files
        last_time[last_time < np.searchsorted(file, file)] = -1
    return frame.with_columns(
        written=frame["time_text_utc"].gather(gather_index(last_time)),
        own_subsecond=pl.col("time_line").is_not_null() & pl.col("time_text_subsecond").fill_null(False),
    )


def _set_timestamp_agreement(
    frame: pl.DataFrame, tz: str, set_is_start: np.ndarray, file: np.ndarray, warnings: Warnings
) -> tuple[np.ndarray, np.ndarray]:
    """Per file, do ``# Time`` and ``SET timestamp`` (UTC epoch) tell the same time?

    Returns (bogus, offset_s) per file, with a warning in the files where they do not: ``offset_s``
    when zone-less # Time lines read in ``tz`` are off by a whole zone offset (to subtract: the
    server ran in another zone); ``bogus`` when off by more than any zone (SET timestamp is then not
    used). Both 0 when they agree or no entry has both."""
    n_files = set_is_start.size
    bogus, offset = np.zeros(n_files, dtype=bool), np.zeros(n_files, dtype=np.int64)
    has_both = (frame["written"].is_not_null() & frame["set_ts"].is_not_null()).to_numpy()
    if not has_both.any():
        return bogus, offset
    # a sample of a few thousand entries of each file tells the offset as well as all of them
    first_row = np.searchsorted(file, file)
    size = np.bincount(file, minlength=n_files)
    step = np.maximum(1, size // 4000)
    sampled = has_both & ((np.arange(file.size) - first_row) % step[file] == 0)
    sampled |= has_both & ~any_per(file[sampled], n_files)[file]  # none sampled: all of them
    both = frame.select("written", "set_ts", "query_time_s", "time_text_zoned").with_columns(
        file=pl.Series(file), is_start=pl.Series(set_is_start[file])
    ).filter(pl.Series(sampled))
    lag = pl.when(pl.col("is_start")).then(pl.col("query_time_s").fill_null(0)).otherwise(pl.lit(0.0))
    gaps = both.group_by("file").agg(
        gap=(pl.col("written").dt.epoch("s") - pl.col("set_ts") - lag).median(),
        zoned=pl.col("time_text_zoned").fill_null(False).any(),
    )
    for f, gap, zoned in gaps.sort("file").iter_rows():
        if abs(gap) <= TZ_MISMATCH_S:
            continue
        if not zoned and abs(gap) <= MAX_ZONE_OFFSET_S:
            offset[f] = offset_s = int(round(gap / 900) * 900)
            sign, minutes = ("+" if offset_s >= 0 else "-"), abs(offset_s) // 60
            warnings.of_file[f].append(ParseWarning(None, (
                f"zone-less # Time lines read in {tz} are {gap / 3600:+.2f} h off the SET timestamp values (UTC): "
                f"the server ran at UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}, not {tz}; # Time lines were "
                "moved by that offset (pass --tz with the server's zone to avoid this guess)"
            )))
            continue
        bogus[f] = True
        warnings.of_file[f].append(ParseWarning(None, (
            f"SET timestamp values are {-gap / 3600:+.1f} h off the # Time lines, more than a time zone explains; "
            "SET timestamp is not used for times"
        )))
    return bogus, offset
