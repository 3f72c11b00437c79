"""Declarative cases of the disk rules: iostat -x reports of one device, its rotational flag, built here.

A report is ``(w/s, w_await ms, %util)``; ten of them make a run (iostat's first report, the one since boot,
is left out by derive: the builders put an idle one first).
"""

from __future__ import annotations

import polars as pl

from dbdiag import tables as t
from tests.rules.rule_cases import RuleCase
from tests.rules.test_config_rules import host


def _iostat(device: str, reports: list[tuple[float, float, float]], rotational: str | None = None) -> dict:
    rows = [{"sample": 0, "device": device, "w_per_s": 0.0, "w_await_ms": 0.0, "util_pct": 0.0, "source": "os/iostat", "line": 1}]
    rows += [{"sample": i, "device": device, "w_per_s": w, "w_await_ms": wait, "util_pct": util, "r_per_s": 0.0,
              "source": "os/iostat", "line": 1 + i} for i, (w, wait, util) in enumerate(reports, 1)]
    tables = {t.DISK_IO: t.conform(t.DISK_IO, pl.DataFrame(rows))}
    if rotational is not None:
        tables[t.HOST_SETTING] = host(("block", device, "rotational", rotational))
    return tables


CASES = (
    # an NVMe whose writes take 6 ms: three times what its kind may take (2 ms), though it is not busy
    RuleCase("disk-latency-high", "fires", lambda: _iostat("nvme0n1", [(800.0, 6.0, 40.0)] * 10),
             (("nvme0n1", "warning", "slow for its kind (limit 2 ms)"),)),
    # the same NVMe at 100% util with 0.2 ms writes: a parallel device busy, not slow
    RuleCase("disk-latency-high", "passes", lambda: _iostat("nvme0n1", [(20000.0, 0.2, 100.0)] * 10)),
    # an SSD at 4.9 ms (limit 5), and one report of 40 ms: the median stays under
    RuleCase("disk-latency-high", "just-under",
             lambda: _iostat("sda", [(300.0, 4.9, 60.0)] * 9 + [(300.0, 40.0, 60.0)], rotational="0")),
)
