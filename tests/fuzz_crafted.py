"""Crafted hostile captures for the fuzzer (``tests/fuzzing.py``): ``crafted_cases(good)``.

Three families, each a ``Case`` (``tests/fuzz_inputs.py``), built in memory in well under a
second each:

- pathological statements (300 KB of ``/* ``, a 250 KB UNION chain, a 100k-element IN list,
  deep parentheses and subqueries, an unterminated 300 KB string...) in a MySQL slow log, a
  PostgreSQL log and a TiDB slow log, beside the good member;
- members with out-of-range values no mutation draws: a CPU list to 4,000,000,000, a TiDB plan
  of depth 1,000,000,000 and one of 200,000 rows, 100,000 distinct JMeter labels, an open TOML
  table;
- archives holding the good member first: cut tar.gz streams (the good member must be read
  when Python's own tarfile can read it from the cut stream), 2,000 chained pax headers, bad
  sparse maps, 10,000 members with 100 KB names, zips with bad names, a cut central directory,
  5,000 tiny members; and CLI options out of range (``--window nan``, a bogus ``--tz``).
"""

from __future__ import annotations

import base64
import gzip
import io
import struct
import tarfile
import zlib

from tests.fuzz_inputs import GOOD_MEMBER, Case
from tests.hostile import gzip_repeated

KB = 1000

# ---- statements in three logs -------------------------------------------------------------------

STATEMENTS: dict[str, str] = {
    "comment-bomb": "SELECT 1 " + "/* " * (100 * KB),
    "union-chain": "SELECT 1" + " UNION SELECT 1" * (250 * KB // 15),
    "in-list": "SELECT * FROM t WHERE id IN (" + ",".join(str(i) for i in range(100_000)) + ")",
    "deep-parens": "SELECT " + "(" * 5000 + "1" + ")" * 5000 + " FROM t",
    "deep-subqueries": "SELECT * FROM t WHERE a IN (SELECT a FROM t WHERE a IN (" * 500 + "1" + "))" * 500,
    "unterminated-string": "SELECT * FROM t WHERE a = '" + "x" * (300 * KB),
    "quote-run": "SELECT " + "'" * (300 * KB),
    "backslash-quotes": "SELECT '" + "\\'" * (150 * KB),
    "unclosed-parens": "SELECT * FROM t WHERE (" * (20 * KB),
    "long-identifier": "SELECT `" + "a" * (300 * KB) + "` FROM t",
    "dollar-quotes": "SELECT $a$" + "$b$" * (100 * KB),
    "hints": "SELECT /*+ " + "NO_INDEX(t) " * (25 * KB) + "*/ 1",
}


def mysql_slowlog(statement: str) -> bytes:
    entry = (
        "# Time: 2024-01-01T00:00:{second:02d}.000000Z\n"
        "# User@Host: app[app] @ localhost []  Id:     8\n"
        "# Query_time: 1.500000  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: 1000\n"
        "SET timestamp=17040672{second:02d};\n{sql};\n"
    )
    head = "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    return (head + entry.format(second=0, sql="SELECT 1") + entry.format(second=1, sql=statement)
            + entry.format(second=2, sql="SELECT 2")).encode()


def pg_log(statement: str) -> bytes:
    line = "2024-01-01 00:00:{second:02d}.000 UTC [4242] LOG:  duration: 1500.000 ms  statement: {sql}\n"
    return (line.format(second=0, sql="SELECT 1") + line.format(second=1, sql=statement)
            + line.format(second=2, sql="SELECT 2")).encode()


def tidb_slowlog(statement: str, plan: str = "") -> bytes:
    entry = (
        "# Time: 2024-01-01T00:00:{second:02d}.000000+08:00\n"
        "# Txn_start_ts: 446000000000000000\n"
        "# User@Host: root[root] @ 10.0.0.1 [10.0.0.1]\n"
        "# Conn_ID: 7\n"
        "# Query_time: 1.5\n"
        "# DB: test\n"
        "# Digest: 50a2e32d2abbd6c1764b1b7f2058d428ef2712b029282b776beb9506a365c0f1\n"
        "# Plan_digest: 53f7fc047d5abad21f32720e02428492b434819bd6a7b937b746b4868df30495\n"
        "# Succ: true\n"
        "{plan}{sql};\n"
    )
    return (entry.format(second=0, plan="", sql="SELECT 1") + entry.format(second=1, plan=plan, sql=statement)
            + entry.format(second=2, plan="", sql="SELECT 2")).encode()


def _statement_cases() -> list[Case]:
    logs = (("slow.log", mysql_slowlog), ("postgresql.log", pg_log), ("tidb_slow_query.log", tidb_slowlog))
    return [
        Case(label=f"crafted {kind} statement in {name}", members=((f"db/{name}", build(sql)),))
        for kind, sql in STATEMENTS.items()
        for name, build in logs
    ]


# ---- values out of range ------------------------------------------------------------------------


def snappy_repeated(unit: bytes, size_bytes: int) -> bytes:
    """A raw snappy block of ``unit`` (under 64 KiB) repeated to ``size_bytes``: one literal, then
    copies of up to 64 bytes at offset len(unit) (snappy allows a copy to overlap its output)."""
    preamble = bytearray()
    value = size_bytes
    while True:  # the uncompressed length, as a little-endian base-128 varint
        preamble.append((value & 0x7F) | (0x80 if value > 0x7F else 0))
        value >>= 7
        if not value:
            break
    literal = bytes([61 << 2]) + (len(unit) - 1).to_bytes(2, "little") + unit  # tag 61: 2-byte length
    full_copies, rest = divmod(size_bytes - len(unit), 64)
    copy = bytes([(63 << 2) | 2]) + len(unit).to_bytes(2, "little")  # copy-2 of 64 bytes
    tail = bytes([((rest - 1) << 2) | 2]) + len(unit).to_bytes(2, "little") if rest else b""
    return bytes(preamble) + literal + copy * full_copies + tail


def _plan(rows: bytes, size_bytes: int) -> str:
    payload = base64.b64encode(snappy_repeated(rows, size_bytes)).decode()
    return f"# Plan: tidb_decode_plan('{payload}')\n"


def jmeter_labels(count: int) -> bytes:
    head = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,failureMessage,bytes,sentBytes,grpThreads,allThreads,URL,Latency,IdleTime,Connect\n"
    rows = (f"{1704067200000 + i},12,label-{i},200,OK,Thread Group 1-1,text,true,,18,8,1,1,null,5,0,1\n" for i in range(count))
    return (head + "".join(rows)).encode()


def _value_cases() -> list[Case]:
    status = b"Name:\tmysqld\nState:\tS (sleeping)\nPid:\t4242\nCpus_allowed:\tff\nCpus_allowed_list:\t0-4000000000\n"
    deep_row = b"1000000000\t32_7\t0\t20\tdata:TableScan_6\n"
    wide_row = b"1\t10_6\t1\t20\ttable:t, range:[-inf,+inf]\n"
    return [
        Case(label="crafted Cpus_allowed_list 0-4000000000", members=(("proc/4242/status", status),)),
        Case(label="crafted TiDB plan row of depth 1,000,000,000",
             members=(("db/tidb_slow_query.log", tidb_slowlog("SELECT * FROM t", _plan(deep_row, len(deep_row)))),)),
        Case(label="crafted TiDB plan of 200,000 rows",
             members=(("db/tidb_slow_query.log", tidb_slowlog("SELECT * FROM t", _plan(wide_row, 200_000 * len(wide_row)))),)),
        Case(label="crafted JMeter results with 100,000 distinct labels", members=(("app/results.jtl", jmeter_labels(100_000)),)),
        Case(label="crafted TOML with an open bracket",
             members=(("conf/tidb.toml", b"[performance\nmax-procs = 8\n[log]\nlevel = \"info\"\n"),)),
    ]


# ---- archives -----------------------------------------------------------------------------------


def _tar_entry(name: str, data: bytes, pax: dict[str, str] | None = None, fmt: int = tarfile.PAX_FORMAT) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 1704067200
    if pax:
        info.pax_headers = pax
    header = info.tobuf(fmt, "utf-8", "surrogateescape")
    return header + data + bytes(-len(data) % tarfile.BLOCKSIZE)


def _tar(entries: list[bytes], end: bool = True) -> bytes:
    return b"".join(entries) + (bytes(2 * tarfile.BLOCKSIZE) if end else b"")


def _pax_block(keyword: str, value: str, typeflag: bytes = tarfile.XHDTYPE) -> bytes:
    """One raw pax extended header block (typeflag x) with one record."""
    record = f" {keyword}={value}\n".encode()
    length = len(record) + len(str(len(record)))
    length = len(record) + len(str(length))
    body = str(length).encode() + record
    info = tarfile.TarInfo("././@PaxHeader")
    info.type, info.size = typeflag, len(body)
    return info.tobuf(tarfile.USTAR_FORMAT) + body + bytes(-len(body) % tarfile.BLOCKSIZE)


def good_readable_from_tar(data: bytes, good: bytes) -> bool:
    """Whether Python's tarfile, streaming, reads the good member whole from ``data``."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r|*") as archive:
            for info in archive:
                if info.name == GOOD_MEMBER:
                    handle = archive.extractfile(info)
                    return handle is not None and handle.read() == good
    except (tarfile.TarError, OSError, EOFError, zlib.error):
        return False
    return False


def zip_raw(entries: list[tuple[bytes, bytes]], utf8_flag: bool = False) -> bytes:
    """A zip of stored entries with names as raw bytes (zipfile refuses '' and non-UTF-8 names)."""
    flags = 0x0800 if utf8_flag else 0
    local, central = bytearray(), bytearray()
    for name, data in entries:
        crc = zlib.crc32(data)
        fields = struct.pack("<HHHHHIIIHH", 20, flags, 0, 0, 0x21, crc, len(data), len(data), len(name), 0)
        central += b"PK\x01\x02" + struct.pack("<H", 20) + fields + struct.pack("<HHHII", 0, 0, 0, 0o644 << 16, len(local)) + name
        local += b"PK\x03\x04" + fields + name + data
    end = b"PK\x05\x06" + struct.pack("<HHHHIIH", 0, 0, len(entries), len(entries), len(central), len(local), 0)
    return bytes(local + central + end)


def _archive_cases(good: bytes) -> list[Case]:
    slow = mysql_slowlog("SELECT * FROM orders WHERE id = 42") * 2000
    plain = _tar([_tar_entry(GOOD_MEMBER, good), _tar_entry("db/slow.log", slow), _tar_entry("db/after.log", slow[:5000])])
    whole = gzip.compress(plain, mtime=0)
    cases = []
    for fraction in (0.02, 0.1, 0.3, 0.6, 0.9, 0.99):
        cut = whole[: int(len(whole) * fraction)]
        readable = good_readable_from_tar(cut, good)
        cases.append(Case(label=f"crafted tar.gz cut at {fraction:.0%}", capture_file=("capture.tar.gz", cut),
                          exits=frozenset({3} if readable else {2, 3}), good_required=readable))
    cases.append(Case(label="crafted tar.gz without its gzip trailer", capture_file=("capture.tar.gz", whole[:-8]),
                      exits=frozenset({3})))
    cases.append(Case(label="crafted tar.gz without the tar end blocks",
                      capture_file=("capture.tar.gz", gzip.compress(plain[:-1024], mtime=0))))
    good_entry = _tar_entry(GOOD_MEMBER, good)
    cases.append(Case(label="crafted tar of 2,000 chained pax headers",
                      capture_file=("capture.tar", _tar([good_entry] + [_pax_block("comment", "x")] * 2000 + [_tar_entry("db/x.log", b"x\n")]))))
    cases.append(Case(label="crafted tar with a GNU.sparse.map that is not numbers",
                      capture_file=("capture.tar", _tar([good_entry, _tar_entry("db/sparse.log", b"x" * 600, {
                          "GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "db/sparse.log",
                          "GNU.sparse.realsize": "2147483648", "GNU.sparse.map": "a,b,c,d"}), _tar_entry("db/after.log", b"x\n")]))))
    cases.append(Case(label="crafted tar with a 1.0 sparse member announcing 2 GiB, then EOF",
                      capture_file=("capture.tar", _tar([good_entry, _tar_entry("db/sparse.log", b"", {
                          "GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "db/sparse.log",
                          "GNU.sparse.realsize": "2147483648"})], end=False))))
    long_name_member = _tar_entry("m/" + "n" * 100_000 + ".log", b"x\n")
    cases.append(Case(label="crafted tar.gz of 10,000 members with 100 KB names",
                      capture_file=("capture.tar.gz", gzip_repeated([(good_entry, 1), (long_name_member, 10_000), (bytes(1024), 1)]))))
    cases.extend(_zip_cases(good))
    return cases


def _zip_cases(good: bytes) -> list[Case]:
    tiny = mysql_slowlog("SELECT 1")
    good_entry = (GOOD_MEMBER.encode(), good)
    named = {
        name: [good_entry, (name, tiny), (b"db/after.log", tiny)]
        for name in (b"", b"/", b"../../x.log", b"/abs.log", b"a\\..\\..\\b.log", b"db/" + b"n" * 65_000,
                     b"db/\x00nul.log", b"db/.", b"C:/x.log", b"db/\n\x1b[31m.log")
    }
    named[b"db/slow.log (twice)"] = [good_entry, (b"db/slow.log", tiny), (b"db/slow.log", tiny[:100])]
    cases = [
        Case(label=f"crafted zip with a member named {name[:40]!r}", capture_file=("capture.zip", zip_raw(entries)))
        for name, entries in named.items()
    ]
    cases.append(Case(label="crafted zip with the UTF-8 flag and a name that is not UTF-8",
                      capture_file=("capture.zip", zip_raw([good_entry, (b"db/caf\xe9.log", tiny), (b"db/after.log", tiny)], utf8_flag=True))))
    three = zip_raw([good_entry, (b"db/slow.log", tiny * 50), (b"db/after.log", tiny)])
    central = three.find(b"PK\x01\x02", three.find(b"PK\x01\x02") + 4)  # the second entry's central-directory record
    damaged = three[: central + 10] + b"\x63\x00" + three[central + 12 :]  # compression method 99
    cases.append(Case(label="crafted zip with one damaged central-directory entry", capture_file=("capture.zip", damaged)))
    cases.append(Case(label="crafted zip cut before its central directory",
                      capture_file=("capture.zip", three[: three.find(b"PK\x01\x02") - 5]), exits=frozenset({3})))
    many = zip_raw([good_entry] + [(f"db/{i}/slow.log".encode(), tiny) for i in range(5000)])
    cases.append(Case(label="crafted zip of 5,000 tiny slow logs", capture_file=("capture.zip", many)))
    line = "2024-01-01 00:00:0{s}.000 UTC [{pid}] app@db LOG:  duration: 1.{i} ms  statement: SELECT {s} FROM t WHERE id = {i}\n"
    pg_logs = [(f"db/{i}/postgresql.log".encode(), "".join(line.format(s=s, pid=4000 + i % 7, i=i) for s in range(3)).encode())
               for i in range(5000)]
    cases.append(Case(label="crafted zip of 5,000 tiny PostgreSQL logs", capture_file=("capture.zip", zip_raw([good_entry] + pg_logs))))
    return cases


# ---- options ------------------------------------------------------------------------------------


def _option_cases() -> list[Case]:
    options = (("--window", "nan"), ("--window", "inf"), ("--window", "1e308"), ("--window", "-1"),
               ("--tz", "Mars/Olympus_Mons"), ("--tz", ""), ("--tz", "../../../etc/passwd"), ("--tz", "UTC+99"))
    return [Case(label=f"crafted option {' '.join(o)!r}", options=o, exits=frozenset({0, 2, 3})) for o in options]


def crafted_cases(good: bytes) -> list[Case]:
    return _statement_cases() + _value_cases() + _archive_cases(good) + _option_cases()
