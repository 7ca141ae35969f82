# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fake npu-exporter (tests/fakes/bin/npu_exporter.py), run as a process on a fake node: its page has the
label set and value format of a real npu-exporter capture and the HELP/TYPE text of the exporter's own golden
output, and a fault set in the node's state shows at the next scrape."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from conftest import FAKES, scrape

SAMPLE_LINE = re.compile(r'^([a-z_:]+)\{([^}]*)\} (-?[0-9.]+) (\d{13})$')


@pytest.fixture(name="exporter")
def fixture_exporter(make_node, profile, run_exporter):
    node = make_node("n1", profile("atlas-800i-a2"))
    return node, run_exporter(node, "npu_exporter.py", lambda port: ["-ip=127.0.0.1", "-port", str(port), "-updateTime=5"])


def samples(text, family):
    rows = {}
    for line in text.splitlines():
        match = SAMPLE_LINE.match(line)
        if match and match.group(1) == family:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2)))
            rows[labels["id"]] = (labels, float(match.group(3)))
    return rows


def test_labels_and_values_have_the_shape_of_a_real_capture(exporter, vendor):
    dummy, url = exporter
    page = scrape(url)
    # The v5.0.0.5 capture on a host: id, model_name <chip>-Ascend-V1, pcie_bus_info, vdie_id with dashes,
    # and a millisecond timestamp on every sample.
    real = [SAMPLE_LINE.match(line) for line in vendor("npu-exporter-metrics-910b3x8-v5.0.0.5-excerpt.txt").splitlines()]
    real_labels = [re.findall(r'(\w+)="', m.group(2)) for m in real if m]
    health = samples(page, "npu_chip_info_health_status")
    assert sorted(health) == [str(i) for i in range(8)]
    labels, value = health["0"]
    assert list(labels) == real_labels[0] == ["id", "model_name", "pcie_bus_info", "vdie_id"]
    assert labels["model_name"] == "910B4-Ascend-V1" and labels["pcie_bus_info"] == "0000:C1:00.0"
    assert re.match(r"^[0-9A-F]{8}(-[0-9A-F]{8}){4}$", labels["vdie_id"])
    assert value == 1
    assert "machine_npu_nums 8\n" in page


def test_help_and_type_lines_are_the_exporter_s_own(exporter, vendor):
    dummy, url = exporter
    page = scrape(url)
    golden = {line for line in vendor("npu-exporter-metrics-testdata-mindcluster.txt").splitlines() if line.startswith("# ")}
    ours = [line for line in page.splitlines() if line.startswith("# ")]
    shared = [line for line in ours if line.split()[2] in {g.split()[2] for g in golden}]
    # Every family the golden output has too is announced with its exact HELP and TYPE text.
    assert len(shared) >= 20 and set(shared) <= golden


def test_a_fault_in_the_state_shows_at_the_next_scrape(exporter):
    node, url = exporter
    data = json.loads(node.state_path.read_text())
    data.update(health={"3": "Critical"}, link={"5": "DOWN"}, ecc_double_bit={"2": 4}, pfc_rx_per_second={"1": 2000})
    node.write(data)
    page = scrape(url)
    assert samples(page, "npu_chip_info_health_status")["3"][1] == 0
    assert samples(page, "npu_chip_info_health_status")["4"][1] == 1
    assert samples(page, "npu_chip_info_link_status")["5"][1] == 0
    assert samples(page, "npu_chip_info_network_status")["5"][1] == 0
    assert samples(page, "npu_chip_info_hbm_ecc_double_bit_error_cnt")["2"][1] == 4
    first = samples(page, "npu_chip_mac_rx_pfc_pkt_num")["1"][1]
    time.sleep(1.1)
    assert samples(scrape(url), "npu_chip_mac_rx_pfc_pkt_num")["1"][1] - first >= 2000


def test_without_ip_it_refuses_to_start_like_the_real_one(make_node, profile):
    node = make_node("n1", profile("atlas-800i-a2"))
    result = subprocess.run([sys.executable, "-B", str(FAKES / "bin" / "npu_exporter.py"), "-port=1"], env=node.env,
                            capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 1 and "-ip is required" in result.stderr
