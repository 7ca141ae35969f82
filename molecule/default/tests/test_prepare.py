# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the prepare role leaves on three Atlas 800I A2 stand-ins."""

from __future__ import annotations

import json
import os

testinfra_hosts = ["ansible://all"]

ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")


def env_of(host):
    content = host.file("/etc/llm_cluster/env").content_string
    pairs = [line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#")]
    keys = [pair[0] for pair in pairs]
    assert len(keys) == len(set(keys)), "duplicate keys in the env file"
    return dict(pairs)


def address_of(host, name):
    return host.run("getent hosts %s" % name).stdout.split()[0]


def test_env_file_holds_the_resolved_interface(host):
    f = host.file("/etc/llm_cluster/env")
    assert f.exists and f.user == "root" and f.mode == 0o644
    env = env_of(host)
    name = host.backend.get_hostname()
    own = host.run("ip -4 -o addr show dev eth0").stdout.split()[3].split("/")[0]
    for key in ("GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "LLM_CLUSTER_INTERFACE"):
        assert env[key] == "eth0"
    assert env["HCCL_IF_IP"] == own
    assert env["LLM_CLUSTER_NODE_ADDRESS"] == own
    assert env["LLM_CLUSTER_HEAD_ADDRESS"] == address_of(host, "master1")
    assert env["LLM_CLUSTER_ROLE"] == ("head" if name == "master1" else "worker")
    assert env["LLM_CLUSTER_NODE_NUM"] == "3"
    assert env["LLM_CLUSTER_ACCELERATOR"] == "npu"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert env["vLLM_MODEL_BACKEND"] == "MindFormers"
    assert env["HCCL_CONNECT_TIMEOUT"] == "7200"


def test_login_shells_see_the_environment_and_bashrc_is_untouched(host):
    hook = host.file("/etc/profile.d/llm_cluster.sh")
    assert hook.exists and hook.mode == 0o644
    assert host.run("bash -lc 'echo $HCCL_SOCKET_IFNAME'").stdout.strip() == "eth0"
    assert not host.file("/root/.bashrc").contains("llm_cluster")


def test_probe_listener_is_gone(host):
    assert not host.socket("tcp://6379").is_listening


def test_preflight_report_on_the_controller(host):
    name = host.backend.get_hostname()
    with open(os.path.join(ARTIFACTS, "preflight-%s.json" % name)) as handle:
        report = json.load(handle)
    assert report["host"] == name and report["ok"] is True and report["failures"] == []
    checks = {}
    for check in report["checks"]:
        checks.setdefault(check["check"], []).append(check)
    assert all(c["ok"] for entries in checks.values() for c in entries)
    assert checks["device_count"][0]["detail"] == "8 NPUs"
    assert checks["npu_driver"][0]["detail"] == "NPU driver 25.0.rc1.1 >= 24.1.0"
    assert checks["reachability"][0]["detail"] == "reaches 2 peer(s) on port 6379"
    assert checks["clock"][0]["detail"].startswith("clock offset to a peer up to")
    # The report is the second run's: on the head, the Ray GCS (llm-cluster-ray-head) holds the Ray port and
    # the engine (llm-cluster-engine) the API port.
    held = "held by llm_cluster" if name == "master1" else "free"
    assert [c["detail"] for c in checks["port_free"]] == ["ray_port 6379 " + held, "llm_port 8000 " + held, "dp_port 12570 free"]
    assert report["summary"]["cann"] == "8.3.RC2" and report["summary"]["firmware"] == "7.7.0.1.231"


# llm_solution's fine-grained-bind-cann.py on this topology (192 CPUs, 8 NUMA
# nodes of 24, the NPU affinities of npu-smi info -t topo).
LLM_SOLUTION_WORKQUEUE_CORES = {0: (164, 167), 1: (160, 163), 2: (116, 119), 3: (112, 115),
                                4: (20, 23), 5: (16, 19), 6: (68, 71), 7: (64, 67)}


def kernel_mask(first, last, nr_cpus=192):
    value = sum(1 << cpu for cpu in range(first, last + 1))
    words = ["%08x" % ((value >> (32 * i)) & 0xFFFFFFFF) for i in range(nr_cpus // 32)]
    return ",".join(reversed(words))


def test_cann_workqueues_bound_like_llm_solution(host):
    for device, (first, last) in LLM_SOLUTION_WORKQUEUE_CORES.items():
        path = "/var/lib/llm-cluster-fakes/sys/devices/virtual/workqueue/dev%d_sq_send_wq/cpumask" % device
        assert host.file(path).content_string.strip() == kernel_mask(first, last)


def test_original_workqueue_masks_recorded_for_restore(host):
    state = host.file("/var/lib/llm_cluster/npu_bind.json")
    assert state.exists and state.mode == 0o600
    recorded = json.loads(state.content_string)
    assert recorded["version"] == 1 and len(recorded["entries"]) == 8


# --- NPU network (tag npu_network) --------------------------------------------
NODE_INDEX = {"master1": 0, "worker1": 1, "worker2": 2}


def planned_address(node, device):
    # 10.10.0.0/16 in rows: node k's devices are 10.10.<k+1>.<d+1>.
    return "10.10.%d.%d" % (NODE_INDEX[node] + 1, device + 1)


def test_every_device_has_its_planned_address_live_and_persisted(host):
    name = host.backend.get_hostname()
    conf = host.file("/etc/hccn.conf").content_string
    for device in range(8):
        live = host.check_output("hccn_tool -i %d -ip -g" % device)
        assert "ipaddr:%s" % planned_address(name, device) in live.splitlines()
        assert "address_%d=%s" % (device, planned_address(name, device)) in conf.splitlines()


def test_second_converge_made_no_set_calls(host):
    calls = host.file("/var/lib/llm-cluster-fakes/calls.log").content_string.splitlines()
    set_calls = [line for line in calls if line.startswith("hccn_tool ") and " -s " in line]
    # Exactly the first converge's eight address settings: check mode and the
    # idempotence run made none.
    assert len(set_calls) == 8, set_calls
    assert all("-ip -s address" in line for line in set_calls)


def test_rank_table_lists_24_devices_with_consistent_ranks(host):
    table = host.file("/etc/llm_cluster/rank_table_file.json")
    assert table.exists and table.mode == 0o640
    doc = json.loads(table.content_string)
    assert doc["status"] == "completed" and doc["version"] == "1.0" and doc["server_count"] == "3"
    servers = doc["server_list"]
    assert servers[0]["server_id"] == address_of(host, "master1")
    ranks = [int(d["rank_id"]) for s in servers for d in s["device"]]
    assert ranks == list(range(24))
    for server, node in zip(servers, ("master1", "worker1", "worker2")):
        assert [d["device_ip"] for d in server["device"]] == [planned_address(node, i) for i in range(8)]
        assert all(isinstance(v, str) for d in server["device"] for v in d.values())


def test_mesh_gate_report_on_the_controller(host):
    with open(os.path.join(ARTIFACTS, "npu-network.json")) as handle:
        doc = json.load(handle)
    assert doc["report"]["ok"] is True
