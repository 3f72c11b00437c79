"""``--pseudonymize``: host names, IP addresses, user names and database names -> stable pseudonyms.

Names are collected from the parsed tables (a few columns known to hold them, and the shapes log
lines name them in); addresses are found by pattern anywhere in the report::

    host_fact hostname=bank-core-db03       -> host-1        statement.user app      -> user_1
    statement.db bank                       -> db_1          statement.client_host 10.20.1.7 -> 10.0.0.7
    proxy_stat.server tidb-10.20.1.11       -> tidb-10.0.0.11 (the address inside it)
    2001:db8::5                             -> fd00::1

An IPv4 address keeps its structure: each /24 network becomes one ``10.x.y`` network (the first one
``10.0.0``) and the last octet is kept, so two addresses of one subnet stay in one subnet, the same
address is always the same pseudonym and two different ones stay different. Pseudonyms never equal
a real name or address of the capture. Loopback, unspecified and netmask-like addresses (``127.*``,
``0.0.0.0``, ``255.*``, ``::1``) and default names that say nothing about anyone (``root``,
``postgres``, ``mysql``, ``information_schema``, ``localhost``...) are kept.

The replacement runs once, on the finished report document (every string and key), so HTML, JSON
and Markdown, rendered from it, all show the same pseudonym for the same name. A member path keeps
its folders and file name but for host names and addresses in it (``capture/app/jmeter.jtl`` stays,
``db/tidb-10.20.1.11/slow.log`` becomes ``db/tidb-10.0.0.11/slow.log``). Names are matched as whole
words, with their case (a letter, digit or ``_`` on either side is no match: ``bank`` is not replaced in
``bank_audit``; a host name followed by a dot and a letter is no match either: host ``vm`` is not
replaced in ``vm.swappiness``, database ``bank`` is in ``bank.acct``); one pass of one pattern, so a
pseudonym is never replaced again.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.patterns import lazy_compile
from dbdiag.vocabulary.processes import DATABASE_COMPONENTS

DEFAULT_NAMES = frozenset({
    "root", "admin", "postgres", "mysql", "mariadb", "mysql.sys", "mariadb.sys", "mysql.session", "mysql.infoschema",
    "information_schema", "performance_schema", "sys", "metrics_schema", "template0", "template1", "localhost",
    "localhost.localdomain", "unconnected", "unauthenticated", "unknown", "none", "null", "default",
    "frontend", "backend", "system user", "event_scheduler", "auto", "any",
    "test", "sbtest", "sysbench", "pgbench", "jmeter", "*", "my_wsrep_cluster", *DATABASE_COMPONENTS,
})
MIN_NAME_CHARS = 2
MAX_NAME_CHARS = 255
MAX_PATH_CHARS = 1024  # longer member paths are pseudonymized like any text

_IPV4 = r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?!\d|\.\w)"
_IPV6 = r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])"
_IPV4_RE = lazy_compile(_IPV4)
_IPV6_RE = lazy_compile(_IPV6)
# A name is a whole word: no letter, digit or _ beside it. A host name also takes a dot and a letter
# after it as part of the word (vm.swappiness is no host "vm"); a database name does not (bank.acct is "bank").
_WORD_BEFORE, _WORD_AFTER = r"(?<![A-Za-z0-9_])", r"(?![A-Za-z0-9_])"
_HOST_BEFORE, _HOST_AFTER = r"(?<![A-Za-z0-9_])(?<![A-Za-z0-9_]\.)", r"(?![A-Za-z0-9_]|\.[A-Za-z0-9_])"

HOST_FACT_KEYS = ("hostname", "host", "nodename", "fqdn")
# settings naming this server or its peers (MySQL/MariaDB variables, PostgreSQL, TiDB/TiKV/PD TOML keys)
SETTING_HOST_NAMES = (
    r"^(?:hostname|report_host|wsrep_node_name|wsrep_node_address|wsrep_cluster_address|bind_address|listen_addresses"
    r"|cluster_name|wsrep_cluster_name)$|(?:^|\.)(?:host|status-host|advertise-address|advertise-addr|advertise-status-addr"
    r"|advertise-client-urls|advertise-peer-urls|endpoints|initial-cluster)$"
)
# names in log lines: MySQL aborted connections and access denials, PostgreSQL auth lines, TiDB fields
MESSAGE_NAMES = (
    lazy_compile(r"\bdb: '(?P<db>[^']*)' user: '(?P<user>[^']*)' host: '(?P<host>[^']*)'"),
    lazy_compile(r"\buser '(?P<user>[^']+)'@'(?P<host>[^']+)'"),
    lazy_compile(r"\bDefault database: '(?P<db>[^']+)'"),
    lazy_compile(r'\b(?:user|role) "(?P<user>[^"]+)"'),
    lazy_compile(r'\bdatabase "(?P<db>[^"]+)"'),
    lazy_compile(r"\buser=(?P<user>[^\s,\]\"]+)"),
    lazy_compile(r"\bdatabase=(?P<db>[^\s,\]\"]+)"),
    lazy_compile(r"\b(?:host|client|ip|addr|address)=(?P<host>[^\s,\]\"]+)"),
    lazy_compile(r"\[(?:current_db|db|schema)=(?P<db>[^\s,\]\"]+)"),
)
ARCHIVE_HOST = lazy_compile(r"(?:^|/)(?:sosreport|insights)-(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*?)-(?:[\w-]*-)?\d{4}-?\d\d-?\d\d")


@dataclass(frozen=True)
class Names:
    """The names of one capture, each kind sorted (the numbering follows this order)."""

    hosts: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    dbs: tuple[str, ...] = ()


def collect_names(tables: dict[str, pl.DataFrame], paths: Iterable[str] = ()) -> Names:
    """Host, user and database names from the parsed tables (and host names in sos/insights member paths)."""
    hosts: set[str] = set()
    users: set[str] = set()
    dbs: set[str] = set()
    facts = tables.get(t.HOST_FACT)
    if facts is not None:
        hosts |= _values(facts.filter(pl.col("key").is_in(HOST_FACT_KEYS)), "value")
    statements = tables.get(t.STATEMENT)
    if statements is not None:
        hosts |= _values(statements, "client_host") | _values(statements, "instance")
        users |= _values(statements, "user")
        dbs |= _values(statements, "db")
    summaries = tables.get(t.STATEMENT_SUMMARY)
    if summaries is not None:
        hosts |= _values(summaries, "instance")
        dbs |= _values(summaries, "schema_name")
    proxies = tables.get(t.PROXY_STAT)
    if proxies is not None:
        hosts |= _values(proxies.filter(pl.col("type") == "server"), "server")
    metrics = tables.get(t.METRIC_SAMPLE)
    if metrics is not None:
        hosts |= _values(metrics, "instance")
    settings = tables.get(t.DB_SETTING)
    if settings is not None:
        named = settings.filter(pl.col("name").str.contains(SETTING_HOST_NAMES))
        hosts |= {part.rsplit("=", 1)[-1] for value in _values(named, "value") for part in re.split(r"[,\s]+", value)}
    events = tables.get(t.EVENT)
    if events is not None:
        hosts |= _values(events, "host")
        for message in _values(events, "message"):
            for pattern in MESSAGE_NAMES:
                for match in pattern.finditer(message):
                    found = match.groupdict()
                    hosts |= {found["host"]} if found.get("host") else set()
                    users |= {found["user"]} if found.get("user") else set()
                    dbs |= {found["db"]} if found.get("db") else set()
    hosts |= {m["host"] for path in paths for m in ARCHIVE_HOST.finditer(path)}
    host_names = {name for value in hosts if (name := _host_part(value))}
    return Names(
        hosts=tuple(sorted(n for n in host_names if _is_name(n))),
        users=tuple(sorted(n for n in {_strip(u) for u in users} if _is_name(n) and n not in host_names)),
        dbs=tuple(sorted(n for n in {_strip(d) for d in dbs} if _is_name(n) and n not in host_names)),
    )


def _values(frame: pl.DataFrame, column: str) -> set[str]:
    if column not in frame.columns or frame.height == 0:
        return set()
    return set(frame[column].cast(pl.String).drop_nulls().unique().to_list())


def _strip(value: str) -> str:
    """``app[app]`` (a slow log's user) -> ``app``; quotes and spaces around a name dropped."""
    return value.split("[", 1)[0].strip().strip("'\"`")


def _host_part(value: str) -> str:
    """``http://db-1.corp:4000/x`` -> ``db-1.corp``; ``[2001:db8::1]:4000`` and bare addresses -> '' (the patterns take them)."""
    value = re.sub(r"\(\d+\)$", "", re.sub(r"^\w+://", "", _strip(value)).split("/", 1)[0])
    if value.startswith("["):
        return ""
    if value.count(":") == 1:
        value = value.split(":", 1)[0]
    if _IPV6_RE.fullmatch(value) or _IPV4_RE.search(value):
        return ""  # an address, or a name made of one (tidb-10.20.1.11): the address pattern replaces it
    return value


def _is_name(name: str) -> bool:
    return (
        MIN_NAME_CHARS <= len(name) <= MAX_NAME_CHARS
        and not name.isdigit()
        and name.lower() not in DEFAULT_NAMES
        and not re.fullmatch(r"[\W_]+", name)
        and not re.fullmatch(r"host-\d+|(?:user|db)_\d+", name)
    )


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _is_ipv6(text: str) -> bool:
    """An IPv6 address as written in text: valid, with a digit, and more than a C++ ``ab::cd``."""
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    groups = [g for g in re.split(r":+", text) if g]
    return any(c.isdigit() for c in text) and (len(groups) >= 3 or any(len(g) == 4 for g in groups))


def _kept_ipv4(address: str) -> bool:
    first = address.split(".", 1)[0]
    return first in ("127", "255") or address == "0.0.0.0"


def _ipv4_map(addresses: set[str]) -> dict[str, str]:
    """Each /24 network -> the next ``10.x.y`` network no real address uses; the last octet kept."""
    networks = sorted({a.rsplit(".", 1)[0] for a in addresses}, key=lambda n: tuple(int(p) for p in n.split(".")))
    taken = set(networks)
    fresh = (f"10.{i // 256}.{i % 256}" for i in range(256 * 256))
    mapped = {}
    for network in networks:
        mapped[network] = next(n for n in fresh if n not in taken)
    return {a: f"{mapped[a.rsplit('.', 1)[0]]}.{a.rsplit('.', 1)[1]}" for a in addresses}


def _ipv6_map(addresses: set[ipaddress.IPv6Address]) -> dict[ipaddress.IPv6Address, str]:
    taken = {str(a) for a in addresses}
    fresh = (f"fd00::{i:x}" for i in range(1, 1 << 32))
    return {a: next(p for p in fresh if p not in taken) for a in sorted(addresses)}


def _numbered(names: tuple[str, ...], prefix: str, taken: set[str]) -> dict[str, str]:
    # user_1 / db_1 stay valid SQL identifiers in remedies (ALTER TABLE db_1.acct ...); hosts read host-1
    fresh = (f"{prefix}{'-' if prefix == 'host' else '_'}{i}" for i in range(1, 1 << 32))
    return {name: next(p for p in fresh if p not in taken) for name in names}


def trie_pattern(words: Iterable[str]) -> str:
    """One regex alternative matching any of ``words``, longest first, prefixes shared (quick on many words).

    >>> trie_pattern(["db1", "db10", "dbx"])
    'db(?:1(?:0)?|x)'
    """
    trie: dict[str, dict] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, dict]) -> str:
    branches = [re.escape(char) + _node_pattern(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:
        return f"(?:{body})?"
    return body


@dataclass(frozen=True)
class Pseudonyms:
    """What was replaced, counted (the mapping itself stays out of the report)."""

    hosts: int
    users: int
    dbs: int
    ipv4: int
    ipv6: int


def pseudonymizer(names: Names, texts: Iterable[str], paths: Iterable[str] = ()) -> tuple[Callable[[str], str], Pseudonyms]:
    """A function replacing every name of ``names`` and every address found in ``texts`` by its pseudonym."""
    ipv4: set[str] = set()
    ipv6: set[ipaddress.IPv6Address] = set()
    for text in texts:
        ipv4 |= {a for a in _IPV4_RE.findall(text) if not _kept_ipv4(a)}
        ipv6 |= {ipaddress.IPv6Address(a) for a in _IPV6_RE.findall(text) if _is_ipv6(a)}
    ipv6 -= {ipaddress.IPv6Address("::1"), ipaddress.IPv6Address("::")}
    ipv4_map, ipv6_map = _ipv4_map(ipv4), _ipv6_map(ipv6)
    real = set(names.hosts) | set(names.users) | set(names.dbs)
    hosts = _numbered(names.hosts, "host", real)
    users = _numbered(tuple(n for n in names.users if n not in hosts), "user", real)
    dbs = _numbered(tuple(n for n in names.dbs if n not in hosts and n not in users), "db", real)

    def address(text: str) -> str:
        if "." in text and ":" not in text:
            return ipv4_map.get(text, text)
        if _is_ipv6(text):
            return ipv6_map.get(ipaddress.IPv6Address(text), text)
        return text

    in_paths = _replacer(hosts, {}, address, {})
    path_map = {p: in_paths(p) for p in set(paths) if len(p) <= MAX_PATH_CHARS}
    replace = _replacer(hosts, users | dbs, address, path_map)
    counts = Pseudonyms(len(hosts), len(users), len(dbs), len(ipv4_map), len(ipv6_map))
    return replace, counts


def _replacer(hosts: dict[str, str], others: dict[str, str], address: Callable[[str], str], path_map: dict[str, str]) -> Callable[[str], str]:
    parts = []
    if path_map:
        parts.append(f"(?P<path>{trie_pattern(path_map)})")
    parts += [f"(?P<ip6>{_IPV6})", f"(?P<ip4>{_IPV4})"]
    if hosts:
        parts.append(f"(?P<host>{_HOST_BEFORE}{trie_pattern(hosts)}{_HOST_AFTER})")
    if others:
        parts.append(f"(?P<name>{_WORD_BEFORE}{trie_pattern(others)}{_WORD_AFTER})")
    pattern = re.compile("|".join(parts))
    names = hosts | others

    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if match.lastgroup == "path":
            return path_map[text]
        if match.lastgroup in ("host", "name"):
            return names[text]
        return address(text)

    return lambda text: pattern.sub(one, text)


def pseudonymize_document(document: dict[str, Any], names: Names, paths: Iterable[str] = ()) -> tuple[dict[str, Any], Pseudonyms]:
    """The report document with every string (and key) pseudonymized, and what was replaced."""
    replace, counts = pseudonymizer(names, _strings(document), paths)
    return _mapped(document, replace), counts


def _mapped(value: Any, replace: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, dict):
        return {replace(str(k)): _mapped(v, replace) for k, v in value.items()}
    if isinstance(value, list):
        return [_mapped(v, replace) for v in value]
    return value
