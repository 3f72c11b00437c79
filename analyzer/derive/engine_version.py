"""The database engine of the capture and its version, for rules that choose SQL syntax by them.

Reads what the parsers keep: the statements' ``engine`` column (the slow-log flavour, PostgreSQL and
TiDB logs), the settings exports' ``version`` / ``server_version`` rows (``SHOW GLOBAL VARIABLES``,
``SELECT VERSION()``-style exports, ``pg_settings``), the slow log's start banner (``db_version``
fact: ``mariadbd, Version: 10.11.6-MariaDB-0+deb12u1 (Debian 12). started with:``) and a manifest's
``server`` fact::

    db_setting  mariadb  variable  version         10.11.19-MariaDB-0+deb12u1-log  capture/db/global_variables.tsv
    host_fact   server   MariaDB 10.11.19-MariaDB-0+deb12u1                        capture/manifest.txt

Output: the metric ``engine_version`` = ``{"engine": "mariadb", "version": "10.11.19-MariaDB-0+deb12u1-log",
"number": [10, 11, 19], "source": "capture/db/global_variables.tsv"}``; ``version``, ``number`` and
``source`` are null when only the engine is known; no metric when neither is. The engine is the one of
the most statements, else the settings'; a version is taken only when it names that engine's family.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.patterns import lazy_compile
from dbdiag.versions import MYSQL_FAMILY

_SETTING_NAMES = ("version", "server_version", "tidb_version")
_CLUSTER_ENGINE = {"tikv": "tidb", "pd": "tidb"}  # a TiDB cluster's components: its SQL is TiDB's
_NUMBER_RE = lazy_compile(r"(\d+)\.(\d+)(?:\.(\d+))?")
# Words of a version text that name the engine it belongs to.
_ENGINE_WORDS = (("tidb", "tidb"), ("mariadb", "mariadb"), ("percona", "percona"), ("postgres", "postgresql"),
                 ("mysql", "mysql"))


def engine_version(tables: dict[str, pl.DataFrame]) -> dict[str, Any] | None:
    """The ``engine_version`` metric of the capture, or None when no engine is known."""
    engine = _statement_engine(tables.get(t.STATEMENT)) or _settings_engine(tables.get(t.DB_SETTING))
    found = _from_settings(tables.get(t.DB_SETTING), engine) or _from_facts(tables.get(t.HOST_FACT), engine)
    if engine is None and found is not None:
        engine = found[2]
    if engine is None:
        return None
    version, source = (found[0], found[1]) if found else (None, None)
    return {"engine": engine, "version": version, "number": parse_number(version), "source": source}


def parse_number(version: str | None) -> list[int] | None:
    """``[10, 11, 19]`` from ``10.11.19-MariaDB-0+deb12u1-log``; TiDB's ``v7.5.1`` and ``8.0.11-TiDB-v7.5.1`` give 7.5.1.

    >>> parse_number("8.0.11-TiDB-v7.5.1"), parse_number("15.18 (Debian 15.18-0+deb12u1)"), parse_number(None)
    ([7, 5, 1], [15, 18], None)
    """
    if not version:
        return None
    tidb = re.search(r"TiDB-v?(\d+\.\d+(?:\.\d+)?)", version)
    found = _NUMBER_RE.search(tidb.group(1) if tidb else version)
    return [int(part) for part in found.groups() if part is not None] if found else None


def _engine_word(text: str) -> str | None:
    lowered = text.lower()
    return next((engine for word, engine in _ENGINE_WORDS if word in lowered), None)


def _same_family(found: str | None, engine: str | None) -> bool:
    if engine is None or found is None:
        return True
    return found == engine or (found in MYSQL_FAMILY and engine in MYSQL_FAMILY)


def _statement_engine(statements: pl.DataFrame | None) -> str | None:
    if statements is None or statements.height == 0:
        return None
    counts = statements["engine"].drop_nulls().value_counts(sort=True)
    return counts["engine"][0] if counts.height else None


def _settings_engine(settings: pl.DataFrame | None) -> str | None:
    if settings is None or settings.height == 0:
        return None
    engines = settings["engine"].drop_nulls()
    return _CLUSTER_ENGINE.get(engines[0], engines[0]) if engines.len() else None


def _from_settings(settings: pl.DataFrame | None, engine: str | None) -> tuple[str, str, str | None] | None:
    if settings is None or settings.height == 0:
        return None
    rows = settings.filter(pl.col("name").str.to_lowercase().is_in(_SETTING_NAMES), pl.col("value").str.contains(r"\d+\.\d+"))
    for row in rows.iter_rows(named=True):
        named = _engine_word(row["value"]) or _CLUSTER_ENGINE.get(row["engine"], row["engine"])
        if _same_family(named, engine):
            return row["value"], row["source"], _engine(named, row["value"])
    return None


def _from_facts(facts: pl.DataFrame | None, engine: str | None) -> tuple[str, str, str | None] | None:
    if facts is None or facts.height == 0:
        return None
    # the server's own words (a log's banner) before a manifest's
    rows = facts.filter(pl.col("key").is_in(("server", "db_version")), pl.col("value").str.contains(r"\d+\.\d+")).sort(
        pl.col("key") != "db_version", maintain_order=True)
    for row in rows.iter_rows(named=True):
        if row["key"] == "db_version":  # "mariadb 10.11.19-MariaDB-0+deb12u1-log": the parser's engine, the banner's version
            named, _, value = row["value"].partition(" ")
        else:
            named, value = _engine_word(row["value"]), row["value"]
        if named is not None and _same_family(named, engine):
            return value, row["source"], named
    return None


def _engine(named: str | None, value: str) -> str | None:
    """The engine a settings row names: a bare MySQL number (``8.0.36``) is MySQL's, MariaDB's says so."""
    return named or ("mysql" if _NUMBER_RE.match(value) else None)
