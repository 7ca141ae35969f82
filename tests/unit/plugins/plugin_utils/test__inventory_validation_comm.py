# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The collective variables (HCCL, NCCL, Gloo, TensorPipe, vLLM's host IP) of the backend's environment and of
each node's prepare_env_extra and serve_environment: ranges from CANN's environment reference, the AIV cap,
NCCL's interface syntax that Gloo does not take, one node's address on several nodes, values that differ
between the ranks of one communicator."""

from __future__ import annotations

import copy

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._inventory_validation import validate

MEMBERS = ["master1", "worker1", "worker2"]
# llm_solution's backend environment (its set_env.sh values, roles/prepare/vars/main.yml).
NATIVE = {"HCCL_OP_EXPANSION_MODE": "AIV", "HCCL_CONNECT_TIMEOUT": "7200", "vLLM_MODEL_BACKEND": "Native"}
BASE = {
    "head_group": "masters",
    "worker_group": "workers",
    "groups": {"masters": ["master1"], "workers": ["worker1", "worker2"]},
    "node_num": 3,
    "ports": {"ray_port": 6379, "llm_port": 8000, "dp_port": 12570},
    "backend_type": "Native",
    "model_type": "safetensors",
    "model_path": "/data/models/DeepSeek-R1",
    "interface_var": "ray_device",
    "interfaces": {host: "enp67s0f0np0" for host in MEMBERS},
    "addresses": {"master1": "192.0.2.1", "worker1": "192.0.2.2", "worker2": "192.0.2.3"},
    "backend_env": NATIVE,
}


def spec(every=None, per_host=None, source="prepare_env_extra", backend=None):
    """Every node gets ``every`` in ``source``; ``per_host`` {host: {NAME: value}} is added on top."""
    result = copy.deepcopy(BASE)
    if backend is not None:
        result["backend_env"] = backend
    result["comm_env"] = {}
    for host in MEMBERS:
        values = dict(every or {}, **((per_host or {}).get(host) or {}))
        result["comm_env"][host] = {source: values}
    return result


def test_llm_solution_s_values_and_the_tutorials_pass():
    # vllm-ascend's multi-node tutorials: a buffer of 1024 MB, AIV, the interfaces in both syntaxes, each node's IP.
    every = {"HCCL_BUFFSIZE": 1024, "HCCL_EXEC_TIMEOUT": "1091", "HCCL_SOCKET_IFNAME": "=enp67s0f0np0",
             "NCCL_SOCKET_IFNAME": "^lo,docker", "GLOO_SOCKET_IFNAME": "enp67s0f0np0", "TP_SOCKET_IFNAME": "enp67s0f0np0",
             "HCCL_RDMA_TC": 132, "HCCL_RDMA_SL": "4", "HCCL_INTRA_ROCE_ENABLE": 1, "NCCL_IB_HCA": "mlx5",
             "OMP_NUM_THREADS": "1"}
    own = {"master1": {"HCCL_IF_IP": "10.0.0.1"}, "worker1": {"HCCL_IF_IP": "10.0.0.2"}, "worker2": {"HCCL_IF_IP": "10.0.0.3"}}
    assert validate(spec(every, own)) == []
    assert validate(spec({"HCCL_EXEC_TIMEOUT": 1836}, backend={})) == []
    assert validate(spec()) == []


@pytest.mark.parametrize("every, expected", [
    ({"HCCL_CONNECT_TIMEOUT": 60}, "prepare_env_extra.HCCL_CONNECT_TIMEOUT = '60' must be a whole number from "
     "120 to 7200: seconds HCCL waits for every rank to connect"),
    ({"HCCL_CONNECT_TIMEOUT": "120; reboot"}, "prepare_env_extra.HCCL_CONNECT_TIMEOUT = '120; reboot' must be a whole number"),
    ({"HCCL_CONNECT_TIMEOUT": 7201}, "from 120 to 7200"),
    ({"HCCL_BUFFSIZE": 0}, "prepare_env_extra.HCCL_BUFFSIZE = '0' must be a whole number from 1 to 32768"),
    ({"HCCL_BUFFSIZE": "1e9"}, "prepare_env_extra.HCCL_BUFFSIZE = '1e9' must be a whole number"),
    ({"HCCL_BUFFSIZE": 65536}, "each communicator takes twice the value"),
    ({"HCCL_RDMA_TC": 130}, "prepare_env_extra.HCCL_RDMA_TC = '130' is not a multiple of 4: it is the DSCP value times 4"),
    ({"HCCL_RDMA_TC": 256}, "prepare_env_extra.HCCL_RDMA_TC = '256' must be a whole number from 0 to 255"),
    ({"HCCL_RDMA_SL": 8}, "HCCL_RDMA_SL = '8' must be a whole number from 0 to 7: the RoCE service level"),
    ({"HCCL_INTRA_ROCE_ENABLE": "yes"}, "HCCL_INTRA_ROCE_ENABLE = 'yes' must be a whole number from 0 to 1"),
    ({"HCCL_DETERMINISTIC": "True"}, "prepare_env_extra.HCCL_DETERMINISTIC = 'True' must be true or false (lower case)"),
    # The backend's AIV caps the execution timeout.
    ({"HCCL_EXEC_TIMEOUT": 1836}, "prepare_env_extra.HCCL_EXEC_TIMEOUT = '1836' has no effect with "
     "HCCL_OP_EXPANSION_MODE (the default of the backend_type, roles/prepare/vars/main.yml; override it in "
     "prepare_env_extra) = 'AIV': that mode caps it at 1091 s"),
    ({"HCCL_DETERMINISTIC": True}, "HCCL_OP_EXPANSION_MODE (the default of the backend_type, roles/prepare/vars/main.yml; "
     "override it in prepare_env_extra) = 'AIV' with prepare_env_extra.HCCL_DETERMINISTIC = 'true': HCCL ignores AIV"),
    ({"GLOO_SOCKET_IFNAME": "^lo,docker"}, "prepare_env_extra.GLOO_SOCKET_IFNAME = '^lo,docker': Gloo takes interface "
     "names only (eth0, or eth0,eth1), not NCCL's '^' (exclude) or '=' (exact)"),
    ({"TP_SOCKET_IFNAME": "=eth0"}, "TP_SOCKET_IFNAME = '=eth0': TensorPipe takes interface names only"),
    ({"NCCL_SOCKET_IFNAME": "eth0,,eth1"}, "prepare_env_extra.NCCL_SOCKET_IFNAME = 'eth0,,eth1' is not a list of "
     "interface names (1-15 characters each, separated by ',', after an optional '^' and '=')"),
    ({"HCCL_SOCKET_IFNAME": "eth0 eth1"}, "HCCL_SOCKET_IFNAME = 'eth0 eth1' is not a list of interface names"),
    ({"GLOO_SOCKET_IFNAME": "$(curl x)"}, "GLOO_SOCKET_IFNAME = '$(curl x)' is not a list of interface names"),
    ({"VLLM_HOST_IP": "node1.example"}, "prepare_env_extra.VLLM_HOST_IP = 'node1.example' is not an IP address"),
])
def test_each_bad_value_is_named_once_with_its_map_the_rule_and_the_nodes(every, expected):
    errors = validate(spec(every))
    assert len(errors) == 1, errors
    assert expected in errors[0], errors
    assert errors[0].endswith("(every node)."), errors


def test_a_bad_value_on_one_node_names_that_node_and_the_engine_s_map_wins():
    errors = validate(spec(per_host={"worker2": {"HCCL_CONNECT_TIMEOUT": 30}}, source="serve_environment"))
    assert errors[0].startswith("serve_environment.HCCL_CONNECT_TIMEOUT = '30' must be a whole number"), errors
    assert errors[0].endswith("(host worker2)."), errors
    # The same value differing from the others' is a second error.
    assert errors[1].startswith("HCCL_CONNECT_TIMEOUT differs between the nodes ('7200' on master1, '7200' on "
                                "worker1, '30' on worker2)"), errors
    assert len(errors) == 2
    # serve_environment comes after prepare_env_extra: a good engine value over a bad one in the env file.
    both = copy.deepcopy(BASE)
    both["comm_env"] = {host: {"prepare_env_extra": {"HCCL_CONNECT_TIMEOUT": 30},
                               "serve_environment": {"HCCL_CONNECT_TIMEOUT": 1200}} for host in MEMBERS}
    assert validate(both) == []


def test_values_one_communicator_shares_must_match_on_every_node():
    errors = validate(spec(per_host={"master1": {"HCCL_BUFFSIZE": 1024}, "worker1": {"HCCL_BUFFSIZE": 512}}))
    assert errors == ["HCCL_BUFFSIZE differs between the nodes ('1024' on master1, '512' on worker1, unset (CANN's "
                      "default) on worker2): the ranks of one communicator need the same value; set it once for every "
                      "node (group_vars or the inventory's vars), not per host."]


def test_one_node_s_own_address_on_several_nodes_is_refused():
    errors = validate(spec({"HCCL_IF_IP": "10.0.0.1"}))
    assert errors == ["HCCL_IF_IP = '10.0.0.1' is set for master1, worker1, worker2: it is one node's own address, so "
                      "HCCL or vLLM on the others would use an address that is not theirs; set it per host in "
                      "host_vars, or leave it unset (the env file sets each node's)."]
    # Spellings of one address are one address.
    errors = validate(spec(per_host={"master1": {"VLLM_HOST_IP": "fd00::1"}, "worker1": {"VLLM_HOST_IP": "fd00:0::1"},
                                     "worker2": {"VLLM_HOST_IP": "fd00::3"}}))
    assert len(errors) == 1 and "VLLM_HOST_IP = 'fd00::1' is set for master1, worker1" in errors[0], errors


@pytest.mark.parametrize("value", [None, [], "x", 3, {"HCCL_BUFFSIZE": {"a": 1}}, {"HCCL_BUFFSIZE": None},
                                   {"HCCL_BUFFSIZE": 1.5}, {("HCCL_BUFFSIZE",): 1}])
def test_odd_shapes_are_skipped_here_and_never_raise(value):
    odd = copy.deepcopy(BASE)
    odd["comm_env"] = {host: {"prepare_env_extra": value, "serve_environment": value} for host in MEMBERS}
    errors = validate(odd)
    assert all("could not be checked" not in error for error in errors), errors
    odd["comm_env"] = value
    odd["backend_env"] = value
    errors = validate(odd)
    assert all("could not be checked" not in error for error in errors), errors
