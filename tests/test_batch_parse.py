"""Small members parsed together (``ParserSpec.parse_batch``) give what each gives alone: the same
rows with their own ``file:line``, and each member its own inventory line (records, warnings, notes,
time range, error); a damaged member costs only itself."""

from __future__ import annotations

import random
import time
from pathlib import Path

import polars as pl
import pytest

from dbdiag.capture import Capture, Member
from dbdiag.native import slowlog_lines
from dbdiag.parsers import mysql_slowlog
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult
from dbdiag.pipeline import analyze_capture
from tests.conftest import CORPUS, corpus_present, skip_without_corpus

SLOWLOGS = CORPUS / "slowlog-mysql"

ENTRY = (
    "# Time: 2024-01-01T00:{minute:02d}:0{second}.000000Z\n"
    "# User@Host: app[app] @ localhost []  Id:     {i}\n"
    "# Query_time: 1.{i:06d}  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: {i}\n"
    "SET timestamp=17040672{minute:02d};\nSELECT c FROM t{table} WHERE id = {i};\n"
)
BANNERS = (
    "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n",
    "mariadbd, Version: 10.11.19-MariaDB-0+deb12u1-log (Debian 12). started with:\n",
    "",
)
# members each of which alone hits a different whole-file choice or damage
ODD = {
    "empty.log": b"",
    "garbage.log": b"garbage\nmore garbage\n",
    "head.log": b"SELECT 1;\n# Time: 2024-01-01T00:00:00Z\n# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSELECT 2;\n",
    "user-first.log": b"# User@Host: a[a] @ h []\n# Query_time: x  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSELECT 3",
    "bom-crlf.log": b"\xef\xbb\xbf# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\r\r\nuse db1;\r\nSELECT 4;\r\n",
    "lone-cr.log": b"# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSELECT 5;\r",
    "cut.log": b"# Time: 2024-01-01T00:00:00Z\n# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\n",
    "not-utf8.log": b"# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSELECT '\xff\xfe';\n",
    "zone-less.log": b"# Time: 240101  8:00:00\n# Query_time: 1  Lock_time: 0 Rows_sent: 1  Rows_examined: 1\nSET timestamp=1704067200;\nSELECT 6;\n",
}


def tiny_log(i: int) -> bytes:
    entries = "".join(ENTRY.format(i=i, minute=i % 60, second=s, table=(i + s) % 7) for s in range(3))
    return (BANNERS[i % len(BANNERS)] + entries).encode()


def members() -> list[tuple[str, bytes]]:
    """A few hundred tiny logs, the odd ones and the corpus' slow logs, shuffled."""
    found = [(f"host-{i}/slow.log", tiny_log(i)) for i in range(200)] + [(f"odd/{n}", d) for n, d in ODD.items()]
    if corpus_present():
        found += [(f"corpus/{p.name}", p.read_bytes()) for p in sorted(SLOWLOGS.iterdir()) if p.stat().st_size < 256 * 1024]
    random.Random(11).shuffle(found)
    return found


def as_compared(result: ParseResult | ParseError) -> object:
    if isinstance(result, ParseError):
        return ("error", str(result))
    tables = {name: (frame.schema, frame.rows()) for name, frame in result.tables.items()}
    return result.records, [w.as_text() for w in result.warnings], result.notes, result.time_range, tables


def alone(data: bytes, ctx: ParseContext) -> ParseResult | ParseError:
    try:
        return mysql_slowlog.parse_bytes(data, ctx)
    except ParseError as error:
        return error


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "polars"])
def test_a_batch_gives_each_member_what_it_gives_alone(kernel: bool, monkeypatch: pytest.MonkeyPatch):
    if not kernel:
        monkeypatch.setattr(slowlog_lines, "line_scan", lambda: None)
    found = members() if kernel else members()[::4]  # the polars path is slower alone
    items = [(data, ParseContext(source=path, tz="Europe/Paris")) for path, data in found]
    batch = mysql_slowlog.parse_batch(items)
    assert len(batch) == len(items)
    for (data, ctx), result in zip(items, batch):
        assert as_compared(result) == as_compared(alone(data, ctx)), ctx.source
    if kernel:
        assert {type(r).__name__ for r in batch} == {"ParseResult", "ParseError"}  # both kinds were exercised
    lines = {r.tables["statement"]["line"].max() for r in batch if isinstance(r, ParseResult)}
    assert max(lines) < 1000  # each member's own line numbers, not the joined text's


def test_the_pipeline_batches_and_keeps_one_inventory_line_per_member():
    found = [(path, data) for path, data in members() if not path.startswith("corpus/")]
    batched = analyze_capture(Capture("c", "directory", [Member(p, d, len(d), None, None) for p, d in found]))
    by_path = {record.path: record for record in batched.inputs}
    statements = batched.tables["statement"]
    for path, data in found:
        record, expected = by_path[path], alone(data, ParseContext(source=path))
        if record.kind != "mysql-slowlog":
            continue  # detected as something else (the odd ones), or not at all
        if isinstance(expected, ParseError):
            assert record.error == str(expected), path
            continue
        assert (record.records, record.error, record.time_range) == (expected.records, None, expected.time_range), path
        assert record.warnings == [w.as_text() for w in expected.warnings], path
        mine = statements.filter(pl.col("source") == path).select("source", "line", "sql", "end_ts")
        assert mine.rows() == expected.tables["statement"].select("source", "line", "sql", "end_ts").rows(), path
    order = [p for p, _ in found if by_path[p].records]
    assert list(dict.fromkeys(statements["source"].to_list())) == order  # in capture order


def test_a_member_that_breaks_the_batch_costs_only_itself(monkeypatch: pytest.MonkeyPatch):
    real = mysql_slowlog.parse_bytes

    def fragile(data: bytes, ctx: ParseContext) -> ParseResult:
        if b"boom" in data:
            raise pl.exceptions.PanicException("index out of bounds")
        return real(data, ctx)

    def batch_of_fragile(items):  # a batch parse that dies on one member, as a native panic would
        if any(b"boom" in data for data, _ in items):
            raise pl.exceptions.PanicException("index out of bounds")
        return mysql_slowlog.parse_batch(items)

    spec = mysql_slowlog.SPEC.__class__(**{**mysql_slowlog.SPEC.__dict__, "parse_bytes": fragile, "parse_batch": batch_of_fragile})
    found = [(f"h{i}/slow.log", tiny_log(i)) for i in range(20)]
    found.insert(7, ("bad/slow.log", tiny_log(99).replace(b"SELECT c", b"SELECT boom")))
    analysis = analyze_capture(
        Capture("c", "directory", [Member(p, d, len(d), None, None) for p, d in found]), parsers=(spec,)
    )
    errors = {r.path: r.error for r in analysis.inputs if r.error}
    assert errors == {"bad/slow.log": "parser mysql-slowlog failed: PanicException: index out of bounds"}
    good = [alone(d, ParseContext(source=p)) for p, d in found if p != "bad/slow.log"]
    assert [r.records for r in analysis.inputs if not r.error] == [r.records for r in good]


def test_thousands_of_tiny_slow_logs_do_not_cost_a_parse_each():
    items = [(tiny_log(i), ParseContext(source=f"h{i}/slow.log")) for i in range(2000)]
    started = time.perf_counter()
    results = mysql_slowlog.parse_batch(items)
    elapsed_s = time.perf_counter() - started
    assert [r.records for r in results] == [alone(d, c).records for d, c in items[:3]] * 666 + [alone(*items[0]).records] * 2
    assert elapsed_s < 20  # measured ~0.5 s; one parse each took ~50 s (25 ms x 2000)


TIDB_SLOWLOGS = CORPUS / "slowlog-tidb"
TIDB_ENTRY = (
    "# Time: 2024-01-01T00:{minute:02d}:0{second}.000000+08:00\n# Txn_start_ts: 4460000000000{i:05d}\n"
    "# User@Host: root[root] @ 10.0.0.1 [10.0.0.1]\n# Conn_ID: {i}\n# Query_time: 1.{i}\n# DB: test\n# Succ: true\n"
    "SELECT c FROM t WHERE id = {i};\n"
)
TIDB_ODD = {
    "empty.log": b"",
    "junk-first.log": b"junk\n# Time: 2024-01-01T00:00:00Z\n# Query_time: 1\nselect 1;\n",
    "cut.log": b"# Time: 2024-01-01T00:00:00Z\n# Query_time: zz\n# Plan: tidb_decode_plan('xx')\n",
    "bom-cr.log": b"\xef\xbb\xbf# Time: 2024-01-01T00:00:00Z\r\n# Query_time: 1\r\n# Txn_start_ts: 1\r\nselect 3;\r",
}


def tidb_members() -> list[tuple[str, bytes]]:
    found = [(f"tidb-10.0.0.{i}/tidb_slow_query.log", "".join(TIDB_ENTRY.format(i=i, minute=i % 60, second=s)
              for s in range(3)).encode()) for i in range(200)]
    found += [(f"odd/{n}", d) for n, d in TIDB_ODD.items()]
    if corpus_present():
        found += [(f"corpus/{p.name}", p.read_bytes()) for p in sorted(TIDB_SLOWLOGS.glob("*.log"))]
    random.Random(5).shuffle(found)
    return found


def test_a_tidb_batch_gives_each_member_what_it_gives_alone():
    from dbdiag.parsers import tidb_slowlog
    from dbdiag.parsers.base import decode_text

    items = [(data, ParseContext(source=path, tz="Asia/Shanghai")) for path, data in tidb_members()]
    for (data, ctx), result in zip(items, tidb_slowlog.parse_batch(items)):
        try:
            expected: ParseResult | ParseError = tidb_slowlog.parse(decode_text(data), ctx)
        except ParseError as error:
            expected = error
        assert as_compared(result) == as_compared(expected), ctx.source


@pytest.mark.parametrize("kind", ["mysql", "tidb"])
def test_mutated_members_give_in_a_batch_what_they_give_alone(kind: str):
    """Truncations, bit flips, blank lines, CRLF, bad UTF-8, extreme values (tests/fuzz_mutations.py)
    of the corpus' logs, joined in one batch (split in halves where it fails, as the pipeline does)."""
    from tests.fuzz_mutations import apply_steps, random_steps

    from dbdiag.parsers import tidb_slowlog
    from dbdiag.parsers.base import decode_text

    folder = SLOWLOGS if kind == "mysql" else TIDB_SLOWLOGS
    if not corpus_present():
        skip_without_corpus()
    seeds = [p.read_bytes()[:20_000] for p in sorted(folder.iterdir()) if p.suffix in (".log", ".txt")]
    rng = random.Random(29)
    items = []
    for i in range(60):
        steps = [s for s in random_steps(rng) if s.kind != "huge_line"]
        items.append((apply_steps(rng.choice(seeds), steps)[:200_000], ParseContext(source=f"m{i}/slow.log", tz="Europe/Paris")))
    parser = mysql_slowlog if kind == "mysql" else tidb_slowlog

    def one(data: bytes, ctx: ParseContext) -> object:
        try:
            return shown(mysql_slowlog.parse_bytes(data, ctx) if kind == "mysql" else tidb_slowlog.parse(decode_text(data), ctx))
        except (Exception, pl.exceptions.PanicException) as error:  # noqa: BLE001 - compared, not hidden
            return ("failed", type(error).__name__) if not isinstance(error, ParseError) else ("error", str(error))

    def together(part: list) -> list:
        try:
            return [shown(r) if isinstance(r, ParseResult) else ("error", str(r)) for r in parser.parse_batch(part)]
        except (Exception, pl.exceptions.PanicException):  # noqa: BLE001 - the pipeline splits the batch then
            if len(part) == 1:
                return [one(*part[0])]
            return together(part[: len(part) // 2]) + together(part[len(part) // 2 :])

    for (data, ctx), result in zip(items, together(items)):
        assert result == one(data, ctx), ctx.source


def shown(result: ParseResult) -> object:
    """``as_compared`` with every cell as text (NaN equals NaN; times past year 9999 have no Python form)."""
    tables = {name: (f.schema, f.select(pl.all().cast(pl.String)).rows()) for name, f in result.tables.items()}
    return result.records, [w.as_text() for w in result.warnings], result.notes, str(result.time_range), tables


def test_an_mpstat_batch_gives_each_member_what_it_gives_alone():
    """Corpus outputs (several banners, -A, -T, -U, 12 h clocks...), mutated ones and tiny ones."""
    from tests.fuzz_mutations import apply_steps, random_steps

    from dbdiag.parsers import mpstat_text
    from dbdiag.parsers.base import decode_text

    folder = CORPUS / "mpstat"
    seeds = [p.read_bytes()[:30_000] for p in sorted(folder.glob("*.txt")) + sorted(folder.glob("*.out"))] if corpus_present() else []
    tiny = (
        "Linux 5.10.0-28-amd64 (host-{i}) \t01/01/24 \t_x86_64_\t(2 CPU)\n\n"
        "00:00:01     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
        "00:00:02     all    {i}.00    0.00    1.84    0.12    0.34    0.19    0.00    0.00    0.00   90.00\n"
    )
    found = [tiny.format(i=i).encode() for i in range(100)] + seeds + [b"", b"junk\n10:00:01 all 1 2\n"]
    rng = random.Random(17)
    for _ in range(40 if seeds else 0):
        found.append(apply_steps(rng.choice(seeds), [s for s in random_steps(rng) if s.kind != "huge_line"])[:100_000])
    items = [(data, ParseContext(source=f"h{i}/mpstat.txt", tz="Europe/Paris")) for i, data in enumerate(found)]

    def one(data: bytes, ctx: ParseContext) -> object:
        try:
            return shown(mpstat_text.parse(decode_text(data), ctx))
        except ParseError as error:
            return ("error", str(error))

    for (data, ctx), result in zip(items, mpstat_text.parse_batch(items)):
        assert (shown(result) if isinstance(result, ParseResult) else ("error", str(result))) == one(data, ctx), ctx.source


def test_a_perf_script_batch_gives_each_member_what_it_gives_alone():
    from tests.fuzz_mutations import apply_steps, random_steps

    from dbdiag.parsers import perf_script

    folder = CORPUS / "perf"
    seeds = [p.read_bytes()[:40_000] for p in sorted(folder.glob("flamegraph*"))] if corpus_present() else []
    tiny = "mysqld {pid} [001] 3014{i}.000001: cpu-clock: \n\tffffffff81001408 xen_hypercall ([kernel.kallsyms])\n\t7f0a1b row_search_mvcc (/usr/sbin/mysqld)\n\n"
    found = [tiny.format(pid=1000 + i % 7, i=i).encode() for i in range(100)] + seeds + [b"", b"junk\n\tffff x (y)\n", b"a 1 x:\r\n"]
    rng = random.Random(23)
    for _ in range(30 if seeds else 0):
        mutant = apply_steps(rng.choice(seeds), [s for s in random_steps(rng) if s.kind != "huge_line"])[:100_000]
        if b"4294967296" not in mutant:  # a tid past 2^31 fails the member alone too (a batch is then split)
            found.append(mutant)
    items = [(data, ParseContext(source=f"h{i}/perf.out")) for i, data in enumerate(found)]

    def one(data: bytes, ctx: ParseContext) -> object:
        try:
            return shown(perf_script.parse_bytes(data, ctx))
        except ParseError as error:
            return ("error", str(error))

    for (data, ctx), result in zip(items, perf_script.parse_batch(items)):
        assert (shown(result) if isinstance(result, ParseResult) else ("error", str(result))) == one(data, ctx), ctx.source


PG_LOGS = CORPUS / "postgres"
PG_LINE = "2024-01-01 00:{minute:02d}:0{second}.000 UTC [{pid}] app@db LOG:  duration: 1{i}.000 ms  statement: SELECT {s} FROM t WHERE id = {i}\n"
# members that each, alone, take a path of their own; several share a pid with the logs around them
PG_ODD = {
    "empty.log": b"",
    "blank.log": b"  \n\t\n",
    "junk.log": b"no log here\nnor here\n",
    "foreign.log": "2024-01-01 00:00:00 UTC [1] LOG:  durée : 0.285 ms, instruction : SELECT 1\n"
    "2024-01-01 00:00:01 UTC [1] LOG:  durée : 0.1 ms, instruction : SELECT 2\n".encode(),
    "orphans-first.log": b"\tcontinued from the log before\nmore\n2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\n",
    "sub-entry-first.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db STATEMENT:  SELECT orphan\n"
    b"2024-01-01 00:00:01.000 UTC [4001] app@db ERROR:  division by zero\n2024-01-01 00:00:01.000 UTC [4001] app@db STATEMENT:  SELECT 1/0\n",
    "log-statement-open.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  statement: SELECT pg_sleep(1)\n",
    "bare-duration-first.log": b"2024-01-01 00:00:02.000 UTC [4001] app@db LOG:  duration: 1000.000 ms\n"
    b"2024-01-01 00:00:03.000 UTC [4001] app@db LOG:  statement: SELECT 2\n2024-01-01 00:00:03.500 UTC [4001] app@db LOG:  duration: 0.500 ms\n",
    "events.log": b"2024-01-01 00:00:00.000 UTC [10] LOG:  database system is ready to accept connections\n"
    b"2024-01-01 00:00:05.000 UTC [10] LOG:  received fast shutdown request\n2024-01-01 00:00:06.000 UTC [10] LOG:  database system is shut down\n",
    "lock.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  process 4001 still waiting for ShareLock on transaction 7 after 1000.071 ms\n"
    b"2024-01-01 00:00:00.000 UTC [4001] app@db DETAIL:  Process holding the lock: 4002. Wait queue: 4001.\n"
    b"2024-01-01 00:00:00.000 UTC [4001] app@db STATEMENT:  UPDATE t SET a = 1 WHERE id = 1\n",
    "plan.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 17.304 ms  plan:\n\tQuery Text: SELECT count(*) FROM t\n"
    b"\tAggregate  (cost=1.01..1.02 rows=1 width=8) (actual time=0.010..0.010 rows=1 loops=1)\n"
    b"\t  ->  Seq Scan on t  (cost=0.00..1.01 rows=1 width=0) (actual time=0.005..0.006 rows=1 loops=1)\n"
    b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 17.400 ms  statement: SELECT count(*) FROM t\n",
    "unmatched.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\n"
    b"2024-01-01 00:00:01 [4001] other shape LOG:  duration: 2.000 ms  statement: SELECT 2\n",
    "no-time.log": b"[4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\n[4001] app@db LOG:  duration: 2.000 ms  statement: SELECT 2\n",
    "crlf-not-utf8.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT '\xff'\r\n",
    "lone-cr.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\r",
    "unusable.log": b"2024-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: nan ms  statement: SELECT 1\n"
    b"2024-01-01 00:00:01.000 UTC [4001] app@db LOG:  duration: 2.000 ms  statement: SELECT 2\n",
    "cest.log": b"2024-07-01 10:00:00.000 CEST [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\n",
    "year-0.log": b"0000-01-01 00:00:00.000 UTC [4001] app@db LOG:  duration: 1.000 ms  statement: SELECT 1\n"
    b"2024-01-01 00:00:05.000 UTC [10] LOG:  checkpoint starting: time\n",
    "logplex.log": b"2019-03-14T00:23:00+00:00 app[postgres.4849]: [GREEN] [19-1]  sql_error_code = 00000 LOG:  duration: 1.000 ms  statement: SELECT 1\n"
    b"2019-03-14T00:23:01+00:00 app[postgres.4849]: [GREEN] [20-1]  sql_error_code = 00000 LOG:  duration: 2.000 ms  statement: SELECT 2\n",
}


def pg_members() -> list[tuple[str, bytes]]:
    """Tiny PostgreSQL logs of two prefixes (their pids shared with the odd ones), the odd ones and the
    corpus' stderr logs, shuffled."""
    found = [(f"host-{i}/postgresql.log", "".join(PG_LINE.format(i=i, minute=i % 60, second=s, pid=4000 + i % 3, s=s)
              for s in range(3)).encode()) for i in range(120)]
    found += [(f"plain-{i}/postgresql.log", "".join(PG_LINE.replace(" app@db", "").format(i=i, minute=i % 60, second=s, pid=4001, s=s)
              for s in range(2)).encode()) for i in range(30)]
    found += [(f"odd/{n}", d) for n, d in PG_ODD.items()] * 2
    if corpus_present():
        found += [(f"corpus/{p.name}", p.read_bytes()) for p in sorted(PG_LOGS.glob("*.log")) if p.stat().st_size < 256 * 1024]
    random.Random(3).shuffle(found)
    return found


def pg_alone(data: bytes, ctx: ParseContext) -> object:
    from dbdiag.parsers import pg_stderr

    try:
        return shown(pg_stderr.parse_bytes(data, ctx))
    except ParseError as error:
        return ("error", str(error))


def test_a_postgres_batch_gives_each_member_what_it_gives_alone():
    from dbdiag.parsers import pg_stderr

    items = [(data, ParseContext(source=path, tz="Europe/Paris")) for path, data in pg_members()]
    results = pg_stderr.parse_batch(items)
    assert len(results) == len(items)
    for (data, ctx), result in zip(items, results):
        assert (shown(result) if isinstance(result, ParseResult) else ("error", str(result))) == pg_alone(data, ctx), ctx.source


def test_mutated_postgres_logs_give_in_a_batch_what_they_give_alone():
    from tests.fuzz_mutations import apply_steps, random_steps

    from dbdiag.parsers import pg_stderr

    if not corpus_present():
        skip_without_corpus()
    seeds = [p.read_bytes()[:20_000] for p in sorted(PG_LOGS.glob("*.log"))] + list(PG_ODD.values())
    rng = random.Random(41)
    items = []
    for i in range(80):
        steps = [s for s in random_steps(rng) if s.kind != "huge_line"]
        items.append((apply_steps(rng.choice(seeds), steps)[:200_000], ParseContext(source=f"m{i}/postgresql.log", tz="Europe/Paris")))
    for (data, ctx), result in zip(items, pg_stderr.parse_batch(items)):
        assert (shown(result) if isinstance(result, ParseResult) else ("error", str(result))) == pg_alone(data, ctx), ctx.source


def test_the_pipeline_reads_small_postgres_logs_together(monkeypatch: pytest.MonkeyPatch):
    """Through the pipeline: each small log keeps its own inventory line (records, error, warnings,
    time range), and they are read as one (the wrapped ones and shapes of their own aside)."""
    from dbdiag.parsers import pg_stderr

    found = [(path, data) for path, data in pg_members() if not path.startswith("corpus/")]
    from dbdiag.timebounds import within_time_bounds  # as the pipeline applies it to every result

    expected = {path: within_time_bounds(pg_stderr.parse_bytes(data, ParseContext(source=path))) if data.strip() else None
                for path, data in found if path != "odd/junk.log"}
    read_together = []
    real = pg_stderr._read_logs
    monkeypatch.setattr(pg_stderr, "_read_logs", lambda texts, *rest: read_together.append(len(texts)) or real(texts, *rest))
    analysis = analyze_capture(Capture("c", "directory", [Member(p, d, len(d), None, None) for p, d in found]))
    assert max(read_together) >= 120 and len(read_together) < 40  # the 120 tiny logs of one prefix in one reading
    by_path = {record.path: record for record in analysis.inputs}
    compared = 0
    for path, result in expected.items():
        record = by_path[path]
        if record.kind != "postgresql-log" or result is None:
            continue
        assert (record.records, record.error, record.time_range) == (result.records, None, result.time_range), path
        assert record.warnings == [w.as_text() for w in result.warnings], path
        compared += 1
    assert compared > 150


CSV_LINE = ('2024-01-01 00:00:0{s}.000 UTC,"app","db",{pid},"[local]",6b0c9056.cf5,{s},"SELECT",2024-01-01 00:00:00 UTC,3/7,0,'
            'LOG,00000,"{message}",,,,,,,,,"psql","client backend",,0\n')
JSON_LINE = ('{{"timestamp":"2024-01-01 00:00:0{s}.000 UTC","user":"app","dbname":"db","pid":{pid},"session_id":"6b0c9056.cf5",'
             '"error_severity":"LOG","message":"{message}","application_name":"psql"}}\n')


def _structured_members(kind: str) -> list[tuple[str, bytes]]:
    """Tiny csvlogs/jsonlogs sharing one session id (opened in one log, closed in the next), the
    corpus' and the real capture's logs of the kind, and mutations of them."""
    from tests.fuzz_mutations import apply_steps, random_steps
    from tests.parsers.test_postgres import PG15_CSVLOG, PG15_JSONLOG, _read

    line = CSV_LINE if kind == "csv" else JSON_LINE
    messages = ["duration: 1.500 ms  statement: SELECT 1", "statement: SELECT 2", "duration: 2.000 ms",
                "database system is ready to accept connections"]
    found = [(f"h{i}/postgresql.{kind}", "".join(line.format(s=s, pid=4000 + i % 2, message=messages[(i + s) % 4])
              for s in range(2)).encode()) for i in range(60)]
    seeds = [(PG15_CSVLOG if kind == "csv" else PG15_JSONLOG).encode(), b"", b"junk\n"]
    if corpus_present():
        names = ("pgbadger__pg_rawcsv.log", "pgbadger__csv_statement_without_duration.log") if kind == "csv" else ("pgbadger__cnpg.log.gz",)
        seeds += [_read(PG_LOGS / name).encode() for name in names]
    rng = random.Random(23)
    mutants = [apply_steps(rng.choice(seeds), [s for s in random_steps(rng) if s.kind != "huge_line"])[:100_000] for _ in range(40)]
    found += [(f"s{i}/postgresql.{kind}", d) for i, d in enumerate(seeds + mutants)]
    random.Random(4).shuffle(found)
    return found


@pytest.mark.parametrize("kind", ["csv", "json"])
def test_a_csvlog_or_jsonlog_batch_gives_each_member_what_it_gives_alone(kind: str):
    from dbdiag.parsers import pg_csvlog, pg_jsonlog
    from dbdiag.parsers.base import decode_text

    parser = pg_csvlog if kind == "csv" else pg_jsonlog
    items = [(data, ParseContext(source=path, tz="Europe/Paris")) for path, data in _structured_members(kind)]

    def one(data: bytes, ctx: ParseContext) -> object:
        try:
            return shown(parser.parse(decode_text(data), ctx))
        except ParseError as error:
            return ("error", str(error))

    results = parser.parse_batch(items)
    assert sum(isinstance(r, ParseResult) and r.records > 0 for r in results) > 40
    for (data, ctx), result in zip(items, results):
        assert (shown(result) if isinstance(result, ParseResult) else ("error", str(result))) == one(data, ctx), ctx.source
