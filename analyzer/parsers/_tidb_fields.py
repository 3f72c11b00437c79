"""Field typing shared by the TiDB slow-query family (``tidb_slowlog``, ``tidb_cluster_slow_query``,
``tidb_dashboard``): times with or without a zone, start from end and Query_time, the measures.

>>> import polars as pl
>>> pl.select(to_bool(pl.lit("true"))).item()
True
"""

from __future__ import annotations

import polars as pl

from dbdiag.parsers.kit.times import local_to_utc


# ``# Time:`` values: RFC 3339 (``Z`` or ``+08:00``) or the old ``2019-08-14-09:26:59.1 +0800``.
TIME_RE = (
    r"^\s*(?P<date>\d{4}-\d{2}-\d{2})[T -](?P<clock>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,9}))?"
    r"\s*(?P<zone>Z|[+-]\d{2}:?\d{2})?\s*$"
)


def to_bool(expr: pl.Expr) -> pl.Expr:
    """``true``/``false``/``1``/``0`` (any case) -> Boolean; anything else -> null."""
    low = expr.str.strip_chars().str.to_lowercase()
    return pl.when(low.is_in(["true", "1"])).then(True).when(low.is_in(["false", "0"])).then(False).otherwise(None)


def parse_times(raw: pl.Expr, tz: str) -> tuple[pl.Expr, pl.Expr]:
    """Text times (RFC 3339, the old TiDB layout, or zone-less) -> (UTC Datetime(us), zoned flag).

    Zone-less times are read in ``tz``; an offset is applied exactly (no DST lookup).
    """
    parts = raw.str.extract_groups(TIME_RE)
    naive = pl.concat_str(parts.struct.field("date"), pl.lit(" "), parts.struct.field("clock")).str.to_datetime(
        "%Y-%m-%d %H:%M:%S", time_unit="us", strict=False
    )
    micros = parts.struct.field("frac").str.pad_end(9, "0").str.slice(0, 6).cast(pl.Int64, strict=False).fill_null(0)
    naive = naive + pl.duration(microseconds=micros)
    zone = parts.struct.field("zone")
    digits = zone.str.replace(":", "", literal=True)
    offset_s = pl.when(zone == "Z").then(0).otherwise(
        digits.str.slice(1, 2).cast(pl.Int64, strict=False) * 3600 + digits.str.slice(3, 2).cast(pl.Int64, strict=False) * 60
    ) * pl.when(digits.str.starts_with("-")).then(-1).otherwise(1)
    zoned_utc = (naive - pl.duration(seconds=offset_s)).dt.replace_time_zone("UTC")
    utc = pl.when(zone.is_not_null()).then(zoned_utc).otherwise(local_to_utc(naive, tz))
    return utc, zone.is_not_null()


def start_from_end(end: pl.Expr, query_time_s: pl.Expr) -> pl.Expr:
    return end - pl.duration(microseconds=(query_time_s * 1e6).round(0).cast(pl.Int64, strict=False))


# Where the three TiDB parsers keep each raw field before typing it (the slow log's names).
RAW_MEASURES = {
    "query_time": "query_time_raw",
    "process_time": "process_time_raw",
    "wait_time": "wait_time_raw",
    "backoff_time": "backoff_time_raw",
    "process_keys": "process_keys_raw",
    "total_keys": "total_keys_raw",
    "result_rows": "result_rows_raw",
    "mem_max": "mem_max_raw",
    "txn": "txn_raw",
    "prepared": "prepared_raw",
    "plan_from_cache": "plan_from_cache_raw",
    "is_internal": "is_internal_raw",
    "succ": "succ_raw",
}


def typed_measures(raw: dict[str, str] = RAW_MEASURES, counts_may_be_decimal: bool = False) -> dict[str, pl.Expr]:
    """Statement columns every TiDB source carries, typed from their raw text columns.

    ``rows_examined`` is Process_keys, else Total_keys (which also counts old MVCC versions).
    JSON exports may write counts as ``12.0``: ``counts_may_be_decimal`` reads them through Float64.
    """
    def num(name: str) -> pl.Expr:
        return pl.col(raw[name]).cast(pl.Float64, strict=False)

    def count(name: str) -> pl.Expr:
        text = pl.col(raw[name])
        return (text.cast(pl.Float64, strict=False) if counts_may_be_decimal else text).cast(pl.Int64, strict=False)

    return {
        "query_time_s": num("query_time"),
        "process_time_s": num("process_time"),
        "wait_time_s": num("wait_time"),
        "backoff_time_s": num("backoff_time"),
        "rows_examined": pl.coalesce(count("process_keys"), count("total_keys")),
        "rows_sent": count("result_rows"),
        "mem_max_bytes": count("mem_max"),
        "txn_id": null_if_zero_txn(pl.col(raw["txn"])),
        "prepared": to_bool(pl.col(raw["prepared"])),
        "plan_from_cache": to_bool(pl.col(raw["plan_from_cache"])),
        "is_internal": to_bool(pl.col(raw["is_internal"])),
        "success": to_bool(pl.col(raw["succ"])),
    }


def null_if_zero_txn(expr: pl.Expr) -> pl.Expr:
    text = expr.cast(pl.String).str.strip_chars()
    return pl.when(text.is_in(["", "0"])).then(None).otherwise(text)
