# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import copy

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _ray_cluster as rc

GIB = 1024 ** 3
HOSTS = ["master1", "worker1", "worker2"]
ADDRESSES = {"master1": "172.18.0.2", "worker1": "172.18.0.3", "worker2": "172.18.0.4"}
PORTS = {"ray_cluster_port": 6379, "ray_cluster_node_manager_port": 6380, "ray_cluster_object_manager_port": 6381,
         "ray_cluster_llm_port": 8000, "ray_cluster_dp_port": 12570}
SETTINGS = {"ports": PORTS, "worker_ports": [20000, 20999], "min_worker_ports": 64, "object_store_memory": 0,
            "temp_min_free_gb": 5, "env_file": "/etc/llm_cluster/env", "unit_prefix": "llm-cluster-"}


def info(**over):
    base = {"venv": {"path": "/opt/llm_cluster/ray", "exists": True, "python_version": "3.11.2", "ray_version": "2.60.0"},
            "service": {"name": "llm-cluster-ray-worker", "exists": True, "active_state": "active", "sub_state": "running",
                        "main_pid": 100, "restarts": 0},
            "memory": 3 * GIB, "shm": {"size": GIB}, "temp_dir": {"checked": "/var/lib", "free": 50 * GIB},
            "listeners": [], "firewall": {"firewalld": False, "nft": "/usr/sbin/nft", "backend": "nftables"}, "journal": []}
    base.update(over)
    return base


def nodes(**per_host):
    return [{"host": h, "address": ADDRESSES[h], "interface": "eth0", "firewall": "auto", "info": per_host.get(h) or info()}
            for h in HOSTS]


def test_parse_env_skips_comments_and_keeps_values_with_equals():
    assert rc.parse_env("#\n# Ansible managed\nA=1\n\nB=x=y\nnot a pair\n") == {"A": "1", "B": "x=y"}


def test_port_ranges_merge_contiguous_ports():
    assert rc.port_ranges([6381, 6379, 6380, 8000, 12570], ["20000-20999", "21000-21001"]) == [
        "6379-6381", "8000", "12570", "20000-21001"]
    assert rc.port_ranges([], []) == []


def test_healthy_cluster_passes_and_sizes_the_object_store():
    report = rc.check_nodes(nodes(), SETTINGS)
    assert report["ok"] and report["failures"] == []
    assert report["object_store"] == {h: 819 * 1024 * 1024 for h in HOSTS}


@pytest.mark.parametrize("change, message", [
    ({"ray_cluster_llm_port": 6379}, "ray_cluster_llm_port and ray_cluster_port are both 6379"),
    ({"ray_cluster_dp_port": 20500}, "ray_cluster_dp_port 20500 lies inside the Ray worker port range 20000-20999"),
    ({"ray_cluster_port": 70000}, "ray_cluster_port is 70000, outside 1-65535"),
])
def test_port_settings_are_named(change, message):
    settings = dict(SETTINGS, ports=dict(PORTS, **change))
    report = rc.check_nodes(nodes(), settings)
    assert not report["ok"] and any(message in f for f in report["failures"]), report["failures"]


@pytest.mark.parametrize("kv_ports, message", [
    (["36000-36999", 5600, "8998"], None),
    (["36000-x"], "ray_cluster_kv_ports (llm_cluster_kv_ports) takes ports and first-last ranges inside 1-65535, got '36000-x'"),
    (["1-2;nft flush ruleset"], "takes ports and first-last ranges inside 1-65535, got '1-2;nft flush ruleset'"),
    ([{"port": 1}], "takes ports and first-last ranges inside 1-65535, got {'port': 1}"),
    (["0"], "takes ports and first-last ranges inside 1-65535, got '0'"),
    (["36010-36000"], "got '36010-36000'"),
    (["7999-8001"], "ray_cluster_kv_ports 7999-8001 holds ray_cluster_llm_port 8000; move one of them"),
    (["20990-21010"], "ray_cluster_kv_ports 20990-21010 overlaps the Ray worker port range 20000-20999"),
    ("36000-36999", "must be a list of ports and first-last ranges, got '36000-36999'"),
])
def test_kv_ports_are_ports_or_ranges_clear_of_ray_s_and_the_engine_s(kv_ports, message):
    report = rc.check_nodes(nodes(), dict(SETTINGS, kv_ports=kv_ports))
    if message is None:
        assert report["ok"], report["failures"]
    else:
        assert not report["ok"] and any(message in f for f in report["failures"]), report["failures"]


def test_worker_range_must_be_valid_and_large_enough():
    assert "give a range like 20000-20999" in rc.check_nodes(nodes(), dict(SETTINGS, worker_ports=[21000, 20000]))["failures"][0]
    assert "leaves 10 ports" in rc.check_nodes(nodes(), dict(SETTINGS, worker_ports=[20000, 20009]))["failures"][0]


def test_each_node_problem_names_host_and_fix():
    foreign = info(listeners=[{"port": 6380, "owners": [{"pid": 77, "comm": "redis-server", "unit": "redis.service"}]},
                              {"port": 20001, "owners": [{"pid": 90, "comm": "raylet", "unit": "llm-cluster-ray-worker.service"}]}])
    small_shm = info(shm={"size": 64 * 1024 * 1024})
    full_disk = info(temp_dir={"checked": "/var/lib", "free": GIB})
    report = rc.check_nodes(nodes(master1=foreign, worker1=small_shm, worker2=full_disk), SETTINGS)
    assert report["failures"] == [
        "master1: port 6380 (ray_cluster_node_manager_port) is in use by pid 77 (redis-server, unit redis.service); "
        "stop it or move the port",
        "worker1: /dev/shm holds only 64 MiB; the Ray object store needs at least 94 MiB there; enlarge /dev/shm "
        "(mount -o remount,size=..., or --shm-size for a container) or set ray_cluster_object_store_memory",
        "worker2: 1.0 GiB free under /var/lib for Ray's temp dir, 5.0 GiB wanted; free space or set ray_cluster_temp_dir "
        "to a larger disk",
    ]


def test_missing_address_and_unavailable_firewall():
    data = nodes(worker1=info(firewall={"firewalld": False, "nft": None, "backend": "none"}))
    data[0]["address"] = ""
    data[1]["firewall"] = "nftables"
    data[2]["firewall"] = "firewalld"
    failures = rc.check_nodes(data, SETTINGS)["failures"]
    assert failures == [
        "master1: no cluster address in /etc/llm_cluster/env; run the prepare step first (--tags prepare)",
        "worker1: ray_cluster_firewall is nftables but there is no nft command; install nftables or set "
        "ray_cluster_firewall to auto",
        "worker2: ray_cluster_firewall is firewalld but firewalld is not running; start it or set ray_cluster_firewall to auto",
    ]


def test_no_firewall_at_all_fails_unless_acknowledged():
    bare = info(firewall={"firewalld": False, "nft": None, "backend": "none"})
    failures = rc.check_nodes(nodes(worker2=bare), SETTINGS)["failures"]
    assert failures == [
        "worker2: no firewall: firewalld is not running and there is no nft command, so Ray and the engine would be "
        "open to anyone who can reach 172.18.0.4; install nftables (apt-get install nftables, or dnf install nftables) "
        "or start firewalld, or set llm_cluster_firewall: none to acknowledge that the network around the nodes keeps "
        "non-members out"]
    acknowledged = nodes(worker2=bare)
    acknowledged[2]["firewall"] = "none"
    assert rc.check_nodes(acknowledged, SETTINGS)["ok"]


def test_an_interface_name_nft_cannot_hold_is_refused():
    data = nodes()
    data[1]["interface"] = 'eth0" accept #'
    assert rc.check_nodes(data, SETTINGS)["failures"] == [
        "worker1: cluster interface 'eth0\" accept #' cannot be named in the nftables table; set ray_device to the "
        "interface's name (1-15 of A-Z a-z 0-9 _ . - @)"]
    # firewalld does not name the interface.
    data[1]["info"] = info(firewall={"firewalld": True, "nft": "/usr/sbin/nft", "backend": "firewalld"})
    assert rc.check_nodes(data, SETTINGS)["ok"]


def test_versions_must_match_the_pin_and_each_other():
    assert rc.check_versions(nodes(), "2.60.0") == {"ok": True, "failures": []}
    old = info(venv={"path": "/opt/llm_cluster/ray", "exists": True, "python_version": "3.12.1", "ray_version": "2.49.0"})
    report = rc.check_versions(nodes(worker2=old), "2.60.0")
    assert report["failures"] == [
        "worker2: Ray 2.49.0 in /opt/llm_cluster/ray, the cluster pins 2.60.0; rerun with ray_cluster_version=2.60.0 "
        "or fix the wheelhouse",
        "Ray needs one Python version on every node, found Python 3.11 on master1, worker1; Python 3.12 on worker2; "
        "recreate the venvs (ray_cluster_python) with the same interpreter",
    ]


def test_versions_skip_nodes_without_a_venv_in_check_mode():
    none = info(venv={"path": "/opt/llm_cluster/ray", "exists": False})
    assert rc.check_versions(nodes(worker1=none), "2.60.0")["ok"]


CLUSTER = {"connected": True, "complete": False, "alive": 2, "missing": ["nodes: 2 of 3 alive"],
           "resources": {"NPU": 16.0},
           "nodes": [{"address": "172.18.0.2", "alive": True, "resources": {"NPU": 8.0, "CPU": 2.0}},
                     {"address": "172.18.0.3", "alive": True, "resources": {"NPU": 8.0, "CPU": 2.0}},
                     {"address": "172.18.0.4", "alive": False, "resources": {"NPU": 8.0}}]}


def test_join_report_names_the_missing_node_and_why():
    blocked = info(service={"name": "llm-cluster-ray-worker", "exists": True, "active_state": "activating",
                            "sub_state": "auto-restart", "restarts": 3},
                   journal=["Nov 30 raylet: Failed to connect to GCS at 172.18.0.2:6379"])
    data = nodes(worker2=blocked)
    data[2]["probe"] = {"address": "172.18.0.2", "reachable": False, "error": "timed out"}
    data[1]["probe"] = {"address": "172.18.0.2", "reachable": True}
    report = rc.join_report(CLUSTER, data, {"head": "master1", "port": 6379, "timeout": 20})
    assert report["missing_hosts"] == ["worker2"]
    assert report["lines"] == [
        "Ray cluster incomplete after 20s: nodes: 2 of 3 alive.",
        "worker2 (172.18.0.4): unit llm-cluster-ray-worker is activating/auto-restart after 3 restart(s); CANNOT reach "
        "the head's GCS 172.18.0.2:6379 (timed out): allow TCP 6379 from 172.18.0.4 on master1's firewall, check "
        "routing; Ray 2.60.0, Python 3.11.2",
        "    worker2 | Nov 30 raylet: Failed to connect to GCS at 172.18.0.2:6379",
    ]


def test_join_report_flags_version_drift_and_missing_units():
    drift = info(venv={"path": "/opt/llm_cluster/ray", "exists": True, "python_version": "3.11.2", "ray_version": "2.59.0"},
                 service={"name": "llm-cluster-ray-worker", "exists": False})
    data = nodes(worker2=drift)
    data[2]["probe"] = {"address": "172.18.0.2", "reachable": True}
    lines = rc.join_report(CLUSTER, data, {"head": "master1", "port": 6379, "timeout": 180})["lines"]
    assert "unit llm-cluster-ray-worker is not installed; reaches the head's GCS 172.18.0.2:6379; Ray 2.59.0" in lines[1]
    assert lines[-1] == "    worker2: versions differ from the head (Ray 2.60.0, Python 3.11.2)"


def test_join_report_when_all_alive_but_resources_short():
    cluster = dict(CLUSTER, missing=["NPU: 16 of 24"], nodes=[dict(n, alive=True) for n in CLUSTER["nodes"]])
    report = rc.join_report(cluster, nodes(), {"head": "master1", "port": 6379, "timeout": 180})
    assert report["missing_hosts"] == []
    assert "Every node is alive, but the expected resources are not all visible" in report["lines"][1]


def test_status_and_table():
    cluster = copy.deepcopy(CLUSTER)
    data = [dict(n, role="head" if n["host"] == "master1" else "worker", firewall="nftables") for n in nodes()]
    doc = rc.status(cluster, data, {"address": "172.18.0.2:6379", "expect_nodes": 3})
    assert [(n["host"], n["in_cluster"], n["unit_state"], n["pid"]) for n in doc["nodes"]] == [
        ("master1", "alive", "active/running", 100), ("worker1", "alive", "active/running", 100),
        ("worker2", "dead", "active/running", 100)]
    assert doc["alive"] == 2 and not doc["complete"]
    table = rc.status_table(doc).splitlines()
    assert table[0].split() == ["HOST", "ROLE", "ADDRESS", "UNIT", "PID", "RAY", "PYTHON", "MEMBER", "RESOURCES"]
    assert table[1].split() == ["master1", "head", "172.18.0.2", "active/running", "100", "2.60.0", "3.11.2", "alive",
                                "CPU=2", "NPU=8"]
    assert table[-1] == "Ray at 172.18.0.2:6379: 2 of 3 node(s) alive, NPU=16"


def test_status_of_an_unreachable_cluster():
    doc = rc.status({"connected": False, "error": "ConnectionError: no GCS"}, nodes(), {"address": "a:1", "expect_nodes": 3})
    assert [n["in_cluster"] for n in doc["nodes"]] == ["absent"] * 3
    assert rc.status_table(doc).splitlines()[-1] == "Ray at a:1: 0 of 3 node(s) alive, - (not reachable: ConnectionError: no GCS)"


@pytest.mark.parametrize("env, extra, expected", [
    ({"LLM_CLUSTER_ACCELERATOR": "npu", "LLM_CLUSTER_ACCELERATOR_COUNT": "8"}, {}, {"resources": {"NPU": 8}, "num_gpus": 0}),
    ({"LLM_CLUSTER_ACCELERATOR": "gpu", "LLM_CLUSTER_ACCELERATOR_COUNT": "4"}, {}, {"resources": {}, "num_gpus": 4}),
    ({"LLM_CLUSTER_ACCELERATOR": "cpu", "LLM_CLUSTER_ACCELERATOR_COUNT": "0"}, {"disk": 1}, {"resources": {"disk": 1}, "num_gpus": 0}),
    # An NPU node whose driver saw no device: no NPU resource; ray_cluster_resources wins over the count.
    ({"LLM_CLUSTER_ACCELERATOR": "npu", "LLM_CLUSTER_ACCELERATOR_COUNT": "0"}, {}, {"resources": {}, "num_gpus": 0}),
    ({"LLM_CLUSTER_ACCELERATOR": "npu", "LLM_CLUSTER_ACCELERATOR_COUNT": "8"}, {"NPU": 4}, {"resources": {"NPU": 4}, "num_gpus": 0}),
    ({"LLM_CLUSTER_ACCELERATOR": "gpu", "LLM_CLUSTER_ACCELERATOR_COUNT": "x"}, {}, {"resources": {}, "num_gpus": 0}),
    ({}, None, {"resources": {}, "num_gpus": 0}),
])
def test_node_resources_from_the_environment_file(env, extra, expected):
    assert rc.node_resources(env, extra) == expected


def test_expected_resources_sum_every_node():
    nodes = [rc.node_resources({"LLM_CLUSTER_ACCELERATOR": "npu", "LLM_CLUSTER_ACCELERATOR_COUNT": "8"}),
             rc.node_resources({"LLM_CLUSTER_ACCELERATOR": "npu", "LLM_CLUSTER_ACCELERATOR_COUNT": "7"}, {"disk": 1}),
             rc.node_resources({"LLM_CLUSTER_ACCELERATOR": "gpu", "LLM_CLUSTER_ACCELERATOR_COUNT": "2"}),
             {}, None]
    assert rc.expected_resources(nodes) == {"NPU": 15, "disk": 1, "GPU": 2}
    assert rc.expected_resources([]) == {}
