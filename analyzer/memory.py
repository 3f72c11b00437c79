"""Giving back memory a stage freed, so that the next stage's peak does not stand on it.

Two allocators hold what the stages free. Polars' jemalloc keeps freed pages for a while
(``configure_allocator`` shortens that, before polars loads). Parsing a big log also frees hundreds
of MB of numpy arrays and Python bytes, which live in the C library's allocator (glibc malloc): it
keeps the freed pages for later mallocs, but derive and rules allocate mostly through polars, so the
pages stayed resident beside them until ``release_freed_memory`` (205 MB MariaDB slow log: 464 MB
resident when derive starts without it, 380 MB with it).
"""

from __future__ import annotations

import ctypes
import gc
import os

# polars' allocator (jemalloc, prefixed "_rjem_") keeps freed pages resident for 10 s by default,
# longer than most runs last; after 250 ms it gives them back. Measured side by side, three runs each
# (peak RSS, wall): 52 MB PostgreSQL log 403-431 MB -> 347-367 MB, 205 MB MariaDB log 501-517 MB ->
# 495-496 MB, no slower; 0 ms (at once) was smaller still but cost 0.5-1 s of system time in madvise.
JEMALLOC_SETTING = "_RJEM_MALLOC_CONF"
JEMALLOC_DECAY = "dirty_decay_ms:250,muzzy_decay_ms:0"


def configure_allocator(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Set polars' allocator to give freed pages back soon (``JEMALLOC_DECAY``), unless the user set it.

    jemalloc reads the setting once, when polars' library loads: call this before polars is imported
    (the command line does, first thing); later it changes nothing."""
    environ.setdefault(JEMALLOC_SETTING, JEMALLOC_DECAY)


def release_freed_memory() -> None:
    """Collect Python garbage and return the C allocator's free pages to the system (glibc's
    ``malloc_trim``); where the C library has no ``malloc_trim`` (musl, macOS) only the collection runs."""
    gc.collect()
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim(0)
