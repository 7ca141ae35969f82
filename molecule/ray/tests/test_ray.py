# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The Ray cluster's life, in order: formed, unchanged, self-healing, restarted in order, explained, removed.

The tests run once (on master1) and drive the other nodes through testinfra hosts and ansible-playbook
runs against Molecule's inventory, so they depend on the order they are written in.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time

import pytest
import testinfra

testinfra_hosts = ["ansible://master1"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
NAMES = ["master1", "worker1", "worker2"]
PY = "/opt/llm_cluster/ray/bin/python"
UNIT = {"master1": "llm-cluster-ray-head", "worker1": "llm-cluster-ray-worker", "worker2": "llm-cluster-ray-worker"}

READ = r'''
import json, sys, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
print(json.dumps({"alive": sorted(n["NodeManagerAddress"] for n in alive),
                  "npu": ray.cluster_resources().get("NPU", 0)}))
'''
# Three tasks that each need all 8 NPU of a node, overlapping in time: one runs on every node.
SPREAD = r'''
import json, socket, sys, time, ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
@ray.remote(num_cpus=0, resources={"NPU": 8})
def where():
    time.sleep(2)
    return socket.gethostname()
print(json.dumps(sorted(ray.get([where.remote() for _ in range(3)], timeout=120))))
'''


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


@pytest.fixture(scope="module")
def addresses(nodes):
    return {name: node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0] for name, node in nodes.items()}


def python(node, code, *args):
    return node.run("%s - %s <<'EOF'\n%s\nEOF" % (PY, " ".join(args), code))


def cluster(nodes, addresses, port=6379, want=3, wait=60):
    """Alive node addresses and NPU total seen from master1, waiting up to `wait` s for `want` nodes."""
    deadline, last = time.time() + wait, None
    while time.time() < deadline:
        out = python(nodes["master1"], READ, "%s:%d" % (addresses["master1"], port))
        if out.rc == 0:
            last = json.loads(out.stdout.strip().splitlines()[-1])
            if len(last["alive"]) == want:
                break
        time.sleep(2)
    return last


def unit(node, name):
    props = node.check_output("systemctl show %s -p MainPID -p ActiveState -p ActiveEnterTimestampMonotonic -p NRestarts" % name)
    return dict(line.split("=", 1) for line in props.splitlines())


def pids(nodes):
    return {name: unit(node, UNIT[name])["MainPID"] for name, node in nodes.items()}


def playbook(path, *extra):
    result = subprocess.run(["ansible-playbook", "-i", INVENTORY, path] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                            check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def ray_step(*extra):
    return playbook(os.path.join(SCENARIO, "ray.yml"), *extra)


def test_cluster_has_3_nodes_and_24_npu(nodes, addresses):
    seen = cluster(nodes, addresses)
    assert seen == {"alive": sorted(addresses.values()), "npu": 24.0}


def test_a_task_runs_on_every_node(nodes, addresses):
    out = python(nodes["master1"], SPREAD, "%s:6379" % addresses["master1"])
    assert out.rc == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == NAMES


def test_units_enabled_and_pinned(nodes, addresses):
    for name, node in nodes.items():
        svc = node.service(UNIT[name])
        assert svc.is_running and svc.is_enabled, name
        text = node.file("/etc/systemd/system/%s.service" % UNIT[name]).content_string
        assert "--node-ip-address=%s " % addresses[name] in text
        assert "'--resources={\"NPU\": 8}'" in text
        assert "--min-worker-port=20000" in text and "--max-worker-port=20999" in text
    head = nodes["master1"].file("/etc/systemd/system/llm-cluster-ray-head.service").content_string
    assert "--include-dashboard=false" in head


def test_ray_ports_refuse_non_members(nodes, addresses):
    # The controller is not a member: its SYN to the GCS port is dropped.
    with pytest.raises(OSError):
        socket.create_connection((addresses["master1"], 6379), timeout=2).close()
    probe = nodes["worker1"].run("python3 -c 'import socket; socket.create_connection((\"%s\", 6379), timeout=2)'"
                                 % addresses["master1"])
    assert probe.rc == 0, probe.stderr
    table = nodes["master1"].check_output("nft list table inet llm_cluster")
    for address in addresses.values():
        assert address in table


def test_second_run_changes_nothing_and_keeps_every_pid(nodes):
    before = pids(nodes)
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    assert pids(nodes) == before


def test_stopped_worker_rejoins_alone(nodes, addresses):
    before = pids(nodes)
    nodes["worker1"].check_output("systemctl stop llm-cluster-ray-worker")
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {"master1": 0, "worker1": 1, "worker2": 0}
    after = pids(nodes)
    assert after["master1"] == before["master1"] and after["worker2"] == before["worker2"]
    assert after["worker1"] != before["worker1"]
    assert cluster(nodes, addresses)["npu"] == 24.0


def test_killed_raylet_is_restarted_by_systemd_alone(nodes, addresses):
    before = pids(nodes)
    restarts = int(unit(nodes["worker2"], UNIT["worker2"])["NRestarts"])
    nodes["worker2"].check_output("pkill -9 -x raylet")
    deadline = time.time() + 60
    while time.time() < deadline and int(unit(nodes["worker2"], UNIT["worker2"])["NRestarts"]) == restarts:
        time.sleep(1)
    assert int(unit(nodes["worker2"], UNIT["worker2"])["NRestarts"]) == restarts + 1
    assert cluster(nodes, addresses)["npu"] == 24.0
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    after = pids(nodes)
    assert after["master1"] == before["master1"] and after["worker1"] == before["worker1"]


def test_port_change_restarts_the_head_then_the_workers(nodes, addresses):
    before = pids(nodes)
    result, changed = ray_step("-e", "ray_cluster_port=6479")
    assert result.returncode == 0, result.stdout[-3000:]
    assert all(changed[name] > 0 for name in NAMES)
    after = pids(nodes)
    assert all(after[name] != before[name] for name in NAMES)
    started = {name: int(unit(node, UNIT[name])["ActiveEnterTimestampMonotonic"]) for name, node in nodes.items()}
    assert started["master1"] < started["worker1"] and started["master1"] < started["worker2"]
    assert cluster(nodes, addresses, port=6479) == {"alive": sorted(addresses.values()), "npu": 24.0}
    # And back to the inventory's port for the rest of the life.
    result, changed = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert cluster(nodes, addresses)["npu"] == 24.0


def test_worker_that_cannot_reach_the_head_is_named(nodes, addresses):
    worker = nodes["worker2"]
    worker.check_output("nft add table inet harness_block")
    worker.check_output("nft 'add chain inet harness_block out { type filter hook output priority 0; }'")
    worker.check_output("nft add rule inet harness_block out ip daddr %s tcp dport 6379 drop" % addresses["master1"])
    try:
        worker.check_output("systemctl restart llm-cluster-ray-worker")
        result, dummy = ray_step("-e", "ray_cluster_join_timeout=20")
        output = " ".join(result.stdout.split())
        assert result.returncode != 0
        assert "Ray cluster incomplete after 20s: nodes: 2 of 3 alive" in output
        assert "worker2 (%s): unit llm-cluster-ray-worker is" % addresses["worker2"] in output
        assert "CANNOT reach the head's GCS %s:6379" % addresses["master1"] in output
        assert "worker1 (" not in output
    finally:
        worker.run("nft delete table inet harness_block")
    result, dummy = ray_step()
    assert result.returncode == 0, result.stdout[-3000:]
    assert cluster(nodes, addresses)["npu"] == 24.0


def test_status_reports_every_node(nodes):
    result, changed = playbook("aihost.llm_cluster.status")
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {name: 0 for name in NAMES}
    with open(os.path.join(ARTIFACTS, "ray-cluster.json")) as handle:
        doc = json.load(handle)
    assert doc["complete"] and doc["alive"] == 3 and doc["resources"]["NPU"] == 24
    assert [(n["host"], n["in_cluster"], n["ray_version"], n["resources"]["NPU"]) for n in doc["nodes"]] == [
        (name, "alive", "2.60.0", 8) for name in NAMES]
    assert "Ray at " in result.stdout and "3 of 3 node(s) alive" in result.stdout


def test_teardown_leaves_no_process_unit_or_rule(nodes):
    result, changed = playbook("aihost.llm_cluster.teardown")
    assert result.returncode == 0, result.stdout[-3000:]
    for name, node in nodes.items():
        assert node.run("pgrep -f '[/]opt/llm_cluster/ray/'").rc == 1, node.check_output("ps -ef")
        for unit_file in ("llm-cluster-ray-head", "llm-cluster-ray-worker", "llm-cluster-firewall"):
            assert not node.file("/etc/systemd/system/%s.service" % unit_file).exists
        assert node.run("nft list table inet llm_cluster").rc != 0
        assert "llm_cluster" not in node.check_output("nft list tables")
        # The venv stays unless ray_cluster_purge=true.
        assert node.file(PY).exists
    again, changed = playbook("aihost.llm_cluster.teardown")
    assert again.returncode == 0 and changed == {name: 0 for name in NAMES}
