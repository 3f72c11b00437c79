"""The fuzz harness (``tests/fuzzing.py``): its checks catch what they claim to, and a brief
fixed-seed campaign through the real CLI finds nothing.

The campaign takes about a minute on a 2-core machine (``CI_MUTANTS`` mutants in batches of
six, plus one crafted case of each family); the long run by hand is described in
``benchmarks/README.md``. A failure names the shrunk mutant, e.g.::

    seed=11 index=110 corpus/slowlog-tidb/....log: extreme_years('9999', 1.0, 458143)
      traceback: OverflowError: date value out of range [analyzer/derive/timeline.py:129 in timeline]
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from tests.conftest import corpus_present, skip_without_corpus

from tests.fuzz_inputs import GOOD_MEMBER, Case
from tests.fuzz_mutations import MUTATIONS, Step, apply_steps, random_steps
from tests.fuzz_run import Bounds, Outcome, deepest_frame, run_case
from tests.fuzzing import Config, run_campaign

CI_SEED = 11
CI_MUTANTS = 180
# One crafted case per family: statements in each log, values, tar, zip, options.
CI_CRAFTED = (
    "comment-bomb statement in slow.log", "union-chain statement in postgresql.log",
    "in-list statement in tidb_slow_query.log", "Cpus_allowed_list", "depth 1,000,000,000",
    "tar.gz cut at 60%", "without its gzip trailer", "chained pax headers", "named b''",
    "not UTF-8", "cut before its central directory", "'--window nan'",
)

GOOD = b"Linux 6.1.0 (host) \t01/01/2024 \t_x86_64_\t(2 CPU)\n"
SAMPLE = b"# Time: 2024-01-01T00:00:00Z\n# Query_time: 1.5 Rows_sent: 10\nSET timestamp=1704067200;\nSELECT 1;\n" * 3


@pytest.mark.parametrize("kind", sorted(MUTATIONS))
def test_each_mutation_is_deterministic_and_can_change_its_input(kind):
    rng = random.Random(kind)
    drawn = [steps[0].params for steps in (random_steps(rng) for _ in range(5000)) if steps[0].kind == kind][:40]
    assert drawn
    assert all(apply_steps(SAMPLE, [Step(kind, p)]) == apply_steps(SAMPLE, [Step(kind, p)]) for p in drawn)
    assert any(apply_steps(SAMPLE, [Step(kind, p)]) != SAMPLE for p in drawn)


def test_steps_apply_in_any_subset():
    steps = [Step("blank_lines", ()), Step("truncate", (0.5,)), Step("extreme_years", ("9999", 1.0, 1))]
    assert apply_steps(SAMPLE, steps[1:]).startswith(b"# Time: 9999-")
    assert apply_steps(b"2024-01-01 a\n", steps[2:]) == b"9999-01-01 a\n"
    assert apply_steps(b"x 17\n", [Step("extreme_numbers", ("nan", 1.0, 1))]) == b"x nan\n"


def _fake(tmp_path: Path, script: str, case: Case = Case(label="fake", members=(("db/slow.log", SAMPLE),)),
          bounds: Bounds = Bounds(base_s=5.0)) -> Outcome:
    """Run the checks over a stand-in CLI: ``script`` gets the CLI's arguments in sys.argv
    (analyze CAPTURE -f json -o REPORT ...)."""
    return run_case(case, GOOD, tmp_path / "ws", bounds, [sys.executable, "-c", script])


REPORT_OK = (
    "import json, sys; report = sys.argv[sys.argv.index('-o') + 1]; "
    "json.dump({'inputs': [{'path': '" + GOOD_MEMBER + "', 'status': 'read', 'records': 4}, "
    "{'path': 'db/slow.log', 'status': 'read', 'records': 3}]}, open(report, 'w')); "
)


def test_checks_pass_a_clean_run(tmp_path):
    assert _fake(tmp_path, REPORT_OK + "print('wrote ' + report, file=sys.stderr)").problems == []


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        (REPORT_OK + "raise ValueError('boom')", "traceback: ValueError: boom"),
        (REPORT_OK + "sys.exit(1)", "exit 1 (allowed: 0, 3)"),
        (REPORT_OK + "print('line one\\nline two', file=sys.stderr)", "stderr line not in dbdiag's one-line form: 'line one'"),
        (REPORT_OK + "open('stray.txt', 'w').write('x')", "file created outside the output folder: cwd/stray.txt"),
        (REPORT_OK + "open(report + '.partial', 'w').write('x')", "left 'r.json.partial' in the output folder"),
        (REPORT_OK + "import os; open(os.path.join(sys.argv[2], 'db', 'slow.log'), 'a').write('x')",
         "file changed outside the output folder: cap/db/slow.log"),
        ("import json, sys; json.dump({'inputs': []}, open(sys.argv[sys.argv.index('-o') + 1], 'w'))",
         "good/mpstat.txt not read: absent from the inventory"),
        ("import os; os.abort()", "killed by SIGABRT"),
        (REPORT_OK + "import time; x = b'1' * (120 * 1024 * 1024); time.sleep(0.3)", "peak RSS"),
    ],
    ids=["traceback", "exit-1", "two-line-error", "file-in-cwd", "partial-left", "capture-changed", "good-unread",
         "abort", "rss"],
)
def test_checks_catch(tmp_path, script, expected):
    bounds = Bounds(base_s=5.0, max_rss_mb=100.0)
    problems = _fake(tmp_path, script, bounds=bounds).problems
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_run_past_its_bound_is_killed_and_says_where(tmp_path):
    stuck = tmp_path / "analyzer" / "stuck.py"  # a path like dbdiag's, so the frame is named
    stuck.parent.mkdir()
    stuck.write_text("import time\ndef wait_forever():\n    time.sleep(30)\nwait_forever()\n")
    case = Case(label="fake", members=(("db/slow.log", SAMPLE),))
    outcome = run_case(case, GOOD, tmp_path / "ws", Bounds(base_s=1.0, per_mb_s=0.0), [sys.executable, str(stuck)])
    assert outcome.exit_code is None and outcome.wall_s < 5
    assert outcome.problems[0].startswith("over the time bound of 1.0 s"), outcome.problems
    assert outcome.signature == "over the time bound [analyzer/stuck.py in wait_forever]"


def test_deepest_frame_reads_typer_boxes_and_faulthandler_dumps():
    rich = "│ /r/analyzer/cli.py:211 in analyze     │\n│ /r/analyzer/capture.py:715 in _zip_entry │\nIndexError"
    assert deepest_frame(rich) == "analyzer/capture.py:715 in _zip_entry"
    dump = (
        'Thread 0x1 (most recent call first):\n  File "/p/concurrent/futures/thread.py", line 81 in _worker\n\n'
        'Thread 0x2 (most recent call first):\n  File "/r/analyzer/sqlnorm.py", line 668 in redact_literals\n'
        '  File "/r/analyzer/derive/sql.py", line 126 in _redacted\n\n'
        'Current thread 0x3 (most recent call first):\n  File "/p/concurrent/futures/_base.py", line 451 in result\n'
        '  File "/r/analyzer/derive/__init__.py", line 36 in derive_all\n'
    )
    assert deepest_frame(dump) == "analyzer/sqlnorm.py:668 in redact_literals"


def test_fixed_seed_campaign_finds_nothing(tmp_path):
    """About a minute: CI_MUTANTS mutants of the corpus and the crafted cases of CI_CRAFTED."""
    if not corpus_present():
        skip_without_corpus()  # the seeds and the good member are corpus files
    config = Config(seed=CI_SEED, count=CI_MUTANTS, crafted_labels=CI_CRAFTED, stop_at_first=True, shrink_probes=8)
    campaign = run_campaign(config, tmp_path)
    if campaign.findings:
        first = campaign.findings[0]
        again = (f"python -m tests.fuzzing --seed {CI_SEED} --only {first.mutant.index} --out DIR" if first.mutant
                 else f"python -m tests.fuzzing --crafted-only {first.description.removeprefix('crafted ')!r} --out DIR")
        others = f"\n({len(campaign.findings) - 1} more in the same runs)" if len(campaign.findings) > 1 else ""
        pytest.fail(f"{first.line()}\nagain: {again}{others}", pytrace=False)
    assert campaign.mutants == CI_MUTANTS and campaign.crafted == len(CI_CRAFTED)
