"""The bundled demo capture: regenerates byte for byte, and every file has the real tool's layout.

Layout is checked against real files in ../shared/corpus: each check first proves its rule on the
real sample (e.g. "re-rendering every line with sysstat's widths gives the line back"), then applies
the same rule to the demo member.
"""

from __future__ import annotations

import base64
import csv
import gzip
import importlib.util
import io
import json
import re
import sys
import tarfile
import zlib
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from dbdiag.derive.histogram import histogram_quantile

REPO = Path(__file__).resolve().parent.parent


def _load_make_demo():
    spec = importlib.util.spec_from_file_location("make_demo", REPO / "fixtures" / "make_demo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_demo", module)
    spec.loader.exec_module(module)
    return module


make_demo = _load_make_demo()
FACTS = make_demo.DEMO_FACTS
NCPU = 128


def _tar_members(data: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def committed() -> bytes:
    return make_demo.ARCHIVE.read_bytes()


@pytest.fixture(scope="module")
def demo(committed) -> dict[str, str]:
    return {name: data.decode("ascii") for name, data in _tar_members(committed).items()}


@pytest.fixture(scope="module")
def real(corpus) -> dict[str, str]:
    """The real files the checks compare with (captures unpacked in memory)."""
    out = {}
    for capture in ("numa2x2-guest-iperf-debian12", "numa2-guest-iperf-debian12", "mariadb-sysbench-debian12"):
        for name, data in _tar_members((corpus / "captures" / f"{capture}.tar.gz").read_bytes()).items():
            out[f"{capture}/{name}"] = data.decode()
    for sub in ("proc", "lscpu", "numastat"):
        for path in (corpus / sub).iterdir():
            out[f"{sub}/{path.name}"] = path.read_text()
    return out


# --- 1. determinism ------------------------------------------------------------------------------


def test_regenerating_gives_the_committed_bytes(committed):
    built = make_demo.build_demo_archive()
    if built != committed:
        same_tar = gzip.decompress(built) == gzip.decompress(committed)
        if same_tar:
            pytest.skip(
                f"tar content identical, gzip stream differs: zlib {zlib.ZLIB_RUNTIME_VERSION} "
                "compresses differently from the one that wrote the committed archive"
            )
        pytest.fail("fixtures/demo/bank-core-demo.tar.gz is stale: run `python fixtures/make_demo.py`")


def test_archive_layout_is_fixed(committed):
    assert committed[:2] == b"\x1f\x8b" and committed[4:8] == b"\0\0\0\0"  # gzip mtime 0
    # 600 KB: 128 CPUs x 60 s of mpstat text+JSON, four slow logs, a perf profile (480 KB), then issue 5's
    # app side (110 KB): 15 min of TiDB histograms per instance, 15 s of JMeter rows, 61 HAProxy snapshots
    assert len(committed) < 610_000
    with tarfile.open(fileobj=io.BytesIO(committed), mode="r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    dirs = sorted({"/".join(p.split("/")[:i]) for p in FACTS["members"] for i in range(1, p.count("/") + 1)})
    assert "capture/metrics" in dirs and "capture/proxy" in dirs and "capture/app" in dirs
    assert names[: len(dirs)] == dirs and names[len(dirs) :] == sorted(FACTS["members"])
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime) == (0, 0, "root", "root", make_demo.ARCHIVE_MTIME)
        assert m.mode == (0o755 if m.isdir() else 0o644)


def test_manifest_names_the_zone(demo):
    manifest = json.loads(demo["capture/manifest.json"])
    assert manifest["tz"] == "Asia/Shanghai" and manifest["host"] == "bank-core-db03"
    assert any("mpstat -u -P ALL -I SCPU 1 60" in c for c in manifest["commands"])


# --- 2. mpstat text ---------------------------------------------------------------------------------

FIRST_LINE = re.compile(r"^Linux (\S+) \((\S+)\) \t(\d{4}-\d\d-\d\d) \t_(\w+)_\t\((\d+) CPU\)$")


def _mpstat_reformat(text: str) -> tuple[list[str], list[str]]:
    """Re-render every line with sysstat's widths; return (re-rendered lines, line kinds)."""
    lines = text.split("\n")
    assert lines[-1] == "" and lines[-2] != ""  # ends with one newline, no blank line
    out, kinds, widths = [lines[0]], ["first"], None
    for line in lines[1:-1]:
        tok = line.split()
        if not tok:
            out.append(line), kinds.append("blank")
        elif tok[1] == "CPU":
            widths = 11 if tok[2] == "HI/s" else 8
            kinds.append("softirq-header" if widths == 11 else "cpu-header")
            out.append(tok[0] + "%8s" % "CPU" + "".join(f"{t:>{widths}}" for t in tok[2:]))
        else:
            kinds.append("row")
            out.append(f"{tok[0]:<8}{tok[1]:>8}" + "".join(f"{float(t):{widths}.2f}" for t in tok[2:]))
    return out, kinds


def _bigrams(kinds: list[str]) -> set[tuple[str, str]]:
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k != "row" or kinds[i - 1] != "row"]
    return set(zip(collapsed, collapsed[1:]))


def test_mpstat_txt_has_the_real_layout(demo, real):
    real_txt = real["numa2x2-guest-iperf-debian12/capture/os/mpstat.txt"]
    demo_txt = demo["capture/os/mpstat.txt"]
    assert FIRST_LINE.match(real_txt.split("\n")[0])
    m = FIRST_LINE.match(demo_txt.split("\n")[0])
    assert m and m.groups() == (make_demo.KERNEL, "bank-core-db03", "2024-05-14", "aarch64", "128")

    real_lines, real_kinds = _mpstat_reformat(real_txt)
    assert real_lines == real_txt.split("\n")[:-1]  # the width rules reproduce the real file
    demo_lines, demo_kinds = _mpstat_reformat(demo_txt)
    assert demo_lines == demo_txt.split("\n")[:-1]
    assert _bigrams(demo_kinds) == _bigrams(real_kinds)  # same block structure

    headers = {k: {l[8:] for l, kk in zip(lines, kinds) if kk == k} for lines, kinds in
               ((real_lines, real_kinds),) for k in ("cpu-header", "softirq-header")}
    for kind in ("cpu-header", "softirq-header"):
        assert {l[8:] for l, k in zip(demo_lines, demo_kinds) if k == kind} == headers[kind]


def _mpstat_tables(text: str) -> list[dict]:
    """[{time, kind, rows: {cpu: [field strings]}}] in file order."""
    tables = []
    for block in text.split("\n\n")[1:]:
        lines = block.strip("\n").split("\n")
        head = lines[0].split()
        rows = {}
        for line in lines[1:]:
            tok = line.split()
            rows[tok[1]] = tok[2:]
        tables.append({"time": lines[1][:8], "prev": head[0], "kind": "softirq" if head[2] == "HI/s" else "cpu", "rows": rows})
    return tables


@pytest.fixture(scope="module")
def tables(demo):
    return _mpstat_tables(demo["capture/os/mpstat.txt"])


def test_mpstat_txt_numbers_are_consistent(tables):
    assert len(tables) == 2 * 61
    times = [t["time"] for t in tables if t["kind"] == "cpu"]
    assert times[0] == "10:00:01" and times[59] == "10:01:00" and times[60] == "Average:"
    for t in tables:
        cpus = [c for c in t["rows"] if c != "all"]
        assert cpus == [str(i) for i in range(NCPU)]
        if t["kind"] != "cpu":
            assert "all" not in t["rows"] and all(len(v) == 10 for v in t["rows"].values())
            continue
        for values in t["rows"].values():
            assert abs(sum(map(float, values)) - 100) <= 0.05 + 1e-9
        for j in range(10):
            mean = sum(float(t["rows"][c][j]) for c in cpus) / NCPU
            assert abs(mean - float(t["rows"]["all"][j])) <= 0.01 + 1e-9


def test_demo_facts_match_the_data(tables):
    cpu_tables = [t for t in tables if t["kind"] == "cpu"][:60]
    soft, usr, idle = 5, 0, 9

    def mean(cpu, col):
        return sum(float(t["rows"][str(cpu)][col]) for t in cpu_tables) / 60

    assert FACTS["cpus"] == NCPU and FACTS["nodes"] == 16 and FACTS["hot_node"] == 0
    assert FACTS["hot_cpus"] == list(range(8))
    for cpu in range(8):
        assert FACTS["hot_soft_pct"][cpu] == pytest.approx(mean(cpu, soft), abs=0.006)
        assert FACTS["hot_usr_pct"][cpu] == pytest.approx(mean(cpu, usr), abs=0.006)
    assert FACTS["hot_soft_pct_range"] == (38, 94)
    assert 2 <= FACTS["hot_usr_pct_range"][0] and FACTS["hot_usr_pct_range"][1] <= 40
    busy = [100 - mean(c, idle) for c in range(8, NCPU)]
    assert FACTS["other_busy_pct"] == pytest.approx(sum(busy) / len(busy), abs=0.01)
    assert 53 <= FACTS["other_busy_pct"] <= 57
    assert all(mean(c, soft) <= 1.7 for c in range(8, NCPU))


# --- mpstat JSON ------------------------------------------------------------------------------------


_JSON_STRING = re.compile(r'": "[^"]*"')
_JSON_NUMBER = re.compile(r"-?\d+\.\d+|\b\d+\b")


def _json_templates(text: str) -> set[str]:
    """Each distinct line with its string values -> S and numbers -> N (tabs, keys, commas kept)."""
    return {_JSON_NUMBER.sub("N", _JSON_STRING.sub('": S', line)) for line in set(text.split("\n"))}


def test_mpstat_json_has_the_real_layout_and_the_text_numbers(demo, real, tables):
    real_json = real["mariadb-sysbench-debian12/capture/os/mpstat.json"]
    demo_json = demo["capture/os/mpstat.json"]
    assert _json_templates(demo_json) == _json_templates(real_json)  # tabs, spacing, commas, keys

    host = json.loads(demo_json)["sysstat"]["hosts"][0]
    assert (host["nodename"], host["machine"], host["number-of-cpus"], host["date"]) == (
        "bank-core-db03", "aarch64", NCPU, "2024-05-14")
    real_names = [i["name"] for i in json.loads(real_json)["sysstat"]["hosts"][0]["statistics"][0]
                  ["soft-interrupts"][0]["intr"]]
    stats = host["statistics"]
    assert len(stats) == 60
    by_time = {(t["time"], t["kind"]): t["rows"] for t in tables}
    for s in stats:
        cpu_rows = by_time[(s["timestamp"], "cpu")]
        for row in s["cpu-load"]:
            assert [f"{row[k]:.2f}" for k in make_demo.CPU_COLS] == cpu_rows[row["cpu"]]
        soft_rows = by_time[(s["timestamp"], "softirq")]
        for row in s["soft-interrupts"]:
            assert [i["name"] for i in row["intr"]] == real_names
            assert [f"{i['value']:.2f}" for i in row["intr"]] == soft_rows[row["cpu"]]


# --- /proc/softirqs ---------------------------------------------------------------------------------


def _softirqs(text: str) -> tuple[str, dict[str, list[int]]]:
    header, *rows = text.rstrip("\n").split("\n")
    return header, {r.split(":")[0].strip(): [int(v) for v in r.split(":")[1].split()] for r in rows}


def _render_softirqs(cpus: int, rows: dict[str, list[int]]) -> str:
    """fs/proc/softirqs.c: 20 blanks, "CPU%-8d" per CPU; "%12s:" then " %10u" per CPU."""
    out = " " * 20 + "".join(f"CPU{c:<8d}" for c in range(cpus)) + "\n"
    return out + "".join(f"{k:>12}:" + "".join(f" {v:10d}" for v in vals) + "\n" for k, vals in rows.items())


def test_softirqs_have_the_kernel_layout(demo, real):
    for name in ("numa2x2-guest-iperf-debian12/capture/os/softirqs.1", "mariadb-sysbench-debian12/capture/os/softirqs.after"):
        header, rows = _softirqs(real[name])
        assert _render_softirqs(len(header.split()), rows) == real[name]
    real_labels = list(_softirqs(real["numa2x2-guest-iperf-debian12/capture/os/softirqs.1"])[1])
    jc_header = real["proc/jc__linux-proc__softirqs"].split("\n")[0]  # a real 128-CPU header
    for name in ("capture/os/softirqs.before", "capture/os/softirqs.after"):
        header, rows = _softirqs(demo[name])
        assert header == jc_header
        assert list(rows) == real_labels and all(len(v) == NCPU for v in rows.values())
        assert _render_softirqs(NCPU, rows) == demo[name]


def test_softirq_growth_matches_mpstat_average(demo, tables):
    before = _softirqs(demo["capture/os/softirqs.before"])[1]
    after = _softirqs(demo["capture/os/softirqs.after"])[1]
    average = [t for t in tables if t["kind"] == "softirq" and t["time"] == "Average:"][0]["rows"]
    for j, name in enumerate(make_demo.SOFTIRQS):
        for cpu in range(NCPU):
            delta = after[name][cpu] - before[name][cpu]
            assert delta >= 0
            assert abs(delta / 60 - float(average[str(cpu)][j])) <= 0.005 + 1e-9
    net_rx = [(after["NET_RX"][c] - before["NET_RX"][c]) / 60 for c in range(NCPU)]
    assert all(38_000 <= r <= 92_000 for r in net_rx[:8]) and max(net_rx[8:]) <= 5


# --- /proc/interrupts -------------------------------------------------------------------------------

DEVICE_SUFFIX = re.compile(r"^ +(\S+) +(\d+) (Level|Edge) +(\S.*)$")


def _device_suffix(chip: str, hwirq: int, trigger: str, name: str, prec: int = 3) -> str:
    """kernel/irq/proc.c: " %8s" chip, " %*d" hwirq, " %-8s" Level/Edge, "  %s" action name."""
    return f" {chip:>8} {hwirq:{prec}d} {trigger:<8}  {name}"


def _check_interrupt_rows(text: str, cpus: int) -> dict[str, list[int]]:
    lines = text.rstrip("\n").split("\n")
    counts = {}
    for line in lines[1:]:
        label = line[: line.index(":")]
        if label.strip() == "Err":
            assert line == f"{'Err':>3}: {int(line.split()[1]):10d}"
            continue
        body = line[len(label) + 1 :] if label.startswith("IPI") else line[len(label) + 2 :]
        values = [int(body[11 * i : 11 * i + 10]) for i in range(cpus)]
        assert "".join(f"{v:10d} " for v in values) == body[: 11 * cpus]
        suffix = body[11 * cpus :]
        if label.startswith("IPI"):
            assert re.fullmatch(r" {6}\S.*", suffix), line
        else:
            assert re.fullmatch(r" *\d+", label) and len(label) == 3
            chip, hwirq, trigger, name = DEVICE_SUFFIX.match(suffix).groups()
            assert _device_suffix(chip, int(hwirq), trigger, name) == suffix, line
        counts[label.strip()] = values
    return counts


def test_interrupts_have_the_arm64_kernel_layout(demo, real):
    sample = real["proc/node_exporter__interrupts_aarch64"]
    sample_lines = [l for l in sample.split("\n")[1:] if l.strip()]
    _check_interrupt_rows("header\n" + "\n".join(sample_lines), 8)  # rules hold on real arm64 rows
    real_ipis = [l[l.index(":") + 1 + 11 * 8 :].strip() for l in sample_lines if l.startswith("IPI")]
    x86 = real["numa2x2-guest-iperf-debian12/capture/os/interrupts.1"].split("\n")[0]
    assert x86 == " " * 11 + "".join(f"CPU{c:<8d}" for c in range(4))  # header: prec + 8 blanks
    for name in ("capture/os/interrupts.before", "capture/os/interrupts.after"):
        text = demo[name]
        assert text.split("\n")[0] == " " * 11 + "".join(f"CPU{c:<8d}" for c in range(NCPU))
        counts = _check_interrupt_rows(text, NCPU)
        ipis = [l[l.index(":") + 1 + 11 * NCPU :].strip() for l in text.split("\n") if l.startswith("IPI")]
        assert ipis == real_ipis
        assert text.endswith(f"Err: {0:10d}\n")
        assert all(len(v) == NCPU for v in counts.values())


def test_nic_queue_irqs_land_on_node0_only(demo):
    def rows(text):
        return {l.rsplit(None, 1)[-1]: l for l in text.split("\n")[1:] if l.strip() and not l.startswith(("IPI", "Err"))}

    before, after = rows(demo["capture/os/interrupts.before"]), rows(demo["capture/os/interrupts.after"])
    for q in range(8):
        name = f"hns3-0000:7d:00.0-TxRx-{q}"
        b = [int(v) for v in before[name].split()[1 : 1 + NCPU]]
        a = [int(v) for v in after[name].split()[1 : 1 + NCPU]]
        delta = [y - x for x, y in zip(b, a)]
        assert delta[q] > 1_000_000 and sum(delta) == delta[q]
        assert "ITS-MSI" in after[name] and " Edge " in after[name]


# --- lscpu, lscpu -p, numactl --hardware -----------------------------------------------------------


def _lscpu_pairs(text: str) -> list[tuple[str, int, str]]:
    """(key, column where the value starts, value) for the human part of lscpu output."""
    pairs = []
    for line in text.split("\n\n")[0].rstrip("\n").split("\n"):
        key, rest = line.split(":", 1)
        pairs.append((key, len(line) - len(rest.lstrip(" ")), rest.strip()))
    return pairs


def test_lscpu_has_the_flat_2_37_layout(demo, real):
    known = set()
    for name in ("lscpu/util-linux__lscpu-arm-A510-A710-A715-X3", "lscpu/util-linux__lscpu-x86_64-epyc_7451",
                 "numa2x2-guest-iperf-debian12/capture/os/lscpu.txt"):
        pairs = _lscpu_pairs(real[name])
        assert len({col for _, col, _ in pairs}) == 1
        assert pairs[0][1] == max(len(k) for k, _, _ in pairs) + 2  # widest key + ":" + one blank
        known |= {re.sub(r"node\d+", "nodeN", k) for k, _, _ in pairs}
    pairs = _lscpu_pairs(demo["capture/os/lscpu.txt"])
    assert len({col for _, col, _ in pairs}) == 1 and pairs[0][1] == max(len(k) for k, _, _ in pairs) + 2
    assert {re.sub(r"node\d+", "nodeN", k) for k, _, _ in pairs} <= known
    values = {k: v for k, _, v in pairs}
    assert values["Architecture"] == "aarch64" and values["CPU(s)"] == "128" and values["NUMA node(s)"] == "16"
    assert values["Model name"] == "Kunpeng-920" and values["Vendor ID"] == "HiSilicon"
    for n in range(16):
        assert values[f"NUMA node{n} CPU(s)"] == f"{8 * n}-{8 * n + 7}"


def test_lscpu_p_has_the_parsable_layout(demo, real):
    real_lines = real["numa2-guest-iperf-debian12/capture/os/lscpu-p.txt"].split("\n")
    lines = demo["capture/os/lscpu-p.txt"].rstrip("\n").split("\n")
    assert lines[:4] == real_lines[:4]
    rows = [list(map(lambda v: int(v) if v else None, line.split(","))) for line in lines[4:]]
    assert [r[0] for r in rows] == list(range(NCPU))
    assert all(len(r) == 9 and r[3] == r[0] // 8 and r[2] == r[0] // 32 and r[4] is None for r in rows)


def _render_numactl(text: str) -> str:
    """numactl --hardware re-rendered from its values with numactl's printf formats."""
    lines = text.rstrip("\n").split("\n")
    out = [lines[0]]
    nodes = [int(n) for n in re.findall(r"^node (\d+) cpus:", text, re.M)]
    for n in nodes:
        cpus = re.search(rf"^node {n} cpus:(.*)$", text, re.M).group(1).split()
        size = re.search(rf"^node {n} size: (\d+) MB$", text, re.M).group(1)
        free = re.search(rf"^node {n} free: (\d+) MB$", text, re.M).group(1)
        out += [f"node {n} cpus:" + "".join(f" {c}" for c in cpus), f"node {n} size: {size} MB", f"node {n} free: {free} MB"]
    out += ["node distances:", "node " + "".join(f"{n:3d} " for n in nodes)]
    start = lines.index("node distances:") + 2
    for n, line in zip(nodes, lines[start : start + len(nodes)]):
        out.append(f"{n:3d}: " + "".join(f"{int(d):3d} " for d in line.split(":")[1].split()))
    return "\n".join(out) + "\n"


def test_numactl_hardware_has_the_real_layout(demo, real):
    for name in ("numa2x2-guest-iperf-debian12/capture/os/numactl-hardware.txt",
                 "numa2-guest-iperf-debian12/capture/os/numactl-hardware.txt"):
        assert _render_numactl(real[name]) == real[name]
    text = demo["capture/os/numactl-hardware.txt"]
    assert _render_numactl(text) == text
    assert text.startswith("available: 16 nodes (0-15)\n")
    matrix = [[int(d) for d in line.split(":")[1].split()] for line in text.rstrip("\n").split("\n")[-16:]]
    assert all(matrix[i][i] == 10 and matrix[i][j] == matrix[j][i] for i in range(16) for j in range(16))


# --- TiDB slow logs -----------------------------------------------------------------------------

TIDB = FACTS["tidb"]
SLOW_LOGS = [f"capture/db/tidb-{ip}/tidb_slow_query.log" for ip in TIDB["instances"]]
# Field lines in the order TiDB's SlowLogFormat writes them (v6.1, sessionctx/variable/session.go);
# "EXEC" is the execdetails line, which starts with the first of its non-zero parts; Index_ids is
# v3's Index_names.
SLOW_LOG_ORDER = (
    "Time", "Txn_start_ts", "User@Host", "User", "Conn_ID", "Exec_retry_time", "Query_time", "Parse_time",
    "Compile_time", "Rewrite_time", "Optimize_time", "Wait_TS", "EXEC", "DB", "Index_names", "Index_ids",
    "Is_internal", "Digest", "Stats", "Num_cop_tasks", "Cop_proc_avg", "Cop_wait_avg", "Cop_backoff", "Mem_max", "Disk_max",
    "Prepared", "Plan_from_cache", "Plan_from_binding", "Has_more_results", "KV_total", "PD_total",
    "Backoff_total", "Write_sql_response_total", "Result_rows", "Succ", "IsExplicitTxn", "Plan", "Plan_digest",
)
# The parts of the execdetails line, in ExecDetails.String() order (util/execdetails).
EXEC_ORDER = (
    "Cop_time", "Process_time", "Wait_time", "Backoff_time", "LockKeys_time", "Request_count", "Prewrite_time",
    "Wait_prewrite_binlog_time", "Commit_time", "Get_commit_ts_time", "Commit_backoff_time", "Backoff_types",
    "Resolve_lock_time", "Local_latch_wait_time", "Write_keys", "Write_size", "Prewrite_region", "Txn_retry",
    "Process_keys", "Total_keys", "Rocksdb_delete_skipped_count", "Rocksdb_key_skipped_count",
    "Rocksdb_block_cache_hit_count", "Rocksdb_block_read_count", "Rocksdb_block_read_byte",
)
SLOW_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{0,8}[1-9])?[+-]\d\d:\d\d$")
GO_SECONDS = re.compile(r"^(0|[1-9]\d*)(\.\d*[1-9])?$")  # FormatFloat(s, 'f', -1, 64): no trailing zeros
PLAN_PAYLOAD = re.compile(r"^tidb_decode_plan\('([A-Za-z0-9+/]+={0,2})'\)$")
START_EPOCH_MS = 1_715_652_000_000  # 2024-05-14 10:00:00 +08:00
TIME_KEYS = ("Query_time", "Parse_time", "Compile_time", "Rewrite_time", "Optimize_time", "Wait_TS", "KV_total",
             "PD_total", "Backoff_total", "Write_sql_response_total")


def _slow_entries(text: str) -> list[dict]:
    """[{"keys": [line keys in order], "fields": {key: value}, "exec": [(k, v)], "sql": [...], "line": n}]."""
    entries = []
    for n, line in enumerate(text.split("\n")[:-1], 1):
        if line.startswith("# Time: "):
            entries.append({"keys": [], "fields": {}, "exec": [], "sql": [], "line": n})
        entry = entries[-1]
        if not line.startswith("# "):
            entry["sql"].append(line)
            continue
        key, value = line[2:].split(": ", 1)
        if key in EXEC_ORDER:
            entry["keys"].append("EXEC")
            entry["exec"] = re.findall(r"(\w+): (\S+)", line[2:])
        else:
            entry["keys"].append("Cop_backoff" if key.startswith("Cop_backoff_") else key)
        entry["fields"][key] = value
    return entries


def _ordered(keys: list[str], order: tuple[str, ...]) -> bool:
    return all(k in order for k in keys) and [order.index(k) for k in keys] == sorted(order.index(k) for k in keys)


def _snappy_decode(block: bytes) -> bytes:
    """A whole snappy block: uvarint length, then literals and copies (1-, 2- and 4-byte offsets)."""
    length, shift, i = 0, 0, 0
    while True:
        byte = block[i]
        i += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
    out = bytearray()
    while i < len(block):
        tag = block[i]
        i += 1
        kind = tag & 3
        if kind == 0:
            n = tag >> 2
            if n >= 60:
                width = n - 59
                n = int.from_bytes(block[i : i + width], "little")
                i += width
            out += block[i : i + n + 1]
            i += n + 1
            continue
        if kind == 1:
            n, offset = ((tag >> 2) & 7) + 4, (tag >> 5) << 8 | block[i]
            i += 1
        else:
            width = 2 if kind == 2 else 4
            n, offset = (tag >> 2) + 1, int.from_bytes(block[i : i + width], "little")
            i += width
        for _ in range(n):
            out.append(out[-offset])
    assert len(out) == length
    return bytes(out)


def _time_ns(value: str) -> int:
    """``# Time:`` (server local, +08:00) -> ns after 2024-05-14 10:00:00 local."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?\+08:00", value)
    whole = (datetime.fromisoformat(m.group(1)) - datetime(2024, 5, 14, 10, 0, 0)).total_seconds()
    return int(whole) * 10**9 + int((m.group(2) or "").ljust(9, "0"))


def _seconds_ns(value: str) -> int:
    """A Go-printed Duration.Seconds() back to whole nanoseconds."""
    return int((Decimal(value) * 10**9).to_integral_value())


def _start_ns(e: dict) -> int:
    return _time_ns(e["fields"]["Time"]) - _seconds_ns(e["fields"]["Query_time"])


def _local_ms(ns: int) -> str:
    whole = datetime(2024, 5, 14, 10, 0, 0) + timedelta(seconds=ns // 10**9)
    return f"{whole:%Y-%m-%d %H:%M:%S}.{ns % 10**9 // 10**6:03d}"


def _decoded_plan(value: str) -> str:
    return _snappy_decode(base64.b64decode(PLAN_PAYLOAD.match(value).group(1))).decode("utf-8")


@pytest.fixture(scope="module")
def slow(demo) -> dict[str, list[dict]]:
    return {ip: _slow_entries(demo[path]) for ip, path in zip(TIDB["instances"], SLOW_LOGS)}


@pytest.fixture(scope="module")
def real_slow(corpus) -> dict[str, list[dict]]:
    folder = corpus / "slowlog-tidb"
    return {name: _slow_entries((folder / name).read_text()) for name in
            ("diag__tidb_slow_query.log", "pingcap-docs__identify-slow-queries_usage-example.log", "dm__tidb-slow.log")}


def test_one_slow_log_per_tidb_instance(demo):
    assert [p for p in demo if p.startswith("capture/db/tidb-")] == SLOW_LOGS
    assert TIDB["instances"] == ["10.20.1.11", "10.20.1.12", "10.20.1.13", "10.20.1.14"]
    database = json.loads(demo["capture/manifest.json"])["database"]
    assert database["engine"] == "tidb" and database["tidb_slow_log_threshold_ms"] == 50
    assert sorted(database["files"]) == [p.removeprefix("capture/") for p in SLOW_LOGS]


def test_slow_log_field_order_is_tidbs(slow, real_slow):
    diag, docs, v3 = (real_slow[n] for n in real_slow)
    diag_keys = diag[0]["keys"]
    assert all(e["keys"] == diag_keys for e in diag) and len(diag) == 5
    for entries in (diag, docs, v3):  # the order rule holds on the real logs
        assert all(_ordered(e["keys"], SLOW_LOG_ORDER) for e in entries)
    seen = set()
    for entries in slow.values():
        for e in entries:
            assert _ordered(e["keys"], SLOW_LOG_ORDER), e["line"]
            assert len(e["keys"]) == len(set(e["keys"]))
            assert _ordered([k for k, _ in e["exec"]], EXEC_ORDER), e["line"]
            if e["fields"]["Is_internal"] == "false":
                assert set(diag_keys) <= set(e["keys"]), e["line"]  # everything the real v5 log writes
            else:
                assert "User@Host" not in e["keys"] and "DB" not in e["keys"]
            seen |= set(e["keys"])
    assert seen >= set(diag_keys) | {"EXEC", "DB", "Index_names", "Stats", "Cop_proc_avg", "Mem_max", "Result_rows"}


def test_slow_log_values_have_go_formats(slow, real_slow):
    for e in real_slow["diag__tidb_slow_query.log"]:  # the value rules hold on the real log
        assert SLOW_TIME.match(e["fields"]["Time"])
        assert all(GO_SECONDS.match(e["fields"][k]) for k in TIME_KEYS if k in e["fields"])
        assert PLAN_PAYLOAD.match(e["fields"]["Plan"])
    for ip, entries in slow.items():
        ends = [_time_ns(e["fields"]["Time"]) for e in entries]
        assert ends == sorted(ends) and len(set(ends)) == len(ends), ip  # strictly increasing
        assert 0 <= ends[0] and ends[-1] < 60 * 10**9  # inside 10:00:00-10:01:00
        seen_conns: set[str | None] = set()
        for e in entries:
            f = e["fields"]
            assert SLOW_TIME.match(f["Time"]) and f["Time"].endswith("+08:00"), e["line"]
            assert all(GO_SECONDS.match(f[k]) for k in TIME_KEYS), e["line"]
            assert re.fullmatch(r"[0-9a-f]{64}", f["Digest"]) and re.fullmatch(r"\d+", f["Txn_start_ts"])
            assert all(f[k] in ("true", "false") for k in ("Is_internal", "Prepared", "Plan_from_cache", "Succ"))
            if "User@Host" in f:
                assert re.fullmatch(r"app\[app\] @ (10\.20\.1\.\d+) \[\1\]", f["User@Host"])
                assert f["DB"] == "bank" and re.fullmatch(r"[1-9]\d*", f["Conn_ID"])
            if "Plan" in f:
                assert PLAN_PAYLOAD.match(f["Plan"]) and re.fullmatch(r"[0-9a-f]{64}", f["Plan_digest"])
            assert e["sql"][-1].endswith(";") and e["sql"][0] in ("use bank;", *e["sql"][-1:])
            if e["sql"][0] == "use bank;":  # written once, with a connection's first slow entry
                assert f["Conn_ID"] not in seen_conns, e["line"]
            seen_conns.add(f.get("Conn_ID"))
            # Txn_start_ts is a TSO: physical ms << 18 | logical, taken when the statement started
            started_ms = START_EPOCH_MS + _start_ns(e) / 1e6
            assert abs((int(f["Txn_start_ts"]) >> 18) - started_ms) < 5, e["line"]


def test_slow_log_plans_decode_to_the_plans_meant(slow, real_slow):
    for name in ("diag__tidb_slow_query.log", "pingcap-docs__identify-slow-queries_usage-example.log"):
        for e in real_slow[name]:  # the decoder reads TiDB's own compressed plans (with copies)
            rows = [r.split("\t") for r in _decoded_plan(e["fields"]["Plan"]).rstrip("\n").split("\n")]
            assert all(r[0].isdigit() and re.fullmatch(r"\d+_\d+", r[1]) for r in rows)
    meant = {ip: [x for x in make_demo.simulate_tidb() if x.instance == ip] for ip in slow}
    codes = set(map(str, make_demo.PLAN_TYPE_CODE.values()))
    for ip, entries in slow.items():
        assert len(entries) == len(meant[ip])
        for e, x in zip(entries, meant[ip]):
            if "Plan" not in e["fields"]:
                assert x.plan_rows is None and x.kind == "analyze"
                continue
            text = _decoded_plan(e["fields"]["Plan"])
            assert text == "".join("\t".join(row) + "\n" for row in x.plan_rows)
            for row in (r.split("\t") for r in text.rstrip("\n").split("\n")):
                assert len(row) == 9 and row[0].isdigit() and row[2] in ("0", "1_0") and row[8] == "N/A"
                assert re.fullmatch(r"(\d+)_\d+(\((Build|Probe)\))?", row[1]).group(1) in codes
                assert re.fullmatch(r"\d+(\.\d\d)?", row[3]) and row[5].isdigit()


def _by_digest(slow) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for entries in slow.values():
        for e in entries:
            out.setdefault(e["fields"]["Digest"], []).append(e)
    return out


def test_slow_log_counts_match_the_facts(slow):
    by_digest = _by_digest(slow)
    assert sum(len(v) for v in slow.values()) == TIDB["entries"]
    assert {ip: len(v) for ip, v in slow.items()} == TIDB["entries_per_instance"]
    for kind, fp in TIDB["fingerprints"].items():
        runs = by_digest[fp["digest"]]
        assert len(runs) == fp["calls"], kind
        assert sum(e["fields"]["Plan_from_cache"] == "true" for e in runs) == fp["from_cache"]
        for plan in fp["plans"].values():
            assert sum(e["fields"].get("Plan_digest") == plan["plan_digest"] for e in runs) == plan["calls"]
    user = [e for v in slow.values() for e in v if e["fields"]["Is_internal"] == "false"]
    prepared = [e for e in user if e["fields"]["Prepared"] == "true"]
    cached = [e for e in prepared if e["fields"]["Plan_from_cache"] == "true"]
    assert len(prepared) == len(user) == TIDB["plan_cache"]["prepared"] and len(cached) == TIDB["plan_cache"]["from_cache"]
    assert len(cached) * 11 == len(prepared) * 8 and TIDB["plan_cache"]["hit_rate_pct"] == 72.7
    internal = [e for v in slow.values() for e in v if e["fields"]["Is_internal"] == "true"]
    assert len(internal) == TIDB["internal_entries"] == 6


def _median(values: list[float]) -> float:
    values = sorted(values)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def test_the_plan_flip_is_in_the_logs(slow):
    flip = TIDB["plan_flip"]
    runs = _by_digest(slow)[flip["digest"]]
    fast = [e for e in runs if e["fields"]["Plan_digest"] == flip["fast_plan"]["plan_digest"]]
    slow_runs = [e for e in runs if e["fields"]["Plan_digest"] == flip["slow_plan"]["plan_digest"]]
    assert len(fast) + len(slow_runs) == len(runs) and fast and slow_runs
    assert {e["fields"]["Index_names"] for e in fast} == {"[mq_producer_msg:idx_flow_id]"}
    assert {e["fields"]["Index_names"] for e in slow_runs} == {"[mq_producer_msg:idx_status]"}
    fast_ms = _median([float(e["fields"]["Query_time"]) * 1000 for e in fast])
    slow_s = _median([float(e["fields"]["Query_time"]) for e in slow_runs])
    assert fast_ms == pytest.approx(flip["fast_plan"]["median_ms"], abs=0.001) and 60 <= fast_ms <= 64
    assert slow_s == pytest.approx(flip["slow_plan"]["median_s"], abs=0.001) and 36 <= slow_s <= 40
    # real statistics, not pseudo: yesterday's version before, the analyze's version after
    assert {e["fields"]["Stats"] for e in fast} == {f"mq_producer_msg:{flip['fast_plan']['stats_version']}"}
    assert {e["fields"]["Stats"] for e in slow_runs} == {f"mq_producer_msg:{flip['slow_plan']['stats_version']}"}
    analyze = [e for v in slow.values() for e in v if e["sql"][-1].startswith("analyze table")]
    assert len(analyze) == 1 and analyze[0]["fields"]["Is_internal"] == "true"
    analyze_end_ns = _time_ns(analyze[0]["fields"]["Time"])
    assert _local_ms(analyze_end_ns) == flip["analyze_end_local"] == "2024-05-14 10:00:05.187"
    new_version_ns = ((flip["slow_plan"]["stats_version"] >> 18) - START_EPOCH_MS) * 10**6
    assert 0 < analyze_end_ns - new_version_ns < 10**9  # the new statistics are the analyze's
    for row_of in (slow_runs, fast):
        assert all(e["fields"]["Prepared"] == "true" and e["fields"]["Plan_from_cache"] == "false" for e in row_of)
    for e in slow_runs:  # estimated 0 rows for status = 1, read 2.1M
        scan = _decoded_plan(e["fields"]["Plan"]).split("\n")[1].split("\t")
        assert "index:idx_status(status), range:[1,1]" in scan[4] and scan[3] == "0" and int(scan[5]) > 2_000_000
    for e in fast:
        scan = _decoded_plan(e["fields"]["Plan"]).split("\n")[1].split("\t")
        assert "index:idx_flow_id(flow_id)" in scan[4] and int(scan[5]) < 2000
    for ip, entries in slow.items():  # every instance flips, after the analyze, and never goes back
        mine = [e for e in entries if e in slow_runs]
        assert mine, ip
        first_slow = min(_start_ns(e) for e in mine)
        assert _local_ms(first_slow) == flip["flip_local"][ip]
        assert all(_start_ns(e) < first_slow for e in entries if e in fast)
        assert analyze_end_ns < first_slow < 9 * 10**9
    assert flip["instances_with_slow_plan"] == TIDB["instances"]


def test_full_scans_read_millions_for_a_few_rows(slow):
    by_digest = _by_digest(slow)
    for kind, table, rows in (("txn_scan", "acct_txn_log", 8_000_000), ("cust_or", "cust_info", 3_000_000)):
        runs = by_digest[TIDB["fingerprints"][kind]["digest"]]
        assert runs and all("Index_names" not in e["fields"] for e in runs)
        for e in runs:
            exec_parts = dict(e["exec"])
            assert int(exec_parts["Total_keys"]) >= int(exec_parts["Process_keys"]) >= rows
            assert int(e["fields"]["Result_rows"]) <= 12
            plan = [r.split("\t") for r in _decoded_plan(e["fields"]["Plan"]).rstrip("\n").split("\n")]
            assert plan[-1][1].startswith("43_") and plan[-1][4] == f"table:{table}, keep order:false"
            assert int(plan[-1][5]) >= rows
        if kind == "cust_or":
            assert all(_decoded_plan(e["fields"]["Plan"]).split("\n")[1].split("\t")[4].startswith("or(eq(") for e in runs)
    assert TIDB["full_scan"]["calls"] == len(by_digest[TIDB["fingerprints"]["txn_scan"]["digest"]])


def test_go_formatting_matches_tidbs_examples(real_slow):
    # execdetails.FormatDuration's own doc examples
    assert [make_demo._dur(ns) for ns in (9_412_345, 10_412_345, 5_999_000_000, 100_450)] == \
        ["9.41ms", "10.4ms", "6s", "100.5µs"]
    assert make_demo._go_duration(62_500_000_000) == "1m2.5s" and make_demo._bytes(1016) == "1016 Bytes"
    for e in real_slow["diag__tidb_slow_query.log"]:  # Duration.Seconds() printed back as TiDB did
        for key in TIME_KEYS:
            assert make_demo._go_seconds(_seconds_ns(e["fields"][key])) == e["fields"][key]
    block = make_demo.snappy_literal_block(b"x" * 70_000)
    assert _snappy_decode(block) == b"x" * 70_000


# --- 9. the app side (issue 5): metrics, HAProxy, JMeter, the TiKV OOM ----------------------------

APP = FACTS["app"]
SHANGHAI = timezone(timedelta(hours=8))
METRIC_FILES = [f"capture/metrics/{name}.json" for name in make_demo.app.METRIC_QUERIES]
JTL = "capture/app/jmeter-results.jtl"
HAPROXY = "capture/proxy/haproxy-stat.txt"
DMESG = "capture/os/tikv-10.20.1.22-dmesg.txt"
TIKV_LOG = "capture/db/tikv-10.20.1.22/tikv.log"
# TiDB's prometheus.ExponentialBuckets(0.0005, 2, 29), as Go prints them (shortest repr, as Python's)
TIDB_LE = [repr(0.0005 * 2**i) for i in range(29)] + ["+Inf"]
RANGE_START, RANGE_END = 1_715_651_700, 1_715_652_600  # 09:55:00 and 10:10:00 Asia/Shanghai


def _local(epoch_s: float) -> datetime:
    return datetime.fromtimestamp(epoch_s, SHANGHAI).replace(tzinfo=None)


def _csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_app_members_are_in_the_archive(demo):
    for path in (*METRIC_FILES, JTL, HAPROXY, DMESG, TIKV_LOG):
        assert path in demo and path in FACTS["members"], path
    commands = json.loads(demo["capture/manifest.json"])["commands"]
    assert any("query_range?query=sum by (instance, in_txn, le)" in c for c in commands)
    assert any(c.endswith("> proxy/haproxy-stat.txt") and "show stat" in c for c in commands)


# JMeter CSV value formats, proven on JMeter's own test file first.
JTL_FORMATS = {
    "timeStamp": r"\d{13}", "elapsed": r"\d+", "responseCode": r"\d{3}", "threadName": r".+ \d+-\d+",
    "success": r"true|false", "bytes": r"\d+", "sentBytes": r"\d+", "grpThreads": r"\d+", "allThreads": r"\d+",
}


def test_jtl_has_jmeters_columns_and_formats(demo, corpus):
    real = _csv_rows((corpus / "jmeter" / "jmeter__HTMLReportTestFile.csv").read_text())
    real_header, mine = real[0], _csv_rows(demo[JTL])
    header = mine[0]
    # a column subset (jmeter.save.saveservice.* switches) keeps JMeter's column order
    assert set(header) <= set(real_header) and [c for c in real_header if c in header] == header
    for rows, columns in ((real[1:], real_header), (mine[1:], header)):
        for row in rows:
            assert len(row) == len(columns)
            for name, value in zip(columns, row):
                if name in JTL_FORMATS:
                    assert re.fullmatch(JTL_FORMATS[name], value), (name, value)
    rows = [dict(zip(header, row)) for row in mine[1:]]
    assert {r["label"] for r in rows} == {"transfer"} and {r["success"] for r in rows} == {"true"}
    assert {r["threadName"] for r in rows} == {f"Transfer 1-{n}" for n in range(1, 301)}
    assert {(r["grpThreads"], r["allThreads"]) for r in rows} == {("300", "300")}
    ends = [int(r["timeStamp"]) + int(r["elapsed"]) for r in rows]
    assert ends == sorted(ends)  # JMeter writes a row when its sample ends
    assert 1_715_652_015_000 <= ends[0] and ends[-1] < 1_715_652_030_000  # written 10:00:15-10:00:30
    assert min(int(r["timeStamp"]) for r in rows) < 1_715_652_015_000  # so the first ones started earlier
    by_thread: dict[str, list[tuple[int, int]]] = {}
    for r in rows:
        by_thread.setdefault(r["threadName"], []).append((int(r["timeStamp"]), int(r["elapsed"])))
    for samples in by_thread.values():  # one loop per thread, no timer: the next starts 0-2 ms after
        samples.sort()
        assert all(0 <= b[0] - (a[0] + a[1]) <= 2 for a, b in zip(samples, samples[1:]))
    jmeter = APP["jmeter"]
    assert len(rows) == jmeter["samples"] and jmeter["tps"] == pytest.approx(len(rows) / 15, abs=0.1)
    assert sum(int(r["elapsed"]) for r in rows) / 1000 == pytest.approx(jmeter["user_response_time_s"])
    assert 280 <= jmeter["tps"] <= 320 and 950 <= jmeter["elapsed_mean_ms"] <= 1050


TS_LINE = re.compile(r"TS (\d+)\.(\d{9}) (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _haproxy_snapshots(text: str, zone: timezone) -> list[tuple[datetime, list[str], list[dict[str, str]]]]:
    """[(local time, header, rows)] of a pt-stalk-style show stat file; checks the layout rules on the way."""
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line]
        if not lines:
            continue
        stamp = TS_LINE.fullmatch(lines[0])
        assert stamp, lines[0]
        # the date printed is the epoch in the machine's zone
        assert datetime.fromtimestamp(int(stamp.group(1)), zone).strftime("%Y-%m-%d %H:%M:%S") == stamp.group(3)
        assert lines[1].startswith("# pxname,svname,") and lines[1].endswith(",")
        header = lines[1][2:].split(",")
        rows = []
        for line in lines[2:]:
            assert line.count(",") == lines[1].count(","), line[:40]  # every row ends with a comma, as the header
            rows.append(dict(zip(header, line.split(","))))
        out.append((datetime.strptime(stamp.group(3), "%Y-%m-%d %H:%M:%S"), header, rows))
    return out


def test_haproxy_stat_has_the_real_2_6_layout(demo):
    real = _haproxy_snapshots((REPO / "fixtures/dashboards/haproxy-2.6__show_stat_ts.csv").read_text(), timezone.utc)
    snapshots = _haproxy_snapshots(demo[HAPROXY], SHANGHAI)
    assert len(real) == 4 and len(snapshots) == 61
    assert {tuple(h) for _, h, _ in snapshots} == {tuple(real[0][1])}  # HAProxy 2.6's column set
    for _, _, rows in real + snapshots:  # type follows svname in both
        for row in rows:
            expected = {"FRONTEND": "0", "BACKEND": "1"}.get(row["svname"], "3" if row["svname"].startswith("lst") else "2")
            assert row["type"] == expected
    assert [t for t, _, _ in snapshots] == [_local(RANGE_START + 15 * k) for k in range(61)]
    for when, _, rows in snapshots:
        by = {(r["pxname"], r["svname"]): r for r in rows}
        front, back = by[("tidb_front", "FRONTEND")], by[("tidb_back", "BACKEND")]
        servers = [r for r in rows if r["type"] == "2"]
        assert front["mode"] == "tcp" and front["hrsp_2xx"] == "" and len(servers) == 4
        assert int(back["scur"]) == sum(int(s["scur"]) for s in servers)
        if when < datetime(2024, 5, 14, 10, 4):  # flat at maxconn 2000, the rest queued in the backend
            assert (front["scur"], front["slim"]) == ("2000", "2000")
            assert {s["scur"] for s in servers} == {"480"} and {s["slim"] for s in servers} == {"480"}
            assert 0 < int(back["qcur"]) and int(back["scur"]) + int(back["qcur"]) <= 2000
        else:  # reloaded with maxconn 4000: more sessions, no queue
            assert front["slim"] == "4000" and back["qcur"] == "0" and int(front["scur"]) < 4000
    haproxy = APP["haproxy"]
    assert haproxy["plateau_local"] == ("09:55:00", "10:03:45") and haproxy["plateau_snapshots"] == 36
    assert 2500 <= haproxy["scur_after_max"] <= 2700
    stot = [int(next(r for r in rows if r["svname"] == "FRONTEND")["stot"]) for _, _, rows in snapshots]
    reload_at = [k for k in range(1, 61) if stot[k] < stot[k - 1]]
    assert reload_at == [36]  # the reload starts a new process: counters from 0 at 10:04:00


SYSLOG_PREFIX = re.compile(r"\w{3} [ \d]\d \d\d:\d\d:\d\d \S+ kernel: ")
DMESG_ISO_PREFIX = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d),(\d{6})([+-]\d\d:\d\d) ")
KILLED = re.compile(
    r"(?:Memory cgroup out|Out) of memory: Killed process (\d+) \(([^)]+)\) total-vm:(\d+)kB, anon-rss:(\d+)kB, "
    r"file-rss:(\d+)kB, shmem-rss:(\d+)kB, UID:(\d+) pgtables:(\d+)kB oom_score_adj:(-?\d+)"
)
TASK_ROW = re.compile(r"\[ *(\d+)\] +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(\d+) +(-?\d+) (\S+)")


def _dump_task(pid: int, uid: int, tgid: int, vm: int, rss: int, pgt: int, swap: int, adj: int, name: str) -> str:
    """A task row as the kernel prints it (mm/oom_kill.c dump_task, 4.x-5.x)."""
    return f"[{pid:7d}] {uid:5d} {tgid:5d} {vm:8d} {rss:8d} {pgt:8d} {swap:8d}         {adj:5d} {name}"


def _task_header(messages: list[str]) -> int:
    return next(i for i, m in enumerate(messages) if m.startswith("[  pid  ]"))


def _oom_messages(text: str, prefix: re.Pattern) -> list[str]:
    out = []
    for line in text.split("\n"):
        if line:
            match = prefix.match(line)
            assert match, line[:60]
            out.append(line[match.end():])
    return out


def test_oom_report_has_the_kernel_layout(demo, corpus):
    real = _oom_messages((corpus / "oom" / "out-of-memory__messages.1").read_text(), SYSLOG_PREFIX)
    iso = _oom_messages((REPO / "fixtures/events/dmesg-iso-cgroup-oom-segfault.txt").read_text(), DMESG_ISO_PREFIX)
    mine = _oom_messages(demo[DMESG], DMESG_ISO_PREFIX)
    for messages in (real, iso, mine):
        killed = [KILLED.fullmatch(m) for m in messages if "Killed process" in m]
        assert len(killed) == 1 and killed[0], messages
        header = _task_header(messages)
        tasks = {}
        for m in messages[header + 1:]:
            row = TASK_ROW.fullmatch(m)
            if not row:
                break
            values = [int(v) for v in row.groups()[:8]]
            if "rss_anon" not in messages[header]:  # the 4.x-5.x layout (6.x added rss_anon/file/shmem)
                assert _dump_task(*values, row.group(9)) == m
                tasks[values[0]] = values
        kill = killed[0]
        constraint = next(m for m in messages if m.startswith("oom-kill:"))
        keys = [part.split("=")[0] for part in constraint.removeprefix("oom-kill:").split(",") if not part.startswith("(")]
        if messages is not iso:  # a global OOM (the fixture is a cgroup one)
            assert keys == ["constraint", "nodemask", "cpuset", "mems_allowed", "global_oom", "task_memcg", "task", "pid", "uid"]
            victim = tasks[int(kill.group(1))]
            # the Killed line is the victim's task row in kB: pages x 4
            assert int(kill.group(3)) == victim[3] * 4 and int(kill.group(4)) + int(kill.group(5)) == victim[4] * 4
            assert int(kill.group(8)) == victim[5] // 1024
    assert real[0].endswith("invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0, oom_score_adj=0")
    assert mine[0].startswith("tikv-server invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE)")
    assert mine[_task_header(mine)] == real[_task_header(real)]  # the 4.x-5.x task table header
    stamps = [DMESG_ISO_PREFIX.match(line) for line in demo[DMESG].split("\n") if line]
    times = [datetime.fromisoformat(f"{m.group(1)}.{m.group(2)}{m.group(3)}") for m in stamps]
    assert times == sorted(times) and {m.group(3) for m in stamps} == {"+08:00"}
    killed_at = next(t for t, line in zip(times, demo[DMESG].split("\n")) if "Killed process 28411 (tikv-server)" in line)
    assert f"{killed_at:%Y-%m-%d %H:%M:%S}.{killed_at.microsecond // 1000:03d}" == APP["oom"]["killed_local"]


UNIFIED_LOG = re.compile(r'\[(\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}) \+08:00\] \[(INFO|WARN|ERROR|FATAL)\] \[[\w.]+:\d+\] \["[^"]*"\]((?: \[\w+=(?:"[^"]*"|[^\]\s]+)\])*)')


def test_tikv_log_restarts_after_the_oom_kill(demo):
    lines = demo[TIKV_LOG].rstrip("\n").split("\n")
    times = []
    for line in lines:
        match = UNIFIED_LOG.fullmatch(line)
        assert match, line
        times.append(datetime.strptime(match.group(1), "%Y/%m/%d %H:%M:%S.%f"))
    assert times == sorted(times)
    welcome = next(i for i, line in enumerate(lines) if '["Welcome to TiKV"]' in line)
    killed = datetime.strptime(APP["oom"]["killed_local"], "%Y-%m-%d %H:%M:%S.%f")
    assert times[welcome - 1] < killed < times[welcome]  # nothing logged between the kill and the restart
    assert f"{times[welcome]:%Y-%m-%d %H:%M:%S.%f}"[:-3] == APP["oom"]["restart_local"]
    banner = [json.loads(line.split("] [", 3)[3].split("]", 1)[0]) for line in lines[welcome + 1:welcome + 9]]
    assert [b.split(":")[0] for b in banner] == ["Release Version", "Edition", "Git Commit Hash", "Git Commit Branch",
                                                  "UTC Build Time", "Rust Version", "Enable Features", "Profile"]
    assert banner[0] == "Release Version:   6.1.7" and '["TiKV is ready to serve"]' in lines[-1]


def _matrix(text: str) -> list[dict]:
    document = json.loads(text)
    assert document["status"] == "success" and document["data"]["resultType"] == "matrix"
    for series in document["data"]["result"]:
        assert isinstance(series["metric"], dict) and all(isinstance(v, str) for v in series["metric"].values())
        for pair in series["values"]:  # [unix seconds, "value as a string"]
            assert len(pair) == 2 and isinstance(pair[0], (int, float)) and isinstance(pair[1], str)
            float(pair[1])
    return document["data"]["result"]


def test_metrics_are_query_range_matrices(demo, corpus):
    for name in ("grafana__range_simple.result.json", "grafana__range_missing.result.json"):
        _matrix((corpus / "prometheus" / name).read_text())  # the shape rules hold on real responses
    grid = list(range(RANGE_START, RANGE_END + 1, 15))
    instances = [f"{ip}:10080" for ip in FACTS["tidb"]["instances"]]
    results = {path: _matrix(demo[path]) for path in METRIC_FILES}
    for path, result in results.items():
        assert demo[path].count("\n") == 1 and ": " not in demo[path]  # compact, as Prometheus writes it
        for series in result:
            assert [pair[0] for pair in series["values"]] == grid and "__name__" not in series["metric"]
            values = [float(v) for _, v in series["values"]]
            if not path.endswith("tidb_server_connections.json"):  # counters: no reset in the range
                assert values == sorted(values), (path, series["metric"])
    buckets = results["capture/metrics/tidb_server_handle_query_duration_seconds_bucket.json"]
    idle = results["capture/metrics/tidb_server_conn_idle_duration_seconds_bucket.json"]
    for result, split in ((buckets, ()), (idle, ("in_txn",))):
        groups: dict[tuple, list[dict]] = {}
        for series in result:
            key = (series["metric"]["instance"], *(series["metric"][s] for s in split))
            groups.setdefault(key, []).append(series)
        assert {k[0] for k in groups} == set(instances) and len(groups) == 4 * (2 if split else 1)
        for group in groups.values():
            assert [s["metric"]["le"] for s in group] == TIDB_LE
            for k in range(len(grid)):  # cumulative: every bucket holds the ones below it
                column = [int(s["values"][k][1]) for s in group]
                assert column == sorted(column)
    counts = {s["metric"]["instance"]: s["values"] for s in results["capture/metrics/tidb_server_handle_query_duration_seconds_count.json"]}
    for series in buckets:
        if series["metric"]["le"] == "+Inf":
            assert series["values"] == counts[series["metric"]["instance"]]


def _increase(result: list[dict], first: int, last: int, **labels: str) -> dict[str, float]:
    """Per le: the increase from step ``first`` to step ``last``, summed over the matching series."""
    out: dict[str, float] = {}
    for series in result:
        if all(series["metric"].get(k) == v for k, v in labels.items()):
            le = series["metric"].get("le", "")
            out[le] = out.get(le, 0.0) + float(series["values"][last][1]) - float(series["values"][first][1])
    return out


def _quantile_ms(increase: dict[str, float], q: float) -> float:
    return 1000 * histogram_quantile([(float(le.replace("+Inf", "inf")), n) for le, n in increase.items()], q)


def test_app_facts_match_the_files(demo):
    rows = _csv_rows(demo[JTL])[1:]
    starts = [int(r[0]) / 1000 for r in rows]
    user_s = sum(int(r[1]) for r in rows) / 1000
    span = (min(starts), max(s + int(r[1]) / 1000 for s, r in zip(starts, rows)))
    # DB time as time_accounting compares it: counter increases whose scrape step starts in the samples' span
    db_sum = _matrix(demo["capture/metrics/tidb_server_handle_query_duration_seconds_sum.json"])
    grid = [t for t, _ in db_sum[0]["values"]]
    steps = [k for k in range(len(grid) - 1) if span[0] <= grid[k] < span[1]]
    assert [_local(grid[k]).strftime("%H:%M:%S") for k in steps] == ["10:00:15"]
    db_s = sum(float(s["values"][k + 1][1]) - float(s["values"][k][1]) for s in db_sum for k in steps)
    ratio = db_s / user_s
    assert ratio == pytest.approx(APP["time_accounting"]["db_time_ratio"], abs=1e-4) and 0.12 <= ratio <= 0.14
    accounting = APP["time_accounting"]
    assert 28_000 <= accounting["db_qps"] <= 31_000 and 1.25 <= accounting["db_avg_latency_ms"] <= 1.40
    idle = _matrix(demo["capture/metrics/tidb_server_conn_idle_duration_seconds_bucket.json"])
    sql = _matrix(demo["capture/metrics/tidb_server_handle_query_duration_seconds_bucket.json"])
    last = len(grid) - 1
    in_txn_p80 = _quantile_ms(_increase(idle, 0, last, in_txn="1"), 0.8)
    sql_p80 = _quantile_ms(_increase(sql, 0, last), 0.8)
    assert in_txn_p80 == pytest.approx(APP["idle_in_txn_p80_ms"], abs=1e-3) and 24.5 <= in_txn_p80 <= 25.5
    assert sql_p80 == pytest.approx(APP["sql_p80_ms"], abs=1e-3) and 3.80 <= sql_p80 <= 3.88
    # the p9999 spike: the step holding the OOM kill against the step 30 s before it
    kill = datetime.strptime(APP["oom"]["killed_local"], "%Y-%m-%d %H:%M:%S.%f")
    k = next(i for i in range(last) if _local(grid[i]) <= kill < _local(grid[i + 1]))
    spike, before = (_quantile_ms(_increase(sql, i, i + 1), 0.9999) for i in (k, k - 2))
    assert spike == pytest.approx(APP["oom"]["p9999_ms_step_of_kill"], abs=1e-3) and spike > 2000 > 200 > before
    # the flipped plan's 38 s executions show in the histogram only from the step of their first end
    flip_end = datetime.strptime(FACTS["tidb"]["plan_flip"]["first_slow_end_local"], "%Y-%m-%d %H:%M:%S.%f")
    first_flip_step = next(i for i in range(last) if _local(grid[i]) <= flip_end < _local(grid[i + 1]))
    over_32s = [_increase(sql, i, i + 1)["65.536"] - _increase(sql, i, i + 1)["32.768"] for i in range(last)]
    assert not any(over_32s[:first_flip_step]) and all(over_32s[first_flip_step + 1:])
