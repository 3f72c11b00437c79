"""Capture-controlled text made inert in the Markdown report: no link, no HTML, no broken table.

Member names, SQL, log lines and settings come from the capture, so a member named
``[x](javascript:alert(1)).log`` must show as those characters, not as a link:

>>> inline("[x](javascript:alert(1))|<b>.log")
'\\\\[x\\\\](javascript:alert(1))\\\\|&lt;b&gt;.log'
>>> code("cap`ture.tgz")
'``cap`ture.tgz``'

GitHub also makes links of bare text: ``http://``, ``https://``, ``ftp://``, ``www.``, e-mail
addresses, ``mailto:`` and ``xmpp:`` (GFM "extended autolinks"), with no markup to escape. Such a
run of text becomes a code span, where no renderer makes links; it reads the same:

>>> inline("fetched www.evil.example/x | by bob@evil.example")
'fetched `www.evil.example/x` \\\\| by `bob@evil.example`'

``inline`` is for table cells and running text (one line, CommonMark/GFM punctuation escaped),
``code`` for a code span, ``fenced`` for the body of a ```` ``` ```` block. The template's own
text is not passed through them, so a link written there stays a link.
"""

from __future__ import annotations

from dbdiag.patterns import lazy_compile


_LINE_ENDINGS = lazy_compile(r"\r\n|\r|\n")
# Backslash, code spans, emphasis, links and images, table cells, strike-through.
_PUNCTUATION = lazy_compile(r"[\\`*\[\]|~]")
# '_' opens or closes emphasis only at a word's edge: innodb_buffer_pool_size stays as it is.
_EDGE_UNDERSCORE = lazy_compile(r"(?<![^\W_])_|_(?![^\W_])")
# What makes a line a heading, a list item or a thematic break: '# ', '- ', '+ ', '---', '1. ', '2) '.
_BLOCK_START = lazy_compile(r"^(?:#{1,6}(?=\s|$)|[+-](?=\s|$|-)|\d{1,9}(?=[.)](?:\s|$)))")
_BACKTICK_RUN = lazy_compile(r"`+")
# Where GitHub starts an autolink (a scheme after a non-letter, 'www.', the local part of an
# e-mail address), to the next space, cell break or backtick. Backslash escapes are no safe
# answer: whether "http\\://" still links depends on how a renderer joins text nodes.
_AUTOLINK = lazy_compile(
    r"(?i)(?:(?<![a-z])(?:https?|ftp|mailto|xmpp):|(?<![a-z0-9])www\.|[\w.+-]+@[\w-]+\.)[^\s|`]*"
)


def inline(text: str) -> str:
    """One line of plain text in Markdown: the characters show as they are, nothing is markup."""
    text = _LINE_ENDINGS.sub(" ", text).strip()
    pieces = []
    plain_from = 0
    for link in _AUTOLINK.finditer(text):
        pieces.append(_plain(text[plain_from : link.start()], line_start=plain_from == 0))
        pieces.append(code(link.group()))
        plain_from = link.end()
    pieces.append(_plain(text[plain_from:], line_start=plain_from == 0))
    return "".join(pieces)


def _plain(text: str, line_start: bool) -> str:
    """Text with no autolink in it, escaped; ``line_start``: it opens the line (a block marker there)."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _PUNCTUATION.sub(lambda match: "\\" + match.group(), text)
    text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    if not line_start:
        return text
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
