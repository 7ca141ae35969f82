# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake dcgm-exporter (tests/fakes/bin/dcgm_exporter.py), run as a process on a fake GPU node: its HELP/TYPE
lines are a real GPU Operator capture's, its label set a real host capture's, the monitoring role's GPU rules find
every name they read on its page, and a fault set in the node's state shows at the next scrape."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ansible_collections.aihost.llm_cluster.plugins.plugin_utils import _monitoring
from conftest import FAKES, scrape

SAMPLE_LINE = re.compile(r'^(DCGM_[A-Z_]+)\{([^}]*)\} (-?[0-9.]+)$')
OPERATOR = "dcgm-exporter-metrics-rtx4000ada-580.95.05-gpu-operator-25.10.0.txt"
HOST = "dcgm-exporter-metrics-h100x8-580.105.08-grep-head30-excerpt.txt"


@pytest.fixture(name="exporter")
def fixture_exporter(make_node, profile, run_exporter):
    node = make_node("g1", profile("nvidia-8gpu"))
    # As the monitoring role runs it: -a <cluster address>:<port>.
    return node, run_exporter(node, "dcgm_exporter.py", lambda port: ["-a", "127.0.0.1:%d" % port])


def samples(text, family):
    rows = {}
    for line in text.splitlines():
        match = SAMPLE_LINE.match(line)
        if match and match.group(1) == family:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            rows[labels["gpu"]] = (labels, float(match.group(3)))
    return rows


def label_names(line):
    return re.findall(r'(\w+)="', SAMPLE_LINE.match(line).group(2))


def test_help_and_type_lines_are_the_exporter_s_own(exporter, vendor):
    dummy, url = exporter
    real = {line for line in vendor(OPERATOR).splitlines() if line.startswith("# ")}
    ours = [line for line in scrape(url).splitlines() if line.startswith("# ")]
    assert len(ours) == 14 and set(ours) <= real


def test_labels_are_a_host_capture_s_and_the_xid_carries_its_error(exporter, vendor):
    node, url = exporter
    page = scrape(url)
    # The EKS capture's GPUs 1-7 run no pod: their label set, in its order.
    host = [line for line in vendor(HOST).splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"")]
    temperature = samples(page, "DCGM_FI_DEV_GPU_TEMP")
    assert sorted(temperature, key=int) == [str(i) for i in range(8)]
    ours = [line for line in page.splitlines() if line.startswith('DCGM_FI_DEV_GPU_TEMP{gpu="0"')]
    assert label_names(ours[0]) == label_names(host[0])
    labels, value = temperature["0"]
    assert labels["device"] == "nvidia0" and labels["modelName"] == "NVIDIA H100 80GB HBM3" and value == 30
    assert labels["UUID"] == "GPU-8e1ed2ce-7a96-57b6-a770-6d0e30953d42" and labels["DCGM_FI_DRIVER_VERSION"] == "550.127.05"
    # The GPU Operator capture's XID sample: err_code and err_msg beside the others ("0", "No Error").
    real_xid = [line for line in vendor(OPERATOR).splitlines() if line.startswith("DCGM_FI_DEV_XID_ERRORS{")][0]
    xid_labels, xid = samples(page, "DCGM_FI_DEV_XID_ERRORS")["0"]
    assert {"err_code", "err_msg"} <= set(label_names(real_xid)) and xid == 0
    assert (xid_labels["err_code"], xid_labels["err_msg"]) == ("0", "No Error")


def test_the_gpu_rules_find_every_name_they_read(exporter):
    dummy, url = exporter
    required = _monitoring.required_metrics(_monitoring.recording_rules("vllm", "0.32.0", ["gpu"]))
    assert "DCGM_FI_DEV_XID_ERRORS" in required["gpu"]
    page = {"job": "gpu", "instance": "g1:9400", "text": scrape(url)}
    assert _monitoring.missing_metrics(required, [page]) == []


def test_a_fault_in_the_state_shows_at_the_next_scrape(exporter):
    node, url = exporter
    data = json.loads(node.state_path.read_text())
    data.update(xid={"3": 79}, uncorrectable_remapped_rows={"5": 2})
    node.write(data)
    page = scrape(url)
    labels, xid = samples(page, "DCGM_FI_DEV_XID_ERRORS")["3"]
    assert xid == 79 and labels["err_code"] == "79"
    assert samples(page, "DCGM_FI_DEV_XID_ERRORS")["4"][1] == 0
    assert samples(page, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS")["5"][1] == 2


def test_it_listens_where_it_is_told(make_node, profile):
    node = make_node("g1", profile("nvidia-8gpu"))
    result = subprocess.run([sys.executable, "-B", "-c", "import sys; sys.path.insert(0, %r); import dcgm_exporter as d; "
                             "print(d.address(['-a', '10.0.0.7:9400']), d.address(['--address=[fd00::7]:9500']), "
                             "d.address([]))" % str(FAKES / "bin")], env=node.env, capture_output=True, text=True,
                            timeout=30, check=True)
    assert result.stdout.strip() == "('10.0.0.7', 9400) ('fd00::7', 9500) ('0.0.0.0', 9400)"
