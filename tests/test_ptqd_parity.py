"""Parity with pt-query-digest: statement classes and their counts on every MySQL-family corpus log.

For each log in ../shared/corpus/slowlog-mysql, pt-query-digest 3.x is run once with
``--group-by fingerprint,arg --output json --limit 1000000,1000000`` (``--limit 100%`` would
drop classes whose total time is zero, e.g. a run of ``administrator command: Quit`` at
0.000000 s). Its fingerprint classes are compared with ours, computed two ways:

- ``test_classes_match``: our slow-log parser's statements through ``fingerprint_series``,
  i.e. what a dbdiag report shows. Files where the two differ are listed in
  EXPECTED_DIFFERENCES with the reason, and each asserts what the difference is.
- ``test_fingerprints_of_pt_statements``: pt's own statement texts (its ``arg`` classes)
  through ``fingerprint``, which isolates the fingerprint from the parser.

pt-query-digest is installed on CI by the percona-toolkit package; without it these tests are
skipped with that reason (they cannot pass without their reference).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache

import pytest

from dbdiag.parsers.base import ParseContext, ParseError
from dbdiag.parsers.mysql_slowlog import SPEC as MYSQL_SLOWLOG
from dbdiag.sqlnorm import fingerprint, fingerprint_id, fingerprint_series
from conftest import CORPUS, corpus_names

pytestmark = pytest.mark.usefixtures("corpus")  # every test here compares on the corpus logs
SLOWLOG_DIR = CORPUS / "slowlog-mysql"
SLOWLOGS = corpus_names("slowlog-mysql", exclude=())
PT_QUERY_DIGEST = shutil.which("pt-query-digest")
PT_MISSING = "pt-query-digest not installed (apt-get install percona-toolkit): no reference to compare with"
PT_MAX_FINGERPRINT = 5000  # pt's JSON output cuts fingerprints (and arg items) to 5000 characters

# name -> why pt-query-digest's classes differ from ours. Each has its own assertion below.
EXPECTED_DIFFERENCES = {
    "go-mysql__slow023.log": (
        "pt's parser bug: after an event whose only statement is `use `dbnameb`;` it takes the "
        "next event's header lines as a statement and loses the last two events; we read "
        "'use `dbnameb`', 'select @@collation_database' and the last SELECT"
    ),
    "percona-toolkit__slow056.txt": (
        "an event whose only statement is `use test_db;` is '/* No query */' for pt "
        "(fingerprint ''); our parser keeps the statement 'use test_db'"
    ),
    "percona-toolkit__slow017.txt": (
        "pt fails on the overflowed Query_time '18446744073708.796870.000036' and reports no "
        "class; we read the statement"
    ),
}
# pt's JSON holds at most 5000 characters of a statement, so its statements cannot be re-read.
PT_STATEMENT_CUT = {"percona-toolkit__slow027.txt"}


@dataclass(frozen=True)
class PtReport:
    classes: Counter  # fingerprint (as printed, at most 5000 chars) -> query_count
    checksums: dict  # fingerprint -> checksum
    statements: Counter  # statement text (pt's `arg`, at most 5000 chars) -> count
    stderr: str


def _json_documents(text: str) -> list[dict]:
    decoder, documents, index = json.JSONDecoder(), [], 0
    while index < len(text):
        if text[index].isspace():
            index += 1
            continue
        document, index = decoder.raw_decode(text, index)
        documents.append(document)
    return documents


def _run_pt(name: str) -> PtReport:
    command = [
        PT_QUERY_DIGEST,
        "--no-version-check",
        "--output",
        "json",
        "--group-by",
        "fingerprint,arg",
        "--limit",
        "1000000,1000000",
        str(SLOWLOG_DIR / name),
    ]
    done = subprocess.run(command, capture_output=True, text=True, errors="backslashreplace", timeout=120)
    classes, checksums, statements = Counter(), {}, Counter()
    for document in _json_documents(done.stdout):
        for item in document.get("classes", []):
            if item["attribute"] == "fingerprint":
                classes[item["fingerprint"]] += item["query_count"]
                checksums[item["fingerprint"]] = item["checksum"]
            elif item["attribute"] == "arg":
                statements[item["fingerprint"]] += item["query_count"]
    return PtReport(classes, checksums, statements, done.stderr)


@pytest.fixture(scope="module")
def pt_reports() -> dict[str, PtReport]:
    if PT_QUERY_DIGEST is None:
        pytest.skip(PT_MISSING)
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip(SLOWLOGS, pool.map(_run_pt, SLOWLOGS)))


@cache
def _our_fingerprints(name: str) -> tuple[str, ...] | None:
    """Our parser's statements of the file through ``fingerprint_series`` (nulls dropped), or None
    when the parser refuses it; once per session, as several tests compare them."""
    text = (SLOWLOG_DIR / name).read_bytes().decode("utf-8", "backslashreplace")
    try:
        result = MYSQL_SLOWLOG.parse(text, ParseContext(source=name))
    except ParseError:
        return None
    return tuple(fingerprint_series(result.tables["statement"]["sql"]).drop_nulls().to_list())


def _our_classes(name: str) -> Counter | None:
    """Our fingerprint classes of the file, or None when the parser refuses it."""
    fingerprints = _our_fingerprints(name)
    if fingerprints is None:
        return None
    return Counter(fp[:PT_MAX_FINGERPRINT] for fp in fingerprints)


def _full_fingerprints(name: str) -> set[str]:
    fingerprints = _our_fingerprints(name)
    assert fingerprints is not None, f"our parser refuses {name}"
    return set(fingerprints)


def _matches(ours: Counter | None, pt: PtReport) -> bool:
    return (ours or Counter()) == pt.classes


@pytest.mark.parametrize("name", SLOWLOGS)
def test_classes_match(name: str, pt_reports: dict[str, PtReport]) -> None:
    pt = pt_reports[name]
    ours = _our_classes(name)
    if name == "go-mysql__slow023.log":
        assert ours - pt.classes == Counter(
            {
                "use ?": 1,
                "select @@collation_database": 1,
                "select another_field from table_c where a_third_field = ? and site_id = ?": 1,
            }
        )
        assert pt.classes - ours == Counter({"user@host: backup[backup] @ localhost [] id: ? set timestamp=?": 1})
        return
    if name == "percona-toolkit__slow056.txt":
        assert ours - pt.classes == Counter({"use ?": 1}) and pt.classes - ours == Counter({"": 1})
        return
    if name == "percona-toolkit__slow017.txt":
        assert "Failed to compile Query_time handler" in pt.stderr and not pt.classes
        assert ours == Counter({"select * from mytbl": 1})
        return
    if ours is None:  # the parser refuses the file: pt must have found nothing in it either
        assert not pt.classes, f"our parser refuses {name} but pt-query-digest found {dict(pt.classes)}"
        return
    assert ours == pt.classes, EXPECTED_DIFFERENCES.get(name, "")
    for full in _full_fingerprints(name):
        assert fingerprint_id(full) == pt.checksums[full[:PT_MAX_FINGERPRINT]], full[:200]


def test_parity_rate_and_exceptions(pt_reports: dict[str, PtReport]) -> None:
    matching = {name for name in SLOWLOGS if _matches(_our_classes(name), pt_reports[name])}
    assert set(SLOWLOGS) - matching == set(EXPECTED_DIFFERENCES)
    assert len(matching) / len(SLOWLOGS) >= 0.9, f"{len(matching)}/{len(SLOWLOGS)} logs match pt-query-digest"


@pytest.mark.parametrize("name", SLOWLOGS)
def test_fingerprints_of_pt_statements(name: str, pt_reports: dict[str, PtReport]) -> None:
    pt = pt_reports[name]
    if name in PT_STATEMENT_CUT:
        assert any(len(statement) == PT_MAX_FINGERPRINT for statement in pt.statements)
        return
    ours = Counter()
    for statement, count in pt.statements.items():
        ours[fingerprint(statement)[:PT_MAX_FINGERPRINT]] += count
    assert ours == pt.classes


def test_corpus_is_the_expected_one() -> None:
    # The exception lists name files: they must exist, or the lists silently rot.
    assert set(EXPECTED_DIFFERENCES) | PT_STATEMENT_CUT <= set(SLOWLOGS)
    assert len(SLOWLOGS) >= 40
