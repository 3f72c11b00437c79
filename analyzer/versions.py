"""Engine versions as the ``engine_version`` metric holds them: which engines are MySQL's family, and
whether the capture's server is at or past a release (rules choose remedies by it).
"""

from __future__ import annotations

from typing import Any

MYSQL_FAMILY = ("mysql", "mariadb", "percona")


def at_least(metric: dict[str, Any] | None, engine: str, number: tuple[int, ...]) -> bool | None:
    """Whether the capture's server is ``engine`` at ``number`` or later; None when its version is unknown.

    >>> at_least({"engine": "mariadb", "number": [10, 11, 19]}, "mariadb", (10, 6))
    True
    >>> at_least({"engine": "mysql", "number": [8, 0, 15]}, "mysql", (8, 0, 18))
    False
    >>> at_least({"engine": "mariadb", "number": None}, "mariadb", (10, 6)) is None
    True
    """
    if not metric or metric.get("engine") != engine or not metric.get("number"):
        return None
    return tuple(metric["number"]) >= number
