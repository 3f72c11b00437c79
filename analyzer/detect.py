"""Detection by content: which parser reads a member, judged from its first bytes.

File names are hints that each parser may weigh; content must carry the decision.
"""

from __future__ import annotations

from dataclasses import dataclass

from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParserSpec

MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class Detection:
    spec: ParserSpec | None
    confidence: float
    reason: str | None = None  # why nothing matched, for the inventory


def looks_binary(head: bytes) -> bool:
    return b"\x00" in head[:4096]


def detect(data: bytes, name: str, parsers: tuple[ParserSpec, ...]) -> Detection:
    head_bytes = data[:DETECT_HEAD_BYTES]
    if not head_bytes.strip():
        return Detection(None, 0.0, "empty file")
    if looks_binary(head_bytes):
        return Detection(None, 0.0, "binary content (not a text format dbdiag reads)")
    head = head_bytes.decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    scored = sorted(((spec.detect(head, name), spec) for spec in parsers), key=lambda pair: -pair[0])
    if scored and scored[0][0] >= MIN_CONFIDENCE:
        return Detection(scored[0][1], scored[0][0])
    return Detection(None, scored[0][0] if scored else 0.0, "not recognised")
