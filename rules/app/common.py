"""What the application-side rules share: the time window, the CPU count, per-window latency percentiles.

- :func:`window_s`: the window width the capture is judged in (``metrics.time_accounting.window_s``
  when derive set one from ``--window``, else DEFAULT_WINDOW_S).
- :func:`cpu_count`: logical CPUs of the database host, and the input that said so.
- :func:`throttled_runs`: load-test runs held to a target rate, whose throughput says nothing of capacity.
- :func:`non_database_runs`: sysbench runs of host benchmarks (cpu, memory ...), not transactions.
- :func:`sample_windows`: JMeter samples -> one row per (label, window): count, rate and percentiles.
- :func:`percentile_from_counts`: a percentile from (value, count) pairs, as sysbench's histogram prints them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.rules.base import RuleInput
from dbdiag.rules.host_counts import cpus

DEFAULT_WINDOW_S = 10.0
HOST_BENCHMARKS = ("cpu", "memory", "fileio", "threads", "mutex")  # sysbench tests that never touch a database
CPU_INPUTS = "lscpu / numactl --hardware / mpstat (topology, host facts or per-CPU utilisation)"


def window_s(inp: RuleInput) -> float:
    accounting = inp.metric(t.TIME_ACCOUNTING_METRIC)
    value = accounting.get("window_s") if isinstance(accounting, dict) else None
    return float(value) if isinstance(value, (int, float)) and value > 0 else DEFAULT_WINDOW_S


def cpu_count(inp: RuleInput) -> tuple[int | None, str]:
    """Logical CPUs and where the number comes from (derived ``host_count``); (None, "") when no input tells."""
    count = cpus(inp)
    return (count.value, count.source) if count is not None else (None, "")


def throttled_runs(inp: RuleInput) -> dict[tuple[str, int], str]:
    """(source, run) of sysbench ``--rate`` / pgbench ``-R`` runs -> how we know: their TPS is the offered load, not capacity."""
    found: dict[tuple[str, int], str] = {}
    runs = inp.table(t.LOAD_RUN)
    if runs is not None:
        for source, run, rate in runs.filter(pl.col("rate_limit_tps").is_not_null()).select("source", "run", "rate_limit_tps").iter_rows():
            found[(source, run)] = f"target rate {rate:g}/s"
    intervals = inp.table(t.LOAD_INTERVAL)
    if intervals is not None:
        for source, run in intervals.filter(pl.col("lag_ms").is_not_null()).select("source", "run").unique().iter_rows():
            found.setdefault((source, run), "schedule lag printed (pgbench -R)")
    return found


def non_database_runs(inp: RuleInput) -> set[tuple[str, int]]:
    """(source, run) of sysbench runs that test the host, not a database (cpu, memory, fileio, threads, mutex)."""
    runs = inp.table(t.LOAD_RUN)
    if runs is None:
        return set()
    host_tests = runs.filter(pl.col("test").is_in(list(HOST_BENCHMARKS)))
    return {(source, run) for source, run in host_tests.select("source", "run").iter_rows()}


def sources_of(*frames: pl.DataFrame | None) -> tuple[str, ...]:
    names: set[str] = set()
    for frame in frames:
        if frame is not None and "source" in frame.columns:
            names.update(s for s in frame["source"].unique().to_list() if s)
    return tuple(sorted(names))


def sample_windows(samples: pl.DataFrame, width_s: float, by_label: bool = True) -> pl.DataFrame:
    """One row per (label, window start): count, per_s, mean/p50/p99/p999/p9999 of ``elapsed_ms``.

    Windows are aligned on multiples of ``width_s`` since the epoch (as ``time_accounting`` does);
    percentiles interpolate linearly between the closest ranks (numpy's default).

    >>> from datetime import datetime, timedelta, timezone
    >>> t0 = datetime(2024, 1, 1, tzinfo=timezone.utc)
    >>> frame = pl.DataFrame({"start_ts": [t0 + timedelta(seconds=s) for s in (1, 2, 11)],
    ...                       "elapsed_ms": [10.0, 30.0, 5.0], "label": "buy"})
    >>> sample_windows(frame, 10.0).select("label", "count", "per_s", "p50_ms").rows()
    [('buy', 2, 0.2, 20.0), ('buy', 1, 0.1, 5.0)]
    """
    width_us = max(1, int(round(width_s * 1e6)))
    keys = ["label", "window_start"] if by_label else ["window_start"]
    epoch_us = pl.col("start_ts").dt.epoch("us")
    elapsed = pl.col("elapsed_ms")
    return (
        samples.filter(pl.col("start_ts").is_not_null() & elapsed.is_not_null())
        .with_columns(pl.from_epoch((epoch_us // width_us) * width_us, time_unit="us").dt.replace_time_zone("UTC").alias("window_start"))
        .group_by(keys)
        .agg(
            pl.len().alias("count"),
            elapsed.mean().alias("mean_ms"),
            elapsed.quantile(0.5, "linear").alias("p50_ms"),
            elapsed.quantile(0.99, "linear").alias("p99_ms"),
            elapsed.quantile(0.999, "linear").alias("p999_ms"),
            elapsed.quantile(0.9999, "linear").alias("p9999_ms"),
            elapsed.max().alias("max_ms"),
        )
        .with_columns((pl.col("count") / width_s).alias("per_s"))
        .sort(keys)
    )


def percentile_from_counts(values_counts: Sequence[tuple[float, int]], q: float) -> float | None:
    """The nearest-rank ``q`` percentile (0..1) of values given with their counts.

    >>> percentile_from_counts([(1.0, 98), (5.0, 1), (80.0, 1)], 0.99)
    5.0
    >>> percentile_from_counts([(1.0, 98), (5.0, 1), (80.0, 1)], 0.999)
    80.0
    >>> percentile_from_counts([], 0.5) is None
    True
    """
    ordered = sorted((v, c) for v, c in values_counts if c > 0)
    total = sum(c for _, c in ordered)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for value, count in ordered:
        seen += count
        if seen >= rank:
            return value
    return ordered[-1][0]


def fmt_ms(value: float | None) -> str:
    """Milliseconds the way a person reads them.

    >>> fmt_ms(0.4321), fmt_ms(12.345), fmt_ms(2500.0), fmt_ms(None)
    ('0.432 ms', '12.3 ms', '2,500 ms', '-')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value < 1:
        return f"{value:.3f} ms"
    if value < 100:
        return f"{value:.1f} ms"
    return f"{value:,.0f} ms"


def iso(value: Any) -> str | None:
    return value.isoformat().replace("+00:00", "Z") if hasattr(value, "isoformat") else (None if value is None else str(value))


def rounded(value: float | None, digits: int = 2) -> float | None:
    if value is None or (isinstance(value, float) and (math.isnan(value) or math.isinf(value))):
        return None
    return round(float(value), digits)


def haproxy_limit_line(config: pl.DataFrame | None, proxy: str, server: str) -> dict[str, Any] | None:
    """Where ``haproxy.cfg`` sets the session limit of ``proxy``/``server`` (a ``proxy_config`` table).

    A server's ``maxconn`` parameter, else its backend's ``default-server maxconn``, else the
    defaults section's; a frontend's (``server`` FRONTEND or a listener) ``maxconn`` directive, else the
    defaults' ``maxconn``, else the global one (HAProxy's fall-backs, in that order). Returns
    ``{"where": "file:line", "text": "keyword args", "maxconn": N, "scope": "server"|"backend"|...}`` or None.

    >>> cfg = pl.DataFrame({"section": ["defaults", "backend"], "proxy": [None, "be"], "keyword": ["default-server", "server"],
    ...     "server": [None, "db1"], "args": ["maxconn 50", "db1 10.0.0.5:5432"], "maxconn": [50, None],
    ...     "line": [3, 9], "source": "haproxy.cfg"})
    >>> haproxy_limit_line(cfg, "be", "db1")
    {'where': 'haproxy.cfg:3', 'text': 'default-server maxconn 50', 'maxconn': 50, 'scope': 'defaults'}
    """
    if config is None or not config.height:
        return None
    limits = config.filter(pl.col("maxconn").is_not_null())
    mine = pl.col("proxy") == proxy
    if server == "FRONTEND" or server not in config.filter(pl.col("keyword") == "server")["server"].to_list():
        candidates = (
            ("frontend", mine & pl.col("section").is_in(["frontend", "listen"]) & (pl.col("keyword") == "maxconn")),
            ("defaults", (pl.col("section") == "defaults") & (pl.col("keyword") == "maxconn")),
            ("global", (pl.col("section") == "global") & (pl.col("keyword") == "maxconn")),
        )
    else:
        candidates = (
            ("server", mine & (pl.col("keyword") == "server") & (pl.col("server") == server)),
            ("backend", mine & pl.col("section").is_in(["backend", "listen"]) & (pl.col("keyword") == "default-server")),
            ("defaults", (pl.col("section") == "defaults") & (pl.col("keyword") == "default-server")),
        )
    for scope, condition in candidates:
        found = limits.filter(condition)
        if found.height:
            row = found.row(-1, named=True)  # the last one read wins, as in HAProxy
            return {"where": f"{row['source']}:{row['line']}", "text": f"{row['keyword']} {row['args']}".strip(),
                    "maxconn": int(row["maxconn"]), "scope": scope}
    return None
