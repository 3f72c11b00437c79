"""Process names of database servers and the proxies/poolers in front of them, as ``comm`` shows them.

>>> is_database_or_proxy("mariadbd"), is_database_or_proxy("/usr/sbin/haproxy"), is_database_or_proxy("python3")
(True, True, False)
"""

from __future__ import annotations

from dbdiag.vocabulary.processes import DATABASE_PROCESSES, PROXY_PROCESSES


def is_database_or_proxy(name: str | None) -> bool:
    if not name:
        return False
    base = name.lower().rsplit("/", 1)[-1]
    return any(base == known or base.startswith(known) for known in DATABASE_PROCESSES + PROXY_PROCESSES)
