"""``/proc/stat`` snapshots -> the ``proc_stat`` metric: context switches, forks and interrupts per second
over the capture, and the most tasks seen runnable or blocked.

Reads ``proc_stat_count`` (parsers/proc_stat.py); snapshots are ordered as every counter snapshot is
(``snapshots.ordered_snapshots``: ``stat.before`` before ``stat.after``, then by snapshot). A sample::

    proc_stat_count  snapshot 0  ts 02:00:00  ctxt 10_000_000   processes 5_000   procs_running 140
                     snapshot 1  ts 02:01:00  ctxt 136_000_000  processes 14_000  procs_running 162
      -> {"seconds": 60.0, "context_switches": 126000000, "context_switches_per_s": 2100000.0,
          "forks_per_s": 150.0, "procs_running_max": 162, ...}

Per second values need both snapshots' times (a ``TS`` or date line before each); without them the
growth is given and the rates are null. Fewer than two snapshots: no metric (since boot says nothing
of the capture).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.snapshots import first_and_last

# counter -> the metric's name for its growth (per second: + "_per_s")
GROWTH = {"ctxt": "context_switches", "processes": "forks", "intr": "interrupts", "softirq": "softirqs"}
GAUGES = ("procs_running", "procs_blocked")  # current values: their largest over the snapshots


def proc_stat_rates(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The ``proc_stat`` metric (module docstring), or None with fewer than two snapshots.

    >>> frame = pl.DataFrame({"snapshot": [0, 0, 1, 1], "counter": ["ctxt", "procs_running"] * 2,
    ...     "value": [1000, 3, 61000, 7], "source": ["stat"] * 4})
    >>> rates = proc_stat_rates({"proc_stat_count": t.conform("proc_stat_count", frame)})
    >>> rates["context_switches"], rates["context_switches_per_s"], rates["procs_running_max"]
    (60000, None, 7)
    """
    counts = tables.get(t.PROC_STAT_COUNT)
    ends = first_and_last(counts)
    if ends is None:
        return None
    start_rows, end_rows, seconds = ends
    start, end = dict(start_rows.select("counter", "value").rows()), dict(end_rows.select("counter", "value").rows())
    snapshots = counts.select("source", "snapshot").unique().height
    out: dict[str, Any] = {"first_source": start_rows["source"][0], "last_source": end_rows["source"][0],
                           "snapshots": snapshots, "seconds": seconds}
    for counter, name in GROWTH.items():
        grown = end[counter] - start[counter] if end.get(counter) is not None and start.get(counter) is not None else None
        grown = max(grown, 0) if grown is not None else None  # a reboot between the snapshots resets them
        out[name] = grown
        out[f"{name}_per_s"] = round(grown / seconds, 2) if grown is not None and seconds and seconds > 0 else None
    for gauge in GAUGES:
        values = counts.filter(pl.col("counter") == gauge)["value"].drop_nulls()
        out[f"{gauge}_max"] = int(values.max()) if values.len() else None
    return out
