"""The pieces' entries stitched into one table of entries: local entry and line numbers made global,
the numbers and texts of every piece made one column each.
"""

from __future__ import annotations

from typing import NamedTuple

import polars as pl

from dbdiag.native.lazy import np
from dbdiag.native.slowlog_lines import LINE_GROUPS, index_dtype
from dbdiag.parsers.mysql_slowlog.columns import by_distinct, by_name, gather_index, int64_column
from dbdiag.parsers.mysql_slowlog.fields import flavour_evidence, header_columns_of, typed_entries
from dbdiag.parsers.mysql_slowlog.times import parse_time_text


class Stitch(NamedTuple):
    """Where the pieces' entries go in the file's table of entries: the local entries of each piece
    from its first one kept on (``parse_chunk``'s ``kept``), in file order."""

    kept: list[int]  # per piece, its first local entry kept
    n_entries: list[int]  # per piece, its number of local entries
    entry_bases: np.ndarray  # per piece, the file's number of its local entry 0
    line_bases: np.ndarray  # per piece, the file's index of its first line

    @property
    def rows(self) -> int:
        return sum(self.n_entries) - sum(self.kept)

    def spans(self) -> list[tuple[int, int, int]]:
        """Per piece: its first local entry kept, and where its entries start and end in the table."""
        sizes = np.subtract(self.n_entries, self.kept)
        stops = np.cumsum(sizes)
        return list(zip(self.kept, (stops - sizes).tolist(), stops.tolist()))


LINE_COLUMNS = ("line", "time_line", "qt_line")


def _number_columns(pieces: list[dict[str, object]], stitch: Stitch) -> dict[str, pl.Series]:
    """entry (the file's entry numbers) and line, time_line, qt_line (1-based line numbers in the file;
    null: no such line). One allocation for the four: numpy asks for huge pages past 4 MB."""
    numbers = np.empty((1 + len(LINE_COLUMNS), stitch.rows), dtype=np.int64)
    valid = np.empty((len(LINE_COLUMNS), stitch.rows), dtype=bool)
    for piece, (kept, start, stop), entry_base, line_base in zip(pieces, stitch.spans(), stitch.entry_bases, stitch.line_bases):
        numbers[0, start:stop] = np.arange(entry_base + kept, entry_base + piece["n_entries"])
        for row, name in enumerate(LINE_COLUMNS):
            position = piece["lines"][name][kept:]
            np.add(position, line_base + 1, out=numbers[row + 1, start:stop])  # -1 (no line) is masked below
            np.greater_equal(position, 0, out=valid[row, start:stop])
    return {"entry": pl.Series("entry", numbers[0])} | {
        name: int64_column(name, numbers[row + 1], valid[row]) for row, name in enumerate(LINE_COLUMNS)
    }


def _qt_extra_columns(pieces: list[dict[str, object]], stitch: Stitch, entry: pl.Series) -> dict[str, pl.Series]:
    """The ``qt_*`` keys read after Rows_examined, for every entry kept; only the keys some line has."""
    extras = [p["qt_extras"].with_columns(pl.col("entry") + int(b)) for p, b in zip(pieces, stitch.entry_bases)]
    # one chunk: a gather from several copies the bytes of every string
    extras = pl.concat([e for e in extras if e.width > 1] or extras[:1], how="diagonal_relaxed", rechunk=True)
    if extras.width == 1:
        return {}
    if extras.height == entry.len() and extras["entry"].equals(entry, check_names=False):  # every entry has them
        return {c: extras[c] for c in extras.columns if c != "entry"}
    position = np.full(int(stitch.entry_bases[-1]), -1, dtype=np.int64)
    position[extras["entry"].to_numpy()] = np.arange(extras.height)
    index = gather_index(position[entry.to_numpy()])
    return {c: extras[c].gather(index) for c in extras.columns if c != "entry"}


def entry_table(
    pieces: list[dict[str, object]], stitch: Stitch, header: dict[str, object],
    plans: tuple[np.ndarray, np.ndarray, pl.DataFrame], tz: str,
) -> tuple[pl.DataFrame, dict[str, np.ndarray]]:
    """Every entry kept, numbered in the file (``entry``), with the values of its lines, its header
    fields (``header``: the table of the log's distinct header texts, each piece's numbers in it,
    the groups present) and plan (``plans``: the file's plan of each piece's plans, where each piece's
    numbers start, the table of plans), flags and ids (``typed_entries``); and per entry what tells the
    server (``flavour_evidence``). Each column is made once for the whole file."""
    table, remaps, groups = header["table"], header["remaps"], sorted(header["present"])
    plan_of, plan_bases, per_plan = plans
    # last row: no plan; one chunk (a gather from several copies the bytes of every string)
    per_plan = pl.concat([per_plan, pl.DataFrame({"plan_full_scan": [False]})], how="diagonal", rechunk=True)
    # for each group with lines and each entry, the row of its line's text in ``table`` (its last,
    # empty row: none); last, the entry's row in ``per_plan``: one allocation (huge pages)
    rows = np.empty((len(groups) + 1, stitch.rows), dtype=index_dtype())
    for piece, remap, plan_base, (kept, start, stop) in zip(pieces, remaps, plan_bases, stitch.spans()):
        texts = np.append(remap, table.height - 1)  # a piece numbers "no line" as its number of texts
        for row, group in enumerate(groups):
            np.take(texts, piece["header"][2][group, kept:], out=rows[row, start:stop], mode="clip")
        plan_rows = np.append(plan_of[plan_base : plan_base + piece["plans"][1]], per_plan.height - 1)
        np.take(plan_rows, piece["plans"][0][kept:], out=rows[-1, start:stop], mode="wrap")  # -1 (no plan): the last
    base = pl.concat([p["entries"] for p in pieces], how="vertical_relaxed", rechunk=True)
    numbers = _number_columns(pieces, stitch)
    times = _time_columns(pieces, stitch, tz)
    header_columns = header_columns_of(dict(zip(groups, rows[:-1])), table, header["groups"])
    plans = per_plan.select(pl.all().gather(pl.Series(rows[-1]))) if per_plan.height > 1 else pl.DataFrame()
    extras = _qt_extra_columns(pieces, stitch, numbers["entry"])
    columns = {**numbers, **by_name(base), **times, **header_columns, **by_name(plans), **extras}
    names = list(LINE_GROUPS)
    evidence = flavour_evidence(table, {names[group]: rows[row] for row, group in enumerate(groups)})
    if not groups:
        evidence = {name: np.zeros(stitch.rows, dtype=bool) for name in ("mariadb", "percona", "flag_line")}
    return typed_entries(pl.DataFrame(columns)), evidence


def _time_columns(pieces: list[dict[str, object]], stitch: Stitch, tz: str) -> dict[str, pl.Series]:
    """The entries' ``# Time`` texts read once per distinct text: ``time_text_utc`` (null without one),
    ``time_text_zoned``, ``time_text_subsecond``; the texts themselves too when one is unreadable (its
    warning shows it)."""
    counts = np.cumsum([0] + [piece["times"][0].size for piece in pieces])
    position = np.full(stitch.rows, counts[-1], dtype=index_dtype())  # each entry's row in ``texts``; the last: none
    for piece, (kept, start, _), count in zip(pieces, stitch.spans(), counts):
        entries = piece["times"][0]  # an entry with a # Time line starts with it: never entry 0
        position[entries - kept + start] = np.arange(count, count + entries.size)
    texts = pl.concat([*(piece["times"][1] for piece in pieces), pl.Series("time_text", [None], dtype=pl.String)], rechunk=True)
    read = pl.concat([texts.to_frame(), by_distinct(texts, parse_time_text("time_text", tz))], how="horizontal")
    if read["time_text_utc"].null_count() == 1:  # only the last row's
        read = read.drop("time_text")
    return dict(zip(read.columns, read.select(pl.all().gather(pl.Series(position))).iter_columns()))


def boundaries_read(entries: pl.DataFrame, pieces: list[dict[str, object]], stitch: Stitch) -> tuple[pl.DataFrame, np.ndarray]:
    """The entries with the boundary lines of a batch undone: the entry a boundary line starts is
    its file's head (like entry 0 of a single file) or its first entry, its line the first one of
    the file that is not blank or a banner, and it has no ``# Time`` line. Also which entries are heads."""
    entry = entries["entry"].to_numpy()
    head = entry == 0
    at, lines, heads = [], [], []
    for piece, base, line_base in zip(pieces, stitch.entry_bases, stitch.line_bases):
        local, first, is_head = piece["boundaries"]
        at.append(local + base)
        lines.append(np.where(first >= 0, first + line_base + 1, -1))
        heads.append(is_head)
    at, lines, heads = np.concatenate(at), np.concatenate(lines), np.concatenate(heads)
    if not at.size:
        return entries, head
    rows = np.searchsorted(entry, at)
    head[rows] = heads
    boundary = np.zeros(entry.size, dtype=bool)
    boundary[rows] = True
    line = entries["line"].to_numpy().copy()
    line[rows] = np.where(lines >= 0, lines, line[rows])  # none: an empty head, dropped
    mask = pl.Series(boundary)
    timed = [c for c in ("time_line", "time_text", "time_text_utc", "time_text_zoned", "time_text_subsecond") if c in entries.columns]
    # the line stays for the file of the entry (``Files.of``); ``keep_entries`` drops empty heads
    return entries.with_columns(
        pl.Series("line", line), *[pl.when(mask).then(None).otherwise(pl.col(c)).alias(c) for c in timed]
    ), head
