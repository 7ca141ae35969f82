# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The monitoring step on the NVIDIA node (converge.yml): Prometheus from Debian's package scrapes the fake
dcgm-exporter (tests/fakes: the metric families and labels of dcgm-exporter's default counters, checked against
its captures by tests/unit/fakes), the accel:* rules read every GPU, an XID error and remapped rows set in the
node's fake state fire their alerts and clear, and the metric truth check passed on the live target."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest
import testinfra

testinfra_hosts = ["ansible://gpu1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
ARTIFACTS = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "artifacts")
GPUS = 8
MIB = 1048576
_SPEC = importlib.util.spec_from_file_location(
    "prometheus", os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "shared", "prometheus.py"))
prom = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(prom)


@pytest.fixture(scope="module")
def node():
    return testinfra.get_host("ansible://gpu1?ansible_inventory=%s" % INVENTORY)


@pytest.fixture(scope="module")
def address(node):
    return node.check_output("ip -4 -o addr show dev eth0").split()[3].split("/")[0]


def query(node, address, expr):
    return prom.api(node, address, "/api/v1/query", query=expr)["result"]


def firing(node, address, alert):
    return prom.firing(prom.api(node, address, "/api/v1/alerts"), alert)


def test_the_dcgm_exporter_and_prometheus_listen_on_the_cluster_address_only(node, address):
    assert node.service("llm-cluster-dcgm-exporter").is_running
    listening = {line.split()[3] for line in node.check_output("ss -Htln").splitlines()}
    for port in (9400, 9090):
        assert [item for item in listening if item.endswith(":%d" % port)] == ["%s:%d" % (address, port)], (port, listening)
    # No Alertmanager, no node_exporter: the scenario turns them off.
    assert not [item for item in listening if item.endswith((":9093", ":9100"))], listening


def test_prometheus_scrapes_the_gpu_target_and_the_accelerator_rules_read_every_gpu(node, address):
    def targets():
        active = prom.api(node, address, "/api/v1/targets", state="active")["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None
    active = prom.wait_for(targets) or prom.api(node, address, "/api/v1/targets", state="active")["activeTargets"]
    gpu = [t for t in active if t["labels"]["job"] == "llm_cluster_gpu"]
    assert [(t["health"], t["labels"]["node"], t["labels"]["accelerator"]) for t in gpu] == [("up", "gpu1", "gpu")], active
    healthy = prom.wait_for(lambda: [r for r in query(node, address, "accel:healthy") if r["value"][1] == "1"])
    assert sorted((r["metric"]["node"], r["metric"]["device"]) for r in healthy) == [("gpu1", str(i)) for i in range(GPUS)]
    # The fake's framebuffer, used and free, is the profile's memory: the rule adds them and converts MiB to bytes.
    [total] = query(node, address, 'accel:memory_total_bytes{node="gpu1", device="0"}')
    [raw] = query(node, address, 'DCGM_FI_DEV_FB_FREE{gpu="0"} + DCGM_FI_DEV_FB_USED{gpu="0"}')
    assert float(total["value"][1]) == float(raw["value"][1]) * MIB > 0


def test_an_xid_error_and_remapped_rows_fire_their_alerts_and_clear(node, address):
    assert firing(node, address, "AcceleratorUnhealthy") == []
    assert firing(node, address, "AcceleratorUncorrectableECC") == []
    try:
        # XID 79: the GPU has fallen off the bus; a row remapped for an uncorrectable error.
        prom.set_fault(node, "xid", 2, 79)
        prom.set_fault(node, "uncorrectable_remapped_rows", 5, 1)
        assert prom.wait_for(lambda: firing(node, address, "AcceleratorUnhealthy"), timeout=90) == [("gpu1", "2")]
        assert prom.wait_for(lambda: firing(node, address, "AcceleratorUncorrectableECC"), timeout=90) == [("gpu1", "5")]
    finally:
        prom.set_fault(node, "xid", 2, None)
        prom.set_fault(node, "uncorrectable_remapped_rows", 5, None)
    assert prom.wait_for(lambda: not firing(node, address, "AcceleratorUnhealthy")
                         and not firing(node, address, "AcceleratorUncorrectableECC"), timeout=90)


def test_the_report_names_the_gpu_target_and_the_truth_check_passed():
    with open(os.path.join(ARTIFACTS, "monitoring.json"), encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["host"] == "gpu1" and doc["alertmanager"] is None
    assert doc["truth_check"] == {"passed": True, "missing": []}
    # Both targets, listed once Prometheus had read its target files and scraped them: itself and the exporter.
    assert doc["down"] == [] and doc["up"] == len(doc["targets"]) == 2, doc["targets"]
    assert sorted((t["job"], t["node"]) for t in doc["targets"]) == [("llm_cluster_gpu", "gpu1"), ("prometheus", "gpu1")]
