"""Real tools of this machine, run now, read by our parsers: the formats as the tools write them today.

Skips (with the reason) when a tool is not installed; .ci/run installs sysstat, numactl and util-linux.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from dbdiag import tables as t
from dbdiag.detect import detect
from dbdiag.parsers import PARSERS
from dbdiag.pipeline import decode, merge_tables
from dbdiag.derive import derive_all
from dbdiag.parsers.base import ParseContext

ENV = {**os.environ, "LC_ALL": "C", "S_TIME_FORMAT": "ISO"}


def run(command: list[str]) -> bytes:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} is not installed here (apt-get install sysstat numactl util-linux)")
    return subprocess.run(command, capture_output=True, env=ENV, check=True, timeout=30).stdout


def parse(data: bytes, name: str):
    detection = detect(data, name, PARSERS)
    assert detection.spec is not None, f"{name} not recognised: {data[:200]!r}"
    return detection.spec.kind, detection.spec.parse(decode(data), ParseContext(source=name))


def test_real_mpstat_text_and_json_agree():
    text_kind, text = parse(run(["mpstat", "-u", "-P", "ALL", "-I", "SCPU", "1", "2"]), "mpstat.txt")
    json_kind, as_json = parse(run(["mpstat", "-u", "-P", "ALL", "-I", "SCPU", "-o", "JSON", "1", "2"]), "mpstat.json")
    assert (text_kind, json_kind) == ("mpstat-text", "mpstat-json")
    cpus = os.cpu_count()
    for result in (text, as_json):
        util = result.tables[t.CPU_UTIL]
        assert util.height == 2 * (cpus + 1)
        assert sorted(util["cpu"].unique().to_list()) == [-1, *range(cpus)]
        row_sums = util.select(sum(util[c] for c in util.columns if c.endswith("_pct") and c not in ("guest_pct", "gnice_pct")))
        assert row_sums.to_series().is_between(99.0, 101.0).all()
        rates = result.tables[t.SOFTIRQ_RATE]
        assert {"NET_RX", "TIMER", "SCHED"} <= set(rates["softirq"].unique().to_list())


def test_real_proc_snapshots_give_deltas():
    with open("/proc/softirqs", "rb") as first:
        before = first.read()
    run(["sleep", "0.2"])
    with open("/proc/softirqs", "rb") as second:
        after = second.read()
    results = [parse(data, name)[1] for data, name in ((before, "softirqs.before"), (after, "softirqs.after"))]
    derived = derive_all(merge_tables(results))
    per_cpu = derived.tables["per_cpu"]
    assert per_cpu.height == os.cpu_count()
    with open("/proc/interrupts", "rb") as stream:
        kind, interrupts = parse(stream.read(), "interrupts")
    assert kind == "proc-interrupts"
    assert set(interrupts.tables[t.IRQ_COUNT]["cpu"].unique().to_list()) == set(range(os.cpu_count()))


def test_real_lscpu_and_numactl_topology():
    kind, lscpu = parse(run(["lscpu"]), "lscpu.txt")
    assert kind == "lscpu"
    assert lscpu.tables[t.TOPOLOGY].height == os.cpu_count()
    kind, parsable = parse(run(["lscpu", "-p"]), "lscpu-p.txt")
    assert kind == "lscpu" and parsable.tables[t.TOPOLOGY]["node"].null_count() == 0
    kind, numactl = parse(run(["numactl", "--hardware"]), "numactl.txt")
    assert kind == "numactl-hardware"
    nodes = numactl.tables[t.NUMA_NODE]
    assert nodes["cpu_count"].sum() == os.cpu_count() and (nodes["size_mb"] > 0).all()
