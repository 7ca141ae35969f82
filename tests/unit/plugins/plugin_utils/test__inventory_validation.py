# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import copy

import pytest
from hypothesis import given, strategies as st

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import validate

GOOD = {
    "head_group": "masters",
    "worker_group": "workers",
    "groups": {"masters": ["master1"], "workers": ["worker1", "worker2"]},
    "node_num": 3,
    "ports": {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570},
    "backend_type": "MindFormers",
    "model_type": "safetensors",
    "model_path": "/data/models/DeepSeek-R1",
    "interface_var": "ray_device",
    "interfaces": {"master1": "enp67s0f0np0", "worker1": "enp67s0f0np0", "worker2": "auto"},
    "cidrs": {"npu_network_cidr": "10.10.0.0/16", "llm_cluster_client_cidrs": []},
    "booleans": {"prepare_require_cann": True},
    "flags": {"is_stop_other_container": 0},
    "addresses": {"master1": "192.0.2.1", "worker1": "192.0.2.2", "worker2": "192.0.2.3"},
    "container": {"image_name": "hub.oepkgs.net/oedeploy/openeuler/aarch64/mindspore", "image_tag": 20250717,
                  "container_name": "openeuler_ds"},
}


def spec_with(**changes):
    spec = copy.deepcopy(GOOD)
    for key, value in changes.items():
        spec[key] = value
    return spec


def test_good_spec_has_no_errors():
    assert validate(GOOD) == []


def test_single_node_without_workers_group():
    spec = spec_with(groups={"masters": ["master1"]}, node_num="1", interfaces={"master1": "eth0"},
                     addresses={"master1": "192.0.2.1"})
    assert validate(spec) == []


@pytest.mark.parametrize("changes, expected", [
    ({"node_num": True}, "node_num = True (boolean): must be a positive integer; set node_num: 3"),
    ({"node_num": 0}, "node_num = 0 (integer): must be a positive integer"),
    ({"ports": {"ray_port": "6379", "llm_port": 0, "dp_port": 12570}}, "llm_port = 0 (integer): a port must be"),
    ({"ports": {"ray_port": 6379, "llm_port": "6379", "dp_port": 1}}, "ray_port = 6379 clashes with llm_port = 6379"),
    ({"ports": {"ray_port": 6379.5, "llm_port": 8000, "dp_port": 1}}, "ray_port = 6379.5 (number)"),
    ({"model_path": "/"}, "model_path = '/' is the root directory"),
    ({"model_path": "/data/../etc"}, "model_path = '/data/../etc' contains '..': write the normalised path /etc."),
    ({"model_path": ""}, "model_path = '': set model_path to the absolute directory"),
    ({"interfaces": {"master1": "eth0", "worker1": "eth0", "worker2": "a-very-long-interface-name"}},
     "ray_device = 'a-very-long-interface-name' on host worker2 is not a network interface name"),
    ({"cidrs": {"npu_network_cidr": "10.10.0.0"}}, "npu_network_cidr = '10.10.0.0' is not a CIDR"),
    ({"cidrs": {"llm_cluster_client_cidrs": ["192.168.0.0/16", "fe80::/10", "banana/8"]}},
     "llm_cluster_client_cidrs = 'banana/8' is not a CIDR"),
    ({"booleans": {"prepare_require_cann": 1}}, "prepare_require_cann = 1 (integer) must be a YAML boolean"),
    ({"flags": {"is_stop_other_container": 2}}, "is_stop_other_container = 2 (integer) must be 0 or 1"),
    ({"container": {"container_name": "-bad"}}, "container_name = '-bad' is not a valid container name"),
    ({"container": {"image_tag": "a b"}}, "image_tag = 'a b' is not a valid image tag"),
])
def test_each_problem_names_variable_value_and_fix(changes, expected):
    errors = validate(spec_with(**changes))
    assert len(errors) == 1, errors
    assert expected in errors[0]


def test_all_problems_reported_at_once():
    spec = spec_with(node_num=5, backend_type="x", model_type="y", model_path="rel",
                     ports={"ray_port": 1, "llm_port": 1, "dp_port": 99999})
    errors = validate(spec)
    assert len(errors) == 6, errors


def test_missing_groups_are_reported_not_raised():
    errors = validate(spec_with(groups={}, node_num=1, interfaces={}, addresses={}))
    assert any("group 'masters' has 0 hosts" in e for e in errors)
    assert any("node_num = 1 but the inventory has 0 host(s)" in e for e in errors)


@given(st.integers(min_value=1, max_value=64))
def test_node_num_must_match_host_count(count):
    workers = ["worker%d" % i for i in range(1, count)]
    hosts = ["master1"] + workers
    spec = spec_with(groups={"masters": ["master1"], "workers": workers}, node_num=count,
                     interfaces={h: "eth0" for h in hosts}, addresses={h: "10.0.%d.%d" % (i // 250, i % 250)
                                                                       for i, h in enumerate(hosts)})
    assert validate(spec) == []
    spec["node_num"] = count + 1
    assert len(validate(spec)) == 1
