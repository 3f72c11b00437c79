"""Tests found by convention stay complete: every parser kind has a golden case and a hostile test,
and every ``NAME = value`` a rule's docstring quotes is the module's constant.

(Every rule's firing, passing and just-under cases: ``tests/test_rule_cases.py``.)
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
import types
from functools import cache

import pytest

from dbdiag.parsers import MODULES, registry
from dbdiag.rules import RULES
from tests.conftest import REPO
from tests.parser_cases import all_cases

KIND_MODULES = {spec.kind: module for spec, module in zip(registry(), MODULES)}

# Kinds with no golden case, and why. A case added removes the line.
WITHOUT_GOLDEN = {
    "capture-manifest": "only inside the fixture capture archives (fixtures/**/*.tar.gz), which cases do not open",
    "tidb-slow-query-table": "the one corpus export is an aggregate it refuses; its tests build tables in test_tidb.py",
}

# The hostile test of each kind: "file::function"; its source (with its parametrisation and helpers)
# names the kind's parser module or the kind. Found by name today (hostile, garbage, junk, truncated...).
HOSTILE_TESTS = {
    "mpstat-text": "tests/parsers/test_mpstat.py::test_hostile_input_raises_parse_error_only",
    "mpstat-json": "tests/parsers/test_mpstat.py::test_hostile_input_raises_parse_error_only",
    "sadf-csv": "tests/parsers/test_mpstat.py::test_hostile_input_raises_parse_error_only",
    "proc-softirqs": "tests/parsers/test_proc.py::test_hostile_inputs_raise_parse_error",
    "proc-interrupts": "tests/parsers/test_proc.py::test_hostile_inputs_raise_parse_error",
    "lscpu": "tests/parsers/test_topology.py::test_lscpu_hostile",
    "numactl-hardware": "tests/parsers/test_topology.py::test_numactl_no_numa_and_hostile",
    "numastat": "tests/parsers/test_numastat.py::test_numastat_hostile_inputs",
    "sysfs-node": "tests/parsers/test_numastat.py::test_sysfs_hostile_inputs",
    "proc-vmstat": "tests/parsers/test_numastat.py::test_vmstat_hostile_inputs",
    "proc-stat": "tests/parsers/test_proc_stat.py::test_proc_stat_hostile_inputs",
    "postgresql-log": "tests/parsers/test_postgres.py::test_empty_and_garbage_are_refused",
    "postgresql-csvlog": "tests/parsers/test_postgres.py::test_hostile_csvlog_and_jsonlog",
    "postgresql-jsonlog": "tests/parsers/test_postgres.py::test_hostile_csvlog_and_jsonlog",
    "mysql-slowlog": "tests/parsers/test_mysql_slowlog.py::test_many_bad_entries_cap_warnings",
    "tidb-slowlog": "tests/parsers/test_tidb.py::test_nothing_readable_is_a_parse_error",
    "tidb-slow-query-table": "tests/parsers/test_tidb.py::test_table_hostile",
    "tidb-dashboard-slow-query": "tests/parsers/test_tidb.py::test_dashboard_hostile",
    "sysctl": "tests/parsers/test_host_config.py::test_sysctl_hostile",
    "proc-cmdline": "tests/parsers/test_host_config.py::test_cmdline_hostile",
    "sysfs-choice": "tests/parsers/test_host_config.py::test_sys_choice_hostile",
    "irq-affinity": "tests/parsers/test_host_config.py::test_irq_affinity_hostile",
    "ethtool-channels": "tests/parsers/test_host_config.py::test_ethtool_channels_headerless_and_hostile",
    "process-affinity": "tests/parsers/test_host_config.py::test_process_status_mixed_and_hostile",
    "mysql-variables": "tests/parsers/test_db_settings.py::test_hostile_input",
    "postgresql-settings": "tests/parsers/test_db_settings.py::test_hostile_input",
    "postgresql-stat-database": "tests/parsers/test_pg_stat_database.py::test_pg_stat_database_hostile_inputs",
    "postgresql-conf": "tests/parsers/test_db_settings.py::test_hostile_input",
    "tidb-config": "tests/parsers/test_db_settings.py::test_hostile_input",
    "perf-script": "tests/parsers/test_perf_script.py::test_binary_junk_is_refused",
    "perf-report": "tests/parsers/test_perf_report.py::test_binary_junk_and_prose",
    "perf-top": "tests/parsers/test_perf_report.py::test_binary_junk_and_prose",
    "sysbench": "tests/parsers/test_loadtest.py::test_junk_is_refused",
    "pgbench": "tests/parsers/test_loadtest.py::test_junk_is_refused",
    "kernel-log": "tests/parsers/test_events.py::test_huge_lines_and_broken_fields_do_not_crash",
    "mysql-error-log": "tests/parsers/test_events.py::test_huge_lines_and_broken_fields_do_not_crash",
    "tidb-log": "tests/parsers/test_events.py::test_huge_lines_and_broken_fields_do_not_crash",
    "prometheus-json": "tests/parsers/test_dashboards.py::test_prometheus_hostile_raise_parse_error",
    "tidb-dashboard-metrics": "tests/parsers/test_dashboards.py::test_tidb_dashboard_metrics_hostile",
    "grafana-csv": "tests/parsers/test_dashboards.py::test_grafana_hostile",
    "tidb-dashboard-statements": "tests/parsers/test_dashboards.py::test_statements_detail_object_epoch_seen_and_hostile",
    "haproxy-stat": "tests/parsers/test_dashboards.py::test_haproxy_hostile",
    "haproxy-cfg": "tests/parsers/test_haproxy_cfg.py::test_not_a_configuration",
    "jmeter-jtl-csv": "tests/parsers/test_jmeter.py::test_binary_input_refused",
    "jmeter-jtl-xml": "tests/parsers/test_jmeter.py::test_doctype_refused_by_both_readers",
    "iostat-text": "tests/parsers/test_iostat.py::test_hostile_iostat_and_mounts_inputs_raise_parse_error_only",
    "iostat-json": "tests/parsers/test_iostat.py::test_hostile_iostat_and_mounts_inputs_raise_parse_error_only",
    "proc-mounts": "tests/parsers/test_iostat.py::test_hostile_iostat_and_mounts_inputs_raise_parse_error_only",
    "proc-diskstats": "tests/parsers/test_iostat.py::test_hostile_iostat_and_mounts_inputs_raise_parse_error_only",
    "vmstat": "tests/parsers/test_memory_inputs.py::test_hostile_memory_inputs_raise_parse_error_only",
    "proc-pressure": "tests/parsers/test_memory_inputs.py::test_hostile_memory_inputs_raise_parse_error_only",
    "proc-meminfo": "tests/parsers/test_memory_inputs.py::test_hostile_memory_inputs_raise_parse_error_only",
}
# Kinds with no hostile test of their own (the generic pathological texts of test_detect_linear.py
# and the fuzzer reach every kind), and why. A test added removes the line.
WITHOUT_HOSTILE = {
    "capture-manifest": "read only through capture.py's manifest handling; no hostile manifest test names the parser",
}


def test_every_kind_has_a_golden_case_or_is_listed() -> None:
    with_case = {case.kind for case in all_cases()}
    assert set(KIND_MODULES) - with_case == set(WITHOUT_GOLDEN), "kinds without a golden case must be listed, and only they"


def test_every_kind_has_a_hostile_test_or_is_listed() -> None:
    assert set(HOSTILE_TESTS) | set(WITHOUT_HOSTILE) == set(KIND_MODULES)
    assert set(HOSTILE_TESTS) & set(WITHOUT_HOSTILE) == set()


@cache
def _module_source(path: str) -> tuple[ast.Module, str]:
    source = (REPO / path).read_text(encoding="utf-8")
    return ast.parse(source), source


def _test_text(path: str, function: str) -> str:
    """The function's source, its decorators' and that of the module-level names and helpers it uses."""
    tree, source = _module_source(path)
    top = {node.name if isinstance(node, ast.FunctionDef) else target.id: node
           for node in tree.body
           for target in ([node] if isinstance(node, ast.FunctionDef) else getattr(node, "targets", []))
           if isinstance(node, ast.FunctionDef) or isinstance(target, ast.Name)}
    node = top.get(function)
    assert isinstance(node, ast.FunctionDef), f"{path}::{function} does not exist"
    text = "".join(ast.get_source_segment(source, part) for part in [*node.decorator_list, node])
    used = {name.id for name in ast.walk(node) if isinstance(name, ast.Name)}
    used |= {name.id for decorator in node.decorator_list for name in ast.walk(decorator) if isinstance(name, ast.Name)}
    return text + "".join(ast.get_source_segment(source, top[name]) for name in sorted(used & set(top)) if name != function)


@pytest.mark.parametrize("kind", sorted(HOSTILE_TESTS))
def test_the_hostile_test_of_a_kind_exists_and_names_it(kind: str) -> None:
    path, function = HOSTILE_TESTS[kind].split("::")
    text = _test_text(path, function)
    assert re.search(rf"\b{KIND_MODULES[kind]}\b", text) or f'"{kind}"' in text, f"{HOSTILE_TESTS[kind]} names neither {KIND_MODULES[kind]} nor {kind!r}"


# "NAME = 5,000", "NAME = 25% of", "NAME = 128 MB", "NAME = 1, 3": the number(s) a docstring quotes
NUMBER = r"[-+]?\d+(?:,\d{3})*(?:\.\d+)?"
QUOTED = re.compile(rf"\b([A-Z][A-Z0-9_]{{2,}}) = ({NUMBER}(?:, {NUMBER})*)(%| ?MB| ?MiB| ?GB| ?GiB)?")
UNIT_BYTES = {"MB": 2**20, "MiB": 2**20, "GB": 2**30, "GiB": 2**30}


def _constant(module, name: str):
    """``name`` in the rule module, else in a dbdiag module it imported or took a name from (a
    constant of the shared computation the rule calls)."""
    if hasattr(module, name):
        return getattr(module, name)
    imported = {value for value in vars(module).values() if isinstance(value, types.ModuleType)}
    imported |= {sys.modules.get(getattr(value, "__module__", "") or "") for value in vars(module).values()}
    owners = [other for other in imported if other and other.__name__.startswith("dbdiag.") and hasattr(other, name)]
    assert owners, f"{module.__name__} docstring quotes {name}, defined nowhere it can see"
    return getattr(owners[0], name)


def _agrees(quoted: str, unit: str | None, constant) -> bool:
    numbers = [float(part.replace(",", "")) for part in quoted.split(", ")]
    if isinstance(constant, (tuple, list, set, frozenset)):
        return sorted(numbers) == sorted(float(value) for value in constant)
    value = float(constant)
    if unit == "%":  # a percentage: the constant is in percent (..._PCT) or a fraction (..._SHARE)
        return numbers[0] in (value, round(value * 100, 9))
    if unit:
        return numbers[0] * UNIT_BYTES[unit.strip()] in (value, value * 2**20) or numbers[0] == value
    return numbers[0] == value


@pytest.mark.parametrize("rule", RULES, ids=[rule.id for rule in RULES])
def test_rule_docs_quote_their_constants(rule) -> None:
    module = importlib.import_module(rule.check.__module__)
    quoted = QUOTED.findall(module.__doc__ or "")
    wrong = [f"{name} = {value}{unit or ''} (module: {_constant(module, name)!r})"
             for name, value, unit in quoted if not _agrees(value, unit, _constant(module, name))]
    assert wrong == [], f"{module.__name__}: {wrong}"
