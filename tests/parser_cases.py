"""Parser cases found by convention: ``tests/parsers/cases/<kind>.cases`` lists the inputs that kind reads.

One line per case: where the input is, then options. Sample of ``mysql-error-log.cases``::

    # the real MariaDB capture's error log
    capture:mariadb-sysbench-debian12/capture/db/mariadb-error.log
    fixture:events/mysql8-error.log  tz=Europe/Paris

Inputs: ``corpus:<folder>/<file>`` (``../shared/corpus``; ``.gz``/``.bz2`` read decompressed),
``capture:<capture>/<member>`` (a member of ``../shared/corpus/captures/<capture>.tar.gz``, read in
memory), ``fixture:<path>`` (``fixtures/<path>`` in the repo), ``pair:<capture>/<member>`` (a member of
``fixtures/compare/<capture>.tar.gz``, the real captures ``dbdiag compare`` is tested on), ``text:<module>.<NAME>``
(a string constant of a test module). Options: ``source=`` (the ``ParseContext.source``; default the corpus
path, the member path, ``fixtures/<path>`` or ``test``), ``tz=`` (default UTC), ``head=N`` (the
golden keeps the first N rows of each table; counts stay whole), and the explicit exceptions to the
detection matrix (``tests/test_parser_cases.py``), each with the reason in a comment on the line
above: ``rivals=<kind>,...`` (those detectors also claim the input, at a lower confidence) and
``needs_name=yes`` (the content alone is not enough: the file name decides).

The golden of a case is its section (keyed by the input) of ``tests/golden/<kind>.jsonl`` (``tests/golden.py``).
"""

from __future__ import annotations

import bz2
import gzip
import importlib
import tarfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from dbdiag.parsers.base import ParseContext, ParseResult
from tests.conftest import ABSENT_NAME, CORPUS, REPO, corpus_present

CASES_DIR = REPO / "tests" / "parsers" / "cases"
OPTIONS = ("source", "tz", "head", "rivals", "needs_name")
FROM_CORPUS = ("corpus", "capture")


@dataclass(frozen=True)
class Case:
    kind: str
    input: str  # "corpus:oom/x.txt", "capture:<capture>/<member>", "fixture:<path>", "pair:<capture>/<member>", "text:<module>.<NAME>"
    source: str
    tz: str = "UTC"
    head_rows: int | None = None
    rivals: tuple[str, ...] = ()  # other kinds whose detectors claim the input too (and lose)
    needs_name: bool = False  # detection needs the file name, not the content alone

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.input}"

    @property
    def where(self) -> str:
        return self.input.split(":", 1)[0]

    @property
    def name(self) -> str:
        """The member name detection sees (names are hints to the detectors)."""
        return self.input.rsplit("/", 1)[-1].rsplit(".", 1)[-1] if self.where == "text" else self.input.rsplit("/", 1)[-1]



def _default_source(where: str, ref: str) -> str:
    if where == "corpus":
        return ref
    if where in ("capture", "pair"):
        return ref.split("/", 1)[1]
    if where == "fixture":
        return f"fixtures/{ref}"
    return "test"


def _case(kind: str, line: str, path: Path, number: int) -> Case:
    ref, *words = line.split()
    where, _, rest = ref.partition(":")
    if where not in ("corpus", "capture", "fixture", "pair", "text") or not rest:
        raise ValueError(f"{path.name}:{number}: unknown input {ref!r}")
    options = dict(word.split("=", 1) for word in words)
    if unknown := set(options) - set(OPTIONS):
        raise ValueError(f"{path.name}:{number}: unknown options {sorted(unknown)}")
    return Case(
        kind=kind,
        input=ref,
        source=options.get("source", _default_source(where, rest)),
        tz=options.get("tz", "UTC"),
        head_rows=int(options["head"]) if "head" in options else None,
        rivals=tuple(options["rivals"].split(",")) if "rivals" in options else (),
        needs_name=options.get("needs_name") == "yes",
    )


@cache
def all_cases() -> tuple[Case, ...]:
    """Every case of every ``<kind>.cases`` file, in file order."""
    cases = []
    for path in sorted(CASES_DIR.glob("*.cases")):
        for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            line = raw.split(" #", 1)[0].strip()
            if line and not line.startswith("#"):
                cases.append(_case(path.stem, line, path, number))
    return tuple(cases)


def case_params(cases: tuple[Case, ...]) -> list:
    """``pytest.param`` per case, id ``kind/input``; without the corpus its cases fold into one that skips."""
    import pytest

    kept = [case for case in cases if corpus_present() or case.where not in FROM_CORPUS]
    params = [pytest.param(case, id=case.id) for case in kept]
    if len(kept) < len(cases):
        params.append(pytest.param(None, id=ABSENT_NAME))
    return params


def _decompressed(name: str, data: bytes) -> bytes:
    if name.endswith(".gz"):
        return gzip.decompress(data)
    if name.endswith(".bz2"):
        return bz2.decompress(data)
    return data


@cache
def case_bytes(case_input: str) -> bytes:
    """The input's bytes (decompressed), read once per session."""
    where, ref = case_input.split(":", 1)
    if where == "corpus":
        return _decompressed(ref, (CORPUS / ref).read_bytes())
    if where in ("capture", "pair"):
        capture, member = ref.split("/", 1)
        folder = CORPUS / "captures" if where == "capture" else REPO / "fixtures" / "compare"
        with tarfile.open(folder / f"{capture}.tar.gz", "r:gz") as tar:
            return _decompressed(member, tar.extractfile(tar.getmember(member)).read())
    if where == "fixture":
        return _decompressed(ref, (REPO / "fixtures" / ref).read_bytes())
    module, name = ref.rsplit(".", 1)
    return getattr(importlib.import_module(module), name).encode("utf-8")


def case_text(case: Case) -> str:
    return case_bytes(case.input).decode("utf-8", "backslashreplace")


def parse_case(case: Case, specs: dict) -> ParseResult:
    """The case's parser on its input; ``head_rows`` cuts each table (records, warnings, notes stay)."""
    result = specs[case.kind].parse(case_text(case), ParseContext(source=case.source, tz=case.tz))
    if case.head_rows is None:
        return result
    tables = {name: frame.head(case.head_rows) for name, frame in result.tables.items()}
    return ParseResult(tables, result.records, result.warnings, result.notes, result.time_range)


_SKIPPED_NAMES = ("SHA256SUMS", "SOURCES.md")


@cache
def all_inputs() -> tuple[str, ...]:
    """Every input a case could name: each corpus file, each file member of each capture, each file
    under ``fixtures/`` (archives there are captures, read whole by their own tests)."""
    refs = []
    if corpus_present():
        for path in sorted(CORPUS.rglob("*")):
            if not path.is_file() or path.name in _SKIPPED_NAMES:
                continue
            if path.name.endswith(".tar.gz"):
                with tarfile.open(path, "r:gz") as tar:
                    stem = path.name.removesuffix(".tar.gz")
                    refs += [f"capture:{stem}/{member.name}" for member in tar.getmembers() if member.isfile()]
            else:
                refs.append(f"corpus:{path.relative_to(CORPUS)}")
    fixtures = REPO / "fixtures"
    refs += [f"fixture:{path.relative_to(fixtures)}" for path in sorted(fixtures.rglob("*"))
             if path.is_file() and not path.name.endswith((".tar.gz", ".tgz", ".tar", ".zip"))]
    return tuple(refs)
