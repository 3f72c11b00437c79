"""Which differences cause which: explicit links from a cause (a setting, an event, a plan, a finding)
to the observed differences it explains (the outcome, what the host did, SQL time).

    plan of F changed                -> F's DB time, calls, median, p99 (same fingerprint)
    event index-ignored in one side  -> every plan change (an index set aside changes plans)
    setting S differs                -> the effects ``SETTING_EFFECTS[S]`` names, where they differ (through
                                        ``SETTING_MECHANISMS[S]`` when it differs: S -> hit ratio -> latency)
    finding fired on one side only   -> joins the plan/SQL difference of its subject (plan-flip of F
                                        joins F's plan change), else stands as a cause of its own,
                                        linked to the effects ``FINDING_EFFECTS[its rule]`` names

``link(differences)`` fills ``explains``, ``caused_by`` and ``related_findings`` in place and returns
nothing else: the verdict (``verdict.py``) ranks what is linked.
"""

from __future__ import annotations

from typing import Any

from dbdiag.compare.differ import SQL_NOISE_RATIO, Difference, Row
from dbdiag.compare.facts import PLAN_EVENTS
from dbdiag.patterns import lazy_compile

# The group in front of a database setting's key in metrics.settings: "mariadb variable ", "postgresql config ".
DATABASE_SETTING_KEY = lazy_compile(r"^\S+ (?:variable|config|setting) ")

CAUSE_AREAS = ("load", "events", "plans", "settings", "host", "findings")
EFFECT_AREAS = ("outcome", "activity", "profile", "sql")
# Findings about a table's statistics or an index event: they name the event (file:line) a plan change follows.
EVENT_FINDING_RULES = ("stale-statistics",)
# setting (host_config's name, or a prefix of it) -> fragments of the effect keys it moves.
SQL_TIME_EFFECTS = ("| DB time per second", "| median", "| p99", "statement latency", "DB time per second (",
                    "latency_", "user response time")
# What NUMA balancing moves: the vmstat counters of its scans, hinting faults and migrations
# (facts.VMSTAT_COUNTERS), the page-fault and scheduler CPU it costs, the remote memory it is there to cut.
NUMA_BALANCING_EFFECTS = ("vmstat numa_", "vmstat pgmigrate_", "remote memory", "category page-faults-numa",
                          "category scheduler", "kernel (% of busy CPU)", "symbol task_numa")
# What durability settings move: the time of commits (an fsync of the redo log / WAL, of the binary log) and
# so the statement and user latency; not every statement's time.
COMMIT_TIME_EFFECTS = ("commit |", "end |", "statement latency", "DB time per second (", "latency_", "user response time")
# What shared buffers do: serve block requests (the hit ratio pg_stat_database counts) and, through them,
# statement time, the throughput it allows and the kernel's share of the CPU (a block not in them is a read call).
BUFFER_CACHE_EFFECTS = ("buffer hit ratio", *SQL_TIME_EFFECTS, "tps (", "commits per second", "statements per second",
                        "| calls per second", "kernel (% of busy CPU)")
SETTING_EFFECTS: dict[str, tuple[str, ...]] = {
    "kernel.numa_balancing": NUMA_BALANCING_EFFECTS,
    "cmdline numa_balancing": NUMA_BALANCING_EFFECTS,  # numa_balancing=disable at boot (metrics.settings)
    "transparent_hugepage": ("kernel (% of busy CPU)", "category memory", "symbol clear_page", "symbol compact"),
    "vm.zone_reclaim_mode": ("remote memory", "kernel (% of busy CPU)"),
    "vm.swappiness": ("kernel (% of busy CPU)",),
    # isolation takes CPUs from the scheduler (and timers/RCU callbacks off them); it moves no device interrupt
    "cmdline isolcpus": ("busy %", "category scheduler"),
    "kernel.sched_": ("category scheduler", "context switches"),  # autogroup, migration cost, granularities
    "innodb_buffer_pool_size": SQL_TIME_EFFECTS,
    "shared_buffers": BUFFER_CACHE_EFFECTS,
    "innodb_numa_interleave": ("remote memory",),
    **dict.fromkeys(("innodb_flush_log_at_trx_commit", "sync_binlog", "log_bin", "innodb_flush_method", "innodb_doublewrite",
                     "synchronous_commit", "fsync", "wal_sync_method", "commit_delay", "full_page_writes"), COMMIT_TIME_EFFECTS),
    # metrics.settings rows ("irq_affinity 25 smp_affinity_list", "process_affinity mariadbd Cpus_allowed_list")
    "irq_affinity": ("soft %", "NET_RX", "category softirq", "cpu_soft", "interrupts of"),
    "nic_channels": ("soft %", "NET_RX", "category softirq", "cpu_soft", "interrupts of"),
    # a process' binding moves its memory and the busy time of whole nodes, not of one CPU
    "process_affinity": ("remote memory", "busy % (mean of its CPUs)", "category page-faults-numa"),
    # a proxy's session limit decides how many sessions reach the database, and so the threads it switches between
    "proxy_limit": ("connections[", "context switches", "category scheduler"),
}
# setting -> the fragment of the effect it acts through, when the capture measures it: the setting explains that
# difference and it explains the setting's other effects (shared_buffers -> buffer hit ratio -> statement latency, TPS).
SETTING_MECHANISMS: dict[str, tuple[str, ...]] = {"shared_buffers": ("buffer hit ratio",), "proxy_limit": ("connections[",)}
# setting -> the rules whose findings are about it (their remediation is the setting's).
SETTING_RULES: dict[str, tuple[str, ...]] = {
    "kernel.numa_balancing": ("numa-balancing-enabled", "cross-numa-memory"),
    "cmdline numa_balancing": ("numa-balancing-enabled", "cross-numa-memory"),
    "transparent_hugepage": ("transparent-hugepages-enabled",),
    "cmdline isolcpus": ("no-cpu-isolation",),
    "innodb_buffer_pool_size": ("buffer-pool-undersized", "buffer-pool-exceeds-numa-node"),
    "shared_buffers": ("buffer-pool-undersized", "buffer-pool-exceeds-numa-node"),
    "irq_affinity": ("irq-affinity-skew", "softirq-concentration"),
    "nic_channels": ("irq-affinity-skew", "softirq-concentration"),
    "process_affinity": ("unbound-processes", "cross-numa-memory"),
    "block": ("io-scheduler-not-none",),  # "block nvme0n1 scheduler"
    # the faster side ran with fewer sessions: the slow side's own ceiling findings ("raise it") are no remedy for the gap
    "proxy_limit": ("context-switch-overhead", "connection-pool-oversized"),
}
# rule of a finding fired on one side only -> fragments of the effect keys its problem moves.
FINDING_EFFECTS: dict[str, tuple[str, ...]] = {
    "softirq-concentration": ("soft %", "NET_RX", "category softirq", "cpu_soft", "interrupts of"),
    "irq-affinity-skew": ("soft %", "NET_RX", "category softirq", "cpu_soft", "interrupts of"),
    "cross-numa-memory": ("remote memory", "category page-faults-numa"),
    "numa-balancing-enabled": NUMA_BALANCING_EFFECTS,
    "context-switch-overhead": ("category scheduler", "context switches"),
    "transparent-hugepages-enabled": ("category page-faults-numa", "kernel (% of busy CPU)"),
    # a slow log volume makes every commit wait for its write; memory swapped out makes any statement wait
    "disk-latency-high": COMMIT_TIME_EFFECTS,
    "memory-pressure": SQL_TIME_EFFECTS,
}
HOST_EFFECTS: dict[str, tuple[str, ...]] = {
    "numa_nodes": ("remote memory",),
    "cpus": ("busy %",),
    "cpu_model": ("busy %", "latency_", "| median"),
}


def link(differences: list[Difference], rows: list[Row] | None = None) -> None:
    """Fill each difference's ``explains`` / ``caused_by`` / ``related_findings`` (module docstring); ``rows``
    (every compared row, differing or not) gives each plan's own median on each side."""
    effects = [d for d in differences if d.area in EFFECT_AREAS]
    for load in (d for d in differences if d.area == "load"):  # more clients move every statement, the host and the outcome
        _join(load, effects)
    plans = [d for d in differences if d.area == "plans"]
    medians = {(r.key, side): getattr(r, side) for r in rows or [] if r.area == "sql" and "| plan " in r.key
               for side in ("baseline", "capture")}
    for plan in plans:  # a plan moves a statement's time, not how often it is called
        if not _new_plan_slower(plan, medians):
            continue  # the plans that appeared run as fast as one both sides ran: not why the time moved
        _join(plan, [e for e in effects if e.subject == plan.subject and e.area == "sql" and e.kind != "sql-rate"])
    for event in (d for d in differences if d.area == "events"):
        if _event_action(event) in PLAN_EVENTS:
            _join(event, plans)
    for setting in (d for d in differences if d.area == "settings"):
        fragments = setting_entry(SETTING_EFFECTS, setting.key)
        _join_through(setting, [e for e in effects if any(f in e.key for f in fragments)], setting_entry(SETTING_MECHANISMS, setting.key))
    for host in (d for d in differences if d.area == "host"):
        fragments = HOST_EFFECTS.get(host.key, ())
        _join(host, [e for e in effects if any(f in e.key for f in fragments)])
    _attach_findings(differences)


def _new_plan_slower(plan: Difference, medians: dict[tuple[str, str], Any]) -> bool:
    """Whether the plans one side has and the other not can explain the fingerprint's change of time: yes when, on
    a side that ran both, a plan of its own is over SQL_NOISE_RATIO times slower than the slowest plan both sides
    ran (sbtest1 on a full scan, its other tables on the index); no when its own plans run no slower than that
    (PostgreSQL's auto_explain logs only the runs over its threshold: slower runs of the same statement log plans
    the faster side never logged, though the statement slowed for another reason). Without the medians, yes.

    >>> plan = Difference("plans", "f", "A", "A, B", None, "set", {}, [], "fingerprint-1")
    >>> _new_plan_slower(plan, {("f | plan A | median", "capture"): 10.2, ("f | plan B | median", "capture"): 12.1})
    False
    >>> _new_plan_slower(plan, {("f | plan A | median", "capture"): 0.3, ("f | plan B | median", "capture"): 38.0})
    True
    >>> flip = Difference("plans", "f", "A, C", "B, C", None, "set", {}, [], "fingerprint-1")  # A vanished, B appeared
    >>> _new_plan_slower(flip, {("f | plan A | median", "baseline"): 0.05, ("f | plan C | median", "baseline"): 0.05,
    ...                         ("f | plan B | median", "capture"): 7.1, ("f | plan C | median", "capture"): 0.05})
    True
    """
    if plan.baseline is None or plan.capture is None:
        return True
    sets = {"baseline": set(str(plan.baseline).split(", ")), "capture": set(str(plan.capture).split(", "))}
    kept = sets["baseline"] & sets["capture"]
    measured = False
    for side, plans in sets.items():
        kept_medians = [m for k in kept if (m := medians.get((f"{plan.key} | plan {k} | median", side))) is not None]
        for new in plans - kept:
            median = medians.get((f"{plan.key} | plan {new} | median", side))
            if median is None or not kept_medians:
                continue
            if median > SQL_NOISE_RATIO * max(kept_medians):
                return True
            measured = True
    return not measured


def setting_entry(table: dict[str, tuple[str, ...]], setting: str) -> tuple[str, ...]:
    """The entry of a setting, matched on its name's start ("transparent_hugepage/enabled"); a database's own
    variable or config line by its name ("mariadb variable sync_binlog" -> "sync_binlog").

    >>> setting_entry({"sync_binlog": ("commit |",)}, "mariadb variable sync_binlog"), setting_entry({"sync_binlog": ("x",)}, "sysctl a")
    (('commit |',), ())
    """
    name = DATABASE_SETTING_KEY.sub("", setting)
    return next((value for prefix, value in table.items() if setting.startswith(prefix) or name.startswith(prefix)), ())


def _event_action(event: Difference) -> str:
    """'index-ignored events (mysql-slowlog)' -> 'index-ignored'."""
    return event.key.split(" ", 1)[0]


def _join_through(cause: Difference, effects: list[Difference], mechanism: tuple[str, ...]) -> None:
    """``cause`` explains ``effects``, through those of its mechanism when some of them differ."""
    through = [e for e in effects if any(f in e.key for f in mechanism)]
    if not through:
        _join(cause, effects)
        return
    _join(cause, through)
    for step in through:
        _join(step, [e for e in effects if e not in through])


def _join(cause: Difference, effects: list[Difference]) -> None:
    for effect in effects:
        if effect is cause or effect.ref in cause.explains:
            continue
        cause.explains.append(effect.ref)
        effect.caused_by.append(cause.ref)


def _attach_findings(differences: list[Difference]) -> None:
    """A finding of one side only about a fingerprint joins that fingerprint's plan (else SQL) difference;
    a statistics finding joins the plan events; a finding naming a differing setting joins it."""
    findings = [d for d in differences if d.area == "findings"]
    by_subject: dict[str, Difference] = {}
    for d in differences:
        if d.subject and d.area in ("plans", "sql") and (d.subject not in by_subject or d.area == "plans"):
            by_subject[d.subject] = d
    events = [d for d in differences if d.area == "events" and _event_action(d) in PLAN_EVENTS]
    settings = [d for d in differences if d.area == "settings"]
    for finding in findings:
        rule = finding.key.partition("/")[0]
        target = by_subject.get(finding.subject or "")
        if target is None and rule in EVENT_FINDING_RULES and events:
            target = events[0]
        if target is None:
            about = [s for s in settings if rule in setting_entry(SETTING_RULES, s.key)]
            # the setting of the finding's own subject first: connection-ceiling/tidb_front-frontend -> "... tidb_front frontend ..."
            named = [s for s in about if finding.subject and finding.subject.replace("-", " ") in s.key]
            target = (named or about or [None])[0]
        if target is not None:
            target.related_findings.extend(i for i in finding.related_findings if i not in target.related_findings)
            finding.caused_by.append(target.ref)
        else:
            fragments = FINDING_EFFECTS.get(rule, ())
            _join(finding, [e for e in differences if e.area in EFFECT_AREAS and any(f in e.key for f in fragments)])
