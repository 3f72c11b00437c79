"""An NVMe or SSD block device behind an I/O scheduler instead of ``none``.

What it detects:
    Disks whose ``/sys/block/DEV/queue/scheduler`` selects ``mq-deadline``, ``kyber``, ``bfq``
    (or the legacy ``cfq``/``deadline``/``noop``) while the device is NVMe (name ``nvme*``) or
    reports itself non-rotational (``queue/rotational`` = 0).

Why it matters:
    Flash devices have deep internal queues and order requests better than the host can. A
    software scheduler in front of them adds a lock and per-request work on every I/O, caps
    queue depth (kyber, bfq) and adds latency to fsync-heavy database writes (redo/WAL) without
    any seek to save. ``none`` is the kernel's default for NVMe for that reason; SATA/SAS SSDs
    often still get ``mq-deadline`` from distribution udev rules.

How it is detected:
    Inputs: ``host_setting`` rows of category ``block`` (``scheduler`` and ``rotational`` per
    device, from ``grep . /sys/block/*/queue/{scheduler,rotational}`` or the bare files).
    Virtual devices (loop, ram, zram, dm-, md, nbd, sr) are left out. A device is flash when its
    name starts with ``nvme`` or its ``rotational`` is 0; it fires when its scheduler is not
    EXPECTED_SCHEDULER = ``none``. Rotational disks pass (a scheduler helps them); a device
    whose rotational flag was not captured and whose name is not nvme is not judged.

Remediation:
    Now: ``echo none > /sys/block/DEV/queue/scheduler``. Persist with a udev rule, e.g.
    ``/etc/udev/rules.d/60-io-scheduler.rules``:
    ``ACTION=="add|change", KERNEL=="sd[a-z]*|nvme[0-9]*n[0-9]*", ATTR{queue/rotational}=="0", ATTR{queue/scheduler}="none"``
    then ``udevadm control --reload && udevadm trigger --subsystem-match=block``. Virtual
    machines: the guest's virtio disk usually says rotational 1 even on flash; set ``none``
    there too when the host storage is flash.

References:
    Linux kernel Documentation/block/switching-sched.rst and blk-mq.rst; MySQL/MariaDB
    documentation on I/O schedulers for InnoDB; PostgreSQL wiki "Tuning Your PostgreSQL Server";
    TiDB "Tune Operating System Performance" (I/O scheduler); udev(7).
"""

from __future__ import annotations

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import BlockDevice, block_devices, database_evidence

RULE_ID = "io-scheduler-not-none"

EXPECTED_SCHEDULER = "none"
FLASH_KINDS = ("nvme", "ssd")


def check(inp: RuleInput) -> Verdict:
    devices = block_devices(inp)
    if not devices:
        raise Skip("no disk's queue/scheduler captured: needs grep . /sys/block/*/queue/scheduler /sys/block/*/queue/rotational")
    judged, unknown, wrong = [], [], []
    for device in devices:
        scheduler = device.scheduler.value if device.scheduler else ""
        if device.kind in FLASH_KINDS:
            judged.append(f"{device.name} ({device.kind}): {scheduler}")
            if scheduler != EXPECTED_SCHEDULER:
                wrong.append(device)
        elif device.kind == "hdd":
            judged.append(f"{device.name} (rotational): {scheduler}, a scheduler is right for it")
        else:
            unknown.append(f"{device.name}: {scheduler}, not judged (rotational flag not captured, not nvme)")
    measured = "; ".join(judged + unknown)
    findings = [_finding(inp, device) for device in wrong]
    return Verdict(findings=findings, measured=f"{measured}; flash devices should use {EXPECTED_SCHEDULER}")


def _finding(inp: RuleInput, device: BlockDevice) -> Finding:
    assert device.scheduler is not None
    scheduler = device.scheduler.value
    rows = [("queue/scheduler", scheduler, device.scheduler.choices or "", device.scheduler.source)]
    if device.rotational is not None:
        rows.append(("queue/rotational", device.rotational.value, "", device.rotational.source))
    evidence = [Evidence(title=f"{device.name}: block queue settings", columns=("file", "value", "choices", "source"), rows=tuple(rows))]
    databases = database_evidence(inp)
    if databases:
        evidence.append(Evidence(title="Database on this host", text="\n".join(databases)))
    why = "NVMe" if device.kind == "nvme" else "SSD, rotational = 0"
    match = 'KERNEL=="nvme[0-9]*n[0-9]*"' if device.kind == "nvme" else 'KERNEL=="sd[a-z]*|vd[a-z]*|xvd[a-z]*", ATTR{queue/rotational}=="0"'
    offered = (device.scheduler.choices or "").split()
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=f"{device.name} ({why}) uses the {scheduler} I/O scheduler; expected: {EXPECTED_SCHEDULER}",
        subject=device.name,
        impact={"description": f"per-request scheduling overhead and added latency on every I/O to {device.name}",
                "device": device.name, "scheduler": scheduler, "kind": device.kind},
        evidence=tuple(evidence),
        remediation="\n".join([
            f"1. Now: echo none > /sys/block/{device.name}/queue/scheduler"
            + ("" if not offered or EXPECTED_SCHEDULER in offered else "   (none is not offered: the kernel lacks blk-mq for it)"),
            f"   check: cat /sys/block/{device.name}/queue/scheduler  -> [none] ...",
            "2. Persist with a udev rule, /etc/udev/rules.d/60-io-scheduler.rules:",
            f'   ACTION=="add|change", {match}, ATTR{{queue/scheduler}}="none"',
            "   then: udevadm control --reload && udevadm trigger --subsystem-match=block",
            "3. If a tuned profile or elevator= on the kernel command line sets the scheduler, change it there too.",
        ]),
        sources=tuple(dict.fromkeys(row[3] for row in rows)),
    )


RULE = Rule(
    id=RULE_ID,
    title="NVMe/SSD not on the none I/O scheduler",
    area="config",
    requires=((t.HOST_SETTING,),),
    check=check,
    doc=__doc__ or "",
)
