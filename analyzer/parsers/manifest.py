"""The capture's manifest: facts about the capture itself, above all the servers' time zone.

Sample input (``capture/manifest.json``)::

    {"host": "bank-core-db03", "tz": "Asia/Shanghai", "taken_at": "2024-05-14T10:01:05+08:00",
     "commands": ["LC_ALL=C S_TIME_FORMAT=ISO mpstat -P ALL -I SCPU 1 60", "..."]}

or shell-style ``manifest.txt`` / ``MANIFEST``::

    HOST=bank-core-db03
    TZ=Asia/Shanghai

Output table ``host_fact``: key, value, source — keys lower-cased (``tz``, ``host``, ...).
The pipeline reads ``tz`` from here before it parses the other members (zone-less times).
"""

from __future__ import annotations

import json
import re

import polars as pl

from dbdiag import tables as t
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec
from dbdiag.parsers.kit import json_text
from dbdiag.patterns import lazy_compile

_NAME = lazy_compile(r"(^|/)(manifest(\.json|\.txt)?|MANIFEST(\.txt)?)$", re.IGNORECASE)
# the value as (?:.*?\S)?, not .*?: the same text, and linear in a run of spaces inside it
_KEY_VALUE = lazy_compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*[=:]\s*((?:.*?\S)?)\s*$")
TZ_KEYS = ("tz", "timezone", "time_zone")
TAKEN_AT_KEYS = ("taken_at", "captured_at", "time")


def detect(head: str, name: str) -> float:
    if not _NAME.search(name):
        return 0.0
    stripped = head.lstrip()
    if stripped.startswith("{"):
        return 0.9
    return 0.8 if any(_KEY_VALUE.match(line) for line in stripped.splitlines()[:5]) else 0.0


def _flatten(data: dict) -> list[tuple[str, str]]:
    pairs = []
    for key, value in data.items():
        text = json.dumps(value) if isinstance(value, (dict, list)) else str(value)
        pairs.append((str(key).lower(), text))
    return pairs


def parse(text: str, ctx: ParseContext) -> ParseResult:
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            data = json_text.loads(stripped)
        except json.JSONDecodeError as error:
            raise ParseError(f"manifest is not valid JSON: {error}") from error
        if not isinstance(data, dict):
            raise ParseError("manifest JSON is not an object")
        pairs = _flatten(data)
    else:
        pairs = [
            (match.group(1).lower(), match.group(2).strip("\"'"))
            for match in map(_KEY_VALUE.match, stripped.splitlines())
            if match
        ]
    if not pairs:
        raise ParseError("manifest holds no key=value pairs")
    return ParseResult(tables={t.HOST_FACT: t.host_fact_frame(pairs, ctx.source)}, records=len(pairs))


def manifest_tz(result: ParseResult) -> str | None:
    facts = result.tables.get(t.HOST_FACT)
    if facts is None:
        return None
    for key in TZ_KEYS:
        values = facts.filter(pl.col("key") == key)["value"].to_list()
        if values and values[0]:
            return values[0]
    return None


def manifest_taken_at(result: ParseResult) -> str | None:
    """The manifest's ``taken_at`` (ISO time the capture was taken), as written."""
    facts = result.tables.get(t.HOST_FACT)
    if facts is None:
        return None
    values = facts.filter(pl.col("key").is_in(TAKEN_AT_KEYS))["value"].to_list()
    return values[0] if values and values[0] else None


SPEC = ParserSpec(
    kind="capture-manifest",
    description="capture manifest (manifest.json or KEY=VALUE manifest.txt): host, time zone",
    detect=detect,
    parse=parse,
)
