"""Mutations of one input for the fuzzer (``tests/fuzzing.py``): small pure functions of bytes.

A mutation is a ``Step(kind, params)``; ``random_steps(rng)`` draws one to three of them and
``apply_steps`` applies them in order. Positions are fractions of the current input, so that any
subset of a mutant's steps still applies (the fuzzer drops steps to shrink a failure). Sample::

    >>> apply_steps(b"a 1\\nb 2\\n", [Step("blank_lines", ())])
    b'a 1\\n\\nb 2\\n\\n'
    >>> describe([Step("truncate", (0.5,)), Step("crlf", (1.0, 7))])
    'truncate(0.5) + crlf(1.0, 7)'
"""

from __future__ import annotations

import random
import re
from typing import Callable, NamedTuple

HUGE_LINE_BYTES = 2 * 1024 * 1024
# Duplicating long lines a thousand times can reach GBs; a mutant is cut here (at a line end)
# after each step, which keeps the fuzzer small and the time bound of a run near a minute.
MAX_MUTANT_BYTES = 8 * 1024 * 1024

EXTREME_NUMBERS = (
    "1234567890123456789012345678901234567890",  # 40 digits: past int64 and float's exact range
    "-1", "0", "nan", "NaN", "inf", "-inf", "1e308", "-1e308", "1e-320",
    "18446744073709551616", "9223372036854775808", "4294967296", "99999999999999999999.5",
)
EXTREME_YEARS = ("9999", "0001", "1970", "0000", "1900", "2038")
# Unix times: the epoch, before it, year 5138, year 10000, and milliseconds read as seconds.
EXTREME_EPOCHS = ("0", "-1", "99999999999", "253402300800", "9999999999999")
EXTREME_CLOCKS = ("99:99:99", "24:00:00", "23:59:60", "00:00:00")
BAD_UTF8 = (b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\xef\xbb\xbf", b"\xe2\x80\xa8", b"\x1b[31m", b"\x85")

_NUMBER = re.compile(rb"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_YEAR = re.compile(rb"(?<!\d)\d{4}(?=[-/](?:0[1-9]|1[0-2])[-/][0-3]\d)")
_EPOCH = re.compile(rb"(?<![\d.])1[0-9]{9}(?![\d])")
_CLOCK = re.compile(rb"(?<!\d)[0-2]\d:[0-5]\d:[0-5]\d(?!\d)")


class Step(NamedTuple):
    """One mutation: its kind (a key of ``MUTATIONS``) and its parameters (plain values)."""

    kind: str
    params: tuple


def describe(steps: list[Step]) -> str:
    return " + ".join(f"{s.kind}({', '.join(map(repr, s.params))})" for s in steps) or "unmutated"


def apply_steps(data: bytes, steps: list[Step]) -> bytes:
    for step in steps:
        data = MUTATIONS[step.kind](data, *step.params)
        if len(data) > MAX_MUTANT_BYTES:
            data = data[: data.rfind(b"\n", 0, MAX_MUTANT_BYTES) + 1 or MAX_MUTANT_BYTES]
    return data


# ---- the mutations ------------------------------------------------------------------------------


def _position(data: bytes, fraction: float) -> int:
    return min(len(data), int(len(data) * fraction))


def _line_index(lines: list[bytes], fraction: float) -> int:
    return min(len(lines) - 1, int(len(lines) * fraction))


def truncate(data: bytes, fraction: float) -> bytes:
    return data[: _position(data, fraction)]


def truncate_at_line(data: bytes, fraction: float) -> bytes:
    return data[: data.rfind(b"\n", 0, _position(data, fraction)) + 1]


def bit_flips(data: bytes, count: int, subseed: int) -> bytes:
    if not data:
        return data
    rng = random.Random(subseed)
    mutable = bytearray(data)
    for _ in range(count):
        mutable[rng.randrange(len(mutable))] ^= 1 << rng.randrange(8)
    return bytes(mutable)


def delete_lines(data: bytes, fraction: float, count: int) -> bytes:
    lines = data.split(b"\n")
    start = _line_index(lines, fraction)
    return b"\n".join(lines[:start] + lines[start + count :])


def duplicate_lines(data: bytes, fraction: float, count: int, times: int) -> bytes:
    lines = data.split(b"\n")
    start = _line_index(lines, fraction)
    block = lines[start : start + count]
    return b"\n".join(lines[: start + count] + block * times + lines[start + count :])


def join_lines(data: bytes, fraction: float, count: int) -> bytes:
    """Remove ``count`` line ends from the line at ``fraction`` on (two records on one line)."""
    lines = data.split(b"\n")
    start = _line_index(lines, fraction)
    return b"\n".join(lines[:start] + [b"".join(lines[start : start + count + 1])] + lines[start + count + 1 :])


def reverse_lines(data: bytes, fraction: float, count: int) -> bytes:
    """Reverse a block of lines (times out of order, a header after its rows)."""
    lines = data.split(b"\n")
    start = _line_index(lines, fraction)
    return b"\n".join(lines[:start] + lines[start : start + count][::-1] + lines[start + count :])


def blank_lines(data: bytes) -> bytes:
    """A blank line after every line."""
    return data.replace(b"\n", b"\n\n")


def nul_bytes(data: bytes, count: int, run: int, subseed: int) -> bytes:
    rng = random.Random(subseed)
    mutable = bytearray(data)
    for _ in range(count):
        position = rng.randrange(len(mutable) + 1)
        mutable[position:position] = bytes(run)
    return bytes(mutable)


def crlf(data: bytes, share: float, subseed: int) -> bytes:
    """``share`` of the line ends become CRLF (1.0: all of them)."""
    rng = random.Random(subseed)
    lines = data.split(b"\n")
    ends = [b"\r\n" if rng.random() < share else b"\n" for _ in lines[:-1]]
    return b"".join(line + end for line, end in zip(lines, ends)) + lines[-1]


def cr_only(data: bytes) -> bytes:
    """Old Mac line ends: no LF at all, so the whole input is one line."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")


def huge_line(data: bytes, fraction: float, fill: str, size_bytes: int = HUGE_LINE_BYTES) -> bytes:
    """Insert one line of ``size_bytes``: the neighbouring line repeated, or one character."""
    lines = data.split(b"\n")
    at = _line_index(lines, fraction)
    if fill == "repeat":
        unit = lines[at] or b"x"
    else:
        unit = {"a": b"a", "digits": b"9", "spaces": b" ", "quote": b"'", "paren": b"("}[fill]
    line = (unit * (size_bytes // len(unit) + 1))[:size_bytes]
    return b"\n".join(lines[:at] + [line] + lines[at:])


def _replace_some(data: bytes, pattern: re.Pattern, value: bytes, share: float, subseed: int) -> bytes:
    rng = random.Random(subseed)
    return pattern.sub(lambda match: value if rng.random() < share else match.group(0), data)


def extreme_numbers(data: bytes, value: str, share: float, subseed: int) -> bytes:
    return _replace_some(data, _NUMBER, value.encode(), share, subseed)


def extreme_years(data: bytes, value: str, share: float, subseed: int) -> bytes:
    return _replace_some(data, _YEAR, value.encode(), share, subseed)


def extreme_epochs(data: bytes, value: str, share: float, subseed: int) -> bytes:
    return _replace_some(data, _EPOCH, value.encode(), share, subseed)


def extreme_clocks(data: bytes, value: str, share: float, subseed: int) -> bytes:
    return _replace_some(data, _CLOCK, value.encode(), share, subseed)


def bad_utf8(data: bytes, count: int, subseed: int) -> bytes:
    rng = random.Random(subseed)
    mutable = bytearray(data)
    for _ in range(count):
        position = rng.randrange(len(mutable) + 1)
        mutable[position:position] = rng.choice(BAD_UTF8)
    return bytes(mutable)


def junk(data: bytes, length: int, fraction: float, subseed: int) -> bytes:
    at = _position(data, fraction)
    return data[:at] + random.Random(subseed).randbytes(length) + data[at:]


def utf16(data: bytes) -> bytes:
    return data.decode("utf-8", "replace").encode("utf-16")


MUTATIONS: dict[str, Callable[..., bytes]] = {
    "truncate": truncate,
    "truncate_at_line": truncate_at_line,
    "bit_flips": bit_flips,
    "delete_lines": delete_lines,
    "duplicate_lines": duplicate_lines,
    "join_lines": join_lines,
    "reverse_lines": reverse_lines,
    "blank_lines": blank_lines,
    "nul_bytes": nul_bytes,
    "crlf": crlf,
    "cr_only": cr_only,
    "huge_line": huge_line,
    "extreme_numbers": extreme_numbers,
    "extreme_years": extreme_years,
    "extreme_epochs": extreme_epochs,
    "extreme_clocks": extreme_clocks,
    "bad_utf8": bad_utf8,
    "junk": junk,
    "utf16": utf16,
}


# ---- drawing mutations --------------------------------------------------------------------------


def _fraction(rng: random.Random) -> float:
    return round(rng.random(), 3)


def _share(rng: random.Random) -> float:
    return rng.choice((1.0, 1.0, 0.5, 0.1))


_DRAW: dict[str, tuple[int, Callable[[random.Random], tuple]]] = {
    # kind: (weight, draw parameters)
    "truncate": (8, lambda r: (_fraction(r),)),
    "truncate_at_line": (6, lambda r: (_fraction(r),)),
    "bit_flips": (10, lambda r: (r.choice((1, 2, 8, 64)), r.randrange(10**6))),
    "delete_lines": (8, lambda r: (_fraction(r), r.choice((1, 1, 3, 20)))),
    "duplicate_lines": (8, lambda r: (_fraction(r), r.choice((1, 3, 10)), r.choice((1, 2, 100, 1000)))),
    "join_lines": (6, lambda r: (_fraction(r), r.choice((1, 2, 10)))),
    "reverse_lines": (4, lambda r: (_fraction(r), r.choice((2, 10, 100)))),
    "blank_lines": (6, lambda r: ()),
    "nul_bytes": (5, lambda r: (r.choice((1, 4)), r.choice((1, 1, 512)), r.randrange(10**6))),
    "crlf": (5, lambda r: (_share(r), r.randrange(10**6))),
    "cr_only": (2, lambda r: ()),
    "huge_line": (3, lambda r: (_fraction(r), r.choice(("repeat", "a", "digits", "spaces", "quote", "paren")))),
    "extreme_numbers": (10, lambda r: (r.choice(EXTREME_NUMBERS), _share(r), r.randrange(10**6))),
    "extreme_years": (6, lambda r: (r.choice(EXTREME_YEARS), _share(r), r.randrange(10**6))),
    "extreme_epochs": (4, lambda r: (r.choice(EXTREME_EPOCHS), _share(r), r.randrange(10**6))),
    "extreme_clocks": (3, lambda r: (r.choice(EXTREME_CLOCKS), _share(r), r.randrange(10**6))),
    "bad_utf8": (4, lambda r: (r.choice((1, 8)), r.randrange(10**6))),
    "junk": (3, lambda r: (r.choice((16, 4096)), _fraction(r), r.randrange(10**6))),
    "utf16": (1, lambda r: ()),
}


def random_steps(rng: random.Random) -> list[Step]:
    """One to three mutations; the rarer whole-input ones (utf16, cr_only) at most once."""
    kinds = list(_DRAW)
    weights = [_DRAW[kind][0] for kind in kinds]
    count = rng.choices((1, 2, 3), weights=(6, 3, 1))[0]
    steps: list[Step] = []
    for kind in rng.choices(kinds, weights=weights, k=count):
        if kind in ("utf16", "cr_only", "blank_lines", "huge_line") and any(s.kind == kind for s in steps):
            continue
        steps.append(Step(kind, _DRAW[kind][1](rng)))
    return steps
