"""engine_version: the capture's engine and version, from the slow-log banner, a settings export or a manifest."""

from __future__ import annotations

import polars as pl
import pytest

from dbdiag import tables as t
from dbdiag.derive.engine_version import engine_version
from dbdiag.versions import at_least
from dbdiag.pipeline import analyze
from tests.conftest import CORPUS, REPO, corpus_present, skip_without_corpus


def test_slow_log_banner_gives_the_version():
    metric = analyze(REPO / "fixtures" / "causes" / "mariadb-ignored-index.tar.gz").derived.metrics["engine_version"]
    assert metric == {"engine": "mariadb", "version": "10.11.19-MariaDB-0+deb12u1-log", "number": [10, 11, 19],
                      "source": "capture/db/mariadb-slow.log"}


def test_settings_export_gives_the_version():
    if not corpus_present():
        skip_without_corpus()
    metric = analyze(CORPUS / "captures" / "mariadb-sysbench-debian12.tar.gz").derived.metrics["engine_version"]
    assert (metric["engine"], metric["version"], metric["source"]) == ("mariadb", "10.11.19-MariaDB-0+deb12u1-log", "capture/db/global_variables.tsv")


def test_postgresql_manifest_and_no_version():
    metric = analyze(REPO / "fixtures" / "lockwait" / "pg-lock-wait.tar.gz").derived.metrics["engine_version"]
    assert (metric["engine"], metric["number"], metric["source"]) == ("postgresql", [15, 18], "capture/manifest.txt")
    haproxy = analyze(REPO / "fixtures" / "pgbench-haproxy-connect" / "pgbench-C-haproxy-maxconn2.tar.gz")
    assert haproxy.derived.metrics["engine_version"] == {"engine": "postgresql", "version": None, "number": None, "source": None}


@pytest.mark.parametrize(("engine", "value", "expected"), [
    ("mysql", "8.0.36", ("mysql", [8, 0, 36])),
    ("tidb", "8.0.11-TiDB-v7.5.1", ("tidb", [7, 5, 1])),
    ("percona", "8.0.15-5", ("percona", [8, 0, 15])),
])
def test_settings_of_other_engines(engine, value, expected):
    settings = t.conform(t.DB_SETTING, pl.DataFrame({"engine": [engine], "kind": ["variable"], "name": ["version"], "value": [value],
                                                     "source": ["db/variables.tsv"]}))
    metric = engine_version({t.DB_SETTING: settings})
    assert (metric["engine"], metric["number"]) == expected


def test_a_version_of_another_family_is_not_taken():
    statements = t.conform(t.STATEMENT, pl.DataFrame({"engine": ["postgresql"], "sql": ["SELECT 1"]}))
    facts = t.host_fact_frame([("server", "MariaDB 10.11.6")], "manifest.txt")
    metric = engine_version({t.STATEMENT: statements, t.HOST_FACT: facts})
    assert metric == {"engine": "postgresql", "version": None, "number": None, "source": None}
    assert at_least(metric, "postgresql", (15,)) is None and engine_version({}) is None
