"""Damaged archives through the real CLI (issue 11): the good mpstat member beside each bad one
of ``test_capture_damaged`` is still read, with exit 3 (partial) when data was lost; an unreadable
member of a directory capture is partial too. Also ``merge_tables`` on the tables of 5,000
members (one cast per schema)."""

from __future__ import annotations

import errno
import gzip
import json
import lzma
import os
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from dbdiag import pipeline, tables
from dbdiag.cli import app
from dbdiag.parsers.base import ParseResult
from hostile import BLOCK, GOOD_MPSTAT
from test_capture_damaged import (
    AFTER,
    BAD_TAR_MEMBERS,
    END,
    GOOD,
    zip_damaged_central_entry,
    zip_entry_of_a_newer_version,
    zip_truncated,
    zip_utf8_flag_bad_name,
    zip_with_empty_name,
)


# ---------------------------------------------------------------------------------------------
# The real CLI, a good mpstat member beside each bad one


# name -> (bytes, mpstat members in it, exit code: 3 when data was lost)
CLI_CASES = {
    **{f"{kind}.tar": (GOOD + blocks + AFTER + END, 2, 3) for kind, (blocks, _) in BAD_TAR_MEMBERS.items()},
    "cut-marker.tar.gz": (gzip.compress(GOOD + bytes(BLOCK)), 1, 3),
    "cut-stream.tar.xz": (lzma.compress(GOOD + AFTER + END)[:-6], 2, 3),
    "empty-name.zip": (zip_with_empty_name(), 1, 0),  # an unsafe path, like an absolute one: nothing lost
    "utf8-flag-bad-name.zip": (zip_utf8_flag_bad_name(), 1, 3),
    "damaged-central-entry.zip": (zip_damaged_central_entry(), 1, 3),
    "truncated.zip": (zip_truncated(), 1, 3),
    "newer-version-entry.zip": (zip_entry_of_a_newer_version(), 1, 3),
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
