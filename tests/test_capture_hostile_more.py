"""More crafted archives (issue 11): a bad tar header costs its own member only, sparse maps are
bounded, a cut end-of-archive marker is partial, and through the real CLI the good mpstat member
beside each bad one is still read, with exit 3 (partial) when data was lost."""

from __future__ import annotations

import bz2
import errno
import gzip
import io
import json
import lzma
import os
import struct
import tarfile
import tracemalloc
import zipfile
from pathlib import Path

import polars as pl
import pytest
import zstandard
from typer.testing import CliRunner

from dbdiag import capture, pipeline, tables
from dbdiag.parsers.base import ParseResult
from dbdiag.capture import read_capture
from dbdiag.capture_tar_headers import SPARSE_REGIONS_CAP, TAR_METADATA_CHAIN_CAP
from dbdiag.cli import app
from hostile import (
    BLOCK,
    GOOD_MPSTAT,
    gnu_sparse_header,
    padded,
    pax_header,
    raw_member,
    ustar_header,
    zip_bytes,
)

END = bytes(2 * BLOCK)
GOOD = raw_member("mpstat.txt", GOOD_MPSTAT)
AFTER = raw_member("after/mpstat.txt", GOOD_MPSTAT)
SPARSE_01 = {"GNU.sparse.major": "0", "GNU.sparse.minor": "1", "GNU.sparse.name": "s.log"}
SPARSE_10 = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": "s.log", "GNU.sparse.realsize": "10"}


def _read(tmp_path: Path, name: str, data: bytes) -> capture.Capture:
    path = tmp_path / name
    path.write_bytes(data)
    return read_capture(path)


def _outcome(result: capture.Capture) -> list[tuple[str, str | None]]:
    return [(m.path, m.skipped) for m in result.members]


def _pax_chain(count: int) -> bytes:
    record = b"19 comment=aaaaaaa\n"  # the length counts the whole record (strict tarfiles check it)
    return (ustar_header("pax", tarfile.XHDTYPE, len(record)) + record + bytes(BLOCK - len(record))) * count


# ---------------------------------------------------------------------------------------------
# tar: a bad header costs its member, not the rest of the archive

# name -> (the blocks between the good members, the skip reason of the member they spoil)
BAD_TAR_MEMBERS = {
    "pax-chain": (
        _pax_chain(2000) + raw_member("x.log", b"hello\n"),
        f"corrupt tar header: more than {TAR_METADATA_CHAIN_CAP} extended headers in a row (not read)",
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
}


@pytest.mark.parametrize("kind", sorted(BAD_TAR_MEMBERS))
def test_a_bad_tar_header_skips_its_member_and_the_archive_goes_on(tmp_path: Path, kind: str) -> None:
    blocks, reason = BAD_TAR_MEMBERS[kind]
    result = _read(tmp_path, f"{kind}.tar", GOOD + blocks + AFTER + END)
    assert [m.skipped for m in result.members] == [None, reason, None]
    assert [result.members[0].data, result.members[2].data] == [GOOD_MPSTAT, GOOD_MPSTAT]
    assert result.partial is None  # the skip reason says "corrupt": the analysis counts it as lost


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
# the end of a tar

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


# ---------------------------------------------------------------------------------------------
# merge_tables: 5,000 members' tables


def test_merge_tables_casts_frames_of_one_schema_once(monkeypatch: pytest.MonkeyPatch) -> None:
    loose = tables.host_fact_frame([("k", "v")], "a.txt").with_columns(pl.lit(1).alias("value"))
    calls: list[str] = []
    real_conform = tables.conform
    monkeypatch.setattr(tables, "conform", lambda name, frame: calls.append(name) or real_conform(name, frame))
    merged = pipeline.merge_tables([ParseResult(tables={tables.HOST_FACT: loose}) for _ in range(50)])
    assert calls == [tables.HOST_FACT]
    assert merged[tables.HOST_FACT].schema == pl.Schema(tables.SCHEMAS[tables.HOST_FACT])
    assert merged[tables.HOST_FACT]["value"].to_list() == ["1"] * 50


def test_merge_tables_casts_mixed_frames_one_by_one() -> None:
    ready = tables.host_fact_frame([("k", "v")], "a.txt")
    merged = pipeline.merge_tables([ParseResult(tables={tables.HOST_FACT: frame}) for frame in (ready, ready.drop("source"))])
    assert merged[tables.HOST_FACT].schema == pl.Schema(tables.SCHEMAS[tables.HOST_FACT])
    assert merged[tables.HOST_FACT]["source"].to_list() == ["a.txt", None]


# ---------------------------------------------------------------------------------------------
# The real CLI, a good mpstat member beside each bad one


def _zip_with_empty_name() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("x", b"hello")]))
    central = data.rindex(b"PK\x01\x02")
    data[central + 28 : central + 30] = struct.pack("<H", 0)
    del data[central + 46]
    end = data.rindex(b"PK\x05\x06")
    data[end + 12 : end + 16] = struct.pack("<I", struct.unpack_from("<I", data, end + 12)[0] - 1)
    return bytes(data)


def _zip_utf8_flag_bad_name() -> bytes:
    data = zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("caf\u00e9.log", b"hello\n")])
    return data.replace("caf\u00e9".encode(), b"caf\xe9\xff")  # flagged UTF-8, and not UTF-8


def _zip_damaged_central_entry() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", b"hello\n")]))
    data[data.rindex(b"PK\x01\x02") + 1] = ord("X")
    return bytes(data)


def _zip_entry_of_a_newer_version() -> bytes:
    data = bytearray(zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", b"hello\n")]))
    struct.pack_into("<H", data, data.rindex(b"PK\x01\x02") + 6, 186)  # "needs zip 18.6": NotImplementedError
    return bytes(data)


def _zip_truncated() -> bytes:
    data = zip_bytes([("mpstat.txt", GOOD_MPSTAT), ("two.log", os.urandom(4000))], compression=zipfile.ZIP_STORED)
    return data[: data.index(b"two.log") + 1000]


# name -> (bytes, mpstat members in it, exit code: 3 when data was lost)
CLI_CASES = {
    **{f"{kind}.tar": (GOOD + blocks + AFTER + END, 2, 3) for kind, (blocks, _) in BAD_TAR_MEMBERS.items()},
    "sparse-2gib.tar": (GOOD + gnu_sparse_header("big.sparse", [(2 * 1024**3 - BLOCK, BLOCK)], 2 * 1024**3)
                        + padded(b"x" * BLOCK) + AFTER + END, 2, 3),
    "cut-marker.tar.gz": (gzip.compress(GOOD + bytes(BLOCK)), 1, 3),
    "cut-stream.tar.xz": (lzma.compress(GOOD + AFTER + END)[:-6], 2, 3),
    "empty-name.zip": (_zip_with_empty_name(), 1, 0),  # an unsafe path, like an absolute one: nothing lost
    "utf8-flag-bad-name.zip": (_zip_utf8_flag_bad_name(), 1, 3),
    "damaged-central-entry.zip": (_zip_damaged_central_entry(), 1, 3),
    "truncated.zip": (_zip_truncated(), 1, 3),
    "newer-version-entry.zip": (_zip_entry_of_a_newer_version(), 1, 3),
}


def _analyze_cli(capture_path: Path, out: Path):
    result = CliRunner().invoke(app, ["analyze", str(capture_path), "-f", "json", "-o", str(out)])
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback: {result.exception!r}") from result.exception
    return result.exit_code, json.loads(out.read_text())


@pytest.mark.parametrize("name", sorted(CLI_CASES))
def test_the_cli_reads_the_good_member_beside_each_bad_one(tmp_path: Path, name: str) -> None:
    data, mpstat_members, expected_exit = CLI_CASES[name]
    (tmp_path / name).write_bytes(data)
    exit_code, report = _analyze_cli(tmp_path / name, tmp_path / "r.json")
    mpstat = [i for i in report["inputs"] if i["path"].endswith("mpstat.txt")]
    assert [(i["kind"], i["status"]) for i in mpstat] == [("mpstat-text", "read")] * mpstat_members
    assert (exit_code, report["capture"]["partial"]) == (expected_exit, expected_exit == 3)


@pytest.mark.parametrize("failure", ["read raises EIO", "removed after listing"])
def test_an_unreadable_directory_member_makes_the_capture_partial(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    root = tmp_path / "capture"
    (root / "os").mkdir(parents=True)
    (root / "os" / "mpstat.txt").write_bytes(GOOD_MPSTAT)
    victim = root / "db.log"
    victim.write_bytes(b"data\n")
    real_open = os.open

    def failing_open(path, flags, *args, **kwargs):
        if os.fspath(path) != str(victim):
            return real_open(path, flags, *args, **kwargs)
        if failure == "removed after listing":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path))
        return real_open("/proc/self/mem", os.O_RDONLY)  # a regular file whose first read fails with EIO

    monkeypatch.setattr(os, "open", failing_open)
    exit_code, report = _analyze_cli(root, tmp_path / "r.json")
    lost = [i for i in report["inputs"] if i["path"] == "db.log"]
    assert lost[0]["skipped"].startswith("unreadable: ")
    assert exit_code == 3 and report["capture"]["partial"]
    assert any(i["kind"] == "mpstat-text" for i in report["inputs"])
