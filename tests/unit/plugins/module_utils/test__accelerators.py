# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _accelerators as accelerators


def test_empty_inventory_keys():
    assert sorted(accelerators.empty_inventory()) == [
        "cann_version", "count", "device_nodes", "devices", "driver_version", "errors", "firmware_version",
        "tool", "type",
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
