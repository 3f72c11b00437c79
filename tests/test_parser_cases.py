"""Every parser case (``tests/parsers/cases/<kind>.cases``, see ``tests/parser_cases.py``) read by its
parser equals its golden, and the detection matrix: every input against every detector.

``pytest --update-goldens`` rewrites the goldens of the cases that ran (``tests/golden/<kind>.jsonl``).
"""

from __future__ import annotations

import pytest

from dbdiag import tables as T
from dbdiag.detect import MIN_CONFIDENCE, looks_binary
from dbdiag.parsers import registry
from dbdiag.parsers.base import DETECT_HEAD_BYTES
from tests.conftest import ABSENT_NAME, skip_without_corpus
from tests.golden import check_golden, read_golden
from tests.parser_cases import FROM_CORPUS, all_cases, all_inputs, case_bytes, case_params, parse_case

SPECS = registry()
BY_KIND = {spec.kind: spec for spec in SPECS}
CASES = all_cases()
NOT_PARSER_KINDS = {"postgresql-error-events"}  # goldens of derive output, checked in tests/parsers/test_events.py


def _order(kind: str) -> list[str]:
    return [case.input for case in CASES if case.kind == kind]


@pytest.mark.parametrize("case", case_params(CASES))
def test_case_reads_as_its_golden(case, update_goldens: bool) -> None:
    if case is None:
        skip_without_corpus()
    result = parse_case(case, BY_KIND)
    for name, frame in result.tables.items():
        if name in T.SCHEMAS:
            assert dict(frame.schema) == T.SCHEMAS[name], f"{case.id}: table {name} off its schema in tables.py"
    check_golden(case.kind, case.input, result, update_goldens, _order(case.kind))


def test_cases_files_name_registered_kinds_and_goldens_hold_only_cases() -> None:
    kinds = {case.kind for case in CASES}
    assert kinds - set(BY_KIND) == set(), "a cases file is named after no registered parser kind"
    for kind in kinds | NOT_PARSER_KINDS:
        stale = set(read_golden(kind)) - set(_order(kind)) if kind not in NOT_PARSER_KINDS else set()
        assert stale == set(), f"golden {kind}.jsonl holds sections of no case: {sorted(stale)} (--update-goldens drops them)"
    assert len({case.id for case in CASES}) == len(CASES), "a case is listed twice"


# Inputs some detector claims that are no parser case, each with why. A fix (or a new case) removes its line.
CLAIMED_WITHOUT_A_CASE = {
    "corpus:jmeter/jmeter__Bug52968.csv": ({"jmeter-jtl-csv"}, "refused: its 10 fields match no JMeter layout (test_jmeter.py)"),
    "corpus:slowlog-mysql/percona-toolkit__slow015.txt": ({"mysql-slowlog"}, "refused: no entry has a Query_time and a statement (test_mysql_slowlog.py)"),
    "corpus:slowlog-tidb/diag__avg_process_time_by_plan.csv": ({"tidb-slow-query-table"}, "refused: an aggregate without statements (test_tidb.py)"),
}


def _input_params() -> list:
    refs = all_inputs() + tuple(dict.fromkeys(case.input for case in CASES if case.where in ("text", "pair")))
    params = [pytest.param(ref, id=ref) for ref in refs]
    if not any(ref.startswith(FROM_CORPUS) for ref in refs):
        params.append(pytest.param(None, id=ABSENT_NAME))
    return params


CASE_KINDS: dict[str, set[str]] = {}
CASES_BY_INPUT: dict[str, list] = {}
for _case in CASES:
    CASE_KINDS.setdefault(_case.input, set()).update({_case.kind, *_case.rivals})
    CASES_BY_INPUT.setdefault(_case.input, []).append(_case)


@pytest.mark.parametrize("ref", _input_params())
def test_detection_matrix(ref) -> None:
    """Every corpus file, capture member and fixture against every detector of the registry.

    The detectors that claim it (score >= MIN_CONFIDENCE, with its name or none) are exactly the
    kinds of its cases (and their listed ``rivals=``), or the listed exceptions: no false positive
    anywhere. For a case, its kind scores highest with the name (``detect.detect`` picks it) and the
    content alone is enough, unless its line says ``needs_name=yes``. Binary is nobody's."""
    if ref is None:
        skip_without_corpus()
    data = case_bytes(ref)[:DETECT_HEAD_BYTES]
    if looks_binary(data):
        assert ref not in CASE_KINDS and ref not in CLAIMED_WITHOUT_A_CASE
        return
    name = ref.rsplit("/", 1)[-1]
    head = data.decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    named = {spec.kind: spec.detect(head, name) for spec in SPECS}
    anonymous = {spec.kind: spec.detect(head, "member") for spec in SPECS}
    claims = {kind for kind in named if max(named[kind], anonymous[kind]) >= MIN_CONFIDENCE}
    expected = CASE_KINDS.get(ref) or CLAIMED_WITHOUT_A_CASE.get(ref, (set(), ""))[0]
    assert claims == expected, f"{ref}: claimed by {sorted(claims)}, expected {sorted(expected)}"
    for case in CASES_BY_INPUT.get(ref, ()):
        top = max(named.values())
        assert named[case.kind] == top and sorted(named.values()).count(top) == 1, f"{case.id}: does not win detection {named}"
        content_enough = anonymous[case.kind] >= MIN_CONFIDENCE
        assert content_enough != case.needs_name, f"{case.id}: content alone {'is' if content_enough else 'is not'} enough"


def test_the_listed_exceptions_are_inputs_and_every_case_is_one() -> None:
    inputs = set(all_inputs())
    stale = [ref for ref in CLAIMED_WITHOUT_A_CASE if ref in CASE_KINDS or (ref.startswith("fixture:") and ref not in inputs)]
    assert stale == []
    outside = [case.id for case in CASES if case.where == "fixture" and case.input not in inputs]
    assert outside == [], "a case's input is not among the inputs the matrix reads"
