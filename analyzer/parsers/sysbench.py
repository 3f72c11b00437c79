"""sysbench ``run`` output (1.0.x/1.1, 0.5 and 0.4): interval reports, run summary, latency histogram.

Raw input, sysbench 1.0 (``--report-interval=1 --histogram``; several runs may be concatenated,
each starting with the banner or with the command line echoed by a script)::

    sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)

    Running the test with following options:
    Number of threads: 8
    Target transaction rate: 30/sec
    ...
    Threads started!

    [ 1s ] thds: 8 tps: 24.95 qps: 498.97 (r/w/o: 349.28/99.79/49.90) lat (ms,99%): 4.41 err/s: 0.00 reconn/s: 0.00
    [ 1s ] queue length: 0, concurrency: 0
    Latency histogram (values are in milliseconds)
           value  ------------- distribution ------------- count
           1.759 |**                                       1
    SQL statistics:
        transactions:                        295    (29.43 per sec.)
        queries:                             5900   (588.60 per sec.)
        ignored errors:                      0      (0.00 per sec.)
        reconnects:                          0      (0.00 per sec.)
    General statistics:
        total time:                          10.0223s
        total number of events:              295
    Latency (ms):
             min:                                    1.75
             avg:                                    3.18
             max:                                    8.13
             99th percentile:                        4.91
             sum:                                  938.11

sysbench 0.5 prints ``[   1s] threads: 8, tps: 31.99, reads: 447.87, writes: 127.96, response time:
41.10ms (95%), errors: 0.00, reconnects:  0.00``, then "OLTP test statistics:", "General statistics:"
(0.4: "Test execution summary:") with ``total time taken by event execution`` and a "response time:"
(0.4: "per-request statistics:") block whose ``approx.  95 percentile`` is the percentile.

Output tables:

``load_interval`` (one row per interval line): ``run``, ``tool`` ("sysbench"), ``ts`` (always null:
sysbench prints no wall-clock time), ``offset_s``, ``threads``, ``tps`` (the cpu test's ``eps``),
``qps``, ``reads_per_s``, ``writes_per_s``, ``other_per_s``, ``latency_ms`` with ``latency_pct``
(the percentile sysbench prints, 95.0 by default), ``errors_per_s``, ``reconnects_per_s``.

``load_run`` (one row per run): ``test`` (from an echoed command line, else the test's own output
for cpu/memory/fileio/0.4 OLTP, else a test name in the member's file name, else null),
``threads``, ``duration_s`` ("total time"), ``transactions`` (the cpu/memory tests: events),
``tps``, ``queries``, ``qps``, ``errors`` (ignored errors; 0.4: deadlocks), ``reconnects``,
``latency_min_ms``/``avg``/``max``, ``latency_pct_ms`` with ``latency_pct``, ``latency_sum_ms``
("sum"; 0.4/0.5: total time taken by event execution), ``rate_limit_tps`` ("Target transaction
rate"), ``scale`` (null: sysbench does not print its table size).

``latency_histogram`` (``--histogram``): ``run``, ``latency_ms`` (bucket value), ``count``.

``records`` is the number of runs. FATAL/WARNING lines and lines that fit no known shape are
warnings; queue-length lines of ``--rate`` runs carry no column and are skipped silently.

>>> text = "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)\\nNumber of threads: 2\\n" \\
...     "[ 1s ] thds: 2 tps: 10.00 qps: 200.00 (r/w/o: 140.00/40.00/20.00) lat (ms,95%): 3.00 " \\
...     "err/s: 0.00 reconn/s: 0.00\\n"
>>> result = parse(text, ParseContext(source="sysbench-oltp_read_write.txt"))
>>> result.tables["load_interval"].select("run", "offset_s", "tps", "latency_pct").rows()
[(0, 1.0, 10.0, 95.0)]
>>> result.tables["load_run"].select("test", "threads", "transactions").rows()
[('oltp_read_write', 2, None)]
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field

import polars as pl

from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit.warning_caps import MAX_WARNINGS, cap_warnings
from dbdiag.patterns import lazy_compile
from dbdiag.tables import LATENCY_HISTOGRAM, LOAD_INTERVAL, LOAD_RUN, conform

TOOL = "sysbench"

_N = r"(\d+(?:\.\d+)?)"
_BANNER_RE = lazy_compile(r"^sysbench \d+\.\d+[\w.\-]*(?::\s+multi-threaded system evaluation benchmark| \(using )")
_BANNER_DETECT_RE = lazy_compile(
    r"^sysbench \d+\.\d+[\w.\-]*(?::\s+multi-threaded system evaluation benchmark| \(using )", re.MULTILINE
)
# possessive prompt (++ *+): a line of "#" was quadratic, each split of it rescanned for a "/"
_COMMAND_RE = lazy_compile(r"^\s*+(?:[$#>+]++\s*+)?(?:\S*/)?sysbench\s+(?!\d+\.\d)(.*)$")
_INTERVAL_10_RE = (
    r"^\[ *(?P<offset>\d+(?:\.\d+)?)s *\] thds: (?P<threads>\d+) "
    r"(?:tps: (?P<tps>\d+(?:\.\d+)?) qps: (?P<qps>\d+(?:\.\d+)?) "
    r"\(r/w/o: (?P<reads>\d+(?:\.\d+)?)/(?P<writes>\d+(?:\.\d+)?)/(?P<other>\d+(?:\.\d+)?)\)"
    r"|eps: (?P<eps>\d+(?:\.\d+)?)) "
    r"lat \(ms,(?P<pct>\d+(?:\.\d+)?)%\): (?P<lat>\d+(?:\.\d+)?)"
    # Lua report hooks print "err/s" without its colon and may append their own fields (tpcc: "no: ...")
    r"(?: err/s:? (?P<err>\d+(?:\.\d+)?) reconn/s:? (?P<reconn>\d+(?:\.\d+)?))?(?: .*)?$"
)
_INTERVAL_05_RE = (
    r"^\[ *(?P<offset>\d+(?:\.\d+)?)s *\] threads: (?P<threads>\d+), tps: (?P<tps>\d+(?:\.\d+)?), "
    r"reads(?:/s)?: (?P<reads>\d+(?:\.\d+)?), writes(?:/s)?: (?P<writes>\d+(?:\.\d+)?), "
    r"response time: (?P<lat>\d+(?:\.\d+)?)ms \((?P<pct>\d+(?:\.\d+)?)%\)"
    r"(?:, errors: (?P<err>\d+(?:\.\d+)?), reconnects: *(?P<reconn>\d+(?:\.\d+)?))?\s*$"
)
# Interval lines that carry nothing for load_interval: --rate queue reports, memory test MiB/sec.
_INTERVAL_SKIP_RE = r"^\[ *\d+(?:\.\d+)?s *\] (?:queue length: \d+,? concurrency: \d+|\d+(?:\.\d+)? MiB/sec)\s*$"
_INTERVAL_DETECT_RE = lazy_compile(
    r"^\[ *\d+(?:\.\d+)?s *\] (?:thds: \d+ (?:tps|eps): |threads: \d+, tps: )", re.MULTILINE
)
_SUMMARY_DETECT_RE = lazy_compile(
    r"^(?:SQL statistics:|OLTP test statistics:|General statistics:|Test execution summary:|Threads fairness:)\s*$",
    re.MULTILINE,
)

_SECTION_RE = lazy_compile(
    r"^(?:SQL statistics:|OLTP test statistics:|General statistics:|Test execution summary:|Latency \(ms\):|"
    r"Threads started!|CPU speed:|Latency histogram \(values are in milliseconds\))$"
)
_COUNT_RATE_RE = lazy_compile(r"^(\d+)\s+\(" + _N + r" per sec\.\)$")
_MS_RE = lazy_compile(r"^" + _N + r"(ms)?$")
_SECONDS_RE = lazy_compile(r"^" + _N + r"s?$")
_PCT_KEY_RE = lazy_compile(r"^(?:(\d+(?:\.\d+)?)th percentile|approx\.\s+(\d+(?:\.\d+)?) percentile)$")
_HIST_ROW_RE = lazy_compile(r"^\s*" + _N + r" \|\**\s+(\d+)\s*$")
_RATE_RE = lazy_compile(r"^Target transaction rate: " + _N + r"/sec$")
_THREADS_RE = lazy_compile(r"^Number of threads: (\d+)$")
_KEY_VALUE_RE = lazy_compile(r"^([A-Za-z0-9][\w ./()\-]*?):\s+(.*)$")
_PROBLEM_RE = lazy_compile(r"^(?:FATAL|ALERT|WARNING|ERROR)\b")
# Test names a file name may carry; "cpu", "threads", "memory" are too common words to trust there.
_KNOWN_TESTS = (
    "oltp_read_write", "oltp_read_only", "oltp_write_only", "oltp_point_select", "oltp_update_index",
    "oltp_update_non_index", "oltp_delete", "oltp_insert", "bulk_insert", "select_random_points",
    "select_random_ranges", "fileio",
)
_NAME_TEST_RE = lazy_compile(r"(?<![A-Za-z])(" + "|".join(_KNOWN_TESTS) + r")(?![A-Za-z])")
_COMMANDS = {"run", "prepare", "cleanup", "help", "prewarm"}
_QUIET_LINES = lazy_compile(
    r"^(?:Done\.|Time limit exceeded, exiting\.\.\.|\(last message repeated \d+ times\)|"
    r"Initializing worker threads\.\.\.|Threads fairness:|events \(avg/stddev\):.*|"
    r"execution time \(avg/stddev\):.*|value\s+-+ distribution -+ count|"
    r"[\d.]+ MiB transferred \([\d.]+ MiB/sec\)|Total operations: .*)$"
)


@dataclass
class _Run:
    start: int
    test: str | None = None
    test_from_command: bool = False
    body: bool = False  # threads started, intervals or a summary seen: a new banner starts a new run
    summary: bool = False
    section: str = "header"
    values: dict[str, float | int | None] = field(default_factory=dict)
    histogram: list[tuple[float, int]] = field(default_factory=list)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    lines = pl.DataFrame({"text": pl.Series(text.split("\n"), dtype=pl.String)}).with_row_index("line", offset=1)
    lines = lines.with_columns(pl.col("text").str.strip_suffix("\r"))
    intervals = _interval_frame(lines)
    interval_lines = intervals["line"].to_list()
    bracketed = pl.col("text").str.starts_with("[")
    other = lines.filter(~bracketed & (pl.col("text").str.strip_chars() != ""))
    warnings: list[ParseWarning] = []
    bad_brackets = lines.filter(
        bracketed & ~pl.col("text").str.contains(_INTERVAL_SKIP_RE) & ~pl.col("line").is_in(interval_lines)
    )
    for line, line_text in bad_brackets.head(MAX_WARNINGS).iter_rows():
        warnings.append(ParseWarning(line, f"unrecognised interval line: {line_text[:80]!r}"))
    runs = _scan(other.rows(), interval_lines, warnings)
    if not runs:
        raise ParseError("no sysbench banner, interval line or summary found")
    hint = _NAME_TEST_RE.search(ctx.source.rsplit("/", 1)[-1])
    for run in runs:
        if run.test is None and hint is not None:
            run.test = hint.group(1)
    for number, run in enumerate(runs):
        if not run.summary:
            warnings.append(ParseWarning(run.start or None, f"run {number}: no summary (output cut short?)"))
    starts = [run.start for run in runs]
    run_index = (pl.Series(starts, dtype=pl.Int64).search_sorted(intervals["line"], side="right") - 1).cast(pl.Int32)
    interval_table = conform(
        LOAD_INTERVAL,
        intervals.with_columns(run=run_index, tool=pl.lit(TOOL), source=pl.lit(ctx.source)),
    )
    tables = {
        LOAD_INTERVAL: interval_table,
        LOAD_RUN: _run_table(runs, ctx.source),
        LATENCY_HISTOGRAM: _histogram_table(runs, ctx.source),
    }
    return ParseResult(
        tables=tables,
        records=len(runs),
        warnings=cap_warnings(warnings),
        notes=["sysbench prints no wall-clock time: ts is null, offset_s counts seconds from each run's start"],
    )


def _interval_frame(lines: pl.DataFrame) -> pl.DataFrame:
    """Interval lines of both generations, numbers as floats, in line order."""
    candidates = lines.filter(pl.col("text").str.starts_with("["))
    numeric = ["offset", "threads", "tps", "qps", "reads", "writes", "other", "eps", "pct", "lat", "err", "reconn"]
    parts = []
    for pattern in (_INTERVAL_10_RE, _INTERVAL_05_RE):
        found = candidates.with_columns(pl.col("text").str.extract_groups(pattern).alias("g")).unnest("g")
        found = found.filter(pl.col("offset").is_not_null())
        parts.append(
            found.select(
                "line",
                *[
                    (pl.col(name).cast(pl.Float64) if name in found.columns else pl.lit(None, pl.Float64)).alias(name)
                    for name in numeric
                ],
            )
        )
    frame = pl.concat(parts).sort("line")
    return frame.select(
        "line",
        offset_s=pl.col("offset"),
        threads=pl.col("threads").cast(pl.Int32),
        tps=pl.coalesce("tps", "eps"),
        qps=pl.col("qps"),
        reads_per_s=pl.col("reads"),
        writes_per_s=pl.col("writes"),
        other_per_s=pl.col("other"),
        latency_ms=pl.col("lat"),
        latency_pct=pl.col("pct"),
        errors_per_s=pl.col("err"),
        reconnects_per_s=pl.col("reconn"),
    )


def _scan(rows: list[tuple[int, str]], interval_lines: list[int], warnings: list[ParseWarning]) -> list[_Run]:
    """Walk the non-interval lines: run boundaries, header values, summary blocks, histogram rows."""
    runs: list[_Run] = []

    def has_intervals(run: _Run, line: int) -> bool:
        return bisect.bisect_left(interval_lines, line) > bisect.bisect_right(interval_lines, run.start)

    def start(line: int) -> _Run:
        current = runs[-1] if runs else None
        if current is None or current.body or has_intervals(current, line):
            current = _Run(start=line)
            runs.append(current)
        return current

    previous = 0
    for line, raw in rows + [(1 << 62, "")]:
        # interval lines before any run, or after a finished summary, open a run (banner or not)
        after = bisect.bisect_right(interval_lines, previous)
        if (not runs or runs[-1].summary) and after < len(interval_lines) and interval_lines[after] < line:
            runs.append(_Run(start=interval_lines[after], body=True))
        previous = line
        if line == 1 << 62:
            break
        stripped = raw.strip()
        if _BANNER_RE.match(stripped) or stripped == "Running the test with following options:":
            start(line)
            continue
        command = _COMMAND_RE.match(raw)
        if command is not None:
            run = start(line)
            run.test = _test_from_command(command.group(1))
            run.test_from_command = run.test is not None
            continue
        if _PROBLEM_RE.match(stripped):
            warnings.append(ParseWarning(line, stripped[:200]))
            continue
        run = runs[-1] if runs else None
        if run is None:
            if not (_SECTION_RE.match(stripped) or _THREADS_RE.match(stripped) or _RATE_RE.match(stripped)):
                warnings.append(ParseWarning(line, f"unrecognised line: {stripped[:80]!r}"))
                continue
            run = start(line)
        if stripped in ("SQL statistics:", "OLTP test statistics:"):
            if run.summary:
                run = start(line)
            run.body = run.summary = True
            run.section = "sql"
            continue
        if stripped in ("General statistics:", "Test execution summary:"):
            if "duration_s" in run.values:
                run = start(line)
            run.body = run.summary = True
            run.section = "general"
            continue
        if stripped == "Latency (ms):":
            run.section = "latency"
            continue
        if stripped in ("response time:", "per-request statistics:"):
            run.section = "latency"
            continue
        if stripped == "Latency histogram (values are in milliseconds)":
            run.body = True
            run.section = "histogram"
            continue
        if stripped == "Threads started!":
            run.body = True
            run.section = "running"
            continue
        if stripped == "CPU speed:":
            run.body = True
            run.section = "cpu"
            _set_test(run, "cpu")
            continue
        if run.section == "histogram":
            hist = _HIST_ROW_RE.match(raw)
            if hist is not None:
                run.histogram.append((float(hist.group(1)), int(hist.group(2))))
                continue
        if _header_value(run, stripped):
            continue
        if run.section in ("sql", "general", "latency", "cpu") and _summary_value(run, stripped):
            continue
        if run.section == "header" or _QUIET_LINES.match(stripped):
            continue
        warnings.append(ParseWarning(line, f"unrecognised line: {stripped[:80]!r}"))
    return runs


def _header_value(run: _Run, stripped: str) -> bool:
    if (threads := _THREADS_RE.match(stripped)) is not None:
        run.values["threads"] = int(threads.group(1))
    elif (rate := _RATE_RE.match(stripped)) is not None:
        run.values["rate_limit_tps"] = float(rate.group(1))
    elif stripped.startswith("Prime numbers limit:"):
        _set_test(run, "cpu")
    elif stripped.startswith("Running memory speed test"):
        _set_test(run, "memory")
    elif stripped.startswith("Extra file open flags"):
        _set_test(run, "fileio")
    elif stripped == "Doing OLTP test.":
        _set_test(run, "oltp")
    elif stripped.startswith("Total operations:") and (ops := re.search(r"\(" + _N + r" per second\)", stripped)):
        run.values["events_per_s"] = float(ops.group(1))
        return False  # also a quiet line
    else:
        return False
    return True


def _set_test(run: _Run, test: str) -> None:
    if not run.test_from_command:
        run.test = test


def _summary_value(run: _Run, stripped: str) -> bool:
    """One ``key: value`` line of the summary blocks into ``run.values``; False when not one."""
    pair = _KEY_VALUE_RE.match(stripped)
    if pair is None:
        return stripped == "queries performed:"
    key, value = pair.group(1).strip(), pair.group(2).strip()
    values = run.values
    if run.section == "sql":
        counted = _COUNT_RATE_RE.match(value)
        if key in ("read", "write", "other"):
            return value.isdigit()
        if key == "total" and value.isdigit():
            values["queries_total"] = int(value)
            return True
        if counted is None:
            return False
        count, rate = int(counted.group(1)), float(counted.group(2))
        if key == "transactions":
            values["transactions"], values["tps"] = count, rate
        elif key == "queries":
            values["queries"], values["qps"] = count, rate
        elif key in ("ignored errors", "deadlocks"):
            values["errors"] = count
        elif key == "reconnects":
            values["reconnects"] = count
        elif key == "read/write requests":
            values["rw_per_s"] = rate
        elif key == "other operations":
            values["other_ops_per_s"] = rate
        else:
            return False
        return True
    if run.section == "cpu":
        if key == "events per second" and _SECONDS_RE.match(value):
            values["events_per_s"] = float(value)
            return True
        return False
    if run.section == "general" or (run.section == "latency" and key.startswith("total")):
        seconds = _SECONDS_RE.match(value)
        if key == "total time" and seconds:
            values["duration_s"] = float(seconds.group(1))
        elif key == "total number of events" and value.isdigit():
            values["events"] = int(value)
        elif key == "total time taken by event execution" and seconds:
            values["latency_sum_ms"] = float(seconds.group(1)) * 1000.0
        else:
            return False
        return True
    ms = _MS_RE.match(value)
    if ms is None:
        return False
    number = float(ms.group(1))
    if key in ("min", "avg", "max"):
        values[f"latency_{key}_ms"] = number
    elif key == "sum":
        values["latency_sum_ms"] = number
    elif (pct := _PCT_KEY_RE.match(key)) is not None:
        values["latency_pct"] = float(pct.group(1) or pct.group(2))
        values["latency_pct_ms"] = number
    else:
        return False
    return True


def _test_from_command(arguments: str) -> str | None:
    """The test a sysbench command line runs: ``--test=X`` (0.4/0.5) or the first bare word (1.0)."""
    import shlex  # compiles a pattern when imported: only for a sysbench command line

    try:
        words = shlex.split(arguments)
    except ValueError:
        words = arguments.split()
    for word in words:
        if word.startswith("--test="):
            return _test_name(word.removeprefix("--test="))
    for word in words:
        if word.startswith("-") or word in _COMMANDS or "=" in word:
            continue
        return _test_name(word)
    return None


def _test_name(word: str) -> str | None:
    name = word.rsplit("/", 1)[-1].removesuffix(".lua")
    return name or None


def _run_table(runs: list[_Run], source: str) -> pl.DataFrame:
    rows = []
    for number, run in enumerate(runs):
        values = dict(run.values)
        if values.get("transactions") is None and values.get("events") is not None:
            values["transactions"] = values["events"]  # cpu/memory/fileio: an event is the unit of work
            values.setdefault("tps", values.get("events_per_s"))
        if values.get("queries") is None and values.get("queries_total") is not None:
            values["queries"] = values["queries_total"]
            if values.get("rw_per_s") is not None and values.get("other_ops_per_s") is not None:
                values["qps"] = values["rw_per_s"] + values["other_ops_per_s"]
        rows.append({"run": number, "tool": TOOL, "test": run.test, "source": source, **values})
    schema = {"run": pl.Int32, "tool": pl.String, "test": pl.String, "source": pl.String}
    frame = pl.DataFrame(rows, schema_overrides=schema, infer_schema_length=None)
    return conform(LOAD_RUN, frame)


def _histogram_table(runs: list[_Run], source: str) -> pl.DataFrame:
    rows = [(number, value, count) for number, run in enumerate(runs) for value, count in run.histogram]
    frame = pl.DataFrame(
        rows, schema={"run": pl.Int32, "latency_ms": pl.Float64, "count": pl.Int64}, orient="row"
    ).with_columns(source=pl.lit(source))
    return conform(LATENCY_HISTOGRAM, frame)


def detect(head: str, name: str) -> float:
    intervals = len(_INTERVAL_DETECT_RE.findall(head))
    # "General statistics:" alone is too common a heading to count
    summaries = len(set(_SUMMARY_DETECT_RE.findall(head)) - {"General statistics:"})
    if _BANNER_DETECT_RE.search(head) is not None:
        return 0.95
    if intervals >= 2 or (summaries >= 1 and intervals >= 1) or summaries >= 2:
        return 0.9
    if intervals == 1 or summaries == 1:
        return 0.8 if "sysbench" in name.lower() else 0.6
    return 0.0


SPEC = ParserSpec(
    kind="sysbench",
    description="sysbench run output (1.0.x, 0.5, 0.4): interval lines, summary, latency histogram; several runs",
    detect=detect,
    parse=parse,
)
