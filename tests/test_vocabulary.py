"""The one vocabulary (``dbdiag.vocabulary``) and the subsets each stage takes from it: each use matches
what it matched before the lists were merged (the old lists are written out here)."""

from __future__ import annotations

import re

from dbdiag.derive import cpu_profile, host_config
from dbdiag.derive.sql import SQLNORM_DIALECT_OF_ENGINE
from dbdiag.rules.processes import is_database_or_proxy
from dbdiag.vocabulary import dialects, metrics, processes

OLD_PROFILE_COMMS = (
    r"mysqld\S*|mariadbd\S*|postgres\S*|postmaster|tidb-server|tikv-server|pd-server|tiflash\S*|mongod"
    r"|redis-server|clickhouse\S*|oracle\S*|ora_\S+|percona-server|ndbmtd|ndbd|memcached"
)
OLD_HOST_CONFIG = re.compile(
    r"^(mysqld|mariadbd|mysqld-debug|postgres|postmaster|tidb-server|tikv-server|pd-server|tiflash|"
    r"redis-server|mongod|clickhouse-server|ndbmtd|ndbd)$"
)
COMMS = (
    "mysqld", "mysqld-debug", "mariadbd", "postgres", "postgres: walwriter", "postmaster", "tidb-server", "tikv-server",
    "pd-server", "tiflash", "tiflash_proxy", "redis-server", "mongod", "mongod2", "clickhouse-server", "clickhouse-serv",
    "ndbmtd", "ndbd", "percona-server", "memcached", "oracle", "oracleORCL", "ora_pmon_orcl", "ora_", "haproxy",
    "python3", "swapper", "connection", "mysql", "",
)


def test_the_profile_counts_the_same_threads_as_database_threads() -> None:
    for comm in COMMS:
        assert bool(re.fullmatch(cpu_profile.DATABASE_COMMS, comm)) == bool(re.fullmatch(OLD_PROFILE_COMMS, comm)), comm


def test_host_config_judges_the_same_processes() -> None:
    for comm in COMMS:
        assert host_config.is_database_process(comm) == bool(OLD_HOST_CONFIG.match(comm)), comm


def test_every_analysed_engine_process_is_a_database_everywhere() -> None:
    for name in processes.DATABASE_PROCESSES:
        assert re.fullmatch(cpu_profile.DATABASE_COMMS, name) and host_config.is_database_process(name), name
        assert is_database_or_proxy(name), name
    assert set(processes.TIDB_PROCESS_OF_COMPONENT.values()) <= set(processes.DATABASE_PROCESSES)


def test_the_dialect_maps_are_the_old_ones() -> None:
    assert SQLNORM_DIALECT_OF_ENGINE == {"mysql": "mysql", "mariadb": "mysql", "percona": "mysql", "tidb": "tidb", "postgresql": "postgresql"}
    assert dialects.SQLGLOT_DIALECT == {"mysql": "mysql", "tidb": "mysql", "postgresql": "postgres"}
    assert set(dialects.SQLNORM_DIALECT_OF_ENGINE.values()) == set(dialects.SQLNORM_DIALECTS) == set(dialects.SQLGLOT_DIALECT)


def test_metric_families_are_whole() -> None:
    for family in metrics.FAMILIES.values():
        assert family.kind in ("counter", "gauge", "histogram") and family.unit in ("s", "ms", "1"), family
        assert family.source, family
        if family.role in ("db_time", "user_latency", "idle_time"):
            assert family.seconds_per_unit > 0, family
    assert len(metrics.FAMILIES) == len(metrics._CATALOGUE), "a family is listed twice"
