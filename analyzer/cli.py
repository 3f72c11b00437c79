"""Command line: ``dbdiag analyze | compare | demo | fleet | rules | explain``. Thin: argument handling, files, exit codes.

Exit codes: 0 done; 1 a finding at or above ``--fail-on`` (and nothing else); 2 unusable input
or usage error (also when nothing in the capture could be recognised, or a report cannot be
written); 3 partial capture (some inputs unreadable); 4 internal error (a bug: one line, please
report; ``DBDIAG_TRACEBACK=1`` prints the traceback); 128 + the signal when interrupted: 130
SIGINT (Ctrl-C), 143 SIGTERM, 129 SIGHUP. When several apply, the order is 2, then 1, then 3.
"""

from __future__ import annotations

import errno
import math
import logging
import os
import signal
import sys
import traceback
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime, timezone
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

import dbdiag
from dbdiag.capture import CaptureError, Limits, ReadWatch, printable_name, read_capture
from dbdiag.findings import Severity
from dbdiag.memory import configure_allocator
from dbdiag.output import Interrupted, OutputError, check_target, report_paths, signals_raise, write_report
from dbdiag.progress import NO_PROGRESS, TerminalProgress, terminal_progress

if TYPE_CHECKING:
    from dbdiag.pipeline import Analysis, Options

# The analysis modules (polars, numpy, the parsers and rules: ~0.4 s) are imported in the commands
# that use them, so that ``analyze`` reads the capture meanwhile and ``--help`` stays quick.

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_UNUSABLE = 2
EXIT_PARTIAL = 3
EXIT_INTERNAL = 4
MIN_WINDOW_S = 0.001
MAX_WINDOW_S = 366 * 86_400  # one window for any capture; far beyond, times overflow in polars
# Live kernel state, not a capture: a walk there never ends, or blocks on a read (/proc/kmsg, /dev/tty).
PSEUDO_FILESYSTEMS = ("/proc", "/sys", "/dev")
# An internal error's message is shown on one line, cut to this length.
MAX_ERROR_CHARS = 300
READ_POLL_S = 0.125  # how often the progress line reads how far reading has got

DEMO_ARCHIVE = "bank-core-demo.tar.gz"
DEMO_TWIN_ARCHIVE = "bank-core-twin.tar.gz"  # the demo server's good twin (fixtures/make_demo.py, TWIN)
DEFAULT_REPORT_STEM = "dbdiag-report"
DEMO_REPORT_STEM = "dbdiag-demo-report"
COMPARE_REPORT_STEM = "dbdiag-compare"  # never the analyze report's name: compare does not overwrite it
DEMO_COMPARE_STEM = "dbdiag-demo-compare"

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="dbdiag: turn a capture from a slow database server into findings a DBA can act on.",
)


class Format(str, Enum):
    html = "html"
    json = "json"
    md = "md"


class FailOn(str, Enum):
    warning = "warning"
    critical = "critical"


def _say(message: str) -> None:
    typer.echo(message, err=True)


def _fail(message: str, code: int = EXIT_UNUSABLE) -> None:
    _say(f"dbdiag: error: {message}")
    raise typer.Exit(code)


def _check_window(window_s: float) -> None:
    if not (math.isfinite(window_s) and MIN_WINDOW_S <= window_s <= MAX_WINDOW_S):
        _fail(f"--window must be a number of seconds from {MIN_WINDOW_S} to {MAX_WINDOW_S:,} (366 days); got {window_s}")


def _size_option(option: str, text: str | None) -> int | None:
    """``--max-member-size 4G`` -> bytes, read as a size setting is (``settings.size_bytes``: K, M, G, T,
    binary, with or without ``iB``/``B``).

    >>> _size_option("--max-member-size", "4G"), _size_option("--max-total-size", "1.5 GiB"), _size_option("-x", None)
    (4294967296, 1610612736, None)
    """
    if text is None:
        return None
    from dbdiag.settings import size_bytes  # the settings reader: only a size option needs it

    size = size_bytes(text)
    if not size:
        _fail(f"{option} must be a size such as 4G, 500M or 1048576 (bytes); got {printable_name(text)!r}")
    return size


def _limits(max_member_size: str | None, max_total_size: str | None) -> Limits:
    """The capture limits, raised by the options: an option admits archive members up to its size, and
    a file or directory up to it too (whatever the memory budget)."""
    limits = Limits()
    member_bytes = _size_option("--max-member-size", max_member_size)
    total_bytes = _size_option("--max-total-size", max_total_size)
    if member_bytes is not None:
        limits = replace(limits, max_member_bytes=member_bytes)
    if total_bytes is not None:
        limits = replace(limits, max_total_bytes=total_bytes)
    given = [size for size in (member_bytes, total_bytes) if size is not None]
    return replace(limits, files_bytes=max(given)) if given else limits


def _capture_path(given: str) -> Path:
    """The capture path, refused when it cannot be a capture: empty (``Path("")`` is the current
    folder), the root folder, or in a pseudo filesystem once links are resolved (``/dev/stdin``
    redirected from a file resolves to that file, and is read)."""
    if not given:
        _fail("the capture path is empty; give a capture file or folder")
    shown = printable_name(given)
    real = os.path.realpath(given)
    if real == "/":
        _fail(f"{shown}: the root folder is not a capture; give the capture's file or folder")
    for top in PSEUDO_FILESYSTEMS:
        if real == top or real.startswith(top + "/"):
            _fail(f"{shown}: {top} is live kernel state, not a capture; copy the files into a folder and analyze that")
    return Path(given)


def _check_outputs(output: Optional[str], formats: list[Format], default_stem: str, capture_path: Path) -> dict[Format, Path | None]:
    """Every report path, checked (and its folders made) before the capture is read."""
    try:
        paths = report_paths(output, [fmt.value for fmt in formats], default_stem)
        for path in paths.values():
            if path is None:
                if sys.stdout is None:
                    raise OutputError("standard output: cannot write report: standard output is closed")
            else:
                check_target(path, capture_path)
    except OutputError as error:
        _fail(str(error))
    return {Format(suffix): path for suffix, path in paths.items()}


def _write_stdout(text: str, what: str = "cannot write report") -> None:
    """Write and flush standard output; full, closed or a broken pipe is one line and exit 2
    (click would exit 1 on a broken pipe, the code that means a finding)."""
    try:
        if sys.stdout is None:
            raise ValueError("no standard output")
        sys.stdout.write(text)
        sys.stdout.flush()
    except (OSError, ValueError) as error:  # ValueError: the stream was closed
        _fail(f"standard output: {what}: {_stream_reason(error)}")


def _stream_reason(error: Exception) -> str:
    if isinstance(error, OSError) and error.strerror and error.errno != errno.EBADF:
        return error.strerror.lower()
    return "standard output is closed"


def _exit_code(analysis: Analysis, document: dict, fail_on: Optional[FailOn]) -> int:
    if not analysis.recognised:
        return EXIT_UNUSABLE
    if fail_on is not None:
        floor = Severity(fail_on.value).rank
        if any(Severity(f["severity"]).rank >= floor for f in document["findings"]):
            return EXIT_FINDINGS
    if document["capture"]["partial"]:
        return EXIT_PARTIAL
    return EXIT_OK


def _run(
    capture_path: Path,
    output: Optional[str],
    formats: list[Format],
    fail_on: Optional[FailOn],
    tz: Optional[str],
    show_literals: bool,
    window_s: float,
    default_stem: str,
    pseudonymize: bool = False,
    limits: Optional[Limits] = None,
    tables_dir: Optional[str] = None,
) -> int:
    formats = list(dict.fromkeys(formats or [Format.html]))
    _check_window(window_s)
    targets = _check_outputs(output, formats, default_stem, capture_path)
    if tables_dir is not None:
        _tables(tables_dir, capture_path)
    try:
        with signals_raise():
            with terminal_progress() as bar:  # gone before the reports are written and the summary said
                analysis = _analyze(capture_path, tz, show_literals, window_s, pseudonymize, limits or Limits(), bar)
                (bar or NO_PROGRESS).stage("report")
                from dbdiag.report import build_document, render

                generated_at = datetime.now(timezone.utc).replace(microsecond=0)
                document = build_document(analysis, generated_at=generated_at)
                texts = {fmt: render(document, fmt.value) for fmt in targets}
            if tables_dir is not None and analysis.recognised:
                _tables(tables_dir, capture_path, (analysis, document, generated_at))
            _write_reports(texts, targets)
    except KeyboardInterrupt:
        return _interrupted(signal.SIGINT)
    except Interrupted as stop:
        return _interrupted(stop.signal_number)
    _summarise(capture_path, analysis, document)
    return _exit_code(analysis, document, fail_on)


def _analyze(
    capture_path: Path, tz: Optional[str], show_literals: bool, window_s: float, pseudonymize: bool, limits: Limits,
    bar: Optional[TerminalProgress],
) -> Analysis:
    reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dbdiag-read")
    try:
        watch = ReadWatch()
        reading = reader.submit(read_capture, capture_path, limits, watch)  # file reads release the GIL
        from dbdiag.pipeline import Options, UnknownTimeZone, analyze_read

        try:
            if bar is not None:
                _show_reading(reading, watch, bar)
            options = Options(tz=tz, show_literals=show_literals, window_s=window_s, limits=limits, pseudonymize=pseudonymize)
            return analyze_read(reading.result(), options, progress=bar)
        except (CaptureError, UnknownTimeZone) as error:
            _fail(str(error))
        except OSError as error:  # a read failing past read_capture's checks (EIO from /proc/self/mem)
            _fail(f"{printable_name(str(capture_path))}: {(error.strerror or str(error)).lower()}")
    finally:
        reader.shutdown(wait=False, cancel_futures=True)  # an interrupted run does not wait for the read


def _show_reading(reading: Future, watch: ReadWatch, bar: TerminalProgress) -> None:
    """The read stage's bytes, polled while the reading thread works."""
    bar.stage("read", watch.total_bytes)
    while not reading.done():
        wait([reading], timeout=READ_POLL_S)
        bar.stage_total(watch.total_bytes)
        bar.set_done(watch.done())


def _tables(folder: str, capture_path: Path, done: Optional[tuple[Analysis, dict, datetime]] = None) -> None:
    """``--tables``: check the folder (before the analysis), or write the capture's tables there."""
    from dbdiag.export_tables import ExportError, build_export, check_tables_dir, write_export

    try:
        target = check_tables_dir(folder, capture_path)
        if done is None:
            return
        written = write_export(target, build_export(*done, dbdiag.__version__))
    except ExportError as error:
        _fail(str(error))
    _say(f"wrote {len(written)} table file(s) in {printable_name(folder)}")


def _write_reports(texts: dict[Format, str], targets: dict[Format, Path | None]) -> None:
    for fmt, path in targets.items():
        text = texts[fmt]
        if path is None:
            _write_stdout(text)
            continue
        try:
            write_report(path, text)
        except OutputError as error:
            _fail(str(error))
        _say(f"wrote {printable_name(str(path))}")


def _summarise(capture_path: Path, analysis: Analysis, document: dict) -> None:
    counts = document["verdict"]["findings_by_severity"]
    _say(
        f"{capture_path}: {len(analysis.recognised)} of {len(analysis.capture.members)} member(s) read; "
        f"{counts['critical']} critical, {counts['warning']} warning, {counts['info']} info finding(s)"
    )
    if not analysis.recognised:
        unreadable = [(record.path, record.error) for record in analysis.inputs if record.error]
        unreadable += [(record.path, record.skipped) for record in analysis.inputs if record.skipped and record.lost]
        if unreadable:
            path, reason = unreadable[0]
            _say(f"dbdiag: error: {capture_path}: nothing could be read; {path}: {reason}")
        else:
            _say(f"dbdiag: error: {capture_path}: nothing in this capture is in a format dbdiag reads (see the inventory)")
    elif document["capture"]["partial"]:
        _say(f"dbdiag: partial capture: {'; '.join(document['capture']['partial_reasons'][:3])}")


def _interrupted(signal_number: int) -> int:
    _say(f"dbdiag: interrupted ({signal.Signals(signal_number).name})")
    return 128 + signal_number


# The report options analyze and demo share: declared once, used by both.
OutputOption = Annotated[
    Optional[str],
    typer.Option(
        "-o",
        "--output",
        help="Report path or folder; with several formats, the suffix is replaced per format; '-' for stdout.",
    ),
]
FormatOption = Annotated[
    list[Format], typer.Option("--format", "-f", help="Report format; repeat for several (html, json, md). Default html.")
]
FailOnOption = Annotated[Optional[FailOn], typer.Option("--fail-on", help="Exit 1 when a finding of this severity or worse fired.")]
TzOption = Annotated[
    Optional[str],
    typer.Option("--tz", help="Time zone of zone-less times in the capture (default: the capture manifest's, else UTC)."),
]
LiteralsOption = Annotated[
    bool, typer.Option("--show-literals", help="Keep literals in SQL samples (default: replaced by placeholders, for privacy).")
]
PseudonymizeOption = Annotated[
    bool, typer.Option("--pseudonymize", help="Replace host names, IP addresses, user and database names by stable pseudonyms.")
]
MaxMemberSizeOption = Annotated[
    Optional[str],
    typer.Option(
        "--max-member-size",
        help="Read archive members up to this size (default 2G; K/M/G/T), and a file or folder up to it whatever the memory budget.",
    ),
]
MaxTotalSizeOption = Annotated[
    Optional[str],
    typer.Option("--max-total-size", help="Read up to this much of an archive's members together (default 8G; K/M/G/T)."),
]
WindowOption = Annotated[
    float,
    typer.Option(
        "--window",
        help="Seconds per time window of the time accounting and the timeline (widened to the metrics' scrape step).",
    ),
]

TablesOption = Annotated[
    Optional[str],
    typer.Option(
        "--tables",
        help="Also write the capture's tables as Parquet under this folder (DIR/<table>/host=<host>/day=<day>/), for 'dbdiag fleet'.",
    ),
]


@app.command()
def analyze(
    capture: Annotated[
        str,  # not Path: typer turns '' into Path('.'), the current folder
        typer.Argument(help="Capture: .tar.gz/.tgz/.tar/.tar.xz/.tar.bz2, .zip, a directory, or one file."),
    ],
    output: OutputOption = None,
    format: FormatOption = [],  # noqa: B006 - typer reads the default, never mutates it
    fail_on: FailOnOption = None,
    tz: TzOption = None,
    show_literals: LiteralsOption = False,
    window: WindowOption = 10.0,
    pseudonymize: PseudonymizeOption = False,
    max_member_size: MaxMemberSizeOption = None,
    max_total_size: MaxTotalSizeOption = None,
    tables: TablesOption = None,
) -> None:
    """Analyze a capture and write the report."""
    capture_path = _capture_path(capture)
    limits = _limits(max_member_size, max_total_size)
    raise typer.Exit(
        _run(capture_path, output, format, fail_on, tz, show_literals, window, DEFAULT_REPORT_STEM, pseudonymize, limits, tables)
    )


@app.command()
def compare(
    baseline: Annotated[str, typer.Argument(help="The good twin or the 'before': a capture, or its 'dbdiag analyze --format json' report.")],
    capture: Annotated[str, typer.Argument(help="The slow one or the 'after': a capture, or its JSON report.")],
    output: OutputOption = None,
    format: FormatOption = [],  # noqa: B006 - typer reads the default, never mutates it
    fail_on: Annotated[
        Optional[FailOn], typer.Option("--fail-on", help="Exit 1 when a finding of this severity or worse is new (or worse) in CAPTURE.")
    ] = None,
    tz: TzOption = None,
    show_literals: LiteralsOption = False,
    window: WindowOption = 10.0,
    pseudonymize: PseudonymizeOption = False,
    max_member_size: MaxMemberSizeOption = None,
    max_total_size: MaxTotalSizeOption = None,
) -> None:
    """Compare two captures (or two saved JSON reports): what differs, and which difference explains the gap."""
    paths = [_capture_path(baseline), _capture_path(capture)]
    options = _compare_options(tz, show_literals, window, pseudonymize, _limits(max_member_size, max_total_size))
    raise typer.Exit(_run_compare(paths, output, format, fail_on, options, COMPARE_REPORT_STEM))


def _compare_options(tz: str | None, show_literals: bool, window: float, pseudonymize: bool, limits: Limits | None = None) -> Options:
    _check_window(window)
    from dbdiag.pipeline import Options

    return Options(tz=tz, show_literals=show_literals, window_s=window, pseudonymize=pseudonymize, limits=limits or Limits())


def _run_compare(paths: list[Path], output: str | None, format: list[Format], fail_on: FailOn | None, options: Options, stem: str) -> int:
    """Compare paths[0] (the baseline) with paths[1], write the reports, say the summary; the exit code."""
    formats = list(dict.fromkeys(format or [Format.html]))
    targets = _check_outputs(output, formats, stem, paths[0])
    _check_outputs(output, formats, stem, paths[1])
    from dbdiag.compare.load import CompareInputError
    from dbdiag.compare.render import render
    from dbdiag.compare.run import compare_paths, exit_code, summary_line

    try:
        with signals_raise():
            generated_at = datetime.now(timezone.utc).replace(microsecond=0)
            comparison = compare_paths(paths[0], paths[1], options, generated_at)
            _write_reports({fmt: render(comparison.document, fmt.value) for fmt in targets}, targets)
    except CompareInputError as error:
        _fail(str(error))
    except KeyboardInterrupt:
        return _interrupted(signal.SIGINT)
    except Interrupted as stop:
        return _interrupted(stop.signal_number)
    _say(summary_line(comparison))
    return exit_code(comparison, fail_on.value if fail_on else None)


@app.command()
def demo(
    output: OutputOption = None,
    format: FormatOption = [],  # noqa: B006 - typer reads the default, never mutates it
    fail_on: FailOnOption = None,
    tz: TzOption = None,
    show_literals: LiteralsOption = False,
    window: WindowOption = 10.0,
    pseudonymize: PseudonymizeOption = False,
    compare_twin: Annotated[
        bool,
        typer.Option("--compare", help="Compare the demo server with its good twin (21k TPS against 11k) and write dbdiag-demo-compare.html."),
    ] = False,
) -> None:
    """Analyze the bundled demo capture (a 128-CPU, 16-node bank core server) and write dbdiag-demo-report.html."""
    names = (DEMO_TWIN_ARCHIVE, DEMO_ARCHIVE) if compare_twin else (DEMO_ARCHIVE,)
    with ExitStack() as stack:
        paths = [stack.enter_context(resources.as_file(resources.files("dbdiag.demo_capture").joinpath(name))) for name in names]
        for path in paths:
            if not path.is_file():
                _fail(f"{path}: the demo capture is missing from this installation")
        if compare_twin:  # the twin is the baseline: the verdict explains why the demo server is slower
            raise typer.Exit(_run_compare(paths, output, format, fail_on, _compare_options(tz, show_literals, window, pseudonymize),
                                          DEMO_COMPARE_STEM))
        raise typer.Exit(_run(paths[0], output, format, fail_on, tz, show_literals, window, DEMO_REPORT_STEM, pseudonymize))


@app.command("rules")
def list_rules() -> None:
    """List the rules dbdiag runs, with the inputs each needs."""
    from dbdiag.rules import RULES

    lines = []
    for rule in RULES:
        needs = "; ".join(" or ".join(group) for group in rule.requires)
        lines.append(f"{rule.id:<28} {rule.area:<8} {rule.title}  [needs: {needs}]\n")
    _write_stdout("".join(lines), "cannot write")


@app.command()
def explain(rule_id: str = typer.Argument(..., help="A rule id, e.g. softirq-concentration.")) -> None:
    """Print a rule's documentation: what it detects, why, how, remediation, references."""
    from dbdiag.rules import rule_by_id

    rule = rule_by_id(rule_id)
    if rule is None:
        _fail(f"unknown rule {rule_id!r}; 'dbdiag rules' lists them")
    _write_stdout(f"{rule.id}: {rule.title}\n\n{rule.doc.strip()}\n", "cannot write")


class FleetFormat(str, Enum):
    text = "text"
    json = "json"
    md = "md"


@app.command()
def fleet(
    folders: Annotated[list[str], typer.Argument(help="Folders written by 'dbdiag analyze --tables DIR'.")],
    format: Annotated[FleetFormat, typer.Option("--format", "-f", help="text (default), json or md, to standard output.")] = FleetFormat.text,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="How many fingerprints to list.")] = 10,
) -> None:
    """Read many captures' tables and print the top fingerprints, the findings per host and the slowest hosts."""
    from dbdiag.fleet import FleetError, render, summarize

    try:
        summary = summarize([Path(folder) for folder in folders], top)
    except FleetError as error:
        _fail(str(error))
    _write_stdout(render(summary, format.value), "cannot write")


def _version(value: bool) -> None:
    if value:
        _write_stdout(f"dbdiag {dbdiag.__version__}\n", "cannot write")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """dbdiag: turn a capture from a slow database server into findings a DBA can act on."""


def run(args: Optional[list[str]] = None) -> int:
    """The app, with every way out turned into an exit code (see the module docstring).

    Exit 1 stays "a finding at --fail-on": an exception nothing expected, panics from native code
    included (polars' ``PanicException`` is a BaseException), is one line and exit 4.
    """
    try:
        app(args=args)
        return EXIT_OK
    except SystemExit as leaving:
        code = leaving.code
    except KeyboardInterrupt:
        return _interrupted(signal.SIGINT)
    except Interrupted as stop:
        return _interrupted(stop.signal_number)
    except GeneratorExit:
        raise
    except BaseException as error:  # noqa: BLE001 - the last guard before a traceback
        if os.environ.get("DBDIAG_TRACEBACK"):
            traceback.print_exc()
        message = printable_name((str(error).splitlines() or [""])[0])[:MAX_ERROR_CHARS]
        _say(f"dbdiag: internal error: {type(error).__name__}: {message} (please report)")
        return EXIT_INTERNAL
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        _say(str(code))
        return EXIT_UNUSABLE
    return code or EXIT_OK


def main() -> None:
    """The console entry point: ``run``, then an exit without the interpreter's clean-up.

    Finalising the ~1,000 modules that polars, numpy and pyarrow load takes ~0.1 s on every run;
    by then every report is written and closed, so only the standard streams are flushed. Output
    still buffered for a full or closed standard output is an error too (exit 2), said once.
    """
    _park_closed_standard_descriptors()
    configure_allocator()  # before polars loads: the run's commands import it later
    # sqlglot logs a WARNING for syntax it falls back on ("contains unsupported syntax"): hostile SQL
    # would print lines of its own text to stderr; the fingerprints already say what they could read.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    code = run()
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except (OSError, ValueError) as error:
        if code != EXIT_UNUSABLE:  # else the write already said why
            _say(f"dbdiag: error: standard output: {_stream_reason(error)}")
            code = EXIT_UNUSABLE
    try:
        if sys.stderr is not None:
            sys.stderr.flush()
    except (OSError, ValueError):
        pass  # nowhere left to say it
    os._exit(code)


def _park_closed_standard_descriptors() -> None:
    """Open /dev/null on a closed descriptor 0, 1 or 2 (``dbdiag ... >&-``).

    Else the next file opened (a report, a capture member) takes that number, and a native
    library's write to "standard error" lands in it. ``sys.stdout`` stays None, so ``-o -`` still
    says standard output is closed.
    """
    for descriptor in (0, 1, 2):
        try:
            os.fstat(descriptor)
        except OSError:
            parked = os.open(os.devnull, os.O_RDWR)
            if parked != descriptor:
                os.dup2(parked, descriptor)
                os.close(parked)
