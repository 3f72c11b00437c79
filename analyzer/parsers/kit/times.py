"""Times and zones shared by every parser: the ``--tz`` check, zone-less wall time to UTC, the note
that says so, and the time lines collectors write between snapshots.

>>> check_tz("Europe/Paris")
('Europe/Paris', None)
>>> check_tz("Mars/Olympus")[0]
'UTC'
>>> parse_time_line("TS 1700000000.5 2023-11-14 22:13:20", "UTC")
(datetime.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=datetime.timezone.utc), False)
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import polars as pl

from dbdiag.parsers.base import ParseWarning
from dbdiag.patterns import lazy_compile

# Time lines between snapshots.
_EPOCH_RE = lazy_compile(r"^(?:TS\s+)?(\d{9,11})(?:\.(\d{1,9}))?(?:\s+.*)?$")
_ISO_RE = lazy_compile(
    r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)\s*(Z|UTC|[+-]\d{2}:?\d{2})?$"
)
_DATE_RE = lazy_compile(
    r"^(?:[A-Z][a-z]{2}\s+)?([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{2}):(\d{2}):(\d{2})"
    r"(?:\s+([A-Za-z]{1,6}|[+-]\d{4}))?\s+(\d{4})$"
)
_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
UTC_NAMES = {"UTC", "GMT", "Z", "UT"}


def check_tz(tz: str) -> tuple[str, ParseWarning | None]:
    """``tz`` if it names a zone, else UTC with a warning."""
    try:
        ZoneInfo(tz)
        return tz, None
    except (ValueError, KeyError, OSError):
        return "UTC", ParseWarning(None, f"unknown time zone {tz!r}; zone-less times read as UTC")


def local_to_utc(naive: pl.Expr, tz: str) -> pl.Expr:
    """Zone-less wall time read in ``tz`` -> Datetime(us, UTC); times in a DST gap become null."""
    return (
        naive.cast(pl.Datetime("us"))
        .dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")
        .dt.convert_time_zone("UTC")
    )


def zone_note(tz: str) -> str:
    return f"times have no zone; read as {tz} (--tz)"


def zone_or_utc(tz: str) -> ZoneInfo | timezone:
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return timezone.utc


def parse_time_line(line: str, tz: str) -> tuple[datetime, bool] | None:
    """A time written between snapshots, as an aware UTC datetime, and whether ``tz`` was applied.

    Accepts epoch seconds (``1700000000.123``), pt-stalk's ``TS <epoch> <date>``, ISO 8601
    (``2024-05-01T10:00:00Z``, ``2024-05-01 10:00:00``), ``date`` output
    (``Tue Nov 29 19:34:00 UTC 2026``) and RFC 2822 (``date -R``). Zone-less times are read in
    ``tz``; the second element says so, for the inventory note.
    """
    text = line.strip()
    if not text or len(text) > 80:
        return None
    m = _EPOCH_RE.match(text)
    if m:
        micros = int((m.group(2) or "0").ljust(6, "0")[:6])
        when = datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(seconds=int(m.group(1)), microseconds=micros)
        return when, False
    m = _ISO_RE.match(text)
    if m:
        stamp, zone = m.group(1).replace(",", "."), m.group(2)
        try:
            when = datetime.fromisoformat(stamp.replace(" ", "T"))
        except ValueError:
            return None
        if zone in (None, ""):
            return when.replace(tzinfo=zone_or_utc(tz)).astimezone(timezone.utc), True
        if zone in ("Z", "UTC"):
            return when.replace(tzinfo=timezone.utc), False
        try:
            offset = datetime.strptime(zone.replace(":", ""), "%z").tzinfo
        except ValueError:
            return None
        return when.replace(tzinfo=offset).astimezone(timezone.utc), False
    m = _DATE_RE.match(text)
    if m:
        month, day, hh, mi, ss, zone, year = m.groups()
        if month not in _MONTHS:
            return None
        try:
            when = datetime(int(year), _MONTHS[month], int(day), int(hh), int(mi), int(ss))
        except ValueError:
            return None
        if zone and zone.upper() in UTC_NAMES:
            return when.replace(tzinfo=timezone.utc), False
        if zone and zone[0] in "+-":
            offset = datetime.strptime(zone, "%z").tzinfo
            return when.replace(tzinfo=offset).astimezone(timezone.utc), False
        # No zone, or an abbreviation (CET, EST...) that is ambiguous: read in tz and say so.
        return when.replace(tzinfo=zone_or_utc(tz)).astimezone(timezone.utc), True
    if "," in text[:5]:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            return when.replace(tzinfo=zone_or_utc(tz)).astimezone(timezone.utc), True
        return when.astimezone(timezone.utc), False
    return None


