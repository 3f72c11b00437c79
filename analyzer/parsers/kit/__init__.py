"""The parser kit: helpers any parser may import, whatever its format.

- ``times``: the ``--tz`` check, zone-less wall time to UTC and its note, time lines between snapshots.
- ``warning_caps``: ``MAX_WARNINGS`` and the caps (one definition for every parser).
- ``snapshots``: members that repeat a table of cumulative counters (``/proc/interrupts``, numastat...).
- ``lines``: line splitting for parsers that read line by line in Python.
- ``json_text``: JSON loaded with one bound on its nesting.
- ``numeric``: IEEE division of polars columns.

The kit imports nothing from ``dbdiag.parsers`` but ``base`` and itself. A helper shared by the
parsers of one family only lives with that family instead: a module with a leading underscore
(``_sysstat``) or the family's package (``mysql_slowlog/``); ``tests/parsers/test_imports.py``
holds the families and checks that no parser borrows from a sibling outside its own.
"""
