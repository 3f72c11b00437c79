"""MySQL / MariaDB / Percona slow log parser: goldens on the corpus and the MariaDB capture, counts
checked against an independent count and against pt-query-digest, and hostile inputs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from functools import cache
from pathlib import Path

import polars as pl
import pytest
from conftest import CORPUS, corpus_names

from dbdiag import tables as T
from dbdiag.parsers import PARSERS, mysql_slowlog
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError, ParseResult
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS
from dbdiag.parsers.mysql_slowlog import pieces as slowlog_pieces

SLOWLOG_DIR = CORPUS / "slowlog-mysql"
CORPUS_FILES = corpus_names("slowlog-mysql")
CAPTURE = CORPUS / "captures" / "mariadb-sysbench-debian12.tar.gz"
CAPTURE_MEMBER = "capture/db/mariadb-slow.log"
REFUSED = {  # corpus file -> why nothing can be read from it
    "percona-toolkit__slow015.txt": "the last entry has neither # Query_time nor statement text",
}
PT_QUERY_DIGEST = shutil.which("pt-query-digest")


def _utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


def _text(name: str) -> str:
    return (SLOWLOG_DIR / name).read_bytes().decode("utf-8", "backslashreplace")


@cache
def _capture_bytes() -> bytes:
    with tarfile.open(CAPTURE) as tar:
        return tar.extractfile(CAPTURE_MEMBER).read()  # in memory, never to disk


def _capture_text() -> str:
    return _capture_bytes().decode("utf-8", "backslashreplace")


def _parse(text: str, source: str = "slow.log", tz: str = "UTC") -> ParseResult:
    return mysql_slowlog.parse(text, ParseContext(source=source, tz=tz))


def _statements(text: str, **kwargs: str) -> pl.DataFrame:
    return _parse(text, **kwargs).tables[T.STATEMENT]


@cache
def _corpus_result(name: str, source: str = "slow.log", tz: str = "UTC") -> ParseResult:
    """A corpus file parsed once per session: several tests read the same result (never change it)."""
    return _parse(_text(name), source=source, tz=tz)


def _corpus_statements(name: str) -> pl.DataFrame:
    return _corpus_result(name).tables[T.STATEMENT]


@cache
def _capture_result(source: str = CAPTURE_MEMBER) -> ParseResult:
    return _parse(_capture_text(), source=source)


# ---- goldens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_corpus_refused(name: str) -> None:
    """Refused with the reason (the corpus files read are parser cases)."""
    with pytest.raises(ParseError, match=re.escape(REFUSED[name])):
        _corpus_result(name, source=f"slowlog-mysql/{name}")


# ---- the real capture ----------------------------------------------------------------------------


def test_capture_counts_match_an_independent_count() -> None:
    text = _capture_text()
    result = _capture_result()
    statement, plan_node = result.tables[T.STATEMENT], result.tables[T.PLAN_NODE]
    # every entry of this log has exactly one User@Host and one Query_time line
    entries = len(re.findall(r"^# Query_time: ", text, re.M))
    assert entries == len(re.findall(r"^# User@Host: ", text, re.M)) == 5902
    assert result.records == statement.height == entries
    assert statement["stmt_id"].to_list() == list(range(entries))
    # explain data rows: every "# explain:" line that is not the header row
    explain_rows = len(re.findall(r"^# explain: (?!id\t)", text, re.M))
    assert plan_node.height == explain_rows == 5312
    assert statement.filter(pl.col("plan").is_not_null()).height == len(re.findall(r"^# explain: id\t", text, re.M))
    # the two banners at the top are not statements and do not glue onto anything
    assert not statement["sql"].str.contains("Version:").any()
    assert statement["engine"].unique().to_list() == ["mariadb"]
    assert statement["sql"].null_count() == 0 and statement["query_time_s"].null_count() == 0
    # all of it started between 19:12:14 and 19:12:24 (sysbench ran 10 s): MariaDB stamps # Time and
    # SET timestamp with the statement's start, so the end is that second plus Query_time
    assert statement["start_ts"].min() == _utc(2026, 11, 29, 19, 12, 14)
    assert statement["start_ts"].max() == _utc(2026, 11, 29, 19, 12, 24)
    assert (statement["end_ts"] - statement["start_ts"]).dt.total_microseconds().max() == round(statement["query_time_s"].max() * 1e6)
    assert (statement["start_ts"].dt.microsecond() == 0).all()  # the stamps stay whole seconds: no precision is made up
    assert not result.warnings


def test_capture_first_entries_read_by_eye() -> None:
    statement = _capture_result().tables[T.STATEMENT]
    first = statement.row(0, named=True)
    # lines 7-14: # Time: 261129 19:12:14 / root[root] @ localhost / Thread_id: 8 Schema: sbtest /
    # Query_time: 0.000024 ... / use `sbtest`; / SET timestamp=1795979534; / BEGIN;
    assert first["line"] == 7
    assert first["sql"] == "BEGIN"
    assert (first["user"], first["client_host"], first["conn_id"], first["db"]) == ("root", "localhost", "8", "sbtest")
    assert first["query_time_s"] == 0.000024 and first["lock_time_s"] == 0.0
    assert (first["rows_sent"], first["rows_examined"], first["rows_affected"]) == (0, 0, 0)
    assert first["start_ts"] == _utc(2026, 11, 29, 19, 12, 14)  # MariaDB: # Time is the start
    assert first["end_ts"] == _utc(2026, 11, 29, 19, 12, 14, 24)
    assert first["plan"] is None and first["full_scan"] is False  # query_plan verbosity: no flag line = all No
    second = statement.row(1, named=True)
    assert second["line"] == 15 and second["sql"] == "SELECT c FROM sbtest3 WHERE id=9148"
    assert second["plan_signature"] == "sbtest3:const(PRIMARY)" and second["index_names"] == "PRIMARY"
    assert second["plan"].splitlines()[1] == "1\tSIMPLE\tsbtest3\tconst\tPRIMARY\tPRIMARY\t4\tconst\t1\tNULL\t100.00\tNULL\t"
    # no # Time of its own (the server writes one only when the second changes): SET timestamp gives the start
    assert second["start_ts"] == _utc(2026, 11, 29, 19, 12, 14)
    assert second["end_ts"] == second["start_ts"] + timedelta(microseconds=round(second["query_time_s"] * 1e6))
    last = statement.row(-1, named=True)
    assert last["sql"] == "SHOW GLOBAL STATUS" and last["db"] is None  # "Schema:   QC_hit: No": no database
    assert last["plan_signature"] == "SESSION_STATUS:ALL" and last["full_scan"] is True


def test_capture_range_scans_have_actual_rows() -> None:
    result = _capture_result()
    plan_node = result.tables[T.PLAN_NODE]
    ranges = plan_node.filter(pl.col("node_type") == "range")
    assert ranges.height == 2065
    # "SELECT c FROM sbtestN WHERE id BETWEEN a AND a+99": 100 rows estimated and read
    between = result.tables[T.STATEMENT].filter(pl.col("sql").str.contains("BETWEEN")).select("stmt_id")
    read = ranges.join(between, on="stmt_id")
    assert read.height == 1180 and set(read["actual_rows"].to_list()) == {100.0}
    assert set(read["est_rows"].to_list()) == {100.0}
    assert plan_node.filter(pl.col("node_type") == "ALL")["relation"].str.starts_with("sbtest").sum() == 295


def test_chunked_reading_gives_the_same_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pieces of 60 kB (a few hundred entries each) must not change anything: line numbers, stmt_id,
    the # Time and database carried over from one entry to the next, plans."""
    text = _capture_text()
    whole = _capture_result()
    monkeypatch.setattr(slowlog_pieces, "CHUNK_CHARS", 60_000)
    assert len(slowlog_pieces.chunk_bounds(text, slowlog_pieces.CHUNK_CHARS)) > 40
    pieces = _parse(text, source=CAPTURE_MEMBER)
    for name in (T.STATEMENT, T.PLAN_NODE):
        assert pieces.tables[name].equals(whole.tables[name]), name
    assert pieces.notes == whole.notes and pieces.warnings == whole.warnings


def test_bytes_given_to_keep_are_let_go_once_the_pieces_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """``parse_bytes_owned`` empties the box, and nothing the pieces keep refers to the log's bytes (the
    lines are views of them; the texts kept are ``detached``): when the whole log's tables are put
    together, the caller's reference is the only one left, so that the pipeline, which holds the bytes
    in the box only, has them freed by then (a 200 MB log's bytes are not in memory beside its tables)."""
    if mysql_slowlog.batch.slowlog_lines.line_scan() is None:
        pytest.skip("the C kernel _line_scan is not built: the text path decodes the bytes first")
    data = _capture_bytes()
    monkeypatch.setattr(slowlog_pieces, "CHUNK_CHARS", 60_000)  # many pieces, as in a big log
    ours = sys.getrefcount(data)
    seen: list[int] = []
    header_table_of = mysql_slowlog.batch.header_table_of

    def counting(texts: pl.Series) -> pl.DataFrame:  # the first step after the pieces are read
        seen.append(sys.getrefcount(data))
        return header_table_of(texts)

    monkeypatch.setattr(mysql_slowlog.batch, "header_table_of", counting)
    box = [data]
    result = mysql_slowlog.parse_bytes_owned(box, ParseContext(source=CAPTURE_MEMBER))
    assert box == []
    assert seen == [ours]
    assert sys.getrefcount(data) == ours
    assert result.tables[T.STATEMENT].equals(_capture_result().tables[T.STATEMENT])


# ---- against pt-query-digest --------------------------------------------------------------------

# Files where our statement count differs from pt-query-digest's on purpose.
PT_DIFFERENCES = {
    # pt-query-digest's SlowLogParser finds no query in an entry whose only text is "use x;" after
    # SET timestamp, reads ahead, and takes the next entry's "# User@Host:" header as an
    # administrator command: that entry and the one after it are lost (twice here). We keep all 8.
    "go-mysql__slow023.log": (8, 6),
    # the overflowed Query_time '18446744073708.796870.000036' makes pt-query-digest's aggregator
    # die ("Failed to compile Query_time handler code"); we keep the statement with a warning.
    "percona-toolkit__slow017.txt": (1, 0),
    # pt-query-digest 3.2.1 knows the "mysqld, Version:" banner but not MariaDB 10.11's
    # "mariadbd, Version:", so it reads the banner as the query text of the first entry (BEGIN),
    # which then does not count.
    CAPTURE_MEMBER: (5902, 5901),
}


@cache
def _pt_count(path: str, data: bytes | None = None) -> int:
    """Sum of query_count over pt-query-digest's classes. ``--limit 1000000`` lists every class:
    the ``100%:N`` form stops once 100% of Query_time is covered and drops zero-time classes
    (the two Quit entries of bug_957442_sample.log)."""
    command = [PT_QUERY_DIGEST, "--output", "json", "--limit", "1000000", "--no-version-check"]
    if data is None:
        run = subprocess.run([*command, path], capture_output=True, timeout=120, check=False)
    else:
        run = subprocess.run(command, input=data, capture_output=True, timeout=120, check=False)  # reads stdin
    out = run.stdout.decode("utf-8", "replace")
    out = out[out.find("{"):] if "{" in out else ""  # on stdin it first says "Reading from STDIN ..."
    if not out:
        return 0  # nothing parsed (or pt-query-digest died on the input: see PT_DIFFERENCES)
    return sum(c["query_count"] for c in json.loads(out)["classes"])


@cache
def _pt_counts() -> dict[str, int]:
    """_pt_count of every corpus file and of the capture, a few runs side by side: each is mostly
    pt-query-digest's start (about 0.3 s of CPU), run once per file as before."""

    def count(name: str) -> int:
        return _pt_count(name, _capture_bytes()) if name == CAPTURE_MEMBER else _pt_count(str(SLOWLOG_DIR / name))

    names = [*CORPUS_FILES, CAPTURE_MEMBER]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(names, pool.map(count, names)))


def _our_count(name: str) -> int:
    try:
        return (_capture_result("slow.log") if name == CAPTURE_MEMBER else _corpus_result(name)).records
    except ParseError:
        return 0


@pytest.mark.skipif(PT_QUERY_DIGEST is None, reason="pt-query-digest (percona-toolkit) is not installed")
@pytest.mark.parametrize("name", [*CORPUS_FILES, CAPTURE_MEMBER])
def test_statement_count_matches_pt_query_digest(name: str) -> None:
    ours, theirs = _our_count(name), _pt_counts()[name]
    assert (ours, theirs) == PT_DIFFERENCES.get(name, (theirs, theirs))


def test_pt_query_digest_is_checked_here() -> None:
    """Say loudly when the comparison above cannot run."""
    if PT_QUERY_DIGEST is None:
        pytest.skip("pt-query-digest is not installed: statement counts were not compared with it "
                    "(apt-get install percona-toolkit)")
    assert Path(PT_QUERY_DIGEST).exists()


# ---- detection ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [n for n in CORPUS_FILES if n not in REFUSED])
def test_detect_corpus_by_content(name: str) -> None:
    head = _text(name)[:DETECT_HEAD_BYTES]
    assert mysql_slowlog.detect(head, "member") > 0.5
    others = {spec.kind: spec.detect(head, "member") for spec in PARSERS if spec.kind != "mysql-slowlog"}
    assert all(score < 0.5 for score in others.values()), others


def test_detect_truncated_file_needs_its_name() -> None:
    head = _text("percona-toolkit__slow015.txt")
    assert mysql_slowlog.detect(head, "member") < 0.5
    assert mysql_slowlog.detect(head, "slow.log") > 0.5


def test_detect_capture() -> None:
    assert mysql_slowlog.detect(_capture_text()[:DETECT_HEAD_BYTES], "member") > 0.9


def test_general_log_banner_is_not_a_slow_log() -> None:
    general = (
        "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
        "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
        "Time                 Id Command    Argument\n"
        "2024-01-01T10:00:00.123456Z\t    8 Connect\troot@localhost on  using Socket\n"
        "2024-01-01T10:00:00.223456Z\t    8 Query\tSELECT 1\n"
    )
    assert mysql_slowlog.detect(general, "general.log") < 0.5


# ---- fields and times on corpus files --------------------------------------------------------------


def test_mysql8_log_slow_extra_start_end() -> None:
    statement = _corpus_statements("beats__mysql-ubuntu-8.0.15.log")
    extra = statement.row(1, named=True)
    assert extra["start_ts"] == _utc(2019, 3, 24, 14, 4, 51, 82107)
    assert extra["end_ts"] == _utc(2019, 3, 24, 14, 4, 53, 713951)
    assert extra["conn_id"] == "16" and extra["error_code"] == "0" and extra["success"] is True
    assert (extra["tmp_table"], extra["tmp_table_on_disk"], extra["filesort"]) == (True, False, True)
    plain = statement.row(0, named=True)
    # ISO # Time with microseconds is the end; start = end - Query_time (SET timestamp is whole seconds)
    assert plain["end_ts"] == _utc(2019, 3, 24, 14, 1, 47, 811234)
    assert plain["start_ts"] == _utc(2019, 3, 24, 14, 1, 45, 335765)
    assert plain["sql"].startswith("SELECT last_name") and statement["db"].to_list() == ["employees"] * 2


def test_iso_time_with_offset() -> None:
    statement = _corpus_statements("beats__mysql-5.7.22.log")
    assert statement["end_ts"][0] == _utc(2018, 8, 7, 8, 27, 47, 169604)  # 16:27:47.169604+08:00
    assert statement["client_host"].to_list() == ["218.76.8.37", "localhost", "apphost", "apphost"]
    assert statement["conn_id"].to_list() == ["7234", None, "10997316", "10999834"]
    assert statement["sql"][3] == "call load_stats(1, '2017-04-28 00:00:00')"


def test_percona_fields() -> None:
    statement = _corpus_statements("go-mysql__slow013.log")
    failed = statement.filter(pl.col("error_code") == "1146").row(0, named=True)
    assert failed["success"] is False and failed["db"] is None  # "# Schema:   Last_errno: 1146"
    assert failed["sql"] == "select count(*) into @discard from `information_schema`.`PARTITIONS`"
    assert statement["engine"].unique().to_list() == ["percona"]
    assert statement.height == 5  # 25 server banners in between are not statements
    assert not statement["sql"].str.contains("mysqld|Tcp port").any()
    full = _corpus_statements("go-mysql__slow014.log")
    assert full["txn_id"].to_list() == ["2552F3B37", "2552F3B38", "2552F3B39", "2552F3B3A"]
    assert full["full_scan"].to_list() == [False, True, True, False]
    assert full["sql"][1].startswith("### Channels ###\n")  # a "#" line inside the statement stays in it
    eight = _corpus_statements("beats__percona-ubuntu-8.0.15.log")
    assert eight["txn_id"].to_list() == [None, None]  # InnoDB_trx_id: 0 = no transaction


def test_mariadb_explain_space_aligned() -> None:
    result = _corpus_result("beats__mariadb-explain.log")
    statement = result.tables[T.STATEMENT]
    assert statement["plan_signature"][0] == "nation:ref(n_name)|customer:ref(i_c_nationkey)|orders:ref(i_o_custkey)"
    assert statement["index_names"][0] == "n_name,i_c_nationkey,i_o_custkey"
    nodes = result.tables[T.PLAN_NODE]
    assert nodes["node_id"].to_list() == [0, 1, 2]
    assert nodes["est_rows"].to_list() == [1.0, 3145.0, 7.0]
    assert nodes["filter"].to_list() == ["Using where; Using index", "Using index", "Using index"]


def test_mariadb_explain_without_table() -> None:
    result = _corpus_result("go-mysql__mariadb102-with-explain.log")
    assert result.tables[T.STATEMENT]["plan_signature"][0] is None  # "No tables used"
    assert result.tables[T.PLAN_NODE]["filter"].to_list() == ["No tables used"]
    assert result.tables[T.STATEMENT]["engine"][0] == "mariadb"


def test_entries_without_time_inherit_it_and_db_carries_over() -> None:
    result = _corpus_result("percona-toolkit__slow006.txt")
    statement = result.tables[T.STATEMENT]
    assert statement["db"].to_list() == ["foo", "foo", "bar", "bar", "bar", "foo"]
    slow013 = _corpus_result("percona-toolkit__slow013.txt")
    ends = slow013.tables[T.STATEMENT]["end_ts"].to_list()
    # entry 1 precedes any # Time; entries 4 and 5 follow "# Time: 081127  8:51:21"
    assert ends == [None, _utc(2008, 11, 27, 8, 51, 20), _utc(2008, 11, 27, 8, 51, 21), _utc(2008, 11, 27, 8, 51, 21), _utc(2008, 11, 27, 8, 51, 21)]
    assert any("take the previous entry's time" in n for n in slow013.notes)


def test_time_formats() -> None:
    assert _corpus_statements("percona-toolkit__slow056.txt")["end_ts"][0] == _utc(2012, 11, 23, 19, 56, 6, 0)  # .0000001967
    assert _corpus_statements("percona-toolkit__bug_957442_sample.log")["end_ts"][1] == _utc(2012, 3, 15, 18, 1, 58, 480646)
    assert _corpus_statements("percona-toolkit__slow045.txt")["end_ts"][0] == _utc(2010, 5, 18, 5, 11, 1)  # "100518 5:11:01"


def test_zone_less_time_in_tz() -> None:
    result = _corpus_result("percona-toolkit__slow001.txt", tz="America/New_York")
    assert result.tables[T.STATEMENT]["end_ts"].to_list() == [_utc(2007, 10, 16, 1, 43, 52), _utc(2007, 10, 16, 1, 45, 10)]
    assert "times have no zone; read as America/New_York (--tz)" in result.notes


def test_wrong_zone_is_caught_by_set_timestamp() -> None:
    result = _corpus_result("percona-toolkit__slow060.txt")
    # "# Time: 140714 14:16:52" with SET timestamp=1405358212 (17:16:52 UTC): the server ran at UTC-3
    assert result.tables[T.STATEMENT]["end_ts"][0] == _utc(2014, 7, 14, 17, 16, 52)
    assert any("UTC-03:00" in w.reason for w in result.warnings)
    right = _corpus_result("percona-toolkit__slow060.txt", tz="America/Sao_Paulo")
    assert right.tables[T.STATEMENT]["end_ts"][0] == _utc(2014, 7, 14, 17, 16, 52) and not right.warnings


def test_bogus_set_timestamp_is_ignored() -> None:
    result = _corpus_result("percona-toolkit__slow056.txt")  # SET timestamp=1111111111 and 2222222222
    assert any("more than a time zone explains" in w.reason for w in result.warnings)
    assert result.tables[T.STATEMENT]["end_ts"].to_list() == [_utc(2012, 11, 23, 19, 56, 6)] * 2


def test_use_after_set_timestamp_is_the_statement() -> None:
    statement = _corpus_statements("percona-toolkit__slow056.txt")
    assert statement["sql"].to_list() == ["use test_db", "update t set b = b + 30 where user_id=1"]
    slow023 = _corpus_statements("go-mysql__slow023.log")
    assert slow023["sql"][5] == "use `dbnameb`"


def test_admin_commands_and_file_starting_mid_entry() -> None:
    result = _corpus_result("percona-toolkit__slow041.txt")
    statement = result.tables[T.STATEMENT]
    assert statement["sql"].to_list() == ["administrator command: Quit", "show /*!50002 GLOBAL */ status", "administrator command: Quit"]
    assert statement["query_time_s"][0] is None and statement["line"].to_list() == [1, 2, 8]
    assert result.warnings[0].line == 1 and "starts inside an entry" in result.warnings[0].reason


def test_broken_corpus_files_read_what_they_can() -> None:
    overflow = _corpus_result("percona-toolkit__slow017.txt")
    assert overflow.tables[T.STATEMENT]["query_time_s"][0] is None
    assert overflow.tables[T.STATEMENT]["rows_examined"][0] == 127
    assert "18446744073708.796870.000036" in overflow.warnings[0].reason
    bad_date = _corpus_result("percona-toolkit__slow022.txt")
    assert bad_date.records == 6 and bad_date.tables[T.STATEMENT]["end_ts"].null_count() == 6
    assert sum("unreadable # Time 'margdl" in w.reason for w in bad_date.warnings) == 6
    garbage = _corpus_statements("percona-toolkit__cannot-distill.log")
    assert garbage["sql"].to_list() == ["non sql statement", "***GARBLE*** \\#garble ``````````````````````bork~!"]
    assert garbage["user"].to_list() == ["bob", "jill"]


def test_blank_lines_inside_statement() -> None:
    statement = _corpus_statements("percona-toolkit__slow020.txt")
    assert statement["sql"][1] == "INSERT INTO tbl\n\n\nVALUES\n\n               (1), (2),\n\n\n      (3)"


def test_rate_limited_log_is_noted() -> None:
    notes = _corpus_result("percona-toolkit__slow059.txt").notes
    assert any("log_slow_rate_limit=2" in n for n in notes)


def test_rate_limit_without_rate_type_is_noted() -> None:
    # Percona 5.5 writes Log_slow_rate_limit alone; the parse once failed looking for the type column
    text = ENTRY.replace("use shop;\n", "# Log_slow_rate_limit: 2\nuse shop;\n")
    for parse in (lambda: _parse(text), lambda: mysql_slowlog.parse_bytes(text.encode(), ParseContext(source="slow.log"))):
        result = parse()
        assert result.records == 1
        assert any("log_slow_rate_limit=2 per None" in n for n in result.notes)


def test_time_line_longer_than_a_piece_ends_the_cutting(monkeypatch: pytest.MonkeyPatch) -> None:
    # a "# Time:" line longer than a piece, then User@Host: the next entry start found was the piece's own
    # start, and the cutting looped for ever (the count below makes a relapse fail instead of hang)
    text = "# Time: 240101 10:00:00 " + "x" * 5000 + "\n# User@Host: a[a] @ b []\nSELECT 1;\n" + "y" * 3000
    next_entry_start, calls = slowlog_pieces.next_entry_start, []

    def counted(*args):
        calls.append(1)
        assert len(calls) < 100, "_chunk_bounds keeps asking for the same entry start"
        return next_entry_start(*args)

    monkeypatch.setattr(slowlog_pieces, "next_entry_start", counted)
    for data in (text, text.encode()):
        bounds = slowlog_pieces.chunk_bounds(data, 1000)
        assert bounds[0][0] == 0 and bounds[-1][1] == len(data)
        assert all(start < end for start, end in bounds)


# ---- hostile input --------------------------------------------------------------------------------

ENTRY = (
    "# Time: 240101 10:00:00\n"
    "# User@Host: app[app] @ web1 [10.0.0.5]  Id:    42\n"
    "# Query_time: 1.500000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1000\n"
    "use shop;\n"
    "SET timestamp=1704103200;\n"
    "SELECT * FROM orders WHERE id = 7;\n"
)


@pytest.mark.parametrize("text", ["", "   \n\n", "\ufeff"])
def test_empty(text: str) -> None:
    with pytest.raises(ParseError, match="empty"):
        _parse(text)


def test_garbage_without_headers() -> None:
    with pytest.raises(ParseError, match="no slow-log entry found"):
        _parse("hello\nworld\n" * 100)


def test_binary_garbage_does_not_crash() -> None:
    noise = bytes(range(256)).decode("latin-1") * 50
    result = _parse(ENTRY + noise + "\n" + ENTRY)
    assert result.records == 2
    assert result.tables[T.STATEMENT]["query_time_s"].to_list() == [1.5, 1.5]


def test_truncated_last_entry_is_dropped_with_a_warning() -> None:
    cut = ENTRY + ENTRY.split("# Query_time")[0]
    result = _parse(cut)
    assert result.records == 1
    assert any(w.line == 7 and "dropped" in w.reason for w in result.warnings)


def test_statement_cut_in_the_middle_is_kept_with_a_warning() -> None:
    result = _parse(ENTRY + ENTRY[: ENTRY.index("WHERE")])
    assert result.tables[T.STATEMENT]["sql"].to_list()[-1] == "SELECT * FROM orders"
    assert any("no closing ';'" in w.reason for w in result.warnings)


def test_crlf_reads_like_lf() -> None:
    lf = _parse(ENTRY * 3)
    crlf = _parse((ENTRY * 3).replace("\n", "\r\n"))
    assert crlf.tables[T.STATEMENT].equals(lf.tables[T.STATEMENT])
    assert any("CRLF" in n for n in crlf.notes)


def test_non_utf8_bytes_arrive_as_escapes() -> None:
    raw = ENTRY.encode().replace(b"id = 7", b"name = '\xff\xfecaf\xe9'")
    statement = _statements(raw.decode("utf-8", "backslashreplace"))
    assert statement["sql"][0] == "SELECT * FROM orders WHERE name = '\\xff\\xfecaf\\xe9'"


def test_several_statements_in_one_entry_are_one_event() -> None:
    """pt-query-digest reads the whole text between headers as one event."""
    text = ENTRY.replace("SELECT * FROM orders WHERE id = 7;\n", "SELECT 1;\nSELECT 2;\n")
    statement = _statements(text + ENTRY)
    assert statement["sql"].to_list() == ["SELECT 1;\nSELECT 2", "SELECT * FROM orders WHERE id = 7"]


def test_banner_between_entries_is_not_glued() -> None:
    banner = (
        "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
        "Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
        "Time                 Id Command    Argument\n"
    )
    result = _parse(ENTRY + banner + ENTRY)
    assert result.tables[T.STATEMENT]["sql"].to_list() == ["SELECT * FROM orders WHERE id = 7"] * 2
    assert result.tables[T.STATEMENT]["line"].to_list() == [1, 10]


def test_hostile_sql_text_is_kept_verbatim() -> None:
    nasty = "SELECT '<script>alert(1)</script>', '\x1c\u2028', '# Time: 240101 10:00:00' FROM t"
    statement = _statements(ENTRY.replace("SELECT * FROM orders WHERE id = 7", nasty))
    assert statement["sql"][0] == nasty


def test_unknown_zone_warns_and_reads_utc() -> None:
    result = _parse(ENTRY, tz="Mars/Olympus_Mons")
    assert any("unknown time zone" in w.reason for w in result.warnings)
    assert result.tables[T.STATEMENT]["end_ts"][0] == _utc(2024, 1, 1, 10, 0, 0)


def test_many_bad_entries_cap_warnings() -> None:
    bad = "# Time: 240101 10:00:00\n# Query_time: x.y  Lock_time: 0 Rows_sent: 0  Rows_examined: 0\nSELECT 1;\n"
    result = _parse(bad * 300)
    assert result.records == 300
    assert len(result.warnings) <= MAX_WARNINGS + 2


# Written by MariaDB 10.11.19 (this machine, long_query_time=0): thread 8 held a row lock in an open
# transaction over DO SLEEP(3); thread 7's UPDATE waited 1.9 s for it and was written after COMMIT,
# under a # Time two seconds earlier than the entry above it: # Time and SET timestamp are starts.
MARIADB_START_STAMPED = """/usr/sbin/mariadbd, Version: 10.11.19-MariaDB-0+deb12u1 (Debian 12). started with:
Tcp port: 0  Unix socket: /tmp/tsprobe/mysql.sock
Time		    Id Command	Argument
# Time: 261202  2:40:59
# User@Host: root[root] @ localhost []
# Thread_id: 6  Schema: scratch  QC_hit: No
# Query_time: 3.003078  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
# Rows_affected: 0  Bytes_sent: 11
SET timestamp=1796179259;
DO SLEEP(3);
# Time: 261202  2:41:02
# User@Host: root[root] @ localhost []
# Thread_id: 6  Schema: scratch  QC_hit: No
# Query_time: 0.001619  Lock_time: 0.000000  Rows_sent: 0  Rows_examined: 0
# Rows_affected: 0  Bytes_sent: 11
SET timestamp=1796179262;
COMMIT;
# Time: 261202  2:41:00
# User@Host: root[root] @ localhost []
# Thread_id: 7  Schema: scratch  QC_hit: No
# Query_time: 1.915763  Lock_time: 0.002016  Rows_sent: 0  Rows_examined: 1
# Rows_affected: 1  Bytes_sent: 52
SET timestamp=1796179260;
UPDATE t SET v=v+10 WHERE id=1;
"""


@pytest.mark.parametrize("banner", [True, False])
def test_mariadb_times_are_statement_starts(banner: bool) -> None:
    text = MARIADB_START_STAMPED if banner else MARIADB_START_STAMPED.split("Argument\n", 1)[1]
    statement = _parse(text).tables[T.STATEMENT]
    sleep, commit, update = statement.rows(named=True)
    assert sleep["start_ts"] == _utc(2026, 12, 2, 2, 40, 59) and sleep["end_ts"] == _utc(2026, 12, 2, 2, 41, 2, 3078)
    assert commit["start_ts"] == _utc(2026, 12, 2, 2, 41, 2)
    # the waiting UPDATE began before the COMMIT that released it, and ended after it
    assert update["start_ts"] == _utc(2026, 12, 2, 2, 41, 0)
    assert update["end_ts"] == _utc(2026, 12, 2, 2, 41, 1, 915763)
    assert update["start_ts"] < commit["start_ts"] and sleep["end_ts"] > update["start_ts"]
