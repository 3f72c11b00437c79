"""Wall time of ``dbdiag analyze`` on a 3 KB log: the fixed cost of every run (issue 14: under 0.5 s).

Run by hand (not in CI: speed targets are met here, never in a timed unit test):

    .venv/bin/python benchmarks/bench_startup.py                          # both logs, best of 20
    .venv/bin/python benchmarks/bench_startup.py --kind mariadb --repeat 40
    .venv/bin/python benchmarks/bench_startup.py --python /tmp/base/.venv/bin/python   # and another checkout's
    .venv/bin/python benchmarks/bench_startup.py --keep /tmp/startup     # keep the two logs

The logs are the first complete entries, up to ``--bytes`` (3,072), of the real logs of
``../shared/corpus/captures``: the MariaDB 10.11 slow log of sysbench (``# explain:`` rows) and the
PostgreSQL 15 stderr log of pgbench. Each run is its own child process,
``python -m dbdiag analyze LOG -f json -o OUT``, measured with ``wait4`` (``bench_sql_logs.measure``),
with dbdiag's modules compiled to bytecode first (``compiled_env``) and one run of each interpreter
before the timed ones. The runs of every log and interpreter take turns; each keeps its best wall
time (the machine is shared: the best run is the least disturbed one), that run's CPU time, and the
median wall time.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sql_logs import Run, compiled_env, measure  # noqa: E402

CAPTURES = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus" / "captures"
# kind -> (capture, member, the lines an entry starts with)
LOGS = {
    "mariadb": ("mariadb-sysbench-debian12.tar.gz", "capture/db/mariadb-slow.log", re.compile(rb"# (?:Time|User@Host): ")),
    "postgres": ("postgres-pgbench-debian12.tar.gz", "capture/db/postgresql.log", re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")),
}
TIME_LINE = b"# Time: "  # a slow log's "# Time:" line belongs to the entry that follows it


def head_entries(data: bytes, entry_start: re.Pattern[bytes], limit: int) -> bytes:
    """The longest run of whole entries from the start of ``data`` that fits in ``limit`` bytes."""
    cuts, offset, previous = [], 0, b""
    for line in data.splitlines(keepends=True):
        if entry_start.match(line) and not previous.startswith(TIME_LINE):
            cuts.append(offset)
        offset += len(line)
        previous = line
    cuts.append(offset)
    return data[: max(cut for cut in cuts if cut <= limit)]


def small_log(kind: str, limit: int, folder: Path) -> Path:
    capture, member, entry_start = LOGS[kind]
    with tarfile.open(CAPTURES / capture) as archive:
        data = archive.extractfile(member).read()  # type: ignore[union-attr]
    path = folder / f"small-{kind}.log"
    path.write_bytes(head_entries(data, entry_start, limit))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", action="append", choices=sorted(LOGS), help="repeatable; default both")
    parser.add_argument("--bytes", type=int, default=3072, help="the logs' size at most (whole entries)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs of each log and interpreter")
    parser.add_argument("--python", action="append", type=Path, default=[], help="another checkout's interpreter (repeatable)")
    parser.add_argument("--keep", type=Path, help="write the logs into this folder (and keep them)")
    args = parser.parse_args()
    pythons = [Path(sys.executable), *args.python]
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        folder = args.keep or out
        folder.mkdir(parents=True, exist_ok=True)
        env = compiled_env(out)
        logs = [small_log(kind, args.bytes, folder) for kind in args.kind or sorted(LOGS)]
        cases = [(python, log) for log in logs for python in pythons]
        runs: dict[tuple[Path, Path], list[Run]] = {case: [] for case in cases}
        for round_ in range(args.repeat + 1):  # the first round compiles and warms the caches: not kept
            for python, log in cases:
                command = [str(python), "-m", "dbdiag", "analyze", str(log), "-f", "json", "-o", str(out / "r.json")]
                run = measure(str(python), command, log, env)
                if round_:
                    runs[(python, log)].append(run)
        print(f"{'log':<18} {'bytes':>6} {'best wall s':>11} {'its CPU s':>9} {'median s':>8} {'exit':>4}  python")
        for (python, log), done in runs.items():
            best = min(done, key=lambda run: run.seconds)
            median = statistics.median(run.seconds for run in done)
            print(f"{log.name:<18} {log.stat().st_size:>6} {best.seconds:11.3f} {best.cpu_seconds:9.3f} {median:8.3f} "
                  f"{max(run.exit_code for run in done):>4}  {python}")


if __name__ == "__main__":
    main()
