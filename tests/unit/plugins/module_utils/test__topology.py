# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import json
import os
import shutil

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _accelerators as accelerators
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _topology as topology
import topology_fixtures

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures")
TOPOLOGIES = topology_fixtures.ROOT
VENDOR = os.path.join(FIXTURES, "vendor")
NAMES = ["atlas-800i-a2", "atlas-a3-910c", "cpuset-restricted", "dgx-h100", "offline-cpus", "vm-2cpu"]
TOP_KEYS = {"cpus", "nr_cpus", "allowed", "allowed_source", "isolated", "siblings", "numa_nodes", "numa_distances",
            "l3_groups", "packages", "clusters", "devices", "errors"}


def read_text(path):
    with open(path, encoding="utf-8") as handle:
        return handle.read()


def manifest(name):
    base = os.path.join(TOPOLOGIES, name)
    data = json.loads(read_text(os.path.join(base, "fixture.json")))
    tool = read_text(os.path.join(base, data["tool_output"])) if data["tool_output"] else None
    return base, data["accelerators"], tool


def load(name, root=None, tool=True):
    base, inventory, output = manifest(name)
    return topology.read_topology(root or base, inventory, output if tool else None)


def copy_fixture(name, tmp_path):
    target = tmp_path / name
    shutil.copytree(os.path.join(TOPOLOGIES, name), str(target))
    return target


def make_tree(root, files):
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def cpus_of(text):
    return topology.cpuset.parse_cpulist(text)


# ---------------------------------------------------------------------------
# Every fixture
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_fixture_loads(name):
    data = load(name)
    assert set(data) == TOP_KEYS
    assert data["errors"] == []
    assert json.loads(json.dumps(data)) == data
    online = set(data["cpus"])
    assert data["cpus"] == sorted(online)
    assert set(data["allowed"]) <= online
    assert data["nr_cpus"] > max(online)
    siblings = [cpu for group in data["siblings"] for cpu in group]
    assert sorted(siblings) == data["cpus"]
    node_cpus = [cpu for cpus in data["numa_nodes"].values() for cpu in cpus]
    assert sorted(node_cpus) == data["cpus"]
    assert sorted(cpu for cpus in data["packages"].values() for cpu in cpus) == data["cpus"]
    assert sorted(cpu for group in data["l3_groups"] for cpu in group) == data["cpus"]


def test_fixture_generator_uses_the_vendor_topo_sample():
    dummy, dummy, output = manifest("atlas-800i-a2")
    assert output == read_text(os.path.join(VENDOR, "npu-smi-info-t-topo-800a2.txt"))


# ---------------------------------------------------------------------------
# Atlas 800I A2
# ---------------------------------------------------------------------------

A2_NODES = {0: 6, 1: 6, 2: 4, 3: 4, 4: 0, 5: 0, 6: 2, 7: 2}


def test_atlas_800i_a2_cpus():
    data = load("atlas-800i-a2")
    assert data["cpus"] == list(range(192))
    assert data["nr_cpus"] == 192
    assert data["allowed"] == list(range(192))
    assert data["allowed_source"] == "online"
    assert data["isolated"] == []
    assert data["siblings"] == [[cpu] for cpu in range(192)]
    assert data["numa_nodes"] == dict((str(node), list(range(node * 24, node * 24 + 24))) for node in range(8))
    assert data["l3_groups"] == [list(range(node * 24, node * 24 + 24)) for node in range(8)]
    assert data["packages"] == dict((str(package), list(range(package * 48, package * 48 + 48))) for package in range(4))
    assert data["clusters"][:2] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(data["clusters"]) == 48
    assert data["numa_distances"]["0"] == {"0": 10, "1": 12, "2": 20, "3": 20, "4": 22, "5": 22, "6": 24, "7": 24}


def test_atlas_800i_a2_devices_from_sysfs():
    data = load("atlas-800i-a2")
    assert [device["index"] for device in data["devices"]] == list(range(8))
    for device in data["devices"]:
        node = A2_NODES[device["index"]]
        assert device["kind"] == "npu"
        assert device["numa_node"] == node
        assert device["local_cpus"] == list(range(node * 24, node * 24 + 24))
        assert device["source"] == "sysfs"
    assert data["devices"][0]["bus_id"] == "0000:c1:00.0"


def test_atlas_800i_a2_devices_from_npu_smi_without_pci_sysfs(tmp_path):
    root = copy_fixture("atlas-800i-a2", tmp_path)
    shutil.rmtree(str(root / "sys" / "bus"))
    data = load("atlas-800i-a2", root=str(root))
    for device in data["devices"]:
        node = A2_NODES[device["index"]]
        assert (device["numa_node"], device["source"]) == (node, "npu-smi")
        assert device["local_cpus"] == list(range(node * 24, node * 24 + 24))


def test_sysfs_wins_over_npu_smi(tmp_path):
    root = copy_fixture("atlas-800i-a2", tmp_path)
    (root / "sys/bus/pci/devices/0000:c1:00.0/local_cpulist").write_text("144-151\n", encoding="utf-8")
    data = load("atlas-800i-a2", root=str(root))
    assert data["devices"][0]["local_cpus"] == list(range(144, 152))
    assert data["devices"][0]["source"] == "sysfs"


def test_numa_node_minus_one_is_derived_from_local_cpus(tmp_path):
    root = copy_fixture("atlas-800i-a2", tmp_path)
    (root / "sys/bus/pci/devices/0000:c1:00.0/numa_node").write_text("-1\n", encoding="utf-8")
    (root / "sys/bus/pci/devices/0000:c2:00.0/numa_node").write_text("-1\n", encoding="utf-8")
    (root / "sys/bus/pci/devices/0000:c2:00.0/local_cpulist").write_text("0-191\n", encoding="utf-8")
    data = load("atlas-800i-a2", root=str(root), tool=False)
    assert data["devices"][0]["numa_node"] == 6
    assert data["devices"][1]["numa_node"] is None
    assert data["devices"][1]["local_cpus"] == list(range(192))


def test_known_node_without_local_cpulist_gives_the_node_cpus(tmp_path):
    root = copy_fixture("atlas-800i-a2", tmp_path)
    os.remove(str(root / "sys/bus/pci/devices/0000:41:00.0/local_cpulist"))
    data = load("atlas-800i-a2", root=str(root), tool=False)
    assert data["devices"][6]["numa_node"] == 2
    assert data["devices"][6]["local_cpus"] == list(range(48, 72))
    assert data["devices"][6]["source"] == "sysfs"


def test_atlas_800i_a2_from_a_real_inventory():
    outputs = {
        ("npu-smi", "info"): read_text(os.path.join(VENDOR, "npu-smi-info-800i-a2.txt")),
        ("npu-smi", "info", "-m"): read_text(os.path.join(VENDOR, "npu-smi-info-m-910b4.txt")),
        ("npu-smi", "info", "-t", "board", "-i", "0", "-c", "0"): read_text(
            os.path.join(VENDOR, "npu-smi-info-t-board-910b.txt")),
    }

    def run(argv):
        return 0, outputs[tuple(argv)], ""

    inventory = accelerators.probe_npu(run, "npu-smi", ascend_root="/nonexistent", dev_root="/nonexistent")
    data = topology.read_topology(os.path.join(TOPOLOGIES, "atlas-800i-a2"), inventory)
    assert [(device["index"], device["numa_node"]) for device in data["devices"]] == sorted(A2_NODES.items())


# ---------------------------------------------------------------------------
# Other fixtures
# ---------------------------------------------------------------------------

def test_atlas_a3_devices():
    data = load("atlas-a3-910c")
    assert len(data["cpus"]) == 320
    assert len(data["numa_nodes"]) == 8
    assert [(device["index"], device["numa_node"]) for device in data["devices"]] == [
        (index, index // 2) for index in range(16)]
    assert all(device["source"] == "sysfs" for device in data["devices"])


def test_atlas_a3_tool_without_affinity_column(tmp_path):
    root = copy_fixture("atlas-a3-910c", tmp_path)
    shutil.rmtree(str(root / "sys" / "bus"))
    data = load("atlas-a3-910c", root=str(root))
    assert data["errors"] == []
    assert all(device["source"] == "none" for device in data["devices"])
    assert all(device["numa_node"] is None and device["local_cpus"] == [] for device in data["devices"])


def test_dgx_h100():
    data = load("dgx-h100")
    assert len(data["cpus"]) == 224
    assert data["siblings"][0] == [0, 112]
    assert data["siblings"][-1] == [111, 223]
    assert len(data["siblings"]) == 112
    assert data["numa_nodes"] == {"0": cpus_of("0-55,112-167"), "1": cpus_of("56-111,168-223")}
    assert data["l3_groups"] == [cpus_of("0-55,112-167"), cpus_of("56-111,168-223")]
    assert data["numa_distances"] == {"0": {"0": 10, "1": 21}, "1": {"0": 21, "1": 10}}
    assert [device["numa_node"] for device in data["devices"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert data["devices"][0]["bus_id"] == "0000:1b:00.0"
    assert all(device["kind"] == "gpu" for device in data["devices"])


def test_dgx_h100_devices_from_nvidia_smi(tmp_path):
    root = copy_fixture("dgx-h100", tmp_path)
    shutil.rmtree(str(root / "sys" / "bus"))
    data = load("dgx-h100", root=str(root))
    assert [(device["numa_node"], device["source"]) for device in data["devices"]] == (
        [(0, "nvidia-smi")] * 4 + [(1, "nvidia-smi")] * 4)
    assert data["devices"][5]["local_cpus"] == cpus_of("56-111,168-223")


def test_offline_cpus():
    data = load("offline-cpus")
    assert data["cpus"] == [0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, 15]
    assert data["nr_cpus"] == 16
    assert data["isolated"] == [4, 5, 12, 13]
    assert [15] in data["siblings"]
    assert [0, 8] in data["siblings"]
    assert data["numa_nodes"] == {"0": [0, 1, 2, 3, 8, 9, 10, 11], "1": [4, 5, 12, 13, 15]}
    assert [device["local_cpus"] for device in data["devices"]] == [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 12, 13, 15]]


def test_cpuset_restricted():
    data = load("cpuset-restricted")
    assert data["allowed"] == list(range(0, 8)) + list(range(16, 24))
    assert data["allowed_source"] == "cgroup2 /sys/fs/cgroup/cpuset.cpus.effective"
    assert [(device["numa_node"], device["source"]) for device in data["devices"]] == [(1, "npu-smi"), (0, "npu-smi")]


def test_vm_2cpu():
    data = load("vm-2cpu")
    assert data["cpus"] == [0, 1]
    assert data["devices"] == []
    assert data["numa_nodes"] == {"0": [0, 1]}
    assert data["siblings"] == [[0], [1]]


# ---------------------------------------------------------------------------
# Readers on hand-made trees
# ---------------------------------------------------------------------------

CPU = "sys/devices/system/cpu/"


def test_missing_online_file_raises(tmp_path):
    with pytest.raises(topology.TopologyError) as exc:
        topology.read_topology(str(tmp_path))
    assert "online" in str(exc.value)


@pytest.mark.parametrize("text", ["", "zero\n"])
def test_bad_online_file_raises(tmp_path, text):
    make_tree(tmp_path, {CPU + "online": text})
    with pytest.raises(topology.TopologyError):
        topology.read_online_cpus(str(tmp_path))


def test_minimal_tree_without_numa_and_topology(tmp_path):
    make_tree(tmp_path, {CPU + "online": "0-3\n"})
    data = topology.read_topology(str(tmp_path))
    assert data["numa_nodes"] == {"0": [0, 1, 2, 3]}
    assert data["siblings"] == [[0], [1], [2], [3]]
    assert data["nr_cpus"] == 4
    assert data["l3_groups"] == []
    assert data["clusters"] == []
    assert data["numa_distances"] == {}
    assert data["packages"] == {"0": [0, 1, 2, 3]}
    assert data["devices"] == []


def test_siblings_from_core_ids_when_thread_siblings_list_is_missing(tmp_path):
    files = {CPU + "online": "0-3\n"}
    for cpu, core in ((0, 0), (1, 1), (2, 0), (3, 1)):
        files[CPU + "cpu%d/topology/core_id" % cpu] = "%d\n" % core
        files[CPU + "cpu%d/topology/physical_package_id" % cpu] = "0\n"
    make_tree(tmp_path, files)
    assert topology.read_topology(str(tmp_path))["siblings"] == [[0, 2], [1, 3]]


def test_siblings_are_a_partition_even_when_inconsistent(tmp_path):
    files = {CPU + "online": "0-3\n"}
    for cpu, siblings in ((0, "0,2"), (1, "1"), (2, "2,3"), (3, "3")):
        files[CPU + "cpu%d/topology/thread_siblings_list" % cpu] = siblings + "\n"
    make_tree(tmp_path, files)
    assert topology.read_topology(str(tmp_path))["siblings"] == [[0, 2, 3], [1]]


def test_l3_found_through_level_files(tmp_path):
    files = {CPU + "online": "0-1\n"}
    for cpu in (0, 1):
        files[CPU + "cpu%d/cache/index0/level" % cpu] = "1\n"
        files[CPU + "cpu%d/cache/index0/shared_cpu_list" % cpu] = "%d\n" % cpu
        files[CPU + "cpu%d/cache/index2/level" % cpu] = "3\n"
        files[CPU + "cpu%d/cache/index2/shared_cpu_list" % cpu] = "0-1\n"
        files[CPU + "cpu%d/cache/index3/level" % cpu] = "4\n"
        files[CPU + "cpu%d/cache/index3/shared_cpu_list" % cpu] = "%d\n" % cpu
    make_tree(tmp_path, files)
    assert topology.read_l3_groups(str(tmp_path)) == [[0, 1]]


def test_l3_ignores_cpus_without_cache_info(tmp_path):
    make_tree(tmp_path, {CPU + "online": "0-2\n", CPU + "cpu0/cache/index3/shared_cpu_list": "0-1\n"})
    assert topology.read_l3_groups(str(tmp_path)) == [[0, 1]]


def test_allowed_from_cgroup_v1(tmp_path):
    make_tree(tmp_path, {CPU + "online": "0-7\n", "sys/fs/cgroup/cpuset/cpuset.effective_cpus": "2-3,9\n"})
    assert topology.read_allowed(str(tmp_path)) == ([2, 3], "cgroup1 /sys/fs/cgroup/cpuset/cpuset.effective_cpus")


def test_allowed_on_the_live_host_uses_sched_getaffinity(monkeypatch):
    monkeypatch.setattr(topology.os, "sched_getaffinity", lambda pid: {1, 2, 9}, raising=False)
    assert topology.read_allowed("/", online=[0, 1, 2, 3]) == ([1, 2], "sched_getaffinity")


def test_malformed_node_cpulist_is_reported(tmp_path):
    make_tree(tmp_path, {
        CPU + "online": "0-1\n",
        "sys/devices/system/node/node0/cpulist": "0-1\n",
        "sys/devices/system/node/node1/cpulist": "garbage\n",
    })
    data = topology.read_topology(str(tmp_path))
    assert data["numa_nodes"] == {"0": [0, 1], "1": []}
    assert len(data["errors"]) == 1
    assert "node1/cpulist" in data["errors"][0]


def test_inconsistent_distances_are_dropped(tmp_path):
    make_tree(tmp_path, {
        CPU + "online": "0-1\n",
        "sys/devices/system/node/node0/cpulist": "0\n",
        "sys/devices/system/node/node0/distance": "10 20\n",
        "sys/devices/system/node/node1/cpulist": "1\n",
        "sys/devices/system/node/node1/distance": "20\n",
    })
    assert topology.read_topology(str(tmp_path))["numa_distances"] == {}


def test_unparseable_tool_output_is_reported():
    base, inventory, dummy = manifest("cpuset-restricted")
    data = topology.read_topology(base, inventory, "not a topology\n")
    assert data["errors"][0].startswith("unparseable output: npu-smi info -t topo")
    assert all(device["source"] == "none" for device in data["devices"])


# ---------------------------------------------------------------------------
# gather_topology: the vendor tool runs only when sysfs lacks locality
# ---------------------------------------------------------------------------

def test_gather_skips_the_tool_when_sysfs_has_everything():
    base, inventory, dummy = manifest("atlas-800i-a2")

    def run(argv):
        raise AssertionError("unexpected command %r" % (argv,))

    data = topology.gather_topology(run, inventory, root=base)
    assert data["errors"] == []
    assert all(device["source"] == "sysfs" for device in data["devices"])


def test_gather_runs_npu_smi_topo_when_sysfs_lacks_locality():
    base, inventory, output = manifest("cpuset-restricted")
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, output, ""

    data = topology.gather_topology(run, inventory, root=base)
    assert calls == [["/usr/local/bin/npu-smi", "info", "-t", "topo"]]
    assert [device["source"] for device in data["devices"]] == ["npu-smi", "npu-smi"]


def test_gather_runs_nvidia_smi_topo(tmp_path):
    root = copy_fixture("dgx-h100", tmp_path)
    shutil.rmtree(str(root / "sys" / "bus"))
    dummy, inventory, output = manifest("dgx-h100")
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, output, ""

    data = topology.gather_topology(run, inventory, root=str(root))
    assert calls == [["/usr/bin/nvidia-smi", "topo", "-m"]]
    assert data["devices"][7]["numa_node"] == 1


def test_gather_reports_a_failing_tool():
    base, inventory, dummy = manifest("cpuset-restricted")

    def run(argv):
        return 3, "", "dcmi module initialize failed. ret is -8005\n"

    data = topology.gather_topology(run, inventory, root=base)
    assert data["errors"] == ["npu-smi info -t topo failed (rc=3): dcmi module initialize failed. ret is -8005"]
    assert [device["source"] for device in data["devices"]] == ["none", "none"]


def test_gather_reports_a_tool_that_cannot_run():
    base, inventory, dummy = manifest("cpuset-restricted")

    def run(argv):
        raise OSError("No such file or directory")

    data = topology.gather_topology(run, inventory, root=base)
    assert data["errors"] == ["npu-smi info -t topo could not be run: No such file or directory"]


def test_gather_without_tool():
    base, inventory, dummy = manifest("offline-cpus")
    data = topology.gather_topology(None, inventory, root=base)
    assert data["errors"] == []
    assert [device["numa_node"] for device in data["devices"]] == [0, 1]


@pytest.mark.parametrize("inventory, expected", [
    (None, None),
    ({"type": "none", "tool": None}, None),
    ({"type": "npu", "tool": "/x/npu-smi"}, ["/x/npu-smi", "info", "-t", "topo"]),
    ({"type": "gpu", "tool": "/x/nvidia-smi"}, ["/x/nvidia-smi", "topo", "-m"]),
])
def test_topology_command(inventory, expected):
    assert topology.topology_command(inventory) == expected
