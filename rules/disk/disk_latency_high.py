"""A block device whose requests wait far longer than its kind delivers, or that is saturated.

What it detects:
    A device in ``iostat -x`` reports (text or JSON; else /proc/diskstats snapshots with their time lines, read
    as iostat would) whose mean request time (``await``: queue and
    service, weighted by requests over its busy reports) is above AWAIT_LIMIT_MS of its kind, with the
    median busy report above it too (a steady state, not one spike); or a device saturated: busy
    (%util >= SATURATED_UTIL_PCT = 90) in at least SATURATED_SHARE = 50% of the reports while its requests wait at least
    SATURATED_AWAIT_MS = 10 ms. The database files it holds are named (from /proc/mounts and the
    database's datadir / log directory settings).

Why it matters:
    Every commit waits for its redo log (InnoDB) or WAL (PostgreSQL) write to reach the disk, and every
    buffer-pool miss for a read. When the volume under the database takes 20 ms a write instead of the
    0.1-1 ms an SSD gives, commits queue behind each other and throughput falls to what the volume
    completes: CPU idle, %iowait high, "the database is slow" while nothing in it is. %util alone does not
    say a device is full (an NVMe or a RAID serves many requests at once at 100%): it is read with the
    wait.

How it is detected:
    Inputs: the ``disks`` metric (derive/disks.py: ``disk_io`` per device, a report busy when the device
    completed BUSY_IOPS = 5 requests a second; iostat's first report since boot left out), its kind from
    ``queue/rotational`` and the name (``host_setting``): AWAIT_LIMIT_MS = nvme 2 ms, ssd 5 ms, hdd and
    unknown 30 ms (a virtio disk says rotational 1 even on flash, so the hdd limit is the cautious one,
    and saturation catches the rest). At least MIN_BUSY_REPORTS = 3 busy reports. Critical when the
    device holds database files and its wait is at least 2x its limit or it is saturated; warning
    otherwise. Its cost: when it holds the redo log / WAL, the share of DB time in COMMIT statements
    (``sql_profile``), which wait on it.

Remediation:
    Confirm on the volume (iostat, fio sync writes on its file system), find what caps it (a cloud
    volume's IOPS, an I/O throttle, the disk under a loop or device-mapper device, a RAID rebuild,
    other tenants), then give the log its own low-latency volume or the volume the IOPS the commits
    need; meanwhile the engine's own relaxed durability setting, with its cost said.

References:
    Linux Documentation/admin-guide/iostats.rst and iostat(1) (await, aqu-sz, %util); fio(1)
    (``--fdatasync=1``); MariaDB/MySQL documentation, innodb_flush_log_at_trx_commit and
    innodb_log_group_home_dir; PostgreSQL documentation, "WAL Configuration" and synchronous_commit;
    Brendan Gregg, "Systems Performance", 2nd ed., ch. 9 (disks).
"""

from __future__ import annotations

from typing import Any

from dbdiag import tables as t
from dbdiag.findings import SHARE_OF_DB_TIME, Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.vocabulary.disks import BUSY_IOPS, SATURATED_UTIL_PCT

RULE_ID = "disk-latency-high"

AWAIT_LIMIT_MS = {"nvme": 2.0, "ssd": 5.0, "hdd": 30.0, "unknown": 30.0}
SATURATED_SHARE = 0.5
SATURATED_AWAIT_MS = 10.0
MIN_BUSY_REPORTS = 3
CRITICAL_FACTOR = 2.0
# Statements that wait for the log to reach the disk (their time is the commit's fsync).
COMMIT_FINGERPRINTS = ("commit", "commit work", "end", "end transaction")


def check(inp: RuleInput) -> Verdict:
    disks = inp.metric(t.DISKS_METRIC) or []
    judged = [d for d in disks if (d.get("busy_reports") or 0) >= MIN_BUSY_REPORTS and d.get("await_ms") is not None]
    if not judged:
        raise Skip(f"no device with {MIN_BUSY_REPORTS} iostat reports of {BUSY_IOPS:g} requests/s or more (iostat -x -t 1 while the database works)")
    findings, measured = [], []
    for disk in judged:
        limit = AWAIT_LIMIT_MS[disk["kind"]]
        slow = disk["await_ms"] > limit and (disk.get("await_p50_ms") or 0.0) > limit
        saturated = (disk.get("saturated_share") or 0.0) >= SATURATED_SHARE and disk["await_ms"] >= SATURATED_AWAIT_MS
        measured.append(f"{disk['device']} ({disk['kind']}): await {disk['await_ms']:.2f} ms (limit {limit:g}), "
                        f"{SATURATED_UTIL_PCT:g}% util or more in {disk.get('saturated_share', 0.0) * 100:.0f}% of reports")
        if slow or saturated:
            findings.append(_finding(inp, disk, limit, saturated))
    return Verdict(findings=findings, measured="; ".join(measured))


def _finding(inp: RuleInput, disk: dict[str, Any], limit: float, saturated: bool) -> Finding:
    device, files = disk["device"], disk.get("database_files") or []
    commit = _commit_share(inp) if disk.get("holds_log") else None
    critical = bool(files) and (saturated or disk["await_ms"] >= CRITICAL_FACTOR * limit)
    what = f"{device} ({_kind_words(disk)})"
    held = f", which holds {_files_text(files)}," if files else ""
    state = f"saturated (%util {disk.get('util_pct') or 0:.0f}% on average)" if saturated else f"slow for its kind (limit {limit:g} ms)"
    title = (f"{what}{held} is {state}: requests wait {disk['await_ms']:.1f} ms on average (p95 {disk['await_p95_ms']:.1f} ms) "
             f"at {disk['iops']:.0f} requests/s")
    impact: dict[str, Any] = {
        "description": (f"every request to {device} waits {disk['await_ms']:.1f} ms"
                        + (f"; COMMIT holds {commit['share'] * 100:.1f}% of DB time (median {commit['p50_ms']:.1f} ms)" if commit else "")),
        "device": device, "await_ms": disk["await_ms"], "await_p95_ms": disk["await_p95_ms"], "util_pct": disk.get("util_pct"),
        "iops": disk["iops"], "limit_ms": limit, "saturated": saturated,
    }
    if commit:
        impact[SHARE_OF_DB_TIME] = commit["share"]
    evidence = [Evidence(
        title=f"{device} in iostat -x ({disk['busy_reports']} busy reports of {disk['reports']})",
        columns=("measure", "value"),
        rows=tuple((name, value) for name, value in (
            ("requests/s (reads, writes)", f"{disk['iops']:.1f} ({disk.get('reads_per_s') or 0:.1f}, {disk.get('writes_per_s') or 0:.1f})"),
            ("await mean / p50 / p95 / max, ms", f"{disk['await_ms']:.2f} / {disk['await_p50_ms']:.2f} / {disk['await_p95_ms']:.2f} / {disk['await_max_ms']:.2f}"),
            ("read await, write await, ms", f"{_ms(disk.get('read_await_ms'))}, {_ms(disk.get('write_await_ms'))}"),
            ("%util mean / max", f"{disk.get('util_pct') or 0:.1f} / {disk.get('util_max_pct') or 0:.1f}"),
            (f"reports with %util >= {SATURATED_UTIL_PCT:g}", f"{(disk.get('saturated_share') or 0) * 100:.0f}%"),
            ("requests in flight (aqu-sz)", f"{disk.get('queue_size') or 0:.2f}"),
            ("kind", f"{_kind_words(disk)}; limit {limit:g} ms"),
        )),
    )]
    if disk.get("mounts") or files:
        rows = [("mount", m["mountpoint"], m["fstype"], m["source"]) for m in disk.get("mounts") or []]
        rows += [(f["setting"], f["path"], "", f["source"]) for f in files]
        evidence.append(Evidence(title=f"What {device} holds", columns=("what", "path", "fs", "source"), rows=tuple(rows)))
    if commit:
        evidence.append(Evidence(title="Statements that wait for the log", columns=("statement", "calls", "share of DB time", "median ms", "source"),
                                 rows=((commit["fingerprint"], commit["calls"], f"{commit['share'] * 100:.1f}%", f"{commit['p50_ms']:.1f}", commit["source"]),)))
    sources = tuple(dict.fromkeys([disk["source"], *(m["source"] for m in disk.get("mounts") or []), *(f["source"] for f in files)]))
    return Finding(
        rule=RULE_ID, scope=Scope.HOST, severity=Severity.CRITICAL if critical else Severity.WARNING,
        title=title, subject=device, impact=impact, evidence=tuple(evidence),
        remediation=_remediation(inp, disk, files), sources=sources,
        objects=(f"device {device}", *([f"fingerprint {commit['fp_id']}"] if commit else [])),
    )


def _commit_share(inp: RuleInput) -> dict[str, Any] | None:
    summary = inp.metric(t.SQL_SUMMARY_METRIC) or {}
    total = summary.get("db_time_s") or 0.0
    rows = [r for r in inp.metric(t.SQL_PROFILE_METRIC) or [] if (r.get("fingerprint") or "").strip().rstrip(";") in COMMIT_FINGERPRINTS]
    if not rows or total <= 0:
        return None
    top = max(rows, key=lambda r: r.get("total_time_s") or 0.0)
    return {"fingerprint": top["fingerprint"], "fp_id": top.get("fp_id"), "calls": top["calls"], "share": round((top.get("total_time_s") or 0.0) / total, 4),
            "p50_ms": (top.get("p50_s") or 0.0) * 1000, "source": (top.get("worst_sample") or {}).get("where") or ""}


def _kind_words(disk: dict[str, Any]) -> str:
    kind = {"nvme": "NVMe", "ssd": "SSD, rotational 0", "hdd": "rotational 1", "unknown": "kind not captured"}[disk["kind"]]
    return f"{kind}, a {disk['device'].rstrip('0123456789')} device" if disk.get("virtual") else kind


def _files_text(files: list[dict[str, Any]]) -> str:
    names = {"datadir": "the data directory", "data_directory": "the data directory", "innodb_log_group_home_dir": "the redo log",
             "innodb_data_home_dir": "the system tablespace", "innodb_undo_directory": "the undo logs", "log_bin_basename": "the binary log"}
    return ", ".join(dict.fromkeys(names.get(f["setting"], f["setting"]) for f in files))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _remediation(inp: RuleInput, disk: dict[str, Any], files: list[dict[str, Any]]) -> str:
    device = disk["device"]
    mount = (disk.get("mounts") or [{}])[0].get("mountpoint") or "<a directory on the volume>"
    engine = ((inp.metric(t.ENGINE_VERSION_METRIC) or {}).get("engine") or "").lower()
    lines = [
        f"1. Confirm: iostat -x -t 1 60 (w_await, aqu-sz and %util of {device}), and the sync-write latency of the file system",
        f"   the database writes to: fio --name=logsync --directory={mount} --rw=write --bs=4k --size=256m --ioengine=sync",
        "   --fdatasync=1 --runtime=30 --time_based --output-format=json   (p99 of the sync writes: a log volume needs single-digit ms)",
        f"2. Find what caps {device} at {disk['iops']:.0f} requests/s: a cloud volume's provisioned IOPS or burst balance (its console);",
        "   an I/O throttle (cgroup v1: grep . /sys/fs/cgroup/blkio/*/blkio.throttle.*_device; v2: cat /sys/fs/cgroup/*/io.max);",
    ]
    below = {"loop": "losetup -l", "dm-": "dmsetup table; lsblk -s", "md": "cat /proc/mdstat", "drbd": "drbdadm status", "rbd": "rbd showmapped"}
    command = next((c for prefix, c in below.items() if device.startswith(prefix)), None)
    if disk.get("virtual") and command:
        lines.append(f"   what {device} sits on: {command} (its latency is that of the devices below it);")
    lines.append("   a RAID rebuild or a failing disk (smartctl -a); other work on the same volume (pidstat -d 1, iotop -o).")
    lines.append("3. Give the log a volume of its own with low write latency (a local NVMe/SSD, or provisioned IOPS above the peak), or the")
    lines.append("   volume the IOPS the commits need; with the server stopped, move the files and point the setting at them:")
    if engine in ("mariadb", "mysql", "percona"):
        lines.append("   innodb_log_group_home_dir in the [mysqld] section of the configuration file (the redo log).")
        lines.append("4. Until then, if losing up to a second of commits on a crash of the host is acceptable:")
        lines.append("   SET GLOBAL innodb_flush_log_at_trx_commit = 2;")
    elif engine == "postgresql":
        lines.append("   pg_wal (a symbolic link from the data directory to the new volume).")
        lines.append("4. Until then, for sessions whose last commits may be lost on a crash (never corrupted):")
        lines.append("   SET synchronous_commit = off;")
    else:
        lines.append("   the engine's redo log / WAL directory setting.")
    if not files:
        lines.append("Which database files live on this device was not captured: collect /proc/mounts and the database's settings.")
    return "\n".join(lines)


RULE = Rule(
    id=RULE_ID,
    title="Disk requests wait too long (slow or saturated volume)",
    area="disk",
    requires=((t.DISK_IO, t.DISK_COUNT),),
    check=check,
    doc=__doc__ or "",
)
