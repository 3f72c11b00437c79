"""Mutation fuzzer of dbdiag's parsers through the real CLI; ``tests/test_fuzz.py`` runs it briefly.

Mutant ``index`` of campaign ``seed`` is drawn from ``random.Random(f"{seed}:{index}")``: a seed
input (every corpus file, fixture and archive member, ``tests/fuzz_inputs.py``) and one to three
mutations (``tests/fuzz_mutations.py``). It is put in a capture directory beside a good mpstat
file and run through ``python -m dbdiag analyze`` with the checks of ``tests/fuzz_run.py``
(exit code, no traceback, one-line errors, time bound, RSS, the good member read, no file
touched outside the output folder). Archives are mutated as whole captures with the good member
as their first entry. Mutants run in batches; a failing batch is re-run one mutant at a time,
and the first failure of each cause is shrunk (steps dropped, then lines). The crafted cases
(``tests/fuzz_crafted.py``) run first.

By hand (``nice``: the machine is shared)::

    nice -n 10 .venv/bin/python -m tests.fuzzing --minutes 30 --seed 1 --out /tmp/fuzz-findings/s1
    .venv/bin/python -m tests.fuzzing --seed 1 --only 1234 --out /tmp/fuzz-one   # one mutant again

Writes ``findings.jsonl`` (one failing mutant a line: seed, index, description, problems,
signature, figures) as they are found, each failing input under ``inputs/``, and
``summary.json`` (counts, causes, the slowest and largest runs) at the end.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script (python tests/fuzzing.py): import as the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import random
import shutil
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
import threading
from dataclasses import dataclass, field, replace

from tests.fuzz_crafted import crafted_cases
from tests.fuzz_inputs import GOOD_MEMBER, GOOD_SOURCE, Case, Seed, compress, load_seeds
from tests.fuzz_mutations import Step, apply_steps, describe, random_steps
from tests.fuzz_run import Bounds, Outcome, dbdiag_command, run_case

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "corpus"
SAVED_INPUT_MAX_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Mutant:
    campaign_seed: int
    index: int
    seed: Seed
    steps: tuple[Step, ...]
    raw: bool = False  # the steps hit the compressed bytes of a compressed seed

    def describe(self) -> str:
        where = " [compressed bytes]" if self.raw else ""
        return f"seed={self.campaign_seed} index={self.index} {self.seed.label}{where}: {describe(list(self.steps))}"

    def with_steps(self, steps: tuple[Step, ...]) -> Mutant:
        return Mutant(self.campaign_seed, self.index, self.seed, steps, self.raw)

    def member(self, data: bytes | None = None) -> tuple[str, bytes]:
        """Its path in a capture directory and its bytes (``data``: the plain bytes, when shrunk)."""
        plain = apply_steps(self.seed.data, list(self.steps)) if data is None else data
        encoded = apply_steps(compress(self.seed.data, self.seed.codec), list(self.steps)) if self.raw else compress(plain, self.seed.codec)
        return f"m{self.index}/{self.seed.name}", encoded

    def case(self, good: bytes, data: bytes | None = None) -> Case:
        if not self.seed.archive:
            return Case(label=self.describe(), members=(self.member(data),), parts=(self.describe(),))
        good_entry = _good_tar_entry(good)
        if self.raw:
            whole = apply_steps(compress(good_entry + self.seed.data, self.seed.codec), list(self.steps))
            return Case(label=self.describe(), capture_file=(self.seed.name, whole), exits=frozenset({0, 2, 3}),
                        good_required=False, parts=(self.describe(),))
        plain = apply_steps(self.seed.data, list(self.steps)) if data is None else data
        return Case(label=self.describe(), capture_file=(self.seed.name, compress(good_entry + plain, self.seed.codec)),
                    parts=(self.describe(),))


def _good_tar_entry(good: bytes) -> bytes:
    import tarfile  # only archive mutants need it

    info = tarfile.TarInfo(GOOD_MEMBER)
    info.size, info.mode, info.mtime = len(good), 0o644, 1704067200
    return info.tobuf(tarfile.USTAR_FORMAT) + good + bytes(-len(good) % tarfile.BLOCKSIZE)


def draw_mutant(seeds: list[Seed], campaign_seed: int, index: int) -> Mutant:
    rng = random.Random(f"{campaign_seed}:{index}")
    seed = rng.choice(seeds)
    raw = seed.codec is not None and rng.random() < 0.2
    return Mutant(campaign_seed, index, seed, tuple(random_steps(rng)), raw)


def batch_case(mutants: list[Mutant], good: bytes) -> Case:
    members = tuple(m.member() for m in mutants)
    return Case(label=f"batch of mutants {', '.join(str(m.index) for m in mutants)}", members=members,
                parts=tuple(m.describe() for m in mutants))


@dataclass(frozen=True)
class Config:
    seed: int = 1
    count: int | None = None  # mutants to run (None: until the deadline)
    minutes: float | None = None
    batch_size: int = 6
    workers: int = 2
    crafted: bool = True
    crafted_labels: tuple[str, ...] = ()  # only the crafted cases whose label has one of these (none: all)
    stop_at_first: bool = False  # the CI test: stop at the first failure and shrink it
    shrink_probes: int = 12  # runs spent shrinking the first failure of each cause
    bounds: Bounds = Bounds()
    python: str = sys.executable


@dataclass
class Finding:
    description: str
    outcome: Outcome
    input_bytes: int
    mutant: Mutant | None = None
    minimized: str = ""

    def line(self) -> str:
        shrunk = f"\n  minimized: {self.minimized}" if self.minimized else ""
        return f"{self.description}\n  " + "\n  ".join(self.outcome.problems) + shrunk


@dataclass
class Campaign:
    """One campaign's state: the findings so far and the figures of every run."""

    config: Config
    good: bytes
    out: Path
    findings: list[Finding] = field(default_factory=list)
    runs: int = 0
    mutants: int = 0
    crafted: int = 0
    slowest: list[tuple[float, str]] = field(default_factory=list)
    largest: list[tuple[float, str]] = field(default_factory=list)
    shrunk_signatures: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)  # runs finish on the pool's threads

    def run(self, case: Case) -> Outcome:
        with self.lock:
            self.runs += 1
            directory = self.out / "runs" / f"r{self.runs}"
        try:
            outcome = run_case(case, self.good, directory, self.config.bounds, dbdiag_command(self.config.python))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        with self.lock:
            self.slowest = sorted(self.slowest + [(outcome.wall_s, case.label)], reverse=True)[:5]
            self.largest = sorted(self.largest + [(outcome.peak_rss_mb, case.label)], reverse=True)[:5]
        return outcome

    def record(self, finding: Finding) -> None:
        self.findings.append(finding)
        saved = self.out / "inputs" / f"{len(self.findings):04d}"
        if finding.mutant is not None:
            path, data = finding.mutant.case(self.good).capture_file or finding.mutant.member()
            first_of_cause = sum(f.outcome.signature == finding.outcome.signature for f in self.findings) == 1
            if first_of_cause or len(data) <= SAVED_INPUT_MAX_BYTES:  # the rest: again from seed and index
                saved.mkdir(parents=True, exist_ok=True)
                (saved / Path(path).name).write_bytes(data)
        entry = {
            "seed": finding.mutant.campaign_seed if finding.mutant else None,
            "index": finding.mutant.index if finding.mutant else None,
            "description": finding.description, "problems": finding.outcome.problems,
            "signature": finding.outcome.signature, "minimized": finding.minimized,
            "exit": finding.outcome.exit_code, "wall_s": round(finding.outcome.wall_s, 2),
            "cpu_s": round(finding.outcome.cpu_s, 2), "peak_rss_mb": round(finding.outcome.peak_rss_mb),
            "input_bytes": finding.input_bytes, "stderr_tail": finding.outcome.stderr_tail[-1500:],
        }
        with open(self.out / "findings.jsonl", "a", encoding="utf-8") as stream:
            stream.write(json.dumps(entry) + "\n")


def shrink(campaign: Campaign, mutant: Mutant, signature: str) -> str:
    """Drop steps, then chunks of lines, while the single mutant still fails with ``signature``."""
    probes = campaign.config.shrink_probes

    def fails(candidate: Mutant, data: bytes | None = None) -> bool:
        nonlocal probes
        probes -= 1
        return campaign.run(candidate.case(campaign.good, data)).signature == signature

    steps = list(mutant.steps)
    for step in list(steps):
        if probes > 0 and len(steps) > 1 and fails(mutant.with_steps(tuple(s for s in steps if s != step))):
            steps.remove(step)
    mutant = mutant.with_steps(tuple(steps))
    if mutant.raw or "time bound" in signature:
        return f"{mutant.describe()} (steps only: each line probe would take the whole bound)"
    lines = apply_steps(mutant.seed.data, steps).split(b"\n")
    total, chunks = len(lines), 2
    while probes > 0 and chunks <= len(lines):
        size = -(-len(lines) // chunks)
        for start in range(0, len(lines), size):
            candidate = lines[:start] + lines[start + size :]
            if probes > 0 and candidate and fails(mutant, b"\n".join(candidate)):
                lines, chunks = candidate, max(chunks - 1, 2)
                break
        else:
            chunks *= 2
    saved = campaign.out / "inputs" / f"minimized-{mutant.campaign_seed}-{mutant.index}-{Path(mutant.seed.name).name}"
    saved.write_bytes(b"\n".join(lines))  # the plain bytes, also when the seed was compressed
    return f"{mutant.describe()}; {len(lines)} of {total} lines kept: {saved}"


def _confirm(campaign: Campaign, mutant: Mutant | None, case: Case, outcome: Outcome) -> None:
    finding = Finding(case.label, outcome, case.input_bytes(campaign.good), mutant)
    signature = outcome.signature
    if mutant is not None and campaign.config.shrink_probes and signature not in campaign.shrunk_signatures:
        campaign.shrunk_signatures.add(signature)
        finding.minimized = shrink(campaign, mutant, signature)
    campaign.record(finding)
    print(f"FAIL {finding.line()}", file=sys.stderr, flush=True)


def _jobs(campaign: Campaign, seeds: list[Seed], deadline: float | None):
    """(case, mutants) to run: the crafted cases, then mutants in batches (archives alone)."""
    config = campaign.config
    if config.crafted:
        for case in crafted_cases(campaign.good):
            if not config.crafted_labels or any(text in case.label for text in config.crafted_labels):
                yield case, []
    index, pending = 0, []
    while (config.count is None or index < config.count) and (deadline is None or time.monotonic() < deadline):
        mutant = draw_mutant(seeds, config.seed, index)
        index += 1
        if mutant.seed.archive:
            yield mutant.case(campaign.good), [mutant]
            continue
        pending.append(mutant)
        if len(pending) == config.batch_size:
            yield batch_case(pending, campaign.good), pending
            pending = []
    if pending:
        yield batch_case(pending, campaign.good), pending


def _settle(campaign: Campaign, case: Case, mutants: list[Mutant], outcome: Outcome) -> None:
    """A passing job counts; a failing one is confirmed, or split into single mutants first."""
    if mutants:
        campaign.mutants += len(mutants)
    else:
        campaign.crafted += 1
    if not outcome.problems:
        return
    if len(mutants) <= 1:
        _confirm(campaign, mutants[0] if mutants else None, case, outcome)
        return
    alone_s, explained = [], False
    for mutant in mutants:
        single = mutant.case(campaign.good)
        alone = campaign.run(single)
        alone_s.append(f"{mutant.index}: {alone.wall_s:.1f} s")
        if alone.problems:
            _confirm(campaign, mutant, single, alone)
            explained = True
            if campaign.config.stop_at_first:
                return
    if not explained:  # only together (an interaction, costs adding up past the bound, or a flake)
        kept = _fewest_together(campaign, mutants, outcome.signature)
        batch = batch_case(kept, campaign.good)
        label = f"{batch.label} fail together, none alone (alone: {', '.join(alone_s)}): " + " | ".join(batch.parts)
        _confirm(campaign, None, replace(batch, label=label), outcome)


def _fewest_together(campaign: Campaign, mutants: list[Mutant], signature: str) -> list[Mutant]:
    """Drop mutants of a failing batch one at a time while the rest still fails the same way."""
    kept, probes = list(mutants), campaign.config.shrink_probes
    for mutant in list(mutants):
        if probes <= 0 or len(kept) <= 2:
            break
        probes -= 1
        rest = [m for m in kept if m is not mutant]
        if campaign.run(batch_case(rest, campaign.good)).signature == signature:
            kept = rest
    return kept


def run_campaign(config: Config, out: Path, seeds: list[Seed] | None = None) -> Campaign:
    (out / "inputs").mkdir(parents=True, exist_ok=True)
    seeds = seeds if seeds is not None else load_seeds(CORPUS, REPO / "fixtures")
    campaign = Campaign(config, (CORPUS / GOOD_SOURCE).read_bytes(), out)
    started = time.monotonic()
    deadline = started + config.minutes * 60 if config.minutes else None
    jobs = _jobs(campaign, seeds, deadline)
    with ThreadPoolExecutor(max_workers=config.workers) as pool:
        running: dict[Future, tuple[Case, list[Mutant]]] = {}
        while True:
            while len(running) < config.workers and not (config.stop_at_first and campaign.findings):
                job = next(jobs, None)
                if job is None:
                    break
                running[pool.submit(campaign.run, job[0])] = job
            if not running:
                break
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                case, mutants = running.pop(future)
                _settle(campaign, case, mutants, future.result())
            _progress(campaign, started)
    _write_summary(campaign, time.monotonic() - started)
    return campaign


def _progress(campaign: Campaign, started: float) -> None:
    if campaign.runs % 25 == 0:
        causes = len({f.outcome.signature for f in campaign.findings})
        print(f"[{time.monotonic() - started:6.0f} s] {campaign.mutants} mutants, {campaign.crafted} crafted, "
              f"{campaign.runs} runs, {len(campaign.findings)} failing ({causes} causes)", file=sys.stderr, flush=True)


def _write_summary(campaign: Campaign, elapsed_s: float) -> None:
    causes: dict[str, list[str]] = {}
    for finding in campaign.findings:
        causes.setdefault(finding.outcome.signature, []).append(finding.description)
    summary = {
        "seed": campaign.config.seed, "elapsed_s": round(elapsed_s), "mutants": campaign.mutants,
        "crafted": campaign.crafted, "runs": campaign.runs, "failing": len(campaign.findings),
        "causes": [{"signature": s, "count": len(d), "examples": d[:3]} for s, d in sorted(causes.items(), key=lambda i: -len(i[1]))],
        "slowest_s": [[round(s, 1), label] for s, label in campaign.slowest],
        "largest_rss_mb": [[round(m), label] for m, label in campaign.largest],
    }
    (campaign.out / "summary.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")


def _default_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzzing", description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--minutes", type=float, help="stop drawing mutants after this long")
    parser.add_argument("--count", type=int, help="mutants to run (default: until --minutes, else 200)")
    parser.add_argument("--out", type=Path, required=True, help="folder for findings.jsonl, inputs/ and summary.json")
    parser.add_argument("--batch", type=int, default=6, help="mutants per run (a failing batch is re-run one by one)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--no-crafted", action="store_true", help="skip the crafted archives and statements")
    parser.add_argument("--crafted-only", default=None, metavar="TEXT", help="only the crafted cases whose label has TEXT, no mutants")
    parser.add_argument("--only", type=str, help="comma-separated mutant indexes to run alone, nothing else")
    parser.add_argument("--shrink-probes", type=int, default=12)
    parser.add_argument("--python", default=_default_python(), help="the interpreter that has dbdiag installed")
    args = parser.parse_args(argv)
    config = Config(seed=args.seed, count=args.count if args.count is not None else (None if args.minutes else 200),
                    minutes=args.minutes, batch_size=args.batch, workers=args.workers,
                    crafted=not args.no_crafted, crafted_labels=(args.crafted_only,) if args.crafted_only else (),
                    shrink_probes=args.shrink_probes, python=args.python)
    if args.crafted_only is not None:
        config = replace(config, count=0)
    if args.only:
        return _run_only(config, args.out, [int(i) for i in args.only.split(",")])
    campaign = run_campaign(config, args.out)
    print((args.out / "summary.json").read_text(encoding="utf-8"))
    return 1 if campaign.findings else 0


def _run_only(config: Config, out: Path, indexes: list[int]) -> int:
    seeds = load_seeds(CORPUS, REPO / "fixtures")
    campaign = Campaign(config, (CORPUS / GOOD_SOURCE).read_bytes(), out)
    (out / "inputs").mkdir(parents=True, exist_ok=True)
    for index in indexes:
        mutant = draw_mutant(seeds, config.seed, index)
        outcome = campaign.run(mutant.case(campaign.good))
        print(f"{mutant.describe()}\n  exit {outcome.exit_code}, {outcome.wall_s:.1f} s, {outcome.peak_rss_mb:.0f} MB: "
              + ("; ".join(outcome.problems) or "ok"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
