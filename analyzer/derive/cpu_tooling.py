"""The capture's own tooling in a CPU profile: collectors, archivers and analyzers that ran beside the workload.

A capture is taken while ``perf``, ``mpstat``, ``sar``/``sadc``, ``pt-stalk``, ``pt-query-digest``,
``tar``/``gzip``/``xz``/``zstd``, ``sosreport`` and the shells that drive them run on the same
host. Their samples are real CPU time of that host, but not of the workload under study: counted
as the workload, ``pt-query-digest`` digesting the slow log (58% of the busy samples in the case
behind this module) becomes "the" hot process. The profile shows them apart and leaves them out
of the shares the rules judge.

A sample is the tooling's when its process name (``comm``, as perf prints it: at most 15
characters) is one of :data:`TOOLING_COMMS`. Shells (``sh``, ``bash``, ``dash``) count as tooling:
on a database server during a capture they run the collector scripts; database clients
(``mysql``, ``psql``) and load generators (``sysbench``, ``pgbench``) are the workload.

>>> is_tooling("pt-query-digest"), is_tooling("gzip"), is_tooling("perf-exec"), is_tooling("collect.sh")
(True, True, True, True)
>>> is_tooling("mariadbd"), is_tooling("sysbench"), is_tooling("psql"), is_tooling(None)
(False, False, False, False)
"""

from __future__ import annotations


import polars as pl

from dbdiag.patterns import lazy_compile

TOOLING_COMMS = (
    # profilers and system collectors
    r"perf|perf-exec|perf-top|mpstat|sar|sadc|sadf|iostat|vmstat|pidstat|numastat|top|htop|atop|ps|free|uptime"
    r"|dstat|nmon|collectl|tcpdump|ss|netstat|ethtool|lscpu|lsblk|sysctl|dmesg|journalctl|strace|ltrace|gdb|eu-stack"
    # database-side collectors of the capture
    r"|pt-stalk|pt-summary|pt-mysql-summa\S*|pt-query-diges\S*|pt-pmp|pt-ioprofile|mysqladmin|mariadb-admin"
    r"|pgbadger|pg_activity|sosreport|sos|dbdiag|collect\S*"
    # archivers and compressors, and the shell utilities collector scripts run
    r"|tar|gzip|gunzip|pigz|bzip2|pbzip2|xz|pixz|zstd|pzstd|lz4|zip|unzip|cat|cp|mv|rm|sleep|date|grep|awk|gawk|mawk"
    r"|sed|head|tail|sort|uniq|wc|find|du|df|ls|tee|sh|bash|dash|\S+\.sh"
)
_TOOLING_RE = lazy_compile(f"^(?:{TOOLING_COMMS})$")


def is_tooling(comm: str | None) -> bool:
    """Whether a process name is the capture's tooling (see the module docstring)."""
    return comm is not None and _TOOLING_RE.match(comm.strip()) is not None


def tooling_expr(comm: pl.Expr) -> pl.Expr:
    """Vectorised :func:`is_tooling` over a column of process names (null -> False)."""
    return comm.str.strip_chars().str.contains(f"^(?:{TOOLING_COMMS})$").fill_null(False)
