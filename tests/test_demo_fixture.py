"""The bundled demo capture: regenerates byte for byte, and every file has the real tool's layout.

Layout is checked against real files in ../shared/corpus: each check first proves its rule on the
real sample (e.g. "re-rendering every line with sysstat's widths gives the line back"), then applies
the same rule to the demo member.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import json
import re
import sys
import tarfile
import zlib
from pathlib import Path

import pytest

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
    assert len(committed) < 300_000
    with tarfile.open(fileobj=io.BytesIO(committed), mode="r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names[:2] == ["capture", "capture/os"] and names[2:] == sorted(FACTS["members"])
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
