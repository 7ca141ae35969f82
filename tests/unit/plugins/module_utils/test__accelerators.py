# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _accelerators as accelerators


def test_empty_inventory_keys():
    assert sorted(accelerators.empty_inventory()) == [
        "cann_version", "chip_name", "chips_per_card", "count", "device_nodes", "devices", "driver_version",
        "errors", "family", "firmware_version", "memory_kind", "product", "tool", "type",
    ]


def test_normalize_pci_address():
    assert accelerators.normalize_pci_address("0000:C1:00.0") == "0000:c1:00.0"
    assert accelerators.normalize_pci_address("00000000:E3:00.0") == "0000:e3:00.0"
    assert accelerators.normalize_pci_address(None) is None


def test_list_device_nodes_sorts_numerically(tmp_path):
    for name in ("davinci10", "davinci2", "davinci_manager", "nvidia0", "nvidiactl"):
        (tmp_path / name).write_text("", encoding="utf-8")
    nodes = accelerators.list_device_nodes(str(tmp_path), accelerators._NPU_NODE_RE)
    assert nodes == [(2, str(tmp_path / "davinci2")), (10, str(tmp_path / "davinci10"))]
    assert accelerators.list_device_nodes(str(tmp_path / "missing"), accelerators._NPU_NODE_RE) == []


def test_tool_that_cannot_be_started(tmp_path):
    def run(argv):
        raise OSError(13, "Permission denied")

    result = accelerators.gather_accelerators(run, npu_smi_path="/usr/local/bin/npu-smi",
                                              ascend_root=str(tmp_path), dev_root=str(tmp_path))
    assert result["type"] == "npu"
    assert result["count"] == 0
    assert result["driver_version"] is None
    assert result["errors"] == ["npu-smi info could not be run: [Errno 13] Permission denied"]


def test_errors_list_is_extended_in_place(tmp_path):
    errors = ["found earlier"]
    result = accelerators.gather_accelerators(None, ascend_root=str(tmp_path), dev_root=str(tmp_path), errors=errors)
    assert result["errors"] is errors
    assert result["type"] == "none"


def test_long_failure_output_is_shortened(tmp_path):
    def run(argv):
        return 1, "x" * 1000, ""

    result = accelerators.probe_gpu(run, "/usr/bin/nvidia-smi", dev_root=str(tmp_path))
    message = result["errors"][0]
    assert message.startswith("nvidia-smi --query-gpu=")
    assert message.endswith("x...")
    assert len(message) < 500


def test_unreadable_version_file_is_reported(tmp_path):
    (tmp_path / "driver").mkdir()
    (tmp_path / "driver" / "version.info").write_text("not a key value file\n", encoding="utf-8")

    def run(argv):
        return 187, "dcmi module initialize failed. ret is -8005\n", ""

    result = accelerators.probe_npu(run, "/usr/local/bin/npu-smi", ascend_root=str(tmp_path), dev_root=str(tmp_path))
    assert result["driver_version"] is None
    assert result["errors"][1] == (
        "unparseable file: %s: driver/version.info: expected 'key=value' (line 1: 'not a key value file')"
        % (tmp_path / "driver" / "version.info"))


# ---------------------------------------------------------------------------
# Product, chips per card and memory kind (Atlas 300I Duo from a real capture)
# ---------------------------------------------------------------------------

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def vendor(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def fake_run(outputs):
    def run(argv):
        return outputs[tuple(argv[1:])]
    return run


def test_300i_duo_product_chips_and_ddr_memory(tmp_path):
    for name in ("davinci0", "davinci1"):
        (tmp_path / name).write_text("")
    # No public `-t board` capture of a 300I Duo exists: the board query fails here, and the
    # product comes from the chip name of the real table.
    run = fake_run({
        ("info",): (0, vendor("npu-smi-info-300iduo-25.0.rc1.b033-excerpt.txt"), ""),
        ("info", "-m"): (0, vendor("npu-smi-info-m-310p.txt"), ""),
        ("info", "-t", "board", "-i", "1", "-c", "0"): (255, "This device does not support querying board.\n", ""),
    })
    inventory = accelerators.probe_npu(run, "/usr/local/bin/npu-smi", ascend_root=str(tmp_path / "none"),
                                       dev_root=str(tmp_path))
    assert inventory["product"] == "Atlas 300I Duo"
    assert inventory["family"] == "Ascend 310P"
    assert inventory["chip_name"] == "310P3"
    assert inventory["chips_per_card"] == 2
    assert inventory["memory_kind"] == "DDR"
    devices = inventory["devices"]
    assert [(d["index"], d["npu_id"], d["chip_id"]) for d in devices] == [(0, 1, 0), (1, 1, 1)]
    assert [d["bus_id"] for d in devices] == ["0000:01:00.0", "0000:01:00.0"]
    assert [(d["memory_used_mb"], d["memory_total_mb"], d["memory_kind"]) for d in devices] == [
        (1607, 47304, "DDR"), (1379, 46717, "DDR")]
    assert [d["power_w"] for d in devices] == [None, None]
    assert [d["device_node"] for d in devices] == [str(tmp_path / "davinci0"), str(tmp_path / "davinci1")]
    assert inventory["errors"][0].startswith("npu-smi info -t board -i 1 -c 0 failed (rc=255)")


def test_sparse_300i_duo_card_without_mapping_uses_the_device_column(tmp_path):
    for name in ("davinci0", "davinci1"):
        (tmp_path / name).write_text("")
    run = fake_run({
        ("info",): (0, vendor("npu-smi-info-300iduo-25.2.0-excerpt.txt"), ""),
        ("info", "-m"): (255, "", "mapping not available"),
        ("info", "-t", "board", "-i", "2", "-c", "0"): (255, "", "board not available"),
    })
    inventory = accelerators.probe_npu(run, "npu-smi", ascend_root=str(tmp_path / "none"), dev_root=str(tmp_path))
    assert [(d["index"], d["npu_id"], d["chip_id"], d["logic_id"]) for d in inventory["devices"]] == [
        (0, 2, 0, 0), (1, 2, 1, 1)]
    assert inventory["product"] == "Atlas 300I Duo"


def test_product_from_the_board_device_id():
    devices = [{"npu_id": n, "chip_id": 0, "name": "910B4", "phy_id": None, "memory_kind": "HBM"} for n in range(8)]
    board = accelerators.npu_smi.parse_board(vendor("npu-smi-info-t-board-910b.txt"))
    assert accelerators.npu_product(devices, board) == {
        "product": "Atlas A2", "family": "Ascend 910B", "chip_name": "910B4", "chips_per_card": 1,
        "memory_kind": "HBM"}
    # The board's PCI device id wins over the chip name (0xD500 is the 310P, vendor-tools reference 3.4).
    assert accelerators.npu_product(devices, {"pci_device_id": "0xD500"})["family"] == "Ascend 310P"


def test_a3_is_told_apart_by_two_chips_with_phy_ids():
    info = accelerators.npu_smi.parse_info(vendor("npu-smi-info-a3-26.0.rc2-excerpt.txt"))
    devices = [dict(d, memory_kind="HBM") for d in info["devices"]]
    product = accelerators.npu_product(devices)
    assert (product["product"], product["family"], product["chips_per_card"]) == ("Atlas A3", "Ascend 910C", 2)


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")


def test_the_gpu_inventory_from_a_live_h200_s_capture_is_what_the_probe_made_of_it_there(tmp_path):
    """tests/device/capture_gpu.sh stored what nvidia-smi printed on a one-GPU H200 machine (driver 580.159.04),
    then ran the probe there: given the capture, the probe makes the inventory it made live (its own call, a moment
    later, read 81.1 W)."""
    with open(os.path.join(FIXTURES, "nvidia-smi-query-gpu-h200-ours-noheader-nounits-580.159.04.csv"),
              encoding="utf-8") as handle:
        captured = handle.read()
    (tmp_path / "nvidia0").write_text("", encoding="utf-8")
    (tmp_path / "nvidiactl").write_text("", encoding="utf-8")
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, captured, ""

    result = accelerators.gather_accelerators(run, nvidia_smi_path="nvidia-smi", dev_root=str(tmp_path))
    assert calls == [["nvidia-smi", "--query-gpu=" + ",".join(accelerators.NVIDIA_QUERY_FIELDS),
                      "--format=csv,noheader,nounits"]]
    assert result["errors"] == [] and result["type"] == "gpu" and result["count"] == 1
    assert result["driver_version"] == "580.159.04"
    assert result["devices"] == [{"index": 0, "name": "NVIDIA H200", "health": "OK", "bus_id": "00000000:00:06.0",
                                  "pci_address": "0000:00:06.0", "memory_total_mb": 143771, "memory_used_mb": 0,
                                  "uuid": "GPU-19c6ba1e-8268-5372-c72c-1e32bb3910fd", "temp_c": 43, "power_w": 81.09}]
    assert result["device_nodes"] == [str(tmp_path / "nvidia0")]
