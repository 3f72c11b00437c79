"""The parser registry: every input format dbdiag reads. Adding one = a module with ``SPEC`` + a line here."""

from __future__ import annotations

from dbdiag.parsers import (
    ethtool_channels,
    irq_affinity,
    proc_cmdline,
    proc_status,
    sys_choice,
    sysctl,
    lscpu,
    manifest,
    mpstat_json,
    mpstat_text,
    mysql_slowlog,
    numactl,
    pg_csvlog,
    pg_jsonlog,
    pg_stderr,
    proc_interrupts,
    proc_softirqs,
    sadf,
    tidb_cluster_slow_query,
    tidb_dashboard,
    tidb_slowlog,
)
from dbdiag.parsers.base import ParserSpec

PARSERS: tuple[ParserSpec, ...] = (
    manifest.SPEC,
    mpstat_text.SPEC,
    mpstat_json.SPEC,
    sadf.SPEC,
    proc_softirqs.SPEC,
    proc_interrupts.SPEC,
    lscpu.SPEC,
    numactl.SPEC,
    pg_stderr.SPEC,
    pg_csvlog.SPEC,
    pg_jsonlog.SPEC,
    mysql_slowlog.SPEC,
    tidb_slowlog.SPEC,
    tidb_cluster_slow_query.SPEC,
    tidb_dashboard.SPEC,
    sysctl.SPEC,
    proc_cmdline.SPEC,
    sys_choice.SPEC,
    irq_affinity.SPEC,
    ethtool_channels.SPEC,
    proc_status.SPEC,
)
