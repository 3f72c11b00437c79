"""dbdiag.settings: sizes in bytes across engines' spellings, and the value of a setting from db_setting."""

from __future__ import annotations

import polars as pl
import pytest

from dbdiag.parsers import mysql_variables, pg_conf, pg_settings
from dbdiag.parsers.base import ParseContext
from dbdiag.settings import setting, size_bytes
from dbdiag.tables import DB_SETTING_SCHEMA
from tests.conftest import REPO

FIXTURES = REPO / "fixtures" / "dbconfig"
KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


@pytest.mark.parametrize(
    ("value", "unit", "expected"),
    [
        ("134217728", None, 128 * MiB),  # MySQL innodb_buffer_pool_size
        ("0", None, 0),
        ("128M", None, 128 * MiB),  # my.cnf suffixes
        ("1G", None, GiB),
        ("128MB", None, 128 * MiB),  # PostgreSQL SHOW
        ("8GB", None, 8 * GiB),
        ("'8GB'", None, 8 * GiB),  # postgresql.conf quoted
        ("128kB", None, 128 * KiB),
        ("16384", "8kB", 128 * MiB),  # pg_settings shared_buffers
        ("4096", "kB", 4 * MiB),  # pg_settings work_mem
        ("1024", "MB", GiB),  # pg_settings max_wal_size
        ("8192", "B", 8 * KiB),  # pg_settings block_size
        ("2GiB", None, 2 * GiB),  # TiKV storage.block-cache.capacity
        ("512MB", None, 512 * MiB),
        ("1.5GB", None, int(1.5 * GiB)),  # TiKV rocksdb *cf.block-cache-size
        (" 64KB ", None, 64 * KiB),
        ("1TB", None, 1 << 40),
    ],
)
def test_size_bytes(value: str, unit: str | None, expected: int) -> None:
    assert size_bytes(value, unit) == expected


@pytest.mark.parametrize(
    ("value", "unit"),
    [
        ("200", "ms"),  # a time, not a size
        ("200ms", None),
        ("-1", "kB"),  # autovacuum_work_mem: use maintenance_work_mem
        ("-1", None),
        ("on", None),
        ("", None),
        (None, None),
        ("8GB", "kB"),  # suffix and unit column together: ambiguous
        ("12 apples", None),
        ("1e9", None),
        ("16384", "8 pages"),
    ],
)
def test_size_bytes_refuses_non_sizes(value: str | None, unit: str | None) -> None:
    assert size_bytes(value, unit) is None


def test_same_size_from_every_postgresql_form() -> None:
    def table(spec, name: str) -> pl.DataFrame:
        return spec.parse((FIXTURES / name).read_text(), ParseContext(name)).tables["db_setting"]

    show_all = table(pg_settings.SPEC, "pg15-show-all.txt")
    catalog = table(pg_settings.SPEC, "pg15-settings-copy.csv")
    conf = table(pg_conf.SPEC, "pg15-initdb-postgresql.conf")
    row = catalog.filter(pl.col("name") == "shared_buffers").row(0, named=True)
    sizes = {
        size_bytes(setting(show_all, "shared_buffers"), None),
        size_bytes(row["value"], row["unit"]),
        size_bytes(setting(conf, "shared_buffers"), None),
    }
    assert sizes == {128 * MiB}


def test_setting_takes_the_last_row_case_insensitively() -> None:
    frame = pl.DataFrame(
        {
            "engine": ["postgresql", "postgresql", "mariadb"],
            "kind": ["config", "config", "variable"],
            "name": ["shared_buffers", "Shared_Buffers", "max_connections"],
            "value": ["128MB", "8GB", "151"],
            "unit": [None, None, None],
            "source": ["a", "b", "c"],
        },
        schema=DB_SETTING_SCHEMA,
    )
    assert setting(frame, "SHARED_BUFFERS") == "8GB"
    assert setting(frame, "shared_buffers", engine="PostgreSQL") == "8GB"
    assert setting(frame, "shared_buffers", engine="mariadb") is None
    assert setting(frame, "max_connections") == "151"
    assert setting(frame, "work_mem") is None
    assert setting(frame.clear(), "max_connections") is None


def test_setting_on_a_parsed_member() -> None:
    text = (FIXTURES / "mariadb-variables-and-status.tsv").read_text()
    table = mysql_variables.SPEC.parse(text, ParseContext("x")).tables["db_setting"]
    assert setting(table, "innodb_buffer_pool_size", engine="mariadb") == "268435456"
    assert setting(table, "uptime") is not None and setting(table, "Uptime") == setting(table, "UPTIME")
    assert setting(table, "innodb_buffer_pool_size", engine="mysql") is None
