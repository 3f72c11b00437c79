"""The compare verdict: which side is slower, by how much, and the differences that explain it.

Reads the linked differences (``links.link``) and both report documents; writes::

    {"status": "differs", "slow_side": "capture",
     "headline": "mariadb-ignored.tar.gz: p99 latency (sysbench) 227.8 ms against 16.3 ms (+1297%) ...",
     "outcome": {"key": "latency_p99_reported (sysbench), ...", "baseline": 16.3, "capture": 227.8, ...},
     "explained": [{"cause": "events:index-ignored events (mysql-slowlog)", "chain": [...], "effect": "...",
                    "related_findings": [...], "remediation": [{"finding": "...", "text": "..."}]}],
     "also_differs": ["host:kernel", ...], "unexplained_effects": [...], "only_one_side": [...], ...}

An effect better on the slow side than on the other is not linked to any cause (it cannot explain
why that side is slower). Ranking of ``explained``: causes that reach an observed effect, most statement time per second
moved first (the sum of |change| of the SQL DB-time rows they reach, through plans), then how many
effects they reach; then findings fired on the slow side only that no other difference explains,
by the share of DB time their rule measured. Causes without an observed effect are "also differs".
"""

from __future__ import annotations

from typing import Any

from dbdiag.compare.differ import Difference
from dbdiag.compare.links import CAUSE_AREAS, EFFECT_AREAS, SETTING_RULES, setting_entry

# The outcome the headline states, the first that differs (else the first both sides have):
# (key prefix, True when more is better, label).
OUTCOME_PRIORITY = (
    ("tps (", True, "TPS"),
    ("qps (sysbench", True, "QPS"),
    ("latency_p99_reported (", False, "p99 latency"),
    ("latency_avg (", False, "average latency"),
    ("user response time per request", False, "user response time per request"),
    ("statements per second", True, "statements per second"),
    ("statement latency p99", False, "statement p99 latency"),
    ("DB time per second", False, "DB time per second"),
)
MAX_EFFECTS_SHOWN = 2  # per link of a chain, the largest changes; the rest counted


def value_text(value: Any, unit: str | None) -> str:
    """50.97, '1/s' -> '51.0/s'; 0.000361 s -> shown by unit; None -> 'absent'.

    >>> value_text(99.98, "%"), value_text(50.85, "%"), value_text(100.0, "%")
    ('99.98%', '50.9%', '100%')
    """
    if value is None:
        return "absent"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        number = f"{value:,}"
    elif unit == "%" and 99 < value < 100:  # a hit ratio of 99.98% is not 100.0%: the misses are the news
        number = f"{value:.2f}"
    elif abs(value) >= 100:
        number = f"{value:,.0f}"
    elif abs(value) >= 1:
        number = f"{value:.1f}"
    else:
        number = f"{value:.3g}"
    return {"%": f"{number}%", "1/s": f"{number}/s", None: number, "events": number}.get(unit, f"{number} {unit}")


def difference_text(d: Difference) -> str:
    """'sql select c ... | p99: 0.321 ms → 33.2 ms (+10265%)'; a plan set shows what changed only:
    'plans of select c ...: sbtest1:ref(xid) → sbtest1:ALL (3 plan(s) unchanged)'."""
    if d.kind == "set" and d.baseline is not None and d.capture is not None:
        before, after = set(str(d.baseline).split(", ")), set(str(d.capture).split(", "))
        gone, new = ", ".join(sorted(before - after)) or "none", ", ".join(sorted(after - before)) or "none"
        return f"plans of {d.key}: {gone} → {new} ({len(before & after)} plan(s) unchanged)"
    return f"{d.area} {d.key}: {value_text(d.baseline, d.unit)} → {value_text(d.capture, d.unit)} ({d.change_text()})"


def build_verdict(differences: list[Difference], baseline: dict[str, Any], capture: dict[str, Any], names: dict[str, str],
                  outcome_rows: list[Any], not_compared: list[dict[str, str]], throughput_comparable: bool = True) -> dict[str, Any]:
    by_ref = {d.ref: d for d in differences}
    outcome, slow_side = _outcome(differences, outcome_rows, throughput_comparable)
    if slow_side is not None:
        _unlink_contrary(differences, slow_side)
    documents = {"baseline": baseline, "capture": capture}
    # the slow side's findings carry the remediation; with no outcome to say which side is slow, both sides'
    slow_findings = {f["id"]: f for f in (documents[slow_side] if slow_side else capture).get("findings") or []}
    if slow_side is None:
        slow_findings = {f["id"]: f for f in baseline.get("findings") or []} | slow_findings
    # a finding of the faster side only does not explain why the other is slower: it is listed, not ranked
    causes = [d for d in differences if d.area in CAUSE_AREAS and not d.caused_by
              and not (d.area == "findings" and slow_side and getattr(d, slow_side) is None)]
    linked = sorted((c for c in causes if _reached(c, by_ref)), key=lambda c: _rank(c, by_ref, slow_findings), reverse=True)
    lone_findings = sorted(
        (c for c in causes if c.area == "findings" and not _reached(c, by_ref) and c.key in slow_findings
         and _share(slow_findings[c.key]) > 0),
        key=lambda c: _share(slow_findings[c.key]), reverse=True,
    )
    explained = _merge_alike([_explanation(c, by_ref, slow_findings, outcome) for c in linked + lone_findings])
    effects_by_ref = {ref: e["effect"] for e in explained for ref in e["merged"]}
    for cause in linked:
        cause.effect = effects_by_ref.get(cause.ref)
    for cause in lone_findings:
        cause.effect = slow_findings[cause.key]["impact"].get("description")
    shown = {c.ref for c in linked + lone_findings}
    also = [d.ref for d in differences if d.area in CAUSE_AREAS and not d.caused_by and d.ref not in shown]
    # the outcome is what the causes explain (their chains end there), not an effect left unexplained
    unexplained = [d.ref for d in differences if d.area in EFFECT_AREAS and d.area != "outcome" and not d.caused_by]
    new_ids = sorted(_new_findings(baseline, capture))
    return {
        "status": "no-difference" if not differences else ("differs" if slow_side else "outcome-within-noise"),
        "headline": _headline(outcome, slow_side, names, explained, differences, not_compared),
        "slow_side": slow_side,
        "outcome": outcome,
        "explained": explained,
        "also_differs": also,
        "unexplained_effects": unexplained,
        "findings_new_in_capture": new_ids,
        "findings_gone_in_capture": sorted(_new_findings(capture, baseline)),
        "only_one_side": _only_one_side(baseline, capture),
        "not_compared": not_compared,
        "partial": {side: documents[side]["capture"].get("partial_reasons") or [] for side in documents},
    }


# Effects that are worse when higher (times, shares) and, in the outcome, worse when lower (throughput);
# any other kind (calls or softirqs per second) says nothing of which side it hurts.
WORSE_WHEN_HIGHER = ("time", "tail", "sql-time", "sql-latency", "sql-tail", "pct", "share")


def _unlink_contrary(differences: list[Difference], slow_side: str) -> None:
    """Drop the links to effects that are better on the slow side: they cannot explain why it is slower
    (a plan whose statement takes more time per second on the faster side, because that side ran more)."""
    fast_side = "baseline" if slow_side == "capture" else "capture"
    contrary = set()
    for d in differences:
        slow, fast = getattr(d, slow_side), getattr(d, fast_side)
        if d.area in ("outcome", "activity", "profile", "sql") and (slow is None or isinstance(slow, (int, float))):
            slow, fast = slow or 0.0, fast or 0.0
            if d.kind in WORSE_WHEN_HIGHER and slow < fast or d.area == "outcome" and d.kind == "rate" and slow > fast:
                contrary.add(d.ref)
    for d in differences:
        d.explains = [ref for ref in d.explains if ref not in contrary]
        if d.ref in contrary:
            d.caused_by = []


# Settings keyed "<group> <subject> <name>" whose subject is a process: two processes bound alike are one cause.
SUBJECT_GROUPS = ("process_affinity",)


def _variable_word(words: list[str]) -> int | None:
    """The word of a setting's key that may differ between alike settings: an IRQ number, a process name."""
    if len(words) >= 3 and words[0] in SUBJECT_GROUPS:
        return 1
    return next((i for i, w in enumerate(words) if w.isdigit()), None)


def _merge_alike(explained: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One explanation for settings that differ alike and explain the same effects: the three IRQs of
    one NIC set to CPU 3 are one cause, "irq_affinity 24, 25, 26 smp_affinity_list", not three; two
    processes bound alike, "process_affinity haproxy, pd-server Cpus_allowed_list"."""
    merged: list[dict[str, Any]] = []
    for item in explained:
        words = item["key"].split(" ")
        at = _variable_word(words) if item["area"] == "settings" else None
        pattern = " ".join("*" if i == at else w for i, w in enumerate(words))
        twin = next((m for m in merged if at is not None and m["area"] == item["area"] and m["pattern"] == pattern
                     and (m["baseline"], m["capture"], m["effects"]) == (item["baseline"], item["capture"], item["effects"])), None)
        if twin is None:
            merged.append({**item, "sources": dict(item["sources"]), "pattern": pattern, "merged": [item["cause"]],
                           "variants": [words[at]] if at is not None else []})
            continue
        twin["merged"].append(item["cause"])
        twin["variants"].append(words[at])
        for side, source in item["sources"].items():  # each side's files, every one merged (haproxy's and pd-server's status)
            known = (twin["sources"].get(side) or "").split(", ")
            if source and source not in known:
                twin["sources"][side] = ", ".join(part for part in (*known, source) if part)
        twin["key"] = " ".join(", ".join(twin["variants"]) if w == "*" else w for w in pattern.split(" "))
    for item in merged:
        del item["pattern"], item["variants"]
    return merged


def _outcome(differences: list[Difference], rows: list[Any], throughput_comparable: bool = True) -> tuple[dict[str, Any] | None, str | None]:
    """The headline outcome and the slow side (None when the outcome is within noise); throughput (the outcomes
    where more is better) only when both load tests offered the same rate."""
    differing = {d.key: d for d in differences if d.area == "outcome" and d.baseline is not None and d.capture is not None}
    both = [r for r in rows if r.baseline is not None and r.capture is not None]
    priority = [entry for entry in OUTCOME_PRIORITY if throughput_comparable or not entry[1]]
    for prefix, more_is_better, label in priority:
        hit = next((d for key, d in differing.items() if key.startswith(prefix)), None)
        if hit is not None:
            capture_better = (hit.capture > hit.baseline) == more_is_better
            return _outcome_json(hit.key, label, hit.baseline, hit.capture, hit.unit, hit.change_text(), hit.sources, True), (
                "baseline" if capture_better else "capture")
    for prefix, _, label in priority:
        row = next((r for r in both if r.key.startswith(prefix)), None)
        if row is not None:
            return _outcome_json(row.key, label, row.baseline, row.capture, row.unit, "within noise", row.sources, False), None
    return None, None


def _outcome_json(key: str, label: str, baseline: Any, capture: Any, unit: str | None, change: str,
                  sources: dict[str, str | None], differs: bool) -> dict[str, Any]:
    return {"key": key, "label": label, "baseline": baseline, "capture": capture, "unit": unit, "change": change,
            "differs": differs, "sources": sources}


def _reached(cause: Difference, by_ref: dict[str, Difference]) -> list[Difference]:
    """Every effect difference a cause reaches, through the causes it explains (plans)."""
    seen: dict[str, Difference] = {}
    todo = list(cause.explains)
    while todo:
        ref = todo.pop()
        if ref in seen or ref not in by_ref:
            continue
        seen[ref] = by_ref[ref]
        todo.extend(by_ref[ref].explains)
    return [d for d in seen.values() if d.area in EFFECT_AREAS]


def _score(cause: Difference, by_ref: dict[str, Difference]) -> tuple[float, int, float]:
    reached = _reached(cause, by_ref)
    moved_s_per_s = sum(abs((d.capture or 0) - (d.baseline or 0)) for d in reached if d.kind == "sql-time")
    return moved_s_per_s, len(reached), max((d.relative_change() for d in reached), default=0.0)


# How a finding of the slow side about a cause weighs in its rank (after the statement time it moved).
SEVERITY_RANK = {"critical": 3, "warning": 2, "info": 1}


def _rank(cause: Difference, by_ref: dict[str, Difference], slow_findings: dict[str, dict[str, Any]]) -> tuple[float, int, int, float]:
    """Statement time per second moved, then the most severe finding the slow side has about the cause (the
    rules measured it there), then how many effects it reaches, then their largest relative change."""
    moved, reached, change = _score(cause, by_ref)
    severity = max((SEVERITY_RANK.get(slow_findings[i].get("severity"), 0)
                    for i in _finding_ids(cause, by_ref, slow_findings) if i in slow_findings), default=0)
    return moved, severity, reached, change


def _weight(d: Difference, by_ref: dict[str, Difference]) -> tuple[float, bool, float]:
    """How much one link of a chain moved: statement time per second reached, then whether it is a cost (a
    time, a share of CPU: "CPU 0 %soft 94% → 46%" before "CPU 32 NET_RX 0.2/s → 144k/s") or the count of
    what a setting does (pages migrated), then relative change."""
    moved = abs((d.capture or 0) - (d.baseline or 0)) if d.kind == "sql-time" else _score(d, by_ref)[0]
    return moved, d.kind in WORSE_WHEN_HIGHER or d.kind == "counter", d.relative_change()


def _share(finding: dict[str, Any]) -> float:
    impact = finding.get("impact") or {}
    return float(impact.get("share_of_db_time") or impact.get("share_of_user_time") or impact.get("cpu_share") or 0.0)


def _chain_text(cause: Difference, by_ref: dict[str, Difference], depth: int = 0) -> str:
    """'A → B (+2968%); C ... → D' with the largest changes first at every link."""
    direct = sorted((by_ref[r] for r in cause.explains if r in by_ref), key=lambda d: _weight(d, by_ref), reverse=True)
    parts = []
    for d in direct[:MAX_EFFECTS_SHOWN]:
        text = difference_text(d)
        if d.explains and depth < 2:
            text = f"{text} → {_chain_text(d, by_ref, depth + 1)}"
        parts.append(text)
    if len(direct) > MAX_EFFECTS_SHOWN:
        parts.append(f"and {len(direct) - MAX_EFFECTS_SHOWN} more")
    return "; ".join(parts)


def _finding_ids(cause: Difference, by_ref: dict[str, Difference], slow_findings: dict[str, dict[str, Any]]) -> list[str]:
    """The findings about a cause: its own (a finding), those linked to it and to what it explains, and the slow
    side's findings of the rules that judge the setting."""
    if cause.area == "findings":
        return [cause.key]
    if cause.area == "load":
        return []  # the two runs offered another load: no finding of either side is about that, nor its remedy
    ids = list(cause.related_findings)
    for d in [by_ref[r] for r in cause.explains if r in by_ref]:
        ids.extend(i for i in d.related_findings if i not in ids)
    rules = setting_entry(SETTING_RULES, cause.key) if cause.area == "settings" else ()
    ids.extend(i for i, f in slow_findings.items() if f["rule"] in rules and i not in ids)
    return ids


def _explanation(cause: Difference, by_ref: dict[str, Difference], slow_findings: dict[str, dict[str, Any]],
                 outcome: dict[str, Any] | None) -> dict[str, Any]:
    reached = _reached(cause, by_ref)
    ids = _finding_ids(cause, by_ref, slow_findings)
    on_slow = [slow_findings[i] for i in ids if i in slow_findings]
    remediation, seen = [], set()
    for finding in on_slow:
        text = (finding.get("remediation") or "").strip()
        if text and text not in seen:
            seen.add(text)
            remediation.append({"finding": finding["id"], "text": text})
    effect = _chain_text(cause, by_ref) if cause.explains else (slow_findings.get(cause.key, {}).get("impact") or {}).get("description")
    if outcome is not None and outcome["differs"]:
        effect = (f"{effect} → outcome {outcome['label']} {value_text(outcome['baseline'], outcome['unit'])} → "
                  f"{value_text(outcome['capture'], outcome['unit'])} ({outcome['change']})")
    return {
        "cause": cause.ref,
        "area": cause.area,
        "key": cause.key,
        "baseline": cause.baseline,
        "capture": cause.capture,
        "change": cause.change_text(),
        "sources": cause.sources,
        "effect": effect,
        "effects": [d.ref for d in reached],
        "db_time_moved_s_per_s": _score(cause, by_ref)[0],
        "related_findings": ids,
        "evidence": [f"{f['id']}: {f['title']}" for f in on_slow],
        "remediation": remediation,
    }


def _headline(outcome: dict[str, Any] | None, slow_side: str | None, names: dict[str, str],
              explained: list[dict[str, Any]], differences: list[Difference], not_compared: list[dict[str, str]] = ()) -> str:
    if not differences:
        return f"No difference beyond noise between {names['baseline']} and {names['capture']}"
    if outcome is None:
        sentence = "No outcome (throughput, latency, DB time) on both sides to say which is slower"
        if not explained:
            return f"{sentence}; {len(differences)} difference(s) listed below"
        first = explained[0]
        return (f"{sentence}; the difference with the largest observed effect: {first['area']} {first['key']} "
                f"({value_text(first['baseline'], None)} → {value_text(first['capture'], None)}), {len(explained)} cause(s) ranked")
    sentence = (f"{names['capture']}: {outcome['label']} {value_text(outcome['capture'], outcome['unit'])} against "
                f"{value_text(outcome['baseline'], outcome['unit'])} in {names['baseline']} ({outcome['change']})")
    if slow_side is None:
        return f"{sentence}; {len(differences)} other difference(s)"
    if not explained:
        unseen = "; neither capture holds the database's settings: collect them on both sides" if any(
            n["area"] == "settings" for n in not_compared) else ""
        return f"{sentence}; no difference found that explains it ({len(differences)} difference(s) listed){unseen}"
    return f"{sentence}; most likely because of {_cause_text(explained[0])}, {len(explained)} cause(s) ranked"


def _cause_text(cause: dict[str, Any]) -> str:
    """A cause as the headline names it: a change by its statement and place ("ALTER TABLE sbtest1 ALTER INDEX
    xid IGNORED at capture/db/mariadb-slow.log:7, only in capture"), a finding by its title (without the
    threshold), anything else by area and key."""
    statement = cause["key"].split(" ", 1)[-1].rsplit(" (", 1)[0]  # "index-ignored <statement> (mysql-slowlog)"
    if cause["area"] == "events" and cause["change"].startswith("only in ") and statement != "events":  # not a count
        where = (cause.get("sources") or {}).get(cause["change"].removeprefix("only in "))
        return f"{statement}{f' at {where}' if where else ''} ({cause['change']})"
    if cause["area"] == "findings" and cause.get("evidence"):  # "lock-wait/table-accounts: <its title>": the title
        title = cause["evidence"][0].split(": ", 1)[-1].split("; threshold", 1)[0]
        return f"{title} ({cause['change']})"
    return f"{cause['area']} {cause['key']} ({cause['change']})"


def _new_findings(before: dict[str, Any], after: dict[str, Any]) -> set[str]:
    """Findings of ``after`` absent from ``before`` or more severe there (``--fail-on`` reads these)."""
    ranks = {"info": 0, "warning": 1, "critical": 2}
    old = {f["id"]: ranks.get(f["severity"], 0) for f in before.get("findings") or []}
    return {f["id"] for f in after.get("findings") or [] if f["id"] not in old or ranks.get(f["severity"], 0) > old[f["id"]]}


# Input kinds that carry the same data in another layout: one on each side is nothing missing.
SAME_DATA_KINDS = {"mpstat-json": "mpstat", "mpstat-text": "mpstat"}


def _only_one_side(baseline: dict[str, Any], capture: dict[str, Any]) -> list[dict[str, Any]]:
    """Input kinds read on one side only (mpstat as text on one, as JSON on the other is both), and what to
    collect on the other to compare them."""
    kinds = {side: {} for side in ("baseline", "capture")}
    for side, document in (("baseline", baseline), ("capture", capture)):
        for item in document.get("inputs") or []:
            if item.get("kind") and item.get("status") == "read":
                kinds[side].setdefault(item["kind"], []).append(item["path"])
    held = {side: {SAME_DATA_KINDS.get(kind, kind) for kind in kinds[side]} for side in kinds}
    result = []
    for side, other in (("baseline", "capture"), ("capture", "baseline")):
        for kind in sorted(k for k in set(kinds[side]) - set(kinds[other]) if SAME_DATA_KINDS.get(k, k) not in held[other]):
            result.append({"side": side, "kind": kind, "paths": kinds[side][kind],
                           "collect": f"collect {kind} ({', '.join(kinds[side][kind][:2])}) on the {other} side too"})
    return result
