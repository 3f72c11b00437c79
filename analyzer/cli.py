"""Command line: ``dbdiag analyze | demo | rules | explain``. Thin: argument handling, files, exit codes.

Exit codes: 0 done; 1 a finding at or above ``--fail-on``; 2 unusable input or usage error
(also when nothing in the capture could be recognised); 3 partial capture (some inputs
unreadable). When several apply, the order is 2, then 1, then 3.
"""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

import dbdiag
from dbdiag.capture import CaptureError, Limits, read_capture
from dbdiag.findings import Severity

if TYPE_CHECKING:
    from dbdiag.pipeline import Analysis

# The analysis modules (polars, numpy, the parsers and rules: ~0.4 s) are imported in the commands
# that use them, so that ``analyze`` reads the capture meanwhile and ``--help`` stays quick.

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_UNUSABLE = 2
EXIT_PARTIAL = 3

DEMO_ARCHIVE = "bank-core-demo.tar.gz"
DEFAULT_REPORT_STEM = "dbdiag-report"
DEMO_REPORT_STEM = "dbdiag-demo-report"

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


def _output_paths(output: Optional[Path], formats: list[Format], default_stem: str) -> dict[Format, Path | None]:
    """One path per format; ``-o -`` means standard output (one format only)."""
    if output is not None and str(output) == "-":
        if len(formats) != 1:
            _fail("-o - (standard output) takes exactly one --format")
        return {formats[0]: None}
    if output is None:
        return {fmt: Path(f"{default_stem}.{fmt.value}") for fmt in formats}
    if len(formats) == 1:
        return {formats[0]: output}
    return {fmt: output.with_suffix(f".{fmt.value}") for fmt in formats}


def _write_atomically(path: Path, text: str) -> None:
    """Write next to the target and rename, so a crash never leaves half a report.

    The file is created with mode 0666 less the umask, like any file the user writes.
    """
    directory = path.parent if str(path.parent) else Path(".")
    if not directory.is_dir():
        _fail(f"{path}: output directory {directory} does not exist")
    temporary = directory / f".{path.name}.{os.getpid()}.partial"
    try:
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        _fail(f"{path}: cannot write report: {error.strerror or error}")


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


@contextmanager
def _progress():
    """A transient status line on a terminal ('reading capture/db/slow.log'); nothing when piped."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console  # only a terminal needs it

    console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
    with console.status("reading capture", spinner="line") as status:
        yield lambda path: status.update(f"reading {path}")


def _run(
    capture_path: Path,
    output: Optional[Path],
    formats: list[Format],
    fail_on: Optional[FailOn],
    tz: Optional[str],
    show_literals: bool,
    window_s: float,
    default_stem: str,
    pseudonymize: bool = False,
) -> int:
    formats = list(dict.fromkeys(formats or [Format.html]))
    targets = _output_paths(output, formats, default_stem)
    limits = Limits()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dbdiag-read") as reader:
        reading = reader.submit(read_capture, capture_path, limits)  # file reads release the GIL
        from dbdiag.pipeline import Options, UnknownTimeZone, analyze_read
        from dbdiag.report import build_document, render

        try:
            with _progress() as progress:
                options = Options(tz=tz, show_literals=show_literals, window_s=window_s, limits=limits, pseudonymize=pseudonymize)
                analysis = analyze_read(reading.result(), options, progress=progress)
        except (CaptureError, UnknownTimeZone) as error:
            _fail(str(error))
    capture = analysis.capture
    document = build_document(analysis, generated_at=datetime.now(timezone.utc).replace(microsecond=0))
    for fmt, path in targets.items():
        text = render(document, fmt.value)
        if path is None:
            sys.stdout.write(text)
        else:
            _write_atomically(path, text)
            _say(f"wrote {path}")
    counts = document["verdict"]["findings_by_severity"]
    _say(
        f"{capture_path}: {len(analysis.recognised)} of {len(capture.members)} member(s) read; "
        f"{counts['critical']} critical, {counts['warning']} warning, {counts['info']} info finding(s)"
    )
    if not analysis.recognised:
        unreadable = [record for record in analysis.inputs if record.error]
        if unreadable:
            _say(f"dbdiag: error: {capture_path}: nothing could be read; {unreadable[0].path}: {unreadable[0].error}")
        else:
            _say(f"dbdiag: error: {capture_path}: nothing in this capture is in a format dbdiag reads (see the inventory)")
    elif document["capture"]["partial"]:
        _say(f"dbdiag: partial capture: {'; '.join(document['capture']['partial_reasons'][:3])}")
    return _exit_code(analysis, document, fail_on)


# The report options analyze and demo share: declared once, used by both.
OutputOption = Annotated[
    Optional[Path],
    typer.Option("-o", "--output", help="Report path; with several formats, the suffix is replaced per format; '-' for stdout."),
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
WindowOption = Annotated[
    float,
    typer.Option(
        "--window",
        min=0.001,
        help="Seconds per time window of the time accounting and the timeline (widened to the metrics' scrape step).",
    ),
]


@app.command()
def analyze(
    capture: Annotated[Path, typer.Argument(help="Capture: .tar.gz/.tgz/.tar/.tar.xz/.tar.bz2, .zip, a directory, or one file.")],
    output: OutputOption = None,
    format: FormatOption = [],  # noqa: B006 - typer reads the default, never mutates it
    fail_on: FailOnOption = None,
    tz: TzOption = None,
    show_literals: LiteralsOption = False,
    window: WindowOption = 10.0,
    pseudonymize: PseudonymizeOption = False,
) -> None:
    """Analyze a capture and write the report."""
    raise typer.Exit(_run(capture, output, format, fail_on, tz, show_literals, window, DEFAULT_REPORT_STEM, pseudonymize))


@app.command()
def demo(
    output: OutputOption = None,
    format: FormatOption = [],  # noqa: B006 - typer reads the default, never mutates it
    fail_on: FailOnOption = None,
    tz: TzOption = None,
    show_literals: LiteralsOption = False,
    window: WindowOption = 10.0,
    pseudonymize: PseudonymizeOption = False,
) -> None:
    """Analyze the bundled demo capture (a 128-CPU, 16-node bank core server) and write dbdiag-demo-report.html."""
    archive = resources.files("dbdiag.demo_capture").joinpath(DEMO_ARCHIVE)
    with resources.as_file(archive) as path:
        if not path.is_file():
            _fail(f"{path}: the demo capture is missing from this installation")
        raise typer.Exit(_run(path, output, format, fail_on, tz, show_literals, window, DEMO_REPORT_STEM, pseudonymize))


@app.command("rules")
def list_rules() -> None:
    """List the rules dbdiag runs, with the inputs each needs."""
    from dbdiag.rules import RULES

    for rule in RULES:
        needs = "; ".join(" or ".join(group) for group in rule.requires)
        typer.echo(f"{rule.id:<28} {rule.area:<8} {rule.title}  [needs: {needs}]")


@app.command()
def explain(rule_id: str = typer.Argument(..., help="A rule id, e.g. softirq-concentration.")) -> None:
    """Print a rule's documentation: what it detects, why, how, remediation, references."""
    from dbdiag.rules import rule_by_id

    rule = rule_by_id(rule_id)
    if rule is None:
        _fail(f"unknown rule {rule_id!r}; 'dbdiag rules' lists them")
    typer.echo(f"{rule.id}: {rule.title}\n")
    typer.echo(rule.doc.strip())


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dbdiag {dbdiag.__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
) -> None:
    """dbdiag: turn a capture from a slow database server into findings a DBA can act on."""


def main() -> None:
    """The console entry point: the app, then an exit without the interpreter's clean-up.

    Finalising the ~1,000 modules that polars, numpy and pyarrow load takes ~0.1 s on every run;
    by then every report is written and closed, so only the standard streams are flushed.
    """
    try:
        app()
        code = EXIT_OK
    except SystemExit as leaving:
        code = leaving.code
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = EXIT_UNUSABLE
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or EXIT_OK)
