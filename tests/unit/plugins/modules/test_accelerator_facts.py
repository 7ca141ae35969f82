# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os
import shutil
import stat
from unittest.mock import patch

import pytest

from ansible.module_utils import basic

from ansible_collections.aihost.llm_cluster.plugins.modules import accelerator_facts
from ansible_collections.aihost.llm_cluster.tests.unit.plugins.modules.utils import (
    AnsibleExitJson,
    AnsibleFailJson,
    exit_json,
    fail_json,
    set_module_args,
)
import topology_fixtures

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")
TOPOLOGIES = topology_fixtures.ROOT
NPU_SMI = "/usr/local/bin/npu-smi"
NVIDIA_SMI = "/usr/bin/nvidia-smi"
QUERY = (
    "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,temperature.gpu,power.draw,driver_version",
    "--format=csv,noheader,nounits",
)
# The L40S host of vendor-tools.md section 4.2, in the field order the module queries.
L40S_BUS_IDS = ["03", "04", "63", "64", "A3", "A4", "E3", "E4"]
L40S_QUERY_OUTPUT = "".join(
    "%d, GPU-00000000-0000-0000-0000-00000000000%d, NVIDIA L40S, 00000000:%s:00.0, 46068, 1, 30, 35.12, 580.178.04\n"
    % (index, index, bus)
    for index, bus in enumerate(L40S_BUS_IDS)
)


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.fixture
def patch_ansible_module():
    with patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json):
        yield


@pytest.fixture
def ascend_root(tmp_path):
    root = tmp_path / "Ascend"
    files = {
        "driver/version.info": fixture("ascend-driver-version-23.0.7.info"),
        "firmware/version.info": fixture("ascend-firmware-version-7.1.0.11.220.info"),
        "ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info": fixture(
            "ascend_toolkit_install-8.3.RC2.info"),
    }
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def make_dev(tmp_path, names):
    dev = tmp_path / "dev"
    dev.mkdir(exist_ok=True)
    for name in names:
        (dev / name).write_text("", encoding="utf-8")
    return dev


DAVINCI = ["davinci%d" % n for n in range(8)] + ["davinci_manager", "devmm_svm", "hisi_hdc"]
NVIDIA = ["nvidia%d" % n for n in range(8)] + ["nvidiactl", "nvidia-uvm", "nvidia-modeset"]


def npu_outputs(**overrides):
    outputs = {
        (NPU_SMI, "info"): (0, fixture("npu-smi-info-800i-a2.txt"), ""),
        (NPU_SMI, "info", "-m"): (0, fixture("npu-smi-info-m-910b4.txt"), ""),
        (NPU_SMI, "info", "-t", "board", "-i", "0", "-c", "0"): (0, fixture("npu-smi-info-t-board-910b.txt"), ""),
    }
    outputs.update(overrides)
    return outputs


def run_module(args, outputs, tools, expect=AnsibleExitJson):
    """Run the module; return (result, argv list of every command, get_bin_path calls).

    ``expect`` is the exception the module must end with (``AnsibleFailJson`` for failures).
    """
    calls = []

    def fake_run_command(module, argv, **kwargs):
        assert module.run_command_environ_update["LC_ALL"] == "C"
        assert isinstance(argv, list)
        calls.append(tuple(argv))
        if tuple(argv) not in outputs:
            raise AssertionError("unexpected command %r" % (argv,))
        return outputs[tuple(argv)]

    def fake_get_bin_path(module, name, required=False, opt_dirs=None):
        assert required is False
        assert opt_dirs == ["/usr/local/bin", "/usr/local/sbin", "/usr/bin"]
        return tools.get(name)

    with patch.object(basic.AnsibleModule, "run_command", autospec=True, side_effect=fake_run_command), \
            patch.object(basic.AnsibleModule, "get_bin_path", autospec=True,
                         side_effect=fake_get_bin_path) as get_bin_path, \
            set_module_args(args):
        with pytest.raises(expect) as exc:
            accelerator_facts.main()
    result = exc.value.args[0]
    looked_up = [call.args[1] for call in get_bin_path.call_args_list]
    return result, calls, looked_up


def base_args(ascend_root, dev):
    return {"ascend_root": str(ascend_root), "dev_root": str(dev)}


# ---------------------------------------------------------------------------
# NPU hosts
# ---------------------------------------------------------------------------

@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_800i_a2(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    result, calls, looked_up = run_module(base_args(ascend_root, dev), npu_outputs(), {"npu-smi": NPU_SMI})

    assert result["changed"] is False
    facts = result["accelerators"]
    assert result["ansible_facts"] == {"llm_cluster_accelerators": facts}
    assert looked_up == ["npu-smi"]
    assert calls == [
        (NPU_SMI, "info"),
        (NPU_SMI, "info", "-m"),
        (NPU_SMI, "info", "-t", "board", "-i", "0", "-c", "0"),
    ]
    assert facts["type"] == "npu"
    assert facts["tool"] == NPU_SMI
    assert facts["count"] == 8
    assert facts["driver_version"] == "25.0.rc1.1"
    assert facts["firmware_version"] == "7.8.0.6.201"
    assert facts["cann_version"] == "8.3.RC2"
    assert facts["device_nodes"] == [str(dev / ("davinci%d" % n)) for n in range(8)]
    assert facts["errors"] == []
    assert [d["index"] for d in facts["devices"]] == list(range(8))
    assert facts["devices"][0] == {
        "index": 0,
        "name": "910B4",
        "health": "OK",
        "bus_id": "0000:C1:00.0",
        "pci_address": "0000:c1:00.0",
        "memory_total_mb": 32768,
        "memory_used_mb": 2654,
        "memory_kind": "HBM",
        "npu_id": 0,
        "chip_id": 0,
        "logic_id": 0,
        "phy_id": None,
        "hbm_total_mb": 32768,
        "hbm_used_mb": 2654,
        "aicore_pct": 0,
        "power_w": 87.2,
        "temp_c": 33,
        "device_node": str(dev / "davinci0"),
    }
    assert facts["devices"][4]["pci_address"] == "0000:01:00.0"
    assert "topology" not in result
    assert "plan" not in result


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_check_mode_gives_the_same_facts(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    args = base_args(ascend_root, dev)
    normal, dummy, dummy = run_module(args, npu_outputs(), {"npu-smi": NPU_SMI})
    args["_ansible_check_mode"] = True
    checked, calls, dummy = run_module(args, npu_outputs(), {"npu-smi": NPU_SMI})
    assert checked["changed"] is False
    assert checked["accelerators"] == normal["accelerators"]
    assert len(calls) == 3


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_smi_failing_falls_back_to_version_files(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    outputs = {(NPU_SMI, "info"): (187, fixture("npu-smi-dcmi-init-failed.txt"), "")}
    result, calls, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert calls == [(NPU_SMI, "info")]
    assert facts["type"] == "npu"
    assert facts["count"] == 0
    assert facts["devices"] == []
    assert facts["driver_version"] == "23.0.7"
    assert facts["firmware_version"] == "7.1.0.11.220"
    assert facts["cann_version"] == "8.3.RC2"
    assert len(facts["device_nodes"]) == 8
    assert facts["errors"] == [
        "npu-smi info failed (rc=187): DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3) / "
        "dcmi module initialize failed. ret is -8005",
    ]


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_unparseable_info(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    outputs = {(NPU_SMI, "info"): (0, "Command or option is not found.\n", "")}
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert facts["count"] == 0
    assert facts["errors"] == [
        "unparseable output: npu-smi info: unexpected line outside the table "
        "(line 1: 'Command or option is not found.')",
    ]


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_board_failure_uses_firmware_file(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    outputs = npu_outputs(**{})
    outputs[(NPU_SMI, "info", "-t", "board", "-i", "0", "-c", "0")] = (193, "This device does not support\n", "")
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert facts["firmware_version"] == "7.1.0.11.220"
    assert facts["count"] == 8
    assert facts["errors"] == ["npu-smi info -t board -i 0 -c 0 failed (rc=193): This device does not support"]


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_without_mapping_uses_positions(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    outputs = npu_outputs()
    outputs[(NPU_SMI, "info", "-m")] = (0, "garbage\n", "")
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert [d["index"] for d in facts["devices"]] == list(range(8))
    assert all(d["logic_id"] is None for d in facts["devices"])
    assert len(facts["errors"]) == 1
    assert facts["errors"][0].startswith("unparseable output: npu-smi info -m: expected a header")


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_device_node_mismatch(tmp_path, ascend_root):
    dev = make_dev(tmp_path, ["davinci%d" % n for n in range(7)] + ["davinci9", "davinci_manager"])
    result, dummy, dummy = run_module(base_args(ascend_root, dev), npu_outputs(), {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert facts["device_nodes"][-2:] == [str(dev / "davinci6"), str(dev / "davinci9")]
    assert facts["devices"][7]["device_node"] is None
    assert facts["errors"] == [
        "missing device nodes: NPU 7 (0000:42:00.0) has no %s" % (dev / "davinci7"),
        "device nodes without a device reported by npu-smi: %s" % (dev / "davinci9"),
    ]


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_a3_two_chips_per_npu(tmp_path, ascend_root):
    dev = make_dev(tmp_path, ["davinci%d" % n for n in range(4)])
    mapping = (
        "\tNPU ID                         Chip ID                        Chip Logic ID                  Chip Name\n"
        "\t0                              0                              0                              Ascend 910\n"
        "\t0                              1                              1                              Ascend 910\n"
        "\t1                              0                              2                              Ascend 910\n"
        "\t1                              1                              3                              Ascend 910\n"
    )
    outputs = npu_outputs()
    outputs[(NPU_SMI, "info")] = (0, fixture("npu-smi-info-a3-ascend910-24.1.rc3.3-excerpt.txt"), "")
    outputs[(NPU_SMI, "info", "-m")] = (0, mapping, "")
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    assert facts["errors"] == []
    assert facts["count"] == 4
    assert facts["driver_version"] == "24.1.rc3.3"
    assert [(d["index"], d["npu_id"], d["chip_id"], d["phy_id"]) for d in facts["devices"]] == [
        (0, 0, 0, 0), (1, 0, 1, 1), (2, 1, 0, 2), (3, 1, 1, 3),
    ]
    assert facts["devices"][1]["power_w"] is None
    assert facts["devices"][3]["device_node"] == str(dev / "davinci3")


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_910a_warning_health(tmp_path, ascend_root):
    dev = make_dev(tmp_path, ["davinci0"])
    mapping = fixture("npu-smi-info-m-910a-excerpt.txt")
    outputs = npu_outputs()
    outputs[(NPU_SMI, "info")] = (0, fixture("npu-smi-info-910a-23.0.rc1.b070-excerpt.txt"), "")
    outputs[(NPU_SMI, "info", "-m")] = (0, mapping, "")
    outputs[(NPU_SMI, "info", "-t", "board", "-i", "0", "-c", "0")] = (
        0, fixture("npu-smi-info-t-board-chip-910a.txt"), "")
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"npu-smi": NPU_SMI})
    facts = result["accelerators"]
    device = facts["devices"][0]
    assert device["health"] == "Warning"
    assert device["name"] == "910A"
    assert device["memory_total_mb"] == 32768
    assert facts["firmware_version"] == "7.1.0.7.220"
    assert facts["errors"] == []


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_smi_path_option(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    tool = tmp_path / "npu-smi"
    tool.write_text("#!/bin/sh\n", encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    outputs = {(str(tool),) + key[1:]: value for key, value in npu_outputs().items()}
    args = base_args(ascend_root, dev)
    args["npu_smi_path"] = str(tool)
    result, calls, looked_up = run_module(args, outputs, {"npu-smi": NPU_SMI})
    assert looked_up == []
    assert result["accelerators"]["tool"] == str(tool)
    assert calls[0] == (str(tool), "info")
    assert result["accelerators"]["count"] == 8


@pytest.mark.usefixtures("patch_ansible_module")
def test_npu_smi_path_not_executable(tmp_path, ascend_root):
    dev = make_dev(tmp_path, [])
    args = base_args(ascend_root, dev)
    args["npu_smi_path"] = str(tmp_path / "missing-npu-smi")
    result, calls, looked_up = run_module(args, {}, {})
    facts = result["accelerators"]
    assert looked_up == ["nvidia-smi"]
    assert calls == []
    assert facts["type"] == "none"
    assert facts["errors"] == ["npu_smi_path=%s is not an executable file" % (tmp_path / "missing-npu-smi")]


# ---------------------------------------------------------------------------
# GPU hosts
# ---------------------------------------------------------------------------

@pytest.mark.usefixtures("patch_ansible_module")
def test_gpu_l40s(tmp_path, ascend_root):
    dev = make_dev(tmp_path, NVIDIA)
    outputs = {(NVIDIA_SMI,) + QUERY: (0, L40S_QUERY_OUTPUT, "")}
    result, calls, looked_up = run_module(base_args(ascend_root, dev), outputs,
                                          {"nvidia-smi": NVIDIA_SMI})
    facts = result["accelerators"]
    assert looked_up == ["npu-smi", "nvidia-smi"]
    assert calls == [(NVIDIA_SMI,) + QUERY]
    assert result["ansible_facts"]["llm_cluster_accelerators"] == facts
    assert facts["type"] == "gpu"
    assert facts["tool"] == NVIDIA_SMI
    assert facts["count"] == 8
    assert facts["driver_version"] == "580.178.04"
    assert facts["firmware_version"] is None
    assert facts["cann_version"] is None
    assert facts["device_nodes"] == [str(dev / ("nvidia%d" % n)) for n in range(8)]
    assert facts["errors"] == []
    assert facts["devices"][6] == {
        "index": 6,
        "name": "NVIDIA L40S",
        "health": "OK",
        "bus_id": "00000000:E3:00.0",
        "pci_address": "0000:e3:00.0",
        "memory_total_mb": 46068,
        "memory_used_mb": 1,
        "uuid": "GPU-00000000-0000-0000-0000-000000000006",
        "temp_c": 30,
        "power_w": 35.12,
    }


@pytest.mark.usefixtures("patch_ansible_module")
def test_gpu_tool_failure(tmp_path, ascend_root):
    dev = make_dev(tmp_path, NVIDIA)
    message = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.\n")
    outputs = {(NVIDIA_SMI,) + QUERY: (9, message, "")}
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"nvidia-smi": NVIDIA_SMI})
    facts = result["accelerators"]
    assert facts["type"] == "gpu"
    assert facts["count"] == 0
    assert facts["driver_version"] is None
    assert len(facts["device_nodes"]) == 8
    assert facts["errors"] == ["nvidia-smi %s %s failed (rc=9): %s" % (QUERY[0], QUERY[1], message.strip())]


@pytest.mark.usefixtures("patch_ansible_module")
def test_gpu_reporting_an_error_value(tmp_path, ascend_root):
    dev = make_dev(tmp_path, NVIDIA[:2])
    text = (
        "0, GPU-a, NVIDIA H100 80GB HBM3, 00000000:04:00.0, 81559, 0, 31, 70.5, 550.107.02\n"
        "1, [Unknown Error], NVIDIA H100 80GB HBM3, 00000000:8B:00.0, [Unknown Error], [N/A], [N/A], [N/A], "
        "550.107.02\n"
    )
    outputs = {(NVIDIA_SMI,) + QUERY: (0, text, "")}
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"nvidia-smi": NVIDIA_SMI})
    facts = result["accelerators"]
    assert [d["health"] for d in facts["devices"]] == ["OK", "Unknown Error"]
    assert facts["devices"][1]["memory_total_mb"] is None
    assert facts["devices"][1]["power_w"] is None
    assert facts["driver_version"] == "550.107.02"
    assert facts["errors"] == ["GPU 1: nvidia-smi reports uuid: Unknown Error; memory.total: Unknown Error"]


@pytest.mark.usefixtures("patch_ansible_module")
def test_gpu_node_count_mismatch(tmp_path, ascend_root):
    dev = make_dev(tmp_path, NVIDIA[:6] + ["nvidiactl"])
    outputs = {(NVIDIA_SMI,) + QUERY: (0, L40S_QUERY_OUTPUT, "")}
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"nvidia-smi": NVIDIA_SMI})
    assert result["accelerators"]["errors"] == [
        "6 %s device nodes found but nvidia-smi reports 8 GPUs" % (dev / "nvidiaN"),
    ]


@pytest.mark.usefixtures("patch_ansible_module")
def test_gpu_unparseable(tmp_path, ascend_root):
    dev = make_dev(tmp_path, [])
    outputs = {(NVIDIA_SMI,) + QUERY: (0, "No devices were found\n", "")}
    result, dummy, dummy = run_module(base_args(ascend_root, dev), outputs, {"nvidia-smi": NVIDIA_SMI})
    facts = result["accelerators"]
    assert facts["count"] == 0
    assert facts["errors"] == [
        "unparseable output: nvidia-smi --query-gpu: expected 9 comma-separated values, got 1 "
        "(line 1: 'No devices were found')",
    ]


# ---------------------------------------------------------------------------
# Hosts without accelerators
# ---------------------------------------------------------------------------

@pytest.mark.usefixtures("patch_ansible_module")
def test_no_accelerator(tmp_path, ascend_root):
    dev = make_dev(tmp_path, ["null", "nvidiactl"])
    result, calls, looked_up = run_module(base_args(ascend_root, dev), {}, {})
    assert calls == []
    assert looked_up == ["npu-smi", "nvidia-smi"]
    assert result["changed"] is False
    assert result["accelerators"] == {
        "type": "none",
        "tool": None,
        "count": 0,
        "devices": [],
        "driver_version": None,
        "firmware_version": None,
        "cann_version": None,
        "device_nodes": [],
        "errors": [],
        "product": None,
        "family": None,
        "chip_name": None,
        "chips_per_card": None,
        "memory_kind": None,
    }
    assert result["ansible_facts"] == {"llm_cluster_accelerators": result["accelerators"]}


@pytest.mark.usefixtures("patch_ansible_module")
def test_device_nodes_without_tool(tmp_path, ascend_root):
    dev = make_dev(tmp_path, ["davinci0", "davinci10", "davinci2"])
    result, dummy, dummy = run_module(base_args(ascend_root, dev), {}, {})
    facts = result["accelerators"]
    assert facts["type"] == "none"
    assert facts["device_nodes"] == [str(dev / "davinci0"), str(dev / "davinci2"), str(dev / "davinci10")]
    assert facts["errors"] == [
        "device nodes %s exist but neither npu-smi nor nvidia-smi was found" % ", ".join(facts["device_nodes"]),
    ]


@pytest.mark.usefixtures("patch_ansible_module")
def test_defaults():
    with set_module_args({}):
        module = accelerator_facts.build_module()
    assert module.params == {
        "npu_smi_path": None,
        "nvidia_smi_path": None,
        "ascend_root": "/usr/local/Ascend",
        "dev_root": "/dev",
        "topology": False,
        "layout": None,
        "sysfs_root": "/",
    }
    assert module.supports_check_mode is True


@pytest.mark.usefixtures("patch_ansible_module")
def test_unknown_option_fails():
    with set_module_args({"gather": ["cpu"]}):
        with pytest.raises(AnsibleFailJson) as exc:
            accelerator_facts.build_module()
    assert "gather" in exc.value.args[0]["msg"]


# ---------------------------------------------------------------------------
# CPU topology and binding plan
# ---------------------------------------------------------------------------

A2_WORKQUEUES = {
    0: [164, 165, 166, 167], 1: [160, 161, 162, 163], 2: [116, 117, 118, 119], 3: [112, 113, 114, 115],
    4: [20, 21, 22, 23], 5: [16, 17, 18, 19], 6: [68, 69, 70, 71], 7: [64, 65, 66, 67],
}


def topology_args(ascend_root, dev, sysfs_root, **extra):
    args = base_args(ascend_root, dev)
    args["sysfs_root"] = str(sysfs_root)
    args.update(extra)
    return args


@pytest.mark.usefixtures("patch_ansible_module")
def test_topology_of_an_atlas_800i_a2(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    sysfs = os.path.join(TOPOLOGIES, "atlas-800i-a2")
    result, calls, dummy = run_module(topology_args(ascend_root, dev, sysfs, topology=True), npu_outputs(),
                                      {"npu-smi": NPU_SMI})
    # PCI sysfs has the locality of every NPU: npu-smi info -t topo is not needed.
    assert len(calls) == 3
    topology = result["topology"]
    assert result["ansible_facts"]["llm_cluster_cpu_topology"] == topology
    assert result["accelerators"]["count"] == 8
    assert topology["errors"] == []
    assert len(topology["cpus"]) == 192
    assert topology["allowed_source"] == "online"
    assert [(device["index"], device["numa_node"]) for device in topology["devices"]] == [
        (0, 6), (1, 6), (2, 4), (3, 4), (4, 0), (5, 0), (6, 2), (7, 2)]
    assert "plan" not in result
    assert "llm_cluster_cpu_plan" not in result["ansible_facts"]


@pytest.mark.usefixtures("patch_ansible_module")
def test_plan_of_an_atlas_800i_a2_matches_llm_solution(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    sysfs = os.path.join(TOPOLOGIES, "atlas-800i-a2")
    args = topology_args(ascend_root, dev, sysfs, layout={})
    args["_ansible_check_mode"] = True
    result, dummy, dummy = run_module(args, npu_outputs(), {"npu-smi": NPU_SMI})
    assert result["changed"] is False
    assert "topology" not in result
    plan = result["plan"]
    assert result["ansible_facts"]["llm_cluster_cpu_plan"] == plan
    assert dict((device["index"], device["workqueue_cores"]) for device in plan["devices"]) == A2_WORKQUEUES
    assert plan["devices"][0]["workqueue_mask"] == "000000f0,00000000,00000000,00000000,00000000,00000000"
    assert plan["warnings"] == []


@pytest.mark.usefixtures("patch_ansible_module")
def test_plan_runs_npu_smi_topo_without_pci_sysfs(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    sysfs = tmp_path / "sysfs"
    shutil.copytree(os.path.join(TOPOLOGIES, "atlas-800i-a2"), str(sysfs))
    shutil.rmtree(str(sysfs / "sys" / "bus"))
    outputs = npu_outputs()
    outputs[(NPU_SMI, "info", "-t", "topo")] = (0, fixture("npu-smi-info-t-topo-800a2.txt"), "")
    layout = {"tp_size": 4, "dp_ranks_per_node": 2, "dp_size": 4}
    result, calls, dummy = run_module(topology_args(ascend_root, dev, sysfs, topology=True, layout=layout),
                                      outputs, {"npu-smi": NPU_SMI})
    assert calls[-1] == (NPU_SMI, "info", "-t", "topo")
    assert [device["source"] for device in result["topology"]["devices"]] == ["npu-smi"] * 8
    plan = result["plan"]
    assert dict((device["index"], device["workqueue_cores"]) for device in plan["devices"]) == A2_WORKQUEUES
    assert [group["engine"] for group in plan["groups"]] == ["VLLM::EngineCore_DP0", "VLLM::EngineCore_DP1"]
    worker = plan["groups"][1]["workers"][0]
    assert worker.pop("parent_match") == plan["groups"][1]["engine_match"] == "^VLLM::EngineCore_DP1(?![A-Za-z0-9_])"
    assert worker.pop("match").startswith("^VLLM::Worker(?:_DP\\d+)?")
    assert worker == {"tp_rank": 0, "name": "VLLM::Worker_DP1_TP0", "device": 4, "cores": list(range(1, 8))}


@pytest.mark.usefixtures("patch_ansible_module")
def test_failing_topo_tool_is_reported_not_fatal(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    sysfs = tmp_path / "sysfs"
    shutil.copytree(os.path.join(TOPOLOGIES, "atlas-800i-a2"), str(sysfs))
    shutil.rmtree(str(sysfs / "sys" / "bus"))
    outputs = npu_outputs()
    outputs[(NPU_SMI, "info", "-t", "topo")] = (255, "This device does not support querying topo.\n", "")
    result, dummy, dummy = run_module(topology_args(ascend_root, dev, sysfs, topology=True), outputs,
                                      {"npu-smi": NPU_SMI})
    assert result["topology"]["errors"] == [
        "npu-smi info -t topo failed (rc=255): This device does not support querying topo."]
    assert result["accelerators"]["errors"] == []


@pytest.mark.usefixtures("patch_ansible_module")
def test_impossible_layout_fails_with_the_planner_message(tmp_path, ascend_root):
    dev = make_dev(tmp_path, DAVINCI)
    sysfs = os.path.join(TOPOLOGIES, "atlas-800i-a2")
    args = topology_args(ascend_root, dev, sysfs, layout={"tp_size": 3})
    result, dummy, dummy = run_module(args, npu_outputs(), {"npu-smi": NPU_SMI}, expect=AnsibleFailJson)
    assert result["failed"] is True
    assert result["msg"].startswith("tp_size 3 does not divide the 8 selected devices")
    assert result["topology"]["nr_cpus"] == 192


@pytest.mark.usefixtures("patch_ansible_module")
def test_unreadable_topology_fails(tmp_path, ascend_root):
    dev = make_dev(tmp_path, [])
    args = topology_args(ascend_root, dev, tmp_path / "empty", topology=True)
    result, dummy, dummy = run_module(args, {}, {}, expect=AnsibleFailJson)
    assert result["msg"] == "cannot read the CPU topology: cannot read %s" % (
        tmp_path / "empty" / "sys/devices/system/cpu/online")
    assert result["accelerators"]["type"] == "none"


@pytest.mark.usefixtures("patch_ansible_module")
def test_topology_of_a_gpu_host(tmp_path, ascend_root):
    dev = make_dev(tmp_path, NVIDIA)
    sysfs = os.path.join(TOPOLOGIES, "dgx-h100")
    query = "".join("%d, GPU-%d, NVIDIA H100 80GB HBM3, 00000000:%s:00.0, 81559, 0, 31, 70.5, 550.107.02\n"
                    % (index, index, bus) for index, bus in enumerate(["1B", "43", "52", "61", "9D", "C3", "D1", "DF"]))
    outputs = {(NVIDIA_SMI,) + QUERY: (0, query, "")}
    result, calls, dummy = run_module(topology_args(ascend_root, dev, sysfs, topology=True, layout={"tp_size": 4}),
                                      outputs, {"nvidia-smi": NVIDIA_SMI})
    assert calls == [(NVIDIA_SMI,) + QUERY]
    assert [device["numa_node"] for device in result["topology"]["devices"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    plan = result["plan"]
    assert plan["layout"]["workqueue_cores"] == 0
    assert [group["engine_cores"] for group in plan["groups"]] == [[0, 112], [56, 168]]
    assert all(device["workqueue_mask"] is None for device in plan["devices"])
