"""How much a member looks like a MySQL / MariaDB slow query log (TiDB and the general log look alike)."""

from __future__ import annotations

import re

from dbdiag.patterns import lazy_compile


DETECT_TIDB_RE = lazy_compile(
    r"^# (?:Txn_start_ts|Conn_ID|Digest|Plan_digest|Is_internal|Cop_\w+|Num_cop_tasks|Process_time|"
    r"Plan|Binary_plan|Succ|Mem_max|Wait_TS|KV_total|Index_names|Prewrite_time|Backoff_time): ",
    re.M,
)
# [ \t], not \s, in these multi-line patterns: \s runs on over every blank line that follows
DETECT_QT_RE = lazy_compile(r"^# Query_time: [\d.]+[ \t]+Lock_time: [\d.]+", re.M)
DETECT_QT_BARE_RE = lazy_compile(r"^# Query_time: [\d.]+", re.M)
DETECT_UH_RE = lazy_compile(r"^# (?:Time: .*)?User@Host: .*@", re.M)
DETECT_TIME_RE = lazy_compile(r"^# Time: (?:\d{6}[ \t]+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T)", re.M)
DETECT_SERVER_RE = lazy_compile(r"^.*(?:mysqld|mariadbd), Version: .*started with:[ \t]*$", re.M)
DETECT_GENERAL_LOG_RE = lazy_compile(
    r"^(?:\d{6}[ \t]+\d{1,2}:\d{2}:\d{2}|\d{4}-\d{2}-\d{2}T\S+|\t)[ \t]+\d+ (?:Query|Connect|Quit|Init DB)\b", re.M
)


def detect(head: str, name: str) -> float:
    if DETECT_TIDB_RE.search(head):
        return 0.1  # TiDB writes "# Time:" and "# Query_time:" too; its own fields give it away
    hinted = "slow" in name.lower()
    if DETECT_QT_RE.search(head):
        return 0.95
    if DETECT_UH_RE.search(head) and (DETECT_TIME_RE.search(head) or DETECT_QT_BARE_RE.search(head)):
        return 0.9
    if DETECT_QT_BARE_RE.search(head) or DETECT_UH_RE.search(head):
        return 0.75
    if DETECT_SERVER_RE.search(head):
        # the general query log starts with the same banner
        if DETECT_GENERAL_LOG_RE.search(head):
            return 0.1
        return 0.6 if hinted else 0.4
    if DETECT_TIME_RE.search(head):
        return 0.55 if hinted else 0.3
    return 0.0
