"""The perf script C kernel (dbdiag._perf_fold): built, same tables as the reading without it, safe on hostile bytes.

perf_script reads regular pieces with the kernel and everything else line by line; without the
kernel (a package installed with no C compiler) every piece is read line by line. Both must give
the same tables, from ``parse`` (text) and ``parse_bytes`` (raw bytes) alike.
"""

from __future__ import annotations

import mmap
import random
import re
import tarfile
from functools import cache

import pytest

from dbdiag.native import perf_fold, perf_fold_polars
from dbdiag.parsers import perf_script
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult
from tests.conftest import CORPUS, corpus_names
from tests.golden import result_as_json
from tests.kernel_readings import Readings, assert_read_alike

SCRIPT_FILES = corpus_names("perf", "flamegraph__*")
CAPTURES = corpus_names("captures", "*.tar.gz")
CTX = ParseContext(source="perf-script.txt")
REGULAR = (
    b"mariadbd 21596/21626 [001]  1291.146818:   10101010 cpu-clock:pppH: \n"
    b"\tffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])\n"
    b"\t          83d61f do_command+0x13f (/usr/sbin/mariadbd)\n"
    b"\n"
)


def _raw(name: str) -> bytes:
    if name in CAPTURES:
        with tarfile.open(CORPUS / "captures" / name, "r:gz") as tar:
            return tar.extractfile(tar.getmember("capture/os/perf-script.txt")).read()
    return (CORPUS / "perf" / name).read_bytes()


def _decode(data: bytes) -> str:
    """As dbdiag.pipeline.decode."""
    text = data.decode("utf-8", "backslashreplace")
    return text.replace("\r\n", "\n") if "\r" in text else text


def _outcome(parse, data) -> dict | str:
    try:
        return result_as_json(parse(data, CTX))
    except ParseError as error:
        return f"ParseError: {error}"


def _without_kernel(parse, data, monkeypatch: pytest.MonkeyPatch) -> dict | str:
    with monkeypatch.context() as patched:
        patched.setattr(perf_fold, "kernel", lambda: None)
        return _outcome(parse, data)


def _parsers(chunk: int):
    """Reading the text (decoded as the pipeline does) and the raw bytes, in pieces of ``chunk``."""

    def text_parse(raw: bytes, ctx: ParseContext) -> ParseResult:
        return perf_script.parse_chunked(_decode(raw), ctx, chunk)

    def bytes_parse(raw: bytes, ctx: ParseContext) -> ParseResult:
        return perf_script.parse_bytes_chunked(raw, ctx, chunk)

    return text_parse, bytes_parse


def _check_all_readings(data: bytes, monkeypatch: pytest.MonkeyPatch, chunk: int = perf_script.CHUNK_CHARS):
    """Text and bytes, with and without the kernel: one outcome."""
    text_parse, bytes_parse = _parsers(chunk)
    expected = _without_kernel(text_parse, data, monkeypatch)
    assert _outcome(text_parse, data) == expected
    assert _outcome(bytes_parse, data) == expected
    assert _without_kernel(bytes_parse, data, monkeypatch) == expected
    return expected


@cache
def _corpus_readings(name: str) -> Readings:
    """A corpus file or capture read each way once per session: several tests compare the same readings."""
    data = _raw(name)
    text_parse, bytes_parse = _parsers(perf_script.CHUNK_CHARS)
    fell_back: list[str] = []
    with pytest.MonkeyPatch.context() as patched:
        text_without_kernel = _without_kernel(text_parse, data, patched)
        bytes_without_kernel = _without_kernel(bytes_parse, data, patched)
        fold_chunk = perf_fold_polars.fold_chunk
        reading = ["text"]
        patched.setattr(perf_fold_polars, "fold_chunk", lambda *args: fell_back.append(reading[0]) or fold_chunk(*args))
        text = _outcome(text_parse, data)
        reading[0] = "bytes"
        raw = _outcome(bytes_parse, data)
    outcomes = [text_without_kernel if o == text_without_kernel else o for o in (text, raw, bytes_without_kernel)]
    return Readings(text_without_kernel, *outcomes, tuple(dict.fromkeys(fell_back)))


def test_kernel_is_built() -> None:
    # Not a skip: a wheel or CI build that lost the kernel must fail here.
    from dbdiag import _perf_fold

    assert perf_fold.kernel() is _perf_fold
    folder = _perf_fold.Folder()
    assert folder.scan(REGULAR, 0, len(REGULAR)) is not None


@pytest.mark.parametrize("name", [*SCRIPT_FILES, *CAPTURES])
def test_kernel_and_line_reading_give_the_same_tables(name: str) -> None:
    outcome = assert_read_alike(_corpus_readings(name))
    assert isinstance(outcome, dict) and outcome["records"] > 0


@pytest.mark.parametrize("capture", CAPTURES)
def test_small_pieces_mixed_with_refused_ones_read_alike(capture: str, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _raw(capture)
    # A line no header pattern reads in one piece of five: that piece goes line by line, the others through the kernel.
    cut = data.index(b"\n\n", len(data) // 5) + 2
    outcome = _check_all_readings(data[:cut] + b"not a sample header\n" + data[cut:], monkeypatch, chunk=40_000)
    line = data[:cut].count(b"\n") + 1
    assert outcome["warnings"] == [f"line {line}: not a perf script sample header or frame line; skipped"]


@pytest.mark.parametrize("capture", CAPTURES)
def test_captures_are_read_by_the_kernel_from_bytes(capture: str) -> None:
    assert perf_script.SPEC.parse_bytes is perf_script.parse_bytes  # what _corpus_readings reads as "bytes"
    readings = _corpus_readings(capture)
    assert "bytes" not in readings.fell_back, "fell back to the line-by-line reading"
    assert readings.bytes["records"] > 0


def test_parse_bytes_reads_an_mmap(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _raw(CAPTURES[0])
    path = tmp_path / "perf-script.txt"
    path.write_bytes(data)
    with path.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        from_map = result_as_json(perf_script.parse_bytes_chunked(mapped, CTX, 100_000))
    assert from_map == _corpus_readings(CAPTURES[0]).text  # perf_script.parse(_decode(data), CTX)


BODY_TOKENS = ["a", "f", "x", "0x", "+", "+0x1f", "+0x", "+0xg", " ", "  ", "\t", "(", ")", "[unknown]", "[vdso]",
               "[kernel.kallsyms]", "/usr/lib/libc.so.6", ";", "'", '"', "(anonymous namespace)", ".", "->",
               "vmlinux", "x.ko", "Ljava/", "::", "<", ">", "\x7f"]


def _random_body(rng: random.Random) -> str:
    symbol = "".join(rng.choice(BODY_TOKENS) for _ in range(rng.randrange(0, 6)))
    dso = "".join(rng.choice(BODY_TOKENS) for _ in range(rng.randrange(0, 4)))
    offset = rng.choice(["", "+0x1f", "+0x0", "+0x1f "])
    blanks = rng.choice([" ", "  ", "\t", ""])
    return f"{symbol}{offset}{blanks}({dso}){rng.choice(['', ' ', chr(9)])}"


def _random_header(rng: random.Random) -> str:
    comm = rng.choice(["mariadbd", "java", "kworker/u4:1-ev", "my app", ":-1", "swapper", "a;b"])
    ids = rng.choice(["21596/21626", "21626", "-1", "0/0"])
    cpu = rng.choice(["[001] ", ""])
    time = rng.choice(["1291.146818: ", "8296.836030:", "1.5: ", "0000000000000000000000001.00000000000001:"])
    period = rng.choice(["10101010 ", ""])
    event = rng.choice(["cpu-clock:pppH: ", "cycles: ", "sched:sched_switch: prev=1 ", ""])
    rest = rng.choice(["", "", " ffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])", " 1 (anon) (x)"])
    return f"{comm} {ids} {cpu}{rng.choice(['', ' '])}{time} {period}{event}{rest}"


def _random_address(rng: random.Random) -> str:
    """Mostly as perf prints it (a tab, then right-aligned in 16 columns), else other blanks and widths."""
    address = f"{rng.randrange(16 ** rng.randrange(1, 17)):x}"
    if rng.random() < 0.6:
        return "\t" + address.rjust(16, rng.choice(" " * 9 + "\t"))
    return rng.choice(["\t", "\t    ", " ", "\t \t", "\t" + " " * 17]) + address


# Lines the kernel refuses (the piece is then read line by line): a few, so most pieces go through the kernel.
REFUSED_LINES = ["\t1 fé (x)", "\t1 f\x01 (x)", "dd 1 12345678901234567.5: cycles: ", "not a header",
                 "dd 1 1.0000000000000000000000001: cycles:", "\t1 no parenthesis", "# comment"]


@pytest.mark.parametrize("seed", range(6))
def test_random_frames_and_headers_read_alike(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel groups bodies it reads as "symbol+0x.. (dso)": one grouped wrongly would name a stack wrongly.
    rng = random.Random(seed)
    bodies = [_random_body(rng) for _ in range(300)]
    samples = []
    for _ in range(600):
        frames = "".join(f"{_random_address(rng)} {rng.choice(bodies)}\n" for _ in range(rng.randrange(0, 6)))
        refused = f"{rng.choice(REFUSED_LINES)}\n" if rng.random() < 0.01 else ""
        samples.append(f"{_random_header(rng)}\n{frames}{refused}\n")
    text = "".join(samples)
    pieces = [perf_fold.TextPiece(text, start, end) for start, end in perf_fold.chunks(text, 2_000)]
    _, scans = perf_fold.scan_pieces(perf_fold.kernel(), pieces)
    assert len(pieces) // 2 < sum(scan is not None for scan in scans) < len(pieces)
    _check_all_readings(text.encode("utf-8"), monkeypatch, chunk=2_000)
    _check_all_readings(text.encode("utf-8"), monkeypatch, chunk=20_000)


def _scan(data: bytes):
    return perf_fold.kernel().Folder().scan(data, 0, len(data))


HOSTILE = {
    "nul_in_frame": REGULAR.replace(b"do_command", b"do_\x00command"),
    "nul_line": REGULAR + b"\x00\n",
    "carriage_return": REGULAR.replace(b"\n", b"\r\n"),
    "lone_carriage_return": REGULAR.replace(b"do_command", b"do\rcommand"),
    "frame_without_newline_at_end": REGULAR.rstrip(b"\n"),
    "header_without_newline_at_end": REGULAR + b"dd 1 1.0: 1 cpu-clock: ",
    "truncated_frame": REGULAR + REGULAR[:100],
    "no_address": REGULAR.replace(b"\t          83d61f ", b"\t "),
    "no_parenthesis": REGULAR.replace(b"(/usr/sbin/mariadbd)", b"/usr/sbin/mariadbd"),
    "not_ascii": REGULAR.replace(b"do_command", "do_commandé".encode()),
    "invalid_utf8": REGULAR.replace(b"do_command", b"do_\xff\xfecommand"),
    "long_time": REGULAR.replace(b"1291.146818", b"1" * 40 + b".5"),
    "only_comments": b"# comment\n#\n",
    "only_blank_lines": b"\n\n\n",
    "frames_only": b"\t83d61f do_command+0x13f (/usr/sbin/mariadbd)\n",
    "ten_mb_line": b"x" * 10_000_000 + b"\n" + REGULAR,
    "two_mb_frame": REGULAR.replace(b"do_command", b"f" * 2_000_000),
    "two_mb_header": REGULAR.replace(b"mariadbd", b"m" * 2_000_000, 1),
    "ten_mb_comment_without_newline": b"#" * 10_000_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_input_reads_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _check_all_readings(HOSTILE[name], monkeypatch)


def test_hostile_bytes_are_refused_or_read_without_crash() -> None:
    assert _scan(HOSTILE["nul_in_frame"]) is None
    assert _scan(HOSTILE["not_ascii"]) is None
    assert _scan(HOSTILE["lone_carriage_return"]) is None
    assert _scan(HOSTILE["long_time"]) is None  # more digits than a double keeps: read line by line
    assert _scan(HOSTILE["frames_only"]) is None
    assert _scan(b"") is None
    samples, first, last, *_ = _scan(HOSTILE["frame_without_newline_at_end"])
    assert (samples, first, last) == (1, 1291.146818, 1291.146818)
    assert _scan(REGULAR.replace(b"do_command", b"f" * 10_000_000))[0] == 1
    assert _scan(REGULAR.replace(b"mariadbd", b"m" * 10_000_000, 1))[0] == 1
    assert _scan(b"\t1 " + b"(" * 10_000_000) is None
    assert _scan(REGULAR.rstrip(b"\n") + b"\n\t1 " + b"f" * 10_000_000 + b" (x)")[0] == 1
    rng = random.Random(7)
    alphabet = b"\t\n (+)0x#abcdef: 1.5[]"
    perf_like = bytes(alphabet[n % len(alphabet)] for n in range(256))
    for size in (1, 7, 8, 9, 100, 4096, 100_000):
        for _ in range(20):
            data = rng.randbytes(size)
            for found in (_scan(data), _scan(data.translate(perf_like))):
                assert found is None or found[0] >= 1


def test_scan_reads_only_within_start_and_end() -> None:
    kernel = perf_fold.kernel()
    data = REGULAR + b"\t1 junk (x)\n"  # a frame after the blank line: not regular
    assert kernel.Folder().scan(data, 0, len(data)) is None
    assert kernel.Folder().scan(data, 0, len(REGULAR))[0] == 1
    for start, end in [(-1, 5), (0, len(data) + 1), (5, 4)]:
        with pytest.raises(ValueError):
            kernel.Folder().scan(data, start, end)
    with pytest.raises(TypeError):
        kernel.Folder().scan("text", 0, 4)
    folder = kernel.Folder()
    folder.scan(REGULAR, 0, len(REGULAR))
    with pytest.raises(ValueError):
        folder.spell(["one name for two symbols"])
    with pytest.raises(TypeError):
        folder.spell([b"bytes", None])


def test_spell_joins_names_root_first_and_skips_none() -> None:
    from array import array

    folder = perf_fold.kernel().Folder()
    found = folder.scan(REGULAR, 0, len(REGULAR))
    assert folder.symbols() == ["pv_native_safe_halt+0xb ([kernel.kallsyms])", "do_command+0x13f (/usr/sbin/mariadbd)"]
    header = REGULAR.decode().split("\n")[0]
    assert folder.keys() == [re.sub(perf_fold_polars._TIME_PATTERN, " 0.0:", header, count=1)]
    assert folder.keys() == ["mariadbd 21596/21626 [001]  0.0:   10101010 cpu-clock:pppH: "]
    stacks, leaves = folder.spell(["halt", "do_command"])
    assert (stacks, list(array("i", leaves))) == (["do_command;halt"], [0])
    stacks, leaves = folder.spell([None, ""])
    assert (stacks, list(array("i", leaves))) == ([""], [1])
    stacks, leaves = folder.spell([None, None])
    assert (stacks, list(array("i", leaves))) == ([None], [-1])
    assert list(array("I", found[3])) == [0] and list(array("Q", found[5])) == [1]
