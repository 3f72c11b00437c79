"""The command line as a user meets it: exit codes, one-line errors, outputs, hostile captures."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dbdiag.cli import app
from tests.hostile import HOSTILE_KINDS, OK_LOG, build_hostile, random_bytes

# What each hostile capture must give: 0 done, 2 unusable / nothing recognised, 3 partial.
EXPECTED_EXIT = {
    "traversal": 0,
    "absolute": 0,
    "links": 0,
    "devices": 0,
    "gzip-bomb-member": 3,
    "xz-bomb-member": 3,
    "gzip-bomb-archive": 3,
    "truncated-tar-gz": 2,  # only binary members before the cut: nothing recognised
    "many-members": 2,  # 100,000 empty members: nothing recognised (and the cap is reported)
    "non-utf8-names": 0,
    "html-name": 0,
    "empty-file": 2,
    "text-named-tar-gz": 0,  # a plain text file named .tar.gz is read as the file it is
    "garbage-gzip": 2,
    "hostile-zip": 3,
    "hostile-directory": 0,
}


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def invoke(args: list[str], cwd: Path):
    """Run the CLI in-process from ``cwd``; a Python exception (a traceback for a user) fails the test."""
    previous = Path.cwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(app, args)
    finally:
        os.chdir(previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}: {result.exception!r}") from result.exception
    return result


def test_expected_exit_codes_cover_every_hostile_kind():
    assert set(EXPECTED_EXIT) == set(HOSTILE_KINDS)


@pytest.mark.parametrize("kind", HOSTILE_KINDS)
def test_hostile_capture_exit_code_and_writes_only_the_report(kind: str, tmp_path: Path):
    inputs, outputs, cwd = tmp_path / "in", tmp_path / "out", tmp_path / "cwd"
    for folder in (inputs, outputs, cwd):
        folder.mkdir()
    capture = build_hostile(kind, inputs)
    before = tree(tmp_path)
    result = invoke(["analyze", str(capture), "-o", str(outputs / "report.html")], cwd)
    assert result.exit_code == EXPECTED_EXIT[kind], result.output
    added = tree(tmp_path) - before
    if result.exit_code in (0, 3) or kind in ("truncated-tar-gz", "many-members", "empty-file"):
        assert added == {"out/report.html"}
    else:
        assert added == set()
    assert not list(cwd.iterdir())
    errors = [line for line in result.output.splitlines() if line.startswith("dbdiag: error:")]
    if result.exit_code == 2:
        assert len(errors) == 1 and str(capture) in errors[0]


def test_hostile_names_are_escaped_in_html(tmp_path: Path):
    capture = build_hostile("html-name", tmp_path)
    invoke(["analyze", str(capture), "-o", str(tmp_path / "r.html")], tmp_path)
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;.log" in html
    assert "<script" not in html.lower()


def test_html_loads_nothing_from_outside(tmp_path: Path):
    invoke(["demo", "-o", str(tmp_path / "demo.html")], tmp_path)
    html = (tmp_path / "demo.html").read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in html and "default-src 'none'" in html
    # in a tag (a remedy's text may say ACTION=="add" of a udev rule: escaped text, not an attribute)
    assert not re.search(r"""<[a-z][^>]*?\s(?:src|href|action|poster|data)\s*=\s*(?!["']?#)""", html, re.IGNORECASE)
    assert not re.search(r"url\(|@import|<link\b|<iframe\b", html, re.IGNORECASE)
    # The one script (flame graph zoom/search) is inline, and the CSP allows it by its hash only.
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, re.IGNORECASE | re.DOTALL)
    assert len(scripts) <= 1
    for attributes, body in scripts:
        assert "src" not in attributes.lower()
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        assert f"'sha256-{digest}'" in html.split("Content-Security-Policy", 1)[1].split(">", 1)[0]
    # The only URL is the SVG namespace, which is a name, not a fetch.
    assert set(re.findall(r"https?://[^\s\"'<>]+", html)) <= {"http://www.w3.org/2000/svg"}


def test_truncated_archive_with_a_readable_member_is_partial(tmp_path: Path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in (("os/softirqs.txt", OK_LOG), ("os/big.bin", random_bytes(512 * 1024, seed=1))):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    capture = tmp_path / "cut.tar.gz"
    capture.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    result = invoke(["analyze", str(capture), "-f", "json", "-o", str(tmp_path / "r.json")], tmp_path)
    assert result.exit_code == 3
    document = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert document["capture"]["partial"] is True
    assert any("truncated" in reason for reason in document["capture"]["partial_reasons"])
    assert [i["kind"] for i in document["inputs"] if i["path"] == "os/softirqs.txt"] == ["proc-softirqs"]


def test_missing_capture_is_one_line_exit_2(tmp_path: Path):
    result = invoke(["analyze", str(tmp_path / "nope.tar.gz")], tmp_path)
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("dbdiag: error:") and "nope.tar.gz" in result.output
    assert not list(tmp_path.iterdir())


def test_missing_output_directory_is_created(tmp_path: Path):
    capture = tmp_path / "softirqs.txt"
    capture.write_bytes(OK_LOG)
    result = invoke(["analyze", str(capture), "-o", str(tmp_path / "no/such/dir/r.html")], tmp_path)
    assert result.exit_code == 0
    assert [p.name for p in (tmp_path / "no/such/dir").iterdir()] == ["r.html"]


def test_unknown_timezone_is_usage_error(tmp_path: Path, corpus: Path):
    result = invoke(["analyze", str(corpus / "captures/numa2x2-guest-iperf-debian12.tar.gz"), "--tz", "Mars/Olympus"], tmp_path)
    assert result.exit_code == 2
    assert "Mars/Olympus" in result.output


def test_fail_on_warning_exits_1_and_still_writes(tmp_path: Path, corpus: Path):
    capture = corpus / "captures/numa2x2-guest-iperf-debian12.tar.gz"
    result = invoke(["analyze", str(capture), "--fail-on", "warning", "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.exit_code == 1
    assert (tmp_path / "r.html").stat().st_size > 1000
    # the MariaDB capture's only warning is its 10 s single-type sysbench run (load-test-inflation)
    healthy = corpus / "captures/mariadb-sysbench-debian12.tar.gz"
    assert invoke(["analyze", str(healthy), "--fail-on", "critical", "-o", str(tmp_path / "h.html")], tmp_path).exit_code == 0


def test_several_formats_share_a_stem(tmp_path: Path):
    result = invoke(["demo", "-f", "html", "-f", "json", "-f", "md", "-o", str(tmp_path / "rep")], tmp_path)
    assert result.exit_code == 0
    assert {p.name for p in tmp_path.iterdir()} == {"rep.html", "rep.json", "rep.md"}
    markdown = (tmp_path / "rep.md").read_text(encoding="utf-8")
    assert markdown.startswith("## dbdiag: Critical: ")
    assert "| CPU | node | %soft |" in markdown


def test_demo_writes_its_default_name_in_cwd(tmp_path: Path):
    result = invoke(["demo"], tmp_path)
    assert result.exit_code == 0
    assert [p.name for p in tmp_path.iterdir()] == ["dbdiag-demo-report.html"]


def test_json_to_stdout(tmp_path: Path):
    result = invoke(["demo", "-f", "json", "-o", "-"], tmp_path)
    assert result.exit_code == 0
    document = json.loads(result.stdout)
    assert [f["id"] for f in document["findings"]] == document["verdict"]["findings"]
    assert document["verdict"]["status"] == "problem"
    assert not list(tmp_path.iterdir())


def test_rules_and_explain(tmp_path: Path):
    listing = invoke(["rules"], tmp_path).output
    assert "softirq-concentration" in listing and "irq-affinity-skew" in listing
    doc = invoke(["explain", "softirq-concentration"], tmp_path)
    assert doc.exit_code == 0 and "How it is detected:" in doc.output and "FIRE_SOFT_PCT = 20%" in doc.output
    unknown = invoke(["explain", "no-such-rule"], tmp_path)
    assert unknown.exit_code == 2 and "unknown rule 'no-such-rule'" in unknown.output


def test_installed_console_script_runs(tmp_path: Path):
    # The script of the environment running the tests, not whatever `dbdiag` PATH finds (often none).
    script = Path(sys.executable).parent / "dbdiag"
    assert script.is_file(), f"{script} missing: install the package into this venv (pip install -e '.[test]')"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # nothing of a dev shell's venv on PATH
    version = subprocess.run([str(script), "--version"], capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert version.returncode == 0 and re.fullmatch(r"dbdiag \d+\.\d+\.\d+\S*\n", version.stdout), version
    bad = subprocess.run([str(script), "analyze", "/nonexistent/capture.tgz"], capture_output=True, text=True, cwd=tmp_path, env=env, check=False)
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and bad.stderr.strip().count("\n") == 0


def test_report_file_mode_follows_umask(tmp_path: Path):
    previous = os.umask(0o022)
    try:
        invoke(["demo", "-o", str(tmp_path / "r.html")], tmp_path)
    finally:
        os.umask(previous)
    assert (tmp_path / "r.html").stat().st_mode & 0o777 == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


def test_recognised_but_unreadable_names_the_reason(tmp_path: Path, corpus: Path):
    capture = corpus / "slowlog-mysql/percona-toolkit__slow015.txt"  # 46 bytes, cut after '# User@Host:'
    result = invoke(["analyze", str(capture), "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.exit_code == 2
    errors = [line for line in result.output.splitlines() if line.startswith("dbdiag: error:")]
    assert len(errors) == 1 and "nothing could be read; percona-toolkit__slow015.txt:" in errors[0]


# ---------------------------------------------------------------------------------------------
# Capture paths that are no capture: '' (not the current folder), '/', the live pseudo filesystems


@pytest.fixture
def no_reading(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the capture is read: the refusal must come first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the capture was read")

    monkeypatch.setattr("dbdiag.cli.read_capture", refuse)


def _one_error(result) -> str:
    assert result.output.endswith("\n") and result.output.count("\n") == 1, result.output
    assert result.output.startswith("dbdiag: error: ")
    return result.output


def test_an_empty_capture_path_is_a_usage_error(tmp_path: Path, no_reading) -> None:
    result = invoke(["analyze", ""], tmp_path)
    assert result.exit_code == 2
    assert "capture path is empty" in _one_error(result)
    assert not list(tmp_path.iterdir())


def test_an_empty_output_path_is_a_usage_error(tmp_path: Path) -> None:
    capture = tmp_path / "cap"
    capture.mkdir()
    (capture / "cmdline.txt").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1\n", encoding="utf-8")
    result = invoke(["analyze", str(capture), "-o", ""], tmp_path)
    assert result.exit_code == 2
    assert "output path is empty" in _one_error(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # no report in the current folder


@pytest.mark.parametrize("path", ["/", "/proc", "/proc/self", "/sys/kernel", "/dev", "/dev/zero", "//", "/proc/.."])
def test_the_root_and_the_pseudo_filesystems_are_refused(tmp_path: Path, no_reading, path: str) -> None:
    result = invoke(["analyze", path, "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.exit_code == 2
    message = _one_error(result)
    assert "not a capture" in message and path in message
    assert not list(tmp_path.iterdir())


def test_a_link_into_a_pseudo_filesystem_is_refused(tmp_path: Path, no_reading) -> None:
    (tmp_path / "cap").symlink_to("/proc/self")
    result = invoke(["analyze", "cap", "-o", str(tmp_path / "r.html")], tmp_path)
    assert result.exit_code == 2
    assert "/proc" in _one_error(result)


def test_a_capture_redirected_to_standard_input_is_still_read(tmp_path: Path) -> None:
    (tmp_path / "softirqs.txt").write_bytes(OK_LOG)
    with open(tmp_path / "softirqs.txt", "rb") as stdin:  # /dev/stdin is a link to this regular file
        result = subprocess.run(
            [sys.executable, "-m", "dbdiag", "analyze", "/dev/stdin", "-f", "json", "-o", "r.json"],
            stdin=stdin, cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "r.json").read_text())["inputs"][0]["kind"] == "proc-softirqs"


def test_a_directory_of_more_entries_than_the_member_cap_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dbdiag import capture_members

    root = tmp_path / "capture"
    for index in range(30):
        (root / f"d{index:02d}").mkdir(parents=True)
        (root / f"d{index:02d}" / "softirqs.txt").write_bytes(OK_LOG)
    monkeypatch.setattr("dbdiag.cli.Limits", lambda: capture_members.Limits(max_members=20))
    result = invoke(["analyze", str(root), "-f", "json", "-o", str(tmp_path / "r.json")], tmp_path)
    assert result.exit_code == 3
    document = json.loads((tmp_path / "r.json").read_text())
    read = [i for i in document["inputs"] if i["kind"] == "proc-softirqs"]
    assert len(read) == 10  # 20 entries examined: 10 folders and the file in each
    assert any("member cap of 20 reached" in reason for reason in document["capture"]["partial_reasons"])


def test_a_file_over_the_size_option_names_the_option_and_is_admitted_by_it(tmp_path: Path) -> None:
    log = tmp_path / "softirqs.txt"
    log.write_bytes(OK_LOG * 40)
    assert log.stat().st_size > 1024
    refused = invoke(["analyze", str(log), "-f", "json", "-o", str(tmp_path / "r.json"), "--max-member-size", "1K"], tmp_path)
    assert refused.exit_code == 2
    assert "nothing could be read; softirqs.txt: member larger than 1.0 KiB cap; --max-member-size raises it" in refused.stderr
    assert "nothing in this capture is in a format" not in refused.stderr
    admitted = invoke(["analyze", str(log), "-f", "json", "-o", str(tmp_path / "s.json"), "--max-member-size", "1M"], tmp_path)
    assert admitted.exit_code == 0, admitted.stderr
    assert json.loads((tmp_path / "s.json").read_text())["inputs"][0]["kind"] == "proc-softirqs"


def test_a_member_size_that_is_not_a_size_is_one_line(tmp_path: Path) -> None:
    result = invoke(["analyze", str(tmp_path), "--max-total-size", "lots"], tmp_path)
    assert result.exit_code == 2
    assert result.stderr.strip() == "dbdiag: error: --max-total-size must be a size such as 4G, 500M or 1048576 (bytes); got 'lots'"
