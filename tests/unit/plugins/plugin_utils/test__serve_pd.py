# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""serve_topology pd: each node's role, its KV connector, its ports, and the router's PD flags.

The expected values are the engines' own recipes:

* vllm-ascend, "Prefill-Decode Disaggregation (Mooncake, multi-node)"
  (vllm-project/vllm-ascend@182b75ea:docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md):
  --kv-transfer-config '{"kv_connector":"MooncakeConnectorV1","kv_role":"kv_producer|kv_consumer","kv_port":"36000",
  "kv_connector_extra_config":{"prefill":{"dp_size":2,"tp_size":8},"decode":{"dp_size":32,"tp_size":1}}}', a distinct
  kv_port and engine_id per instance, HCCL_BUFFSIZE=256 on prefill and 600 on decode, and AscendDirectTransport's random
  ports in [20000, 20000 + NPUs per node x 1000).
* vLLM, "NixlConnector Usage Guide" (vllm-project/vllm:docs/features/nixl_connector_usage.md):
  '{"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"fail"}', VLLM_NIXL_SIDE_CHANNEL_HOST
  (the node's address; localhost by default) and VLLM_NIXL_SIDE_CHANNEL_PORT (5600 by default).
* vllm-router 0.1.17 (`vllm-router --help`): "vllm-router --vllm-pd-disaggregation --prefill http://prefill1:8000
  --decode http://decode1:8001".
"""

from __future__ import annotations

import json

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve, _serve_pd


def nodes(count, accelerator="npu", devices=8):
    return [{"host": "n%d" % i, "address": "10.0.0.%d" % (i + 1), "accelerator": accelerator, "count": devices}
            for i in range(count)]


def settings(prefill, decode, **extra):
    base = {"topology": "pd", "model_path": "/srv/m", "model_name": "m", "port": 8000, "replica_port": 8001,
            "router_port": 8002, "pd_groups": {"prefill": prefill, "decode": decode},
            "kv_ports": ["36000-36999", "5600"],
            "reserved_ports": {"serve_port": 8000, "serve_replica_port": 8001, "serve_router_port": 8002,
                               "ray_cluster_port": 6379, "ray_cluster_worker_port_min-max": [20000, 20999]}}
    base.update(extra)
    return base


def kv_config(plan, host):
    argv = plan["nodes"][host]["argv"]
    return json.loads(argv[argv.index("--kv-transfer-config") + 1])


def test_vllm_ascend_renders_the_mooncake_recipe_per_role_with_its_own_port_and_engine_id():
    plan = _serve.plan(nodes(4), settings(["n0", "n1"], ["n2", "n3"], backend="vllm_ascend"))
    assert plan["errors"] == []
    assert plan["topology"] == "pd" and plan["pd"] == {"connector": "mooncake"} and plan["tp"] == 8
    configs = [kv_config(plan, "n%d" % i) for i in range(4)]
    for index, config in enumerate(configs):
        # The recipe's keys and value types: kv_port and engine_id are strings, the shapes integers.
        assert config == {"kv_connector": "MooncakeConnectorV1",
                          "kv_role": "kv_producer" if index < 2 else "kv_consumer",
                          "kv_port": str(36000 + 100 * index), "engine_id": str(index),
                          "kv_connector_extra_config": {"prefill": {"dp_size": 2, "tp_size": 8},
                                                        "decode": {"dp_size": 2, "tp_size": 8}}}
    assert len({c["kv_port"] for c in configs}) == len({c["engine_id"] for c in configs}) == 4
    assert [plan["nodes"]["n%d" % i]["env"] for i in range(4)] == [{"HCCL_BUFFSIZE": "256"}] * 2 + [{"HCCL_BUFFSIZE": "600"}] * 2
    # The instance takes kv_port to kv_port + its chips.
    assert plan["nodes"]["n1"]["kv_ports"] == list(range(36100, 36109))
    assert [plan["nodes"]["n%d" % i]["role"] for i in range(4)] == ["prefill", "prefill", "decode", "decode"]


def test_the_router_gets_every_prefill_then_every_decode_url_in_inventory_order():
    plan = _serve.plan(nodes(3), settings(["n2"], ["n0", "n1"], backend="vllm_ascend"))
    assert plan["errors"] == []
    assert plan["router"] == {
        "host": "n0", "port": 8002, "metrics_address": "10.0.0.1", "metrics_port": 8003,
        "workers": ["http://10.0.0.1:8001", "http://10.0.0.2:8001", "http://10.0.0.3:8001"],
        "prefill": ["http://10.0.0.3:8001"], "decode": ["http://10.0.0.1:8001", "http://10.0.0.2:8001"],
        "args": ["--vllm-pd-disaggregation", "--prefill", "http://10.0.0.3:8001",
                 "--decode", "http://10.0.0.1:8001", "--decode", "http://10.0.0.2:8001"]}
    # Each engine on its own cluster address and the replica port, not the API's.
    assert plan["nodes"]["n2"]["argv"][5:9] == ["--host", "10.0.0.3", "--port", "8001"]


@pytest.mark.parametrize("devices, base, lowest", [(8, 25000, 28000), (16, 30000, 36000), (16, 35999, 36000)])
def test_a_kv_port_in_ascend_direct_transport_s_random_range_is_refused_naming_the_lowest_safe_one(devices, base, lowest):
    plan = _serve.plan(nodes(2, devices=devices),
                       settings(["n0"], ["n1"], backend="vllm_ascend", pd_kv_port=base, kv_ports=["20000-65535"],
                                reserved_ports={}))
    assert plan["errors"][0].startswith("n0: kv_port %d (serve_pd_kv_port %d + 0 x serve_pd_kv_port_stride) lies in "
                                        "20000-%d" % (base, base, lowest - 1))
    assert plan["errors"][0].endswith("set serve_pd_kv_port to %d or more" % lowest)
    ok = _serve.plan(nodes(2, devices=devices),
                     settings(["n0"], ["n1"], backend="vllm_ascend", pd_kv_port=lowest, kv_ports=["20000-65535"],
                              reserved_ports={}))
    assert ok["errors"] == []


def test_a_stride_smaller_than_a_node_s_chips_and_a_port_past_65535_are_named():
    plan = _serve.plan(nodes(2, devices=16), settings(["n0"], ["n1"], backend="vllm_ascend", pd_kv_port_stride=16))
    assert any(e.startswith("n0: serve_pd_kv_port_stride 16 leaves no room for the node's 16 devices") for e in plan["errors"])
    plan = _serve.plan(nodes(2), settings(["n0"], ["n1"], backend="vllm_ascend", pd_kv_port=65500,
                                          kv_ports=["65500-65535"]))
    assert "n1: kv_port 65600 + 8 devices passes 65535: lower serve_pd_kv_port" in plan["errors"]


def test_kv_ports_the_firewall_does_not_open_or_another_setting_takes_are_named_before_any_change():
    plan = _serve.plan(nodes(2), settings(["n0"], ["n1"], backend="vllm_ascend", kv_ports=["36000-36050"]))
    assert plan["errors"] == [
        "n1: the mooncake connector's ports 36100-36108 are not in llm_cluster_kv_ports (the ray_cluster role opens "
        "those to the members only, before the engines start): add \"36100-36108\" to it"]
    plan = _serve.plan(nodes(2), settings(["n0"], ["n1"], backend="vllm_ascend", pd_kv_port=36000,
                                          reserved_ports={"serve_router_metrics_port": 36105}))
    assert plan["errors"] == ["n1: the KV transfer ports 36100-36108 clash with serve_router_metrics_port (36105): "
                              "move serve_pd_kv_port or the other setting"]


def test_vllm_on_gpus_renders_nixl_with_its_side_channel_on_the_cluster_address():
    plan = _serve.plan(nodes(2, "gpu", 4), settings(["n0"], ["n1"], backend="vllm"))
    assert plan["errors"] == [] and plan["pd"] == {"connector": "nixl"}
    for index in range(2):
        assert kv_config(plan, "n%d" % index) == {"kv_connector": "NixlConnector", "kv_role": "kv_both",
                                                  "kv_load_failure_policy": "fail"}
        assert plan["nodes"]["n%d" % index]["env"] == {"VLLM_NIXL_SIDE_CHANNEL_HOST": "10.0.0.%d" % (index + 1),
                                                       "VLLM_NIXL_SIDE_CHANNEL_PORT": "5600"}
        assert plan["nodes"]["n%d" % index]["kv_ports"] == [5600]
    plan = _serve.plan(nodes(2, "gpu", 4), settings(["n0"], ["n1"], backend="vllm", kv_ports=[]))
    assert plan["errors"][0].startswith("n0: the nixl connector's ports 5600 are not in llm_cluster_kv_ports")


def test_vllm_on_cpu_takes_the_example_connector_through_the_shared_path_and_needs_one():
    plan = _serve.plan(nodes(2, "cpu", 0), settings(["n0"], ["n1"], backend="vllm", pd_shared_path="/srv/kv"))
    assert plan["errors"] == [] and plan["pd"] == {"connector": "example"}
    assert [kv_config(plan, h) for h in ("n0", "n1")] == [
        {"kv_connector": "ExampleConnector", "kv_role": role, "kv_connector_extra_config": {"shared_storage_path": "/srv/kv"}}
        for role in ("kv_producer", "kv_consumer")]
    assert plan["nodes"]["n0"]["env"] == {} and plan["nodes"]["n0"]["kv_ports"] == []
    for path in ("", "relative/kv", None):
        plan = _serve.plan(nodes(2, "cpu", 0), settings(["n0"], ["n1"], backend="vllm", pd_shared_path=path))
        assert plan["errors"] == [
            "serve_pd_connector example needs serve_pd_shared_path: an absolute path of a directory every prefill and "
            "decode node mounts from the same file system (got %r)" % (path or "").strip()]


@pytest.mark.parametrize("prefill, decode, message", [
    (["n0", "n1"], ["n1"], "n1: with serve_topology pd every node is in exactly one of the groups serve_prefill_group and "
                           "serve_decode_group; it is in prefill and decode: put it in one"),
    (["n0"], [], "n1: with serve_topology pd every node is in exactly one of the groups serve_prefill_group and "
                 "serve_decode_group; it is in neither: put it in one"),
    (["n0", "n1"], ["elsewhere"], "serve_topology pd needs at least one decode node: the group serve_decode_group "
                                  "lists none of the members (n0, n1)"),
])
def test_a_node_in_both_groups_or_neither_and_a_missing_role_are_named(prefill, decode, message):
    plan = _serve.plan(nodes(2), settings(prefill, decode, backend="vllm_ascend"))
    assert message in plan["errors"]
    assert "nodes" not in plan or plan["nodes"] == {}


def test_a_connector_that_does_not_fit_the_backend_and_mixed_accelerators_are_refused():
    plan = _serve.plan(nodes(2, "gpu", 4), settings(["n0"], ["n1"], backend="vllm", pd_connector="mooncake"))
    assert plan["errors"] == ["serve_pd_connector mooncake does not fit backend vllm on gpu accelerators (nixl: vllm on gpu, "
                              "mooncake: vllm_ascend on npu, example: vllm on cpu)"]
    plan = _serve.plan(nodes(2, "npu", 8), settings(["n0"], ["n1"], backend="vllm_mindspore"))
    assert plan["errors"][0].startswith("serve_topology pd has no KV connector for backend vllm_mindspore on npu")
    mixed = nodes(2, "npu", 8)
    mixed[1].update(accelerator="gpu", count=8)
    plan = _serve.plan(mixed, settings(["n0"], ["n1"], backend="vllm_ascend"))
    assert ("n1: serve_topology pd needs one kind of accelerator on every node of the group (the head n0 has npu; "
            "n1 gpu): take the node out of the group") in plan["errors"]
    assert _serve_pd.resolve_connector("; rm -rf /", "vllm", "gpu") == (
        None, "serve_pd_connector must be auto or one of nixl, mooncake, example, got '; rm -rf /'")


def test_hccl_buffsize_per_role_can_be_set():
    plan = _serve.plan(nodes(2), settings(["n0"], ["n1"], backend="vllm_ascend", pd_hccl_buffsize={"decode": 720}))
    assert [plan["nodes"][h]["env"] for h in ("n0", "n1")] == [{"HCCL_BUFFSIZE": "256"}, {"HCCL_BUFFSIZE": "720"}]


@pytest.mark.parametrize("value", ["36000-x", "0-10", "70000", "36010-36000", [1, 2], "36000-;true", True])
def test_a_hostile_kv_port_list_is_named(value):
    plan = _serve.plan(nodes(2), settings(["n0"], ["n1"], backend="vllm_ascend", kv_ports=[value]))
    assert plan["errors"] == ["llm_cluster_kv_ports takes ports and first-last ranges inside 1-65535, got %r" % (value,)]


METRICS = """# HELP vllm:request_success_total Count of successfully processed requests.
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 0.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} %s
vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny"} 0.0
"""


def reading(values):
    return [{"item": url, "status": 200 if value is not None else -1, "content": METRICS % value if value is not None else ""}
            for url, value in values]


def test_served_names_the_engines_whose_finished_requests_grew_by_role():
    router = {"prefill": ["http://p:8001"], "decode": ["http://d1:8001", "http://d2:8001"]}
    before = reading([("http://p:8001", "3.0"), ("http://d1:8001", "2.0"), ("http://d2:8001", "5.0")])
    after = reading([("http://p:8001", "4.0"), ("http://d1:8001", "2.0"), ("http://d2:8001", "6.0")])
    assert _serve_pd.served(before, after, router) == {"prefill": ["http://p:8001"], "decode": ["http://d2:8001"]}
    # An engine that did not answer, or one without the counter, served nothing that can be shown.
    after = reading([("http://p:8001", None), ("http://d1:8001", "3.0"), ("http://d2:8001", "5.0")])
    assert _serve_pd.served(before, after, router) == {"prefill": [], "decode": ["http://d1:8001"]}
    assert _serve_pd.finished_requests("vllm:num_requests_running 0.0\n") is None
