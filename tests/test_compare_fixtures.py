"""Every capture of fixtures/compare is small and says in README.md how it was made."""

from __future__ import annotations

from tests.compare_fixtures import MAX_FIXTURE_BYTES, PAIRS


def test_every_compare_fixture_is_small_and_documented() -> None:
    readme = (PAIRS / "README.md").read_text(encoding="utf-8")
    captures = sorted(PAIRS.glob("*.tar.gz"))
    assert len(captures) >= 10
    for path in captures:
        assert path.stat().st_size < MAX_FIXTURE_BYTES, path.name
        assert f"| `{path.name}` | {path.stat().st_size:,} B |" in readme, path.name
