"""Process names of database servers and of the proxies in front of them, as ``comm``/``ps`` show them.

>>> "mariadbd" in DATABASE_PROCESSES, "redis-server" in HOST_DATABASE_PROCESSES, TIDB_PROCESS_OF_COMPONENT["pd"]
(True, True, 'pd-server')
"""

from __future__ import annotations

# Servers of the engines dbdiag analyses (rules match them by prefix: "mysqld-debug", "tiflash-proxy").
DATABASE_PROCESSES = ("mysqld", "mariadbd", "postgres", "postmaster", "tidb-server", "tikv-server", "pd-server", "tiflash")
# Other data stores whose host settings (NUMA, THP, I/O scheduler) matter as much, matched by exact name.
OTHER_DATABASE_PROCESSES = ("mysqld-debug", "redis-server", "mongod", "clickhouse-server", "ndbmtd", "ndbd")
HOST_DATABASE_PROCESSES = DATABASE_PROCESSES + OTHER_DATABASE_PROCESSES
# Servers whose CPU a profile counts as database CPU, though no host setting is judged for them.
PROFILE_ONLY_PROCESSES = ("percona-server", "memcached")
# Beginnings of thread names a perf profile shows after them ("mysqld-debug", "clickhouse-serv", "ora_pmon_orcl").
PROFILE_COMM_PREFIXES = ("mysqld", "mariadbd", "postgres", "tiflash", "clickhouse", "oracle", "ora_")

PROXY_PROCESSES = ("haproxy", "proxysql", "pgbouncer", "odyssey", "pgpool", "envoy", "maxscale", "tiproxy", "nginx")

# TiDB cluster parts as the logs name them (``event.component``) -> the server process of each.
TIDB_PROCESS_OF_COMPONENT = {"tidb": "tidb-server", "tikv": "tikv-server", "pd": "pd-server", "tiflash": "tiflash"}
# ``event.component`` values of database servers and proxies (what restart/OOM findings are about).
DATABASE_COMPONENTS = (*TIDB_PROCESS_OF_COMPONENT, "mysqld", "mariadbd", "mysql", "postgres", "postgresql", "haproxy")


def profile_database_comm_pattern() -> str:
    """The regex (unanchored alternatives) of the ``comm`` names a CPU profile counts as database threads.

    >>> import re
    >>> [bool(re.fullmatch(profile_database_comm_pattern(), c)) for c in ("mysqld", "ora_pmon_x", "tidb-server", "python3")]
    [True, True, True, False]
    """
    exact = [
        name for name in HOST_DATABASE_PROCESSES + PROFILE_ONLY_PROCESSES
        if not any(name.startswith(prefix) for prefix in PROFILE_COMM_PREFIXES)
    ]
    # "ora_" is only a beginning: Oracle's background processes are ora_<name>_<sid>
    return "|".join([prefix + (r"\S+" if prefix.endswith("_") else r"\S*") for prefix in PROFILE_COMM_PREFIXES] + exact)
