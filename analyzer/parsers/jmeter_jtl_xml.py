"""JMeter JTL results in XML (``jmeter.save.saveservice.output_format=xml``).

Sample input (one element per sample, attributes as ``SampleResultConverter`` writes them;
sub-results are nested elements, assertion results and response data are child elements)::

    <?xml version="1.0" encoding="UTF-8"?>
    <testResults version="1.2">
    <httpSample t="351" it="0" lt="120" ct="30" ts="1551783627191" s="true" lb="Home" rc="200" rm="OK" tn="Users 1-1" dt="text" by="1830" sby="120" ng="1" na="1">
      <assertionResult>
        <name>Response Assertion</name>
        <failure>false</failure>
        <error>false</error>
      </assertionResult>
      <httpSample t="200" it="0" lt="190" ct="30" ts="1551783627191" s="true" lb="Home-0" rc="302" rm="Found" .../>
      <java.net.URL>http://shop.example/</java.net.URL>
    </httpSample>
    <sample t="412" it="12" lt="0" ct="0" ts="1551783627600" s="true" lb="Checkout" rc="200" rm="Number of samples in transaction : 2, number of failing samples : 0" tn="Users 1-1" dt="" by="2100" sby="300" ng="1" na="1"/>
    </testResults>

Attributes: t elapsed, it idle time, lt latency, ct connect time, ts timeStamp (epoch ms, the
sample start), s success, lb label, rc response code (``rs`` before JMeter 2.1), rm response
message, tn thread name, dt data type, by/sby bytes received/sent, ng/na group/all active
threads, hn host name, sc/ec sample/error counts.

Output ``load_sample``, one row per TOP-LEVEL ``httpSample``/``sample``/``statSample`` (what a
user waited for); nested sub-samples (redirects, embedded resources, children of a transaction
controller that generates a parent sample) are only counted in a note: their time is inside their
parent's ``t``. ``line`` is the line of the sample's start tag. Columns as in ``jmeter_jtl_csv``;
``is_transaction`` is set on a transaction controller's sample only when its children are
top-level rows too (no parent sample), not when they are nested in it.

Reading. JMeter (XStream's pretty printer) writes each top-level sample's start tag on a line of
its own, children indented below, attribute values escaped. ``read_lines`` reads that layout with
no Python code per element: expat runs over the text with no element handler (C speed) only to
learn whether and where the XML breaks; on the text before that point polars counts the tags of
every line (depth is their cumulative sum), takes the lines holding one sample start tag at depth 1
and pulls their attributes out with one regular expression per attribute list (a file has one or
two), then undoes the escapes. Any other layout (several samples on a line, minified XML, a tag
split over lines, comments, CDATA, processing instructions, quotes other than ``"``...) is read by
``read_expat``, expat with a Python callback per element. Both give the same table.

Safety: a DOCTYPE is refused as soon as expat meets it, before anything declared in it is read
(JMeter never writes one), so neither entity expansion nor external entities can happen. A file
cut short (JMeter still running or killed) keeps the samples before the cut, with a warning.
"""

from __future__ import annotations

import io
from typing import NamedTuple
from xml.parsers import expat

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.jmeter_jtl import finish_table, load_sample_frame
from dbdiag.parsers.kit.times import check_tz
from dbdiag.parsers.kit.warning_caps import cap_warnings
from dbdiag.patterns import lazy_compile

SAMPLE_TAGS = frozenset({"httpSample", "sample", "statSample"})
ATTRIBUTES = {  # XML attribute -> JMeter CSV field name
    "ts": "timeStamp", "t": "elapsed", "lb": "label", "rc": "responseCode",
    "rm": "responseMessage", "tn": "threadName", "dt": "dataType", "s": "success", "by": "bytes",
    "sby": "sentBytes", "ng": "grpThreads", "na": "allThreads", "lt": "Latency", "sc": "SampleCount",
    "ec": "ErrorCount", "hn": "Hostname", "it": "IdleTime", "ct": "Connect",
}
_ROOT_RE = lazy_compile(r"<testResults\b")
_SAMPLE_RE = lazy_compile(r"<(?:httpSample|sample|statSample)\s[^>]*\b(?:lb|ts|t)=\"")


class Samples(NamedTuple):
    """What a reader gives ``parse``: one row per top-level sample (the ATTRIBUTES as JMeter's CSV
    field names, all strings, then ``line`` and ``nested_samples``), the count of nested samples,
    and the warning for a file that breaks off."""

    frame: pl.DataFrame
    nested: int
    cut: ParseWarning | None


def _empty_frame() -> pl.DataFrame:
    return pl.DataFrame(schema={**{name: pl.String for name in ATTRIBUTES.values()}, "line": pl.Int64, "nested_samples": pl.Int64})


def _wrong_root(name: str) -> str:
    return f"root element is <{name[:40]}>, not <testResults>"


def _not_xml(error: expat.ExpatError) -> ParseError:
    return ParseError(f"not XML: {expat.ErrorString(error.code)} at line {error.lineno}")


def _cut_warning(error: expat.ExpatError, open_elements: int, kept: int) -> ParseWarning:
    codes = expat.errors.codes
    at_end = error.code in (codes[expat.errors.XML_ERROR_NO_ELEMENTS], codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN])
    reason = (
        "file ends before </testResults> (test still running, or file cut short)"
        if at_end and open_elements > 0
        else f"XML error ({expat.ErrorString(error.code)})"
    )
    return ParseWarning(error.lineno, f"{reason}; {kept} samples before it kept, the rest skipped")


# --- any shape: expat with a callback per element ---------------------------------------------


class _Refused(Exception):
    """Raised from an expat callback to stop at a construct that is never read."""


class _Unsupported(Exception):
    """Raised from an expat callback at a construct that only ``read_expat`` reads."""


def _refuse_doctype(*args: object) -> None:
    raise _Refused("the file declares a DOCTYPE, which JMeter never writes (entity expansion refused)")


def _unsupported(*args: object) -> None:
    raise _Unsupported()


class _Collector:
    """expat callbacks: attributes of top-level samples, counts of nested ones."""

    def __init__(self, parser: expat.XMLParserType) -> None:
        self.parser = parser
        self.depth = 0
        self.root: str | None = None
        self.samples: list[dict[str, str]] = []
        self.lines: list[int] = []
        self.nested = 0
        self.children: list[int] = []  # nested samples under each top-level sample

    def start(self, name: str, attributes: dict[str, str]) -> None:
        depth = self.depth
        self.depth = depth + 1
        if depth == 0:
            self.root = name
            if name != "testResults":
                raise _Refused(_wrong_root(name))
        elif name in SAMPLE_TAGS:
            if depth > 1:
                self.nested += 1
                if self.children:
                    self.children[-1] += 1
                return
            self.lines.append(self.parser.CurrentLineNumber)
            self.children.append(0)
            if "rs" in attributes and "rc" not in attributes:  # JMeter 2.0's name for the response code
                attributes["rc"] = attributes["rs"]
            self.samples.append(attributes)

    def end(self, name: str) -> None:
        self.depth -= 1

    def frame(self) -> pl.DataFrame:
        if not self.samples:
            return _empty_frame()
        frame = pl.from_dicts(self.samples, schema={attribute: pl.String for attribute in ATTRIBUTES})
        return frame.rename(ATTRIBUTES).with_columns(
            line=pl.Series(self.lines, dtype=pl.Int64), nested_samples=pl.Series(self.children, dtype=pl.Int64)
        )


def read_expat(text: str) -> Samples:
    """The samples of ``text`` (a JTL without its byte-order mark), whatever its layout."""
    parser = expat.ParserCreate()
    collector = _Collector(parser)
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_doctype
    try:
        parser.Parse(text, True)
    except _Refused as refused:
        raise ParseError(str(refused)) from None
    except expat.ExpatError as error:
        if collector.root is None:
            raise _not_xml(error) from None
        return Samples(collector.frame(), collector.nested, _cut_warning(error, collector.depth, len(collector.lines)))
    return Samples(collector.frame(), collector.nested, None)


# --- JMeter's own layout: lines counted by polars -----------------------------------------------

CHUNK_CHARS = 1 << 24  # text encoded and split into lines this much at a time
_SCREEN_CHARS = 1 << 20  # the head looked at before anything else
_MAX_LAYOUTS = 16  # distinct attribute lists of top-level samples; past that, a file is not JMeter's
_SAMPLE_START = r"<(?:httpSample|sample|statSample)[\t\n\r />]"
_NAME = r"[A-Za-z_][A-Za-z0-9_.:-]*"
_CANONICAL_TAG = lazy_compile(rf'<(?:httpSample|sample|statSample)((?: {_NAME}="[^"]*")*)[\t ]*/?>')
_ATTRIBUTE = lazy_compile(rf' ({_NAME})="[^"]*"')
_COMPLETE_TAG = lazy_compile(  # a start or end tag as XML allows it (the last one before a break is checked)
    r"<(?:/[^ \t\r\n<>/=\"']+[ \t\r\n]*"
    r"|[^ \t\r\n<>/=\"'!?]+(?:[ \t\r\n]+[^ \t\r\n<>/=\"']+[ \t\r\n]*=[ \t\r\n]*(?:\"[^\"<]*\"|'[^'<]*'))*[ \t\r\n]*/?)>"
)
_NAMED_REFS = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&apos;": "'"}
_NUMERIC_REF = r"&#(?:[0-9]+|x[0-9a-fA-F]+);"


def _chunk_bounds(text: str, end: int, size: int) -> list[tuple[int, int]]:
    """(start, stop) offsets cutting ``text[:end]`` into pieces of about ``size`` that end after a line end."""
    bounds, start = [], 0
    while start < end:
        stop = min(start + size, end)
        if stop < end:
            newline = text.find("\n", stop, end)
            stop = end if newline < 0 else newline + 1
        bounds.append((start, stop))
        start = stop
    return bounds


class _Checked(NamedTuple):
    error: expat.ExpatError | None
    end: int  # offset in the text where the error is (its length when there is none)


def _well_formed_until(text: str, bounds: list[tuple[int, int]]) -> _Checked:
    """Where expat finds ``text`` broken, running with no Python callback but one for the root.
    Raises _Unsupported at a comment, CDATA section or processing instruction: a "<" in them
    starts no tag, which the line counts assume."""
    parser = expat.ParserCreate("utf-8")  # like expat given a str: the declared encoding is not used
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_doctype
    parser.CommentHandler = _unsupported
    parser.StartCdataSectionHandler = _unsupported
    parser.ProcessingInstructionHandler = _unsupported
    roots: list[str] = []

    def root(name: str, attributes: dict[str, str]) -> None:
        roots.append(name)
        parser.StartElementHandler = None  # the rest of the file runs in C
        if name != "testResults":
            raise _Refused(_wrong_root(name))

    parser.StartElementHandler = root
    starts: list[tuple[int, int]] = []  # (byte, character) offset of each piece
    done = 0
    try:
        for start, stop in bounds:
            data = text[start:stop].encode()
            starts.append((done, start))
            done += len(data)
            parser.Parse(data, False)
        parser.Parse(b"", True)
    except _Refused as refused:
        raise ParseError(str(refused)) from None
    except expat.ExpatError as error:
        if not roots:
            raise _not_xml(error) from None
        return _Checked(error, _character_offset(text, bounds, starts, parser.ErrorByteIndex))
    return _Checked(None, len(text))


def _character_offset(text: str, bounds: list[tuple[int, int]], starts: list[tuple[int, int]], byte: int) -> int:
    """The offset in ``text`` of ``byte`` (an offset in its UTF-8 form, -1 for the start)."""
    if byte < 0:
        return 0
    if text.isascii():
        return min(byte, len(text))
    index = max(i for i, (piece_byte, _) in enumerate(starts) if piece_byte <= byte)
    piece_byte, start = starts[index]
    head = text[start : bounds[index][1]].encode()[: byte - piece_byte]
    return start + len(head.decode("utf-8", "ignore"))


def _without_unfinished_tag(text: str, end: int) -> int | None:
    """``end``, or where the last tag starts when the break is inside it (expat did not report it);
    None when that cannot be told without expat's own reading."""
    last = text.rfind("<", 0, end)
    if last < 0 or _COMPLETE_TAG.match(text, last, end):
        return end
    return last if text.find(">", last, end) < 0 else None


def _lines(data: bytes) -> pl.Series | None:
    """The lines of ``data``; None if it holds every control character (XML holds none but tab, CR, LF)."""
    separator = next((chr(c) for c in (*range(1, 9), 11, 12, *range(14, 32)) if data.find(bytes([c])) < 0), None)
    if separator is None:
        return None
    frame = pl.read_csv(
        io.BytesIO(data), has_header=False, separator=separator, quote_char=None, new_columns=["text"], schema={"text": pl.String}
    )
    return frame.get_column("text").fill_null("")


class _Piece(NamedTuple):
    marks: pl.DataFrame  # line, top, nested: the lines holding sample start tags
    values: pl.DataFrame  # line and the attributes (``@name``) of each top-level sample
    escaped: bool  # whether a value may hold a reference or a tab
    depth: int  # elements open after the piece
    lines: int


def _read_piece(data: bytes, first_line: int, depth: int, declaration: bool) -> _Piece | None:
    """The sample lines of ``data`` and the attributes of the top-level ones; None when a line is
    not in the shape this reader handles. ``data`` is well-formed XML (expat read it) with no
    comment, CDATA or processing instruction, so every "<" starts a tag, and its last tag is whole.

    Each line must hold as many ">" as "<". Then no ">" stands in text or in an attribute value
    (summed over the lines, the ">" are as many as the tags), and no tag spans lines (the line where
    the first such tag starts would hold one "<" more). So "</" counts end tags, "/>" empty tags,
    and the depth before a line is the sum of what the lines above open and close."""
    read = _lines(data)
    if read is None:
        return None
    lines = read.to_frame("text")
    text = pl.col("text")
    stats = lines.select(
        tags=text.str.count_matches("<", literal=True).cast(pl.Int64),
        closers=text.str.count_matches(">", literal=True).cast(pl.Int64),
        ends=text.str.count_matches("</", literal=True).cast(pl.Int64),
        empty=text.str.count_matches("/>", literal=True).cast(pl.Int64),
        samples=text.str.count_matches(_SAMPLE_START).cast(pl.Int64),
    )
    if stats.select((pl.col("tags") != pl.col("closers")).any()).item():
        return None
    if declaration:  # "<?xml ...?>" opens nothing
        stats = stats.with_columns(tags=pl.col("tags") - (pl.int_range(pl.len()) == 0).cast(pl.Int64))
    tags, ends, samples = pl.col("tags"), pl.col("ends"), pl.col("samples")
    net = tags - 2 * ends - pl.col("empty")
    stats = stats.with_columns(line=pl.int_range(pl.len(), dtype=pl.Int64) + first_line, before=depth + net.cum_sum() - net)
    before = pl.col("before")
    # a sample tag that shares its line with other tags must be provably nested (depth >= 2 before any tag
    # of the line); one alone on its line is top-level at depth 1
    unsure = (samples > 0) & (((tags > 1) & (before - ends <= 1)) | ((tags == 1) & (before < 1)))
    if stats.select(unsure.any()).item():
        return None
    top = (samples == 1) & (tags == 1) & (before == 1)
    marks = stats.filter(samples > 0).select("line", top=top, nested=samples - top.cast(pl.Int64))
    tops = pl.concat([stats.select("line", top=top), lines], how="horizontal").filter("top").select("line", "text")
    values = _attributes(tops)
    if values is None:
        return None
    escaped = bool(tops.select(pl.col("text").str.contains(r"[&\t]").any()).item())
    return _Piece(marks, values, escaped, depth + int(stats.select(net.sum()).item() or 0), lines.height)


def _layout_regex(names: list[str]) -> str:
    attributes = "".join(f' {pl.escape_regex(name)}="([^"]*)"' for name in names)
    return rf"^[\t ]*(<(?:httpSample|sample|statSample){attributes}[\t ]*/?>)"


def _attributes(tops: pl.DataFrame) -> pl.DataFrame | None:
    """``line`` and one column per attribute (``@name``, raw text) of each start tag in ``tops``;
    None when a tag is not written as JMeter writes them (``name="value"`` after one space)."""
    parts, rest = [], tops
    for _ in range(_MAX_LAYOUTS):
        if rest.is_empty():
            break
        first = rest.item(0, "text")
        tag = _CANONICAL_TAG.match(first, len(first) - len(first.lstrip(" \t")))
        if tag is None:
            return None
        names = _ATTRIBUTE.findall(tag.group(1))
        if len(set(names)) < len(names):  # not well-formed (the head is read before expat has seen it)
            return None
        groups = rest.select("line", found=pl.col("text").str.extract_groups(_layout_regex(names))).unnest("found")
        matched = groups.get_column("1").is_not_null()
        if not matched.any():
            return None
        parts.append(groups.filter(matched).select("line", *(pl.col(str(i + 2)).alias(f"@{n}") for i, n in enumerate(names))))
        rest = rest.filter(~matched)
    if not rest.is_empty():
        return None
    if len(parts) == 1:
        return parts[0]
    return pl.concat(parts, how="diagonal").sort("line") if parts else pl.DataFrame(schema={"line": pl.Int64})


def _unescape(values: pl.DataFrame) -> pl.DataFrame:
    """Attribute values as XML reads them: a tab becomes a space, entity and character references their character."""
    strings = [c for c, dtype in values.schema.items() if dtype == pl.String]
    found = values.select(
        (pl.col(c).str.contains("&", literal=True) | pl.col(c).str.contains("\t", literal=True)).any() for c in strings
    ).row(0) if strings else ()
    escaped = [c for c, hit in zip(strings, found) if hit]
    if not escaped:
        return values
    refs: set[str] = set()
    for column in escaped:
        refs.update(values.get_column(column).str.extract_all(_NUMERIC_REF).explode().drop_nulls().unique().to_list())
    numeric = sorted(refs)
    patterns = [*_NAMED_REFS, *numeric]
    characters = [*_NAMED_REFS.values(), *(chr(int(r[3:-1], 16) if r[2] == "x" else int(r[2:-1])) for r in numeric)]
    return values.with_columns(
        pl.col(c).str.replace_all("\t", " ", literal=True).str.replace_many(patterns, characters) for c in escaped
    )


def _sample_frame(values: pl.DataFrame, marks: pl.DataFrame) -> pl.DataFrame:
    """``values`` (top-level samples) as ``read_expat`` gives them, with the nested samples that follow each."""
    present = set(values.columns)
    column = {a: pl.col(f"@{a}") if f"@{a}" in present else pl.lit(None, pl.String) for a in (*ATTRIBUTES, "rs")}
    column["rc"] = pl.coalesce(column["rc"], column["rs"])  # "rs": JMeter 2.0's name for the response code
    # nested samples before each top-level one, then the difference to the next one
    before = (pl.col("nested").cum_sum() - pl.col("nested")).filter(pl.col("top"))
    children = marks.select(nested_samples=(before.shift(-1, fill_value=pl.col("nested").sum()) - before).cast(pl.Int64))
    return pl.concat(
        [values.select(*(column[a].alias(name) for a, name in ATTRIBUTES.items()), pl.col("line").cast(pl.Int64)), children],
        how="horizontal",
    )


def _read_pieces(text: str) -> tuple[list[_Piece], expat.ExpatError | None] | None:
    """The pieces of ``text`` before the point where it breaks, and the error there; None when a
    piece is not laid out as JMeter writes. Raises UnicodeEncodeError on a lone surrogate."""
    declaration = text.startswith("<?")
    # the whole lines of the head, before expat has seen them: when they are not laid out as JMeter
    # does, neither is the file (or it breaks early, and read_expat stops there soon)
    screen = text.rfind("\n", 0, _SCREEN_CHARS) + 1
    if (screen == 0 and len(text) > _SCREEN_CHARS) or _read_piece(text[:screen].encode(), 1, 0, declaration) is None:
        return None
    bounds = _chunk_bounds(text, len(text), CHUNK_CHARS)
    try:
        error, end = _well_formed_until(text, bounds)
    except _Unsupported:
        return None
    end = _without_unfinished_tag(text, end)
    if end is None:
        return None
    pieces, line, depth = [], 1, 0
    for start, stop in bounds:
        if start >= end:
            break
        piece = _read_piece(text[start : min(stop, end)].encode(), line, depth, declaration and start == 0)
        if piece is None:
            return None
        pieces.append(piece)
        line, depth = line + piece.lines, piece.depth
    return (pieces, error) if pieces else None


def read_lines(text: str) -> Samples | None:
    """``read_expat(text)`` without a Python call per element, for files laid out as JMeter writes
    them; None for any other layout.

    >>> text = '<testResults>\\n<sample t="5" lb="a &amp; b"/>\\n</testResults>\\n'
    >>> read_lines(text).frame.select("label", "elapsed", "line").rows()
    [('a & b', '5', 2)]
    >>> read_lines(text.replace("\\n", "")) is None  # minified: left to read_expat
    True
    """
    if "<!" in text[: max(text.find("<testResults"), 0)]:
        return None  # a DOCTYPE (read_expat refuses it) or a comment before the root
    if text.startswith("\ufeff") or ("\r" in text and text.count("\r") != text.count("\r\n")):
        return None  # expat skips a byte-order mark; a lone CR ends a line for XML, not for polars
    try:
        read = _read_pieces(text)
    except UnicodeEncodeError:  # lone surrogates: read_expat fails on them as it always did
        return None
    if read is None:
        return None
    pieces, error = read
    values = pl.concat([p.values for p in pieces], how="diagonal_relaxed")
    marks = pl.concat([p.marks for p in pieces])
    if any(p.escaped for p in pieces):
        values = _unescape(values)
    frame = _sample_frame(values, marks) if values.height else _empty_frame()
    nested = int(marks.get_column("nested").sum())
    return Samples(frame, nested, _cut_warning(error, pieces[-1].depth, frame.height) if error else None)


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    text = text.lstrip("\ufeff")
    samples = read_lines(text) or read_expat(text)
    warnings = [w for w in (tz_warning, samples.cut) if w]
    typed, row_warnings, notes = load_sample_frame(samples.frame, tz, ctx.source)
    if samples.nested:
        notes.append(
            f"{samples.nested} nested sub-samples (redirects, embedded resources, transaction children) not kept as rows: "
            "their time is inside their parent's"
        )
    table, time_range = finish_table(typed)
    return ParseResult(
        tables={T.LOAD_SAMPLE: table},
        records=table.height,
        warnings=cap_warnings(warnings + row_warnings),
        notes=notes,
        time_range=time_range,
    )


def detect(head: str, name: str) -> float:
    start = head.lstrip("\ufeff \t\r\n")[:4096]
    if not start.startswith("<") or not _ROOT_RE.search(start):
        return 0.0
    return 0.95 if _SAMPLE_RE.search(head) or 'version="1.' in start else 0.8


SPEC = ParserSpec(
    kind="jmeter-jtl-xml",
    description="JMeter JTL results as XML (testResults with httpSample/sample elements): one row per top-level sample",
    detect=detect,
    parse=parse,
)
