# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Runs the real deploy playbook against broken inventories.

The hosts sit in the documentation range (192.0.2.0/24) with SSH: any attempt
to reach one would show up as UNREACHABLE. Validation must fail first, with the
expected message, and contact nobody.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "inventories")
PLAYBOOK = os.path.join(ROOT, "playbooks", "deploy.yml")
BIN = os.path.dirname(sys.executable)

with open(os.path.join(FIXTURES, "llm_solution_config.yaml")) as handle:
    BASE = yaml.safe_load(handle)
with open(os.path.join(FIXTURES, "broken.yml")) as handle:
    CASES = yaml.safe_load(handle)
with open(os.path.join(FIXTURES, "hostile.yml")) as handle:
    HOSTILE = yaml.safe_load(handle)
PLAYBOOKS = sorted(os.path.join(ROOT, "playbooks", name) for name in os.listdir(os.path.join(ROOT, "playbooks"))
                   if name.endswith(".yml"))


def apply_case(case):
    inventory = copy.deepcopy(BASE)
    children = inventory["all"]["children"]
    known = dict(children["masters"]["hosts"], **children["workers"]["hosts"])
    known.update(case.get("hosts") or {})
    for group, members in (case.get("groups") or {}).items():
        children[group]["hosts"] = {name: copy.deepcopy(known[name]) for name in members}
    for name in case.get("unset") or []:
        inventory["all"]["vars"].pop(name)
    inventory["all"]["vars"].update(case.get("set") or {})
    for name, (text, times) in (case.get("set_repeat") or {}).items():
        inventory["all"]["vars"][name] = text * times
    for group, hosts in (case.get("extra_groups") or {}).items():
        children[group] = {"hosts": copy.deepcopy(hosts)}
    for host, values in (case.get("host_vars") or {}).items():
        for group in children.values():
            if host in (group.get("hosts") or {}):
                group["hosts"][host].update(values)
    return inventory


def run_playbook(inventory_path, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_HOST_KEY_CHECKING="True", PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               ANSIBLE_NOCOLOR="1", LLM_CLUSTER_ARTIFACTS=os.path.join(os.path.dirname(inventory_path), "artifacts"))
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory_path, PLAYBOOK] + list(extra),
                          env=env, capture_output=True, text=True, timeout=120, check=False)


def write_inventory(tmp_path, inventory):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(inventory, sort_keys=False))
    return str(path)


def test_case_table_is_large_enough():
    assert len(CASES) >= 12
    assert len({case["id"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_broken_inventory_fails_validation_before_any_host(tmp_path, case):
    result = run_playbook(write_inventory(tmp_path, apply_case(case)))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Inventory validation found" in output, output
    assert case["expect"] in " ".join(output.split()), output
    assert "UNREACHABLE" not in output
    assert "Gathering Facts" not in output and "Preflight |" not in output


def test_hostile_case_table_covers_every_class():
    assert len(HOSTILE) >= 40
    assert len({case["id"] for case in HOSTILE} | {case["id"] for case in CASES}) == len(HOSTILE) + len(CASES)


@pytest.mark.parametrize("case", HOSTILE, ids=[case["id"] for case in HOSTILE])
def test_hostile_inventory_gets_a_verdict_before_any_host(tmp_path, case):
    result = run_playbook(write_inventory(tmp_path, apply_case(case)))
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Inventory validation found" in output, output
    assert case["expect"] in " ".join(output.split()), output
    assert "Traceback" not in output and "could not be checked" not in output, output
    assert "UNREACHABLE" not in output
    assert "Gathering Facts" not in output and "Preflight |" not in output


def test_warnings_do_not_stop_the_run_unless_strict(tmp_path):
    case = {"set": {"model_weight_path": "/data/m"}, "host_vars": {"master1": {"ansible_password": "hunter2"}}}
    result = run_playbook(write_inventory(tmp_path, apply_case(case)), "--tags", "always")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0, output
    assert "Inventory validation found" not in output
    assert "model_weight_path (every node) is not a variable this collection knows: did you mean model_path?" in output
    assert "ansible_password is set in clear text for master1" in output
    # llm_solution's own ansible_ssh_common_args, at the group level, reaches every node.
    assert ("ansible_ssh_common_args turns SSH host key checking off with 'StrictHostKeyChecking=no' for master1, "
            "worker1: a node's changed key would go unnoticed.") in output, output
    result = run_playbook(write_inventory(tmp_path, apply_case(case)), "--tags", "always",
                          "-e", "llm_cluster_validate_strict=true")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2, output
    assert "Inventory validation found 3 problem(s) (warnings count: strict mode)" in output, output
    # Without the option, strict mode has one warning less.
    case["unset"] = ["ansible_ssh_common_args"]
    result = run_playbook(write_inventory(tmp_path, apply_case(case)), "--tags", "always",
                          "-e", "llm_cluster_validate_strict=true")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2 and "host key checking" not in output, output
    assert "Inventory validation found 2 problem(s) (warnings count: strict mode)" in output, output


def test_hosts_outside_the_cluster_groups_are_never_targeted(tmp_path):
    """A monitoring group and an ungrouped bastion: no play of any playbook lists them."""
    inventory = apply_case({"extra_groups": {"monitoring": {"mon1": {"ansible_host": "192.0.2.50"}}}})
    inventory["all"]["hosts"] = {"bastion": {"ansible_host": "192.0.2.60"}}
    path = write_inventory(tmp_path, inventory)
    for playbook in PLAYBOOKS:
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
                   PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")
        listed = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", path, playbook, "--list-hosts"],
                                env=env, capture_output=True, text=True, timeout=120, check=False)
        assert listed.returncode == 0, listed.stdout + listed.stderr
        plays = listed.stdout.count("pattern: ['masters:workers']")
        # replace_node.yml's retirement of the node that leaves, not asked for (--retire): plays of no host.
        idle = listed.stdout.count("pattern: ['all:!all']")
        assert plays >= 1 and plays + idle == listed.stdout.count("play #"), (playbook, listed.stdout)
        hosts = {line.strip() for line in listed.stdout.splitlines() if line.startswith("      ")}
        assert hosts == {"master1", "worker1"}, (playbook, listed.stdout)
    result = run_playbook(path, "--tags", "always")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 0, output
    assert "host(s) bastion, mon1 are in neither 'masters' nor 'workers': the playbooks do not touch them" in output
    assert "bastion" not in result.stdout.split("PLAY RECAP")[-1] and "mon1" not in result.stdout.split("PLAY RECAP")[-1]


def test_llm_solution_config_passes_validation_unchanged(tmp_path):
    path = os.path.join(FIXTURES, "llm_solution_config.yaml")
    result = run_playbook(path, "--tags", "always", "-v")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Inventory is valid: 2 node(s), head master1." in output
    assert "UNREACHABLE" not in output


def test_every_problem_is_reported_in_one_run(tmp_path):
    combined = {"set": {}, "unset": [], "host_vars": {}}
    for case_id in ("node_num_too_high", "port_clash", "unknown_backend", "relative_model_path", "bad_cidr"):
        case = next(c for c in CASES if c["id"] == case_id)
        combined["set"].update(case.get("set") or {})
    case = dict(combined, expect=None)
    result = run_playbook(write_inventory(tmp_path, apply_case(case)))
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2
    assert "Inventory validation found 5 problem(s)" in output


def test_monitoring_yml_checks_the_monitoring_inputs_without_the_switch(tmp_path):
    """./deploy.sh monitoring runs the step whatever llm_cluster_monitoring says, so it checks its inputs anyway;
    deploy.yml without the switch does not."""
    inventory = write_inventory(tmp_path, apply_case({"set": {"monitoring_alert_thresholds": {"kv_cache_ratio": -1}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
               ANSIBLE_HOST_KEY_CHECKING="True", PATH=BIN + os.pathsep + os.environ.get("PATH", ""), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory,
                             os.path.join(ROOT, "playbooks", "monitoring.yml")],
                            env=env, capture_output=True, text=True, timeout=120, check=False)
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2 and "Inventory validation found 1 problem(s)" in output, output
    assert "monitoring_alert_thresholds.kv_cache_ratio must be a positive number, got -1" in output
    assert "UNREACHABLE" not in output
    result = run_playbook(inventory, "--tags", "always")
    assert result.returncode == 0, result.stdout + result.stderr


def test_offline_names_every_network_the_run_would_reach_per_node_before_any_host(tmp_path):
    """llm_solution's config.yaml with llm_cluster_offline: its image is on a registry and Ray has no wheelhouse;
    one node's hub model and another's pip index are named with that host (the action plugin reads each host's
    own variables)."""
    inventory = write_inventory(tmp_path, apply_case({
        "set": {"llm_cluster_offline": True},
        "host_vars": {"master1": {"model_distribution_source": "hub"},
                      "worker1": {"serve_pip_extra_args": "--extra-index-url https://mirror.example/simple"}}}))
    result = run_playbook(inventory, "--tags", "always")
    output = " ".join((result.stdout + result.stderr).split())
    assert result.returncode == 2 and "Inventory validation found 4 problem(s)" in output, output[-3000:]
    for named in ("llm_cluster_offline is on, but on every node Ray would be installed from the package index",
                  "llm_cluster_offline is on, but on every node the engine image would be pulled from a registry",
                  "llm_cluster_offline is on, but on host master1 model_distribution_source = 'hub'",
                  "llm_cluster_offline is on, but on host worker1 serve_pip_extra_args = "
                  "'--extra-index-url https://mirror.example/simple' sends pip to a network"):
        assert named in output, (named, output[-3000:])
    assert "UNREACHABLE" not in output
