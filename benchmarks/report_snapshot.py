"""JSON and Markdown reports of every bundled capture and fixture file, written to a folder, so that two
trees can be compared report by report (a refactoring must leave every report byte for byte the same).

Run by hand, from the repository, once on the tree before a change and once after:

    .venv/bin/python benchmarks/report_snapshot.py --out /tmp/snap-before
    .venv/bin/python benchmarks/report_snapshot.py --out /tmp/snap-after --big /tmp/big/slow.log
    .venv/bin/python benchmarks/report_snapshot.py --compare /tmp/snap-before /tmp/snap-after

Inputs: every ``.tar.gz``/``.tgz``/``.zip`` under ``fixtures/`` and ``../shared/corpus/captures``, every
other file under ``fixtures/`` (each as a one-file capture; generators' code left out), every file of
``../shared/corpus`` outside ``captures`` (as one-file captures), and the ``--big`` logs. Each input runs
in this process through the same calls as ``dbdiag analyze -f json -f md`` (``generated_at`` left
null); a run that raises is recorded as its error text. Names in the folder are the input's path with
``/`` as ``__``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
CODE_SUFFIXES = (".py", ".sh", ".patch", ".md", ".pyc")


def inputs(big: list[Path]) -> list[Path]:
    """Every input the snapshot covers, in a fixed order."""
    found: list[Path] = []
    for root in (REPO / "fixtures", CORPUS):
        if not root.is_dir():
            continue
        for path in sorted(root.rglob("*")):
            if not path.is_file() or "__pycache__" in path.parts:
                continue
            if path.name.endswith(ARCHIVE_SUFFIXES) or not path.name.endswith(CODE_SUFFIXES):
                found.append(path)
    return found + big


def snapshot_name(path: Path) -> str:
    for root in (REPO, CORPUS.parent):
        if path.is_relative_to(root):
            return str(path.relative_to(root)).replace("/", "__")
    return str(path).strip("/").replace("/", "__")


def write_snapshot(paths: list[Path], out: Path) -> None:
    """Reports of ``paths``, each analysed by its path relative to the repository (reports name the
    capture's path: two checkouts in different folders then give the same text)."""
    from dbdiag.pipeline import analyze
    from dbdiag.report import build_document, render

    out = out.resolve()
    out.mkdir(parents=True, exist_ok=False)
    os.chdir(REPO)
    for index, path in enumerate(paths, 1):
        name = snapshot_name(path)
        print(f"[{index}/{len(paths)}] {name}", file=sys.stderr)
        try:
            document = build_document(analyze(Path(os.path.relpath(path, REPO))), generated_at=None)
            (out / f"{name}.json").write_text(render(document, "json"))
            (out / f"{name}.md").write_text(render(document, "md"))
        except Exception:  # noqa: BLE001 -- a failing input is part of the snapshot, not the end of it
            (out / f"{name}.error").write_text(traceback.format_exc(limit=-3))


def compare(before: Path, after: Path) -> int:
    """Print each report that differs or exists on one side only; the exit code is how many."""
    names = sorted({p.name for p in before.iterdir()} | {p.name for p in after.iterdir()})
    differ = 0
    for name in names:
        a, b = before / name, after / name
        if not a.exists() or not b.exists():
            print(f"only in {'after' if b.exists() else 'before'}: {name}")
            differ += 1
        elif a.read_bytes() != b.read_bytes():
            print(f"differs: {name}")
            differ += 1
    print(f"{len(names)} reports, {differ} differ")
    return min(differ, 125)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="folder to write (must not exist)")
    parser.add_argument("--big", type=Path, action="append", default=[], help="a big log to include (repeatable)")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if not args.out:
        parser.error("--out or --compare is needed")
    write_snapshot(inputs(args.big), args.out)


if __name__ == "__main__":
    main()
