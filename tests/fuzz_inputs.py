"""What the fuzzer (``tests/fuzzing.py``) runs: seed inputs to mutate, and the ``Case`` shape.

Seeds are every file under the shared corpus and the small fixtures (``fixtures/``, without the
generators' code), and every regular member of the archives among them. A compressed file
(``.gz .bz2 .xz``) is a seed of its plain bytes plus the codec, re-applied to each mutant; seeds
over ``MAX_SEED_BYTES`` are cut there at a line end (a parser's cost on a 1 MiB input is the
fuzzer's concern, not on a 5 MiB one). Sample::

    Seed(label="corpus/captures/mariadb-sysbench-debian12.tar.gz:capture/db/slow.log",
         name="capture/db/slow.log", data=b"# Time: 2024-...", codec=None)
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

MAX_SEED_BYTES = 1024 * 1024
CODECS = {".gz": "gzip", ".bz2": "bzip2", ".xz": "xz"}
_CODE_SUFFIXES = (".py", ".sh", ".pyc")
_ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".tar.xz", ".tar.bz2")

GOOD_MEMBER = "good/mpstat.txt"
# The member every capture carries beside the bad input: the report must still have read it.
GOOD_SOURCE = Path("mpstat") / "sysstat__expected.mpstat-A.txt"


@dataclass(frozen=True)
class Seed:
    label: str  # where it came from, for the description of a failure
    name: str  # its path in the capture (names are hints to the detectors, so they are kept)
    data: bytes  # plain bytes (decompressed when the file was compressed)
    codec: str | None = None  # the compression of the file, applied to each mutant
    archive: bool = False  # a tar: each mutant is a whole capture, the good member its first entry


@dataclass(frozen=True)
class Case:
    """One capture to run through the CLI.

    Either ``members`` (path -> bytes) put in a capture directory beside the good member, or
    ``capture_file`` (name, bytes): a whole capture (an archive) that holds the good member
    itself. ``exits`` are the exit codes allowed; ``good_required`` whether the good member must
    be in the report as read; ``options`` extra CLI options.
    """

    label: str
    members: tuple[tuple[str, bytes], ...] = ()
    capture_file: tuple[str, bytes] | None = None
    exits: frozenset[int] = frozenset({0, 3})
    good_required: bool = True
    options: tuple[str, ...] = ()
    parts: tuple[str, ...] = field(default=())  # descriptions of the mutants a batch holds

    def input_bytes(self, good: bytes) -> int:
        if self.capture_file is not None:
            return len(self.capture_file[1])
        return len(good) + sum(len(data) for _, data in self.members)


def compress(data: bytes, codec: str | None) -> bytes:
    if codec == "gzip":
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == "bzip2":
        return bz2.compress(data, 6)
    if codec == "xz":
        return lzma.compress(data, preset=1)
    return data


def _decompress(data: bytes, codec: str) -> bytes | None:
    try:
        if codec == "gzip":
            return gzip.decompress(data)
        if codec == "bzip2":
            return bz2.decompress(data)
        return lzma.decompress(data)
    except (OSError, EOFError, ValueError, lzma.LZMAError):
        return None


def _capped(seed: Seed) -> Seed:
    if len(seed.data) <= MAX_SEED_BYTES:
        return seed
    cut = seed.data.rfind(b"\n", 0, MAX_SEED_BYTES) + 1 or MAX_SEED_BYTES
    return Seed(f"{seed.label} (first {cut} bytes)", seed.name, seed.data[:cut], seed.codec, seed.archive)


def _file_seed(label: str, name: str, data: bytes) -> Seed:
    codec = CODECS.get(Path(name).suffix)
    plain = _decompress(data, codec) if codec else None
    if plain is None:
        return _capped(Seed(label, name, data))
    return _capped(Seed(label, name, plain, codec))


def _archive_seeds(label: str, data: bytes) -> list[Seed]:
    seeds = []
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        for info in archive.getmembers():
            handle = archive.extractfile(info) if info.isreg() else None
            if handle is not None:
                seeds.append(_file_seed(f"{label}:{info.name}", info.name.lstrip("./"), handle.read()))
    return seeds


def load_seeds(corpus: Path, fixtures: Path) -> list[Seed]:
    """Every corpus file and fixture as a seed, archives also as their members, in path order."""
    seeds = []
    for root, prefix in ((corpus, "corpus"), (fixtures, "fixtures")):
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            relative = path.relative_to(root).as_posix()
            if path.suffix in _CODE_SUFFIXES or "__pycache__" in relative or relative.startswith("."):
                continue
            data = path.read_bytes()
            label = f"{prefix}/{relative}"
            if relative.endswith(_ARCHIVE_SUFFIXES):
                whole = _file_seed(label, path.name, data)
                seeds.append(Seed(whole.label, whole.name, whole.data, whole.codec, archive=True))
                seeds.extend(_archive_seeds(label, data))
            else:
                seeds.append(_file_seed(label, path.name, data))
    return seeds
