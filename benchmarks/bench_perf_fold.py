"""Side-by-side speed and memory of dbdiag's perf script folding against FlameGraph's stackcollapse-perf.pl.

Run by hand (not in CI). Record a busy machine, write the perf script text, fetch FlameGraph, then:

    perf record -a -g -F 1999 -o /tmp/bench/perf.data -- sleep 60     # while a workload runs
    perf script -i /tmp/bench/perf.data > /tmp/bench/big.txt
    git clone https://github.com/brendangregg/FlameGraph /tmp/bench/FlameGraph
    python benchmarks/bench_perf_fold.py /tmp/bench/big.txt --stackcollapse /tmp/bench/FlameGraph/stackcollapse-perf.pl

Each tool runs as its own child process: dbdiag hands the file to the ``perf-script`` parser as the
pipeline does with a big plain file (``SPEC.parse_bytes`` of a ``FileBytes``: each piece read with
``pread`` when the C kernel gets to it, never the whole file in memory; read as the pipeline's UTF-8
decoding would); ``perl stackcollapse-perf.pl FILE`` folds it.
dbdiag's child also prints the time of ``SPEC.parse_bytes`` alone (``parse_only_s``: without the
interpreter start, imports and opening the file; reading the pieces happens inside it),
shown as a second dbdiag line, the wall and CPU time of its imports, of the opening, and whether
the C kernel (``dbdiag._perf_fold``) was there. Wall time,
CPU time (user + sys, all threads) and the child's peak RSS come from ``wait4``; MB/s is file size
over wall time. With ``--repeat`` the tools alternate and each run is printed on stderr; the table
shows each tool's median run. On a machine shared with other work, compare CPU times: wall times
then include waiting for a core. Both sides print the total sample weight they folded (the sum of
periods when perf printed them, else the sample count) so the outputs can be checked against each
other. The load average is printed before and after the runs: on a 2-core machine a load near 2
or above means the tools shared the cores with other work.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

DBDIAG_FOLD = """
import time
started, cpu_started = time.perf_counter(), time.process_time()
import os
import sys
from dbdiag.file_bytes import FileBytes
from dbdiag.parsers.base import ParseContext
from dbdiag.native import perf_fold
from dbdiag.parsers.perf_script import SPEC
imported, cpu_imported = time.perf_counter(), time.process_time()
data = FileBytes.open(sys.argv[1], os.path.getsize(sys.argv[1]))
read, cpu_read = time.perf_counter(), time.process_time()  # opened: the pieces are read as parse_bytes gets to them
result = SPEC.parse_bytes(data, ParseContext(source=os.path.basename(sys.argv[1])))
parse_s, parse_cpu_s = time.perf_counter() - read, time.process_time() - cpu_read
stacks = result.tables["perf_stack"]
weight = int(stacks.select(stacks["period"].fill_null(stacks["samples"]).sum()).item())
kernel = perf_fold.kernel() is not None
print(f"samples={result.records} stacks={stacks.height} weight={weight}"
      f" parse_only_s={parse_s:.2f} parse_only_cpu_s={parse_cpu_s:.2f}"
      f" import_s={imported - started:.2f} import_cpu_s={cpu_imported - cpu_started:.2f}"
      f" open_s={read - imported:.3f} kernel={kernel}")
"""


@dataclass
class Run:
    tool: str
    seconds: float
    cpu_seconds: float
    max_rss_mb: float
    size_mb: float
    summary: str

    @property
    def mb_per_s(self) -> float:
        return self.size_mb / self.seconds if self.seconds else 0.0


def measure(tool: str, command: list[str], path: Path, summarize) -> Run:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if process.returncode != 0:
        print(f"{tool} failed ({process.returncode}): {stderr.decode(errors='replace')[-500:]}", file=sys.stderr)
    return Run(
        tool,
        elapsed,
        usage.ru_utime + usage.ru_stime,
        usage.ru_maxrss / 1024.0,
        path.stat().st_size / 1e6,
        summarize(stdout.decode(errors="replace")),
    )


def _median(runs: list[Run]) -> Run:
    return sorted(runs, key=lambda run: run.seconds)[len(runs) // 2]


def perl_summary(folded: str) -> str:
    weights = [int(line.rsplit(" ", 1)[1]) for line in folded.splitlines() if " " in line]
    return f"stacks={len(weights)} weight={sum(weights)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("perf_script", type=Path, help="a big `perf script` text file")
    parser.add_argument("--stackcollapse", type=Path, required=True, help="path of FlameGraph's stackcollapse-perf.pl")
    parser.add_argument("--repeat", type=int, default=1, help="runs per tool, alternated; the median run (by wall time) is kept")
    args = parser.parse_args()
    plans = [
        ("dbdiag", [sys.executable, "-c", DBDIAG_FOLD, str(args.perf_script)], lambda out: out.strip()),
        ("stackcollapse-perf.pl", ["perl", str(args.stackcollapse), str(args.perf_script)], perl_summary),
    ]
    # Alternate the tools so a change in the machine's load hits both alike.
    measured: dict[str, list[Run]] = {tool: [] for tool, _, _ in plans}
    print("load average (1, 5, 15 min) at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), file=sys.stderr)
    for attempt in range(args.repeat):
        for tool, command, summarize in plans:
            run = measure(tool, command, args.perf_script, summarize)
            measured[tool].append(run)
            print(f"run {attempt + 1}: {tool} wall {run.seconds:.2f} s cpu {run.cpu_seconds:.2f} s "
                  f"peak RSS {run.max_rss_mb:.0f} MB  {run.summary}", file=sys.stderr)
    for tool, _, _ in plans:
        walls = sorted(run.seconds for run in measured[tool])
        cpus = sorted(run.cpu_seconds for run in measured[tool])
        print(f"{tool}: median wall {walls[len(walls) // 2]:.2f} s, median cpu {cpus[len(cpus) // 2]:.2f} s, "
              f"highest peak RSS {max(run.max_rss_mb for run in measured[tool]):.0f} MB", file=sys.stderr)
    print("load average (1, 5, 15 min) at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), file=sys.stderr)
    runs = [_median(measured[tool]) for tool, _, _ in plans]
    ours = runs[0]
    parse_only = re.search(r"parse_only_s=([0-9.]+) parse_only_cpu_s=([0-9.]+)", ours.summary)
    if parse_only:
        wall, cpu = float(parse_only.group(1)), float(parse_only.group(2))
        runs.insert(1, Run("dbdiag (parse only)", wall, cpu, float("nan"), ours.size_mb, ""))
    print(f"{'tool':<22} {'MB':>7} {'wall s':>7} {'cpu s':>7} {'MB/s':>7} {'peak RSS MB':>11} {'x wall':>6} {'x cpu':>6}  output")
    for run in runs:
        ratio = run.seconds / ours.seconds if ours.seconds else float("nan")
        cpu_ratio = run.cpu_seconds / ours.cpu_seconds if ours.cpu_seconds else float("nan")
        if run.tool == "stackcollapse-perf.pl" and parse_only:
            run.summary += (
                f"  (x parse only: wall {run.seconds / runs[1].seconds:.1f}, cpu {run.cpu_seconds / runs[1].cpu_seconds:.1f})"
            )
        print(
            f"{run.tool:<22} {run.size_mb:7.1f} {run.seconds:7.2f} {run.cpu_seconds:7.2f} {run.mb_per_s:7.1f} "
            f"{run.max_rss_mb:11.0f} {ratio:6.1f} {cpu_ratio:6.1f}  {run.summary}"
        )

if __name__ == "__main__":
    main()
