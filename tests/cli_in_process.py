"""The CLI run in-process for the ``--tables`` and ``fleet`` tests: (exit code, stdout, stderr).

A Python exception (a traceback a user would see) fails the test instead of counting as an exit code.
"""

from __future__ import annotations

from typer.testing import CliRunner

from dbdiag.cli import app


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args}: {result.exception!r}") from result.exception
    return result.exit_code, result.stdout, result.stderr
