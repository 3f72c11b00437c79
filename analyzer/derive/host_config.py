"""Host configuration as read from the capture, and the checks the report shows as a table.

Inputs: ``host_setting`` (sysctl, /proc/cmdline, THP and block-queue choice files, per-process
affinity), ``db_setting`` (buffer pool sizes), ``numa_node`` / ``topology`` / ``numa_counter`` /
``host_fact`` for the node count and the RAM.

The lookups (``sysctls``, ``thp``, ``cmdline``, ``block_devices``, ``node_count``, ``node_sizes_mb``,
``ram_mb``, ``database_process_affinity``, ``database_evidence``, ``db_value``, ``buffer_pool``) are
shared with the config rules (rules/config/), so that the table and the findings read the same values.
``host_config_checks`` gives the "Host configuration" rows: setting, value, recommended, why,
status ("ok", "attention", "unknown") and source. Only settings present in the capture get a row.

>>> frame = t.conform(t.HOST_SETTING, pl.DataFrame({"category": ["sysctl"], "name": ["vm.swappiness"],
...     "value": ["60"], "source": ["sysctl.txt"]}))
>>> [(r["setting"], r["value"], r["status"]) for r in host_config_checks({t.HOST_SETTING: frame})]
[('vm.swappiness', '60', 'attention')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.cpulist import cpu_list_or_none
from dbdiag.host_values import BlockDevice, ProcessAffinity, Value, device_kind
from dbdiag.patterns import lazy_compile
from dbdiag.settings import setting, size_bytes
from dbdiag.units import gib, share_text
from dbdiag.vocabulary.kernel import CPU_ISOLATION_PARAMETERS
from dbdiag.vocabulary.processes import HOST_DATABASE_PROCESSES

# Server processes of the databases (and their cluster parts) dbdiag knows, as comm/process names.
DATABASE_PROCESS_RE = lazy_compile("^(" + "|".join(map(re.escape, HOST_DATABASE_PROCESSES)) + ")$")
# Block devices that are not disks: their scheduler does not matter.
VIRTUAL_BLOCK_RE = lazy_compile(r"^(loop|ram|zram|sr|fd|nbd|md|dm-)\d*")

# CFS tunables worth showing when a kernel still exposes them as sysctls (tuned profiles set them).
SCHED_TUNABLES = (
    "kernel.sched_migration_cost_ns", "kernel.sched_min_granularity_ns",
    "kernel.sched_wakeup_granularity_ns", "kernel.sched_latency_ns",
)
SWAPPINESS_MAX = 10
SOMAXCONN_MIN = 1024
INNODB_POOL_MIN_SHARE_PCT = 50.0
SHARED_BUFFERS_MIN_SHARE_PCT = 10.0


@dataclass(frozen=True)
class Amount:
    """A quantity (node count, RAM in MB) and where it came from."""

    value: int
    source: str


def host_rows(tables: dict[str, pl.DataFrame], category: str) -> pl.DataFrame:
    frame = tables.get(t.HOST_SETTING)
    if frame is None or frame.height == 0:
        return t.empty(t.HOST_SETTING)
    return frame.filter(pl.col("category") == category)


def _value(row: dict[str, Any]) -> Value:
    return Value(str(row["value"] if row["value"] is not None else "").strip(), row["choices"], row["source"] or "")


def sysctls(tables: dict[str, pl.DataFrame]) -> dict[str, Value]:
    """Every sysctl by its dotted name (as the sysctl parser spells it); a later row wins, as in sysctl.d."""
    rows = host_rows(tables, "sysctl").filter(pl.col("name").is_not_null() & (pl.col("value").str.strip_chars() != ""))
    return {row["name"]: _value(row) for row in rows.to_dicts()}


def cmdline(tables: dict[str, pl.DataFrame]) -> dict[str, Value] | None:
    """Kernel command-line parameters by name; None when no /proc/cmdline was captured."""
    rows = host_rows(tables, "cmdline")
    if rows.height == 0:
        return None
    return {row["name"]: _value(row) for row in rows.to_dicts() if row["name"]}


def cmdline_sources(tables: dict[str, pl.DataFrame]) -> list[str]:
    return sorted(set(host_rows(tables, "cmdline")["source"].drop_nulls().to_list()))


def thp(tables: dict[str, pl.DataFrame]) -> dict[str, Value]:
    """THP ``enabled``, ``defrag``, ``shmem_enabled`` of the top directory.

    Files below a subdirectory (subject ``khugepaged``: a 0/1 ``defrag``; ``hugepages-2048kB``:
    a per-size ``enabled`` that usually says ``inherit``) are not these settings.
    """
    rows = host_rows(tables, "thp").filter(pl.col("subject").is_null() & (pl.col("value").str.strip_chars() != ""))
    return {row["name"]: _value(row) for row in rows.to_dicts() if row["name"] in ("enabled", "defrag", "shmem_enabled")}


def block_devices(tables: dict[str, pl.DataFrame]) -> list[BlockDevice]:
    """Disks with a captured scheduler, virtual devices (loop, zram, dm-...) left out."""
    per_device: dict[str, dict[str, Value]] = {}
    for row in host_rows(tables, "block").to_dicts():
        device, name = (row["subject"] or "").strip(), row["name"]
        if device and name in ("scheduler", "rotational"):
            per_device.setdefault(device, {})[name] = _value(row)
    return [
        BlockDevice(device, device_kind(device, found.get("rotational")), found.get("scheduler"), found.get("rotational"))
        for device, found in sorted(per_device.items())
        if "scheduler" in found and not VIRTUAL_BLOCK_RE.match(device)
    ]


def node_count(tables: dict[str, pl.DataFrame]) -> Amount | None:
    """NUMA nodes from numa_node, topology, numastat's node columns or the numactl/lscpu node count
    fact; the largest wins (lscpu may list fewer nodes than a memory-only node adds)."""
    counts: list[Amount] = []
    for name in (t.NUMA_NODE, t.TOPOLOGY, t.NUMA_COUNTER):
        frame = tables.get(name)
        if frame is not None and frame.height and frame["node"].drop_nulls().len():
            counts.append(Amount(frame["node"].drop_nulls().n_unique(), _first_source(frame)))
    facts = tables.get(t.HOST_FACT)
    if facts is not None and facts.height:
        for row in facts.filter(pl.col("key").is_in(["numa_node_count", "numa_nodes"])).to_dicts():
            if (row["value"] or "").strip().isdigit():
                counts.append(Amount(int(row["value"].strip()), row["source"] or ""))
    return max(counts, key=lambda amount: amount.value) if counts else None


def node_sizes_mb(tables: dict[str, pl.DataFrame]) -> tuple[dict[int, int], str] | None:
    """Memory per node in MB: numa_node.size_mb, else numastat -m / node meminfo MemTotal.

    None when no input gives every node a positive size.
    """
    nodes = tables.get(t.NUMA_NODE)
    if nodes is not None and nodes.height:
        sized = nodes.filter(pl.col("size_mb").is_not_null() & pl.col("node").is_not_null())
        if sized.height and sized["node"].n_unique() == nodes["node"].drop_nulls().n_unique():
            sizes = dict(sized.group_by("node").agg(pl.col("size_mb").last()).sort("node").rows())
            found = {int(k): int(v) for k, v in sizes.items()}
            if all(v > 0 for v in found.values()):
                return found, _first_source(sized)
    counters = tables.get(t.NUMA_COUNTER)
    if counters is not None and counters.height:
        mem = counters.filter((pl.col("scope") == "meminfo") & (pl.col("counter") == "MemTotal") & pl.col("node").is_not_null())
        if mem.height:
            last = mem.sort("snapshot").group_by("node", maintain_order=True).last().sort("node")
            found = {int(row["node"]): int(_to_mb(row["value"] or 0.0, row["unit"])) for row in last.to_dicts()}
            if all(v > 0 for v in found.values()):
                return found, _first_source(mem)
    return None


# host_fact keys that may carry the machine's memory (a manifest; no parser writes one today); unit
# from the key's suffix or the value's.
RAM_FACT_KEYS = ("mem_total_kb", "memtotal_kb", "mem_total_mb", "memory_mb", "ram_mb", "mem_total", "memtotal", "memory", "ram")


def ram_mb(tables: dict[str, pl.DataFrame]) -> Amount | None:
    """The machine's RAM in MB and where it was read; None when no input gives it."""
    sizes = node_sizes_mb(tables)
    if sizes is not None:
        per_node, source = sizes
        return Amount(sum(per_node.values()), source)
    facts = tables.get(t.HOST_FACT)
    if facts is None or facts.height == 0:
        return None
    by_key = {row["key"].lower(): row for row in facts.to_dicts() if row["key"]}
    for key in RAM_FACT_KEYS:
        row = by_key.get(key)
        if row is None:
            continue
        default_unit = "kB" if key.endswith("_kb") else "MB" if key.endswith("_mb") else "B"
        mb = _fact_mb(row["value"] or "", default_unit)
        if mb:
            return Amount(mb, row["source"] or "")
    return None


def _fact_mb(text: str, default_unit: str) -> int | None:
    m = re.fullmatch(r"\s*([\d.]+)\s*([KMGT]i?B|kB|[KMGT]|B)?\s*", text, re.IGNORECASE)
    if not m:
        return None
    return int(_to_mb(float(m.group(1)), m.group(2) or default_unit))


def _to_mb(value: float, unit: str | None) -> float:
    scale = {"b": 1 / 2**20, "k": 1 / 1024, "m": 1.0, "g": 1024.0, "t": 1024.0**2, "p": 0.0}
    letter = (unit or "MB").strip().lower()[:1]
    if letter == "p":  # "pages": not a size
        return 0.0
    return float(value) * scale.get(letter, 1.0)


def _first_source(frame: pl.DataFrame) -> str:
    sources = frame["source"].drop_nulls()
    return sources[0] if sources.len() else ""


def database_process_affinity(tables: dict[str, pl.DataFrame]) -> list[ProcessAffinity]:
    """Affinity rows whose process is a database server (subject "mariadbd 1234" or "mariadbd")."""
    per_subject: dict[str, dict[str, Value]] = {}
    for row in host_rows(tables, "process_affinity").to_dicts():
        subject = (row["subject"] or "").strip()
        if subject and is_database_process(subject.split()[0]) and row["name"]:
            per_subject.setdefault(subject, {})[row["name"]] = _value(row)
    found = []
    for subject, values in sorted(per_subject.items()):
        cpus = values.get("Cpus_allowed_list")
        mems = values.get("Mems_allowed_list")
        found.append(
            ProcessAffinity(
                subject,
                cpu_list_or_none(cpus.value) if cpus else None,
                cpu_list_or_none(mems.value) if mems else None,
                cpus.value if cpus else None,
                mems.value if mems else None,
                (cpus or mems).source if (cpus or mems) else "",
            )
        )
    return found


def is_database_process(name: str) -> bool:
    return bool(DATABASE_PROCESS_RE.match(name.strip().rsplit("/", 1)[-1]))


def database_evidence(tables: dict[str, pl.DataFrame]) -> list[str]:
    """Why we believe a database runs on this host: one short line per kind of evidence."""
    found: list[str] = []
    statements = tables.get(t.STATEMENT)
    if statements is not None and statements.height:
        engines = ", ".join(sorted(set(statements["engine"].drop_nulls().to_list()))) or "engine unknown"
        found.append(f"{statements.height:,} SQL statements ({engines}) from {_first_source(statements)}")
    settings = tables.get(t.DB_SETTING)
    if settings is not None and settings.height:
        engines = ", ".join(sorted(set(settings["engine"].drop_nulls().to_list()))) or "engine unknown"
        found.append(f"database settings ({engines}) from {_first_source(settings)}")
    for name in (t.PERF_STACK, t.PERF_SYMBOL):
        frame = tables.get(name)
        if frame is None or frame.height == 0:
            continue
        comms = sorted({c for c in frame["comm"].drop_nulls().unique().to_list() if is_database_process(c)})
        if comms:
            found.append(f"perf samples of {', '.join(comms)} in {_first_source(frame)}")
    return found


def config_values(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``host_config_value`` table: what :func:`sysctls`, :func:`cmdline` and :func:`thp` return, one row each."""
    by_category = (("sysctl", sysctls(tables)), ("cmdline", cmdline(tables) or {}), ("thp", thp(tables)))
    rows = [
        {"category": category, "name": name, "value": value.value, "choices": value.choices, "source": value.source}
        for category, values in by_category for name, value in values.items()
    ]
    return pl.DataFrame(rows, schema=t.HOST_CONFIG_VALUE_SCHEMA)


def block_device_table(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``block_device`` table: what :func:`block_devices` returns, one row per disk."""
    rows = [
        {
            "device": device.name, "kind": device.kind,
            "scheduler": device.scheduler.value if device.scheduler else None,
            "scheduler_choices": device.scheduler.choices if device.scheduler else None,
            "scheduler_source": device.scheduler.source if device.scheduler else None,
            "rotational": device.rotational.value if device.rotational else None,
            "rotational_source": device.rotational.source if device.rotational else None,
        }
        for device in block_devices(tables)
    ]
    return pl.DataFrame(rows, schema=t.BLOCK_DEVICE_SCHEMA)


def database_affinity_table(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``database_affinity`` table: what :func:`database_process_affinity` returns, CPU lists as printed."""
    rows = [
        {"subject": p.subject, "cpus": p.cpus_text, "mems": p.mems_text, "source": p.source}
        for p in database_process_affinity(tables)
    ]
    return pl.DataFrame(rows, schema=t.DATABASE_AFFINITY_SCHEMA)


def database_evidence_table(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """The ``database_evidence`` table: the lines of :func:`database_evidence`."""
    return pl.DataFrame({"line": database_evidence(tables)}, schema=t.DATABASE_EVIDENCE_SCHEMA)


def db_value(tables: dict[str, pl.DataFrame], name: str) -> Value | None:
    """A database setting as the server runs it: SHOW/pg_settings variables first, else config files.

    Status counters are not settings; TiDB's MySQL-compatible names (a no-op
    ``innodb_buffer_pool_size``) are left out.
    """
    frame = tables.get(t.DB_SETTING)
    if frame is None or frame.height == 0:
        return None
    frame = _without_tidb(frame)
    for kind in ("variable", "config"):
        chosen = frame.filter((pl.col("kind") == kind) & (pl.col("name").str.to_lowercase() == name.lower()))
        value = setting(chosen, name)
        if value is not None:
            row = chosen.filter(pl.col("value") == value).row(-1, named=True)
            return Value(value.strip(), None, row["source"] or "", row["unit"])
    return None


def _without_tidb(frame: pl.DataFrame) -> pl.DataFrame:
    """TiDB answers SHOW VARIABLES with MySQL's names (innodb_buffer_pool_size) that do nothing:
    drop rows of engine tidb and of any member whose ``version`` says TiDB."""
    is_version = pl.col("name").str.to_lowercase() == "version"
    tidb_sources = frame.filter(is_version & pl.col("value").str.contains("(?i)tidb"))["source"].to_list()
    return frame.filter((pl.col("engine").is_null() | (pl.col("engine") != "tidb")) & ~pl.col("source").is_in(tidb_sources))


def buffer_pool(tables: dict[str, pl.DataFrame]) -> tuple[str, str, int, str] | None:
    """(engine family, setting name, bytes, source) of the InnoDB pool or shared_buffers, if captured."""
    for family, name in (("innodb", "innodb_buffer_pool_size"), ("postgresql", "shared_buffers")):
        found = db_value(tables, name)
        if found is None:
            continue
        size = size_bytes(found.value, found.unit)
        if size is not None:
            return family, name, size, found.source
    return None


def host_config_checks(tables: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    """The "Host configuration" table rows for the settings present in the capture."""
    nodes = node_count(tables)
    multi_node = nodes is not None and nodes.value >= 2
    rows: list[dict[str, Any]] = []
    rows += _thp_rows(tables)
    rows += _sysctl_rows(tables, nodes)
    rows += _cmdline_rows(tables, multi_node)
    rows += _block_rows(tables)
    rows += _database_rows(tables, nodes)
    return rows


def _row(setting_: str, value: str, recommended: str, why: str, status: str, source: str) -> dict[str, Any]:
    return {"setting": setting_, "value": value, "recommended": recommended, "why": why, "status": status, "source": source}


def _thp_rows(tables: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    found = thp(tables)
    rows = []
    if "enabled" in found:
        v = found["enabled"]
        rows.append(_row(
            "transparent_hugepage/enabled", v.value, "never or madvise",
            "always: khugepaged compaction and page-fault stalls, memory bloat; database vendors advise against",
            "attention" if v.value == "always" else "ok" if v.value in ("madvise", "never") else "unknown", v.source,
        ))
    if "defrag" in found:
        v = found["defrag"]
        rows.append(_row(
            "transparent_hugepage/defrag", v.value, "madvise, defer+madvise, defer or never",
            "always: every huge-page fault may stall in direct compaction",
            "attention" if v.value == "always" else "ok" if v.value else "unknown", v.source,
        ))
    return rows


def _sysctl_rows(tables: dict[str, pl.DataFrame], nodes: Amount | None) -> list[dict[str, Any]]:
    found = sysctls(tables)
    rows = []
    v = found.get("kernel.numa_balancing")
    if v is not None:
        if nodes is None:
            rows.append(_row("kernel.numa_balancing", v.value, "0 on multi-node hosts with a bound database",
                             "node count unknown", "unknown", v.source))
        elif nodes.value < 2:
            rows.append(_row("kernel.numa_balancing", v.value, "n/a (1 node)", "nothing to balance on one node", "ok", v.source))
        else:
            rows.append(_row(
                "kernel.numa_balancing", v.value, "0 when the database is bound per node",
                f"{nodes.value} nodes: hinting faults and page migrations cost CPU and latency",
                "attention" if v.value in ("1", "3") else "ok", v.source,
            ))
    v = found.get("vm.swappiness")
    if v is not None:
        ok = v.value.isdigit() and 1 <= int(v.value) <= SWAPPINESS_MAX
        rows.append(_row("vm.swappiness", v.value, f"1-{SWAPPINESS_MAX}",
                         "keeps the buffer pool in RAM instead of swapping it for page cache; 0 risks the OOM killer",
                         "ok" if ok else "attention" if v.value.isdigit() else "unknown", v.source))
    v = found.get("vm.zone_reclaim_mode")
    if v is not None:
        rows.append(_row("vm.zone_reclaim_mode", v.value, "0",
                         "non-zero reclaims a node's page cache before using another node's free memory",
                         "ok" if v.value == "0" else "attention", v.source))
    ram = ram_mb(tables)
    for name in ("vm.dirty_ratio", "vm.dirty_background_ratio"):
        v = found.get(name)
        if v is None:
            continue
        why = "informational: % of available memory that may be dirty before writers block (dirty_ratio) or flushing starts"
        if ram is not None and v.value.isdigit():
            why += f"; at most {gib(int(v.value) / 100 * ram.value * 2**20)} of {gib(ram.value * 2**20)} RAM"
        rows.append(_row(name, v.value, "informational (dirty_*_bytes on large-RAM hosts)", why, "ok", v.source))
    v = found.get("net.core.somaxconn")
    if v is not None:
        ok = v.value.isdigit() and int(v.value) >= SOMAXCONN_MIN
        rows.append(_row("net.core.somaxconn", v.value, f">= {SOMAXCONN_MIN}",
                         "caps the listen backlog: bursts of new connections are dropped beyond it",
                         "ok" if ok else "attention" if v.value.isdigit() else "unknown", v.source))
    v = found.get("kernel.sched_autogroup_enabled")
    if v is not None:
        rows.append(_row("kernel.sched_autogroup_enabled", v.value, "0 on servers",
                         "groups tasks by session for desktop fairness; a server gains nothing from it",
                         "ok" if v.value == "0" else "attention", v.source))
    for name in SCHED_TUNABLES:
        v = found.get(name)
        if v is not None:
            rows.append(_row(name, v.value, "informational", "CFS tunable (kernels before 5.13; later in debugfs)", "ok", v.source))
    return rows


def _cmdline_rows(tables: dict[str, pl.DataFrame], multi_node: bool) -> list[dict[str, Any]]:
    params = cmdline(tables)
    if params is None:
        return []
    source = ", ".join(cmdline_sources(tables))
    rows = []
    isolation = {name: params[name] for name in CPU_ISOLATION_PARAMETERS if name in params}
    value = " ".join(f"{name}={v.value}" if v.value else name for name, v in isolation.items()) or "not set"
    rows.append(_row(
        "cmdline isolcpus / nohz_full / rcu_nocbs / irqaffinity", value,
        "optional: fence housekeeping and IRQ CPUs from the database's" if multi_node else "optional",
        "keeps interrupts, timers and RCU callbacks off the CPUs that run the database", "ok", source,
    ))
    for name, good in (("transparent_hugepage", ("never", "madvise")), ("numa_balancing", ("disable",))):
        if name in params:
            v = params[name]
            rows.append(_row(f"cmdline {name}", v.value, " or ".join(good), "boot-time default of the runtime setting",
                             "ok" if v.value in good else "attention", v.source))
    return rows


def _block_rows(tables: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    rows = []
    for device in block_devices(tables):
        scheduler = device.scheduler
        assert scheduler is not None
        kind = device.kind
        if kind in ("nvme", "ssd"):
            recommended, why = "none", f"{kind}: the device orders requests itself; a scheduler only adds latency"
            status = "ok" if scheduler.value == "none" else "attention"
        elif kind == "hdd":
            recommended, why = "mq-deadline (or bfq)", "rotational: merging and ordering requests pays off"
            status = "ok"
        else:
            recommended, why = "none for SSD/NVMe", "rotational flag not captured: device type unknown"
            status = "unknown"
        rows.append(_row(f"{device.name} queue/scheduler", scheduler.value, recommended, why, status, scheduler.source))
    return rows


def _database_rows(tables: dict[str, pl.DataFrame], nodes: Amount | None) -> list[dict[str, Any]]:
    rows = []
    pool = buffer_pool(tables)
    ram = ram_mb(tables)
    if pool is not None:
        family, name, size, source = pool
        minimum = INNODB_POOL_MIN_SHARE_PCT if family == "innodb" else SHARED_BUFFERS_MIN_SHARE_PCT
        recommended = "50-75% of RAM on a dedicated server" if family == "innodb" else "about 25% of RAM"
        why = "the database's page cache: too small means reads from disk or the OS cache"
        if ram is None:
            rows.append(_row(name, gib(size), recommended, why + "; RAM unknown", "unknown", source))
        else:
            share = 100.0 * size / (ram.value * 2**20)
            rows.append(_row(name, f"{gib(size)} ({share_text(share)} of {gib(ram.value * 2**20)} RAM)", recommended, why,
                             "attention" if share < minimum else "ok", source))
    interleave = db_value(tables, "innodb_numa_interleave")
    if interleave is not None:
        if nodes is not None and nodes.value < 2:
            rows.append(_row("innodb_numa_interleave", interleave.value, "n/a (1 node)", "nothing to interleave on one node",
                             "ok", interleave.source))
        else:
            on = interleave.value.upper() in ("ON", "1", "TRUE")
            rows.append(_row("innodb_numa_interleave", interleave.value, "ON unless the server is bound to one node",
                             "spreads the buffer pool over all nodes instead of filling the first one",
                             "ok" if on else "attention" if nodes is not None else "unknown", interleave.source))
    return rows
