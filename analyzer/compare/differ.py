"""Two sides' facts -> the differences beyond noise, each with both values and both sources.

How "within noise" is judged (the constants below): two runs of one workload on one host never give
the same numbers, so a number differs only when its change passes the threshold of its kind:

- rates of the outcome (TPS, QPS, statements per second): relative change over ``RATE_NOISE_REL``
  (15%: a 10 s run at 35 TPS counts ~350 Poisson arrivals, +-5% each, and two runs differ by up to
  ~11% on a shared machine);
- mean times of the outcome (average latency, per-request time, DB time per second): relative change
  over ``TIME_NOISE_REL`` (30%) and over ``TIME_NOISE_FLOOR_MS`` (0.5 ms);
- tail times of the outcome (p99): over ``TAIL_NOISE_REL`` (100%, i.e. 2x): a p99 of a few hundred
  transactions is nearly their maximum, and moved 33% between two healthy runs;
- percentages (CPU busy, softirq, remote memory, profile shares, the DB time ratio): over
  ``PCT_NOISE_POINTS`` (20 points; two healthy runs were 13-15 points apart in CPU busy);
- a buffer hit ratio (``pg_stat_database``): by the share of block requests it misses, a ratio over
  ``SQL_NOISE_RATIO`` and a change over ``HIT_PCT_FLOOR_POINTS`` (1 point): 99% against 98% is twice the reads
  (runs of one workload here: the 256MB runs of fixtures/compare's pgbench workload missed 0.01-0.03%, its 128kB
  runs 49.1-49.2%; pgbench's TPC-B missed 1.0-1.5% with 256MB and 18.3-20.2% with 128kB), where the 20 points
  of a CPU's busy share would hide a cache that misses a fifth of the blocks;
- one fingerprint's DB time per second, calls per second and median: a ratio over ``SQL_NOISE_RATIO``
  (2x), with a change over ``SQL_TIME_FLOOR_S_PER_S`` (0.01 s of statement time per second) for DB
  time and over ``TIME_NOISE_FLOOR_MS`` for the median; its p99 a ratio over ``SQL_TAIL_NOISE_RATIO``
  (4x: a commit's p99 moved 3.2x between two healthy runs, with the fsyncs); latencies only when it
  ran at least ``facts.SQL_MIN_CALLS`` (20) times on each side (a one-off statement has no noise band);
- the growth of a kernel counter (NUMA hinting faults, pages migrated: ``facts.VMSTAT_COUNTERS``): like
  calls per second, a ratio over ``SQL_NOISE_RATIO``, or none on one side and some on the other;
- the settings the kernel sizes from the RAM it finds at boot (``facts.BOOT_SIZED_SETTING``: fs.file-max,
  vm.user_reserve_kbytes, ...): as numbers, a relative change over ``BOOT_SIZED_NOISE_REL`` (1%; two boots
  of one guest moved them by 0.01% and 0.06%, a value someone set is usually a multiple of the default);
- texts, plan sets, event counts and finding severities: any change;
- a value on one side only: a difference for an event or a finding (``ONE_SIDED_DIFFERS``), a profile
  share or a fingerprint's DB time (as 0 on the other side, ``ONE_SIDED_AS_ZERO``); anything else was
  not measured on the other side (the verdict names the inputs one side lacks), so it is no change.

Measured on this machine (2 shared cores; fixtures/compare/README.md has the runs).

    >>> differs(Fact("outcome", "tps", 50.0, "1/s", "rate", None), Fact("outcome", "tps", 52.0, "1/s", "rate", None))
    False
    >>> differs(Fact("outcome", "tps", 50.0, "1/s", "rate", None), Fact("outcome", "tps", 23.4, "1/s", "rate", None))
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dbdiag.compare.facts import Fact

RATE_NOISE_REL = 0.15
TIME_NOISE_REL = 0.30
TAIL_NOISE_REL = 1.0
TIME_NOISE_FLOOR_MS = 0.5
PCT_NOISE_POINTS = 20.0
SQL_NOISE_RATIO = 2.0
SQL_TAIL_NOISE_RATIO = 4.0
SQL_TIME_FLOOR_S_PER_S = 0.01
BOOT_SIZED_NOISE_REL = 0.01
HIT_PCT_FLOOR_POINTS = 1.0
POINTS_KINDS = ("pct", "hit-pct", "share")  # changes said in points ("+30.2 points")
# A profile share or a fingerprint's DB time missing on one side is 0 there (a symbol perf did not
# sample, a statement not run): it differs only when the other side's value passes the threshold.
ONE_SIDED_AS_ZERO = ("share", "sql-time")
# An event or a finding on one side only is a difference; any other value on one side only was not
# measured on the other (an input it lacks: the verdict's ``only_one_side`` names it), not a change.
ONE_SIDED_DIFFERS = ("events", "severity")


@dataclass
class Difference:
    """One (area, key) whose values differ beyond noise, or that only one side has."""

    area: str
    key: str
    baseline: Any
    capture: Any
    unit: str | None
    kind: str
    sources: dict[str, str | None]
    related_findings: list[str] = field(default_factory=list)
    subject: str | None = None
    effect: str | None = None
    explains: list[str] = field(default_factory=list)  # keys of the differences this one causes
    caused_by: list[str] = field(default_factory=list)

    @property
    def ref(self) -> str:
        return f"{self.area}:{self.key}"

    @property
    def only_on(self) -> str | None:
        if self.baseline is None and self.capture is not None:
            return "capture"
        if self.capture is None and self.baseline is not None:
            return "baseline"
        return None

    def change_text(self) -> str:
        """'+118%', '-54%', '+30.2 points', 'only in capture' or 'differs'."""
        if self.only_on:
            return f"only in {self.only_on}"
        if isinstance(self.baseline, (int, float)) and isinstance(self.capture, (int, float)):
            if self.kind in POINTS_KINDS:
                return f"{self.capture - self.baseline:+.1f} points"
            if self.baseline:
                return f"{(self.capture - self.baseline) / abs(self.baseline) * 100:+.0f}%"
        return "differs"

    def relative_change(self) -> float:
        """How far apart the two values are, for ranking (1.0 = doubled or halved; a side missing: 1.0)."""
        if self.only_on or not isinstance(self.baseline, (int, float)) or not isinstance(self.capture, (int, float)):
            return 1.0
        if self.kind in POINTS_KINDS:
            return abs(self.capture - self.baseline) / 100
        low, high = sorted((abs(self.baseline), abs(self.capture)))
        return (high - low) / low if low else 1.0


@dataclass
class Row:
    """One (area, key) as the side-by-side tables show it, differing or not."""

    area: str
    key: str
    baseline: Any
    capture: Any
    unit: str | None
    differs: bool
    sources: dict[str, str | None]


def differs(baseline: Fact | None, capture: Fact | None) -> bool:
    """Whether two facts of one (area, key) differ beyond noise (the module docstring)."""
    sample = baseline or capture
    if sample.kind in ONE_SIDED_AS_ZERO:
        a = baseline.value if baseline is not None else 0.0
        b = capture.value if capture is not None else 0.0
    elif baseline is None or capture is None:
        # a fingerprint's latency or plans on one side only: its DB time row says it appeared or vanished
        # (PostgreSQL's auto_explain logs the plans of slow runs only: one side may have none)
        return sample.value is not None and sample.kind in ONE_SIDED_DIFFERS
    else:
        a, b = baseline.value, capture.value
    if a is None or b is None:
        return a is not b
    if sample.kind == "boot-sized":
        return _sized_apart(a, b)
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or sample.kind in ("text", "set", "severity", "events"):
        return a != b
    kind = sample.kind
    if kind == "hit-pct":
        low_miss, high_miss = sorted((100.0 - a, 100.0 - b))
        return abs(a - b) > HIT_PCT_FLOOR_POINTS and (low_miss <= 0 or high_miss / low_miss > SQL_NOISE_RATIO)
    if kind in ("pct", "share"):
        return abs(a - b) > PCT_NOISE_POINTS
    low, high = sorted((abs(a), abs(b)))
    if kind in ("sql-rate", "counter"):
        return high > 0 and (low == 0 or high / low > SQL_NOISE_RATIO)
    if kind == "sql-time":
        return high - low > SQL_TIME_FLOOR_S_PER_S and (low == 0 or high / low > SQL_NOISE_RATIO)
    if kind in ("sql-latency", "sql-tail"):
        ratio = SQL_TAIL_NOISE_RATIO if kind == "sql-tail" else SQL_NOISE_RATIO
        return high - low > TIME_NOISE_FLOOR_MS and (low == 0 or high / low > ratio)
    if kind in ("time", "tail"):
        floor = TIME_NOISE_FLOOR_MS if sample.unit == "ms" else TIME_NOISE_FLOOR_MS / 1000
        relative = TAIL_NOISE_REL if kind == "tail" else TIME_NOISE_REL
        return high - low > floor and (low == 0 or (high - low) / low > relative)
    return low == 0 and high > 0 or low > 0 and (high - low) / low > RATE_NOISE_REL


def _sized_apart(a: Any, b: Any) -> bool:
    """Two values of a boot-sized setting as numbers ("287315", "287289"); texts that are not numbers by equality."""
    try:
        low, high = sorted((abs(float(a)), abs(float(b))))
    except (TypeError, ValueError):
        return a != b
    return high > low and (low == 0 or (high - low) / low > BOOT_SIZED_NOISE_REL)


def compare_facts(baseline: list[Fact], capture: list[Fact], areas: tuple[str, ...]) -> tuple[list[Difference], list[Row]]:
    """Differences (in fact order) and every row of the side-by-side tables, for the given areas."""
    left = {(f.area, f.key): f for f in baseline if f.area in areas}
    right = {(f.area, f.key): f for f in capture if f.area in areas}
    order = list(left) + [key for key in right if key not in left]
    moved = moved_findings(list(left.values()), list(right.values()))
    differences, rows = [], []
    for area, key in order:
        a, b = left.get((area, key)), right.get((area, key))
        sample = a or b
        sources = {"baseline": a.source if a else None, "capture": b.source if b else None}
        changed = differs(a, b) and key not in moved
        rows.append(Row(area, key, a.value if a else None, b.value if b else None, sample.unit, changed, sources))
        if changed:
            ids = sorted({i for fact in (a, b) if fact for i in fact.finding_ids})
            differences.append(
                Difference(area, key, a.value if a else None, b.value if b else None, sample.unit, sample.kind, sources, ids, sample.subject)
            )
    return differences, rows


def moved_findings(baseline: list[Fact], capture: list[Fact]) -> set[str]:
    """Finding ids that are one problem seen in another place: a rule that fired once on each side, at the same
    severity, about another subject (softirqs on CPU 3 in one run, CPUs 2-3 in the next, where the kernel put
    the IRQs at boot). Neither side lacks it, so neither is a difference; a change of severity still is.

    >>> a = [Fact("findings", "softirq-concentration/cpu-3-node-1", "warning", None, "severity", None)]
    >>> b = [Fact("findings", "softirq-concentration/cpus-2-3-node-1", "warning", None, "severity", None)]
    >>> sorted(moved_findings(a, b)), moved_findings(a, [Fact("findings", "softirq-concentration/x", "critical", None, "severity", None)])
    (['softirq-concentration/cpu-3-node-1', 'softirq-concentration/cpus-2-3-node-1'], set())
    """
    def by_rule(facts: list[Fact]) -> dict[str, list[Fact]]:
        rules: dict[str, list[Fact]] = {}
        for fact in facts:
            if fact.area == "findings":
                rules.setdefault(fact.key.partition("/")[0], []).append(fact)
        return rules

    left, right = by_rule(baseline), by_rule(capture)
    moved: set[str] = set()
    for rule, ours in left.items():
        theirs = right.get(rule, [])
        if len(ours) == len(theirs) == 1 and ours[0].key != theirs[0].key and ours[0].value == theirs[0].value:
            moved |= {ours[0].key, theirs[0].key}
    return moved
