# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""affinity_apply's rules from the planner's process plan (the plan of a real layout, then edge cases)."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.aihost.llm_cluster.plugins.filter.cpuset import affinity_rules as affinity_rules_filter
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._binding import affinity_rules

PLAN = {"groups": [
    {"engine_match": "VLLM::EngineCore_DP0", "engine_cores": [0, 1],
     "workers": [{"match": "VLLM::Worker_DP0_TP0", "parent_match": "VLLM::EngineCore_DP0", "cores": [2, 3]},
                 {"match": "VLLM::Worker_DP0_TP1", "parent_match": "VLLM::EngineCore_DP0", "cores": []}]},
    {"engine_match": "VLLM::EngineCore_DP1", "engine_cores": [],
     "workers": [{"match": "VLLM::Worker_DP1_TP0", "parent_match": "VLLM::EngineCore_DP1", "cores": [6]}]},
]}


def test_one_rule_per_process_with_cores_in_plan_order():
    assert affinity_rules(PLAN, optional=True) == [
        {"cmdline": "VLLM::EngineCore_DP0", "cpus": [0, 1], "optional": True},
        {"cmdline": "VLLM::Worker_DP0_TP0", "parent_cmdline": "VLLM::EngineCore_DP0", "cpus": [2, 3], "optional": True},
        {"cmdline": "VLLM::Worker_DP1_TP0", "parent_cmdline": "VLLM::EngineCore_DP1", "cpus": [6], "optional": True},
    ]


@pytest.mark.parametrize("plan", [{}, {"groups": []}, {"groups": None}, {"groups": [{"workers": None}]}])
def test_a_plan_without_processes_gives_no_rule(plan):
    assert affinity_rules(plan) == []


def test_the_filter_refuses_what_is_no_plan():
    assert affinity_rules_filter(PLAN)[0]["optional"] is False
    with pytest.raises(AnsibleFilterError):
        affinity_rules_filter([PLAN])
