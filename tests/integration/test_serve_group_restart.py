# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Which members restart a dp or ray engine as a group, as the serve role's variables decide it.

A headless data-parallel rank joins the API node's engine only when both start, and a Ray engine's workers
are actors of the other nodes' Ray; nothing in the API node's command line names them. The role's
``__serve_group_changed_hosts`` names the members that are new or changed in the run (each node's
``__serve_engine_changed``, which counts a headless rank whose unit is not running, and with ray the
``common_unit_follower_changed`` the Ray step notes). The demo
check runs the dp case with real engines (a fresh worker); here every branch, the ray one included, from
the facts a run would have noted: one play per case over its own three hosts, the role's own
``vars/main.yml`` loaded as the play's vars, all in one ansible-playbook run (no module runs on a host).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.dirname(sys.executable)
ROLES = ["master1", "worker1", "worker2"]
DP = {"master1": "api", "worker1": "headless", "worker2": "headless"}
RAY = {"master1": "api", "worker1": "ray-worker", "worker2": "ray-worker"}
REPLICAS = {"master1": "replica", "worker1": "replica", "worker2": "replica"}


def unit(state):
    """What ansible.builtin.systemd_service with no state registers for a unit in that ActiveState."""
    return {"changed": False, "name": "llm-cluster-engine.service", "status": {"ActiveState": state, "LoadState": "loaded"}}


# case: (topology, each node's role in the plan, each node's serving group, each node's facts[, replace_node_new])
CASES = {
    "dp-new-rank": ("dp", DP, {}, {"master1": {"__serve_engine_changed": False},
                                   "worker1": {"__serve_engine_changed": False},
                                   "worker2": {"__serve_engine_changed": True}}),
    "dp-unchanged": ("dp", DP, {}, {name: {"__serve_engine_changed": False} for name in ROLES}),
    "dp-api-node-only": ("dp", DP, {}, {"master1": {"__serve_engine_changed": True},
                                        "worker1": {"__serve_engine_changed": False},
                                        "worker2": {"__serve_engine_changed": False}}),
    # --limit, or a node that left the play: no fact, no restart on its account.
    "dp-unnoted": ("dp", DP, {}, {"worker1": {"__serve_engine_changed": True}}),
    "ray-worker-started": ("ray", RAY, {}, {"master1": {"common_unit_leader_changed": {"ray": False}},
                                            "worker1": {"common_unit_follower_changed": {"ray": True}},
                                            "worker2": {"common_unit_follower_changed": {"ray": False, "engine": True}}}),
    "ray-head-restarted": ("ray", RAY, {}, {"master1": {"common_unit_leader_changed": {"ray": True}},
                                            "worker1": {"common_unit_follower_changed": {"ray": True}},
                                            "worker2": {"common_unit_follower_changed": {"ray": True}}}),
    "ray-other-group": ("ray", RAY, {"master1": "a2", "worker1": "a2", "worker2": "gpu"},
                        {"worker1": {"common_unit_follower_changed": {"ray": False}},
                         "worker2": {"common_unit_follower_changed": {"ray": True}}}),
    "replicas": ("replicas", REPLICAS, {}, {name: {"__serve_engine_changed": True,
                                                   "common_unit_follower_changed": {"ray": True}} for name in ROLES}),
    # ./deploy.sh replace-node run again after a stop: nothing new on the node, the group restarts anyway.
    "dp-replaced-again": ("dp", DP, {}, {name: {"__serve_engine_changed": False} for name in ROLES}, "worker1"),
    "ray-replaced-again": ("ray", RAY, {}, {"master1": {"common_unit_leader_changed": {"ray": False}},
                                            "worker1": {"common_unit_follower_changed": {"ray": False}},
                                            "worker2": {"common_unit_follower_changed": {"ray": False}}}, "worker2"),
    "replicas-replaced": ("replicas", REPLICAS, {}, {}, "worker1"),
    # What each headless node read of its engine unit (check.yml's systemd_service): one that is not running is
    # started by the run, so it counts as changed (a run stopped before it started, a rank stopped or failed).
    "dp-rank-not-running": ("dp", DP, {}, {"master1": {"__serve_engine_unit_read": unit("inactive")},
                                           "worker1": {"__serve_engine_unit_read": unit("failed")},
                                           "worker2": {"__serve_engine_unit_read": unit("active")}}),
    "dp-rank-restarting": ("dp", DP, {}, {"worker1": {"__serve_engine_unit_read": unit("active")},
                                          "worker2": {"__serve_engine_unit_read": unit("activating")}}),
    "dp-ranks-running": ("dp", DP, {}, {"master1": {"__serve_engine_unit_read": unit("active")},
                                        "worker1": {"__serve_engine_unit_read": unit("active")},
                                        "worker2": {"__serve_engine_unit_read": unit("active")}}),
    # The read skipped (not a headless dp rank), as Ansible registers it: no change on its account.
    "dp-read-skipped": ("dp", DP, {}, {name: {"__serve_engine_unit_read": {"skipped": True, "changed": False}}
                                       for name in ROLES}),
    "replicas-not-running": ("replicas", REPLICAS, {}, {name: {"__serve_engine_unit_read": unit("failed")}
                                                        for name in ROLES}),
}


def host(case, role):
    return "%s-%s" % (case, role)


@pytest.fixture(scope="module")
def seen(tmp_path_factory):
    """{case: {role: {"hosts": [roles], "changed": bool}}} from one run over every case."""
    out = tmp_path_factory.mktemp("serve-group")
    children, plays = {}, []
    for case, (topology, roles, groups, facts, *replaced) in CASES.items():
        hosts = {host(case, role): dict({"ansible_python_interpreter": sys.executable}, **facts.get(role, {}))
                 for role in ROLES}
        children[case + "_masters"] = {"hosts": {host(case, "master1"): hosts[host(case, "master1")]}}
        children[case + "_workers"] = {"hosts": {host(case, role): hosts[host(case, role)] for role in ROLES[1:]}}
        serve_plan = {"topology": topology, "head": host(case, "master1"),
                      "engine_hosts": [host(case, role) for role in ROLES if roles[role] != "ray-worker"],
                      "nodes": {host(case, role): {"role": roles[role], "group": groups.get(role)} for role in ROLES}}
        plays.append({
            "name": "Decide the engine group's restart: " + case,
            "hosts": "%s_masters:%s_workers" % (case, case),
            "connection": "local",
            "gather_facts": False,
            "vars_files": [os.path.join(ROOT, "roles", "serve", "vars", "main.yml")],
            "vars": dict({"__serve_plan": serve_plan, "serve_head_group": case + "_masters", "serve_restart": False},
                         **({"replace_node_new": host(case, replaced[0])} if replaced else {})),
            "tasks": [{"name": "Note whether this node's engine changes, from what it read of its unit",
                       "ansible.builtin.set_fact": {"__serve_engine_changed": "{{ __serve_engine_changes }}"},
                       "when": "__serve_engine_unit_read is defined"},
                      {"name": "Note the members that restart the group, as this host sees them",
                       "ansible.builtin.set_fact": {
                           "decided": "{{ {'hosts': __serve_group_changed_hosts, 'changed': __serve_group_changed | bool} }}"}}]})
    plays.append({"name": "Write every host's answer", "hosts": "localhost", "connection": "local", "gather_facts": False,
                  "tasks": [{"name": "Write them", "ansible.builtin.copy": {
                      "content": "{{ dict(groups['all'] | zip(groups['all'] | map('extract', hostvars, 'decided'))) | to_json }}",
                      "dest": str(out / "decided.json"), "mode": "0600"}}]})
    (out / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": children}}))
    (out / "decide.yml").write_text(yaml.safe_dump(plays, sort_keys=False))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_NOCOLOR="1",
               PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(out / "hosts.yml"), str(out / "decide.yml")],
                            env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    decided = json.loads((out / "decided.json").read_text())
    found = {}
    for case in CASES:
        found[case] = {}
        for role in ROLES:
            answer = decided[host(case, role)]
            answer["hosts"] = [name[len(case) + 1:] for name in answer["hosts"]]
            found[case][role] = answer
    return found


def test_a_new_headless_rank_restarts_the_dp_engine_from_the_api_node(seen):
    assert seen["dp-new-rank"]["master1"] == {"hosts": ["worker2"], "changed": True}
    # The headless nodes follow the API node; they do not decide.
    assert not seen["dp-new-rank"]["worker1"]["changed"] and not seen["dp-new-rank"]["worker2"]["changed"]


def test_an_unchanged_dp_group_restarts_nothing(seen):
    assert seen["dp-unchanged"]["master1"] == {"hosts": [], "changed": False}


def test_a_change_on_the_api_node_alone_is_its_own_restart_not_the_group_s(seen):
    assert seen["dp-api-node-only"]["master1"] == {"hosts": [], "changed": False}


def test_a_node_the_run_has_not_noted_counts_as_unchanged(seen):
    assert seen["dp-unnoted"]["master1"] == {"hosts": ["worker1"], "changed": True}


def test_a_ray_worker_whose_ray_started_restarts_the_ray_engine(seen):
    assert seen["ray-worker-started"]["master1"] == {"hosts": ["worker1"], "changed": True}


def test_ray_restarted_on_the_head_leaves_the_restart_to_systemd(seen):
    # The engine unit is PartOf the Ray head's: Ray's restart already restarted it.
    assert seen["ray-head-restarted"]["master1"] == {"hosts": [], "changed": False}


def test_only_the_ray_workers_of_the_head_s_group_count(seen):
    assert seen["ray-other-group"]["master1"] == {"hosts": [], "changed": False}


def test_replicas_restart_alone(seen):
    assert all(answer == {"hosts": [], "changed": False} for answer in seen["replicas"].values())


def test_replace_node_run_again_restarts_the_group_for_the_new_node(seen):
    assert seen["dp-replaced-again"]["master1"] == {"hosts": ["worker1"], "changed": True}
    assert seen["ray-replaced-again"]["master1"] == {"hosts": ["worker2"], "changed": True}
    assert all(answer == {"hosts": [], "changed": False} for answer in seen["replicas-replaced"].values())


def test_a_headless_rank_that_is_not_running_restarts_the_dp_engine_from_the_api_node(seen):
    # A run stopped before the rank started, a rank stopped by hand or out of restarts: this run starts it.
    assert seen["dp-rank-not-running"]["master1"] == {"hosts": ["worker1"], "changed": True}
    assert seen["dp-rank-restarting"]["master1"] == {"hosts": ["worker2"], "changed": True}
    assert seen["dp-ranks-running"]["master1"] == {"hosts": [], "changed": False}
    assert seen["dp-read-skipped"]["master1"] == {"hosts": [], "changed": False}
    assert all(answer == {"hosts": [], "changed": False} for answer in seen["replicas-not-running"].values())
