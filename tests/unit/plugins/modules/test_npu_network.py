# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""npu_network and npu_network_info with ``run_command`` patched.

``Hccn`` below answers like hccn_tool does (vendor-tools section 2: the
query lines, ``Cmd executed successfully!``, errors on stderr with the
tool's exit statuses) and persists what is set into an hccn.conf, so the
modules see a consistent device. The end-to-end tests against the fake
tool of tests/fakes are in test_npu_network_fake.py.
"""

from __future__ import annotations

import json
import os
import stat
from unittest.mock import patch

import pytest

from ansible.module_utils import basic

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn
from ansible_collections.aihost.llm_cluster.plugins.modules import npu_network, npu_network_info
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import (
    AnsibleExitJson,
    AnsibleFailJson,
    patched_exit_fail,
    set_module_args,
)

OK = "Cmd executed successfully!\n"
VENDOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")
MASK = "255.255.0.0"


class Hccn(object):
    """In-process stand-in for hccn_tool: devices, an hccn.conf, the calls made."""

    def __init__(self, conf_path, count=2, tls=1):
        self.conf_path = str(conf_path)
        self.devices = dict((i, {"address": None, "netmask": None, "gateway": None, "netdetect": None, "tls": tls,
                                 "link": "UP"}) for i in range(count))
        self.calls = []
        self.overrides = {}
        self.ignore_sets = set()
        self.empty_ip = False
        self.peers = {}
        # A tool from before -pfc: "Get invalid major cmd." for it.
        self.no_pfc = False

    def sets(self):
        return [argv for argv in self.calls if "-s" in argv]

    def persist(self, index, values):
        try:
            with open(self.conf_path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            text = ""
        with open(self.conf_path, "w", encoding="utf-8") as handle:
            handle.write(hccn.render_conf(text, {index: values}))

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        index, cmd, op, params = int(argv[2]), argv[3][1:], argv[4], argv[5:]
        key = (index, cmd, op)
        if key in self.overrides:
            return self.overrides[key]
        if index not in self.devices:
            return 4, "", "The device is not exist!\n"
        dev = self.devices[index]
        if op == "-g":
            return self.query(index, dev, cmd, params)
        if index in self.ignore_sets:
            return 0, OK, ""
        pairs = dict(zip(params[::2], params[1::2]))
        if cmd == "ip":
            if any(other["address"] == pairs["address"] for i, other in self.devices.items() if i != index):
                return 7, "", "The ip address configured is conflicted!\n"
            dev.update(address=pairs["address"], netmask=pairs["netmask"])
            self.persist(index, {"address": pairs["address"], "netmask": pairs["netmask"], "send_arp_status": 1})
        elif cmd == "gateway":
            dev["gateway"] = pairs["gateway"]
            self.persist(index, {"gateway": pairs["gateway"]})
        elif cmd == "netdetect":
            dev["netdetect"] = pairs["address"]
            self.persist(index, {"netdetect": pairs["address"]})
        elif cmd == "tls":
            dev["tls"] = int(pairs["enable"])
            self.persist(index, {"tls_enable": int(pairs["enable"])})
        return 0, OK, ""

    def query(self, index, dev, cmd, params):
        if cmd == "ip":
            if not dev["address"]:
                return (0, "\n\n", "") if self.empty_ip else (13, "", "Get ipconf failed, because no ip was preset there!\n")
            return 0, "ipaddr:%s\nnetmask:%s\n" % (dev["address"], dev["netmask"]), ""
        if cmd == "gateway":
            if not dev["gateway"]:
                return 2, "", "Get gateway failed, because no gateway was preset there!\n"
            return 0, "default gateway:%s, Iface:eth%d\n" % (dev["gateway"], index), ""
        if cmd == "netdetect":
            return 0, "netdetect address: %s\n" % (dev["netdetect"] or "0.0.0.0"), ""
        if cmd == "tls":
            return 0, ("dev_id:%d, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
                       "tls alarm time threshold[60]days\n" % (index, dev["tls"])), ""
        if cmd == "link":
            return 0, "link status: %s\n" % dev["link"], ""
        if cmd == "net_health":
            status = "Init" if not dev["netdetect"] else ("Success" if dev["link"] == "UP" else "Fault")
            return 0, "net health status: %s\n" % status, ""
        if cmd == "pfc" and not self.no_pfc:
            if dev["link"] != "UP":
                return 22, "", "Execute failed: Link status is down.\n"
            with open(os.path.join(VENDOR, "hccn-pfc-g-hixl-doc.txt"), encoding="utf-8") as handle:
                return 0, handle.read(), ""
        if cmd == "ping":
            target = params[1]
            if dev["link"] != "UP":
                return 22, "", "Execute failed: Link status is down.\n"
            if self.peers.get(target):
                return 0, ("device %d PING %s\nrecv seq=0,time=0.114000ms\nrecv seq=1,time=0.067000ms\n"
                           "recv seq=2,time=0.063000ms\n3 packets transmitted, 3 received, 0.00%% packet loss\n"
                           % (index, target)), ""
            return 1, ("device %d PING %s\nrecv time out seq=0\nrecv time out seq=1\nrecv time out seq=2\n"
                       "3 packets transmitted, 0 received, 100.00%% packet loss\n" % (index, target)), \
                "Command execute failed!\n"
        return 3, "", "Get invalid major cmd.\n"


@pytest.fixture(name="tool_path")
def fixture_tool_path(tmp_path):
    path = tmp_path / "hccn_tool"
    path.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture(name="fake")
def fixture_fake(tmp_path):
    return Hccn(tmp_path / "hccn.conf")


def run(module, args, fake, check_mode=False, diff=False):
    args = dict(args)
    if check_mode:
        args["_ansible_check_mode"] = True
    if diff:
        args["_ansible_diff"] = True
    with set_module_args(args), patched_exit_fail(), \
            patch.object(basic.AnsibleModule, "run_command", side_effect=fake), \
            patch.object(basic.AnsibleModule, "warn") as warn:
        result = None
        try:
            module.main()
        except (AnsibleExitJson, AnsibleFailJson) as exc:
            result = exc.args[0]
    if result is None:
        raise AssertionError("module neither exited nor failed")
    result["_warnings"] = [call.args[0] for call in warn.call_args_list]
    return result


def device(index, address, **extra):
    return dict(dict(index=index, address=address, netmask=MASK), **extra)


def args_for(tmp_path, tool_path, devices, **extra):
    args = dict(devices=devices, hccn_tool=tool_path, hccn_conf=str(tmp_path / "hccn.conf"),
                state_dir=str(tmp_path / "state"))
    args.update(extra)
    return args


def conf(tmp_path):
    with open(str(tmp_path / "hccn.conf"), encoding="utf-8") as handle:
        return hccn.parse_conf(handle.read())


# ------------------------------------------------------------------ npu_network

def test_configure_then_second_run_changes_nothing(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1"), device(1, "10.10.1.2")], tls=0)
    result = run(npu_network, args, fake)
    assert result["changed"] is True, result
    assert result["commands"] == [
        "%s -i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0" % tool_path,
        "%s -i 1 -ip -s address 10.10.1.2 netmask 255.255.0.0" % tool_path,
        "%s -i 0 -tls -s enable 0" % tool_path,
        "%s -i 1 -tls -s enable 0" % tool_path,
    ]
    row = result["devices"][0]
    assert row["before"] == {"address": None, "netmask": None, "gateway": None, "netdetect": None, "tls": 1}
    assert row["after"] == row["planned"] == {"address": "10.10.1.1", "netmask": MASK, "gateway": None,
                                              "netdetect": None, "tls": 0}
    assert row["changes"] == ["address", "netmask", "tls"]
    assert result["conf_mismatches"] == [] and result["_warnings"] == []
    assert conf(tmp_path)[1] == {"address": "10.10.1.2", "netmask": MASK, "send_arp_status": "1", "tls_enable": "0"}
    with open(str(tmp_path / "state" / "npu_network.json"), encoding="utf-8") as handle:
        recorded = json.load(handle)
    assert recorded["kind"] == "npu_network"
    assert recorded["entries"]["device0"] == {"index": 0, "address": None, "netmask": None, "gateway": None,
                                              "netdetect": None, "tls": 1, "conf_file": False,
                                              "conf": dict.fromkeys(npu_network.CONF_LINES)}

    fake.calls = []
    again = run(npu_network, args, fake)
    assert again["changed"] is False
    assert again["commands"] == [] and fake.sets() == []
    assert [r["changes"] for r in again["devices"]] == [[], []]


def test_only_what_differs_is_set(tmp_path, tool_path, fake):
    fake.devices[0].update(address="10.10.1.1", netmask=MASK, gateway="10.10.0.1")
    fake.persist(0, {"address": "10.10.1.1", "netmask": MASK, "gateway": "10.10.0.1"})
    result = run(npu_network, args_for(tmp_path, tool_path, [
        device(0, "10.10.1.1", gateway="10.10.0.1", netdetect="10.10.0.1"),
        device(1, "10.10.1.2", gateway="10.10.0.1", netdetect="10.10.0.1")]), fake)
    assert result["changed"] is True
    assert [" ".join(argv[1:]) for argv in fake.sets()] == [
        "-i 1 -ip -s address 10.10.1.2 netmask 255.255.0.0",
        "-i 0 -netdetect -s address 10.10.0.1",
        "-i 1 -gateway -s gateway 10.10.0.1",
        "-i 1 -netdetect -s address 10.10.0.1",
    ]
    assert result["devices"][0]["changes"] == ["netdetect"]
    assert result["devices"][0]["before"]["tls"] is None  # tls omitted: not read
    assert not any("-tls" in argv for argv in fake.calls)


def test_check_mode_runs_no_set_command_and_shows_the_diff(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1")], tls=0)
    result = run(npu_network, args, fake, check_mode=True, diff=True)
    assert result["changed"] is True
    assert fake.sets() == []
    assert result["commands"] == ["%s -i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0" % tool_path,
                                  "%s -i 0 -tls -s enable 0" % tool_path]
    assert result["devices"][0]["after"]["address"] == "10.10.1.1"
    assert result["diff"]["before"] == "device 0:\n  address: -\n  netmask: -\n  gateway: -\n  netdetect: -\n  tls: 1\n"
    assert result["diff"]["after"] == ("device 0:\n  address: 10.10.1.1\n  netmask: 255.255.0.0\n  gateway: -\n"
                                       "  netdetect: -\n  tls: 0\n")
    assert result["diff"]["after_header"].endswith("(planned)")
    assert not os.path.exists(str(tmp_path / "state"))
    assert not os.path.exists(str(tmp_path / "hccn.conf"))


def test_diff_after_a_real_run_and_unchanged_check_mode(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1")])
    result = run(npu_network, args, fake, diff=True)
    assert result["diff"]["after_header"].endswith("(after)")
    assert "address: 10.10.1.1" in result["diff"]["after"] and "tls" not in result["diff"]["after"]
    again = run(npu_network, args, fake, check_mode=True, diff=True)
    assert again["changed"] is False and again["diff"]["before"] == again["diff"]["after"]


def test_older_driver_empty_ip_output_means_no_address(tmp_path, tool_path, fake):
    fake.empty_ip = True
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1", netmask="16")]), fake)
    assert result["changed"] is True
    assert result["devices"][0]["before"]["address"] is None
    assert result["devices"][0]["planned"]["netmask"] == MASK


def test_addresses_are_set_in_an_order_without_conflicts(tmp_path, tool_path, fake):
    # device 0 holds the address device 1 must get: device 0 moves first.
    fake.devices[0].update(address="10.10.1.2", netmask=MASK)
    fake.persist(0, {"address": "10.10.1.2", "netmask": MASK})
    result = run(npu_network, args_for(tmp_path, tool_path, [device(1, "10.10.1.2"), device(0, "10.10.1.1")]), fake)
    assert result["changed"] is True, result
    assert [argv[2] for argv in fake.sets()] == ["0", "1"]


def test_a_pure_swap_is_refused_before_any_change(tmp_path, tool_path, fake):
    fake.devices[0].update(address="10.10.1.2", netmask=MASK)
    fake.devices[1].update(address="10.10.1.1", netmask=MASK)
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1"), device(1, "10.10.1.2")]), fake)
    assert result["failed"] is True
    assert "devices 0, 1 only swap addresses among themselves" in result["msg"]
    assert fake.sets() == []


def test_not_converged_fails_naming_device_and_key(tmp_path, tool_path, fake):
    fake.ignore_sets.add(1)
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1"), device(1, "10.10.1.2")]), fake)
    assert result["failed"] is True
    assert result["msg"].startswith("the NPU network did not converge: device 1 address is None, expected 10.10.1.2")
    assert len(result["commands"]) == 2


def test_a_failing_set_reports_rc_stdout_stderr(tmp_path, tool_path, fake):
    fake.devices[1].update(address="10.10.1.1", netmask=MASK)  # not managed below: the tool refuses the address
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1")], conf_check="warn"), fake)
    assert result["failed"] is True
    assert (result["rc"], result["stderr"], result["stdout"]) == (7, "The ip address configured is conflicted!\n", "")
    assert result["cmd"] == "%s -i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0" % tool_path
    assert "-i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0 failed (rc=7)" in result["msg"]


@pytest.mark.parametrize(("override", "message"), [
    ((4, "", "The device is not exist!\n"), "-i 0 -gateway -g failed on device 0 (rc=4): The device is not exist!"),
    ((0, "something else\n", ""), "cannot read the output of -i 0 -gateway -g"),
])
def test_a_failing_query_reports_rc_stdout_stderr(tmp_path, tool_path, fake, override, message):
    fake.overrides[(0, "gateway", "-g")] = override
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1")]), fake)
    assert result["failed"] is True and message in result["msg"]
    assert (result["rc"], result["stdout"], result["stderr"]) == override


def test_stale_conf_fails_by_default(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1"), device(1, "10.10.1.2")])
    run(npu_network, args, fake)
    fake.persist(1, {"address": "10.10.9.9"})
    fake.calls = []
    result = run(npu_network, args, fake)
    assert result["failed"] is True and result["changed"] is False
    expected = {"device": 1, "key": "address", "conf_key": "address", "file": "10.10.9.9", "live": "10.10.1.2"}
    assert result["conf_mismatches"] == [expected]
    assert ("device 1: %s has address_1=10.10.9.9, the device has address 10.10.1.2" % (tmp_path / "hccn.conf")
            in result["msg"])
    warned = run(npu_network, dict(args, conf_check="warn"), fake)
    assert "failed" not in warned and warned["conf_mismatches"] == [expected]
    assert warned["_warnings"] == ["device 1: %s has address_1=10.10.9.9, the device has address 10.10.1.2"
                                   % (tmp_path / "hccn.conf")]
    assert fake.sets() == []


def test_stale_conf_repair_sets_the_live_value_again(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1")], tls=0, conf_repair=True)
    run(npu_network, args, fake)
    fake.persist(0, {"address": "10.10.9.9", "tls_enable": 1, "gateway": "10.10.0.1"})
    planned = run(npu_network, args, fake, check_mode=True)
    assert planned["changed"] is True and planned["failed"] is True
    assert planned["commands"] == ["%s -i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0" % tool_path,
                                   "%s -i 0 -tls -s enable 0" % tool_path]
    assert [item["key"] for item in planned["conf_mismatches"]] == ["gateway"]  # cannot be unset with the tool
    fake.calls = []
    warned = run(npu_network, dict(args, conf_check="warn"), fake, check_mode=True)
    assert warned["changed"] is True and "failed" not in warned and len(warned["_warnings"]) == 1
    assert fake.sets() == []
    fake.persist(0, {"gateway": None})
    repaired = run(npu_network, args, fake)
    assert repaired["changed"] is True and "failed" not in repaired
    assert repaired["conf_mismatches"] == []
    assert conf(tmp_path)[0]["address"] == "10.10.1.1" and conf(tmp_path)[0]["tls_enable"] == "0"


def test_check_mode_ignores_conf_keys_about_to_be_set(tmp_path, tool_path, fake):
    fake.persist(0, {"address": "10.10.0.10", "netmask": MASK})  # stale file, device without address
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1")]), fake, check_mode=True)
    assert result["changed"] is True and "failed" not in result
    failed = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1")], conf_check="warn"), fake)
    assert failed["conf_mismatches"] == []  # the tool rewrote address_0 and netmask_0


@pytest.mark.parametrize(("devices", "message"), [
    ([device(0, "10.10.1.300")], "device 0: address '10.10.1.300' is not an IPv4 address"),
    ([dict(index=0, address="10.10.1.1", netmask="255.0.255.0")], "device 0: netmask '255.0.255.0' is not a netmask"),
    ([device(0, "10.10.1.1"), device(1, "10.10.1.1")], "address 10.10.1.1 is given to devices 0, 1"),
    ([device(0, "10.10.1.1", gateway="gw")], "device 0: gateway 'gw' is not an IPv4 address"),
    ([device(0, "10.10.1.1"), device(0, "10.10.1.2")], "device 0 is negative or listed twice"),
])
def test_invalid_devices_fail_before_running_anything(tmp_path, tool_path, fake, devices, message):
    result = run(npu_network, args_for(tmp_path, tool_path, devices), fake)
    assert result["failed"] is True and message in result["msg"]
    assert fake.calls == []


def test_tool_that_is_not_executable(tmp_path, fake):
    result = run(npu_network, args_for(tmp_path, str(tmp_path / "missing"), [device(0, "10.10.1.1")]), fake)
    assert result["msg"] == "hccn_tool=%s is not an executable file" % (tmp_path / "missing")


def test_tool_found_on_the_path(tmp_path, tool_path, fake):
    args = args_for(tmp_path, tool_path, [device(0, "10.10.1.1")])
    del args["hccn_tool"]
    with patch.object(basic.AnsibleModule, "get_bin_path", return_value="/opt/hccn_tool") as get_bin_path:
        result = run(npu_network, args, fake)
    assert result["hccn_tool"] == "/opt/hccn_tool"
    assert get_bin_path.call_args.kwargs["opt_dirs"] == ["/usr/local/Ascend/driver/tools"]
    assert fake.calls[0][:3] == ["/opt/hccn_tool", "-i", "0"]


def test_unreadable_state_file_stops_before_any_change(tmp_path, tool_path, fake):
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "npu_network.json").write_text("{not json", encoding="utf-8")
    result = run(npu_network, args_for(tmp_path, tool_path, [device(0, "10.10.1.1")]), fake)
    assert result["failed"] is True and result["msg"].startswith("nothing was changed:")
    assert fake.sets() == []


def test_commands_run_with_the_c_locale(tmp_path, tool_path, fake):
    seen = {}

    def capture(argv, **kwargs):
        return fake(argv, **kwargs)

    with set_module_args(args_for(tmp_path, tool_path, [device(0, "10.10.1.1")])), patched_exit_fail(), \
            patch.object(basic.AnsibleModule, "run_command", side_effect=capture):
        original = npu_network.build_module

        def build():
            module = original()
            seen["module"] = module
            return module

        with patch.object(npu_network, "build_module", side_effect=build):
            with pytest.raises(AnsibleExitJson):
                npu_network.main()
    assert seen["module"].run_command_environ_update["LC_ALL"] == "C"


# ------------------------------------------------------------ npu_network_info

def test_facts_read_every_device_and_ping_in_parallel(tool_path, fake):
    fake.devices[0].update(address="10.10.1.1", netmask=MASK, netdetect="10.10.0.1", tls=0)
    fake.devices[1].update(link="DOWN", netdetect="10.10.0.1")
    fake.peers["10.10.2.1"] = True
    result = run(npu_network_info, dict(devices=[0, 1, 0], hccn_tool=tool_path, parallel=4, ping=[
        dict(device=0, address="10.10.2.1", peer="worker1", peer_device=0),
        dict(device=0, address="10.10.3.1"),
        dict(device=1, address="10.10.2.2", peer="worker1", peer_device=1),
    ]), fake)
    assert result["changed"] is False
    assert result["devices"] == [
        {"index": 0, "link": "UP", "net_health": "Success", "tls": 0, "address": "10.10.1.1", "netmask": MASK,
         "gateway": None, "netdetect": "10.10.0.1", "pfc": [4], "pfc_error": None, "errors": []},
        # The PFC query of a port without link fails on its own, not as one more device error.
        {"index": 1, "link": "DOWN", "net_health": "Fault", "tls": 1, "address": None, "netmask": None,
         "gateway": None, "netdetect": "10.10.0.1", "pfc": None,
         "pfc_error": "-pfc -g failed (rc=22): Execute failed: Link status is down.", "errors": []},
    ]
    ok, lost, down = result["pings"]
    assert ok == {"device": 0, "address": "10.10.2.1", "peer": "worker1", "peer_device": 0, "reachable": True,
                  "transmitted": 3, "received": 3, "loss_pct": 0.0, "rtt_ms": pytest.approx(0.081333), "rc": 0,
                  "error": None}
    assert (lost["reachable"], lost["rc"], lost["peer"]) == (False, 1, None)
    assert lost["error"] == "3 packets transmitted, 0 received, 100.00% packet loss (Command execute failed!)"
    assert (down["reachable"], down["rc"], down["error"]) == (False, 22, "Execute failed: Link status is down.")
    assert len(fake.calls) == 2 * 7 + 3


def test_facts_report_query_errors_per_device(tool_path, fake):
    fake.overrides[(1, "tls", "-g")] = (22, "", "Execute failed: Link status is down.\n")
    fake.overrides[(1, "link", "-g")] = (0, "garbage\n", "")
    fake.overrides[(0, "ping", "-g")] = (1, "", "")
    result = run(npu_network_info, dict(devices=[0, 1, 5], hccn_tool=tool_path,
                                        ping=[dict(device=0, address="10.10.2.1")]), fake)
    assert result["devices"][0]["errors"] == []
    assert result["devices"][1]["errors"] == [
        "hccn_tool -link -g: no 'link status:' line in 'garbage\\n'",
        "-tls -g failed (rc=22): Execute failed: Link status is down."]
    assert result["devices"][2]["errors"][0] == "-link -g failed (rc=4): The device is not exist!"
    assert result["pings"][0]["error"] == "no reply (rc=1)"


def test_facts_thread_exceptions_become_errors(tool_path):
    def boom(argv, **kwargs):
        raise OSError("cannot fork")

    result = run(npu_network_info, dict(devices=[0], hccn_tool=tool_path, ping=[dict(device=0, address="10.0.0.1")]),
                 boom)
    assert result["devices"][0]["errors"][0] == "-link -g failed (rc=255): cannot fork"
    assert result["pings"][0]["error"] == "cannot fork"


def test_facts_of_a_tool_without_pfc_still_read_the_rest(tool_path, fake):
    fake.no_pfc = True
    result = run(npu_network_info, dict(devices=[0], hccn_tool=tool_path), fake)
    device = result["devices"][0]
    assert device["pfc"] is None and device["errors"] == []
    assert device["pfc_error"] == "-pfc -g failed (rc=3): Get invalid major cmd."
