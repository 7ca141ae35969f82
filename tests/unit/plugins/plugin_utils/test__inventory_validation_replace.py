# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""./deploy.sh replace-node and remove-node: what stops them before any host changes; the rack labels the model's
transfers read (model_distribution_locality)."""

from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.filter.cluster import replace_node_problems
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import replace_problems, validate

from ansible_collections.aihost.llm_cluster.tests.unit.plugins.plugin_utils.test__inventory_validation import GOOD

# The inventory after the operator put worker3 in worker2's place.
REPLACED = {"all": ["master1", "worker1", "worker3", "bastion"], "masters": ["master1"],
            "workers": ["worker1", "worker3"], "ungrouped": ["bastion"], "monitoring": []}


def test_a_new_node_in_the_old_one_s_place_passes():
    assert replace_problems("worker2", "worker3", REPLACED) == []


def test_the_same_name_on_new_hardware_passes():
    assert replace_problems("worker1", "worker1", REPLACED) == []


def test_removing_a_node_that_left_the_inventory_passes():
    assert replace_problems("worker2", "", REPLACED) == []


def test_retiring_a_node_kept_as_a_host_outside_the_groups_passes():
    # REPLACED keeps bastion outside the groups: the node to retire must be such a host.
    assert replace_problems("bastion", "", REPLACED, retire=True) == []
    assert replace_problems("bastion", "worker3", REPLACED, retire=True) == []


def test_retiring_a_node_the_inventory_lost_or_that_keeps_its_name_is_refused():
    assert replace_problems("worker2", "worker3", REPLACED, inventory="hosts.yml", retire=True) == [
        "--retire cleans worker2 before it goes, and hosts.yml has no host worker2 to connect to: keep it there "
        "outside masters and workers (all: hosts: worker2: ansible_host: ...), or run without --retire if the "
        "machine is gone."]
    assert replace_problems("worker1", "worker1", REPLACED, retire=True) == [
        "--retire cleans the machine that leaves, and worker1 keeps its name on new hardware: there is nothing to "
        "retire; run the replacement without --retire."]
    # Only the value true retires (the filter's argument).
    assert replace_node_problems("worker2", "worker3", REPLACED, retire="yes") == []


def test_the_old_node_still_a_member_is_named_with_the_fix():
    problems = replace_problems("worker1", "worker3", REPLACED, inventory="hosts.yml")
    assert problems == ["worker1 is still in workers of hosts.yml: the inventory must already be the cluster to have; "
                        "remove worker1 from workers and put worker3 in its place, then run this again."]
    problems = replace_problems("master1", "", REPLACED)
    assert problems[0].startswith("master1 is still in masters of the inventory")


def test_a_new_node_outside_the_cluster_groups_is_named():
    assert replace_problems("worker2", "bastion", REPLACED) == [
        "the new node bastion is not in masters or workers of the inventory: add it there (in OLD's place) with its "
        "ansible_host, then run the replacement again."]


@pytest.mark.parametrize("old", ["all", "workers", "*", "worker*", "worker1,worker2", "workers:&masters", "!master1",
                                 "~work.*", "worker[0:9]", "worker1 worker2", "worker1\n", "\x1b[31mworker1", "",
                                 "   ", None, 3, ["worker1"], {"worker1": 1}])
def test_a_pattern_a_group_or_no_name_is_refused_as_the_old_node(old):
    problems = replace_problems(old, "worker3", REPLACED)
    assert len(problems) == 1
    assert problems[0].startswith("the node to replace (OLD) = ")
    assert "give the inventory host name of one node" in problems[0]


@pytest.mark.parametrize("new", ["all", "worker*", "worker1,worker3", "-e@x.yml:", 7])
def test_a_pattern_or_no_name_is_refused_as_the_new_node(new):
    problems = replace_problems("worker2", new, REPLACED)
    assert problems and problems[0].startswith("the new node (NEW) = ")


def test_escapes_in_a_hostile_name_are_shown_not_sent_to_the_terminal():
    problem = replace_problems("\x1b[2Jworker1", "worker3", REPLACED)[0]
    assert "\x1b" not in problem and "\\x1b" in problem


def test_removing_the_last_node_is_refused():
    groups = {"all": ["master1"], "masters": ["master1"], "workers": []}
    assert replace_problems("master1", "", groups) == [
        "master1 is still in masters of the inventory: the inventory must already be the cluster to have; remove "
        "master1 from masters, then run this again.",
        "without master1, the inventory has no node left in masters or workers."]


def test_the_filter_refuses_groups_that_are_no_mapping():
    assert replace_node_problems("worker2", "worker3", REPLACED) == []
    with pytest.raises(AnsibleFilterError):
        replace_node_problems("worker2", "worker3", ["worker3"])


def localities(**values):
    spec = copy.deepcopy(GOOD)
    spec["localities"] = values
    return spec


def test_rack_labels_pass():
    assert validate(localities(master1="rack-a", worker1="row2/rack:03", worker2="")) == []


@pytest.mark.parametrize("value", ["rack a", "-rack", "rack\n03", "\x1b[31mred", "r" * 65, ["rack-a"], 3, True])
def test_a_rack_label_that_is_no_label_is_named_with_the_host(value):
    errors = validate(localities(worker1=value))
    assert len(errors) == 1
    assert errors[0].startswith("model_distribution_locality = ")
    assert "on host worker1 is not a rack or switch label" in errors[0]
    assert "\x1b" not in errors[0] and "\n" not in errors[0]
