"""SQL fingerprints, redaction and WHERE columns (dbdiag.sqlnorm).

The MySQL expectations below are pt-query-digest 3.2.1's own fingerprints of the same texts
(``test_pt_rewriter_agrees`` re-checks them, and a seeded random sample, against the installed
pt-query-digest); DELIBERATE_DIFFERENCES pins the cases where we choose otherwise.
"""

from __future__ import annotations

import doctest
import hashlib
import random
import re
import shutil
import subprocess

import polars as pl
import pytest
from conftest import CORPUS

from dbdiag import sqlnorm, sqlnorm_mysql, sqlnorm_pg, sqlnorm_regex, sqlnorm_series
from dbdiag.parsers.base import ParseContext, ParseError
from dbdiag.parsers.mysql_slowlog import SPEC as MYSQL_SLOWLOG
from dbdiag.sqlnorm import (
    fingerprint,
    fingerprint_classes,
    fingerprint_id,
    fingerprint_series,
    redact_literals,
    redact_series,
    where_columns,
)

MYSQL_CASES = [
    # numbers: negative, float, exponent (pt: the "e" of a negative exponent survives)
    (
        "SELECT * FROM t WHERE a = 1 AND b = -2 AND c = 3.14 AND d = 1e10 AND e = -1.5E-3",
        "select * from t where a = ? and b = ? and c = ? and d = ? and e = ?e?",
    ),
    ("SELECT * FROM t WHERE a=+7", "select * from t where a=?"),
    # strings: both quote kinds, backslash-escaped and doubled quotes (pt: 'it''s' -> ??)
    ("select 'a', \"b\", 'it\\'s', 'it''s', \"say \\\"hi\\\"\"", "select ?, ?, ?, ??, ?"),
    ("SELECT 0xFF, x'AB', b'01', 0b101", "select ?ff, ?, ?, ?"),
    ("SELECT * FROM t WHERE a = TRUE OR b = false OR c IS NULL", "select * from t where a = ? or b = ? or c is ?"),
    # IN lists
    ("SELECT * FROM t WHERE id IN (1, 2, 3)", "select * from t where id in(?+)"),
    (
        "SELECT * FROM t WHERE name IN ('a', 'b','c') AND x NOT IN (4,5)",
        "select * from t where name in(?+) and x not in(?+)",
    ),
    ("select * from t where a in ( 1 , 2 ) and b in(3)", "select * from t where a in(?+) and b in(?+)"),
    (
        "SELECT * FROM t WHERE id IN (SELECT id FROM u WHERE v = 1)",
        "select * from t where id in (select id from u where v = ?)",
    ),
    # VALUES
    ("INSERT INTO t (a, b) VALUES (1, 'x'), (2, 'y'), (3, 'z')", "insert into t (a, b) values(?+)"),
    ("INSERT INTO t VALUES (1)", "insert into t values(?+)"),
    ("INSERT IGNORE INTO t (a) VALUES (1),(2)", "insert ignore into t (a) values(?+)"),
    ("REPLACE INTO t (a) VALUES (1), (2)", "replace into t (a) values(?+)"),
    ("INSERT INTO t (a) VALUES (1), (2) ON DUPLICATE KEY UPDATE a = VALUES(a)", "insert into t (a) values(?+)"),
    # comments: /* */, -- and # removed; optimizer hints too; /*!version */ kept
    (
        "SELECT a /* inline */ FROM t -- trailing\nWHERE b = 1 # hash\nAND c = 2",
        "select a from t where b = ? and c = ?",
    ),
    ("SELECT /*+ MAX_EXECUTION_TIME(1000) */ a FROM t", "select a from t"),
    ("SELECT /*!40001 SQL_NO_CACHE */ a FROM t", "select /*!? sql_no_cache */ a from t"),
    # case, newlines, tabs, CRLF
    ("SeLeCt A,\n\tB\n  FROM   T\r\n WHERE   C = 1", "select a, b from t where c = ?"),
    # special statements
    ("use shop", "use ?"),
    ("USE `shop`;", "use ?"),
    ("administrator command: Quit", "administrator command: Quit"),
    ("CALL update_stats(1, 'x')", "call update_stats"),
    ("SELECT /*!40001 SQL_NO_CACHE */ * FROM `orders`", "mysqldump"),
    ("REPLACE /*db.tbl:1/5*/ INTO checksums SELECT 1", "percona-toolkit"),
    # LIMIT, UNION, ORDER BY ... ASC
    ("SELECT * FROM t LIMIT 10", "select * from t limit ?"),
    ("SELECT * FROM t LIMIT 10, 20", "select * from t limit ?"),
    ("SELECT * FROM t LIMIT 10 OFFSET 20", "select * from t limit ?"),
    (
        "SELECT a FROM t WHERE b = 1 UNION SELECT a FROM t WHERE b = 2 UNION ALL SELECT a FROM t WHERE b = 3",
        "select a from t where b = ? /*repeat union all*/",
    ),
    ("SELECT * FROM t ORDER BY a ASC, b DESC, c ASC", "select * from t order by a, b desc, c"),
    # backticks kept; digits inside names abstracted like pt (sbtest1 -> sbtest?, db1 -> d?)
    ("SELECT `c1`, `t`.`col_2` FROM `db1`.`t` WHERE `id` = 1", "select `c?`, `t`.`col_?` from `d?`.`t` where `id` = ?"),
    ("SELECT c FROM sbtest1 WHERE id=5012", "select c from sbtest? where id=?"),
    (
        "SELECT c FROM sbtest12 WHERE id BETWEEN 4999 AND 5098 ORDER BY c",
        "select c from sbtest? where id between ? and ? order by c",
    ),
    ("UPDATE sbtest3 SET k=k+1 WHERE id=17", "update sbtest? set k=k? where id=?"),
    # pt lower-cases bytes: only ASCII letters change
    ("SELECT name FROM Ünïcode WHERE x = 'é'", "select name from Ünïcode where x = ?"),
    ("", ""),
]

# (sql, ours, pt-query-digest's): where we choose otherwise, and why (see sqlnorm's docstring).
DELIBERATE_DIFFERENCES = [
    # trailing ; and blanks do not make another class
    ("SELECT 1;", "select ?", "select ?;"),
    ("SELECT 1 ", "select ?", "select ? "),
    ("SELECT a FROM t -- note\n", "select a from t", "select a from t "),
    # an escaped backslash ends the string; pt runs it into the next one
    (
        "select * from t where path = 'C:\\\\' and b = 'x'",
        "select * from t where path = ? and b = ?",
        "select * from t where path = ?x'",
    ),
    # comments and strings that pt leaves open keep their words there; here they are dropped or
    # become one literal to the end of the statement (nothing of them shows)
    ("SELECT a FROM t /* password hunter2", "select a from t", "select a from t /* password hunter?"),
    ("SELECT a FROM t -- it's hunter2\nWHERE b = 1", "select a from t where b = ?", "select a from t ? it's hunter? where b = ?"),
    ("SELECT a FROM t WHERE p = 'hunter2", "select a from t where p = ?", "select a from t where p = 'hunter?"),
]

POSTGRESQL_CASES = [
    ("SELECT * FROM t WHERE id = $1 AND name = $2", "select * from t where id = ? and name = ?"),
    ("SELECT 'a'::text, 42::bigint, $1::int[]", "select ?::text, ?::bigint, ?::int[]"),
    ("SELECT E'line\\nbreak', e'it\\'s', 'it''s'", "select ?, ?, ?"),
    ("SELECT $$it's$$, $fn$ body; 'x' $fn$ FROM t", "select ?, ? from t"),
    ('SELECT "User"."Id" FROM "User" WHERE "Id" = 7', 'select "user"."id" from "user" where "id" = ?'),
    (
        "SELECT * FROM t1 WHERE a IN (1, 2, 3) AND b = ANY(ARRAY[4, 5])",
        "select * from t1 where a in(?+) and b = any(array[?+])",
    ),
    (
        "UPDATE pgbench_accounts SET abalance = abalance + -4321 WHERE aid = 80",
        "update pgbench_accounts set abalance = abalance + ? where aid = ?",
    ),
    ("SELECT x FROM t WHERE a = -1 AND b - 1 > 0", "select x from t where a = ? and b - ? > ?"),
    ("select a # b from t", "select a # b from t"),  # '#' is an operator in PostgreSQL
    ("SELECT 1 /* a /* nested */ comment */ + 2 -- done", "select ? + ?"),
    ("SELECT B'0101', X'FF', U&'d\\0061t', N'x'", "select ?, ?, ?, ?"),
    ("SELECT 1e3, 2.5, .5, 0x1F, t2.c3", "select ?, ?, ?, ?, t2.c3"),
    ("SELECT * FROM t LIMIT 10 OFFSET 20", "select * from t limit ?"),
    ("INSERT INTO t VALUES (1, 'a'), (2, 'b');", "insert into t values(?+)"),
    ("SELECT 'it''s -- not a comment' -- comment\n FROM t", "select ? from t"),
    ("SELECT TRUE, NULL, false", "select ?, ?, ?"),
    ("SELECT a FROM t UNION SELECT a FROM t", "select a from t /*repeat union*/"),
    ("SELECT 'never closed", "select ?"),
]


def _random_sql(rng: random.Random, fragments: list[str]) -> str:
    return "".join(rng.choice(fragments) for _ in range(rng.randint(1, 14)))


MYSQL_FRAGMENTS = [
    "SELECT", "select", " ", "  ", "\n", "\t", "'", '"', "\\", "\\'", "'it''s'", "1", "-2", "3.5e-3", "0x1F",
    "x'ab'", "b'01'", "sbtest12", "db2.t", "(", ")", ",", "IN", " IN (", "VALUES", " VALUES (", "NULL",
    "TRUE", "false", "/*", "*/", "/*!40001", "-- c\n", "#", "# x\n", "UNION", " UNION ALL ", "ORDER BY",
    " ASC", "LIMIT", " LIMIT 1, 2", " OFFSET 3", "use", "USE db", "call p(", "INSERT INTO t", "REPLACE",
    " IGNORE", "é", "É", "K", "?", ";", "=", "a", "`c1`", "FROM t", "WHERE", " AND ", ":1/2*/",
    "administrator command: Quit",
]  # fmt: skip
PG_FRAGMENTS = [
    "SELECT", " ", "\n", "'", '"', "\\", "'it''s'", "E'a\\'b'", "$1", "$$", "$$x'y$$", "$t$ z $t$", "1",
    "-2", "3.5e-3", ".5", "t1", '"Users"', '"a""b"', "(", ")", ",", " IN (", "VALUES", "NULL", "TRUE",
    "/*", "*/", "/* a /* b */ c */", "-- c\n", "#", "::int", "ARRAY[1,2]", "U&'d'", "B'01'", "=", " - ",
    "LIMIT 3", "OFFSET 4", "é", "É", "?", ";", "FROM t", " AND ", "\x01", " UNION ", " ORDER BY a ASC",
]  # fmt: skip


# No double quote, backslash or comment: the texts whose series key differs from the text.
PG_KEYED_FRAGMENTS = [
    "SELECT", " ", "\n", "'", "''", "'it''s'", "E'ab'", "$1", "$12", "1", "12", "0", "007", "-2", "3.5e-3",
    "1e5", ".5", "1.", "1_000", "0x1F", "12x", "x", "t1", "(", ")", ",", " IN (", "NULL", "::int", "U&'d'",
    "B'01'", "N'n'", "=", " - ", "+", "é", "?", ";", ".", "_", "$", "#", " UNION ", " ORDER BY a ASC",
]  # fmt: skip


def _sysbench(rng: random.Random) -> str:
    table, row = rng.randint(1, 16), rng.randint(1, 10**6)
    return rng.choice(
        [
            f"SELECT c FROM sbtest{table} WHERE id={row}",
            f"SELECT c FROM sbtest{table} WHERE id BETWEEN {row} AND {row + 99} ORDER BY c",
            f"UPDATE sbtest{table} SET c='{rng.randint(10**10, 10**11)}-{row}' WHERE id={row}",
            f"INSERT INTO sbtest{table} (id, k, c, pad) VALUES ({row}, {row}, '{row}-x', '{row}-y')",
            f"DELETE FROM sbtest{table} WHERE id={row}",
        ]
    )


# --- fingerprint -------------------------------------------------------------------------------


@pytest.mark.parametrize(("sql", "expected"), MYSQL_CASES)
def test_mysql_fingerprint(sql: str, expected: str) -> None:
    assert fingerprint(sql) == expected
    assert fingerprint(sql, "tidb") == expected


@pytest.mark.parametrize(("sql", "ours", "pt"), DELIBERATE_DIFFERENCES)
def test_deliberate_differences(sql: str, ours: str, pt: str) -> None:
    assert fingerprint(sql) == ours != pt


@pytest.mark.parametrize(("sql", "expected"), POSTGRESQL_CASES)
def test_postgresql_fingerprint(sql: str, expected: str) -> None:
    assert fingerprint(sql, "postgresql") == expected


def test_raw_administrator_command_line() -> None:
    assert fingerprint("# administrator command: Quit;") == "administrator command: Quit"


def test_literal_values_do_not_split_classes() -> None:
    texts = ["SELECT * FROM t WHERE a = 1 AND b = 'x'", "select *\nfrom t\nwhere a = 22 and b = 'it\\'s'"]
    assert len({fingerprint(text) for text in texts}) == 1
    assert fingerprint("SELECT * FROM t WHERE a = 1") != fingerprint("SELECT * FROM u WHERE a = 1")


def test_postgresql_keeps_digits_in_names_mysql_does_not() -> None:
    assert fingerprint("SELECT c1 FROM t1", "postgresql") == "select c1 from t1"
    assert fingerprint("SELECT c1 FROM t1", "mysql") == "select c? from t?"


def test_unknown_dialect_is_refused() -> None:
    with pytest.raises(ValueError, match="oracle"):
        fingerprint("select 1", "oracle")
    with pytest.raises(ValueError, match="oracle"):
        fingerprint_series(pl.Series(["select 1"]), "oracle")


# --- fingerprint_series == fingerprint -----------------------------------------------------------


# Texts where a careless series key (strings -> ?, digits -> 0) would change the fingerprint.
KEY_TRAPS = [
    "USE dbREPLACE'  ascx'ab'",  # pt's `use \S+` test looks inside the string
    "INSERT INTO t VALUES ('x), (y', 2), (3)",  # the INSERT shortening looks inside strings
    "select 'a -- b\n' , 'c' -- x'\n, 'd'",  # comments and strings interleaved
    "SELECT \\'abc' FROM t WHERE a = 'x'",  # escaped quote before a string
    "REPLACE /*db.tbl:12/34*/ INTO t VALUES (1)",  # not pt's checksum comment: two digits
    "select 12xab, 0x1F, 1x1F from t1",
    "CALL p2(1)",
    "SELECT /*!40001 SQL_NO_CACHE */ * FROM `orders`",
]


def _corpus_statements() -> list[str]:
    statements = []
    for path in sorted((CORPUS / "slowlog-mysql").iterdir()):
        try:
            text = path.read_bytes().decode("utf-8", "backslashreplace")
            result = MYSQL_SLOWLOG.parse(text, ParseContext(source=path.name))
        except ParseError:
            continue
        statements += result.tables["statement"]["sql"].drop_nulls().to_list()
    assert len(statements) > 100
    return statements


@pytest.mark.parametrize("dialect", ["mysql", "tidb", "postgresql"])
def test_series_equals_scalar(dialect: str) -> None:
    rng = random.Random(20240501)
    fragments = [PG_FRAGMENTS, PG_KEYED_FRAGMENTS] if dialect == "postgresql" else [MYSQL_FRAGMENTS]
    sample = [_random_sql(rng, choice) for choice in fragments for _ in range(3000)]
    sample += [_sysbench(rng) for _ in range(2000)]
    sample += [sql for sql, _ in MYSQL_CASES + POSTGRESQL_CASES] + [sql for sql, _, _ in DELIBERATE_DIFFERENCES]
    sample += KEY_TRAPS + [trap.replace("1", "7") for trap in KEY_TRAPS]
    sample += _corpus_statements()
    sample += [None, "", ";", "  \n"]
    got = fingerprint_series(pl.Series(sample, dtype=pl.String), dialect)
    assert got.dtype == pl.String and got.len() == len(sample)
    expected = [None if sql is None else fingerprint(sql, dialect) for sql in sample]
    mismatches = [(sql, want, have) for sql, want, have in zip(sample, expected, got.to_list()) if want != have]
    assert not mismatches, mismatches[:5]


# Texts whose variants with other digits may have another fingerprint (the series groups texts by
# their digits zeroed, then reads such ones one by one).
DIGIT_TRAPS = [
    "SELECT a$1, \"c1\", 1e5, 1_000, 0x1F, 1x1F, $1 FROM t1 WHERE b = 'x1' AND c = 12",
    "select t1.c2 from t1 where id = 12",
    "CALL p1(1)",
    "# administrator command: Binlog Dump 1",
    "/*db.t:1/2*/ select 1",
    "SELECT /*!40001 SQL_NO_CACHE */ * FROM `orders`",
]


def _digits_changed(rng: random.Random, text: str) -> str:
    return "".join(rng.choice("0123456789") if char in "0123456789" else char for char in text)


@pytest.mark.parametrize(
    ("dialect", "path"),
    [("mysql", "regex"), ("mysql", "bytes"), ("postgresql", "regex"), ("postgresql", "bytes"), ("postgresql", "keyed")],
)
def test_texts_differing_in_digits_only(dialect: str, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if path == "bytes":  # the byte translation big inputs take
        monkeypatch.setattr(sqlnorm_series, "_BIG", 0)
    # PostgreSQL texts most of which have digits in names are keyed one by one, others grouped first
    monkeypatch.setattr(sqlnorm_pg, "_DIGITS_IN_WORDS_SHARE", -1.0 if path == "keyed" else 2.0)
    rng = random.Random(3)
    fragments = PG_KEYED_FRAGMENTS + PG_FRAGMENTS if dialect == "postgresql" else MYSQL_FRAGMENTS
    texts = [_random_sql(rng, fragments) for _ in range(1500)] + KEY_TRAPS + DIGIT_TRAPS
    sample = [variant for text in texts for variant in (text, _digits_changed(rng, text), _digits_changed(rng, text))]
    sample += [None, "", "7"]
    got = fingerprint_series(pl.Series(sample, dtype=pl.String), dialect)
    expected = [None if sql is None else fingerprint(sql, dialect) for sql in sample]
    mismatches = [(sql, want, have) for sql, want, have in zip(sample, expected, got.to_list()) if want != have]
    assert not mismatches, mismatches[:5]
    # the grouping did merge texts, some of them with different fingerprints
    assert sqlnorm_series._zeroed_groups(pl.Series(sample))[1].len() < len(set(sample)) / 2
    assert len({fingerprint(variant, dialect) for variant in sample if variant and variant.startswith("CALL p")}) > 1


@pytest.mark.parametrize("dialect", ["mysql", "postgresql"])
def test_classes_are_numbered_in_first_seen_order(dialect: str) -> None:
    rng = random.Random(11)
    sample = [_sysbench(rng) for _ in range(500)] + KEY_TRAPS + ["CALL p1(2)", "call p1(3)", None, "BEGIN", "select 1"]
    rng.shuffle(sample)
    numbers, names = fingerprint_classes(pl.Series(sample, dtype=pl.String), dialect)
    expected = [None if sql is None else fingerprint(sql, dialect) for sql in sample]
    first_seen = list(dict.fromkeys(fp for fp in expected if fp is not None))
    assert names.to_list() == first_seen  # each class once, none that no element has
    assert numbers.to_list() == [None if fp is None else first_seen.index(fp) for fp in expected]
    assert fingerprint_classes(pl.Series([], dtype=pl.String), dialect)[0].to_list() == []


def test_series_edge_shapes() -> None:
    assert fingerprint_series(pl.Series([], dtype=pl.String)).to_list() == []
    assert fingerprint_series(pl.Series([None, None])).to_list() == [None, None]
    assert fingerprint_series(pl.Series(["SELECT 1", "SELECT 1"])).to_list() == ["select ?", "select ?"]


def test_series_calls_python_once_per_distinct_hard_text(monkeypatch: pytest.MonkeyPatch) -> None:
    tails, mains = [], []
    tail, main = sqlnorm_series._tail, sqlnorm_mysql._mysql_main
    for module in (sqlnorm_series, sqlnorm_mysql):  # the tail of keys, and of texts redone in Python
        monkeypatch.setattr(module, "_tail", lambda text: tails.append(text) or tail(text))
    monkeypatch.setattr(sqlnorm_mysql, "_mysql_main", lambda text: mains.append(text) or main(text))
    rng = random.Random(7)
    sql = [_sysbench(rng) for _ in range(20_000)]
    sql += [f"SELECT a FROM t WHERE b = {n} UNION SELECT a FROM t WHERE b = {n + 1}" for n in range(500)]
    sql += [f"SELECT * FROM t WHERE é = {n} ORDER BY a ASC" for n in range(500)]
    got = fingerprint_series(pl.Series(sql))
    assert got.n_unique() == 7
    # 1 distinct non-ASCII text redone in Python (whose tail is Python too), 1 distinct UNION
    # text for the tail: not 21,000 calls
    assert mains == ["SELECT * FROM t WHERE é = 0 ORDER BY a ASC"]
    assert sorted(tails) == sorted([
        "select a from t where b = ? union select a from t where b = ?",
        "select * from t where é = ? order by a asc",
    ])


# --- fingerprint_id ------------------------------------------------------------------------------


def test_fingerprint_id_is_pt_query_digest_checksum() -> None:
    # pt-query-digest 3.2.1 on percona-toolkit__slow002.txt: "update foo.bar set biz = ?"
    assert fingerprint_id("update foo.bar set biz = ?") == "32F63B9B2CE5A9B1B211BA2B8D6D065C"
    fp = fingerprint("SELECT c FROM sbtest1 WHERE id=1")
    assert fingerprint_id(fp) == hashlib.md5(fp.encode()).hexdigest().upper()
    assert fingerprint_id(fp) == fingerprint_id(fingerprint("SELECT c FROM sbtest7 WHERE id=99"))
    assert fingerprint_id("select é") != fingerprint_id("select e")


# --- pt-query-digest's own QueryRewriter as the oracle -------------------------------------------

# pt-query-digest is a modulino: required from Perl, it defines its packages without running.
PT_REWRITER = """
require $ARGV[0];
my $qr = QueryRewriter->new();
local $/ = "\\0";
while (my $q = <STDIN>) { chomp $q; print $qr->fingerprint($q), "\\0"; }
"""


def _pt_fingerprints(texts: list[str]) -> list[str]:
    pt, perl = shutil.which("pt-query-digest"), shutil.which("perl")
    if pt is None or perl is None:
        pytest.skip("pt-query-digest (percona-toolkit) or perl not installed: no reference fingerprints")
    data = "".join(text + "\0" for text in texts).encode()
    done = subprocess.run([perl, "-e", PT_REWRITER, pt], input=data, capture_output=True, check=True, timeout=120)
    out = done.stdout.decode("utf-8", "backslashreplace").split("\0")[:-1]
    assert len(out) == len(texts)
    return out


def test_pt_rewriter_agrees_on_the_cases() -> None:
    texts = [sql for sql, _ in MYSQL_CASES] + [sql for sql, _, _ in DELIBERATE_DIFFERENCES]
    wanted = [expected for _, expected in MYSQL_CASES] + [pt for _, _, pt in DELIBERATE_DIFFERENCES]
    assert _pt_fingerprints(texts) == wanted


def test_pt_rewriter_agrees_on_random_texts() -> None:
    rng = random.Random(11)
    # Our deliberate differences are taken out of the comparison: the input's trailing ; and
    # blanks, the output's trailing blanks, and escaped backslashes.
    texts = [_random_sql(rng, MYSQL_FRAGMENTS).rstrip(sqlnorm_regex._TRAILING_CHARS) for _ in range(4000)]
    texts = [text for text in texts if "\\\\" not in text and not text.startswith("#")]
    theirs = [fp.rstrip(sqlnorm_regex._WS_CHARS) for fp in _pt_fingerprints(texts)]
    # and pt's fingerprints that show a comment or string it left open (see DELIBERATE_DIFFERENCES)
    kept_open = [_shows_open_comment_or_string(pt) for pt in theirs]
    mismatches = [
        (text, pt, fingerprint(text)) for text, pt, open_ in zip(texts, theirs, kept_open) if not open_ and fingerprint(text) != pt
    ]
    assert not mismatches, mismatches[:5]
    assert kept_open.count(False) > len(texts) / 2  # most texts are still compared


def _shows_open_comment_or_string(pt_fingerprint: str) -> bool:
    """pt's fingerprint kept a comment marker (not its own /*repeat*/) or a quote: it shows what it left open."""
    return re.search(r"/\*(?!repeat )|--|#|['\"]", pt_fingerprint.replace("/*!", "")) is not None


# --- PostgreSQL: the tokenizer path agrees with the regex path ------------------------------------


@pytest.mark.parametrize("sql", [sql for sql, _ in POSTGRESQL_CASES])
def test_postgresql_tokenizer_and_regex_paths_agree(sql: str) -> None:
    text = sql.rstrip(sqlnorm_regex._TRAILING_CHARS)
    marked = sqlnorm_regex._apply((sqlnorm_pg._PG_LEX,), text)
    tokenized = sqlnorm_pg._pg_tokenized(text)
    if "never closed" in sql:
        assert tokenized is None  # sqlglot refuses it; the regex path answers
        return
    hard = sqlnorm_regex._matches(sqlnorm_pg._PG_NEEDS_TOKENIZER, text) or sqlnorm_regex._matches(sqlnorm_pg._PG_LEFT_COMMENT, marked)
    assert hard == any(mark in sql for mark in ("$$", "$fn$", "/* nested */"))
    if not hard:
        assert sqlnorm_pg._pg_after_lex(tokenized) == sqlnorm_pg._pg_from_marked(marked)


# --- redaction ---------------------------------------------------------------------------------


def test_redact_keeps_layout_case_and_names() -> None:
    sql = (
        "SELECT name, `col2`\n"
        "  FROM `t1` -- it's fine\n"
        " WHERE id = 42 AND note = 'it''s' AND x = \"dq \\\" q\" AND h = 0xFF AND f = -1.5e3\n"
        "   AND b = b'01' AND s = _utf8mb4'secret' AND n IS NULL AND p = ? AND v = @v"
    )
    assert redact_literals(sql) == (  # the comment is dropped: its words could be anything
        "SELECT name, `col2`\n"
        "  FROM `t1` \n"
        " WHERE id = ? AND note = ? AND x = ? AND h = ? AND f = -?\n"
        "   AND b = ? AND s = ? AND n IS NULL AND p = ? AND v = @v"
    )


def test_redact_postgresql() -> None:
    sql = "SELECT \"T1\".c2, $1::int, E'a\\'b', $$x$$, $t$ y $t$, 3.5 FROM \"T1\" /* 7 */ WHERE d > '2024-01-01'::date"
    assert redact_literals(sql, "postgresql") == (
        "SELECT \"T1\".c2, $1::int, ?, ?, ?, ? FROM \"T1\"   WHERE d > ?::date"
    )


def test_redact_hides_an_unterminated_string() -> None:
    assert redact_literals("SELECT * FROM t WHERE password = 'hunter2") == "SELECT * FROM t WHERE password = ?"
    assert "hunter2" not in redact_literals("SELECT 'hunter2", "postgresql")


def test_redact_series() -> None:
    sql = pl.Series(["SELECT 1", None, "SELECT 'a'", "SELECT 1"])
    assert redact_series(sql).to_list() == ["SELECT ?", None, "SELECT ?", "SELECT ?"]
    assert redact_series(pl.Series([], dtype=pl.String)).to_list() == []


# --- WHERE columns -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "dialect", "expected"),
    [
        ("SELECT c FROM sbtest1 WHERE id=5012", "mysql", [("sbtest1", "id")]),
        (
            "SELECT * FROM orders o JOIN users u ON u.id = o.user_id WHERE o.status = 'x' AND u.age > 3",
            "mysql",
            [("orders", "status"), ("users", "age")],
        ),
        ("UPDATE t SET a = 1 WHERE id = 5 AND b BETWEEN 1 AND 3", "mysql", [("t", "id"), ("t", "b")]),
        ("DELETE FROM t WHERE x IN (1,2) AND x IN (3)", "tidb", [("t", "x")]),
        (
            "SELECT * FROM t WHERE a = 1 AND b IN (SELECT c FROM u WHERE u.d >= 5)",
            "mysql",
            [("t", "a"), ("t", "b"), ("u", "d")],
        ),
        ("SELECT * FROM t WHERE a <> 1 OR b LIKE 'x%'", "mysql", []),
        (
            "SELECT * FROM a JOIN b ON a.id = b.aid WHERE a.x = b.y AND c = 1",
            "mysql",
            [("a", "x"), ("b", "y"), (None, "c")],
        ),
        ("SELECT * FROM t WHERE $1 = a AND b < $2", "postgresql", [("t", "a"), ("t", "b")]),
        ("SELECT * FROM t", "mysql", []),
        ("not sql at all (((", "mysql", []),
    ],
)
def test_where_columns(sql: str, dialect: str, expected: list) -> None:
    assert where_columns(sql, dialect) == expected


def test_where_columns_survives_hostile_statements() -> None:
    deep = "SELECT * FROM t WHERE " + "(" * 3000 + "a = 1" + ")" * 3000
    assert where_columns(deep) == []
    assert where_columns("") == []
    assert where_columns("SELECT * FROM t WHERE a = 'unterminated") == []


def test_doctests() -> None:
    failures, tried = doctest.testmod(sqlnorm)
    assert tried >= 5 and failures == 0
