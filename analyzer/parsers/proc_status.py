"""Process CPU/memory affinity: ``/proc/PID/status`` (whole, grepped, several) and ``taskset -p``.

Raw input, any of (several processes may follow each other in one member)::

    Name:	mariadbd                               cat /proc/PID/status (a new Name: starts a process)
    Pid:	1234
    Threads:	52
    Cpus_allowed_list:	0-3
    Mems_allowed_list:	0-1
    /proc/1/status:Cpus_allowed_list:	0-1        grep ... /proc/1/status /proc/self/status
    Cpus_allowed_list:	0-3                       grep Cpus_allowed_list /proc/PID/status (no Name/Pid)
    pid 1234's current affinity list: 0-3        taskset -cp 1234
    pid 1234's current affinity mask: f          taskset -p 1234

Output table ``host_setting``::

    category "process_affinity",
    subject  "NAME PID" ("mariadbd 1234"); "PID" when only the PID is known (taskset, grep
             prefix); for a bare grep without Name/Pid lines, the process name the member is
             named after (``python3-status.txt`` -> "python3", with a note), else null
    name     kept status keys: Name, Pid, Threads, Cpus_allowed, Cpus_allowed_list,
             Mems_allowed_list, voluntary_ctxt_switches, nonvoluntary_ctxt_switches; taskset's
             "affinity list" is written Cpus_allowed_list and its "affinity mask" Cpus_allowed
             (the same sched_getaffinity set); other status keys are dropped
    value    as printed ("0-3", "mariadbd"), choices null

A member holding only a ``grep: /proc/.../status: No such file or directory`` line (the process
was gone, or its PID empty, when captured) is not claimed by ``detect`` (nothing to read; claiming
it would mark the whole analysis partial) and raises ParseError with that message if parsed.
``records`` is the number of processes.

>>> from dbdiag.parsers.base import ParseContext
>>> text = "Name:\\tmariadb\\nPid:\\t1234\\nCpus_allowed_list:\\t0-3\\npid 77's current affinity list: 2\\n"
>>> out = parse(text, ParseContext(source="status.txt")).tables["host_setting"]
>>> out.select("subject", "name", "value").rows()[2:]
[('mariadb 1234', 'Cpus_allowed_list', '0-3'), ('77', 'Cpus_allowed_list', '2')]
"""

from __future__ import annotations

import re

from dbdiag.cpulist import parse_cpu_list
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE, Row, base_name, frame
from dbdiag.parsers.kit.warning_caps import cap_skipped_lines
from dbdiag.patterns import lazy_compile

_KEPT = frozenset({
    "Name", "Pid", "Threads", "Cpus_allowed", "Cpus_allowed_list", "Mems_allowed_list",
    "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches",
})
_LISTS = frozenset({"Cpus_allowed_list", "Mems_allowed_list"})  # read by cpulist downstream: checked here
# values as (?:.*?[^ \t\n])?, not .*?: the same text, and linear in a run of spaces inside it
_STATUS_RE = lazy_compile(
    r"^(?:/proc/(\d+|self|thread-self)/(?:task/\d+/)?status:)?([A-Za-z_][A-Za-z0-9_]*):[ \t]*((?:.*?[^ \t\n])?)[ \t]*$"
)
_TASKSET_RE = lazy_compile(r"^pid (\d+)'s (?:current|new) affinity (list|mask): *((?:.*?[^ \t\n])?)[ \t]*$")
_ERROR_RE = lazy_compile(r"^(?:grep|cat|taskset): .*")
_NAME_HINT_RE = lazy_compile(r"^(?P<name>[A-Za-z0-9_.+-]+?)[-_.]status(?:\.txt)?$")
_DETECT_STRONG_RE = lazy_compile(
    r"^(?:/proc/\S+/status:)?(?:Cpus_allowed_list|Mems_allowed_list|voluntary_ctxt_switches):\t", re.MULTILINE
)
_DETECT_STATUS_HEAD_RE = lazy_compile(r"^Name:\t.*\n(?:Umask:\t.*\n)?State:\t", re.MULTILINE)
_DETECT_TASKSET_RE = lazy_compile(r"^pid \d+'s (?:current|new) affinity (?:list|mask): ", re.MULTILINE)


class _Process:
    def __init__(self, pid: str | None = None) -> None:
        self.name: str | None = None
        self.pid = pid
        self.settings: list[tuple[str, str]] = []


def _subject(process: _Process, fallback: str | None) -> str | None:
    if process.name and process.pid:
        return f"{process.name} {process.pid}"
    return process.pid or process.name or fallback


def _valid(key: str, value: str, number: int, warnings: list[ParseWarning]) -> bool:
    """Whether a kept value may be kept: CPU and memory-node lists must parse within cpulist's bounds."""
    if key not in _LISTS:
        return True
    try:
        parse_cpu_list(value)
    except ValueError as error:
        warnings.append(ParseWarning(number, f"{key} {value[:40]!r} is not a CPU list ({error}); dropped"))
        return False
    return True


def parse(text: str, ctx: ParseContext) -> ParseResult:
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    processes: list[_Process] = []
    by_path: dict[str, _Process] = {}
    by_taskset_pid: dict[str, _Process] = {}
    current: _Process | None = None
    errors: list[str] = []
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _TASKSET_RE.match(line)
        if m:
            if m.group(1) not in by_taskset_pid:
                by_taskset_pid[m.group(1)] = _Process(m.group(1))
                processes.append(by_taskset_pid[m.group(1)])
            key = "Cpus_allowed_list" if m.group(2) == "list" else "Cpus_allowed"
            if _valid(key, m.group(3), number, warnings):
                by_taskset_pid[m.group(1)].settings.append((key, m.group(3)))
            continue
        if _ERROR_RE.match(line):
            errors.append(line.strip())
            continue
        m = _STATUS_RE.match(line)
        if m is None:
            warnings.append(ParseWarning(number, f"not a status or taskset line; skipped: {line[:60]!r}"))
            continue
        path, key, value = m.groups()
        if path is not None:
            if path not in by_path:
                by_path[path] = _Process(path if path.isdigit() else None)
                processes.append(by_path[path])
            process = by_path[path]
        else:
            if current is None or (key == "Name" and (current.name is not None or current.settings)):
                current = _Process()
                processes.append(current)
            process = current
        if key == "Name":
            process.name = value
        elif key == "Pid":
            process.pid = value
        if key in _KEPT and _valid(key, value, number, warnings):
            process.settings.append((key, value))
    processes = [p for p in processes if p.settings]
    if not processes:
        if errors:
            raise ParseError(f"the capture command failed: {errors[0][:120]}")
        raise ParseError("no /proc/PID/status keys (Cpus_allowed_list: ...) or taskset lines found")
    if errors:
        notes.append(f"{len(errors)} error line(s) from the capture command ignored: {errors[0][:80]}")
    hinted = _NAME_HINT_RE.match(base_name(ctx.source))
    fallback = hinted.group("name") if hinted else None
    if fallback and any(p.name is None and p.pid is None for p in processes):
        notes.append(f"no Name/Pid lines: process named {fallback!r} after the member name")
    rows: list[Row] = []
    for process in processes:
        subject = _subject(process, fallback)
        rows.extend(("process_affinity", subject, key, value, None) for key, value in process.settings)
    return ParseResult(tables={TABLE: frame(rows, ctx.source)}, records=len(processes), warnings=cap_skipped_lines(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    if _DETECT_STATUS_HEAD_RE.search(head) or _DETECT_TASKSET_RE.search(head):
        return 0.95
    if _DETECT_STRONG_RE.search(head):
        return 0.9
    return 0.0


SPEC = ParserSpec(
    kind="process-affinity",
    description="/proc/PID/status (Cpus_allowed_list, Mems_allowed_list, Threads, ctxt switches) and taskset -p",
    detect=detect,
    parse=parse,
)
