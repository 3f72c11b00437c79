"""The database's buffer pool (InnoDB) or shared_buffers (PostgreSQL) small against the RAM.

What it detects:
    MySQL/MariaDB/Percona ``innodb_buffer_pool_size`` or PostgreSQL ``shared_buffers`` that
    leave most of a (presumed dedicated) server's memory unused by the database cache: the
    compiled-in defaults (128 MB for both) left in place on a large machine are the classic case.

Why it matters:
    Every page not in the pool is read again from disk or, at best, copied from the OS page
    cache through a system call. InnoDB does its own caching and expects most of the RAM;
    PostgreSQL relies on the page cache too but still gains from a larger shared_buffers under
    write and hot-set load. In the field case behind this rule a 128 GB VM ran PostgreSQL with
    shared_buffers near the 1 GB mark; raising it to 45 GB gave +310% tpmC.

How it is detected:
    Inputs: ``db_setting`` (SHOW GLOBAL VARIABLES / STATUS, SHOW ALL, postgresql.conf) and the
    RAM: the sum of ``numa_node.size_mb`` (numactl --hardware), else the per-node ``MemTotal``
    of ``numa_counter`` (numastat -m, node meminfo), else a ``host_fact`` memory key.
    InnoDB: fires when the pool is below INNODB_MIN_SHARE_PCT = 50% of RAM and the buffer pool
    miss ratio ``Innodb_buffer_pool_reads / Innodb_buffer_pool_read_requests`` (SHOW GLOBAL
    STATUS, since server start) is above MAX_MISS_RATIO_PCT = 1%. Without status counters — or
    with fewer than MIN_READ_REQUESTS = 10,000 read requests, too few to trust the ratio — it
    fires only below INNODB_MIN_SHARE_NO_STATUS_PCT = 25% of RAM.
    PostgreSQL: fires when shared_buffers is below PG_MIN_SHARE_PCT = 10% of RAM (the common
    advice is about 25%). This covers the compiled-in PG_DEFAULT_SHARED_BUFFERS = 128 MB on any
    machine above 1.28 GB; the title says when the default is still in place.
    TiDB's MySQL-compatible ``innodb_buffer_pool_size`` does nothing and is ignored.

Remediation:
    InnoDB: ``SET GLOBAL innodb_buffer_pool_size = <60-70% of RAM>`` (online resize in MySQL
    5.7.5+ and MariaDB 10.2+; rounded to a multiple of chunk size x instances) and the same
    value in my.cnf ``[mysqld]`` (or ``SET PERSIST`` in MySQL 8, never printed for MariaDB, which
    has none; the engine and version come from ``engine_version``, else the settings export).
    Leave room for per-connection buffers and the OS.
    PostgreSQL: ``ALTER SYSTEM SET shared_buffers = '<25% of RAM>'`` then a restart;
    ``effective_cache_size`` to about 75% of RAM; with a large shared_buffers use huge pages
    (``huge_pages = try``, ``vm.nr_hugepages``).

References:
    MySQL Reference Manual "Configuring InnoDB Buffer Pool Size" and "InnoDB Buffer Pool";
    MariaDB KB "InnoDB Buffer Pool"; PostgreSQL documentation runtime-config-resource
    (shared_buffers) and kernel-resources (huge pages); PostgreSQL wiki "Tuning Your PostgreSQL
    Server".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.host_values import Value
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import database_memory_setting
from dbdiag.rules.host_counts import Count, ram_mb
from dbdiag.settings import size_bytes
from dbdiag.units import gib, share_text
from dbdiag.versions import at_least

RULE_ID = "buffer-pool-undersized"

INNODB_MIN_SHARE_PCT = 50.0
INNODB_MIN_SHARE_NO_STATUS_PCT = 25.0
MAX_MISS_RATIO_PCT = 1.0
MIN_READ_REQUESTS = 10_000
PG_MIN_SHARE_PCT = 10.0
PG_DEFAULT_SHARED_BUFFERS = 128 * 2**20
INNODB_TARGET_SHARE_PCT = 65.0
PG_TARGET_SHARE_PCT = 25.0
PG_EFFECTIVE_CACHE_SHARE_PCT = 75.0
INNODB_DEFAULT_CHUNK = 128 * 2**20
HUGE_PAGE = 2 * 2**20
MYSQL_SET_PERSIST = (8, 0)  # MySQL 8.0 manual "SET Syntax for Variable Assignment" (PERSIST); not in MariaDB


@dataclass(frozen=True)
class MissRatio:
    reads: int
    read_requests: int
    source: str

    @property
    def pct(self) -> float:
        return 100.0 * self.reads / self.read_requests if self.read_requests else 0.0


def check(inp: RuleInput) -> Verdict:
    innodb = database_memory_setting(inp, "innodb_buffer_pool_size")
    shared = database_memory_setting(inp, "shared_buffers")
    if innodb is None and shared is None:
        raise Skip("no innodb_buffer_pool_size or shared_buffers among the database settings")
    ram = ram_mb(inp)
    if ram is None:
        raise Skip("RAM unknown: needs numactl --hardware (node sizes), numastat -m or node meminfo (MemTotal)")
    ram_bytes = ram.value * 2**20
    findings: list[Finding] = []
    measured: list[str] = []
    if innodb is not None:
        finding, line = _judge_innodb(inp, innodb, ram, ram_bytes)
        measured.append(line)
        findings += [finding] if finding else []
    if shared is not None:
        finding, line = _judge_postgres(shared, ram, ram_bytes)
        measured.append(line)
        findings += [finding] if finding else []
    return Verdict(findings=findings, measured="; ".join(measured))


def _size(value: Value, name: str) -> int:
    size = size_bytes(value.value, value.unit)
    if size is None:
        raise Skip(f"{name} = {value.value!r} ({value.source}) is not a size")
    return size


def _judge_innodb(inp: RuleInput, value: Value, ram: Count, ram_bytes: int) -> tuple[Finding | None, str]:
    pool = _size(value, "innodb_buffer_pool_size")
    share = 100.0 * pool / ram_bytes
    misses = _miss_ratio(inp)
    trusted = misses is not None and misses.read_requests >= MIN_READ_REQUESTS
    line = f"innodb_buffer_pool_size {gib(pool)} = {share_text(share)} of {gib(ram_bytes)} RAM"
    if trusted:
        assert misses is not None
        line += f", miss ratio {misses.pct:.2f}% ({misses.reads:,} of {misses.read_requests:,} reads)"
        fires = share < INNODB_MIN_SHARE_PCT and misses.pct > MAX_MISS_RATIO_PCT
        line += f"; fires below {INNODB_MIN_SHARE_PCT:.0f}% of RAM with a miss ratio above {MAX_MISS_RATIO_PCT:.0f}%"
        threshold = f"threshold: < {INNODB_MIN_SHARE_PCT:.0f}% of RAM with misses > {MAX_MISS_RATIO_PCT:.0f}%"
    else:
        fires = share < INNODB_MIN_SHARE_NO_STATUS_PCT
        why = "no SHOW GLOBAL STATUS" if misses is None else f"only {misses.read_requests:,} read requests"
        line += f" ({why}); fires below {INNODB_MIN_SHARE_NO_STATUS_PCT:.0f}% of RAM"
        threshold = f"threshold: < {INNODB_MIN_SHARE_NO_STATUS_PCT:.0f}% of RAM ({why})"
    if not fires:
        return None, line
    miss_text = f", {misses.pct:.1f}% of page reads missed it" if trusted and misses else ""
    target = _innodb_target(inp, ram_bytes)
    rows = [
        ("innodb_buffer_pool_size", gib(pool), f"{pool:,} bytes", value.source),
        ("RAM", gib(ram_bytes), f"{ram.value:,} MB", ram.source),
        ("pool / RAM", share_text(share), "", ""),
    ]
    if misses is not None:
        rows += [
            ("Innodb_buffer_pool_read_requests", f"{misses.read_requests:,}", "since server start", misses.source),
            ("Innodb_buffer_pool_reads (misses)", f"{misses.reads:,}", f"miss ratio {misses.pct:.2f}%", misses.source),
        ]
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.WARNING,
        title=f"InnoDB buffer pool {gib(pool)} is {share_text(share)} of {gib(ram_bytes)} RAM{miss_text}; {threshold}",
        subject="innodb_buffer_pool_size",
        impact={
            "description": "pages missing from the buffer pool are read from disk or the OS cache",
            "pool_bytes": pool, "ram_mb": ram.value, "pool_share_pct": round(share, 1),
            "miss_ratio_pct": round(misses.pct, 3) if misses else None,
        },
        evidence=(Evidence(title="Buffer pool against RAM", columns=("what", "value", "detail", "source"), rows=tuple(rows)),),
        remediation="\n".join([
            f"Target about {INNODB_TARGET_SHARE_PCT:.0f}% of RAM on a dedicated server: {gib(target)} ({target} bytes,",
            "a multiple of innodb_buffer_pool_chunk_size x innodb_buffer_pool_instances).",
            *_innodb_steps(_innodb_engine(inp), inp.metric(t.ENGINE_VERSION_METRIC), target),
            "3. Leave room for per-connection buffers (max_connections x sort/join/read buffers), other processes and the OS;",
            "   lower the target if the host also runs other services.",
        ]),
        sources=tuple(dict.fromkeys(s for s in (value.source, ram.source, misses.source if misses else "") if s)),
    )
    return finding, line


def _innodb_engine(inp: RuleInput) -> str | None:
    """The engine of the server: the capture's ``engine_version``, else the settings export's."""
    metric = inp.metric(t.ENGINE_VERSION_METRIC) or {}
    if metric.get("engine"):
        return metric["engine"]
    settings = inp.table(t.DB_SETTING, keep_empty=True)
    engines = settings.filter(pl.col("name") == "innodb_buffer_pool_size")["engine"].drop_nulls() if settings is not None else None
    return engines[0] if engines is not None and engines.len() else None


def _innodb_steps(engine: str | None, version: dict | None, target: int) -> list[str]:
    """Resize online, then persist, in the syntax of the server (MariaDB has no SET PERSIST)."""
    online = {"mariadb": "MariaDB 10.2+", "mysql": "MySQL 5.7.5+", "percona": "Percona Server 5.7.5+"}.get(engine or "", "MySQL 5.7.5+, MariaDB 10.2+")
    steps = [
        f"1. Online ({online}): SET GLOBAL innodb_buffer_pool_size = {target};",
        "   watch: SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status';",
        f"2. Persist: innodb_buffer_pool_size = {target // 2**20}M under [mysqld] in my.cnf",
    ]
    if engine == "mariadb":
        return steps
    persist = at_least(version, engine or "mysql", MYSQL_SET_PERSIST)
    if persist is True:
        steps.append(f"   or: SET PERSIST innodb_buffer_pool_size = {target};")
    elif persist is None:
        steps.append(f"   (MySQL 8.0+, not MariaDB: SET PERSIST innodb_buffer_pool_size = {target};)")
    return steps


def _innodb_target(inp: RuleInput, ram_bytes: int) -> int:
    chunk = _size_or(database_memory_setting(inp, "innodb_buffer_pool_chunk_size"), INNODB_DEFAULT_CHUNK)
    instances_value = database_memory_setting(inp, "innodb_buffer_pool_instances")
    instances = int(instances_value.value) if instances_value is not None and instances_value.value.isdigit() else 1
    step = max(chunk * max(instances, 1), 1)
    return max(step, int(ram_bytes * INNODB_TARGET_SHARE_PCT / 100 // step * step))


def _size_or(value: Value | None, default: int) -> int:
    size = size_bytes(value.value, value.unit) if value is not None else None
    return size or default


def _miss_ratio(inp: RuleInput) -> MissRatio | None:
    settings = inp.table(t.DB_SETTING)
    if settings is None:
        return None
    status = settings.filter(pl.col("kind") == "status")
    counters: dict[str, tuple[int, str]] = {}
    for name in ("innodb_buffer_pool_reads", "innodb_buffer_pool_read_requests"):
        rows = status.filter(pl.col("name").str.to_lowercase() == name)
        values = [(int(v), s) for v, s in rows.select("value", "source").rows() if v is not None and v.strip().isdigit()]
        if not values:
            return None
        counters[name] = max(values)  # cumulative since start: the latest snapshot holds the largest
    reads, source = counters["innodb_buffer_pool_reads"]
    return MissRatio(reads, counters["innodb_buffer_pool_read_requests"][0], source)


def _judge_postgres(value: Value, ram: Count, ram_bytes: int) -> tuple[Finding | None, str]:
    shared = _size(value, "shared_buffers")
    share = 100.0 * shared / ram_bytes
    line = f"shared_buffers {gib(shared)} = {share_text(share)} of {gib(ram_bytes)} RAM; fires below {PG_MIN_SHARE_PCT:.0f}%"
    if share >= PG_MIN_SHARE_PCT:
        return None, line
    target = _pg_setting_text(ram_bytes * PG_TARGET_SHARE_PCT / 100)
    cache = _pg_setting_text(ram_bytes * PG_EFFECTIVE_CACHE_SHARE_PCT / 100)
    target_bytes = size_bytes(target) or 0
    huge_pages = math.ceil(target_bytes / HUGE_PAGE * 1.03)
    default = " (the compiled-in default)" if shared == PG_DEFAULT_SHARED_BUFFERS else ""
    rows = (
        ("shared_buffers", gib(shared) + default, f"{value.value}{' x ' + value.unit if value.unit else ''}", value.source),
        ("RAM", gib(ram_bytes), f"{ram.value:,} MB", ram.source),
        ("shared_buffers / RAM", share_text(share), f"threshold {PG_MIN_SHARE_PCT:.0f}%, advice ~{PG_TARGET_SHARE_PCT:.0f}%", ""),
    )
    finding = Finding(
        rule=RULE_ID,
        scope=Scope.DATABASE,
        severity=Severity.WARNING,
        title=(
            f"PostgreSQL shared_buffers {gib(shared)}{default} is {share_text(share)} of {gib(ram_bytes)} RAM; "
            f"threshold: < {PG_MIN_SHARE_PCT:.0f}% (advice ~{PG_TARGET_SHARE_PCT:.0f}%)"
        ),
        subject="shared_buffers",
        impact={
            "description": "hot pages copied in from the OS page cache or disk instead of staying in shared memory",
            "shared_buffers_bytes": shared, "ram_mb": ram.value, "share_of_ram_pct": round(share, 1),
        },
        evidence=(Evidence(title="shared_buffers against RAM", columns=("what", "value", "detail", "source"), rows=rows),),
        remediation="\n".join([
            f"1. ALTER SYSTEM SET shared_buffers = '{target}';   -- about {PG_TARGET_SHARE_PCT:.0f}% of {gib(ram_bytes)}",
            f"   ALTER SYSTEM SET effective_cache_size = '{cache}';",
            "2. Restart (shared_buffers needs it): systemctl restart postgresql  (or pg_ctl restart -D $PGDATA)",
            f"3. Huge pages for a large shared_buffers: vm.nr_hugepages = {huge_pages} in /etc/sysctl.d/ (2 MB pages,",
            "   +3% headroom; check with postgres -D $PGDATA -C shared_memory_size_in_huge_pages on PG 15+),",
            "   then ALTER SYSTEM SET huge_pages = 'try';",
            "4. Verify after the restart: SHOW shared_buffers; and the hit ratio in pg_stat_database (blks_hit/blks_read).",
        ]),
        sources=tuple(dict.fromkeys(s for s in (value.source, ram.source) if s)),
    )
    return finding, line


def _pg_setting_text(size: float) -> str:
    """A size PostgreSQL accepts, rounded down: whole GB from 1 GB up, else MB.

    >>> _pg_setting_text(32.6 * 2**30), _pg_setting_text(700 * 2**20)
    ('32GB', '700MB')
    """
    if size >= 2**30:
        return f"{int(size // 2**30)}GB"
    return f"{int(size // 2**20)}MB"


RULE = Rule(
    id=RULE_ID,
    title="Buffer pool or shared_buffers small against RAM",
    area="config",
    requires=((t.DB_SETTING,),),
    check=check,
    doc=__doc__ or "",
)
