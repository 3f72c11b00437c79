"""PostgreSQL stderr log, csvlog and jsonlog parsers: corpus goldens, the real pgbench capture, auto_explain
plans, prefix inference, statement pairing rules and hostile input.

Besides the shared corpus, the tests use short logs written by PostgreSQL 15.18 (Debian 12) on a
development machine (the ``PG15_*`` constants at the end): pgbench ``-M extended`` for one
transaction, then psql sessions with auto_explain (log_min_duration 5 ms, log_analyze, text then
JSON format), a multi-line statement, failed statements, a session with log_statement=all +
log_duration and ``log_nested_statements`` (a SQL function), and one with lc_messages=fr_FR. The
same server wrote the stderr, csvlog and jsonlog files at once, so the three must agree.
"""

from __future__ import annotations

import bz2
import gzip
import re
import tarfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag import tables as T
from dbdiag.detect import detect as detect_member
from dbdiag.parsers import PARSERS as REGISTRY
from dbdiag.parsers import pg_assemble, pg_csvlog, pg_explain, pg_jsonlog, pg_lines, pg_messages, pg_prefix, pg_stderr
from dbdiag.parsers.kit import lines as kit_lines
from dbdiag.parsers.kit.lines import split_lines
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult
from tests.conftest import CORPUS

SPECS = {spec.kind: spec for spec in (pg_stderr.SPEC, pg_csvlog.SPEC, pg_jsonlog.SPEC)}
PG_DIR = CORPUS / "postgres"
CAPTURE = CORPUS / "captures" / "postgres-pgbench-debian12.tar.gz"

# Every corpus file, the parser that reads it and its statement count, counted by hand:
EXPECTED = {
    # 8 rows: 5 "duration ... execute" + 3 bind phases (not statements)
    "pgbadger__anonymize.log": ("postgresql-csvlog", 5),
    # 400 "duration ... statement" records + 4 ERROR records with a query
    "pgbadger__cnpg.log.gz": ("postgresql-jsonlog", 404),
    # one "duration ... execute", one "statement:" without duration
    "pgbadger__csv_statement_without_duration.log": ("postgresql-csvlog", 2),
    # 629 "duration ... statement" lines
    "pgbadger__light.postgres.log.bz2": ("postgresql-log", 629),
    # 4 "duration ... statement/execute" + the deadlock ERROR with its STATEMENT
    "pgbadger__logplex.gz": ("postgresql-log", 5),
    # 3 statement + 2 execute durations; 3 parse/bind phases
    "pgbadger__multiline_param.log": ("postgresql-log", 5),
    "pgbadger__pg-timezones.log": ("postgresql-log", 2),
    # no durations: 2 ERROR + STATEMENT (the FATAL at startup has no statement)
    "pgbadger__pg_rawcsv.log": ("postgresql-log", 2),
    # autovacuum/autoanalyze only: no statements, said in a note
    "pgbadger__pg_vacuums.json.gz": ("postgresql-jsonlog", 0),
    "pgbadger__postgresql_param_range.log": ("postgresql-log", 3),
    # 20 "duration ... statement" + 3 ERROR with STATEMENT
    "pgbadger__queryid.log.gz": ("postgresql-log", 23),
    "pgbadger__stmt_type.log": ("postgresql-log", 12),
    "pgbadger__tempfile_only.log.gz": ("postgresql-log", 65),
    "pgbadger__weeknumber.log": ("postgresql-csvlog", 6),
    # auto_explain alone: the plan is the statement
    "postgres-docs__auto-explain_example.log": ("postgresql-log", 1),
}
PREFIXES = {
    "pgbadger__light.postgres.log.bz2": "%t [%p]: [%l-1] user=%u,db=%d,app=%a,client=%h ",
    "pgbadger__logplex.gz": " sql_error_code = %e ",
    "pgbadger__multiline_param.log": "%m [%p] user=%u,db=%d ",
    "pgbadger__pg-timezones.log": "%t:%h:%u@%d:[%p]:",
    "pgbadger__pg_rawcsv.log": "%m [%p] %q%u@%d ",
    "pgbadger__postgresql_param_range.log": "%t [%p]: [%l-1] [%x] usr=%u,db=%d,appli=%a ",
    "pgbadger__queryid.log.gz": "%m [%p] [queryid=%Q] %u@%d ",
    "pgbadger__stmt_type.log": "%m [%p] ",
    "pgbadger__tempfile_only.log.gz": "%t [%p]: [%l-1] user=%u,db=%d ",
}


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _read(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".gz"):
        data = gzip.decompress(data)
    elif path.name.endswith(".bz2"):
        data = bz2.decompress(data)
    return data.decode("utf-8", "backslashreplace")


def _capture_member(name: str) -> str:
    with tarfile.open(CAPTURE, "r:gz") as tar:
        return tar.extractfile(f"capture/{name}").read().decode("utf-8", "backslashreplace")


def _parse(kind: str, text: str, source: str = "test", tz: str = "UTC") -> ParseResult:
    return SPECS[kind].parse(text, ParseContext(source=source, tz=tz))


def _statements(result: ParseResult) -> pl.DataFrame:
    return result.tables[T.STATEMENT]


# ---- corpus -----------------------------------------------------------------------------------------


def test_every_corpus_file_has_an_expectation() -> None:
    assert sorted(p.name for p in PG_DIR.iterdir()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_statement_counts(name: str) -> None:
    """Counts and detection in full (the goldens, parser cases, keep the first rows)."""
    kind, statements = EXPECTED[name]
    text = _read(PG_DIR / name)
    head = text[:8192].replace("\r\n", "\n")
    scores = {k: spec.detect(head, name) for k, spec in SPECS.items()}
    assert scores[kind] > 0.5 and all(v <= 0.5 for k, v in scores.items() if k != kind), scores
    result = _parse(kind, text, source=f"postgres/{name}")
    assert result.records == statements == _statements(result).height
    assert _statements(result)["sql"].null_count() == 0
    if statements == 0:
        assert any(n.startswith("no statements:") and "'automatic vacuum' x2094" in n for n in result.notes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_detected_in_the_registry(name: str) -> None:
    data = (PG_DIR / name).read_bytes()
    data = gzip.decompress(data) if name.endswith(".gz") else bz2.decompress(data) if name.endswith(".bz2") else data
    assert detect_member(data, name, REGISTRY).spec.kind == EXPECTED[name][0]


@pytest.mark.parametrize("name", sorted(PREFIXES))
def test_prefix_inferred_for_corpus_logs(name: str) -> None:
    result = _parse("postgresql-log", _read(PG_DIR / name))
    assert f"log_line_prefix looks like {PREFIXES[name]!r}" in result.notes
    assert result.warnings == []


def test_corpus_values() -> None:
    logplex = _statements(_parse("postgresql-log", _read(PG_DIR / "pgbadger__logplex.gz")))
    deadlock = logplex.filter(~pl.col("success")).row(0, named=True)
    assert (deadlock["conn_id"], deadlock["error_code"], deadlock["end_ts"]) == ("4849", "40P01", _utc(2019, 3, 14, 0, 23))
    assert deadlock["query_time_s"] is None and deadlock["sql"].startswith("WITH redacted_table as (")
    multi_line = logplex.filter(pl.col("conn_id") == "5925").row(0, named=True)  # [921320-1..6]: one statement
    assert multi_line["query_time_s"] == pytest.approx(85.756273) and multi_line["prepared"]
    assert multi_line["sql"].startswith('UPDATE "checkers" SET redundant_missions_count =\n        (')

    msk = _statements(_parse("postgresql-log", _read(PG_DIR / "pgbadger__stmt_type.log"))).row(0, named=True)
    assert msk["end_ts"] == _utc(2019, 10, 21, 9, 3, 31, 311000)  # 12:03:31.311 MSK = UTC+3
    assert msk["start_ts"] == msk["end_ts"] - timedelta(microseconds=7)

    queryid = _statements(_parse("postgresql-log", _read(PG_DIR / "pgbadger__queryid.log.gz")))
    first = queryid.row(1, named=True)
    assert first["digest"] == "4266247047529477710" and first["sql"].startswith('SELECT n.nspname as "Schema",\n  c.relname')
    assert first["sql"].endswith("ORDER BY 1,2;")  # TAB continuation lines joined, their TAB removed
    assert queryid.filter(pl.col("digest") == "-8112313845396740087").height == 1

    params = _statements(_parse("postgresql-log", _read(PG_DIR / "pgbadger__multiline_param.log")))
    assert params.filter(pl.col("prepared")).height == 2
    assert not params["sql"].str.contains("njchar").any()  # DETAIL parameters stay out of the SQL

    range_log = _parse("postgresql-log", _read(PG_DIR / "pgbadger__postgresql_param_range.log"))
    assert _statements(range_log)["end_ts"].to_list()[0] == _utc(2023, 3, 7, 8, 6, 8)  # CET, out of order lines
    assert _statements(range_log)["txn_id"].to_list() == [None, None, None]  # %x is 0: no xid

    cnpg = _parse("postgresql-jsonlog", _read(PG_DIR / "pgbadger__cnpg.log.gz"))
    assert "entries are written newest first; paired in time order" in cnpg.notes
    failed = _statements(cnpg).filter(~pl.col("success"))
    assert failed.height == 4 and "42703" in failed["error_code"].to_list()
    assert any("47 operator or other JSON lines skipped" in w.as_text() for w in cnpg.warnings)

    csv_rows = _statements(_parse("postgresql-csvlog", _read(PG_DIR / "pgbadger__csv_statement_without_duration.log")))
    slow, health = csv_rows.rows(named=True)
    assert slow["query_time_s"] == pytest.approx(688.786283) and slow["prepared"] and slow["conn_id"] == "00000001.000003e9"
    assert health["query_time_s"] is None and health["start_ts"] == _utc(2026, 5, 16, 5, 20, 3, 994000)

    anonymized = _statements(_parse("postgresql-csvlog", _read(PG_DIR / "pgbadger__anonymize.log")))
    assert anonymized["query_time_s"].sum() == pytest.approx(0.02612 + 0.00024 + 0.036388 + 0.021083 + 1.221083)
    assert anonymized["line"].to_list() == [1, 2, 4, 6, 8]  # bind rows 3, 5, 7 are phases


# ---- the real pgbench capture -------------------------------------------------------------------


def test_real_capture_counts_every_executed_statement_once() -> None:
    text = _capture_member("db/postgresql.log")
    pgbench = _capture_member("app/pgbench.txt")
    transactions = int(re.search(r"number of transactions actually processed: (\d+)", pgbench).group(1))
    # log_min_duration_statement = 0: one "duration: X ms  statement: ..." line per statement. This
    # capture has no auto_explain entry (no "plan:"), so there is no duplicate to pair away, no
    # parse/bind phase (pgbench ran in simple query mode) and no failed statement.
    durations = sum(1 for line in text.split("\n") if " LOG:  duration: " in line)
    assert "plan:" not in text and " ERROR:  " not in text and "query mode: simple" in pgbench
    result = _parse("postgresql-log", text, source="capture/db/postgresql.log")
    rows = _statements(result)
    assert result.records == durations == rows.height == 2254
    assert result.tables[T.PLAN_NODE].is_empty() and result.warnings == []
    assert "log_line_prefix looks like '%m [%p] %q%u@%d '" in result.notes
    for pattern in (r"^BEGIN;$", r"^UPDATE pgbench_accounts ", r"^SELECT abalance ", r"^UPDATE pgbench_tellers ",
                    r"^UPDATE pgbench_branches ", r"^INSERT INTO pgbench_history ", r"^END;$"):
        assert rows.filter(pl.col("sql").str.contains(pattern)).height == transactions == 311, pattern
    create = rows.row(0, named=True)
    assert (create["sql"], create["query_time_s"], create["conn_id"], create["user"], create["db"]) == (
        "CREATE DATABASE bench", 0.111924, "21690", "postgres", "postgres")
    assert create["end_ts"] == _utc(2026, 11, 29, 19, 12, 26, 180000)
    assert create["start_ts"] == create["end_ts"] - timedelta(microseconds=111924)
    assert rows["engine"].unique().to_list() == ["postgresql"] and rows["success"].all()
    assert rows.filter(pl.col("conn_id").is_in(["21714", "21715", "21716", "21717"])).height == 311 * 7


def test_chunked_and_parallel_reads_give_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _capture_member("db/postgresql.log") * 3
    whole = _statements(_parse("postgresql-log", text))
    monkeypatch.setattr(pg_stderr, "CHUNK_CHARS", 100_000)
    monkeypatch.setattr(kit_lines, "CSV_READER_MIN_CHARS", 10_000)
    prefix = pg_stderr.infer_prefix(text.split("\n")[:3000])
    bounds = pg_stderr._chunk_bounds(text, len(text) - 1, prefix, None)
    assert len(bounds) > 5 and all(text[start:start + 4] == "2026" and text[start - 1] == "\n" for start, _ in bounds[1:])
    chunked = _statements(_parse("postgresql-log", text))
    assert chunked.height == 3 * 2254
    assert chunked.equals(whole)


# ---- fast paths: raw bytes, keyed leads, exact seconds ------------------------------------------------

# Lines of the '%m [%p] %q%u@%d ' prefix that the keyed reading must hand to the prefix regexes, or
# read as they do: odd times and zones, one space or blanks after the severity, a colon in a name,
# names that are not ASCII, a word that is not a severity, background lines (%q), continuations.
ODD_LINES = (
    "2026-11-29 20:51:34.4581 UTC [3317] postgres@bench LOG:  duration: 1.000 ms  statement: SELECT 'four digits'",
    "2026-11-29 20:51:34.45 UTC [3317] postgres@bench LOG:  duration: 1.000 ms  statement: SELECT 'two digits'",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG: duration: 1.000 ms  statement: SELECT 'one space'",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:   \t duration: 1.000 ms  statement: SELECT 'blanks'",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@bench FOO:  not a severity",
    "2026-11-29 20:51:34.458 UTC [3317] p\u00f8stgres@b\u00e9nch LOG:  duration: 1.000 ms  statement: SELECT 'not ASCII'",
    "2026-11-29 20:51:34.458 UTC [3317] post:gres@bench LOG:  duration: 1.000 ms  statement: SELECT 'colon'",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@be:  nch LOG:  duration: 1.000 ms  statement: SELECT 'cut early'",
    "2026-11-29 20:51:34.458 UTC [3317] LOG:@x ERROR:  a user named LOG:",
    "2026-11-29 20:51:34.458 UTC [3317] LOG:  checkpoint starting: time",
    "2026-11-29 20:51:34.458 CEST [3317] postgres@bench LOG:  duration: 2.000 ms  statement: SELECT 'cest'",
    "2026-11-29 20:51:34.458 +05:30 [3317] postgres@bench LOG:  duration: 2.000 ms  statement: SELECT 'offset'",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:  ",
    "2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:",
    "2026-11-29T20:51:34.458 UTC [3317] postgres@bench LOG:  a T in the time",
    "2026-13-29 20:51:34.458 UTC [3317] postgres@bench LOG:  duration: 1.000 ms  statement: SELECT 'month 13'",
    "x2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:  junk before the time",
    "\t  FROM pgbench_accounts a",
)


def test_keyed_leads_read_lines_as_the_prefix_regexes_do() -> None:
    text = PG15_STDERR + "\n".join(ODD_LINES) + "\n" + PG15_STDERR
    prefix = pg_stderr.infer_prefix(text.split("\n"))
    assert prefix.template == "%m [%p] %q%u@%d " and prefix.keyed is not None and prefix.keyed.short_regex
    lines = split_lines(text[:-1])
    keyed_starts, keyed_rest = pg_lines.keyed_starts(lines, prefix)
    starts, rest = pg_lines.scanned_starts(lines, prefix, None)
    assert keyed_starts.select(sorted(starts.columns)).equals(starts.select(sorted(starts.columns)))
    assert keyed_rest.equals(rest)
    assert rest.height > len(ODD_LINES) // 3 and starts.filter(pl.col("user") == "p\u00f8stgres").height == 1
    assert starts.filter(pl.col("user") == "LOG:")["sev"].to_list() == ["ERROR"]
    keys = pl.Series([" UTC [3317] postgres@bench LOG:", " UTC [3317] LOG:", " UTC [3317] postgres@bench FOO:", " UTC [3317] x"])
    fields = pg_lines.key_fields(keys, prefix.keyed)  # a background line's key is read by the part before %q
    assert fields.select("key", "pid", "user", "sev").rows() == [
        (" UTC [3317] postgres@bench LOG:", "3317", "postgres", "LOG"),
        (" UTC [3317] postgres@bench FOO:", "3317", "postgres", None),
        (" UTC [3317] LOG:", "3317", None, "LOG"),
    ]


def test_prefixes_with_spaced_values_are_not_keyed() -> None:
    for line, keyed in [
        ("2024-05-01 10:00:00 UTC [12]: user=u,db=d,app=psql x,client=[local] LOG:  x", False),  # %a holds spaces
        ("2024-05-01 10:00:00.123 UTC [12] u@d LOG:  x", True),
        ("[12] u@d LOG:  x", False),  # no time first: no key shared by many lines
        ("2024-05-01 10:00:00.123 UTC [12] u@d  LOG:  x", False),  # two spaces in a row
    ]:
        assert (pg_stderr.infer_prefix([line] * 3).keyed is not None) == keyed, line


def test_keyed_and_scanned_reads_give_the_same_result(monkeypatch: pytest.MonkeyPatch) -> None:
    text = PG15_STDERR + "\n".join(ODD_LINES) + "\n" + _capture_member("db/postgresql.log")
    keyed = _parse("postgresql-log", text)
    monkeypatch.setattr(pg_prefix, "keyed_lead", lambda *_: None)
    scanned = _parse("postgresql-log", text)
    assert (keyed.records, keyed.warnings, keyed.notes) == (scanned.records, scanned.warnings, scanned.notes)
    assert all(keyed.tables[name].equals(scanned.tables[name]) for name in scanned.tables)


@pytest.mark.parametrize("variant", ["ascii", "crlf", "lone cr", "bom", "not ascii", "chunked"])
def test_bytes_are_read_as_the_decoded_text(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _capture_member("db/postgresql.log") + PG15_STDERR + "\n".join(ODD_LINES[:-1]) + "\n"
    ascii_text = text.replace("\u00f8", "o").replace("\u00e9", "e")
    data = {
        "ascii": ascii_text,
        "crlf": ascii_text.replace("SELECT 1/0;\n", "SELECT 1/0;\r\n").replace("\n", "\r\n"),  # and a CR before a CRLF
        "lone cr": ascii_text.replace("SELECT 1/0;", "SELECT\r1/0;"),
        "bom": "\ufeff" + ascii_text,
        "not ascii": text,
        "chunked": ascii_text * 3,
    }[variant].encode()
    if variant == "chunked":
        monkeypatch.setattr(pg_stderr, "CHUNK_CHARS", 100_000)
        monkeypatch.setattr(kit_lines, "CSV_READER_MIN_CHARS", 10_000)
    assert data.isascii() == (variant not in ("bom", "not ascii"))
    decoded = data.decode("utf-8", "backslashreplace").replace("\r\n", "\n")  # as pipeline.decode
    from_bytes = pg_stderr.SPEC.parse_bytes(data, ParseContext(source="test"))
    from_text = _parse("postgresql-log", decoded)
    assert (from_bytes.records, from_bytes.warnings, from_bytes.notes) == (from_text.records, from_text.warnings, from_text.notes)
    assert all(from_bytes.tables[name].equals(from_text.tables[name]) for name in from_text.tables)


@pytest.mark.parametrize("data", [b"", b"\n\n", b" \t\x1c\x1f\r\n", b"hello world\n", b"\x00\x01garbage\x02", b"\xff\xfe"])
def test_bytes_refused_as_the_text_is(data: bytes) -> None:
    with pytest.raises(ParseError) as from_text:
        _parse("postgresql-log", data.decode("utf-8", "backslashreplace").replace("\r\n", "\n"))
    with pytest.raises(ParseError) as from_bytes:
        pg_stderr.SPEC.parse_bytes(data, ParseContext(source="test"))
    assert str(from_bytes.value) == str(from_text.value)


def test_seconds_are_the_doubles_nearest_the_printed_milliseconds() -> None:
    ms = pl.DataFrame({"ms": [649562111.997, 144071367.498, 0.287, 17.304, None]})
    # a division done as a multiplication by 1e-6 gives 649562.1119969999 and 144071.36749799998
    seconds = ms.select(pg_messages.seconds(pl.col("ms")))["ms"].to_list()
    assert seconds == [649562.111997, 144071.367498, 0.000287, 0.017304, None]


def test_plans_find_their_statement_when_connections_share_a_hash() -> None:
    plans = pl.DataFrame({"rec": [10], "conn": ["a"]})
    key = pl.Series(["a"]).hash().item()
    closes = pl.DataFrame({  # connection "b" made to share the hash of "a": its row comes first
        "next_close": [11, 12], "conn_key": [key, key], "row_conn": ["b", "a"], "row_rec": [11, 12], "row_at": [0, 1],
    }, schema_overrides={"conn_key": pl.UInt64, "row_at": pl.UInt32})
    assert pg_assemble._next_close(plans, closes).select("row_rec", "row_at").rows() == [(12, 1)]


# ---- auto_explain, pairing and nesting on a real PostgreSQL 15 log ------------------------------------


def _independent_count(text: str) -> tuple[int, int]:
    """(top-level statements, nested plans), counted from the raw stderr lines by their closing line."""
    lines = text.split("\n")
    with_duration = sum(1 for line in lines if re.search(r" LOG:  duration: [\d.]+ ms  (statement:|execute) ", line))
    # log_statement=all + log_duration: "statement: ..." then a bare "duration: X ms" for the same execution
    bare = sum(1 for line in lines if re.search(r" LOG:  duration: [\d.]+ ms$", line))
    # a failed statement logs no duration; when log_statement logged it first, the pair is one execution
    errors = sum(1 for line in lines if " ERROR:  " in line)
    nested = sum(1 for line in lines if " CONTEXT:  SQL function" in line)
    return with_duration + bare + errors, nested


def _row(rows: pl.DataFrame, line: int) -> dict:
    return rows.filter(pl.col("line") == line).row(0, named=True)


def test_pg15_auto_explain_pairing_and_nesting() -> None:
    result = _parse("postgresql-log", PG15_STDERR, source="pg15/postgresql.log")
    rows, nodes = _statements(result), result.tables[T.PLAN_NODE]
    top, nested = _independent_count(PG15_STDERR)
    assert (top, nested) == (19, 1)
    assert rows.filter(~pl.col("is_internal")).height == top and rows.filter(pl.col("is_internal")).height == nested
    assert result.records == top + nested and result.warnings == []
    assert "5 auto_explain plans; 4 attached to the duration entry of the same execution (counted once)" in result.notes
    assert any(n.startswith("14 parse/bind durations (1.648 ms in all)") for n in result.notes)
    # pgbench -M extended: 7 executes are the statements, their parse/bind phases are not
    assert rows.filter(pl.col("conn_id") == "3315")["prepared"].to_list() == [True] * 7

    seq = _row(rows, 44)  # plan (17.304 ms) then "duration: 18.290 ms  statement:" for the same execution
    assert (seq["query_time_s"], seq["plan_signature"], seq["full_scan"]) == (0.01829, "Aggregate>Seq Scan(pgbench_accounts)", True)
    assert seq["plan"].startswith("Aggregate  (cost=2890.02..2890.03 rows=1 width=8)")
    update = _row(rows, 55)
    assert update["plan_signature"] == "Update(pgbench_accounts)>Index Scan(pgbench_accounts.pgbench_accounts_pkey)"
    assert (update["index_names"], update["full_scan"], update["query_time_s"]) == ("pgbench_accounts_pkey", False, 0.006986)
    assert update["end_ts"] == _utc(2026, 11, 29, 20, 51, 34, 458000)
    assert update["start_ts"] == update["end_ts"] - timedelta(microseconds=6986)
    json_plan = _row(rows, 98)
    assert json_plan["plan"].startswith("{") and json_plan["plan_signature"] == "Aggregate>Seq Scan(pgbench_accounts)"

    scans = nodes.filter(pl.col("node_type") == "Seq Scan").select(
        "stmt_id", "relation", "est_rows", "actual_rows", "loops", "rows_removed_by_filter", "filter", "depth"
    )
    assert scans.rows() == [
        (seq["stmt_id"], "pgbench_accounts", 9.0, 9.0, 1.0, 99991.0, "Filter: (abalance > 0)", 1),
        (json_plan["stmt_id"], "pgbench_accounts", 9.0, 9.0, 1.0, 99991.0, "Filter: (abalance > 0)", 1),
        (_row(rows, 104)["stmt_id"], "pgbench_accounts", 13.0, 10.0, 1.0, 99990.0, "Filter: (abalance <> 0)", 1),
    ]
    index_scan = nodes.filter(pl.col("node_type") == "Index Scan").row(0, named=True)
    assert (index_scan["est_rows"], index_scan["actual_rows"], index_scan["index_name"]) == (1.0, 1.0, "pgbench_accounts_pkey")
    assert index_scan["filter"] == "Index Cond: (aid = 7); Filter: (pg_sleep('0.006'::double precision) IS NOT NULL)"

    outer = _row(rows, 103)  # log_statement line + nested plan + outer plan + bare duration: one statement
    assert (outer["sql"], outer["query_time_s"], outer["plan_signature"], outer["is_internal"]) == (
        "SELECT slow_count();", 0.013082, "Result", False)
    inner = _row(rows, 104)
    assert inner["is_internal"] and inner["query_time_s"] is None
    assert inner["sql"] == "SELECT count(*) FROM pgbench_accounts WHERE abalance <> 0"

    multi_line = _row(rows, 45)
    assert multi_line["sql"] == (
        "SELECT a.aid, b.bbalance\n  FROM pgbench_accounts a\n  JOIN pgbench_branches b USING (bid)\n"
        " WHERE a.aid < 3 AND a.filler <> 'x';"
    )
    failed = _row(rows, 56)
    assert (failed["sql"], failed["success"], failed["query_time_s"], failed["error_code"]) == ("SELECT 1/0;", False, None, None)
    logged_then_failed = _row(rows, 115)
    assert (logged_then_failed["success"], logged_then_failed["start_ts"], logged_then_failed["end_ts"]) == (
        False, _utc(2026, 11, 29, 20, 51, 34, 608000), _utc(2026, 11, 29, 20, 51, 34, 608000))
    set_duration = _row(rows, 99)  # "statement: SET log_duration = on;" + "duration: 0.083 ms"
    assert set_duration["query_time_s"] == 0.000083 and set_duration["end_ts"] == _utc(2026, 11, 29, 20, 51, 34, 594000)


def test_pg15_csvlog_and_jsonlog_agree_with_stderr() -> None:
    columns = ["sql", "query_time_s", "end_ts", "success", "is_internal", "prepared", "plan_signature", "index_names"]
    stderr = _statements(_parse("postgresql-log", PG15_STDERR)).filter(pl.col("conn_id").is_in(["3317", "3319"]))
    stderr_nodes = _parse("postgresql-log", PG15_STDERR).tables[T.PLAN_NODE].join(stderr.select("stmt_id"), on="stmt_id")
    for kind, text in (("postgresql-csvlog", PG15_CSVLOG), ("postgresql-jsonlog", PG15_JSONLOG)):
        result = _parse(kind, text, source=f"pg15/{kind}")
        rows = _statements(result)
        assert result.warnings == [] and rows.height == stderr.height == 11
        assert rows.select(columns).rows() == stderr.select(columns).rows(), kind
        assert result.tables[T.PLAN_NODE].drop("stmt_id", "source").rows() == stderr_nodes.drop("stmt_id", "source").rows()
        failed = rows.filter(~pl.col("success")).select("error_code", "conn_id", "txn_id", "digest").rows()
        # the second failure was logged by log_statement first: its query_id comes from the ERROR entry
        assert failed == [("22012", "6b0c9056.cf5", "3/10", "-8441324848661855122"), ("22012", "6b0c9056.cf7", "3/19", "-8441324848661855122")]


def test_pg15_prefix_with_many_escapes() -> None:
    result = _parse("postgresql-log", PG15_STDERR_ALL_ESCAPES)
    assert "log_line_prefix looks like '%t [%p]: [%l-1] %c %x %v user=%u,db=%d,app=%a,client=%h %e %Q '" in result.notes
    rows = _statements(result).select("sql", "conn_id", "txn_id", "digest", "client_host", "user", "db", "error_code").rows()
    assert rows == [
        ("select count(*) from pgbench_branches", "6b0c9057.d10", None, "2823069551772287095", "[local]", "postgres", "bench", None),
        (rows[1][0], "6b0c9057.d10", None, "-1745620123406475183", "[local]", "postgres", "bench", None),
        ("BEGIN;", "6b0c9057.d11", "3/5", "2397681704071010949", "[local]", "postgres", "bench", None),
        ("SELECT 1/0;", "6b0c9057.d13", "3/10", "-8441324848661855122", "[local]", "postgres", "bench", "22012"),
    ]
    assert rows[1][0].startswith("select o.n, p.partstrat")


def test_non_english_messages_are_flagged() -> None:
    result = _parse("postgresql-log", PG15_FRENCH)
    texts = [w.as_text() for w in result.warnings]
    assert any("3 messages look translated (lc_messages is not English)" in t and "durée : 0.243 ms" in t for t in texts)
    assert any("2 lines look like log entries but do not match the inferred prefix" in t for t in texts)  # ERREUR, INSTRUCTION
    # auto_explain is not translated: its plan still gives the statement, with the plan's time
    assert _statements(result).select("sql", "query_time_s").rows() == [
        ("SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;", 0.026409)]
    russian = (
        "2024-03-01 10:00:00.123 MSK [1234] СООБЩЕНИЕ:  продолжительность: 0.123 мс  оператор: SELECT 1\n"
        "2024-03-01 10:00:01.456 MSK [1234] ОШИБКА:  деление на ноль\n"
        "2024-03-01 10:00:01.456 MSK [1234] ОПЕРАТОР:  SELECT 1/0\n"
    )
    assert pg_stderr.SPEC.detect(russian, "postgresql.log") > 0.5
    refused = _parse("postgresql-log", russian)
    assert refused.records == 0 and "lc_messages is not English" in refused.warnings[0].as_text()


# ---- prefixes, times, pairing rules on short logs -------------------------------------------------


@pytest.mark.parametrize(
    ("line", "template", "field", "value"),
    [
        ("1700000000.123 [42] LOG:  duration: 2.500 ms  statement: SELECT 1", "%n [%p] ", "end_ts", _utc(2023, 11, 14, 22, 13, 20, 123000)),
        ("2024-05-01 10:00:00.000 UTC [7] app=psql,c=6630f1a0.1c8 LOG:  duration: 1.000 ms  statement: SELECT 1",
         "%m [%p] app=%a,c=%c ", "conn_id", "6630f1a0.1c8"),
        ("2024-05-01 10:00:00 UTC:10.0.0.5(51234):bob@shop:[99]:LOG:  duration: 1.000 ms  statement: SELECT 1",
         "%t:%r:%u@%d:[%p]:", "client_host", "10.0.0.5"),
        ("< 2024-05-01 10:00:00.000 +03 > LOG:  duration: 1.000 ms  statement: SELECT 1", "< %m > ", "end_ts", _utc(2024, 5, 1, 7)),
        ("2024-05-01 10:00:00.000 UTC [7] myapp LOG:  duration: 1.000 ms  statement: SELECT 1", "%m [%p] %* ", "conn_id", "7"),
    ],
)
def test_prefix_shapes(line: str, template: str, field: str, value: object) -> None:
    result = _parse("postgresql-log", f"{line}\n{line}\n")
    assert f"log_line_prefix looks like {template!r}" in result.notes
    assert _statements(result).height == 2 and _statements(result).row(0, named=True)[field] == value


def test_unrecognised_prefix_still_splits_entries_with_a_warning() -> None:
    shapes = ("x{i} 2024-05-01 10:00:0{i}.000 UTC [1{i}] LOG:  duration: 1.000 ms  statement: SELECT {i}",
              "[1{i}] {{{i}}} ~2024-05-01 10:00:0{i} LOG:  duration: 1.000 ms  statement: SELECT {i}",
              "=={i}== LOG:  duration: 1.000 ms  statement: SELECT {i}")
    text = "".join(shapes[i % 3].format(i=i) + "\n" for i in range(9))
    result = _parse("postgresql-log", text)
    assert "log_line_prefix not recognised" in result.warnings[0].as_text()
    rows = _statements(result)
    assert rows["sql"].to_list() == [f"SELECT {i}" for i in range(9)]
    assert rows["end_ts"].to_list()[0] == _utc(2024, 5, 1, 10, 0, 0) and rows["conn_id"].to_list()[:2] == ["10", "11"]


def test_zones_fixed_ambiguous_and_unknown() -> None:
    text = (
        "2024-01-15 10:00:00.000 CST [7] LOG:  duration: 1.000 ms  statement: SELECT 1\n"
        "2024-01-15 10:00:00.000 -05 [7] LOG:  duration: 1.000 ms  statement: SELECT 2\n"
        "2024-01-15 10:00:00.000 XYZT [7] LOG:  duration: 1.000 ms  statement: SELECT 3\n"
        "2024-01-15 10:00:00.000 CET [7] LOG:  duration: 1.000 ms  statement: SELECT 4\n"
    )
    result = _parse("postgresql-log", text, tz="America/Chicago")
    assert _statements(result)["end_ts"].to_list() == [_utc(2024, 1, 15, 16), _utc(2024, 1, 15, 15), _utc(2024, 1, 15, 16), _utc(2024, 1, 15, 9)]
    assert "zone abbreviation(s) CST, XYZT unknown or ambiguous; those times read as America/Chicago (--tz)" in result.notes
    assert "log times carry zone -05, CET; converted to UTC" in result.notes


def test_log_statement_only_and_stray_durations() -> None:
    text = (
        "2024-05-01 10:00:00.000 UTC [7] LOG:  duration: 0.010 ms\n"  # a parse phase under log_duration
        "2024-05-01 10:00:00.001 UTC [7] LOG:  statement: SELECT 1\n"
        "2024-05-01 10:00:00.002 UTC [8] LOG:  execute S_1: SELECT $1\n"
        "2024-05-01 10:00:00.002 UTC [8] DETAIL:  parameters: $1 = 'secret'\n"
        "2024-05-01 10:00:00.005 UTC [8] LOG:  duration: 3.000 ms\n"
        "2024-05-01 10:00:00.006 UTC [7] LOG:  statement: SELECT 2\n"
    )
    rows = _statements(result := _parse("postgresql-log", text))
    assert rows.select("sql", "query_time_s", "prepared", "end_ts").rows() == [
        ("SELECT 1", None, False, None), ("SELECT $1", 0.003, True, _utc(2024, 5, 1, 10, 0, 0, 5000)), ("SELECT 2", None, False, None)]
    assert "2 statements logged without a duration (log_statement only): query_time_s is null" in result.notes
    assert any(n.startswith("1 bare duration lines with no open statement") for n in result.notes)


def test_plans_of_one_query_string_and_of_an_unlogged_statement() -> None:
    plan = "\tQuery Text: SELECT 1; SELECT 2;\n\tResult  (cost=0.00..0.01 rows=1 width=4) (actual time=0.001..0.001 rows=1 loops=1)\n"
    text = (
        f"2024-05-01 10:00:00.001 UTC [7] LOG:  duration: 0.100 ms  plan:\n{plan}"
        f"2024-05-01 10:00:00.002 UTC [7] LOG:  duration: 0.200 ms  plan:\n{plan}"
        "2024-05-01 10:00:00.003 UTC [7] LOG:  duration: 0.400 ms  statement: SELECT 1; SELECT 2;\n"
        "2024-05-01 10:00:01.000 UTC [7] LOG:  duration: 9.000 ms  plan:\n\tQuery Text: SELECT 3\n"
        "\tResult  (cost=0.00..0.01 rows=1 width=4) (actual time=0.001..0.001 rows=1 loops=1)\n"
        "2024-05-01 10:00:01.100 UTC [7] LOG:  duration: 0.500 ms  statement: SELECT 4\n"
    )
    rows = _statements(_parse("postgresql-log", text))
    assert rows.select("sql", "query_time_s", "is_internal", "plan_signature").rows() == [
        ("SELECT 1; SELECT 2;", None, True, "Result"),  # first of two plans for one query string
        ("SELECT 1; SELECT 2;", 0.0004, False, "Result"),
        ("SELECT 3", 0.009, False, "Result"),  # its duration line was not logged: the plan is the statement
        ("SELECT 4", 0.0005, False, None),
    ]


def test_interleaved_syslog_lines_follow_their_pid() -> None:
    text = (
        "2024-05-01T10:00:00.100000+02:00 db1 postgres[101]: [5-1] LOG:  duration: 1.000 ms  statement: SELECT a,\n"
        "2024-05-01T10:00:00.100000+02:00 db1 postgres[102]: [7-1] LOG:  duration: 2.000 ms  statement: SELECT x\n"
        "2024-05-01T10:00:00.100000+02:00 db1 postgres[101]: [5-2] #011  b FROM t\n"
        "2024-05-01T10:00:00.200000+02:00 db1 postgres[102]: [8-1] ERROR:  boom\n"
        "2024-05-01T10:00:00.200000+02:00 db1 postgres[101]: [6-1] LOG:  duration: 3.000 ms  statement: SELECT 3\n"
        "2024-05-01T10:00:00.200000+02:00 db1 postgres[102]: [8-2] STATEMENT:  SELECT broken\n"
    )
    result = _parse("postgresql-log", text)
    assert "syslog lines: time and pid read from the syslog header" in result.notes
    assert _statements(result).select("conn_id", "sql", "success", "end_ts").rows() == [
        ("101", "SELECT a,\n  b FROM t", True, _utc(2024, 5, 1, 8, 0, 0, 100000)),
        ("102", "SELECT x", True, _utc(2024, 5, 1, 8, 0, 0, 100000)),
        ("102", "SELECT broken", False, _utc(2024, 5, 1, 8, 0, 0, 200000)),
        ("101", "SELECT 3", True, _utc(2024, 5, 1, 8, 0, 0, 200000)),
    ]


# ---- plans ------------------------------------------------------------------------------------------


def test_text_plan_nodes_depths_and_signature() -> None:
    body = (
        "Query Text: SELECT * FROM tenk1 t1, tenk2 t2 WHERE t1.unique1 < 10 AND t1.unique2 = t2.unique2\n"
        "Nested Loop  (cost=4.65..49.46 rows=33 width=488) (actual time=0.050..0.100 rows=10 loops=1)\n"
        "  ->  Bitmap Heap Scan on tenk1 t1  (cost=4.36..39.47 rows=10 width=244) (actual time=0.020..0.040 rows=10 loops=1)\n"
        "        Recheck Cond: (unique1 < 10)\n"
        "        ->  Bitmap Index Scan on tenk1_unique1  (cost=0.00..4.36 rows=10 width=0) (actual time=0.010..0.010 rows=10 loops=1)\n"
        "              Index Cond: (unique1 < 10)\n"
        "  ->  Index Scan Backward using tenk2_unique2 on tenk2 t2  (cost=0.29..0.99 rows=1 width=244) (never executed)\n"
        "        Index Cond: (unique2 = t1.unique2)\n"
    )
    parsed = pg_explain.parse_plans(pl.DataFrame({"rec": [1], "body": [body]}))
    assert parsed.nodes.select("node_id", "depth", "node_type", "relation", "index_name", "est_rows", "actual_rows", "filter").rows() == [
        (0, 0, "Nested Loop", None, None, 33.0, 10.0, None),
        (1, 1, "Bitmap Heap Scan", "tenk1", None, 10.0, 10.0, "Recheck Cond: (unique1 < 10)"),
        (2, 2, "Bitmap Index Scan", None, "tenk1_unique1", 10.0, 10.0, "Index Cond: (unique1 < 10)"),
        (3, 1, "Index Scan Backward", "tenk2", "tenk2_unique2", 1.0, None, "Index Cond: (unique2 = t1.unique2)"),
    ]
    summary = parsed.summary.row(0, named=True)
    assert summary["plan_signature"] == (
        "Nested Loop>Bitmap Heap Scan(tenk1)>Bitmap Index Scan(tenk1_unique1)>Index Scan Backward(tenk2.tenk2_unique2)")
    assert summary["index_names"] == "tenk1_unique1,tenk2_unique2" and summary["full_scan"] is False
    assert summary["query_text"].startswith("SELECT * FROM tenk1 t1")


def test_docs_example_plan_depths() -> None:
    result = _parse("postgresql-log", _read(PG_DIR / "postgres-docs__auto-explain_example.log"))
    nodes = result.tables[T.PLAN_NODE]
    assert nodes.select("depth", "node_type", "relation").rows() == [
        (0, "Aggregate", None), (1, "Hash Join", None), (2, "Seq Scan", "pg_class"), (2, "Hash", None), (3, "Seq Scan", "pg_index")]
    row = _statements(result).row(0, named=True)
    assert row["query_time_s"] == 0.003651 and row["end_ts"] is None
    assert row["sql"] == "SELECT count(*)\n              FROM pg_class, pg_index\n              WHERE oid = indrelid AND indisunique;"


@pytest.mark.parametrize(
    ("node", "name"),
    [
        ({"Node Type": "Aggregate", "Strategy": "Hashed", "Partial Mode": "Partial"}, "Partial HashAggregate"),
        ({"Node Type": "Hash Join", "Join Type": "Left"}, "Hash Left Join"),
        ({"Node Type": "Nested Loop", "Join Type": "Anti"}, "Nested Loop Anti Join"),
        ({"Node Type": "Seq Scan", "Parallel Aware": True}, "Parallel Seq Scan"),
        ({"Node Type": "ModifyTable", "Operation": "Update"}, "Update"),
        ({"Node Type": "Index Only Scan", "Scan Direction": "Backward"}, "Index Only Scan Backward"),
    ],
)
def test_json_node_names_follow_the_text_format(node: dict, name: str) -> None:
    assert pg_explain.json_node_type(node) == name


# ---- hostile input ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SPECS))
@pytest.mark.parametrize("text", ["", "\n\n", "hello world\nthis is not a log\n", "\x00\x01garbage\x02"])
def test_empty_and_garbage_are_refused(kind: str, text: str) -> None:
    with pytest.raises(ParseError):
        _parse(kind, text)


def test_truncated_json_plan_and_truncated_last_line() -> None:
    cut = PG15_STDERR.index('"Plan Rows": 9')
    result = _parse("postgresql-log", PG15_STDERR[:cut])
    assert any("auto_explain JSON plan unreadable" in w.as_text() for w in result.warnings)
    rows = _statements(result)
    assert rows.filter(pl.col("plan").str.starts_with("{")).height == 1  # kept as text, its own statement
    mid_line = PG15_STDERR[: PG15_STDERR.index("duration: 0.844 ms") + 14]
    assert _statements(_parse("postgresql-log", mid_line))["sql"].to_list()[-1].startswith("SELECT count(*)")


def test_crlf_and_backslash_escapes() -> None:
    crlf = _statements(_parse("postgresql-log", PG15_STDERR.replace("\n", "\r\n")))
    lf = _statements(_parse("postgresql-log", PG15_STDERR))
    assert crlf.drop("source").equals(lf.drop("source"))
    escaped = "2024-05-01 10:00:00.000 UTC [7] LOG:  duration: 1.000 ms  statement: SELECT 'caf\\xe9' AS \"na\\xefve\"\n"
    assert _statements(_parse("postgresql-log", escaped))["sql"].to_list() == ["SELECT 'caf\\xe9' AS \"na\\xefve\""]


def test_lines_before_the_first_entry_are_reported() -> None:
    text = "pg_ctl: could not start server\nExamine the log output.\n" + PG15_STDERR
    result = _parse("postgresql-log", text)
    assert result.warnings[0].line == 1 and "2 lines before the first log entry skipped" in result.warnings[0].reason
    assert _statements(result)["line"].min() == 5 + 2


def test_hostile_csvlog_and_jsonlog() -> None:
    with pytest.raises(ParseError, match="columns"):
        _parse("postgresql-csvlog", "a,b,c\n1,2,3\n")
    ragged = PG15_CSVLOG + '2026-11-29 20:51:35.000 UTC,"x"\n'
    assert _statements(_parse("postgresql-csvlog", ragged)).height == 11
    truncated = PG15_JSONLOG + PG15_JSONLOG.split("\n")[0][:80] + "\n"  # a cut last line
    result = _parse("postgresql-jsonlog", truncated)
    assert _statements(result).height == 11 and "1 lines that are not jsonlog entries skipped" in result.warnings[0].as_text()
    broken_middle = PG15_JSONLOG.replace('"error_severity":"LOG"', '"error_severity":"LOG",,', 1)  # invalid JSON
    result = _parse("postgresql-jsonlog", broken_middle)
    assert _statements(result).height == 11  # that entry is the first plan: it is lost, its statement still counted
    assert _statements(result).filter(pl.col("plan").is_not_null()).height == 4


# ---- logs written by PostgreSQL 15.18 for these tests (see the module docstring) -----------------

PG15_STDERR = (
    '2026-11-29 20:51:33.261 UTC [3303] LOG:  starting PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit\n'
    '2026-11-29 20:51:33.261 UTC [3303] LOG:  listening on Unix socket "/tmp/pgreal/.s.PGSQL.54329"\n'
    '2026-11-29 20:51:33.265 UTC [3307] LOG:  database system was shut down at 2026-11-29 20:51:33 UTC\n'
    '2026-11-29 20:51:33.270 UTC [3303] LOG:  database system is ready to accept connections\n'
    '2026-11-29 20:51:34.389 UTC [3314] postgres@bench LOG:  duration: 1.319 ms  statement: select count(*) from pgbench_branches\n'
    "2026-11-29 20:51:34.391 UTC [3314] postgres@bench LOG:  duration: 2.169 ms  statement: select o.n, p.partstrat, pg_catalog.count(i.inhparent) from pg_catalog.pg_class as c join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace) cross join lateral (select pg_catalog.array_position(pg_catalog.current_schemas(true), n.nspname)) as o(n) left join pg_catalog.pg_partitioned_table as p on (p.partrelid = c.oid) left join pg_catalog.pg_inherits as i on (c.oid = i.inhparent) where c.relname = 'pgbench_accounts' and o.n is not null group by 1, 2 order by 1 asc limit 1\n"
    '2026-11-29 20:51:34.395 UTC [3315] postgres@bench LOG:  duration: 0.057 ms  parse <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:34.395 UTC [3315] postgres@bench LOG:  duration: 0.008 ms  bind <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:34.395 UTC [3315] postgres@bench LOG:  duration: 0.010 ms  execute <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:34.396 UTC [3315] postgres@bench LOG:  duration: 0.431 ms  parse <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n'
    '2026-11-29 20:51:34.396 UTC [3315] postgres@bench LOG:  duration: 0.375 ms  bind <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n'
    "2026-11-29 20:51:34.396 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '27189'\n"
    '2026-11-29 20:51:34.396 UTC [3315] postgres@bench LOG:  duration: 0.274 ms  execute <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n'
    "2026-11-29 20:51:34.396 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '27189'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.080 ms  parse <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1;\n'
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.099 ms  bind <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '27189'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.024 ms  execute <unnamed>: SELECT abalance FROM pgbench_accounts WHERE aid = $1;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '27189'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.116 ms  parse <unnamed>: UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;\n'
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.133 ms  bind <unnamed>: UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '9'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.057 ms  execute <unnamed>: UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '9'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.077 ms  parse <unnamed>: UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;\n'
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.096 ms  bind <unnamed>: UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '1'\n"
    '2026-11-29 20:51:34.397 UTC [3315] postgres@bench LOG:  duration: 0.039 ms  execute <unnamed>: UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2;\n'
    "2026-11-29 20:51:34.397 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '4914', $2 = '1'\n"
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.129 ms  parse <unnamed>: INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);\n'
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.035 ms  bind <unnamed>: INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);\n'
    "2026-11-29 20:51:34.398 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '9', $2 = '1', $3 = '27189', $4 = '4914'\n"
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.050 ms  execute <unnamed>: INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP);\n'
    "2026-11-29 20:51:34.398 UTC [3315] postgres@bench DETAIL:  parameters: $1 = '9', $2 = '1', $3 = '27189', $4 = '4914'\n"
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.008 ms  parse <unnamed>: END;\n'
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.004 ms  bind <unnamed>: END;\n'
    '2026-11-29 20:51:34.398 UTC [3315] postgres@bench LOG:  duration: 0.427 ms  execute <unnamed>: END;\n'
    '2026-11-29 20:51:34.449 UTC [3317] postgres@bench LOG:  duration: 17.304 ms  plan:\n'
    '\tQuery Text: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    '\tAggregate  (cost=2890.02..2890.03 rows=1 width=8) (actual time=17.287..17.289 rows=1 loops=1)\n'
    '\t  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=9 width=0) (actual time=17.273..17.276 rows=9 loops=1)\n'
    '\t        Filter: (abalance > 0)\n'
    '\t        Rows Removed by Filter: 99991\n'
    '2026-11-29 20:51:34.450 UTC [3317] postgres@bench LOG:  duration: 18.290 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    '2026-11-29 20:51:34.451 UTC [3317] postgres@bench LOG:  duration: 0.844 ms  statement: SELECT a.aid, b.bbalance\n'
    '\t  FROM pgbench_accounts a\n'
    '\t  JOIN pgbench_branches b USING (bid)\n'
    "\t WHERE a.aid < 3 AND a.filler <> 'x';\n"
    '2026-11-29 20:51:34.457 UTC [3317] postgres@bench LOG:  duration: 6.181 ms  plan:\n'
    '\tQuery Text: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;\n'
    '\tUpdate on pgbench_accounts  (cost=0.29..8.31 rows=0 width=0) (actual time=6.179..6.180 rows=0 loops=1)\n'
    '\t  ->  Index Scan using pgbench_accounts_pkey on pgbench_accounts  (cost=0.29..8.31 rows=1 width=10) (actual time=6.100..6.108 rows=1 loops=1)\n'
    '\t        Index Cond: (aid = 7)\n'
    "\t        Filter: (pg_sleep('0.006'::double precision) IS NOT NULL)\n"
    '2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:  duration: 6.986 ms  statement: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;\n'
    '2026-11-29 20:51:34.458 UTC [3317] postgres@bench ERROR:  division by zero\n'
    '2026-11-29 20:51:34.458 UTC [3317] postgres@bench STATEMENT:  SELECT 1/0;\n'
    '2026-11-29 20:51:34.458 UTC [3317] postgres@bench LOG:  duration: 0.048 ms  statement: SET auto_explain.log_format = json;\n'
    '2026-11-29 20:51:34.465 UTC [3317] postgres@bench LOG:  duration: 6.310 ms  plan:\n'
    '\t{\n'
    '\t  "Query Text": "SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;",\n'
    '\t  "Plan": {\n'
    '\t    "Node Type": "Aggregate",\n'
    '\t    "Strategy": "Plain",\n'
    '\t    "Partial Mode": "Simple",\n'
    '\t    "Parallel Aware": false,\n'
    '\t    "Async Capable": false,\n'
    '\t    "Startup Cost": 2890.02,\n'
    '\t    "Total Cost": 2890.03,\n'
    '\t    "Plan Rows": 1,\n'
    '\t    "Plan Width": 8,\n'
    '\t    "Actual Startup Time": 6.295,\n'
    '\t    "Actual Total Time": 6.297,\n'
    '\t    "Actual Rows": 1,\n'
    '\t    "Actual Loops": 1,\n'
    '\t    "Plans": [\n'
    '\t      {\n'
    '\t        "Node Type": "Seq Scan",\n'
    '\t        "Parent Relationship": "Outer",\n'
    '\t        "Parallel Aware": false,\n'
    '\t        "Async Capable": false,\n'
    '\t        "Relation Name": "pgbench_accounts",\n'
    '\t        "Alias": "pgbench_accounts",\n'
    '\t        "Startup Cost": 0.00,\n'
    '\t        "Total Cost": 2890.00,\n'
    '\t        "Plan Rows": 9,\n'
    '\t        "Plan Width": 0,\n'
    '\t        "Actual Startup Time": 6.281,\n'
    '\t        "Actual Total Time": 6.283,\n'
    '\t        "Actual Rows": 9,\n'
    '\t        "Actual Loops": 1,\n'
    '\t        "Filter": "(abalance > 0)",\n'
    '\t        "Rows Removed by Filter": 99991\n'
    '\t      }\n'
    '\t    ]\n'
    '\t  }\n'
    '\t}\n'
    '2026-11-29 20:51:34.465 UTC [3317] postgres@bench LOG:  duration: 6.627 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    '2026-11-29 20:51:34.594 UTC [3319] postgres@bench LOG:  statement: SET log_duration = on;\n'
    '2026-11-29 20:51:34.594 UTC [3319] postgres@bench LOG:  duration: 0.083 ms\n'
    '2026-11-29 20:51:34.595 UTC [3319] postgres@bench LOG:  statement: SET auto_explain.log_nested_statements = on;\n'
    '2026-11-29 20:51:34.595 UTC [3319] postgres@bench LOG:  duration: 0.187 ms\n'
    '2026-11-29 20:51:34.595 UTC [3319] postgres@bench LOG:  statement: SELECT slow_count();\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench LOG:  duration: 11.360 ms  plan:\n'
    '\tQuery Text:  SELECT count(*) FROM pgbench_accounts WHERE abalance <> 0 \n'
    '\tAggregate  (cost=2890.03..2890.04 rows=1 width=8) (actual time=11.352..11.354 rows=1 loops=1)\n'
    '\t  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=13 width=0) (actual time=11.336..11.339 rows=10 loops=1)\n'
    '\t        Filter: (abalance <> 0)\n'
    '\t        Rows Removed by Filter: 99990\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench CONTEXT:  SQL function "slow_count" statement 1\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench LOG:  duration: 12.265 ms  plan:\n'
    '\tQuery Text: SELECT slow_count();\n'
    '\tResult  (cost=0.00..0.26 rows=1 width=8) (actual time=12.252..12.253 rows=1 loops=1)\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench LOG:  duration: 13.082 ms\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench LOG:  statement: SELECT 1/0;\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench ERROR:  division by zero\n'
    '2026-11-29 20:51:34.608 UTC [3319] postgres@bench STATEMENT:  SELECT 1/0;\n'
    '2026-11-29 20:51:34.620 UTC [3303] LOG:  received fast shutdown request\n'
    '2026-11-29 20:51:34.620 UTC [3303] LOG:  aborting any active transactions\n'
    '2026-11-29 20:51:34.623 UTC [3303] LOG:  background worker "logical replication launcher" (PID 3310) exited with exit code 1\n'
    '2026-11-29 20:51:34.626 UTC [3305] LOG:  shutting down\n'
    '2026-11-29 20:51:34.626 UTC [3305] LOG:  checkpoint starting: shutdown immediate\n'
    '2026-11-29 20:51:34.629 UTC [3305] LOG:  checkpoint complete: wrote 13 buffers (0.1%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.001 s, sync=0.001 s, total=0.003 s; sync files=10, longest=0.001 s, average=0.001 s; distance=21 kB, estimate=21 kB\n'
    '2026-11-29 20:51:34.636 UTC [3303] LOG:  database system is shut down\n'
)

PG15_STDERR_ALL_ESCAPES = (
    '2026-11-29 20:51:34 UTC [3327]: [3-1] 6b0c9056.cff 0  user=,db=,app=,client= 00000 0 LOG:  starting PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit\n'
    '2026-11-29 20:51:34 UTC [3327]: [4-1] 6b0c9056.cff 0  user=,db=,app=,client= 00000 0 LOG:  listening on Unix socket "/tmp/pgreal/.s.PGSQL.54329"\n'
    '2026-11-29 20:51:34 UTC [3331]: [1-1] 6b0c9056.d03 0  user=,db=,app=,client= 00000 0 LOG:  database system was shut down at 2026-11-29 20:51:34 UTC\n'
    '2026-11-29 20:51:34 UTC [3327]: [5-1] 6b0c9056.cff 0  user=,db=,app=,client= 00000 0 LOG:  database system is ready to accept connections\n'
    '2026-11-29 20:51:35 UTC [3344]: [1-1] 6b0c9057.d10 0 3/0 user=postgres,db=bench,app=pgbench,client=[local] 00000 2823069551772287095 LOG:  duration: 1.244 ms  statement: select count(*) from pgbench_branches\n'
    "2026-11-29 20:51:35 UTC [3344]: [2-1] 6b0c9057.d10 0 3/0 user=postgres,db=bench,app=pgbench,client=[local] 00000 -1745620123406475183 LOG:  duration: 2.501 ms  statement: select o.n, p.partstrat, pg_catalog.count(i.inhparent) from pg_catalog.pg_class as c join pg_catalog.pg_namespace as n on (n.oid = c.relnamespace) cross join lateral (select pg_catalog.array_position(pg_catalog.current_schemas(true), n.nspname)) as o(n) left join pg_catalog.pg_partitioned_table as p on (p.partrelid = c.oid) left join pg_catalog.pg_inherits as i on (c.oid = i.inhparent) where c.relname = 'pgbench_accounts' and o.n is not null group by 1, 2 order by 1 asc limit 1\n"
    '2026-11-29 20:51:35 UTC [3345]: [1-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 2397681704071010949 LOG:  duration: 0.049 ms  parse <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:35 UTC [3345]: [2-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 2397681704071010949 LOG:  duration: 0.008 ms  bind <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:35 UTC [3345]: [3-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 2397681704071010949 LOG:  duration: 0.007 ms  execute <unnamed>: BEGIN;\n'
    '2026-11-29 20:51:35 UTC [3345]: [4-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 -4797243008028176293 LOG:  duration: 0.462 ms  parse <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n'
    '2026-11-29 20:51:35 UTC [3345]: [5-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 -4797243008028176293 LOG:  duration: 0.390 ms  bind <unnamed>: UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2;\n'
    "2026-11-29 20:51:35 UTC [3345]: [6-1] 6b0c9057.d11 0 3/5 user=postgres,db=bench,app=pgbench,client=[local] 00000 -4797243008028176293 DETAIL:  parameters: $1 = '162', $2 = '83728'\n"
    '2026-11-29 20:51:36 UTC [3347]: [6-1] 6b0c9057.d13 0 3/10 user=postgres,db=bench,app=psql,client=[local] 22012 -8441324848661855122 ERROR:  division by zero\n'
    '2026-11-29 20:51:36 UTC [3347]: [7-1] 6b0c9057.d13 0 3/10 user=postgres,db=bench,app=psql,client=[local] 22012 -8441324848661855122 STATEMENT:  SELECT 1/0;\n'
)

PG15_CSVLOG = (
    '2026-11-29 20:51:34.449 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,1,"SELECT",2026-11-29 20:51:34 UTC,3/7,0,LOG,00000,"duration: 17.304 ms  plan:\n'
    'Query Text: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    'Aggregate  (cost=2890.02..2890.03 rows=1 width=8) (actual time=17.287..17.289 rows=1 loops=1)\n'
    '  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=9 width=0) (actual time=17.273..17.276 rows=9 loops=1)\n'
    '        Filter: (abalance > 0)\n'
    '        Rows Removed by Filter: 99991",,,,,,,,,"psql","client backend",,-3125346135688813602\n'
    '2026-11-29 20:51:34.450 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,2,"SELECT",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 18.290 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;",,,,,,,,,"psql","client backend",,-3125346135688813602\n'
    '2026-11-29 20:51:34.451 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,3,"SELECT",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 0.844 ms  statement: SELECT a.aid, b.bbalance\n'
    '  FROM pgbench_accounts a\n'
    '  JOIN pgbench_branches b USING (bid)\n'
    ' WHERE a.aid < 3 AND a.filler <> \'x\';",,,,,,,,,"psql","client backend",,-2813643363584035723\n'
    '2026-11-29 20:51:34.457 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,4,"UPDATE",2026-11-29 20:51:34 UTC,3/9,759,LOG,00000,"duration: 6.181 ms  plan:\n'
    'Query Text: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;\n'
    'Update on pgbench_accounts  (cost=0.29..8.31 rows=0 width=0) (actual time=6.179..6.180 rows=0 loops=1)\n'
    '  ->  Index Scan using pgbench_accounts_pkey on pgbench_accounts  (cost=0.29..8.31 rows=1 width=10) (actual time=6.100..6.108 rows=1 loops=1)\n'
    '        Index Cond: (aid = 7)\n'
    '        Filter: (pg_sleep(\'0.006\'::double precision) IS NOT NULL)",,,,,,,,,"psql","client backend",,6461644486973564675\n'
    '2026-11-29 20:51:34.458 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,5,"UPDATE",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 6.986 ms  statement: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;",,,,,,,,,"psql","client backend",,6461644486973564675\n'
    '2026-11-29 20:51:34.458 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,6,"SELECT",2026-11-29 20:51:34 UTC,3/10,0,ERROR,22012,"division by zero",,,,,,"SELECT 1/0;",,,"psql","client backend",,-8441324848661855122\n'
    '2026-11-29 20:51:34.458 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,7,"SET",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 0.048 ms  statement: SET auto_explain.log_format = json;",,,,,,,,,"psql","client backend",,8911258532698519259\n'
    '2026-11-29 20:51:34.465 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,8,"SELECT",2026-11-29 20:51:34 UTC,3/12,0,LOG,00000,"duration: 6.310 ms  plan:\n'
    '{\n'
    '  ""Query Text"": ""SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;"",\n'
    '  ""Plan"": {\n'
    '    ""Node Type"": ""Aggregate"",\n'
    '    ""Strategy"": ""Plain"",\n'
    '    ""Partial Mode"": ""Simple"",\n'
    '    ""Parallel Aware"": false,\n'
    '    ""Async Capable"": false,\n'
    '    ""Startup Cost"": 2890.02,\n'
    '    ""Total Cost"": 2890.03,\n'
    '    ""Plan Rows"": 1,\n'
    '    ""Plan Width"": 8,\n'
    '    ""Actual Startup Time"": 6.295,\n'
    '    ""Actual Total Time"": 6.297,\n'
    '    ""Actual Rows"": 1,\n'
    '    ""Actual Loops"": 1,\n'
    '    ""Plans"": [\n'
    '      {\n'
    '        ""Node Type"": ""Seq Scan"",\n'
    '        ""Parent Relationship"": ""Outer"",\n'
    '        ""Parallel Aware"": false,\n'
    '        ""Async Capable"": false,\n'
    '        ""Relation Name"": ""pgbench_accounts"",\n'
    '        ""Alias"": ""pgbench_accounts"",\n'
    '        ""Startup Cost"": 0.00,\n'
    '        ""Total Cost"": 2890.00,\n'
    '        ""Plan Rows"": 9,\n'
    '        ""Plan Width"": 0,\n'
    '        ""Actual Startup Time"": 6.281,\n'
    '        ""Actual Total Time"": 6.283,\n'
    '        ""Actual Rows"": 9,\n'
    '        ""Actual Loops"": 1,\n'
    '        ""Filter"": ""(abalance > 0)"",\n'
    '        ""Rows Removed by Filter"": 99991\n'
    '      }\n'
    '    ]\n'
    '  }\n'
    '}",,,,,,,,,"psql","client backend",,-3125346135688813602\n'
    '2026-11-29 20:51:34.465 UTC,"postgres","bench",3317,"[local]",6b0c9056.cf5,9,"SELECT",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 6.627 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;",,,,,,,,,"psql","client backend",,-3125346135688813602\n'
    '2026-11-29 20:51:34.594 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,1,"idle",2026-11-29 20:51:34 UTC,3/16,0,LOG,00000,"statement: SET log_duration = on;",,,,,,,,,"psql","client backend",,0\n'
    '2026-11-29 20:51:34.594 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,2,"SET",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 0.083 ms",,,,,,,,,"psql","client backend",,-5753437955949711861\n'
    '2026-11-29 20:51:34.595 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,3,"idle",2026-11-29 20:51:34 UTC,3/17,0,LOG,00000,"statement: SET auto_explain.log_nested_statements = on;",,,,,,,,,"psql","client backend",,0\n'
    '2026-11-29 20:51:34.595 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,4,"SET",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 0.187 ms",,,,,,,,,"psql","client backend",,4988955045834830681\n'
    '2026-11-29 20:51:34.595 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,5,"idle",2026-11-29 20:51:34 UTC,3/18,0,LOG,00000,"statement: SELECT slow_count();",,,,,,,,,"psql","client backend",,0\n'
    '2026-11-29 20:51:34.608 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,6,"SELECT",2026-11-29 20:51:34 UTC,3/18,0,LOG,00000,"duration: 11.360 ms  plan:\n'
    'Query Text:  SELECT count(*) FROM pgbench_accounts WHERE abalance <> 0 \n'
    'Aggregate  (cost=2890.03..2890.04 rows=1 width=8) (actual time=11.352..11.354 rows=1 loops=1)\n'
    '  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=13 width=0) (actual time=11.336..11.339 rows=10 loops=1)\n'
    '        Filter: (abalance <> 0)\n'
    '        Rows Removed by Filter: 99990",,,,,"SQL function ""slow_count"" statement 1",,,,"psql","client backend",,-6182430256889524102\n'
    '2026-11-29 20:51:34.608 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,7,"SELECT",2026-11-29 20:51:34 UTC,3/18,0,LOG,00000,"duration: 12.265 ms  plan:\n'
    'Query Text: SELECT slow_count();\n'
    'Result  (cost=0.00..0.26 rows=1 width=8) (actual time=12.252..12.253 rows=1 loops=1)",,,,,,,,,"psql","client backend",,-6182430256889524102\n'
    '2026-11-29 20:51:34.608 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,8,"SELECT",2026-11-29 20:51:34 UTC,3/0,0,LOG,00000,"duration: 13.082 ms",,,,,,,,,"psql","client backend",,-6182430256889524102\n'
    '2026-11-29 20:51:34.608 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,9,"idle",2026-11-29 20:51:34 UTC,3/19,0,LOG,00000,"statement: SELECT 1/0;",,,,,,,,,"psql","client backend",,0\n'
    '2026-11-29 20:51:34.608 UTC,"postgres","bench",3319,"[local]",6b0c9056.cf7,10,"SELECT",2026-11-29 20:51:34 UTC,3/19,0,ERROR,22012,"division by zero",,,,,,"SELECT 1/0;",,,"psql","client backend",,-8441324848661855122\n'
)

PG15_JSONLOG = (
    '{"timestamp":"2026-11-29 20:51:34.449 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":1,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/7","txid":0,"error_severity":"LOG","message":"duration: 17.304 ms  plan:\\nQuery Text: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\\nAggregate  (cost=2890.02..2890.03 rows=1 width=8) (actual time=17.287..17.289 rows=1 loops=1)\\n  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=9 width=0) (actual time=17.273..17.276 rows=9 loops=1)\\n        Filter: (abalance > 0)\\n        Rows Removed by Filter: 99991","application_name":"psql","backend_type":"client backend","query_id":-3125346135688813602}\n'
    '{"timestamp":"2026-11-29 20:51:34.450 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":2,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 18.290 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;","application_name":"psql","backend_type":"client backend","query_id":-3125346135688813602}\n'
    '{"timestamp":"2026-11-29 20:51:34.451 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":3,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 0.844 ms  statement: SELECT a.aid, b.bbalance\\n  FROM pgbench_accounts a\\n  JOIN pgbench_branches b USING (bid)\\n WHERE a.aid < 3 AND a.filler <> \'x\';","application_name":"psql","backend_type":"client backend","query_id":-2813643363584035723}\n'
    '{"timestamp":"2026-11-29 20:51:34.457 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":4,"ps":"UPDATE","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/9","txid":759,"error_severity":"LOG","message":"duration: 6.181 ms  plan:\\nQuery Text: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;\\nUpdate on pgbench_accounts  (cost=0.29..8.31 rows=0 width=0) (actual time=6.179..6.180 rows=0 loops=1)\\n  ->  Index Scan using pgbench_accounts_pkey on pgbench_accounts  (cost=0.29..8.31 rows=1 width=10) (actual time=6.100..6.108 rows=1 loops=1)\\n        Index Cond: (aid = 7)\\n        Filter: (pg_sleep(\'0.006\'::double precision) IS NOT NULL)","application_name":"psql","backend_type":"client backend","query_id":6461644486973564675}\n'
    '{"timestamp":"2026-11-29 20:51:34.458 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":5,"ps":"UPDATE","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 6.986 ms  statement: UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = 7 AND pg_sleep(0.006) IS NOT NULL;","application_name":"psql","backend_type":"client backend","query_id":6461644486973564675}\n'
    '{"timestamp":"2026-11-29 20:51:34.458 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":6,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/10","txid":0,"error_severity":"ERROR","state_code":"22012","message":"division by zero","statement":"SELECT 1/0;","application_name":"psql","backend_type":"client backend","query_id":-8441324848661855122}\n'
    '{"timestamp":"2026-11-29 20:51:34.458 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":7,"ps":"SET","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 0.048 ms  statement: SET auto_explain.log_format = json;","application_name":"psql","backend_type":"client backend","query_id":8911258532698519259}\n'
    '{"timestamp":"2026-11-29 20:51:34.465 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":8,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/12","txid":0,"error_severity":"LOG","message":"duration: 6.310 ms  plan:\\n{\\n  \\"Query Text\\": \\"SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\\",\\n  \\"Plan\\": {\\n    \\"Node Type\\": \\"Aggregate\\",\\n    \\"Strategy\\": \\"Plain\\",\\n    \\"Partial Mode\\": \\"Simple\\",\\n    \\"Parallel Aware\\": false,\\n    \\"Async Capable\\": false,\\n    \\"Startup Cost\\": 2890.02,\\n    \\"Total Cost\\": 2890.03,\\n    \\"Plan Rows\\": 1,\\n    \\"Plan Width\\": 8,\\n    \\"Actual Startup Time\\": 6.295,\\n    \\"Actual Total Time\\": 6.297,\\n    \\"Actual Rows\\": 1,\\n    \\"Actual Loops\\": 1,\\n    \\"Plans\\": [\\n      {\\n        \\"Node Type\\": \\"Seq Scan\\",\\n        \\"Parent Relationship\\": \\"Outer\\",\\n        \\"Parallel Aware\\": false,\\n        \\"Async Capable\\": false,\\n        \\"Relation Name\\": \\"pgbench_accounts\\",\\n        \\"Alias\\": \\"pgbench_accounts\\",\\n        \\"Startup Cost\\": 0.00,\\n        \\"Total Cost\\": 2890.00,\\n        \\"Plan Rows\\": 9,\\n        \\"Plan Width\\": 0,\\n        \\"Actual Startup Time\\": 6.281,\\n        \\"Actual Total Time\\": 6.283,\\n        \\"Actual Rows\\": 9,\\n        \\"Actual Loops\\": 1,\\n        \\"Filter\\": \\"(abalance > 0)\\",\\n        \\"Rows Removed by Filter\\": 99991\\n      }\\n    ]\\n  }\\n}","application_name":"psql","backend_type":"client backend","query_id":-3125346135688813602}\n'
    '{"timestamp":"2026-11-29 20:51:34.465 UTC","user":"postgres","dbname":"bench","pid":3317,"remote_host":"[local]","session_id":"6b0c9056.cf5","line_num":9,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 6.627 ms  statement: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;","application_name":"psql","backend_type":"client backend","query_id":-3125346135688813602}\n'
    '{"timestamp":"2026-11-29 20:51:34.594 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":1,"ps":"idle","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/16","txid":0,"error_severity":"LOG","message":"statement: SET log_duration = on;","application_name":"psql","backend_type":"client backend","query_id":0}\n'
    '{"timestamp":"2026-11-29 20:51:34.594 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":2,"ps":"SET","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 0.083 ms","application_name":"psql","backend_type":"client backend","query_id":-5753437955949711861}\n'
    '{"timestamp":"2026-11-29 20:51:34.595 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":3,"ps":"idle","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/17","txid":0,"error_severity":"LOG","message":"statement: SET auto_explain.log_nested_statements = on;","application_name":"psql","backend_type":"client backend","query_id":0}\n'
    '{"timestamp":"2026-11-29 20:51:34.595 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":4,"ps":"SET","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 0.187 ms","application_name":"psql","backend_type":"client backend","query_id":4988955045834830681}\n'
    '{"timestamp":"2026-11-29 20:51:34.595 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":5,"ps":"idle","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/18","txid":0,"error_severity":"LOG","message":"statement: SELECT slow_count();","application_name":"psql","backend_type":"client backend","query_id":0}\n'
    '{"timestamp":"2026-11-29 20:51:34.608 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":6,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/18","txid":0,"error_severity":"LOG","message":"duration: 11.360 ms  plan:\\nQuery Text:  SELECT count(*) FROM pgbench_accounts WHERE abalance <> 0 \\nAggregate  (cost=2890.03..2890.04 rows=1 width=8) (actual time=11.352..11.354 rows=1 loops=1)\\n  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=13 width=0) (actual time=11.336..11.339 rows=10 loops=1)\\n        Filter: (abalance <> 0)\\n        Rows Removed by Filter: 99990","context":"SQL function \\"slow_count\\" statement 1","application_name":"psql","backend_type":"client backend","query_id":-6182430256889524102}\n'
    '{"timestamp":"2026-11-29 20:51:34.608 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":7,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/18","txid":0,"error_severity":"LOG","message":"duration: 12.265 ms  plan:\\nQuery Text: SELECT slow_count();\\nResult  (cost=0.00..0.26 rows=1 width=8) (actual time=12.252..12.253 rows=1 loops=1)","application_name":"psql","backend_type":"client backend","query_id":-6182430256889524102}\n'
    '{"timestamp":"2026-11-29 20:51:34.608 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":8,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/0","txid":0,"error_severity":"LOG","message":"duration: 13.082 ms","application_name":"psql","backend_type":"client backend","query_id":-6182430256889524102}\n'
    '{"timestamp":"2026-11-29 20:51:34.608 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":9,"ps":"idle","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/19","txid":0,"error_severity":"LOG","message":"statement: SELECT 1/0;","application_name":"psql","backend_type":"client backend","query_id":0}\n'
    '{"timestamp":"2026-11-29 20:51:34.608 UTC","user":"postgres","dbname":"bench","pid":3319,"remote_host":"[local]","session_id":"6b0c9056.cf7","line_num":10,"ps":"SELECT","session_start":"2026-11-29 20:51:34 UTC","vxid":"3/19","txid":0,"error_severity":"ERROR","state_code":"22012","message":"division by zero","statement":"SELECT 1/0;","application_name":"psql","backend_type":"client backend","query_id":-8441324848661855122}\n'
)

PG15_FRENCH = (
    '2026-11-29 21:06:17.746 UTC [30480] LOG:  starting PostgreSQL 15.18 (Debian 15.18-0+deb12u1) on x86_64-pc-linux-gnu, compiled by gcc (Debian 12.2.0-14+deb12u1) 12.2.0, 64-bit\n'
    '2026-11-29 21:06:17.748 UTC [30480] LOG:  listening on Unix socket "/tmp/pgreal/.s.PGSQL.54329"\n'
    '2026-11-29 21:06:17.762 UTC [30484] LOG:  database system was shut down at 2026-11-29 20:51:36 UTC\n'
    '2026-11-29 21:06:17.774 UTC [30480] LOG:  database system is ready to accept connections\n'
    "2026-11-29 21:06:18.904 UTC [30501] postgres@bench LOG:  durée : 0.243 ms, instruction : SET lc_messages = 'fr_FR.UTF-8';\n"
    '2026-11-29 21:06:18.904 UTC [30501] postgres@bench LOG:  durée : 0.296 ms, instruction : SELECT 1;\n'
    '2026-11-29 21:06:18.932 UTC [30501] postgres@bench LOG:  duration: 26.409 ms  plan:\n'
    '\tQuery Text: SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    '\tAggregate  (cost=2890.02..2890.03 rows=1 width=8) (actual time=26.393..26.394 rows=1 loops=1)\n'
    '\t  ->  Seq Scan on pgbench_accounts  (cost=0.00..2890.00 rows=9 width=0) (actual time=26.378..26.380 rows=10 loops=1)\n'
    '\t        Filter: (abalance > 0)\n'
    '\t        Rows Removed by Filter: 99990\n'
    '2026-11-29 21:06:18.932 UTC [30501] postgres@bench LOG:  durée : 27.770 ms, instruction : SELECT count(*) FROM pgbench_accounts WHERE abalance > 0;\n'
    '2026-11-29 21:06:18.932 UTC [30501] postgres@bench ERREUR:  division par zéro\n'
    '2026-11-29 21:06:18.932 UTC [30501] postgres@bench INSTRUCTION :  SELECT 1/0;\n'
    '2026-11-29 21:06:18.943 UTC [30480] LOG:  received fast shutdown request\n'
    '2026-11-29 21:06:18.943 UTC [30480] LOG:  aborting any active transactions\n'
    '2026-11-29 21:06:18.949 UTC [30480] LOG:  background worker "logical replication launcher" (PID 30487) exited with exit code 1\n'
    '2026-11-29 21:06:18.957 UTC [30482] LOG:  shutting down\n'
    '2026-11-29 21:06:18.957 UTC [30482] LOG:  checkpoint starting: shutdown immediate\n'
    '2026-11-29 21:06:18.965 UTC [30482] LOG:  checkpoint complete: wrote 3 buffers (0.0%); 0 WAL file(s) added, 0 removed, 0 recycled; write=0.004 s, sync=0.001 s, total=0.009 s; sync files=2, longest=0.001 s, average=0.001 s; distance=0 kB, estimate=0 kB\n'
    '2026-11-29 21:06:18.976 UTC [30480] LOG:  database system is shut down\n'
)



@pytest.mark.parametrize("value", ["nan", "inf", "-1.5"])
def test_a_duration_that_is_no_number_drops_only_its_entry(value):
    text = (
        f"2024-05-14 10:00:00.123 UTC [42] LOG:  duration: {value} ms  statement: select 1\n"
        "2024-05-14 10:00:01.123 UTC [42] LOG:  duration: 1.5 ms  statement: select 2\n"
    )
    statements = _parse("postgresql-log", text).tables[T.STATEMENT]
    assert statements["sql"].to_list() == ["select 2"]
    assert statements["query_time_s"].to_list() == [0.0015]


def test_a_time_python_cannot_hold_does_not_make_the_log_unreadable():
    """Year 0 (a corrupt line; found by the batch-vs-alone fuzz test) made the whole log fail with
    ValueError when its time range was taken; now the other entries give the range."""
    from dbdiag.parsers import pg_stderr

    log = (
        b"0000-01-01 00:00:00.000 UTC [7] LOG:  duration: 1.000 ms  statement: SELECT 1\n"
        b"2024-01-01 00:00:01.000 UTC [7] LOG:  duration: 2.000 ms  statement: SELECT 2\n"
    )
    result = pg_stderr.parse_bytes(log, ParseContext(source="pg.log"))
    assert result.records == 2
    assert [t.year for t in result.time_range] == [2024, 2024]


def test_a_long_number_after_the_time_is_no_zone_offset():
    """A corrupt line (fuzzing: a 40-digit number after the time) was read as zone '-1111' and said
    so in a note; the times are now read in --tz, as zone-less ones."""
    from dbdiag.parsers import pg_stderr

    line = "2024-01-01 00:00:00.000 -" + "1" * 40 + " [7] LOG:  duration: 1.000 ms  statement: SELECT 1\n"
    result = pg_stderr.parse(line * 3, ParseContext(source="pg.log", tz="UTC"))
    assert result.records == 3
    assert not any("-1111" in note for note in result.notes), result.notes
    assert "3 log times have no zone; read as UTC (--tz)" in result.notes
