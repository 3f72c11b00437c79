"""Log text and load-test labels made safe to show: the parsed tables with their SQL literals replaced.

Input columns (parsed tables, as the parsers wrote them):

- ``event.message``: the log line, e.g. ``[...] [FATAL] [conn.go:1046] ["panic"] [sql="SELECT ... card = '4111'"]``
  (redacted with the PostgreSQL lexer when ``component`` is ``postgres``, else MySQL's);
- ``load_sample.label``: JMeter labels, e.g. ``SELECT * FROM acct WHERE card = '4111'`` (a JDBC sampler)
  next to ``Login``; only labels that read as SQL change;
- ``load_statement_latency.statement``: pgbench ``-r`` statements (``\\set aid random(1, 100000)`` stays).

Output: the same tables, same schema and row order, with those columns redacted
(``redact_text``), unless ``show_literals``. Every later stage (the timeline, rules' evidence, the
report) reads these, so a log line's literals reach no output; the raw tables stay in
``Analysis.tables``.
"""

from __future__ import annotations

import polars as pl

from dbdiag import redact_text
from dbdiag import tables as t


def public_text_tables(tables: dict[str, pl.DataFrame], show_literals: bool) -> dict[str, pl.DataFrame]:
    """The tables above that are present, redacted; empty when ``show_literals``."""
    if show_literals:
        return {}
    public: dict[str, pl.DataFrame] = {}
    events = tables.get(t.EVENT)
    if events is not None and events.height:
        dialect = events.select(
            pl.when(pl.col("component") == "postgres").then(pl.lit("postgresql")).otherwise(pl.lit("mysql")).alias("dialect")
        )["dialect"]
        public[t.EVENT] = events.with_columns(redact_text.redact_log_series(events["message"], dialect).alias("message"))
    samples = tables.get(t.LOAD_SAMPLE)
    if samples is not None and samples.height:
        public[t.LOAD_SAMPLE] = samples.with_columns(redact_text.redact_label_series(samples["label"]).alias("label"))
    latencies = tables.get(t.LOAD_STATEMENT_LATENCY)
    if latencies is not None and latencies.height:
        public[t.LOAD_STATEMENT_LATENCY] = latencies.with_columns(
            redact_text.redact_label_series(latencies["statement"]).alias("statement")
        )
    return public
