"""Regular expressions compiled on first use, not at import: a run pays only for the patterns of the
formats its capture holds (compiling every module's patterns at import took a seventh of start-up).

>>> WORD = lazy_compile(r"(?P<word>\\w+)")
>>> WORD.pattern, WORD.compiled is None            # nothing compiled yet
('(?P<word>\\\\w+)', True)
>>> WORD.match("select 1").group("word"), WORD.compiled is not None
('select', True)
"""

from __future__ import annotations

import re
from typing import Any

# Bound to the instance on first use, so later calls cost what a compiled pattern's do.
_METHODS = ("match", "search", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")


class LazyPattern:
    """``re.compile(pattern, flags)`` done when a method or attribute other than ``pattern`` and
    ``flags`` is first read. Pass ``.compiled_pattern()`` where a real ``re.Pattern`` is needed."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self.compiled: re.Pattern[str] | None = None

    def compiled_pattern(self) -> re.Pattern[str]:
        if self.compiled is None:
            compiled = re.compile(self.pattern, self.flags)
            for name in _METHODS:
                setattr(self, name, getattr(compiled, name))
            self.compiled = compiled
        return self.compiled

    def __getattr__(self, name: str) -> Any:  # only for names not set yet: the methods before first use, groups, groupindex
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.compiled_pattern(), name)

    def __repr__(self) -> str:
        return f"lazy_compile({self.pattern!r})"


def lazy_compile(pattern: str, flags: int = 0) -> LazyPattern:
    """A pattern compiled on first use; reads like ``re.compile``."""
    return LazyPattern(pattern, flags)
