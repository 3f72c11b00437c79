"""The parser kit: helpers any parser may import, whatever its format.

- ``times``: the ``--tz`` check, zone-less wall time to UTC and its note, time lines between snapshots.
- ``zones``: times written with a zone abbreviation or offset (``CEST``, ``+05:30``) to UTC, and the
  notes on how each zone was read (PostgreSQL, MySQL error, TiDB and kernel logs).
- ``warning_caps``: ``MAX_WARNINGS`` and the caps (one definition for every parser).
- ``snapshots``: members that repeat a table of cumulative counters (``/proc/interrupts``, numastat...).
- ``lines``: line splitting (line by line in Python, or a frame of lines for the vectorised readers),
  and ``is_script`` for detectors.
- ``json_text``: JSON loaded with one bound on its nesting.
- ``numeric``: IEEE division of polars columns.
- ``psql_tables``: result tables as psql prints them (aligned, ``-A``, ``--csv``): PostgreSQL views saved by hand.

The kit imports nothing from ``dbdiag.parsers`` but ``base`` and itself. A helper shared by the
parsers of one family only lives with that family instead: a module with a leading underscore
(``_sysstat``) or the family's package (``mysql_slowlog/``); ``tests/parsers/test_imports.py``
holds the families and checks that no parser borrows from a sibling outside its own.
"""
