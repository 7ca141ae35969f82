# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""npu_network and npu_network_info end to end against the fake hccn_tool of tests/fakes.

The modules run in-process and call tests/fakes/bin/hccn_tool as a real
subprocess; each fake node has its own state file and hccn.conf under
tmp_path and all share one fabric directory, selected with the
LLM_CLUSTER_FAKE_* environment variables (tests/fakes/README.md). Every
fake invocation costs a Python start-up, so the nodes have one or two NPUs.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from unittest.mock import patch

import pytest

from ansible.module_utils import basic

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn
from ansible_collections.aihost.llm_cluster.plugins.modules import npu_network, npu_network_info
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _npu_ip_plan as plan_utils
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import (
    AnsibleExitJson,
    AnsibleFailJson,
    patched_exit_fail,
    set_module_args,
)

ROOT = Path(__file__).resolve().parents[4]
FAKE_TOOL = str(ROOT / "tests" / "fakes" / "bin" / "hccn_tool")
PROFILE = ROOT / "tests" / "fakes" / "profiles" / "atlas-800i-a2.json"


class Node(object):
    """One fake host: state file, hccn.conf and the environment that selects them."""

    def __init__(self, base, name, fabric, devices, **knobs):
        self.name = name
        self.dir = base / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.state_path = self.dir / "state.json"
        self.conf_path = self.dir / "hccn.conf"
        self.env = {
            "LLM_CLUSTER_FAKE_STATE": str(self.state_path),
            "LLM_CLUSTER_FAKE_HCCN_CONF": str(self.conf_path),
            "LLM_CLUSTER_FAKE_FABRIC": str(fabric),
            "LLM_CLUSTER_FAKE_HOSTNAME": name,
        }
        self.devices = devices
        self.write(**knobs)

    def write(self, **knobs):
        """(Re)write the state: like a reboot, the fake then reloads its settings from hccn.conf."""
        state = json.loads(PROFILE.read_text(encoding="utf-8"))
        state["npu"]["devices"] = state["npu"]["devices"][:self.devices]
        state.update(knobs)
        self.state_path.write_text(json.dumps(state), encoding="utf-8")

    def conf(self):
        return hccn.parse_conf(self.conf_path.read_text(encoding="utf-8"))


@pytest.fixture(name="cluster")
def fixture_cluster(tmp_path, monkeypatch):
    # The wrapper runs `python3`: make it the interpreter running the tests.
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))

    def make(name, devices=1, **knobs):
        return Node(tmp_path, name, tmp_path / "fabric", devices, **knobs)

    return make


def run(module, node, args, check_mode=False):
    """Run ``module`` on ``node``; returns (result, argv of every hccn_tool call)."""
    args = dict(args, hccn_tool=FAKE_TOOL)
    if module is npu_network:
        args.setdefault("hccn_conf", str(node.conf_path))
        args.setdefault("state_dir", str(node.dir / "llm_cluster"))
    if check_mode:
        args["_ansible_check_mode"] = True
    calls = []
    real = basic.AnsibleModule.run_command

    def spy(self, argv, *more, **kwargs):
        calls.append(list(argv))
        return real(self, argv, *more, **kwargs)

    with patch.dict(os.environ, node.env), set_module_args(args), patched_exit_fail(), \
            patch.object(basic.AnsibleModule, "run_command", spy):
        try:
            module.main()
        except (AnsibleExitJson, AnsibleFailJson) as exc:
            return exc.args[0], calls
    raise AssertionError("module neither exited nor failed")


def set_calls(calls):
    return [argv for argv in calls if "-s" in argv]


def test_configure_then_second_run_makes_no_set_call(cluster):
    node = cluster("master1", devices=2)
    plan = plan_utils.compute_plan([{"host": "master1", "devices": [0, 1]}])
    args = dict(devices=plan["hosts"]["master1"]["devices"], tls=0)

    result, calls = run(npu_network, node, args)
    assert result["changed"] is True, result
    assert len(set_calls(calls)) == 4
    assert [row["after"]["address"] for row in result["devices"]] == ["10.10.1.1", "10.10.1.2"]
    assert [row["before"]["tls"] for row in result["devices"]] == [1, 1]  # the fake's TLS is on until disabled
    assert node.conf() == {
        0: {"address": "10.10.1.1", "netmask": "255.255.0.0", "send_arp_status": "1", "tls_enable": "0"},
        1: {"address": "10.10.1.2", "netmask": "255.255.0.0", "send_arp_status": "1", "tls_enable": "0"},
    }

    again, calls = run(npu_network, node, args)
    assert again["changed"] is False and again["commands"] == []
    assert set_calls(calls) == [] and len(calls) == 8

    # A stale entry in hccn.conf (the live address is right) is reported, and repaired on request.
    text = node.conf_path.read_text(encoding="utf-8").replace("address_1=10.10.1.2", "address_1=10.10.9.9")
    node.conf_path.write_text(text, encoding="utf-8")
    stale, calls = run(npu_network, node, args)
    assert stale["failed"] is True and set_calls(calls) == []
    assert "device 1: %s has address_1=10.10.9.9, the device has address 10.10.1.2" % node.conf_path in stale["msg"]
    repaired, calls = run(npu_network, node, dict(args, conf_repair=True))
    assert repaired["changed"] is True and repaired["conf_mismatches"] == []
    assert [" ".join(argv[1:]) for argv in set_calls(calls)] == ["-i 1 -ip -s address 10.10.1.2 netmask 255.255.0.0"]
    assert node.conf()[1]["address"] == "10.10.1.2"


def test_check_mode_against_the_fake_sets_nothing(cluster):
    node = cluster("master1", quirks={"ip_unset": "empty", "netdetect_label": "addr"})
    args = dict(devices=[dict(index=0, address="10.10.1.1", netmask="255.255.0.0", netdetect="10.10.0.1")])
    result, calls = run(npu_network, node, args, check_mode=True)
    assert result["changed"] is True and set_calls(calls) == []
    assert result["devices"][0]["before"]["address"] is None  # older driver: -ip -g prints nothing
    assert not node.conf_path.exists()
    result, calls = run(npu_network, node, args)
    assert result["changed"] is True and result["devices"][0]["after"]["netdetect"] == "10.10.0.1"


def test_mesh_between_fake_nodes_and_its_faults(cluster):
    nodes = {"master1": cluster("master1"), "worker1": cluster("worker1")}
    plan = plan_utils.compute_plan([{"host": name, "devices": [0]} for name in nodes], hosts=list(nodes))
    for name, node in nodes.items():
        result, calls = run(npu_network, node, dict(devices=plan["hosts"][name]["devices"]))
        assert result["changed"] is True, result

    def gate(**settings):
        """The role's order: configure every node (nothing to do here), then read and ping."""
        results = {}
        for name, node in nodes.items():
            config, calls = run(npu_network, node, dict(devices=plan["hosts"][name]["devices"], conf_check="warn"))
            assert config["changed"] is False and set_calls(calls) == []
            results[name] = {"config": config}
        for name, node in nodes.items():
            facts, calls = run(npu_network_info, node, dict(devices=[0], ping=plan_utils.ping_targets(plan, name)))
            assert set_calls(calls) == []
            results[name]["facts"] = facts
        return plan_utils.evaluate_gate(plan, results, settings)

    report = gate()
    assert report["ok"], report["failures"]
    assert report["matrix"][0]["peer_address"] == "10.10.2.1" and report["matrix"][0]["rtt_ms"] == pytest.approx(0.081333)
    assert report["devices"][0]["tls"] == 1 and report["devices"][0]["link"] == "UP"

    # Link down on worker1 device 0 (a state rewrite: the fake reloads its address from hccn.conf).
    nodes["worker1"].write(link={"0": "DOWN"})
    failures = gate()["failures"]
    assert "worker1 device 0 (10.10.2.1): link status DOWN" in failures
    assert "worker1 device 0 (10.10.2.1) cannot reach master1 device 0 (10.10.1.1): Execute failed: Link status is down." \
        in failures
    assert ("master1 device 0 (10.10.1.1) cannot reach worker1 device 0 (10.10.2.1): "
            "3 packets transmitted, 0 received, 100.00% packet loss (Command execute failed!)") in failures

    # TLS switched off on one node only.
    nodes["worker1"].write(hccn={"defaults": {"tls_enable": 0}})
    failures = gate()["failures"]
    assert failures == ["the TLS switch differs between devices (HCCL refuses links between them): "
                        "0 on worker1 device 0; 1 on master1 device 0; set prepare_npu_network_enforce_tls: true "
                        "to align them"]


def queried(calls):
    """The hccn_tool queries run, as (device, query) pairs."""
    return sorted((int(argv[2]), argv[3]) for argv in calls if argv[-1] == "-g" and argv[3] != "-ping")


def test_what_the_configuring_run_read_is_not_queried_again_and_reads_the_same(cluster):
    node = cluster("master1", devices=2)
    plan = plan_utils.compute_plan([{"host": "master1", "devices": [0, 1]}])
    devices = plan["hosts"]["master1"]["devices"]

    def known_after(args, check_mode=False):
        result, calls = run(npu_network, node, dict(args, devices=devices), check_mode=check_mode)
        assert result.get("failed") is not True, result
        return [row["live"] for row in result["devices"]]

    def both(known):
        full, full_calls = run(npu_network_info, node, dict(devices=[0, 1]))
        given, given_calls = run(npu_network_info, node, dict(devices=[0, 1], known=known))
        assert given["devices"] == full["devices"]
        assert len(queried(full_calls)) == 14
        return given, queried(given_calls)

    # Check mode on a new node: nothing set, so what it read is the live state (no address yet), not the plan.
    known = known_after(dict(tls=0), check_mode=True)
    assert [row["address"] for row in known] == [None, None] and [row["index"] for row in known] == [0, 1]
    facts, calls = both(known)
    assert [row["address"] for row in facts["devices"]] == [None, None] and [row["tls"] for row in facts["devices"]] == [1, 1]
    assert calls == [(index, query) for index in (0, 1) for query in ("-link", "-net_health", "-pfc")]

    # Set (TLS enforced): the values read again after the change; three queries left per device.
    known = known_after(dict(tls=0))
    facts, calls = both(known)
    assert [row["address"] for row in facts["devices"]] == ["10.10.1.1", "10.10.1.2"]
    assert [row["tls"] for row in facts["devices"]] == [0, 0]
    assert calls == [(index, query) for index in (0, 1) for query in ("-link", "-net_health", "-pfc")]

    # Without the TLS switch in the plan, the configuring run does not read it: the info run does.
    known = known_after({})
    assert [row["tls"] for row in known] == [None, None]
    facts, calls = both(known)
    assert calls == [(index, query) for index in (0, 1) for query in ("-link", "-net_health", "-pfc", "-tls")]


PADDLE_CONF = ROOT / "tests" / "fixtures" / "vendor" / "hccn-conf-8dev-paddle-doc.conf"


def test_restore_puts_back_a_real_hccn_conf_byte_for_byte(cluster):
    # The "original /etc/hccn.conf of an 8-card machine" of a public guide: the driver loads it at boot.
    original = PADDLE_CONF.read_bytes()
    node = cluster("master1", devices=8)
    node.conf_path.write_bytes(original)
    node.write()
    plan = plan_utils.compute_plan([{"host": "master1", "devices": list(range(8))}])
    deployed, calls = run(npu_network, node, dict(devices=plan["hosts"]["master1"]["devices"], tls=0))
    assert deployed["changed"] is True and len(set_calls(calls)) == 16
    assert node.conf_path.read_bytes() != original
    state_file = node.dir / "llm_cluster" / "npu_network.json"
    assert json.loads(state_file.read_text())["entries"]["device3"]["conf"] == {
        "address": "192.168.40.21", "netmask": "255.255.255.0", "gateway": None, "netdetect": None,
        "send_arp_status": None, "tls_enable": None}

    preview, calls = run(npu_network, node, dict(state="restored"), check_mode=True)
    assert preview["changed"] is True and set_calls(calls) == [] and len(preview["commands"]) == 16
    assert node.conf_path.read_bytes() != original and state_file.exists()

    restored, calls = run(npu_network, node, dict(state="restored"))
    assert restored["changed"] is True and restored["not_restored"] == [], restored
    assert [" ".join(argv[1:]) for argv in set_calls(calls)][:2] == [
        "-i 0 -ip -s address 192.168.10.21 netmask 255.255.255.0", "-i 1 -ip -s address 192.168.20.21 netmask 255.255.255.0"]
    assert [row["after"]["tls"] for row in restored["devices"]] == [1] * 8
    assert node.conf_path.read_bytes() == original
    assert not state_file.exists()

    # After a reboot (the state rewritten) the driver loads the same file and the devices read as before.
    node.write()
    info, calls = run(npu_network_info, node, dict(devices=list(range(8))))
    assert [device["address"] for device in info["devices"]] == [
        "192.168.10.21", "192.168.20.21", "192.168.30.21", "192.168.40.21",
        "192.168.10.22", "192.168.20.22", "192.168.30.22", "192.168.40.22"]

    again, calls = run(npu_network, node, dict(state="restored"))
    assert again["changed"] is False and again["devices"] == [] and set_calls(calls) == []


def test_restore_names_what_hccn_tool_cannot_remove(cluster):
    node = cluster("worker1")
    args = dict(devices=[dict(index=0, address="10.10.1.1", netmask="255.255.0.0", gateway="10.10.0.1")], tls=0)
    deployed, calls = run(npu_network, node, args)
    assert deployed["changed"] is True and node.conf_path.exists()

    restored, calls = run(npu_network, node, dict(state="restored", devices=[dict(index=0)]))
    assert restored["changed"] is True
    assert [" ".join(argv[1:]) for argv in set_calls(calls)] == ["-i 0 -tls -s enable 1"]
    reasons = [item["reason"] for item in restored["not_restored"]]
    assert reasons == [
        "hccn_tool cannot remove the address 10.10.1.1, which the device did not have before; %s no longer sets it, "
        "so it is gone after the next boot" % node.conf_path,
        "hccn_tool cannot remove the gateway 10.10.0.1, which the device did not have before; %s no longer sets it, "
        "so it is gone after the next boot" % node.conf_path]
    # The file did not exist before the first change and holds nothing else: it is gone, as is the record.
    assert not node.conf_path.exists()
    assert not (node.dir / "llm_cluster" / "npu_network.json").exists()
