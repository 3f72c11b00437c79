"""Values out of range, sizes out of bounds and native panics: warnings on one member, never a crash,
a runaway allocation or a hang, and the good mpstat beside each bad member still read.

Each case ran into a traceback, a 4 GiB allocation or minutes of work before (issue 11); each is run
through the real CLI (``python -m dbdiag``, the console script's entry) under a 3 GB address-space cap.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from dbdiag.engine import run_rules
from dbdiag.findings import Status
from dbdiag.parsers import registry
from dbdiag.parsers.base import ParseResult, ParserSpec
from dbdiag.pipeline import analyze, analyze_capture
from dbdiag.rules.base import Rule, RuleInput
from tests.conftest import CORPUS, REPO
from tests.parsers.test_tidb import INDEX_LOOKUP, entry
from tests.test_pipeline import capture_of

GOOD_MPSTAT = CORPUS / "mpstat" / "sysstat__expected.mpstat-U.txt"
MEMORY_CAP_BYTES = 3_000_000_000


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP_BYTES, MEMORY_CAP_BYTES))


def run_cli(tmp_path: Path, name: str, data: bytes, exits: tuple[int, ...] = (0,)) -> dict:
    """``dbdiag analyze`` of a folder holding the bad member and the good mpstat: the JSON report
    (``exits``: the exit codes allowed, 3 where the bad member is refused and the capture partial)."""
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / name).write_bytes(data)
    (capture / "mpstat.txt").write_bytes(GOOD_MPSTAT.read_bytes())
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", str(out)],
        capture_output=True, text=True, timeout=120, preexec_fn=_capped, check=False,
    )
    assert "Traceback" not in done.stderr and done.returncode in exits, done.stderr[-2000:]
    report = json.loads(out.read_text())
    inputs = {record["path"]: record for record in report["inputs"]}
    assert inputs["mpstat.txt"]["kind"] == "mpstat-text" and inputs["mpstat.txt"]["records"] > 0
    return report


def member(report: dict, name: str) -> dict:
    return next(record for record in report["inputs"] if record["path"] == name)


def warnings_of(report: dict, name: str) -> str:
    return " | ".join(member(report, name)["warnings"])


# ---- plans, CPU lists, counters: bounded before any allocation -------------------------------------


def test_tidb_plan_depth_of_a_billion_is_a_warning(tmp_path: Path):
    """760 bytes whose decoded plan row says depth 1,000,000,000: polars was asked for a 4 GiB indent."""
    deep = ["0\t30_10\t0\t10.00\t\t8\ttime:2.1ms, loops:2\t12 KB\tN/A", "1000000000\t47_8\t1_0\t10.00\ttable:t\t8\tx\tN/A\tN/A"]
    report = run_cli(tmp_path, "tidb-slow.log", entry(plan=deep).encode())
    assert member(report, "tidb-slow.log")["records"] == 1
    assert "plan depth 1000000000 outside 0..1000: plan not read" in warnings_of(report, "tidb-slow.log")


def test_tidb_plan_operators_are_cut_with_a_warning():
    plan = INDEX_LOOKUP[:1] + [INDEX_LOOKUP[1]] * 50_000
    analysis = analyze_capture(capture_of(("tidb-slow.log", entry(plan=plan).encode())))
    assert analysis.tables["plan_node"].height == 10_000
    assert analysis.inputs[0].warnings == ["line 1: plan of 50001 operators: the first 10000 read"]


def test_cpu_list_of_four_billion_cpus_is_dropped_with_a_warning(tmp_path: Path):
    """``unbound-processes`` expanded it into a list and died of MemoryError."""
    status = b"Name:\tmysqld\nPid:\t4242\nCpus_allowed_list:\t0-4000000000\nMems_allowed_list:\t0\n"
    report = run_cli(tmp_path, "status", status)
    assert "Cpus_allowed_list '0-4000000000' is not a CPU list (CPU 4000000000 outside 0-65535); dropped" in warnings_of(report, "status")
    assert all(rule["status"] != "errored" for rule in report["rules"])


def test_numastat_counter_of_forty_digits_is_dropped_with_a_warning(tmp_path: Path):
    """derive's cast to Int64 failed on it and ended the run."""
    text = (CORPUS / "numastat" / "insights-core__numastat.txt").read_text().replace("4735090719", "1" * 40)
    report = run_cli(tmp_path, "numastat.txt", text.encode())
    assert "numa_hit for node 0 is 111111111111111111111111, over 9223372036854775807; dropped" in warnings_of(report, "numastat.txt")
    assert member(report, "numastat.txt")["records"] == 1


def test_sysfs_numastat_counter_of_forty_digits_is_dropped_with_a_warning(tmp_path: Path):
    text = "numa_hit " + "9" * 40 + "\nnuma_miss 5\nlocal_node 10\nother_node 1\n"
    capture = tmp_path / "capture" / "node0"
    capture.mkdir(parents=True)
    (capture / "numastat").write_text(text)
    (tmp_path / "capture" / "mpstat.txt").write_bytes(GOOD_MPSTAT.read_bytes())
    analysis = analyze(tmp_path / "capture")
    record = next(r for r in analysis.inputs if r.path == "node0/numastat")
    assert record.warnings == ["line 1: numa_hit " + "9" * 24 + " over 9223372036854775807; line dropped"]
    assert next(r for r in analysis.inputs if r.path == "mpstat.txt").status == "read"


# ---- times out of range ----------------------------------------------------------------------------


def test_prometheus_samples_eight_thousand_years_out_and_before_1970(tmp_path: Path):
    text = (CORPUS / "prometheus" / "grafana__range_missing.result.json").read_text()
    far = text.replace("1641889534", "254000000000", 1).replace("1641889537", "-1641889537", 1)
    report = run_cli(tmp_path, "p.json", far.encode())
    assert "2 samples with an unreadable time or value skipped (a time outside 1970 to 2200" in warnings_of(report, "p.json")
    assert member(report, "p.json")["records"] > 0


def test_postgresql_log_of_years_1_to_9999(tmp_path: Path):
    """Years 1 and 9999 in one log: an OverflowError in the timeline, a ValueError in its minimum."""
    lines = (CORPUS / "postgres" / "pgbadger__stmt_type.log").read_text().splitlines()[:5]
    text = "\n".join(["0001" + lines[0][4:], lines[1], lines[2], lines[3], "9999" + lines[4][4:]]) + "\n"
    report = run_cli(tmp_path, "pg.log", text.encode())
    warned = warnings_of(report, "pg.log")
    assert "line 1: time 0001-10-21 09:03:31 out of range (1970 to 2200): statement row dropped" in warned
    assert "line 5: time 9999-10-21 09:03:34 out of range (1970 to 2200): statement row dropped" in warned
    assert member(report, "pg.log")["time_range"][0].startswith("2019-10-21")


# ---- linear where it was not ---------------------------------------------------------------------


def test_toml_table_left_open_is_linear():
    """``[`` then 4,000 spaces on a line: tidb-config's detector took 20 s on it."""
    text = (REPO / "fixtures" / "dbconfig" / "tikv.toml").read_text()
    at = text.index("\n", len(text) // 2) + 1
    hostile = text[:at] + "[" + " " * 4000 + "\n" + text[at:]
    started = time.perf_counter()
    analysis = analyze_capture(capture_of(("tikv.toml", hostile.encode())))
    assert time.perf_counter() - started < 2.0
    assert analysis.inputs[0].kind == "tidb-config" and analysis.inputs[0].warnings


def test_jmeter_with_thirty_thousand_distinct_labels_is_linear():
    """tail-latency-spikes judged each label against every sample: 20,000 labels took 12 s, 200,000 past 60 s."""
    header = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,bytes,Latency"
    rows = [f"{1_700_000_000_000 + i * 10},{i % 500},label-{i},200,OK,tg 1-1,text,true,100,{i % 100}" for i in range(30_000)]
    data = ("\n".join([header, *rows]) + "\n").encode()
    started = time.perf_counter()
    analysis = analyze_capture(capture_of(("results.jtl", data)))
    assert time.perf_counter() - started < 8.0
    assert analysis.inputs[0].records == 30_000
    assert next(o for o in analysis.outcomes if o.rule == "tail-latency-spikes").status == Status.SKIPPED


# ---- native panics ----------------------------------------------------------------------------------


def _panics(text: str, ctx) -> ParseResult:
    raise pl.exceptions.PanicException("index out of bounds")


def test_a_parser_panic_leaves_the_other_members_whole():
    panicking = ParserSpec("panicking", "raises polars' PanicException", lambda head, name: 1.0 if "PANIC" in head else 0.0, _panics)
    parsers = (panicking, *registry())
    analysis = analyze_capture(capture_of(("bad.log", b"PANIC\n"), ("mpstat.txt", GOOD_MPSTAT.read_bytes())), parsers=parsers)
    by_path = {record.path: record for record in analysis.inputs}
    assert by_path["bad.log"].error == "parser panicking failed: PanicException: index out of bounds"
    assert by_path["mpstat.txt"].status == "read"


def test_a_rule_panic_is_errored_and_the_others_run():
    def panic(_: RuleInput):
        raise pl.exceptions.PanicException("capacity overflow")

    rules = [Rule("panics", "panics", "test", (("t1",),), panic, ""), Rule("fine", "fine", "test", (("t1",),), lambda _: _fine(), "")]
    outcomes = run_rules(rules, RuleInput(tables={"t1": pl.DataFrame({"a": [1]})}, derived={}, metrics={}))
    assert [o.status for o in outcomes] == [Status.ERRORED, Status.PASSED]
    assert outcomes[0].error.startswith("PanicException: capacity overflow")


def _fine():
    from dbdiag.rules.base import Verdict

    return Verdict(measured="ok")
