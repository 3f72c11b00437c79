"""Side-by-side speed and memory of dbdiag against pt-query-digest and pgBadger on big real logs.

Run by hand (not in CI). Make the inputs with the shared capture tool, then point this at them:

    ../shared/tools/real-workload-capture.sh mariadb /tmp/bench/mariadb-big.tar.gz 30 0
    ../shared/tools/real-workload-capture.sh postgres /tmp/bench/postgres-big.tar.gz 30 0
    python benchmarks/bench_sql_logs.py --mariadb /tmp/bench/m/capture/db/mariadb-slow.log \\
        --postgres /tmp/bench/p/capture/db/postgresql.log

Each command runs as its own child process; wall time and that child's peak RSS (``wait4``) are
reported, with throughput and the ratio to dbdiag. Outputs go to a temporary directory.
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
    max_rss_mb: float
    size_mb: float
    exit_code: int

    @property
    def mb_per_s(self) -> float:
        return self.size_mb / self.seconds if self.seconds else 0.0


def measure(tool: str, command: list[str], log: Path) -> Run:
    started = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace") if process.stderr else ""
    if process.returncode not in (0, 1, 3):
        print(f"{tool} failed ({process.returncode}): {stderr[-500:]}", file=sys.stderr)
    return Run(tool, log.name, elapsed, usage.ru_maxrss / 1024.0, log.stat().st_size / 1e6, process.returncode)


def dbdiag_command(log: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "dbdiag", "analyze", str(log), "--format", "json", "-o", str(out / "dbdiag.json")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mariadb", type=Path, help="a big MySQL/MariaDB slow log")
    parser.add_argument("--postgres", type=Path, help="a big PostgreSQL stderr log (prefix '%m [%p] %q%u@%d ')")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool; the best is kept")
    args = parser.parse_args()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        plans: list[tuple[str, list[str], Path]] = []
        if args.mariadb:
            plans.append(("dbdiag", dbdiag_command(args.mariadb, out), args.mariadb))
            if shutil.which("pt-query-digest"):
                plans.append(("pt-query-digest", ["pt-query-digest", "--output", "json", str(args.mariadb)], args.mariadb))
        if args.postgres:
            plans.append(("dbdiag", dbdiag_command(args.postgres, out), args.postgres))
            if shutil.which("pgbadger"):
                command = ["pgbadger", "--prefix", PG_PREFIX, "-q", "-o", str(out / "pgbadger.html"), str(args.postgres)]
                plans.append(("pgbadger", command, args.postgres))
        for tool, command, log in plans:
            best = min((measure(tool, command, log) for _ in range(args.repeat)), key=lambda run: run.seconds)
            runs.append(best)
    print(f"{'tool':<16} {'log':<22} {'MB':>7} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>11} {'x dbdiag':>9}")
    ours = {run.log: run.seconds for run in runs if run.tool == "dbdiag"}
    for run in runs:
        ratio = run.seconds / ours[run.log] if ours.get(run.log) else float("nan")
        print(f"{run.tool:<16} {run.log:<22} {run.size_mb:7.1f} {run.seconds:8.2f} {run.mb_per_s:7.1f} {run.max_rss_mb:11.0f} {ratio:9.1f}")


if __name__ == "__main__":
    main()
