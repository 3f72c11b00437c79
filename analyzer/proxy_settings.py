"""The session limits a proxy ran with, as ``metrics.settings`` rows (``dbdiag compare`` sets them side by side).

Two sources, both optional: ``proxy_stat`` (HAProxy ``show stat`` snapshots: each frontend's, listener's
and server's ``slim``, the limit in force when the snapshot was taken) and ``proxy_config``
(``haproxy.cfg``: every line that sets a ``maxconn``). A sample of what is read and what it gives::

    proxy_stat  snapshot 0, ts 01:55:00Z  tidb_back  tidb-10.20.1.11  server  slim 480   line 4
                ...                       (the same for the other servers of tidb_back)
                snapshot 36, ts 02:04:00Z tidb_back  tidb-10.20.1.11  server  slim 1000  line 262
      -> {"scope": "proxy", "group": "proxy_limit", "subject": "haproxy tidb_back servers", "name": "maxconn (show stat slim)",
          "value": "480, 1000 from 2024-05-14T02:04:00Z", "source": "capture/proxy/haproxy-stat.txt:4"}
    proxy_config  backend be_pg  server pg1  maxconn 2  line 17
      -> {"scope": "proxy", "group": "proxy_limit", "subject": "haproxy.cfg backend be_pg server pg1", "name": "maxconn",
          "value": "2", "source": "haproxy.cfg:17"}

The servers of one backend that ran with the same limits make one row ("tidb_back servers"), so that two
proxies whose server names differ (one per host) still compare; a backend whose servers differ gets a row
per server. A backend's own ``slim`` is its ``fullconn`` (a tuning knob, not a limit) and is left out.
"""

from __future__ import annotations

from typing import Any

import polars as pl

LIMITED_TYPES = ("frontend", "listener", "server")


def proxy_limit_rows(stat: pl.DataFrame | None, config: pl.DataFrame | None) -> list[dict[str, Any]]:
    """Settings rows of the proxies' session limits (module docstring), show stat's first."""
    return _stat_rows(stat) + _config_rows(config)


def _stat_rows(stat: pl.DataFrame | None) -> list[dict[str, Any]]:
    if stat is None or not stat.height:
        return []
    limited = stat.filter(pl.col("type").is_in(LIMITED_TYPES) & pl.col("slim").is_not_null()).sort("snapshot", "line")
    objects: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in limited.iter_rows(named=True):
        objects.setdefault((row["proxy"], row["type"], row["server"]), []).append(row)
    groups: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}  # (proxy, type) -> server -> (value, source)
    for (proxy, kind, server), rows in objects.items():
        groups.setdefault((proxy, kind), {})[server] = (_limits_text(rows), f"{rows[0]['source']}:{rows[0]['line']}")
    out = []
    for (proxy, kind), servers in groups.items():
        values = {value for value, _ in servers.values()}
        if kind == "server" and len(values) == 1:
            value, source = next(iter(servers.values()))
            out.append(_row(f"haproxy {proxy} servers", "maxconn (show stat slim)", value, source))
            continue
        for server, (value, source) in servers.items():
            subject = f"haproxy {proxy} {kind}" if kind != "server" else f"haproxy {proxy}/{server}"
            out.append(_row(subject, "maxconn (show stat slim)", value, source))
    return out


def _limits_text(rows: list[dict[str, Any]]) -> str:
    """One object's limit over the snapshots: "480", or "480, 1000 from 2024-05-14T02:04:00Z" when it changed.

    >>> from datetime import datetime, timezone
    >>> _limits_text([{"slim": 480, "ts": None}, {"slim": 1000, "ts": datetime(2024, 5, 14, 2, 4, tzinfo=timezone.utc)}])
    '480, 1000 from 2024-05-14T02:04:00Z'
    """
    parts, last = [], None
    for row in rows:
        if row["slim"] == last:
            continue
        when = f" from {row['ts']:%Y-%m-%dT%H:%M:%SZ}" if parts and row.get("ts") is not None else ""
        parts.append(f"{row['slim']}{when}")
        last = row["slim"]
    return ", ".join(parts)


def _config_rows(config: pl.DataFrame | None) -> list[dict[str, Any]]:
    if config is None or not config.height:
        return []
    out = []
    for row in config.filter(pl.col("maxconn").is_not_null()).sort("source", "line").iter_rows(named=True):
        parts = ["haproxy.cfg", row["section"], row["proxy"], row["keyword"] if row["keyword"] != "maxconn" else None, row["server"]]
        subject = " ".join(p for p in parts if p)
        out.append(_row(subject, "maxconn", str(row["maxconn"]), f"{row['source']}:{row['line']}"))
    return out


def _row(subject: str, name: str, value: str, source: str) -> dict[str, Any]:
    return {"scope": "proxy", "group": "proxy_limit", "subject": subject, "name": name, "value": value, "source": source}
