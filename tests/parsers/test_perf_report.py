"""perf report --stdio and perf top --stdio parsers: goldens, hand-checked numbers, detection, hostile input."""

from __future__ import annotations

import re
import tarfile

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, perf_report, perf_top
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import CORPUS, REPO, corpus_names

FIXTURES = REPO / "fixtures" / "perf"
REPORT_CORPUS = ["tidesdb__perf_report.txt", "lock-contention__perf-report.txt"]
REPORT_FIXTURES = sorted(p.name for p in FIXTURES.glob("perf-report-*.txt"))
TOP_FIXTURES = sorted(p.name for p in FIXTURES.glob("perf-top-*.txt"))
CAPTURES = corpus_names("captures", "*.tar.gz")
SCRIPT_FILES = corpus_names("perf", "flamegraph__*")


def _member(capture: str, name: str) -> str:
    with tarfile.open(CORPUS / "captures" / capture, "r:gz") as tar:
        return tar.extractfile(tar.getmember(f"capture/os/{name}")).read().decode("utf-8", "backslashreplace")


def _corpus(name: str) -> str:
    return (CORPUS / "perf" / name).read_text(encoding="utf-8", errors="backslashreplace")


def _fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8", errors="backslashreplace")


def _report(text: str, source: str = "perf-report.txt"):
    return perf_report.SPEC.parse(text, ParseContext(source=source))


def _top(text: str, source: str = "perf-top.txt"):
    return perf_top.SPEC.parse(text, ParseContext(source=source))


def _chains(result, entry: str | None = None) -> dict[str, float]:
    frame = result.tables["perf_callchain"]
    if entry is not None:
        frame = frame.filter(pl.col("entry_symbol") == entry)
    return dict(frame.select("chain", "share_pct").rows())


def _assert_detected_only_as(kind: str, text: str, name: str) -> None:
    head = text[:8192]
    scores = {spec.kind: spec.detect(head, name) for spec in PARSERS}
    scores[perf_report.SPEC.kind] = perf_report.SPEC.detect(head, name)
    scores[perf_top.SPEC.kind] = perf_top.SPEC.detect(head, name)
    assert scores[kind] > 0.5, scores
    assert all(score <= 0.5 for other, score in scores.items() if other != kind), scores


# --- goldens -----------------------------------------------------------------------------------


def test_fixtures_are_small() -> None:
    assert REPORT_FIXTURES and TOP_FIXTURES
    assert all((FIXTURES / name).stat().st_size < 50_000 for name in REPORT_FIXTURES + TOP_FIXTURES)


# --- detection ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_perf_script_corpus_is_not_report_or_top(name: str) -> None:
    head = _corpus(name)[:8192]
    assert perf_report.SPEC.detect(head, name) <= 0.5
    assert perf_top.SPEC.detect(head, name) <= 0.5


@pytest.mark.parametrize("capture", CAPTURES)
def test_capture_perf_script_is_not_report_or_top(capture: str) -> None:
    head = _member(capture, "perf-script.txt")[:8192]
    assert perf_report.SPEC.detect(head, "perf-script.txt") <= 0.5
    assert perf_top.SPEC.detect(head, "perf-script.txt") <= 0.5


def test_perf_script_parser_does_not_claim_reports() -> None:
    perf_script = pytest.importorskip("dbdiag.parsers.perf_script", reason="perf-script parser not in this tree")
    for name in REPORT_FIXTURES + TOP_FIXTURES:
        assert perf_script.SPEC.detect(_fixture(name)[:8192], name) <= 0.5, name
    for name in REPORT_CORPUS:
        assert perf_script.SPEC.detect(_corpus(name)[:8192], name) <= 0.5, name


def test_report_detect_without_name_hint() -> None:
    assert perf_report.SPEC.detect(_corpus("lock-contention__perf-report.txt")[:8192], "x") > 0.5
    assert perf_report.SPEC.detect("hello\nworld\n", "perf-report.txt") == 0.0


# --- hand-checked numbers ----------------------------------------------------------------------


def test_tidesdb_flat_entries_and_fractal_chains() -> None:
    result = _report(_corpus("tidesdb__perf_report.txt"))
    symbols = result.tables["perf_symbol"]
    assert result.records == 41 and result.warnings == []
    top = symbols.row(0, named=True)
    assert (top["event"], top["comm"], top["dso"], top["symbol"]) == ("cycles", "bloom_filter_te", "libc.so.6", "__random")
    assert (top["kernel"], top["self_pct"], top["children_pct"], top["samples"]) == (False, 29.86, None, None)
    assert symbols["event_samples"].unique().to_list() == [1000]  # "# Samples: 1K of event 'cycles'"
    assert symbols["kernel"].sum() == 16  # the "[k]" rows
    assert symbols.filter(pl.col("comm") == "perf-exec").height == 3
    assert any("event count 6716849984" in note for note in result.notes)
    # nested branches: bloom_filter_hash <- bloom_filter_add <- test_... <- main <- __libc_start_call_main
    assert _chains(result, "bloom_filter_hash") == {
        "__libc_start_call_main;main;test_bloom_filter_large_capacity_random_keys;bloom_filter_add;bloom_filter_hash": 11.31,
        "__libc_start_call_main;main;benchmark_bloom_filter;bloom_filter_add;bloom_filter_hash": 3.21,
        "__libc_start_call_main;main;benchmark_bloom_filter;bloom_filter_contains;bloom_filter_hash": 3.04,
    }
    # a "---" chain without a branch carries the entry's percentage
    assert _chains(result, "decode_varint64") == {
        "__libc_start_call_main;main;test_bloom_filter_large_capacity_random_keys;bloom_filter_deserialize;decode_varint64": 0.78
    }
    # a branch printed "--0.63%--" with nothing below is a chain of one frame
    assert _chains(result, "__printf_buffer_write") == {"__printf_buffer_write": 0.63}
    assert result.tables["perf_callchain"].height == 22


def test_lock_contention_tui_paste() -> None:
    result = _report(_corpus("lock-contention__perf-report.txt"))
    symbols = result.tables["perf_symbol"]
    assert result.records == 12
    assert symbols.row(0)[5:8] == (False, 99.79, 100.0)
    run = symbols.filter(pl.col("children_pct") == 74.34).row(0, named=True)
    assert (run["comm"], run["dso"], run["symbol"], run["self_pct"]) == (
        "java",
        "perf-4184.map",
        "Lcom/epickrram/sync/Writer;::run",
        39.48,
    )
    assert symbols["symbol"].str.contains("\u2592").sum() == 0
    chains = _chains(result)
    assert chains["start_thread"] == 39.48  # collapsed "+" branch: the chain stops at the printed frame
    futex = (
        "Lcom/epickrram/sync/Writer;::run;Ljava/util/concurrent/locks/AbstractQueuedSynchronizer;::acquire;"
        "Lsun/misc/Unsafe;::park;Unsafe_Park;pthread_cond_wait@@GLIBC_2.3.2;entry_SYSCALL_64_fastpath;sys_futex;do_futex"
    )
    assert chains[futex] == 1.68
    unpark = (
        "Lcom/epickrram/sync/Writer;::run;Ljava/util/concurrent/locks/AbstractQueuedSynchronizer;::unparkSuccessor;"
        "Lsun/misc/Unsafe;::unpark;pthread_mutex_unlock"
    )
    assert chains[unpark] == 0.65  # a leaf without expander, at the column of its sibling Unsafe_Unpark
    assert len(chains) == 10
    # section titles and the JMH table are reported, not read as rows
    skipped = [w.reason for w in result.warnings]
    assert len(skipped) == 9
    assert "LazyExchanger" in skipped[0] and "LockExchanger" in skipped[1] and "Benchmark" in skipped[2]


def test_mariadb_capture_ipc_columns_not_in_symbol() -> None:
    result = _report(_member("mariadb-sysbench-debian12.tar.gz", "perf-report.txt"))
    symbols = result.tables["perf_symbol"]
    top = symbols.row(0, named=True)
    assert (top["symbol"], top["self_pct"], top["kernel"], top["event"], top["event_samples"]) == (
        "pv_native_safe_halt",
        90.17,
        True,
        "cpu-clock:pppH",
        529,
    )
    assert symbols.filter(pl.col("symbol") == "select_result_text_buffer::append_row").height == 1
    assert symbols["symbol"].str.ends_with("-").sum() == 0
    assert any("IPC" in note for note in result.notes)
    assert _chains(result, "pv_native_safe_halt") == {
        "common_startup_64;x86_64_start_kernel;__pfx_clear_bss;start_kernel;rest_init;cpu_startup_entry;"
        "do_idle;default_idle_call;default_idle;pv_native_safe_halt": 90.17
    }


def test_numa2_capture_branches_and_k_suffix() -> None:
    result = _report(_member("numa2-guest-iperf-debian12.tar.gz", "perf-report.txt"))
    assert result.tables["perf_symbol"]["event_samples"].unique().to_list() == [7000]  # "7K"
    assert _chains(result, "native_safe_halt") == {
        "secondary_startup_64_no_verify;start_secondary;cpu_startup_entry;do_idle;default_idle_call;"
        "amd_e400_idle;native_safe_halt": 54.92,
        "secondary_startup_64_no_verify;start_kernel;arch_call_rest_init;rest_init;cpu_startup_entry;do_idle;"
        "default_idle_call;amd_e400_idle;native_safe_halt": 10.32,
    }


def test_callee_and_caller_graphs_are_both_read_callers_first() -> None:
    callee = _report(_fixture("perf-report-nochildren.txt"))
    caller = _report(_fixture("perf-report-caller.txt"))
    assert callee.notes == caller.notes  # the order was evident from the chains: no "read as" note
    execve = (
        "__GI___execve;entry_SYSCALL_64_after_hwframe;do_syscall_64;__x64_sys_execve;do_execveat_common.isra.0;"
        "bprm_execve;load_elf_binary;_copy_to_user"
    )
    python = "0x7fe084a56240;0x7fe084336a00;_PyEval_EvalFrameDefault"
    folded = _report(_fixture("perf-report-folded.txt"))
    flat = _report(_fixture("perf-report-flat.txt"))
    for result in (callee, caller, folded, flat):
        assert _chains(result, "_copy_to_user") == {execve: 28.48}
        assert _chains(result, "_PyEval_EvalFrameDefault")[python] == 3.67


def test_fixture_sections_children_samples_pid() -> None:
    children = _report(_fixture("perf-report-children.txt")).tables["perf_symbol"]
    first = children.row(0, named=True)
    assert (first["symbol"], first["children_pct"], first["self_pct"], first["event_samples"]) == (
        "_PyEval_EvalFrameDefault",
        7.71,
        7.71,
        791,
    )
    faults = children.filter(pl.col("event") == "page-faults")
    assert faults["event_samples"].unique().to_list() == [11]
    assert faults.row(0, named=True)["symbol"] == "_dl_check_map_versions"

    counted = _report(_fixture("perf-report-dso-sym-n.txt")).tables["perf_symbol"]
    assert counted.row(0, named=True)["samples"] == 61 and counted["comm"].null_count() == counted.height

    pids = _report(_fixture("perf-report-pid.txt")).tables["perf_symbol"]
    assert pids.row(0, named=True)["pid"] == 32128 and pids.row(0, named=True)["comm"] == "python3"
    assert pids["symbol"].null_count() == pids.height and pids.row(0, named=True)["self_pct"] == 46.52

    by_sym = _report(_fixture("perf-report-sort-sym.txt")).tables["perf_symbol"]
    assert by_sym["dso"].null_count() == by_sym.height and by_sym.row(0, named=True)["symbol"] == "_PyEval_EvalFrameDefault"


def test_perf_top_keeps_last_screen() -> None:
    result = _top(_fixture("perf-top-default.txt"))
    assert result.notes[0] == "3 perf top screen(s) seen"
    assert result.notes[1].startswith("kept screen 3 (line 31): 11510 irqs/sec, kernel 15.5%")
    symbols = result.tables["perf_symbol"]
    assert result.records == 20
    assert symbols.row(0, named=True)["symbol"] == "_PyEval_EvalFrameDef"  # cut at perf top's screen width
    assert symbols.row(0, named=True)["self_pct"] == 2.76 and symbols.row(0, named=True)["dso"] == "libpython3.11.so.1.0"
    assert symbols["event_samples"].null_count() == 20


def test_perf_top_comm_and_callgraph() -> None:
    comm = _top(_fixture("perf-top-comm-dso-sym.txt")).tables["perf_symbol"]
    assert comm.row(0, named=True)["comm"] == "python3" and comm.row(0, named=True)["self_pct"] == 6.37
    graph = _top(_fixture("perf-top-callgraph.txt"))
    halt = graph.tables["perf_symbol"].filter(pl.col("symbol") == "pv_native_safe_halt").row(0, named=True)
    assert (halt["children_pct"], halt["self_pct"]) == (36.13, 36.06)
    assert _chains(graph, "pv_native_safe_halt") == {
        "common_startup_64;x86_64_start_kernel;__pfx_clear_bss;start_kernel;rest_init;cpu_startup_entry;do_idle;"
        "default_idle_call;default_idle;pv_native_safe_halt": 36.06
    }


def test_perf_top_cut_last_screen_falls_back() -> None:
    text = _fixture("perf-top-default.txt")
    cut = text[: text.index("Script done")]
    cut = cut[: cut.rindex("libc.so.6")]  # perf stopped while writing the last screen
    result = _top(cut)
    assert any("kept the one before" in note for note in result.notes)
    assert result.records == 20 and any(note.startswith("kept screen 2 ") for note in result.notes)


def test_perf_top_pasted_screen_without_escapes() -> None:
    text = _fixture("perf-top-comm-dso-sym.txt")
    screen = re.sub(r"\x1b\[[0-9;]*[A-Za-z]|\r", "", text[text.rindex("   PerfTop:") :])
    result = _top(screen)
    assert result.notes[0] == "1 perf top screen(s) seen" and result.records == 20
    assert result.tables["perf_symbol"].equals(_top(text, "perf-top.txt").tables["perf_symbol"])


# --- other layouts and hostile input -----------------------------------------------------------

OLD_STYLE = """\
     1.09%          swapper  [kernel.kallsyms]     [k] default_idle
                    |
                    --- default_idle
                       |
                       |--99.74%-- cpu_idle
                       |          |
                       |          |--76.31%-- start_secondary
                       |          |
                       |           --23.69%-- rest_init
                       |                     start_kernel
                       |                     x86_64_start_reservations
                       |                     x86_64_start_kernel
                        --0.26%-- [...]
     1.08%             ksmd  [kernel.kallsyms]     [k] smp_call_function_many
"""


def test_perf3_graph_style() -> None:
    result = _report(OLD_STYLE)
    assert result.records == 2 and result.warnings == []
    assert result.tables["perf_symbol"]["comm"].to_list() == ["swapper", "ksmd"]
    assert _chains(result) == {
        "start_secondary;cpu_idle;default_idle": 76.31,
        "x86_64_start_kernel;x86_64_start_reservations;start_kernel;rest_init;cpu_idle;default_idle": 23.69,
        "[...];default_idle": 0.26,
    }


def test_truncated_mid_callgraph() -> None:
    text = _corpus("tidesdb__perf_report.txt")
    cut = text[: text.index("                       |          |--11.31%--test_bloom") + 60]
    result = _report(cut)
    assert result.records == 3
    assert any("truncated" in w.reason for w in result.warnings)
    hashes = _chains(result, "bloom_filter_hash")
    # the cut fell inside the last frame's name: kept as read, with the warning above
    assert hashes == {"test_bloom_filt;bloom_filter_add;bloom_filter_hash": 11.31}


def test_header_only() -> None:
    text = _corpus("tidesdb__perf_report.txt")
    result = _report(text[: text.index("    29.86%")])
    assert result.records == 0 and result.tables["perf_callchain"].height == 0
    assert result.tables["perf_symbol"].schema["self_pct"] == pl.Float64
    assert "perf report header without entries" in result.notes


def test_binary_junk_and_prose() -> None:
    junk = bytes(range(256)).decode("latin-1") * 200
    with pytest.raises(ParseError):
        _report(junk)
    with pytest.raises(ParseError):
        _top(junk)
    with pytest.raises(ParseError):
        _report("not a perf report\nat all\n")


def test_huge_line_is_skipped() -> None:
    text = _corpus("tidesdb__perf_report.txt").replace("# Total Lost", "x" * 200_000 + "\n# Total Lost")
    result = _report(text)
    assert result.records == 41
    assert any("200000 characters" in w.reason for w in result.warnings)


def test_many_skipped_lines_are_counted_not_listed() -> None:
    text = _corpus("tidesdb__perf_report.txt") + "some prose\n" * 500
    result = _report(text)
    assert result.records == 41
    assert len(result.warnings) == 51 and result.warnings[-1].reason == "450 more lines skipped"


def test_perf_top_key_menu_only() -> None:
    # what perf top prints when stdin is not a terminal and keeps sending keys (real text, perf 6.1)
    text = (
        "\x1b[H\x1b[2J\n"
        "   PerfTop:       0 irqs/sec  kernel: 0.0%  exact:  0.0% lost: 0/0 drop: 0/0 [4000Hz cpu-clock:pppH],"
        "  (all, 2 CPUs)\n"
        "-------------------------------------------------------------------------------\n\n\n"
        "Mapped keys:\n"
        "\t[d]     display refresh delay.             \t(2)\n"
        "\t[e]     display entries (lines).           \t(20)\n"
        "\t[S]     stop annotation.\n"
        "\t[qQ]    quit.\n\n"
        "Enter selection, or unmapped key to continue: "
    )
    assert perf_top.SPEC.detect(text, "top.txt") > 0.5
    result = _top(text)
    assert result.records == 0 and result.warnings == []
    assert result.notes[:2] == ["1 perf top screen(s) seen", "no screen has entries"]
