"""From the table of entries to the ``statement`` table: entries kept or dropped (head fragments, cut
tails), server and version from the banners, typed columns, notes.
"""

from __future__ import annotations

import polars as pl

from dbdiag.native.lazy import np
from dbdiag.parsers.base import ParseWarning
from dbdiag.parsers.mysql_slowlog.columns import per_entry
from dbdiag.parsers.mysql_slowlog.fields import FLAG_COLUMNS
from dbdiag.parsers.mysql_slowlog.files import Files, Warnings
from dbdiag.parsers.mysql_slowlog.times import timestamps_of


def time_ranges(statement: pl.DataFrame, n_files: int) -> dict[int, tuple[object, object]]:
    """Per file, its earliest start and latest end (files with neither have none)."""
    if n_files == 1:
        starts, ends = statement["start_ts"].drop_nulls(), statement["end_ts"].drop_nulls()
        return {0: (starts.min(), ends.max())} if starts.len() and ends.len() else {}
    spans = statement.group_by("file").agg(pl.col("start_ts").min(), pl.col("end_ts").max())
    return {f: (a, b) for f, a, b in spans.iter_rows() if a is not None and b is not None}


def keep_entries(entries: pl.DataFrame, warnings: Warnings) -> tuple[pl.DataFrame, dict[int, ParseWarning]]:
    """Drop what is not a statement (cut headers, empty head fragments), with a warning each; the
    first warning of each file."""
    last = np.ones(entries.height, dtype=bool)
    file = entries["file"].to_numpy()
    last[:-1] = file[1:] != file[:-1]  # each file's last entry
    masks = entries.select(  # each read once; the checks combine them
        has_sql=pl.col("sql").is_not_null() & (pl.col("sql") != ""),
        has_qt=pl.col("qt_line").is_not_null(),
        is_head="is_head",
        is_last=pl.Series(last),
        unterminated=~pl.col("terminated").fill_null(True),
    )
    has_sql, has_qt, is_head, is_last = pl.col("has_sql"), pl.col("has_qt"), pl.col("is_head"), pl.col("is_last")
    first: dict[int, ParseWarning] = {}
    checks = [
        (is_head & has_sql, "the file starts inside an entry (no header above this line); kept without timings"),
        (~is_head & has_qt & ~has_sql & is_last, "the last entry ends after its header (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & is_last, "the last entry has neither # Query_time nor statement text (file cut?); dropped"),
        (~is_head & ~has_qt & ~has_sql & ~is_last, "entry has neither # Query_time nor statement text; skipped"),
        (~is_head & has_qt & ~has_sql & ~is_last, "entry has no statement text; kept without sql"),
        (~is_head & ~has_qt & has_sql, "entry has no # Query_time line; kept without timings"),
        (is_last & has_sql & pl.col("unterminated"),
         "the last statement has no closing ';' (the server always writes one): the file may be cut; kept as is"),
    ]
    found = masks.select(*[condition.any().alias(str(n)) for n, (condition, _) in enumerate(checks)]).row(0)
    for (condition, reason), any_row in zip(checks, found):
        if any_row:  # rare: filter only then
            for f, warning in warnings.rows(entries.filter(masks.select(condition).to_series()), reason).items():
                first.setdefault(f, warning)
    keep = masks.select((is_head & has_sql) | (~is_head & (has_qt | has_sql) & ~(is_last & ~has_sql))).to_series()
    return (entries if keep.all(ignore_nulls=False) else entries.filter(keep)), first  # usually all: no copy


def nothing_reason(warning: ParseWarning | None) -> str:
    if warning is not None:
        return f"no complete slow-log entry: {warning.reason} (line {warning.line})"
    return "no slow-log entry found (no # Time, # User@Host or # Query_time header)"


def banners_of(server: pl.DataFrame, files: Files) -> list[dict[str, object]]:
    """Per file, its server banner lines: all their text, the last version, the start lines."""
    out = [{"text": "", "version": None, "starts": [], "versions": []} for _ in files.sources]
    if not server.height:
        return out
    rows = server.with_columns(file=pl.Series(files.of(server["line"].to_numpy())), version=pl.col("t").str.extract(r", Version: (\S+)"))
    for file, line, text, version in rows.select("file", "line", "t", "version").iter_rows():
        banner = out[file]
        banner["text"] += " " + text if banner["text"] else text
        if ", Version: " in text:
            banner["starts"].append(line - int(files.starts[file]))
            if version is not None:
                banner["version"] = version
                banner["versions"].append(version)
    return out


def engine_of(banner: str, mariadb: bool, percona: bool) -> str:
    if "MariaDB" in banner or "mariadbd" in banner or mariadb:
        return "mariadb"
    if "Percona" in banner or percona:
        return "percona"
    return "mysql"


def statement_table(
    entries: pl.DataFrame, engines: list[str], tz: str, files: Files, versions: list[str | None],
    flag_lines: np.ndarray, warnings: Warnings,
) -> tuple[pl.DataFrame, list[list[str]]]:
    """The statement table (with its ``file``): times inherited and combined, the database carried
    over, flags completed; and each file's notes."""
    have = set(entries.columns)
    file = entries["file"].to_numpy()
    times, notes = timestamps_of(
        entries.select(
            "file", "time_line", "time_text_utc", "time_text_zoned", "time_text_subsecond", "query_time_s",
            *[c for c in ("time_text", "qt_Start_utc", "qt_End_utc") if c in have],
            pl.col("set_ts") if "set_ts" in have else pl.lit(None, pl.Int64).alias("set_ts"),
        ), tz, versions, files, warnings,
    )
    flags = []
    # MariaDB (log_slow_verbosity=query_plan) writes the Full_scan/Filesort lines only when a flag is Yes
    fill = np.array([engine == "mariadb" for engine in engines]) & flag_lines
    if fill.any():
        filled = pl.lit(pl.Series(fill[file]))
        flags = [
            pl.when(filled).then(pl.col(c).fill_null(False) if c in have else pl.lit(False)).otherwise(pl.col(c) if c in have else None).alias(c)
            for c in FLAG_COLUMNS
        ]
    db = pl.col("db_written").forward_fill().over("file")
    first_row = np.searchsorted(file, file)  # rows are in file order
    statement = entries.with_columns(
        *flags,
        *times,
        *([pl.when(db != "").then(db).alias("db")] if "db_written" in have else []),
        stmt_id=pl.Series(np.arange(file.size, dtype=np.int64) - first_row),
        engine=pl.Series(engines, dtype=pl.String).gather(pl.Series(file)),
        source=pl.Series(files.sources, dtype=pl.String).gather(pl.Series(file)),
        line=pl.col("line") - pl.lit(per_entry(files.starts, file, pl.Int64)),  # the file's own line numbers
    )
    return statement, notes


def server_notes(banner: dict[str, object]) -> list[str]:
    starts = banner["starts"]
    if not starts:
        return []
    versions = list(dict.fromkeys(banner["versions"]))
    where = ", ".join(map(str, starts[:5])) + ("..." if len(starts) > 5 else "")
    return [f"{len(starts)} server start banner(s) (lines {where}; version {', '.join(versions)}): "
            "the server (re)started or reopened the log; banners are not statements"]


def rate_notes(entries: pl.DataFrame) -> dict[int, list[str]]:
    """Per file whose log is sampled (log_slow_rate_limit), the note saying so."""
    if "Log_slow_rate_limit" not in entries.columns:
        return {}
    rated = entries.filter(pl.col("Log_slow_rate_limit").is_not_null())
    if not rated.height:
        return {}
    # a log_slow_rate_limit line without log_slow_rate_type (Percona 5.5) has no such column
    kind = pl.col("Log_slow_rate_type") if "Log_slow_rate_type" in rated.columns else pl.lit(None, pl.String)
    limits: dict[int, list[tuple[object, object]]] = {}
    for f, rate_kind, limit in rated.select("file", kind.alias("kind"), "Log_slow_rate_limit").unique().rows():
        limits.setdefault(f, []).append((rate_kind, limit))
    notes = {}
    for f, pairs in limits.items():
        described = ", ".join(f"log_slow_rate_limit={limit} per {kind}" for kind, limit in sorted(pairs, key=str))
        notes[f] = [f"the log is sampled ({described}): only about 1 in N statements is written, so counts and totals "
                    "are a sample of the workload"]
    return notes
