"""Side-by-side speed and memory of dbdiag against pt-query-digest and pgBadger on big real logs.

Run by hand (not in CI). Make the inputs with the shared capture tool, then point this at them:

    ../shared/tools/real-workload-capture.sh mariadb /tmp/bench/mariadb-big.tar.gz 30 0
    ../shared/tools/real-workload-capture.sh postgres /tmp/bench/postgres-big.tar.gz 30 0
    python benchmarks/bench_sql_logs.py --mariadb /tmp/bench/m/capture/db/mariadb-slow.log \\
        --postgres /tmp/bench/p/capture/db/postgresql.log

Each command runs as its own child process; wall time, CPU time (user + sys, all threads) and that
child's peak RSS (``wait4``) are reported, with throughput and the ratio to dbdiag. Outputs go to a
temporary directory. dbdiag runs with its modules compiled to bytecode first, as ``pip install``
leaves them (a sandbox with PYTHONDONTWRITEBYTECODE=1 would otherwise recompile every module on
every run); the bytecode goes to the temporary directory, never into the repository.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

PG_PREFIX = "%m [%p] %q%u@%d "


@dataclass
class Run:
    tool: str
    log: str
    seconds: float
    cpu_seconds: float
    max_rss_mb: float
    size_mb: float
    exit_code: int

    @property
    def mb_per_s(self) -> float:
        return self.size_mb / self.seconds if self.seconds else 0.0


def measure(tool: str, command: list[str], log: Path, env: dict[str, str] | None = None) -> Run:
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode not in (0, 1, 3):
        print(f"{tool} failed ({process.returncode}): {stderr[-500:]}", file=sys.stderr)
    cpu = usage.ru_utime + usage.ru_stime
    return Run(tool, log.name, elapsed, cpu, usage.ru_maxrss / 1024.0, log.stat().st_size / 1e6, process.returncode)


def compiled_env(scratch: Path) -> dict[str, str]:
    """An environment whose Python finds dbdiag's modules already compiled (in ``scratch``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    package_dirs = [str(Path(__file__).resolve().parent.parent / name) for name in ("analyzer", "rules")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *package_dirs], env=env, check=True)
    return env


def dbdiag_command(log: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dbdiag", "analyze", str(log), "--format", "json", "-o", str(out / "dbdiag.json")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mariadb", type=Path, help="a big MySQL/MariaDB slow log")
    parser.add_argument("--postgres", type=Path, help="a big PostgreSQL stderr log (prefix '%%m [%%p] %%q%%u@%%d ')")
    parser.add_argument("--repeat", type=int, default=1, help="rounds (each runs every tool once); each tool's best run is kept")
    parser.add_argument("--no-peers", action="store_true", help="dbdiag only (to compare two checkouts of it)")
    parser.add_argument("--pgbadger-jobs", type=int, default=2, help="pgbadger -j (default 2: both cores, as dbdiag uses them)")
    args = parser.parse_args()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        plans: list[tuple[str, list[str], Path]] = []
        if args.mariadb:
            plans.append(("dbdiag", dbdiag_command(args.mariadb, out), args.mariadb))
            if shutil.which("pt-query-digest") and not args.no_peers:
                plans.append(("pt-query-digest", ["pt-query-digest", "--output", "json", str(args.mariadb)], args.mariadb))
        if args.postgres:
            plans.append(("dbdiag", dbdiag_command(args.postgres, out), args.postgres))
            if shutil.which("pgbadger") and not args.no_peers:
                command = ["pgbadger", "--prefix", PG_PREFIX, "-j", str(args.pgbadger_jobs), "-q", "-o", str(out / "pgbadger.html"),
                           str(args.postgres)]
                plans.append(("pgbadger", command, args.postgres))
        env = compiled_env(out)
        measured: list[list[Run]] = [[] for _ in plans]
        # round after round, every tool once: a slow spell of a shared machine falls on all of them
        for _ in range(args.repeat):
            for (tool, command, log), runs_of_plan in zip(plans, measured):
                runs_of_plan.append(measure(tool, command, log, env if tool == "dbdiag" else None))
        for runs_of_plan in measured:
            runs.append(min(runs_of_plan, key=lambda run: run.seconds))
            spread = [f"{seconds:.2f}" for seconds in sorted(run.seconds for run in runs_of_plan)]
            print(f"{runs_of_plan[0].tool} {runs_of_plan[0].log}: wall s of each run, sorted: {' '.join(spread)}")
    print(
        f"{'tool':<16} {'log':<22} {'MB':>7} {'seconds':>8} {'CPU s':>7} {'MB/s':>7} {'peak RSS MB':>11} "
        f"{'x dbdiag':>9} {'x CPU':>6}"
    )
    ours = {run.log: run for run in runs if run.tool == "dbdiag"}
    for run in runs:
        base = ours.get(run.log)
        ratio = run.seconds / base.seconds if base else float("nan")
        cpu_ratio = run.cpu_seconds / base.cpu_seconds if base and base.cpu_seconds else float("nan")
        print(
            f"{run.tool:<16} {run.log:<22} {run.size_mb:7.1f} {run.seconds:8.2f} {run.cpu_seconds:7.2f} {run.mb_per_s:7.1f} "
            f"{run.max_rss_mb:11.0f} {ratio:9.1f} {cpu_ratio:6.1f}"
        )


if __name__ == "__main__":
    main()
