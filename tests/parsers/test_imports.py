"""Parsers borrow from the kit or their own family, never from a sibling: the imports read with ``ast``.

The rules (``violations``):

- a registered parser (a module or package named in ``dbdiag.parsers.MODULES``) imports no other
  registered parser outside its family (``FAMILIES``);
- a family's helper (``_sysstat``, ``pg_messages``...) is imported only inside its family;
- no module imports a private name (``_X``) of another module, nor reads one off an imported module;
- the kit (``parsers/kit``) imports nothing from ``dbdiag.parsers`` but ``base`` and itself.
"""

from __future__ import annotations

import ast
from pathlib import Path

from dbdiag.parsers import MODULES

PARSERS_DIR = Path(__file__).resolve().parents[2] / "analyzer" / "parsers"

# Parsers of one format family, and the helpers only they share.
FAMILIES = {
    "sysstat": {"mpstat_text", "mpstat_json", "sadf", "_sysstat", "iostat_text", "iostat_json", "_iostat"},
    "numa": {"numastat", "sys_node", "numactl"},
    "tidb_slow": {"tidb_slowlog", "tidb_cluster_slow_query", "tidb_dashboard", "_tidb_fields", "_tidb_plans"},
    "perf": {"perf_script", "perf_report", "perf_top"},
    "metrics": {"prometheus_json", "tidb_dashboard_metrics", "grafana_csv"},
    "jmeter": {"jmeter_jtl", "jmeter_jtl_csv", "jmeter_jtl_xml"},
    "pg": {"pg_stderr", "pg_csvlog", "pg_jsonlog", "pg_messages", "pg_events", "pg_explain", "pg_lock_waits", "pg_assemble",
           "pg_batch", "pg_lines", "pg_prefix"},
    "host_setting": {"host_setting", "sysctl", "proc_cmdline", "sys_choice", "irq_affinity", "ethtool_channels", "proc_status"},
}
# Crossings that exist and are known (none left: the time, zone and line helpers the PostgreSQL
# parsers lent to the MySQL, TiDB and kernel logs live in the kit); an entry is (importer, helper).
KNOWN_CROSSINGS: set[tuple[str, str]] = set()
KERNELS = {"_line_scan", "_perf_fold"}  # the C extensions: setup.py gives them their leading underscore


def family_of(top: str) -> str:
    return next((name for name, members in FAMILIES.items() if top in members), top)


def top_name(module: str) -> str | None:
    """``dbdiag.parsers.x.y`` -> ``x``; None outside the parsers."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["dbdiag", "parsers"] and len(parts) > 2 else None


def imports(source: str) -> list[tuple[str, str | None]]:
    """(imported module, name or None) of every import, and (module, attribute) for ``alias._x`` reads."""
    found: list[tuple[str, str | None]] = []
    aliases: dict[str, str] = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if node.module == "dbdiag.parsers" and alias.name not in ("MODULES", "PARSERS", "registry"):
                    found.append((submodule, None))
                    aliases[alias.asname or alias.name] = submodule
                else:
                    found.append((node.module, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found.append((alias.name, None))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            found.append((aliases[node.value.id], node.attr))
    return found


def violations(sources: dict[str, str], registered: set[str]) -> list[str]:
    """Broken rules in ``sources`` (dotted module name -> text)."""
    out = []
    for module, source in sources.items():
        me = top_name(module)
        for target, name in imports(source):
            other = top_name(target)
            if name is not None and name.startswith("_") and not name.startswith("__") and name not in KERNELS:
                out.append(f"{module} takes the private {name} from {target}")
            if other is None or other == me or other == "base":
                continue
            if me == "kit":
                out.append(f"{module}: the kit imports {target}")
                continue
            crossing = family_of(other) != family_of(me) and (me, other) not in KNOWN_CROSSINGS
            if crossing and other in registered:
                out.append(f"{module} imports the parser {other} (another family)")
            elif crossing and (other.startswith("_") or any(other in members for members in FAMILIES.values())):
                out.append(f"{module} imports {other}, a helper of the {family_of(other)} family")
    return out


def parser_sources() -> dict[str, str]:
    sources = {}
    for path in sorted(PARSERS_DIR.rglob("*.py")):
        parts = path.relative_to(PARSERS_DIR).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        sources[".".join(("dbdiag", "parsers", *parts))] = path.read_text(encoding="utf-8")
    return sources


def test_parsers_borrow_only_from_the_kit_and_their_family() -> None:
    assert violations(parser_sources(), set(MODULES)) == []


def test_known_crossings_still_exist() -> None:
    """An exception that no longer happens is deleted from KNOWN_CROSSINGS."""
    sources = parser_sources()
    for importer, helper in KNOWN_CROSSINGS:
        assert any(top_name(target) == helper for target, _ in imports(sources[f"dbdiag.parsers.{importer}"]))


def test_each_rule_catches_its_case() -> None:
    registered = {"mysql_slowlog", "tidb_slowlog", "mpstat_text"}
    sources = {
        "dbdiag.parsers.tidb_slowlog": "from dbdiag.parsers.mysql_slowlog import parse\n",
        "dbdiag.parsers.mysql_slowlog": "from dbdiag.parsers import _sysstat\nfrom dbdiag.parsers.mpstat_text import _lines\n",
        "dbdiag.parsers.kit.times": "from dbdiag.parsers import pg_messages as M\nx = M.stamp_to_utc\ny = M._zone\n",
        "dbdiag.parsers.mpstat_text": "from dbdiag.parsers._sysstat import to_float\nfrom dbdiag.parsers.kit.times import check_tz\n",
    }
    found = violations(sources, registered)
    assert found == [
        "dbdiag.parsers.tidb_slowlog imports the parser mysql_slowlog (another family)",
        "dbdiag.parsers.mysql_slowlog imports _sysstat, a helper of the sysstat family",
        "dbdiag.parsers.mysql_slowlog takes the private _lines from dbdiag.parsers.mpstat_text",
        "dbdiag.parsers.mysql_slowlog imports the parser mpstat_text (another family)",
        "dbdiag.parsers.kit.times: the kit imports dbdiag.parsers.pg_messages",
        "dbdiag.parsers.kit.times: the kit imports dbdiag.parsers.pg_messages",
        "dbdiag.parsers.kit.times takes the private _zone from dbdiag.parsers.pg_messages",
        "dbdiag.parsers.kit.times: the kit imports dbdiag.parsers.pg_messages",
    ]
