# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _nvidia_smi as nvidia_smi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")
FIELDS = ["index", "name", "pci.bus_id", "memory.total", "driver_version"]


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# ---------------------------------------------------------------------------
# --query-gpu
# ---------------------------------------------------------------------------

def test_query_csv_with_header_and_units():
    rows = nvidia_smi.parse_query_csv(fixture("nvidia-smi-query-gpu.csv"))
    assert rows[0] == {
        "index": "0",
        "name": "NVIDIA L40S",
        "pci.bus_id": "00000000:03:00.0",
        "memory.total": "46068",
        "driver_version": "580.178.04",
    }
    assert rows[-1]["pci.bus_id"] == "00000000:E4:00.0"


def test_query_csv_header_is_skipped_when_fields_are_given():
    rows = nvidia_smi.parse_query_csv(fixture("nvidia-smi-query-gpu.csv"), FIELDS)
    assert rows[0]["index"] == "0"
    assert all(row["memory.total"] == "46068" for row in rows)


def test_query_csv_noheader_with_and_without_units():
    with_units = "0, NVIDIA L40S, 00000000:03:00.0, 46068 MiB, 580.178.04\n"
    nounits = "0, NVIDIA L40S, 00000000:03:00.0, 46068, 580.178.04\n"
    assert nvidia_smi.parse_query_csv(with_units, FIELDS) == nvidia_smi.parse_query_csv(nounits, FIELDS)
    assert nvidia_smi.parse_query_csv(nounits, FIELDS)[0]["memory.total"] == "46068"


def test_query_csv_percent_and_plain_values():
    line = "0, NVIDIA GeForce RTX 4080 SUPER, 16376 MiB, 1309 MiB, 0 %, 41\n"
    fields = ["index", "name", "memory.total", "memory.used", "utilization.gpu", "temperature.gpu"]
    assert nvidia_smi.parse_query_csv(line, fields) == [{
        "index": "0",
        "name": "NVIDIA GeForce RTX 4080 SUPER",
        "memory.total": "16376",
        "memory.used": "1309",
        "utilization.gpu": "0",
        "temperature.gpu": "41",
    }]


def test_query_csv_single_field_with_header():
    assert nvidia_smi.parse_query_csv(fixture("nvidia-smi-query-gpu-driver-version.csv")) == [
        {"driver_version": "550.107.02"},
    ]


def test_query_csv_not_available_and_errors():
    text = "0, [N/A], [Not Supported], [Unknown Error]\n"
    rows = nvidia_smi.parse_query_csv(text, ["index", "power.draw", "uuid", "memory.total"])
    assert rows == [{"index": "0", "power.draw": None, "uuid": None, "memory.total": "[Unknown Error]"}]
    assert nvidia_smi.query_error(rows[0]["memory.total"]) == "Unknown Error"
    assert nvidia_smi.query_error("[N/A]") is None
    assert nvidia_smi.query_error("46068") is None
    assert nvidia_smi.query_error(None) is None


@pytest.mark.parametrize("text", [
    "No devices were found\n",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n",
])
def test_query_csv_failure_text(text):
    with pytest.raises(ValueError, match=r"nvidia-smi --query-gpu: expected 5 comma-separated values.*line 1"):
        nvidia_smi.parse_query_csv(text, FIELDS)


def test_query_csv_empty_and_headerless():
    with pytest.raises(ValueError, match="no GPU rows"):
        nvidia_smi.parse_query_csv("", FIELDS)
    with pytest.raises(ValueError, match="no header line and no field list"):
        nvidia_smi.parse_query_csv("0, NVIDIA L40S\n")
    with pytest.raises(ValueError, match="header has 2 fields, expected 5"):
        nvidia_smi.parse_query_csv("index, name\n0, NVIDIA L40S\n", FIELDS)


@pytest.mark.parametrize("bus_id, expected", [
    ("00000000:E3:00.0", "0000:e3:00.0"),
    ("0000:C1:00.0", "0000:c1:00.0"),
    (None, None),
])
def test_pci_address(bus_id, expected):
    assert nvidia_smi.pci_address(bus_id) == expected


def test_pci_address_garbage():
    with pytest.raises(ValueError, match="is not a PCI bus id"):
        nvidia_smi.pci_address("GPU-0")


# ---------------------------------------------------------------------------
# topo -m
# ---------------------------------------------------------------------------

def test_topo_tabs_with_gpu_numa_id_and_nics():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m.txt"))
    assert topo["labels"] == ["GPU%d" % n for n in range(8)] + ["NIC0", "NIC1"]
    assert topo["cpu_affinity"][0] == "0-55,112-167"
    assert topo["cpu_affinity"][7] == "56-111,168-223"
    assert topo["numa_affinity"] == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}
    assert topo["gpu_numa_id"] == {n: None for n in range(8)}
    assert topo["matrix"]["GPU6"]["NIC0"] == "PHB"
    assert topo["matrix"]["GPU0"]["GPU0"] == "X"
    assert topo["matrix"]["NIC1"]["NIC0"] == "PIX"


def test_topo_two_affinity_columns_and_legend():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-2xa100-legend.txt"))
    assert topo["labels"] == ["GPU0", "GPU1", "mlx5_0", "mlx5_1"]
    assert topo["cpu_affinity"] == {0: "0-63", 1: "64-127"}
    assert topo["numa_affinity"] == {0: 0, 1: 1}
    assert topo["gpu_numa_id"] == {0: None, 1: None}
    assert topo["matrix"]["mlx5_0"]["GPU0"] == "NODE"


def test_topo_numa_ids_need_not_be_consecutive():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-4xv100.txt"))
    assert topo["numa_affinity"] == {0: 0, 1: 0, 2: 8, 3: 8}
    assert topo["matrix"]["GPU0"]["GPU1"] == "NV3"


def test_topo_tabs_expanded_to_spaces():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-h100x8-nv18-spaces-excerpt.txt"))
    assert len(topo["labels"]) == 17
    assert topo["cpu_affinity"] == {
        0: "0-23,96-119", 1: "0-23,96-119", 2: "0-23,96-119", 3: "24-47,120-143", 4: "48-71,144-167",
    }
    assert topo["numa_affinity"] == {0: 0, 1: 0, 2: 0, 3: 1, 4: 2}
    assert topo["matrix"]["GPU3"]["NIC4"] == "PIX"


def test_topo_old_driver_cpu_affinity_only():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-8gpu-cpu-affinity-only-excerpt.txt"))
    assert topo["labels"][-1] == "mlx4_0"
    assert topo["cpu_affinity"] == {0: "0-9,20-29", 1: "0-9,20-29"}
    assert topo["numa_affinity"] == {0: None, 1: None}


def test_topo_nic_legend_and_na_numa():
    text = (
        "\tGPU0\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPIX\t0-23\tN/A\t\tN/A\n"
        "NIC0\tPIX\t X \t\t\t\n"
        "\n"
        "Legend:\n"
        "\n"
        "  X    = Self\n"
        "\n"
        "NIC Legend:\n"
        "\n"
        "  NIC0: mlx5_0\n"
    )
    topo = nvidia_smi.parse_topo_matrix(text)
    assert topo["nic_legend"] == {"NIC0": "mlx5_0"}
    assert topo["numa_affinity"] == {0: None}
    assert topo["cpu_affinity"] == {0: "0-23"}


def test_topo_errors():
    with pytest.raises(ValueError, match=r"nvidia-smi topo -m: expected a header with GPUn columns.*No devices"):
        nvidia_smi.parse_topo_matrix("No devices were found\n")
    header = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
    with pytest.raises(ValueError, match=r"is a cell missing\? \(line 2: "):
        nvidia_smi.parse_topo_matrix(header + "GPU0\t X \n")
    with pytest.raises(ValueError, match=r"6 fields, the header has 5; are two values run together.*line 2"):
        nvidia_smi.parse_topo_matrix(header + "GPU0\t X \tNV4\t0-7\t0\t1\n")
    with pytest.raises(ValueError, match="row label 'GPU9' is not a column"):
        nvidia_smi.parse_topo_matrix(header + "GPU9\t X \tNV4\t0-7\t0\n")
    with pytest.raises(ValueError, match="is not a cpulist"):
        nvidia_smi.parse_topo_matrix(header + "GPU0\t X \tNV4\tall\t0\n")
    with pytest.raises(ValueError, match="empty output"):
        nvidia_smi.parse_topo_matrix("")


# ---------------------------------------------------------------------------
# Captured on a live H200 (tests/device/capture_gpu.sh; tests/fixtures/vendor/README.md)
# ---------------------------------------------------------------------------

H200_FIELDS = ["index", "uuid", "name", "pci.bus_id", "memory.total", "memory.used", "temperature.gpu", "power.draw",
               "driver_version"]
H200_ROW = {"index": "0", "uuid": "GPU-19c6ba1e-8268-5372-c72c-1e32bb3910fd", "name": "NVIDIA H200",
            "pci.bus_id": "00000000:00:06.0", "memory.total": "143771", "memory.used": "0", "temperature.gpu": "43",
            "power.draw": "81.09", "driver_version": "580.159.04"}


def test_h200_query_as_the_collection_runs_it_and_with_its_header_and_units():
    """Driver 580.159.04: the collection's own query, bare, and the same with the header and unit tags."""
    bare = fixture("nvidia-smi-query-gpu-h200-ours-noheader-nounits-580.159.04.csv")
    assert nvidia_smi.parse_query_csv(bare, H200_FIELDS) == [H200_ROW]
    with_units = fixture("nvidia-smi-query-gpu-h200-ours-header-580.159.04.csv")
    assert with_units.splitlines()[0].split(", ")[4] == "memory.total [MiB]"
    assert nvidia_smi.parse_query_csv(with_units) == [H200_ROW]


def test_h200_topology_sent_to_a_file_keeps_the_escape_codes_and_an_empty_cell():
    """Driver 580.159.04 underlines the header with ESC[4m ... ESC[0m even into a file, and prints an empty cell
    between NUMA Affinity and GPU NUMA ID (N/A) in a one-GPU virtual machine."""
    text = fixture("nvidia-smi-topo-m-h200-1gpu-vm-580.159.04.txt")
    assert text.startswith("\t\x1b[4mGPU0\t") and "\t0\t\tN/A\n" in text
    topo = nvidia_smi.parse_topo_matrix(text)
    assert topo["labels"] == ["GPU0"]
    assert topo["columns"] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo["cpu_affinity"] == {0: "0-15"} and topo["numa_affinity"] == {0: 0} and topo["numa_nodes"] == {0: [0]}
    assert topo["gpu_numa_id"] == {0: None}
    assert topo["matrix"] == {"GPU0": {"GPU0": "X"}}
