"""Statement and plan-node rows of PostgreSQL logs from their statement entries (``pg_messages``):
log_statement openers paired with the duration or error that closes them, auto_explain plans
attached to the execution they belong to, the notes that say how, and the ParseResult of each log.

What it reads (``pg_messages.statement_entries``), e.g. of a log_statement + log_duration log::

    kind       rec  conn   body / statement          dur_ms
    stmt_only  10   3317   SELECT pg_sleep(1)
    dur_only   11   3317                             1001.2    <- closes the opener on conn 3317

gives one statement row (query_time_s 1.0012, start and end from both entries) and the note
"1 log_statement lines paired with the bare duration line that followed them".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from dbdiag import tables as T
from dbdiag.native.lazy import np
from dbdiag.parsers import pg_explain, pg_lock_waits
from dbdiag.parsers import pg_messages as M
from dbdiag.parsers.base import ParseResult, ParseWarning
from dbdiag.parsers.kit.warning_caps import cap_warnings

@dataclass
class Assembled:
    """Statement and plan-node tables of one member, plus what the inventory should say about them."""

    statements: pl.DataFrame
    plan_nodes: pl.DataFrame
    notes: list[str] = field(default_factory=list)
    warnings: list[ParseWarning] = field(default_factory=list)


def _normalised_sql(expr: pl.Expr) -> pl.Expr:
    return expr.str.replace_all(r"\s+", " ").str.strip_chars(" ;")


def _pair_openers(frame: pl.DataFrame) -> pl.DataFrame:
    """For each log_statement opener, the closer (bare duration, or the ERROR of the same SQL) that ends it."""
    frame = frame.filter(pl.col("kind").is_in(["stmt_only", "dur_only", "error"]))  # the only kinds that pair
    with_open = frame.with_columns(
        pl.when(pl.col("kind") == "stmt_only").then(pl.col("rec")).forward_fill().over("conn").alias("open_rec")
    )
    openers = frame.filter(pl.col("kind") == "stmt_only").select(
        pl.col("rec").alias("open_rec"), _normalised_sql(pl.col("body")).alias("open_sql")
    )
    closers = (
        with_open.filter(pl.col("kind").is_in(["dur_only", "error"]) & pl.col("open_rec").is_not_null())
        .join(openers, on="open_rec", how="left")
        .filter((pl.col("kind") == "dur_only") | (_normalised_sql(pl.col("statement")) == pl.col("open_sql")))
    )
    return (
        closers.group_by("open_rec")
        .agg(pl.col("rec").min().alias("close_rec"))
        .join(
            closers.select(
                pl.col("rec").alias("close_rec"), "kind", "ts", "start_ts", "query_time_s", "sqlstate", "txn_id", "digest"
            ),
            on="close_rec",
        )
        .rename({"kind": "close_kind", "ts": "close_ts", "start_ts": "close_start_ts", "query_time_s": "close_query_time_s",
                 "sqlstate": "close_sqlstate", "txn_id": "close_txn_id", "digest": "close_digest"})
    )


def _statement_rows(frame: pl.DataFrame, pairs: pl.DataFrame) -> pl.DataFrame:
    """Rows from log_statement openers and errors (duration entries are rows already; plans come later)."""
    base = M.BASE_COLUMNS
    no_time = pl.lit(None, dtype=pl.Float64)
    openers = frame.filter(pl.col("kind") == "stmt_only").join(pairs, left_on="rec", right_on="open_rec", how="left")
    by_duration = pl.col("close_kind") == "dur_only"
    by_error = pl.col("close_kind") == "error"
    opened = openers.select(
        *base,
        pl.col("close_ts").alias("end_ts"),
        pl.when(by_duration).then(pl.col("close_start_ts")).otherwise(pl.col("ts")).alias("start_ts"),
        pl.when(by_duration).then(pl.col("close_query_time_s")).otherwise(no_time).alias("query_time_s"),
        pl.col("body").alias("sql"), (pl.col("verb") == "execute").alias("prepared"),
        (~by_error.fill_null(False)).alias("success"),
        pl.when(by_error).then(pl.col("close_sqlstate")).alias("error_code"),
        pl.when(by_duration).then(pl.col("close_rec")).alias("close_rec"),
        pl.col("close_txn_id"),
        pl.col("close_digest"),
    ).with_columns(  # a log_statement line is written before query_id is computed: the closer has it
        pl.coalesce("txn_id", "close_txn_id").alias("txn_id"), pl.coalesce("digest", "close_digest").alias("digest")
    ).drop("close_txn_id", "close_digest")
    paired_errors = pairs.filter(pl.col("close_kind") == "error").select(pl.col("close_rec").alias("rec"))
    errors = frame.filter(pl.col("kind") == "error").join(paired_errors, on="rec", how="anti").select(
        *base, pl.col("ts").alias("end_ts"), pl.lit(None, dtype=T.UTC_TIME).alias("start_ts"), no_time.alias("query_time_s"),
        pl.col("statement").alias("sql"), pl.lit(None, dtype=pl.Boolean).alias("prepared"),
        pl.lit(False).alias("success"), pl.col("sqlstate").alias("error_code"),
        pl.lit(None, dtype=pl.Int64).alias("close_rec"),
    )
    return pl.concat([opened, errors], how="diagonal_relaxed").with_columns(pl.lit(False).alias("is_internal"))


def _closes(rows: pl.DataFrame, conns: pl.Series) -> pl.DataFrame:
    """Entries that close a statement row (its duration or error entry) on the connections ``conns``, in log
    order; ``row_at`` is the row's position in ``rows`` (its SQL is fetched for the few rows matched).
    ``conn_key`` is a hash of the connection, cheaper to match than its text: rows of another connection
    with the same hash may be among them (``row_conn`` tells)."""
    keyed = rows.with_row_index("row_at").with_columns(pl.col("conn").hash().alias("conn_key"))
    closes = keyed.filter(pl.col("close_rec").is_not_null() & pl.col("conn_key").is_in(conns.hash().unique().implode()))
    closes = closes.select(
        pl.col("close_rec").alias("next_close"), "conn_key", pl.col("conn").alias("row_conn"), pl.col("rec").alias("row_rec"), "row_at"
    )
    return _sorted(closes, "next_close")


def _next_close(entries: pl.DataFrame, closes: pl.DataFrame) -> pl.DataFrame:
    """``entries`` with the first of ``closes`` at or after each of them on its connection (``row_rec``,
    ``row_at``), matched on ``conn_key``; on the text when two connections share a hash."""

    def after(left: pl.DataFrame, right: pl.DataFrame, by: str) -> pl.DataFrame:
        return left.join_asof(
            right, left_on="rec", right_on="next_close", by=by, strategy="forward", coalesce=False, check_sortedness=False
        )

    found = after(entries.with_columns(pl.col("conn").hash().alias("conn_key")), closes, "conn_key")
    if (found["row_conn"] != found["conn"]).any():
        found = after(entries, closes.drop("conn_key").rename({"row_conn": "conn"}), "conn")
    return found.drop("conn_key", "row_conn", "next_close", strict=False)


def _attach_plans(frame: pl.DataFrame, rows: list[pl.DataFrame], plans: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Match each plan entry to the statement row (of ``rows``) it belongs to; return (plan-only rows, plan -> row key)."""
    if plans.is_empty():
        return pl.DataFrame(), pl.DataFrame(schema={"rec": pl.Int64, "row_rec": pl.Int64})
    entries = frame.filter(pl.col("kind") == "plan")
    closing = pl.concat([part.select("close_rec", "conn", "rec") for part in rows])
    sql = pl.concat([part["sql"] for part in rows])  # the texts stay where they are until a row is matched
    entries = entries.join(plans.select("rec", "query_text"), on="rec", how="left", maintain_order="left")
    entries = _next_close(entries, _closes(closing, entries["conn"]))
    entries = entries.drop("row_at").with_columns(_normalised_sql(sql.gather(entries["row_at"])).alias("row_sql"))
    nested = pl.col("context").is_not_null()
    matches = ~nested & pl.col("row_rec").is_not_null() & (_normalised_sql(pl.col("query_text")) == pl.col("row_sql"))
    entries = entries.with_columns(matches.fill_null(False).alias("matched"))
    # Several plans for one entry (a query string with several statements): the last one is its plan.
    chosen = entries.filter(pl.col("matched")).group_by("row_rec").agg(pl.col("rec").max().alias("plan_rec"))
    attached = chosen.select(pl.col("plan_rec").alias("rec"), "row_rec")
    own = entries.join(attached, on="rec", how="anti")
    internal = nested | pl.col("matched")
    own_rows = own.select(
        *M.BASE_COLUMNS,
        pl.col("ts").alias("end_ts"),
        "start_ts",
        "query_time_s",
        pl.col("query_text").alias("sql"),
        pl.lit(None, dtype=pl.Boolean).alias("prepared"),
        pl.lit(True).alias("success"),
        pl.lit(None, dtype=pl.String).alias("error_code"),
        internal.alias("is_internal"),
    ).with_columns(pl.when(pl.col("is_internal")).then(None).otherwise(pl.col("query_time_s")).alias("query_time_s"))
    plan_owner = pl.concat([attached, own.select("rec", pl.col("rec").alias("row_rec"))])
    return own_rows, plan_owner


def _sorted(frame: pl.DataFrame, first: str, *then: str) -> pl.DataFrame:
    """``frame`` sorted by ``first`` then ``then``; not copied when ``first`` already rises strictly
    (the usual case: entries come in log order, and sorting a frame of SQL texts is costly)."""
    if frame.select((pl.col(first).diff() > 0).all()).item():
        return frame
    return frame.sort(first, *then)


def _in_line_order(rows: pl.DataFrame, more: pl.DataFrame) -> pl.DataFrame:
    """``rows`` (the bulk, in log order already) and ``more`` (a few rows) in line order: merged, so
    that the bulk is not sorted again (an entry's line is its own: no two rows share one)."""
    rows = _sorted(rows, "line", "rec")
    if more.is_empty():
        return rows
    more = pl.concat([rows.head(0), more], how="diagonal_relaxed").select(
        [pl.col(name).cast(dtype) for name, dtype in rows.schema.items()]
    )
    return rows.merge_sorted(more.sort("line", "rec"), key="line")


def assemble(entries: M.StatementEntries, source: str) -> Assembled:
    """Statement and plan-node rows from ``M.statement_entries`` output (see module docstring)."""
    return assemble_logs(entries, [source], M.ONE_LOG)[0]


def assemble_logs(entries: M.StatementEntries, sources: list[str], files: M.Files) -> list[Assembled]:
    """``assemble`` of the entries of one or several logs (``files``), one ``Assembled`` per log: the
    rows are made once for all of them, then cut per log (stmt_id and line counted per log)."""
    frame = _sorted(entries.others, "rec")
    pairs = _pair_openers(frame)
    paired = _statement_rows(frame, pairs)
    plan_entries = frame.filter(pl.col("kind") == "plan").select("rec", "line", "body")
    parsed = _plans_per_log(plan_entries, files)
    summary_all = pl.concat([p.summary for p in parsed.values()]) if len(parsed) > 1 else next(iter(parsed.values())).summary
    own_rows, plan_owner = _attach_plans(frame, [entries.rows, paired], summary_all)
    rows = _in_line_order(entries.rows, pl.concat([paired, own_rows], how="diagonal_relaxed"))
    rows = _with_ids(rows, files)
    planned = rows.filter(pl.col("rec").is_in(plan_owner["row_rec"].implode())).select(pl.col("rec").alias("row_rec"), "stmt_id", "global_id", "line")
    owner = plan_owner.join(planned, on="row_rec")
    summary = summary_all.join(owner.select("rec", "global_id"), on="rec")
    statements = rows.hstack(_placed(summary.drop("rec", "query_text").rename({"global_id": "stmt_id"}), rows.height)).with_columns(
        pl.lit(M.ENGINE).alias("engine"), pl.col("is_internal").fill_null(False)
    )
    nodes = pl.concat([p.nodes for p in parsed.values()]) if len(parsed) > 1 else next(iter(parsed.values())).nodes
    nodes = nodes.join(owner.select("rec", "stmt_id", "global_id", "line"), on="rec").sort("global_id", "node_id")
    notes = _notes(frame, pairs, plan_owner, rows, files)
    statements = statements.drop("global_id")
    if len(files) > 1:  # conformed once, then cut: one by one, thousands of small logs cost a millisecond each
        statements = T.conform(T.STATEMENT, statements.with_columns(pl.lit("").alias("source"))).rechunk()
    no_nodes = T.conform(T.PLAN_NODE, nodes.head(0))
    assembled = []
    no_plans = pg_explain.ParsedPlans(summary_all.head(0), nodes.head(0))
    for log, (statements_f, nodes_f, notes_f, source) in enumerate(zip(files.split(statements), files.split(nodes), notes, sources)):
        parsed_f = parsed.get(log, no_plans)
        statements_f = statements_f.with_columns(pl.lit(source).alias("source"))
        # one chunk per column: with mixed chunking, every later expression would copy the whole table
        statement = statements_f if len(files) > 1 else T.conform(T.STATEMENT, statements_f).rechunk()
        if nodes_f.height or len(files) == 1:
            nodes_f = T.conform(T.PLAN_NODE, nodes_f.drop("global_id", "line").with_columns(source=pl.lit(source)))
        else:
            nodes_f = no_nodes
        assembled.append(Assembled(statement, nodes_f, notes_f + parsed_f.notes, parsed_f.warnings))
    return assembled


def _plans_per_log(plan_entries: pl.DataFrame, files: M.Files) -> dict[int, pg_explain.ParsedPlans]:
    """The auto_explain plans of each log that has some (log -> plans), each log's read apart: their
    notes and warnings are that log's. A single log's are read at once (an empty reading without plans)."""
    if len(files) == 1 or plan_entries.is_empty():
        return {0: pg_explain.parse_plans(plan_entries.select("rec", "body"))}
    logs = plan_entries.with_columns(files.of(pl.col("line")).alias("file"))
    return {
        int(part["file"][0]): pg_explain.parse_plans(part.select("rec", "body"))
        for part in logs.partition_by("file", maintain_order=True)
    }


def _with_ids(rows: pl.DataFrame, files: M.Files) -> pl.DataFrame:
    """``rows`` with ``stmt_id`` (0-based within each log; rows are in line order, so each log's rows
    are together) and ``global_id`` (the row's position over all logs)."""
    rows = rows.with_row_index("global_id").with_columns(pl.col("global_id").cast(pl.Int64))
    if len(files) == 1:
        return rows.with_columns(pl.col("global_id").alias("stmt_id"))
    log = rows.select(files.of(pl.col("line")).alias("log"))["log"]
    first_row = pl.Series(np.searchsorted(log.to_numpy(), np.arange(len(files))), dtype=pl.Int64)
    return rows.with_columns((pl.col("global_id") - first_row.gather(log)).alias("stmt_id"))


def _placed(plans: pl.DataFrame, height: int) -> pl.DataFrame:
    """The plan columns of ``height`` statement rows: each plan's values at its row (``stmt_id``, one plan
    a row), null elsewhere; written in place, as a join would go through every row."""
    at = plans["stmt_id"]
    return pl.DataFrame([
        pl.repeat(None, height, dtype=dtype, eager=True).alias(name).scatter(at, plans[name])
        for name, dtype in plans.drop("stmt_id").schema.items()
    ])


def _notes(frame: pl.DataFrame, pairs: pl.DataFrame, plan_owner: pl.DataFrame, rows: pl.DataFrame, files: M.Files) -> list[list[str]]:
    """The notes of each log on how its statement entries became rows."""
    line_of_rec = frame.select("rec", "line")
    by_log = {
        "kinds": _counts(frame, files, by=pl.col("kind")),
        "paired": _counts(pairs.join(line_of_rec, left_on="open_rec", right_on="rec"), files, pl.col("close_kind") == "dur_only"),
        "unpaired": _counts(rows, files, pl.col("query_time_s").is_null() & pl.col("success") & ~pl.col("is_internal").fill_null(False)),
        "attached": _counts(plan_owner.join(line_of_rec, on="rec"), files, pl.col("rec") != pl.col("row_rec")),
        "internal": _counts(rows, files, pl.col("is_internal").fill_null(False)),
        "errors": _counts(rows, files, ~pl.col("success").fill_null(True)),
    }
    phases = files.split(frame.filter(pl.col("kind") == "phase").sort("line"))
    notes = []
    for log, phase in enumerate(phases):
        count = {name: counted.get(log, 0) for name, counted in by_log.items() if name != "kinds"}
        kinds = by_log["kinds"].get(log, {})
        notes.append(_log_notes(phase, count, kinds))
    return notes


def _counts(frame: pl.DataFrame, files: M.Files, where: pl.Expr | None = None, by: pl.Expr | None = None) -> dict:
    """Rows of ``frame`` where ``where`` holds, per log (``{log: n}``), or per log and ``by`` value
    (``{log: {value: n}}``); only the keys are read (no filtered copy of a big frame)."""
    keys = [files.of(pl.col("line")).alias("file")] + ([by.alias("by")] if by is not None else [])
    hit = (where if where is not None else pl.lit(True)).fill_null(False).alias("hit")
    selected = frame.select(*keys, hit)
    counted = selected.filter(pl.col("hit")).drop("hit").group_by(pl.all()).len().iter_rows()
    if by is None:
        return {int(log): n for log, n in counted}
    out: dict = {}
    for log, value, n in counted:
        out.setdefault(int(log), {})[value] = n
    return out


def _log_notes(phases: pl.DataFrame, count: dict[str, int], kinds: dict[str, int]) -> list[str]:
    notes = []
    if phases.height:
        notes.append(
            f"{phases.height} parse/bind durations ({phases['dur_ms'].sum():.3f} ms in all) are phases of extended-protocol "
            "executions: not counted as statements (as pgBadger does), their time is in no row"
        )
    if count["paired"]:
        notes.append(f"{count['paired']} log_statement lines paired with the bare duration line that followed them")
    stray = kinds.get("dur_only", 0) - count["paired"]
    if stray:
        notes.append(f"{stray} bare duration lines with no open statement before them (parse/bind under log_duration) not counted")
    if count["unpaired"]:
        notes.append(f"{count['unpaired']} statements logged without a duration (log_statement only): query_time_s is null")
    if kinds.get("plan"):
        notes.append(
            f"{kinds['plan']} auto_explain plans; {count['attached']} attached to the duration entry of the same execution "
            "(counted once)"
        )
    if count["internal"]:
        notes.append(
            f"{count['internal']} plans of statements run inside another one (CONTEXT), or of an earlier statement of the same "
            "query string, kept as is_internal rows with no query_time_s (their time is in the caller's)"
        )
    if count["errors"]:
        notes.append(f"{count['errors']} failed statements (ERROR/FATAL with their statement text)")
    return notes


def finish(entries: M.StatementEntries, summary: M.EntrySummary, source: str, notes: list[str], warnings: list[ParseWarning]) -> ParseResult:
    """The ParseResult every PostgreSQL parser returns."""
    return finish_logs(entries, [summary], [source], [notes], [warnings], M.ONE_LOG)[0]


def finish_logs(
    entries: M.StatementEntries,
    summaries: list[M.EntrySummary],
    sources: list[str],
    notes: list[list[str]],
    warnings: list[list[ParseWarning]],
    files: M.Files,
) -> list[ParseResult]:
    """``finish`` of the entries of one or several logs (``files``): one ParseResult per log, each
    with that log's summary, source, notes and warnings."""
    results = []
    parts = zip(assemble_logs(entries, sources, files), files.split(entries.locks), summaries, sources, notes, warnings)
    for assembled, locks, summary, source, notes_f, warnings_f in parts:
        if summary.translated:
            warnings_f = warnings_f + [ParseWarning(
                None,
                f"{summary.translated} messages look translated (lc_messages is not English), e.g. "
                f"{summary.translated_sample!r}: their statements cannot be read; set lc_messages = 'C' on the server",
            )]
        if summary.unusable_durations:
            warnings_f = warnings_f + [ParseWarning(
                None,
                f"{summary.unusable_durations} durations not read (not a number, negative or over {M.MAX_DURATION_MS / 8.64e7:.0f} days): "
                "no statement row from them",
            )]
        statements = assembled.statements
        stamps = M.python_times(pl.concat([statements["start_ts"], statements["end_ts"]]))
        time_range = (stamps.min(), stamps.max()) if stamps.len() else None
        if time_range is None and summary.first_ts is not None:
            time_range = (summary.first_ts, summary.last_ts)
        if statements.is_empty():
            notes_f = notes_f + [_why_no_statements(summary)]
        results.append(ParseResult(
            tables={
                T.STATEMENT: statements,
                T.PLAN_NODE: assembled.plan_nodes,
                # only when the log has lock waits: the tables of every other log stay as they were
                **({T.LOCK_WAIT: _lock_waits(locks, source)} if locks.height else {}),
            },
            records=statements.height,
            warnings=cap_warnings(warnings_f + assembled.warnings),
            notes=notes_f + assembled.notes,
            time_range=time_range,
        ))
    return results


def _lock_waits(locks: pl.DataFrame, source: str) -> pl.DataFrame:
    return T.conform(T.LOCK_WAIT, locks.head(pg_lock_waits.MAX_ROWS).with_columns(pl.lit(source).alias("source")))


def result(records: pl.DataFrame, source: str, notes: list[str], warnings: list[ParseWarning]) -> ParseResult:
    """``finish`` for a record frame read in one piece (csvlog, jsonlog)."""
    entries = M.statement_entries(records)
    return finish(entries, M.summarise_entries(records, entries.make_rows()), source, notes, warnings)


def _why_no_statements(summary: M.EntrySummary) -> str:
    if not summary.entries:
        return "no statements: no log entries"
    what = ", ".join(f"{w!r} x{n}" for w, n in summary.messages.most_common(3)) or "none recognised"
    return (
        f"no statements: none of the {summary.entries} entries is a statement duration, log_statement line, plan or "
        f"failed statement (most common: {what}); log_min_duration_statement/log_statement were probably off"
    )
