# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The KV-cache tier options: the engine arguments vLLM 0.32 reads (vllm/engine/arg_utils.py --kv-offloading-size
and --kv-offloading-backend, which vllm/config/vllm.py turns into the OffloadingConnector with cpu_bytes_to_use
= GiB x 2^30; the tiering spec of vllm/v1/kv_offload/tiering/spec.py with an "fs" secondary tier), the host memory
each node's share takes, and the budget checked on the node before any change."""

from __future__ import annotations

import json

import pytest

from ansible_collections.aihost.llm_cluster.plugins.filter import serve as serve_filter
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve

GIB = 1 << 30


def gpu_nodes(count, devices=8):
    return [{"host": "node%d" % i, "address": "10.0.0.%d" % (i + 1), "accelerator": "gpu", "count": devices}
            for i in range(count)]


def settings(**extra):
    base = {"backend": "vllm", "topology": "auto", "model_path": "/models/m", "model_name": "m", "port": 8000}
    base.update(extra)
    return base


def test_a_cpu_tier_is_vllm_s_own_two_flags_and_the_disk_tier_its_tiering_spec():
    plan = _serve.plan(gpu_nodes(1), settings(kv_offload_size_gib=64))
    argv = plan["nodes"]["node0"]["argv"]
    assert argv[argv.index("--kv-offloading-size") + 1] == "64"
    assert argv[argv.index("--kv-offloading-backend") + 1] == "native"
    assert "--kv-transfer-config" not in argv and plan["nodes"]["node0"]["kv_tier_bytes"] == 64 * GIB
    plan = _serve.plan(gpu_nodes(1), settings(kv_offload_size_gib=0.5, kv_offload_disk_path="/nvme/kv"))
    argv = plan["nodes"]["node0"]["argv"]
    assert "--kv-offloading-size" not in argv
    # The tiering spec's own example (vllm/v1/kv_offload/tiering/spec.py), with the fs tier's root_dir
    # (vllm/v1/kv_offload/tiering/fs/manager.py) and the connector vllm/config/vllm.py picks for "native".
    assert json.loads(argv[argv.index("--kv-transfer-config") + 1]) == {
        "kv_connector": "OffloadingConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"spec_name": "TieringOffloadingSpec", "cpu_bytes_to_use": GIB // 2,
                                      "secondary_tiers": [{"type": "fs", "root_dir": "/nvme/kv"}]}}


def test_prefix_caching_is_the_engine_s_unless_asked():
    assert not [a for a in _serve.plan(gpu_nodes(1), settings())["nodes"]["node0"]["argv"] if "prefix-caching" in a]
    assert "--no-enable-prefix-caching" in _serve.plan(gpu_nodes(1), settings(prefix_caching="false"))["nodes"]["node0"]["argv"]
    assert "--enable-prefix-caching" in _serve.plan(gpu_nodes(1), settings(prefix_caching=True))["nodes"]["node0"]["argv"]


def test_each_node_s_share_of_host_memory_by_topology():
    # Data parallel: each rank is an engine with the whole tier (2 ranks of TP 4 on 8 GPUs).
    plan = _serve.plan(gpu_nodes(2), settings(topology="dp", tensor_parallel_size=4, kv_offload_size_gib=10))
    assert [plan["nodes"][n]["kv_tier_bytes"] for n in ("node0", "node1")] == [20 * GIB, 20 * GIB]
    # Ray: one engine of TP 8 x PP 2 over two nodes, the tier summed across its TP ranks: 8 workers a node.
    plan = _serve.plan(gpu_nodes(2), settings(topology="ray", tensor_parallel_size=8, pipeline_parallel_size=2,
                                              kv_offload_size_gib=16))
    assert [plan["nodes"][n]["kv_tier_bytes"] for n in ("node0", "node1")] == [16 * GIB, 16 * GIB]
    # Single: the head only.
    plan = _serve.plan(gpu_nodes(2), settings(topology="single", kv_offload_size_gib=4))
    assert [plan["nodes"][n]["kv_tier_bytes"] for n in ("node0", "node1")] == [4 * GIB, 0]


@pytest.mark.parametrize("extra, message", [
    ({"kv_offload_size_gib": -1}, "serve_kv_offload_size_gib must be a number of 0 or more, got -1"),
    ({"kv_offload_size_gib": "lots"}, "serve_kv_offload_size_gib must be a number, got 'lots'"),
    ({"kv_offload_size_gib": "nan"}, "serve_kv_offload_size_gib must be a number of 0 or more"),
    ({"kv_offload_size_gib": True}, "serve_kv_offload_size_gib must be a number, got True"),
    ({"kv_offload_disk_path": "/nvme/kv"}, "needs a CPU tier in front of it: set serve_kv_offload_size_gib"),
    ({"kv_offload_size_gib": 1, "kv_offload_disk_path": "kv"}, "must be an absolute path"),
    ({"kv_offload_size_gib": 1, "kv_offload_disk_path": "/nvme/kv --enforce-eager"}, "must be an absolute path"),
    ({"kv_offload_size_gib": 1, "kv_offload_disk_path": "/nvme/kv\n"}, "without spaces or control characters"),
    ({"kv_offload_size_gib": 1, "prefix_caching": False}, "the KV-cache tiers keep prefix-cache blocks"),
    ({"kv_offload_size_gib": 1, "extra_args": ["--kv-transfer-config={}"]},
     "serve_extra_args sets --kv-transfer-config, which the KV-cache tier options set"),
    ({"prefix_caching": "sometimes"}, "serve_prefix_caching must be auto, true or false, got 'sometimes'"),
    ({"kv_offload_size_gib": 1, "backend": "vllm_ascend"}, "for vllm_ascend give its own offloading in serve_extra_args"),
])
def test_bad_tier_settings_are_plan_errors_naming_the_variable(extra, message):
    plan = _serve.plan(gpu_nodes(1), settings(**extra))
    assert any(message in error for error in plan["errors"]), plan["errors"]
    assert "argv" not in plan["nodes"].get("node0", {})


def test_the_budget_names_the_host_and_counts_what_a_restart_gives_back():
    reading = {"mem_available": 20 * GIB, "mem_total": 64 * GIB, "engine_memory": 10 * GIB, "disk_free": 50 * GIB,
               "disk_tier": 30 * GIB}
    # 20 available + 10 the running engine holds - 4 kept free = 26 GiB for the tier; 80 GiB of disk with the tier's.
    assert _serve.kv_budget_problems("n1", 26 * GIB, "/nvme/kv", 80 * GIB, reading, 4 * GIB) == []
    problems = _serve.kv_budget_problems("n1", 27 * GIB, "/nvme/kv", 81 * GIB, reading, 4 * GIB)
    assert problems[0].startswith("n1: the CPU tier of the KV cache takes up to 27.0 GiB here, and the node has 26.0 GiB "
                                  "available (MemAvailable 20.0 GiB, with the running engine's 10.0 GiB, less 4.0 GiB")
    assert problems[1] == ("n1: the disk tier of the KV cache may fill 81.0 GiB under /nvme/kv, and 80.0 GiB are free "
                           "there (with the tier's own files): lower serve_kv_offload_disk_bytes or give a path on a "
                           "larger disk")
    assert "has no size limit of its own" in _serve.kv_budget_problems("n1", 0, "/nvme/kv", 0, reading, 0)[0]
    # systemd's MemoryCurrent without accounting, or its infinity, adds nothing.
    for engine in ("[not set]", str((1 << 64) - 1), None):
        assert "the node has 16.0 GiB available" in _serve.kv_budget_problems(
            "n1", 27 * GIB, "", 0, dict(reading, engine_memory=engine), 4 * GIB)[0]
    # A reading that failed (the task's output missing): every byte counts as missing, nothing raises.
    assert len(_serve.kv_budget_problems("n1", GIB, "/nvme/kv", GIB, None, 0)) == 2
    assert serve_filter.FilterModule().filters()["serve_kv_budget"]("n1", "0", "", "0", {}, "0") == []
