"""Idle gaps between statements per connection (metrics.idle_gaps), and histogram_quantile."""

from __future__ import annotations

import re
import statistics
import tarfile
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive import idle_gaps as idle_gaps_module
from dbdiag.derive.histogram import histogram_quantile
from dbdiag.derive.idle_gaps import idle_gaps, resolution_us, sql_flags
from dbdiag.parsers import PARSERS
from dbdiag.parsers.base import ParseContext
from tests.conftest import CORPUS

T0 = datetime(2024, 5, 1, 10, 0, 0, tzinfo=timezone.utc)
INF = float("inf")


def statements(rows: list[tuple], engine: str = "mysql", source: str = "db/slow.log") -> pl.DataFrame:
    """Rows of (conn_id, start offset ms, duration ms, sql[, txn_id]) -> a ``statement`` table."""
    return t.conform(t.STATEMENT, pl.DataFrame({
        "stmt_id": list(range(len(rows))),
        "engine": engine,
        "conn_id": [r[0] for r in rows],
        "start_ts": [T0 + timedelta(milliseconds=r[1]) for r in rows],
        "end_ts": [T0 + timedelta(milliseconds=r[1] + r[2]) for r in rows],
        "query_time_s": [r[2] / 1000 for r in rows],
        "sql": [r[3] for r in rows],
        "txn_id": [r[4] if len(r) > 4 else None for r in rows],
        "source": source,
    }, schema_overrides={"conn_id": pl.String, "txn_id": pl.String}))


# ------------------------------------------------------------ histogram_quantile


def test_histogram_quantile_interpolates_inside_the_bucket() -> None:
    buckets = [(0.001, 10), (0.002, 30), (0.004, 40), (INF, 40)]
    assert histogram_quantile(buckets, 0.5) == pytest.approx(0.0015)  # rank 20 of (10, 30]
    assert histogram_quantile(buckets, 0.8) == pytest.approx(0.002 + 0.002 * (32 - 30) / 10)
    assert histogram_quantile(list(reversed(buckets)), 0.5) == pytest.approx(0.0015)  # order does not matter


def test_histogram_quantile_inf_bucket_and_edges() -> None:
    # 8 of 10 observations above 1 s: p50 falls in +Inf, which answers the highest finite bound
    assert histogram_quantile([(0.5, 1), (1.0, 2), (INF, 10)], 0.5) == 1.0
    assert histogram_quantile([(0.5, 4), (INF, 4)], 0.5) == pytest.approx(0.25)  # first bucket starts at 0
    assert histogram_quantile([(1.0, 0), (INF, 0)], 0.99) is None
    assert histogram_quantile([(1.0, 5), (2.0, 9)], 0.5) is None  # no +Inf
    assert histogram_quantile([(INF, 5)], 0.5) is None
    # counts that dip (buckets scraped at slightly different moments) are made monotonic
    assert histogram_quantile([(0.1, 6), (0.2, 5), (INF, 10)], 0.5) == pytest.approx(0.1 * 5 / 6)


# ------------------------------------------------------------ from statements


def test_gaps_split_in_and_out_of_transactions() -> None:
    frame = statements([
        ("1", 0.0, 1.0, "BEGIN"),            # in-txn gap 2 ms
        ("1", 3.0, 1.0, "SELECT 1"),          # in-txn gap 4 ms
        ("1", 8.0, 2.0, "UPDATE t SET a=1"),  # in-txn gap 6 ms
        ("1", 16.0, 1.0, "COMMIT"),           # not-in-txn gap 20 ms
        ("1", 37.0, 1.0, "SELECT 2"),         # autocommit: not-in-txn gap 40 ms
        ("1", 78.0, 1.0, "SELECT 3"),
        ("2", 0.5, 0.5, "/* app */ start transaction"),  # other connection, in-txn gap 10 ms
        ("2", 11.0, 1.0, "rollback"),
    ])
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["method"] == "statements" and metric["resolution_ms"] == 1.0  # whole-ms times
    assert metric["in_txn"]["count"] == 4 and metric["not_in_txn"]["count"] == 2
    assert metric["in_txn"]["p50_ms"] == pytest.approx(5.0)  # of 2, 4, 6, 10
    assert metric["in_txn"]["p99_ms"] == pytest.approx(6 + 4 * 0.97)
    assert metric["not_in_txn"]["p50_ms"] == pytest.approx(30.0)  # of 20, 40
    assert metric["sql_latency"]["count"] == 8 and metric["sql_latency"]["p50_ms"] == pytest.approx(1.0)
    assert metric["unavailable_reason"] is None


def test_nested_begin_and_autocommit_off() -> None:
    frame = statements([
        ("1", 0, 1, "BEGIN"), ("1", 2, 1, "BEGIN WORK"), ("1", 4, 1, "SELECT 1"),  # in, in
        ("1", 6, 1, "COMMIT"), ("1", 10, 1, "SELECT 2"),                            # out (3 ms), out (5 ms)
        ("1", 16, 1, "SET autocommit=0"), ("1", 20, 1, "SELECT 3"),                 # out (3 ms: no txn yet), in
        ("1", 30, 1, "ROLLBACK TO SAVEPOINT s1"), ("1", 40, 1, "COMMIT"),           # in, in, out (10 ms)
        ("1", 51, 1, "SET @@session.autocommit = 1"), ("1", 60, 1, "SELECT 4"),     # out (8 ms)
    ])
    metric = idle_gaps({t.STATEMENT: frame})
    # in: 1 (BEGIN->BEGIN), 1 (BEGIN->SELECT), 9 (SELECT 3->ROLLBACK TO), 9 (ROLLBACK TO->COMMIT), 1 (SELECT 1->COMMIT)
    assert metric["in_txn"]["count"] == 5 and metric["in_txn"]["p50_ms"] == pytest.approx(1.0)
    # out: COMMIT->SELECT 2 (3), SELECT 2->SET (5), SET->SELECT 3 (3), COMMIT->SET (10), SET->SELECT 4 (8)
    assert metric["not_in_txn"]["count"] == 5 and metric["not_in_txn"]["p50_ms"] == pytest.approx(5.0)


def test_shared_transaction_ids_without_markers() -> None:
    frame = statements([
        ("7", 0, 1, "SELECT 1", "449"), ("7", 3, 1, "UPDATE t SET a=1", "449"),  # same Txn_start_ts: in (2 ms)
        ("7", 10, 1, "SELECT 2", "450"), ("7", 20, 1, "SELECT 3", "451"),          # autocommit: out (6, 9 ms)
    ], engine="tidb")
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["in_txn"] == {"count": 1, "p50_ms": 2.0, "p80_ms": 2.0, "p99_ms": 2.0, "mean_ms": 2.0}
    assert metric["not_in_txn"]["count"] == 2
    assert "transaction ids" in metric["method_detail"]


def test_second_resolution_logs_give_counts_not_percentiles() -> None:
    rows = [("1", 1000.0 * i, 0.05, sql) for i, sql in enumerate(["BEGIN", "SELECT 1", "COMMIT", "SELECT 2"])]
    frame = statements(rows).with_columns(  # a slow log: end time on whole seconds, start = end - duration
        pl.col("end_ts").dt.truncate("1s"),
    ).with_columns((pl.col("end_ts") - pl.duration(microseconds=50)).alias("start_ts"))
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["resolution_ms"] == 1000.0
    assert (metric["in_txn"]["count"], metric["not_in_txn"]["count"]) == (2, 1)
    assert metric["in_txn"]["p80_ms"] is None and metric["not_in_txn"]["p50_ms"] is None
    assert "whole seconds" in metric["unavailable_reason"]
    assert metric["sql_latency"]["p50_ms"] == pytest.approx(0.05)


def test_slow_log_with_threshold_is_not_used_for_gaps() -> None:
    frame = statements([("1", 0, 1500, "SELECT * FROM t WHERE a = 1"), ("1", 5000, 2000, "SELECT * FROM t WHERE a = 2")])
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["in_txn"]["count"] == 0 and metric["in_txn"]["p50_ms"] is None
    assert "slow log" in metric["unavailable_reason"]


def test_negative_gaps_within_resolution_are_clamped_others_dropped() -> None:
    frame = statements([("1", 0, 2, "SELECT 1"), ("1", 1.999, 1, "SELECT 2"), ("1", 1.0, 5, "SELECT 3")])
    # times in whole µs: resolution 1 µs. Sorted by end: SELECT 1 (ends 2 ms), SELECT 2 (2.999), SELECT 3 (6).
    # SELECT 1 -> 2: -1 µs, rounding: clamped to 0. SELECT 2 -> 3: 1 - 2.999 ms, an overlap: dropped
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["not_in_txn"]["count"] == 1 and metric["not_in_txn"]["p50_ms"] == 0.0
    assert any("1 gaps dropped" in note for note in metric["notes"])


def test_statements_logged_out_of_end_order_are_put_in_order() -> None:
    # the log holds BEGIN after the SELECT that followed it (a log written out of order): the gaps follow the ends
    frame = statements([
        ("1", 10, 1, "SELECT 2"), ("1", 0, 0.5, "BEGIN"), ("1", 20, 1, "COMMIT"), ("1", 30, 1, "SELECT 3"),
    ])
    metric = idle_gaps({t.STATEMENT: frame})
    # BEGIN -> SELECT 2 (9.5 ms) and SELECT 2 -> COMMIT (9 ms) in the transaction, COMMIT -> SELECT 3 (9 ms) not
    assert metric["in_txn"]["count"] == 2 and metric["in_txn"]["mean_ms"] == pytest.approx(9.25)
    assert metric["not_in_txn"]["count"] == 1 and metric["not_in_txn"]["p50_ms"] == pytest.approx(9.0)
    assert not any("dropped" in note for note in metric["notes"])


def test_same_connection_id_in_two_sources_is_two_connections() -> None:
    # two servers' logs, each numbering its statements from 0, and each with a connection 1; the second's logged
    # out of end order. One connection of both would give the gaps BEGIN -> SELECT (1.5 ms) -> COMMIT...
    first = statements([("1", 0, 0.5, "BEGIN"), ("1", 5, 1, "COMMIT")], source="db1/slow.log")
    second = statements([("1", 10, 1, "SELECT 2"), ("1", 2, 1, "SELECT 1")], source="db2/slow.log")
    metric = idle_gaps({t.STATEMENT: pl.concat([first, second])})
    assert metric["source"] == ["db1/slow.log", "db2/slow.log"]
    assert metric["in_txn"]["count"] == 1 and metric["in_txn"]["p50_ms"] == pytest.approx(4.5)  # BEGIN -> COMMIT
    assert metric["not_in_txn"]["count"] == 1 and metric["not_in_txn"]["p50_ms"] == pytest.approx(7.0)  # SELECT 1 -> 2
    assert "(2 connections, 4 statements)" in metric["method_detail"]


def test_statements_ending_in_the_same_second_follow_their_ids() -> None:
    # whole-second ends (a slow log): BEGIN (id 0) and SELECT 1 (id 1) both end at second 1, the table holds them in
    # the other order; the order of execution is the ids': BEGIN, SELECT 1, COMMIT (in, in), then SELECT 2 (out)
    rows = [("1", 1000.0, 0.05, "SELECT 1"), ("1", 1000.0, 0.05, "BEGIN"), ("1", 2000.0, 0.05, "COMMIT"),
            ("1", 3000.0, 0.05, "SELECT 2")]
    frame = statements(rows).with_columns(pl.Series("stmt_id", [1, 0, 2, 3]), pl.col("end_ts").dt.truncate("1s"))
    frame = frame.with_columns((pl.col("end_ts") - pl.duration(microseconds=50)).alias("start_ts"))
    metric = idle_gaps({t.STATEMENT: frame})
    assert metric["resolution_ms"] == 1000.0
    assert (metric["in_txn"]["count"], metric["not_in_txn"]["count"]) == (2, 1)  # in the rows' order: (1, 2)


def test_repeated_and_distinct_marker_texts_give_the_same_flags() -> None:
    texts = ["BEGIN", "/* app */ begin", "COMMIT AND CHAIN", "ROLLBACK TO SAVEPOINT a", "END;", "abort",
             "START TRANSACTION READ ONLY", "SET autocommit=0", "set @@session.autocommit = ON", "SET x=1",
             "SELECT 1", None]
    once = sql_flags(pl.Series(texts))  # every candidate text distinct: each one read
    assert once.sum().row(0) == (3, 2, 1, 1)  # BEGIN x3; END, abort; autocommit=0; autocommit = ON
    thrice = sql_flags(pl.Series(texts * 3))  # each text three times: the distinct ones are read, then mapped
    assert thrice.equals(pl.concat([once] * 3))


def test_statistics_are_linear_quantiles_and_repeatable() -> None:
    import numpy as np

    sql = ["BEGIN", "SELECT 1", "COMMIT", "SELECT 2"]
    rows = [(str(i % 3), i * 1.7, 0.3 + (i * 7919 % 13) / 10, sql[i % 4]) for i in range(400)]
    frame = statements(rows)
    first = idle_gaps({t.STATEMENT: frame})
    assert idle_gaps({t.STATEMENT: frame}) == first
    assert first["in_txn"]["count"] > 50 and first["not_in_txn"]["count"] > 50
    values = pl.Series([(i * 7919 % 1009) / 7 for i in range(999)] + [None])
    stats = idle_gaps_module._stats(values)
    for name, q in idle_gaps_module.QUANTILES.items():
        assert stats[name] == round(float(np.quantile(values.drop_nulls().to_numpy(), q)), 4)


def test_resolution_reads_every_value_and_the_coarser_of_two_columns() -> None:
    whole_seconds = [T0 + timedelta(seconds=i) for i in range(1500)]
    assert resolution_us(pl.Series(whole_seconds)) == 1_000_000
    assert resolution_us(pl.Series(whole_seconds + [T0 + timedelta(milliseconds=250)])) == 1_000  # after the first 1000
    micro = pl.Series([T0 + timedelta(microseconds=7)])
    assert resolution_us(micro) == 1 and resolution_us(micro, 1_000) == 1_000
    assert resolution_us(pl.Series(whole_seconds), 1_000) == 1_000_000


def test_no_statements_and_no_metrics() -> None:
    assert idle_gaps({}) is None
    assert idle_gaps({t.STATEMENT: t.empty(t.STATEMENT)}) is None


# ------------------------------------------------------------ from TiDB metrics


def _metric_rows(metric: str, series: dict[str, tuple[float, float]]) -> list[dict]:
    rows = []
    for labels, (first, last) in series.items():
        for i, value in enumerate((first, last)):
            rows.append({"ts": T0 + timedelta(seconds=60 * i), "metric": metric, "labels": labels,
                         "instance": "tidb-0:10080", "value": value, "source": "metrics/tidb.json"})
    return rows


def tidb_histograms() -> pl.DataFrame:
    idle = {  # in_txn=1: 100 idle periods, 50 <= 5 ms, 90 <= 25 ms; in_txn=0: 10 periods, all <= 1 s
        "in_txn=1,instance=tidb-0:10080,le=0.005": (1000, 1050), "in_txn=1,instance=tidb-0:10080,le=0.025": (2000, 2090),
        "in_txn=1,instance=tidb-0:10080,le=+Inf": (3000, 3100),
        "in_txn=0,instance=tidb-0:10080,le=0.005": (0, 0), "in_txn=0,instance=tidb-0:10080,le=1": (5, 15),
        "in_txn=0,instance=tidb-0:10080,le=+Inf": (5, 15),
    }
    sql = {  # 1000 statements, 800 <= 4 ms; internal ones are left out
        "instance=tidb-0:10080,le=0.002,sql_type=Select": (0, 500), "instance=tidb-0:10080,le=0.004,sql_type=Select": (0, 800),
        "instance=tidb-0:10080,le=+Inf,sql_type=Select": (0, 1000),
        "instance=tidb-0:10080,le=0.002,sql_type=internal": (0, 1), "instance=tidb-0:10080,le=+Inf,sql_type=internal": (0, 9999),
    }
    rows = _metric_rows("tidb_server_conn_idle_duration_seconds_bucket", idle)
    rows += _metric_rows("tidb_server_handle_query_duration_seconds_bucket", sql)
    return t.conform(t.METRIC_SAMPLE, pl.DataFrame(rows))


def test_tidb_idle_histograms() -> None:
    metric = idle_gaps({t.METRIC_SAMPLE: tidb_histograms()})
    assert metric["method"] == "metrics" and "increase over the capture" in metric["method_detail"]
    assert metric["in_txn"]["count"] == 100
    assert metric["in_txn"]["p50_ms"] == pytest.approx(5.0)  # rank 50 is the top of the first bucket
    assert metric["in_txn"]["p80_ms"] == pytest.approx(5 + 20 * (80 - 50) / 40)  # 20 ms
    assert metric["in_txn"]["p99_ms"] == pytest.approx(25.0)  # in +Inf: the highest bound
    assert metric["not_in_txn"]["count"] == 10 and metric["not_in_txn"]["p50_ms"] == pytest.approx(5 + 995 * 0.5)
    assert metric["sql_latency"]["count"] == 1000 and metric["sql_latency"]["p80_ms"] == pytest.approx(4.0)


def test_metrics_used_when_statements_are_second_resolution() -> None:
    frame = statements([("1", 0, 0.1, "BEGIN"), ("1", 1000, 0.1, "COMMIT")]).with_columns(pl.col("end_ts").dt.truncate("1s"))
    metric = idle_gaps({t.STATEMENT: frame, t.METRIC_SAMPLE: tidb_histograms()})
    assert metric["method"] == "metrics" and "whole seconds" in metric["notes"][0]


# ------------------------------------------------------------ real captures


def _statements_of(capture: str, member: str) -> pl.DataFrame:
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        text = tar.extractfile(member).read().decode("utf-8", "backslashreplace")
    name = member.rsplit("/", 1)[-1]
    spec = max(PARSERS, key=lambda s: s.detect(text[:65536], name))
    return spec.parse(text, ParseContext(source=member)).tables[t.STATEMENT]


def test_mariadb_capture_counts_gaps_but_cannot_time_them() -> None:
    """The MariaDB slow log (long_query_time=0) writes ``# Time: 261129 19:12:14`` only when the second
    changes and ``SET timestamp=`` in whole seconds: statement ends are known to the second, so gaps
    between statements of a 3 ms transaction cannot be measured. What can: sysbench's 295
    transactions of 20 statements (BEGIN, 18 queries, COMMIT) on 8 connections give 5,900
    statements, 5,892 gaps; 19 per transaction are inside it (295 x 19 = 5,605), the other 287 are
    between transactions. The 2 SHOW statements of the capture script have a connection each."""
    metric = idle_gaps({t.STATEMENT: _statements_of("mariadb-sysbench-debian12.tar.gz", "capture/db/mariadb-slow.log")})
    assert metric["method"] == "statements" and metric["resolution_ms"] == 1000.0
    assert (metric["in_txn"]["count"], metric["not_in_txn"]["count"]) == (5605, 287)
    assert metric["in_txn"]["p80_ms"] is None and "whole seconds" in metric["unavailable_reason"]
    assert metric["sql_latency"]["count"] == 5902
    assert (metric["sql_latency"]["p50_ms"], metric["sql_latency"]["p99_ms"]) == (0.038, 0.376)


PG_LINE = re.compile(r"^(\S+ \S+) UTC \[(\d+)\] \S+ LOG:  duration: ([\d.]+) ms  statement: (.*)$")


def test_postgres_capture_gaps_match_a_hand_computation() -> None:
    """The PostgreSQL log (log_min_duration_statement=0, prefix ``%m [%p]``) stamps each statement's
    end to the millisecond; start = end - duration. Recomputed here from the raw lines with plain
    Python: per pid, gap = next start - this end, in a transaction between BEGIN/begin and
    END/COMMIT. pgbench ran 311 TPC-B transactions of 7 statements on 4 connections (311 x 6 =
    1,866 gaps inside transactions) plus the ``pgbench -i`` session's begin...commit.

    Inside transactions the true gap is a client round trip (about 0.06 ms on average here: the
    mean, unbiased by the truncation of both ends to the millisecond); the percentiles spread over
    +-1 ms of that truncation noise and must be read with ``resolution_ms`` = 1. Between
    transactions each client waits for pgbench's rate schedule (-R 32 over 4 clients, about
    128 ms per client): p50 about 97 ms."""
    capture, member = "postgres-pgbench-debian12.tar.gz", "capture/db/postgresql.log"
    metric = idle_gaps({t.STATEMENT: _statements_of(capture, member)})
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        lines = tar.extractfile(member).read().decode().splitlines()
    by_pid: dict[str, list[tuple[datetime, float, str]]] = {}
    for line in lines:
        match = PG_LINE.match(line)
        if match:
            end = datetime.fromisoformat(match[1]).replace(tzinfo=timezone.utc)
            by_pid.setdefault(match[2], []).append((end, float(match[3]), match[4]))
    gaps: dict[bool, list[float]] = {True: [], False: []}
    for rows in by_pid.values():
        open_txn = False
        for (end, _, sql), (next_end, next_ms, _) in zip(rows, rows[1:]):
            word = sql.split()[0].rstrip(";").upper()
            open_txn = True if word in ("BEGIN", "START") else False if word in ("COMMIT", "END", "ROLLBACK") else open_txn
            gap = (next_end - end).total_seconds() * 1000 - next_ms
            gaps[open_txn].append(max(gap, 0.0) if gap >= -1.0 else None)
    expected = {key: sorted(g for g in values if g is not None) for key, values in gaps.items()}

    def pct(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]

    assert metric["resolution_ms"] == 1.0 and metric["unavailable_reason"] is None
    for key, name in ((True, "in_txn"), (False, "not_in_txn")):
        assert metric[name]["count"] == len(expected[key])
        for q in (0.5, 0.8, 0.99):
            assert metric[name][f"p{int(q * 100)}_ms"] == pytest.approx(pct(expected[key], q), abs=1e-3)
    assert (metric["in_txn"]["count"], metric["not_in_txn"]["count"]) == (1924, 323)
    assert (metric["in_txn"]["p50_ms"], metric["in_txn"]["p80_ms"], metric["in_txn"]["p99_ms"]) == (0.0, 0.5718, 0.9528)
    assert metric["in_txn"]["mean_ms"] == pytest.approx(0.06, abs=0.005)
    assert (metric["not_in_txn"]["p50_ms"], metric["not_in_txn"]["p80_ms"]) == (96.924, 186.1722)
    assert metric["sql_latency"]["count"] == 2254


def test_a_statement_that_only_sleeps_is_gap_time_not_sql_latency() -> None:
    rows = [("1", 0, 1.0, "SELECT 1"), ("1", 2, 500.0, "DO SLEEP(0.5)"), ("1", 503, 1.0, "SELECT 2"), ("1", 505, 1.0, "SELECT 3")]
    metric = idle_gaps({t.STATEMENT: statements(rows)})
    assert metric["sql_latency"]["count"] == 3 and metric["sql_latency"]["p99_ms"] == pytest.approx(1.0)
    assert metric["not_in_txn"]["count"] == 2  # the gap 1 ms -> 503 ms holds the sleep
