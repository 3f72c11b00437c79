"""Snapshots of a file that a loop wrote with a time line before each (pt-stalk's ``TS <epoch> <date>``, ``date``,
ISO), numbered as they come: a time line starts one, so does a key (a device, a counter) seen again in the
current one. What ``proc_diskstats`` and ``proc_pressure`` share.

>>> clock = SnapshotClock("UTC")
>>> clock.time_line("TS 1700000000 2023-11-14 22:13:20"), clock.place("sda")[0], clock.place("sdb")[0], clock.place("sda")
(True, 0, 0, (1, None))
>>> clock.time_line("sda 1 2 3")
False
"""

from __future__ import annotations

from datetime import datetime
from typing import Hashable

from dbdiag.parsers.kit.times import parse_time_line


class SnapshotClock:
    """The snapshot number and time of each row of such a file (module docstring)."""

    def __init__(self, tz: str) -> None:
        self.tz = tz
        self.snapshot = -1
        self.zoned = False  # a zone-less time line was read in ``tz``
        self._when: datetime | None = None
        self._timed_next = False  # a time line came since the last row
        self._seen: set[Hashable] = set()

    def time_line(self, line: str) -> bool:
        """Read ``line`` as a time line; False when it is none."""
        stamp = parse_time_line(line, self.tz)
        if stamp is None:
            return False
        self._when, applied = stamp
        self.zoned, self._timed_next = self.zoned or applied, True
        return True

    def place(self, key: Hashable) -> tuple[int, datetime | None]:
        """(snapshot, time) of the row of ``key``: a new snapshot after a time line or where ``key`` repeats
        (then without a time: the loop wrote none for it)."""
        if self._timed_next or key in self._seen or self.snapshot < 0:
            if not self._timed_next:
                self._when = None
            self.snapshot, self._seen, self._timed_next = self.snapshot + 1, set(), False
        self._seen.add(key)
        return self.snapshot, self._when
