"""Report files written so that nothing is destroyed: not the capture, not a device, not a link.

Three steps, the first two before the analysis so that an impossible output fails at once:

- ``report_paths("out/", ["json", "md"], "dbdiag-report")`` -> ``out/dbdiag-report.json``, ...:
  a folder (``.``, ``..``, ``/``, an existing one, a name ending in ``/``) gets the default names;
  a device gets every format (a FIFO or socket only one); otherwise the suffix is replaced per format.
- ``check_target(path, capture)`` refuses a target that is the capture or lies inside a capture
  folder (links resolved, hard links by inode), creates missing folders and tries a file there.
- ``write_report(path, text)``: a regular file (or a new one) is written beside itself, synced,
  and renamed over (then the folder synced), so a crash never leaves half or none of a report;
  a symlink to one is followed (the link stays).
  Anything else (``/dev/null``, a FIFO, ``/dev/stdout``) is opened and written through, never
  renamed over or unlinked. The ``.partial`` file is removed on every way out, signals included
  (``signals_raise`` turns SIGTERM and SIGHUP into ``Interrupted`` for that).
"""

from __future__ import annotations

import errno
import os
import signal
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from dbdiag.capture import printable_name

# The kernel follows at most 40 symlinks in one path lookup.
MAX_SYMLINK_HOPS = 40
_CAUGHT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class OutputError(Exception):
    """A report cannot be written there: one line naming the path and the reason."""


class Interrupted(BaseException):
    """A signal asked dbdiag to stop; a BaseException, like KeyboardInterrupt, so nothing swallows it."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


@contextmanager
def signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise ``Interrupted`` so that ``finally`` clean-ups run.

    Signals someone chose to ignore (``nohup``) stay ignored; outside the main thread, where
    Python cannot set handlers, nothing changes.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {number: signal.getsignal(number) for number in _CAUGHT_SIGNALS}

    def stop(number: int, frame: object) -> None:
        raise Interrupted(number)

    for number, handler in previous.items():
        if handler is signal.SIG_DFL:
            signal.signal(number, stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def report_paths(output: str | None, suffixes: list[str], default_stem: str) -> dict[str, Path | None]:
    """One path per format (``None``: standard output, for ``-o -``).

    >>> report_paths("..", ["json", "md"], "dbdiag-report")
    {'json': PosixPath('../dbdiag-report.json'), 'md': PosixPath('../dbdiag-report.md')}
    >>> report_paths("out/report.html", ["json", "md"], "dbdiag-report")
    {'json': PosixPath('out/report.json'), 'md': PosixPath('out/report.md')}
    """
    if output == "-":
        if len(suffixes) != 1:
            raise OutputError("-o - (standard output) takes exactly one --format")
        return {suffixes[0]: None}
    if output is None:
        return {suffix: Path(f"{default_stem}.{suffix}") for suffix in suffixes}
    if not output:
        raise OutputError("the output path is empty (-o ''): name a file or folder, or - for standard output")
    path = Path(output)
    if output.endswith("/") or path.name in ("", ".", "..") or path.is_dir():
        return {suffix: path / f"{default_stem}.{suffix}" for suffix in suffixes}
    if len(suffixes) == 1:
        return {suffixes[0]: path}
    if _written_through(path):
        if _is_pipe(path):  # its reader stops at the first report's end: the second would wait forever
            raise OutputError(f"{_shown(path)}: a FIFO or socket takes exactly one --format")
        return {suffix: path for suffix in suffixes}
    return {suffix: path.with_suffix(f".{suffix}") for suffix in suffixes}


def check_target(path: Path, capture: Path) -> None:
    """Refuse ``path`` if writing it could touch the capture or cannot work; create its folders."""
    _refuse_capture(path, capture)
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        pass  # a new file, or a folder still to create (the mkdir below says why not)
    except OSError as error:  # a symlink loop, a name too long...
        raise OutputError(f"{_shown(path)}: {_reason(error)}") from None
    if _written_through(path):
        if not os.access(path, os.W_OK):
            raise OutputError(f"{_shown(path)}: cannot write report: permission denied")
        return
    real = Path(os.path.realpath(path))
    if real.is_dir():
        raise OutputError(f"{_shown(path)}: is a folder")
    folder = real.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise OutputError(f"{_shown(path)}: cannot create the output folder {_shown(folder)}: a file of that name exists") from None
    except OSError as error:
        raise OutputError(f"{_shown(path)}: cannot create the output folder {_shown(folder)}: {_reason(error)}") from None
    probe = _temporary_name(real)
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        raise OutputError(f"{_shown(path)}: cannot write in {_shown(folder)}: {_reason(error)}") from None
    os.unlink(probe)


def write_report(path: Path, text: str) -> None:
    """Write one report: through a non-regular target, else atomically (see the module docstring)."""
    data = text.encode("utf-8", "backslashreplace")
    try:
        if _written_through(path):
            _write_through(path, data)
        else:
            _replace(Path(os.path.realpath(path)), data)
    except OSError as error:
        raise OutputError(f"{_shown(path)}: cannot write report: {_reason(error)}") from None


def _refuse_capture(path: Path, capture: Path) -> None:
    real, capture_real = os.path.realpath(path), os.path.realpath(capture)
    if real == capture_real or _same_file(path, capture):
        raise OutputError(f"{_shown(path)}: is the capture; give -o another path")
    if os.path.isdir(capture_real) and os.path.commonpath([real, capture_real]) == capture_real:
        raise OutputError(f"{_shown(path)}: is inside the capture folder {_shown(capture)}; give -o a path outside it")


def _same_file(path: Path, capture: Path) -> bool:
    try:
        return os.path.samefile(path, capture)
    except OSError:  # one of them does not exist (yet)
        return False


def _written_through(path: Path) -> bool:
    """True when ``path`` exists and is not a regular file or folder, or names an open descriptor."""
    if _names_a_descriptor(path):
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _is_pipe(path: Path) -> bool:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _names_a_descriptor(path: Path) -> bool:
    """``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1`` and links to them: a name in /proc of a
    file already open. Even when that file is regular, it is the caller's (``>> log``), so it is
    appended to, not replaced by another file of the same name."""
    hop = os.path.abspath(path)
    for _ in range(MAX_SYMLINK_HOPS):
        if os.path.realpath(os.path.dirname(hop)).startswith("/proc/"):
            return True
        if not os.path.islink(hop):
            return False
        hop = os.path.join(os.path.dirname(hop), os.readlink(hop))
    return False


def _write_through(path: Path, data: bytes) -> None:
    # O_APPEND: a regular file behind /dev/stdout keeps what the caller's shell put before;
    # devices and FIFOs ignore it. No O_CREAT, no O_TRUNC: this never makes or cuts a file.
    descriptor = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY)
    try:
        _write_all(descriptor, data)
    finally:
        os.close(descriptor)


def _replace(real: Path, data: bytes) -> None:
    """Write beside ``real`` and rename over it; the temporary file goes whatever happens."""
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode) & 0o777
    except FileNotFoundError:
        mode = None  # a new file: 0666 less the umask, like any file the user writes
    temporary = _temporary_name(real)
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    renamed = False
    try:
        try:
            if mode is not None:
                os.fchmod(descriptor, mode)
            _write_all(descriptor, data)
            # The data on disk before the rename: file systems may commit a rename before the
            # data (ext4 delayed allocation), and a crash would leave an empty report in place.
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, real)
        renamed = True
    finally:
        if not renamed:
            temporary.unlink(missing_ok=True)
    _sync_folder(real.parent)


def _sync_folder(folder: Path) -> None:
    """Commit the rename (the folder's entry) to disk; a file system that cannot sync a folder
    (EINVAL, ENOTSUP: some FUSE and network ones) has the report anyway."""
    descriptor = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(descriptor)
    except OSError as error:
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(descriptor)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def _temporary_name(real: Path) -> Path:
    return real.parent / f".{real.name}.{os.getpid()}.partial"


def _shown(path: Path) -> str:
    """A path in a one-line message: control characters and undecodable bytes escaped."""
    return printable_name(str(path))


def _reason(error: OSError) -> str:
    """'No space left on device' -> 'no space left on device'."""
    return (error.strerror or str(error)).lower()
