"""``ethtool -l IFACE``: NIC channel (queue) counts, one or several interfaces in one member.

Raw input::

    Channel parameters for eth0:
    Pre-set maximums:
    RX:		n/a
    TX:		n/a
    Other:		1
    Combined:	8
    Current hardware settings:
    RX:		n/a
    TX:		n/a
    Other:		1
    Combined:	4

Output table ``host_setting`` (one row per count line)::

    category "nic_channels", subject the interface ("eth0"),
    name     the label lower-cased with ``_`` for blanks, then ``_max`` (under "Pre-set maximums")
             or ``_current`` (under "Current hardware settings"): "rx_max", "combined_max",
             "other_current", "combined_current" ...
    value    as printed ("8", "n/a"), choices null

Lines ethtool prints when an interface has no channel support (``netlink error: Operation not
supported``, ``Cannot get device channel parameters``) are counted in a note. Count lines before
any ``Channel parameters for IFACE:`` header are kept with subject null and a warning.
``records`` is the number of interfaces with at least one count line.

>>> from dbdiag.parsers.base import ParseContext
>>> text = "Channel parameters for eth0:\\nPre-set maximums:\\nCombined:\\t8\\nCurrent hardware settings:\\nCombined:\\t4\\n"
>>> parse(text, ParseContext(source="ethtool-l.txt")).tables["host_setting"].select("subject", "name", "value").rows()
[('eth0', 'combined_max', '8'), ('eth0', 'combined_current', '4')]
"""

from __future__ import annotations

import re

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.host_setting import TABLE, Row, frame
from dbdiag.parsers.kit.warning_caps import cap_skipped_lines
from dbdiag.patterns import lazy_compile

_HEADER_RE = lazy_compile(r"^Channel parameters for (\S+?):?[ \t]*$")
_SECTIONS = {"pre-set maximums:": "max", "current hardware settings:": "current"}
_COUNT_RE = lazy_compile(r"^([A-Za-z][A-Za-z ]{0,30}):[ \t]*(\S(?:.*?[^ \t\n])?)[ \t]*$")
_ERROR_RE = lazy_compile(
    r"^(?:netlink error|Cannot get device channel parameters|no such device|: Operation not supported|"
    r"Operation not supported|ethtool: )",
    re.IGNORECASE,
)
_DETECT_HEADER_RE = lazy_compile(r"^Channel parameters for \S+", re.MULTILINE)
_DETECT_SECTION_RE = lazy_compile(r"^(?:Pre-set maximums|Current hardware settings):[ \t]*$", re.MULTILINE)
_DETECT_LABEL_RE = lazy_compile(r"^(?:Combined|Other):[ \t]*(?:\d+|n/a)[ \t]*$", re.MULTILINE)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    rows: list[Row] = []
    warnings: list[ParseWarning] = []
    interface: str | None = None
    section: str | None = None
    errors = 0
    headerless_warned = False
    for number, raw in enumerate(text.split("\n"), 1):
        line = raw.rstrip("\r").strip()
        if not line:
            continue
        m = _HEADER_RE.match(line)
        if m:
            interface, section = m.group(1), None
            continue
        if line.lower() in _SECTIONS:
            section = _SECTIONS[line.lower()]
            continue
        if _ERROR_RE.match(line):
            errors += 1
            continue
        m = _COUNT_RE.match(line)
        if m is None or section is None:
            reason = "not a channel count line" if m is None else "count line outside a maximums/current section"
            warnings.append(ParseWarning(number, f"{reason}; skipped: {line[:60]!r}"))
            continue
        if interface is None and not headerless_warned:
            warnings.append(ParseWarning(number, "no 'Channel parameters for IFACE:' header; interface unknown"))
            headerless_warned = True
        name = "_".join(m.group(1).lower().split()) + "_" + section
        rows.append(("nic_channels", interface, name, m.group(2), None))
    if not rows:
        raise ParseError("no ethtool -l channel counts (Pre-set maximums / Current hardware settings) found")
    notes = [f"{errors} ethtool error line(s) (interface without channel support?) ignored"] if errors else []
    interfaces = {subject for _c, subject, *_rest in rows}
    return ParseResult(tables={TABLE: frame(rows, ctx.source)}, records=len(interfaces), warnings=cap_skipped_lines(warnings), notes=notes)


def detect(head: str, name: str) -> float:
    if "Ring parameters for" in head or "RX Jumbo:" in head:
        return 0.0  # ethtool -g shares the section titles
    if _DETECT_HEADER_RE.search(head) and _DETECT_SECTION_RE.search(head):
        return 0.95
    if _DETECT_SECTION_RE.search(head) and _DETECT_LABEL_RE.search(head):
        return 0.8
    return 0.0


SPEC = ParserSpec(
    kind="ethtool-channels",
    description="ethtool -l: NIC RX/TX/Other/Combined channel maximums and current settings",
    detect=detect,
    parse=parse,
)
