"""Column helpers of the slow-log reading: gathers with -1 as null, values read once per distinct text,
rows joined per entry, per-entry flags. No Python loop per line or per entry.
"""

from __future__ import annotations

import polars as pl

from dbdiag.arrow_capsule import series as arrow_series
from dbdiag.distinct import numbered
from dbdiag.native.lazy import np, pa
from dbdiag.native.slowlog_lines import Kernel, index_dtype


def nulls(name: str, dtype: pl.DataType, n: int) -> pl.Series:
    return pl.Series(name, [None], dtype=dtype).new_from_index(0, n)  # ten times cheaper than extend_constant


def take(series: pl.Series, position: np.ndarray) -> pl.Series:
    """``series[position]`` with -1 giving null."""
    return series.gather(gather_index(position))


def gather_index(position: np.ndarray) -> pl.Series:
    """Row numbers for a gather in polars' own index type (then it converts nothing, once per
    column); -1 gives null."""
    index = pl.Series(position.astype(index_dtype()))
    missing = position < 0
    return index.set(pl.Series(missing), None) if missing.any() else index


def by_distinct(values: pl.Series, exprs: dict[str, pl.Expr]) -> pl.DataFrame:
    """``exprs`` (over ``pl.col(values.name)``) for every row of ``values``, evaluated once per distinct
    value (logs repeat these lines a lot) and once for null; values are matched by their 64-bit hash."""
    present = np.flatnonzero(values.is_not_null().to_numpy())  # often few: # Time is written once a second
    code, distinct = distinct_codes(values.gather(present))
    # one chunk: a gather from several chunks copies the bytes of every string
    null_first = pl.concat([pl.Series(values.name, [None], dtype=values.dtype), distinct], rechunk=True)
    table = pl.DataFrame({values.name: null_first}).with_columns(**exprs).drop(values.name)
    index = np.zeros(values.len(), dtype=index_dtype())
    index[present] = code + 1
    return table.select(pl.all().gather(pl.Series(index)))


def join_lines(frame: pl.DataFrame, column: str, separator: str, distinct: bool = False) -> pl.DataFrame:
    """``column`` of consecutive rows joined per ``entry`` (rows in order, an entry's rows together;
    ``distinct``: each value once). Most entries have one or two rows: those are gathered directly,
    the rest go through group_by."""
    owner = frame["entry"].to_numpy()
    if not owner.size:
        return frame.select("entry", column)
    first = np.ones(owner.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, owner.size))
    text = frame[column]
    single, pair = starts[sizes == 1], starts[sizes == 2]
    parts = [
        pl.DataFrame({"entry": owner[single], column: text.gather(single)}),
        pl.DataFrame({"entry": owner[pair], column: text.gather(pair), "_next": text.gather(pair + 1)}).select(
            "entry",
            pl.when(pl.lit(distinct) & (pl.col(column) == pl.col("_next"))).then(pl.col(column))
            .otherwise(pl.concat_str([pl.col(column), pl.col("_next")], separator=separator)).alias(column),
        ),
    ]
    more = np.repeat(sizes > 2, sizes)
    if more.any():
        rows = frame.filter(pl.Series(more)).select("entry", column)
        values = pl.col(column).unique(maintain_order=True) if distinct else pl.col(column)
        parts.append(rows.group_by("entry", maintain_order=True).agg(values.str.join(separator)))
    return pl.concat(parts, how="vertical_relaxed")


def distinct_codes(values: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """(for each row the number of its distinct value, the distinct values in first-seen order)."""
    code, distinct = numbered(values)
    return code.to_numpy(), distinct


def line_codes(lines: pl.Series, at: np.ndarray, kernel: Kernel | None) -> tuple[np.ndarray, pl.Series]:
    """``distinct_codes`` of the lines ``at``: the kernel compares their bytes, polars their hashes."""
    if kernel is None:
        return distinct_codes(lines.gather(at))
    code, first = kernel.distinct(at)
    return code, lines.gather(at[first])


def join_coded(owner: np.ndarray, code: np.ndarray, texts: pl.Series, column: str, separator: str) -> pl.DataFrame:
    """Like ``join_lines`` for rows given as codes into ``texts``: each distinct pair is joined once
    and the entries share its bytes."""
    first = np.ones(owner.size, dtype=bool)
    first[1:] = owner[1:] != owner[:-1]
    starts = np.flatnonzero(first)
    sizes = np.diff(np.append(starts, owner.size))
    single, pair = starts[sizes == 1], starts[sizes == 2]
    pair_key = code[pair] * texts.len() + code[pair + 1]
    keys, to_key = np.unique(pair_key, return_inverse=True)
    joined = pl.DataFrame({"a": texts.gather(keys // texts.len()), "b": texts.gather(keys % texts.len())}).select(
        pl.concat_str(["a", "b"], separator=separator)
    ).to_series()
    parts = [
        pl.DataFrame({"entry": owner[single], column: texts.gather(code[single])}),
        pl.DataFrame({"entry": owner[pair], column: joined.gather(to_key.reshape(-1))}),
    ]
    more = np.repeat(sizes > 2, sizes)
    if more.any():
        rows = pl.DataFrame({"entry": owner[more], column: texts.gather(code[more])})
        parts.append(rows.group_by("entry", maintain_order=True).agg(pl.col(column).str.join(separator)))
    return pl.concat(parts, how="vertical_relaxed")


def merged_texts(texts: list[pl.Series]) -> tuple[list[np.ndarray], pl.Series]:
    """The distinct texts of the pieces as one list: (for each piece the number in it of each of its
    texts, the texts)."""
    code, distinct = distinct_codes(pl.concat(texts))
    bounds = np.cumsum([0] + [t.len() for t in texts])
    return [code[a:b] for a, b in zip(bounds[:-1], bounds[1:])], distinct


def align(frame: pl.DataFrame, n_entries: int) -> pl.DataFrame:
    """Rows of ``frame`` (one per local ``entry`` at most) placed at their entry: ``n_entries`` rows."""
    position = np.full(n_entries, -1, dtype=np.int64)
    position[frame["entry"].to_numpy()] = np.arange(frame.height)
    return frame.drop("entry").select(pl.all().gather(gather_index(position)))


def by_name(frame: pl.DataFrame) -> dict[str, pl.Series]:
    return dict(zip(frame.columns, frame.iter_columns()))


def int64_column(name: str, values: np.ndarray, valid: np.ndarray) -> pl.Series:
    """``values`` as a polars column on the same memory, null where not ``valid``."""
    if valid.all():
        return pl.Series(name, values)
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return arrow_series(pa.Array.from_buffers(pa.int64(), values.size, [bitmap, pa.py_buffer(values)]), name)


def any_per(owner: np.ndarray, n: int) -> np.ndarray:
    """For each of ``n`` numbers, whether ``owner`` holds it."""
    present = np.zeros(n, dtype=bool)
    present[owner] = True
    return present


def per_entry(values: list[object] | np.ndarray, file: np.ndarray, dtype: pl.DataType = pl.Boolean) -> pl.Series:
    """A value of each file, for each of its entries."""
    return pl.Series(values, dtype=dtype).gather(pl.Series(file))
