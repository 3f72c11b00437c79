"""dbdiag: from a capture taken on a slow database server to findings a DBA can act on."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("dbdiag")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"
