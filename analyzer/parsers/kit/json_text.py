"""JSON members read with one bound on their nesting, shared by every parser that loads JSON.

Python's decoder recurses once per level and stops at the interpreter's recursion limit with a
``RecursionError`` (``[[[[...`` 100,000 deep); that is a member too deep to read, said in one line,
and the rest of the capture is read as usual::

    >>> loads('{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> loads("[" * 100_000)
    Traceback (most recent call last):
    ...
    dbdiag.parsers.base.ParseError: JSON nested deeper than 1000 levels (Python's limit): not read

``json.JSONDecodeError`` goes through: each parser words it (or repairs a cut file) its own way.
"""

from __future__ import annotations

import json
import sys

from dbdiag.parsers.base import ParseError


def loads(text: str) -> object:
    """``json.loads``; a document nested past the recursion limit -> ``ParseError`` saying so."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ParseError(f"JSON nested deeper than {sys.getrecursionlimit()} levels (Python's limit): not read") from None
