"""JMeter JTL (CSV and XML) parsers: goldens, numbers checked by hand against the files, detection, hostile input."""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, jmeter_jtl_csv, jmeter_jtl_xml
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import corpus_names

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loadtest" / "jmeter"
CORPUS_FILES = corpus_names("jmeter", "*.csv")
REFUSED = {"jmeter__Bug52968.csv": "10 fields match none of JMeter's default layouts"}
CSV_FIXTURES = sorted(p.name for p in FIXTURES.glob("*") if p.suffix in (".csv", ".tsv"))
XML_FIXTURES = sorted(p.name for p in FIXTURES.glob("*.xml"))
OURS = {jmeter_jtl_csv.SPEC.kind, jmeter_jtl_xml.SPEC.kind}


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "backslashreplace")


def _csv(text: str, tz: str = "UTC"):
    return jmeter_jtl_csv.SPEC.parse(text, ParseContext(source="test.jtl", tz=tz))


def _xml(text: str):
    return jmeter_jtl_xml.SPEC.parse(text, ParseContext(source="test.jtl"))


def _row(result, index: int) -> dict:
    return result.tables["load_sample"].row(index, named=True)


def _utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=timezone.utc)


def _others_over_half(head: str, name: str) -> list[str]:
    return [spec.kind for spec in PARSERS if spec.kind not in OURS and spec.detect(head, name) > 0.5]


# --- goldens ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_corpus_csv_refused(name: str, corpus: Path) -> None:
    """Claimed (and by nothing else) but refused with the reason; the corpus files read are parser cases."""
    text = _text(corpus / "jmeter" / name)
    assert jmeter_jtl_csv.SPEC.detect(text[:8192], name) > 0.5
    assert jmeter_jtl_xml.SPEC.detect(text[:8192], name) <= 0.5
    assert _others_over_half(text[:8192], name) == []
    with pytest.raises(ParseError, match=REFUSED[name]):
        jmeter_jtl_csv.SPEC.parse(text, ParseContext(source=f"jmeter/{name}"))


# --- numbers checked by hand ------------------------------------------------------------------


def test_html_report_file_numbers(corpus: Path) -> None:
    # awk -F, 'NR>1{n++; if($8=="false")f++; s+=$2} END{print n, f, s}' -> 255 3 60046
    result = _csv(_text(corpus / "jmeter" / "jmeter__HTMLReportTestFile.csv"))
    table = result.tables["load_sample"]
    assert result.records == 255
    assert table.filter(~pl.col("success")).height == 3
    assert table.filter(~pl.col("success")).get_column("label").unique().to_list() == ["JR-KO"]
    assert table.get_column("elapsed_ms").sum() == 60046
    first = _row(result, 0)
    assert first["start_ts"] == _utc(2019, 3, 5, 11, 0, 27, 191000)  # 1551783627191
    assert (first["elapsed_ms"], first["label"], first["success"], first["response_code"]) == (351, "JR-OK", True, "200")
    assert (first["bytes"], first["sent_bytes"], first["grp_threads"], first["all_threads"], first["line"]) == (18, 8, 1, 1, 2)
    ko = table.filter(~pl.col("success")).row(0, named=True)
    assert (ko["line"], ko["elapsed_ms"], ko["response_code"]) == (42, 329, "400")  # grep -n false
    # last sample 1551783687071 + 305 ms
    assert result.time_range == (_utc(2019, 3, 5, 11, 0, 27, 191000), _utc(2019, 3, 5, 11, 1, 27, 376000))


def test_french_labels_without_response_columns(corpus: Path) -> None:
    result = _csv(_text(corpus / "jmeter" / "jmeter__HTMLReportFalseTestFile.csv"))
    table = result.tables["load_sample"]
    assert result.records == 50 and table.filter(pl.col("success")).height == 0
    assert table.get_column("label").unique().to_list() == ["Requête HTTP"]
    assert table.get_column("thread_name").unique().to_list() == ["Groupe d'unités 1-1"]
    assert table.get_column("response_code").null_count() == 50  # no responseCode column


def test_batch_file_without_times(corpus: Path) -> None:
    # label-first header, no timeStamp/elapsed; awk: 132 rows, 16 with success=false
    result = _csv(_text(corpus / "jmeter" / "jmeter__BatchTestLocal.csv"))
    table = result.tables["load_sample"]
    assert result.records == 132 and table.filter(~pl.col("success")).height == 16
    assert table.get_column("start_ts").null_count() == 132 and result.time_range is None
    assert any("no timeStamp column" in n for n in result.notes)
    assert any("no elapsed column" in n for n in result.notes)


def test_headerless_213_layout_and_transaction() -> None:
    result = _csv(_text(FIXTURES / "jmeter2.13-noheader.csv"))
    table = result.tables["load_sample"]
    assert result.records == 8 and table.filter(~pl.col("success")).height == 3
    assert "JMeter 2.12-2.13's default layout" in result.notes[0]
    search = _row(result, 2)
    assert (search["label"], search["elapsed_ms"], search["latency_ms"], search["bytes"]) == ("Search, by name", 1020, 640, 20480)
    timeout = _row(result, 3)
    assert timeout["response_code"] == "Non HTTP response code: java.net.SocketTimeoutException"
    assert (timeout["elapsed_ms"], timeout["success"]) == (30001, False)
    checkout = _row(result, 6)
    assert (checkout["label"], checkout["response_code"], checkout["elapsed_ms"]) == ("Checkout", None, 210)
    assert "1 transaction-controller sample (labels 'Checkout'): each one's elapsed spans its child samples, which are rows too" in result.notes
    assert table.filter(pl.col("is_transaction")).get_column("line").to_list() == [7]
    assert table.get_column("connect_ms").null_count() == 8  # 2.13 wrote no Connect column


def test_semicolon_headerless_30_layout() -> None:
    result = _csv(_text(FIXTURES / "jmeter3.0-semicolon-noheader.csv"))
    assert "JMeter 3.0's default layout" in result.notes[0]
    assert _row(result, 1)["label"] == "Search; by name"
    assert (_row(result, 2)["success"], _row(result, 2)["response_code"], _row(result, 2)["idle_ms"]) == (False, "500", 0)


def test_tab_delimited_quoted_newline_keeps_line_numbers() -> None:
    result = _csv(_text(FIXTURES / "jmeter5-tab.tsv"))
    assert result.notes[0] == "header with 17 columns, delimiter '\\t'"
    assert _row(result, 2)["label"] == "Search, by name"  # a comma is not special in a TSV
    assert [_row(result, i)["line"] for i in range(5)] == [2, 3, 4, 5, 7]  # row 4's failureMessage spans 2 lines
    assert (_row(result, 3)["success"], _row(result, 0)["connect_ms"]) == (False, 35)


def test_formatted_timestamps_read_in_tz() -> None:
    result = _csv(_text(FIXTURES / "jmeter5-timestamp-format.csv"), tz="Europe/Paris")
    # 2024/05/01 12:00:00.123 in Paris (CEST, +02:00)
    assert _row(result, 0)["start_ts"] == _utc(2024, 5, 1, 10, 0, 0, 123000)
    assert "timeStamp formatted yyyy/MM/dd HH:mm:ss.SSS; times have no zone; read as Europe/Paris (--tz)" in result.notes
    assert _row(result, 2)["idle_ms"] == 7 and _row(result, 2)["label"] == "Checkout"
    assert _csv(_text(FIXTURES / "jmeter5-timestamp-format.csv"), tz="UTC").tables["load_sample"]["start_ts"][0] == _utc(
        2024, 5, 1, 12, 0, 0, 123000
    )


def test_custom_variable_column_ignored() -> None:
    result = _csv(_text(FIXTURES / "jmeter5-pipe-variable.csv"))
    assert result.records == 3 and "columns not read: userId" in result.notes
    assert _row(result, 1)["elapsed_ms"] == 251


def test_xml_top_level_samples_only() -> None:
    result = _xml(_text(FIXTURES / "jmeter5-results.xml"))
    table = result.tables["load_sample"]
    assert result.records == 5
    assert table.get_column("label").to_list() == ["Home", "Search \"shoes\" & socks", "Checkout", "JDBC stock check", "Logout"]
    assert table.get_column("line").to_list() == [3, 12, 21, 29, 30]
    home = _row(result, 0)
    assert (home["elapsed_ms"], home["latency_ms"], home["connect_ms"], home["bytes"], home["sent_bytes"]) == (412, 190, 35, 18830, 820)
    assert home["start_ts"] == _utc(2024, 5, 1, 10, 0, 0, 123000)  # ts="1714557600123"
    assert table.filter(~pl.col("success")).get_column("label").to_list() == ["Search \"shoes\" & socks", "Logout"]
    assert _row(result, 2)["idle_ms"] == 7
    assert any(n.startswith("4 nested sub-samples") for n in result.notes)
    # Checkout generates a parent sample: its children are nested, so it is not marked as a transaction row
    assert "1 transaction-controller sample (labels 'Checkout'): their child samples are nested in them, not rows" in result.notes
    assert table.get_column("is_transaction").to_list() == [False] * 5


def test_real_jmeter_213_default_headerless() -> None:
    # python csv over the file: 40 rows, 16 success=false, elapsed sum 1388 (README)
    result = _csv(_text(FIXTURES / "real-jmeter2.13-default.csv"))
    table = result.tables["load_sample"]
    assert result.records == 40 and table.filter(~pl.col("success")).height == 16
    assert table.get_column("elapsed_ms").sum() == 1388
    assert table.filter(pl.col("label") == "Checkout").height == table.filter(pl.col("is_transaction")).height == 8
    first = _row(result, 0)  # 1795993385815,349,Home,200,OK,Users 1-1,text,true,216,2,2,326
    assert first["start_ts"] == _utc(2026, 11, 29, 23, 3, 5, 815000)
    assert (first["elapsed_ms"], first["label"], first["latency_ms"], first["bytes"], first["line"]) == (349, "Home", 326, 216, 1)


def test_real_jmeter_213_tab_local_times() -> None:
    result = _csv(_text(FIXTURES / "real-jmeter2.13-header-tab-datefmt.tsv"), tz="Europe/Paris")
    table = result.tables["load_sample"]
    assert result.records == 30 and table.filter(~pl.col("success")).height == 12
    assert table.get_column("elapsed_ms").sum() == 2358
    first = _row(result, 0)  # 2026/11/30 00:03:14.536 in Paris (CET, +01:00), elapsed 681, Connect 510
    assert first["start_ts"] == _utc(2026, 11, 29, 23, 3, 14, 536000)
    assert (first["elapsed_ms"], first["connect_ms"], first["latency_ms"], first["idle_ms"]) == (681, 510, 663, 0)


def test_real_jmeter_213_xml() -> None:
    result = _xml(_text(FIXTURES / "real-jmeter2.13.xml"))
    table = result.tables["load_sample"]
    # grep -c '^<httpSample\|^<sample' -> 30; '^  <httpSample' -> 12; top-level t sum 860
    assert result.records == 30 and table.filter(~pl.col("success")).height == 12
    assert table.get_column("elapsed_ms").sum() == 860
    assert any(n.startswith("12 nested sub-samples") for n in result.notes)
    # Checkout has no parent sample: its children Add to cart and Pay are top-level rows too
    assert table.filter(pl.col("is_transaction")).get_column("label").unique().to_list() == ["Checkout"]
    assert table.filter(pl.col("is_transaction")).height == 6
    assert (_row(result, 0)["line"], _row(result, 0)["elapsed_ms"], _row(result, 0)["connect_ms"]) == (3, 99, 62)


# --- detection against the rest of the corpus ------------------------------------------------


def test_lookalike_csv_not_claimed() -> None:
    sar = "# hostname;interval;timestamp;CPU;%user;%nice;%system;%iowait;%steal;%idle\nh;600;2024-05-01 10:10:00 UTC;-1;1.0;0.0;0.5;0.1;0.0;98.4\n"
    plain = "1714557600123,245,a,b,c,d,e,f,g,h\n"  # 10 fields, but no true/false where success goes
    for head in (sar, plain, "timestamp,elapsed,label\n1,2,3\n"):
        assert jmeter_jtl_csv.SPEC.detect(head, "x.csv") <= 0.5


# --- hostile input -----------------------------------------------------------------------------

HEADER = "timeStamp,elapsed,label,responseCode,responseMessage,threadName,dataType,success,bytes,Latency\n"


def test_quoted_newline_in_label_and_crlf_and_bom() -> None:
    text = "\ufeff" + (HEADER + '1714557600123,5,"two\nlines",200,OK,T 1-1,text,true,10,4\n1714557600200,6,b,200,OK,T 1-1,text,true,10,4\n').replace(
        "\n", "\r\n"
    )
    result = _csv(text)
    assert result.records == 2 and result.warnings == []
    assert _row(result, 0)["label"] == "two\r\nlines"
    assert [_row(result, 0)["line"], _row(result, 1)["line"]] == [2, 4]
    assert _row(result, 1)["elapsed_ms"] == 6


def test_truncated_last_row_skipped_with_warning() -> None:
    text = HEADER + "1714557600123,5,a,200,OK,T 1-1,text,true,10,4\n1714557600200,6,b,20"
    result = _csv(text)
    assert result.records == 1
    assert [w.as_text() for w in result.warnings] == ["line 3: last row cut short (no line end, fields missing); skipped"]


def test_unclosed_quote_at_end() -> None:
    text = HEADER + '1714557600123,5,a,200,OK,T 1-1,text,true,10,4\n1714557600200,6,"b, cut'
    result = _csv(text)
    assert result.records == 1
    assert any("quoted field is never closed" in w.reason and w.line == 3 for w in result.warnings)


def test_stray_quote_read_row_by_row() -> None:
    text = HEADER + '1714557600123,5,a"b,200,OK,T 1-1,text,true,10,4\n1714557600200,6,"c",200,OK,T 1-1,text,true,10,4\n'
    result = _csv(text)
    assert [_row(result, i)["label"] for i in range(2)] == ['a"b', "c"]
    assert any(n.startswith("read row by row") for n in result.notes)


def test_unreadable_numbers_and_repeated_header() -> None:
    text = HEADER + "1714557600123,fast,a,200,OK,T 1-1,text,maybe,10,4\n" + HEADER + "1714557600200,6,b,200,OK,T 1-1,text,true,10,4\n"
    result = _csv(text)
    assert result.records == 2
    reasons = [w.as_text() for w in result.warnings]
    assert "line 2: unreadable elapsed 'fast'; sample kept without it" in reasons
    assert "line 3: header line repeated (several results files appended?); skipped" in reasons
    assert _row(result, 0)["success"] is None


def test_hostile_numbers_become_nulls_with_warnings() -> None:
    text = "timeStamp,elapsed,label,success,bytes\n9223372036854775807,inf,a,true,1e5\n99999999999999,999999999999999,b,true,-0\n"
    result = _csv(text)
    assert result.tables["load_sample"].select("elapsed_ms", "bytes").rows() == [(None, None), (None, 0)]
    assert _row(result, 0)["start_ts"] is None and _row(result, 1)["start_ts"] == _utc(5138, 11, 16, 9, 46, 39, 999000)
    assert [w.line for w in result.warnings] == [2, 2, 2, 3]


def test_header_with_every_name_quoted() -> None:
    result = _csv('"timeStamp","elapsed","label","success"\n"1714557600123","5","a","true"\n')
    assert result.records == 1 and (_row(result, 0)["elapsed_ms"], _row(result, 0)["success"]) == (5, True)


def test_unknown_headerless_layout_refused() -> None:
    with pytest.raises(ParseError, match="first row's 3 fields"):
        _csv("1714557600123,5,a\n")
    with pytest.raises(ParseError, match="empty"):
        _csv("\n\n")
    with pytest.raises(ParseError, match="no sample rows"):
        _csv(HEADER)


def test_binary_input_refused() -> None:
    garbage = "".join(chr(c) for c in range(1, 32)) * 50 + "\x00\xff\\xfe" * 100
    with pytest.raises(ParseError):
        _csv(garbage)
    with pytest.raises(ParseError):
        _xml(garbage)
    assert jmeter_jtl_csv.SPEC.detect(garbage, "x") == 0.0 and jmeter_jtl_xml.SPEC.detect(garbage, "x") == 0.0


def test_unknown_zone_warns() -> None:
    result = _csv(_text(FIXTURES / "jmeter5-timestamp-format.csv"), tz="Mars/Olympus")
    assert result.warnings[0].reason == "unknown time zone 'Mars/Olympus'; zone-less times read as UTC"


def test_xml_bomb_and_external_entity_refused() -> None:
    bomb = (
        '<?xml version="1.0"?>\n<!DOCTYPE testResults [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">'
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>\n<testResults version="1.2">\n<sample t="1" lb="&c;"/>\n</testResults>\n'
    )
    external = '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<testResults><sample lb="&x;"/></testResults>'
    for text in (bomb, external):
        with pytest.raises(ParseError, match="DOCTYPE"):
            _xml(text)


def test_xml_cut_short_keeps_samples_before_the_cut() -> None:
    text = _text(FIXTURES / "jmeter5-results.xml")
    cut = text[: text.index('<sample t="35"') + 20]
    result = _xml(cut)
    assert result.records == 3  # Home, Search, Checkout; the cut JDBC start tag is not a sample
    assert len(result.warnings) == 1 and "file ends before </testResults>" in result.warnings[0].reason


def test_xml_wrong_root_and_not_xml() -> None:
    with pytest.raises(ParseError, match="root element is <jmeterTestPlan>"):
        _xml('<?xml version="1.0"?>\n<jmeterTestPlan version="1.2"><hashTree/></jmeterTestPlan>\n')
    with pytest.raises(ParseError, match="not XML"):
        _xml("timeStamp,elapsed\n")


def test_huge_line_does_not_crash() -> None:
    result = _csv(HEADER + "1714557600123,5," + "x" * 2_000_000 + ",200,OK,T 1-1,text,true,10,4\n")
    assert result.records == 1 and len(_row(result, 0)["label"]) == 2_000_000


# --- the line reader (polars over lines) gives what the expat reader gives ----------------------

XML_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<testResults version="1.2">\n'


def _same_as_expat(text: str) -> jmeter_jtl_xml.Samples:
    """read_lines(text), checked to take the line path and to equal read_expat(text)."""
    fast, slow = jmeter_jtl_xml.read_lines(text), jmeter_jtl_xml.read_expat(text)
    assert fast is not None, "the line reader left a JMeter-shaped file to expat"
    assert fast.frame.schema == slow.frame.schema
    assert fast.frame.equals(slow.frame), f"\n{fast.frame}\n{slow.frame}"
    assert (fast.nested, fast.cut) == (slow.nested, slow.cut)
    return fast


@pytest.mark.parametrize("name", XML_FIXTURES)
def test_line_reader_matches_expat_on_real_files(name: str) -> None:
    samples = _same_as_expat(_text(FIXTURES / name))
    assert samples.cut is None and samples.frame.height in (5, 30)


@pytest.mark.parametrize("name", XML_FIXTURES)
def test_line_reader_matches_expat_across_pieces(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # pieces of ~300 characters: depth, line numbers and nested counts carried from piece to piece
    monkeypatch.setattr(jmeter_jtl_xml, "CHUNK_CHARS", 300)
    text = _text(FIXTURES / name)
    assert len(jmeter_jtl_xml._chunk_bounds(text, len(text), 300)) > 5
    _same_as_expat(text)


@pytest.mark.parametrize("name", XML_FIXTURES)
def test_line_reader_matches_expat_on_cut_files(name: str) -> None:
    text = _text(FIXTURES / name)
    ends = [i + 1 for i, c in enumerate(text) if c == "\n"]
    # at a line end, just inside the next tag, and in the middle of its attributes
    cuts = sorted({c for end in ends[1:] for c in (end - 1, end + 1, end + 40) if c < len(text)})
    root_end = text.rindex("</testResults>") + len("</testResults>")
    for cut in cuts:
        samples = _same_as_expat(text[:cut])
        assert (samples.cut is not None and samples.cut.reason.startswith("file ends before </testResults>")) == (cut < root_end)


EDGE_CASES = {
    "escaped attributes": XML_HEAD
    + '<httpSample t="1" ts="1714557600123" lb="say &quot;hi&quot; &lt;b&gt; &amp;amp; &apos;x&apos;" rm="a&#10;b&#x41;&#233;&#x1F600;" tn="T\t1"/>\n'
    "</testResults>\n",
    "missing attributes": XML_HEAD + '<sample t="5"/>\n<sample lb="no time"/>\n<sample/>\n</testResults>\n',
    "rs before JMeter 2.1": XML_HEAD + '<sample t="1" rs="404"/>\n<sample t="2" rs="404" rc="200"/>\n</testResults>\n',
    "attributes in another order": XML_HEAD
    + '<httpSample lb="b" t="2" ts="1714557600123"/>\n<sample ts="1714557600124" t="3" lb="a" rc="200"/>\n'
    '<statSample t="4" sc="10" ec="1" lb="s"/>\n</testResults>\n',
    "nested samples and transactions": XML_HEAD
    + '<sample t="9" lb="Tx" rm="Number of samples in transaction : 2, number of failing samples : 0">\n'
    '  <httpSample t="4" lb="a">\n    <httpSample t="2" lb="a-0"/>\n    <java.net.URL>http://x/?a=1&amp;b=2</java.net.URL>\n'
    '  </httpSample>\n  <httpSample t="5" lb="b"/>\n</sample>\n<httpSample t="1" lb="after"/>\n</testResults>\n',
    "CRLF line ends": (XML_HEAD + '<sample t="1" lb="a">\n  <x>y</x>\n</sample>\n<sample t="2"/>\n</testResults>\n').replace("\n", "\r\n"),
    "cut in a start tag": XML_HEAD + '<sample t="1"/>\n<sample t="2" lb="cu',
    "cut right after a start tag": XML_HEAD + '<sample t="1"/>\n<sample t="2">',
    "cut in an end tag": XML_HEAD + '<sample t="1">\n  <httpSample t="2"/>\n</samp',
    "broken mid-file: undefined entity": XML_HEAD + '<sample t="1"/>\n<sample lb="&nbsp;"/>\n<sample t="3"/>\n</testResults>\n',
    "broken mid-file: invalid character reference": XML_HEAD + '<sample t="1"/>\n<sample lb="&#1;"/>\n</testResults>\n',
    "broken mid-file: mismatched end tag": XML_HEAD + '<sample t="1">\n</httpSample>\n<sample t="2"/>\n</testResults>\n',
    "broken mid-file: bare ampersand in text": XML_HEAD
    + '<sample t="1">\n  <responseData class="java.lang.String">a & b</responseData>\n</sample>\n<sample t="2"/>\n</testResults>\n',
    "two results files appended": XML_HEAD + '<sample t="1"/>\n</testResults>\n' + XML_HEAD + '<sample t="2"/>\n</testResults>\n',
    "stray < after the root": XML_HEAD + '<sample t="1"/>\n</testResults>\n<',
    "text over several lines": XML_HEAD
    + '<sample t="1">\n  <responseData class="java.lang.String">one\n&lt;httpSample t=&quot;2&quot;/&gt;\n</responseData>\n'
    '</sample>\n</testResults>\n',
    "sample under another element": XML_HEAD + '<other>\n  <sample t="1"/>\n</other>\n<sample t="2"/>\n</testResults>\n',
    "samplerData is not a sample": XML_HEAD
    + '<sample t="1">\n  <samplerData class="java.lang.String">GET /</samplerData>\n</sample>\n</testResults>\n',
    "value holding another name=": XML_HEAD + '<sample rm=" lb=" t="1"/>\n<sample rm="x lb=" lb="real"/>\n</testResults>\n',
    "declared encoding is not used": '<?xml version="1.0" encoding="ISO-8859-1"?>\n<testResults>\n<sample lb="Requête"/>\n</testResults>\n',
    "no declaration, space before />": '<testResults>\n<sample t="1" />\n</testResults>\n',
}


@pytest.mark.parametrize("case", EDGE_CASES)
def test_line_reader_matches_expat_on_edge_cases(case: str) -> None:
    _same_as_expat(EDGE_CASES[case])


def test_duplicate_attribute_past_the_screened_head(monkeypatch: pytest.MonkeyPatch) -> None:
    text = XML_HEAD + '<sample t="1"/>\n<sample t="2" t="3"/>\n</testResults>\n'
    # in the head (read before expat) the duplicate makes the line reader step aside...
    assert jmeter_jtl_xml.read_lines(text) is None and _xml(text).records == 1
    # ...past it, expat finds it and the lines before are read
    monkeypatch.setattr(jmeter_jtl_xml, "_SCREEN_CHARS", len(XML_HEAD))
    assert _same_as_expat(text).cut.reason.startswith("XML error (duplicate attribute)")


def test_line_reader_edge_values_checked_by_hand() -> None:
    escaped = _same_as_expat(EDGE_CASES["escaped attributes"]).frame.row(0, named=True)
    assert escaped["label"] == "say \"hi\" <b> &amp; 'x'"
    assert escaped["responseMessage"] == "a\nbA\u00e9\U0001f600"
    assert escaped["threadName"] == "T 1"  # XML turns a tab in an attribute into a space
    assert _same_as_expat(EDGE_CASES["rs before JMeter 2.1"]).frame.get_column("responseCode").to_list() == ["404", "200"]
    nested = _same_as_expat(EDGE_CASES["nested samples and transactions"])
    assert nested.nested == 3 and nested.frame.select("label", "nested_samples", "line").rows() == [("Tx", 3, 3), ("after", 0, 10)]
    cut = _same_as_expat(EDGE_CASES["cut in a start tag"])
    assert cut.frame.height == 1 and cut.cut.line == 4 and cut.cut.reason.startswith("file ends before </testResults>")
    broken = _same_as_expat(EDGE_CASES["broken mid-file: undefined entity"])
    assert broken.frame.height == 1 and broken.cut.reason == "XML error (undefined entity); 1 samples before it kept, the rest skipped"
    stray = _same_as_expat(EDGE_CASES["stray < after the root"]).cut  # ends early, but not inside </testResults>
    assert stray.reason == "XML error (unclosed token); 1 samples before it kept, the rest skipped"
    appended = _same_as_expat(EDGE_CASES["two results files appended"])
    assert appended.frame.height == 1 and "junk after document element" in appended.cut.reason
    fake = _same_as_expat(EDGE_CASES["value holding another name="]).frame
    assert fake.select("responseMessage", "label", "elapsed").rows() == [(" lb=", None, "1"), ("x lb=", "real", None)]


NOT_JMETER_LAYOUT = {
    "minified on one line": _text(FIXTURES / "jmeter5-results.xml").replace("\n", ""),
    "two samples on a line": XML_HEAD + '<sample t="1"/><sample t="2"/>\n</testResults>\n',
    "start tag over two lines": XML_HEAD + '<sample t="1"\n  lb="a"/>\n</testResults>\n',
    "comment": XML_HEAD + '<!-- <sample t="9"/> -->\n<sample t="1"/>\n</testResults>\n',
    "CDATA": XML_HEAD + '<sample t="1">\n  <x><![CDATA[\n<sample t="2"/>\n]]></x>\n</sample>\n</testResults>\n',
    "processing instruction": XML_HEAD + '<?pi <sample t="9"/> ?>\n<sample t="1"/>\n</testResults>\n',
    "single-quoted attribute": XML_HEAD + "<sample t='1' lb=\"a\"/>\n</testResults>\n",
    "tab between attributes": XML_HEAD + '<sample\tt="1"/>\n</testResults>\n',
    "> left unescaped": XML_HEAD + '<sample t="1" lb="a>b"/>\n</testResults>\n',
    "lone CR": XML_HEAD + '<sample t="1" lb="a\rb"/>\n</testResults>\n',
    "nested sample not indented": XML_HEAD + '<sample t="1"><sample t="2"/>\n</sample>\n</testResults>\n',
}


@pytest.mark.parametrize("case", NOT_JMETER_LAYOUT)
def test_other_layouts_read_by_expat(case: str) -> None:
    text = NOT_JMETER_LAYOUT[case]
    assert jmeter_jtl_xml.read_lines(text) is None
    expected = jmeter_jtl_xml.read_expat(text)
    result = _xml(text)
    assert result.records == expected.frame.height > 0 and [w.reason for w in result.warnings] == []


def test_minified_file_gives_the_pretty_files_table() -> None:
    pretty = _xml(_text(FIXTURES / "jmeter5-results.xml")).tables["load_sample"]
    minified = _xml(NOT_JMETER_LAYOUT["minified on one line"]).tables["load_sample"]
    assert minified.drop("line").equals(pretty.drop("line")) and minified.get_column("line").unique().to_list() == [1]


def test_doctype_refused_by_both_readers() -> None:
    plain = XML_HEAD.replace("<testResults", "<!DOCTYPE testResults>\n<testResults") + '<sample t="1"/>\n</testResults>\n'
    entity = '<?xml version="1.0"?>\n<!DOCTYPE testResults [<!ENTITY a "x">]>\n<testResults><sample lb="&a;"/></testResults>'
    for text in (plain, entity):
        assert jmeter_jtl_xml.read_lines(text) is None  # seen before the root: left to read_expat, which refuses it
        for read in (jmeter_jtl_xml.read_expat, _xml):
            with pytest.raises(ParseError, match="declares a DOCTYPE"):
                read(text)
    # and the line reader's own expat pass refuses it the same way
    with pytest.raises(ParseError, match="declares a DOCTYPE"):
        jmeter_jtl_xml._well_formed_until(entity, [(0, len(entity))])


def test_line_path_taken_on_jmeter_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_expat(text: str) -> None:
        raise AssertionError("read by the expat reader")

    monkeypatch.setattr(jmeter_jtl_xml, "read_expat", no_expat)
    for name in XML_FIXTURES:
        assert _xml(_text(FIXTURES / name)).records > 0
    assert _xml(EDGE_CASES["cut in a start tag"]).records == 1
    with pytest.raises(AssertionError, match="expat"):
        _xml(NOT_JMETER_LAYOUT["minified on one line"])


def _generated_jtl(samples: int, seed: int) -> str:
    """A JTL shaped as JMeter writes it, with every feature the readers handle, drawn at random
    (attribute lists from 3 layouts, as a file has one per kind of sample)."""
    rng = random.Random(seed)
    values = ["200", "true", "a &amp; b", "&quot;q&quot; &lt;x&gt;", "&#10;&#x41;", "Requête", "", "1714557600123", "x\ty", "a=b"]
    names = ["t", "it", "lt", "ct", "ts", "s", "lb", "rc", "rs", "rm", "tn", "dt", "by", "sby", "ng", "na", "sc", "ec", "hn"]
    layouts = [rng.sample(names, rng.randint(0, 12)) for _ in range(3)]
    lines = [XML_HEAD.rstrip("\n")]

    def sample(depth: int) -> None:
        tag = rng.choice(["httpSample", "sample", "statSample"])
        attributes = "".join(f' {n}="{rng.choice(values)}"' for n in rng.choice(layouts))
        children = rng.choice([0, 0, 1, 2]) if depth < 3 else 0
        if not children:
            lines.append(f"{'  ' * depth}<{tag}{attributes}/>")
            return
        lines.append(f"{'  ' * depth}<{tag}{attributes}>")
        for _ in range(children):
            if rng.random() < 0.5:
                sample(depth + 1)
            else:
                lines.append(f"{'  ' * (depth + 1)}<java.net.URL>http://x/?a=1&amp;b=2</java.net.URL>")
        lines.append(f"{'  ' * depth}</{tag}>")

    for _ in range(samples):
        sample(0)
    return "\n".join(lines) + "\n</testResults>\n"


@pytest.mark.parametrize("seed", range(3))
def test_line_reader_matches_expat_on_generated_files(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jmeter_jtl_xml, "CHUNK_CHARS", 2000)
    text = _generated_jtl(150, seed)
    assert _same_as_expat(text).frame.height == 150
    rng = random.Random(seed)
    for cut in sorted(rng.sample(range(100, len(text)), 8)):
        _same_as_expat(text[:cut])


def test_many_attribute_layouts_read_by_expat() -> None:
    text = XML_HEAD + "".join(f'<sample t="{i}" a{i}="x"/>\n' for i in range(40)) + "</testResults>\n"
    assert jmeter_jtl_xml.read_lines(text) is None
    assert _xml(text).tables["load_sample"].get_column("elapsed_ms").to_list() == list(range(40))
