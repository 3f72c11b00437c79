"""What the collectors' own files are, by name: their records of their own run (never parsed: sos report's
ui.log reads like a PostgreSQL log) and, for the members no parser reads, what each one is, so that the
inventory says it and that dbdiag does not judge it yet, instead of a bare "not recognised".

sos report (4.x) writes ``sosreport-<host>-<label>-<date>-<id>/`` with ``sos_commands/<plugin>/<command>``
(the command's words joined by ``_``), copies of ``/proc``, ``/sys`` and ``/etc`` files at their own paths, and
its own ``sos_logs/``, ``sos_reports/`` and ``sos_strings/``.

pt-stalk names its files ``<prefix>-<what>`` (the prefix a time, ``2026_12_06_22_37_02``), one per command of
its collection loop (percona-toolkit 3.2's ``pt-stalk``, its ``collect`` functions). A sample::

    >>> describe("capture/2026_12_06_22_37_02-top")
    "pt-stalk's top -bn<run time> (processes by CPU): not read by dbdiag yet"
    >>> own_file("capture/2026_12_06_22_37_02-trigger")
    "pt-stalk's own record of why it collected: not analysis input"
    >>> describe("db/slow.log") is None
    True
"""

from __future__ import annotations

from dbdiag.patterns import lazy_compile

PT_STALK_NAME_RE = lazy_compile(r"(?:^|/)\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}-([a-z][a-z0-9_-]*?)(?:\d+)?$")

# pt-stalk's files dbdiag does not parse: what the command was and what it holds.
PT_STALK_NOT_READ = {
    "df": "df -k snapshots (file-system usage)",
    "top": "top -bn<run time> (processes by CPU)",
    "ps": "ps -eaF (every process)",
    "ps-locks-transactions": "performance_schema locks and transactions",
    "netstat": "netstat -antp snapshots (sockets)",
    "netstat_s": "netstat -s snapshots (network protocol counters)",
    "slabinfo": "/proc/slabinfo (kernel object caches)",
    "processlist": "SHOW FULL PROCESSLIST snapshots",
    "innodbstatus": "SHOW ENGINE INNODB STATUS",
    "transactions": "information_schema.innodb_trx and lock waits",
    "opentables": "SHOW OPEN TABLES",
    "slave-status": "SHOW SLAVE STATUS",
    "mutex-status": "SHOW ENGINE INNODB MUTEX",
    "lsof": "lsof of mysqld (open files)",
    "pmap": "pmap -x of mysqld (memory map)",
    "numastat": "numastat -m (per-node memory)",
    "sysctl": "sysctl -a",
    "dmesg": "dmesg (kernel log)",
    "mysqladmin": "mysqladmin extended-status -i1 (status counters each second)",
    "lock-waits": "InnoDB lock waits",
    "tablespaces": "InnoDB tablespaces",
    "log_error": "the server's error log copy",
}
# pt-stalk's files about its own run.
PT_STALK_OWN = {
    "trigger": "pt-stalk's own record of why it collected",
    "disk-space": "pt-stalk's own free-space check of its destination (df)",
    "output": "pt-stalk's own log of the collection",
    "hostname": "the host's name (pt-stalk's file)",
}


# sos report: the archive's top folder, its own logs and reports, the commands its plugins ran.
SOS_TOP_RE = lazy_compile(r"^(sosreport-[^/]+)/(.+)$")
SOS_OWN_RE = lazy_compile(r"(?:^|/)(sos_logs|sos_reports|sos_strings)/")
SOS_COMMAND_RE = lazy_compile(r"(?:^|/)sos_commands/([^/]+)/([^/]+)$")


def own_file(path: str) -> str | None:
    """Why a member is a collector's record of its own run, not analysis input (no parser is asked: sos
    report's ui.log reads like a PostgreSQL log); None for every other member.

    >>> own_file("sosreport-vm-2026-12-06/sos_logs/ui.log")
    "sos report's own sos_logs file: not analysis input"
    >>> own_file("capture/2026_12_06_22_37_02-trigger"), own_file("db/postgresql.log")
    ("pt-stalk's own record of why it collected: not analysis input", None)
    """
    own = SOS_OWN_RE.search(path)
    if own is not None and (SOS_TOP_RE.match(path) or path.startswith(own.group(1))):
        return f"sos report's own {own.group(1)} file: not analysis input"
    match = PT_STALK_NAME_RE.search(path)
    if match is not None and match.group(1) in PT_STALK_OWN:
        return f"{PT_STALK_OWN[match.group(1)]}: not analysis input"
    return None


def describe(path: str) -> str | None:
    """What a member no parser reads is, when a collector's file name says (module docstring); else None.

    >>> describe("sosreport-vm-2026-12-06/sos_commands/block/lsblk_-f_-a_-l")
    "sos report's lsblk -f -a -l (plugin block): not read by dbdiag yet"
    >>> describe("sosreport-vm-2026-12-06/proc/buddyinfo")
    "sos report's copy of /proc/buddyinfo: not read by dbdiag yet"
    """
    command = SOS_COMMAND_RE.search(path)
    if command is not None:
        return f"sos report's {command.group(2).replace('_', ' ')} (plugin {command.group(1)}): not read by dbdiag yet"
    top = SOS_TOP_RE.match(path)
    if top is not None:
        return f"sos report's copy of /{top.group(2)}: not read by dbdiag yet"
    match = PT_STALK_NAME_RE.search(path)
    if match is None:
        return None
    written_by = PT_STALK_NOT_READ.get(match.group(1))
    return f"pt-stalk's {written_by}: not read by dbdiag yet" if written_by else None
