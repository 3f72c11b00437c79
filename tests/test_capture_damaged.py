"""Damaged and crafted archives (issue 11), as ``read_capture`` sees them: a bad tar header costs
its own member only (on the venv's Python and on the system's, whose tarfile is stricter), sparse
maps and names are bounded, the end of a tar and of its compressed stream are checked, and a
damaged zip keeps every member it can. Nothing here raises but ``CaptureError``.

The same archives go through the real CLI in ``test_capture_hostile_more.py`` (``CLI_CASES``).
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import struct
import subprocess
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import zstandard

import dbdiag
from dbdiag import capture
from dbdiag.capture import MEMBER_NAME_CAP_CHARS, read_capture
from dbdiag.capture_tar_headers import SPARSE_REGIONS_CAP, TAR_METADATA_CHAIN_CAP
from dbdiag.zstd_frames import FrameTracker
from hostile import (
    BLOCK,
    GOOD_MPSTAT,
    gnu_sparse_header,
    padded,
    pax_header,
    raw_member,
    tar_bytes,
    tar_file,
    ustar_header,
    zip_bytes,
)

END = bytes(2 * BLOCK)
GOOD = raw_member("mpstat.txt", GOOD_MPSTAT)
AFTER = raw_member("after/mpstat.txt", GOOD_MPSTAT)
SPARSE_01 = {"GNU.sparse.major": "0", "GNU.sparse.minor": "1", "GNU.sparse.name": "s.log"}
SPARSE_10 = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s.log", "GNU.sparse.realsize": "10"}
# Debian's Python 3.11.2 carries the strict pax parser of 3.11.10 (pyenv's 3.11.7 has the lax one).
SYSTEM_PYTHON = Path("/usr/bin/python3")


def _read(tmp_path: Path, name: str, data: bytes) -> capture.Capture:
    path = tmp_path / name
    path.write_bytes(data)
    return read_capture(path)


def _outcome(result: capture.Capture) -> list[tuple[str, str | None]]:
    return [(m.path, m.skipped) for m in result.members]


def _pax_records(records: bytes) -> bytes:
    """A pax extended header holding these records as they are (well formed or not)."""
    return ustar_header("pax", tarfile.XHDTYPE, len(records)) + padded(records)


def _pax_chain(count: int) -> bytes:
    return _pax_records(b"19 comment=aaaaaaa\n") * count  # the length counts the whole record


# ---------------------------------------------------------------------------------------------
# tar: a bad header costs its member, not the rest of the archive

# name -> (the blocks between the good members, the skip reason of the member they spoil)
BAD_TAR_MEMBERS = {
    "pax-chain": (
        _pax_chain(2000) + raw_member("x.log", b"hello\n"),
        f"corrupt tar header: more than {TAR_METADATA_CHAIN_CAP} extended headers in a row (not read)",
    ),
    "pax-record-length-wrong": (
        _pax_records(b"20 comment=aaaaaaa\n") + raw_member("x.log", b"hello\n"),
        "corrupt tar header: pax record at byte 0 does not end where its length says (not read)",
    ),
    "pax-record-without-newline": (
        _pax_records(b"19 comment=aaaaaaaX") + raw_member("x.log", b"hello\n"),
        "corrupt tar header: pax record at byte 0 does not end where its length says (not read)",
    ),
    "pax-record-without-length": (
        _pax_records(b"15 path=ok.log\nno length here\n") + raw_member("x.log", b"hello\n"),
        "corrupt tar header: pax record at byte 15 does not start with its length (not read)",
    ),
    "pax-record-too-short": (
        _pax_records(b"3 \n") + raw_member("x.log", b"hello\n"),
        "corrupt tar header: pax record at byte 0 states an impossible length (3) (not read)",
    ),
    "sparse-map-not-numbers": (
        pax_header({**SPARSE_01, "GNU.sparse.map": "x,y", "GNU.sparse.realsize": "3"}) + raw_member("s.log", b"abc"),
        "corrupt tar header: GNU.sparse.map is not a list of numbers (not read)",
    ),
    "sparse-realsize-not-a-number": (
        pax_header({**SPARSE_01, "GNU.sparse.map": "0,3", "GNU.sparse.realsize": "zz"}) + raw_member("s.log", b"abc"),
        "corrupt tar header: GNU.sparse.realsize 'zz' is not a number (not read)",
    ),
    "pax-size-not-a-number": (
        pax_header({"size": "12x"}) + raw_member("s.log", b"abc"),
        "corrupt tar header: size '12x' is not a number (not read)",
    ),
    "sparse-1.0-map-garbage": (
        pax_header(SPARSE_10) + raw_member("s.log", b"2\n0\nzz\n"),
        "corrupt tar header: GNU sparse 1.0 map is not numbers (not read)",
    ),
    "sparse-1.0-map-count-huge": (
        pax_header(SPARSE_10) + raw_member("s.log", b"99999999999999\n0\n"),
        f"corrupt tar header: GNU sparse 1.0 map of more than {SPARSE_REGIONS_CAP} regions (not read)",
    ),
    # 2 GiB whose one region of data sits at the very end, in a tar of a few KB: never expanded
    "sparse-2gib": (
        gnu_sparse_header("big.sparse", [(2 * 1024**3 - BLOCK, BLOCK)], 2 * 1024**3) + padded(b"x" * BLOCK),
        "decompression ratio above 250:1 (bomb?)",
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD_TAR_MEMBERS))
def test_a_bad_tar_header_skips_its_member_and_the_archive_goes_on(tmp_path: Path, kind: str) -> None:
    blocks, reason = BAD_TAR_MEMBERS[kind]
    result = _read(tmp_path, f"{kind}.tar", GOOD + blocks + AFTER + END)
    assert [m.skipped for m in result.members] == [None, reason, None]
    assert [result.members[0].data, result.members[2].data] == [GOOD_MPSTAT, GOOD_MPSTAT]
    assert result.partial is None  # the skip reason says "corrupt": the analysis counts it as lost


_READ_EACH = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from dbdiag.capture import read_capture
outcomes = {}
for path in sorted(Path(sys.argv[2]).iterdir()):
    result = read_capture(path)
    outcomes[path.stem] = [[m.path, m.skipped] for m in result.members] + [result.partial]
print(json.dumps(outcomes))
"""


@pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no /usr/bin/python3 on this machine")
def test_bad_tar_headers_cost_the_same_on_the_system_python(tmp_path: Path) -> None:
    """Debian's tarfile raises on a malformed pax record where the lax one skips it; both must
    give what the venv's Python gives (the package is imported from this tree, no venv)."""
    (tmp_path / "path").mkdir()
    (tmp_path / "path" / "dbdiag").symlink_to(Path(dbdiag.__file__).parent)
    (tmp_path / "archives").mkdir()
    expected = {}
    for kind, (blocks, _) in BAD_TAR_MEMBERS.items():
        result = _read(tmp_path / "archives", f"{kind}.tar", GOOD + blocks + AFTER + END)
        expected[kind] = [[path, skipped] for path, skipped in _outcome(result)] + [result.partial]
    run = subprocess.run(
        [str(SYSTEM_PYTHON), "-I", "-B", "-c", _READ_EACH, str(tmp_path / "path"), str(tmp_path / "archives")],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == expected


def test_a_long_pax_chain_is_read_without_recursion(tmp_path: Path) -> None:
    result = _read(tmp_path, "chain.tar", GOOD + _pax_chain(5_000) + raw_member("x.log", b"x") + AFTER + END)
    assert [m.path for m in result.members] == ["mpstat.txt", "x.log", "after/mpstat.txt"]


def test_old_gnu_sparse_extension_blocks_are_bounded_and_the_archive_goes_on(tmp_path: Path) -> None:
    regions_per_block = 21
    blocks = SPARSE_REGIONS_CAP // regions_per_block + 2
    extension = bytearray(BLOCK)
    for index in range(regions_per_block):
        extension[24 * index : 24 * index + 24] = b"%011o\0%011o\0" % (2 * index + 2, 1)
    extension[504] = 1  # another extension block follows
    last = bytearray(extension)
    last[504] = 0
    member = gnu_sparse_header("many.sparse", [(0, 1)], 10**6, extended=True) + bytes(extension) * blocks + bytes(last)
    result = _read(tmp_path, "regions.tar", GOOD + member + padded(b"x") + AFTER + END)
    assert _outcome(result) == [
        ("mpstat.txt", None),
        ("many.sparse", f"corrupt tar header: sparse map of more than {SPARSE_REGIONS_CAP} regions (not read)"),
        ("after/mpstat.txt", None),
    ]


@pytest.mark.parametrize("kind", ["old-gnu-extension", "gnu-1.0-map"])
def test_a_sparse_map_cut_by_the_end_of_the_file_is_partial(tmp_path: Path, kind: str) -> None:
    if kind == "old-gnu-extension":
        cut = gnu_sparse_header("s.log", [(0, BLOCK)], BLOCK, extended=True)
    else:
        cut = pax_header(SPARSE_10) + ustar_header("s.log", tarfile.REGTYPE, BLOCK)
    result = _read(tmp_path, f"{kind}.tar", GOOD + cut)
    assert result.members[0].data == GOOD_MPSTAT
    assert result.partial.startswith("archive truncated or corrupt after 1 members: ")
    assert "Error" not in result.partial  # a reason in words, not an exception's name


# ---------------------------------------------------------------------------------------------
# tar: names and headers are not held


def test_long_member_names_are_skipped_without_being_held(tmp_path: Path) -> None:
    entries = [tar_file("mpstat.txt", GOOD_MPSTAT)] + [tar_file(f"d{k:03d}" + "n" * 100_000) for k in range(20)]
    entries.append(tar_file("n" * (MEMBER_NAME_CAP_CHARS + 1), GOOD_MPSTAT))
    result = _read(tmp_path, "names.tar", tar_bytes(entries, format=tarfile.PAX_FORMAT))
    assert (result.members[0].path, result.members[0].data) == ("mpstat.txt", GOOD_MPSTAT)
    assert max(len(m.path) for m in result.members) <= 201
    reasons = {m.skipped.split(" (")[0] for m in result.members if m.skipped}
    assert reasons == {"tar extended header of 97.7 KiB skipped", f"name longer than {MEMBER_NAME_CAP_CHARS} characters"}


def test_tar_headers_are_not_held_once_their_member_is_read(tmp_path: Path) -> None:
    # tarfile keeps every TarInfo of a stream; 300 names of 50 KB would stay (15 MB and more)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.GNU_FORMAT) as archive:
        for index in range(300):
            archive.addfile(tarfile.TarInfo(f"{index:03d}" + "n" * 50_000))
    tracemalloc.start()
    try:
        result = _read(tmp_path, "names.tar.gz", buffer.getvalue())
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(result.members) == 300
    assert peak_bytes < 4 * 1024 * 1024


# ---------------------------------------------------------------------------------------------
# A read reserves what the member holds, not its cap


class _RecordedReads(io.BufferedReader):
    """A member's stream as the containers give it (buffered, with peek), noting each read's size."""

    def __init__(self, data: bytes) -> None:
        super().__init__(io.BytesIO(data))
        self.sizes: list[int] = []

    def read(self, size: int = -1) -> bytes:
        self.sizes.append(size)
        return super().read(size)


@pytest.mark.parametrize(("declared_bytes", "actual_bytes"), [(6, 6), (6, 4), (0, 3 * 1024 * 1024 + 5)])
def test_a_stored_member_is_read_without_a_buffer_the_size_of_the_cap(declared_bytes: int, actual_bytes: int) -> None:
    """Python allocates a read's whole size up front: one of 2 GiB per member failed every run
    under a 2 GB address-space limit (ulimit -v, vm.overcommit_memory=2), even on a 6-byte file.
    A file longer than it said (a log still growing, /proc's size 0) is still read whole."""
    from dbdiag.capture_members import GiB, READ_CHUNK_BYTES, Entry, read_entry

    content = bytes(range(256)) * (actual_bytes // 256) + bytes(actual_bytes % 256)
    reader = _RecordedReads(content)
    entry = Entry("m.log", size=declared_bytes, stored_size=declared_bytes, opener=lambda: reader)
    data, codec = read_entry(entry, 2 * GiB, 250.0)
    assert (data, codec) == (content, None)
    assert max(reader.sizes) <= max(declared_bytes + 1, READ_CHUNK_BYTES)


def test_a_stored_member_growing_past_the_budget_is_too_large() -> None:
    from dbdiag.capture_members import Entry, Rejected, read_entry

    entry = Entry("m.log", size=3, stored_size=3, opener=lambda: _RecordedReads(b"x" * 100))
    with pytest.raises(Rejected) as rejected:
        read_entry(entry, 50, 250.0)
    assert rejected.value.too_large


# ---------------------------------------------------------------------------------------------
# The end of a tar and of its compressed stream

COMPRESSORS = {
    "tar": lambda data: data,
    "tar.gz": gzip.compress,
    "tar.bz2": bz2.compress,
    "tar.xz": lzma.compress,
    "tar.zst": zstandard.compress,
}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_an_end_of_archive_marker_cut_to_one_block_is_partial(tmp_path: Path, suffix: str) -> None:
    members = GOOD + raw_member("two.txt", GOOD_MPSTAT)
    whole = _read(tmp_path, f"whole.{suffix}", COMPRESSORS[suffix](members + END))
    assert whole.partial is None
    cut = _read(tmp_path, f"cut.{suffix}", COMPRESSORS[suffix](members + bytes(BLOCK)))
    assert [m.data for m in cut.members] == [GOOD_MPSTAT, GOOD_MPSTAT]
    assert cut.partial == "archive truncated or corrupt after 2 members: end-of-archive marker cut short"


@pytest.mark.parametrize("suffix", sorted(set(COMPRESSORS) - {"tar"}))
def test_a_compressed_stream_cut_after_the_tar_end_is_partial(tmp_path: Path, suffix: str) -> None:
    whole = COMPRESSORS[suffix](tar_bytes([tar_file("one.log", GOOD_MPSTAT * 50), tar_file("two.log", GOOD_MPSTAT)]))
    result = _read(tmp_path, f"cut.{suffix}", whole[:-6])
    if suffix == "tar.zst":
        # one zstd block holds everything: the cut stream decodes to nothing and is read as one file
        assert result.members[0].skipped.startswith("truncated ")
    else:
        assert [m.path for m in result.members] == ["one.log", "two.log"]
        assert "stream ends early" in result.partial


def test_zstd_frame_tracker_follows_frames_and_skippable_frames() -> None:
    frames = zstandard.compress(b"a" * 200_000) + struct.pack("<II", 0x184D2A53, 3) + b"xyz" + zstandard.compress(b"b")
    whole = FrameTracker()
    for start in range(0, len(frames), 7):  # fed in small pieces, headers split across them
        whole.feed(frames[start : start + 7])
    assert whole.complete()
    for cut in (1, 5, len(frames) - 1):
        tracker = FrameTracker()
        tracker.feed(frames[:cut])
        assert not tracker.complete(), cut
    garbage = FrameTracker()
    garbage.feed(b"not zstd at all")
    assert garbage.error.startswith("not a zstd frame")


# ---------------------------------------------------------------------------------------------
# zip: a bad entry or a cut costs what it must, no more


def zip_with_empty_name() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("x", b"hello")]))
    central = data.rindex(b"PK\x01\x02")
    data[central + 28 : central + 30] = struct.pack("<H", 0)
    del data[central + 46]
    end = data.rindex(b"PK\x05\x06")
    data[end + 12 : end + 16] = struct.pack("<I", struct.unpack_from("<I", data, end + 12)[0] - 1)
    return bytes(data)


def zip_utf8_flag_bad_name() -> bytes:
    data = zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("caf\u00e9.log", b"hello\n")])
    return data.replace("caf\u00e9".encode(), b"caf\xe9\xff")  # flagged UTF-8, and not UTF-8


def zip_damaged_central_entry() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", b"hello\n")]))
    data[data.rindex(b"PK\x01\x02") + 1] = ord("X")
    return bytes(data)


def zip_entry_of_a_newer_version() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", b"hello\n")]))
    struct.pack_into("<H", data, data.rindex(b"PK\x01\x02") + 6, 186)  # "needs zip 18.6": NotImplementedError
    return bytes(data)


def zip_truncated() -> bytes:
    data = zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", os.urandom(4000))], compression=zipfile.ZIP_STORED)
    return data[: data.index(b"two.log") + 1000]


def test_a_zip_entry_with_an_empty_name_is_skipped(tmp_path: Path) -> None:
    result = _read(tmp_path, "empty-name.zip", zip_with_empty_name())
    assert _outcome(result) == [("mpstat.txt", None), ("", "empty path")]


def test_a_damaged_central_directory_entry_keeps_every_member(tmp_path: Path) -> None:
    result = _read(tmp_path, "damaged.zip", zip_damaged_central_entry())
    assert [(m.path, m.data) for m in result.members] == [("mpstat.txt", GOOD_MPSTAT), ("two.log", b"hello\n")]
    assert result.partial.startswith("zip central directory unusable (BadZipFile: Bad magic number")


def test_a_streamed_zip_with_data_descriptors_cut_in_its_directory(tmp_path: Path) -> None:
    class Unseekable(io.RawIOBase):
        def __init__(self) -> None:
            self.buffer = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, data) -> int:
            self.buffer += data
            return len(data)

    sink = Unseekable()
    with zipfile.ZipFile(sink, "w", zipfile.ZIP_DEFLATED) as archive:  # a stream: sizes after the data
        archive.writestr("one.log", GOOD_MPSTAT * 30)
        archive.writestr("two.log", GOOD_MPSTAT)
    data = bytes(sink.buffer)
    assert struct.unpack_from("<H", data, 6)[0] & 0x08
    result = _read(tmp_path, "streamed.zip", data[: data.index(b"PK\x01\x02") + 5])
    assert [(m.path, m.data) for m in result.members] == [("one.log", GOOD_MPSTAT * 30), ("two.log", GOOD_MPSTAT)]
