"""Host configuration parsers (sysctl, /proc/cmdline, sysfs choices, IRQ affinity, ethtool -l,
process affinity): goldens on the real captures and fixtures/host, hand-checked values,
detection against the whole corpus and every other parser, hostile input."""

from __future__ import annotations


import polars as pl
import pytest

from dbdiag.parsers import PARSERS, ethtool_channels, irq_affinity, proc_cmdline, proc_status, sys_choice, sysctl
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError
from dbdiag.tables import HOST_SETTING
from tests.captures import capture_files, decoded
from tests.conftest import REPO, corpus_names

HOST_SPECS = {s.kind: s for s in (sysctl.SPEC, proc_cmdline.SPEC, sys_choice.SPEC, irq_affinity.SPEC,
                                  ethtool_channels.SPEC, proc_status.SPEC)}
FIXTURES = REPO / "fixtures" / "host"
CAPTURES = corpus_names("captures", "*.tar.gz")
# capture member base name -> the kind that must claim it; every other member must be left alone
CAPTURE_KINDS = {
    "sysctl.txt": "sysctl",
    "cmdline.txt": "proc-cmdline",
    "thp_enabled.txt": "sysfs-choice",
    "irq_affinity.txt": "irq-affinity",
    "python3-status.txt": "process-affinity",
}
FIXTURE_KINDS = {
    "sysctl-kernel-fs-vm.txt": "sysctl",
    "grep-proc-sys-vm.txt": "sysctl",
    "etc-sysctl.conf": "sysctl",
    "enabled": "sysfs-choice",
    "defrag": "sysfs-choice",
    "vda-scheduler.txt": "sysfs-choice",
    "grep-sys-block-thp.txt": "sysfs-choice",
    "grep-irq-smp_affinity_list.txt": "irq-affinity",
    "grep-irq-smp_affinity-effective.txt": "irq-affinity",
    "for-irq-smp_affinity_list.txt": "irq-affinity",
    "ethtool-l-eth0-lo.txt": "ethtool-channels",
    "cat-status-two-procs.txt": "process-affinity",
    "grep-status-two-procs.txt": "process-affinity",
    "taskset-p-cp-1.txt": "process-affinity",
    "taskset-acp-1.txt": "process-affinity",
    "proc-stat-ts.txt": "proc-stat",
}


def _member_text(capture: str, name: str) -> str | None:
    for path, data in capture_files(capture):
        if path == f"capture/os/{name}":
            return decoded(data)
    return None


def _head(data: bytes) -> str:
    return data[:DETECT_HEAD_BYTES].decode("utf-8", "backslashreplace").replace("\r\n", "\n")


def _parse(spec, text: str, source: str = "test"):
    return spec.parse(text, ParseContext(source=source))


def _rows(result) -> list[tuple]:
    return result.tables[HOST_SETTING].drop("source").rows()


def _value(result, name: str, subject: str | None = None) -> str | None:
    frame = result.tables[HOST_SETTING].filter(pl.col("name") == name)
    if subject is not None:
        frame = frame.filter(pl.col("subject") == subject)
    assert frame.height == 1, f"{name}/{subject}: {frame.height} rows"
    return frame["value"].item()


# --- detection over the corpus, the captures and the fixtures -------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_fixture_detected_by_its_kind_only(name: str) -> None:
    head = _head((FIXTURES / name).read_bytes())
    for spec in PARSERS + tuple(HOST_SPECS.values()):
        score = spec.detect(head, name)
        if spec.kind == FIXTURE_KINDS[name]:
            assert score > 0.5, f"{spec.kind}: {score}"
        else:
            assert score <= 0.5, f"{spec.kind} claims {name}: {score}"
        # content alone must do it too (the name is only a hint)
        if spec.kind == FIXTURE_KINDS[name] and name != "etc-sysctl.conf":
            assert spec.detect(head, "member") > 0.5


def test_every_fixture_is_listed_in_readme_and_small() -> None:
    readme = (FIXTURES / "README.md").read_text()
    files = sorted(p.name for p in FIXTURES.iterdir() if p.name != "README.md")
    assert files == sorted(FIXTURE_KINDS)
    for name in files:
        assert f"`{name}`" in readme, name
        assert (FIXTURES / name).stat().st_size < 50_000


# --- goldens --------------------------------------------------------------------------------------------


# --- sysctl ---------------------------------------------------------------------------------------------


def test_sysctl_captures_hand_checked() -> None:
    numa = _parse(sysctl.SPEC, _member_text("numa2x2-guest-iperf-debian12.tar.gz", "sysctl.txt"))
    assert numa.records == 957  # wc -l; every line is "key = value"
    assert _value(numa, "kernel.numa_balancing") == "1"
    assert _value(numa, "fs.file-nr") == "0\t0\t287282"
    assert _value(numa, "kernel.sched_autogroup_enabled") == "0"
    assert set(numa.tables[HOST_SETTING]["category"]) == {"sysctl"}
    assert numa.tables[HOST_SETTING]["subject"].null_count() == 957
    maria = _parse(sysctl.SPEC, _member_text("mariadb-sysbench-debian12.tar.gz", "sysctl.txt"))
    assert maria.records == 1304
    assert _value(maria, "kernel.numa_balancing") == "0" and _value(maria, "vm.swappiness") == "60"


def test_sysctl_proc_sys_listing_and_conf_forms() -> None:
    grep = _parse(sysctl.SPEC, (FIXTURES / "grep-proc-sys-vm.txt").read_text())
    assert grep.records == 51
    assert _value(grep, "vm.admin_reserve_kbytes") == "8192"
    assert _value(grep, "kernel.numa_balancing") == "0"
    conf = (
        "# /etc/sysctl.d/99-db.conf\n; old style comment\n\nvm.swappiness=1\n  vm.dirty_ratio = 10  \n"
        "-net.core.somaxconn = 4096\nkernel/domainname = example.com\n"
        "net/ipv4/conf/enp3s0.200/forwarding = 1\nnet.ipv4.conf.enp3s0/200.rp_filter=2\n"
    )
    assert sysctl.SPEC.detect(conf, "99-db.conf") > 0.5
    result = _parse(sysctl.SPEC, conf)
    assert result.warnings == []
    assert [(n, v) for _c, _s, n, v, _ch in _rows(result)] == [
        ("vm.swappiness", "1"), ("vm.dirty_ratio", "10"), ("net.core.somaxconn", "4096"),
        ("kernel.domainname", "example.com"), ("net.ipv4.conf.enp3s0/200.forwarding", "1"),
        ("net.ipv4.conf.enp3s0/200.rp_filter", "2"),
    ]
    slash = _parse(sysctl.SPEC, "/proc/sys/net/ipv4/conf/eth0.100/forwarding:1\n")
    assert _rows(slash) == [("sysctl", None, "net.ipv4.conf.eth0/100.forwarding", "1", None)]


def test_sysctl_commented_conf_is_empty_with_note() -> None:
    result = _parse(sysctl.SPEC, (FIXTURES / "etc-sysctl.conf").read_text())
    assert result.records == 0 and result.tables[HOST_SETTING].height == 0
    assert result.notes == ["no active settings: every key=value line is commented out"]


def test_sysctl_errors_and_odd_lines() -> None:
    text = (
        "kernel.numa_balancing = 1\nsysctl: permission denied on key 'fs.protected_fifos'\n"
        "sysctl: reading key \"net.ipv6.conf.all.stable_secret\"\nthis is not sysctl\nnodots = 3\n"
        "kernel.empty = \n"
    )
    result = _parse(sysctl.SPEC, text)
    assert [w.line for w in result.warnings] == [4, 5]
    assert result.notes == ["2 key(s) could not be read when captured (sysctl:/grep: error lines)"]
    assert [(n, v) for _c, _s, n, v, _ch in _rows(result)] == [("kernel.numa_balancing", "1"), ("kernel.empty", "")]


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "\x00\x01\xff garbage", "hello world\n", "sysctl: permission denied on key 'a.b'\n",
     "[mysqld]\ninnodb_buffer_pool_size = 1G\n"],
    ids=["empty", "blank", "binary", "prose", "only-errors", "my.cnf"],
)
def test_sysctl_hostile(text: str) -> None:
    with pytest.raises(ParseError):
        _parse(sysctl.SPEC, text)


def test_sysctl_detect_rejects_other_key_value_configs() -> None:
    for text in ("[mysqld]\ninnodb_buffer_pool_size = 1G\nmax_connections = 500\n",
                 "shared_buffers = 128MB\nwork_mem = 4MB\n# comment\n",
                 "[storage.block-cache]\ncapacity = \"1GB\"\nstorage.reserve-space = \"0MB\"\n",
                 "host=db1\ntz=UTC\n"):
        assert sysctl.SPEC.detect(text, "my.cnf") <= 0.5


def test_sysctl_big_input_is_fast_and_complete() -> None:
    text = "".join(f"net.ipv4.conf.veth{i}.rp_filter = {i % 3}\n" for i in range(200_000)) + "x" * 1_000_000
    result = _parse(sysctl.SPEC, text)
    assert result.records == 200_000 and len(result.warnings) == 1
    assert _value(result, "net.ipv4.conf.veth199999.rp_filter") == "1"  # 199999 % 3
    noisy = _parse(sysctl.SPEC, "vm.swappiness = 1\n" + "junk line\n" * 120)
    assert len(noisy.warnings) == 51 and noisy.warnings[-1].as_text() == "70 more lines skipped"


# --- /proc/cmdline --------------------------------------------------------------------------------------


def test_cmdline_captures_hand_checked() -> None:
    numa = _parse(proc_cmdline.SPEC, _member_text("numa2x2-guest-iperf-debian12.tar.gz", "cmdline.txt"))
    assert _rows(numa) == [("cmdline", None, "console", "ttyS0", None), ("cmdline", None, "rdinit", "/init", None),
                           ("cmdline", None, "quiet", None, None), ("cmdline", None, "panic", "-1", None)]
    fc = _parse(proc_cmdline.SPEC, _member_text("mariadb-sysbench-debian12.tar.gz", "cmdline.txt"))
    assert fc.records == 14 and _value(fc, "mitigations") == "auto,no_guest_host,no_guest_guest"
    assert _value(fc, "nomodule") is None and _value(fc, "rdinit") == "/process_api"
    assert fc.notes == ["14 argument(s) after '--' are for init, not kept"]


def test_cmdline_typical_server_line() -> None:
    line = ('BOOT_IMAGE=/vmlinuz-5.15.0-91-generic root=UUID=0b6c-44 ro isolcpus=managed_irq,domain,2-7 '
            'nohz-full=2-7 rcu_nocbs=2-7 transparent_hugepage=never numa_balancing=disable '
            'dyndbg="file a.c +p" empty= quiet\n')
    assert proc_cmdline.SPEC.detect(line, "member") > 0.9
    result = _parse(proc_cmdline.SPEC, line)
    assert result.warnings == []
    assert _value(result, "BOOT_IMAGE") == "/vmlinuz-5.15.0-91-generic"
    assert _value(result, "root") == "UUID=0b6c-44" and _value(result, "ro") is None
    assert _value(result, "isolcpus") == "managed_irq,domain,2-7" and _value(result, "nohz_full") == "2-7"
    assert _value(result, "transparent_hugepage") == "never" and _value(result, "numa_balancing") == "disable"
    assert _value(result, "dyndbg") == "file a.c +p" and _value(result, "empty") == ""


def test_cmdline_detect_needs_kernel_parameters() -> None:
    for text in ("always [madvise] never\n", "kernel.numa_balancing = 1\n", "host=db1 tz=UTC\n",
                 "console=ttyS0 quiet\nsecond line\n", "hello world\n", "x" * 10_000):
        assert proc_cmdline.SPEC.detect(text, "member") <= 0.5, text[:40]
    assert proc_cmdline.SPEC.detect("foo=1 console=ttyS0\n", "cmdline") > 0.5
    assert proc_cmdline.SPEC.detect("foo=1 console=ttyS0\n", "member") <= 0.5


def test_cmdline_hostile() -> None:
    for text in ("", "\n \n"):
        with pytest.raises(ParseError):
            _parse(proc_cmdline.SPEC, text)
    odd = _parse(proc_cmdline.SPEC, 'ro \x00\xff=1 "unterminated quiet\nsecond\n')
    assert [w.line for w in odd.warnings] == [1, 1, 2]
    assert _rows(odd) == [("cmdline", None, "ro", None, None)]
    huge = _parse(proc_cmdline.SPEC, " ".join(f"p{i}={i}" for i in range(100_000)))
    assert huge.records == 100_000


# --- sysfs choices --------------------------------------------------------------------------------------


def test_thp_captures_hand_checked() -> None:
    numa = _parse(sys_choice.SPEC, _member_text("numa2x2-guest-iperf-debian12.tar.gz", "thp_enabled.txt"),
                  "capture/os/thp_enabled.txt")
    assert _rows(numa) == [("thp", None, "enabled", "always", "always madvise never")]
    assert numa.notes == []
    maria = _parse(sys_choice.SPEC, _member_text("mariadb-sysbench-debian12.tar.gz", "thp_enabled.txt"))
    assert _rows(maria) == [("thp", None, "enabled", "madvise", "always madvise never")]
    assert maria.notes and "choices alone" in maria.notes[0]


def test_block_listing_scheduler_and_rotational() -> None:
    result = _parse(sys_choice.SPEC, (FIXTURES / "grep-sys-block-thp.txt").read_text())
    assert _value(result, "scheduler", "vda") == "mq-deadline"
    assert _value(result, "rotational", "vda") == "1" and _value(result, "rotational", "zram0") == "0"
    assert _value(result, "scheduler", "loop0") == "none"
    assert _value(result, "shmem_enabled") == "never"
    assert _value(result, "defrag") == "madvise"
    text = (
        "/sys/devices/pci0000:00/0000:00:1d.0/nvme/nvme0/nvme0n1/queue/scheduler:[none] mq-deadline\n"
        "/sys/class/block/sda/queue/rotational:1\n==> /sys/block/sdb/queue/scheduler <==\nmq-deadline [bfq] none\n"
        "/sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled:always [inherit] madvise never\n"
        "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag:1\n"
        "grep: /sys/kernel/mm/transparent_hugepage/khugepaged: Is a directory\n/sys/power/state:freeze mem\n"
    )
    odd = _parse(sys_choice.SPEC, text)
    assert _rows(odd) == [
        ("block", "nvme0n1", "scheduler", "none", "none mq-deadline"),
        ("block", "sda", "rotational", "1", None),
        ("block", "sdb", "scheduler", "bfq", "mq-deadline bfq none"),
        ("thp", "hugepages-2048kB", "enabled", "inherit", "always inherit madvise never"),
        ("thp", "khugepaged", "defrag", "1", None),
    ]
    assert [w.line for w in odd.warnings] == [8] and odd.notes == ["1 error line(s) from the capture command (grep:/cat:/head:) ignored"]


@pytest.mark.parametrize(
    ("content", "member", "expected"),
    [
        ("[always] madvise never", "thp_enabled.txt", ("thp", None, "enabled", "always")),
        ("[always] madvise never", "defrag", ("thp", None, "defrag", "always")),  # old kernels' defrag
        ("always defer defer+madvise [madvise] never", "member", ("thp", None, "defrag", "madvise")),
        ("always within_size advise [never] deny force", "member", ("thp", None, "shmem_enabled", "never")),
        ("[none] mq-deadline kyber bfq", "nvme0n1-scheduler", ("block", "nvme0n1", "scheduler", "none")),
        ("[none] mq-deadline", "scheduler_sda.txt", ("block", "sda", "scheduler", "none")),
        ("noop [deadline] cfq", "member", ("block", None, "scheduler", "deadline")),
        ("[mq-deadline] none", "scheduler", ("block", None, "scheduler", "mq-deadline")),
        ("[fast] slow", "scheduler", ("block", None, "scheduler", "fast")),
    ],
)
def test_bare_choice_attribution(content: str, member: str, expected: tuple) -> None:
    result = _parse(sys_choice.SPEC, content + "\n", f"capture/os/{member}")
    assert result.warnings == []
    assert _rows(result)[0][:4] == expected


def test_unattributable_choice_kept_as_unknown() -> None:
    result = _parse(sys_choice.SPEC, "[fast] slow\n", "capture/os/thing.txt")
    assert _rows(result) == [("unknown", None, "unknown", "fast", "fast slow")]
    assert len(result.warnings) == 1 and "unknown" in result.warnings[0].reason
    assert sys_choice.SPEC.detect("[fast] slow\n", "thing.txt") <= 0.5
    assert sys_choice.SPEC.detect("[fast] slow\n", "nvme0n1-scheduler") > 0.5


def test_sys_choice_hostile() -> None:
    for text in ("", "no brackets here\n", "[a] [b] c\n", "\x00\xff\n", "/sys/power/state:freeze mem\n"):
        with pytest.raises(ParseError):
            _parse(sys_choice.SPEC, text)
    for text in ("[INFO] server started\nmore log\n[WARN] x\nline\nline\n", "2024-01-01 [note] a b\n", "[none]\n" * 6):
        assert sys_choice.SPEC.detect(text, "member") <= 0.5


# --- IRQ affinity ---------------------------------------------------------------------------------------


def test_irq_affinity_captures_hand_checked() -> None:
    result = _parse(irq_affinity.SPEC, _member_text("numa2x2-guest-iperf-debian12.tar.gz", "irq_affinity.txt"))
    assert result.records == 19 and set(result.tables[HOST_SETTING]["name"]) == {"smp_affinity_list"}
    assert _value(result, "smp_affinity_list", "1") == "0-1" and _value(result, "smp_affinity_list", "24") == "0-3"
    numa2 = _parse(irq_affinity.SPEC, _member_text("numa2-guest-iperf-debian12.tar.gz", "irq_affinity.txt"))
    assert _value(numa2, "smp_affinity_list", "4") == "0-3" and _value(numa2, "smp_affinity_list", "0") == "0-7"


def test_irq_affinity_forms() -> None:
    loop = _parse(irq_affinity.SPEC, (FIXTURES / "for-irq-smp_affinity_list.txt").read_text())
    assert loop.records == 19 and _value(loop, "smp_affinity_list", "24") == "0-1"
    assert loop.notes == ["19 line(s) without a file name read as smp_affinity_list",
                          "2 other /proc/irq or error line(s) ignored"]
    masks = _parse(irq_affinity.SPEC, "/proc/irq/24 3\n", "capture/os/irq_smp_affinity.txt")
    assert _rows(masks) == [("irq_affinity", "24", "smp_affinity", "3", None)]
    mixed = _parse(irq_affinity.SPEC, (FIXTURES / "grep-irq-smp_affinity-effective.txt").read_text())
    assert _value(mixed, "smp_affinity", "24") == "3" and _value(mixed, "effective_affinity_list", "43") == "0"
    text = ("/proc/irq/default_smp_affinity:ff\n/proc/irq/64/smp_affinity:00000000,0000ff00\n"
            "/proc/irq/64/spurious:count 3\n/proc/irq/64/node:1\nIRQ 64 is fine\n")
    other = _parse(irq_affinity.SPEC, text)
    assert _rows(other) == [("irq_affinity", None, "default_smp_affinity", "ff", None),
                            ("irq_affinity", "64", "smp_affinity", "00000000,0000ff00", None),
                            ("irq_affinity", "64", "node", "1", None)]
    assert [w.line for w in other.warnings] == [5]
    head = ("==> /proc/irq/24/smp_affinity_list <==\n2-3\n\n==> /proc/irq/24/spurious <==\ncount 3\n"
            "unhandled 0\n\n==> /proc/irq/25/effective_affinity_list <==\n1\n")
    assert irq_affinity.SPEC.detect(head, "member") > 0.5
    headed = _parse(irq_affinity.SPEC, head)
    assert _rows(headed) == [("irq_affinity", "24", "smp_affinity_list", "2-3", None),
                             ("irq_affinity", "25", "effective_affinity_list", "1", None)]
    assert [w.line for w in headed.warnings] == [6]  # the spurious file's second line
    colon = _parse(irq_affinity.SPEC, "/proc/irq/24: 0-1\n/proc/irq/25/: 2\n")
    assert [r[1:4] for r in _rows(colon)] == [("24", "smp_affinity_list", "0-1"), ("25", "smp_affinity_list", "2")]


def test_irq_affinity_hostile() -> None:
    for text in ("", "nothing\n", "/proc/irq/24/spurious:count 3\n", "\x00\xff"):
        with pytest.raises(ParseError):
            _parse(irq_affinity.SPEC, text)
    assert irq_affinity.SPEC.detect("see /proc/irq/24/smp_affinity_list: 0-3\n", "member") <= 0.5
    noisy = _parse(irq_affinity.SPEC, "/proc/irq/24/smp_affinity_list:1\n" + "junk\n" * 200)
    assert noisy.records == 1 and len(noisy.warnings) == 51
    assert noisy.warnings[-1].as_text() == "150 more lines skipped"


# --- ethtool -l -----------------------------------------------------------------------------------------


def test_ethtool_channels_real_and_several_interfaces() -> None:
    real = _parse(ethtool_channels.SPEC, (FIXTURES / "ethtool-l-eth0-lo.txt").read_text())
    assert real.records == 1 and _value(real, "combined_max", "eth0") == "1" and _value(real, "rx_current") == "n/a"
    text = (
        "Channel parameters for ens5:\nPre-set maximums:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t32\n"
        "Current hardware settings:\nRX:\t\tn/a\nTX:\t\tn/a\nOther:\t\t1\nCombined:\t8\n"
        "Channel parameters for eth1:\nCannot get device channel parameters\n: Operation not supported\n"
        "Channel parameters for mlx0:\nPre-set maximums:\nRX:\t\t16\nTX:\t\t16\nOther:\t\tn/a\nCombined:\tn/a\n"
        "Current hardware settings:\nRX:\t\t4\nTX:\t\t4\nOther:\t\tn/a\nCombined:\tn/a\n"
    )
    result = _parse(ethtool_channels.SPEC, text)
    assert result.records == 2 and result.warnings == []
    assert _value(result, "combined_max", "ens5") == "32" and _value(result, "combined_current", "ens5") == "8"
    assert _value(result, "rx_current", "mlx0") == "4" and _value(result, "combined_current", "mlx0") == "n/a"
    assert result.notes == ["2 ethtool error line(s) (interface without channel support?) ignored"]


def test_ethtool_channels_headerless_and_hostile() -> None:
    bare = _parse(ethtool_channels.SPEC, "Pre-set maximums:\nCombined:\t8\nCurrent hardware settings:\nCombined:\t2\n")
    assert _rows(bare) == [("nic_channels", None, "combined_max", "8", None), ("nic_channels", None, "combined_current", "2", None)]
    assert len(bare.warnings) == 1
    ring = ("Ring parameters for eth0:\nPre-set maximums:\nRX:\t\t4096\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t4096\n"
            "Current hardware settings:\nRX:\t\t256\nRX Mini:\tn/a\nRX Jumbo:\tn/a\nTX:\t\t256\n")
    assert ethtool_channels.SPEC.detect(ring, "ethtool-g.txt") <= 0.5
    for text in ("", "netlink error: Operation not supported\n", "Channel parameters for eth0:\n", "\x00\xff"):
        with pytest.raises(ParseError):
            _parse(ethtool_channels.SPEC, text)


# --- process affinity -----------------------------------------------------------------------------------


def test_process_status_captures_hand_checked() -> None:
    result = _parse(proc_status.SPEC, _member_text("numa2-guest-iperf-debian12.tar.gz", "python3-status.txt"),
                    "capture/os/python3-status.txt")
    assert _rows(result) == [("process_affinity", "python3", "Cpus_allowed_list", "0-3", None),
                             ("process_affinity", "python3", "Mems_allowed_list", "0-1", None)]
    assert result.notes == ["no Name/Pid lines: process named 'python3' after the member name"]
    failed = _member_text("numa2x2-guest-iperf-debian12.tar.gz", "python3-status.txt")
    assert proc_status.SPEC.detect(failed, "python3-status.txt") <= 0.5
    with pytest.raises(ParseError, match=r"grep: /proc//status: No such file or directory"):
        _parse(proc_status.SPEC, failed, "capture/os/python3-status.txt")


def test_process_status_fixtures() -> None:
    two = _parse(proc_status.SPEC, (FIXTURES / "cat-status-two-procs.txt").read_text())
    assert two.records == 2
    subjects = two.tables[HOST_SETTING]["subject"].unique(maintain_order=True).to_list()
    assert subjects[0] == "process_api 1" and subjects[1].startswith("cat ")
    assert _value(two, "Cpus_allowed_list", "process_api 1") == "0-1"
    assert _value(two, "Threads", "process_api 1") == "11"
    assert set(two.tables[HOST_SETTING]["name"]) == {
        "Name", "Pid", "Threads", "Cpus_allowed", "Cpus_allowed_list", "Mems_allowed_list",
        "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"}
    grep = _parse(proc_status.SPEC, (FIXTURES / "grep-status-two-procs.txt").read_text())
    assert grep.records == 2 and _value(grep, "Mems_allowed_list", "grep 26797") == "0"
    taskset = _parse(proc_status.SPEC, (FIXTURES / "taskset-p-cp-1.txt").read_text())
    assert _rows(taskset) == [("process_affinity", "1", "Cpus_allowed", "3", None),
                              ("process_affinity", "1", "Cpus_allowed_list", "0,1", None)]
    threads = _parse(proc_status.SPEC, (FIXTURES / "taskset-acp-1.txt").read_text())
    assert threads.records == 11 and set(threads.tables[HOST_SETTING]["value"]) == {"0,1"}


def test_process_status_mixed_and_hostile() -> None:
    text = ("taskset: failed to get pid 999's affinity: No such process\nName:\tmariadbd\nPid:\t1234\n"
            "Cpus_allowed_list:\t0-3\nName:\tpostgres\nPid:\t77\nCpus_allowed_list:\t4-7\ngarbage line\n")
    result = _parse(proc_status.SPEC, text)
    assert result.records == 2 and [w.line for w in result.warnings] == [8]
    assert _value(result, "Cpus_allowed_list", "postgres 77") == "4-7"
    assert result.notes[0].startswith("1 error line(s)")
    for bad in ("", "Umask:\t0022\n", "hello\n", "\x00\xff"):
        with pytest.raises(ParseError):
            _parse(proc_status.SPEC, bad)
    assert proc_status.SPEC.detect("Name: John\nAge: 42\n", "member") <= 0.5


def test_all_specs_survive_hostile_text() -> None:
    hostile = ["\x00" * 100, "\ufffd" * 10_000, "a" * 2_000_000, "\n" * 100_000, "/proc/irq/", "[", "=", "pid 1's"]
    for spec in HOST_SPECS.values():
        for text in hostile:
            assert 0.0 <= spec.detect(text[:DETECT_HEAD_BYTES], "member") <= 1.0
            try:
                result = _parse(spec, text)
            except ParseError:
                continue
            assert isinstance(result.tables[HOST_SETTING], pl.DataFrame)
