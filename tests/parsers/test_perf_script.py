"""perf script folding: goldens, totals checked against stackcollapse-perf.pl by hand, chunking, hostile input."""

from __future__ import annotations

import tarfile
from functools import cache
from pathlib import Path

import polars as pl
import pytest

from dbdiag.native import perf_fold, perf_fold_polars
from dbdiag.parsers import perf_script
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult
from tests.conftest import CORPUS, corpus_names
from tests.golden import result_as_json

SCRIPT_FILES = corpus_names("perf", "flamegraph__*")
CAPTURES = corpus_names("captures", "*.tar.gz")

# Sum of the counts printed by `perl stackcollapse-perf.pl [--event-filter=EVENT] FILE` (FlameGraph
# HEAD), run by hand. It weights a sample by its period when perf printed one, else by 1.
PERL_TOTALS = {
    ("flamegraph__perf-cycles-instructions-01.txt", "instructions"): 333,
    ("flamegraph__perf-cycles-instructions-01.txt", "cycles"): 111,
    ("flamegraph__perf-dd-stacks-01.txt", "cpu-clock"): 101010100,
    ("flamegraph__perf-funcab-cmd-01.txt", "cpu-clock"): 169,
    ("flamegraph__perf-java-faults-01.txt", "page-faults"): 200,
    ("flamegraph__perf-java-stacks-02.txt", "cycles"): 2,
    ("flamegraph__perf-js-stacks-01.txt", "cpu-clock"): 2,
    ("flamegraph__perf-numa-stacks-01.txt", "cpu-clock"): 199,
    ("mariadb-sysbench-debian12.tar.gz", "cpu-clock:pppH"): 5343434290,
    ("numa2-guest-iperf-debian12.tar.gz", "cpu-clock:ppp"): 76949494180,
    ("numa2x2-guest-iperf-debian12.tar.gz", "cpu-clock:ppp"): 40353534950,
    ("postgres-pgbench-debian12.tar.gz", "cpu-clock:pppH"): 5111111060,
}
# stackcollapse-perf.pl only counts a sample when a blank line follows it: these two files end
# without one, so it misses their last sample (dd: 10101010 cpu-clock period; numa: 1 sample).
PERL_MISSES_LAST_SAMPLE = {"flamegraph__perf-dd-stacks-01.txt": 10101010, "flamegraph__perf-numa-stacks-01.txt": 1}
SAMPLES = {
    "flamegraph__perf-cycles-instructions-01.txt": 444,
    "flamegraph__perf-dd-stacks-01.txt": 11,
    "flamegraph__perf-funcab-cmd-01.txt": 169,
    "flamegraph__perf-java-faults-01.txt": 23,
    "flamegraph__perf-java-stacks-02.txt": 2,
    "flamegraph__perf-js-stacks-01.txt": 2,
    "flamegraph__perf-numa-stacks-01.txt": 200,
    "mariadb-sysbench-debian12.tar.gz": 529,
    "numa2-guest-iperf-debian12.tar.gz": 7618,
    "numa2x2-guest-iperf-debian12.tar.gz": 3995,
    "postgres-pgbench-debian12.tar.gz": 506,
}


def _member(capture: str, name: str) -> str:
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        return tar.extractfile(tar.getmember(f"capture/os/{name}")).read().decode("utf-8", "backslashreplace")


def _corpus_text(name: str) -> str:
    return (CORPUS / "perf" / name).read_text(encoding="utf-8", errors="backslashreplace")


def _parse(text: str, source: str = "perf-script.txt") -> ParseResult:
    return perf_script.SPEC.parse(text, ParseContext(source=source))


@cache
def _input_text(name: str) -> str:
    return _member(name, "perf-script.txt") if name in CAPTURES else _corpus_text(name)


@cache
def _read(name: str, kernel: bool = True) -> tuple[ParseResult, bool]:
    """``_parse`` of a corpus file or capture's perf script, once per session (never change the result),
    with or without the C kernel; and whether the kernel reading read any piece line by line."""
    fell_back = []
    with pytest.MonkeyPatch.context() as patched:
        if kernel:
            fold_chunk = perf_fold_polars.fold_chunk
            patched.setattr(perf_fold_polars, "fold_chunk", lambda *args: fell_back.append(1) or fold_chunk(*args))
        else:
            patched.setattr(perf_fold, "kernel", lambda: None)
        return _parse(_input_text(name)), bool(fell_back)


@cache
def _chunked(name: str, chunk: int) -> ParseResult:
    return perf_script.parse_chunked(_input_text(name), ParseContext(source="x"), chunk)


def _weight_by_event(result: ParseResult) -> dict[str | None, int]:
    stacks = result.tables["perf_stack"]
    weights = stacks.group_by("event").agg(pl.col("period").fill_null(pl.col("samples")).sum().alias("weight"))
    return dict(weights.rows())


@pytest.mark.parametrize("name", [*SCRIPT_FILES, *CAPTURES])
def test_totals_match_stackcollapse_perf(name: str) -> None:
    result, _ = _read(name)
    assert result.records == SAMPLES[name]
    expected = {event: total for (file, event), total in PERL_TOTALS.items() if file == name}
    weights = _weight_by_event(result)
    for event, total in expected.items():
        assert weights[event] == total + PERL_MISSES_LAST_SAMPLE.get(name, 0)
    assert set(weights) == set(expected)


def test_folded_stack_strings() -> None:
    js = _read("flamegraph__perf-js-stacks-01.txt")[0].tables["perf_stack"]
    # Same string as stackcollapse-perf.pl's line for this sample (minus its leading "node-v011;").
    expected = (
        "__libc_start_main;node::Start;uv_run;uv__io_poll;uv__async_io;uv__async_event;uv__work_done;node::After;"
        "v8::Function::Call;v8::internal::Execution::Call;v8::internal::Invoke;Stub:JSEntryStub;"
        "Builtin:A builtin from the snapshot;LazyCompile:_tickDomainCallback node.js:387;"
        "LazyCompile:*Async$consumeFunctionBuffer /apps/node/webapp/node_modules/xxxxx/js/main/async.js:39;"
        "v8::internal::Execution::Call;LazyCompile:~body_0 evalmachine.<anonymous>:1;RegExp:[&<>\\\\]"
    )
    row = js.filter(pl.col("stack") == expected)
    assert row.select("comm", "tid", "leaf", "leaf_kernel", "samples", "period").rows() == [
        ("node-v011", 31912, "RegExp:[&<>\\\\]", False, 1, None)
    ]
    dd = _read("flamegraph__perf-dd-stacks-01.txt")[0].tables["perf_stack"]
    # "[unknown] ([unknown])" stays "[unknown]"; kernel frames from vmlinux count as kernel.
    first = dd.row(0, named=True)
    assert first["stack"] == "[unknown];write;system_call;sys_write;vfs_write;fsnotify;__srcu_read_unlock"
    assert (first["samples"], first["period"], first["leaf_kernel"]) == (2, 20202020, True)


def test_notes_and_ids() -> None:
    result, _ = _read("flamegraph__perf-cycles-instructions-01.txt")
    assert result.notes[:5] == [
        "captured on: Thu Aug 17 14:14:43 2017",
        "hostname: bgregg-lgud2",
        "os release: 4.13.0-rc1",
        "nrcpus online: 8",
        "nrcpus avail: 8",
    ]
    assert "samples per event: instructions 333, cycles 111" in result.notes
    assert any(note.startswith("perf sample times are seconds since boot") for note in result.notes)
    text = "mariadbd 21596/21626 [001]  1291.146818:   10101010 cpu-clock:pppH: \n\t83d61f do_command+0x13f (/usr/sbin/mariadbd)\n"
    row = _parse(text).tables["perf_stack"].row(0, named=True)
    assert (row["pid"], row["tid"], row["stack"], row["leaf_kernel"]) == (21596, 21626, "do_command", False)


def test_unknown_symbol_uses_dso_basename_and_no_stack_uses_header_symbol() -> None:
    text = (
        "swapper     0 [000]  1291.146818:   10101010 cpu-clock:pppH:  ffffffff821f2c2b pv_native_safe_halt+0xb ([kernel.kallsyms])\n"
        "mariadbd 21626 [001]  1291.2: 10101010 cpu-clock:pppH: \n"
        "\t          ee550a [unknown] (/usr/sbin/mariadbd)\n"
        "\t           891f5 start_thread+0x305 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
        "\n"
        "python3 29956 [001]  8303.278639:     500250 cpu-clock:pppH: \n"
        "\n"
    )
    stacks = _parse(text).tables["perf_stack"].sort("comm")
    assert stacks.select("comm", "stack", "leaf", "leaf_kernel").rows() == [
        ("mariadbd", "start_thread;[mariadbd]", "[mariadbd]", False),
        ("python3", "[unknown]", "[unknown]", None),
        ("swapper", "pv_native_safe_halt", "pv_native_safe_halt", True),
    ]


@pytest.mark.parametrize("name", ["flamegraph__perf-numa-stacks-01.txt", "flamegraph__perf-java-stacks-02.txt"])
def test_chunking_gives_the_same_result(name: str) -> None:
    text = _corpus_text(name)
    whole = perf_script.parse_chunked(text, ParseContext(source="x"), 10**9)
    pieces = perf_script.parse_chunked(text, ParseContext(source="x"), 1000)
    assert result_as_json(pieces) == result_as_json(whole)


def test_chunking_capture_gives_the_same_result() -> None:
    whole = _chunked("numa2x2-guest-iperf-debian12.tar.gz", 10**9)
    pieces = _chunked("numa2x2-guest-iperf-debian12.tar.gz", 50_000)
    assert pieces.tables["perf_stack"].equals(whole.tables["perf_stack"])
    assert (pieces.records, pieces.notes, pieces.warnings) == (whole.records, whole.notes, whole.warnings)


def test_binary_junk_is_refused() -> None:
    junk = "".join(chr(c) for c in range(1, 256)) * 50
    assert perf_script.SPEC.detect(junk[:8192], "perf-script.txt") <= 0.5
    with pytest.raises(ParseError):
        _parse(junk)


def test_junk_between_samples_is_skipped_with_warnings() -> None:
    text = _corpus_text("flamegraph__perf-dd-stacks-01.txt")
    junk = "\x00\x01\x02 binary \ufffd junk \x7f\n" * 120
    result = _parse(junk + "\n" + text)
    assert result.records == 11
    assert result.warnings[0].line == 1
    assert result.warnings[-1].reason == "70 more warnings not shown"


def test_truncated_last_sample_is_kept() -> None:
    text = _corpus_text("flamegraph__perf-funcab-cmd-01.txt")
    cut = text[: text.rindex("main (/root") + 4]  # the last frame line stops mid-line: "...main"
    result = _parse(cut)
    assert result.records == 169
    assert [w.reason for w in result.warnings] == ["indented line is not a frame ('address symbol (dso)'); skipped"]


def test_frame_before_any_header_is_skipped() -> None:
    text = "\t          400577 func_b (/root/lang/func_ab)\n" + _corpus_text("flamegraph__perf-dd-stacks-01.txt")
    result = _parse(text)
    assert result.records == 11
    assert [(w.line, w.reason) for w in result.warnings] == [
        (1, "frame line outside any sample (no header line above it)")
    ]


def test_huge_line_does_not_break_parsing() -> None:
    huge = "x" * 3_000_000
    text = _corpus_text("flamegraph__perf-dd-stacks-01.txt") + "\n" + huge + "\n"
    result = _parse(text)
    assert result.records == 11
    assert [w.line for w in result.warnings] == [text.count("\n")]
    long_symbol = "dd 1 1.0: 1 cpu-clock: \n\t400577 " + "f" * 1_000_000 + " (/bin/dd)\n"
    stacks = _parse(long_symbol).tables["perf_stack"]
    assert stacks["stack"].str.len_chars().to_list() == [1_000_000]


def test_no_header_at_all_is_an_error() -> None:
    with pytest.raises(ParseError):
        _parse("\t400577 func_b (/root/lang/func_ab)\n\n")
    with pytest.raises(ParseError):
        _parse("")


def _parse_general_only(text: str, monkeypatch: pytest.MonkeyPatch) -> ParseResult:
    """The parse without the C kernel (as when it was not built): every piece goes through the line-by-line reading."""
    with monkeypatch.context() as patched:
        patched.setattr(perf_fold, "kernel", lambda: None)
        return _parse(text)


@pytest.mark.parametrize("name", [*SCRIPT_FILES, *CAPTURES])
def test_regular_reading_gives_the_general_result(name: str) -> None:
    assert result_as_json(_read(name)[0]) == result_as_json(_read(name, kernel=False)[0])


@pytest.mark.parametrize("capture", CAPTURES)
def test_real_captures_take_the_regular_reading(capture: str) -> None:
    # The fast path is what keeps a 200 MB perf script within seconds: real perf output must not fall back.
    result, fell_back = _read(capture)
    assert not fell_back, "fell back to the line-by-line reading"
    assert result.records == SAMPLES[capture]


DD_TEXT_VARIANTS = {
    "crlf": lambda text: text.replace("\n", "\r\n"),
    "blank_line_with_spaces": lambda text: text.replace("\n\n", "\n   \n", 1),
    "comment_between_samples": lambda text: text.replace("\n\n", "\n\n# a comment\n", 1),
    "frame_after_blank_line": lambda text: text.replace("\n\n", "\n\n\t     0 [unknown] (/usr/bin/dd)\n", 1),
    "non_ascii_symbol": lambda text: text.replace("fsnotify", "fsnotify_é", 1),
    "header_without_frames": lambda text: "dd 29776 666709.0: 10101010 cpu-clock: \n" + text,
    "header_with_symbol": lambda text: "dd 29776 666709.0: 7 cpu-clock:  414b3b fsnotify+0x1b (/bin/dd)\n\n" + text,
    "several_blank_lines": lambda text: text.replace("\n\n", "\n\n\n\n"),
    "no_final_newline": lambda text: text.rstrip("\n"),
    "junk_line": lambda text: text.replace("\n\n", "\nnot a header\n\n", 1),
}


@pytest.mark.parametrize("variant", sorted(DD_TEXT_VARIANTS))
def test_irregular_text_gives_the_general_result(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DD_TEXT_VARIANTS[variant](_corpus_text("flamegraph__perf-dd-stacks-01.txt"))
    assert result_as_json(_parse(text)) == result_as_json(_parse_general_only(text, monkeypatch))


def test_stacks_met_in_earlier_pieces_are_not_added_again() -> None:
    data = _member("numa2x2-guest-iperf-debian12.tar.gz", "perf-script.txt").encode("ascii")
    folder = perf_fold.kernel().Folder()
    first = folder.scan(data, 0, len(data))
    assert first is not None and first[0] == SAMPLES["numa2x2-guest-iperf-debian12.tar.gz"]
    sizes = (len(folder.symbols()), len(folder.keys()), len(folder.spell(folder.symbols())[0]))
    assert min(sizes) > 0
    again = folder.scan(data, 0, len(data))
    assert again == first  # same ids, same counts, same times
    assert (len(folder.symbols()), len(folder.keys()), len(folder.spell(folder.symbols())[0])) == sizes


def test_repeated_text_in_many_pieces_counts_every_sample() -> None:
    # Pieces scanned side by side do not know each other's stacks: a stack must still count once per sample.
    text = _member("numa2x2-guest-iperf-debian12.tar.gz", "perf-script.txt")
    once = _chunked("numa2x2-guest-iperf-debian12.tar.gz", 10**9).tables["perf_stack"]
    twice = perf_script.parse_chunked(text + text, ParseContext(source="x"), 20_000)
    assert twice.records == 2 * SAMPLES["numa2x2-guest-iperf-debian12.tar.gz"]
    doubled = once.with_columns(pl.col("samples") * 2, pl.col("period") * 2)
    assert twice.tables["perf_stack"].equals(doubled)


def test_pieces_the_kernel_refuses_are_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    text = _member("numa2x2-guest-iperf-debian12.tar.gz", "perf-script.txt")
    expected = _chunked("numa2x2-guest-iperf-debian12.tar.gz", 50_000)
    kernel = perf_fold.kernel()
    refused: list[int] = []

    class EveryOtherPiece:
        """The kernel's Folder, refusing every other piece it is given."""

        def __init__(self) -> None:
            self.folder = kernel.Folder()
            self.scans = 0
            self.symbols, self.keys, self.spell = self.folder.symbols, self.folder.keys, self.folder.spell

        def scan(self, data: bytes, start: int, end: int):
            self.scans += 1
            if self.scans % 2:
                refused.append(start)
                return None
            return self.folder.scan(data, start, end)

    general: list[int] = []
    fold_chunk = perf_fold_polars.fold_chunk
    monkeypatch.setattr(perf_fold, "kernel", lambda: type("Kernel", (), {"Folder": EveryOtherPiece}))
    monkeypatch.setattr(perf_fold_polars, "fold_chunk", lambda *args: general.append(1) or fold_chunk(*args))
    result = perf_script.parse_chunked(text, ParseContext(source="x"), 50_000)
    pieces = len(list(perf_fold.chunks(text, 50_000)))
    assert len(general) == len(refused) and 2 < len(refused) < pieces
    assert result_as_json(result) == result_as_json(expected)


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "polars"])
def test_an_id_no_linux_thread_has_is_read_as_unknown(kernel: bool, monkeypatch: pytest.MonkeyPatch):
    """A tid of 2^32 (a damaged header; fuzzing) made the whole member unreadable: the cast to the
    table's Int32 failed. Now the sample counts, its id is null and a warning says how many."""
    from dbdiag.native import perf_fold

    if not kernel:
        monkeypatch.setattr(perf_fold, "kernel", lambda: None)
    text = (
        "mysqld 4294967296 [001] 3014.000001: cpu-clock: \n\tffffffff81001408 xen_hypercall ([kernel.kallsyms])\n\n"
        "mysqld 123/4294967297 [001] 3014.000002: cpu-clock: \n\tffffffff81001408 xen_hypercall ([kernel.kallsyms])\n\n"
        "mysqld 123/124 [001] 3014.000003: cpu-clock: \n\tffffffff81001408 xen_hypercall ([kernel.kallsyms])\n\n"
    )
    result = perf_script.SPEC.parse_bytes(text.encode(), ParseContext(source="perf.txt"))
    stacks = result.tables["perf_stack"].sort("tid", nulls_last=True)
    assert result.records == 3
    assert stacks.select("pid", "tid", "samples").rows() == [(123, 124, 1), (123, None, 1), (None, None, 1)]
    assert [w.reason for w in result.warnings] == [
        "2 samples with a pid or tid over 2,147,483,647 (no Linux thread has one: a damaged header line); counted with an unknown id"
    ]
