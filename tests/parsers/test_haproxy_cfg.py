"""haproxy.cfg: directives per section with their line, the maxconn they set, and detection."""

from __future__ import annotations

import tarfile

import pytest

from dbdiag import tables as t
from dbdiag.parsers import haproxy_cfg, pg_conf
from dbdiag.parsers.base import ParseContext, ParseError
from tests.conftest import REPO

CAPTURE = REPO / "fixtures/pgbench-haproxy-connect/pgbench-C-haproxy-maxconn2.tar.gz"


def _cfg_of_the_real_capture() -> str:
    with tarfile.open(CAPTURE) as archive:
        member = archive.extractfile("capture/app/haproxy.cfg")
        assert member is not None
        return member.read().decode()


def test_the_real_capture_configuration() -> None:
    text = _cfg_of_the_real_capture()
    result = haproxy_cfg.parse(text, ParseContext("app/haproxy.cfg"))
    table = result.tables[t.PROXY_CONFIG]
    limits = table.filter(table["maxconn"].is_not_null()).select("section", "proxy", "keyword", "server", "maxconn", "line").rows()
    lines = text.split("\n")
    assert limits == [("global", None, "maxconn", None, 256, 3), ("backend", "be_pg", "server", "pg1", 2, 17)]
    assert lines[16].strip().startswith("server pg1 ") and lines[16].strip().endswith(" maxconn 2")
    assert result.records == table.height == 10 and result.warnings == []
    assert haproxy_cfg.detect(text, "haproxy.cfg") >= 0.9
    assert haproxy_cfg.detect(text, "anything") >= 0.9  # the content says it, not the name


def test_comments_quotes_and_lines_before_a_section() -> None:
    text = (
        "maxconn 10\n"
        "listen pg # the only proxy\n"
        "    bind :5432\n"
        '    http-request set-header X-Hash "a#b"   # a comment\n'
        "    server db1 10.0.0.5:5432 check maxconn 30\n"
        "    server db2 10.0.0.6:5432 check maxconnx 30\n"
        "    #server db3 10.0.0.7:5432 maxconn 30\n"
    )
    result = haproxy_cfg.parse(text, ParseContext("h.cfg"))
    table = result.tables[t.PROXY_CONFIG]
    assert table.select("keyword", "server", "maxconn", "line").rows() == [
        ("bind", None, None, 3), ("http-request", None, None, 4), ("server", "db1", 30, 5), ("server", "db2", None, 6),
    ]
    assert table["args"][1] == 'set-header X-Hash "a#b"'
    assert [(w.line, w.reason) for w in result.warnings] == [(1, "1 line(s) before the first section skipped, the first: 'maxconn 10'")]


def test_not_a_configuration() -> None:
    with pytest.raises(ParseError):
        haproxy_cfg.parse("# only a comment\n\n", ParseContext("h.cfg"))
    conf = "max_connections = 100\nshared_buffers = 128MB\nlisten_addresses = '*'\n"
    assert haproxy_cfg.detect(conf, "postgresql.conf") == 0.0 and pg_conf.detect(conf, "postgresql.conf") > 0
    assert haproxy_cfg.detect("[mysqld]\nmax_connections = 100\n", "my.cnf") == 0.0
