"""Damaged and crafted archives that used to crash ``read_capture`` or run away (issue 11): each
keeps the good members before the damage, says partial when data was lost, and never raises
anything but ``CaptureError`` for a file that is not a capture at all."""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import struct
import tarfile
import zipfile
from pathlib import Path

import pytest
import zstandard

from dbdiag.capture import MEMBER_NAME_CAP_CHARS, read_capture
from dbdiag.zstd_frames import FrameTracker
from hostile import OK_LOG, gnu_sparse_header, padded, tar_bytes, tar_file, zip_bytes

BLOCK = tarfile.BLOCKSIZE


def _ok_then(blocks: bytes) -> bytes:
    """A tar whose first member is good, then the crafted blocks (no end-of-archive marker)."""
    good = tar_bytes([tar_file("ok.log", OK_LOG)]).rstrip(b"\0")
    return padded(good) + blocks


def _read(tmp_path: Path, name: str, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return read_capture(path)


def test_a_sparse_member_claiming_2_gib_is_not_expanded(tmp_path: Path) -> None:
    header = gnu_sparse_header("big.sparse", [(2 * 1024**3 - BLOCK, BLOCK)], 2 * 1024**3)  # data at the very end
    capture = _read(tmp_path, "sparse.tar", _ok_then(header + b"x" * BLOCK + bytes(2 * BLOCK)))
    assert [(m.path, m.skipped) for m in capture.members] == [
        ("ok.log", None), ("big.sparse", "decompression ratio above 250:1 (bomb?)")]


def test_long_member_names_are_skipped_without_being_held(tmp_path: Path) -> None:
    entries = [tar_file("ok.log", OK_LOG)] + [tar_file(f"d{k:03d}" + "n" * 100_000) for k in range(20)]
    entries.append(tar_file("n" * (MEMBER_NAME_CAP_CHARS + 1), OK_LOG))
    capture = _read(tmp_path, "names.tar", tar_bytes(entries, format=tarfile.PAX_FORMAT))
    assert capture.members[0].path == "ok.log" and capture.members[0].data == OK_LOG
    assert max(len(m.path) for m in capture.members) <= 201
    reasons = {m.skipped.split(" (")[0] for m in capture.members if m.skipped}
    assert reasons == {"tar extended header of 97.7 KiB skipped", f"name longer than {MEMBER_NAME_CAP_CHARS} characters"}


COMPRESSORS = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress, "zst": zstandard.compress}


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_compressed_stream_cut_after_the_tar_end_is_partial(tmp_path: Path, suffix: str) -> None:
    whole = COMPRESSORS[suffix](tar_bytes([tar_file("ok.log", OK_LOG * 50), tar_file("two.log", OK_LOG)]))
    capture = _read(tmp_path, f"cut.tar.{suffix}", whole[:-6])
    if suffix == "zst":
        # one zstd block holds everything: the cut stream decodes to nothing and is read as one file
        assert capture.members[0].skipped.startswith("truncated ")
    else:
        assert [m.path for m in capture.members] == ["ok.log", "two.log"]
        assert "stream ends early" in capture.partial


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


def test_a_zip_entry_with_an_empty_name_is_skipped(tmp_path: Path) -> None:
    data = bytearray(zip_bytes([("ok.log", OK_LOG), ("x", b"hello")]))
    central = data.rindex(b"PK\x01\x02")
    data[central + 28 : central + 30] = struct.pack("<H", 0)
    del data[central + 46]
    end = data.rindex(b"PK\x05\x06")
    data[end + 12 : end + 16] = struct.pack("<I", struct.unpack_from("<I", data, end + 12)[0] - 1)
    capture = _read(tmp_path, "empty-name.zip", bytes(data))
    assert [(m.path, m.skipped) for m in capture.members] == [("ok.log", None), ("", "empty path")]


def test_a_damaged_central_directory_entry_keeps_every_member(tmp_path: Path) -> None:
    data = bytearray(zip_bytes([("ok.log", OK_LOG), ("two.log", OK_LOG)]))
    data[data.rindex(b"PK\x01\x02") + 1] = ord("X")
    capture = _read(tmp_path, "damaged.zip", bytes(data))
    assert [(m.path, m.data) for m in capture.members] == [("ok.log", OK_LOG), ("two.log", OK_LOG)]
    assert capture.partial.startswith("zip central directory unusable (BadZipFile: Bad magic number")


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
        archive.writestr("ok.log", OK_LOG * 30)
        archive.writestr("two.log", OK_LOG)
    data = bytes(sink.buffer)
    assert struct.unpack_from("<H", data, 6)[0] & 0x08
    capture = _read(tmp_path, "streamed.zip", data[: data.index(b"PK\x01\x02") + 5])
    assert [(m.path, m.data) for m in capture.members] == [("ok.log", OK_LOG * 30), ("two.log", OK_LOG)]
