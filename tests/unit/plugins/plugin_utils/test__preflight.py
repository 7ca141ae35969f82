# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import copy

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import evaluate, report_files, table

GIB = 1024 ** 3
SETTINGS = {
    "accelerator_type": "auto", "device_count": 0, "npu_driver_min_version": "24.1.0", "require_cann": True,
    "ascend_root": "/usr/local/Ascend", "model_size_bytes": 0, "memory_factor": 1.3, "min_free_disk_gb": 0,
    "node_num": 3, "clock_max_offset": 1.0, "interface_var": "ray_device",
    "ports": {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570}, "managed_unit_prefix": "llm-cluster-",
}
HOSTS = ["master1", "worker1", "worker2"]
ADDRESSES = {"master1": "172.18.0.2", "worker1": "172.18.0.3", "worker2": "172.18.0.4"}


def npu_node(name):
    return {
        "host": name,
        "is_head": name == "master1",
        "accelerators": {
            "type": "npu", "count": 8, "driver_version": "25.0.rc1.1", "firmware_version": "7.7.0.1.231",
            "cann_version": "8.3.RC2", "errors": [],
            "devices": [{"index": i, "name": "910B4", "health": "OK", "bus_id": "0000:C%d:00.0" % i, "npu_id": i,
                         "chip_id": 0} for i in range(8)],
        },
        "facts": {
            "kernel": "6.6.0", "python_version": "3.11.2",
            "memory": {"total": 512 * GIB, "available": 400 * GIB},
            "model": {"path": "/srv/m", "exists": False, "files": 0, "size": 0, "disk_path": "/srv", "disk_free": 900 * GIB},
            "interface": {"requested": "eth0", "name": "eth0", "exists": True, "up": True, "ipv4": [ADDRESSES[name]],
                          "address": ADDRESSES[name], "error": None, "available": ["eth0"]},
            "ports": [{"port": p, "free": True, "owners": []} for p in (6379, 8000, 12570)],
            "clock": 1000.0,
        },
        "probe": {"results": [{"name": peer, "address": ADDRESSES[peer], "port": 6379, "reachable": True, "error": None,
                               "clock_offset": 0.001, "clock_uncertainty": 0.0005}
                              for peer in HOSTS if peer != name]},
    }


@pytest.fixture
def nodes():
    return [npu_node(h) for h in HOSTS]


def failures(nodes, **settings):
    return evaluate(nodes, dict(SETTINGS, **settings))["failures"]


def test_healthy_cluster_passes(nodes):
    report = evaluate(nodes, SETTINGS)
    assert report["ok"] and report["failures"] == []
    assert report["expected"] == {"accelerator_type": "npu", "device_count": 8, "model_size_bytes": 0}
    assert set(report["hosts"]) == set(HOSTS)
    assert all(c["ok"] for c in report["hosts"]["worker1"]["checks"])


def test_unhealthy_device_is_named(nodes):
    nodes[1]["accelerators"]["devices"][3]["health"] = "Alarm"
    assert failures(nodes) == ["worker1: NPU 3 (0000:C3:00.0, card 3 chip 0) health is Alarm; "
                               "inspect it with 'npu-smi info -t health -i 3 -c 0'"]


def test_critical_300i_duo_chip_names_card_and_chip(nodes):
    # An Atlas 300I Duo: two chips per card on one Bus-Id, sparse card ids (as in the field corpus).
    nodes[1]["accelerators"]["devices"] = [
        {"index": 2 * n + c, "name": "310P3", "health": "OK", "bus_id": "0000:%02X:00.0" % (n + 1),
         "npu_id": [1, 2, 4, 5][n], "chip_id": c} for n in range(4) for c in range(2)]
    nodes[1]["accelerators"]["devices"][3]["health"] = "Critical"
    assert failures(nodes) == ["worker1: NPU 3 (0000:02:00.0, card 2 chip 1) health is Critical; "
                               "inspect it with 'npu-smi info -t health -i 2 -c 1'"]


def test_missing_device_is_named(nodes):
    del nodes[2]["accelerators"]["devices"][5]
    nodes[2]["accelerators"]["count"] = 7
    [msg] = failures(nodes)
    assert msg.startswith("worker2: 7 NPUs found (0,1,2,3,4,6,7), expected 8; missing NPU 5")


def test_old_driver(nodes):
    nodes[2]["accelerators"]["driver_version"] = "23.0.7"
    [msg] = failures(nodes)
    assert "worker2: NPU driver 23.0.7 is older than 24.1.0 (prepare_npu_driver_min_version)" in msg


def test_rc_driver_of_minimum_release_is_older(nodes):
    nodes[0]["accelerators"]["driver_version"] = "24.1.rc2"
    assert "master1: NPU driver 24.1.rc2 is older than 24.1.0" in failures(nodes)[0]


def test_missing_cann_unless_not_required(nodes):
    nodes[1]["accelerators"]["cann_version"] = None
    assert "worker1: CANN toolkit not found under /usr/local/Ascend/ascend-toolkit" in failures(nodes)[0]
    assert failures(nodes, require_cann=False) == []


def test_interface_missing_names_host_variable_and_choices(nodes):
    nodes[2]["facts"]["interface"] = {"requested": "eth9", "name": "eth9", "exists": False, "up": False, "ipv4": [],
                                      "address": None, "error": "Device \"eth9\" does not exist.", "available": ["eth0"]}
    nodes[2]["probe"] = None
    msgs = failures(nodes)
    assert msgs[0] == ("worker2: interface eth9 (ray_device) does not exist: Device \"eth9\" does not exist.; "
                       "set ray_device for worker2 to one of its interfaces (eth0)")
    assert msgs[1].startswith("worker2: peers not probed")


def test_interface_down_and_without_address(nodes):
    nodes[0]["facts"]["interface"]["up"] = False
    nodes[1]["facts"]["interface"]["ipv4"] = []
    msgs = failures(nodes)
    assert "master1: interface eth0 (ray_device) is DOWN" in msgs[0]
    assert "worker1: interface eth0 (ray_device) has no IPv4 address" in msgs[1]


def test_unreachable_peer(nodes):
    nodes[1]["probe"]["results"][0].update(reachable=False, error="timed out", clock_offset=None)
    [msg] = failures(nodes)
    assert msg.startswith("worker1: cannot reach master1 at 172.18.0.2:6379 over ray_device (timed out)")


def test_a_new_node_that_the_members_own_tables_do_not_admit_yet_passes_until_ray_joins(nodes):
    # worker2 is a new machine at a new address: the head's and worker1's llm_cluster tables (read by
    # preflight_info) admit the old members only and drop its probes, which time out.
    nodes[2]["facts"]["interface"]["address"] = "172.18.0.9"
    for node in nodes[:2]:
        node["facts"]["firewall"] = {"firewalld": False, "nft": "/usr/sbin/nft", "members": ["172.18.0.2", "172.18.0.3", "172.18.0.4"]}
    for result in nodes[2]["probe"]["results"]:
        result.update(reachable=False, error="timed out", clock_offset=None)
    report = evaluate(nodes, SETTINGS)
    assert report["ok"], report["failures"]
    [check] = [c for c in report["hosts"]["worker2"]["checks"] if c["check"] == "reachability"]
    assert check["ok"] and check["detail"] == (
        "reaches 0 peer(s) on port 6379; not yet master1, worker1, whose firewall admits this node's 172.18.0.9 only "
        "once the Ray step writes its rules (Ray's join then proves the path)")


# What firewalld 1.3.3 answered a connect from an address its zone does not admit (tests/fixtures/system/README.md):
# on its nftables backend, and on its iptables backend (the zone's reject is an ICMP port-unreachable there).
REJECTED = "[Errno 113] No route to host"
REJECTED_IPTABLES = "[Errno 111] Connection refused"


def firewalld(members):
    return {"firewalld": True, "nft": "/usr/sbin/nft", "members": members, "members_from": "firewalld"}


@pytest.mark.parametrize("rejected", [REJECTED, REJECTED_IPTABLES])
def test_a_first_deploy_on_firewalld_passes_while_no_zone_admits_the_members_yet(nodes, rejected):
    # Every node runs firewalld with no rule of ours yet: each zone rejects every peer's probe at once.
    for node in nodes:
        node["facts"]["firewall"] = firewalld([])
        for result in node["probe"]["results"]:
            result.update(reachable=False, error=rejected, clock_offset=None)
    report = evaluate(nodes, SETTINGS)
    assert report["ok"], report["failures"]
    details = {name: [c["detail"] for c in host["checks"] if c["check"] == "reachability"]
               for name, host in report["hosts"].items()}
    assert details["master1"] == ["reaches 0 peer(s) on port 6379; not yet worker1, worker2, whose firewall admits this "
                                  "node's 172.18.0.2 only once the Ray step writes its rules (Ray's join then proves the path)"]


def test_a_new_node_on_firewalld_passes_until_the_zones_admit_it_and_an_admin_network_counts(nodes):
    nodes[2]["facts"]["interface"]["address"] = "172.18.0.9"
    for node in nodes[:2]:
        node["facts"]["firewall"] = firewalld(["172.18.0.2", "172.18.0.3", "172.18.0.4", "10.20.0.0/16", "fd00:20::/64"])
    for result in nodes[2]["probe"]["results"]:
        result.update(reachable=False, error=REJECTED, clock_offset=None)
    assert failures(nodes) == []
    # An admin network of the zone holds the address: it is admitted, so the refusal is the site's.
    nodes[0]["facts"]["firewall"] = firewalld(["172.18.0.2", "172.18.0.0/24"])
    [msg] = failures(nodes)
    assert msg.startswith("worker2: cannot reach master1 at 172.18.0.2:6379 over ray_device ([Errno 113] No route to host)")


@pytest.mark.parametrize("change", [
    # The target's table admits the node: the timeout is the network's or a site firewall's.
    lambda nodes: nodes[0]["facts"].update(firewall={"firewalld": False, "nft": "/usr/sbin/nft", "members": ["172.18.0.3"]}),
    # The target has no table of ours (a new cluster, or firewalld): nothing of ours drops it.
    lambda nodes: nodes[0]["facts"].update(firewall={"firewalld": True, "nft": "/usr/sbin/nft", "members": None}),
    # Refused is an answer: our table drops, it never refuses.
    lambda nodes: (nodes[0]["facts"].update(firewall={"firewalld": False, "nft": "/usr/sbin/nft", "members": []}),
                   nodes[1]["probe"]["results"][0].update(error="[Errno 111] Connection refused")),
    # Nor does it reject: "No route to host" to a node with only our table is the network's.
    lambda nodes: (nodes[0]["facts"].update(firewall={"firewalld": False, "nft": "/usr/sbin/nft", "members": [],
                                                      "members_from": "nftables"}),
                   nodes[1]["probe"]["results"][0].update(error=REJECTED)),
    # A refusal (firewalld's iptables backend rejects so) from an address the zone admits is not the zone's.
    lambda nodes: (nodes[0]["facts"].update(firewall=firewalld(["172.18.0.3"])),
                   nodes[1]["probe"]["results"][0].update(error=REJECTED_IPTABLES)),
    # The zone's rules admit the node by a network: the failure is not ours to wait for.
    lambda nodes: nodes[0]["facts"].update(firewall=firewalld(["172.18.0.0/16"])),
    # Rules that hold no address cover nothing, and do not break the check.
    lambda nodes: (nodes[0]["facts"].update(firewall=firewalld(["not-an-address", "172.18.0.3"])),
                   nodes[1]["probe"]["results"][0].update(error=REJECTED)),
])
def test_a_timeout_from_an_admitted_node_or_to_a_node_without_the_table_and_a_refusal_stay_failures(nodes, change):
    nodes[1]["probe"]["results"][0].update(reachable=False, error="timed out", clock_offset=None)
    change(nodes)
    [msg] = failures(nodes)
    assert msg.startswith("worker1: cannot reach master1 at 172.18.0.2:6379 over ray_device")


def test_port_in_use_by_a_stranger_but_not_by_our_units(nodes):
    nodes[0]["facts"]["ports"][1] = {"port": 8000, "free": False,
                                     "owners": [{"pid": 42, "comm": "nginx", "unit": "nginx.service"}]}
    nodes[0]["facts"]["ports"][0] = {"port": 6379, "free": False,
                                     "owners": [{"pid": 7, "comm": "gcs_server", "unit": "llm-cluster-ray-head.service"}]}
    assert failures(nodes) == ["master1: llm_port 8000 is in use by pid 42 (nginx, unit nginx.service); "
                               "stop that service or choose another llm_port"]


def test_port_held_by_our_engine_container_is_ours_and_another_container_s_is_not(nodes):
    ours, theirs = "a" * 64, "b" * 64
    nodes[0]["own_containers"] = [ours]
    nodes[0]["facts"]["ports"][1] = {"port": 8000, "free": False,
                                     "owners": [{"pid": 42, "comm": "vllm", "unit": None, "container": ours}]}
    assert failures(nodes) == []
    nodes[0]["facts"]["ports"][1]["owners"][0]["container"] = theirs
    assert failures(nodes) == ["master1: llm_port 8000 is in use by pid 42 (vllm, container bbbbbbbbbbbb); "
                               "stop that service or choose another llm_port"]


def test_clock_offset_beyond_bound_blames_both_ends(nodes):
    nodes[0]["probe"]["results"][1]["clock_offset"] = 3.0
    msgs = failures(nodes)
    assert any(m.startswith("master1: clock offset to a peer up to 2.999 s") for m in msgs)
    assert any(m.startswith("worker2: clock offset to a peer up to 2.999 s") for m in msgs)


def test_python_mismatch(nodes):
    nodes[2]["facts"]["python_version"] = "3.9.18"
    [msg] = failures(nodes)
    assert msg.startswith("worker2: Python 3.9.18 but the head master1 has 3.11.2")


def test_memory_rule_uses_model_size_on_head(nodes):
    nodes[0]["facts"]["model"].update(exists=True, size=1000 * GIB)
    nodes[0]["facts"]["memory"]["available"] = 500 * GIB
    nodes[2]["facts"]["memory"]["available"] = 500 * GIB
    nodes[1]["facts"]["memory"]["available"] = 300 * GIB
    [msg] = failures(nodes)
    assert msg.startswith("worker1: 300.0 GiB memory available, need 433.3 GiB (model 1000.0 GiB / 3 nodes x 1.3)")


def test_accelerator_type_mismatch(nodes):
    nodes[1]["accelerators"] = {"type": "none", "count": 0, "devices": [], "errors": []}
    [msg] = failures(nodes)
    assert msg.startswith("worker1: expected npu accelerators (as on the head) but found none")


def _cpu(node):
    node["accelerators"] = {"type": "none", "count": 0, "devices": [], "errors": []}
    return node


def test_serving_groups_hold_each_node_to_its_group_s_first_node(nodes):
    # master1 NPU x8 in group ascend; worker1 and worker2 CPU in group cpu: no failure, where without the groups
    # both CPU nodes fail against the head.
    _cpu(nodes[1])
    _cpu(nodes[2])
    assert len(failures(nodes)) == 2
    groups = [["ascend", ["master1"]], ["cpu", ["worker1", "worker2"]]]
    assert failures(nodes, serving_groups=groups) == []
    # A CPU node in the NPU group is named against that group's first node.
    groups = [["ascend", ["master1", "worker1"]], ["cpu", ["worker2"]]]
    [msg] = failures(nodes, serving_groups=groups)
    assert msg.startswith("worker1: expected npu accelerators (as on master1, the first node of serving group ascend) "
                          "but found none")
    # A group's own prepare_device_count (its first node's group_vars) counts for the group.
    nodes[0]["expect"] = {"accelerator_type": "auto", "device_count": 16}
    [msg] = failures(nodes, serving_groups=[["ascend", ["master1"]], ["cpu", ["worker1", "worker2"]]])
    assert msg.startswith("master1: 8 NPUs found (0,1,2,3,4,5,6,7), expected 16")
    nodes[1]["expect"] = {"accelerator_type": "gpu", "device_count": 0}
    nodes[0]["expect"] = {}
    msg, other = failures(nodes, serving_groups=[["ascend", ["master1"]], ["gpu", ["worker1", "worker2"]]])
    assert other.startswith("worker2: expected gpu")
    assert msg.startswith("worker1: expected gpu accelerators (prepare_accelerator_type of worker1, the first node of "
                          "serving group gpu) but found none")


def test_four_faults_reported_together(nodes):
    nodes[1]["accelerators"]["devices"][3]["health"] = "Alarm"
    nodes[2]["accelerators"]["driver_version"] = "23.0.7"
    nodes[2]["facts"]["interface"].update(exists=False, error="not found", name="eth9", ipv4=[], address=None)
    nodes[2]["probe"] = None
    nodes[0]["probe"]["results"][0].update(reachable=False, error="timed out")
    report = evaluate(nodes, SETTINGS)
    text = "\n".join(report["failures"])
    for needle in ("worker1: NPU 3", "worker2: NPU driver 23.0.7", "worker2: interface eth9", "master1: cannot reach worker1"):
        assert needle in text
    assert not report["ok"]
    rows = table(report).splitlines()
    assert rows[0].split()[:3] == ["host", "accel", "dev"]
    assert rows[1].startswith("master1") and "FAIL(1)" in rows[1]
    assert "OK" not in rows[3].split()[-1]


def test_gpu_and_cpu_clusters(nodes):
    gpu = copy.deepcopy(nodes)
    for node in gpu:
        node["accelerators"] = {"type": "gpu", "count": 2, "driver_version": "580.1", "errors": [],
                                "devices": [{"index": 0, "health": "OK"}, {"index": 1, "health": "OK"}]}
    assert failures(gpu) == []
    for node in gpu:
        node["accelerators"] = {"type": "none", "count": 0, "devices": [], "errors": []}
    assert failures(gpu) == []
    assert "expected gpu accelerators (prepare_accelerator_type)" in failures(gpu, accelerator_type="gpu")[0]


def test_a_host_that_was_never_probed_fails_the_gate(nodes):
    report = evaluate(nodes[:2], dict(SETTINGS, hosts=HOSTS))
    assert report["failures"] == ["worker2: not probed (unreachable, or it failed an earlier task); "
                                  "fix the connection and run again"]


def test_report_files_name_one_file_per_node():
    report = evaluate([npu_node(h) for h in HOSTS], dict(SETTINGS, hosts=HOSTS))
    files = report_files(report["hosts"])
    assert sorted(files) == ["preflight-master1.json", "preflight-worker1.json", "preflight-worker2.json"]
    assert files["preflight-worker1.json"] is report["hosts"]["worker1"]


FIREWALLS = [{"host": "a", "facts": {"firewall": {"firewalld": False, "nft": ""}}},
             {"host": "b", "facts": {"firewall": {"firewalld": False, "nft": "/usr/sbin/nft"}}},
             {"host": "c", "facts": {"firewall": {"firewalld": True, "nft": ""}}},
             # An older probe, or a node whose preflight_info returned no firewall: no firewall found.
             {"host": "d", "facts": {}}]


@pytest.mark.parametrize("mode, lacking", [
    ("auto", ["a", "d"]), ("nftables", ["a", "c", "d"]), ("firewalld", ["a", "b", "d"]), ("none", []),
])
def test_firewall_gaps_name_each_node_without_the_firewall_the_mode_needs(mode, lacking):
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    gaps = firewall_gaps(FIREWALLS, mode)
    assert [g.split(":", 1)[0] for g in gaps] == lacking
    if mode == "auto":
        assert gaps[0].startswith("a: no firewall: firewalld is not running and there is no nft command")
        assert "set llm_cluster_firewall: none" in gaps[0]


def test_a_firewalld_zone_that_cannot_be_listed_is_named_with_its_variable():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    # What preflight_info reports for ray_cluster_firewalld_zone: nosuch (firewall-cmd's own message, captured).
    error = "firewall-cmd --zone=nosuch --list-rich-rules: Error: INVALID_ZONE: nosuch"
    nodes = [{"host": "a", "facts": {"firewall": {"firewalld": True, "nft": "", "members": None, "error": error}}},
             {"host": "b", "facts": {"firewall": {"firewalld": True, "nft": "", "members": [], "error": None}}}]
    for mode in ("auto", "firewalld"):
        assert firewall_gaps(nodes, mode) == [
            "a: firewalld cannot list the rich rules of the zone the Ray step writes to (%s); set "
            "ray_cluster_firewalld_zone to one of the node's zones (firewall-cmd --get-zones), or leave it empty for "
            "firewalld's default zone" % error]
    # nftables does not read the zone; none reads nothing.
    assert firewall_gaps(nodes, "nftables") == ["a: llm_cluster_firewall is nftables but there is no nft command; "
                                                "install nftables", "b: llm_cluster_firewall is nftables but there is "
                                                "no nft command; install nftables"]
    assert firewall_gaps(nodes, "none") == []


def test_a_cluster_interface_in_another_zone_than_the_rules_is_named_with_the_zone_to_set():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps

    def node(host, zone, interface_zone):
        return {"host": host, "facts": {"interface": {"name": "enp67s0f0np0"}, "firewall": {
            "firewalld": True, "nft": "", "members": [], "error": None, "zone": zone, "interface_zone": interface_zone}}}
    nodes = [node("a", "public", "internal"), node("b", "public", "public"), node("c", None, None)]
    assert firewall_gaps(nodes, "auto") == firewall_gaps(nodes, "firewalld") == [
        "a: enp67s0f0np0 is in firewalld zone internal, but the Ray step would write its rules to zone public, which "
        "does not see that interface's traffic; set ray_cluster_firewalld_zone: internal"]
    assert firewall_gaps(nodes, "none") == []


@pytest.mark.parametrize("source, name, value, selects", [
    ("prepare_env_extra", "GLOO_SOCKET_IFNAME", "enp67s0f0np0", "enp67s0f0np0"),
    ("serve_environment", "NCCL_SOCKET_IFNAME", "^lo,docker", "enp67s0f0np0, ib0"),
    ("prepare_env_extra", "NCCL_SOCKET_IFNAME", "enp", "enp67s0f0np0"),
    ("prepare_env_extra", "HCCL_SOCKET_IFNAME", "=ib0", "ib0"),
    ("prepare_env_extra", "HCCL_SOCKET_IFNAME", "^=ib0", "docker0, enp67s0f0np0"),
])
def test_a_collective_interface_that_selects_one_of_the_node_s_passes(nodes, source, name, value, selects):
    for node in nodes:
        node["facts"]["interface"]["available"] = ["docker0", "enp67s0f0np0", "ib0"]
        node["comm_env"] = {source: {name: value}}
    report = evaluate(nodes, SETTINGS)
    assert report["failures"] == [], report["failures"]
    [check] = [c for c in report["hosts"]["worker1"]["checks"] if c["check"] == "collective interface"]
    assert check["detail"] == "%s.%s = '%s' selects %s" % (source, name, value, selects)


def test_a_collective_interface_a_node_lacks_is_named_with_the_node_s_own(nodes):
    # llm_solution needs one interface name on every node; here worker2's NIC has another name.
    for node in nodes:
        node["facts"]["interface"]["available"] = ["enp67s0f0np0"]
        node["comm_env"] = {"prepare_env_extra": {"GLOO_SOCKET_IFNAME": "enp67s0f0np0", "NCCL_SOCKET_IFNAME": "enp67"},
                            "serve_environment": {}}
    nodes[2]["facts"]["interface"]["available"] = ["enp1s0f0"]
    assert failures(nodes) == [
        "worker2: prepare_env_extra.GLOO_SOCKET_IFNAME = 'enp67s0f0np0' names enp67s0f0np0, which this node does not "
        "have (it has enp1s0f0); set GLOO_SOCKET_IFNAME for worker2 to its interface on the cluster network (host_vars "
        "when names differ), or leave it unset: the env file sets the resolved interface",
        "worker2: prepare_env_extra.NCCL_SOCKET_IFNAME = 'enp67' selects none of this node's interfaces (it has "
        "enp1s0f0); set NCCL_SOCKET_IFNAME for worker2 so that it selects the interface on the cluster network, or "
        "leave it unset"]


def test_the_engine_s_map_wins_and_nothing_is_checked_when_nothing_is_set(nodes):
    for node in nodes:
        node["comm_env"] = {"prepare_env_extra": {"TP_SOCKET_IFNAME": "eth9"}, "serve_environment": {"TP_SOCKET_IFNAME": "eth0"}}
    assert failures(nodes) == []
    for node in nodes:
        node["comm_env"] = {"prepare_env_extra": {}, "serve_environment": {}}
    report = evaluate(nodes, SETTINGS)
    assert not [c for c in report["hosts"]["master1"]["checks"] if c["check"] == "collective interface"]


def test_offline_missing_names_each_host_and_path_it_lacks():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import offline_missing
    wheels = {"path": "/wheelhouse", "what": "ray_cluster_wheelhouse, the wheels", "fix": "copy the bundle there"}
    archive = {"path": "/images/engine.tar", "what": "serve_image_archive, the engine image", "fix": "copy the tarball"}
    hostvars = {
        # As a looped stat registers it: one result per item.
        "master1": {"__prepare_offline_stat": {"results": [{"item": wheels, "stat": {"exists": True}},
                                                           {"item": archive, "stat": {"exists": True}}]}},
        "worker1": {"__prepare_offline_stat": {"results": [{"item": wheels, "stat": {"exists": False}},
                                                           {"item": archive, "stat": {"exists": True}}]}},
        # Offline off for this node: the stat was skipped as a whole.
        "worker2": {"__prepare_offline_stat": {"skipped": True, "results": []}},
        "worker3": {},
    }
    assert offline_missing(["master1", "worker1", "worker2", "worker3"], hostvars) == [
        "worker1: /wheelhouse is not there (ray_cluster_wheelhouse, the wheels): copy the bundle there"]
    hostvars["worker2"] = {"__prepare_offline_stat": {"results": [{"item": archive, "stat": {"exists": False}}]}}
    assert offline_missing(["worker1", "worker2"], hostvars) == [
        "worker1: /wheelhouse is not there (ray_cluster_wheelhouse, the wheels): copy the bundle there",
        "worker2: /images/engine.tar is not there (serve_image_archive, the engine image): copy the tarball"]


def zoned(host, address, source_zones, zone="public"):
    """A node running firewalld whose rules go to ``zone`` (the interface's too), with these zones binding sources."""
    return {"host": host, "facts": {"interface": {"name": "eth0", "address": address}, "firewall": {
        "firewalld": True, "nft": "", "members": [], "error": None, "zone": zone, "interface_zone": zone,
        "source_zones": source_zones}}}


# The zones of firewalld 1.3.3's captured listing (tests/fixtures/system/firewall-cmd-list-all-zones-sources.txt),
# as preflight_info reads them, the ipset's entries read with --get-entries.
CAPTURED_ZONES = [
    {"zone": "block", "target": "%%REJECT%%", "sources": ["ipset:blk"], "ipsets": {"blk": ["198.51.100.0/24", "172.19.0.2"]},
     "error": None},
    {"zone": "drop", "target": "DROP", "sources": ["172.19.0.9"], "ipsets": {}, "error": None},
    {"zone": "internal", "target": "default", "sources": ["fd00:20::/64"], "ipsets": {}, "error": None},
    {"zone": "trusted", "target": "ACCEPT", "sources": ["203.0.113.0/24"], "ipsets": {}, "error": None},
    {"zone": "work", "target": "default", "sources": ["AA:BB:CC:DD:EE:FF"], "ipsets": {}, "error": None}]


def test_a_zone_that_takes_a_member_s_traffic_by_source_and_refuses_it_is_named_with_the_member_and_the_fix():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    nodes = [zoned("m1", "172.19.0.2", CAPTURED_ZONES), zoned("w1", "172.19.0.9", []), zoned("w2", "172.19.0.7", [])]
    gaps = firewall_gaps(nodes, "auto", ["203.0.113.0/24"])
    assert gaps == firewall_gaps(nodes, "firewalld", ["203.0.113.0/24"]) == [
        "m1: firewalld zone drop takes the traffic of member w1 (172.19.0.9, source 172.19.0.9) before zone public, "
        "where the Ray step admits the members, and refuses what it does not open (target DROP): Ray and the engine "
        "could not reach this node from w1; take it out (firewall-cmd --zone=drop --remove-source=172.19.0.9, and "
        "again with --permanent)"]
    # The ipset of the block zone holds m1's own address: its own traffic is loopback's, not a peer's. Held by w2,
    # the same ipset refuses m1 there.
    nodes[2] = zoned("w2", "172.19.0.7", CAPTURED_ZONES[:1])
    assert firewall_gaps(nodes, "auto", ["203.0.113.0/24"])[1] == (
        "w2: firewalld zone block takes the traffic of member m1 (172.19.0.2, source ipset:blk) before zone public, "
        "where the Ray step admits the members, and refuses what it does not open (target %%REJECT%%): Ray and the "
        "engine could not reach this node from m1; take it out (firewall-cmd --zone=block --remove-source=ipset:blk, "
        "and again with --permanent)")
    assert firewall_gaps(nodes, "none") == []
    assert [g for g in firewall_gaps(nodes, "nftables") if "zone" in g] == []
    # A node whose interface is in another zone too: both are named.
    nodes[2]["facts"]["firewall"]["interface_zone"] = "internal"
    assert [g[:29] for g in firewall_gaps(nodes, "auto", ["203.0.113.0/24"])] == [
        "m1: firewalld zone drop takes", "w2: eth0 is in firewalld zone", "w2: firewalld zone block take"]


def test_a_zone_that_accepts_every_port_from_more_than_the_members_and_admin_networks_is_named():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    nodes = [zoned("m1", "172.19.0.2", CAPTURED_ZONES[3:4]), zoned("w1", "172.19.0.9", [])]
    # trusted accepts 203.0.113.0/24 on every port: a network the operators did not name as theirs.
    assert firewall_gaps(nodes, "auto") == [
        "m1: firewalld zone trusted accepts every port (target ACCEPT) from 203.0.113.0/24 before the rules of the Ray "
        "step see it, and that is not only the members and llm_cluster_admin_cidrs: hosts there would reach Ray and "
        "the engine; take it out (firewall-cmd --zone=trusted --remove-source=203.0.113.0/24, and again with "
        "--permanent), or list the network in llm_cluster_admin_cidrs to let it in on purpose"]
    # Inside an admin network, or a member's own address, it is what the Ray step admits anyway.
    assert firewall_gaps(nodes, "auto", ["203.0.112.0/23"]) == []
    assert firewall_gaps(nodes, "auto", ["203.0.113.0/25"]) != []
    members_only = dict(CAPTURED_ZONES[3], sources=["172.19.0.9", "ipset:ours"], ipsets={"ours": ["172.19.0.2"]})
    assert firewall_gaps([zoned("m1", "172.19.0.2", [members_only]), nodes[1]], "auto") == []
    # An ipset's entries and a MAC address: what lies beyond is listed; a MAC address cannot be told.
    wide = dict(CAPTURED_ZONES[3], sources=["ipset:blk", "AA:BB:CC:DD:EE:FF"], ipsets={"blk": ["198.51.100.0/24", "172.19.0.9"]})
    gaps = firewall_gaps([zoned("m1", "172.19.0.2", [wide]), nodes[1]], "auto")
    assert [g.split(" before ")[0] for g in gaps] == [
        "m1: firewalld zone trusted accepts every port (target ACCEPT) from ipset:blk (198.51.100.0/24)",
        "m1: firewalld zone trusted accepts every port (target ACCEPT) from AA:BB:CC:DD:EE:FF"]


def test_source_zones_that_harm_nothing_pass_and_one_that_cannot_be_read_fails():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    # A blocklist (drop, block) of non-members, a default-target zone of another network, a MAC address in a zone
    # that refuses, and the rules' own zone binding the members by source: none stands between the members.
    harmless = [dict(CAPTURED_ZONES[0], ipsets={"blk": ["198.51.100.0/24"]}), CAPTURED_ZONES[2], CAPTURED_ZONES[4],
                {"zone": "public", "target": "default", "sources": ["172.19.0.0/16"], "ipsets": {}, "error": None}]
    nodes = [zoned("m1", "172.19.0.2", harmless), zoned("w1", "172.19.0.9", harmless)]
    assert firewall_gaps(nodes, "auto") == []
    unread = [{"zone": None, "target": None, "sources": [], "ipsets": {},
               "error": "firewall-cmd --list-all-zones: FirewallD is not running"},
              dict(CAPTURED_ZONES[0], ipsets={}, error="firewall-cmd --ipset=blk --get-entries: Error: INVALID_IPSET: blk")]
    assert firewall_gaps([zoned("m1", "172.19.0.2", unread)], "auto") == [
        "m1: firewalld's zones that bind sources cannot be read (firewall-cmd --list-all-zones: FirewallD is not "
        "running), so the preflight cannot tell whether one takes a member's or a stranger's traffic before the rules "
        "of the Ray step; make that command answer on the node, then run again",
        "m1: firewalld's zones that bind sources cannot be read (firewall-cmd --ipset=blk --get-entries: Error: "
        "INVALID_IPSET: blk), so the preflight cannot tell whether one takes a member's or a stranger's traffic "
        "before the rules of the Ray step; make that command answer on the node, then run again"]


def test_the_permanent_configuration_is_judged_too_and_named_as_such():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._preflight import firewall_gaps
    # firewalld 1.3.3 with sources added with --permanent only (firewall-cmd-permanent-list-all-zones-sources.txt):
    # not running yet, running after the next reload or boot.
    later = [dict(CAPTURED_ZONES[1], permanent=True),
             dict(CAPTURED_ZONES[0], ipsets={"blk": ["10.9.9.0/24"]}, permanent=True)]
    nodes = [zoned("m1", "172.19.0.2", later), zoned("w1", "172.19.0.9", [])]
    assert firewall_gaps(nodes, "auto") == [
        "m1: firewalld zone drop takes the traffic of member w1 (172.19.0.9, source 172.19.0.9) before zone public, "
        "where the Ray step admits the members, and refuses what it does not open (target DROP): Ray and the engine "
        "could not reach this node from w1; take it out (firewall-cmd --permanent --zone=drop "
        "--remove-source=172.19.0.9); this is firewalld's permanent configuration, not running yet: its next reload "
        "or the node's boot makes it so"]
    # Running and permanent alike: named once, as running.
    both = [dict(CAPTURED_ZONES[1], permanent=False), dict(CAPTURED_ZONES[1], permanent=True)]
    assert [g[-40:] for g in firewall_gaps([zoned("m1", "172.19.0.2", both), nodes[1]], "auto")] == [
        "ve-source=172.19.0.9, and again with --permanent)"[-40:]]
