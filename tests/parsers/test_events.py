"""Event parsers (kernel-log, mysql-error-log, tidb-log) and PostgreSQL events: goldens on the corpus
and fixtures/events, hand-checked events (victim, pid, time, count), detection, hostile input."""

from __future__ import annotations

import re
import tarfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, kernel_log, log_events, mysql_error_log, pg_events, tidb_log
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError, ParseResult
from tests.conftest import CORPUS, REPO, corpus_names
from tests.golden import check_golden

FIXTURES = REPO / "fixtures" / "events"
OOM_FILES = corpus_names("oom")
MINE = (kernel_log.SPEC, mysql_error_log.SPEC, tidb_log.SPEC)
ALL_SPECS = tuple(PARSERS) + tuple(s for s in MINE if s.kind not in {p.kind for p in PARSERS})
FIXTURE_KINDS = {
    "dmesg-cgroup-oom-segfault.txt": "kernel-log",
    "dmesg-T-cgroup-oom-segfault.txt": "kernel-log",
    "dmesg-iso-cgroup-oom-segfault.txt": "kernel-log",
    "mariadb-crash-restart-error.log": "mysql-error-log",
    "tidb-4000.log": "tidb-log",
    "tikv-20160.log": "tidb-log",
    "pd-2379.log": "tidb-log",
    "tidb_stderr.log": "tidb-log",
    "postgresql-backend-kill9.log": "postgresql-log",
}
SPECS = {s.kind: s for s in MINE}


@dataclass(frozen=True)
class RefContext(ParseContext):
    """A context with the capture time the kernel-log parser uses for year-less syslog stamps."""

    ref_time: datetime | None = None


def _member(capture: str, path: str) -> str:
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        return tar.extractfile(tar.getmember(path)).read().decode("utf-8", "backslashreplace")


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def _events(result: ParseResult) -> pl.DataFrame:
    return result.tables["event"]


def _rows(result: ParseResult, *columns: str) -> list[tuple]:
    return _events(result).select(columns).rows()


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def _pg_records(text: str) -> pl.DataFrame:
    """The columns of the pg_messages record frame postgres_events reads, for the fixtures' prefix
    ``%m [%p] %q%u@%d `` (the PostgreSQL parsers build the same frame for any prefix)."""
    rows = []
    for index, line in enumerate(text.split("\n")):
        match = re.match(r"^(\S+ \S+) UTC \[(\d+)\] (?:\S*@\S* )?([A-Z]+):  (.*)$", line)
        if match:
            rows.append({"line": index + 1, "ts": match[1], "pid": match[2], "sev": match[3], "message": match[4]})
    return pl.DataFrame(rows).with_columns(
        pl.col("ts").str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit="us").dt.replace_time_zone("UTC")
    )


def _pg_result(text: str, source: str) -> ParseResult:
    events, notes = pg_events.postgres_events(_pg_records(text), source)
    return ParseResult(tables={"event": events}, records=events.height, notes=notes)


# ---- goldens ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(name for name, kind in FIXTURE_KINDS.items() if kind == "postgresql-log"))
def test_postgres_fixture_events_golden(name: str, update_goldens: bool) -> None:
    """The events postgres_events derives from a fixture log (the parser cases hold the other kinds' goldens)."""
    result = _pg_result(_fixture(name), f"fixtures/events/{name}")
    assert result.warnings == []
    assert result.records == _events(result).height > 0
    check_golden("postgresql-error-events", f"fixture:events/{name}", result, update_goldens)


def test_capture_mariadb_error_log() -> None:
    text = _member("mariadb-sysbench-debian12.tar.gz", "capture/db/mariadb-error.log")
    result = mysql_error_log.SPEC.parse(text, ParseContext(source="capture/db/mariadb-error.log"))
    # one start: 'mariadbd: ready for connections.' on line 18, pid from '... as process 21581' on line 1
    assert _rows(result, "kind", "process", "pid", "line", "ts") == [
        ("start", "mariadbd", 21581, 18, _utc("2026-11-29 19:12:12"))
    ]
    assert result.notes == ["error log times have no zone; read as UTC (--tz)"]


def test_capture_postgres_events_golden(update_goldens: bool) -> None:
    text = _member("postgres-pgbench-debian12.tar.gz", "capture/db/postgresql.log")
    result = _pg_result(text, "capture/db/postgresql.log")
    # 'ready to accept connections' (line 4); 'received fast shutdown request' (line 2280) and the
    # 'database system is shut down' that completes it (line 2286, dropped: the same stop)
    assert _rows(result, "kind", "pid", "line") == [("start", 21681, 4), ("shutdown", 21681, 2280)]
    assert text.split("\n")[2285].endswith("database system is shut down")
    check_golden("postgresql-error-events", "capture:postgres-pgbench-debian12/capture/db/postgresql.log", result, update_goldens)


# ---- kernel log: hand-checked ---------------------------------------------------------------------


def test_rhel8_messages_oom_victim_not_invoker(corpus: Path) -> None:
    text = (corpus / "oom" / "out-of-memory__messages.1").read_text(encoding="utf-8")
    result = kernel_log.SPEC.parse(text, ParseContext(source="messages.1"))
    (event,) = _events(result).to_dicts()
    # line 96: 'Out of memory: Killed process 3117813 (cache-main) ...'; in:imjournal only invoked the killer
    assert (event["kind"], event["process"], event["pid"], event["line"], event["host"]) == (
        "oom-kill", "cache-main", 3117813, 96, "hnsin-varnish")
    assert event["message"].endswith(
        "[oom-killer invoked by in:imjournal; constraint=CONSTRAINT_NONE; victim cgroup /system.slice/varnish.service]")
    assert event["ts"] is None  # 'Sep 29 08:12:34' has no year and the context gives no capture time
    assert any("carry no year" in note for note in result.notes)


def test_centos6_two_line_oom_report(corpus: Path) -> None:
    text = (corpus / "oom" / "out-of-memory__messages_centos6_mysqld_excerpt.log").read_text(encoding="utf-8")
    result = kernel_log.SPEC.parse(text, RefContext(source="messages", ref_time=datetime(2017, 6, 21, tzinfo=timezone.utc)))
    (event,) = _events(result).to_dicts()
    # 'Out of memory: Kill process 40738 (mysqld) score 16 or sacrifice child' (879) + 'Killed process 40738, UID 27, (mysqld)' (880)
    assert (event["process"], event["pid"], event["line"], event["host"]) == ("mysqld", 40738, 880, "new-db1")
    assert "oom-killer invoked by php-fpm" in event["message"]
    assert event["ts"] == _utc("2017-06-20 12:47:04")
    assert any("2017 taken from the capture time" in note for note in result.notes)


def test_dmesg_fixture_times_and_victims() -> None:
    expected = [("oom-kill", "kernel", "python3", 7293, 78), ("crash", "kernel", "python3", 7361, 79)]
    raw = kernel_log.SPEC.parse(_fixture("dmesg-cgroup-oom-segfault.txt"), ParseContext(source="dmesg"))
    human = kernel_log.SPEC.parse(_fixture("dmesg-T-cgroup-oom-segfault.txt"), ParseContext(source="dmesg-T"))
    iso = kernel_log.SPEC.parse(_fixture("dmesg-iso-cgroup-oom-segfault.txt"), ParseContext(source="dmesg-iso"))
    for result in (raw, human, iso):
        assert _rows(result, "kind", "component", "process", "pid", "line") == expected
    assert _events(raw)["ts"].null_count() == 2 and any("seconds since boot" in n for n in raw.notes)
    assert _events(human)["ts"].to_list() == [_utc("2026-11-29 22:53:34"), _utc("2026-11-29 22:53:37")]
    assert _events(iso)["ts"].to_list() == [_utc("2026-11-29 22:53:34.682265"), _utc("2026-11-29 22:53:37.243123")]
    assert "Memory cgroup out of memory: Killed process 7293 (python3)" in _events(iso)["message"][0]


def test_dmesg_T_reads_the_zone_from_tz() -> None:
    text = _fixture("dmesg-T-cgroup-oom-segfault.txt")
    result = kernel_log.SPEC.parse(text, ParseContext(source="dmesg-T", tz="Asia/Shanghai"))
    assert _events(result)["ts"][0] == _utc("2026-11-29 14:53:34")
    assert any("read as Asia/Shanghai" in note for note in result.notes)


def test_syslog_year_rollover_and_future_guard() -> None:
    text = (
        "Dec 31 23:59:58 db1 kernel: Out of memory: Killed process 11 (mysqld) total-vm:1kB, anon-rss:1kB\n"
        "Jan  1 00:00:03 db1 systemd[1]: mysqld.service: Scheduled restart job, restart counter is at 1.\n"
        "Jan  1 00:00:04 db1 systemd[1]: Started MySQL Community Server.\n"
        "Jan  1 00:00:05 db1 systemd[1]: Started Session 4 of User root.\n"
    )
    result = kernel_log.SPEC.parse(text, RefContext(source="messages", ref_time=datetime(2025, 1, 2, tzinfo=timezone.utc)))
    assert _rows(result, "kind", "component", "process", "ts") == [
        ("oom-kill", "kernel", "mysqld", _utc("2024-12-31 23:59:58")),
        ("restart", "systemd", "mysqld.service", _utc("2025-01-01 00:00:03")),
        ("start", "systemd", "MySQL Community Server", _utc("2025-01-01 00:00:04")),
    ]  # the cron session start is not a database event
    later = kernel_log.SPEC.parse(text.split("\n")[0], RefContext(source="m", ref_time=datetime(2025, 6, 1, tzinfo=timezone.utc)))
    assert _events(later)["ts"][0] == _utc("2024-12-31 23:59:58")  # Dec 31 2025 would lie after the capture


def test_systemd_crash_restart_and_journal_short_iso() -> None:
    text = (
        "2024-05-14T10:00:01+0800 db1 kernel: tikv-server[1234]: segfault at 0 ip 00007f sp 00007f error 4 in tikv-server[55+1]\n"
        "2024-05-14T10:00:02+0800 db1 systemd[1]: tikv-20160.service: Main process exited, code=killed, status=9/KILL\n"
        "2024-05-14T10:00:02+0800 db1 systemd[1]: tikv-20160.service: Main process exited, code=exited, status=0/SUCCESS\n"
        "2024-05-14T10:00:17+0800 db1 systemd[1]: tikv-20160.service: Scheduled restart job, restart counter is at 3.\n"
        "2024-05-14T10:00:17+0800 db1 systemd[1]: Started tikv-20160.service - TiKV service.\n"
        "2024-05-14T10:30:00+0800 db1 systemd[1]: Stopping tikv-20160.service - TiKV service...\n"
    )
    result = kernel_log.SPEC.parse(text, ParseContext(source="journal.txt"))
    assert _rows(result, "kind", "process", "pid", "host") == [
        ("crash", "tikv-server", 1234, "db1"),
        ("crash", "tikv-20160.service", None, "db1"),
        ("restart", "tikv-20160.service", None, "db1"),
        ("start", "tikv-20160.service - TiKV service", None, "db1"),
        ("shutdown", "tikv-20160.service - TiKV service", None, "db1"),
    ]
    assert _events(result)["ts"][0] == _utc("2024-05-14 02:00:01")


def test_truncated_oom_report_warns_and_makes_no_event() -> None:
    text = "[  10.000001] mysqld invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0\n[  10.000002] Mem-Info:\n"
    result = kernel_log.SPEC.parse(text, ParseContext(source="dmesg"))
    assert _events(result).is_empty()
    assert [w.line for w in result.warnings] == [1] and "no 'Killed process'" in result.warnings[0].reason


# ---- MySQL / MariaDB error log ----------------------------------------------------------------------


def test_mariadb_crash_restart_fixture() -> None:
    result = mysql_error_log.SPEC.parse(_fixture("mariadb-crash-restart-error.log"), ParseContext(source="err.log"))
    assert _rows(result, "kind", "process", "pid", "line") == [
        ("start", "mariadbd", 7900, 18),
        ("aborted-connection", "mariadbd", 7900, 20),
        ("crash", "mariadbd", 7900, 21),  # '261129 22:53:53 [ERROR] mariadbd got signal 11 ;' (kill -SEGV)
        ("recovery", "mariadbd", 8382, 79),  # after the crash: 'Starting crash recovery from checkpoint'
        ("start", "mariadbd", 8382, 91),
        ("recovery", "mariadbd", 8409, 101),  # after kill -9: no line at all, only the recovery says it
        ("start", "mariadbd", 8409, 113),
        ("shutdown", "mariadbd", 8409, 115),  # 'Normal shutdown'; 'Shutdown complete' (122) is the same stop
    ]
    assert _events(result)["ts"][2] == _utc("2026-11-29 22:53:53")


def test_mysql8_57_and_old_formats() -> None:
    text = (
        "2024-05-14T02:00:01.123456Z 0 [System] [MY-010116] [Server] /usr/sbin/mysqld (mysqld 8.0.36) starting as process 1234\n"
        "2024-05-14T02:00:03.000000Z 0 [System] [MY-010931] [Server] /usr/sbin/mysqld: ready for connections. Version: '8.0.36'\n"
        "2024-05-14T02:00:03.000000Z 0 [System] [MY-011323] [Server] X Plugin ready for connections. Bind-address: '::' port: 33060\n"
        "2024-05-14T23:59:59.000000+08:00 12 [Note] [MY-010914] [Server] Aborted connection 12 to db: 'sbtest' user: 'sb' host: "
        "'10.0.0.5' (Got an error reading communication packets).\n"
        "00:00:05 UTC - mysqld got signal 11 ;\n"
        "2024-05-15 10:00:01 1234 [Note] InnoDB: Starting crash recovery.\n"
        "240515  9:00:01 [ERROR] Aborting\n"
        "240515 09:00:02 mysqld_safe mysqld restarted\n"
    )
    result = mysql_error_log.SPEC.parse(text, ParseContext(source="error.log", tz="Asia/Shanghai"))
    assert _rows(result, "kind", "pid", "ts") == [
        ("start", 1234, _utc("2024-05-14 02:00:03")),
        ("aborted-connection", 1234, _utc("2024-05-14 15:59:59")),
        ("crash", 1234, _utc("2024-05-15 00:00:05")),  # clock-only line: date of the line before, past midnight
        ("recovery", 1234, _utc("2024-05-15 02:00:01")),  # zone-less: read in --tz
        ("fatal", 1234, _utc("2024-05-15 01:00:01")),
        ("restart", 1234, _utc("2024-05-15 01:00:02")),
    ]
    assert result.notes == ["error log times have no zone; read as Asia/Shanghai (--tz)"]


def test_aborted_connection_flood_is_capped() -> None:
    line = "2024-05-14 10:00:01 {} [Warning] Aborted connection {} to db: 'd' user: 'u' host: 'h' (Got timeout reading communication packets)\n"
    text = "".join(line.format(i, i) for i in range(log_events.MAX_ROWS_PER_KIND + 5))
    result = mysql_error_log.SPEC.parse(text, ParseContext(source="error.log"))
    assert result.records == log_events.MAX_ROWS_PER_KIND
    assert f"aborted-connection: {log_events.MAX_ROWS_PER_KIND + 5} lines, the first {log_events.MAX_ROWS_PER_KIND} kept as events" in result.notes


# ---- TiDB / TiKV / PD ---------------------------------------------------------------------------------


def test_tidb_fixture_events() -> None:
    result = tidb_log.SPEC.parse(_fixture("tidb-4000.log"), ParseContext(source="tidb-4000.log"))
    assert _rows(result, "kind", "component", "process", "line") == [
        ("start", "tidb", "tidb-server", 1),
        ("memory-alarm", "tidb", "tidb-server", 5),  # not the expensive_query lines 4 and 6
        ("shutdown", "tidb", "tidb-server", 7),  # 'server is shutting down' (8) is the same stop
        ("start", "tidb", "tidb-server", 9),
        ("fatal", "tidb", "tidb-server", 10),
    ]
    assert _events(result)["ts"][0] == _utc("2024-05-14 02:00:01.123")


def test_tikv_restart_without_stop_and_component_from_name() -> None:
    tikv = tidb_log.SPEC.parse(_fixture("tikv-20160.log"), ParseContext(source="tikv-20160.log"))
    assert _rows(tikv, "kind", "component", "line") == [("start", "tikv", 1), ("start", "tikv", 6), ("shutdown", "tikv", 8)]
    lines = "[2024/05/14 10:09:00.000 +08:00] [FATAL] [lib.rs:465] [\"out of memory\"]\n"
    assert _rows(tidb_log.SPEC.parse(lines, ParseContext(source="a/tikv.log")), "component", "process") == [("tikv", "tikv-server")]
    assert _rows(tidb_log.SPEC.parse(lines, ParseContext(source="a/pd_stderr.log")), "component") == [("pd",)]
    assert _rows(tidb_log.SPEC.parse(lines, ParseContext(source="x.log")), "component") == [("tikv",)]  # .rs source


def test_go_runtime_oom_in_stderr() -> None:
    result = tidb_log.SPEC.parse(_fixture("tidb_stderr.log"), ParseContext(source="deploy/tidb-4000/log/tidb_stderr.log"))
    assert _rows(result, "kind", "component", "process", "ts", "message", "line") == [
        ("crash", "tidb", "tidb-server", None, "fatal error: runtime: out of memory", 1)
    ]
    assert result.warnings == [] and any("carries no time" in note for note in result.notes)


# ---- PostgreSQL ---------------------------------------------------------------------------------------


def test_postgres_backend_kill9_fixture() -> None:
    result = _pg_result(_fixture("postgresql-backend-kill9.log"), "postgresql.log")
    assert _rows(result, "kind", "pid", "line") == [
        ("start", 8983, 4),
        ("crash", 8997, 5),  # 'server process (PID 8997) was terminated by signal 9: Killed': the backend's pid
        ("recovery", 9011, 9),  # 'was interrupted' (9); 'not properly shut down' (10) is the same recovery
        ("start", 8983, 16),
        ("error", 9100, 17),  # FATAL:  sorry, too many clients already
        ("shutdown", 8983, 18),
    ]
    assert _events(result)["ts"][1] == _utc("2026-11-29 22:54:12.751")


# ---- detection ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_fixture_detected_by_its_parser_only(name: str) -> None:
    head = _fixture(name)[:DETECT_HEAD_BYTES]
    scores = {spec.kind: spec.detect(head, "member") for spec in ALL_SPECS}
    assert scores[FIXTURE_KINDS[name]] > 0.5
    assert {kind for kind, score in scores.items() if score > 0.5} == {FIXTURE_KINDS[name]}


def test_db_logs_through_syslog_are_left_to_their_parsers() -> None:
    mariadb = "May 14 10:00:01 db1 mariadbd[1234]: 2024-05-14 10:00:01 0 [Note] mariadbd: ready for connections.\n" * 3
    assert kernel_log.SPEC.detect(mariadb, "syslog") <= 0.5 < mysql_error_log.SPEC.detect(mariadb, "syslog")
    result = mysql_error_log.SPEC.parse(mariadb, ParseContext(source="syslog"))
    assert _rows(result, "kind", "ts")[0] == ("start", _utc("2024-05-14 10:00:01"))
    host_syslog = mariadb + "May 14 10:00:02 db1 kernel: Out of memory: Killed process 1234 (mariadbd) total-vm:1kB\n" + (
        "May 14 10:00:03 db1 CRON[77]: (root) CMD (run-parts /etc/cron.hourly)\n" * 5)
    assert mysql_error_log.SPEC.detect(host_syslog, "syslog") <= 0.5 < kernel_log.SPEC.detect(host_syslog, "syslog")


# ---- hostile input --------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", MINE, ids=lambda s: s.kind)
@pytest.mark.parametrize("text", ["", "   \n\n", "\x00\x01\x02garbage\ufffd\n" * 50, "just some words\nand more\n"])
def test_unreadable_input_is_a_parse_error(spec, text: str) -> None:
    with pytest.raises(ParseError):
        spec.parse(text, ParseContext(source="x"))


def test_huge_lines_and_broken_fields_do_not_crash() -> None:
    long_name = "m" * 100_000
    kernel = (
        f"[  1.000000] Out of memory: Killed process 99999999999 ({long_name}) total-vm:1kB\n"
        "[  2.000000] Killed process (mysqld)\n"
        f"[  3.000000] {'x' * 1_000_000}\n"
    )
    result = kernel_log.SPEC.parse(kernel, ParseContext(source="dmesg"))
    (event,) = _events(result).to_dicts()
    assert event["pid"] is None and len(event["message"]) == log_events.MESSAGE_CHARS  # pid beyond Int32 -> null
    tidb = "[2024/13/45 99:00:00.000 +08:00] [FATAL] [main.go:1] [\"boom\"]\n[not a time] [FATAL] [x.go:1] [\"y\"]\n"
    result = tidb_log.SPEC.parse(tidb, ParseContext(source="tidb.log"))
    assert _rows(result, "kind", "ts", "line") == [("fatal", None, 1), ("fatal", None, 2)]
    assert [w.line for w in result.warnings] == [1] and "2 event line(s) with an unreadable time" in result.warnings[0].reason
    mysql = "2024-02-30 10:00:01 0 [ERROR] mysqld got signal 6 ;\n2024-05-14 10:00:01 0 [Note] x\n"
    result = mysql_error_log.SPEC.parse(mysql, ParseContext(source="e"))
    assert _rows(result, "kind", "ts") == [("crash", None)] and [w.line for w in result.warnings] == [1]


def test_valid_logs_without_events_give_an_empty_table() -> None:
    quiet = "[2024/05/14 10:00:01.123 +08:00] [INFO] [server.go:1] [\"ok\"]\n" * 3
    result = tidb_log.SPEC.parse(quiet, ParseContext(source="tidb.log"))
    assert result.records == 0 and _events(result).is_empty() and _events(result).schema == pl.Schema(
        {"ts": pl.Datetime("us", "UTC"), "host": pl.String, "component": pl.String, "kind": pl.String,
         "process": pl.String, "pid": pl.Int32, "message": pl.String, "source": pl.String, "line": pl.Int64})
