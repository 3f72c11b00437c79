"""mpstat JSON output (``mpstat -o JSON -A 1 5``); also the CPU and interrupt parts of ``sadf -j``.

Sample input (mpstat; a single since-boot sample has one ``statistics`` entry)::

    {"sysstat": {
      "hosts": [
        {"nodename": "vm", "sysname": "Linux", "release": "6.18.44", "machine": "x86_64",
         "number-of-cpus": 2, "date": "2026-11-29",
         "statistics": [
           {"timestamp": "19:12:15",
            "cpu-load": [{"cpu": "all", "usr": 5.03, "nice": 0.00, "sys": 1.51, ..., "idle": 93.47},
                         {"cpu": "0", "core": "0", "socket": "0", "node": "0", "usr": 7.92, ...}],
            "node-load": [{"node": "0", "usr": 2.44, ...}],
            "sum-interrupts": [{"cpu": "all", "intr": 35525.06}],
            "individual-interrupts": [{"cpu": "0", "intr": [{"name": "LOC", "value": 40.2}, ...]}],
            "soft-interrupts": [{"cpu": "0", "intr": [{"name": "NET_RX", "value": 0.00}, ...]}]}
         ]}]}}

``sadf -j`` differs: ``file-date`` on the host, ``"timestamp": {"date": "2019-04-18",
"time": "13:20:19", "tz": "UTC"}``, ``cpu-load`` or ``cpu-load-all`` (``user``/``system`` keys
with plain ``-u``), and ``"interrupts": [{"intr": "25", "all": 1.0, "CPU0": 0.5, ...}]``.

Output tables (see ``dbdiag.tables``): ``cpu_util`` (cpu ``all`` -> -1), ``node_util``,
``softirq_rate``, ``irq_rate``, ``topology`` (from the ``core``/``socket``/``node`` keys of
``mpstat -T``), ``host_fact`` (hostname, os, kernel, arch, cpu_count). ``sum-interrupts`` is not
kept. mpstat times have no zone: they are read in ``ctx.tz`` and stored as UTC (said in a
note); sadf times carry their zone. A file cut short (mpstat killed) is read up to its last
complete sample, with a warning.
"""

from __future__ import annotations

import json
import re
from datetime import date

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.kit import json_text
from dbdiag.parsers._sysstat import (
    PCT_COLUMNS,
    SYSTEM_INCLUDES_IRQ_NOTE,
    clock_seconds,
    cpu_number,
    host_facts,
    midnight_wraps,
    parse_sysstat_date,
)
from dbdiag.parsers.kit.times import check_tz, local_to_utc, zone_note
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

SYSSTAT_JSON_RE = lazy_compile(r'^\s*\{\s*"sysstat"\s*:\s*\{\s*"hosts"\s*:')
MPSTAT_KEYS = ('"cpu-load"', '"soft-interrupts"', '"node-load"', '"individual-interrupts"', '"sum-interrupts"')
CLOCK_RE = lazy_compile(r"(\d{1,2}):(\d{2}):(\d{2})(?:\s*([AaPp][Mm]))?")
CPU_LOAD_KEYS = ("cpu-load", "cpu-load-all")


def detect(head: str, name: str) -> float:
    if not SYSSTAT_JSON_RE.match(head.lstrip("\ufeff")):
        return 0.0
    if '"statistics"' in head and any(k in head for k in MPSTAT_KEYS + ('"cpu-load-all"',)):
        return 0.9
    if '"disk_device"' in head:  # iostat -o JSON: the same banner, disks instead of CPUs
        return 0.0
    return 0.6


def _close_truncated(text: str) -> str | None:
    """JSON cut short -> the text up to its last complete array element, with brackets closed."""
    stack: list[str] = []
    in_string = escaped = False
    cut = None
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            if not stack or stack.pop() != ch:
                return None
            if ch == "}" and stack and stack[-1] == "]":
                cut = (i + 1, "".join(reversed(stack)))
    return text[: cut[0]] + cut[1] if cut else None


def _load(text: str, warnings: list[ParseWarning]) -> dict:
    try:
        doc = json_text.loads(text)
    except json.JSONDecodeError as exc:
        repaired = _close_truncated(text)
        try:
            doc = json_text.loads(repaired) if repaired else None
        except json.JSONDecodeError:
            doc = None
        if doc is None:
            raise ParseError(f"not valid JSON: {exc.msg} at line {exc.lineno}") from None
        warnings.append(ParseWarning(exc.lineno, f"JSON cut short ({exc.msg}); read up to the last complete sample"))
    hosts = doc.get("sysstat", {}).get("hosts") if isinstance(doc, dict) and isinstance(doc.get("sysstat"), dict) else None
    if not isinstance(hosts, list):
        raise ParseError("no sysstat.hosts list")
    return doc


def _num(value: object) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value).replace(",", "."))
    except ValueError:
        return None


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _key(value: object) -> str:
    return "all" if value in ("all", "-1", -1) else str(value)


def _clock(stamp: object, host_date: date | None) -> dict[str, object]:
    """A sample's time: {"date", "tod"} (zone-less clock), {"epoch"} or {"utc": "YYYY-mm-dd HH:MM:SS"}."""
    if isinstance(stamp, dict):  # sadf -j
        day, clock, zone = stamp.get("date"), str(stamp.get("time", "")), stamp.get("tz")
        if zone == "UTC" and day:
            return {"utc": f"{day} {clock}"}
        return {"date": parse_sysstat_date(str(day)) or host_date, "clock": clock}
    text = str(stamp or "").strip()
    if text.isdigit() and len(text) >= 9:
        return {"epoch": int(text)}
    return {"date": host_date, "clock": text}


def _samples(doc: dict, notes: list[str]) -> tuple[list[dict], dict[str, list[dict]], list[dict]]:
    """Walk hosts/statistics into a sample list and per-table row dicts (``sample`` numbers link them)."""
    samples: list[dict] = []
    rows: dict[str, list[dict]] = {T.CPU_UTIL: [], T.NODE_UTIL: [], T.SOFTIRQ_RATE: [], T.IRQ_RATE: [], T.TOPOLOGY: []}
    facts = []
    for host_no, host in enumerate(doc["sysstat"]["hosts"]):
        if not isinstance(host, dict):
            continue
        facts.append({
            "hostname": host.get("nodename"), "os": host.get("sysname"), "kernel": host.get("release"),
            "arch": host.get("machine"), "cpu_count": host.get("number-of-cpus"),
        })
        if host.get("restarts"):
            notes.append("the host rebooted during the recording (sadf restarts)")
        host_date = parse_sysstat_date(str(host.get("date") or host.get("file-date") or ""))
        for stat in host.get("statistics") or []:
            if not isinstance(stat, dict) or "timestamp" not in stat:
                continue
            sample = len(samples)
            samples.append({"sample": sample, "host": host_no, **_clock(stat["timestamp"], host_date)})
            _stat_rows(stat, sample, rows, notes)
    return samples, rows, facts


def _stat_rows(stat: dict, sample: int, rows: dict[str, list[dict]], notes: list[str]) -> None:
    """Append one statistics entry's rows to ``rows`` (table -> row dicts)."""
    for key in CPU_LOAD_KEYS:
        for item in _items(stat.get(key)):
            rows[T.CPU_UTIL].append({"sample": sample, "key": _key(item.get("cpu")), **_pcts(item)})
            if item.get("core") not in (None, ""):  # mpstat -T
                where = {k: _int(item.get(k)) for k in ("cpu", "core", "socket", "node")}
                rows[T.TOPOLOGY].append(where)
            if "system" in item and "irq" not in item:
                notes.append(SYSTEM_INCLUDES_IRQ_NOTE)
    for item in _items(stat.get("node-load")):
        rows[T.NODE_UTIL].append({"sample": sample, "key": _key(item.get("node")), **_pcts(item)})
    per_cpu_lists = ((T.SOFTIRQ_RATE, "softirq", "soft-interrupts"), (T.IRQ_RATE, "irq", "individual-interrupts"))
    for table, name, key in per_cpu_lists:
        for item in _items(stat.get(key)):
            cpu = _key(item.get("cpu"))
            for intr in _items(item.get("intr")):
                rows[table].append({"sample": sample, "key": cpu, name: str(intr.get("name")), "per_s": _num(intr.get("value"))})
    for item in _items(stat.get("interrupts")):
        if isinstance(item.get("intr"), list):  # shaped like individual-interrupts
            cpu = _key(item.get("cpu"))
            for intr in _items(item["intr"]):
                rows[T.IRQ_RATE].append({"sample": sample, "key": cpu, "irq": str(intr.get("name")), "per_s": _num(intr.get("value"))})
        elif item.get("intr") != "sum":  # sadf -j: one dict per IRQ with a CPUn key per CPU
            for k, v in item.items():
                if re.fullmatch(r"CPU\d+", k):
                    rows[T.IRQ_RATE].append({"sample": sample, "key": k[3:], "irq": str(item.get("intr")), "per_s": _num(v)})
    if "sum-interrupts" in stat:
        notes.append("sum-interrupts (intr/s) is not kept; irq_rate has the per-IRQ rates")


def _items(value: object) -> list[dict]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _pcts(item: dict) -> dict[str, float | None]:
    out = {}
    for column, spellings in PCT_COLUMNS.items():
        key = next((s for s in spellings if s in item), None)
        out[column] = _num(item[key]) if key else None
    return out


def _sample_times(samples: list[dict], tz: str) -> pl.DataFrame:
    """sample -> ts (UTC), applying midnight rollover per host to zone-less clocks."""
    frame = pl.DataFrame(
        [{"sample": s["sample"], "host": s["host"], "date": s.get("date"), "clock": s.get("clock"),
          "epoch": s.get("epoch"), "utc": s.get("utc")} for s in samples],
        schema={"sample": pl.Int64, "host": pl.Int64, "date": pl.Date, "clock": pl.String, "epoch": pl.Int64, "utc": pl.String},
        orient="row",
    )
    parts = pl.col("clock").str.extract_groups(CLOCK_RE.pattern)
    frame = frame.with_columns(tod=clock_seconds(parts.struct[0], parts.struct[1], parts.struct[2], parts.struct[3]))
    frame = frame.with_columns(wraps=midnight_wraps(pl.col("tod")).over("host"))
    day = pl.col("date").fill_null(date(1970, 1, 1)).cast(pl.Datetime("us"))
    naive = day + pl.duration(days=pl.col("wraps"), seconds=pl.col("tod"))
    return frame.with_columns(
        ts=pl.coalesce(
            pl.from_epoch(pl.col("epoch"), time_unit="s").cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
            pl.col("utc").str.to_datetime("%Y-%m-%d %H:%M:%S", strict=False).cast(pl.Datetime("us")).dt.replace_time_zone("UTC"),
            local_to_utc(naive, tz),
        ).cast(T.UTC_TIME),
        local=pl.col("tod").is_not_null() & pl.col("epoch").is_null() & pl.col("utc").is_null(),
        undated=pl.col("date").is_null() & pl.col("tod").is_not_null(),
    )


def parse(text: str, ctx: ParseContext) -> ParseResult:
    if not text.strip():
        raise ParseError("empty file")
    tz, tz_warning = check_tz(ctx.tz)
    warnings: list[ParseWarning] = [tz_warning] if tz_warning else []
    notes: list[str] = []
    doc = _load(text, warnings)
    samples, rows, facts = _samples(doc, notes)
    if not samples:
        raise ParseError("no statistics with a timestamp")
    times = _sample_times(samples, tz)
    unreadable = times.filter(pl.col("ts").is_null())
    if unreadable.height:
        warnings.append(ParseWarning(None, f"{unreadable.height} samples with an unreadable timestamp skipped"))
    if times["local"].any():
        notes.append(zone_note(tz))
    if times["undated"].any():
        warnings.append(ParseWarning(None, "no readable host date; samples dated 1970-01-01"))
    if times["wraps"].max():
        notes.append(f"the run passed midnight {times['wraps'].max()} time(s); dates advanced")

    tables = {}
    for table in (T.CPU_UTIL, T.NODE_UTIL, T.SOFTIRQ_RATE, T.IRQ_RATE):
        if not rows[table]:
            continue
        frame = pl.DataFrame(rows[table], infer_schema_length=None).join(times.select("sample", "ts"), on="sample")
        key_name = "node" if table == T.NODE_UTIL else "cpu"
        frame = frame.with_columns(cpu_number(pl.col("key")).alias(key_name))
        readable = pl.col(key_name).is_not_null() & pl.col("ts").is_not_null()
        skipped = frame.filter(~readable).height
        if skipped:
            warnings.append(ParseWarning(None, f"{table}: {skipped} entries with an unreadable {key_name} or time skipped"))
        frame = frame.filter(readable)
        tables[table] = T.conform(table, frame.with_columns(source=pl.lit(ctx.source)))
    if not tables:
        raise ParseError("no cpu-load, node-load or interrupt entries in the statistics")
    if rows[T.TOPOLOGY]:
        topo = pl.DataFrame(rows[T.TOPOLOGY], schema={k: pl.Int32 for k in ("cpu", "core", "socket", "node")}, orient="row")
        topo = topo.drop_nulls("cpu").unique(subset="cpu", keep="last", maintain_order=True).sort("cpu")
        tables[T.TOPOLOGY] = T.conform(T.TOPOLOGY, topo.with_columns(source=pl.lit(ctx.source)))
    tables[T.HOST_FACT] = host_facts(facts, ctx.source)
    all_ts = pl.concat([t.select("ts") for t in tables.values() if "ts" in t.columns])["ts"]
    return ParseResult(
        tables=tables,
        records=all_ts.n_unique(),
        warnings=cap_warnings(warnings),
        notes=list(dict.fromkeys(notes)),
        time_range=(all_ts.min(), all_ts.max()) if all_ts.len() else None,
    )


SPEC = ParserSpec(
    kind="mpstat-json",
    description="mpstat -o JSON (cpu-load, node-load, soft-interrupts, individual-interrupts); sadf -j CPU and interrupts",
    detect=detect,
    parse=parse,
)
