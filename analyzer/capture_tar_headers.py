"""A ``tarfile.TarInfo`` that survives hostile headers. Part of ``dbdiag.capture``.

tarfile trusts its headers: it reads pax and GNU long-name headers whole, follows a chain of them
by recursion (one frame per header), and parses sparse maps with ``int()`` and indexing that
raise ValueError / IndexError on garbage. The class below bounds the first two and records why
the header scan stopped (tarfile ends silently on a bad or missing header).
"""

from __future__ import annotations

import tarfile

from dbdiag.capture_members import ArchiveStop, KiB

# pax / GNU long-name headers are read whole by tarfile; real ones are a few hundred bytes (a path
# is at most 4 KiB, xattrs and ACLs a few KiB more). A larger one is skipped over, never parsed.
TAR_METADATA_CAP_BYTES = 64 * KiB
# tarfile reads a chain of metadata headers by recursion: one per header.
TAR_METADATA_CHAIN_CAP = 32
_TAR_METADATA_TYPES = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)


def checked_tarinfo_class(header_errors: list[tarfile.HeaderError]) -> type[tarfile.TarInfo]:
    """A TarInfo that records why the header scan stopped (tarfile ends silently on a bad or
    missing header) and refuses metadata headers that tarfile would read whole into memory."""

    chain_depth = [0]  # metadata headers being read, one inside the other (tarfile recurses)

    class _CheckedTarInfo(tarfile.TarInfo):
        @classmethod
        def frombuf(cls, buf, encoding, errors):
            info = super().frombuf(buf, encoding, errors)
            if info.type in _TAR_METADATA_TYPES and info.size > TAR_METADATA_CAP_BYTES:
                # An unknown type: tarfile skips its data like a member's, and we list it as skipped.
                info.type = b"\x7f"
                info.oversized_header = True
            return info

        @classmethod
        def fromtarfile(cls, tarfile_):
            chain_depth[0] += 1
            try:
                if chain_depth[0] > TAR_METADATA_CHAIN_CAP:
                    raise ArchiveStop(f"more than {TAR_METADATA_CHAIN_CAP} extended headers in a row")
                return super().fromtarfile(tarfile_)
            except tarfile.HeaderError as exc:
                header_errors.append(exc)
                raise
            finally:
                chain_depth[0] -= 1

    return _CheckedTarInfo
