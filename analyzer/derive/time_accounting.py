"""Where did the time go: the time users waited against the time the database worked.

``metrics.time_accounting`` (names fixed by issue 5): ``user_response_time_s``, ``db_time_s``,
``db_time_ratio`` (DB time / user response time) and ``sources`` (one entry per input used:
``side`` "user"/"db"; ``kind``: "jmeter-samples", "load-test-intervals", "load-test-run",
"app-latency-metric" (user), "statement-log", "db-time-metric", "statement-summary" (DB);
``detail`` (what was summed, in words); ``source`` (the member); ``from``, ``to`` (null for a load
test without wall-clock times); ``count`` (samples, intervals, transactions, statements, digest
rows or scrape intervals summed) and ``seconds`` (its share of the sum)).
Also ``from``/``to`` (the period both sums cover), ``alignment`` (how the two sides were put on
one period), ``run_placed`` (a load-test run without clock was placed on a stretch of the DB
side, from ``from`` to ``to``), ``window_s``, ``windows`` (the per-window rows below), ``notes`` and
``unavailable_reason`` (why the ratio is null when one side is missing).

**Connection set-up**, when the load tool measured it (``dbdiag.derive.connection_time``):
``connection_time_s`` (the part of ``user_response_time_s`` users spent connecting: pgbench -C
transactions x "average connection time", added to a latency measured after connecting; pgbench's
"initial connection time" x clients; JMeter Σ ``Connect``), ``connection_share_of_user_time``
(0..1), ``connection_ms_per_transaction`` (pgbench -C, JMeter), ``connection_per_transaction``
(a new connection per transaction: pgbench -C) and ``connection_detail`` (the sum in words); null
(false) when no tool measured it (sysbench prints no connection time).

**User response time** (Σ of the latency of the users' transactions), the first of:

1. ``load_sample`` (JMeter): Σ ``elapsed_ms`` of the samples started in the period. When the table
   tells transaction-controller samples apart (a boolean ``is_transaction`` column), only those
   count: their children would count the same time twice.
2. ``load_interval`` with wall times (pgbench ``--progress-timestamp``): Σ over progress lines of
   TPS x average latency x the interval length, each at its time.
3. ``load_run`` (sysbench, pgbench): sysbench's ``latency_sum_ms`` (the "sum" of its Latency block);
   else ``transactions`` x ``latency_avg_ms`` (pgbench); else ``tps`` x ``latency_avg_ms`` x
   ``duration_s``. Summed over runs.
4. ``metric_sample``: the increase of ``<family>_sum`` of an application latency histogram or
   summary (the time users waited = TPS x average latency), families in :data:`USER_FAMILIES`
   first, else any family matching :data:`GENERIC_USER_FAMILY_RE` whose name is not a database's
   (:data:`NOT_USER_PREFIXES`); the family with the largest increase is taken (the outermost
   layer). Series of scrape and health endpoints (:data:`IGNORED_ENDPOINT_RE`) are left out.

**DB time**, the first of:

1. ``statement``: Σ ``query_time_s`` of the statements in the period, only when the log holds
   every statement (:func:`log_completeness`: the smallest logged duration is at most
   :data:`COMPLETE_LOG_MAX_MIN_S`, and when a load test says how many queries it sent, the log
   holds at least :data:`COMPLETE_LOG_MIN_SHARE` of them). A slow log with a threshold is said so
   and not used: the statements under the threshold are missing from the sum.
2. ``metric_sample``: the increase of a DB-time counter of :data:`DB_TIME_COUNTERS` (TiDB
   ``tidb_server_handle_query_duration_seconds_sum``: QPS x average latency; postgres_exporter
   ``pg_stat_statements`` and ``pg_stat_database`` active time; mysqld_exporter digest latency).
   A MySQL exporter gives QPS (:data:`QPS_ONLY_COUNTERS`) but no latency: said in the reason.
3. ``statement_summary`` (TiDB Dashboard statements): Σ ``sum_latency_s``, each digest row's time
   spread evenly from its ``first_seen`` to its ``last_seen`` and prorated to the period (in the
   per-window table it counts at ``first_seen``: a row covers a whole summary window).

**Period.** When both sides have timestamps, both sums are taken over the overlap of their
coverage, the period closed at its start and open at its end; every contribution counts at its start
(a statement's or sample's start, a progress line's or a counter increase's interval start). sysbench
and pgbench print no wall-clock time: a single run is placed on the statement log by its own
connections (the ``threads`` connections with the most statements, accepted when their count
agrees with the queries the run counted and their span with its duration), else on the
``duration_s`` stretch of the log that holds the most statements (of counter metrics: the most DB
time); several runs, or JMeter samples without a timeStamp column, are compared as totals with the
whole DB side. ``alignment`` says which was done. A run with a new connection per transaction
(pgbench -C) is never matched by connections (each holds one transaction): it takes the stretch of
its whole span (transactions / tps, reconnections included) with the most statements, plus the
statements continuing it at its edges (gaps under :data:`EDGE_GAP_S`), every one of them counted.

**Per-window table** ``time_accounting_windows`` (only when both sides have timestamps):
``window_start`` (windows of ``window_s`` aligned to multiples of ``window_s`` since the epoch),
``user_response_time_s``, ``db_time_s``, ``ratio`` (null when no user time in the window); each
contribution falls in the window of its start, so a transaction crossing a window edge counts in the
window where it started, and a counter increase in the window where its scrape interval began
(scrapes sparser than ``window_s`` leave windows without that side's time).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from dbdiag import tables as t
from dbdiag.derive.time_db_side import db_side, log_completeness, threshold_settings
from dbdiag.derive.time_sides import COMPLETE_LOG_MIN_SHARE, EDGE_GAP_S, SPAN_SLACK, SPAN_SLACK_S, Side
from dbdiag.derive.time_user_side import JMETER_CONNECT, load_runs, user_side


def time_accounting(tables: dict[str, pl.DataFrame], window_s: float = 10.0) -> tuple[dict[str, Any] | None, pl.DataFrame | None]:
    """``metrics.time_accounting`` and the per-window table; (None, None) when neither side has an input.

    With one side only, the metric still says what that side is, with null ratio and an
    ``unavailable_reason``.
    """
    notes: list[str] = []
    user, user_reason = user_side(tables, notes)
    runs = load_runs(tables) if user is not None and user.kind == "load-test-run" else None
    db, db_reason = db_side(tables, notes)
    if user is None and db is None:
        return None, None
    metric: dict[str, Any] = {
        "user_response_time_s": None, "db_time_s": None, "db_time_ratio": None, "sources": [],
        "from": None, "to": None, "alignment": None, "run_placed": False, "window_s": window_s, "windows": [],
        "notes": notes, "unavailable_reason": None,
        "connection_time_s": None, "connection_share_of_user_time": None, "connection_ms_per_transaction": None,
        "connection_per_transaction": False, "connection_detail": None,
    }
    if user is None or db is None:
        present = user or db
        assert present is not None
        _fill_side(metric, present, None)
        metric["unavailable_reason"] = user_reason if user is None else db_reason
        return metric, None
    period, alignment, db = _align(user, db, runs, tables)
    metric["alignment"] = alignment
    if period is None:
        metric["unavailable_reason"] = (
            f"no overlap: user side {_iso(user.coverage[0])} to {_iso(user.coverage[1])}, "
            f"DB side {_iso(db.coverage[0])} to {_iso(db.coverage[1])}" if user.coverage and db.coverage else alignment
        )
        _fill_side(metric, user, None)
        _fill_side(metric, db, None)
        return metric, None
    # a clock-less load-test run that was matched to a stretch of the DB side (not whole totals)
    metric["run_placed"] = user.kind == "load-test-run" and period != (None, None)
    user_s = _fill_side(metric, user, period)
    db_s = _fill_side(metric, db, period)
    shown = period if period != (None, None) else db.coverage
    metric["from"], metric["to"] = (_iso(shown[0]), _iso(shown[1])) if shown else (None, None)
    metric["db_time_ratio"] = round(db_s / user_s, 4) if user_s else None
    windows = None
    if user.events is not None and db.events is not None and period != (None, None):
        effective_s = max([window_s, *(_scrape_step_s(side) for side in (user, db))])
        if effective_s > window_s:
            # a counter increase is known per scrape only: narrower windows would read 0 and 2x alternately
            notes.append(f"windows widened from {window_s:g} s to the {effective_s:g} s scrape step of the metrics")
            metric["window_s"] = effective_s
        windows = _windows(user.events, db.events, period, effective_s)
        metric["windows"] = [
            {**row, "window_start": _iso(row["window_start"])}
            for row in windows.with_columns(pl.col(pl.Float64).round(6)).to_dicts()
        ]
    return metric, windows


# ---------------------------------------------------------------- alignment


def _align(user: Side, db: Side, runs: pl.DataFrame | None,
           tables: dict[str, pl.DataFrame]) -> tuple[tuple[Any, Any] | None, str, Side]:
    """The period both sums cover, how it was found, and the DB side restricted to what belongs to it."""
    if user.events is not None and db.events is not None:
        assert user.coverage and db.coverage
        start, end = max(user.coverage[0], db.coverage[0]), min(user.coverage[1], db.coverage[1])
        if start > end:
            return None, "timestamps of both sides, which do not overlap", db
        return (start, end), "timestamps: both sums over the overlap of the two sides' coverage", db
    assert db.events is not None
    if runs is not None and runs.height == 1:
        run = runs.row(0, named=True)
        tool = run["tool"] or "the load test"
        per_transaction = run.get("connect_per_transaction")
        if db.kind == "statement-log" and not per_transaction:
            matched = _by_connections(db.events, run)
            if matched is not None:
                events, text = matched
                return _restricted(db, events, text)
        if run["duration_s"]:
            events, text = _busiest(db.events, _run_span_s(run))
            if per_transaction:
                events, text = _with_edges(db.events, events, text)
            complete = db.kind != "statement-log" or _complete_for_run(events, run, tables)
            # a new connection per transaction spreads the run over thousands of connections: every
            # statement of the stretch is the run's, not those of the few busiest connections
            why = f" ({tool} -C opens a connection per transaction: every statement of that stretch counts)" if per_transaction else ""
            if complete:
                return _restricted(db, events, f"{tool} prints no wall-clock time: {text}{why}")
            return None, (
                f"{tool} prints no wall-clock time and the statement log could not be matched to it: "
                f"{_complete_reason(events, run, tables)}"
            ), db
    what = f"{runs.height} load-test run(s)" if runs is not None else user.what
    text = f"{what} without wall-clock times: assumed to cover the whole span of the DB side; whole totals are compared"
    return (None, None), text, db


def _run_span_s(run: dict[str, Any]) -> float:
    """How long the run lasted: ``duration_s``, or for pgbench -C its transactions / tps when longer
    (that tps counts the reconnections: it is the run's whole span, the last transactions included)."""
    span_s = float(run["duration_s"])
    if run.get("connect_per_transaction") and run.get("tps") and run.get("transactions"):
        span_s = max(span_s, run["transactions"] / run["tps"])
    return span_s


def _by_connections(events: pl.DataFrame, run: dict[str, Any]) -> tuple[pl.DataFrame, str] | None:
    threads = run["threads"]
    if not threads or events["conn_id"].null_count() == events.height:
        return None
    counts = events.group_by("source", "conn_id").len().sort(["len", "source", "conn_id"], descending=[True, False, False])
    if counts.height < threads:
        return None
    top = counts.head(threads)
    in_top = _in_pairs(top)
    chosen = events.filter(in_top)
    expected = run["expected_queries"]
    if expected and not COMPLETE_LOG_MIN_SHARE <= chosen.height / expected <= 1 / COMPLETE_LOG_MIN_SHARE:
        return None
    if chosen["ts"].min() is None or chosen["end_ts"].max() is None:
        return None  # statements without times cannot be placed
    span_s = (chosen["end_ts"].max() - chosen["ts"].min()).total_seconds()
    if run["duration_s"] and span_s > run["duration_s"] * SPAN_SLACK + SPAN_SLACK_S:
        return None
    others = events.filter(pl.col("ts").is_between(chosen["ts"].min(), chosen["end_ts"].max()) & ~in_top)
    told = f"; {run['expected_text']}" if expected else ""
    ids = ", ".join(str(c) for c in sorted(top["conn_id"].to_list(), key=_natural))
    text = (
        f"{run['tool']} prints no wall-clock time: its {threads} {'clients' if run['tool'] == 'pgbench' else 'threads'} "
        f"were matched to the {threads} connections with the most statements ({ids}: {chosen.height:,} statements{told}), "
        f"from {_iso(chosen['ts'].min())} to {_iso(chosen['end_ts'].max())}"
    )
    if others.height:
        text += f"; {others.height:,} statements of other connections in that span ({others['seconds'].sum():.6f} s) are not counted"
    return chosen, text


def _in_pairs(pairs: pl.DataFrame) -> pl.Expr:
    """Whether a row's (``source``, ``conn_id``) is one of ``pairs`` (nulls match nothing, as in a join).

    One ``is_in`` per source (a handful) instead of a join on two string columns over every statement.
    """
    matched = pl.lit(False)
    for source, ids in pairs.drop_nulls(["source", "conn_id"]).group_by("source", maintain_order=True).agg("conn_id").iter_rows():
        matched = matched | ((pl.col("source") == source) & pl.col("conn_id").is_in(ids))
    return matched.fill_null(False)


def _busiest(events: pl.DataFrame, duration_s: float) -> tuple[pl.DataFrame, str]:
    """The events in the ``duration_s`` stretch that holds the most weight (statements, or DB seconds)."""
    ordered = events.sort("ts")
    starts = ordered["ts"]
    ends = starts.search_sorted(starts + timedelta(seconds=duration_s), side="right")
    cumulative = pl.concat([pl.Series([0.0]), ordered["weight"].cum_sum()])
    weights = cumulative.gather(ends) - cumulative.head(ordered.height)
    best = int(weights.arg_max() or 0)
    chosen = ordered.slice(best, int(ends[best]) - best)
    text = (f"it is assumed to have run over the {duration_s:g} s stretch of the DB side with the most "
            f"{'statements' if 'conn_id' in events.columns else 'DB time'}, "
            f"from {_iso(chosen['ts'].min())} to {_iso(chosen['ts'].min() + timedelta(seconds=duration_s))}")
    return chosen, text


def _with_edges(events: pl.DataFrame, chosen: pl.DataFrame, text: str) -> tuple[pl.DataFrame, str]:
    """``chosen`` (a stretch of ``events``) with the statements just outside it that continue it: each
    within EDGE_GAP_S of the previous one, up to SPAN_SLACK_S beyond each edge.

    The stretch of a -C run's span is a little longer than its statements (the first connection
    comes before the first statement): it may slide onto pgbench's set-up session before the run
    and leave the run's last statement out; the run is one dense burst, so its edges are taken in.
    """
    low, high = chosen["ts"].min(), chosen["ts"].max()
    if low is None or high is None:
        return chosen, text

    def continuing(side: pl.DataFrame, edge: Any, descending: bool) -> pl.DataFrame:
        ordered = side.sort("ts", descending=descending)
        gap_s = (ordered["ts"] - ordered["ts"].shift(1, fill_value=edge)).dt.total_microseconds().abs() / 1e6
        breaks = (gap_s > EDGE_GAP_S).arg_true()
        return ordered.head(int(breaks[0]) if breaks.len() else ordered.height)

    slack = timedelta(seconds=SPAN_SLACK_S)
    before = continuing(events.filter((pl.col("ts") < low) & (pl.col("ts") >= low - slack)), low, True)
    after = continuing(events.filter((pl.col("ts") > high) & (pl.col("ts") <= high + slack)), high, False)
    if not before.height and not after.height:
        return chosen, text
    extended = pl.concat([before, chosen, after]).sort("ts")
    edges = " and ".join(f"{n:,} statement(s) just {where} it" for n, where in ((before.height, "before"), (after.height, "after")) if n)
    return extended, f"{text}; {edges} continue it (gaps under {EDGE_GAP_S:g} s) and are counted"


def _complete_for_run(events: pl.DataFrame, run: dict[str, Any], tables: dict[str, pl.DataFrame]) -> bool:
    return log_completeness(events.rename({"seconds": "query_time_s"}), expected=run["expected_queries"])[0]


def _complete_reason(events: pl.DataFrame, run: dict[str, Any], tables: dict[str, pl.DataFrame]) -> str:
    return log_completeness(events.rename({"seconds": "query_time_s"}), threshold_settings(tables), run["expected_queries"])[1]


def _restricted(db: Side, events: pl.DataFrame, text: str) -> tuple[tuple[Any, Any], str, Side]:
    end = events["end_ts"].max() if "end_ts" in events.columns else events["ts"].max()
    return (events["ts"].min(), end), text, Side(db.side, db.kind, events=events, coverage=db.coverage, counter=db.counter, what=db.what)


# ---------------------------------------------------------------- output


def _fill_side(metric: dict[str, Any], side: Side, period: tuple[Any, Any] | None) -> float:
    """Add the side's sources to ``metric`` and set its sum over ``period`` (None: everything it has)."""
    key = "user_response_time_s" if side.side == "user" else "db_time_s"
    if side.events is None:
        metric["sources"] += side.sources
        metric[key] = round(side.total_s or 0.0, 6)
        if side.side == "user":
            per_transaction = side.kind == "load-test-run" and side.connect_per_transaction
            transactions = sum(s["count"] or 0 for s in side.sources) if per_transaction else None
            _fill_connection(metric, side, side.connect_s, transactions)
        return side.total_s or 0.0
    events = side.events
    if period is not None and period != (None, None) and side.kind == "statement-summary":
        events = _prorated(events, period)
    elif period is not None and period != (None, None):
        events = events.filter(pl.col("ts").is_between(period[0], period[1], closed="left"))
    per_source = events.group_by("source", maintain_order=True).agg(
        pl.len().alias("count"), pl.col("seconds").sum(), pl.col("ts").min().alias("from"),
        (pl.col("end_ts").max() if "end_ts" in events.columns else pl.col("ts").max()).alias("to"),
    )
    for row in per_source.iter_rows(named=True):
        metric["sources"].append({
            "side": side.side, "kind": side.kind, "detail": _detail(side, row), "source": row["source"],
            "from": _iso(row["from"]), "to": _iso(row["to"]), "count": row["count"], "seconds": round(row["seconds"], 6),
        })
    total = float(events["seconds"].sum())
    metric[key] = round(total, 6)
    if side.side == "user" and "connect_s" in events.columns and events["connect_s"].null_count() < events.height:
        connected = events.filter(pl.col("connect_s").is_not_null())
        transactions = (
            connected.height if side.kind == "jmeter-samples"
            else None  # progress lines: the transactions are TPS x interval, not rows
        )
        _fill_connection(metric, side, float(connected["connect_s"].sum()), transactions)
    return total


def _fill_connection(metric: dict[str, Any], side: Side, connect_s: float | None, transactions: int | None) -> None:
    """The user time spent connecting (part of ``user_response_time_s``), when the load tool measured it."""
    if connect_s is None:
        return
    metric["connection_time_s"] = round(connect_s, 6)
    user_s = metric["user_response_time_s"]  # set by the caller: the user side's sum over the same period
    if user_s:
        metric["connection_share_of_user_time"] = round(connect_s / user_s, 4)
    metric["connection_per_transaction"] = side.connect_per_transaction or side.kind == "load-test-intervals"
    if transactions:
        metric["connection_ms_per_transaction"] = round(1000.0 * connect_s / transactions, 3)
    metric["connection_detail"] = side.connect_detail or (
        JMETER_CONNECT if side.kind == "jmeter-samples" else "pgbench -C progress lines: TPS x interval x the run's average connection time"
    )


def _prorated(events: pl.DataFrame, period: tuple[Any, Any]) -> pl.DataFrame:
    """Rows spanning ``ts``..``end_ts`` (statement summaries) keep the share of their time inside ``period``,
    assuming their executions were spread evenly between first and last."""
    start, end = pl.lit(period[0]).cast(t.UTC_TIME), pl.lit(period[1]).cast(t.UTC_TIME)
    span = (pl.col("end_ts") - pl.col("ts")).dt.total_microseconds()
    inside = (pl.min_horizontal("end_ts", end) - pl.max_horizontal("ts", start)).dt.total_microseconds().clip(lower_bound=0)
    at_start = pl.col("ts").is_between(start, end, closed="left").cast(pl.Float64)
    fraction = pl.when(span > 0).then(inside / span).otherwise(at_start)
    return events.with_columns((pl.col("seconds") * fraction).alias("seconds"), fraction.alias("_fraction")).filter(
        pl.col("_fraction") > 0
    ).drop("_fraction")


def _detail(side: Side, row: dict[str, Any]) -> str:
    if side.kind == "statement-log":
        return f"Σ statement durations from {row['source']} ({row['count']:,} statements)"
    if side.kind == "jmeter-samples":
        return f"{side.what} from {row['source']} ({row['count']:,} samples)"
    if side.kind == "statement-summary":
        return f"{side.what} from {row['source']} ({row['count']:,} digest rows, prorated over first to last execution)"
    if side.kind == "load-test-intervals":
        return f"{side.what} from {row['source']} ({row['count']:,} intervals)"
    if side.counter is not None:
        qps = f"; {side.counter.count_metric} gives the QPS" if side.counter.count_metric else ""
        return f"increase of {side.counter.metric} ({side.what}){qps}; {row['count']:,} scrape intervals"
    return f"{side.what}; {row['count']:,} scrape intervals"


def _scrape_step_s(side: Side) -> float:
    """The median spacing of a metric side's counter increases (0 for sides with per-event times)."""
    if side.events is None or not side.kind.endswith("-metric"):
        return 0.0
    steps = side.events.select(pl.col("ts").unique().sort().diff().dt.total_microseconds().drop_nulls())
    median = steps.to_series().median() if steps.height else None
    return float(median) / 1e6 if median else 0.0


def _windows(user: pl.DataFrame, db: pl.DataFrame, period: tuple[Any, Any], window_s: float) -> pl.DataFrame:
    width_us = max(1, int(round(window_s * 1e6)))

    def per_window(events: pl.DataFrame, name: str) -> pl.DataFrame:
        epoch_us = pl.col("ts").dt.epoch("us")
        return (
            events.filter(pl.col("ts").is_between(period[0], period[1], closed="left"))
            .group_by(((epoch_us // width_us) * width_us).alias("window_us"))
            .agg(pl.col("seconds").sum().alias(name))
        )

    frame = per_window(user, "user_response_time_s").join(per_window(db, "db_time_s"), on="window_us", how="full", coalesce=True)
    # a window cut by the period's edge where one side has nothing says nothing (e.g. the samples start just
    # before a scrape: that window holds user time and no DB time)
    start_us, end_us = (int(pl.Series([value]).dt.epoch("us")[0]) for value in period)
    cut = (pl.col("window_us") < start_us) | (pl.col("window_us") + width_us > end_us)
    one_sided = pl.col("user_response_time_s").fill_null(0.0).eq(0.0) | pl.col("db_time_s").fill_null(0.0).eq(0.0)
    frame = frame.filter(~(cut & one_sided))
    return (
        frame.with_columns(pl.col("user_response_time_s", "db_time_s").fill_null(0.0))
        .with_columns(
            pl.from_epoch("window_us", time_unit="us").dt.replace_time_zone("UTC").alias("window_start"),
            pl.when(pl.col("user_response_time_s") > 0).then(pl.col("db_time_s") / pl.col("user_response_time_s")).alias("ratio"),
        )
        .sort("window_start")
        .select("window_start", "user_response_time_s", "db_time_s", "ratio")
    )


def _iso(value: Any) -> str | None:
    return value.isoformat() if isinstance(value, datetime) else None


def _natural(value: str) -> tuple[int, str]:
    return (int(value), "") if value.isdigit() else (1 << 62, value)
