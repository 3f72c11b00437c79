"""Every detector runs on the head of every member, so each must be linear in it (issue 11): one
pattern with ``\\s*`` across lines (the postgresql.conf detector's) made 2,000 blank lines take 100 s
and caused every hang of a 3,147-mutant fuzz run; 8 KB of spaces took it 38 s."""

from __future__ import annotations

import time

import pytest

from dbdiag.detect import detect
from dbdiag.parsers import PARSERS
from dbdiag.parsers.base import DETECT_HEAD_BYTES

# What a mutation or a hostile file puts at the head of a member, filling the whole detection head.
PATHOLOGICAL_HEADS = {
    "blank lines": "\n",
    "spaces": " ",
    "space and newline": " \n",
    "tabs and newlines": "\t\n",
    "every kind of white space": " \t\r\n\f\v",
    "CRLF": "\r\n",
    "equals": "=",
    "hashes": "#",
    "hash and space": "# ",
    "open brackets": "[",
    "bracket lines": "[\n",
    "braces": "{",
    "digits": "1",
    "colons": ":",
    "quotes": '"',
    "commas": ",",
    "pipes": "|",
    "dashes": "- ",
    "assignments": "a=\n",
    "slow-log time lines": "# Time: \n",
    "commented names": "#shared_buffers\n",
}
# Linear detectors take a few ms on 8 KB; the cubic one took 38 s. Generous for a loaded CI machine.
BOUND_S = 1.0


@pytest.mark.parametrize("spec", PARSERS, ids=lambda spec: spec.kind)
def test_each_detector_is_quick_on_pathological_heads(spec) -> None:
    slowest = []
    for name, unit in PATHOLOGICAL_HEADS.items():
        head = (unit * (DETECT_HEAD_BYTES // len(unit) + 1))[:DETECT_HEAD_BYTES]
        started = time.perf_counter()
        spec.detect(head, "postgresql.conf")  # a name that weighs for the slowest detector
        slowest.append((time.perf_counter() - started, name))
    assert max(slowest)[0] < BOUND_S, f"{spec.kind}: {max(slowest)[1]} took {max(slowest)[0]:.2f} s"


def test_detection_of_a_member_of_blank_lines_is_quick() -> None:
    started = time.perf_counter()
    detection = detect(b"shared_buffers = 1GB\n" + b"\n" * 2000 + b"work_mem = 4MB\n", "postgresql.conf", PARSERS)
    assert time.perf_counter() - started < BOUND_S
    assert detection.spec is not None and detection.spec.kind == "postgresql-conf"
