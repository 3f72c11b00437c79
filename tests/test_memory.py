"""The allocator settings the command line makes before polars loads, and the page return after parsing."""

from __future__ import annotations

import os
import subprocess
import sys

from dbdiag import memory


def test_allocator_decay_is_set_unless_the_user_set_one() -> None:
    unset: dict[str, str] = {}
    memory.configure_allocator(unset)
    assert unset == {memory.JEMALLOC_SETTING: memory.JEMALLOC_DECAY}
    own = {memory.JEMALLOC_SETTING: "dirty_decay_ms:0"}
    memory.configure_allocator(own)
    assert own == {memory.JEMALLOC_SETTING: "dirty_decay_ms:0"}


def test_the_command_line_sets_it_before_polars_loads() -> None:
    """jemalloc reads the setting when polars' library loads: importing the command line must not load polars,
    and ``main`` sets the setting before it runs the command (which imports polars)."""
    probe = (
        "import os, sys; import dbdiag.cli as cli\n"
        "assert 'polars' not in sys.modules, 'importing the command line loaded polars'\n"
        "def run():\n"
        "    print(os.environ.get('_RJEM_MALLOC_CONF'), 'polars' in sys.modules, flush=True)\n"
        "    return 0\n"
        "cli.run = run\n"
        "cli.main()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != memory.JEMALLOC_SETTING}
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == [memory.JEMALLOC_DECAY, "False"]


def test_release_freed_memory_runs_anywhere() -> None:
    memory.release_freed_memory()  # glibc: malloc_trim(0); elsewhere a garbage collection only
