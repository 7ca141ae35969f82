# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""An NVIDIA 8-GPU node and a CPU-only node, each a single-node cluster."""

from __future__ import annotations

import json
import os

testinfra_hosts = ["ansible://all"]

ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
EXPECTED = {"gpu1": ("gpu", "8 GPUs"), "cpu1": ("none", None)}


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
