# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The validate_inventory action plugin, run in-process: what it gathers from the groups and host variables,
the role defaults it reads, its verdict and message, strict mode, and that it never touches a connection.

The checks themselves are tested in ``tests/unit/plugins/plugin_utils/test__inventory_validation.py``; the
playbook runs against broken inventories in ``tests/integration/test_inventory_validation.py``.
"""

from __future__ import annotations

import copy
from unittest.mock import MagicMock

import pytest

from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task
from ansible.template import Templar

from ansible_collections.aihost.llm_cluster.plugins.action import validate_inventory
from ansible_collections.aihost.llm_cluster.plugins.action.validate_inventory import ActionModule

ARGS = dict(node_num=3, backend_type="MindFormers", model_type="safetensors", model_path="/data/models/DeepSeek-R1",
            ports=dict(ray_port=6379, llm_port=8000))
HOSTVARS = {
    "master1": {"ray_device": "enp67s0f0np0", "ansible_host": "192.0.2.11"},
    "worker1": {"ray_device": "enp67s0f0np0", "ansible_host": "192.0.2.12"},
    "worker2": {"ray_device": "enp67s0f0np0", "ansible_host": "192.0.2.13"},
}
GROUPS = {"all": ["master1", "worker1", "worker2"], "masters": ["master1"], "workers": ["worker1", "worker2"]}


def run_action(args=None, hostvars=None, groups=None, **extra_vars):
    """Run the action with ``args`` over the given inventory; return (result, connection mock)."""
    loader = DataLoader()
    task = Task.load(dict(action="aihost.llm_cluster.validate_inventory", args=dict(ARGS, **(args or {}))))
    task_vars = dict(groups=copy.deepcopy(groups or GROUPS), hostvars=copy.deepcopy(hostvars or HOSTVARS), **extra_vars)
    connection = MagicMock()
    action = ActionModule(task=task, connection=connection, play_context=PlayContext(), loader=loader,
                          templar=Templar(loader=loader, variables=task_vars), shared_loader_obj=None)
    return action.run(task_vars=task_vars), connection


def test_a_valid_inventory_passes_with_the_head_first_and_no_connection():
    result, connection = run_action()
    assert result["changed"] is False and not result.get("failed")
    assert result["errors"] == [] and result["warnings_found"] == []
    assert result["hosts"] == ["master1", "worker1", "worker2"]
    assert result["msg"] == "Inventory is valid: 3 node(s), head master1."
    assert connection.mock_calls == []


def test_errors_fail_the_task_and_say_nothing_changed():
    result, connection = run_action(args=dict(node_num=2, model_path="data/models"))
    assert result["failed"] is True
    assert result["msg"].startswith("Inventory validation found 2 problem(s); nothing was changed on any host:\n - ")
    assert any(e.startswith("node_num = 2 but the inventory has 3 host(s) (master1, worker1, worker2)")
               for e in result["errors"])
    assert any("model_path" in e and "data/models" in e for e in result["errors"])
    assert all(" - " + e in result["msg"] for e in result["errors"])
    assert connection.mock_calls == []


def test_the_group_names_come_from_the_arguments():
    groups = {"all": GROUPS["all"], "heads": ["master1"], "nodes": ["worker1", "worker2"]}
    result, _connection = run_action(args=dict(head_group="heads", worker_group="nodes"), groups=groups)
    assert result["errors"] == [] and result["hosts"] == ["master1", "worker1", "worker2"]
    # With the default names the same inventory has no head and no worker.
    result, _connection = run_action(groups=groups)
    assert result["failed"] is True and result["hosts"] == []


def test_each_members_interface_variable_is_read():
    hostvars = copy.deepcopy(HOSTVARS)
    del hostvars["worker2"]["ray_device"]
    result, _connection = run_action(hostvars=hostvars)
    assert result["failed"] is True
    assert [e for e in result["errors"] if e.startswith("ray_device is not set for worker2: set ray_device")]
    assert not [e for e in result["errors"] if "worker1" in e]
    # Another variable name: now every host lacks it.
    result, _connection = run_action(args=dict(interface_var="cluster_nic"))
    assert [e for e in result["errors"] if e.startswith("cluster_nic is not set for master1, worker1, worker2: ")]


def test_clear_text_password_and_unknown_variable_are_warnings_unless_strict():
    hostvars = copy.deepcopy(HOSTVARS)
    hostvars["worker1"].update(ansible_password="hunter2", model_weight_path="/data/x")
    result, _connection = run_action(hostvars=hostvars)
    assert not result.get("failed") and result["errors"] == []
    assert result["warnings_found"] == [
        "ansible_password is set in clear text for worker1: keep it in Ansible Vault (ansible-vault encrypt_string, "
        "then ./deploy.sh --ask-vault-pass), or better use SSH keys.",
        "model_weight_path (host worker1) is not a variable this collection knows: did you mean model_path?",
    ]
    assert result["msg"].startswith("Inventory is valid: 3 node(s), head master1. 2 warning(s):\n - warning: ")
    assert "hunter2" not in repr(result)

    for strict in (True, "yes"):
        result, _connection = run_action(args=dict(strict=strict), hostvars=hostvars)
        assert result["failed"] is True
        assert result["msg"].startswith("Inventory validation found 2 problem(s) (warnings count: strict mode); ")


def test_a_templated_password_is_not_clear_text():
    hostvars = copy.deepcopy(HOSTVARS)
    hostvars["worker1"]["ansible_password"] = "{{ vault_worker1_password }}"
    result, _connection = run_action(hostvars=hostvars)
    assert result["warnings_found"] == []


def test_role_variables_and_their_llm_solution_names_are_known():
    known = validate_inventory.known_variables(validate_inventory.role_defaults())
    # A role input, the llm_solution name a default reads, and an argument-spec option.
    assert {"prepare_model_path", "ray_port", "model_path", "ray_device"} <= known
    assert "model_weight_path" not in known


@pytest.mark.parametrize("raw, task_vars, expected", [
    ("{{ ray_port | default(6379) }}", {}, ("ray_port", 6379)),
    ("{{ ray_port | default(6379) }}", {"ray_port": 7000}, ("ray_port", 7000)),
    ("{{ llm_port|default( 8000 ) }}", {}, ("llm_port", 8000)),
    (8265, {}, (None, 8265)),
    (True, {}, (None, None)),
    ("{{ ray_port + 1 }}", {}, (None, None)),
])
def test_a_port_default_resolves_to_its_llm_solution_name(raw, task_vars, expected):
    assert validate_inventory._resolve(raw, task_vars) == expected


def test_a_port_that_two_roles_share_is_reported_against_each_other():
    # The rsync daemon moved onto the Ray port: the cluster-wide port check names both.
    result, _connection = run_action(model_distribution_rsync_port=6379)
    assert result["failed"] is True
    assert "model_distribution_rsync_port = 6379 clashes with ray_port = 6379: every service needs its own port; " \
        "change one of them." in result["errors"]


@pytest.mark.parametrize("ray_port, extra", [
    # The role's defaults in the play's variables (monitoring imported in the same play as the validation).
    (6379, {"monitoring_ray_members_port": "{{ ray_cluster_port | default(ray_port | default(6379)) }}",
            "monitoring_ray_metrics_port": "{{ ray_cluster_metrics_export_port | default(6385) }}"}),
    # Ray moved by the operator, and the monitoring role told where.
    (6390, {"monitoring_ray_members_port": 6390, "ray_cluster_metrics_export_port": 6395, "monitoring_ray_metrics_port": 6395}),
])
def test_the_monitoring_role_s_references_to_ray_s_ports_are_no_clash(ray_port, extra):
    result, _connection = run_action(args={"ports": {"ray_port": ray_port, "llm_port": 8000}}, **extra)
    assert not result.get("failed"), result.get("errors")


def test_a_monitoring_port_of_its_own_still_clashes_with_ray_s():
    result, _connection = run_action(ray_port=6379, monitoring_node_exporter_port=6379)
    assert result["failed"] is True
    assert "monitoring_node_exporter_port = 6379 clashes with ray_port = 6379" in " ".join(result["errors"])
