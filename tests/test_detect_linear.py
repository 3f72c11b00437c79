"""Every detector and parser stays linear on pathological text: blank lines, runs of one character,
one long line, CRLF mixes, NUL bytes.

Every detector runs on the first 8 KB of every member, so one pattern that backtracks across lines
(``^\\s*#?\\s*name`` over 2,000 blank lines was cubic: 100 s) hangs the whole capture. The bounds
are generous (linear code takes a few ms here); each call is cut off by a timer so that a
regression fails instead of hanging.
"""

from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from dbdiag.detect import detect
from dbdiag.parsers import registry
from dbdiag.parsers.base import DETECT_HEAD_BYTES
from dbdiag.pipeline import analyze, parse_bytes, parse_text

from tests.conftest import CORPUS

GOOD_MPSTAT = CORPUS / "mpstat" / "sysstat__expected.mpstat-U.txt"

UNITS = {
    "blank lines": "\n",
    "spaces": " ",
    "newline space newline": "\n \n",
    "equals": "=",
    "hashes": "#",
    "brackets": "[",
    "digits": "1",
    "CRLF mix": "\r\n\n\r",
    "NUL lines": "\x00\n",
    "tabs and newlines": "\t\n",
    "space newline": " \n",
    "hash lines": "#\n",
    "equals lines": "=\n",
    "colon-space lines": "x: \n",
    "key-equals lines": "x=\n",
    "digit space": "1 ",
    "digit dot": "1.",
    "quotes": '"',
    "commas": ",",
    "backslashes": "\\",
    "frame-like": " a (",
    "dollars": "$",
    "tabs": "\t\t",
}
DETECT_BOUND_S = 1.0  # all heads of one parser; linear detectors take ~20 ms on this machine
PARSE_BOUND_S = 2.0  # one 64 KB input; linear parsers take < 0.3 s, the quadratic ones took 5 s and more
PARSE_BYTES = 64 * 1024


# a real-looking start, then one run: the cases that only backtrack once a pattern has begun to match
LEADS = {
    "open bracket then spaces": "[",  # a TOML table never closed: 20 s per line in tidb-config's detector
    "time then a word": "2024-05-14 10:00:00 ",
    "setting then spaces": "shared_buffers",
    "prompt then hashes": "$ ",
}


def heads(size: int) -> dict[str, str]:
    """Each unit repeated to ``size`` characters (one line of digits, 8 KB of blank lines, ...), and each
    lead followed by spaces or letters up to ``size``."""
    out = {name: unit * (size // len(unit)) for name, unit in UNITS.items()}
    for name, lead in LEADS.items():
        out[name] = lead + " " * (size - len(lead))
        out[name + " (letters)"] = lead + "a" * (size - len(lead))
    return out


@contextmanager
def cut_off(seconds: float, what: str):
    """Fail (not hang) when the block runs past ``seconds``."""

    def expire(signum, frame):
        raise TimeoutError(f"{what}: over {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


SPECS = registry()


@pytest.mark.parametrize("spec", SPECS, ids=[spec.kind for spec in SPECS])
def test_each_detector_is_fast_on_pathological_heads(spec):
    started = time.perf_counter()
    with cut_off(10 * DETECT_BOUND_S, spec.kind):
        for head in heads(DETECT_HEAD_BYTES).values():
            spec.detect(head, "x.log")
    assert time.perf_counter() - started < DETECT_BOUND_S


def test_detection_of_pathological_heads_is_fast():
    started = time.perf_counter()
    with cut_off(10 * DETECT_BOUND_S * len(SPECS), "detect"):
        for head in heads(DETECT_HEAD_BYTES).values():
            detect(head.encode(), "x.log", SPECS)
            detect(b"x\n" + head.encode(), "x.log", SPECS)  # not blank as a whole: every detector runs
    assert time.perf_counter() - started < DETECT_BOUND_S * 4


@pytest.mark.parametrize("spec", SPECS, ids=[spec.kind for spec in SPECS])
def test_each_parser_is_fast_on_pathological_text(spec):
    """A parse may fail (one line in the inventory), but not take long on 64 KB."""
    for name, text in heads(PARSE_BYTES).items():
        started = time.perf_counter()
        with cut_off(10 * PARSE_BOUND_S, f"{spec.kind} on {name}"):
            if spec.parse_bytes is not None:
                parse_bytes(text.encode(), "x.log", spec, "UTC")
            else:
                parse_text(text, "x.log", spec, "UTC")
        elapsed_s = time.perf_counter() - started
        assert elapsed_s < PARSE_BOUND_S, f"{spec.kind} on {name}: {elapsed_s:.2f} s"


def test_pathological_members_beside_a_good_one(tmp_path: Path):
    """The whole pipeline over a directory of pathological members still reads the mpstat beside."""
    for index, text in enumerate(heads(PARSE_BYTES).values()):
        (tmp_path / f"member-{index}.log").write_bytes(text.encode())
    (tmp_path / "mpstat.txt").write_bytes(GOOD_MPSTAT.read_bytes())
    started = time.perf_counter()
    with cut_off(60, "analyze"):
        analysis = analyze(tmp_path)
    assert time.perf_counter() - started < 6.0
    by_path = {record.path: record for record in analysis.inputs}
    assert by_path["mpstat.txt"].status == "read"
