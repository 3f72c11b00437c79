"""Wall time, CPU time and peak RSS of ``dbdiag analyze`` on a zip of N tiny members of one kind.

Run by hand (not in CI): a capture of thousands of small logs (one per host, hour or instance) must
take seconds, not a fixed cost per member times N. Each member is a few entries of its kind, with
numbers that differ from member to member (so that distinct texts do not collapse):

    .venv/bin/python benchmarks/bench_tiny_members.py --members 5000 --kind mysql-slowlog
    .venv/bin/python benchmarks/bench_tiny_members.py --members 5000          # every kind below
    .venv/bin/python benchmarks/bench_tiny_members.py --members 500 --keep /tmp/tiny   # keep the zips

Each capture runs in its own child process (``python -m dbdiag analyze CAPTURE -f json``), measured
with ``wait4``; its modules are compiled to bytecode first, in a temporary directory
(``bench_sql_logs.compiled_env``).
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_sql_logs import compiled_env, measure  # noqa: E402


def mysql_slowlog(i: int) -> str:
    entry = (
        "# Time: 2024-01-01T00:{minute:02d}:{second:02d}.000000Z\n"
        "# User@Host: app[app] @ localhost []  Id:     {i}\n"
        "# Query_time: 1.{i:06d}  Lock_time: 0.000100 Rows_sent: 1  Rows_examined: {i}\n"
        "SET timestamp=1704067{minute:02d}{second:01d};\nSELECT c FROM t{table} WHERE id = {i};\n"
    )
    head = "/usr/sbin/mysqld, Version: 8.0.36 (MySQL Community Server - GPL). started with:\n"
    return head + "".join(entry.format(i=i, minute=i % 60, second=s, table=(i + s) % 7) for s in range(3))


def pg_stderr(i: int) -> str:
    line = "2024-01-01 00:{minute:02d}:0{second}.000 UTC [{pid}] LOG:  duration: 1{i}.000 ms  statement: SELECT {s} FROM t WHERE id = {i}\n"
    return "".join(line.format(i=i, minute=i % 60, second=s, pid=4000 + i % 100, s=s) for s in range(3))


def tidb_slowlog(i: int) -> str:
    entry = (
        "# Time: 2024-01-01T00:{minute:02d}:0{second}.000000+08:00\n"
        "# Txn_start_ts: 4460000000000{i:05d}\n"
        "# User@Host: root[root] @ 10.0.0.1 [10.0.0.1]\n"
        "# Conn_ID: {i}\n"
        "# Query_time: 1.{i}\n"
        "# DB: test\n"
        "# Digest: 50a2e32d2abbd6c1764b1b7f2058d428ef2712b029282b776beb9506a365c0f{second}\n"
        "# Succ: true\n"
        "SELECT c FROM t WHERE id = {i};\n"
    )
    return "".join(entry.format(i=i, minute=i % 60, second=s) for s in range(3))


def mpstat_text(i: int) -> str:
    return (
        f"Linux 5.10.0-28-amd64 (host-{i}) \t01/01/24 \t_x86_64_\t(2 CPU)\n\n"
        "00:00:01     CPU    %usr   %nice    %sys %iowait    %irq   %soft  %steal  %guest  %gnice   %idle\n"
        f"00:00:02     all   {i % 90:5.2f}    0.00    1.84    0.12    0.34    0.19    0.00    0.00    0.00   {99 - i % 90 - 2.53:5.2f}\n"
        f"00:00:03     all    2.28    0.00    1.55    0.48    0.19    0.19    0.00    0.00    0.00   95.31\n"
    )


def perf_script(i: int) -> str:
    sample = (
        "mysqld {pid} [001] 3014{i}.{n:06d}: cpu-clock: \n"
        "\tffffffff81001408 xen_hypercall_event_channel_op ([kernel.kallsyms])\n"
        "\tffffffff810dc471 smp_call_function_many ([kernel.kallsyms])\n"
        "\t7f0a1b2c3d4e row_search_mvcc (/usr/sbin/mysqld)\n\n"
    )
    return "".join(sample.format(pid=1000 + i % 50, i=i, n=n) for n in range(3))


KINDS: dict[str, tuple[str, Callable[[int], str]]] = {  # kind -> (member name, member text)
    "mysql-slowlog": ("slow.log", mysql_slowlog),
    "pg-stderr": ("postgresql.log", pg_stderr),
    "tidb-slowlog": ("tidb_slow_query.log", tidb_slowlog),
    "mpstat-text": ("mpstat.txt", mpstat_text),
    "perf-script": ("perf.out", perf_script),
}


def tiny_zip(kind: str, members: int) -> bytes:
    """A zip of ``members`` members ``host-I/NAME`` of ``kind``."""
    name, text = KINDS[kind]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for i in range(members):
            archive.writestr(f"host-{i}/{name}", text(i))
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=5000)
    parser.add_argument("--kind", action="append", choices=sorted(KINDS), help="repeatable; default every kind")
    parser.add_argument("--keep", type=Path, help="write the zips into this folder (and keep them)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        folder = args.keep or out
        folder.mkdir(parents=True, exist_ok=True)
        env = compiled_env(out)
        print(f"{'kind':<16} {'members':>7} {'zip KB':>7} {'wall s':>7} {'CPU s':>7} {'peak RSS MB':>11} {'exit':>4}")
        for kind in args.kind or sorted(KINDS):
            capture = folder / f"tiny-{kind}-{args.members}.zip"
            capture.write_bytes(tiny_zip(kind, args.members))
            command = [sys.executable, "-m", "dbdiag", "analyze", str(capture), "-f", "json", "-o", str(out / "r.json")]
            run = measure(kind, command, capture, env)
            print(f"{kind:<16} {args.members:>7} {capture.stat().st_size / 1024:7.0f} {run.seconds:7.2f} "
                  f"{run.cpu_seconds:7.2f} {run.max_rss_mb:11.0f} {run.exit_code:>4}")


if __name__ == "__main__":
    main()
