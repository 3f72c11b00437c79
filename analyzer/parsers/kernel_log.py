"""Kernel logs and syslog: ``dmesg`` (raw, ``-T``, ``--time-format iso``), ``journalctl -k`` (default or
``-o short-iso``), ``/var/log/messages`` / ``syslog`` (BSD or RFC 3339 stamps) -> ``event`` rows.

Sample input (``/var/log/messages``; dmesg lines are the same messages after ``[ 9216.682009] ``,
``[Sun Nov 29 22:53:34 2026] `` or ``2026-11-29T22:53:34,682009+00:00 ``)::

    Sep 29 08:12:34 hnsin-varnish kernel: in:imjournal invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0
    Sep 29 08:12:34 hnsin-varnish kernel: oom-kill:constraint=CONSTRAINT_NONE,...,task=cache-main,pid=3117813,uid=991
    Sep 29 08:12:34 hnsin-varnish kernel: Out of memory: Killed process 3117813 (cache-main) total-vm:11705436kB, anon-rss:4805020kB
    May 14 10:00:01 db1 kernel: tikv-server[1234]: segfault at 0 ip 00007f... sp 00007f... error 4 in tikv-server[...]
    May 14 10:00:02 db1 systemd[1]: tikv-20160.service: Main process exited, code=killed, status=9/KILL
    May 14 10:00:17 db1 systemd[1]: tikv-20160.service: Scheduled restart job, restart counter is at 3.
    May 14 10:00:17 db1 systemd[1]: Started tikv-20160.service - TiKV service.

Output table ``event`` (columns in ``tables.EVENT_SCHEMA``), one row per:

- OOM kill (``oom-kill``, component ``kernel``): the ``Killed process PID (name)`` line of every
  kernel version (global, cgroup, old two-line ``Kill process ... or sacrifice child`` reports), so
  one row per kill; ``process``/``pid`` are the VICTIM's. The ``invoked oom-killer`` line (which
  names the allocating task, not the victim) and the constraint and victim cgroup of the
  ``oom-kill:constraint=...`` line of the same report are added to the message. ``systemd-oomd`` kills are ``oom-kill`` rows of ``systemd``.
- ``segfault at`` / ``traps: ... general protection`` (``crash``, the faulting process and pid),
  ``Kernel panic - not syncing`` (``crash`` of ``kernel``).
- systemd: ``X.service: Main process exited, code=killed|dumped`` or a non-zero exit (``crash``),
  ``Scheduled restart job`` (``restart``), for any unit; ``Started ...`` (``start``) and
  ``Stopping ...`` (``shutdown``) only for database and proxy units (``mysql``, ``mariadb``,
  ``postgres``, ``tidb``, ``tikv``, ``pd``, ``haproxy``... in the unit or its description), since
  every cron session is a ``Started`` line too.

Times: RFC 3339 / ISO stamps with their offset; ``dmesg -T`` and zone-less ISO in ``--tz`` (note).
Raw ``dmesg`` stamps are seconds since boot: no wall clock, ``ts`` null (note; take ``dmesg -T`` or
``journalctl -k -o short-iso``). BSD syslog stamps (``May 14 10:00:01``) have no year: it is taken
from ``ParseContext.ref_time`` (a time at or after the member's last line, such as the archive
member's mtime) when the context has one, rolling back a year at each December -> January step
and when the last line would lie after ``ref_time``; without it ``ts`` is null and the stamp stays
in ``message`` (note). ``host`` is the syslog host field (null for dmesg). ``records`` = events.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import polars as pl

from dbdiag.parsers import log_events as E
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import zones as Z
from dbdiag.parsers.kit.times import check_tz, local_to_utc
from dbdiag.patterns import lazy_compile
from dbdiag.tables import EVENT, UTC_TIME

_DB_WORDS = (
    r"(?i:[^\n]*?\b(?:mysqld?|mariadbd?|mariadb|percona|postgres(?:ql)?|postmaster|patroni|pgbouncer|tidb|tikv|pd|"
    r"tiflash|ticdc|haproxy|proxysql|maxscale|redis|mongod|etcd)\b[^\n]*?)"
)
RULES = (
    E.Rule("oom-kill", r"\bKilled process (?P<pid>\d+),? (?:UID \d+, )?\((?P<process>[^)\n]*)\)", component="kernel"),
    E.Rule("_invoked", r"(?P<process>[^\s\]]\S*) invoked oom-killer:", component="kernel"),
    E.Rule("_detail", r"\boom-kill:(?P<process>constraint=\S+)", component="kernel"),
    E.Rule("crash", r"(?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\]: segfault at ", component="kernel"),
    E.Rule("crash", r"\btraps: (?P<process>[^\s\[\]]+)\[(?P<pid>\d+)\] (?:general protection|trap )", component="kernel"),
    E.Rule("crash", r"Kernel panic - not syncing", process="kernel", component="kernel"),
    E.Rule("oom-kill", r"systemd-oomd\[\d+\]: Killed (?P<process>\S+) due to", component="systemd"),
    E.Rule("crash", r": (?P<process>[\w@.:\\-]+\.service): Main process exited, code=(?:killed|dumped), status=", component="systemd"),
    E.Rule("crash", r": (?P<process>[\w@.:\\-]+\.service): Main process exited, code=exited, status=[1-9]", component="systemd"),
    E.Rule("restart", r": (?P<process>[\w@.:\\-]+\.service): Scheduled restart job", component="systemd"),
    E.Rule("start", r"systemd\[\d+\]: Started (?P<process>" + _DB_WORDS + r")\.?$", component="systemd"),
    E.Rule("shutdown", r"systemd\[\d+\]: Stopping (?P<process>" + _DB_WORDS + r")(?:\.\.\.|…)?$", component="systemd"),
)

DMESG_RE = r"^\[\s*(?P<uptime>\d+\.\d+)\] "
DMESG_T_RE = r"^\[(?:[A-Z][a-z]{2} )?(?P<ctime>[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4})\] "
DMESG_ISO_RE = r"^(?P<diso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d+)(?P<dzone>[+-]\d\d:?\d\d)? "
ISO_SYSLOG_RE = (
    r"^(?:<\d{1,3}>1 )?(?P<iso>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)(?P<zone>Z|[+-]\d\d:?\d\d)? "
    r"(?P<ihost>[^\s\[\]]+) [^\s\[:]+(?:\[\d+\])?:? "
)
BSD_SYSLOG_RE = r"^(?P<bsd>[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d) (?P<bhost>[^\s\[\]]+) [^\s\[:]+(?:\[\d+\])?: "

_DETECT = {
    "dmesg": lazy_compile(r"(?m)^\[\s*\d+\.\d{6}\] \S"),
    "dmesg -T": lazy_compile(r"(?m)^\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d \d{4}\] \S"),
    "dmesg iso": lazy_compile(r"(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{6}[+-]\d\d:\d\d \S"),
    "syslog": lazy_compile(r"(?m)^(?:[A-Z][a-z]{2} +\d{1,2} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)) [^\s\[\]]+ ([^\s\[:]+)(?:\[\d+\])?: \S"),
}
_KERNEL_WORDS_RE = lazy_compile(r"\b(?:kernel|systemd)(?:\[\d+\])?: |oom-kill|Out of memory|segfault at|Linux version|BIOS")
_OTHER_LOG_RE = lazy_compile(r"(?m)(?:\b(?:LOG|ERROR|FATAL|STATEMENT):  \S|\d \[(?:Note|Warning|ERROR|System)\] )")


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text or text.isspace():
        raise ParseError("empty kernel log")
    tz, tz_warning = check_tz(ctx.tz)
    warnings = [tz_warning] if tz_warning else []
    rows = E.match_rules(E.lines_frame(text), RULES, "text")
    if rows.is_empty():
        if not any(p.search(text[:200_000]) for p in _DETECT.values()):
            raise ParseError("no kernel log or syslog line found (dmesg [seconds], dmesg -T, ISO or 'May 14 10:00:01 host tag:' stamps)")
        return ParseResult(tables={EVENT: E.event_frame(_empty_rows(), ctx.source)}, notes=["no OOM kill, crash or restart line"])
    rows, notes = _with_times(rows, tz, getattr(ctx, "ref_time", None))
    rows, oom_warnings = _oom_reports(rows)
    rows, cap_notes = E.cap_kinds(E.drop_repeats(rows))
    events = E.event_frame(rows, ctx.source)
    return ParseResult(
        tables={EVENT: events},
        records=events.height,
        warnings=warnings + oom_warnings,
        notes=notes + cap_notes,
        time_range=E.time_range(events),
    )


def _empty_rows() -> pl.DataFrame:
    return pl.DataFrame(schema={"idx": pl.Int64, "message": pl.String, "pid": pl.String})


def _with_times(rows: pl.DataFrame, tz: str, ref_time: datetime | None) -> tuple[pl.DataFrame, list[str]]:
    """``ts`` and ``host`` of the candidate lines from whichever stamp each one carries."""
    parts = [pl.col("text").str.extract_groups(regex).alias(f"s{i}") for i, regex in enumerate(
        (DMESG_RE, DMESG_T_RE, DMESG_ISO_RE, ISO_SYSLOG_RE, BSD_SYSLOG_RE))]
    rows = rows.with_columns(parts).unnest("s0", "s1", "s2", "s3", "s4")
    notes: list[str] = []
    iso = pl.coalesce(pl.col("iso"), pl.col("diso").str.replace(",", ".", literal=True))
    zone = pl.coalesce(pl.col("zone"), pl.col("dzone"))
    zones = Z.zone_counts(rows.select(zone.filter(iso.is_not_null()).alias("z"))["z"])
    iso_ts = Z.stamp_to_utc(iso, zone, tz, list(zones) or [None])
    ctime = pl.col("ctime").str.replace_all(r"\s+", " ").str.to_datetime("%b %d %H:%M:%S %Y", strict=False, time_unit="us")
    bsd_ts, bsd_notes = _bsd_times(rows["bsd"], tz, ref_time)
    rows = rows.with_columns(
        pl.coalesce(iso_ts, local_to_utc(ctime, tz), pl.lit(bsd_ts)).alias("ts"),
        pl.coalesce(pl.col("ihost"), pl.col("bhost")).alias("host"),
        pl.col("text").alias("message"),
    )
    if zones.get(None):
        notes.append(f"{zones[None]} ISO times have no zone; read as {tz} (--tz)")
    if rows["ctime"].is_not_null().any():
        notes.append(f"dmesg -T times have no zone; read as {tz} (--tz); dmesg -T drifts after a suspend/resume")
    if rows["uptime"].is_not_null().any() and rows["bsd"].is_null().all():
        notes.append("dmesg stamps are seconds since boot, not wall-clock times: event times are empty "
                     "(capture dmesg -T or journalctl -k -o short-iso for times)")
    return rows, notes + bsd_notes


def _bsd_times(stamps: pl.Series, tz: str, ref_time: datetime | None) -> tuple[pl.Series, list[str]]:
    """UTC times of year-less syslog stamps (null where a row has none); see the module docstring."""
    day = ("2000 " + stamps.str.replace_all(r"\s+", " ")).str.to_datetime("%Y %b %d %H:%M:%S", strict=False, time_unit="us")
    present = day.drop_nulls()
    if present.is_empty():
        return pl.Series("ts", [None] * stamps.len(), dtype=UTC_TIME), []
    if ref_time is None:
        return pl.Series("ts", [None] * stamps.len(), dtype=UTC_TIME), [
            f"syslog times (e.g. {stamps.drop_nulls()[0]!r}) carry no year and no capture time is "
            "known: event times are empty, the stamp is kept in each message"
        ]
    ref = (ref_time if ref_time.tzinfo else ref_time.replace(tzinfo=timezone.utc)).astimezone(ZoneInfo(tz))
    ref_local = ref.replace(tzinfo=None)
    back = (present < present.shift(1) - timedelta(days=30)).fill_null(False)
    rollovers = int(back.sum())
    last_year = ref_local.year
    last = present[-1]
    moved = last.replace(year=last_year, day=28) if (last.month, last.day) == (2, 29) else last.replace(year=last_year)
    if moved > ref_local + timedelta(days=1):
        last_year -= 1
    years = (back.cum_sum().cast(pl.Int32) + (last_year - rollovers)).alias("y")
    at = day.is_not_null().arg_true()
    year_by_row = pl.Series("y", [None] * stamps.len(), dtype=pl.Int32).scatter(at, years)
    naive = pl.DataFrame({"d": day, "y": year_by_row}).select(
        pl.col("d").dt.offset_by((pl.col("y") - 2000).cast(pl.String) + "y")
    )["d"]
    utc = pl.DataFrame({"d": naive}).select(local_to_utc(pl.col("d"), tz).alias("ts"))["ts"]
    first_year = last_year - rollovers
    years_text = str(last_year) if not rollovers else f"{first_year}..{last_year}"
    return utc, [f"syslog times carry no year: {years_text} taken from the capture time {ref_time.isoformat()}; "
                 f"times read as {tz} (--tz)"]


def _oom_reports(rows: pl.DataFrame) -> tuple[pl.DataFrame, list[ParseWarning]]:
    """Kill rows with the invoker and constraint of their report in the message; helper rows dropped."""
    is_kill = (pl.col("kind") == "oom-kill") & (pl.col("component") == "kernel")
    report = (is_kill.cast(pl.Int64).cum_sum() - is_kill.cast(pl.Int64)).alias("report")
    rows = rows.with_columns(report)
    helpers = rows.group_by("report").agg(
        pl.col("process").filter(pl.col("kind") == "_invoked").first().alias("invoker"),
        pl.col("process").filter(pl.col("kind") == "_detail").first().alias("detail"),
        pl.col("idx").filter(pl.col("kind") == "_invoked").first().alias("invoked_idx"),
    )
    rows = rows.join(helpers, on="report", how="left", maintain_order="left")
    constraint = pl.col("detail").str.extract(r"constraint=([^,]+)", 1)
    memcg = pl.col("detail").str.extract(r"task_memcg=([^,]+)", 1)
    extra = pl.concat_str(
        pl.lit(" [oom-killer invoked by "), pl.col("invoker").fill_null("?"),
        pl.when(constraint.is_not_null()).then(pl.lit("; constraint=") + constraint).otherwise(pl.lit("")),
        pl.when(memcg.is_not_null()).then(pl.lit("; victim cgroup ") + memcg).otherwise(pl.lit("")),
        pl.lit("]"),
    )
    rows = rows.with_columns(
        pl.when(is_kill & (pl.col("invoker").is_not_null() | pl.col("detail").is_not_null()))
        .then(pl.col("message") + extra).otherwise(pl.col("message")).alias("message")
    )
    kills = rows.filter(is_kill).height
    dangling = rows.filter((pl.col("kind") == "_invoked") & (pl.col("report") == kills))
    warnings = []
    if dangling.height:
        first = dangling.row(0, named=True)
        warnings.append(ParseWarning(int(first["idx"]) + 1, f"'{first['process']} invoked oom-killer' with no "
                                     "'Killed process' line after it (log cut short?): no event"))
    return rows.filter(~pl.col("kind").str.starts_with("_")), warnings


def detect(head: str, name: str) -> float:
    counts = {label: len(pattern.findall(head)) for label, pattern in _DETECT.items()}
    lines = max(1, sum(1 for line in head.split("\n")[:-1] if line.strip()) or 1)
    dmesg = counts["dmesg"] + counts["dmesg -T"] + counts["dmesg iso"]
    if dmesg >= 3 or (dmesg and dmesg >= 0.5 * lines):
        return 0.9
    syslog = counts["syslog"]
    if syslog >= 2 and syslog >= 0.5 * min(lines, 40):
        if len(_OTHER_LOG_RE.findall(head)) >= 0.5 * syslog:
            return 0.45  # mostly a database log written through syslog: its own parser reads it
        return 0.85 if _KERNEL_WORDS_RE.search(head) else 0.6
    lowered = name.lower()
    if dmesg and ("dmesg" in lowered or "kern" in lowered):
        return 0.7
    return 0.0


SPEC = ParserSpec(
    kind="kernel-log",
    description="dmesg, journalctl -k, /var/log/messages or syslog: OOM kills (victim and pid), segfaults, systemd restarts",
    detect=detect,
    parse=parse,
)
