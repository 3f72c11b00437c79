"""Writing reports can destroy nothing: the capture, devices, FIFOs, links, half-written files.

Also the command line's promises around output: one-line errors, exit codes that mean one thing
each (1 is only "a finding at --fail-on"), interruptions, and escaping of capture-controlled text
in the Markdown and HTML reports. Every capture here is built in the test (no corpus needed).
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import stat
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbdiag import cli
from dbdiag.report import render_html, render_markdown
from tests.hostile import OK_LOG, tar_bytes, tar_file

REPO = Path(__file__).resolve().parent.parent
HOSTILE_NAME = "[x](javascript:alert(1))|`<script>alert(2)</script>\n# h *b* _i_ ~~s~~ &amp;.log"
# A kernel log with an OOM kill and a crash: its member name shows in the findings' sources,
# the timeline's sources and events, in every format.
OOM_LOG = (
    b"2024-05-14T10:00:01,123456+00:00 Out of memory: Killed process 1234 (mysqld) total-vm:1000kB, "
    b"anon-rss:500kB, file-rss:0kB, shmem-rss:0kB, UID:27 pgtables:100kB oom_score_adj:0\n"
    b"2024-05-14T10:05:01,123456+00:00 systemd[1]: mariadb.service: Main process exited, code=killed, status=9/KILL\n"
)


def invoke(args: list[str], cwd: Path):
    """Run the CLI in-process from ``cwd``; a Python exception (a traceback for a user) fails the test."""
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli.app, args)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}: {result.exception!r}") from result.exception
    return result


def one_error_line(result) -> str:
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("dbdiag: error: "), result.output
    return lines[0]


@pytest.fixture
def capture(tmp_path: Path) -> Path:
    path = tmp_path / "soft.txt"
    path.write_bytes(OK_LOG)
    return path


@pytest.fixture
def no_analysis(monkeypatch):
    """Fail the test if the capture is read: the refusal must come before the analysis."""

    def refuse(*args, **kwargs):
        raise AssertionError("the analysis ran before the output was checked")

    monkeypatch.setattr(cli, "read_capture", refuse)


def listing(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir()}


# ---------------------------------------------------------------------------------------------
# 1. The output is never the capture or inside it


def test_output_naming_the_capture_is_refused(capture: Path, tmp_path: Path, no_analysis):
    result = invoke(["analyze", str(capture), "-o", str(capture)], tmp_path)
    assert result.exit_code == 2
    assert "is the capture" in one_error_line(result)
    assert capture.read_bytes() == OK_LOG


def test_output_reaching_the_capture_through_links_is_refused(capture: Path, tmp_path: Path, no_analysis):
    (tmp_path / "link.html").symlink_to(capture)
    os.link(capture, tmp_path / "hard.html")
    (tmp_path / "dirlink").symlink_to(tmp_path)
    for target in (tmp_path / "link.html", tmp_path / "hard.html", tmp_path / "dirlink" / "soft.txt"):
        result = invoke(["analyze", str(capture), "-o", str(target)], tmp_path)
        assert result.exit_code == 2, target
        one_error_line(result)
    assert capture.read_bytes() == OK_LOG
    assert (tmp_path / "link.html").is_symlink()


def test_output_inside_a_capture_directory_is_refused(tmp_path: Path, no_analysis):
    folder = tmp_path / "cap"
    folder.mkdir()
    (folder / "soft.txt").write_bytes(OK_LOG)
    (tmp_path / "alias").symlink_to(folder)
    for target in ("cap/r.html", "cap/new/r.html", "alias/r.html", "cap"):
        result = invoke(["analyze", "cap", "-o", target], tmp_path)
        assert result.exit_code == 2, target
        assert "inside the capture" in one_error_line(result) or "is the capture" in result.output
    # the default name in the current folder, when that folder is the capture
    result = invoke(["analyze", "."], folder)
    assert result.exit_code == 2
    one_error_line(result)
    assert listing(folder) == {"soft.txt"}


# ---------------------------------------------------------------------------------------------
# 2. Non-regular targets are written through; links followed, never replaced


def _drain(fifo: Path, received: list[bytes]) -> threading.Thread:
    def read() -> None:
        with open(fifo, "rb") as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


@pytest.mark.parametrize("through_link", [False, True])
def test_fifo_is_written_through(capture: Path, tmp_path: Path, through_link: bool):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    target = fifo
    if through_link:
        target = tmp_path / "to-fifo"
        target.symlink_to(fifo)
    received: list[bytes] = []
    reader = _drain(fifo, received)
    result = invoke(["analyze", str(capture), "-f", "json", "-o", str(target)], tmp_path)
    reader.join(timeout=30)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not through_link or target.is_symlink()
    assert received and received[0].startswith(b"{")
    assert listing(tmp_path) == {"soft.txt", "fifo"} | ({"to-fifo"} if through_link else set())


def test_fifo_takes_one_format(capture: Path, tmp_path: Path, no_analysis):
    os.mkfifo(tmp_path / "fifo")
    result = invoke(["analyze", str(capture), "-f", "json", "-f", "md", "-o", "fifo"], tmp_path)
    assert result.exit_code == 2
    assert "exactly one --format" in one_error_line(result)


def test_character_device_is_written_through(capture: Path, tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # the same device as /dev/null
    link = tmp_path / "to-null"
    link.symlink_to(device)
    for target in (device, link):
        result = invoke(["analyze", str(capture), "-f", "html", "-f", "json", "-o", str(target)], tmp_path)
        assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat(device).st_mode) and link.is_symlink()
    assert listing(tmp_path) == {"soft.txt", "null", "to-null"}


def test_dev_null_stays_a_device(capture: Path, tmp_path: Path):
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    result = invoke(["analyze", str(capture), "--fail-on", "warning", "-o", "/dev/null"], tmp_path)
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)
    assert listing(tmp_path) == {"soft.txt"}


def test_dev_stdout_stays_a_link(capture: Path, tmp_path: Path):
    before = os.lstat("/dev/stdout")
    completed = subprocess.run(
        [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", "/dev/stdout"],
        capture_output=True, cwd=tmp_path, timeout=120, check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.startswith(b"{")
    assert stat.S_ISLNK(os.lstat("/dev/stdout").st_mode) and os.lstat("/dev/stdout").st_ino == before.st_ino


def test_symlink_to_a_regular_file_is_followed(capture: Path, tmp_path: Path):
    reports = tmp_path / "reports"
    reports.mkdir()
    real = reports / "real.json"
    real.write_text("old", encoding="utf-8")
    real.chmod(0o600)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    result = invoke(["analyze", str(capture), "-f", "json", "-o", str(link)], tmp_path)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8").startswith("{")
    assert real.stat().st_mode & 0o777 == 0o600  # the replaced report keeps its permissions
    assert listing(reports) == {"real.json"} and listing(tmp_path) == {"soft.txt", "reports", "latest.json"}


def test_a_replaced_report_is_on_disk_before_the_rename_and_the_rename_after(tmp_path: Path, monkeypatch):
    """A crash after the rename must find the new report whole, not an empty file (ext4 and xfs
    may commit the rename before the data), and the rename itself committed: fsync the data,
    rename, fsync the folder."""
    from dbdiag import output

    target = tmp_path / "report.json"
    target.write_text("old report", encoding="utf-8")
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    def replace(source, destination) -> None:
        events.append(("replace", str(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    output.write_report(target, "new report")
    assert target.read_text(encoding="utf-8") == "new report"
    temporary = str(output._temporary_name(target))
    assert events == [("fsync", temporary), ("replace", str(target)), ("fsync", str(tmp_path))]


def test_a_folder_that_cannot_be_synced_still_gets_its_report(tmp_path: Path, monkeypatch):
    from dbdiag import output

    real_fsync = os.fsync

    def fsync(descriptor: int) -> None:
        if stat.S_ISDIR(os.fstat(descriptor).st_mode):
            raise OSError(22, "Invalid argument")  # some file systems (FUSE, network) cannot sync a folder
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", fsync)
    output.write_report(tmp_path / "r.md", "report")
    assert (tmp_path / "r.md").read_text(encoding="utf-8") == "report"


# ---------------------------------------------------------------------------------------------
# 3. Output folders: created, or refused at once


def test_missing_output_folders_are_created(capture: Path, tmp_path: Path):
    result = invoke(["analyze", str(capture), "-f", "json", "-f", "md", "-o", "out/deeper/report"], tmp_path)
    assert result.exit_code == 0, result.output
    assert listing(tmp_path / "out" / "deeper") == {"report.json", "report.md"}


def test_output_under_a_file_fails_before_the_analysis(capture: Path, tmp_path: Path, no_analysis):
    for target in (f"{capture}/r.html", f"{capture}/a/b/r.html"):
        result = invoke(["analyze", str(capture), "-o", target], tmp_path)
        assert result.exit_code == 2
        assert str(capture) in one_error_line(result)
    assert listing(tmp_path) == {"soft.txt"}


@pytest.mark.parametrize("target", ["/sys/dbdiag-test-report.html", "/sys/dbdiag-test-dir/report.html"])
def test_output_where_nobody_may_write_fails_before_the_analysis(capture: Path, tmp_path: Path, no_analysis, target: str):
    if os.path.exists(target) or os.access("/sys", os.W_OK) and _can_create_in("/sys"):
        pytest.skip("this machine lets us write in /sys")
    result = invoke(["analyze", str(capture), "-o", target], tmp_path)
    assert result.exit_code == 2
    assert target in one_error_line(result)
    assert not os.path.exists(target)


def _can_create_in(folder: str) -> bool:
    probe = os.path.join(folder, f".dbdiag-probe-{os.getpid()}")
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError:
        return False
    os.unlink(probe)
    return True


# ---------------------------------------------------------------------------------------------
# 4. No .partial left behind, whatever stops the write; the exit code says interrupted


def _stopping_writer(monkeypatch, stop) -> None:
    """The report write gets half-way, then ``stop()`` (a signal, KeyboardInterrupt, ENOSPC)."""
    from dbdiag import output

    real_write_all = output._write_all

    def half_then_stop(fd: int, data: bytes) -> None:
        real_write_all(fd, data[: len(data) // 2])
        stop()
        real_write_all(fd, data[len(data) // 2 :])

    monkeypatch.setattr(output, "_write_all", half_then_stop)


def _raise(exception: BaseException):
    def stop() -> None:
        raise exception

    return stop


@pytest.mark.parametrize(
    ("stop", "code"),
    [
        (lambda: os.kill(os.getpid(), signal.SIGTERM), 143),
        (lambda: os.kill(os.getpid(), signal.SIGINT), 130),
        (_raise(KeyboardInterrupt()), 130),
        (_raise(OSError(28, "No space left on device")), 2),
    ],
    ids=["SIGTERM", "SIGINT", "KeyboardInterrupt", "ENOSPC"],
)
def test_interrupted_write_leaves_no_partial_file(capture: Path, tmp_path: Path, monkeypatch, stop, code: int):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.html").write_text("previous report", encoding="utf-8")
    _stopping_writer(monkeypatch, stop)
    previous_handler = signal.getsignal(signal.SIGTERM)
    result = invoke(["analyze", str(capture), "-o", str(out / "report.html")], tmp_path)
    assert result.exit_code == code, result.output
    assert listing(out) == {"report.html"}
    assert (out / "report.html").read_text(encoding="utf-8") == "previous report"
    assert signal.getsignal(signal.SIGTERM) == previous_handler
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(("signal_number", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_while_writing_to_a_fifo_exits_interrupted(capture: Path, tmp_path: Path, signal_number: int, code: int):
    """A real signal to the real command while it is blocked writing (the FIFO is not drained)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        fcntl.fcntl(reader, fcntl.F_SETPIPE_SZ, 4096)  # one page: smaller than the report
        command = subprocess.Popen(
            [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-o", str(fifo)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path,
        )
        deadline = time.monotonic() + 60
        while _bytes_waiting(reader) < 4096 and time.monotonic() < deadline and command.poll() is None:
            time.sleep(0.02)
        command.send_signal(signal_number)  # the pipe is full: the command is stuck in write()
        _, stderr = command.communicate(timeout=60)
        head = os.read(reader, 100)
    finally:
        os.close(reader)
    assert head.startswith(b"<!DOCTYPE html>")
    assert command.returncode == code, stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert stderr.decode().strip().splitlines() == [f"dbdiag: interrupted ({signal.Signals(signal_number).name})"]
    assert listing(tmp_path) == {"soft.txt", "fifo"}


def _bytes_waiting(fd: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"))[0]


# ---------------------------------------------------------------------------------------------
# 5. A folder as -o: the reports go inside it with the default name


@pytest.mark.parametrize("formats", [["html"], ["json", "md"]])
def test_folder_as_output_takes_the_default_names(capture: Path, tmp_path: Path, formats: list[str]):
    work = tmp_path / "work"
    (work / "sub" / "existing").mkdir(parents=True)
    flags = [flag for fmt in formats for flag in ("-f", fmt)]
    expected = {f"dbdiag-report.{fmt}" for fmt in formats}
    for target, folder in ((".", work / "sub"), ("..", work), ("existing", work / "sub" / "existing"), ("new/", work / "sub" / "new")):
        result = invoke(["analyze", str(capture), *flags, "-o", target], work / "sub")
        assert result.exit_code == 0, (target, result.output)
        assert expected <= listing(folder), target
    assert not any(name.startswith("..") or name.endswith(".partial") for name in listing(work) | listing(work / "sub"))


def test_root_folder_as_output_names_files_inside_it():
    from dbdiag import output

    assert output.report_paths("/", ["json", "md"], "dbdiag-report") == {
        "json": Path("/dbdiag-report.json"), "md": Path("/dbdiag-report.md")}
    assert output.report_paths(None, ["html"], "dbdiag-report") == {"html": Path("dbdiag-report.html")}
    assert output.report_paths("-", ["json"], "dbdiag-report") == {"json": None}
    assert output.report_paths("out/r.html", ["json", "md"], "x") == {"json": Path("out/r.json"), "md": Path("out/r.md")}


# ---------------------------------------------------------------------------------------------
# 6. Standard output full or closed


def _run_to_stdout(capture: Path, stdout) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", "-"],
        stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=120, check=False,
    )


def test_full_stdout_is_one_line_exit_2(capture: Path):
    with open("/dev/full", "w") as full:
        completed = _run_to_stdout(capture, full)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert [line for line in completed.stderr.splitlines() if line.startswith("dbdiag: error:")] == [
        "dbdiag: error: standard output: cannot write report: no space left on device"]


def test_closed_pipe_is_one_line_exit_2(capture: Path):
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        completed = _run_to_stdout(capture, write_end)
    finally:
        os.close(write_end)
    assert completed.returncode == 2, completed.stderr
    assert "Traceback" not in completed.stderr
    assert "dbdiag: error: standard output: cannot write report: broken pipe" in completed.stderr


def test_closed_stdout_is_one_line_exit_2(capture: Path):
    completed = subprocess.run(  # '>&-': the command starts with no standard output at all
        ["sh", "-c", 'exec "$0" "$@" >&-', sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", "-"],
        stderr=subprocess.PIPE, text=True, timeout=120, check=False,
    )
    assert completed.returncode == 2, completed.stderr
    assert completed.stderr.strip() == "dbdiag: error: standard output: cannot write report: standard output is closed"


def test_rules_to_a_full_stdout_is_one_line_exit_2():
    with open("/dev/full", "w") as full:
        completed = subprocess.run([sys.executable, "-m", "dbdiag", "rules"], stdout=full,
                                   stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert completed.returncode == 2
    assert completed.stderr.strip() == "dbdiag: error: standard output: cannot write: no space left on device"


# ---------------------------------------------------------------------------------------------
# 7. --window must be a finite, positive number of seconds


@pytest.mark.parametrize("window", ["nan", "inf", "-inf", "0", "-1", "0.0001", "1e300"])
def test_bad_window_is_one_line_usage_error(capture: Path, tmp_path: Path, window: str, no_analysis):
    result = invoke(["analyze", str(capture), f"--window={window}"], tmp_path)
    assert result.exit_code == 2
    assert "--window" in one_error_line(result)
    assert listing(tmp_path) == {"soft.txt"}


# ---------------------------------------------------------------------------------------------
# 8. A capture that cannot be read: one line


@pytest.mark.parametrize("name", ["missing", "dangling", "io-error"])
def test_unreadable_capture_is_one_line_exit_2(tmp_path: Path, name: str):
    paths = {"missing": tmp_path / "nope.tgz", "dangling": tmp_path / "dangling.tgz", "io-error": Path("/proc/self/mem")}
    (tmp_path / "dangling.tgz").symlink_to(tmp_path / "gone.tgz")
    result = invoke(["analyze", str(paths[name]), "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.exit_code == 2
    assert one_error_line(result).startswith(f"dbdiag: error: {paths[name]}: ")
    assert not (tmp_path / "r.html").exists()


# ---------------------------------------------------------------------------------------------
# 9. Exit 1 is a finding and nothing else; an internal error is one line and exit 4


def _panic_exception() -> type[BaseException]:
    from polars.exceptions import PanicException

    return PanicException


@pytest.mark.parametrize("error", [ValueError("bad\nsecond line"), "panic"], ids=["ValueError", "PanicException"])
def test_unexpected_error_is_one_line_exit_4(capture: Path, tmp_path: Path, monkeypatch, capsys, error):
    if error == "panic":
        error = _panic_exception()("index out of bounds")

    def broken(*args, **kwargs):
        raise error

    import dbdiag.pipeline

    monkeypatch.setattr(dbdiag.pipeline, "analyze_read", broken)
    monkeypatch.chdir(tmp_path)
    code = cli.run(["analyze", str(capture), "-o", str(tmp_path / "r.html")])
    assert code == cli.EXIT_INTERNAL == 4
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"dbdiag: internal error: {type(error).__name__}: {str(error).splitlines()[0]} (please report)"]


def test_exit_codes_are_documented():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for text in (cli.__doc__, readme):
        assert "`4` internal error" in text or "4 internal error" in text
        assert "130" in text and "143" in text


# ---------------------------------------------------------------------------------------------
# 10. Capture-controlled text is escaped in Markdown (and HTML)


def test_markdown_cell_neutralises_markup():
    from dbdiag.report import markdown_cell

    text = markdown_cell(HOSTILE_NAME)
    assert "\n" not in text
    assert "[x](" not in text and "\\[x\\]" in text  # no link
    assert "<" not in text and ">" not in text  # no HTML
    assert re.search(r"(?<!\\)[|`*~]", text) is None  # no cell break, code span, emphasis, strike
    assert "&amp;amp;" in text
    assert markdown_cell("# heading") == "\\# heading" and markdown_cell("- item") == "\\- item"
    assert markdown_cell("1. item") == "1\\. item" and markdown_cell("innodb_buffer_pool_size") == "innodb_buffer_pool_size"
    assert markdown_cell("_emphasis_") == "\\_emphasis\\_" and markdown_cell("a\r\nb") == "a b"


# Text GitHub would make a link by itself (GFM extended autolinks; "<...>" is a CommonMark autolink).
AUTOLINK_BAITS = [
    "http://evil.example/x?a=1&b=2",
    "see https://evil.example/login.",
    "HTTPS://EVIL.EXAMPLE",
    "www.evil.example/path",
    "(www.evil.example)",
    "<http://evil.example>",
    "x_http://evil.example",
    "ftp://evil.example/f",
    "mail bob.smith+x@evil.example now",
    "mailto:bob@evil.example",
    "xmpp:bob@evil.example/res",
    "| http://a.example | b |",
]
# What starts a GFM autolink, outside a code span.
GFM_AUTOLINK_TRIGGER = re.compile(r"(?i)(?:https?|ftp|mailto|xmpp):|www\.|[\w.+-]@[\w-]+\.")


def _outside_code_spans(markdown: str) -> str:
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", markdown)


@pytest.mark.parametrize("bait", AUTOLINK_BAITS)
def test_markdown_cell_makes_no_autolink(bait: str):
    from markdown_it import MarkdownIt

    from dbdiag.report import markdown_cell

    cell = markdown_cell(bait)
    assert GFM_AUTOLINK_TRIGGER.search(_outside_code_spans(cell)) is None, cell
    html = MarkdownIt("commonmark").renderInline(cell)
    assert "<a " not in html, html
    shown = re.sub(r"</?code>", "", html).replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&amp;", "&")
    assert shown == bait  # the reader still sees every character, the table keeps its cells
    assert _cells(cell) == 0  # no cell break


def test_every_field_of_the_markdown_template_is_escaped():
    template = (REPO / "report_templates" / "report.md.j2").read_text(encoding="utf-8")
    expressions = re.findall(r"\{\{(.*?)\}\}", template, re.DOTALL)
    assert expressions
    escaped = re.compile(
        r".*\|\s*(?:md|code(?:\(table=True\))?|fenced)"  # ends in an escaping filter
        r"|[\w.]+ \| map\('md'\) \| join\(' \| '\)"  # table cells, each escaped
        r"|' --- \|' \* \([\w.]+ \| length(?: \+ 1)?\)",  # a table's delimiter row
        re.DOTALL,
    )
    unescaped = [e for e in expressions if not escaped.fullmatch(e.strip())]
    assert unescaped == []


def _hostile_capture(tmp_path: Path) -> Path:
    capture = tmp_path / "cap.tar"
    capture.write_bytes(tar_bytes([tar_file(HOSTILE_NAME, OOM_LOG), tar_file("soft.txt", OK_LOG)]))
    return capture


def test_hostile_member_name_is_inert_in_markdown(tmp_path: Path):
    result = invoke(["analyze", str(_hostile_capture(tmp_path)), "-f", "md", "-o", "r.md"], tmp_path)
    assert result.exit_code == 0, result.output
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert "javascript" in markdown  # the name is there...
    assert not re.search(r"(?<!\\)\]\(", markdown) and "<script" not in markdown  # ...but no link, no HTML
    assert not re.search(r"(?<!\\)`&lt;", markdown)  # no code span opened by the name
    for line in markdown.splitlines():
        if line.startswith("| ") and "javascript" in line:
            header = _table_header(markdown, line)
            assert _cells(line) == _cells(header), line  # the name did not add cells


def _cells(row: str) -> int:
    return len(re.findall(r"(?<!\\)\|", row))


def _table_header(markdown: str, row: str) -> str:
    lines = markdown.splitlines()
    index = lines.index(row)
    while index > 0 and lines[index - 1].startswith("|"):
        index -= 1
    return lines[index]


def test_hostile_member_name_is_escaped_in_html(tmp_path: Path):
    result = invoke(["analyze", str(_hostile_capture(tmp_path)), "-o", "r.html"], tmp_path)
    assert result.exit_code == 0, result.output
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "javascript" in html
    assert "<script>alert(2)" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert not re.search(r"""(?:href|src)\s*=\s*["']?\s*javascript""", html, re.IGNORECASE)
    assert "&amp;amp;" in html


def test_markdown_and_html_of_a_document_escape_hostile_text():
    from tests.test_report import _document

    document = _document("SELECT 1")
    document["findings"][0]["sources"] = [HOSTILE_NAME]
    document["capture"]["source"] = "cap`ture <b>.tgz"
    markdown = render_markdown(document)
    assert "Sources: \\[x\\](javascript:alert(1))\\|\\`&lt;script&gt;" in markdown
    assert "Capture ``cap`ture <b>.tgz``" in markdown  # a code span longer than the backtick run inside
    html = render_html(document)
    assert "<b>.tgz" not in html and "&lt;b&gt;.tgz" in html
