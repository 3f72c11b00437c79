"""Members of the real captures in the shared corpus (``captures/*.tar.gz``), read in memory, never extracted."""

from __future__ import annotations

import gzip
import tarfile

from tests.conftest import CORPUS

CAPTURES = CORPUS / "captures"


def capture_files(capture: str) -> list[tuple[str, bytes]]:
    """(member path, bytes) of every file member of the capture ``capture``, ``.gz`` members decompressed."""
    out = []
    with tarfile.open(CAPTURES / capture, "r:gz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            data = tar.extractfile(member).read()
            if member.name.endswith(".gz"):
                data = gzip.decompress(data)
            out.append((member.name, data))
    return out


def decoded(data: bytes) -> str:
    """Member bytes as text the way dbdiag reads them: undecodable bytes as backslash escapes."""
    return data.decode("utf-8", "backslashreplace")


def capture_text(capture: str, path: str) -> str:
    """The text of one member, ``path`` as stored in the archive (``capture/os/lscpu.txt``); KeyError when absent."""
    with tarfile.open(CAPTURES / capture, "r:gz") as tar:
        return decoded(tar.extractfile(tar.getmember(path)).read())
