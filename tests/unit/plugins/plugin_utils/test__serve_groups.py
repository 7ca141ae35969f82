# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Serving groups (llm_cluster_serving_groups): replicas of different accelerators behind one router.

The nodes' devices are read from public npu-smi and nvidia-smi captures (tests/fixtures/vendor, each with its
source in the README there), as the accelerator facts read them on a node."""

from __future__ import annotations

import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi, _nvidia_smi
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve

VENDOR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "vendor")


def _read(name):
    with open(os.path.join(VENDOR, name), encoding="utf-8") as handle:
        return handle.read()


def npu_node(host, address, capture):
    return {"host": host, "address": address, "accelerator": "npu",
            "count": len(_npu_smi.parse_info(_read(capture))["devices"])}


def gpu_node(host, address, capture):
    return {"host": host, "address": address, "accelerator": "gpu",
            "count": len(_nvidia_smi.parse_query_csv(_read(capture)))}


def cpu_node(host, address):
    return {"host": host, "address": address, "accelerator": "cpu", "count": 0}


def backend_of(node):
    """What the serve role's context resolves on each node with serve_backend auto."""
    return dict(node, backend=_serve.resolve_backend("auto", "", node["accelerator"]),
                executable=["vllm", "serve"], tp=0)


def mixed_nodes():
    nodes = [npu_node("a2-1", "10.0.0.1", "npu-smi-info-910b2x8-23.0.3.txt"),
             npu_node("a2-2", "10.0.0.2", "npu-smi-info-910b2x8-23.0.3.txt"),
             gpu_node("h100-1", "10.0.0.3", "nvidia-smi-query-gpu-h100-hbm3-1gpu.csv"),
             cpu_node("cpu-1", "10.0.0.4"),
             cpu_node("cpu-2", "10.0.0.5")]
    return [backend_of(n) for n in nodes]


GROUPS = [("ascend", ["a2-1", "a2-2"]), ("nvidia", ["h100-1"]), ("cpu", ["cpu-1", "cpu-2"])]


def settings(**extra):
    base = {"backend": "auto", "topology": "replicas", "model_path": "/m", "model_name": "m", "groups": GROUPS,
            "replica_port": 8001}
    base.update(extra)
    return base


def tp_of(argv):
    return int(argv[argv.index("--tensor-parallel-size") + 1])


def test_the_captures_give_the_devices_the_groups_are_checked_on():
    assert [n["count"] for n in mixed_nodes()] == [8, 8, 1, 0, 0]


def test_three_groups_of_three_accelerators_serve_as_replicas_behind_one_router():
    plan = _serve.plan(mixed_nodes(), settings())
    assert plan["errors"] == []
    assert [(g["name"], g["hosts"], g["accelerator"], g["devices"], g["backend"], g["tensor_parallel_size"])
            for g in plan["groups"]] == [("ascend", ["a2-1", "a2-2"], "npu", 8, "vllm_ascend", 8),
                                         ("nvidia", ["h100-1"], "gpu", 1, "vllm", 1),
                                         ("cpu", ["cpu-1", "cpu-2"], "cpu", 0, "vllm", 1)]
    nodes = plan["nodes"]
    assert [(h, nodes[h]["group"], nodes[h]["backend"], tp_of(nodes[h]["argv"])) for h in nodes] == [
        ("a2-1", "ascend", "vllm_ascend", 8), ("a2-2", "ascend", "vllm_ascend", 8), ("h100-1", "nvidia", "vllm", 1),
        ("cpu-1", "cpu", "vllm", 1), ("cpu-2", "cpu", "vllm", 1)]
    # One router lists every replica of every group, in the inventory's order.
    assert plan["router"]["workers"] == ["http://10.0.0.%d:8001" % i for i in range(1, 6)]
    assert all(nodes[h]["role"] == "replica" for h in nodes)


def test_the_plan_s_backend_is_the_head_s_whichever_node_planned_it():
    # The plan runs once, on the first host of the play: under --limit cpu-1 the settings carry cpu-1's backend.
    plan = _serve.plan(mixed_nodes(), settings(backend="vllm"))
    assert plan["errors"] == [] and plan["head"] == "a2-1" and plan["backend"] == "vllm_ascend"
    assert [g["backend"] for g in plan["groups"]] == ["vllm_ascend", "vllm", "vllm"]


def test_a_group_s_own_tensor_parallel_size_and_executable_are_its_nodes():
    nodes = mixed_nodes()
    for node in nodes[:2]:
        node.update(tp=4, executable=["/opt/ascend-venv/bin/vllm", "serve"])
    plan = _serve.plan(nodes, settings())
    assert plan["errors"] == []
    assert [tp_of(plan["nodes"][h]["argv"]) for h in ("a2-1", "a2-2", "h100-1", "cpu-1")] == [4, 4, 1, 1]
    assert plan["nodes"]["a2-1"]["argv"][:2] == ["/opt/ascend-venv/bin/vllm", "serve"]
    assert plan["nodes"]["h100-1"]["argv"][:2] == ["vllm", "serve"]
    nodes[0]["tp"] = 16
    assert _serve.plan(nodes, settings())["errors"] == [
        "a2-1: serve_tensor_parallel_size 16 x serve_pipeline_parallel_size 1 needs 16 devices, the node has 8; every "
        "replica is one node's engine: lower them, or take the node out of the group"]


def test_a_group_with_another_kind_or_count_of_device_names_the_odd_node():
    nodes = mixed_nodes()
    groups = [("ascend", ["a2-1", "a2-2", "h100-1"]), ("cpu", ["cpu-1", "cpu-2"])]
    plan = _serve.plan(nodes, settings(groups=groups))
    assert plan["errors"][0] == (
        "h100-1: serving group ascend is one kind and count of accelerator (its first node a2-1 has npu x8; h100-1 gpu "
        "x1): move the node to a group of its own kind, or give it the same devices")
    assert plan["nodes"] == {}
    nodes[1] = npu_node("a2-2", "10.0.0.2", "npu-smi-info-300iduo-25.2.0-excerpt.txt")
    nodes[1] = backend_of(nodes[1])
    plan = _serve.plan(nodes, settings())
    assert plan["errors"] == [
        "a2-2: serving group ascend is one kind and count of accelerator (its first node a2-1 has npu x8; a2-2 npu x2): "
        "move the node to a group of its own kind, or give it the same devices"]


def test_a_node_in_no_group_in_two_or_outside_the_cluster_is_named():
    groups = [("ascend", ["a2-1", "a2-2", "cpu-1"]), ("nvidia", ["h100-1", "stranger"]), ("cpu", ["cpu-1"]),
              ("empty", [])]
    errors = _serve.plan(mixed_nodes(), settings(groups=groups))["errors"]
    assert errors == [
        "stranger: in serving group nvidia but not a member (neither the head's nor the workers' group): add the node "
        "to workers, or take it out of nvidia",
        "serving group empty has no member node: put nodes of masters or workers in it, or take it out of "
        "llm_cluster_serving_groups",
        "cpu-1: in serving groups ascend and cpu: a node serves in one group; take it out of all but one",
        "cpu-2: in none of the serving groups (ascend, nvidia, cpu, empty): every node serves in one; add it to the "
        "group of its accelerator"]


def test_a_group_resolving_to_two_backends_is_named():
    nodes = mixed_nodes()
    nodes[1]["backend"] = "vllm_mindspore"
    assert _serve.plan(nodes, settings())["errors"] == [
        "a2-1, a2-2: serving group ascend runs one backend, and its nodes resolve to vllm_ascend and vllm_mindspore: "
        "set serve_backend for the group (group_vars), not per node"]


@pytest.mark.parametrize("topology", ["single", "ray", "dp", "pd"])
def test_groups_need_the_replicas_topology(topology):
    errors = _serve.plan(mixed_nodes(), settings(topology=topology))["errors"]
    assert errors[0] == (
        "llm_cluster_serving_groups (ascend, nvidia, cpu) needs serve_topology replicas: each group's nodes serve "
        "their own engines behind the router; single, ray, dp and pd serve the cluster as one group (leave "
        "llm_cluster_serving_groups empty)")


def test_the_kv_tiers_are_checked_per_group_backend():
    # vLLM's native CPU tier: rendered for the vllm groups; the Ascend group is named, once.
    errors = _serve.plan(mixed_nodes(), settings(kv_offload_size_gib=4))["errors"]
    assert len(errors) == 1 and "for vllm_ascend give its own offloading" in errors[0]
    nodes = [n for n in mixed_nodes() if n["accelerator"] != "npu"]
    plan = _serve.plan(nodes, settings(kv_offload_size_gib=4, groups=GROUPS[1:]))
    assert plan["errors"] == []
    assert all("--kv-offloading-size" in plan["nodes"][h]["argv"] for h in plan["nodes"])


def test_without_groups_the_cluster_is_one_group_and_keeps_one_kind():
    nodes = mixed_nodes()
    plan = _serve.plan(nodes, settings(groups=[]))
    assert plan["errors"][0].startswith("h100-1, cpu-1, cpu-2: serve_topology replicas needs one kind of accelerator")
    plan = _serve.plan(nodes[3:], settings(groups=[]))
    assert plan["errors"] == [] and plan["groups"][0]["name"] == "cluster"
    assert {plan["nodes"][h]["group"] for h in plan["nodes"]} == {"cluster"}


def test_the_status_reports_each_group_and_how_many_of_its_engines_run():
    plan = _serve.plan(mixed_nodes(), settings())
    states = {"a2-1": "ActiveState=active\nSubState=running\nMainPID=101",
              "a2-2": "ActiveState=failed\nSubState=failed\nMainPID=0",
              "h100-1": "ActiveState=active\nMainPID=103", "cpu-1": "ActiveState=active\nMainPID=104", "cpu-2": ""}
    nodes = [dict(n, state=states[n["host"]]) for n in mixed_nodes()]
    doc = _serve.status(nodes, plan, {"url": "https://a2-1:8000", "probe": {}})
    assert [(g["name"], g["engines"], g["engines_active"]) for g in doc["groups"]] == [
        ("ascend", 2, 1), ("nvidia", 1, 1), ("cpu", 2, 1)]
    assert [(n["host"], n["group"], n["backend"]) for n in doc["nodes"]][::2] == [
        ("a2-1", "ascend", "vllm_ascend"), ("h100-1", "nvidia", "vllm"), ("cpu-2", "cpu", "vllm")]
    lines = _serve.status_table(doc)
    assert "group ascend: npu x8, vllm_ascend, TP 8: 1 of 2 engine(s) active (a2-1, a2-2)" in lines
    assert "group cpu: cpu x0, vllm, TP 1: 1 of 2 engine(s) active (cpu-1, cpu-2)" in lines
    whole = _serve.cluster_status({}, doc, {})
    assert [n["group"] for n in whole["nodes"]] == ["ascend", "ascend", "nvidia", "cpu", "cpu"]
    assert "group nvidia: gpu x1, vllm, TP 1: 1 of 1 engine(s) active (h100-1)" in _serve.cluster_status_table(whole)
    # One group: no group lines.
    one = _serve.plan(mixed_nodes()[3:], settings(groups=[]))
    assert not [line for line in _serve.status_table(_serve.status(mixed_nodes()[3:], one, {})) if line.startswith("group")]
