# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os

import pytest

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi as npu_smi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# ---------------------------------------------------------------------------
# npu-smi info
# ---------------------------------------------------------------------------

def test_info_800i_a2_devices_and_versions():
    info = npu_smi.parse_info(fixture("npu-smi-info-800i-a2.txt"))
    assert info["npu_smi_version"] == "25.0.rc1.1"
    assert info["driver_version"] == "25.0.rc1.1"
    assert info["processes"] == []
    devices = info["devices"]
    assert [d["npu_id"] for d in devices] == list(range(8))
    assert [d["bus_id"] for d in devices] == [
        "0000:C1:00.0", "0000:C2:00.0", "0000:81:00.0", "0000:82:00.0",
        "0000:01:00.0", "0000:02:00.0", "0000:41:00.0", "0000:42:00.0",
    ]
    assert devices[0] == {
        "npu_id": 0,
        "name": "910B4",
        "health": "OK",
        "power_w": 87.2,
        "temp_c": 33,
        "hugepages_used": 0,
        "hugepages_total": 0,
        "chip_id": 0,
        "phy_id": None,
        "bus_id": "0000:C1:00.0",
        "aicore_pct": 0,
        "memory_used_mb": 0,
        "memory_total_mb": 0,
        "hbm_used_mb": 2654,
        "hbm_total_mb": 32768,
        "device_id": None,
        "extra": {},
    }
    assert devices[7]["hbm_used_mb"] == 2653
    assert devices[3]["power_w"] == 89.1


def test_info_with_vllm_processes():
    info = npu_smi.parse_info(fixture("npu-smi-info-910b4-1-procs.txt"))
    assert info["driver_version"] == "25.2.2"
    assert [d["name"] for d in info["devices"]] == ["910B4-1", "910B4-1"]
    # "61825/ 65536": a 5-digit used value has no space before the slash.
    assert info["devices"][0]["hbm_used_mb"] == 61825
    assert info["devices"][0]["hbm_total_mb"] == 65536
    assert info["processes"] == [
        {"npu_id": 0, "chip_id": 0, "pid": 19334, "name": "VLLMWorker_TP", "memory_mb": 58472,
         "container_pid": None, "extra": {}},
        {"npu_id": 1, "chip_id": 0, "pid": 19341, "name": "VLLMWorker_TP", "memory_mb": 58472,
         "container_pid": None, "extra": {}},
    ]


def test_info_excerpt_without_header_and_blank_process_names():
    info = npu_smi.parse_info(fixture("npu-smi-info-910b4x8-24.1.rc3-procs-excerpt.txt"))
    assert info["npu_smi_version"] is None
    assert info["driver_version"] is None
    assert [(d["npu_id"], d["bus_id"], d["aicore_pct"]) for d in info["devices"]] == [
        (6, "0000:82:00.0", 82),
        (7, "0000:42:00.0", 68),
    ]
    assert info["devices"][0]["hbm_used_mb"] == 30759
    assert [(p["npu_id"], p["pid"], p["name"], p["memory_mb"]) for p in info["processes"]] == [
        (0, 582939, None, 19502),
        (1, 695171, None, 19498),
        (6, 99910, None, 27977),
        (7, 99976, None, 27977),
    ]


def test_info_a3_two_chips_per_npu():
    info = npu_smi.parse_info(fixture("npu-smi-info-a3-ascend910-24.1.rc3.3-excerpt.txt"))
    assert info["driver_version"] == "24.1.rc3.3"
    assert [(d["npu_id"], d["chip_id"], d["phy_id"]) for d in info["devices"]] == [
        (0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3),
    ]
    assert info["devices"][0]["power_w"] == 182.0
    assert info["devices"][1]["power_w"] is None
    assert info["devices"][3]["bus_id"] == "0000:9B:00.0"
    assert [(p["npu_id"], p["chip_id"], p["name"]) for p in info["processes"]] == [
        (4, 0, "pt_main_thread"), (4, 1, "pt_main_thread"),
    ]


def test_info_910a_old_layout_warning_and_ddr():
    info = npu_smi.parse_info(fixture("npu-smi-info-910a-23.0.rc1.b070-excerpt.txt"))
    assert info["driver_version"] == "23.0.rc1.b070"
    device = info["devices"][0]
    assert device["health"] == "Warning"
    assert (device["memory_used_mb"], device["memory_total_mb"]) == (938, 15137)
    assert (device["hbm_used_mb"], device["hbm_total_mb"]) == (3, 32768)


def test_info_910b3_excerpt_build_version():
    info = npu_smi.parse_info(fixture("npu-smi-info-910b3x8-24.1.rc1.b030-excerpt.txt"))
    assert info["driver_version"] == "24.1.rc1.b030"
    assert [d["npu_id"] for d in info["devices"]] == [0, 1, 7]
    assert info["devices"][0]["hbm_total_mb"] == 65536


def test_info_process_memory_in_bytes_is_converted():
    text = "\n".join([
        "+----------------------+---------------+----------------------------------------------------+",
        "| NPU     Chip         | Process id    | Process name             | Process memory(B)       |",
        "+======================+===============+====================================================+",
        "| 0       0            | 4242          | python3                  | 5242880                 |",
        "+======================+===============+====================================================+",
    ])
    info = npu_smi.parse_info(text)
    assert info["processes"] == [
        {"npu_id": 0, "chip_id": 0, "pid": 4242, "name": "python3", "memory_mb": 5, "container_pid": None, "extra": {}}]


def test_info_dcmi_error_names_the_line():
    with pytest.raises(ValueError, match=r"npu-smi info: unexpected line .*line 1: 'DrvMngGetConsoleLogLevel"):
        npu_smi.parse_info(fixture("npu-smi-dcmi-init-failed.txt"))


def test_info_missing_chip_row():
    lines = fixture("npu-smi-info-800i-a2.txt").splitlines()
    broken = "\n".join(line for line in lines if "0000:42:00.0" not in line)
    with pytest.raises(ValueError, match="device row without its chip row"):
        npu_smi.parse_info(broken)


def test_info_truncated_row():
    text = fixture("npu-smi-info-800i-a2.txt").replace(
        "| 0                         | 0000:C1:00.0  | 0           0    / 0          2654 / 32768         |",
        "| 0                         | 0000:C1:00.0  | 0           0    / 0",
    )
    with pytest.raises(ValueError, match=r"truncated table row \(line 8"):
        npu_smi.parse_info(text)


def test_info_bad_number():
    text = fixture("npu-smi-info-800i-a2.txt").replace("87.2        33", "87.2        hot", 1)
    with pytest.raises(ValueError, match="expected a number, got 'hot'"):
        npu_smi.parse_info(text)


@pytest.mark.parametrize("text", ["", "\n\n"])
def test_info_empty(text):
    with pytest.raises(ValueError, match="npu-smi info: no device table"):
        npu_smi.parse_info(text)


# ---------------------------------------------------------------------------
# Key/value outputs
# ---------------------------------------------------------------------------

def test_info_l_tab_indented():
    result = npu_smi.parse_info_l(fixture("npu-smi-info-l.txt"))
    assert result["total_count"] == 8
    assert result["npus"] == [{"npu_id": n, "chip_count": 1} for n in range(8)]


def test_info_l_with_product_and_serial():
    result = npu_smi.parse_info_l(fixture("npu-smi-info-l-product-serial.txt"))
    assert result == {
        "total_count": 1,
        "npus": [{"npu_id": 8, "product_name": "IT21PDDA01", "serial_number": "033VNY10MB000071", "chip_count": 1}],
    }


def test_info_l_garbage():
    with pytest.raises(ValueError, match=r"npu-smi info -l: expected 'Key : value' \(line 1"):
        npu_smi.parse_info_l("Command or option is not found.\n")
    with pytest.raises(ValueError, match="expected an integer"):
        npu_smi.parse_info_l("\tTotal Count                    : eight\n")


def test_board_910b_firmware():
    board = npu_smi.parse_board(fixture("npu-smi-info-t-board-910b.txt"))
    assert board["firmware_version"] == "7.8.0.6.201"
    assert board["software_version"] == "25.5.1"
    assert board["pcie_bus_info"] == "0000:C1:00.0"
    assert board["pci_device_id"] == "0xD802"
    assert board["chip_count"] == "1"


def test_board_910a_and_chip_level():
    assert npu_smi.parse_board(fixture("npu-smi-info-t-board-910a.txt"))["firmware_version"] == "7.1.0.7.220"
    chip = npu_smi.parse_board(fixture("npu-smi-info-t-board-chip-910a.txt"))
    assert chip["chip_name"] == "910A"
    assert chip["vdie_id"] == "42C711D4 20B03704 4A10C8D4 14CC040A D2102003"
    assert chip["firmware_version"] == "7.1.0.7.220"


def test_board_unsupported_message():
    with pytest.raises(ValueError, match=r"npu-smi info -t board: expected 'Key : value'.*This device does not support"):
        npu_smi.parse_board("This device does not support querying board.\n")


def test_health_chip_and_device_forms():
    assert npu_smi.parse_health(fixture("npu-smi-info-t-health-chip.txt")) == "OK"
    assert npu_smi.parse_health(fixture("npu-smi-info-t-health-device.txt")) == "OK"
    assert npu_smi.parse_health("\tHealth Status                  : ok\n") == "OK"
    assert npu_smi.parse_health("\tHealth Status                  : Alarm\n\tError Code : 80E01801\n") == "Alarm"


def test_health_missing_field():
    with pytest.raises(ValueError, match="no 'Health Status' or 'Health' field"):
        npu_smi.parse_health("\tError Code                     : NA\n")


def test_key_value_blocks_keep_repeated_keys():
    # npu-smi info -t common -i 1 (910B1, 23.0.rc2), rendered with 8 spaces.
    text = (
        "        NPU ID                         : 1\n"
        "        Chip Count                     : 1\n"
        "\n"
        "        Chip ID                        : 0\n"
        "        Aicore Usage Rate(%)           : 0\n"
        "        Temperature(C)                 : 46\n"
        "        NPU Real-time Power(W)         : 93.4\n"
        "\n"
        "        Chip Name                      : mcu\n"
        "        Temperature(C)                 : 38\n"
    )
    blocks = npu_smi.parse_key_value_blocks(text)
    assert len(blocks) == 3
    assert blocks[2] == [("Chip Name", "mcu"), ("Temperature(C)", "38")]
    flat = npu_smi.parse_key_value(text)
    assert flat["temperature_c"] == "46"
    assert flat["aicore_usage_rate_pct"] == "0"
    assert flat["npu_real_time_power_w"] == "93.4"


@pytest.mark.parametrize("key, expected", [
    ("Firmware Version", "firmware_version"),
    ("PCIe Bus Info", "pcie_bus_info"),
    ("HBM Capacity(MB)", "hbm_capacity_mb"),
    ("Aicore Usage Rate(%)", "aicore_usage_rate_pct"),
    ("Health Status", "health_status"),
])
def test_normalize_key(key, expected):
    assert npu_smi.normalize_key(key) == expected


# ---------------------------------------------------------------------------
# npu-smi info -m
# ---------------------------------------------------------------------------

def test_info_m_910b4_with_mcu_rows():
    rows = npu_smi.parse_info_m(fixture("npu-smi-info-m-910b4.txt"))
    assert len(rows) == 16
    assert rows[0] == {"npu_id": 0, "chip_id": 0, "chip_logic_id": 0, "chip_name": "Ascend 910B4"}
    assert rows[1] == {"npu_id": 0, "chip_id": 1, "chip_logic_id": None, "chip_name": "Mcu"}
    chips = [r for r in rows if r["chip_logic_id"] is not None]
    assert [(r["npu_id"], r["chip_logic_id"]) for r in chips] == [(n, n) for n in range(8)]


def test_info_m_910a_and_310p():
    rows = npu_smi.parse_info_m(fixture("npu-smi-info-m-910a-excerpt.txt"))
    assert rows == [
        {"npu_id": 0, "chip_id": 0, "chip_logic_id": 0, "chip_name": "Ascend 910A"},
        {"npu_id": 1, "chip_id": 0, "chip_logic_id": 1, "chip_name": "Ascend 910A"},
    ]
    rows = npu_smi.parse_info_m(fixture("npu-smi-info-m-310p.txt"))
    assert [(r["npu_id"], r["chip_id"], r["chip_logic_id"]) for r in rows] == [(1, 0, 0), (1, 1, 1), (1, 2, None)]


def test_info_m_phy_id_and_slot_variants():
    text = (
        "\tNPU ID                         Chip ID                        Chip Logic ID                  "
        "Chip Phy-ID                    Chip Name\n"
        "\t0                              0                              0                              "
        "0                              Ascend 910B4\n"
    )
    assert npu_smi.parse_info_m(text) == [
        {"npu_id": 0, "chip_id": 0, "chip_logic_id": 0, "chip_phy_id": 0, "chip_name": "Ascend 910B4"},
    ]
    text = (
        "NPU ID          Slot ID          Chip ID          Chip Phy-ID          Chip Name\n"
        "0               0                0                0                    xxx\n"
    )
    assert npu_smi.parse_info_m(text) == [
        {"npu_id": 0, "slot_id": 0, "chip_id": 0, "chip_phy_id": 0, "chip_name": "xxx"},
    ]


def test_info_m_errors():
    with pytest.raises(ValueError, match="npu-smi info -m: expected a header"):
        npu_smi.parse_info_m("dcmi module initialize failed. ret is -8005\n")
    with pytest.raises(ValueError, match="expected an integer or '-' in column chip_logic_id"):
        npu_smi.parse_info_m(
            "NPU ID    Chip ID    Chip Logic ID    Chip Name\n0    0    x    Ascend 910B4\n")
    with pytest.raises(ValueError, match="npu-smi info -m: empty output"):
        npu_smi.parse_info_m("")


# ---------------------------------------------------------------------------
# npu-smi info -t topo
# ---------------------------------------------------------------------------

def test_topo_800a2_hccs_mesh():
    topo = npu_smi.parse_topo(fixture("npu-smi-info-t-topo-800a2.txt"))
    assert topo["labels"] == ["NPU%d" % n for n in range(8)]
    assert topo["cpu_affinity"] == {
        0: "144-167", 1: "144-167", 2: "96-119", 3: "96-119",
        4: "0-23", 5: "0-23", 6: "48-71", 7: "48-71",
    }
    assert topo["matrix"]["NPU0"]["NPU0"] == "X"
    assert topo["matrix"]["NPU3"]["NPU5"] == "HCCS"
    assert all(len(row) == 8 for row in topo["matrix"].values())


def test_topo_pcie_comma_cpulist():
    topo = npu_smi.parse_topo(fixture("npu-smi-info-t-topo-950-pcie-excerpt.txt"))
    assert topo["cpu_affinity"] == {0: "0-63,128-191", 1: "0-63,128-191", 7: "64-127,192-255"}
    assert topo["matrix"]["NPU7"]["NPU0"] == "SYS"


def test_topo_handwritten_pxb_layout():
    text = (
        "        NPU0    NPU1    NPU2    NPU3  CPU Affinity\n"
        "NPU0     X      PXB     SYS     PXB   144-167\n"
        "NPU1    PXB      X      PXB     SYS   96-119\n"
    )
    topo = npu_smi.parse_topo(text)
    assert topo["matrix"]["NPU1"] == {"NPU0": "PXB", "NPU1": "X", "NPU2": "PXB", "NPU3": "SYS"}
    assert topo["cpu_affinity"] == {0: "144-167", 1: "96-119"}


def test_topo_a3_without_affinity_column():
    text = (
        "\t   Phy-ID0    Phy-ID1    \n"
        "Phy-ID0    X          SIO        \n"
        "Phy-ID1    SIO        X          \n"
    )
    topo = npu_smi.parse_topo(text)
    assert topo["labels"] == ["Phy-ID0", "Phy-ID1"]
    assert topo["cpu_affinity"] == {0: None, 1: None}


def test_topo_not_supported():
    with pytest.raises(ValueError, match=r"npu-smi info -t topo: .*This device does not support querying topo"):
        npu_smi.parse_topo("This device does not support querying topo.\n")


def test_topo_bad_rows():
    header = "\t   NPU0       NPU1       CPU Affinity\n"
    with pytest.raises(ValueError, match="expected 2 matrix cells"):
        npu_smi.parse_topo(header + "NPU0       X\n")
    with pytest.raises(ValueError, match="is not a cpulist"):
        npu_smi.parse_topo(header + "NPU0       X          HCCS       node0\n")
    with pytest.raises(ValueError, match="unexpected trailing fields"):
        npu_smi.parse_topo(header + "NPU0       X          HCCS       0-23   24-47\n")
    with pytest.raises(ValueError, match="header without matrix rows"):
        npu_smi.parse_topo(header)
