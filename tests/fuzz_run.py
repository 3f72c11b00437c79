"""Run one fuzz ``Case`` through the real CLI and list what went wrong: ``run_case(case, bounds)``.

Each run gets a fresh workspace ``cap/`` (the capture), ``cwd/`` (the working directory),
``home/`` and ``tmp/`` (``HOME``, ``TMPDIR``) and ``out/`` (the report), and is run as
``python -m dbdiag analyze WS/cap -f json -o WS/out/r.json`` under an address-space cap, stopped
past its time bound (on CPU time; wall time may reach three times it). The problems found, each one line, e.g.::

    exit 1 (allowed: 0, 3)
    traceback: ValueError: year 10000 is out of range [analyzer/derive/timeline.py:88 in _windows]
    over the time bound of 10.1 s (input 0.04 MB): stopped at 10.2 s CPU, 10.6 s wall, 143 MB [...]
    good/mpstat.txt not read: status 'not recognised'
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.fuzz_inputs import GOOD_MEMBER, Case

MB = 1_000_000
GiB = 1024**3
REPORT_NAME = "r.json"
WALL_FACTOR = 3.0
_FRAME = re.compile(r"(/[^\s\"│]+\.py)\"?(?::|, line )(\d+)(?:,? in ([\w<>]+)|\s+in\s+([\w<>]+))?")
_BOX = re.compile(r"[╭╮╰╯│─]")


@dataclass(frozen=True)
class Bounds:
    """Limits of one run. The address-space cap is not the memory bound: polars reserves ~2.3 GB
    of virtual memory on a normal run of this 2-core machine; RSS is what ``max_rss_mb`` bounds."""

    base_s: float = 10.0
    per_mb_s: float = 2.0
    max_rss_mb: float = 2048.0
    address_space_bytes: int = 4 * GiB

    def time_s(self, input_bytes: int) -> float:
        return self.base_s + self.per_mb_s * input_bytes / MB


@dataclass
class Outcome:
    exit_code: int | None
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    problems: list[str] = field(default_factory=list)
    stderr_tail: str = ""

    @property
    def signature(self) -> str:
        """The failure's cause without its details, to group findings: the kind of problem and
        the dbdiag frame it names (line numbers dropped), else the first problem as it is."""
        if not self.problems:
            return ""
        first = next((p for p in self.problems if p.startswith("traceback: ")), self.problems[0])
        frame = re.search(r"\[([^]|]*)[^]]*\]$", first)  # the first of the frames a dump names
        where = f" [{re.sub(r':[0-9]+ in ', ' in ', frame.group(1).strip())}]" if frame else ""
        traceback = re.match(r"traceback: ([\w.]+)", first)
        if traceback:
            return f"traceback: {traceback.group(1)}{where}"
        for kind in ("over the time bound", "killed by SIG[A-Z]+", "peak RSS"):
            found = re.match(kind, first)
            if found:
                return found.group(0) + where
        return first[:200]


def dbdiag_command(python: str) -> list[str]:
    """The CLI as the user runs it, by the given interpreter (absolute, not resolved: a venv's
    python is a symlink, and resolving it would leave the venv)."""
    return [os.path.abspath(python), "-m", "dbdiag"]


def _workspace(case: Case, good: bytes, directory: Path) -> Path:
    for sub in ("cap", "cwd", "home", "tmp", "out", "logs"):
        (directory / sub).mkdir(parents=True)
    if case.capture_file is not None:
        name, data = case.capture_file
        (directory / "cap" / name).write_bytes(data)
        return directory / "cap" / name
    for path, data in ((GOOD_MEMBER, good), *case.members):
        target = directory / "cap" / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return directory / "cap"


def _snapshot(directory: Path) -> dict[str, tuple]:
    """Every entry under ``directory`` except ``out/`` and ``logs/``: mode, and for files size,
    mtime and a content hash."""
    entries = {}
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory).as_posix()
        if relative.split("/")[0] in ("out", "logs"):
            continue
        stat = path.lstat()
        if path.is_dir() and not path.is_symlink():
            entries[relative] = (stat.st_mode,)  # a temporary file made and removed is no change
        else:
            digest = hashlib.sha1(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else ""
            entries[relative] = (stat.st_mode, stat.st_size, stat.st_mtime_ns, digest)
    return entries


def _changes(before: dict[str, tuple], after: dict[str, tuple]) -> list[str]:
    created = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    changed = sorted(p for p in set(before) & set(after) if before[p] != after[p])
    return [f"file {what} outside the output folder: {path}" for what, paths in
            (("created", created), ("removed", removed), ("changed", changed)) for path in paths[:3]]


def _cpu_and_peak(pid: int) -> tuple[float, float]:
    """CPU time (user + system, all threads) and peak RSS in MB so far of a running process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except (OSError, IndexError):
        return 0.0, 0.0
    peak = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK"), int(peak.group(1)) / 1024 if peak else 0.0


@dataclass
class _Watch:
    exit_code: int | None  # None: stopped past the bound
    wall_s: float
    cpu_s: float
    peak_rss_mb: float


def _wait(process: subprocess.Popen, bound_s: float) -> _Watch:
    """Wait for the child, polling its CPU time and peak RSS; past the bound, stop it.

    The bound is on CPU time, so that a machine busy with other work does not make a run look
    slow; wall time may reach ``WALL_FACTOR`` times the bound (a run blocked, not computing).
    A stopped run gets SIGABRT, so that faulthandler prints where it was, then SIGKILL.
    Peak RSS is the process's VmHWM, polled: wait4's ru_maxrss would not do, as Linux counts in it
    the memory of the parent it was forked from (this fuzzer), which the exec'd program never used.
    """
    started = time.monotonic()
    cpu_s = peak_mb = 0.0
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        wall_s = time.monotonic() - started
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)
            return _Watch(process.returncode, wall_s, usage.ru_utime + usage.ru_stime, peak_mb or usage.ru_maxrss / 1024)
        polled_cpu_s, polled_mb = _cpu_and_peak(process.pid)
        cpu_s, peak_mb = max(cpu_s, polled_cpu_s), max(peak_mb, polled_mb)
        if wall_s > WALL_FACTOR * bound_s or (wall_s > bound_s and cpu_s > bound_s):
            os.killpg(process.pid, signal.SIGABRT)  # its own session: the child and nothing else
            for _ in range(150):
                pid, status, usage = os.wait4(process.pid, os.WNOHANG)
                if pid:
                    break
                time.sleep(0.02)
            else:
                os.killpg(process.pid, signal.SIGKILL)
                _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            return _Watch(None, wall_s, cpu_s, peak_mb)
        time.sleep(0.02)


_WAITING = ("/threading.py", "/concurrent/futures/", "/queue.py", "/selectors.py")


def _dbdiag_frames(text: str, roots: tuple[str, ...]) -> list[str]:
    frames = []
    for match in _FRAME.finditer(text.replace("│\n│", " ")):
        path, line, function = match.group(1), match.group(2), match.group(3) or match.group(4) or "?"
        root = next((r for r in roots if r in path), None)
        if root is not None:
            frames.append(f"{path[path.rfind(root) + 1 :]}:{line} in {function}")
    return frames


def deepest_frame(stderr: str, roots: tuple[str, ...] = ("/analyzer/", "/rules/")) -> str:
    """The innermost frame in dbdiag's own code: the last one of a traceback (plain or typer's
    rich box); in a faulthandler dump (most recent call first, one block per thread), that of the
    busy threads, those running dbdiag's own code first (the hang is where Python code loops)."""
    if "most recent call first" not in stderr:
        frames = _dbdiag_frames(stderr, roots)
        return frames[-1] if frames else "no dbdiag frame"
    busy = []
    for block in re.split(r"\n(?=(?:Current thread|Thread) 0x)", stderr):
        first = _FRAME.search(block)
        frames = _dbdiag_frames(block, roots)
        if first is None or not frames or any(w in first.group(1) for w in _WAITING):
            continue
        busy.append((0 if any(r in first.group(1) for r in roots) else 1, frames[0]))
    return " | ".join(frame for _, frame in sorted(busy)[:2]) or "no dbdiag frame"


def exception_line(stderr: str) -> str:
    """The exception line that ends a traceback (after rich's box, or the last line)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    candidates = [line for line in lines if not _BOX.search(line) and re.match(r"^[\w.]+(Error|Exception|Exit|Interrupt)\b", line)]
    return candidates[-1][:160] if candidates else (lines[-1][:160] if lines else "")


def _stderr_problems(stderr: str, capture: Path) -> list[str]:
    if "Traceback" in stderr or "panicked at" in stderr:
        return [f"traceback: {exception_line(stderr)} [{deepest_frame(stderr)}]"]
    allowed = ("wrote ", "dbdiag: ", f"{capture}: ")
    strays = [line for line in stderr.splitlines() if line.strip() and not line.startswith(allowed)]
    return [f"stderr line not in dbdiag's one-line form: {strays[0][:120]!r}"] if strays else []


def _report_problems(case: Case, out: Path, exit_code: int) -> list[str]:
    written = sorted(p.name for p in out.iterdir())
    strays = [name for name in written if name != REPORT_NAME]
    problems = [f"left {name!r} in the output folder" for name in strays[:2]]
    if REPORT_NAME not in written:
        return problems + ([] if exit_code == 2 else [f"exit {exit_code} and no report written"])
    try:
        document = json.loads((out / REPORT_NAME).read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        return problems + [f"report is not JSON: {error}"]
    inputs = {entry.get("path"): entry for entry in document.get("inputs", [])}
    good = inputs.get(GOOD_MEMBER)
    if case.good_required and (good is None or good.get("status") != "read" or not good.get("records")):
        state = "absent from the inventory" if good is None else f"status {good.get('status')!r}, records {good.get('records')}"
        problems.append(f"{GOOD_MEMBER} not read: {state}")
    missing = [path for path, _ in case.members if path not in inputs]
    if missing:
        problems.append(f"member missing from the inventory: {missing[0]}")
    return problems


def run_case(case: Case, good: bytes, directory: Path, bounds: Bounds, command: list[str]) -> Outcome:
    """Run ``case`` in a fresh workspace ``directory`` (created here) and check the run."""
    capture = _workspace(case, good, directory)
    before = _snapshot(directory)
    input_bytes = case.input_bytes(good)
    bound_s = bounds.time_s(input_bytes)
    # PYTHONFAULTHANDLER: a run killed past its bound (SIGABRT) or aborted by native code says where.
    environment = dict(os.environ, HOME=str(directory / "home"), TMPDIR=str(directory / "tmp"), COLUMNS="200",
                       PYTHONFAULTHANDLER="1")
    arguments = [*command, "analyze", str(capture), "-f", "json", "-o", str(directory / "out" / REPORT_NAME), *case.options]
    limit = ["prlimit", f"--as={bounds.address_space_bytes}", "--"]  # execs the command: the same pid, its /proc entries
    with open(directory / "logs" / "stdout", "wb") as stdout, open(directory / "logs" / "stderr", "wb") as stderr:
        process = subprocess.Popen(limit + arguments, cwd=directory / "cwd", env=environment, stdin=subprocess.DEVNULL,
                                   stdout=stdout, stderr=stderr, start_new_session=True)
        watch = _wait(process, bound_s)
    err = (directory / "logs" / "stderr").read_text(encoding="utf-8", errors="backslashreplace")
    exit_code, wall_s = watch.exit_code, watch.wall_s
    outcome = Outcome(exit_code, wall_s, watch.cpu_s, watch.peak_rss_mb, stderr_tail=err[-4000:])
    problems = outcome.problems
    if exit_code is None:
        problems.append(f"over the time bound of {bound_s:.1f} s (input {input_bytes / MB:.2f} MB): stopped at "
                        f"{outcome.cpu_s:.1f} s CPU, {wall_s:.1f} s wall, {outcome.peak_rss_mb:.0f} MB [{deepest_frame(err)}]")
    elif exit_code < 0:
        problems.append(f"killed by {signal.Signals(-exit_code).name} (input {input_bytes / MB:.2f} MB) [{deepest_frame(err)}]")
    if exit_code is not None:  # a run killed past its bound has its dump in stderr, not a traceback
        problems.extend(_stderr_problems(err, capture))
    if exit_code is not None and exit_code >= 0 and exit_code not in case.exits:
        problems.append(f"exit {exit_code} (allowed: {', '.join(map(str, sorted(case.exits)))})")
    if outcome.peak_rss_mb > bounds.max_rss_mb:
        problems.append(f"peak RSS {outcome.peak_rss_mb:.0f} MB over {bounds.max_rss_mb:.0f} MB (input {input_bytes / MB:.2f} MB)")
    if (directory / "logs" / "stdout").stat().st_size:
        problems.append("wrote to standard output")
    if exit_code is not None and exit_code >= 0:
        problems.extend(_report_problems(case, directory / "out", exit_code))
    problems.extend(_changes(before, _snapshot(directory)))
    return outcome
