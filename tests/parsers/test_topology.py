"""lscpu (flat, hierarchical, -p, -e) and numactl --hardware parsers: goldens, explicit checks, hostile input."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import lscpu, numactl
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import CORPUS, corpus_names

LSCPU_FILES = corpus_names("lscpu")
NUMACTL_FILES = ["percona-toolkit__pt-summary-006__numactl.txt", "percona-toolkit__pt-summary-007__numactl.txt"]
CAPTURES = corpus_names("captures", "*.tar.gz")
TOPOLOGY_MEMBERS = ("lscpu.txt", "lscpu-p.txt", "numactl-hardware.txt")


def _member(capture: str, name: str) -> str | None:
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        try:
            member = tar.getmember(f"capture/os/{name}")
        except KeyError:
            return None
        return tar.extractfile(member).read().decode("utf-8", "backslashreplace")


def _spec_for(name: str):
    return numactl.SPEC if "numactl" in name else lscpu.SPEC


def _facts(result) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in result.tables["host_fact"].select("key", "value").rows():
        out.setdefault(key, []).append(value)
    return out


def _parse(spec, text: str, source: str = "test"):
    return spec.parse(text, ParseContext(source=source))


def test_epyc_7451_96_cpus_8_nodes_2_sockets(corpus: Path) -> None:
    result = _parse(lscpu.SPEC, (corpus / "lscpu" / "util-linux__lscpu-x86_64-epyc_7451").read_text())
    topo, nodes, facts = result.tables["topology"], result.tables["numa_node"], _facts(result)
    assert result.records == 96 and topo["cpu"].to_list() == list(range(96))
    assert topo["socket"].n_unique() == 2 and topo["node"].n_unique() == 8
    assert nodes["node"].to_list() == list(range(8))
    assert nodes["cpus"][0] == "0-5,48-53" and nodes["cpu_count"].to_list() == [12] * 8
    assert nodes["size_mb"].null_count() == 8
    assert facts["sockets"] == ["2"] and facts["cores_per_socket"] == ["24"] and facts["threads_per_core"] == ["2"]
    assert facts["cpu_count"] == ["96"] and facts["model_name"] == ["AMD EPYC 7451 24-Core Processor"]
    # the first parsable block (logical IDs) is used; the -p -y block (physical core IDs) is ignored
    assert topo.filter(pl.col("cpu") == 24)["core"].item() == 24
    assert topo.filter(pl.col("cpu") == 51).row(0, named=True)["node"] == 0
    assert any("more parsable block" in n for n in result.notes)


def test_numa2x2_lscpu_p_and_numactl() -> None:
    cap = "numa2x2-guest-iperf-debian12.tar.gz"
    parsable = _parse(lscpu.SPEC, _member(cap, "lscpu-p.txt"))
    topo = parsable.tables["topology"]
    assert topo.filter(pl.col("node") == 1)["cpu"].to_list() == [2, 3]
    assert topo.filter(pl.col("node") == 1)["socket"].to_list() == [1, 1]
    assert parsable.tables["host_fact"].height == 0
    assert parsable.tables["numa_node"].select("node", "cpus", "cpu_count").rows() == [(0, "0-1", 2), (1, "2-3", 2)]

    hw = _parse(numactl.SPEC, _member(cap, "numactl-hardware.txt"))
    nodes = hw.tables["numa_node"]
    assert nodes.height == 2
    assert nodes["size_mb"].to_list() == [1510, 1464] and nodes["free_mb"].to_list() == [1158, 1420]
    assert nodes["cpus"].to_list() == ["0 1", "2 3"]
    assert hw.records == 4 and hw.tables["topology"].filter(pl.col("node") == 1)["cpu"].to_list() == [2, 3]
    assert hw.tables["topology"]["core"].null_count() == 4
    assert json.loads(_facts(hw)["numa_distances"][0]) == {"nodes": [0, 1], "matrix": [[10, 20], [20, 10]]}

    human = _parse(lscpu.SPEC, _member(cap, "lscpu.txt"))
    mapping = lambda r: r.tables["topology"].select("cpu", "node").rows()  # noqa: E731
    assert mapping(human) == mapping(parsable) == mapping(hw)
    assert human.tables["topology"]["socket"].null_count() == 4  # Socket(s): 2, not derivable without -p
    assert human.tables["topology"]["core"].to_list() == [0, 1, 2, 3]  # Thread(s) per core: 1


def test_hierarchical_layout_keys(corpus: Path) -> None:
    result = _parse(lscpu.SPEC, (corpus / "lscpu" / "insights-core__lscpu_3.txt").read_text())
    facts = _facts(result)
    assert facts["architecture"] == ["x86_64"] and facts["sockets"] == ["2"]
    assert facts["hypervisor_vendor"] == ["KVM"] and facts["bios_model_name"] == ["pc-q35-5.2"]
    assert facts["l3_cache"] == ["32 MiB (2 instances)"]
    assert facts["vulnerability_meltdown"] == ["Mitigation; PTI"]
    assert " constant_tsc " in facts["flags"][0] and " tpr_shadow vnmi " in facts["flags"][0]
    assert "layout: human (hierarchical)" in result.notes
    assert result.tables["topology"].select("cpu", "node").rows() == [(0, 0), (1, 0)]


def test_flat_layout_matches_hierarchical_keys(corpus: Path) -> None:
    facts = _facts(_parse(lscpu.SPEC, (corpus / "lscpu" / "insights-core__lscpu_1.txt").read_text()))
    assert facts["l2_cache"] == ["4096K"] and facts["hypervisor_vendor"] == ["KVM"]
    assert facts["online_cpus"] == ["0,1"] and facts["numa_node_count"] == ["1"]


def test_arm_big_little_repeats_per_type_facts(corpus: Path) -> None:
    result = _parse(lscpu.SPEC, (corpus / "lscpu" / "util-linux__lscpu-arm-A510-A710-A715-X3").read_text())
    facts = _facts(result)
    assert facts["model_name"] == ["Cortex-A510", "Cortex-A710", "Cortex-A715", "Cortex-X3"]
    assert facts["cores_per_socket"] == ["3", "2", "2", "1"]
    topo = result.tables["topology"]
    assert result.records == 8 and topo["node"].null_count() == 8
    assert result.tables["numa_node"].height == 0


def test_human_only_with_memory_only_node_and_extended_layout() -> None:
    text = (
        "Architecture:        x86_64\nCPU(s):              4\nThread(s) per core:  2\nSocket(s):           1\n"
        "NUMA node(s):        3\nNUMA node0 CPU(s):   0,2\nNUMA node1 CPU(s):   1,3\nNUMA node2 CPU(s):   \n"
    )
    result = _parse(lscpu.SPEC, text)
    assert result.tables["numa_node"].select("node", "cpus", "cpu_count").rows() == [(0, "0,2", 2), (1, "1,3", 2), (2, "", 0)]
    topo = result.tables["topology"]
    assert topo.select("cpu", "node").rows() == [(0, 0), (1, 1), (2, 0), (3, 1)]
    assert topo["socket"].to_list() == [0, 0, 0, 0] and topo["core"].null_count() == 4

    extended = (
        "CPU NODE SOCKET CORE L1d:L1i:L2:L3 ONLINE    MAXMHZ   MINMHZ\n"
        "  0    0      0    0 0:0:0:0          yes 3000.0000 800.0000\n"
        "  1    1      1    1 1:1:1:1          yes 3000.0000 800.0000\n"
        "  2    -      -    - -                 no         -        -\n"
    )
    assert lscpu.SPEC.detect(extended, "cpus.txt") > 0.5
    ext = _parse(lscpu.SPEC, extended)
    assert ext.tables["topology"].select("cpu", "core", "socket", "node").rows() == [(0, 0, 0, 0), (1, 1, 1, 1)]
    assert any("offline" in n for n in ext.notes)


def test_parsable_and_numa_lines_that_disagree_warn() -> None:
    text = "NUMA node0 CPU(s):   0\nNUMA node1 CPU(s):   1\n# CPU,Core,Socket,Node\n0,0,0,0\n1,1,0,0\n"
    result = _parse(lscpu.SPEC, text)
    assert len(result.warnings) == 1 and "differs" in result.warnings[0].reason
    assert result.tables["topology"]["node"].to_list() == [0, 0]


@pytest.mark.parametrize(
    "text",
    ["", "\n \n", "garbage \\xff\\xfe\nhello: world\n", "# CPU,Core,Socket,Node,,L1d,L1i,L2,L3\n", "random\n,,,\n"],
    ids=["empty", "blank", "garbage", "parsable-header-only", "commas"],
)
def test_lscpu_hostile(text: str) -> None:
    with pytest.raises(ParseError):
        _parse(lscpu.SPEC, text)


def test_lscpu_odd_lines_are_warned_not_fatal() -> None:
    text = "Architecture: x86_64\n!!! not lscpu !!!\n# CPU,Core,Socket,Node\n0,0,0,0\nx,1,0,0\n"
    result = _parse(lscpu.SPEC, text)
    assert [w.line for w in result.warnings] == [2, 5]
    assert result.records == 1


def test_numactl_show_block_and_empty_node(corpus: Path) -> None:
    result = _parse(numactl.SPEC, (corpus / "numastat" / "percona-toolkit__pt-summary-007__numactl.txt").read_text())
    facts = _facts(result)
    assert facts["numactl_show_policy"] == ["default"] and facts["numactl_show_preferred_node"] == ["current"]
    assert facts["numactl_show_membind"] == ["0 1"] and facts["numactl_show_cpubind"] == ["0 1"]
    assert facts["numactl_show_physcpubind"][0].split() == [str(i) for i in range(24)]
    assert facts["numa_node_count"] == ["2"]
    assert result.tables["topology"].filter(pl.col("node") == 0)["cpu"].to_list() == list(range(0, 24, 2))

    text = (
        "available: 3 nodes (0-2)\nnode 0 cpus: 0 1\nnode 0 size: 1024 MB\nnode 0 free: 512 MB\n"
        "node 1 cpus: 2 3\nnode 1 size: 1024 MB\nnode 1 free: 100 MB\nnode 2 cpus:\nnode 2 size: 8192 MB\n"
        "node 2 free: 8000 MB\nnode distances:\nnode   0   1   2 \n  0:  10  20  40 \n  1:  20  10  40 \n  2:  40  40  10 \n"
    )
    odd = _parse(numactl.SPEC, text)
    assert odd.warnings == []
    assert odd.tables["numa_node"].select("node", "cpus", "cpu_count", "size_mb").rows()[-1] == (2, "", 0, 8192)
    assert odd.records == 4 and any("memory-only" in n for n in odd.notes)


def test_numactl_no_numa_and_hostile() -> None:
    none = _parse(numactl.SPEC, "No NUMA available on this system\n")
    assert none.records == 0 and _facts(none) == {"numactl_available": ["no"]}
    for text in ("", "garbage\n\\xff", "hello: world\n"):
        with pytest.raises(ParseError):
            _parse(numactl.SPEC, text)
    bad = _parse(numactl.SPEC, "available: 1 nodes (0)\nnode 0 cpus: 0 1\nnode 0 size: lots MB\nwhat\n")
    assert [w.line for w in bad.warnings] == [3, 4]
    assert bad.tables["numa_node"]["size_mb"].to_list() == [None]
