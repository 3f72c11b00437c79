"""``dbdiag analyze CAPTURE --tables DIR``: the declared schemas, Hive partitions, no literal in any file,
no file replaced, bad folders refused in one line, the host pseudonymized with ``--pseudonymize``."""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import polars as pl
import pytest

from dbdiag.tables import export as x
from tests.cli_in_process import run
from tests.conftest import REPO

PG_CAPTURE = REPO / "fixtures" / "real" / "pg-stale-stats-full-scan.tar.gz"
CARD = "4111111111111111"  # planted for the literal (the fixture's own is 'SPRING-50')
HOST = "bank-db07"
MPSTAT = f"""Linux 6.1.0-18-amd64 ({HOST}) \t11/29/2026 \t_x86_64_\t(2 CPU)

09:34:06 PM  CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle
09:34:07 PM  all   10.00    0.00    5.00    0.00    0.00    1.00    0.00    0.00    0.00   84.00
09:34:07 PM    0   12.00    0.00    6.00    0.00    0.00    2.00    0.00    0.00    0.00   80.00
09:34:07 PM    1    8.00    0.00    4.00    0.00    0.00    0.00    0.00    0.00    0.00   88.00
"""


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real PostgreSQL capture as a folder, with a card number as its literal and an mpstat naming the host."""
    root = tmp_path_factory.mktemp("planted")
    with tarfile.open(PG_CAPTURE) as archive:  # member by member: extractall's filter= is 3.11.4+, the floor is 3.11
        for member in archive.getmembers():
            if member.isfile():
                target = root / member.name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(archive.extractfile(member).read())
    log = root / "capture" / "db" / "postgresql.log"
    text = log.read_text(encoding="utf-8")
    assert "SPRING-50" in text
    log.write_text(text.replace("SPRING-50", CARD), encoding="utf-8")
    (root / "capture" / "os").mkdir()
    (root / "capture" / "os" / "mpstat.txt").write_text(MPSTAT, encoding="utf-8")
    return root / "capture"


@pytest.fixture(scope="module")
def exported(planted: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("export")
    code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(out / "report.json"), "--tables", str(out / "tables"))
    assert code == 0, err
    return out / "tables", json.loads((out / "report.json").read_text(encoding="utf-8"))


def parquet_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.parquet"))


def all_strings(path: Path) -> set[str]:
    frame = pl.read_parquet(path)
    return {v for c, d in frame.schema.items() if d == pl.String for v in frame[c].drop_nulls().to_list()}


def test_every_file_has_its_declared_schema_and_its_partition_path(exported):
    tables, _ = exported
    files = parquet_files(tables)
    assert {p.relative_to(tables).parts[0] for p in files} >= {x.STATEMENT, x.STATEMENT_CLASS, x.PLAN_NODE, x.EVENT, x.PER_CPU, x.FINDING, x.CAPTURE}
    ids = {p.stem for p in files}
    assert len(ids) == 1 and len(ids.pop()) == 16
    for path in files:
        table, host, day, _ = path.relative_to(tables).parts
        assert host == f"host={HOST}"
        assert day.startswith("day=") and (day == "day=unknown" or len(day) == len("day=2026-11-29"))
        assert dict(pl.read_parquet_schema(path)) == x.EXPORT_SCHEMAS[table], path  # no host/day columns inside
        frame = pl.read_parquet(path)
        assert frame.height > 0 and frame["capture_id"].unique().to_list() == [path.stem]


def test_rows_are_the_analysis_rows(exported):
    tables, document = exported
    read = pl.scan_parquet(tables / x.STATEMENT / "**" / "*.parquet", hive_partitioning=True).collect()
    assert read.height == sum(i["records"] for i in document["inputs"] if i["kind"] == "postgresql-log")  # one record a statement
    assert read["host"].unique().to_list() == [HOST]
    assert [str(d) for d in read["day"].unique().to_list()] == ["2026-11-29"]  # polars reads the partition as a date
    findings = pl.read_parquet(tables / x.FINDING / "**" / "*.parquet")
    assert findings["finding_id"].to_list() == [f["id"] for f in document["findings"]]
    capture = pl.read_parquet(tables / x.CAPTURE / "**" / "*.parquet").to_dicts()
    assert capture[0]["export_schema_version"] == x.EXPORT_SCHEMA_VERSION and capture[0]["statements"] == read.height
    assert capture[0]["literals_shown"] is False


def test_no_literal_reaches_any_file(planted: Path, exported):
    tables, _ = exported
    assert CARD in (planted / "db" / "postgresql.log").read_text(encoding="utf-8")
    for path in tables.rglob("*"):
        if path.is_file():
            assert CARD.encode() not in path.read_bytes(), path
            assert not any(CARD in value for value in all_strings(path)), path


def test_show_literals_keeps_them(planted: Path, tmp_path: Path):
    """The control of the test above: the planted literal is findable when it is meant to be there."""
    code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", str(tmp_path / "t"), "--show-literals")
    assert code == 0, err
    assert any(CARD in v for p in parquet_files(tmp_path / "t") for v in all_strings(p))


def test_a_second_export_of_the_capture_is_refused_and_replaces_nothing(planted: Path, exported, tmp_path: Path):
    tables, _ = exported
    before = {p: p.stat().st_mtime_ns for p in parquet_files(tables)}
    code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", str(tables))
    assert code == 2
    line = err.strip()
    assert "\n" not in line and "is already in" in line and next(iter(before)).stem in line
    assert {p: p.stat().st_mtime_ns for p in parquet_files(tables)} == before
    assert not (tmp_path / "r.json").exists()  # refused before any report


def test_the_same_capture_copied_elsewhere_keeps_its_id(planted: Path, exported, tmp_path: Path):
    tables, _ = exported
    copy = tmp_path / "elsewhere" / planted.name  # the id is of the name and the inventory, not of the place
    shutil.copytree(planted, copy)
    code, _, err = run("analyze", str(copy), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", str(tables))
    assert code == 2 and "is already in" in err


def test_pseudonymized_host_and_names(planted: Path, tmp_path: Path):
    code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", str(tmp_path / "t"), "--pseudonymize")
    assert code == 0, err
    files = parquet_files(tmp_path / "t")
    hosts = {p.relative_to(tmp_path / "t").parts[1] for p in files}
    assert hosts == {"host=host-1"}
    for path in files:
        assert HOST.encode() not in path.read_bytes() and not any(HOST in v for v in all_strings(path)), path
    capture = pl.read_parquet(tmp_path / "t" / x.CAPTURE / "**" / "*.parquet")
    assert capture["pseudonymized"].to_list() == [True]


def test_bad_folders_are_one_line_exit_2(planted: Path, tmp_path: Path):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    for folder, reason in ((str(a_file), "this is a file"), ("", "empty"), (str(planted / "inside"), "outside the capture"),
                           (str(a_file / "below"), "cannot create")):
        code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", folder)
        assert code == 2 and reason in err and len(err.strip().splitlines()) == 1, (folder, err)
    assert not (planted / "inside").exists() and not (tmp_path / "r.json").exists()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in read-only folders")
def test_an_unwritable_folder_is_refused(planted: Path, tmp_path: Path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code, _, err = run("analyze", str(planted), "-f", "json", "-o", str(tmp_path / "r.json"), "--tables", str(locked))
    assert code == 2 and "cannot write in the tables folder" in err


def test_analyze_without_tables_imports_nothing_new(tmp_path: Path):
    import subprocess
    import sys

    code = ("import sys; from dbdiag.cli import run; run(['analyze', sys.argv[1], '-f', 'json', '-o', sys.argv[2]]); "
            "print(sorted(m for m in sys.modules if m.startswith(('dbdiag.export_tables', 'dbdiag.fleet', 'dbdiag.tables.export', 'duckdb'))))")
    done = subprocess.run([sys.executable, "-c", code, str(PG_CAPTURE), str(tmp_path / "r.json")], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("host", ["../../etc", "/abs", "a/b", "..", ".", "x" * 400, "héllo wörld", "a=b\nc", "😀" * 300, "bad\udcff"])
def test_every_path_stays_under_the_folder(host: str, tmp_path: Path):
    from dbdiag.export_tables import Export, export_paths

    frame = pl.DataFrame({"capture_id": ["0123456789abcdef"], "day": ["2026-11-29"]})
    for path in export_paths(tmp_path, Export("0123456789abcdef", host, {x.CAPTURE: frame})).values():
        assert path.resolve().is_relative_to(tmp_path.resolve()) and len(path.relative_to(tmp_path).parts) == 4
        assert all(len(part) <= 255 and part not in (".", "..") for part in path.relative_to(tmp_path).parts)


def test_the_day_is_the_utc_date_of_the_row_else_unknown_else_the_captures():
    from datetime import datetime, timedelta, timezone

    from dbdiag.export_tables import with_day

    late = datetime(2026, 11, 29, 23, 30, tzinfo=timezone(timedelta(hours=-2)))  # 01:30 UTC the next day
    events = pl.DataFrame({"ts": [late, None]}, schema={"ts": pl.Datetime("us", "UTC")})
    assert with_day(x.EVENT, events, None, "2026-11-29")["day"].to_list() == ["2026-11-30", x.UNKNOWN_DAY]
    statements = pl.DataFrame({"start_ts": [None], "end_ts": [late]}, schema={"start_ts": pl.Datetime("us", "UTC"), "end_ts": pl.Datetime("us", "UTC")})
    assert with_day(x.STATEMENT, statements, None, "2026-11-29")["day"].to_list() == ["2026-11-30"]  # end when no start
    assert with_day(x.PER_CPU, pl.DataFrame({"cpu": [0]}), None, "2026-11-29")["day"].to_list() == ["2026-11-29"]
    nodes = pl.DataFrame({"source": ["a", "a"], "stmt_id": [1, 2]})
    dated = pl.DataFrame({"source": ["a"], "stmt_id": [1], "day": ["2026-11-30"]})
    assert with_day(x.PLAN_NODE, nodes, dated, "2026-11-29")["day"].to_list() == ["2026-11-30", x.UNKNOWN_DAY]


def test_the_export_schema_is_the_one_recorded_for_its_version():
    """A column renamed, retyped or removed must come with a new EXPORT_SCHEMA_VERSION (and its record):
    fleets hold files of older versions. A new version's record: ``{"export_schema_version": N, "tables":
    {table: {column: str(dtype)}}}`` of ``EXPORT_SCHEMAS``, as golden/export-schema-vN.json."""
    recorded = Path(__file__).resolve().parent / "golden" / f"export-schema-v{x.EXPORT_SCHEMA_VERSION}.json"
    assert recorded.is_file(), f"no record of export schema version {x.EXPORT_SCHEMA_VERSION}: write {recorded.name}"
    document = json.loads(recorded.read_text())
    assert document["export_schema_version"] == x.EXPORT_SCHEMA_VERSION
    current = {table: {column: str(dtype) for column, dtype in schema.items()} for table, schema in x.EXPORT_SCHEMAS.items()}
    for table, columns in document["tables"].items():
        assert table in current, f"table {table} removed: bump EXPORT_SCHEMA_VERSION"
        for column, dtype in columns.items():
            assert current[table].get(column) == dtype, f"{table}.{column} was {dtype}, is {current[table].get(column)}: bump the version"
