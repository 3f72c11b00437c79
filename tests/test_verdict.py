"""Ranking by measured cost, one problem one finding, and the verdict's status and headline."""

from __future__ import annotations

from dbdiag.findings import Finding, RuleOutcome, Scope, Severity, Status, finding_id
from dbdiag.verdict import cost_of, rank_findings, verdict


def finding(rule: str, subject: str, severity: str = "warning", scope: Scope = Scope.DATABASE, **impact) -> Finding:
    return Finding(
        rule=rule, severity=Severity(severity), title=f"{rule} on {subject}", subject=subject, impact=dict(impact),
        evidence=(), remediation="", sources=(), scope=scope,
    )


def ids(findings: list[Finding]) -> list[str]:
    return [f.id for f in findings]


def test_id_is_rule_and_a_slug_of_the_subject_and_long_subjects_keep_a_hash():
    assert finding_id("plan-flip", "fingerprint 3F2A9C01") == "plan-flip/fingerprint-3f2a9c01"
    assert finding_id("softirq-concentration", "CPUs 0-7 (node 0)") == "softirq-concentration/cpus-0-7-node-0"
    long_a, long_b = finding_id("r", "x" * 200 + "a"), finding_id("r", "x" * 200 + "b")
    assert long_a != long_b and len(long_a) < 110


def test_cost_reads_only_the_fixed_names():
    assert cost_of(finding("r", "s", share_of_db_time=0.4, cpu_share=0.1)) == 0.4
    assert cost_of(finding("r", "s", share_pct=100.0)) is None  # a share of interrupts is not a cost
    assert cost_of(finding("r", "s", share_of_user_time=float("nan"))) is None


def test_problems_rank_by_cost_then_severity_infos_after_and_test_notes_last():
    ranked = rank_findings([
        finding("load-test-inflation", "load test", "critical", share_of_user_time=0.9),
        finding("oom-restart", "mysqld", "critical"),
        finding("context-switch-overhead", "host", "info", cpu_share=0.8),
        finding("full-table-scan", "fingerprint a", "warning", share_of_db_time=0.6),
        finding("or-without-index-merge", "fingerprint b", "critical", share_of_db_time=0.1),
        finding("numa-balancing-enabled", "kernel.numa_balancing", "warning"),
    ])
    assert [f.rule for f in ranked] == [
        "full-table-scan",  # a measured 60%: a warning above a critical that costs less
        "oom-restart",  # measured nothing: ranks as a critical's floor (25%)
        "or-without-index-merge",  # a measured critical of 10%
        "numa-balancing-enabled",  # an unmeasured warning (5%)
        "context-switch-overhead",  # an info, whatever its cost
        "load-test-inflation",  # a note about the test never outranks the system
    ]


def test_the_scan_of_a_flipped_statement_is_evidence_of_the_flip():
    flip = finding("plan-flip", "fingerprint a", "critical", share_of_db_time=0.3)
    scan = finding("full-table-scan", "fingerprint a", "critical", share_of_db_time=0.5)
    other = finding("full-table-scan", "fingerprint b", "warning", share_of_db_time=0.4)
    ranked = rank_findings([other, scan, flip])
    assert ids(ranked) == [flip.id, scan.id, other.id]  # the group ranks as its costliest member, its cause first
    assert ranked[0].related == (scan.id,) and ranked[1].related == (flip.id,) and ranked[2].related == ()


def test_stale_statistics_link_to_the_flip_of_a_statement_they_name():
    stale = Finding(
        rule="stale-statistics", severity=Severity.CRITICAL, title="t", subject="table q", impact={"share_of_db_time": 0.2},
        evidence=(), remediation="", sources=(), objects=("fingerprint a",),
    )
    flip = finding("plan-flip", "fingerprint a", "critical", share_of_db_time=0.8)
    unrelated = finding("plan-flip", "fingerprint z", "critical", share_of_db_time=0.5)
    ranked = rank_findings([unrelated, flip, stale])
    assert ids(ranked) == [stale.id, flip.id, unrelated.id]
    assert ranked[1].related == (stale.id,)


def test_the_outside_bottleneck_ranks_with_the_findings_that_explain_it_causes_first():
    outside = finding("bottleneck-outside-database", "application / network / proxy", "critical", share_of_user_time=0.87)
    ceiling = finding("connection-ceiling", "haproxy/pg", "warning", share_of_user_time=0.7)
    stale = finding("plan-flip", "fingerprint a", "critical", share_of_db_time=0.85)
    ranked = rank_findings([stale, outside, ceiling])
    assert ids(ranked) == [ceiling.id, outside.id, stale.id]
    assert set(ranked[1].related) == {ceiling.id}


def test_two_views_of_one_problem_lead_with_the_costlier():
    irq = finding("irq-affinity-skew", "eth0", "warning", Scope.HOST, cpu_share=0.02)
    soft = finding("softirq-concentration", "CPUs 0-7 (node 0)", "critical", Scope.HOST, cpu_share=0.06)
    assert ids(rank_findings([irq, soft])) == [soft.id, irq.id]


def test_an_info_cause_does_not_lead_a_problem():
    outside = finding("bottleneck-outside-database", "app", "critical", share_of_user_time=0.5)
    soft = finding("softirq-concentration", "CPU 0", "info", Scope.HOST)
    assert ids(rank_findings([soft, outside])) == [outside.id, soft.id]


def test_one_rule_twice_on_one_subject_keeps_ids_unique():
    ranked = rank_findings([finding("oom-restart", "mysqld", "critical"), finding("oom-restart", "mysqld", "critical")])
    assert len(set(ids(ranked))) == 2


def outcome(rule: str, status: Status, missing: tuple[str, ...] = (), examined: bool | None = None) -> RuleOutcome:
    looked = status in (Status.PASSED, Status.FIRED) if examined is None else examined
    return RuleOutcome(rule, rule, status, missing=missing, examined=looked)


def test_a_capture_with_only_notes_about_the_test_is_healthy():
    notes = rank_findings([finding("load-test-inflation", "load test", "warning"), finding("dominant-statement", "fingerprint a", "info")])
    outcomes = [outcome("plan-flip", Status.PASSED), outcome("softirq-concentration", Status.PASSED),
                outcome("load-test-inflation", Status.FIRED)]
    result = verdict(notes, outcomes, recognised=True)
    assert result["status"] == "healthy"
    assert result["headline"] == "No problem found in the system"
    assert "2 notes about the load test below" in result["detail"]
    assert result["findings"] == ids(notes)


def test_the_headline_is_the_first_problem_and_the_list_is_the_rank():
    ranked = rank_findings([finding("load-test-inflation", "load test", "critical"), finding("oom-restart", "mysqld", "warning")])
    result = verdict(ranked, [outcome("oom-restart", Status.FIRED)], recognised=True)
    assert result["status"] == "problem"
    assert result["headline"] == "Warning: oom-restart on mysqld"
    assert result["findings"] == ["oom-restart/mysqld", "load-test-inflation/load-test"]


def test_inconclusive_says_which_inputs_are_missing():
    outcomes = [outcome("plan-flip", Status.SKIPPED, ("statement",)), outcome("softirq-concentration", Status.SKIPPED, ("mpstat_cpu",))]
    result = verdict([], outcomes, recognised=True)
    assert result["status"] == "inconclusive" and result["missing"] == ["mpstat_cpu", "statement"]
    assert verdict([], outcomes, recognised=False)["status"] == "inconclusive"


def test_no_problem_but_one_side_unjudged_is_inconclusive_and_names_what_is_missing():
    outcomes = [outcome("softirq-concentration", Status.SKIPPED, ("2 CPU(s) on one NUMA node",), examined=True),
                outcome("plan-flip", Status.SKIPPED, ("statement",)), outcome("lock-wait", Status.SKIPPED, ("statement",)),
                outcome("cross-numa-memory", Status.SKIPPED, ("numa_counter",))]
    result = verdict([], outcomes, recognised=True)
    assert result["status"] == "inconclusive"  # the host was read (two CPUs: nothing to judge), the database was not
    assert result["headline"] == "No problem found, but the database could not be judged: the capture lacks the inputs"
    assert result["missing"] == ["statement"]
    outcomes[1] = outcome("plan-flip", Status.PASSED)
    assert verdict([], outcomes, recognised=True)["status"] == "healthy"


def test_network_lock_contention_is_a_symptom_of_the_softirqs_on_one_cpu():
    soft = finding("softirq-concentration", "CPU 0 (node 0)", "critical", Scope.HOST, cpu_share=0.12)
    nic_lock = finding("lock-contention", "network-tx", "critical", Scope.HOST, cpu_share=0.30)
    innodb = finding("lock-contention", "innodb", "critical", Scope.HOST, cpu_share=0.40)
    ranked = rank_findings([nic_lock, innodb, soft])
    assert ids(ranked) == [innodb.id, soft.id, nic_lock.id]  # the NIC lock follows the placement that causes it
    assert ranked[1].related == (nic_lock.id,) and ranked[0].related == ()


def test_an_unmeasured_critical_is_not_outranked_by_a_small_measured_warning():
    remote = finding("cross-numa-memory", "python3", "critical", Scope.HOST)
    lock = finding("lock-contention", "innodb", "warning", Scope.HOST, cpu_share=0.022)
    big = finding("plan-flip", "fingerprint a", "critical", share_of_db_time=0.8)
    assert ids(rank_findings([lock, remote, big])) == [big.id, remote.id, lock.id]
