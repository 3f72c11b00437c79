"""JMeter JTL (CSV and XML) parsers: goldens, numbers checked by hand against the files, detection, hostile input."""

from __future__ import annotations

import tarfile
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from dbdiag.parsers import PARSERS, jmeter_jtl_csv, jmeter_jtl_xml
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import CORPUS
from tests.golden import check_golden

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "loadtest" / "jmeter"
CORPUS_FILES = sorted(p.name for p in (CORPUS / "jmeter").glob("*.csv"))
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


@pytest.mark.parametrize("name", CORPUS_FILES)
def test_corpus_csv_golden(name: str, corpus: Path, update_goldens: bool) -> None:
    text = _text(corpus / "jmeter" / name)
    assert jmeter_jtl_csv.SPEC.detect(text[:8192], name) > 0.5
    assert jmeter_jtl_xml.SPEC.detect(text[:8192], name) <= 0.5
    assert _others_over_half(text[:8192], name) == []
    if name in REFUSED:
        with pytest.raises(ParseError, match=REFUSED[name]):
            jmeter_jtl_csv.SPEC.parse(text, ParseContext(source=f"jmeter/{name}"))
        return
    result = jmeter_jtl_csv.SPEC.parse(text, ParseContext(source=f"jmeter/{name}"))
    assert result.warnings == []
    assert result.records == result.tables["load_sample"].height > 0
    check_golden(f"jmeter-jtl-csv__{name}", result, update_goldens)


@pytest.mark.parametrize("name", CSV_FIXTURES)
def test_fixture_csv_golden(name: str, update_goldens: bool) -> None:
    text = _text(FIXTURES / name)
    assert jmeter_jtl_csv.SPEC.detect(text[:8192], "results.jtl") > 0.5
    assert jmeter_jtl_xml.SPEC.detect(text[:8192], "results.jtl") <= 0.5
    assert _others_over_half(text[:8192], "results.jtl") == []
    result = jmeter_jtl_csv.SPEC.parse(text, ParseContext(source=f"fixtures/{name}", tz="Europe/Paris"))
    assert result.warnings == []
    check_golden(f"jmeter-jtl-csv__{name}", result, update_goldens)


@pytest.mark.parametrize("name", XML_FIXTURES)
def test_fixture_xml_golden(name: str, update_goldens: bool) -> None:
    text = _text(FIXTURES / name)
    assert jmeter_jtl_xml.SPEC.detect(text[:8192], "results.jtl") > 0.5
    assert jmeter_jtl_csv.SPEC.detect(text[:8192], "results.jtl") <= 0.5
    assert _others_over_half(text[:8192], "results.jtl") == []
    result = jmeter_jtl_xml.SPEC.parse(text, ParseContext(source=f"fixtures/{name}"))
    assert result.warnings == []
    check_golden(f"jmeter-jtl-xml__{name}", result, update_goldens)


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


def _corpus_heads():
    for path in sorted(CORPUS.rglob("*")):
        if not path.is_file() or path.name == "SHA256SUMS" or "jmeter" in path.parts:
            continue
        if path.name.endswith(".tar.gz"):
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if member.isfile():
                        yield f"{path.name}:{member.name}", tar.extractfile(member).read(8192).decode("utf-8", "backslashreplace")
        else:
            yield str(path.relative_to(CORPUS)), path.read_bytes()[:8192].decode("utf-8", "backslashreplace")


def test_no_false_positive_on_other_corpus_files() -> None:
    claimed = [
        (name, spec.kind)
        for name, head in _corpus_heads()
        for spec in (jmeter_jtl_csv.SPEC, jmeter_jtl_xml.SPEC)
        if spec.detect(head, name.rsplit("/", 1)[-1]) > 0.5
    ]
    assert claimed == []


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
