"""CPU list strings as the kernel writes them: ``0-3,8,10-11``.

>>> format_cpu_list([0, 1, 2, 3, 8, 10, 11])
'0-3,8,10-11'
>>> parse_cpu_list("0-3,8, 10-11")
[0, 1, 2, 3, 8, 10, 11]
"""

from __future__ import annotations

from typing import Iterable


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
        cpus.extend(range(int(low), int(high or low) + 1))
    return sorted(set(cpus))
