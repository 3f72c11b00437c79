"""The demo's good twin (``fixtures/make_demo.py``, ``TWIN``) and ``dbdiag demo --compare``: the twin
regenerates byte for byte, carries every planted difference in the files a collector writes, and the
compare verdict names each of them, ranked, linked to its effect, with the slow side's remediation."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile

import jsonschema
import pytest

from tests.conftest import REPO
from tests.test_demo_fixture import _load_make_demo

make_demo = _load_make_demo()
TWIN_ARCHIVE = make_demo.ARCHIVE.parent / make_demo.TWIN.archive


def _members(data: bytes) -> dict[str, str]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        return {m.name: tar.extractfile(m).read().decode("ascii") for m in tar.getmembers() if m.isfile()}


@pytest.fixture(scope="module")
def twin() -> dict[str, str]:
    return _members(TWIN_ARCHIVE.read_bytes())


@pytest.fixture(scope="module")
def slow() -> dict[str, str]:
    return _members(make_demo.ARCHIVE.read_bytes())


@pytest.fixture(scope="module")
def compared(tmp_path_factory) -> dict:
    """``dbdiag demo --compare -f json`` as a user runs it, from an empty folder."""
    folder = tmp_path_factory.mktemp("demo-compare")
    run = subprocess.run([sys.executable, "-m", "dbdiag", "demo", "--compare", "-f", "json"], cwd=folder,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [p.name for p in folder.iterdir()] == ["dbdiag-demo-compare.json"]
    assert "most likely because of" in run.stderr
    document = json.loads((folder / "dbdiag-demo-compare.json").read_text(encoding="utf-8"))
    jsonschema.validate(document, json.loads((REPO / "analyzer/schema/compare.schema.json").read_text(encoding="utf-8")))
    return document


def test_regenerating_the_twin_gives_the_committed_bytes():
    assert make_demo.build_demo_archive(make_demo.TWIN) == TWIN_ARCHIVE.read_bytes()


def test_the_twin_differs_in_the_planted_settings_only(twin, slow):
    assert twin["capture/os/sysctl.txt"] == slow["capture/os/sysctl.txt"].replace("kernel.numa_balancing = 1", "kernel.numa_balancing = 0")
    assert twin["capture/os/thp_enabled.txt"] == "always madvise [never]\n"
    assert slow["capture/os/thp_enabled.txt"] == "[always] madvise never\n"
    cmdline = twin["capture/os/cmdline.txt"]
    assert "isolcpus=managed_irq,domain,0,16,32,48,64,80,96,112 nohz_full=0,16,32,48,64,80,96,112" in cmdline
    assert "isolcpus" not in slow["capture/os/cmdline.txt"]
    for name in ("pd-server", "haproxy"):
        assert "Cpus_allowed_list:\t0-7\nMems_allowed_list:\t0\n" in twin[f"capture/os/{name}-status.txt"]
        assert "Cpus_allowed_list:\t0-127\nMems_allowed_list:\t0-15\n" in slow[f"capture/os/{name}-status.txt"]
    assert "Cpus_allowed_list:\t8-127\nMems_allowed_list:\t1-15\n" in twin["capture/os/tidb-server-status.txt"]
    assert "/sys/block/nvme0n1/queue/scheduler:[none] mq-deadline kyber bfq\n" in twin["capture/os/block-queue.txt"]
    assert "/sys/block/nvme0n1/queue/scheduler:[mq-deadline] kyber bfq none\n" in slow["capture/os/block-queue.txt"]
    # a pool of 128 sessions per TiDB against 480: HAProxy's server maxconn, every server at it
    def server_limits(text: str) -> set[tuple[str, str]]:
        rows = [line.split(",") for line in text.splitlines() if line.startswith("tidb_back,tidb-")]
        return {(row[4], row[6]) for row in rows}  # (scur, slim)

    assert server_limits(twin["capture/proxy/haproxy-stat.txt"]) == {("128", "128")}
    assert ("480", "480") in server_limits(slow["capture/proxy/haproxy-stat.txt"])
    # the same statements: the SQL side is no difference
    for name in slow:
        if name.startswith("capture/db/tidb-"):
            assert twin[name] == slow[name], name


def test_the_twins_nic_queues_land_one_per_node_pair(twin):
    lines = [line for line in twin["capture/os/interrupts.after"].splitlines() if "hns3-0000:7d:00.0-TxRx" in line]
    before = {line.split(":")[0].strip(): line for line in twin["capture/os/interrupts.before"].splitlines()}
    assert len(lines) == 8
    for queue, line in enumerate(lines):
        irq = line.split(":")[0].strip()
        after_counts = [int(v) for v in line.split(":", 1)[1].split()[:128]]
        before_counts = [int(v) for v in before[irq].split(":", 1)[1].split()[:128]]
        grew = [cpu for cpu in range(128) if after_counts[cpu] > before_counts[cpu]]
        assert grew == [16 * queue], (irq, grew)


def test_the_twin_has_no_numa_balancing_or_huge_page_activity(twin, slow):
    def counters(text: str) -> dict[str, int]:
        return {name: int(value) for name, value in (line.split() for line in text.splitlines())}

    for member, expected_zero in ((twin, True), (slow, False)):
        before, after = counters(member["capture/os/vmstat.before"]), counters(member["capture/os/vmstat.after"])
        for name in ("numa_hint_faults", "numa_pages_migrated", "thp_fault_alloc"):
            assert (after[name] - before[name] == 0) is expected_zero, name


def test_demo_compare_names_the_nic_softirqs_first(compared):
    verdict = compared["verdict"]
    assert verdict["status"] == "differs" and verdict["slow_side"] == "capture"
    assert compared["baseline"]["name"] == "bank-core-twin.tar.gz" and compared["capture"]["name"] == "bank-core-demo.tar.gz"
    outcome = verdict["outcome"]
    assert outcome["label"] == "TPS" and outcome["capture"] < outcome["baseline"]
    # the twin does 21k TPS where the demo server does 11k: the generator scales the load test by 21/11
    assert outcome["baseline"] / outcome["capture"] == pytest.approx(21 / 11, rel=0.05)
    # the JTL holds the rows written from 10:00:15 to 10:00:30 (at each sample's end): its rows / 15 s, not less
    rows = len(_members(make_demo.ARCHIVE.read_bytes())["capture/app/jmeter-results.jtl"].splitlines()) - 1
    assert outcome["capture"] == pytest.approx(rows / 15, rel=0.01)
    first = verdict["explained"][0]
    assert first["key"] == "softirq-concentration/cpus-0-7-node-0"
    assert "80% of softirq time on CPUs 0-7 (node 0)" in verdict["headline"]
    assert "node 0 interrupts of hns3-0000:7d:00.0 (% of the device's): 17.3% → 100%" in first["effect"]
    assert "ethtool" in first["remediation"][0]["text"]


POOL = "proxy_limit haproxy tidb_back servers maxconn (show stat slim)"


def test_demo_compare_ranks_every_planted_difference_with_its_effect(compared):
    explained = compared["verdict"]["explained"]
    keys = [e["key"] for e in explained]
    planted = ("softirq-concentration/cpus-0-7-node-0", "kernel.numa_balancing", "transparent_hugepage/enabled",
               "cmdline isolcpus / nohz_full / rcu_nocbs / irqaffinity", POOL,
               # the two processes bound alike are one cause each for their CPUs and their memory
               "process_affinity haproxy, pd-server Cpus_allowed_list", "process_affinity haproxy, pd-server Mems_allowed_list")
    for key in planted:
        assert key in keys, key
        entry = explained[keys.index(key)]
        assert entry["effect"] and "→ outcome TPS" in entry["effect"], key
    # a finding of the critical kind before the settings the rules only warn of, isolation (no finding) after them
    assert keys.index("softirq-concentration/cpus-0-7-node-0") < keys.index("kernel.numa_balancing")
    assert keys.index("kernel.numa_balancing") < keys.index("cmdline isolcpus / nohz_full / rcu_nocbs / irqaffinity")
    by_key = {e["key"]: e for e in explained}
    binding = by_key["process_affinity haproxy, pd-server Cpus_allowed_list"]
    assert any("numactl --cpunodebind" in r["text"] for r in binding["remediation"])
    assert binding["merged"] == ["settings:process_affinity haproxy Cpus_allowed_list", "settings:process_affinity pd-server Cpus_allowed_list"]
    assert binding["sources"]["capture"] == "capture/os/haproxy-status.txt, capture/os/pd-server-status.txt"
    assert any("numa_balancing" in r["text"] for r in by_key["kernel.numa_balancing"]["remediation"])
    memory = by_key["process_affinity haproxy, pd-server Mems_allowed_list"]
    assert (memory["baseline"], memory["capture"]) == ("node 0", "all nodes")
    # the switches the perf profile shows are counted in /proc/stat too: a third on the twin, whose proxy lets
    # 128 sessions reach each TiDB where the slow side's lets 480 (then 1000)
    pool = by_key[POOL]
    assert (pool["baseline"], pool["capture"]) == ("128", "480, 1000 from 2024-05-14T02:04:00Z")
    assert pool["sources"] == {"baseline": "capture/proxy/haproxy-stat.txt:4", "capture": "capture/proxy/haproxy-stat.txt:4"}
    assert set(pool["effects"]) == {"activity:connections[tidb_server_connections] (prometheus-json), mean of the timeline",
                                    "activity:context switches per second (/proc/stat)",
                                    "activity:connections[tidb_front] (haproxy-stat), mean of the timeline"}
    assert "524 sessions → 2,177 sessions" in pool["effect"]
    assert [r["finding"] for r in pool["remediation"]] == ["context-switch-overhead/tidb-server"]
    assert "context-switch-overhead/tidb-server" not in keys  # it joined the limit whose sessions it switches between
    assert keys.index(POOL) < keys.index("kernel.numa_balancing")
    rate = next(d for d in compared["differences"] if d["key"] == "context switches per second (/proc/stat)")
    assert rate["baseline"] == pytest.approx(690_000, rel=0.02) and rate["capture"] == pytest.approx(2_050_000, rel=0.02)
    # the scheduler differs and the slow side's rule says so, but no disk latency is captured: no effect to link
    scheduler = next(d for d in compared["differences"] if d["key"] == "block nvme0n1 scheduler")
    assert (scheduler["baseline"], scheduler["capture"]) == ("none", "mq-deadline")
    assert "io-scheduler-not-none/nvme0n1" in scheduler["related_findings"]
    assert "settings:block nvme0n1 scheduler" in compared["verdict"]["also_differs"]
    assert not [d for d in compared["differences"] if d["key"] == "nvme0n1 queue/scheduler"]  # compared once


def test_demo_compare_does_not_explain_the_slow_side_by_the_twins_own_findings(compared):
    verdict = compared["verdict"]
    twin_only = [f for f in verdict["findings_gone_in_capture"]]
    assert twin_only, "the twin's softirq finding on its NIC CPUs"
    explained = {e["key"] for e in verdict["explained"]}
    for finding in twin_only:
        assert finding not in explained
        assert f"findings:{finding}" in verdict["also_differs"]
    # each side names its CPUs' nodes (the per-CPU charts group by them)
    assert {cpu: node for cpu, node in compared["baseline"]["cpu_nodes"]} == {cpu: cpu // 8 for cpu in range(128)}
    # the twin's mpstat is text, the demo's text and JSON: nothing to collect on either side
    assert verdict["only_one_side"] == []
    # counters since a process started are no settings
    assert not [d for d in compared["differences"] if "ctxt_switches" in d["key"]]
    # the statements are the same on both sides
    assert not [d for d in compared["differences"] if d["area"] in ("sql", "plans")]
