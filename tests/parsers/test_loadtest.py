"""sysbench and pgbench output parsers: goldens over real outputs, hand-checked numbers, hostile input."""

from __future__ import annotations

import datetime as dt
import gzip
import time
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, pgbench, sysbench
from dbdiag.parsers.base import ParseContext, ParseError
from tests.captures import capture_files, capture_text, decoded
from tests.conftest import CORPUS, REPO, corpus_names

FIXTURES = REPO / "fixtures" / "loadtest"
SYSBENCH_FIXTURES = sorted(p.name for p in FIXTURES.glob("sysbench-*.txt"))
PGBENCH_FIXTURES = sorted(p.name for p in FIXTURES.glob("pgbench-*.txt"))
CAPTURES = corpus_names("captures", "*.tar.gz")
MARIADB_CAPTURE = "mariadb-sysbench-debian12.tar.gz"
POSTGRES_CAPTURE = "postgres-pgbench-debian12.tar.gz"
SPECS = {"sysbench": sysbench.SPEC, "pgbench": pgbench.SPEC}

# sysbench 0.5 and 0.4 output, written after the layout those releases print (numbers made up).
SYSBENCH_05 = """sysbench 0.5:  multi-threaded system evaluation benchmark

Running the test with following options:
Number of threads: 8
Report intermediate results every 2 second(s)
Random number generator seed is 0 and will be ignored


Initializing worker threads...

Threads started!

[   2s] threads: 8, tps: 4100.50, reads: 41005.00, writes: 0.00, response time: 2.40ms (95%), errors: 0.00, reconnects:  0.00
[   4s] threads: 8, tps: 4200.25, reads: 42002.50, writes: 0.00, response time: 2.10ms (95%), errors: 0.00, reconnects:  0.00
OLTP test statistics:
    queries performed:
        read:                            2460000
        write:                           0
        other:                           492000
        total:                           2952000
    transactions:                        246000 (4920.00 per sec.)
    read/write requests:                 2460000 (49200.00 per sec.)
    other operations:                    492000 (9840.00 per sec.)
    ignored errors:                      0      (0.00 per sec.)
    reconnects:                          0      (0.00 per sec.)

General statistics:
    total time:                          50.0000s
    total number of events:              246000
    total time taken by event execution: 399.5000s
    response time:
         min:                                  1.30ms
         avg:                                  1.62ms
         max:                                 12.50ms
         approx.  95 percentile:               1.90ms

Threads fairness:
    events (avg/stddev):           30750.0000/100.00
    execution time (avg/stddev):   49.9375/0.00

"""
SYSBENCH_05_OLD_INTERVAL = (
    "[  10s] threads: 8, tps: 1000.50, reads/s: 14007.00, writes/s: 4002.00, response time: 9.50ms (99%)\n"
)
SYSBENCH_04 = """sysbench 0.4.12:  multi-threaded system evaluation benchmark

No DB drivers specified, using mysql
Running the test with following options:
Number of threads: 16

Doing OLTP test.
Running simple OLTP test
Doing read-only test
Using Uniform distribution
Skipping BEGIN/COMMIT
Using auto_inc on the id column
Threads started!
Time limit exceeded, exiting...
(last message repeated 15 times)
Done.

OLTP test statistics:
    queries performed:
        read:                            1200000
        write:                           0
        other:                           1200000
        total:                           2400000
    transactions:                        1200000 (20000.00 per sec.)
    deadlocks:                           0      (0.00 per sec.)
    read/write requests:                 1200000 (20000.00 per sec.)
    other operations:                    1200000 (20000.00 per sec.)

Test execution summary:
    total time:                          60.0000s
    total number of events:              1200000
    total time taken by event execution: 950.4000
    per-request statistics:
         min:                                  0.50ms
         avg:                                  0.79ms
         max:                                  5.20ms
         approx.  95 percentile:               1.10ms

Threads fairness:
    events (avg/stddev):           75000.0000/40.00
    execution time (avg/stddev):   59.4000/0.00
"""
# pgbench 10-13 shapes: tps including/excluding connections, statement lines without failures.
PGBENCH_13 = """starting vacuum...end.
progress: 1.0 s, 613.9 tps, lat 16.216 ms stddev 5.218
progress: 2.0 s, 641.0 tps, lat 15.596 ms stddev 4.317
transaction type: <builtin: TPC-B (sort of)>
scaling factor: 10
query mode: simple
number of clients: 10
number of threads: 2
duration: 2 s
number of transactions actually processed: 1256
latency average = 15.902 ms
latency stddev = 4.790 ms
tps = 627.316146 (including connections establishing)
tps = 628.502117 (excluding connections establishing)
statement latencies in milliseconds:
         0.002  \\set aid random(1, 100000 * :scale)
        12.201  UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;
"""


def _parse(spec, text: str, source: str = "test"):
    return spec.parse(text, ParseContext(source=source))


def _run(result) -> dict:
    return result.tables["load_run"].row(0, named=True)


def _loadtest_members(capture: str) -> list[tuple[str, str, str]]:
    """(kind, member name, text) for the members one of the two specs claims."""
    found = []
    for name, data in capture_files(capture):
        text = decoded(data)
        for kind, spec in SPECS.items():
            if spec.detect(text[:8192], name.rsplit("/", 1)[-1]) > 0.5:
                found.append((kind, name, text))
    return found


@pytest.mark.parametrize("capture", CAPTURES)
def test_capture_members_claimed(capture: str) -> None:
    """Which members of each capture the two specs claim (their goldens are parser cases)."""
    members = _loadtest_members(capture)
    expected = {
        MARIADB_CAPTURE: [("sysbench", "capture/app/sysbench-run.txt")],
        POSTGRES_CAPTURE: [("pgbench", "capture/app/pgbench.txt")],
    }.get(capture, [])
    assert [(kind, name) for kind, name, _ in members] == expected


def test_fixtures_present() -> None:
    assert len(SYSBENCH_FIXTURES) >= 6 and len(PGBENCH_FIXTURES) >= 9
    for path in FIXTURES.glob("*.txt"):
        assert path.stat().st_size < 50_000
        assert f"`{path.name}`" in (FIXTURES / "README.md").read_text(encoding="utf-8")


def test_mariadb_capture_sysbench_numbers() -> None:
    # hand-checked against capture/app/sysbench-run.txt
    result = _parse(sysbench.SPEC, capture_text(MARIADB_CAPTURE, "capture/app/sysbench-run.txt"), "sysbench-run.txt")
    run = _run(result)
    assert run["test"] is None  # sysbench 1.0 does not print the test; the name has none
    assert (run["threads"], run["transactions"], run["tps"]) == (8, 295, 29.43)
    assert (run["queries"], run["qps"], run["errors"], run["reconnects"]) == (5900, 588.60, 0, 0)
    assert run["duration_s"] == 10.0223
    assert (run["latency_min_ms"], run["latency_avg_ms"], run["latency_max_ms"]) == (1.75, 3.18, 8.13)
    assert (run["latency_pct"], run["latency_pct_ms"], run["latency_sum_ms"]) == (99.0, 4.91, 938.11)
    assert run["rate_limit_tps"] == 30.0
    intervals = result.tables["load_interval"]
    assert intervals.height == 10
    assert intervals["ts"].null_count() == 10
    first = intervals.row(0, named=True)
    assert (first["offset_s"], first["threads"], first["tps"], first["qps"]) == (1.0, 8, 24.95, 498.97)
    assert (first["reads_per_s"], first["writes_per_s"], first["other_per_s"]) == (349.28, 99.79, 49.90)
    assert (first["latency_ms"], first["latency_pct"], first["errors_per_s"]) == (4.41, 99.0, 0.0)
    assert intervals["offset_s"].to_list() == [float(s) for s in range(1, 11)]
    histogram = result.tables["latency_histogram"]
    assert histogram.height == 55
    assert histogram["count"].sum() == 295  # every transaction in one bucket
    assert histogram.row(0) == (0, 1.759, 1, "sysbench-run.txt")
    assert histogram.row(-1)[1:3] == (8.13, 1)
    assert any("no wall-clock time" in note for note in result.notes)


def test_postgres_capture_pgbench_numbers() -> None:
    # hand-checked against capture/app/pgbench.txt
    result = _parse(pgbench.SPEC, capture_text(POSTGRES_CAPTURE, "capture/app/pgbench.txt"), "pgbench.txt")
    run = _run(result)
    assert (run["test"], run["threads"], run["scale"], run["duration_s"]) == ("TPC-B (sort of)", 4, 5, 10.0)
    assert (run["transactions"], run["errors"], run["tps"], run["latency_avg_ms"]) == (311, 0, 31.216998, 1.599)
    intervals = result.tables["load_interval"]
    assert intervals.height == 9
    first = intervals.row(0, named=True)
    assert (first["offset_s"], first["tps"], first["latency_ms"]) == (1.0, 36.0, 1.784)
    assert (first["latency_stddev_ms"], first["lag_ms"], first["latency_pct"]) == (0.534, 0.132, None)
    assert intervals["ts"].null_count() == 9
    statements = result.tables["load_statement_latency"]
    assert statements.height == 11
    by_text = dict(zip(statements["statement"], statements["latency_ms"]))
    assert by_text["UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;"] == 0.402
    assert by_text["BEGIN;"] == 0.240 and by_text["END;"] == 0.345
    assert by_text["\\set aid random(1, 100000 * :scale)"] == 0.009
    assert set(statements["failures"]) == {0}
    assert set(statements["script"]) == {"TPC-B (sort of)"}


def test_sysbench_two_runs_concatenated() -> None:
    name = "sysbench-oltp_read_write-threads4-then-16.txt"
    result = _parse(sysbench.SPEC, (FIXTURES / name).read_text(), name)
    assert result.records == 2
    runs = result.tables["load_run"]
    assert runs.select("run", "test", "threads", "transactions", "errors").rows() == [
        (0, "oltp_read_write", 4, 4237, 0),
        (1, "oltp_read_write", 16, 4849, 2),
    ]
    intervals = result.tables["load_interval"]
    assert intervals.group_by("run").agg(pl.len(), pl.col("threads").max()).sort("run").rows() == [
        (0, 5, 4),
        (1, 5, 16),
    ]
    assert intervals.filter(pl.col("run") == 1)["errors_per_s"].to_list() == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_sysbench_test_name_from_command_line_and_content() -> None:
    name = "sysbench-cpu-two-runs-xtrace.txt"
    result = _parse(sysbench.SPEC, (FIXTURES / name).read_text(), name)
    assert result.tables["load_run"].select("test", "threads", "transactions").rows() == [
        ("cpu", 1, 1566),
        ("cpu", 2, 467),
    ]
    echoed = "$ sysbench /usr/share/sysbench/oltp_write_only.lua --threads=2 run\n" + SYSBENCH_05
    assert _run(_parse(sysbench.SPEC, echoed, "x.txt"))["test"] == "oltp_write_only"
    old = "+ sysbench --test=/usr/share/doc/sysbench/tests/db/oltp.lua --num-threads=8 run\n" + SYSBENCH_05
    assert _run(_parse(sysbench.SPEC, old, "x.txt"))["test"] == "oltp"
    # the command line wins over what the output says
    cpu = (FIXTURES / "sysbench-cpu.txt").read_text()
    assert _run(_parse(sysbench.SPEC, "sysbench cpu --threads=1 run\n" + cpu, "x"))["test"] == "cpu"
    assert _run(_parse(sysbench.SPEC, cpu, "run-oltp_read_only.log"))["test"] == "cpu"


def test_sysbench_rate_and_memory() -> None:
    rate = _parse(sysbench.SPEC, (FIXTURES / "sysbench-oltp_point_select-rate50.txt").read_text(), "r")
    assert _run(rate)["rate_limit_tps"] == 50.0
    assert rate.tables["load_interval"].height == 5  # queue-length lines add no rows
    memory = _parse(sysbench.SPEC, (FIXTURES / "sysbench-memory.txt").read_text(), "m")
    run = _run(memory)
    assert (run["test"], run["transactions"], run["tps"]) == ("memory", 5871482, 1953768.63)
    assert memory.tables["load_interval"].height == 0 and memory.warnings == []


def test_sysbench_05_and_04() -> None:
    result = _parse(sysbench.SPEC, SYSBENCH_05, "sysbench-0.5.txt")
    assert result.warnings == []
    run = _run(result)
    assert (run["threads"], run["transactions"], run["tps"], run["queries"]) == (8, 246000, 4920.00, 2952000)
    assert run["qps"] == pytest.approx(49200.00 + 9840.00)
    assert (run["latency_min_ms"], run["latency_avg_ms"], run["latency_max_ms"]) == (1.30, 1.62, 12.50)
    assert (run["latency_pct"], run["latency_pct_ms"], run["duration_s"]) == (95.0, 1.90, 50.0)
    assert run["latency_sum_ms"] == pytest.approx(399500.0)
    intervals = result.tables["load_interval"]
    assert intervals.select("offset_s", "threads", "tps", "reads_per_s", "latency_ms", "latency_pct").rows() == [
        (2.0, 8, 4100.50, 41005.00, 2.40, 95.0),
        (4.0, 8, 4200.25, 42002.50, 2.10, 95.0),
    ]
    old = _parse(sysbench.SPEC, SYSBENCH_05_OLD_INTERVAL, "x").tables["load_interval"]
    assert old.select("offset_s", "tps", "writes_per_s", "latency_ms", "latency_pct", "errors_per_s").rows() == [
        (10.0, 1000.50, 4002.00, 9.50, 99.0, None)
    ]
    result = _parse(sysbench.SPEC, SYSBENCH_04, "sysbench-0.4.txt")
    assert result.warnings == []
    run = _run(result)
    assert (run["test"], run["threads"], run["transactions"], run["errors"]) == ("oltp", 16, 1200000, 0)
    assert (run["latency_avg_ms"], run["latency_pct_ms"], run["duration_s"]) == (0.79, 1.10, 60.0)
    assert run["latency_sum_ms"] == pytest.approx(950400.0)


def test_sysbench_lua_report_hook_lines() -> None:
    # sysbench.report_default() prints "err/s" without a colon; tpcc.lua appends its own fields;
    # sysbench 1.1 prints the --rate queue line without a comma
    text = (
        "[ 1s ] thds: 8 tps: 31.99 qps: 639.82 (r/w/o: 447.87/127.96/63.98) lat (ms,95%): 41.10 "
        "err/s 0.50 reconn/s: 0.00 no: 1.00 pt: 2.00\n"
        "[ 1s ] queue length: 3 concurrency: 8\n"
    )
    result = _parse(sysbench.SPEC, text, "x")
    assert result.tables["load_interval"].select("tps", "latency_ms", "errors_per_s").rows() == [(31.99, 41.10, 0.5)]
    assert [w.reason for w in result.warnings] == ["run 0: no summary (output cut short?)"]


def test_sysbench_runs_without_banner_split_on_summary() -> None:
    result = _parse(sysbench.SPEC, SYSBENCH_05.split("\n", 2)[2] * 2, "x")
    assert result.records == 2
    assert result.tables["load_interval"]["run"].to_list() == [0, 0, 1, 1]
    body = SYSBENCH_05[SYSBENCH_05.index("[   2s]") :]  # intervals and summary only
    result = _parse(sysbench.SPEC, body * 3, "x")
    assert result.records == 3 and result.warnings == []
    assert result.tables["load_interval"]["run"].to_list() == [0, 0, 1, 1, 2, 2]
    assert result.tables["load_run"]["transactions"].to_list() == [246000] * 3


def test_pgbench_two_runs_and_scripts() -> None:
    result = _parse(pgbench.SPEC, (FIXTURES / "pgbench-two-runs.txt").read_text(), "p")
    assert result.tables["load_run"].select("run", "threads", "transactions", "tps").rows() == [
        (0, 1, 2437, 1221.620630),
        (1, 3, 1512, 755.982612),
    ]
    assert result.tables["load_interval"].select("run", "offset_s", "tps").rows() == [
        (0, 1.0, 1480.9), (0, 2.0, 955.1), (1, 1.0, 780.9), (1, 2.0, 728.0),
    ]
    scripts = _parse(pgbench.SPEC, (FIXTURES / "pgbench-two-scripts.txt").read_text(), "p")
    assert _run(scripts)["test"] == "multiple scripts"
    statements = scripts.tables["load_statement_latency"]
    assert statements.group_by("script", maintain_order=True).len().rows() == [
        ("TPC-B (sort of)", 11),
        ("select only", 2),
    ]
    last = ("select only", "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;", 0.098, 0)
    assert statements.row(-1)[1:5] == last
    # progress lines after a summary, without a banner, open the next run
    text = (FIXTURES / "pgbench-T5-c4-P1-r.txt").read_text()
    body = text.split("\n", 2)[2]
    assert _parse(pgbench.SPEC, body + body, "p").records == 2


def test_pgbench_progress_timestamp_is_utc_epoch() -> None:
    result = _parse(pgbench.SPEC, (FIXTURES / "pgbench-rate50-progress-timestamp.txt").read_text(), "p")
    intervals = result.tables["load_interval"]
    assert intervals["ts"][0] == dt.datetime(2026, 11, 29, 22, 49, 18, 788000, tzinfo=dt.timezone.utc)
    assert intervals["offset_s"].null_count() == intervals.height == 4
    assert intervals["lag_ms"].to_list() == [0.150, 0.090, 0.081, 0.091]
    assert any("epoch" in note for note in result.notes)
    run = _run(result)
    assert (run["threads"], run["transactions"], run["rate_limit_tps"]) == (2, 283, None)


def test_pgbench_rate_from_echoed_command_line() -> None:
    result = _parse(pgbench.SPEC, (FIXTURES / "pgbench-xtrace-rate.txt").read_text(), "p")
    assert result.tables["load_run"].select("test", "threads", "rate_limit_tps", "transactions").rows() == [
        ("TPC-B (sort of)", 2, 100.0, 213),
        ("select only", 4, 200.0, 411),
    ]
    assert result.tables["load_interval"]["run"].to_list() == [0, 0, 1]
    init = "+ pgbench -i -s 1 bench\n" + (FIXTURES / "pgbench-init.txt").read_text()
    assert _parse(pgbench.SPEC, init, "p").records == 0


def test_pgbench_older_formats() -> None:
    result = _parse(pgbench.SPEC, PGBENCH_13, "p")
    assert result.warnings == []
    run = _run(result)
    assert (run["tps"], run["latency_avg_ms"], run["scale"], run["transactions"]) == (628.502117, 15.902, 10, 1256)
    assert result.tables["load_interval"].select("offset_s", "latency_ms", "errors_per_s").rows() == [
        (1.0, 16.216, None), (2.0, 15.596, None),
    ]
    assert result.tables["load_statement_latency"].select("latency_ms", "failures").rows() == [
        (0.002, None), (12.201, None),
    ]
    processed = _parse(pgbench.SPEC, (FIXTURES / "pgbench-t50-c2.txt").read_text(), "p")
    assert (_run(processed)["transactions"], _run(processed)["duration_s"]) == (100, None)
    monotonic = _parse(pgbench.SPEC, "progress: 12345.678 s, 10.0 tps, lat 1.000 ms stddev 0.100\n", "p")
    assert monotonic.tables["load_interval"].select("ts", "offset_s").rows() == [(None, None)]
    nan = _parse(pgbench.SPEC, "progress: 5.0 s, 0.0 tps, lat -nan ms stddev -nan\n", "p")
    assert nan.tables["load_interval"].select("tps", "latency_ms", "latency_stddev_ms").rows() == [(0.0, None, None)]


def test_pgbench_errors_and_init() -> None:
    aborted = _parse(pgbench.SPEC, (FIXTURES / "pgbench-aborted.txt").read_text(), "p")
    reasons = [w.reason for w in aborted.warnings]
    assert sum("aborted in command" in r for r in reasons) == 2
    assert any("Run was aborted" in r for r in reasons)
    assert (_run(aborted)["transactions"], _run(aborted)["tps"]) == (0, None)
    init = _parse(pgbench.SPEC, (FIXTURES / "pgbench-init.txt").read_text(), "p")
    assert init.records == 0 and init.warnings == []
    assert all(frame.height == 0 for frame in init.tables.values())


def test_truncated_mid_summary() -> None:
    text = capture_text(MARIADB_CAPTURE, "capture/app/sysbench-run.txt")
    cut = text[: text.index("         avg:")]
    run = _run(_parse(sysbench.SPEC, cut, "s"))
    assert (run["transactions"], run["latency_min_ms"], run["latency_avg_ms"]) == (295, 1.75, None)
    before_summary = text[: text.index("SQL statistics:")]
    result = _parse(sysbench.SPEC, before_summary, "s")
    assert result.tables["load_interval"].height == 10
    assert [w.reason for w in result.warnings] == ["run 0: no summary (output cut short?)"]
    pg_text = capture_text(POSTGRES_CAPTURE, "capture/app/pgbench.txt")
    pg = _parse(pgbench.SPEC, pg_text[: pg_text.index("latency average")], "p")
    assert (_run(pg)["transactions"], _run(pg)["tps"]) == (311, None)
    pg = _parse(pgbench.SPEC, pg_text[: pg_text.index("transaction type")], "p")
    assert pg.tables["load_interval"].height == 9 and "no summary" in pg.warnings[-1].reason
    # a line cut in the middle is reported, not misread
    half = text[: text.index("[ 5s ]") + 30]
    result = _parse(sysbench.SPEC, half, "s")
    assert result.tables["load_interval"].height == 4
    assert sorted(w.reason.split(":")[0] for w in result.warnings) == ["run 0", "unrecognised interval line"]


@pytest.mark.parametrize("spec", [sysbench.SPEC, pgbench.SPEC], ids=["sysbench", "pgbench"])
def test_junk_is_refused(spec) -> None:
    for junk in ("", "hello\nworld\n", "\x00\x01\x02" * 1000, "[ 1s ] nothing here\n"):
        with pytest.raises(ParseError):
            spec.parse(junk, ParseContext(source="junk"))
        assert spec.detect(junk, "junk") <= 0.5


def test_huge_line_and_many_junk_lines() -> None:
    text = capture_text(MARIADB_CAPTURE, "capture/app/sysbench-run.txt")
    huge = "x" * 1_000_000
    started = time.perf_counter()
    result = _parse(sysbench.SPEC, text.replace("Threads started!\n", f"Threads started!\n{huge}\n[{huge}\n"), "s")
    assert time.perf_counter() - started < 5
    assert _run(result)["transactions"] == 295 and result.tables["load_interval"].height == 10
    assert len(result.warnings) == 2 and all(len(w.reason) < 200 for w in result.warnings)
    pg_text = capture_text(POSTGRES_CAPTURE, "capture/app/pgbench.txt")
    result = _parse(pgbench.SPEC, pg_text.replace("starting vacuum...end.\n", f"{huge}\nprogress: {huge}\n"), "p")
    assert _run(result)["tps"] == 31.216998 and len(result.warnings) == 2
    noisy = _parse(sysbench.SPEC, text + "garbage line\n" * 500, "s")
    assert len(noisy.warnings) == sysbench.MAX_WARNINGS + 1
    assert noisy.warnings[-1].reason == "450 more warnings not shown"


def test_detect_against_every_parser_and_the_corpus(corpus: Path) -> None:
    ours = {"sysbench", "pgbench"}
    others = [spec for spec in PARSERS if spec.kind not in ours]
    for name in SYSBENCH_FIXTURES + PGBENCH_FIXTURES:
        head = (FIXTURES / name).read_text()[:8192]
        mine = SPECS[name.split("-", 1)[0]].detect(head, name)
        assert all(spec.detect(head, name) < mine for spec in others), name
    for path in sorted(corpus.rglob("*")):
        if not path.is_file() or path.name.endswith(".tar.gz"):
            continue
        data = path.read_bytes()
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        head = data[:8192].decode("utf-8", "backslashreplace")
        for spec in SPECS.values():
            assert spec.detect(head, path.name) <= 0.5, (spec.kind, path)
    for capture in CAPTURES:
        claimed = {(kind, name) for kind, name, _ in _loadtest_members(capture)}
        assert claimed <= {("sysbench", "capture/app/sysbench-run.txt"), ("pgbench", "capture/app/pgbench.txt")}
