"""Engines and their SQL dialects: the engine a capture names -> the dialect of :mod:`dbdiag.sqlnorm`
(fingerprints) -> the dialect sqlglot reads.

>>> SQLGLOT_DIALECT[SQLNORM_DIALECT_OF_ENGINE["mariadb"]], SQLGLOT_DIALECT[SQLNORM_DIALECT_OF_ENGINE["tidb"]]
('mysql', 'mysql')
"""

from __future__ import annotations

MYSQL_FAMILY = ("mysql", "mariadb", "percona")
SQLNORM_DIALECT_OF_ENGINE = {**{engine: "mysql" for engine in MYSQL_FAMILY}, "tidb": "tidb", "postgresql": "postgresql"}
DEFAULT_SQLNORM_DIALECT = "mysql"  # an unnamed engine is read as MySQL
SQLNORM_DIALECTS = ("mysql", "tidb", "postgresql")
SQLGLOT_DIALECT = {"mysql": "mysql", "tidb": "mysql", "postgresql": "postgres"}
