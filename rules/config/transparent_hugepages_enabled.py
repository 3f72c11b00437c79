"""Transparent huge pages set to ``always``.

What it detects:
    ``/sys/kernel/mm/transparent_hugepage/enabled`` reading ``always`` — or, when that file was
    not captured, ``transparent_hugepage=always`` on the kernel command line. Not a NUMA rule:
    it applies to a single-node machine as much as to a large one.

Why it matters:
    With ``always`` every anonymous mapping of a database process is backed by 2 MB pages when
    the kernel can find them. Allocations then stall in direct compaction (worse with
    ``defrag`` = ``always``), khugepaged burns CPU collapsing pages in the background, memory
    use grows (a 4 kB touch costs 2 MB) and splitting huge pages on ``free``/``madvise`` shows
    up as latency spikes. MySQL, MariaDB, PostgreSQL, TiDB/TiKV, Redis and MongoDB all advise
    ``never`` or ``madvise``.

How it is detected:
    Inputs: ``host_setting`` rows of category ``thp`` (the ``enabled`` and ``defrag`` choice files)
    or ``cmdline`` (``transparent_hugepage=``). The runtime file wins over the boot parameter.
    Fires when the effective value is FIRING_VALUE = ``always``; ``madvise`` and ``never`` pass.
    Evidence adds the ``defrag`` setting and, when ``/proc/vmstat`` was captured, its ``thp_*``
    and ``compact_stall`` counters (cumulative since boot, per snapshot).

Remediation:
    Now: ``echo never > /sys/kernel/mm/transparent_hugepage/enabled`` and
    ``echo never > /sys/kernel/mm/transparent_hugepage/defrag`` (or ``madvise``).
    At boot: ``transparent_hugepage=never`` on the kernel command line (GRUB_CMDLINE_LINUX,
    then ``update-grub`` / ``grub2-mkconfig``), or a tuned profile with ``[vm]
    transparent_hugepages=never``. Restart the database afterwards: memory already backed by
    huge pages stays so. PostgreSQL wants explicit huge pages instead (``huge_pages = on`` with
    ``vm.nr_hugepages``). Only the capture's engine's advice is printed (``engine_version``); every
    engine's when the capture shows none.

References:
    Linux kernel Documentation/admin-guide/mm/transhuge.rst; MySQL/MariaDB and Percona notes on
    THP; PostgreSQL documentation "Linux Huge Pages" (runtime-config-resource, kernel-resources);
    TiDB "Tune Operating System Performance" (transparent huge pages); Redis "latency" docs
    (THP); MongoDB production notes "Disable Transparent Huge Pages".
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from dbdiag.findings import Evidence, Finding, Scope, Severity
from dbdiag.rules.base import Rule, RuleInput, Skip, Verdict
from dbdiag.rules.config.values import Value, database_evidence, setting_values

RULE_ID = "transparent-hugepages-enabled"

FIRING_VALUE = "always"
SHOWN_VMSTAT_COUNTERS = (
    "thp_fault_alloc", "thp_fault_fallback", "thp_collapse_alloc", "thp_collapse_alloc_failed",
    "thp_split_page", "thp_split_pmd", "thp_deferred_split_page", "compact_stall", "compact_fail",
)


def check(inp: RuleInput) -> Verdict:
    files = setting_values(inp, "thp")
    boot = setting_values(inp, "cmdline").get("transparent_hugepage")
    effective: Value | None = files.get("enabled") or boot
    if effective is None:
        raise Skip(
            "no THP setting captured: needs /sys/kernel/mm/transparent_hugepage/enabled "
            "or transparent_hugepage= on /proc/cmdline"
        )
    where = "enabled file" if "enabled" in files else "kernel command line"
    defrag = files.get("defrag")
    measured = f"THP enabled = {effective.value} ({where}, {effective.source})"
    if defrag is not None:
        measured += f", defrag = {defrag.value}"
    if boot is not None and "enabled" in files and boot.value != effective.value:
        measured += f"; boot parameter transparent_hugepage={boot.value} overridden at runtime"
    if effective.value != FIRING_VALUE:
        return Verdict(measured=f"{measured}; fires on {FIRING_VALUE}")
    return Verdict(findings=[_finding(inp, effective, where, defrag, boot)], measured=measured)


def _finding(inp: RuleInput, enabled: Value, where: str, defrag: Value | None, boot: Value | None) -> Finding:
    rows = [("enabled", enabled.value, enabled.choices or "", enabled.source)]
    if defrag is not None:
        rows.append(("defrag", defrag.value, defrag.choices or "", defrag.source))
    if boot is not None:
        rows.append(("cmdline transparent_hugepage", boot.value, "always madvise never", boot.source))
    evidence = [Evidence(title="Transparent huge page settings", columns=("setting", "value", "choices", "source"), rows=tuple(rows))]
    counters = _vmstat_rows(inp)
    if counters:
        evidence.append(Evidence(
            title="THP and compaction counters from /proc/vmstat (cumulative since boot)",
            columns=("counter", "snapshot", "value", "source"),
            rows=tuple(counters),
        ))
    databases = database_evidence(inp)
    if databases:
        evidence.append(Evidence(title="Database on this host", text="\n".join(databases)))
    defrag_text = f"; defrag = {defrag.value}" if defrag is not None else ""
    sources = tuple(dict.fromkeys([row[3] for row in rows] + [row[3] for row in counters]))
    return Finding(
        rule=RULE_ID,
        scope=Scope.HOST,
        severity=Severity.WARNING,
        title=f"Transparent huge pages: enabled = {enabled.value}{defrag_text}; recommended: never or madvise (fires on {FIRING_VALUE})",
        subject="transparent_hugepage",
        impact={
            "description": "huge-page faults, compaction stalls and khugepaged work in every database process",
            "enabled": enabled.value,
            "defrag": defrag.value if defrag is not None else None,
            "from": where,
        },
        evidence=tuple(evidence),
        remediation=_remediation(defrag, (inp.metric(t.ENGINE_VERSION_METRIC) or {}).get("engine")),
        sources=sources,
    )


# What each engine's documentation says about THP (step 3): only the capture's engine's line is printed.
ENGINE_ADVICE = {
    "mariadb": "3. MariaDB documents never (madvise is fine: only processes that ask get huge pages).",
    "mysql": "3. MySQL documents never (madvise is fine: only processes that ask get huge pages).",
    "percona": "3. Percona Server documents never (madvise is fine: only processes that ask get huge pages).",
    "tidb": "3. TiDB/TiKV document never (PingCAP docs \"Tune Operating System Performance\").",
    "postgresql": "3. PostgreSQL: use explicit huge pages instead: ALTER SYSTEM SET huge_pages = 'try'; and vm.nr_hugepages sized for shared_buffers.",
}


def _remediation(defrag: Value | None, engine: str | None = None) -> str:
    lines = [
        "1. Now (takes effect for new allocations; restart the database to release huge pages it holds):",
        "   echo never > /sys/kernel/mm/transparent_hugepage/enabled",
    ]
    if defrag is None or defrag.value not in ("never", "madvise", "defer+madvise"):
        lines.append("   echo never > /sys/kernel/mm/transparent_hugepage/defrag")
    lines += [
        "2. At boot: add transparent_hugepage=never to GRUB_CMDLINE_LINUX in /etc/default/grub, then",
        "   update-grub (Debian/Ubuntu) or grub2-mkconfig -o /boot/grub2/grub.cfg (RHEL); or a tuned profile:",
        "   [vm]",
        "   transparent_hugepages=never",
    ]
    if engine in ENGINE_ADVICE:
        lines.append(ENGINE_ADVICE[engine])
    else:
        lines += [
            "3. Per engine: MySQL/MariaDB/Percona, TiDB/TiKV, Redis and MongoDB document never (madvise is fine:",
            "   only processes that ask get huge pages). PostgreSQL: use explicit huge pages instead",
            "   (huge_pages = try/on and vm.nr_hugepages sized for shared_buffers).",
        ]
    return "\n".join(lines)


def _vmstat_rows(inp: RuleInput) -> list[tuple[str, int, int, str]]:
    vmstat = inp.table(t.VMSTAT_COUNT)
    if vmstat is None:
        return []
    shown = vmstat.filter(pl.col("counter").is_in(list(SHOWN_VMSTAT_COUNTERS)))
    order = {name: i for i, name in enumerate(SHOWN_VMSTAT_COUNTERS)}
    return sorted(
        ((row["counter"], row["snapshot"], row["value"], row["source"]) for row in shown.to_dicts()),
        key=lambda row: (order[row[0]], row[3] or "", row[1] or 0),
    )


RULE = Rule(
    id=RULE_ID,
    title="Transparent huge pages set to always",
    area="config",
    requires=((t.HOST_SETTING,),),
    check=check,
    doc=__doc__ or "",
)
