"""``/proc/mounts`` (``/proc/self/mounts``, ``/etc/mtab``) or the output of ``mount``: which device holds which
directory, so that a disk's findings can name the database files on it.

Raw input (``cat /proc/mounts``; ``mount`` prints ``/dev/loop0 on /srv/db type ext4 (rw,relatime)``)::

    proc /proc proc rw,relatime 0 0
    /dev/vda / ext4 rw,relatime 0 0
    /dev/loop0 /tmp/disk.4KYi/mnt ext4 rw,relatime 0 0

Output table ``mount`` (one row per mount, in file order): device, mountpoint (``\\040`` and the other
octal escapes decoded), fstype, options, source, line. Lines of neither shape are skipped with a
warning; ``records`` is the number of mounts.
"""

from __future__ import annotations

import re

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import MOUNT, conform

_PROC_RE = lazy_compile(r"^(\S+) (\S+) (\S+) (\S+) \d+ \d+$")
_MOUNT_CMD_RE = lazy_compile(r"^(\S+) on (.+) type (\S+) \(([^)]*)\)$")
_ESCAPE_RE = lazy_compile(r"\\([0-7]{3})")
# File systems every Linux host mounts: their lines say the text is a mount table.
_KNOWN_RE = lazy_compile(r"^(?:\S+ /proc proc |sysfs /sys sysfs |\S+ on /proc type proc |\S+ / (?:ext4|xfs|btrfs|overlay) )", re.MULTILINE)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows, warnings = [], []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _PROC_RE.match(line) or _MOUNT_CMD_RE.match(line)
        if match is None:
            warnings.append(ParseWarning(number, f"not a mount line: {line[:60]!r}"))
            continue
        device, mountpoint, fstype, options = match.groups()
        rows.append({"device": device, "mountpoint": _ESCAPE_RE.sub(lambda m: chr(int(m.group(1), 8)), mountpoint),
                     "fstype": fstype, "options": options, "line": number})
    if not rows:
        raise ParseError("no mount lines (device mountpoint fstype options 0 0) found")
    frame = pl.DataFrame(rows).with_columns(pl.lit(ctx.source).alias("source"))
    return ParseResult(tables={MOUNT: conform(MOUNT, frame)}, records=len(rows), warnings=cap_warnings(warnings))


def detect(head: str, name: str) -> float:
    if _KNOWN_RE.search(head) is None:
        return 0.0
    lines = [line for line in head.splitlines()[:50] if line.strip()]
    shaped = sum(bool(_PROC_RE.match(line) or _MOUNT_CMD_RE.match(line)) for line in lines)
    return 0.9 if lines and shaped >= 0.9 * len(lines) else 0.3


SPEC = ParserSpec(
    kind="proc-mounts",
    description="/proc/mounts or mount output: the device and file system of each mounted directory",
    detect=detect,
    parse=parse,
)
