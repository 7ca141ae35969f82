# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The host tuning's variables, per node: profile, sysctl names and values (they reach /proc/sys paths and a
sysctl.d file), hugepage mode and governor; kernel parameters the binding step owns."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import validate
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.plugin_utils.test__inventory_validation_comm import (
    BASE as COMM_BASE,
    MEMBERS,
)

# The comm tests' three-node inventory, without the backend's environment.
BASE = dict((key, value) for key, value in COMM_BASE.items() if key != "backend_env")


def spec(every=None, per_host=None):
    result = copy.deepcopy(BASE)
    result["tuning"] = {host: dict(every or {}, **((per_host or {}).get(host) or {})) for host in MEMBERS}
    return result


def test_the_profiles_and_an_operator_s_changes_pass():
    assert validate(spec({"prepare_tuning_profile": "ascend",
                          "prepare_tuning_sysctl": {"vm.swappiness": 1, "net.ipv4.tcp_rmem": "4096 131072 6291456",
                                                    "kernel.sched_migration_cost_ns": None,
                                                    "net.ipv4.conf.enp67s0f0np0.rp_filter": 2},
                          "prepare_tuning_transparent_hugepage": "keep", "prepare_tuning_cpu_governor": "schedutil"})) == []
    assert validate(spec()) == []


@pytest.mark.parametrize("given, named", [
    ({"prepare_tuning_profile": "kunpeng"}, "prepare_tuning_profile = 'kunpeng' is not a profile"),
    ({"prepare_tuning_sysctl": "vm.swappiness=0"}, "prepare_tuning_sysctl = 'vm.swappiness=0' must be a mapping"),
    ({"prepare_tuning_sysctl": {"vm/swappiness": 0}}, "'vm/swappiness' is not a kernel parameter name"),
    ({"prepare_tuning_sysctl": {"vm..swappiness": 0}}, "'vm..swappiness' is not a kernel parameter name"),
    ({"prepare_tuning_sysctl": {"swappiness": 0}}, "'swappiness' is not a kernel parameter name"),
    ({"prepare_tuning_sysctl": {"vm.swappiness": "0\nkernel.modprobe = /tmp/x"}}, "is not one value"),
    ({"prepare_tuning_sysctl": {"vm.swappiness": ""}}, "is not one value"),
    ({"prepare_tuning_sysctl": {"vm.swappiness": True}}, "is not one value"),
    ({"prepare_tuning_sysctl": {"vm.swappiness": [0]}}, "is not one value"),
    ({"prepare_tuning_sysctl": {"kernel.numa_balancing": 0}}, "the binding step owns it"),
    ({"prepare_tuning_transparent_hugepage": "on"}, "must be always, madvise or never"),
    ({"prepare_tuning_cpu_governor": "../../x"}, "is not a governor name"),
    ({"prepare_tuning_cpu_governor": 1}, "is not a governor name"),
])
def test_a_bad_value_is_named_with_its_nodes(given, named):
    errors = validate(spec(given))
    assert len(errors) == 1, errors
    assert named in errors[0]
    assert errors[0].endswith("(master1, worker1, worker2).")


def test_one_node_s_host_vars_name_that_node_only():
    errors = validate(spec(per_host={"worker2": {"prepare_tuning_cpu_governor": "turbo mode"}}))
    assert len(errors) == 1
    assert "'turbo mode'" in errors[0] and errors[0].endswith("(worker2).")
