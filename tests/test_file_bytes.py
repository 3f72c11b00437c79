"""Big plain files read on demand (``dbdiag.file_bytes.FileBytes``): what it answers, a file cut shorter
after the capture was read, and a real perf script read through it giving the table its bytes give."""

from __future__ import annotations

import gzip
import os
import tarfile

import pytest

from dbdiag import file_bytes
from dbdiag.capture import Limits, read_capture
from dbdiag.file_bytes import FileBytes
from dbdiag.parsers.base import ParseContext
from dbdiag.parsers.perf_script import SPEC as PERF_SCRIPT
from dbdiag.pipeline import Options, analyze
from tests.conftest import REPO

# Real perf scripts of this project's machine (fixtures/perf/README.md): deep stacks of a C program, and
# MariaDB's threads on a hot row (1.8 MB)
PERF_SCRIPT_FIXTURE = REPO / "fixtures" / "perf" / "deep-stacks.perf-script.txt.gz"
HOT_ROW_CAPTURE = REPO / "fixtures" / "perf" / "mariadb-hot-row.tar.xz"


def _hot_row_perf_script() -> bytes:
    with tarfile.open(HOT_ROW_CAPTURE) as archive:
        return archive.extractfile("capture/os/perf-script.txt").read()


@pytest.fixture()
def small_windows(monkeypatch):
    monkeypatch.setattr(file_bytes, "WINDOW_BYTES", 7)  # searches and counts cross many windows


def test_slices_find_and_line_counts_answer_as_bytes_do(tmp_path, small_windows):
    content = b"".join(b"line %d\n" % i + (b"\n" if i % 5 == 4 else b"") for i in range(60))
    path = tmp_path / "f.txt"
    path.write_bytes(content)
    data = FileBytes.open(str(path), len(content))
    assert len(data) == len(content) and data.read_all() == content and bytes(data) == content
    for start, stop in ((0, 10), (5, 400), (len(content) - 3, len(content) + 50), (30, 20)):
        assert data[start:stop] == content[start:stop]
    for sub in (b"\n\n", b"line 37\n", b"absent", b"9\n\nline"):
        for start in (0, 11, 200):
            assert data.find(sub, start) == content.find(sub, start), (sub, start)
    assert data.find(b"line 5", 0, 40) == content.find(b"line 5", 0, 40)
    for offset in (0, 13, 200, 90, len(content)):  # asked out of order too
        assert data.newlines_before(offset) == content.count(b"\n", 0, offset)
    with pytest.raises(TypeError):
        data[::2]


def test_a_file_cut_shorter_after_the_capture_was_read_reads_as_what_is_left(tmp_path, small_windows):
    path = tmp_path / "rotated.log"
    path.write_bytes(b"a" * 50 + b"\n\n" + b"b" * 50)
    data = FileBytes.open(str(path), 102)
    os.truncate(path, 40)  # logrotate copytruncate between reading the capture and parsing it
    assert len(data) == 102  # the size the capture saw
    assert data[30:102] == b"a" * 10
    assert data.find(b"\n\n") == -1
    assert data.read_all() == b"a" * 40
    assert data.newlines_before(102) == 0


def test_a_big_directory_file_is_left_on_disk_until_parsed(tmp_path):
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "perf-script.txt").write_bytes(gzip.decompress(PERF_SCRIPT_FIXTURE.read_bytes()))
    (folder / "small.txt").write_bytes(b"x\n")
    members = {m.path: m for m in read_capture(folder, Limits(stream_file_bytes=1024)).members}
    assert isinstance(members["perf-script.txt"].data, FileBytes)
    assert isinstance(members["small.txt"].data, bytes)
    assert members["perf-script.txt"].size == (folder / "perf-script.txt").stat().st_size


def test_a_perf_script_read_in_pieces_from_the_file_gives_the_table_of_its_bytes(tmp_path, monkeypatch):
    text = _hot_row_perf_script()
    at = text.index(b"\nmariadbd ", len(text) // 2) + 1
    text = text[:at] + "mariadbd-é".encode() + text[at + len(b"mariadbd"):]  # one piece the C kernel refuses (not ASCII)
    path = tmp_path / "perf-script.txt"
    path.write_bytes(text)
    from dbdiag.parsers import perf_script

    monkeypatch.setattr(perf_script, "CHUNK_CHARS", 64 * 1024)  # many pieces, each read when the kernel gets to it
    context = ParseContext(source="perf-script.txt")
    from_bytes = PERF_SCRIPT.parse_bytes(text, context)
    from_file = PERF_SCRIPT.parse_bytes(FileBytes.open(str(path), len(text)), context)
    stacks = from_bytes.tables["perf_stack"]
    assert stacks.height > 100 and "mariadbd-é" in stacks["comm"].to_list()
    assert from_file.records == from_bytes.records
    assert from_file.tables["perf_stack"].sort("stack", "tid", "comm").equals(stacks.sort("stack", "tid", "comm"))
    assert from_file.notes == from_bytes.notes and from_file.warnings == from_bytes.warnings


def test_the_whole_analysis_of_a_streamed_file_matches_the_read_one(tmp_path):
    folder = tmp_path / "capture"
    folder.mkdir()
    (folder / "perf-script.txt").write_bytes(_hot_row_perf_script())
    streamed = analyze(folder, Options(limits=Limits(stream_file_bytes=1024)))
    read = analyze(folder, Options())
    assert [i.kind for i in streamed.inputs] == [i.kind for i in read.inputs] == ["perf-script"]
    assert streamed.tables["perf_stack"].equals(read.tables["perf_stack"])
    assert streamed.derived.metrics["cpu_profile"] == read.derived.metrics["cpu_profile"]
