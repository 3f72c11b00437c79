"""Names and schemas of the parsed tables of the host's disks and memory (iostat, /proc/diskstats, /proc/mounts,
vmstat, /proc/pressure, /proc/meminfo); read through :mod:`dbdiag.tables` like every other table."""

from __future__ import annotations

import polars as pl

from dbdiag.tables.types import UTC_TIME

# iostat -x (text or JSON): one row per report and device; the rates and times of the interval that ends at ts.
DISK_IO = "disk_io"
DISK_IO_SCHEMA = {
    "sample": pl.Int32,  # 0, 1, ...: the report's place in the member (iostat's first report without -y is since boot)
    "ts": UTC_TIME,  # the report's time (iostat -t), else null
    "device": pl.String,  # "nvme0n1", "sda", "dm-0" (or its name with -N), "loop0"
    "r_per_s": pl.Float64,  # reads completed per second
    "w_per_s": pl.Float64,
    "d_per_s": pl.Float64,  # discards (sysstat 12)
    "f_per_s": pl.Float64,  # flushes (sysstat 12.3+)
    "read_kb_per_s": pl.Float64,  # kB/s whatever the header's unit (rkB/s, rMB/s, rsec/s)
    "write_kb_per_s": pl.Float64,
    "r_await_ms": pl.Float64,  # mean time of a read, queue included
    "w_await_ms": pl.Float64,
    "d_await_ms": pl.Float64,
    "f_await_ms": pl.Float64,
    "await_ms": pl.Float64,  # sysstat <= 11: all requests together; null in sysstat 12 (derive weights r and w)
    "queue_size": pl.Float64,  # aqu-sz (avgqu-sz): requests in flight on average
    "util_pct": pl.Float64,  # %util: the share of the interval with a request in flight
    "svctm_ms": pl.Float64,  # sysstat <= 11 only (not a service time on parallel devices)
    "source": pl.String,
    "line": pl.Int64,  # the device's line in the member (file:line); JSON: null
}

# /proc/diskstats snapshots: each device's cumulative I/O counters since boot (Documentation/admin-guide/iostats.rst).
DISK_COUNT = "disk_count"
DISK_COUNT_SCHEMA = {
    "snapshot": pl.Int32,  # 0, 1, ... in the member, in order (a TS/date line or a repeated device starts one)
    "ts": UTC_TIME,  # the time line written before the snapshot, else null
    "device": pl.String,
    "reads": pl.Int64,  # reads completed
    "read_sectors": pl.Int64,  # 512-byte sectors read
    "read_ms": pl.Int64,  # milliseconds spent by all reads
    "writes": pl.Int64,
    "write_sectors": pl.Int64,
    "write_ms": pl.Int64,
    "in_flight": pl.Int64,  # I/Os in progress when read (not cumulative)
    "io_ms": pl.Int64,  # milliseconds with at least one I/O in flight (%util's base)
    "weighted_io_ms": pl.Int64,  # sum of each I/O's time in flight (aqu-sz's base)
    "discards": pl.Int64,  # kernel 4.18+, else null
    "discard_ms": pl.Int64,
    "flushes": pl.Int64,  # kernel 5.5+, else null
    "flush_ms": pl.Int64,
    "source": pl.String,
    "line": pl.Int64,
}

# vmstat (procps) reports: one row per line; memory in KiB (vmstat's default unit), rates per second.
VMSTAT_SAMPLE = "vmstat_sample"
VMSTAT_SAMPLE_SCHEMA = {
    "sample": pl.Int32,  # 0, 1, ... per header block; vmstat's first line is the average since boot
    "ts": UTC_TIME,  # the -t column, else null
    "runnable": pl.Int64,  # r: tasks running or waiting for a CPU
    "blocked": pl.Int64,  # b: tasks in uninterruptible sleep (I/O)
    "swap_used_kb": pl.Int64,
    "free_kb": pl.Int64,
    "buffers_kb": pl.Int64,
    "cache_kb": pl.Int64,
    "swap_in_kb_per_s": pl.Int64,  # si
    "swap_out_kb_per_s": pl.Int64,  # so
    "blocks_in_per_s": pl.Int64,  # bi
    "blocks_out_per_s": pl.Int64,  # bo
    "interrupts_per_s": pl.Int64,
    "context_switches_per_s": pl.Int64,
    "user_pct": pl.Int64,
    "system_pct": pl.Int64,
    "idle_pct": pl.Int64,
    "iowait_pct": pl.Int64,
    "steal_pct": pl.Int64,
    "source": pl.String,
    "line": pl.Int64,
}

# /proc/pressure/{cpu,memory,io} (PSI) snapshots: the share of time tasks stalled on the resource.
PRESSURE = "pressure"
PRESSURE_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,  # the time line before the snapshot, else null
    "resource": pl.String,  # "cpu", "memory", "io" (from a "/proc/pressure/memory:" prefix or the file's name), else null
    "kind": pl.String,  # "some" (at least one task stalled) or "full" (all non-idle tasks stalled)
    "avg10_pct": pl.Float64,  # the kernel's running averages over 10, 60 and 300 s
    "avg60_pct": pl.Float64,
    "avg300_pct": pl.Float64,
    "total_us": pl.Int64,  # stall time since boot, microseconds (deltas give the capture's share)
    "source": pl.String,
    "line": pl.Int64,
}

# /proc/meminfo snapshots: every field in kB as the kernel prints it (HugePages_* are counts).
MEMINFO_COUNT = "meminfo_count"
MEMINFO_COUNT_SCHEMA = {
    "snapshot": pl.Int32,
    "ts": UTC_TIME,
    "counter": pl.String,  # MemTotal, MemAvailable, SwapTotal, SwapFree, Dirty, ...
    "value": pl.Int64,
    "source": pl.String,
}

# /proc/mounts (or ``mount`` output): which device holds which directory.
MOUNT = "mount"
MOUNT_SCHEMA = {
    "device": pl.String,  # as mounted: "/dev/nvme0n1p2", "/dev/mapper/vg-data", "tmpfs"
    "mountpoint": pl.String,  # octal escapes (\040 for a space) decoded
    "fstype": pl.String,
    "options": pl.String,
    "source": pl.String,
    "line": pl.Int64,
}

DISKS_MEMORY_SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    DISK_IO: DISK_IO_SCHEMA,
    DISK_COUNT: DISK_COUNT_SCHEMA,
    VMSTAT_SAMPLE: VMSTAT_SAMPLE_SCHEMA,
    PRESSURE: PRESSURE_SCHEMA,
    MEMINFO_COUNT: MEMINFO_COUNT_SCHEMA,
    MOUNT: MOUNT_SCHEMA,
}
