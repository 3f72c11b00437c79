"""Every parser case (``tests/parsers/cases/<kind>.cases``, see ``tests/parser_cases.py``) read by its
parser equals its golden, and detection over the whole registry picks its kind.

``pytest --update-goldens`` rewrites the goldens of the cases that ran (``tests/golden/<kind>.jsonl``).
"""

from __future__ import annotations

import pytest

from dbdiag import tables as T
from dbdiag.detect import MIN_CONFIDENCE, detect
from dbdiag.parsers import registry
from dbdiag.parsers.base import DETECT_HEAD_BYTES
from tests.conftest import skip_without_corpus
from tests.golden import check_golden, read_golden
from tests.parser_cases import all_cases, case_bytes, case_params, parse_case

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


@pytest.mark.parametrize("case", case_params(CASES))
def test_detection_picks_only_the_case_kind(case) -> None:
    """The detection matrix: the case's input against every detector of the registry. Its kind wins
    (``detect.detect``), no other detector claims it (score >= MIN_CONFIDENCE), and its content is
    enough without the name, save the exceptions its cases line names (``rivals=``, ``needs_name=``)."""
    if case is None:
        skip_without_corpus()
    data = case_bytes(case.input)
    found = detect(data, case.name, SPECS)
    assert found.spec is not None and found.spec.kind == case.kind, f"{case.id}: detection picks {found.spec and found.spec.kind}"
    head = data[:DETECT_HEAD_BYTES].decode("utf-8", "backslashreplace").replace("\r\n", "\n")
    claims = {s.kind for s in SPECS if s.kind != case.kind and s.detect(head, case.name) >= MIN_CONFIDENCE}
    assert claims == set(case.rivals), f"{case.id}: other detectors claiming it {sorted(claims)}, expected {list(case.rivals)}"
    anonymous = BY_KIND[case.kind].detect(head, "member") >= MIN_CONFIDENCE
    assert anonymous != case.needs_name, f"{case.id}: content alone {'is' if anonymous else 'is not'} enough"


def test_cases_files_name_registered_kinds_and_goldens_hold_only_cases() -> None:
    kinds = {case.kind for case in CASES}
    assert kinds - set(BY_KIND) == set(), "a cases file is named after no registered parser kind"
    for kind in kinds | NOT_PARSER_KINDS:
        stale = set(read_golden(kind)) - set(_order(kind)) if kind not in NOT_PARSER_KINDS else set()
        assert stale == set(), f"golden {kind}.jsonl holds sections of no case: {sorted(stale)} (--update-goldens drops them)"
    assert len({case.id for case in CASES}) == len(CASES), "a case is listed twice"
