"""What the analysis is doing now, for a person at a terminal: the stage, and for the stages that go
through bytes (read, parse) the bytes done of the total, percent, rate and time left.

The pipeline and the CLI talk to a ``Progress``: ``stage(name, total_bytes)`` when a stage starts
(``total_bytes`` None: no measure, a spinner), ``advance(done_bytes, detail)`` as bytes get done
(``detail``: the member being parsed). ``NO_PROGRESS`` says nothing; ``terminal_progress()`` draws
one line on standard error with rich, and is None when standard error is not a terminal (piped,
redirected, CI logs): then nothing is printed at all.

>>> NO_PROGRESS.stage("parse", 1024); NO_PROGRESS.advance(512, "db/slow.log")
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Iterator, Protocol

DETAIL_CHARS = 48


class Progress(Protocol):
    def stage(self, name: str, total_bytes: int | None = None) -> None: ...

    def advance(self, done_bytes: int, detail: str = "") -> None: ...


class _Silent:
    def stage(self, name: str, total_bytes: int | None = None) -> None:
        return None

    def advance(self, done_bytes: int, detail: str = "") -> None:
        return None


NO_PROGRESS: Progress = _Silent()


class TerminalProgress:
    """One rich task whose description is the stage; bytes columns show only for stages with a total."""

    def __init__(self, bar) -> None:  # bar: rich.progress.Progress, imported only for a terminal
        self._bar = bar
        self._task = bar.add_task("read", total=None)
        self._stage = "read"

    def stage(self, name: str, total_bytes: int | None = None) -> None:
        """A new task: rich's ``reset`` cannot take a total back to None (no measure, a pulsing bar)."""
        self._stage = name
        self._bar.remove_task(self._task)
        self._task = self._bar.add_task(name, total=total_bytes)

    def advance(self, done_bytes: int, detail: str = "") -> None:
        """``detail`` (a member's path, cut to DETAIL_CHARS) replaces the last one; "" keeps it."""
        if detail:
            shown = detail if len(detail) <= DETAIL_CHARS else "…" + detail[-(DETAIL_CHARS - 1):]
            self._bar.update(self._task, advance=done_bytes, description=f"{self._stage} {shown}")
        else:
            self._bar.update(self._task, advance=done_bytes)

    def stage_total(self, total_bytes: int | None) -> None:
        """The total of the running stage, once known (a directory's size as its walk goes)."""
        self._bar.update(self._task, total=total_bytes)

    def set_done(self, done_bytes: int) -> None:
        """For a stage measured from outside (bytes read so far of the capture): the total done."""
        self._bar.update(self._task, completed=done_bytes)


@contextmanager
def terminal_progress() -> Iterator[TerminalProgress | None]:
    """A progress line on standard error while the block runs, removed at its end; None when
    standard error is not a terminal. ``NO_COLOR`` (any value) turns colour off."""
    if sys.stderr is None or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console  # only a terminal needs it
    from rich.progress import BarColumn, DownloadColumn, Progress as Bar, ProgressColumn, TaskProgressColumn, TextColumn
    from rich.progress import TimeElapsedColumn, TimeRemainingColumn, TransferSpeedColumn
    from rich.text import Text

    class WhenMeasured(ProgressColumn):
        """A bytes column for stages with a total; the others (derive, rules...) show their time instead."""

        def __init__(self, measured: ProgressColumn, unmeasured: ProgressColumn | None = None) -> None:
            super().__init__()
            self._measured, self._unmeasured = measured, unmeasured

        def render(self, task):  # rich's Task; its type is rich's
            if task.total is not None:
                return self._measured.render(task)
            return self._unmeasured.render(task) if self._unmeasured is not None else Text("")

    console = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")))
    columns = (
        TextColumn("{task.description}", markup=False),
        BarColumn(),
        WhenMeasured(TaskProgressColumn(), TimeElapsedColumn()),
        WhenMeasured(DownloadColumn(binary_units=True)),
        WhenMeasured(TransferSpeedColumn()),
        WhenMeasured(TimeRemainingColumn()),
    )
    with Bar(*columns, console=console, transient=True, refresh_per_second=8) as bar:
        yield TerminalProgress(bar)
