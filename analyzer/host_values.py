"""Row views of the host-configuration tables, shared by derive (``derive/host_config.py``, which
builds them from ``host_setting`` rows) and the config rules (``rules/config/values.py``, which read
them back from the derived tables): one definition of a captured setting, a disk and a process's
affinity.

>>> device_kind("sda", Value("1", None, "rotational.txt")), device_kind("nvme0n1", None)
('hdd', 'nvme')
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Value:
    """One captured setting: its effective value, the offered choices and where it was read."""

    value: str
    choices: str | None
    source: str
    unit: str | None = None


@dataclass(frozen=True)
class BlockDevice:
    """A disk: its kind (``device_kind``), scheduler and rotational flag."""

    name: str
    kind: str  # nvme, ssd, hdd or unknown
    scheduler: Value | None
    rotational: Value | None


def device_kind(name: str, rotational: Value | None) -> str:
    """One of nvme, ssd (rotational 0), hdd (rotational 1) or unknown."""
    if name.startswith("nvme"):
        return "nvme"
    if rotational is not None and rotational.value in ("0", "1"):
        return "ssd" if rotational.value == "0" else "hdd"
    return "unknown"


@dataclass(frozen=True)
class ProcessAffinity:
    """A process's allowed CPUs and memory nodes (``/proc/PID/status``, ``taskset -p``)."""

    subject: str
    cpus: list[int] | None
    mems: list[int] | None
    cpus_text: str | None
    mems_text: str | None
    source: str
