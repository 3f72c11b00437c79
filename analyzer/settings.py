"""Reading database settings for rules: a setting's value from ``db_setting``, and sizes as bytes.

``db_setting`` rows come from SHOW GLOBAL VARIABLES, SHOW ALL / pg_settings, postgresql.conf and
TiDB/TiKV/PD TOML (see ``analyzer/parsers/{mysql_variables,pg_settings,pg_conf,tidb_config}.py``).
Every size unit here is binary (1 kB = 1024 bytes), as MySQL, PostgreSQL and TiKV all read them.
"""

from __future__ import annotations


import polars as pl

from dbdiag.patterns import lazy_compile

_SIZE_RE = lazy_compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([A-Za-z]*)$")
_UNIT_RE = lazy_compile(r"^([0-9]*)\s*([A-Za-z]+)$")
_FACTORS = {
    "": 1, "b": 1,
    "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
    "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
    "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30,
    "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40,
    "p": 1 << 50, "pb": 1 << 50, "pib": 1 << 50,
}


def _unit_bytes(unit: str) -> int | None:
    """Bytes in one ``unit`` as pg_settings spells it ("8kB", "kB", "16MB", "B"); None if not a size."""
    m = _UNIT_RE.match(unit.strip())
    if m is None:
        return None
    factor = _FACTORS.get(m.group(2).lower())
    if factor is None:
        return None
    return (int(m.group(1)) if m.group(1) else 1) * factor


def size_bytes(value: str | None, unit: str | None = None) -> int | None:
    """A size setting in bytes, or None when ``value`` is not a (non-negative) size.

    MySQL byte counts, with or without K/M/G suffixes:

    >>> size_bytes("134217728")
    134217728
    >>> size_bytes("128M")
    134217728

    PostgreSQL: values with units as SHOW prints them, or pg_settings ``setting`` + ``unit``:

    >>> size_bytes("128MB")
    134217728
    >>> size_bytes("'8GB'")
    8589934592
    >>> size_bytes("16384", "8kB")
    134217728
    >>> size_bytes("4096", "kB")
    4194304
    >>> size_bytes("1GB", None)
    1073741824

    TiDB/TiKV/PD sizes (binary whatever the spelling):

    >>> size_bytes("2GiB")
    2147483648
    >>> size_bytes("512MB")
    536870912
    >>> size_bytes("1.5GB")
    1610612736

    Not sizes: time units, -1 ("use the default"), words.

    >>> size_bytes("200", "ms") is None, size_bytes("-1", "kB") is None, size_bytes("on") is None
    (True, True, True)
    """
    if value is None:
        return None
    text = value.strip().strip("'\"").strip()
    m = _SIZE_RE.match(text)
    if m is None:
        return None
    factor = _FACTORS.get(m.group(2).lower())
    if factor is None:
        return None
    if unit:
        if m.group(2):
            return None  # a value with its own suffix and a unit column: ambiguous, refuse
        per_unit = _unit_bytes(unit)
        if per_unit is None:
            return None
        factor = per_unit
    return int(float(m.group(1)) * factor) if "." in m.group(1) else int(m.group(1)) * factor


def setting(frame: pl.DataFrame, name: str, engine: str | None = None) -> str | None:
    """The value of the last ``db_setting`` row named ``name`` (case-insensitive), or None.

    ``engine`` restricts to one engine's rows ("mariadb", "postgresql", "tikv"...).

    >>> rows = pl.DataFrame({"engine": ["mysql", "postgresql", "postgresql"],
    ...                      "name": ["max_connections", "max_connections", "MAX_CONNECTIONS"],
    ...                      "value": ["151", "100", "200"]})
    >>> setting(rows, "Max_Connections"), setting(rows, "max_connections", engine="mysql")
    ('200', '151')
    >>> setting(rows, "work_mem") is None
    True
    """
    if frame.is_empty():
        return None
    wanted = pl.col("name").str.to_lowercase() == name.lower()
    if engine is not None:
        wanted = wanted & (pl.col("engine").str.to_lowercase() == engine.lower())
    values = frame.filter(wanted)["value"]
    return values[-1] if values.len() else None
