"""/proc/softirqs and /proc/interrupts parsers: goldens on the corpus and captures, plus hostile input."""

from __future__ import annotations

import tarfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import lscpu, numactl, proc_interrupts, proc_softirqs
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import CORPUS, corpus_names

PROC_FILES = [name for name in corpus_names("proc") if "stat" not in name]
CAPTURES = corpus_names("captures", "*.tar.gz")
OURS = (proc_softirqs.SPEC, proc_interrupts.SPEC, lscpu.SPEC, numactl.SPEC)


def _spec_for(name: str):
    return proc_softirqs.SPEC if "softirq" in name else proc_interrupts.SPEC


def _members(capture: str, prefix: str) -> dict[str, str]:
    """Members ``capture/os/<prefix>*`` of a capture, read in memory."""
    out = {}
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.startswith(f"capture/os/{prefix}"):
                out[member.name] = tar.extractfile(member).read().decode("utf-8", "backslashreplace")
    return out


def _parse(spec, text: str, source: str = "test"):
    return spec.parse(text, ParseContext(source=source))


def _delta(spec, before: str, after: str, key: str) -> pl.DataFrame:
    table = "softirq_count" if spec.kind == "proc-softirqs" else "irq_count"
    a, b = _parse(spec, before).tables[table], _parse(spec, after).tables[table]
    joined = b.join(a, on=[key, "cpu"], suffix="_0")
    return joined.with_columns((pl.col("count") - pl.col("count_0")).alias("delta"))


def test_numa2x2_nic_irq_and_net_rx_land_on_node1_cpus() -> None:
    cap = "numa2x2-guest-iperf-debian12.tar.gz"
    irq = _members(cap, "interrupts")
    d = _delta(proc_interrupts.SPEC, irq["capture/os/interrupts.0"], irq["capture/os/interrupts.1"], "irq")
    input_q = d.filter(pl.col("irq") == "25")
    assert input_q["device"].unique().to_list() == ["virtio0-input.0"]
    assert input_q["chip"].unique().to_list() == ["PCI-MSI"]
    assert input_q["hwirq"].unique().to_list() == ["49153-edge"]
    assert input_q.filter(pl.col("delta") > 0)["cpu"].to_list() == [3]
    assert input_q.filter(pl.col("cpu") == 3)["delta"].item() == 1848
    output_q = d.filter(pl.col("irq") == "26")
    assert output_q.filter(pl.col("delta") > 0)["cpu"].to_list() == [2]

    soft = _members(cap, "softirqs")
    s = _delta(proc_softirqs.SPEC, soft["capture/os/softirqs.0"], soft["capture/os/softirqs.1"], "softirq")
    net_rx = s.filter(pl.col("softirq") == "NET_RX", pl.col("delta") > 0).sort("cpu")
    assert net_rx["cpu"].to_list() == [2, 3]
    assert net_rx["delta"].to_list() == [17688, 8867]


def test_numa2_nic_irqs_on_cpus_5_and_6() -> None:
    cap = "numa2-guest-iperf-debian12.tar.gz"
    irq = _members(cap, "interrupts")
    d = _delta(proc_interrupts.SPEC, irq["capture/os/interrupts.0"], irq["capture/os/interrupts.1"], "irq")
    assert d.filter(pl.col("irq") == "25", pl.col("delta") > 0)["cpu"].to_list() == [5]
    assert d.filter(pl.col("irq") == "26", pl.col("delta") > 0)["cpu"].to_list() == [6]
    soft = _members(cap, "softirqs")
    s = _delta(proc_softirqs.SPEC, soft["capture/os/softirqs.0"], soft["capture/os/softirqs.1"], "softirq")
    assert sorted(s.filter(pl.col("softirq") == "NET_RX", pl.col("delta") > 0)["cpu"].to_list()) == [5, 6]


def test_mariadb_msix_chip_with_pci_address() -> None:
    irq = _members("mariadb-sysbench-debian12.tar.gz", "interrupts")
    frame = _parse(proc_interrupts.SPEC, irq["capture/os/interrupts.after"]).tables["irq_count"]
    row = frame.filter(pl.col("irq") == "38", pl.col("cpu") == 1).row(0, named=True)
    assert (row["chip"], row["hwirq"], row["device"], row["count"]) == ("PCI-MSIX-0000:00:03.0", "1-edge", "virtio2-input.0", 2745)


def test_hotplug_root6_interrupts_has_ten_cpu_columns(corpus: Path) -> None:
    result = _parse(proc_interrupts.SPEC, (corpus / "proc" / "sysstat__root6_interrupts").read_text())
    frame = result.tables["irq_count"]
    assert sorted(frame["cpu"].unique().to_list()) == list(range(10))
    loc = frame.filter(pl.col("irq") == "LOC").sort("cpu")
    assert loc["count"].to_list()[-2:] == [12345, 52345]
    assert loc["device"].unique().to_list() == ["Local timer interrupts"]
    err = frame.filter(pl.col("irq") == "ERR")
    assert err.height == 1 and err["cpu"].item() == 0 and err["device"].item() is None
    soft = _parse(proc_softirqs.SPEC, (corpus / "proc" / "sysstat__root6_softirqs").read_text()).tables["softirq_count"]
    assert soft["cpu"].n_unique() == 8


def test_old_combined_chip_and_arm64_layout(corpus: Path) -> None:
    old = _parse(proc_interrupts.SPEC, (corpus / "proc" / "node_exporter__interrupts").read_text()).tables["irq_count"]
    row = old.filter(pl.col("irq") == "16", pl.col("cpu") == 0).row(0, named=True)
    assert (row["chip"], row["hwirq"], row["device"]) == ("IR-IO-APIC-fasteoi", None, "ehci_hcd:usb1, mmc0")
    arm = _parse(proc_interrupts.SPEC, (corpus / "proc" / "node_exporter__interrupts_aarch64").read_text()).tables["irq_count"]
    row = arm.filter(pl.col("irq") == "59", pl.col("cpu") == 3).row(0, named=True)
    assert (row["chip"], row["hwirq"], row["device"], row["count"]) == ("ITS-MSI", "81922 Edge", "eth0-Tx-Rx-1", 2709937608)
    ipi0 = arm.filter(pl.col("irq") == "IPI0").sort("cpu")
    assert ipi0.height == 8 and ipi0["count"][0] == 2768808080  # "IPI0:2768808080": no blank after the colon
    assert ipi0["device"][0] == "Rescheduling interrupts"
    jc = _parse(proc_interrupts.SPEC, (corpus / "proc" / "jc__linux-proc__interrupts").read_text()).tables["irq_count"]
    assert jc.filter(pl.col("irq") == "24")["device"][0] == "PCIe PME, pciehp"
    assert jc.filter(pl.col("irq") == "NMI")["chip"].null_count() == 2


def test_jc_softirqs_128_cpus(corpus: Path) -> None:
    frame = _parse(proc_softirqs.SPEC, (corpus / "proc" / "jc__linux-proc__softirqs").read_text()).tables["softirq_count"]
    assert frame["cpu"].n_unique() == 128 and frame["softirq"].n_unique() == 10
    assert frame.filter(pl.col("softirq") == "NET_RX", pl.col("cpu") == 1)["count"].item() == 128016


MULTI = """TS 1700000000.500000000 2023-11-14 22:13:20
                    CPU0       CPU2       CPU3
          HI:          1          2          3
      NET_RX:         10         20         30
Tue Nov 14 22:13:30 UTC 2023
                    CPU0       CPU2       CPU3
          HI:          2          2          3
      NET_RX:         15         40         30
=== separator ===
2023-11-14T22:13:40+01:00
                    CPU0       CPU2       CPU3
          HI:          3          2          3
      NET_RX:         19         41         30

                    CPU0       CPU2       CPU3
          HI:          4          2          3
      NET_RX:         20         42         31
"""


def test_multi_snapshot_member_with_time_lines_and_sparse_cpus() -> None:
    result = _parse(proc_softirqs.SPEC, MULTI)
    frame = result.tables["softirq_count"]
    assert result.records == 4
    assert frame["snapshot"].unique().sort().to_list() == [0, 1, 2, 3]
    assert sorted(frame["cpu"].unique().to_list()) == [0, 2, 3]
    times = frame.group_by("snapshot").agg(pl.col("ts").first()).sort("snapshot")["ts"].to_list()
    assert times == [
        datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=timezone.utc),
        datetime(2023, 11, 14, 22, 13, 30, tzinfo=timezone.utc),
        datetime(2023, 11, 14, 21, 13, 40, tzinfo=timezone.utc),
        None,
    ]
    assert frame.schema["ts"] == pl.Datetime("us", "UTC")
    assert result.time_range == (times[2], times[1])
    assert [w.line for w in result.warnings] == [9]  # the "=== separator ===" line
    assert frame.filter(pl.col("snapshot") == 3, pl.col("softirq") == "NET_RX", pl.col("cpu") == 3)["count"].item() == 31
    assert any("not 0..2" in note for note in result.notes)


def test_zone_less_time_lines_use_the_context_zone() -> None:
    text = "2024-05-01 10:00:00\n   CPU0\n  0:  5  IO-APIC  2-edge  timer\n"
    result = proc_interrupts.SPEC.parse(text, ParseContext(source="x", tz="Europe/Paris"))
    assert result.tables["irq_count"]["ts"][0] == datetime(2024, 5, 1, 8, 0, tzinfo=timezone.utc)
    assert any("no zone" in note for note in result.notes)


def test_interrupts_multi_snapshot_and_tail_variants() -> None:
    text = (
        "1700000000\n           CPU0       CPU1\n  0:  1  2  IO-APIC   2-edge      timer\n"
        " 30:  3  4  IR-PCI-MSI 524288-edge\n 31:  5  6  xen-percpu-virq      timer0\n"
        "1700000010\n           CPU0       CPU1\n  0:  7  8  IO-APIC   2-edge      timer\n"
    )
    result = _parse(proc_interrupts.SPEC, text)
    frame = result.tables["irq_count"]
    assert result.records == 2 and result.warnings == []
    assert frame.filter(pl.col("irq") == "30")["device"].to_list() == [None, None]
    xen = frame.filter(pl.col("irq") == "31").row(0, named=True)
    assert (xen["chip"], xen["hwirq"], xen["device"]) == ("xen-percpu-virq", None, "timer0")
    assert frame.filter(pl.col("snapshot") == 1)["count"].to_list() == [7, 8]


@pytest.mark.parametrize("spec", [proc_softirqs.SPEC, proc_interrupts.SPEC], ids=lambda s: s.kind)
@pytest.mark.parametrize(
    "text",
    ["", "\n\n   \n", "garbage \\xff\\xfe no header\nfoo: 1 2 3\n", "        CPU0       CPU1\n", "random text\nCPU\n"],
    ids=["empty", "blank", "garbage", "header-only", "no-cpu-numbers"],
)
def test_hostile_inputs_raise_parse_error(spec, text: str) -> None:
    with pytest.raises(ParseError):
        _parse(spec, text)


def test_non_numeric_counts_keep_what_is_there() -> None:
    text = "        CPU0 CPU1 CPU2\n  NET_RX:  12 abc 7\n  TIMER: 1 2 3\n  BLOCK: x y z\n"
    result = _parse(proc_softirqs.SPEC, text)
    frame = result.tables["softirq_count"]
    assert frame.filter(pl.col("softirq") == "NET_RX")["count"].to_list() == [12]
    assert frame.filter(pl.col("softirq") == "TIMER")["count"].to_list() == [1, 2, 3]
    assert frame.filter(pl.col("softirq") == "BLOCK").height == 0
    assert {w.line for w in result.warnings} == {2, 4}

    irq = _parse(proc_interrupts.SPEC, "   CPU0 CPU1\n 25: 0 x PCI-MSI 3-edge eth0\nLOC: foo bar\n 26: 1 2 PCI-MSI 4-edge eth1\n")
    assert {w.line for w in irq.warnings} == {2, 3}
    assert irq.tables["irq_count"].filter(pl.col("irq") == "26")["count"].to_list() == [1, 2]


def test_huge_counters_and_rows_before_header() -> None:
    text = " 0: 1 2 IO-APIC\n   CPU0 CPU1\n  0: 99999999999999999999999 5 IO-APIC 2-edge timer\n"
    result = _parse(proc_interrupts.SPEC, text)
    assert result.warnings[0].line == 1
    assert result.tables["irq_count"]["count"].to_list() == [None, 5]
    assert "too large" in result.warnings[-1].reason


def test_wide_machine_many_snapshots_is_fast_enough() -> None:
    ncpu, rows, snaps = 512, 120, 5
    header = " " * 11 + "".join(f"CPU{i:<8}" for i in range(ncpu))
    lines = []
    for snap in range(snaps):
        lines.append(f"TS {1700000000 + snap}.0 2023-11-14 22:13:2{snap}")
        lines.append(header)
        for irq in range(rows):
            lines.append(f"{irq:4}: " + " ".join(f"{snap * 1000 + cpu:10}" for cpu in range(ncpu)) + f"  PCI-MSI {irq}-edge  eth0-TxRx-{irq}")
        lines.append("LOC: " + " ".join(f"{cpu:10}" for cpu in range(ncpu)) + "   Local timer interrupts")
    result = _parse(proc_interrupts.SPEC, "\n".join(lines))
    frame = result.tables["irq_count"]
    assert result.records == snaps and frame.height == snaps * (rows + 1) * ncpu
    assert frame.filter(pl.col("snapshot") == 4, pl.col("irq") == "7", pl.col("cpu") == 511)["count"].item() == 4511
    assert frame["ts"].null_count() == 0


def test_detect_header_only_head_uses_the_name() -> None:
    head = " " * 11 + "".join(f"CPU{i:<8}" for i in range(700))
    assert proc_softirqs.SPEC.detect(head, "softirqs.0") > 0.5 >= proc_interrupts.SPEC.detect(head, "softirqs.0")
    assert proc_interrupts.SPEC.detect(head, "interrupts.0") > 0.5 >= proc_softirqs.SPEC.detect(head, "interrupts.0")
    assert max(proc_softirqs.SPEC.detect(head, "x"), proc_interrupts.SPEC.detect(head, "x")) < 0.5
