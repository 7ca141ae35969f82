# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""An NVIDIA 8-GPU node, a CPU-only node, an Atlas 300I Duo node and an Atlas 800I A2 node on
driver 26.x, each a single-node cluster."""

from __future__ import annotations

import json
import os

testinfra_hosts = ["ansible://all"]

ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
EXPECTED = {"gpu1": ("gpu", "8 GPUs"), "cpu1": ("none", None), "duo1": ("npu", "8 NPUs"), "a26": ("npu", "8 NPUs")}
# product, memory kind and driver of the NPU nodes, as the fake npu-smi prints them
NPU = {"duo1": ("Atlas 300I Duo", "DDR", "25.2.0"), "a26": ("Atlas A2", "HBM", "26.1.0")}


def env_of(host):
    content = host.file("/etc/llm_cluster/env").content_string
    return dict(line.split("=", 1) for line in content.splitlines() if line and not line.startswith("#"))


def report_of(name):
    with open(os.path.join(ARTIFACTS, "preflight-%s.json" % name)) as handle:
        return json.load(handle)


def test_env_file_matches_the_profile(host):
    name = host.backend.get_hostname()
    kind = EXPECTED[name][0]
    env = env_of(host)
    assert env["LLM_CLUSTER_ACCELERATOR"] == kind
    assert env["LLM_CLUSTER_ROLE"] == "head"
    assert env["LLM_CLUSTER_NODE_NUM"] == "1"
    # ray_device: auto resolves to the interface of the default route.
    assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert env["vLLM_MODEL_BACKEND"] == "Native"
    if kind == "npu":
        assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    else:
        assert "ASCEND_RT_VISIBLE_DEVICES" not in env


def test_preflight_report_matches_the_profile(host):
    name = host.backend.get_hostname()
    kind, devices = EXPECTED[name]
    report = report_of(name)
    assert report["ok"] is True
    assert report["summary"]["accelerator"] == kind
    details = {c["check"]: c["detail"] for c in report["checks"]}
    assert details["accelerator_type"] == "%s accelerators" % kind
    if devices:
        assert details["device_count"] == devices
        assert report["summary"]["driver"]
    else:
        assert "device_count" not in details
    assert details["reachability"] == "no peers"
    assert details["clock"].startswith("clock offset not measured")


def test_nodes_report_product_memory_and_driver(host):
    name = host.backend.get_hostname()
    summary = report_of(name)["summary"]
    if name in NPU:
        assert (summary["product"], summary["memory_kind"], summary["driver"]) == NPU[name]
    else:
        assert (summary["product"], summary["memory_kind"]) == (None, None)
    assert summary["unhealthy"] == 0
