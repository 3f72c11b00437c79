"""The slow-log C kernel (dbdiag._line_scan): built, same tables as the polars reading without it,
the same reading from raw bytes (``parse_bytes``) as from the text ``pipeline.decode`` makes of
them, and safe on hostile bytes.

mysql_slowlog reads each piece with the kernel (lines as string views over the bytes, line kinds,
entry marks, numbered header and explain texts, plain Query_time lines); without the kernel (a
package installed with no C compiler) polars and numpy do the same. Every reading must give the
same tables, warnings and notes.
"""

from __future__ import annotations

import random
import sys
import tarfile
from functools import cache

import numpy as np
import polars as pl
import pytest
from conftest import CORPUS, corpus_names
from golden import result_as_json
from kernel_readings import Readings, assert_read_alike

from dbdiag.native import slowlog_lines
from dbdiag.parsers import mysql_slowlog
from dbdiag.parsers.mysql_slowlog import batch as slowlog_batch
from dbdiag.parsers.mysql_slowlog import pieces as slowlog_pieces
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult

SLOWLOG_DIR = CORPUS / "slowlog-mysql"
CORPUS_FILES = corpus_names("slowlog-mysql")
CAPTURE = CORPUS / "captures" / "mariadb-sysbench-debian12.tar.gz"
CAPTURE_MEMBER = "capture/db/mariadb-slow.log"
# The capture's first 150 kB (cut after a line): in pieces of 300 characters the whole capture
# would be 5,584 pieces of ~7 ms each, per reading; its head gives the same cuts at every kind of line.
CAPTURE_HEAD = "capture/db/mariadb-slow.log, first 150 kB"
CAPTURE_HEAD_BYTES = 150_000
CTX = ParseContext(source="slow.log")
ENTRY = (
    b"# Time: 240101 10:00:00\n"
    b"# User@Host: app[app] @ web1 [10.0.0.5]  Id:    42\n"
    b"# Query_time: 1.500000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1000\n"
    b"use shop;\n"
    b"SET timestamp=1704103200;\n"
    b"SELECT * FROM orders WHERE id = 7;\n"
)
MARIADB_ENTRY = (
    b"# User@Host: root[root] @ localhost []\n"
    b"# Thread_id: 12  Schema: sbtest  QC_hit: No\n"
    b"# Query_time: 0.000217  Lock_time: 0.000095  Rows_sent: 1  Rows_examined: 1\n"
    b"# Rows_affected: 0  Bytes_sent: 0\n"
    b"# Full_scan: No  Full_join: No  Tmp_table: Yes  Tmp_table_on_disk: No\n"
    b"# Filesort: Yes  Filesort_on_disk: No  Merge_passes: 0  Priority_queue: No\n"
    b"#\n"
    b"# explain: id\tselect_type\ttable\ttype\tpossible_keys\tkey\tkey_len\tref\trows\tr_rows\tfiltered\tr_filtered\tExtra\n"
    b"# explain: 1\tSIMPLE\tsbtest1\tconst\tPRIMARY\tPRIMARY\t4\tconst\t1\tNULL\t100.00\tNULL\t\n"
    b"#\n"
    b"SET timestamp=1795985305;\n"
    b"SELECT c FROM sbtest1 WHERE id=10097;\n"
)
BANNER = (
    b"/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    b"Tcp port: 3306  Unix socket: /var/run/mysqld/mysqld.sock\n"
    b"Time                 Id Command    Argument\n"
)


def _corpus_bytes(name: str) -> bytes:
    if name == CAPTURE_HEAD:
        data = _corpus_bytes(CAPTURE_MEMBER)
        return data[: data.rfind(b"\n", 0, CAPTURE_HEAD_BYTES) + 1]
    if name == CAPTURE_MEMBER:
        with tarfile.open(CAPTURE) as tar:
            return tar.extractfile(CAPTURE_MEMBER).read()  # in memory, never to disk
    return (SLOWLOG_DIR / name).read_bytes()


def _decode(data: bytes) -> str:
    """As dbdiag.pipeline.decode."""
    text = data.decode("utf-8", "backslashreplace")
    return text.replace("\r\n", "\n") if "\r" in text else text


def _parsed(parse, data) -> ParseResult | ParseError:
    try:
        result = parse(data, CTX)
    except ParseError as error:
        return error
    assert isinstance(result, ParseResult)
    return result


def _as_outcome(parsed: ParseResult | ParseError) -> dict | str:
    return f"ParseError: {parsed}" if isinstance(parsed, ParseError) else result_as_json(parsed)


def _outcome(parse, data) -> dict | str:
    return _as_outcome(_parsed(parse, data))


def _text_parse(raw: bytes, ctx: ParseContext) -> ParseResult:
    return mysql_slowlog.parse(_decode(raw), ctx)


# What the kernel readings must not call: the polars reading of lines and header codes, and the
# polars numbering of distinct texts beyond a few (it numbers the few distinct texts it is given).
POLARS_READING = ("_read_lines", "header_codes", "distinct_codes")


def _readings(data: bytes, chunk: int | None = None) -> Readings:
    """Decoded text and raw bytes, with and without the kernel (pieces of ``chunk`` characters)."""
    decoded = _decode(data)
    with pytest.MonkeyPatch.context() as patched:
        if chunk:
            patched.setattr(slowlog_pieces, "CHUNK_CHARS", chunk)
        with pytest.MonkeyPatch.context() as no_kernel:
            no_kernel.setattr(slowlog_lines, "line_scan", lambda: None)
            parsed = _parsed(_text_parse, data)
            text_without_kernel = _as_outcome(parsed)
            # Without the kernel, parse_bytes parses the decoded text: with this very text and context
            # (same module state) that is the pure parse just made, so it answers; any other call parses.
            parse = mysql_slowlog.parse
            no_kernel.setattr(slowlog_batch, "parse",
                              lambda text, ctx: _result(parsed) if (text, ctx) == (decoded, CTX) else parse(text, ctx))
            bytes_without_kernel = _outcome(mysql_slowlog.parse_bytes, data)
        fell_back: list[str] = []
        for function_name in POLARS_READING:
            for module in _binding(function_name):  # each module that imported it holds it
                patched.setattr(module, function_name, _watched(getattr(module, function_name), fell_back))
        text, raw = _outcome(_text_parse, data), _outcome(mysql_slowlog.parse_bytes, data)
    # one copy of what reads alike: the capture's tables are kept for the whole session
    outcomes = [text_without_kernel if o == text_without_kernel else o for o in (text, raw, bytes_without_kernel)]
    return Readings(text_without_kernel, *outcomes, tuple(fell_back))


def _binding(name: str) -> list[object]:
    """The modules of the slow-log reading that hold ``name`` (its own and those that imported it)."""
    modules = [m for key, m in sorted(sys.modules.items()) if key.startswith(("dbdiag.parsers.mysql_slowlog.", "dbdiag.native.slowlog_lines"))]
    return [m for m in modules if callable(getattr(m, name, None))]


def _result(parsed: ParseResult | ParseError) -> ParseResult:
    if isinstance(parsed, ParseError):
        raise parsed
    return parsed


def _watched(function, calls: list[str]):
    def watched(*args: object):
        if function.__name__ != "distinct_codes" or args[0].len() > 1000:
            calls.append(function.__name__)
        return function(*args)

    return watched


@cache
def _corpus_readings(name: str, chunk: int | None = None) -> Readings:
    """A corpus file read each way once per session: several tests compare the same readings."""
    return _readings(_corpus_bytes(name), chunk)


def _check_all_readings(data: bytes, chunk: int | None = None) -> dict | str:
    """Decoded text and raw bytes, with and without the kernel: one outcome."""
    return assert_read_alike(_readings(data, chunk))


def test_kernel_is_built() -> None:
    # Not a skip: a wheel or CI build that lost the kernel must fail here.
    from dbdiag import _line_scan

    assert slowlog_lines.line_scan() is _line_scan
    assert mysql_slowlog.SPEC.parse_bytes is mysql_slowlog.parse_bytes
    views, kinds = _line_scan.lines(ENTRY, 0, len(ENTRY), 2)
    assert len(views) == 16 * 6 and list(kinds) == [slowlog_lines.TIME, slowlog_lines.USER_HOST,
                                                    slowlog_lines.QUERY_TIME, slowlog_lines.USE,
                                                    slowlog_lines.SET_META, slowlog_lines.SQL]


def test_statements_kernel_checks_its_arguments() -> None:
    kernel = slowlog_lines.line_scan()
    data = ENTRY * 2
    views, kinds = kernel.lines(data, 0, len(data), 1)
    kind = np.frombuffer(kinds, dtype=np.uint8)

    def i64(values: list[int]) -> bytes:
        return np.array(values, dtype=np.int64).tobytes()

    views_out, status, text = kernel.statements(data, 0, len(data), views, i64([5, 11]), kind, i64([1, 2]), 3)
    assert list(status) == [0, 1, 1] and len(views_out) == 3 * 16
    assert text == b"SELECT * FROM orders WHERE id = 7;" * 2  # the views leave the ";" out
    bad = [([5, 11], [2, 1], 3, kind), ([5, 11], [1, 3], 3, kind), ([5], [1, 1], 3, kind), ([5], [1], 3, kind[:-1]),
           ([5], [1], -1, kind), ([5], [1], 2**62, kind)]
    for at, owner, n_entries, kinds_given in bad:
        with pytest.raises(ValueError):
            kernel.statements(data, 0, len(data), views, i64(at), kinds_given, i64(owner), n_entries)
    _, status, _ = kernel.statements(data, 0, len(data), views, i64([-1, 10**9]), kind, i64([0, 0]), 1)
    assert list(status) == [2]  # lines outside the piece read as empty: "\n", no closing ";"


@pytest.mark.parametrize("name", [*CORPUS_FILES, CAPTURE_MEMBER])
def test_kernel_and_polars_give_the_same_tables(name: str) -> None:
    outcome = assert_read_alike(_corpus_readings(name))
    assert isinstance(outcome, dict) or name == "percona-toolkit__slow015.txt"


@pytest.mark.parametrize("name", ["percona-toolkit__slow006.txt", "go-mysql__mariadb102-with-explain.log", CAPTURE_HEAD])
def test_small_pieces_read_alike(name: str) -> None:
    outcome = assert_read_alike(_corpus_readings(name, chunk=300))
    assert outcome["records"] > 0


def test_capture_is_read_by_the_kernel_from_bytes() -> None:
    readings = _corpus_readings(CAPTURE_MEMBER)
    assert readings.fell_back == (), "fell back to the polars reading"
    assert readings.bytes["records"] == 5902
    assert readings.text["records"] == 5902


def test_piece_too_big_for_string_views_takes_the_polars_path(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _corpus_bytes(CAPTURE_MEMBER)
    expected = _corpus_readings(CAPTURE_MEMBER).bytes
    monkeypatch.setattr(slowlog_lines, "MAX_PIECE_BYTES", 1000)
    assert _outcome(mysql_slowlog.parse_bytes, data) == expected
    assert _outcome(mysql_slowlog.parse, _decode(data)) == expected


def test_parse_bytes_reads_what_the_pipeline_decodes() -> None:
    from dbdiag import pipeline

    raw = (ENTRY + "SELECT 'é', '\ufeff';\n".encode()).replace(b"\n", b"\r\n")
    assert _decode(raw) == pipeline.decode(raw)
    text = _outcome(mysql_slowlog.parse, pipeline.decode(raw))
    assert _outcome(mysql_slowlog.parse_bytes, raw) == text
    assert "CRLF line ends (file passed through Windows); read as plain lines" not in text["notes"]


HOSTILE = {
    "crlf": (ENTRY * 3).replace(b"\n", b"\r\n"),
    "crlf_without_final_newline": (ENTRY * 3).replace(b"\n", b"\r\n").rstrip(b"\n"),
    "two_cr_before_lf": (ENTRY * 2).replace(b"\n", b"\r\r\n"),
    "three_cr_before_lf": (ENTRY * 2).replace(b"\n", b"\r\r\r\n"),
    "cr_at_end_of_file": ENTRY * 2 + b"SELECT 1;\r",
    "two_cr_at_end_of_file": ENTRY * 2 + b"SELECT 1;\r\r",
    "lone_cr_in_sql": ENTRY.replace(b"id = 7", b"id = '\r7'") * 2,
    "cr_only_lines": ENTRY + b"\r\n\r\r\n\r\n" + ENTRY,
    "no_final_newline": ENTRY * 2 + b"SELECT 2",
    "nul_bytes": ENTRY.replace(b"orders", b"ord\x00ers") + b"\x00\n" + ENTRY,
    "nul_in_header": ENTRY.replace(b"app[app]", b"a\x00p[app]") * 2,
    "invalid_utf8": ENTRY.replace(b"id = 7", b"name = '\xff\xfecaf\xe9'") * 2,
    "surrogate_bytes": ENTRY.replace(b"id = 7", b"name = '\xed\xa0\x80'") * 2,
    "overlong_utf8": ENTRY.replace(b"id = 7", b"name = '\xc0\xaf\xe0\x80\xaf'") * 2,
    "truncated_utf8_at_end": ENTRY * 2 + b"SELECT '\xe2\x82",
    "valid_multibyte": ENTRY.replace(b"orders", "заказы_注文_🎉".encode()) * 2,
    "bom": b"\xef\xbb\xbf" + ENTRY * 2,
    "bom_crlf": b"\xef\xbb\xbf" + (ENTRY * 2).replace(b"\n", b"\r\n"),
    "two_boms": b"\xef\xbb\xbf\xef\xbb\xbf" + ENTRY * 2,
    "two_boms_only": b"\xef\xbb\xbf\xef\xbb\xbf",
    "bom_newline": b"\xef\xbb\xbf\xef\xbb\xbf\n" + ENTRY,
    "binary_garbage": ENTRY + bytes(range(256)) * 50 + b"\n" + ENTRY,
    "every_control_byte": ENTRY + bytes(range(32)) + b"\x7f\n" + ENTRY,
    "ten_mb_line": ENTRY + b"SELECT '" + b"x" * 10_000_000 + b"';\n" + ENTRY,
    "ten_mb_without_newline": ENTRY + b"-" * 10_000_000,
    "banner_first_line": b"Tcp port: 3306  Unix socket: /tmp/s\n" + ENTRY * 2,
    "banner_last_line": ENTRY * 2 + b"Tcp port: 3306  Unix socket: /tmp/s",
    "banner_between": ENTRY + BANNER + ENTRY + BANNER,
    "banner_lookalikes": ENTRY + b"Tcp port: x\nTCP port: 1 \nTcp 1\nTCP Port: 9\n" + ENTRY,
    "mariadb_entries": MARIADB_ENTRY * 5 + MARIADB_ENTRY.replace(b"sbtest1", b"sbtest2") * 3,
    "explain_in_sql": MARIADB_ENTRY.replace(b"SELECT c", b"# explain: 1\tSIMPLE\nSELECT c") * 2,
    "explain_without_header_row": MARIADB_ENTRY.replace(b"# explain: id\t", b"# explain: xx\t") * 2,
    "view_boundaries": b"".join(b"#" + b" " * k + b"\n" + b"use " + b"d" * k + b";\n" for k in range(20)) + ENTRY,
    "short_prefixes": ENTRY + b"#\n# \n# T\n# Ti\nuse\nuse \nSET\nSET \nSET timestamp\n" + ENTRY,
    "header_only_lines": b"# Time: 240101 10:00:00\n# User@Host: a[a] @ b []\n" * 3,
    "time_with_user_host": b"# Time: 071218 11:48:27 # User@Host: [SQL_SLAVE] @  []\n" + ENTRY[24:] * 2,
    "only_blank_lines": b"\n\n\n\r\n",
    "empty": b"",
    "bom_only": b"\xef\xbb\xbf",
    "unicode_whitespace_only": "\u3000\u2028 \u00a0\x1c\n".encode(),
    "unicode_space_then_text": "\u3000".encode() + ENTRY,
    "cut_utf8_then_space": b"\xe3\x80",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_reads_alike(name: str) -> None:
    _check_all_readings(HOSTILE[name])


def test_invalid_utf8_in_one_piece_only() -> None:
    # that piece is decoded (escapes), the others are read as they are
    data = ENTRY * 40 + ENTRY.replace(b"id = 7", b"id = '\xff'") + ENTRY * 40
    outcome = _check_all_readings(data, chunk=2000)
    statement = outcome["tables"]["statement"]
    sql = [row[list(statement["schema"]).index("sql")] for row in statement["rows"]]
    assert sql[40] == "SELECT * FROM orders WHERE id = '\\xff'" and sql.count("SELECT * FROM orders WHERE id = 7") == 80


QT_VALUES = ["0", "0.5", "1.500000", "007.10", "0.000000000000000001", "123456789012345678", "1234567890123456789",
             "9007199254740993", "9007199254740992.5", "0.1000000000000000055511151231257827", "1.", ".5", "1e3", "+1",
             "-1", "1.2.3", "18446744073708.796870.000036", "", "12345678901234567890123", "3.14159265358979323846"]


@pytest.mark.parametrize("seed", range(3))
def test_query_time_lines_read_alike(seed: int) -> None:
    rng = random.Random(seed)
    entries = []
    for _ in range(300):
        values = [rng.choice(QT_VALUES) if rng.random() < 0.3 else f"{rng.random() * 10 ** rng.randrange(0, 8):.{rng.randrange(0, 9)}f}"
                  for _ in range(2)] + [rng.choice(QT_VALUES) if rng.random() < 0.3 else str(rng.randrange(10 ** rng.randrange(1, 19)))
                                        for _ in range(2)]
        gaps = [rng.choice([" ", "  ", "   ", "\t"]) for _ in range(3)]
        tail = rng.choice(["", "", "", " ", "  Rows_affected: 3", " Thread_id: 9 Errno: 0 Killed: 0"])
        line = (f"# Query_time: {values[0]}{gaps[0]}Lock_time: {values[1]}{gaps[1]}Rows_sent: {values[2]}{gaps[2]}"
                f"Rows_examined: {values[3]}{tail}")
        entries.append(f"# User@Host: a[a] @ h []\n{line}\nSELECT {rng.randrange(9)};\n")
    outcome = _check_all_readings("".join(entries).encode(), chunk=rng.choice([2000, 10**6]))
    assert outcome["records"] == 300


def test_query_time_numbers_are_exact() -> None:
    # the kernel's decimals must be what polars' string-to-float gives (correctly rounded)
    rng = random.Random(7)
    texts = []
    for _ in range(3000):  # up to 15 digits: what the kernel reads itself
        whole = rng.randrange(1, 15)
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randrange(whole, 16)))
        texts.append(digits if whole == len(digits) else f"{digits[:whole]}.{digits[whole:]}")
    lines = "".join(f"# Query_time: {t}  Lock_time: {t}  Rows_sent: 1  Rows_examined: 2\n" for t in texts).encode()
    kernel = slowlog_lines.line_scan()
    views, _ = kernel.lines(lines, 0, len(lines), 1)
    plain, query_time, lock_time, sent, examined = kernel.query_times(lines, 0, len(lines), views, np.arange(len(texts), dtype=np.int64).tobytes())
    assert all(plain)
    expected = pl.Series(texts).cast(pl.Float64).to_numpy()
    assert np.array_equal(np.frombuffer(query_time, dtype=np.float64), expected)
    assert np.array_equal(np.frombuffer(lock_time, dtype=np.float64), expected)
    assert set(np.frombuffer(sent, dtype=np.int64)) == {1} and set(np.frombuffer(examined, dtype=np.int64)) == {2}


LINE_PARTS = [b"\n", b"\n", b"\n", b"\r", b"\r\n", b"a", b"# ", b"#", b"\x00", "é".encode(), b"\xff", b"use ", b"SET timestamp=1;",
              b"# Time: 1", b"# Query_time: 1  Lock_time: 0  Rows_sent: 0  Rows_examined: 0", b"# Schema: x", b"Tcp port: 1",
              b"x" * 13, b"# explain: id\ttable", b"# administrator command: Quit;", b"# User@Host: a @ b", b" ",
              b"\xef\xbb\xbf"]


@pytest.mark.parametrize("seed", range(20))
def test_lines_and_kinds_match_the_polars_reading(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    data = b"".join(rng.choice(LINE_PARTS) for _ in range(rng.randrange(1, 400)))
    text = _decode(data)
    lines, length, prefix, kind, kernel = slowlog_lines.text_lines(text, 0, len(text))
    assert kernel is not None
    with monkeypatch.context() as patched:
        patched.setattr(slowlog_lines, "line_scan", lambda: None)
        expected = slowlog_lines.text_lines(text, 0, len(text))
    assert expected[4] is None
    assert lines.to_list() == expected[0].to_list()
    assert np.array_equal(length, expected[1]) and np.array_equal(prefix, expected[2]) and np.array_equal(kind, expected[3])
    with_kernel, without = slowlog_lines.mark(kind, prefix, kernel), slowlog_lines.mark(kind, prefix, None)
    for name in ("starts", "sql", "sql_entry", "explain", "explain_entry", "server", "time", "query_time"):
        assert np.array_equal(with_kernel[name], without[name]), name
    assert [with_kernel[k] for k in ("head", "explain_kind", "innodb")] == [without[k] for k in ("head", "explain_kind", "innodb")]
    assert np.array_equal((with_kernel["role"] & 1) > 0, without["is_sql"])
    # raw bytes: what the pipeline's decode then the reading give
    raw = slowlog_lines.raw_lines(data, 0, len(data))
    assert raw[0].to_list() == lines.to_list() and np.array_equal(raw[3], kind)


def test_kernel_refuses_bad_arguments() -> None:
    kernel = slowlog_lines.line_scan()
    data = ENTRY * 2
    views, kinds = kernel.lines(data, 0, len(data), 1)
    at = np.arange(12, dtype=np.int64).tobytes()
    for args in [(data, -1, 5, 1), (data, 0, len(data) + 1, 1), (data, 5, 4, 1), (data, 0, 5, 3)]:
        with pytest.raises(ValueError):
            kernel.lines(*args)
    with pytest.raises(ValueError):
        kernel.distinct(data, 0, len(data), views[:-1], at)
    with pytest.raises(ValueError):
        kernel.distinct(data, 0, len(data) + 1, views, at)
    with pytest.raises(ValueError):
        kernel.query_times(data, 0, len(data), views, at[:-1])
    with pytest.raises(ValueError):
        kernel.sequences(np.array([2, 1], dtype=np.int64).tobytes(), np.zeros(2, dtype=np.int64).tobytes(), 3)
    with pytest.raises(ValueError):
        kernel.sequences(np.array([0, 5], dtype=np.int64).tobytes(), np.zeros(2, dtype=np.int64).tobytes(), 3)
    marks = kernel.mark(kinds, views)
    role = marks["role"]
    with pytest.raises(ValueError):
        kernel.mark(kinds, views[:-16])
    heads, groups = slowlog_lines.group_starts()
    with pytest.raises(ValueError):  # views of another piece
        kernel.header_codes(data, 0, len(data), views[:16], kinds, role, 3, heads, groups, (9, 10, 11))
    with pytest.raises(ValueError):  # more entries start than n_entries
        kernel.header_codes(data, 0, len(data), views, kinds, role, 1, heads, groups, (9, 10, 11))
    # line numbers outside the lines, or views pointing past the piece, read as no line
    outside = np.array([-1, 12, 10**9], dtype=np.int64).tobytes()
    assert list(kernel.query_times(data, 0, len(data), views, outside)[0]) == [0, 0, 0]
    code, first = kernel.distinct(data, 0, len(data), views, outside)
    assert list(np.frombuffer(code, dtype=np.int64)) == [0, 0, 0]
    assert list(kernel.query_times(data, 0, 10, views, at)[0]) == [0] * 12


def test_distinct_numbers_texts_in_first_seen_order() -> None:
    rng = random.Random(3)
    words = [b"", b"a", b"# Thread_id: 1", b"# Thread_id: 2", b"x" * 12, b"x" * 13, b"x" * 12 + b"y", b"\x00" * 20, b"\x00" * 21]
    data = b"\n".join(rng.choice(words) for _ in range(5000)) + b"\n"
    kernel = slowlog_lines.line_scan()
    views, _ = kernel.lines(data, 0, len(data), 1)
    lines = data.split(b"\n")[:-1]
    at = np.array(rng.sample(range(len(lines)), 3000), dtype=np.int64)
    code, first = kernel.distinct(data, 0, len(data), views, at.tobytes())
    numbers: dict[bytes, int] = {}
    expected = [numbers.setdefault(lines[i], len(numbers)) for i in at]
    assert list(np.frombuffer(code, dtype=np.int64)) == expected
    assert [lines[at[r]] for r in np.frombuffer(first, dtype=np.int64)] == list(numbers)


def test_distinct_reads_a_view_past_the_piece_as_the_empty_line() -> None:
    # Views of long lines over a piece cut before them point outside it: each reads as the empty
    # line (one text, never the bytes past the piece or past the empty text).
    data = b"\n" + b"x" * 20 + b"\n" + b"y" * 30 + b"\n"
    kernel = slowlog_lines.line_scan()
    views, _ = kernel.lines(data, 0, len(data), 1)
    code, first = kernel.distinct(data, 0, 5, views, np.arange(3, dtype=np.int64).tobytes())
    assert list(np.frombuffer(code, dtype=np.int64)) == [0, 0, 0]
    assert list(np.frombuffer(first, dtype=np.int64)) == [0]


def test_kernel_refuses_sizes_and_groups_that_would_wrap() -> None:
    kernel = slowlog_lines.line_scan()
    data = b"# User@Host: app[app] @ web1 [10.0.0.5]\n"
    views, kinds = kernel.lines(data, 0, len(data), 1)
    role = kernel.mark(kinds, views)["role"]
    heads, groups = slowlog_lines.group_starts()
    for special in [(2**31 - 1, 10, 11), (9, 2**31 - 1, 11), (9, 10, 127)]:  # group + 1 must not wrap
        with pytest.raises(ValueError):
            kernel.header_codes(data, 0, len(data), views, kinds, role, 2, heads, groups, special)
    for n_entries in [2**62, 2**61 + 1]:  # n_groups * n_entries * 4 bytes must not wrap
        with pytest.raises(ValueError):
            kernel.header_codes(data, 0, len(data), views, kinds, role, n_entries, heads, groups, (9, 10, 11))
    with pytest.raises(ValueError):  # n_entries * 8 bytes must not wrap
        kernel.sequences(b"", b"", 2**61)
    first, _, _ = kernel.header_codes(data, 0, len(data), views, kinds, role, 2, heads, groups, (9, 10, 126))
    assert len(first) == 127 * 2 * 4


def test_distinct_hashes_a_text_of_almost_4_gib() -> None:
    # A view of 2**32 - 1 bytes over a 4 GiB piece (a read-only private mapping: the zero page, no
    # memory): the hash's 32-bit position wrapped past 2**32 - 8 and looped for ever. In a child
    # process, so that a loop that does not end fails the test instead of hanging it.
    import subprocess
    import sys

    script = (
        "import mmap, numpy as np\n"
        "from dbdiag import _line_scan as k\n"
        "piece = mmap.mmap(-1, 2**32, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ)\n"
        "view = np.array([2**32 - 1, 0, 0, 0], dtype='<u4').tobytes()\n"
        "code, first = k.distinct(piece, 0, 2**32, view, np.zeros(2, dtype=np.int64).tobytes())\n"
        "print(np.frombuffer(code, dtype=np.int64).tolist(), np.frombuffer(first, dtype=np.int64).tolist())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout == "[0, 0] [0]\n", done.stderr
