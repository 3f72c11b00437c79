"""CPU list strings as the kernel writes them: ``0-3,8,10-11``.

>>> format_cpu_list([0, 1, 2, 3, 8, 10, 11])
'0-3,8,10-11'
>>> parse_cpu_list("0-3,8, 10-11")
[0, 1, 2, 3, 8, 10, 11]
>>> parse_cpu_list("0-4000000000")
Traceback (most recent call last):
ValueError: CPU number 4000000000 past 65535
"""

from __future__ import annotations

from typing import Iterable

# Linux's NR_CPUS is at most 8,192 today; a list naming CPUs past this is damaged, and expanding
# ``0-4000000000`` would take 4 billion integers.
MAX_CPU_NUMBER = 65_535


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


def parse_cpu_list(text: str) -> list[int]:
    """Parse ``0-3,8`` (also space-separated ``0 1 2``); raises ValueError on anything else."""
    cpus: list[int] = []
    for part in text.replace(" ", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        first, last = int(low), int(high or low)
        if max(first, last) > MAX_CPU_NUMBER:
            raise ValueError(f"CPU number {max(first, last)} past {MAX_CPU_NUMBER}")
        cpus.extend(range(first, last + 1))
    return sorted(set(cpus))
