"""Rank findings by what they cost, link the ones about one problem, and state the verdict.

Reads the rules' findings and outcomes; writes the ranked findings (with ``related`` filled in) and
the JSON ``verdict``:

    {"status": "problem", "headline": "Critical: Plan flip: ...",
     "findings": ["plan-flip/fingerprint-3f2a9c01", "full-table-scan/fingerprint-3f2a9c01", ...]}

Ranking, in this order:
1. problems of the system (critical and warning findings) before infos, and every note about the test
   itself (``TEST_NOTE_RULES``) last: a load-test design note never outranks a problem of the system;
2. by measured cost (``COST_KEYS`` in ``impact``, the largest share the finding explains); a finding
   that measured nothing ranks as if it cost the floor of its severity (``UNMEASURED_RANK_COST``);
3. by severity, then by scope (host-wide first), then by id.

Findings about one problem form a group (``LINKS``: a cause and what it explains, matched on the
object they are about) and stay together: the group ranks as its costliest member, its cause first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from dbdiag.findings import COST_KEYS, TEST_NOTE_RULES, Finding, RuleOutcome, Severity, Status

NETWORK_LOCKS = frozenset({"network-tx", "network-rx", "network-socket"})  # lock owners (rules/cpu/lock_owner.py)
# Rules that judge the database side and the host side: a capture is healthy only when both were judged.
DATABASE_RULES = frozenset({
    "plan-flip", "stale-statistics", "full-table-scan", "or-without-index-merge", "plan-cache-miss", "dominant-statement",
    "lock-wait", "bottleneck-outside-database", "oom-restart", "buffer-pool-undersized",
})
HOST_RULES = frozenset({
    "softirq-concentration", "irq-affinity-skew", "context-switch-overhead", "lock-contention", "cross-numa-memory",
    "unbound-processes", "disk-latency-high", "memory-pressure",
})


@dataclass(frozen=True)
class Link:
    """``cause`` explains ``effect`` when both are about the same object (or ``any_object``).

    ``peers``: two views of one problem (IRQs placed on node 0, softirqs piling up there), neither
    listed first for being the cause: the costlier one leads. ``effect_subjects``: only effects
    about one of these subjects (lock contention of the network stack, not of InnoDB).
    """

    cause: str
    effect: str
    any_object: bool = False
    peers: bool = False
    effect_subjects: frozenset[str] = frozenset()


LINKS = (
    # the slow plan of a flip is a scan of the same statement: evidence of the flip, not a second problem
    Link("plan-flip", "full-table-scan"),
    Link("plan-flip", "or-without-index-merge"),
    Link("plan-flip", "dominant-statement"),
    Link("stale-statistics", "plan-flip"),
    Link("lock-wait", "full-table-scan"),
    Link("lock-wait", "dominant-statement"),
    Link("full-table-scan", "dominant-statement"),
    # COMMIT holding the DB time because the log volume is slow: the volume is the cause
    Link("disk-latency-high", "dominant-statement"),
    # where the rest of the users' time went: the ceiling, the softirqs, the connection churn
    Link("connection-ceiling", "bottleneck-outside-database", any_object=True),
    Link("softirq-concentration", "bottleneck-outside-database", any_object=True),
    Link("irq-affinity-skew", "bottleneck-outside-database", any_object=True),
    Link("irq-affinity-skew", "softirq-concentration", any_object=True, peers=True),
    # a NIC's queue and NAPI locks hot on the CPUs its interrupts all land on: a symptom of that placement
    Link("softirq-concentration", "lock-contention", any_object=True, effect_subjects=NETWORK_LOCKS),
    Link("irq-affinity-skew", "lock-contention", any_object=True, effect_subjects=NETWORK_LOCKS),
    Link("unbound-processes", "cross-numa-memory", any_object=True),
    Link("buffer-pool-exceeds-numa-node", "cross-numa-memory", any_object=True),
)


def cost_of(finding: Finding) -> float | None:
    """The largest measured share (0..1) the finding explains, or None when it measured none.

    Only the fixed names count: a rule's other percentages (of interrupts, of allocations) are not a cost.
    """
    shares = [finding.impact.get(key) for key in COST_KEYS]
    known = [float(v) for v in shares if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v]
    return max(known) if known else None


def is_test_note(finding: Finding) -> bool:
    return finding.rule in TEST_NOTE_RULES


def is_problem(finding: Finding) -> bool:
    """A critical or warning finding about the system (not the test): what makes a capture unhealthy."""
    return finding.severity is not Severity.INFO and not is_test_note(finding)


def _objects(finding: Finding) -> set[str]:
    return {finding.subject, *finding.objects}


def _explains(link: Link, cause: Finding, effect: Finding) -> bool:
    if (cause.rule, effect.rule) != (link.cause, link.effect):
        return False
    if link.effect_subjects and effect.subject not in link.effect_subjects:
        return False
    return link.any_object or bool(_objects(cause) & _objects(effect))


def _band(finding: Finding) -> int:
    """0 problems of the system, 1 infos of the system, 2 notes about the test."""
    if is_test_note(finding):
        return 2
    return 0 if finding.severity is not Severity.INFO else 1


# A finding that measured no cost (an OOM kill, a process whose memory is all remote) ranks as if it cost
# the least its severity stands for: a measured 2% warning does not outrank an unmeasured critical, and a
# measured critical of 80% still outranks it. Only for the order: the report never shows this number.
UNMEASURED_RANK_COST = {Severity.CRITICAL: 0.25, Severity.WARNING: 0.05, Severity.INFO: 0.0}


def _own_key(finding: Finding) -> tuple[Any, ...]:
    cost = cost_of(finding)
    ranked = cost if cost is not None else UNMEASURED_RANK_COST[finding.severity]
    return (_band(finding), -ranked, -finding.severity.rank, cost is None, -finding.scope.rank, finding.id)


def link_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Each finding with ``related`` = the ids of the findings it explains or that explain it."""
    findings = list(findings)
    related: dict[int, set[str]] = {i: set(f.related) for i, f in enumerate(findings)}
    for link in LINKS:
        for i, cause in enumerate(findings):
            for j, effect in enumerate(findings):
                if i != j and _explains(link, cause, effect):
                    related[i].add(effect.id)
                    related[j].add(cause.id)
    return [replace(f, related=tuple(sorted(related[i] - {f.id}))) for i, f in enumerate(findings)]


def _depth(finding: Finding, by_id: dict[str, Finding]) -> int:
    """How many causes stand above this finding in its group (a cause is listed before its effects)."""
    depth, seen, current = 0, {finding.id}, finding
    while True:
        causes = [by_id[r] for r in current.related if r in by_id and r not in seen and _is_cause_of(by_id[r], current)]
        if not causes:
            return depth
        current = min(causes, key=_own_key)
        seen.add(current.id)
        depth += 1


def _is_cause_of(cause: Finding, effect: Finding) -> bool:
    return any(not link.peers and _explains(link, cause, effect) for link in LINKS)


def _groups(findings: list[Finding]) -> list[list[Finding]]:
    """Connected components of ``related`` among problems and infos of the system (test notes stay alone)."""
    by_id = {f.id: f for f in findings}
    parent = {f.id: f.id for f in findings}

    def root(fid: str) -> str:
        while parent[fid] != fid:
            parent[fid] = parent[parent[fid]]
            fid = parent[fid]
        return fid

    for f in findings:
        for other in f.related:
            if other in by_id and _band(f) < 2 and _band(by_id[other]) < 2:
                parent[root(f.id)] = root(other)
    groups: dict[str, list[Finding]] = {}
    for f in findings:
        groups.setdefault(root(f.id), []).append(f)
    return list(groups.values())


def rank_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Linked, then ranked as the module docstring says; ids are unique (a repeated id gets ``#2``)."""
    findings = _unique_ids(list(findings))
    linked = link_findings(findings)
    by_id = {f.id: f for f in linked}
    ordered: list[Finding] = []
    for group in sorted(_groups(linked), key=lambda g: min(_own_key(f) for f in g)):
        # within one problem: causes before effects, the most severe view of it first, then by cost
        ordered.extend(sorted(group, key=lambda f: (_band(f), _depth(f, by_id) > 0, -f.severity.rank, _own_key(f))))
    return ordered


def _unique_ids(findings: list[Finding]) -> list[Finding]:
    """Two findings of one rule about one subject would share an id: the later ones get a suffix."""
    seen: dict[str, int] = {}
    unique = []
    for f in sorted(findings, key=_own_key):
        count = seen.get(f.id, 0) + 1
        seen[f.id] = count
        unique.append(f if count == 1 else replace(f, subject=f"{f.subject} #{count}"))
    return unique


def verdict(findings: list[Finding], outcomes: list[RuleOutcome], recognised: bool) -> dict[str, Any]:
    """The JSON ``verdict`` of ranked ``findings`` (fixed names: status, headline, findings)."""
    counts = {s.value: sum(1 for f in findings if f.severity is s) for s in Severity}
    statuses = {s.value: sum(1 for o in outcomes if o.status is s) for s in Status}
    problems = [f for f in findings if is_problem(f)]
    missing = sorted({m for o in outcomes if o.status is Status.SKIPPED for m in o.missing})
    if not recognised:
        status, headline = "inconclusive", "Nothing in this capture could be read: no input was recognised."
    elif problems:
        top = problems[0]
        status, headline = "problem", f"{top.severity.value.capitalize()}: {top.title}"
    elif not any(o.examined for o in outcomes):
        status = "inconclusive"
        headline = (
            f"No rule could judge this capture: all {statuses['skipped'] + statuses['errored']} were skipped "
            "or errored (see rule coverage for what is missing)."
        )
    elif unjudged := _unjudged_sides(outcomes):
        status = "inconclusive"
        headline = f"No problem found, but {' and '.join(unjudged)} could not be judged: the capture lacks the inputs"
        missing = sorted({m for o in outcomes if not o.examined and _side(o.rule) in unjudged for m in o.missing})
    else:
        status, headline = "healthy", "No problem found in the system"
    detail = _detail(status, findings, statuses)
    return {
        "status": status,
        "headline": headline,
        "detail": detail,
        "findings": [f.id for f in findings],
        "findings_by_severity": counts,
        "rules_by_status": statuses,
        "missing": missing if status == "inconclusive" else [],
    }


def _side(rule: str) -> str | None:
    return "the database" if rule in DATABASE_RULES else "the host" if rule in HOST_RULES else None


def _unjudged_sides(outcomes: list[RuleOutcome]) -> list[str]:
    """"the database" / "the host" when no rule of that side had its inputs (each skipped for lack of them).

    A rule that read its inputs and found nothing to judge (one NUMA node, two CPUs) did judge that side."""
    judged = {_side(o.rule) for o in outcomes if o.examined}
    return [side for side in ("the database", "the host") if side not in judged]


def _detail(status: str, findings: list[Finding], statuses: dict[str, int]) -> str:
    """The sentence under the headline: what was checked, and what else the report holds."""
    checked = f"{statuses['passed'] + statuses['fired']} rule(s) judged the capture, {statuses['skipped']} skipped for missing inputs"
    notes = [f for f in findings if not is_problem(f)]
    if status == "healthy" and notes:
        noun = "note" if len(notes) == 1 else "notes"
        about = " about the load test" if any(is_test_note(f) for f in notes) else ""
        return f"{checked}; {len(notes)} {noun}{about} below."
    return f"{checked}."
