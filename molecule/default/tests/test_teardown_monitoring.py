# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""teardown.yml --tags monitoring: the packages the monitoring step installed are purged (their configuration
with them), the exporter units, binaries, targets and rules are gone, nothing listens on the monitoring ports,
and a second teardown changes nothing. Runs last (after test_serve.py)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import testinfra

testinfra_hosts = ["ansible://master1"]

INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
NAMES = ["master1", "worker1", "worker2"]


@pytest.fixture(scope="module")
def nodes():
    return {name: testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY)) for name in NAMES}


def teardown():
    result = subprocess.run(["ansible-playbook", "-i", INVENTORY, "aihost.llm_cluster.teardown", "--tags", "monitoring"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900, check=False)
    changed = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+: ok=\d+\s+changed=(\d+)", result.stdout, re.M)}
    return result, changed


def test_teardown_purges_what_the_monitoring_step_installed_and_changes_nothing_twice(nodes):
    assert nodes["master1"].package("prometheus").is_installed
    result, changed = teardown()
    assert result.returncode == 0, result.stdout[-3000:]
    assert all(changed[name] > 0 for name in NAMES), changed
    for name, node in nodes.items():
        for package in ("prometheus-node-exporter", "prometheus", "prometheus-alertmanager"):
            assert not node.package(package).is_installed, (name, package)
        for path in ("/etc/default/prometheus-node-exporter", "/etc/prometheus", "/usr/local/bin/npu-exporter",
                     "/etc/systemd/system/llm-cluster-npu-exporter.service", "/var/lib/llm_cluster/monitoring.json",
                     "/etc/systemd/system/llm-cluster-ray-members.timer", "/etc/systemd/system/llm-cluster-ray-members.service",
                     "/opt/llm_cluster/monitoring", "/etc/llm_cluster/ray_members.json", "/var/lib/llm_cluster/node-exporter"):
            assert not node.file(path).exists, (name, path)
        listening = node.check_output("ss -Htln")
        for port in (9100, 8082, 9090, 9093):
            assert ":%d " % port not in listening, (name, port)
    result, changed = teardown()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed == {"master1": 0, "worker1": 0, "worker2": 0}, changed
