# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The four profile nodes (an Atlas 800I A2 on driver 26.x, an Atlas 300I Duo, an NVIDIA 8-GPU server and a CPU-only
server, each its fake vendor tools) as one cluster of four serving groups, in check mode: the inventory's checks, the
preflight against each group's first node, and the serving plan from what each node's env file and tools report.
A group holding two kinds of node is refused by the preflight and by the serve step's own plan, naming the node.
The engines are not started: vllm-ascend and the CUDA build of vLLM need the hardware these nodes stand in for."""

from __future__ import annotations

import json
import os
import re
import subprocess

import yaml

testinfra_hosts = ["ansible://a26"]

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(SCENARIO))
PLAYBOOK = os.path.join(SCENARIO, "serving_groups.yml")
GROUPS = {"ascend_a2": ["a26"], "ascend_duo": ["duo1"], "nvidia": ["gpu1"], "cpu_only": ["cpu1"]}


def run(tmp_path, groups, *extra):
    """serving_groups.yml in check mode on the four nodes, with `groups` as inventory groups: (process, plan)."""
    inventory = tmp_path / "groups.yml"
    children = {"masters": {"hosts": {"a26": {}}}, "workers": {"hosts": {"duo1": {}, "gpu1": {}, "cpu1": {}}}}
    children.update({name: {"hosts": {host: {} for host in hosts}} for name, hosts in groups.items()})
    inventory.write_text(yaml.safe_dump({"all": {"children": children}}, sort_keys=False))
    plan_file = tmp_path / "plan.json"
    variables = {"node_num": 4, "serve_topology": "replicas", "llm_cluster_serving_groups": list(groups),
                 "serving_groups_plan_file": str(plan_file),
                 "serve_api_key_file": str(tmp_path / "credentials" / "serve_api_key")}
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0")
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "-i", str(inventory),
                             PLAYBOOK, "--check", "-e", json.dumps(variables)] + list(extra),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=600,
                            check=False, env=env)
    plan = json.loads(plan_file.read_text()) if plan_file.exists() else None
    return result, plan


def recap(output):
    """{host: failed count} from the play recap."""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+.*?failed=(\d+)", output, re.M)}


def test_four_accelerator_profiles_validate_and_plan_as_four_groups_behind_one_router(tmp_path):
    result, plan = run(tmp_path, GROUPS)
    assert result.returncode == 0, result.stdout[-4000:]
    assert recap(result.stdout) == {"a26": 0, "duo1": 0, "gpu1": 0, "cpu1": 0}
    assert plan["errors"] == [] and plan["topology"] == "replicas"
    assert [(g["name"], g["hosts"], g["accelerator"], g["devices"], g["backend"], g["tensor_parallel_size"])
            for g in plan["groups"]] == [("ascend_a2", ["a26"], "npu", 8, "vllm_ascend", 8),
                                         ("ascend_duo", ["duo1"], "npu", 8, "vllm_ascend", 8),
                                         ("nvidia", ["gpu1"], "gpu", 8, "vllm", 8),
                                         ("cpu_only", ["cpu1"], "cpu", 0, "vllm", 1)]
    # One router on the head lists the replica of every group, each at its node's cluster address.
    addresses = {}
    for host in ("a26", "duo1", "gpu1", "cpu1"):
        out = subprocess.run(["docker", "exec", host, "sh", "-c", ". /etc/llm_cluster/env && echo $LLM_CLUSTER_NODE_ADDRESS"],
                             capture_output=True, text=True, check=True).stdout.strip()
        addresses[host] = out
    assert plan["router"]["host"] == "a26"
    assert plan["router"]["workers"] == ["http://%s:8001" % addresses[h] for h in ("a26", "duo1", "gpu1", "cpu1")]
    argv = {host: plan["nodes"][host]["argv"] for host in addresses}
    assert all(a[a.index("--host") + 1] == addresses[h] for h, a in argv.items())
    assert [a[a.index("--tensor-parallel-size") + 1] for a in argv.values()] == ["8", "8", "8", "1"]


def test_a_group_of_two_kinds_is_refused_by_the_preflight_and_by_the_plan_naming_the_node(tmp_path):
    groups = {"ascend": ["a26", "gpu1"], "ascend_duo": ["duo1"], "cpu_only": ["cpu1"]}
    result, plan = run(tmp_path, groups)
    assert result.returncode != 0 and plan is None
    assert "gpu1: expected npu accelerators (as on a26, the first node of serving group ascend) but found gpu" \
        in result.stdout
    # The serve step's own check, for a run without the preflight (--tags serve).
    result, plan = run(tmp_path, groups, "--tags", "plan")
    assert result.returncode != 0 and plan is None
    assert ("gpu1: serving group ascend is one kind and count of accelerator (its first node a26 has npu x8; "
            "gpu1 gpu x8)") in result.stdout
