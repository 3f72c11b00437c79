"""MySQL / MariaDB / Percona Server slow query log (5.0 to 8.x, MariaDB 5.5 to 11.x).

Sample input (MariaDB 10.11, ``log_slow_verbosity=query_plan,explain``)::

    mariadbd, Version: 10.11.19-MariaDB-0+deb12u1-log (Debian 12). started with:
    Tcp port: 0  Unix socket: /tmp/rwc.zvzY/mysql.sock
    Time\t\t    Id Command\tArgument
    # Time: 261129 19:12:14
    # User@Host: root[root] @ localhost []
    # Thread_id: 8  Schema: sbtest  QC_hit: No
    # Query_time: 0.000290  Lock_time: 0.000093  Rows_sent: 1  Rows_examined: 1
    # Rows_affected: 0  Bytes_sent: 0
    #
    # explain: id\tselect_type\ttable\ttype\tpossible_keys\tkey\tkey_len\tref\trows\tr_rows\tfiltered\tr_filtered\tExtra
    # explain: 1\tSIMPLE\tsbtest3\tconst\tPRIMARY\tPRIMARY\t4\tconst\t1\tNULL\t100.00\tNULL\t
    #
    SET timestamp=1795979534;
    SELECT c FROM sbtest3 WHERE id=9148;

Also read: MySQL 5.0-5.6 (``# Time: 081127  8:51:20``, ``Id:`` on User@Host), MySQL 5.7/8.0 ISO times
(``2016-07-20T18:13:25.698433Z``, ``+08:00``) and ``log_slow_extra`` fields on the Query_time line
(``Thread_id Errno ... Start: End:``), Percona lines (``# Schema: db  Last_errno: 0  Killed: 0``,
``InnoDB_trx_id``, ``QC_Hit/Full_scan/Filesort`` flags, ``Log_slow_rate_type/limit``), ``# Client:``,
``# administrator command: Quit;``, server start header blocks anywhere, CRLF line ends.

Output tables (see ``dbdiag.tables``):

- ``statement``: one row per log entry. engine (``mariadb``/``percona``/``mysql`` for the whole file,
  from the server header and the fields present), start_ts, end_ts, query_time_s, lock_time_s,
  rows_sent/examined/affected, user, client_host, db, conn_id, txn_id (InnoDB_trx_id), full_scan,
  full_join, tmp_table, tmp_table_on_disk, filesort, plan, plan_signature, index_names, success,
  error_code, sql, source, line (1-based line of the entry's first header line). full_scan is also
  set by an explain row of access type ALL; with MariaDB's query_plan verbosity the Full_scan and
  Filesort lines are written only when a flag is Yes, so entries without them get No.
- ``host_fact``: ``db_version`` = engine and version of the last start banner (``mariadb
  10.11.19-MariaDB-0+deb12u1-log``), only when the log has a banner.
- ``plan_node``: one row per MariaDB ``# explain:`` data row: node_type = access type (``ALL``,
  ``ref``...), relation = table, index_name = key, est_rows = rows, actual_rows = r_rows,
  filter = Extra; node_id in row order, depth 0 (tabular EXPLAIN is a flat list in join order).

What an entry is, as pt-query-digest reads it: everything from a header (``# Time:``, or
``# User@Host:`` not right after a ``# Time:`` line, or a ``# Query_time:``/``# Thread_id:``/
``# Schema:``/``# Client:`` line that does not follow other header lines) to the next one. ``use db;``
before the statement and ``SET timestamp=N;`` are metadata, not statements; all the text after them
(several statements, blank lines, ``#`` comment lines) is the statement, its last ``;`` removed.
``# administrator command: Quit;`` gives ``administrator command: Quit``. A ``use x;`` after
``SET timestamp`` is the statement itself (the server writes its own ``use`` first). Server start
banners (``mysqld, Version: ... started with:`` + ``Tcp port`` + ``Time Id Command``) are skipped
wherever they are. Lines before the first header (a file cut at its start) make one statement
without timings; a last entry cut after its header is dropped; both with a warning.

Times. ``# Time:`` is when the entry was written (the end), except on MariaDB, which stamps it and
``SET timestamp`` with the statement's start (measured on 10.11.19; any log shows it when an entry's
``# Time`` is earlier than the one above it by no more than its own Query_time). Without a zone it is
server local time, read in ``ctx.tz`` (said in a note); ``2016-07-20T18:13:25.698433Z`` and ``+08:00``
are exact. ``SET timestamp`` is whole UTC seconds: the statement start for MySQL 8.0+ ("the slow log
always logs the query start time") and MariaDB, the write time, like ``# Time``, for MySQL <= 5.7 and
Percona <= 5.7; the banner's version decides, else statements of 2 s or more show it.
``log_slow_extra`` ``Start:``/``End:`` are exact and win.
end_ts = End, else the entry's ``# Time``, else SET timestamp (plus Query_time if it is the start),
else the last ``# Time`` above (the server writes one only when the second changed, so entries
without one take the previous entry's, as pt-query-digest does); start_ts = Start, else SET
timestamp when it is the start (unless ``# Time`` has microseconds), else end_ts - Query_time.
When zone-less ``# Time`` lines disagree with SET timestamp by a whole zone offset, ``--tz`` is not
the server's zone: the ``# Time`` lines are moved by that offset, with a warning. The database
carries over the same way: the server writes ``use`` only when it changed.

Speed (hundreds of MB): the log is cut into entry-aligned pieces read on two threads. The C kernel
``dbdiag._line_scan`` (analyzer/native/line_scan.c) reads a piece without the GIL: its lines as Arrow
string views over the log's own bytes (``parse_bytes`` takes the member's bytes: no decoded copy), their
kinds, the entries, numbers for the header and explain texts that repeat, the values of plain Query_time
lines, the statements. Without it (a package installed with no C compiler) polars' CSV reader, numpy and
hashes do the same: slower, same tables. The distinct header and explain texts of the whole log are then
read once, what an entry shows of its explain lines once per distinct sequence of them, and each column
of the log's table of entries is made once, from the pieces' numbers (the plan nodes on the other thread
meanwhile). Query_time lines the kernel does not read are split at positions learnt from the first one.
No Python loop runs per line or per entry.

Many small logs (``parse_batch``): they are read as one log, each after a boundary line, and every
choice made above for a whole file (server and version, what SET timestamp means, zone agreement,
the # Time and database carried over, head fragments and cut tails, warnings and their caps, notes)
is made per member from the same columns: 5,000 logs of three entries cost about one parse, not
5,000. Each member keeps its own line numbers, inventory line and errors.
"""

from __future__ import annotations

from dbdiag.parsers.base import ParserSpec
from dbdiag.parsers.mysql_slowlog.batch import parse, parse_batch, parse_bytes, parse_bytes_owned
from dbdiag.parsers.mysql_slowlog.detect import detect

SPEC = ParserSpec(
    kind="mysql-slowlog",
    description="MySQL / MariaDB / Percona Server slow query log (statements, MariaDB explain plans)",
    detect=detect,
    parse=parse,
    parse_bytes=parse_bytes,
    parse_bytes_owned=parse_bytes_owned,
    parse_batch=parse_batch,
)
