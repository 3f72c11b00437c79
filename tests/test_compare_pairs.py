"""``dbdiag compare`` on pairs of real captures made here, each pair differing in one known thing
(``fixtures/compare/README.md`` says how each was made): the verdict names that difference first,
with its effect, in both orders; a capture compared with itself, and two healthy runs, differ in
nothing that matters."""

from __future__ import annotations

import json

import jsonschema
import pytest

from dbdiag.compare.document import compare_documents
from dbdiag.compare.differ import Difference
from dbdiag.pipeline import Options, analyze
from dbdiag.report import build_document
from tests.conftest import REPO

PAIRS = REPO / "fixtures" / "compare"
SCHEMA = json.loads((REPO / "analyzer/schema/compare.schema.json").read_text(encoding="utf-8"))
BASE, RERUN, IGNORED = "mariadb-sysbench-base", "mariadb-sysbench-base-rerun", "mariadb-sysbench-index-ignored"
PG_LARGE, PG_SMALL = "postgres-pgbench-shared-buffers-256MB", "postgres-pgbench-shared-buffers-128kB"
IRQ_KERNEL, IRQ_PINNED = "numa2-guest-iperf-irq-kernel", "numa2-guest-iperf-irq-pinned-cpu3"
BALANCING_OFF, BALANCING_ON = "numa2-guest-balancing-off", "numa2-guest-balancing-on"
CAPTURES = (BASE, RERUN, IGNORED, PG_LARGE, PG_SMALL, IRQ_KERNEL, IRQ_PINNED, BALANCING_OFF, BALANCING_ON)


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    """Each fixture capture's analyze report document, made once for the module."""
    return {name: build_document(analyze(PAIRS / f"{name}.tar.gz", Options())) for name in CAPTURES}


def compared(reports: dict[str, dict], baseline: str, capture: str) -> dict:
    document = compare_documents(reports[baseline], reports[capture])
    jsonschema.validate(document, SCHEMA)
    return document


def slower(good: str, bad: str, order: str) -> tuple[str, str, str]:
    """(baseline, capture, the side the bad capture is on) for one order of a pair."""
    return (good, bad, "capture") if order == "good-first" else (bad, good, "baseline")


def test_every_fixture_capture_is_small():
    for name in CAPTURES:
        assert (PAIRS / f"{name}.tar.gz").stat().st_size < 300_000, name


@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_index_made_ignored_is_named_first_with_its_effect(reports, order):
    baseline, capture, slow_side = slower(BASE, IGNORED, order)
    verdict = compared(reports, baseline, capture)["verdict"]
    assert verdict["status"] == "differs" and verdict["slow_side"] == slow_side
    first = verdict["explained"][0]
    assert first["area"] == "events" and first["key"] == "index-ignored ALTER TABLE sbtest1 ALTER INDEX xid IGNORED (mysql-slowlog)"
    # the headline names the change itself and where the slow side's log shows it
    assert f"because of ALTER TABLE sbtest1 ALTER INDEX xid IGNORED at capture/db/mariadb-slow.log:7 (only in {slow_side})" in verdict["headline"]
    assert first[slow_side] == 1 and first["baseline" if slow_side == "capture" else "capture"] is None
    # the chain: the event -> the plan of sbtest1 became a full scan -> that statement's time -> the outcome
    assert "sbtest1:ALL" in first["effect"] and "DB time per second" in first["effect"]
    assert "→ outcome" in first["effect"]
    assert verdict["outcome"]["differs"]
    # the effects reached are observed rows (SQL time of the statements whose plan changed), not more causes
    assert first["effects"] and all(e.startswith("sql:") for e in first["effects"])
    assert any(e.startswith("sql:select c from sbtest? where id=? |") for e in first["effects"])
    # the evidence names the statement that set the index aside, with its file:line, and the undo is the slow side's
    assert any("made IGNORED on sbtest1" in line and "mariadb-slow.log:" in line for line in first["evidence"])
    assert any("ALTER INDEX xid NOT IGNORED" in r["text"] for r in first["remediation"])


@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_small_shared_buffers_is_named_first_with_its_effect(reports, order):
    """pgbench as fast as it goes on the same data, the kernel's page cache kept from holding it (copy F): 128kB of
    shared buffers against 256MB. The verdict names shared_buffers first and only, and its chain in causal order:
    the buffer hit ratio of bench (pg_stat_database), then the statement latency, then the TPS the headline states."""
    baseline, capture, slow_side = slower(PG_LARGE, PG_SMALL, order)
    fast_side = "baseline" if slow_side == "capture" else "capture"
    document = compared(reports, baseline, capture)
    verdict = document["verdict"]
    assert verdict["status"] == "differs" and verdict["slow_side"] == slow_side
    assert [e["cause"] for e in verdict["explained"]] == ["settings:shared_buffers"] and verdict["also_differs"] == []
    first = verdict["explained"][0]
    assert first[slow_side] == "128kB" and first[fast_side] == "256MB"  # as written in postgresql.conf
    assert first["sources"][slow_side] == "capture/db/postgresql.conf"
    # the headline: the TPS gap, and the setting
    outcome = verdict["outcome"]
    assert outcome["label"] == "TPS" and outcome["key"] == "tps (pgbench), mean of the timeline" and outcome["differs"]
    assert outcome[fast_side] > 5 * outcome[slow_side]
    assert verdict["headline"].startswith(f"{document['capture']['name']}: TPS ")
    assert "most likely because of settings shared_buffers (differs)" in verdict["headline"]
    # the chain: the setting -> the hit ratio -> statement latency ... -> the outcome
    ratio = "buffer hit ratio bench (pg_stat_database)"
    assert first["effect"].startswith(f"activity {ratio}: ") and first["effect"].endswith(f"({outcome['change']})")
    assert "statement latency p50 (statement log)" in first["effect"] and "→ outcome TPS " in first["effect"]
    assert {f"activity:{ratio}", "outcome:statement latency p50 (statement log)", "outcome:statement latency p99 (statement log)",
            "outcome:tps (pgbench), mean of the timeline", "outcome:latency_avg (pgbench), mean of the timeline",
            "outcome:commits per second bench (pg_stat_database)"} <= set(first["effects"])
    rows = {(a["area"], r["key"]): r for a in document["areas"] for r in a["rows"]}
    hit, latency = rows[("activity", ratio)], rows[("outcome", "statement latency p50 (statement log)")]
    assert hit["differs"] and hit[fast_side] > 99.9 and 45 < hit[slow_side] < 55
    assert latency["differs"] and latency[slow_side] > 10 * latency[fast_side]
    (ratio_difference,) = [d for d in document["differences"] if d["key"] == ratio]
    assert ratio_difference["caused_by"] == ["settings:shared_buffers"] and ratio_difference["change"].endswith(" points")
    # nothing the sampled statement log cannot tell is compared: no idle gaps between sampled statements
    assert not [d for d in document["differences"] if d["key"].startswith("idle gap")]
    assert [r["finding"] for r in first["remediation"]] == ["buffer-pool-undersized/shared_buffers"]


@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_nic_irqs_pinned_to_one_cpu_are_named_first_with_their_effect(reports, order):
    """A 2-node guest: the virtio NIC's IRQs pinned to CPU 3 against left to the kernel. No outcome is
    captured (iperf3 runs on the host), so the verdict ranks by the effects: CPU 3's softirq share."""
    baseline, capture, pinned_side = slower(IRQ_KERNEL, IRQ_PINNED, order)
    kernel_side = "baseline" if pinned_side == "capture" else "capture"
    verdict = compared(reports, baseline, capture)["verdict"]
    assert verdict["outcome"] is None and verdict["slow_side"] is None
    first = verdict["explained"][0]
    assert first["area"] == "settings" and first["key"].startswith("irq_affinity ") and first["key"].endswith(" smp_affinity_list")
    assert first[pinned_side] == "3" and first[kernel_side] == "all CPUs" and len(first["merged"]) >= 2  # 0-3 of 4 CPUs
    assert "activity:cpu 3 soft %" in first["effects"]
    soft = next(a for a in compared(reports, baseline, capture)["areas"] if a["area"] == "activity")
    cpu3 = next(r for r in soft["rows"] if r["key"] == "cpu 3 soft %")
    assert cpu3["differs"] and cpu3[pinned_side] > cpu3[kernel_side]
    assert "softirq-concentration/cpu-3-node-1" in first["related_findings"]
    assert any(r["finding"] == "softirq-concentration/cpu-3-node-1" for r in first["remediation"])


@pytest.mark.parametrize("order", ["good-first", "bad-first"])
def test_numa_balancing_switched_on_is_named_first_with_its_effect(reports, order):
    """A 2-node guest where an unbound python3 filled 600 MB from node 0's CPUs, then kept touching it from node 1's:
    kernel.numa_balancing 0 against 1. No outcome is captured, so no side is called slower; the verdict ranks the
    sysctl first, by what the balancing did: the pages it migrated and its hinting faults (/proc/vmstat), and the
    process's memory left on the other node without it (cross-numa-memory on that side only)."""
    baseline, capture, on_side = slower(BALANCING_OFF, BALANCING_ON, order)
    off_side = "baseline" if on_side == "capture" else "capture"
    document = compared(reports, baseline, capture)
    verdict = document["verdict"]
    assert verdict["outcome"] is None and verdict["slow_side"] is None
    # the one known difference is the one cause: the sysctls the kernel sizes from RAM at each boot are not others
    assert [e["cause"] for e in verdict["explained"]] == ["settings:kernel.numa_balancing"] and verdict["also_differs"] == []
    first = verdict["explained"][0]
    assert (first[off_side], first[on_side]) == ("0", "1") and first["sources"][on_side] == "capture/os/sysctl.txt"
    assert f"settings kernel.numa_balancing ({first['baseline']} → {first['capture']})" in verdict["headline"]
    migrated, faults = "vmstat numa_pages_migrated during the capture", "vmstat numa_hint_faults during the capture"
    assert {f"activity:{migrated}", f"activity:{faults}"} <= set(first["effects"])
    assert first["effect"].startswith(f"activity {migrated}: ")
    rows = {r["key"]: r for a in document["areas"] if a["area"] == "activity" for r in a["rows"]}
    assert rows[migrated][off_side] == 0 and rows[migrated][on_side] > 100_000  # most of the 600 MB, in 4 KiB pages
    assert rows[faults][off_side] == 0 and rows[faults][on_side] > 0
    # without balancing the process's memory stayed on node 0, away from its CPUs (node 1): a finding of that side only
    (remote,) = [d for d in document["differences"] if d["key"] == "cross-numa-memory/python3"]
    assert remote[off_side] == "critical" and remote[on_side] is None and remote["caused_by"] == ["settings:kernel.numa_balancing"]
    assert {"cross-numa-memory/python3", "numa-balancing-enabled/kernel.numa_balancing"} <= set(first["related_findings"])
    assert any(r["finding"] == "numa-balancing-enabled/kernel.numa_balancing" for r in first["remediation"])


@pytest.mark.parametrize("name", CAPTURES)
def test_a_capture_compared_with_itself_has_no_difference(reports, name):
    document = compared(reports, name, name)
    assert document["differences"] == []
    assert document["verdict"]["status"] == "no-difference" and document["verdict"]["explained"] == []
    assert all(not row["differs"] for area in document["areas"] for row in area["rows"])
    assert sum(len(area["rows"]) for area in document["areas"]) > 50  # it compared something


@pytest.mark.parametrize("order", ["first", "second"])
def test_two_healthy_runs_differ_in_no_finding_and_no_outcome(reports, order):
    baseline, capture = (BASE, RERUN) if order == "first" else (RERUN, BASE)
    document = compared(reports, baseline, capture)
    areas = {d["area"] for d in document["differences"]}
    assert "findings" not in areas and "outcome" not in areas
    assert document["verdict"]["slow_side"] is None and document["verdict"]["explained"] == []
    outcome_rows = next(a for a in document["areas"] if a["area"] == "outcome")["rows"]
    assert any(r["key"].startswith("tps (sysbench)") for r in outcome_rows)  # compared, within noise


def test_two_engines_compare_the_host_and_the_outcome_only(reports):
    document = compared(reports, BASE, PG_SMALL)
    verdict = document["verdict"]
    assert {n["area"] for n in verdict["not_compared"]} == {"sql", "plans", "events", "outcome"}
    # sysbench at --rate 35, pgbench without -R: their throughput is what each was told to offer
    (throughput,) = [n["reason"] for n in verdict["not_compared"] if n["area"] == "outcome"]
    assert throughput.startswith("throughput: the load tests offered different rates (")
    assert {a["area"] for a in document["areas"]}.isdisjoint({"sql", "plans", "events"})
    assert not [d for d in document["differences"] if d["area"] in ("sql", "plans", "events")]
    only = {(o["side"], o["kind"]) for o in verdict["only_one_side"]}
    assert {("baseline", "mysql-slowlog"), ("capture", "postgresql-log"), ("capture", "pgbench")} <= only
    assert all("collect" in o["collect"] for o in verdict["only_one_side"])


def test_the_noise_bands_in_the_docstring_are_the_constants():
    from dbdiag.compare import differ

    text = differ.__doc__
    for name in ("RATE_NOISE_REL", "TIME_NOISE_REL", "TAIL_NOISE_REL", "PCT_NOISE_POINTS", "SQL_NOISE_RATIO",
                 "SQL_TAIL_NOISE_RATIO", "SQL_TIME_FLOOR_S_PER_S", "TIME_NOISE_FLOOR_MS", "BOOT_SIZED_NOISE_REL",
                 "HIT_PCT_FLOOR_POINTS"):
        assert f"``{name}``" in text, name
    assert f"({differ.RATE_NOISE_REL:.0%}" in text and f"({differ.TIME_NOISE_REL:.0%})" in text
    assert f"({differ.PCT_NOISE_POINTS:.0f} points" in text and f"({differ.SQL_NOISE_RATIO:.0f}x)" in text
    assert f"``BOOT_SIZED_NOISE_REL`` ({differ.BOOT_SIZED_NOISE_REL:.0%};" in text


def test_difference_refs_point_at_differences(reports):
    document = compared(reports, BASE, IGNORED)
    refs = {f"{d['area']}:{d['key']}" for d in document["differences"]}
    linked = [r for d in document["differences"] for r in d["explains"] + d["caused_by"]]
    assert linked and set(linked) <= refs
    assert set(document["verdict"]["also_differs"]) <= refs and set(document["verdict"]["unexplained_effects"]) <= refs
    assert isinstance(Difference("sql", "k", 1.0, 2.0, "s", "sql-time", {}).ref, str)


def test_the_differential_flame_graph_shows_the_full_scans_grow(reports):
    """The index set aside makes InnoDB read every row (handler::ha_rnd_next): that frame's share of
    busy CPU grows between the two captures, and shrinks back in the other order."""
    forward = compared(reports, BASE, IGNORED)["flame_diff"]
    scans = [n for n in forward["nodes"] if n["frame"] == "handler::ha_rnd_next"]
    assert scans and max(n["capture_share_pct"] - n["baseline_share_pct"] for n in scans) > 5
    backward = compared(reports, IGNORED, BASE)["flame_diff"]
    assert all(n["capture_share_pct"] <= n["baseline_share_pct"] for n in backward["nodes"] if n["frame"] == "handler::ha_rnd_next")
    same = compared(reports, BASE, BASE)["flame_diff"]
    assert all(n["capture_share_pct"] == n["baseline_share_pct"] for n in same["nodes"])
