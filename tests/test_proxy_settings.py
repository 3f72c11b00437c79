"""The proxies' session limits as settings rows (``dbdiag.proxy_settings``), from the real HAProxy 2.6 files of
``fixtures/dashboards`` (``show stat`` snapshots and the haproxy.cfg they ran with) and from edited copies."""

from __future__ import annotations

from datetime import datetime, timezone

from dbdiag.parsers import haproxy_cfg, haproxy_stat
from dbdiag.parsers.base import ParseContext
from dbdiag.proxy_settings import proxy_limit_rows
from tests.conftest import REPO

DASHBOARDS = REPO / "fixtures" / "dashboards"


def _stat(text: str):
    return haproxy_stat.parse(text, ParseContext("proxy/show-stat.txt", tz="UTC")).tables["proxy_stat"]


def _config(text: str):
    return haproxy_cfg.parse(text, ParseContext("proxy/haproxy.cfg")).tables["proxy_config"]


def test_real_show_stat_and_config_give_every_limit_with_its_line():
    stat = _stat((DASHBOARDS / "haproxy-2.6__show_stat_ts.csv").read_text())
    config = _config((DASHBOARDS / "haproxy-fixture.cfg").read_text())
    rows = {(r["subject"], r["name"]): r for r in proxy_limit_rows(stat, config)}
    assert rows[("haproxy fe_app frontend", "maxconn (show stat slim)")]["value"] == "20"
    servers = rows[("haproxy be_app servers", "maxconn (show stat slim)")]  # app1 and app2 alike: one row
    assert servers["value"] == "10" and servers["source"].startswith("proxy/show-stat.txt:")
    assert not [key for key in rows if "BACKEND" in key[0] or "be_app backend" in key[0]]  # fullconn is no limit
    assert rows[("haproxy.cfg global", "maxconn")]["value"] == "100"
    assert rows[("haproxy.cfg frontend fe_app", "maxconn")]["value"] == "20"
    app1 = rows[("haproxy.cfg backend be_app server app1", "maxconn")]
    assert (app1["value"], app1["scope"], app1["group"]) == ("10", "proxy", "proxy_limit")
    line = int(app1["source"].rsplit(":", 1)[1])
    assert "server app1" in (DASHBOARDS / "haproxy-fixture.cfg").read_text().splitlines()[line - 1]


def test_a_limit_changed_between_snapshots_reads_with_its_time_and_unlike_servers_get_a_row_each():
    blocks = ["TS " + block for block in (DASHBOARDS / "haproxy-2.6__show_stat_ts.csv").read_text().split("TS ")[1:]]
    assert len(blocks) >= 2
    header, *lines = blocks[-1].splitlines()
    raised = []
    for line in lines:  # the last snapshot: app1 reconfigured to maxconn 50
        cells = line.split(",")
        if cells[:2] == ["be_app", "app1"]:
            cells[6] = "50"  # slim
        raised.append(",".join(cells))
    rows = proxy_limit_rows(_stat("".join(blocks[:-1]) + "\n".join([header, *raised]) + "\n"), None)
    by_subject = {r["subject"]: r["value"] for r in rows}
    when = datetime.fromtimestamp(float(header.split()[1]), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert by_subject["haproxy be_app/app1"] == f"10, 50 from {when}"
    assert by_subject["haproxy be_app/app2"] == "10"
    assert "haproxy be_app servers" not in by_subject


def test_no_proxy_input_gives_no_rows():
    assert proxy_limit_rows(None, None) == []
