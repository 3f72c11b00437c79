"""CPU list strings as the kernel writes them: ``0-3,8,10-11``.

>>> format_cpu_list([0, 1, 2, 3, 8, 10, 11])
'0-3,8,10-11'
>>> parse_cpu_list("0-3,8, 10-11")
[0, 1, 2, 3, 8, 10, 11]
>>> parse_cpu_list("0-4000000000")
Traceback (most recent call last):
ValueError: CPU 4000000000 outside 0-65535
"""

from __future__ import annotations

from typing import Iterable

# Linux builds for at most 8,192 CPUs (NR_CPUS); a list naming more could not come from a kernel,
# and expanding "0-4000000000" took all the memory there is
MAX_CPU = 65_535


def format_cpu_list(cpus: Iterable[int]) -> str:
    ordered = sorted(set(cpus))
    runs: list[str] = []
    start = previous = None
    for cpu in ordered:
        if previous is not None and cpu == previous + 1:
            previous = cpu
            continue
        if start is not None:
            runs.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = cpu
    if start is not None:
        runs.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(runs)


def parse_cpu_list(text: str, max_cpu: int = MAX_CPU) -> list[int]:
    """Parse ``0-3,8`` (also space-separated ``0 1 2``) into sorted distinct CPUs; raises ValueError on
    anything else, and on a CPU over ``max_cpu``. The cost is bounded by the text and ``max_cpu``,
    however often a range repeats."""
    ranges: list[tuple[int, int]] = []
    for part in text.replace(" ", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        for cpu in (first, last):
            if not 0 <= cpu <= max_cpu:
                raise ValueError(f"CPU {cpu} outside 0-{max_cpu}")
        ranges.append((first, last))
    cpus: list[int] = []
    for first, last in sorted(ranges):  # each CPU once: a range starts after what is already listed
        cpus.extend(range(max(first, cpus[-1] + 1) if cpus else first, last + 1))
    return cpus


def cpu_list_or_none(text: str | None) -> list[int] | None:
    """``parse_cpu_list`` of ``text``; None when there is none or it is no CPU list."""
    if text is None:
        return None
    try:
        return parse_cpu_list(text)
    except ValueError:
        return None
