# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Parsers of hccn_tool outputs and /etc/hccn.conf, against the real samples of vendor-tools section 2.

Files come from tests/fixtures/vendor/hccn-*; outputs that have no sample
file are the verbatim lines quoted in the reference (section noted).
"""

from __future__ import annotations

import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# --------------------------------------------------------------------- commands

def test_command_lines():
    tool = "/usr/local/Ascend/driver/tools/hccn_tool"
    assert hccn.query_cmd(tool, 3, "ip") == [tool, "-i", "3", "-ip", "-g"]
    assert hccn.ip_set_cmd(tool, 0, "10.10.1.1", "255.255.0.0") == [
        tool, "-i", "0", "-ip", "-s", "address", "10.10.1.1", "netmask", "255.255.0.0"]
    assert hccn.gateway_set_cmd(tool, 1, "10.10.0.1") == [tool, "-i", "1", "-gateway", "-s", "gateway", "10.10.0.1"]
    assert hccn.netdetect_set_cmd(tool, 2, "10.10.0.1") == [tool, "-i", "2", "-netdetect", "-s", "address", "10.10.0.1"]
    assert hccn.tls_set_cmd(tool, 7, 0) == [tool, "-i", "7", "-tls", "-s", "enable", "0"]
    assert hccn.ping_cmd(tool, 0, "11.12.165.80") == [tool, "-i", "0", "-ping", "-g", "address", "11.12.165.80"]
    assert hccn.ping_cmd(tool, 0, "11.12.165.80", 1024)[-2:] == ["pkt", "1024"]


@pytest.mark.parametrize(("setting", "rc", "stderr", "expected"), [
    ("ip", 13, "Get ipconf failed, because no ip was preset there!\n", True),
    ("gateway", 2, "Get gateway failed, because no gateway was preset there!\n", True),
    ("ip", 4, "The device is not exist!\n", False),
    ("gateway", 22, "Execute failed: Link status is down.\n", False),
])
def test_not_preset(setting, rc, stderr, expected):
    assert hccn.not_preset(setting, rc, stderr) is expected


# ------------------------------------------------------------------------ -link

@pytest.mark.parametrize(("text", "state"), [
    ("link status: UP\n", "UP"),  # section 2.1, MindCluster doc
    ("link status: DOWN\n", "DOWN"),  # section 2.1, GPUStack docstring
])
def test_parse_link(text, state):
    assert hccn.parse_link(text) == state


def test_parse_link_rejects_other_text():
    with pytest.raises(ValueError, match="link status"):
        hccn.parse_link("Get invalid device id.\n")


# -------------------------------------------------------------------------- -ip

def test_parse_ip_sample():
    assert hccn.parse_ip(fixture("hccn-ip-g.txt")) == {"address": "10.10.0.10", "netmask": "255.255.255.0"}


@pytest.mark.parametrize("text", ["", "\n\n", "   \n"])
def test_parse_ip_older_driver_prints_nothing_for_an_unset_device(text):
    # mind-cluster capture: `hccn_tool -i 2 -ip -g` followed by two empty lines.
    assert hccn.parse_ip(text) is None


@pytest.mark.parametrize("text", ["ipaddr:10.10.0.300\nnetmask:255.255.255.0\n", "netmask:255.255.0.0\n", "garbage\n"])
def test_parse_ip_rejects_malformed_output(text):
    with pytest.raises(ValueError):
        hccn.parse_ip(text)


# --------------------------------------------------------------------- -gateway

def test_parse_gateway_sample():
    assert hccn.parse_gateway(fixture("hccn-gateway-g.txt")) == {"gateway": "11.12.165.1", "iface": "eth0"}


def test_parse_gateway_other_device_and_empty():
    assert hccn.parse_gateway("default gateway:192.168.6.1, Iface:eth7\n") == {"gateway": "192.168.6.1", "iface": "eth7"}
    assert hccn.parse_gateway("") is None
    with pytest.raises(ValueError):
        hccn.parse_gateway("gateway is 1.2.3.4\n")


# ------------------------------------------------------------------- -netdetect

def test_parse_netdetect_sample_hdk24_label():
    assert hccn.parse_netdetect(fixture("hccn-netdetect-g.txt")) == "11.12.165.1"


def test_parse_netdetect_newer_addr_label_and_unset():
    assert hccn.parse_netdetect("netdetect addr: 29.1.0.1\n") == "29.1.0.1"
    assert hccn.parse_netdetect("netdetect address: 0.0.0.0\n") is None
    assert hccn.parse_netdetect("netdetect addr: \n") is None
    with pytest.raises(ValueError):
        hccn.parse_netdetect("detect: 1.2.3.4\n")


# ------------------------------------------------------------------------- -tls

def test_parse_tls_switch_line_newer_hdk():
    assert hccn.parse_tls(fixture("hccn-tls-g-switch.txt")) == {
        "device": 0, "switch": 0, "preconfigured": 1, "alarm_days": 60}


def test_parse_tls_full_output_older_hdk():
    assert hccn.parse_tls(fixture("hccn-tls-g-full-old-hdk.txt")) == {
        "device": 0, "switch": 0, "preconfigured": None, "alarm_days": 60}


def test_parse_tls_enabled_and_garbage():
    line = "dev_id:7, tls switch[1](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), " \
           "tls alarm time threshold[60]days\n"
    assert hccn.parse_tls(line)["switch"] == 1
    assert hccn.parse_tls(line)["device"] == 7
    with pytest.raises(ValueError):
        hccn.parse_tls("Cmd executed successfully!\n")


# ------------------------------------------------------------------ -net_health

@pytest.mark.parametrize(("text", "status"), [
    ("net health status: Success\n", "Success"),  # DeepseekV3 doc
    ("net health status: Init\n", "Init"),  # MindCluster doc, no netdetect address
    ("net health status: Fault\n", "Fault"),  # after -link -s down
    ("net health status: Socket failed\n", "Socket failed"),  # older HDK capture
])
def test_parse_net_health(text, status):
    assert hccn.parse_net_health(text) == status


def test_parse_net_health_rejects_other_text():
    with pytest.raises(ValueError):
        hccn.parse_net_health("")


# ------------------------------------------------------------------------ -ping

def test_parse_ping_success_sample():
    ping = hccn.parse_ping(fixture("hccn-ping-g-success.txt"))
    assert ping == {"device": 0, "address": "11.12.165.80", "transmitted": 3, "received": 3, "loss_pct": 0.0,
                    "rtt_ms": [0.114, 0.067, 0.063], "timeouts": 0, "reachable": True}
    assert hccn.ping_average(ping) == pytest.approx(0.081333, abs=1e-6)


def test_parse_ping_failure():
    # Inferred failure text (section 2.8): "recv time out seq=N" per packet and a 100% loss summary.
    text = ("device 3 PING 10.10.2.4\nrecv time out seq=0\nrecv time out seq=1\nrecv time out seq=2\n"
            "3 packets transmitted, 0 received, 100.00% packet loss\n")
    ping = hccn.parse_ping(text)
    assert (ping["device"], ping["address"], ping["reachable"]) == (3, "10.10.2.4", False)
    assert (ping["transmitted"], ping["received"], ping["loss_pct"], ping["timeouts"]) == (3, 0, 100.0, 3)
    assert hccn.ping_average(ping) is None


def test_parse_ping_without_summary_and_a3_wording():
    partial = hccn.parse_ping("device 1 PING 10.0.0.2\nrecv seq=0,time=0.2ms\nrecv time out seq=1\n")
    assert (partial["transmitted"], partial["received"], partial["loss_pct"]) == (2, 1, 50.0)
    assert partial["reachable"] is True
    assert hccn.parse_ping("")["reachable"] is False
    loss = hccn.parse_ping("3 packets transmitted, 2 received, 33.33% packets loss\n")
    assert (loss["received"], loss["loss_pct"]) == (2, 33.33)


# -------------------------------------------------------------- /etc/hccn.conf

def test_parse_conf_sample():
    assert hccn.parse_conf(fixture("hccn-conf-device0.conf")) == {
        0: {"address": "29.1.137.205", "netmask": "255.255.0.0", "netdetect": "29.1.0.1", "gateway": "29.1.0.1",
            "send_arp_status": "1"}}


A3_BLOCK = """# written by hand
address_0=192.168.1.10
netmask_0=255.255.255.0
gateway_0=192.168.1.1
arp_0=-i eth0 -s 192.168.1.11 aa:bb:cc:dd:ee:ff
netdetect_0=192.168.1.1
send_arp_status_0=1
tls_enable_0=0
udhcpc_enable=0
address_1=192.168.1.11
"""


def test_parse_conf_keeps_unknown_keys_and_ignores_other_lines():
    conf = hccn.parse_conf(A3_BLOCK)
    assert conf[0]["arp"] == "-i eth0 -s 192.168.1.11 aa:bb:cc:dd:ee:ff"
    assert conf[0]["tls_enable"] == "0"
    assert conf[1] == {"address": "192.168.1.11"}
    assert hccn.conf_view(conf[0]) == {"address": "192.168.1.10", "netmask": "255.255.255.0", "gateway": "192.168.1.1",
                                       "netdetect": "192.168.1.1", "tls": 0}
    assert hccn.conf_view(None) == {"address": None, "netmask": None, "gateway": None, "netdetect": None, "tls": None}


def test_render_conf_without_changes_is_identical():
    text = fixture("hccn-conf-device0.conf")
    assert hccn.render_conf(text, {}) == text
    assert hccn.render_conf(A3_BLOCK, {0: {"address": "192.168.1.10"}}) == A3_BLOCK


def test_render_conf_updates_in_place_and_keeps_unknown_lines_in_order():
    out = hccn.render_conf(A3_BLOCK, {0: {"address": "10.10.1.1", "tls_enable": 1}, 1: {"netmask": "255.255.0.0"}})
    lines = out.splitlines()
    assert lines[0] == "# written by hand"
    assert lines[1] == "address_0=10.10.1.1"
    assert lines[4] == "arp_0=-i eth0 -s 192.168.1.11 aa:bb:cc:dd:ee:ff"
    assert lines[7] == "tls_enable_0=1"
    assert lines[8] == "udhcpc_enable=0"
    assert lines[9:] == ["address_1=192.168.1.11", "netmask_1=255.255.0.0"]


def test_render_conf_inserts_new_keys_in_block_order_and_removes():
    text = "address_0=10.10.1.1\ngateway_0=10.10.0.1\nsend_arp_status_0=1\n"
    out = hccn.render_conf(text, {0: {"netdetect": "10.10.0.1", "netmask": "255.255.0.0", "gateway": None}})
    assert out == "address_0=10.10.1.1\nnetmask_0=255.255.0.0\nnetdetect_0=10.10.0.1\nsend_arp_status_0=1\n"


def test_render_conf_new_device_block_goes_last_in_real_key_order():
    out = hccn.render_conf(fixture("hccn-conf-device0.conf"), {
        1: {"tls_enable": 0, "address": "29.1.137.206", "netmask": "255.255.0.0", "send_arp_status": 1}})
    assert out.splitlines()[5:] == ["address_1=29.1.137.206", "netmask_1=255.255.0.0", "send_arp_status_1=1",
                                    "tls_enable_1=0"]
    assert hccn.parse_conf(out)[0] == hccn.parse_conf(fixture("hccn-conf-device0.conf"))[0]


def test_render_conf_collapses_duplicate_lines_of_a_key():
    out = hccn.render_conf("address_0=1.1.1.1\nmisc=1\naddress_0=2.2.2.2\n", {0: {"address": "3.3.3.3"}})
    assert out == "address_0=3.3.3.3\nmisc=1\n"


def test_parse_pfc_as_cann_documents_it():
    # CANN's hixl troubleshooting guide: PFC on queue 4 only, the queue it recommends.
    assert hccn.parse_pfc(fixture("hccn-pfc-g-hixl-doc.txt")) == [4]


def test_parse_pfc_several_none_and_garbage():
    table = "PFC configuration:\npriority   0 1 2 3 4 5 6 7\nenabled    %s\n"
    assert hccn.parse_pfc(table % "0 0 0 1 1 0 0 0") == [3, 4]
    assert hccn.parse_pfc(table % "0 0 0 0 0 0 0 0") == []
    for text in ("", "Execute failed: Link status is down.", table % "0 0 0 0 1 0 0", table % "0 0 0 0 2 0 0 0",
                 "PFC configuration:\npriority   0 1 2 3 4 5 6 7\n"):
        with pytest.raises(ValueError):
            hccn.parse_pfc(text)
