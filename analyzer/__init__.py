"""dbdiag: from a capture taken on a slow database server to findings a DBA can act on."""

import functools


@functools.cache
def _installed_version() -> str:
    # importlib.metadata scans the installed distributions (tens of ms): only when the version is asked for
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("dbdiag")
    except PackageNotFoundError:  # running from a source tree without an install
        return "0.0.0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":
        return _installed_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
