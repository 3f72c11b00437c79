"""pgbench output (PostgreSQL 9.6-17): ``-P`` progress lines, run summary, ``-r`` statement latencies.

Raw input (stdout and stderr together, as ``pgbench ... >out 2>&1`` writes them; several runs may be
concatenated)::

    pgbench (15.18 (Debian 15.18-0+deb12u1))
    starting vacuum...end.
    progress: 1.0 s, 36.0 tps, lat 1.784 ms stddev 0.534, 0 failed, lag 0.132 ms
    transaction type: <builtin: TPC-B (sort of)>
    scaling factor: 5
    number of clients: 4
    duration: 10 s
    number of transactions actually processed: 311
    number of failed transactions: 0 (0.000%)
    latency average = 1.599 ms
    rate limit schedule lag: avg 0.135 (max 0.491) ms
    initial connection time = 10.629 ms
    tps = 31.216998 (without initial connection time)
    statement latencies in milliseconds and failures:
             0.240           0  BEGIN;

Older releases print ``tps = ... (including connections establishing)`` and ``(excluding ...)``
(the excluding one is kept), ``latency average: X ms`` (9.x), ``processed: 100/100`` with ``-t``,
progress lines without ``failed`` and statement lines without a failures column. With several
scripts (``-b``/``-f`` with ``@weight``) each has a ``SQL script N: name`` block. With
``--progress-timestamp`` the progress time is Unix epoch seconds (PostgreSQL 14+; 10-13 printed a
monotonic clock there, which is kept as neither a wall time nor an offset).

Output tables:

``load_interval`` (one row per progress line): ``run``, ``tool`` ("pgbench"), ``ts`` (epoch
progress times, UTC), ``offset_s`` (seconds since the start, when not an epoch), ``tps``,
``latency_ms`` (average; ``latency_pct`` null), ``latency_stddev_ms``, ``lag_ms`` (``-R``),
``errors_per_s`` (failed transactions of the interval divided by its length).

``load_run`` (one row per run): ``test`` (transaction type without ``<builtin: >``), ``threads``
(clients), ``duration_s`` (``-T``), ``transactions``, ``tps``, ``errors`` (failed transactions),
``latency_avg_ms``, ``scale``, ``connect_avg_ms`` (``-C``: "average connection time", connect and
disconnect per transaction), ``initial_connect_ms`` (without ``-C``: "initial connection time", the
time until every client was connected), ``latency_includes_connect`` (``-C`` runs: whether
``latency_avg_ms`` holds the connection time, see :func:`_latency_includes_connect`; null without
``-C``; PostgreSQL 13 and older print no connection time per transaction). pgbench does not print the ``-R`` target rate: ``rate_limit_tps``
comes from an echoed command line (``+ pgbench -R 100 ...`` as ``bash -x`` prints it) when there is
one, else stays null (a schedule-lag line or lag in progress lines still shows a rate was set).

``load_statement_latency`` (``-r``): ``run``, ``script`` (the ``SQL script N:`` name, else the
run's transaction type), ``statement`` as printed, ``latency_ms``, ``failures`` (15+, else null).

``records`` is the number of runs. pgbench error lines (aborted clients, "Run was aborted") are
warnings; ``pgbench -i`` progress lines are skipped.

>>> text = "progress: 1.0 s, 36.0 tps, lat 1.784 ms stddev 0.534, 0 failed\\n" \\
...     "transaction type: <builtin: select only>\\nnumber of clients: 4\\n" \\
...     "tps = 31.2 (without initial connection time)\\n"
>>> result = parse(text, ParseContext(source="pgbench.txt"))
>>> result.tables["load_interval"].select("run", "offset_s", "tps", "latency_ms").rows()
[(0, 1.0, 36.0, 1.784)]
>>> result.tables["load_run"].select("test", "threads", "tps").rows()
[('select only', 4, 31.2)]
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS, cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import LOAD_INTERVAL, LOAD_RUN, LOAD_STATEMENT_LATENCY, conform

TOOL = "pgbench"
EPOCH_MIN_S = 1e9  # progress times above this are --progress-timestamp epochs (2001 onwards)

_NUM = r"(?:-?nan|-?inf|\d+(?:\.\d+)?)"
_PROGRESS_RE = (
    r"^progress: (?P<time>\d+(?:\.\d+)?) s, (?P<tps>\d+(?:\.\d+)?) tps, "
    rf"lat (?P<lat>{_NUM}) ms stddev (?P<sd>{_NUM})"
    r"(?:, (?P<failed>\d+) failed)?"
    rf"(?:, lag (?P<lag>{_NUM}) ms)?"
    r"(?:, \d+ skipped)?(?:, \d+ retried, \d+ retries)?\s*$"
)
_PROGRESS_DETECT_RE = lazy_compile(
    r"^progress: \d+(?:\.\d+)? s, \d+(?:\.\d+)? tps, lat \S+ ms stddev ", re.MULTILINE
)
_BANNER_RE = lazy_compile(r"^pgbench \(\d+[\w.]*(?: \(.*\))?(?:, server [^)]*\)?)?\)$")
_BANNER_DETECT_RE = lazy_compile(r"^pgbench \(\d+[\w.]*[ ,)]", re.MULTILINE)
_HEADER_DETECT_RE = lazy_compile(
    r"^(?:transaction type: .+|number of clients: \d+|number of transactions actually processed: \d+"
    r"|scaling factor: \d+|query mode: (?:simple|extended|prepared))\s*$",
    re.MULTILINE,
)
# possessive prompt (++ *+): a line of "#" was quadratic, each split of it rescanned for a "/"
_COMMAND_RE = lazy_compile(r"^\s*+(?:[$#>+]++\s*+)?(?:\S*/)?pgbench\s+(?!\()(.*)$")
_RATE_OPTION_RE = lazy_compile(r"(?:^|\s)(?:-R\s*|--rate[= ])(\d+(?:\.\d+)?)(?=\s|$)")
_INIT_OPTION_RE = lazy_compile(r"(?:^|\s)(?:-i|--initialize|-[a-zA-Z]*i[a-zA-Z]*)(?=\s|$)")
_INIT_DETECT_RE = lazy_compile(r"^\d+ of \d+ tuples \(\d+%\) done", re.MULTILINE)
_STATEMENT_RE = lazy_compile(r"^\s+(-?nan|-?\d+(?:\.\d+)?)(?:\s+(\d+))?(?:\s+(\d+))?\s{2,}(\S.*)$")
_SCRIPT_RE = lazy_compile(r"^SQL script \d+: (.+)$")
_PROBLEM_RE = lazy_compile(r"^(?:pgbench: (?:error|fatal|warning): |client \d+ |Run was aborted|ERROR: |FATAL: )")
_NUMBER = lazy_compile(r"^(-?\d+(?:\.\d+)?)")
_QUIET_RE = lazy_compile(
    r"^(?:starting vacuum\.\.\.(?:end\.)?|end\.|dropping old tables\.\.\.|creating tables\.\.\.|"
    r"creating primary keys\.\.\.|creating foreign keys\.\.\.|vacuuming\.\.\.|"
    r"generating data(?: \([\w-]+\))?\.\.\.|\d+ of \d+ tuples \(\d+%\) done.*|done in .*|"
    r"NOTICE: .*|done\.|set primary keys\.\.\.|query mode: .*|number of threads: .*|"
    r"maximum number of tries: .*|number of transactions per client: .*|"
    r"number of transactions skipped: .*|"
    r"number of transactions above the .*|number of transactions retried: .*|total number of retries: .*|"
    r"number of (?:serialization|deadlock|other) failures: .*|"
    r"- weight: .*|- \d+ transactions \(.*\)|- number of .*|- latency .*|- statement latencies in .*|"
    r"\(ignoring this error and continuing anyway\))$"
)


@dataclass
class _Run:
    start: int
    summary: bool = False
    script: str | None = None
    in_statements: bool = False
    latency_measured: bool = False  # "latency stddev" printed: per-transaction latencies were measured
    throttled: bool = False  # "rate limit schedule lag" printed: -R, latencies count from the schedule
    values: dict[str, float | int | str | None] = field(default_factory=dict)
    statements: list[tuple[str | None, str, float | None, int | None]] = field(default_factory=list)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    lines = pl.DataFrame({"text": pl.Series(text.split("\n"), dtype=pl.String)}).with_row_index("line", offset=1)
    lines = lines.with_columns(pl.col("text").str.strip_suffix("\r"))
    is_progress = pl.col("text").str.starts_with("progress: ")
    progress = _progress_frame(lines.filter(is_progress))
    progress_lines = progress["line"].to_list()
    warnings: list[ParseWarning] = []
    bad_progress = lines.filter(is_progress & ~pl.col("line").is_in(progress_lines))
    for line, line_text in bad_progress.head(MAX_WARNINGS).iter_rows():
        warnings.append(ParseWarning(line, f"unrecognised progress line: {line_text[:80]!r}"))
    other = lines.filter(~is_progress & (pl.col("text").str.strip_chars() != ""))
    runs = _scan(other.rows(), progress_lines, warnings)
    if not runs:
        if _INIT_DETECT_RE.search(text) is not None:
            return ParseResult(
                tables=_tables([], progress.head(0), pl.Series([], dtype=pl.Int64), ctx.source),
                notes=["pgbench -i (initialisation) output: no benchmark run"],
                warnings=cap_warnings(warnings),
            )
        raise ParseError("no pgbench progress line or run summary found")
    for number, run in enumerate(runs):
        if not run.summary:
            warnings.append(ParseWarning(run.start, f"run {number}: no summary (output cut short?)"))
    starts = [run.start for run in runs]
    run_index = pl.Series(starts, dtype=pl.Int64).search_sorted(progress["line"], side="right") - 1
    notes = []
    if progress.height and progress["ts"].null_count() < progress.height:
        notes.append("progress times are Unix epoch seconds (--progress-timestamp), read as UTC")
    if progress.height and progress["offset_s"].null_count() == 0:
        notes.append("progress times are seconds since each run's start (no --progress-timestamp): ts is null")
    if progress.height and progress.filter(pl.col("monotonic")).height:
        notes.append("progress times are a monotonic clock (pgbench 10-13 --progress-timestamp): no wall time")
    return ParseResult(
        tables=_tables(runs, progress, run_index, ctx.source),
        records=len(runs),
        warnings=cap_warnings(warnings),
        notes=notes,
    )


def _progress_frame(candidates: pl.DataFrame) -> pl.DataFrame:
    found = candidates.with_columns(pl.col("text").str.extract_groups(_PROGRESS_RE).alias("g")).unnest("g")
    found = found.filter(pl.col("time").is_not_null())
    time_s = pl.col("time").cast(pl.Float64)
    epoch = time_s >= EPOCH_MIN_S
    # pgbench prints "%.1f s" for offsets and "%.3f s" for --progress-timestamp clocks
    monotonic = ~epoch & pl.col("time").str.contains(r"\.\d{3}$")
    return found.select(
        "line",
        ts=pl.when(epoch).then((time_s * 1e6).round().cast(pl.Int64)).otherwise(None).cast(pl.Datetime("us", "UTC")),
        offset_s=pl.when(epoch | monotonic).then(None).otherwise(time_s),
        clock_s=time_s,
        monotonic=monotonic,
        tps=pl.col("tps").cast(pl.Float64),
        latency_ms=_finite("lat"),
        latency_stddev_ms=_finite("sd"),
        lag_ms=_finite("lag"),
        failed=pl.col("failed").cast(pl.Int64),
    )


def _finite(name: str) -> pl.Expr:
    value = pl.col(name).cast(pl.Float64, strict=False)
    return pl.when(value.is_finite()).then(value).otherwise(None)


def _scan(rows: list[tuple[int, str]], progress_lines: list[int], warnings: list[ParseWarning]) -> list[_Run]:
    """Walk the non-progress lines: run boundaries, summary values and statement latencies."""
    runs: list[_Run] = []
    previous = 0

    def progress_between(low: int, high: int) -> int | None:
        at = bisect.bisect_right(progress_lines, low)
        return progress_lines[at] if at < len(progress_lines) and progress_lines[at] < high else None

    def new_run(line: int) -> _Run:
        runs.append(_Run(start=line))
        return runs[-1]

    def body_seen(run: _Run, line: int) -> bool:
        return run.summary or progress_between(run.start - 1, line) is not None

    for line, raw in rows + [(1 << 62, "")]:
        # progress lines after a finished summary open the next run
        if runs and runs[-1].summary and (first := progress_between(previous, line)) is not None:
            new_run(first)
        elif not runs and (first := progress_between(0, line)) is not None:
            new_run(first)
        previous = line
        if line == 1 << 62:
            break
        stripped = raw.strip()
        command = _COMMAND_RE.match(stripped)
        if command is not None and _INIT_OPTION_RE.search(command.group(1)) is None:
            run = new_run(line) if not runs or body_seen(runs[-1], line) else runs[-1]
            rate = _RATE_OPTION_RE.search(command.group(1))
            run.values["rate_limit_tps"] = float(rate.group(1)) if rate else None
            continue
        if command is not None:
            continue  # pgbench -i: no run
        if _BANNER_RE.match(stripped) or stripped.startswith("starting vacuum..."):
            if not runs or body_seen(runs[-1], line):
                new_run(line)
            continue
        if _PROBLEM_RE.match(stripped):
            warnings.append(ParseWarning(line, stripped[:200]))
            continue
        if stripped.startswith("transaction type: "):
            run = runs[-1] if runs and not runs[-1].summary else new_run(line)
            run.summary = True
            run.values["test"] = _test_name(stripped.removeprefix("transaction type: "))
            continue
        run = runs[-1] if runs else None
        if run is not None and run.summary and _summary_value(run, stripped, raw):
            continue
        if _QUIET_RE.match(stripped):
            continue
        warnings.append(ParseWarning(line, f"unrecognised line: {stripped[:80]!r}"))
    return runs


def _test_name(text: str) -> str:
    text = text.strip()
    if text.startswith("<builtin: ") and text.endswith(">"):
        return text.removeprefix("<builtin: ").removesuffix(">")
    return text


def _summary_value(run: _Run, stripped: str, raw: str) -> bool:
    """One summary or statement line into ``run``; False when the line is none of those."""
    if run.in_statements:
        statement = _STATEMENT_RE.match(raw)
        if statement is not None:
            latency = float(statement.group(1)) if "nan" not in statement.group(1) else None
            failures = int(statement.group(2)) if statement.group(2) is not None else None
            script = run.script or run.values.get("test")
            run.statements.append((script, statement.group(4).rstrip(), latency, failures))
            return True
        run.in_statements = False
    if (script := _SCRIPT_RE.match(stripped)) is not None:
        run.script = _test_name(script.group(1))
        return True
    if stripped.startswith(("statement latencies in milliseconds", "- statement latencies in milliseconds")):
        run.in_statements = True
        return True
    if stripped.startswith("- "):
        return False  # per-script lines: weight, share, latency; no column for them
    key, sep, value = _split(stripped)
    if not sep:
        return False
    number = _NUMBER.match(value)
    values = run.values
    if key == "scaling factor" and number:
        values["scale"] = int(float(number.group(1)))
    elif key == "number of clients" and number:
        values["threads"] = int(number.group(1))
    elif key == "duration" and number:
        values["duration_s"] = float(number.group(1))
    elif key == "number of transactions actually processed" and number:
        values["transactions"] = int(number.group(1))
    elif key == "number of failed transactions" and number:
        values["errors"] = int(number.group(1))
    elif key == "latency average" and number:
        values["latency_avg_ms"] = float(number.group(1))
    elif key == "latency stddev":
        run.latency_measured = True
    elif key == "rate limit schedule lag":
        run.throttled = True
    elif key == "average connection time" and number:
        values["connect_avg_ms"] = float(number.group(1))
    elif key == "initial connection time" and number:
        values["initial_connect_ms"] = float(number.group(1))
    elif key == "tps" and number:
        # keep the figure without connection time when both are printed (PostgreSQL <= 13)
        if "including connections" not in value or "tps" not in values:
            values["tps"] = float(number.group(1))
    else:
        return False
    return True


def _latency_includes_connect(run: _Run) -> bool | None:
    """Whether ``latency average`` holds the connection time of a -C run (null without -C).

    pgbench -C connects before each transaction's clock starts, so a measured latency (-P, -L:
    "latency stddev" printed) leaves the connection out; without a measurement pgbench prints the
    run time x clients / transactions, connections included; with -R a latency counts from the
    scheduled start, which is before the connection.
    """
    if run.values.get("connect_avg_ms") is None:
        return None
    return not run.latency_measured or run.throttled or run.values.get("rate_limit_tps") is not None


def _split(stripped: str) -> tuple[str, str, str]:
    """``key: value`` or ``key = value`` as pgbench prints them across versions."""
    for sep in (" = ", ": "):
        key, found, value = stripped.partition(sep)
        if found:
            return key.strip(), found, value.strip()
    return stripped, "", ""


def _tables(runs: list[_Run], progress: pl.DataFrame, run_index: pl.Series, source: str) -> dict[str, pl.DataFrame]:
    intervals = progress.with_columns(run=run_index.cast(pl.Int32))
    # failed is a count per report; its length is the gap to the previous report (the offset for the first)
    gap = pl.col("clock_s") - pl.col("clock_s").shift(1).over("run")
    first_gap = pl.when(pl.col("offset_s").is_not_null()).then(pl.col("offset_s")).otherwise(None)
    length = pl.coalesce(gap, first_gap)
    intervals = intervals.with_columns(
        errors_per_s=pl.when(length > 0).then(pl.col("failed") / length).otherwise(None),
        tool=pl.lit(TOOL),
        source=pl.lit(source),
    )
    run_rows = [
        {"run": number, "tool": TOOL, "source": source, **run.values, "latency_includes_connect": _latency_includes_connect(run)}
        for number, run in enumerate(runs)
    ]
    run_schema = {"run": pl.Int32, "tool": pl.String, "source": pl.String, "test": pl.String}
    run_frame = (
        pl.DataFrame(run_rows, schema_overrides=run_schema, infer_schema_length=None)
        if run_rows
        else pl.DataFrame(schema=run_schema)
    )
    statement_rows = [
        (number, script, statement, latency, failures)
        for number, run in enumerate(runs)
        for script, statement, latency, failures in run.statements
    ]
    statements = pl.DataFrame(
        statement_rows,
        schema={
            "run": pl.Int32, "script": pl.String, "statement": pl.String,
            "latency_ms": pl.Float64, "failures": pl.Int64,
        },
        orient="row",
    ).with_columns(source=pl.lit(source))
    return {
        LOAD_INTERVAL: conform(LOAD_INTERVAL, intervals),
        LOAD_RUN: conform(LOAD_RUN, run_frame),
        LOAD_STATEMENT_LATENCY: conform(LOAD_STATEMENT_LATENCY, statements),
    }


def detect(head: str, name: str) -> float:
    progress = len(_PROGRESS_DETECT_RE.findall(head))
    header = len(set(m.split(":")[0] for m in _HEADER_DETECT_RE.findall(head)))
    if _BANNER_DETECT_RE.search(head) is not None or progress >= 2 or header >= 3:
        return 0.95
    if progress == 1 or header == 2:
        return 0.8
    if _INIT_DETECT_RE.search(head) is not None:
        # pgbench -i: its NOTICE lines must not make it look like a server log
        return 0.95 if "creating tables..." in head or "pgbench_" in head else 0.6
    return 0.0


SPEC = ParserSpec(
    kind="pgbench",
    description="pgbench output: -P progress lines, run summary, -r per-statement latencies; several runs",
    detect=detect,
    parse=parse,
)
