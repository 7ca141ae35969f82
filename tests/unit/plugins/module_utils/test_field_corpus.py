# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Every capture of the field corpus (tests/fixtures/vendor/README.md) against the facts in its table."""

from __future__ import annotations

import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi as npu_smi
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _nvidia_smi as nvidia_smi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8", newline="") as handle:
        return handle.read()


def chips(info):
    return [(d["npu_id"], d["chip_id"]) for d in info["devices"]]


# ---------------------------------------------------------------------------
# npu-smi info: (file, driver, [(npu, chip)], bus ids, health, memory kind, [(used, total)], power)
# ---------------------------------------------------------------------------

A2_8_BUS = ["0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
            "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0"]

# Atlas 800 A3: chip pairs 9D/9F, 99/9B, 95/97, 91/93, 8D/8F, 89/8B, 85/87, 81/83.
A3_16_BUS = ["0000:%02X:00.0" % (base + 2 * chip) for base in range(0x9D, 0x80, -4) for chip in (0, 1)]

NPU_INFO = [
    ("npu-smi-info-300iduo-25.2.0-excerpt.txt", "25.2.0", [(2, 0), (2, 1)], ["0000:01:00.0"] * 2,
     "ddr", [(1529, 44280), (1412, 43693)], [None, None]),
    ("npu-smi-info-300iduo-25.5.0-hugepages-excerpt.txt", "25.5.0", [(0, 0)], ["0000:01:00.0"],
     "ddr", [(37623, 44278)], [None]),
    ("npu-smi-info-300iduo-25.0.rc1.b033-excerpt.txt", "25.0.rc1.b033", [(1, 0), (1, 1)], ["0000:01:00.0"] * 2,
     "ddr", [(1607, 47304), (1379, 46717)], [None, None]),
    ("npu-smi-info-910b4-26.0.rc1.txt", "26.0.rc1", [(0, 0)], ["0000:C1:00.0"],
     "hbm", [(2871, 32768)], [82.6]),
    ("npu-smi-info-910b3x8-26.1.0-procs.txt", "26.1.0", [(n, 0) for n in range(8)], A2_8_BUS,
     "hbm", [(8676, 65536), (3403, 65536), (3403, 65536), (3407, 65536), (3403, 65536), (3402, 65536),
             (3402, 65536), (3403, 65536)], [100.0, 94.8, 90.0, 96.5, 96.5, 97.4, 97.8, 93.3]),
    ("npu-smi-info-a3-26.0.rc2-excerpt.txt", "26.0.rc2", [(0, 0), (0, 1)], ["0000:9D:00.0", "0000:9F:00.0"],
     "hbm", [(3419, 65536), (2874, 65536)], [162.6, None]),
    ("npu-smi-info-a3-24.1.rc3.7-excerpt.txt", "24.1.rc3.7", [(0, 0), (0, 1)], ["0000:9D:00.0", "0000:9F:00.0"],
     "hbm", [(3397, 65536), (3186, 65536)], [178.8, None]),
    ("npu-smi-info-a3-25.3.rc1-excerpt.txt", "25.3.rc1", [(0, 0), (0, 1)], ["0000:9D:00.0", "0000:9F:00.0"],
     "hbm", [(3180, 65536), (2896, 65536)], [163.6, None]),
    ("npu-smi-info-910prob-24.1.0-excerpt.txt", "24.1.0", [(0, 0), (1, 0)], ["0000:C1:00.0", "0000:81:00.0"],
     "hbm", [(18, 32768), (8, 32768)], [78.0, 75.8]),
    ("npu-smi-info-910b2-24.1.0.3-excerpt.txt", "24.1.0.3", [(0, 0), (1, 0)], ["0000:C1:00.0", "0000:C2:00.0"],
     "hbm", [(3397, 65536), (3395, 65536)], [96.4, 88.7]),
    ("npu-smi-info-910b4-24.1.1-excerpt.txt", "24.1.1", [(0, 0), (1, 0)], ["0000:C1:00.0", "0000:C2:00.0"],
     "hbm", [(26838, 32768), (29356, 32768)], [88.2, 87.0]),
    ("npu-smi-info-910b3-no-version-excerpt.txt", None, [(0, 0), (1, 0), (2, 0)],
     ["0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0"], "hbm", [(3379, 65536), (3385, 65536), (3380, 65536)],
     [97.5, 93.9, 88.8]),
    ("npu-smi-info-910b2-23.0.3-sparse-id.txt", "23.0.3", [(2, 0)], ["0000:C2:00.0"],
     "hbm", [(3335, 65536)], [97.3]),
    ("npu-smi-info-910b2x8-23.0.3.txt", "23.0.3", [(n, 0) for n in range(8)],
     ["0000:C1:00.0", "0000:01:00.0", "0000:C2:00.0", "0000:02:00.0",
      "0000:81:00.0", "0000:41:00.0", "0000:82:00.0", "0000:42:00.0"],
     "hbm", [(4495, 65536), (3333, 65536), (3332, 65536), (3331, 65536), (3334, 65536), (3333, 65536),
             (3332, 65536), (3332, 65536)], [94.8, 99.7, 97.1, 94.4, 96.8, 93.6, 94.0, 96.9]),
    ("npu-smi-info-a3x16-24.1.rc3.7.txt", "24.1.rc3.7", [(n // 2, n % 2) for n in range(16)], A3_16_BUS,
     "hbm", [(3416, 65536), (3189, 65536), (3413, 65536), (3185, 65536), (3412, 65536), (3186, 65536),
             (3412, 65536), (3185, 65536), (3402, 65536), (3198, 65536), (3399, 65536), (3201, 65536),
             (3400, 65536), (3200, 65536), (3413, 65536), (3188, 65536)],
     [178.5, None, 188.2, None, 176.6, None, 178.5, None, 180.9, None, 188.7, None, 183.0, None, 186.4, None]),
    ("npu-smi-info-310p3-npu32896-25.5.2-bus-anonymized.txt", "25.5.2", [(32896, 0)], ["0000:00:00.0"],
     "ddr", [(1904, 44213)], [None]),
]


@pytest.mark.parametrize("name, driver, ids, buses, kind, memory, power", NPU_INFO, ids=[row[0] for row in NPU_INFO])
def test_npu_smi_info_corpus(name, driver, ids, buses, kind, memory, power):
    info = npu_smi.parse_info(fixture(name))
    assert info["driver_version"] == driver
    assert chips(info) == ids
    assert [d["bus_id"] for d in info["devices"]] == buses
    assert [d["health"] for d in info["devices"]] == ["OK"] * len(ids)
    assert [d["power_w"] for d in info["devices"]] == power
    if kind == "ddr":
        assert [(d["memory_used_mb"], d["memory_total_mb"]) for d in info["devices"]] == memory
        assert all(d["hbm_total_mb"] is None for d in info["devices"])
    else:
        assert [(d["hbm_used_mb"], d["hbm_total_mb"]) for d in info["devices"]] == memory


def test_300iduo_chips_carry_device_column_and_hugepages():
    info = npu_smi.parse_info(fixture("npu-smi-info-300iduo-25.2.0-excerpt.txt"))
    assert [d["device_id"] for d in info["devices"]] == [0, 1]
    assert [d["name"] for d in info["devices"]] == ["310P3", "310P3"]
    assert [d["temp_c"] for d in info["devices"]] == [45, 43]
    hp = npu_smi.parse_info(fixture("npu-smi-info-300iduo-25.5.0-hugepages-excerpt.txt"))["devices"][0]
    assert (hp["hugepages_used"], hp["hugepages_total"]) == (18047, 18047)


def test_a3_chips_carry_phy_ids():
    info = npu_smi.parse_info(fixture("npu-smi-info-a3-26.0.rc2-excerpt.txt"))
    assert [d["phy_id"] for d in info["devices"]] == [0, 1]
    assert [d["name"] for d in info["devices"]] == ["Ascend910", "Ascend910"]


def test_910prob_keeps_ddr_beside_hbm():
    info = npu_smi.parse_info(fixture("npu-smi-info-910prob-24.1.0-excerpt.txt"))
    assert [(d["memory_used_mb"], d["memory_total_mb"]) for d in info["devices"]] == [(2387, 13553), (1840, 15665)]


def test_driver_26_process_table_with_container_column():
    info = npu_smi.parse_info(fixture("npu-smi-info-910b3x8-26.1.0-procs.txt"))
    assert info["processes"] == [{"npu_id": 0, "chip_id": 0, "pid": 485946, "name": "pytest", "memory_mb": 5175,
                                  "container_pid": None, "extra": {}}]
    assert npu_smi.parse_info(fixture("npu-smi-info-910b4-26.0.rc1.txt"))["processes"] == []


def test_a3_full_table_has_16_logical_devices_on_8_npus():
    info = npu_smi.parse_info(fixture("npu-smi-info-a3x16-24.1.rc3.7.txt"))
    assert [d["phy_id"] for d in info["devices"]] == list(range(16))
    assert sorted(set(d["npu_id"] for d in info["devices"])) == list(range(8))
    assert set(d["name"] for d in info["devices"]) == set(["Ascend910"])
    assert [d["temp_c"] for d in info["devices"][:4]] == [36, 36, 36, 35]
    assert info["processes"] == []


def test_310p3_with_card_id_32896_and_its_mapping():
    info = npu_smi.parse_info(fixture("npu-smi-info-310p3-npu32896-25.5.2-bus-anonymized.txt"))
    chip = info["devices"][0]
    assert (chip["npu_id"], chip["chip_id"], chip["device_id"], chip["name"]) == (32896, 0, 0, "310P3")
    assert (chip["temp_c"], chip["aicore_pct"], chip["hbm_used_mb"]) == (54, 0, None)
    assert info["processes"] == []
    mapping = npu_smi.parse_info_m(fixture("npu-smi-info-m-310p3-npu32896.txt"))
    assert [(m["npu_id"], m["chip_id"], m["chip_logic_id"], m["chip_name"]) for m in mapping] == [
        (32896, 0, 0, "Ascend 310P3"), (32896, 1, None, "Mcu")]


def test_driver_23_tables_have_no_processes():
    for name in ("npu-smi-info-910b2x8-23.0.3.txt", "npu-smi-info-910b2-23.0.3-sparse-id.txt"):
        assert npu_smi.parse_info(fixture(name))["processes"] == []


# ---------------------------------------------------------------------------
# nvidia-smi topo -m
# ---------------------------------------------------------------------------

TOPO = [
    # file, GPU columns, matrix columns, cpu affinity by GPU, NUMA node by GPU, one matrix cell
    ("nvidia-smi-topo-m-rtx4090x8-tabs.txt", 8, 10,
     dict([(n, "0-55,112-167") for n in range(4)] + [(n, "56-111,168-223") for n in range(4, 8)]),
     {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}, ("GPU6", "NIC1", "PHB")),
    ("nvidia-smi-topo-m-rtx5090x2-legend.txt", 2, 2, {0: "0-63", 1: "0-63"}, {0: 0, 1: 0}, ("GPU0", "GPU1", "PHB")),
    ("nvidia-smi-topo-m-a100x2-slurm-spaces-excerpt.txt", 2, 12, {0: "48-63,176-191", 1: "48-63,176-191"},
     {0: 3, 1: 3}, ("NIC2", "NIC3", "PXB")),
    ("nvidia-smi-topo-m-h100x8-nv18-3numa-spaces-excerpt.txt", 8, 17,
     {0: "0-23,96-119", 1: "0-23,96-119", 2: "0-23,96-119", 3: "24-47,120-143", 4: "48-71,144-167",
      5: "48-71,144-167"}, {0: 0, 1: 0, 2: 0, 3: 1, 4: 2, 5: 2}, ("GPU3", "NIC4", "PIX")),
    ("nvidia-smi-topo-m-a100x8-nv12-18nic-spaces-excerpt.txt", 8, 26,
     {0: "48-63,176-191", 1: "48-63,176-191", 2: "16-31,144-159", 3: "16-31,144-159"},
     {0: 3, 1: 3, 2: 1, 3: 1}, ("GPU0", "NIC13", "SYS")),
    ("nvidia-smi-topo-m-pcie8-sys-spaces-excerpt.txt", 8, 18,
     dict([(n, "0-55,112-167") for n in range(4)] + [(4, "56-111,168-223"), (5, "56-111,168-223")]),
     {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1}, ("GPU5", "NIC5", "PIX")),
    ("nvidia-smi-topo-m-h100x8-18nic-spaces-excerpt.txt", 8, 26, dict((n, "0-55,112-167") for n in range(4)),
     {0: 0, 1: 0, 2: 0, 3: 0}, ("GPU2", "NIC8", "PXB")),
    ("nvidia-smi-topo-mp-gpu1-nic10-empty-cells-excerpt.txt", 1, 11, {0: "0,2,4,6,8,10"}, {0: 0},
     ("NIC9", "NIC9", "X")),
    ("nvidia-smi-topo-m-4gpu-2numa-legend.txt", 4, 4, {0: "0-63", 1: "0-63", 2: "64-127", 3: "64-127"},
     {0: 0, 1: 0, 2: 1, 3: 1}, ("GPU2", "GPU3", "PHB")),
    ("nvidia-smi-topo-m-1gpu-kvm.txt", 1, 1, {0: "0-7"}, {0: 0}, ("GPU0", "GPU0", "X")),
    ("nvidia-smi-topo-m-4gpu-nv12-4numa.txt", 4, 4, {0: "0-23", 1: "24-47", 2: "48-71", 3: "72-95"},
     {0: 0, 1: 1, 2: 2, 3: 3}, ("GPU1", "GPU0", "NV12")),
    ("nvidia-smi-topo-m-2gpu-pix-lost-leading-tab-excerpt.txt", 2, 2, {0: "0-47", 1: "0-47"}, {0: 0, 1: 0},
     ("GPU1", "GPU0", "PIX")),
    ("nvidia-smi-topo-m-h100x8-dgx-12nic-tabs-excerpt.txt", 8, 20,
     dict([(n, "0-55,112-167") for n in range(4)] + [(n, "56-111,168-223") for n in range(4, 8)]),
     {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}, ("GPU7", "NIC11", "PXB")),
    ("nvidia-smi-topo-m-h100x8-9nic-sgr-header.txt", 8, 17,
     dict([(n, "0-63,128-191") for n in range(4)] + [(n, "64-127,192-255") for n in range(4, 8)]),
     {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}, ("GPU5", "NIC5", "PXB")),
]


@pytest.mark.parametrize("name, gpus, columns, cpus, numa, cell", TOPO, ids=[row[0] for row in TOPO])
def test_topo_corpus(name, gpus, columns, cpus, numa, cell):
    topo = nvidia_smi.parse_topo_matrix(fixture(name))
    assert len([label for label in topo["labels"] if label.startswith("GPU")]) == gpus
    assert len(topo["labels"]) == columns
    assert topo["cpu_affinity"] == cpus
    assert topo["numa_affinity"] == numa
    assert topo["gpu_numa_id"] == dict((n, None) for n in numa)
    row, column, value = cell
    assert topo["matrix"][row][column] == value


def test_topo_nic_rows_keep_their_empty_cells_empty():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-mp-gpu1-nic10-empty-cells-excerpt.txt"))
    assert sorted(topo["cpu_affinity"]) == [0]
    assert topo["matrix"]["NIC0"]["GPU0"] == "NODE"
    assert topo["matrix"]["NIC1"]["NIC2"] == "PIX"


def test_topo_dgx_nic_rows_with_four_empty_cells_stay_out_of_the_affinity():
    topo = nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-h100x8-dgx-12nic-tabs-excerpt.txt"))
    assert sorted(topo["cpu_affinity"]) == list(range(8))
    assert sorted(topo["matrix"]) == ["GPU%d" % n for n in range(8)] + ["NIC%d" % n for n in range(6)]
    assert topo["matrix"]["NIC1"]["NIC2"] == "PIX"
    assert topo["matrix"]["NIC3"]["GPU1"] == "PXB"
    assert topo["numa_nodes"][7] == [1]


def test_topo_header_underlined_with_sgr_codes():
    text = fixture("nvidia-smi-topo-m-h100x8-9nic-sgr-header.txt")
    header = text.splitlines()[0]
    assert header.startswith("\t[4mGPU0") and header.endswith("GPU NUMA ID[0m")
    topo = nvidia_smi.parse_topo_matrix(text)
    assert topo["columns"] == ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
    assert topo["labels"][0] == "GPU0" and topo["labels"][-1] == "NIC8"
    assert topo["nic_legend"]["NIC8"] == "mlx5_bond_0"
    assert topo["matrix"]["NIC8"]["NIC8"] == "X"
    # The same capture with the ESC bytes the terminal copy lost reads the same.
    with_esc = text.replace("[4m", "\x1b[4m", 1).replace("[0m", "\x1b[0m", 1)
    assert nvidia_smi.parse_topo_matrix(with_esc) == topo


def test_topo_run_together_fields_are_reported_with_their_line():
    with pytest.raises(ValueError) as error:
        nvidia_smi.parse_topo_matrix(fixture("nvidia-smi-topo-m-h100x8-dgx-run-together-excerpt.txt"))
    assert "'NIC8NIC9'" in str(error.value)
    assert "(line 1:" in str(error.value)


def test_topo_run_together_row_is_reported_by_line_number():
    text = fixture("nvidia-smi-topo-m-h100x8-dgx-run-together-excerpt.txt")
    header = text.splitlines(True)[0].replace("NIC8NIC9", "NIC8\tNIC9")
    with pytest.raises(ValueError, match=r"'NODENODE' is not a link type.*\(line 6: 'GPU4"):
        nvidia_smi.parse_topo_matrix(header + "".join(text.splitlines(True)[1:]))


# ---------------------------------------------------------------------------
# nvidia-smi --query-gpu
# ---------------------------------------------------------------------------

A100_LOG_FIELDS = ["timestamp", "name", "pci.bus_id", "driver_version", "pstate", "pcie.link.gen.max",
                   "pcie.link.gen.current", "temperature.gpu", "utilization.gpu", "utilization.memory",
                   "memory.total", "memory.free", "memory.used"]


def test_query_gpu_h100_with_header_and_unit():
    rows = nvidia_smi.parse_query_csv(fixture("nvidia-smi-query-gpu-h100-hbm3-1gpu.csv"))
    assert rows == [{"index": "0", "name": "NVIDIA H100 80GB HBM3", "memory.total": "81559"}]


def test_query_gpu_h100_bus_ids_map_to_sysfs():
    rows = nvidia_smi.parse_query_csv(fixture("nvidia-smi-query-gpu-h100x8-vbios-excerpt.csv"))
    assert [nvidia_smi.pci_address(row["pci.bus_id"]) for row in rows] == ["0000:04:00.0", "0000:8b:00.0"]
    assert set(row["vbios_version"] for row in rows) == set(["96.00.89.00.01"])


def test_query_gpu_a100_noheader_log_needs_the_field_list():
    text = fixture("nvidia-smi-query-gpu-a100-40gb-noheader-log.csv")
    with pytest.raises(ValueError, match=r"no header line and no field list \(line 1: '2024/06/01 11:27:05.177"):
        nvidia_smi.parse_query_csv(text)
    rows = nvidia_smi.parse_query_csv(text, A100_LOG_FIELDS)
    assert len(rows) == 8
    buses = sorted(set(row["pci.bus_id"] for row in rows))
    assert buses == ["00000000:0B:00.0", "00000000:3B:00.0", "00000000:8B:00.0"]
    assert set(row["name"] for row in rows) == set(["NVIDIA A100-SXM4-40GB"])
    assert set(row["memory.total"] for row in rows) == set(["40960"])
    assert [(row["memory.used"], row["utilization.gpu"]) for row in rows[-2:]] == [("39671", "3"), ("39427", "1")]
    assert rows[0]["driver_version"] == "545.23.08"


# ---------------------------------------------------------------------------
# hccn_tool
# ---------------------------------------------------------------------------

def test_hccn_conf_with_eight_devices():
    conf = hccn.parse_conf(fixture("hccn-conf-8dev-paddle-doc.conf"))
    assert sorted(conf) == list(range(8))
    assert [conf[n]["address"] for n in range(8)] == [
        "192.168.10.21", "192.168.20.21", "192.168.30.21", "192.168.40.21",
        "192.168.10.22", "192.168.20.22", "192.168.30.22", "192.168.40.22"]
    assert set(conf[n]["netmask"] for n in range(8)) == set(["255.255.255.0"])


def test_ping_partial_loss_is_33_percent():
    ping = hccn.parse_ping(fixture("hccn-ping-g-partial-loss-doc.txt"))
    assert (ping["transmitted"], ping["received"]) == (3, 2)
    assert ping["loss_pct"] == pytest.approx(33.33)
    assert ping["timeouts"] == 1
    assert ping["rtt_ms"] == [0.097, 0.066]


def test_ping_success_doc_with_typo_counts_the_summary():
    ping = hccn.parse_ping(fixture("hccn-ping-g-success-doc.txt"))
    assert (ping["device"], ping["address"]) == (0, "10.10.100.10")
    assert (ping["transmitted"], ping["received"], ping["loss_pct"]) == (3, 3, 0.0)
    assert ping["reachable"] is True


def test_ip_link_health_and_tls_captures():
    assert hccn.parse_ip(fixture("hccn-ip-g-10.86.1.80.txt")) == {"address": "10.86.1.80", "netmask": "255.255.255.0"}
    assert hccn.parse_link(fixture("hccn-link-g-up.txt")) == "UP"
    assert hccn.parse_net_health(fixture("hccn-net-health-g-success.txt")) == "Success"
    assert hccn.parse_net_health(fixture("hccn-net-health-g-fault.txt")) == "Fault"
    assert hccn.parse_tls(fixture("hccn-tls-g-no-preconfigured-excerpt.txt"))["switch"] == 0
    mixed = fixture("hccn-tls-g-grep-switch-mixed.txt").splitlines(True)
    assert [hccn.parse_tls(line)["switch"] for line in mixed] == [0, 1]
