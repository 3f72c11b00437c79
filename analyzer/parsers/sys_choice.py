"""Bracketed-choice sysfs files: transparent hugepages and block I/O schedulers, bare or listed.

Raw input, either one bare file (``cat /sys/kernel/mm/transparent_hugepage/enabled``)::

    always [madvise] never

or a listing with paths (``grep . /sys/block/*/queue/scheduler /sys/block/*/queue/rotational
/sys/kernel/mm/transparent_hugepage/*``; ``head`` style ``==> path <==`` headers work too)::

    /sys/block/nvme0n1/queue/scheduler:[none] mq-deadline kyber bfq
    /sys/block/sda/queue/rotational:1
    /sys/kernel/mm/transparent_hugepage/defrag:always defer defer+madvise [madvise] never
    /sys/kernel/mm/transparent_hugepage/hugepages-2048kB/enabled:always inherit [madvise] never

Output table ``host_setting`` (one row per file value)::

    category "thp"   subject null (a subdirectory such as "khugepaged" or "hugepages-2048kB"
                     for files below one), name the file ("enabled", "defrag", "shmem_enabled" ...)
    category "block" subject the device ("nvme0n1"), name the queue file ("scheduler",
                     "rotational", "nr_requests", "read_ahead_kb" ...)
    value    the bracketed choice ("madvise", "none"), else the content as printed ("1")
    choices  every offered choice, space-separated, brackets removed; null for plain values

A bare file carries no path: its offered choices say which file it is (``defer`` -> THP
defrag, ``within_size``/``deny``/``force`` -> THP shmem_enabled, ``always madvise never`` ->
THP enabled, ``none``/``mq-deadline``/``kyber``/``bfq``/``noop``/``deadline``/``cfq`` -> block
scheduler); the member name (``thp_enabled.txt``, ``defrag``, ``nvme0n1-scheduler``) settles
the rest and gives the device. A choice line neither tells is kept with subject null and name
"unknown" (category "unknown"), with a warning. ``records`` is the number of rows.

>>> from dbdiag.parsers.base import ParseContext
>>> out = parse("always [madvise] never\\n", ParseContext(source="capture/os/thp_enabled.txt"))
>>> out.tables["host_setting"].select("category", "name", "value", "choices").rows()
[('thp', 'enabled', 'madvise', 'always madvise never')]
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE, Row, base_name, frame
from dbdiag.parsers.kit.warning_caps import cap_skipped_lines
from dbdiag.patterns import lazy_compile

_WORD = r"[A-Za-z0-9_+.\-]+"
_CHOICE_LINE_RE = lazy_compile(rf"^[ \t]*(?:{_WORD}[ \t]+)*\[{_WORD}\](?:[ \t]+{_WORD})*[ \t]*$")
_BRACKET_RE = lazy_compile(rf"\[({_WORD})\]")
_GREP_RE = lazy_compile(
    r"^(/sys/\S*?/(?:queue/[\w.+-]+|(?:redhat_)?transparent_hugepage/(?:[\w.+-]+/)?[\w.+-]+)):(.*)$"
)
_OTHER_SYS_RE = lazy_compile(r"^(/sys/[^\s:]+):")
_HEAD_RE = lazy_compile(r"^==> (/sys/\S+) <==$")
_BLOCK_PATH_RE = lazy_compile(r"^/sys/\S*/([^/]+)/queue/([^/]+)$")
_THP_PATH_RE = lazy_compile(r"^/sys/kernel/mm/(?:redhat_)?transparent_hugepage/(?:([^/]+)/)?([^/]+)$")
_ERROR_RE = lazy_compile(r"^(?:grep|cat|head): ")

_SCHEDULERS = frozenset({"none", "mq-deadline", "kyber", "bfq", "noop", "deadline", "cfq", "bfq-mq", "bfq-sq"})
_THP_ENABLED = frozenset({"always", "madvise", "never"})
_THP_SHMEM_ONLY = frozenset({"within_size", "deny", "force", "advise"})
_NAME_DEVICE_RE = lazy_compile(r"^(?:(?P<pre>[A-Za-z0-9!_.:-]+?)[-_.])?scheduler(?:[-_.](?P<post>[A-Za-z0-9!_:-]+?))?(?:\.txt)?$")


def _choices(content: str) -> tuple[str, str] | None:
    """(chosen, all choices) for ``a [b] c``; None when the content is not a choice list."""
    if not _CHOICE_LINE_RE.match(content):
        return None
    chosen = _BRACKET_RE.findall(content)
    if len(chosen) != 1:
        return None
    return chosen[0], " ".join(content.replace("[", " ").replace("]", " ").split())


def _bare_target(offered: set[str], hint: str) -> tuple[str, str | None, str] | None:
    """(category, subject, name) of a bare choice line from its choices, then the member name."""
    lowered = hint.lower()
    device = _name_device(hint)
    if "defer" in offered or "defer+madvise" in offered:
        return "thp", None, "defrag"
    if offered & _THP_SHMEM_ONLY:
        return "thp", None, "shmem_enabled"
    if offered <= _SCHEDULERS:
        return "block", device, "scheduler"
    if offered <= _THP_ENABLED | {"inherit"}:
        if "defrag" in lowered:
            return "thp", None, "defrag"
        return "thp", None, "enabled"
    if "scheduler" in lowered:
        return "block", device, "scheduler"
    for name in ("shmem_enabled", "defrag", "enabled"):
        if name in lowered:
            return "thp", None, name
    return None


def _name_device(hint: str) -> str | None:
    m = _NAME_DEVICE_RE.match(hint)
    if m is None:
        return None
    return m.group("pre") or m.group("post")


def _path_target(path: str) -> tuple[str, str | None, str] | None:
    m = _BLOCK_PATH_RE.search(path)
    if m:
        return "block", m.group(1), m.group(2)
    m = _THP_PATH_RE.match(path)
    if m:
        return "thp", m.group(1), m.group(2)
    return None


def _row(target: tuple[str, str | None, str], content: str) -> Row:
    category, subject, name = target
    picked = _choices(content)
    if picked is None:
        return category, subject, name, content.strip(), None
    return category, subject, name, picked[0], picked[1]


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows: list[Row] = []
    warnings: list[ParseWarning] = []
    notes: list[str] = []
    hint = base_name(ctx.source)
    head_path: str | None = None
    errors = 0
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r")
        if not line.strip():
            continue
        m = _HEAD_RE.match(line)
        if m:
            head_path = m.group(1)
            continue
        if _ERROR_RE.match(line):
            errors += 1
            continue
        m = _GREP_RE.match(line)
        path, content = (m.group(1), m.group(2)) if m else (head_path, line)
        head_path = None
        other = _OTHER_SYS_RE.match(line) if path is None else None
        if other:
            warnings.append(ParseWarning(number, f"not a THP or block queue file; skipped: {other.group(1)[:80]!r}"))
            continue
        if path is not None:
            target = _path_target(path)
            if target is None:
                warnings.append(ParseWarning(number, f"not a THP or block queue file; skipped: {path[:80]!r}"))
                continue
            rows.append(_row(target, content))
            continue
        picked = _choices(line)
        if picked is None:
            warnings.append(ParseWarning(number, f"not a bracketed choice line; skipped: {line[:60]!r}"))
            continue
        target = _bare_target(set(picked[1].split()), hint)
        if target == ("thp", None, "enabled") and not re.search(r"enabled|thp|hugepage", hint, re.IGNORECASE):
            note = "choice line read as THP enabled from its choices alone (old kernels' defrag offers the same)"
            if note not in notes:
                notes.append(note)
        if target is None:
            warnings.append(
                ParseWarning(number, f"choice line {line.strip()[:60]!r} names no known file; kept as name 'unknown'")
            )
            target = ("unknown", None, "unknown")
        rows.append(_row(target, line))
    if not rows:
        raise ParseError("no bracketed choice line (always [madvise] never) or /sys/...:value line found")
    if errors:
        notes.append(f"{errors} error line(s) from the capture command (grep:/cat:/head:) ignored")
    return ParseResult(tables={TABLE: frame(rows, ctx.source)}, records=len(rows), warnings=cap_skipped_lines(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    lines = [line.rstrip("\r") for line in head.split("\n") if line.strip()]
    if not lines:
        return 0.0
    listed = sum(
        1 for line in lines if (m := _GREP_RE.match(line)) and _path_target(m.group(1)) is not None
    ) + sum(1 for line in lines if _HEAD_RE.match(line))
    if listed and listed * 2 >= len(lines):
        return 0.95
    if len(lines) > 4:
        return 0.0
    picked = [_choices(line) for line in lines]
    if not all(picked):
        return 0.0
    if all(_bare_target(set(p[1].split()), "") is not None for p in picked if p):
        return 0.9
    if all(_bare_target(set(p[1].split()), name) is not None for p in picked if p):
        return 0.7
    return 0.4


SPEC = ParserSpec(
    kind="sysfs-choice",
    description="THP enabled/defrag and block queue scheduler/rotational files, bare or grep-listed",
    detect=detect,
    parse=parse,
)
