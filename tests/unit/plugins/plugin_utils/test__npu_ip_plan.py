# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""NPU address plan, its checks, the mesh gate and the rank table (plugins/plugin_utils/_npu_ip_plan.py)."""

from __future__ import annotations

import copy
import json
import os
from unittest.mock import patch

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.filter import npu_ip_plan as plan_filter
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _npu_ip_plan as plan_utils
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._npu_ip_plan import (
    compute_plan,
    evaluate_gate,
    gate_table,
    ping_targets,
    plan_problems,
    rank_table,
)

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")

HOSTS = ["master1", "worker1", "worker2"]


def nodes(count=3, devices=8, names=None):
    names = names or (HOSTS if count == 3 else ["node%02d" % n for n in range(count)])
    return [{"host": name, "devices": list(range(devices))} for name in names]


def addresses(plan, host):
    return [device["address"] for device in plan["hosts"][host]["devices"]]


def all_addresses(plan):
    return [device["address"] for host in plan["order"] for device in plan["hosts"][host]["devices"]]


# ---------------------------------------------------------------- allocation

def test_default_cidr_gives_one_row_per_node():
    plan = compute_plan(nodes(), hosts=HOSTS)
    assert (plan["cidr"], plan["netmask"], plan["layout"], plan["stride"], plan["offset"]) == (
        "10.10.0.0/16", "255.255.0.0", "rows", 256, 257)
    assert addresses(plan, "master1") == ["10.10.1.%d" % (d + 1) for d in range(8)]
    assert addresses(plan, "worker1")[0] == "10.10.2.1"
    assert addresses(plan, "worker2")[-1] == "10.10.3.8"
    assert plan["hosts"]["worker2"]["devices"][7] == {
        "index": 7, "address": "10.10.3.8", "netmask": "255.255.0.0", "gateway": None, "netdetect": None}
    assert plan_problems(plan) == []


def test_sixteen_nodes_of_sixteen_devices_fit_a_slash_16_uniquely():
    plan = compute_plan(nodes(16, 16))
    flat = all_addresses(plan)
    assert len(flat) == len(set(flat)) == 256
    assert addresses(plan, "node15")[15] == "10.10.16.16"
    assert plan_problems(plan) == []


def test_large_cluster_switches_to_packed_when_rows_do_not_fit():
    # /20 = 4096 addresses: 16 rows fit 15 nodes + the spare row, 40 nodes do not.
    plan = compute_plan(nodes(40, 16), cidr="10.20.0.0/20")
    assert (plan["layout"], plan["stride"], plan["offset"]) == ("packed", 16, 1)
    assert addresses(plan, "node00")[:2] == ["10.20.0.1", "10.20.0.2"]
    assert addresses(plan, "node39")[-1] == "10.20.2.128"
    assert plan_problems(plan) == []


def test_slash_24_with_16_by_16_devices_is_refused():
    plan = compute_plan(nodes(16, 16), cidr="192.168.5.0/24")
    assert plan["layout"] == "packed" and plan["usable"] == 254
    problems = plan_problems(plan)
    assert problems[0].startswith("256 NPU devices need 256 addresses, but 192.168.5.0/24 holds only 254")
    assert "node15 device 14: 192.168.5.255 is the broadcast address of 192.168.5.0/24" in problems
    assert "node15 device 15: 192.168.6.0 is outside 192.168.5.0/24" in problems


def test_slash_24_holds_15_nodes_of_16_devices():
    plan = compute_plan(nodes(15, 16), cidr="192.168.5.0/24")
    assert addresses(plan, "node14")[-1] == "192.168.5.240"
    assert plan_problems(plan) == []


def test_slash_30_has_two_usable_addresses():
    plan = compute_plan(nodes(2, 1, ["a", "b"]), cidr="10.0.0.4/30")
    assert all_addresses(plan) == ["10.0.0.5", "10.0.0.6"]
    assert plan_problems(plan) == []
    problems = plan_problems(compute_plan(nodes(3, 1, ["a", "b", "c"]), cidr="10.0.0.4/30"))
    assert problems[0].startswith("3 NPU devices need 3 addresses, but 10.0.0.4/30 holds only 2")
    assert "c device 0: 10.0.0.7 is the broadcast address of 10.0.0.4/30" in problems


def test_slash_31_and_32_use_every_address():
    plan = compute_plan(nodes(2, 1, ["a", "b"]), cidr="10.0.0.4/31")
    assert all_addresses(plan) == ["10.0.0.4", "10.0.0.5"]
    assert plan["netmask"] == "255.255.255.254"
    assert plan_problems(plan) == []
    assert plan_problems(compute_plan(nodes(1, 2, ["a"]), cidr="10.0.0.4/31")) == []
    single = compute_plan(nodes(1, 1, ["a"]), cidr="10.0.0.9/32")
    assert all_addresses(single) == ["10.0.0.9"] and plan_problems(single) == []
    assert "holds only 1" in plan_problems(compute_plan(nodes(1, 2, ["a"]), cidr="10.0.0.9/32"))[0]


def test_host_bits_in_the_cidr_are_dropped():
    assert compute_plan(nodes(), cidr="10.10.7.7/16")["cidr"] == "10.10.0.0/16"


@pytest.mark.parametrize(("cidr", "message"), [
    ("10.10.0.0/33", "is not a CIDR"),
    ("banana", "is not a CIDR"),
    ("fd00::/64", "is not an IPv4 CIDR"),
    ("10.10.0.0", "has no prefix length"),
])
def test_bad_cidr_is_a_problem_not_a_crash(cidr, message):
    plan = compute_plan(nodes(), cidr=cidr)
    assert addresses(plan, "master1")[0] is None
    problems = plan_problems(plan)
    assert len(problems) == 1 and message in problems[0]


def test_positions_come_from_the_member_list_under_limit():
    # worker1 is not in the play: worker2 keeps its row.
    plan = compute_plan([n for n in nodes() if n["host"] != "worker1"], hosts=HOSTS)
    assert plan["order"] == HOSTS
    assert plan["hosts"]["worker1"]["devices"] == []
    assert addresses(plan, "worker2")[0] == "10.10.3.1"


def test_nodes_outside_the_member_list_are_appended():
    plan = compute_plan(nodes(), hosts=["worker1"])
    assert plan["order"] == ["worker1", "master1", "worker2"]
    assert addresses(plan, "worker1")[0] == "10.10.1.1"


def test_accelerator_facts_devices_use_phy_id_then_npu_id():
    a3 = [{"npu_id": n // 2, "chip_id": n % 2, "phy_id": n, "index": n} for n in range(16)]
    a2 = [{"npu_id": n, "chip_id": 0, "phy_id": None, "index": n} for n in (0, 1, 2, 3, 4, 6, 7)]  # NPU 5 missing
    plan = compute_plan([{"host": "a3", "devices": a3}, {"host": "a2", "devices": a2}])
    assert [d["index"] for d in plan["hosts"]["a3"]["devices"]] == list(range(16))
    assert [d["index"] for d in plan["hosts"]["a2"]["devices"]] == [0, 1, 2, 3, 4, 6, 7]
    assert addresses(plan, "a2")[-1] == "10.10.2.8"


def test_explicit_stride_and_offset():
    plan = compute_plan(nodes(3, 8), cidr="10.0.0.0/24", stride=16, offset=32)
    assert (plan["layout"], plan["stride"], plan["offset"]) == ("custom", 16, 32)
    assert addresses(plan, "worker1")[0] == "10.0.0.48"
    assert plan_problems(plan) == []
    plan = compute_plan(nodes(2, 16, ["a", "b"]), stride="8", offset="-1")
    assert plan["offset"] == 1 and addresses(plan, "b")[0] == "10.10.0.9"
    problems = plan_problems(plan)
    assert any("a has device indices up to 15, more than the stride of 8" in p for p in problems)
    assert any("10.10.0.9 is planned for 2 devices: a device 8, b device 0" == p for p in problems)


def test_layout_past_the_ipv4_space():
    plan = compute_plan(nodes(2, 2, ["a", "b"]), cidr="255.255.255.252/30", offset=4)
    assert addresses(plan, "b") == [None, None]
    problems = plan_problems(plan)
    assert "b device 0: no address left: the layout runs past the end of the IPv4 space" in problems
    assert "a device 0: 0.0.0.0 is outside 255.255.255.252/30" not in problems


# ----------------------------------------------------------------- overrides

def test_per_device_override_from_host_vars():
    data = nodes()
    data[1]["addresses"] = {3: "10.10.9.9", "5": "10.10.9.10"}
    plan = compute_plan(data, hosts=HOSTS)
    assert addresses(plan, "worker1")[3] == "10.10.9.9"
    assert addresses(plan, "worker1")[5] == "10.10.9.10"
    assert addresses(plan, "worker1")[4] == "10.10.2.5"
    assert plan["hosts"]["worker1"]["overrides"] == [3, 5]
    assert plan_problems(plan) == []


def test_per_host_override_as_a_list():
    data = nodes(2, 2, ["a", "b"])
    data[0]["addresses"] = ["10.10.50.1", "10.10.50.2"]
    plan = compute_plan(data)
    assert addresses(plan, "a") == ["10.10.50.1", "10.10.50.2"]


def test_override_problems_name_host_device_and_address():
    data = nodes()
    data[1]["addresses"] = {0: "10.10.1.1", 1: "172.16.0.1", 2: "not-an-ip", 3: "10.10.0.0", 9: "10.10.2.99"}
    data[2]["addresses"] = {"x": "10.10.3.1"}
    problems = plan_problems(compute_plan(data, hosts=HOSTS))
    assert "10.10.1.1 is planned for 2 devices: master1 device 0, worker1 device 0" in problems
    assert "worker1 device 1: 172.16.0.1 is outside 10.10.0.0/16 (npu_network_addresses)" in problems
    assert "worker1 device 2: 'not-an-ip' is not an IPv4 address (npu_network_addresses)" in problems
    assert "worker1 device 3: 10.10.0.0 is the network address of 10.10.0.0/16 (npu_network_addresses)" in problems
    assert ("worker1: npu_network_addresses sets device 9 to 10.10.2.99, but the host has no such device "
            "(devices: 0-7)") in problems
    assert "host worker2: npu_network_addresses has key 'x', which is not a device index" in problems
    assert len(problems) == 6


def test_override_that_is_not_a_mapping():
    data = nodes(1, 1, ["a"])
    data[0]["addresses"] = "10.10.1.1"
    assert "must map device index to address" in plan_problems(compute_plan(data))[0]


# ---------------------------------------------------------------- collisions

def test_collision_with_an_existing_host_interface():
    plan = compute_plan(nodes(), hosts=HOSTS)
    problems = plan_problems(plan, {"worker2": ["10.10.1.3", "172.18.0.4"], "master1": ["10.10.2.1/16"]})
    assert problems == [
        "master1 device 2: 10.10.1.3 is already an address of a host interface on worker2",
        "worker1 device 0: 10.10.2.1 is already an address of a host interface on master1",
    ]


def test_gateway_and_netdetect():
    plan = compute_plan(nodes(), hosts=HOSTS, gateway="10.10.0.1", netdetect="gateway")
    device = plan["hosts"]["worker1"]["devices"][0]
    assert (device["gateway"], device["netdetect"]) == ("10.10.0.1", "10.10.0.1")
    assert plan_problems(plan) == []
    fixed = compute_plan(nodes(), netdetect="10.10.0.254")
    assert {d["netdetect"] for h in HOSTS for d in fixed["hosts"][h]["devices"]} == {"10.10.0.254"}


def test_netdetect_peer_is_the_same_index_device_of_the_next_node():
    plan = compute_plan(nodes(), hosts=HOSTS, netdetect="peer")
    assert plan["hosts"]["master1"]["devices"][3]["netdetect"] == "10.10.2.4"
    assert plan["hosts"]["worker2"]["devices"][3]["netdetect"] == "10.10.1.4"
    assert compute_plan(nodes(1, 2, ["a"]), netdetect="peer")["hosts"]["a"]["devices"][0]["netdetect"] is None


@pytest.mark.parametrize(("gateway", "netdetect", "message"), [
    ("10.20.0.1", None, "npu_network_gateway: 10.20.0.1 is outside 10.10.0.0/16"),
    ("10.10.255.255", None, "npu_network_gateway: 10.10.255.255 is the broadcast address of 10.10.0.0/16"),
    ("10.10.2.1", None, "npu_network_gateway 10.10.2.1 is also planned for worker1 device 0"),
    ("gw", None, "npu_network_gateway 'gw' is not an IPv4 address"),
    (None, "gateway", "npu_network_netdetect is 'gateway' but no npu_network_gateway is set"),
    (None, "nearby", "npu_network_netdetect 'nearby' is not an IPv4 address, 'gateway' or 'peer'"),
])
def test_gateway_and_netdetect_problems(gateway, netdetect, message):
    assert plan_problems(compute_plan(nodes(), hosts=HOSTS, gateway=gateway, netdetect=netdetect)) == [message]


def test_bad_devices_are_reported():
    plan = compute_plan([{"host": "a", "devices": [0, "x", {"name": "910B"}, 0]}])
    assert [d["index"] for d in plan["hosts"]["a"]["devices"]] == [0]
    assert len(plan_problems(plan)) == 2


def test_malformed_nodes_raise():
    with pytest.raises(plan_utils.PlanError):
        compute_plan([{"devices": [0]}])


# ------------------------------------------------------------------- targets

def test_ping_targets_same_index_and_all_pairs():
    plan = compute_plan(nodes(), hosts=HOSTS)
    same = ping_targets(plan, "master1")
    assert len(same) == 16
    assert same[:2] == [
        {"device": 0, "address": "10.10.2.1", "peer": "worker1", "peer_device": 0},
        {"device": 0, "address": "10.10.3.1", "peer": "worker2", "peer_device": 0},
    ]
    assert len(ping_targets(plan, "master1", all_pairs=True)) == 8 * 16
    assert {t["peer"] for t in ping_targets(plan, "master1", hosts=["master1", "worker2"])} == {"worker2"}
    assert ping_targets(plan, "unknown") == []


# ---------------------------------------------------------------- rank table

def test_rank_table_lists_every_device_with_string_values():
    plan = compute_plan(nodes(), hosts=HOSTS)
    table = rank_table(plan, {"master1": "172.18.0.2", "worker1": "172.18.0.3", "worker2": "172.18.0.4"})
    assert (table["server_count"], table["status"], table["version"]) == ("3", "completed", "1.0")
    assert [s["server_id"] for s in table["server_list"]] == ["172.18.0.2", "172.18.0.3", "172.18.0.4"]
    assert table["server_list"][0]["container_ip"] == "172.18.0.2"
    devices = [d for s in table["server_list"] for d in s["device"]]
    assert [d["rank_id"] for d in devices] == [str(n) for n in range(24)]
    assert devices[8] == {"device_id": "0", "device_ip": "10.10.2.1", "rank_id": "8"}
    assert all(isinstance(v, str) for d in devices for v in d.values())
    json.dumps(table)


def test_rank_table_needs_every_server_address_and_skips_empty_hosts():
    plan = compute_plan([n for n in nodes() if n["host"] != "worker1"], hosts=HOSTS)
    table = rank_table(plan, {"master1": "a", "worker2": "b"})
    assert table["server_count"] == "2"
    assert table["server_list"][1]["device"][0]["rank_id"] == "8"
    assert rank_table(plan, {"master1": "a"}, hosts=["master1"])["server_count"] == "1"
    with pytest.raises(plan_utils.PlanError, match="worker2"):
        rank_table(plan, {"master1": "a"})


# ---------------------------------------------------------------------- gate

def facts_for(plan, host, link=None, health=None, tls=1, netdetect=None, unreachable=(), address=None, pfc=None):
    link = link or {}
    devices = []
    for device in plan["hosts"][host]["devices"]:
        index = device["index"]
        devices.append({"index": index, "address": (address or {}).get(index, device["address"]),
                        "netmask": device["netmask"], "link": link.get(index, "UP"),
                        "net_health": (health or {}).get(index, "Success" if netdetect else "Init"),
                        "netdetect": netdetect, "tls": tls, "pfc": (pfc or {}).get(index, [4]), "errors": []})
    pings = []
    for target in ping_targets(plan, host):
        ok = (target["device"], target["peer"]) not in unreachable
        pings.append(dict(target, reachable=ok, rtt_ms=0.08 if ok else None, loss_pct=0.0 if ok else 100.0,
                          error=None if ok else "3 packets transmitted, 0 received, 100.00% packet loss"))
    return {"devices": devices, "pings": pings}


def config_for(plan, host, mismatches=(), changes=None):
    devices = []
    for device in plan["hosts"][host]["devices"]:
        before = dict(device)
        keys = (changes or {}).get(device["index"], [])
        for key in keys:
            before[key] = None
        devices.append({"index": device["index"], "before": before, "planned": dict(device), "changes": list(keys)})
    return {"devices": devices, "conf_mismatches": list(mismatches), "hccn_conf": "/etc/hccn.conf"}


@pytest.fixture(name="plan")
def fixture_plan():
    return compute_plan(nodes(), hosts=HOSTS)


def healthy(plan):
    return dict((host, {"config": config_for(plan, host), "facts": facts_for(plan, host)}) for host in HOSTS)


def test_gate_passes_on_a_healthy_cluster(plan):
    report = evaluate_gate(plan, healthy(plan))
    assert report["ok"] and report["failures"] == []
    assert report["summary"] == {"hosts": 3, "devices": 24, "pairs": 48, "reachable": 48, "lossy": 0,
                                 "max_loss_pct": 0.0, "all_pairs": False}
    assert report["matrix"][0] == {"host": "master1", "device": 0, "address": "10.10.1.1", "peer": "worker1",
                                   "peer_device": 0, "peer_address": "10.10.2.1", "reachable": True, "rtt_ms": 0.08,
                                   "loss_pct": 0.0, "transmitted": None, "received": None, "lossy": False,
                                   "error": None}
    table = gate_table(report).splitlines()
    assert table[0] == "NPU network: 24 device(s) on 3 node(s); 48/48 pings answered, 0 with loss above 0% (same-index peers); OK"
    assert table[1].split() == ["host", "dev", "address", "link", "health", "tls", "->master1", "->worker1", "->worker2"]
    assert table[2].split() == ["master1", "0", "10.10.1.1", "UP", "Init", "1", "-", "ok", "ok"]
    assert len(table) == 26


def test_gate_collects_link_health_ping_and_conf_failures(plan):
    results = healthy(plan)
    results["worker1"]["facts"] = facts_for(plan, "worker1", link={2: "DOWN"}, health={2: "Fault"},
                                            netdetect="10.10.0.1", unreachable={(2, "master1"), (2, "worker2")})
    results["master1"]["facts"] = facts_for(plan, "master1", unreachable={(2, "worker1")})
    results["worker2"]["config"] = config_for(plan, "worker2", mismatches=[
        {"device": 4, "key": "address", "conf_key": "address", "file": "10.10.9.9", "live": "10.10.3.5"}])
    report = evaluate_gate(plan, results)
    assert not report["ok"]
    failures = report["failures"]
    assert "worker1 device 2 (10.10.2.3): link status DOWN" in failures
    assert "worker1 device 2 (10.10.2.3): net health status Fault (netdetect address 10.10.0.1)" in failures
    assert ("master1 device 2 (10.10.1.3) cannot reach worker1 device 2 (10.10.2.3): "
            "3 packets transmitted, 0 received, 100.00% packet loss") in failures
    assert ("worker2 device 4: /etc/hccn.conf has address_4=10.10.9.9 but the device has address 10.10.3.5"
            in failures)
    assert len(failures) == 6
    assert report["summary"]["reachable"] == 45
    rows = {tuple(line.split()[:2]): line.split() for line in gate_table(report).splitlines()[2:]}
    assert rows[("worker1", "2")][3:] == ["DOWN", "Fault", "1", "FAIL", "-", "FAIL"]
    assert rows[("master1", "2")][-3:] == ["-", "FAIL", "ok"]


def test_gate_tls_must_be_equal_or_enforced(plan):
    results = healthy(plan)
    results["worker2"]["facts"] = facts_for(plan, "worker2", tls=0)
    report = evaluate_gate(plan, results)
    assert report["failures"] == [
        "the TLS switch differs between devices (HCCL refuses links between them): 0 on worker2 devices 0-7; "
        "1 on master1 devices 0-7, worker1 devices 0-7; set prepare_npu_network_enforce_tls: true to align them"]
    enforced = evaluate_gate(plan, results, {"enforce_tls": True, "tls": 0})
    assert len(enforced["failures"]) == 16
    assert enforced["failures"][0] == "master1 device 0: TLS switch is 1, expected 0"
    assert evaluate_gate(plan, results, {"enforce_tls": True, "tls": 1, "pending_ok": True})["ok"]


def test_gate_accepts_a_list_of_results_and_reports_pending_hosts(plan):
    results = [dict(value, host=host) for host, value in healthy(plan).items()]
    results[1]["config"]["changed"] = True
    report = evaluate_gate(plan, results)
    assert report["ok"] and report["pending"] == ["worker1"]


def test_gate_verify_only_turns_differences_into_failures(plan):
    results = healthy(plan)
    results["worker2"]["config"] = config_for(plan, "worker2", changes={3: ["address", "netmask"], 4: ["tls"]})
    results["worker1"]["config"] = config_for(plan, "worker1", changes={0: ["address"]})
    results["worker1"]["config"]["devices"][0]["before"]["address"] = "10.10.0.10"
    assert evaluate_gate(plan, results)["ok"]
    report = evaluate_gate(plan, results, {"verify_only": True})
    assert report["failures"] == ["worker1 device 0 has address 10.10.0.10, the plan says 10.10.2.1",
                                  "worker2 device 3 has no address (the plan says 10.10.3.4)",
                                  "worker2 device 4: tls is (unset), the plan says (absent)"]


def test_gate_without_config_compares_live_addresses(plan):
    results = healthy(plan)
    for host in HOSTS:
        results[host]["config"] = None
    results["worker1"]["facts"] = facts_for(plan, "worker1", address={1: None, 2: "10.10.1.1"})
    failures = evaluate_gate(plan, results)["failures"]
    assert "worker1 device 1 has no address (the plan says 10.10.2.2)" in failures
    assert "worker1 device 2 has address 10.10.1.1, the plan says 10.10.2.3" in failures
    assert "10.10.1.1 is configured on 2 devices: master1 device 0, worker1 device 2" in failures
    assert evaluate_gate(plan, results, {"pending_ok": True})["failures"] == [
        "10.10.1.1 is configured on 2 devices: master1 device 0, worker1 device 2"]


def test_gate_missing_facts_devices_and_peer_devices():
    data = nodes()
    data[2]["devices"] = list(range(7))
    plan = compute_plan(data, hosts=HOSTS)
    results = healthy(plan)
    results["worker1"]["facts"]["devices"] = results["worker1"]["facts"]["devices"][1:]
    results["worker1"]["facts"]["devices"][0]["errors"] = ["-tls -g failed (rc=22): Execute failed: Link status is down."]
    results["worker2"] = {"config": None, "facts": None}
    failures = evaluate_gate(plan, results)["failures"]
    assert failures == [
        "device 7 exists on master1, worker1 but not on worker2: it has no same-index peer there",
        "worker1 device 0: the device was not queried",
        "worker1 device 1 (10.10.2.2): -tls -g failed (rc=22): Execute failed: Link status is down.",
        "worker2: no NPU network facts were read (the check did not run there)",
    ]


def test_gate_table_all_pairs_cells():
    plan = compute_plan(nodes(2, 2, ["a", "b"]))
    results = {}
    for host in ("a", "b"):
        pings = [dict(t, reachable=not (host == "a" and t["peer_device"] == 1), rtt_ms=None, loss_pct=None, error=None)
                 for t in ping_targets(plan, host, all_pairs=True)]
        results[host] = {"config": None, "facts": {"devices": facts_for(plan, host)["devices"], "pings": pings}}
    report = evaluate_gate(plan, results, {"all_pairs": True})
    lines = gate_table(report).splitlines()
    assert "2/4 pings" not in lines[0] and "6/8 pings answered, 0 with loss above 0% (all pairs)" in lines[0]
    assert lines[2].split()[-2:] == ["-", "1/2"]
    assert "a device 0 (10.10.1.1) cannot reach b device 1 (10.10.2.2): no reply" in report["failures"]


def test_partial_loss_fails_the_pair_and_shows_in_the_matrix(plan):
    """3 sent, 2 received (the hccn_tool capture of the field corpus) is 33 % loss: unhealthy by default."""
    results = healthy(plan)
    with open(os.path.join(FIXTURES, "hccn-ping-g-partial-loss-doc.txt"), encoding="utf-8") as handle:
        parsed = hccn.parse_ping(handle.read())
    ping = results["worker1"]["facts"]["pings"][2]
    ping.update(reachable=parsed["reachable"], loss_pct=parsed["loss_pct"], transmitted=parsed["transmitted"],
                received=parsed["received"])
    report = evaluate_gate(plan, results)
    assert not report["ok"]
    assert report["failures"] == [
        "worker1 device %d (%s) loses 33.33%% of its pings to %s device %d (%s) (3 sent, 2 received), more than "
        "prepare_npu_ping_max_loss_pct 0: check the link and the optics" % (
            ping["device"], plan["hosts"]["worker1"]["devices"][ping["device"]]["address"], ping["peer"],
            ping["peer_device"], ping["address"])]
    assert report["summary"]["reachable"] == 48 and report["summary"]["lossy"] == 1
    table = gate_table(report).splitlines()
    assert "48/48 pings answered, 1 with loss above 0%" in table[0]
    row = [line for line in table if line.startswith("worker1") and line.split()[1] == str(ping["device"])][0]
    assert "33.33%" in row.split()
    # A higher limit accepts the same pair; an exact-limit loss is not above it.
    assert evaluate_gate(plan, results, {"max_loss_pct": 40})["ok"]
    assert evaluate_gate(plan, results, {"max_loss_pct": 33.33})["ok"]


def test_loss_is_computed_from_the_counts_when_the_summary_has_no_percentage(plan):
    results = healthy(plan)
    results["master1"]["facts"]["pings"][0].update(loss_pct=None, transmitted=4, received=3)
    report = evaluate_gate(plan, results)
    assert report["matrix"][0]["loss_pct"] == 25.0
    assert len(report["failures"]) == 1 and "loses 25% of its pings" in report["failures"][0]


# ------------------------------------------------------------------- filters

def test_filters_wrap_the_functions_and_errors():
    filters = plan_filter.FilterModule().filters()
    plan = filters["npu_ip_plan"](nodes(), HOSTS, "10.10.0.0/16")
    assert filters["npu_ip_plan_problems"](plan, {}) == []
    assert len(filters["npu_ping_targets"](plan, "worker1", None, "yes")) == 8 * 16
    report = filters["npu_network_gate"](plan, healthy(plan), {})
    assert filters["npu_network_gate_table"](report).startswith("NPU network: 24 device(s)")
    assert filters["npu_rank_table"](plan, {"master1": "a", "worker1": "b", "worker2": "c"})["server_count"] == "3"
    with pytest.raises(AnsibleFilterError, match="expects a list"):
        filters["npu_ip_plan"]("master1")
    with pytest.raises(AnsibleFilterError, match="malformed input"):
        filters["npu_network_gate"]({"order": ["a"]}, {"a": {}})
    with pytest.raises(AnsibleFilterError, match="no server address"):
        filters["npu_rank_table"](plan, {})


def test_missing_netaddr_is_a_clear_error():
    with patch.object(plan_utils, "netaddr", None):
        with pytest.raises(AnsibleFilterError, match="netaddr"):
            plan_filter.npu_ip_plan(nodes())


def test_plan_is_json_serialisable_and_not_mutated_by_checks():
    plan = compute_plan(nodes(), hosts=HOSTS, gateway="10.10.0.1", netdetect="peer")
    before = copy.deepcopy(plan)
    plan_problems(plan, {"master1": ["10.10.1.1"]})
    evaluate_gate(plan, healthy(plan))
    assert plan == before
    assert json.loads(json.dumps(plan)) == plan


def test_gate_names_the_device_whose_pfc_priority_differs(plan):
    results = healthy(plan)
    results["worker2"]["facts"] = facts_for(plan, "worker2", pfc={5: [3]})
    report = evaluate_gate(plan, results)
    assert report["failures"] == [
        "worker2 device 5: PFC enabled on priority 3, the other 23 devices on priority 4: NPUs and switches must agree "
        "on the lossless queue (hccn_tool -i 5 -pfc -s, then the switch port)"]
    assert evaluate_gate(plan, results, {"qos_check": False})["ok"]


def test_gate_checks_hccl_rdma_sl_against_the_pfc_priority(plan):
    results = healthy(plan)
    assert evaluate_gate(plan, results, {"rdma_sl": "4"})["ok"]
    report = evaluate_gate(plan, results, {"rdma_sl": "3"})
    assert report["failures"] == [
        "HCCL_RDMA_SL is 3 but PFC is enabled on priority 4 of the NPUs: HCCL's RDMA traffic would not be lossless; "
        "set HCCL_RDMA_SL to the PFC priority (prepare_env_extra) or enable PFC on 3"]
    # Every NPU on queue 3 and CANN's default service level 4.
    for host in HOSTS:
        results[host]["facts"] = facts_for(plan, host, pfc=dict((index, [3]) for index in range(8)))
    assert "HCCL_RDMA_SL is 4 (CANN's default)" in evaluate_gate(plan, results)["failures"][0]
    # PFC off everywhere (lossy RoCE) or unreadable (no link, an older driver) is not a QoS mismatch.
    for host in HOSTS:
        results[host]["facts"] = facts_for(plan, host, pfc=dict((index, []) for index in range(8)))
    assert evaluate_gate(plan, results)["ok"]
    for host in HOSTS:
        results[host]["facts"] = facts_for(plan, host, pfc=dict((index, None) for index in range(8)))
    assert evaluate_gate(plan, results, {"rdma_sl": 7})["ok"]
