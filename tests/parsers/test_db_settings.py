"""Database settings parsers: SHOW GLOBAL VARIABLES/STATUS, SHOW ALL/pg_settings, postgresql.conf, TiDB/TiKV/PD TOML.

Goldens over the real capture's SHOW GLOBAL VARIABLES/STATUS and every fixture in fixtures/dbconfig
(see its README for the commands that produced them), values checked by hand against the raw files,
detection against every registered parser and the whole corpus, and hostile input.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, mysql_variables, pg_conf, pg_settings, tidb_config
from dbdiag.parsers.base import DETECT_HEAD_BYTES, ParseContext, ParseError
from dbdiag.settings import setting, size_bytes
from tests.captures import capture_text
from tests.conftest import REPO

FIXTURES = REPO / "fixtures" / "dbconfig"
MARIADB_CAPTURE = "mariadb-sysbench-debian12.tar.gz"
CAPTURE_MEMBERS = ("capture/db/global_variables.tsv", "capture/db/global_status.tsv")
OURS = (mysql_variables.SPEC, pg_settings.SPEC, pg_conf.SPEC, tidb_config.SPEC)
# Real upstream files fetched by hand (see fixtures/dbconfig/README.md); not committed (size, licence).
REAL_TOML = Path("/tmp/db-settings/real-toml")
REAL_TOML_FILES = {
    "pd-config.toml": "pd",  # tikv/pd conf/config.toml
    "tikv-config-template.toml": "tikv",  # tikv/tikv etc/config-template.toml
    "tidb-config.toml.example": "tidb",  # pingcap/tidb pkg/config/config.toml.example
    "compose-tidb.toml": "tidb",  # pingcap/tidb-docker-compose config/*.toml
    "compose-tikv.toml": "tikv",
    "compose-pd.toml": "pd",
    "compose-tiflash-learner-nightly.toml": "tikv",  # TiFlash's proxy is a TiKV: same keys
}
# Other TiDB-ecosystem TOML (binlog pump/drainer, TiFlash) that must not be claimed.
REAL_OTHER_TOML = ("compose-drainer.toml", "compose-pump.toml", "compose-tiflash-nightly.toml")


def _spec_for_fixture(name: str):
    if name.startswith("mariadb-"):
        return mysql_variables.SPEC
    if name.endswith(".toml"):
        return tidb_config.SPEC
    if name.endswith(".conf"):
        return pg_conf.SPEC
    return pg_settings.SPEC


FIXTURE_FILES = sorted(p.name for p in FIXTURES.iterdir() if p.name != "README.md")


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="backslashreplace")


def _parse(spec, text: str, source: str = "test"):
    return spec.parse(text, ParseContext(source=source))


def _values(result) -> dict[str, str]:
    return dict(result.tables["db_setting"].select("name", "value").rows())


def _assert_only(spec, text: str, name: str) -> None:
    """``spec`` claims ``text`` and no other registered (or sibling) parser does."""
    head = text[:DETECT_HEAD_BYTES]
    assert spec.detect(head, name) > 0.5, f"{spec.kind} does not claim {name}"
    assert spec.detect(head, "member") > 0.5, f"{spec.kind} needs the name to claim {name}"
    for other in {*PARSERS, *OURS} - {spec}:
        assert other.detect(head, name) <= 0.5, f"{other.kind} claims {name}"


# --------------------------------------------------------------------------------------------
# Goldens


def test_fixture_sizes_and_readme() -> None:
    readme = _read(FIXTURES / "README.md")
    for name in FIXTURE_FILES:
        assert (FIXTURES / name).stat().st_size < 60_000, name
        assert name in readme, f"{name} is not described in fixtures/dbconfig/README.md"


# --------------------------------------------------------------------------------------------
# MySQL / MariaDB: values checked against the raw files


def test_mariadb_capture_variables_by_hand() -> None:
    result = _parse(mysql_variables.SPEC, capture_text(MARIADB_CAPTURE, CAPTURE_MEMBERS[0]))
    table, values = result.tables["db_setting"], _values(result)
    assert result.records == 656  # 657 lines with the Variable_name header
    assert values["innodb_buffer_pool_size"] == "268435456"  # --innodb-buffer-pool-size=256M
    assert size_bytes(values["innodb_buffer_pool_size"], None) == 256 << 20
    assert values["version"] == "10.11.19-MariaDB-0+deb12u1-log"
    assert values["datadir"] == "/tmp/rwc.zvzY/data/"
    assert values["analyze_sample_percentage"] == "100.000000"
    assert table["engine"].unique().to_list() == ["mariadb"]
    assert table["kind"].unique().to_list() == ["variable"]
    assert table["unit"].null_count() == 656
    assert setting(table, "INNODB_BUFFER_POOL_SIZE", engine="mariadb") == "268435456"


def test_mariadb_capture_status_by_hand() -> None:
    result = _parse(mysql_variables.SPEC, capture_text(MARIADB_CAPTURE, CAPTURE_MEMBERS[1]))
    table, values = result.tables["db_setting"], _values(result)
    assert result.records == 562
    assert table["kind"].unique().to_list() == ["status"]
    assert values["Aborted_clients"] == "0"
    assert (values["Uptime"], values["Com_select"], values["Innodb_buffer_pool_reads"]) == ("12", "4130", "170")
    assert {"Uptime", "Com_select", "Threads_running", "Innodb_buffer_pool_reads"} <= values.keys()
    assert values["wsrep_cluster_size"] == "0"  # lower-case Galera counters stay status counters
    # no version in SHOW STATUS: MariaDB is told by its Aria_*/Feature_* counters, and said so
    assert table["engine"].unique().to_list() == ["mariadb"]
    assert any("inferred from MariaDB-only names" in n for n in result.notes)


def test_all_mysql_forms_agree() -> None:
    """Batch, \\G and boxed outputs of the same server give the same rows (innodb% variables are static)."""
    vertical = _parse(mysql_variables.SPEC, _read(FIXTURES / "mariadb-variables-innodb-vertical.txt"))
    boxed = _parse(mysql_variables.SPEC, _read(FIXTURES / "mariadb-variables-innodb-boxed.txt"))
    full = _values(_parse(mysql_variables.SPEC, _read(FIXTURES / "mariadb-global-variables-noheader.tsv")))
    assert vertical.records == boxed.records == 142
    assert _values(vertical) == _values(boxed)
    assert all(full[name] == value for name, value in _values(vertical).items())
    assert full["innodb_buffer_pool_size"] == "268435456"
    assert vertical.tables["db_setting"]["engine"].null_count() == 142  # a LIKE subset: nothing tells
    admin = _values(_parse(mysql_variables.SPEC, _read(FIXTURES / "mariadb-mysqladmin-variables-subset.txt")))
    assert admin["optimizer_switch"] == full["optimizer_switch"] and len(admin["optimizer_switch"]) == 846
    assert admin["version"] == full["version"] == "10.11.19-MariaDB-0+deb12u1"


def test_escapes_and_multiline_values() -> None:
    # SET GLOBAL init_connect = 'SET @a=1;<TAB>SET @b=''x\\\\y'';<NEWLINE>SET @c=3' (see the README)
    expected = "SET @a=1;\tSET @b='x\\\\y';\nSET @c=3"
    for name in ("mariadb-init-connect-escapes.tsv", "mariadb-init-connect-escapes-boxed.txt",
                 "mariadb-init-connect-escapes-vertical.txt"):
        assert _values(_parse(mysql_variables.SPEC, _read(FIXTURES / name))) == {"init_connect": expected}, name


def test_variables_and_status_in_one_member() -> None:
    text = _read(FIXTURES / "mariadb-variables-and-status.tsv")
    both = _parse(mysql_variables.SPEC, text).tables["db_setting"]
    counts = dict(both.group_by("kind").len().rows())
    assert counts == {"variable": 656, "status": 562}
    assert both.filter(pl.col("name") == "Uptime")["kind"].item() == "status"
    assert both.filter(pl.col("name") == "version")["kind"].item() == "variable"
    assert both["engine"].unique().to_list() == ["mariadb"]
    # the same without the headers (mysql -N): split where the names change case
    headerless = _parse(mysql_variables.SPEC, text.replace("Variable_name\tValue\n", "")).tables["db_setting"]
    assert headerless["kind"].to_list() == both["kind"].to_list()


def test_mysqladmin_extended_status_is_status() -> None:
    result = _parse(mysql_variables.SPEC, _read(FIXTURES / "mariadb-mysqladmin-extended-status.txt"))
    table = result.tables["db_setting"]
    assert result.records == 562 and table["kind"].unique().to_list() == ["status"]
    assert _values(result)["Innodb_page_size"] == "16384"


@pytest.mark.parametrize(
    ("version", "comment", "engine"),
    [
        ("8.0.36-28", "Percona Server (GPL), Release 28, Revision 47601f19", "percona"),
        ("8.0.36", "MySQL Community Server - GPL", "mysql"),
        ("10.6.16-MariaDB", "MariaDB Server", "mariadb"),
        ("10.11.6-0+deb12u1-log", "MariaDB package", "mariadb"),  # comment tells when version does not
    ],
)
def test_engine_from_version(version: str, comment: str, engine: str) -> None:
    text = f"Variable_name\tValue\nmax_connections\t151\nversion\t{version}\nversion_comment\t{comment}\n"
    assert _parse(mysql_variables.SPEC, text).tables["db_setting"]["engine"].unique().to_list() == [engine]


def test_status_only_without_hints_has_no_engine() -> None:
    text = "Variable_name\tValue\nUptime\t3600\nThreads_running\t4\nCom_select\t100\n"
    result = _parse(mysql_variables.SPEC, text)
    assert result.tables["db_setting"]["engine"].to_list() == [None, None, None]
    assert result.tables["db_setting"]["kind"].unique().to_list() == ["status"]


# --------------------------------------------------------------------------------------------
# PostgreSQL settings: values checked against the raw files


def test_pg_settings_units_by_hand() -> None:
    table = _parse(pg_settings.SPEC, _read(FIXTURES / "pg15-settings-name-setting-unit.txt")).tables["db_setting"]
    shared = table.filter(pl.col("name") == "shared_buffers").row(0, named=True)
    assert (shared["value"], shared["unit"]) == ("16384", "8kB")
    assert (shared["engine"], shared["kind"]) == ("postgresql", "variable")
    assert size_bytes(shared["value"], shared["unit"]) == 128 << 20
    assert setting(table, "work_mem") == "4096" and table.filter(pl.col("name") == "work_mem")["unit"].item() == "kB"
    assert table.filter(pl.col("name") == "max_connections")["unit"].item() is None


def test_pg_show_all_forms_agree() -> None:
    def rows(name: str) -> dict[str, str]:
        result = _parse(pg_settings.SPEC, _read(FIXTURES / name))
        assert result.records == 354  # "(354 rows)"
        return {n: v.rstrip() for n, v in _values(result).items()}

    aligned = rows("pg15-show-all.txt")
    assert aligned == rows("pg15-show-all-wrapped.txt") == rows("pg15-show-all-At.txt")
    assert aligned["shared_buffers"] == "128MB" and aligned["DateStyle"] == "ISO, MDY"
    assert aligned["autovacuum_freeze_max_age"] == "200000000"  # wrapped as "2000000." + ".00"
    copied = _values(_parse(pg_settings.SPEC, _read(FIXTURES / "pg15-settings-copy.csv")))
    settings = {n: v.rstrip() for n, v in copied.items()}
    assert settings == rows("pg15-settings-name-setting-unit-A.txt") == rows("pg15-settings-name-setting-unit.txt")
    assert settings["shared_buffers"] == "16384"


def test_pg_at_third_column_is_unit_or_description() -> None:
    units = _parse(pg_settings.SPEC, "\n".join(["shared_buffers|16384|8kB", "work_mem|4096|kB",
                                                "max_connections|100|", "statement_timeout|0|ms",
                                                "archive_mode|off|"]))
    assert units.tables["db_setting"]["unit"].to_list() == ["8kB", "kB", None, "ms", None]
    described = _parse(pg_settings.SPEC, _read(FIXTURES / "pg15-show-all-At.txt"))
    assert described.tables["db_setting"]["unit"].null_count() == 354


def test_pg_aligned_multiline_value() -> None:
    text = (
        " name | setting \n"
        "------+---------\n"
        " a_b  | one    +\n"
        "      | two\n"
        " c    | x\n"
        "(2 rows)\n"
    )
    assert _values(_parse(pg_settings.SPEC, text)) == {"a_b": "one\ntwo", "c": "x"}


def test_pg_footer_mismatch_is_a_warning() -> None:
    text = " name | setting \n------+---------\n work_mem | 4MB\n(2 rows)\n"
    result = _parse(pg_settings.SPEC, text)
    assert [w.reason for w in result.warnings] == ["footer says 2 rows but 1 were read"]


# --------------------------------------------------------------------------------------------
# postgresql.conf


def test_initdb_postgresql_conf_by_hand() -> None:
    result = _parse(pg_conf.SPEC, _read(FIXTURES / "pg15-initdb-postgresql.conf"))
    values = _values(result)
    assert result.records == 13
    assert values["shared_buffers"] == "128MB" and values["max_connections"] == "100"
    assert values["datestyle"] == "iso, mdy" and values["log_timezone"] == "Etc/UTC"
    assert "work_mem" not in values  # "#work_mem = 4MB" is commented out
    assert result.tables["db_setting"]["kind"].unique().to_list() == ["config"]


def test_auto_conf_quotes() -> None:
    values = _values(_parse(pg_conf.SPEC, _read(FIXTURES / "pg15-postgresql.auto.conf")))
    assert values == {
        "work_mem": "64MB",
        "log_min_duration_statement": "200ms",
        "shared_preload_libraries": "pg_stat_statements, auto_explain",
        "search_path": '"""$user"", public"',
    }


def test_conf_sample_has_no_active_setting() -> None:
    sample = Path("/usr/share/postgresql/15/postgresql.conf.sample")
    if not sample.is_file():
        pytest.skip(f"{sample} absent: PostgreSQL 15 is not installed here")
    text = _read(sample)
    _assert_only(pg_conf.SPEC, text, "postgresql.conf.sample")
    result = _parse(pg_conf.SPEC, text)
    assert result.records == 0 and result.notes == ["no active setting: every line is a comment"]


def test_conf_syntax() -> None:
    text = (
        "shared_buffers 8GB\n"
        "work_mem='64MB'   # per sort\n"
        "include_if_exists 'local.conf'\n"
        "application_name = 'it''s \\'q\\''\n"
        "bad = 'open\n"
        "random_page_cost = 1.1 trailing\n"
        "shared_buffers = 16GB\n"
    )
    result = _parse(pg_conf.SPEC, text)
    assert result.tables["db_setting"].select("name", "value").rows() == [
        ("shared_buffers", "8GB"), ("work_mem", "64MB"), ("application_name", "it's 'q'"), ("shared_buffers", "16GB"),
    ]
    assert setting(result.tables["db_setting"], "shared_buffers") == "16GB"
    assert result.notes == [
        "line 3: include_if_exists 'local.conf' not followed (only this file is read)",
        "set more than once (the last line wins): shared_buffers",
    ]
    assert [w.line for w in result.warnings] == [5, 6]


# --------------------------------------------------------------------------------------------
# TiDB / TiKV / PD


def test_toml_fixtures_by_hand() -> None:
    tikv = _parse(tidb_config.SPEC, _read(FIXTURES / "tikv.toml")).tables["db_setting"]
    assert tikv["engine"].unique().to_list() == ["tikv"] and tikv["kind"].unique().to_list() == ["config"]
    assert setting(tikv, "storage.block-cache.capacity") == "2GiB"
    assert size_bytes(setting(tikv, "storage.block-cache.capacity"), None) == 2 << 30
    assert setting(tikv, "raftstore.sync-log") == "true"
    assert setting(tikv, "server.labels.zone") == "z1"  # inline tables are flattened too
    assert setting(tikv, "pd.endpoints") == '["10.0.1.11:2379", "10.0.1.12:2379", "10.0.1.13:2379"]'
    assert setting(tikv, "security.encryption.master-key") == '[{"type": "plaintext"}]'
    tidb = _parse(tidb_config.SPEC, _read(FIXTURES / "tidb.toml")).tables["db_setting"]
    assert tidb["engine"].unique().to_list() == ["tidb"]
    assert setting(tidb, "mem-quota-query") == "1073741824" and setting(tidb, "lease") == "45s"
    assert setting(tidb, "performance.pseudo-estimate-ratio") == "0.8"
    assert setting(tidb, "repair-table-list") == "[]"
    pd = _parse(tidb_config.SPEC, _read(FIXTURES / "pd.toml")).tables["db_setting"]
    assert pd["engine"].unique().to_list() == ["pd"]
    assert setting(pd, "lease") == "3" and setting(pd, "schedule.max-store-down-time") == "30m"


def test_toml_member_name_breaks_ties() -> None:
    text = '[log]\nlevel = "info"\n[security]\nssl-ca = ""\n'  # keys every component has
    named = _parse(tidb_config.SPEC, text, "conf/tikv-20160.toml")
    assert named.tables["db_setting"]["engine"].unique().to_list() == ["tikv"]
    undecided = _parse(tidb_config.SPEC, text, "conf/app.toml")
    assert undecided.tables["db_setting"]["engine"].null_count() == 2
    assert undecided.notes[0].startswith("component undecided")
    assert tidb_config.SPEC.detect(text, "tikv.toml") <= 0.5  # too little to claim it


@pytest.mark.parametrize("name", sorted(REAL_TOML_FILES))
def test_real_upstream_toml(name: str) -> None:
    path = REAL_TOML / name
    if not path.is_file():
        pytest.skip(f"{path} absent: fetch it as fixtures/dbconfig/README.md says to run this check")
    text = _read(path)
    _assert_only(tidb_config.SPEC, text, name)
    result = _parse(tidb_config.SPEC, text, name)
    assert result.notes[0].startswith(f"component {REAL_TOML_FILES[name]} ")


@pytest.mark.parametrize("name", REAL_OTHER_TOML)
def test_real_other_toml_not_claimed(name: str) -> None:
    path = REAL_TOML / name
    if not path.is_file():
        pytest.skip(f"{path} absent: fetch it as fixtures/dbconfig/README.md says to run this check")
    head = _read(path)[:DETECT_HEAD_BYTES]
    for spec in OURS:
        assert spec.detect(head, "member") <= 0.5, spec.kind


@pytest.mark.parametrize(
    "text",
    [
        '[project]\nname = "x"\nversion = "1"\n[tool.pytest.ini_options]\naddopts = "-ra"\n',
        '[package]\nname = "x"\n[dependencies]\nserde = "1"\n[profile.release]\nlto = true\n',
        '[server]\nport = 8080\n[log]\nlevel = "info"\n[backup]\ndir = "/b"\n',
    ],
)
def test_generic_toml_not_claimed(text: str) -> None:
    for spec in OURS:
        assert spec.detect(text, "config.toml") <= 0.5, spec.kind


# --------------------------------------------------------------------------------------------
# Detection over the whole corpus: only the MariaDB capture's two tsv members are ours


# --------------------------------------------------------------------------------------------
# Hostile input


HOSTILE = [
    "",
    "\x00\x01\x02\xff" * 2000,
    "x" * 2_000_000,
    "\n\n\n",
    "Variable_name\tValue\n",
    "| Variable_name | Value |\n| a",
    "name,setting\n\"unterminated",
    "[[[[[[[[[[",
    "a = [" * 5000,
    "*************************** 1. row ***************************\n",
]


@pytest.mark.parametrize("spec", OURS, ids=lambda s: s.kind)
@pytest.mark.parametrize("index", range(len(HOSTILE)))
def test_hostile_input(spec, index: int) -> None:
    text = HOSTILE[index]
    assert 0.0 <= spec.detect(text[:DETECT_HEAD_BYTES], "x") <= 1.0
    try:
        result = spec.parse(text, ParseContext(source="hostile"))
    except ParseError as exc:
        assert str(exc)
        return
    assert result.records == result.tables["db_setting"].height


def test_a_readme_quoting_settings_in_a_code_fence_is_no_postgresql_conf() -> None:
    """fixtures/compare/README.md shows a copy of the capture script as a diff: its context lines
    (" listen_addresses = ''", " log_line_prefix = ...") are setting lines, the fence around them is not."""
    quoted = "Copy F:\n\n```diff\n+shared_buffers = 256MB\n listen_addresses = ''\n log_line_prefix = '%m'\n```\n"
    assert pg_conf.SPEC.detect(quoted, "README.md") == 0.0
    assert pg_conf.SPEC.detect(quoted.replace("```diff\n", "").replace("```\n", ""), "README.md") > 0.5


def test_truncated_toml_keeps_the_lines_before_the_error() -> None:
    text = _read(FIXTURES / "tikv.toml")
    cut = text[: text.index('rate-bytes-per-sec = "10GB"') + len('rate-bytes-per-sec = "10')]
    result = _parse(tidb_config.SPEC, cut, "tikv.toml")
    assert setting(result.tables["db_setting"], "rocksdb.max-open-files") == "40960"
    assert setting(result.tables["db_setting"], "rocksdb.rate-bytes-per-sec") is None
    assert len(result.warnings) == 1 and result.warnings[0].reason.startswith("TOML error (")
    with pytest.raises(ParseError, match="not valid TOML"):
        _parse(tidb_config.SPEC, 'capacity = "2GiB\n', "tikv.toml")


def test_truncated_boxed_row_is_a_warning() -> None:
    text = "| Variable_name | Value |\n| max_connections | 151 |\n| version | 10.11"
    result = _parse(mysql_variables.SPEC, text)
    assert _values(result) == {"max_connections": "151"}
    assert [w.reason for w in result.warnings] == ["boxed row not closed before the end; skipped"]


def test_garbage_lines_are_warned_and_capped() -> None:
    text = "Variable_name\tValue\nmax_connections\t151\n" + "not a row at all\n" * 500
    result = _parse(mysql_variables.SPEC, text)
    assert result.records == 1
    assert len(result.warnings) == 51 and result.warnings[-1].reason == "450 more unreadable lines skipped"


def test_huge_value_is_kept() -> None:
    value = "y" * 1_000_000
    result = _parse(mysql_variables.SPEC, f"Variable_name\tValue\ninit_connect\t{value}\n")
    assert _values(result)["init_connect"] == value
    assert _values(_parse(pg_conf.SPEC, f"work_mem = '{value}'\n"))["work_mem"] == value
