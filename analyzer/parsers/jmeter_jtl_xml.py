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

Safety: read with expat as a stream (no tree is kept); a DOCTYPE is refused (JMeter never writes
one), so neither entity expansion nor external entities can happen. A file cut short (JMeter
still running or killed) keeps the samples before the cut, with a warning.
"""

from __future__ import annotations

import re
from xml.parsers import expat

import polars as pl

from dbdiag import tables as T
from dbdiag.parsers.base import ParseContext, ParseError, ParseResult, ParserSpec, ParseWarning
from dbdiag.parsers.jmeter_jtl import finish_table, load_sample_frame
from dbdiag.parsers.mpstat_text import check_tz
from dbdiag.parsers.tidb_slowlog import cap

SAMPLE_TAGS = frozenset({"httpSample", "sample", "statSample"})
ATTRIBUTES = {  # XML attribute -> JMeter CSV field name
    "ts": "timeStamp", "t": "elapsed", "lb": "label", "rc": "responseCode",
    "rm": "responseMessage", "tn": "threadName", "dt": "dataType", "s": "success", "by": "bytes",
    "sby": "sentBytes", "ng": "grpThreads", "na": "allThreads", "lt": "Latency", "sc": "SampleCount",
    "ec": "ErrorCount", "hn": "Hostname", "it": "IdleTime", "ct": "Connect",
}
_ROOT_RE = re.compile(r"<testResults\b")
_SAMPLE_RE = re.compile(r"<(?:httpSample|sample|statSample)\s[^>]*\b(?:lb|ts|t)=\"")


class _Refused(Exception):
    """Raised from an expat callback to stop at a construct that is never read."""


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
                raise _Refused(f"root element is <{name[:40]}>, not <testResults>")
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

    def doctype(self, *args: object) -> None:
        raise _Refused("the file declares a DOCTYPE, which JMeter never writes (entity expansion refused)")

    def frame(self) -> pl.DataFrame:
        frame = pl.from_dicts(self.samples, schema={attribute: pl.String for attribute in ATTRIBUTES}) if self.samples else None
        if frame is None:
            frame = pl.DataFrame(schema={attribute: pl.String for attribute in ATTRIBUTES})
        return frame.rename(ATTRIBUTES).with_columns(
            line=pl.Series(self.lines, dtype=pl.Int64), nested_samples=pl.Series(self.children, dtype=pl.Int64)
        )


def _read(text: str) -> tuple[_Collector, ParseWarning | None]:
    parser = expat.ParserCreate()
    collector = _Collector(parser)
    parser.buffer_text = True
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    parser.StartElementHandler = collector.start
    parser.EndElementHandler = collector.end
    parser.StartDoctypeDeclHandler = collector.doctype
    parser.EntityDeclHandler = collector.doctype
    try:
        parser.Parse(text, True)
    except _Refused as refused:
        raise ParseError(str(refused)) from None
    except expat.ExpatError as error:
        if collector.root is None:
            raise ParseError(f"not XML: {expat.ErrorString(error.code)} at line {error.lineno}") from None
        codes = expat.errors.codes
        at_end = error.code in (codes[expat.errors.XML_ERROR_NO_ELEMENTS], codes[expat.errors.XML_ERROR_UNCLOSED_TOKEN])
        reason = (
            "file ends before </testResults> (test still running, or file cut short)"
            if at_end and collector.depth > 0
            else f"XML error ({expat.ErrorString(error.code)})"
        )
        return collector, ParseWarning(error.lineno, f"{reason}; {len(collector.lines)} samples before it kept, the rest skipped")
    return collector, None


def parse(text: str, ctx: ParseContext) -> ParseResult:
    tz, tz_warning = check_tz(ctx.tz)
    collector, cut = _read(text.lstrip("\ufeff"))
    warnings = [w for w in (tz_warning, cut) if w]
    raw = collector.frame()
    typed, row_warnings, notes = load_sample_frame(raw, tz, ctx.source)
    if collector.nested:
        notes.append(
            f"{collector.nested} nested sub-samples (redirects, embedded resources, transaction children) not kept as rows: "
            "their time is inside their parent's"
        )
    table, time_range = finish_table(typed)
    return ParseResult(
        tables={T.LOAD_SAMPLE: table},
        records=table.height,
        warnings=cap(warnings + row_warnings),
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
