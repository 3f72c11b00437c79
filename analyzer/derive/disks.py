"""iostat's per-device reports -> the ``disks`` metric: each device's load, latency and utilisation over the
capture, its kind, and the database files it holds.

Reads ``disk_io`` (parsers/iostat_text.py, iostat_json.py), ``disk_count`` (/proc/diskstats snapshots, read as
iostat reports by ``diskstat_reports``), ``host_setting`` (``block`` rows: each device's
``queue/rotational``), ``mount`` (/proc/mounts) and ``db_setting`` (where the database keeps its files). A
sample of what it gives, for a throttled volume under MariaDB (fixtures/disk)::

    disk_io  sample 1..19  loop0  w/s 49-60  w_await 19.8-23.2  aqu-sz 1.0-1.2  %util 98.4-100
      -> {"device": "loop0", "kind": "hdd", "virtual": true, "reports": 19, "busy_reports": 19, "iops": 52.4,
          "await_ms": 21.5, "await_p50_ms": 21.4, "await_p95_ms": 23.1, "write_await_ms": 21.5,
          "util_pct": 99.6, "saturated_share": 1.0, "queue_size": 1.1,
          "mounts": [{"mountpoint": "/tmp/disk.4KYi/mnt", "fstype": "ext4", "source": "os/mounts.txt:21"}],
          "database_files": [{"setting": "datadir", "path": "/tmp/disk.4KYi/mnt/mysql/", "source": "db/global_variables.tsv"}, ...],
          "holds_log": true, ...}

A report is *busy* when the device completed at least BUSY_IOPS requests per second in it: the latency of
an idle device is a handful of requests and says nothing. Latencies are weighted by requests (the mean
time a request waited), percentiles are over the busy reports' means. iostat without ``-y`` prints the
average since boot first: a member's first report is left out when it has two or more (with ``-y`` that
drops one real report of many; without it, the first would mix days of history into the capture's). When the same
device comes from several members (``iostat -x`` text and JSON of one run, or iostat and /proc/diskstats),
iostat speaks before diskstats, then the member with the most busy reports, then the one with times.
"""

from __future__ import annotations

import posixpath
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import ordered_snapshots
from dbdiag.host_values import Value, device_kind
from dbdiag.patterns import lazy_compile
from dbdiag.vocabulary.disks import BUSY_IOPS, SATURATED_UTIL_PCT

VIRTUAL_DEVICE_RE = lazy_compile(r"^(?:loop|dm-|md|nbd|drbd|rbd|zram|ram)\d")
# Settings that name where a database keeps its files (relative ones are under the data directory).
DATA_DIR_SETTINGS = ("datadir", "data_directory")
FILE_DIR_SETTINGS = ("innodb_log_group_home_dir", "innodb_data_home_dir", "innodb_undo_directory", "log_bin_basename")


def disk_summary(tables: dict[str, pl.DataFrame]) -> list[dict[str, Any]] | None:
    """The ``disks`` metric (module docstring), busiest device first; None without iostat or diskstats reports."""
    io = tables.get(t.DISK_IO)
    if io is not None and io.height:
        io = iostat_reports(io).with_columns(pl.lit(True).alias("iostat"))
    counted = diskstat_reports(tables.get(t.DISK_COUNT))
    parts = [frame for frame in (io, counted) if frame is not None and frame.height]
    if not parts:
        return None
    io = pl.concat(parts, how="diagonal_relaxed")
    iops = pl.sum_horizontal(pl.col("r_per_s").fill_null(0.0), pl.col("w_per_s").fill_null(0.0), pl.col("d_per_s").fill_null(0.0))
    weighted = pl.sum_horizontal(
        pl.col("r_per_s").fill_null(0.0) * pl.col("r_await_ms").fill_null(0.0),
        pl.col("w_per_s").fill_null(0.0) * pl.col("w_await_ms").fill_null(0.0),
        pl.col("d_per_s").fill_null(0.0) * pl.col("d_await_ms").fill_null(0.0),
    )
    io = io.with_columns(iops.alias("iops"), pl.coalesce(pl.col("await_ms"), pl.when(iops > 0).then(weighted / iops)).alias("await"))
    busy = pl.col("iops") >= BUSY_IOPS
    per = io.group_by("device", "source").agg(
        pl.len().alias("reports"), busy.sum().alias("busy_reports"), pl.col("iops").mean().alias("iops"),
        pl.col("r_per_s").mean().alias("reads_per_s"), pl.col("w_per_s").mean().alias("writes_per_s"),
        pl.col("read_kb_per_s").mean(), pl.col("write_kb_per_s").mean(),
        _weighted("await", "iops", busy).alias("await_ms"), _weighted("r_await_ms", "r_per_s", busy).alias("read_await_ms"),
        _weighted("w_await_ms", "w_per_s", busy).alias("write_await_ms"),
        pl.col("await").filter(busy).median().alias("await_p50_ms"), pl.col("await").filter(busy).quantile(0.95, "nearest").alias("await_p95_ms"),
        pl.col("await").filter(busy).max().alias("await_max_ms"),
        pl.col("util_pct").mean().alias("util_pct"), pl.col("util_pct").max().alias("util_max_pct"),
        (pl.col("util_pct") >= SATURATED_UTIL_PCT).mean().alias("saturated_share"), pl.col("queue_size").mean().alias("queue_size"),
        pl.col("ts").min().alias("first_ts"), pl.col("ts").max().alias("last_ts"), pl.col("line").min().alias("line"),
        pl.col("ts").is_not_null().sum().alias("timed"), pl.col("iostat").any().alias("iostat"),
    )
    per = per.sort("device", "iostat", "busy_reports", "timed", "reports", "source", descending=[False, True, True, True, True, False])
    chosen = per.unique("device", keep="first", maintain_order=True)
    rotational = _rotational(tables.get(t.HOST_SETTING))
    mounts = _mounts(tables.get(t.MOUNT))
    files = _database_files(tables.get(t.DB_SETTING))
    out = []
    for row in chosen.sort("iops", "device", descending=[True, False], nulls_last=True).to_dicts():
        device = row["device"]
        on = [m for m in mounts if posixpath.basename(m["device"]) == device]
        held = [f for f in files if _mount_of(f["path"], mounts) in on]
        log = _log_path(files)
        source = f"{row['source']}:{row['line']}" if row["line"] is not None else row["source"]
        out.append({
            **{k: _rounded(v) for k, v in row.items() if k not in ("source", "line", "timed", "iostat")},
            "measured_by": "iostat" if row["iostat"] else "/proc/diskstats",
            "kind": device_kind(device, rotational.get(device)),
            "rotational": rotational[device].value if device in rotational else None,
            "virtual": bool(VIRTUAL_DEVICE_RE.match(device)),
            "mounts": [{"mountpoint": m["mountpoint"], "fstype": m["fstype"], "source": m["where"]} for m in on],
            "database_files": held,
            "holds_log": None if log is None or not mounts else _mount_of(log, mounts) in on,
            "source": source,
            "also_in": sorted(set(per.filter(pl.col("device") == device)["source"]) - {row["source"]}),
        })
    return out


def iostat_reports(io: pl.DataFrame) -> pl.DataFrame:
    """``disk_io`` without each member's first report when it has more (without ``-y``, the average since boot)."""
    return io.filter(~((pl.col("sample") == 0) & (pl.col("sample").max().over("source") >= 1)))


def diskstat_reports(counts: pl.DataFrame | None) -> pl.DataFrame | None:
    """``/proc/diskstats`` snapshots as iostat's reports: one row per device and pair of consecutive snapshots (in
    ``snapshots.ordered_snapshots``' order), with iostat's formulas: awaits are the milliseconds spent over the
    requests completed, per-second rates, %util (io_ms) and aqu-sz (weighted_io_ms) over the seconds between the two
    snapshots' time lines; a pair without both times is left out."""
    if counts is None or counts.height == 0:
        return None
    seq = ordered_snapshots(counts).sort("device", "seq")
    files = " -> ".join(dict.fromkeys(seq.sort("seq")["source"].to_list()))
    grown = {name: pl.col(name) - pl.col(name).shift(1).over("device") for name in (
        "reads", "read_sectors", "read_ms", "writes", "write_sectors", "write_ms", "io_ms", "weighted_io_ms", "discards", "discard_ms",
        "flushes", "flush_ms")}
    seconds = (pl.col("ts") - pl.col("ts").shift(1).over("device")).dt.total_microseconds() / 1e6
    deltas = seq.with_columns(**grown, seconds=seconds).filter(pl.col("seq") != pl.col("seq").min().over("device"))
    # a reboot or a wrapped counter between two snapshots; a pair without both times (no rate, no %util) says too little
    deltas = deltas.filter((pl.min_horizontal(*(pl.col(name).fill_null(0) for name in grown)) >= 0) & (pl.col("seconds") > 0))
    per_s = pl.col("seconds")
    return t.conform(t.DISK_IO, deltas.select(
        pl.col("seq").alias("sample"), "ts", "device",
        (pl.col("reads") / per_s).alias("r_per_s"), (pl.col("writes") / per_s).alias("w_per_s"),
        (pl.col("discards") / per_s).alias("d_per_s"), (pl.col("flushes") / per_s).alias("f_per_s"),
        (pl.col("read_sectors") * 0.5 / per_s).alias("read_kb_per_s"), (pl.col("write_sectors") * 0.5 / per_s).alias("write_kb_per_s"),
        *(pl.when(pl.col(count) > 0).then(pl.col(ms) / pl.col(count)).alias(name) for count, ms, name in (
            ("reads", "read_ms", "r_await_ms"), ("writes", "write_ms", "w_await_ms"), ("discards", "discard_ms", "d_await_ms"),
            ("flushes", "flush_ms", "f_await_ms"))),
        (pl.col("weighted_io_ms") / (per_s * 1000)).alias("queue_size"), (pl.col("io_ms") / (per_s * 10)).alias("util_pct"),
        pl.lit(files).alias("source"), pl.col("line"),
    )).with_columns(pl.lit(False).alias("iostat"))


def _weighted(value: str, weight: str, busy: pl.Expr) -> pl.Expr:
    """The mean of ``value`` weighted by ``weight`` over the busy reports: the mean time of a request."""
    keep = busy & pl.col(value).is_not_null() & pl.col(weight).is_not_null()
    total = pl.col(weight).filter(keep).sum()
    return pl.when(total > 0).then((pl.col(value) * pl.col(weight)).filter(keep).sum() / total)


def _rounded(value: Any) -> Any:
    return round(value, 3) if isinstance(value, float) else value


def _rotational(settings: pl.DataFrame | None) -> dict[str, Value]:
    if settings is None or settings.height == 0:
        return {}
    rows = settings.filter((pl.col("category") == "block") & (pl.col("name") == "rotational"))
    return {row["subject"]: Value(row["value"], None, row["source"]) for row in rows.to_dicts() if row["subject"]}


def _mounts(frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None or frame.height == 0:
        return []
    return [{**row, "where": f"{row['source']}:{row['line']}"} for row in frame.filter(pl.col("device").str.starts_with("/dev/")).to_dicts()]


def _mount_of(path: str, mounts: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The mount holding ``path``: the longest mountpoint it is under."""
    under = [m for m in mounts if path == m["mountpoint"] or path.startswith(m["mountpoint"].rstrip("/") + "/")]
    return max(under, key=lambda m: len(m["mountpoint"]), default=None)


def _log_path(files: list[dict[str, Any]]) -> str | None:
    """Where the redo log (InnoDB: innodb_log_group_home_dir, else the data directory) or the WAL (PostgreSQL:
    pg_wal under the data directory) is; None when no setting says."""
    by_setting = {f["setting"]: f["path"] for f in files}
    if "innodb_log_group_home_dir" in by_setting:
        return by_setting["innodb_log_group_home_dir"]
    if "data_directory" in by_setting:
        return posixpath.join(by_setting["data_directory"], "pg_wal")
    return by_setting.get("datadir")


def _database_files(settings: pl.DataFrame | None) -> list[dict[str, Any]]:
    """Where the database keeps its files, as absolute paths: {"setting", "path", "source"}."""
    if settings is None or settings.height == 0:
        return []
    values = {row["name"]: row for row in settings.filter(pl.col("kind") != "status").to_dicts() if row["value"]}
    data = next((values[name] for name in DATA_DIR_SETTINGS if name in values and values[name]["value"].startswith("/")), None)
    out = []
    if data is not None:
        out.append({"setting": data["name"], "path": data["value"], "source": data["source"]})
    for name in FILE_DIR_SETTINGS:
        row = values.get(name)
        if row is None or not row["value"].strip():
            continue
        path = row["value"].strip()
        if not path.startswith("/"):
            if data is None:
                continue
            path = posixpath.normpath(posixpath.join(data["value"], path))
        out.append({"setting": name, "path": path, "source": row["source"]})
    return out
