"""derive.sql computes fingerprints once per distinct text: the result is the row-by-row one."""

from __future__ import annotations

import polars as pl
import pytest

from dbdiag import sqlnorm
from dbdiag.derive.sql import _classes

TEXTS = [
    "SELECT c FROM sbtest1 WHERE id=42",
    "SELECT c FROM sbtest1 WHERE id=7",
    "SELECT c FROM sbtest1 WHERE id=42",
    "",
    "UPDATE t SET a = 'x' WHERE b IN (1, 2, 3)",
    "select c from sbtest1 where id = 99;",
    "INSERT INTO t VALUES (1, 'a'), (2, 'b')",
    "UPDATE t SET a = 'x' WHERE b IN (1, 2, 3)",
]


def _expected(texts: list[str], dialect: str) -> list[tuple[str, str]]:
    return [(sqlnorm.fingerprint(text, dialect), sqlnorm.fingerprint_id(sqlnorm.fingerprint(text, dialect))) for text in texts]


@pytest.mark.parametrize("dialect", ["mysql", "postgresql"])
def test_classes_match_row_by_row_fingerprints(dialect: str) -> None:
    classes = _classes(pl.Series(TEXTS, dtype=pl.String), dialect)
    assert classes.columns == ["fingerprint", "fp_id"]
    assert list(classes.iter_rows()) == _expected(TEXTS, dialect)


def test_classes_survive_a_hash_collision(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every text hashing to the same value: the texts themselves must decide.
    monkeypatch.setattr(pl.Series, "hash", lambda self, *args, **kwargs: pl.Series([0] * self.len(), dtype=pl.UInt64))
    classes = _classes(pl.Series(TEXTS, dtype=pl.String), "mysql")
    assert list(classes.iter_rows()) == _expected(TEXTS, "mysql")
    assert classes["fp_id"].n_unique() > 1


def test_classes_of_no_text() -> None:
    assert _classes(pl.Series([], dtype=pl.String), "mysql").height == 0
