"""Capture-controlled text made inert in the Markdown report: no link, no HTML, no broken table.

Member names, SQL, log lines and settings come from the capture, so a member named
``[x](javascript:alert(1)).log`` must show as those characters, not as a link:

>>> inline("[x](javascript:alert(1))|<b>.log")
'\\\\[x\\\\](javascript:alert(1))\\\\|&lt;b&gt;.log'
>>> code("cap`ture.tgz")
'``cap`ture.tgz``'

``inline`` is for table cells and running text (one line, CommonMark/GFM punctuation escaped),
``code`` for a code span, ``fenced`` for the body of a ```` ``` ```` block.
"""

from __future__ import annotations

import re

_LINE_ENDINGS = re.compile(r"\r\n|\r|\n")
# Backslash, code spans, emphasis, links and images, table cells, strike-through.
_PUNCTUATION = re.compile(r"[\\`*\[\]|~]")
# '_' opens or closes emphasis only at a word's edge: innodb_buffer_pool_size stays as it is.
_EDGE_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")
# What makes a line a heading, a list item or a thematic break: '# ', '- ', '+ ', '---', '1. ', '2) '.
_BLOCK_START = re.compile(r"^(?:#{1,6}(?=\s|$)|[+-](?=\s|$|-)|\d{1,9}(?=[.)](?:\s|$)))")
_BACKTICK_RUN = re.compile(r"`+")


def inline(text: str) -> str:
    """One line of plain text in Markdown: the characters show as they are, nothing is markup."""
    text = _LINE_ENDINGS.sub(" ", text).strip()
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCTUATION.sub(lambda match: "\\" + match.group(), text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return _BLOCK_START.sub(lambda match: _escape_block_start(match.group()), text)


def code(text: str, table: bool = False) -> str:
    """A code span: fenced with one backtick more than the longest run inside.

    In a table cell, '|' still ends the cell inside a code span unless escaped (GFM), so
    ``table=True`` escapes it; elsewhere the backslash would show.
    """
    text = _LINE_ENDINGS.sub(" ", text)
    if table:
        text = text.replace("|", "\\|")
    fence = "`" * (max((len(run) for run in _BACKTICK_RUN.findall(text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def fenced(text: str) -> str:
    """The body of a ```` ``` ```` block: only a line of three backticks could end it early."""
    return text.replace("```", "'''")


def _escape_block_start(marker: str) -> str:
    if marker.isdigit():  # '1.' -> '1\.': the escape goes on the dot, after the number
        return marker + "\\"
    return "\\" + marker
