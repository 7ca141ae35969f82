# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Accelerator inventory: which NPUs/GPUs a host has and in what state.

``gather_accelerators()`` drives ``npu-smi``/``nvidia-smi`` through a
``run(argv) -> (rc, stdout, stderr)`` callable and reads version files and
device nodes, so it has no AnsibleModule dependency and can be unit tested
with canned outputs. Problems never raise: they are collected as
human-readable strings in ``errors``.

The returned dict is the ``llm_cluster_accelerators`` fact; new sections
(CPU topology, binding plans) are meant to be added next to the existing keys.
"""

from __future__ import annotations

import os
import re

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _ascend_versions as versions
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi as npu_smi
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _nvidia_smi as nvidia_smi

TOOL_SEARCH_DIRS = ["/usr/local/bin", "/usr/local/sbin", "/usr/bin"]
DEFAULT_DEV_ROOT = "/dev"
NVIDIA_QUERY_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "temperature.gpu",
    "power.draw",
    "driver_version",
)
_NPU_NODE_RE = re.compile(r"^davinci(\d+)$")
_GPU_NODE_RE = re.compile(r"^nvidia(\d+)$")
_SUMMARY_LIMIT = 300


def empty_inventory():
    """The inventory of a host without accelerators."""
    return {
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


def normalize_pci_address(bus_id):
    """``0000:C1:00.0``/``00000000:C1:00.0`` -> sysfs form ``0000:c1:00.0``."""
    if not bus_id:
        return None
    return nvidia_smi.pci_address(bus_id)


def list_device_nodes(dev_root, pattern):
    """Return ``[(number, path)]`` of entries of ``dev_root`` matching ``pattern``, by number."""
    try:
        names = os.listdir(dev_root)
    except OSError:
        return []
    nodes = []
    for name in names:
        match = pattern.match(name)
        if match:
            nodes.append((int(match.group(1)), os.path.join(dev_root, name)))
    return sorted(nodes)


def _summary(stdout, stderr):
    text = " / ".join(line.strip() for line in (stderr or stdout or "").splitlines() if line.strip())
    if not text:
        text = "no output"
    if len(text) > _SUMMARY_LIMIT:
        text = text[: _SUMMARY_LIMIT - 3] + "..."
    return text


def _call(run, argv, errors):
    """Run ``argv``; return stdout, or None after recording a failure in ``errors``."""
    shown = " ".join([os.path.basename(argv[0])] + list(argv[1:]))
    try:
        rc, stdout, stderr = run(argv)
    except OSError as exc:
        errors.append("%s could not be run: %s" % (shown, exc))
        return None
    if rc != 0:
        # npu-smi and nvidia-smi print their errors on stdout.
        errors.append("%s failed (rc=%s): %s" % (shown, rc, _summary(stdout, stderr)))
        return None
    return stdout


def _parse(parser, text, errors, *args):
    try:
        return parser(text, *args)
    except ValueError as exc:
        errors.append("unparseable output: %s" % exc)
        return None


def _read_version(path, parser, errors):
    try:
        data = versions.read_version_file(path, parser)
    except OSError as exc:
        errors.append("cannot read %s: %s" % (path, exc))
        return None
    except ValueError as exc:
        errors.append("unparseable file: %s" % exc)
        return None
    if data is None:
        return None
    return data.get("Version") or data.get("package_version") or None


# PCI device ids of Ascend chips (lspci, "PCI Device ID" of npu-smi info -t board).
NPU_FAMILIES = {
    "d100": "Ascend 310",
    "d500": "Ascend 310P",
    "d801": "Ascend 910",
    "d802": "Ascend 910B",
    "d803": "Ascend 910C",
}
# Products told apart by family and chips per card.
NPU_PRODUCTS = {
    ("Ascend 310P", 2): "Atlas 300I Duo",
    ("Ascend 910B", 1): "Atlas A2",
    ("Ascend 910C", 2): "Atlas A3",
}


def _memory_pair(device):
    """NPU device memory: ``(used, total, kind)``; HBM, or DDR on chips without HBM (310P)."""
    if device.get("hbm_total_mb"):
        return device.get("hbm_used_mb"), device["hbm_total_mb"], "HBM"
    return device.get("memory_used_mb"), device.get("memory_total_mb"), "DDR"


def npu_family(pci_device_id=None, chip_name=None):
    """Chip family from the board's PCI device id (``0xD500``), else from the chip name (``310P3``)."""
    if pci_device_id:
        family = NPU_FAMILIES.get(pci_device_id.lower().replace("0x", "")[-4:])
        if family:
            return family
    name = (chip_name or "").upper().replace("ASCEND", "").strip()
    for prefix, family in (("310P", "Ascend 310P"), ("310", "Ascend 310"), ("910B", "Ascend 910B"),
                           ("910C", "Ascend 910C"), ("910", "Ascend 910")):
        if name.startswith(prefix):
            return family
    return None


def npu_product(devices, board=None):
    """``{product, family, chip_name, chips_per_card, memory_kind}`` of an NPU host's devices.

    ``board`` is the parsed ``npu-smi info -t board`` of one card (or None).
    An A3 prints ``Ascend910`` as chip name: two chips per card with a
    ``Phy-ID`` column tell it from the single-chip 910 (A1).
    """
    cards = {}
    for device in devices:
        cards.setdefault(device["npu_id"], []).append(device)
    chips_per_card = max([len(chips) for chips in cards.values()] or [0]) or None
    names = sorted(set(device["name"] for device in devices if device.get("name")))
    chip_name = names[0] if len(names) == 1 else (", ".join(names) or None)
    family = npu_family((board or {}).get("pci_device_id"), (board or {}).get("chip_name") or chip_name)
    if family == "Ascend 910" and chips_per_card == 2 and any(d.get("phy_id") is not None for d in devices):
        family = "Ascend 910C"
    kinds = sorted(set(device.get("memory_kind") for device in devices if device.get("memory_kind")))
    return {
        "product": NPU_PRODUCTS.get((family, chips_per_card)),
        "family": family,
        "chip_name": chip_name,
        "chips_per_card": chips_per_card,
        "memory_kind": kinds[0] if len(kinds) == 1 else (", ".join(kinds) or None),
    }


def _npu_devices(info, mapping):
    logic_ids = {}
    for row in mapping or []:
        if row.get("chip_logic_id") is not None:
            logic_ids[(row.get("npu_id"), row.get("chip_id"))] = row["chip_logic_id"]
    devices = []
    for position, chip in enumerate(info["devices"]):
        logic_id = logic_ids.get((chip["npu_id"], chip["chip_id"]))
        if logic_id is None:
            # 310P tables print the chip's logic id in their Device column.
            logic_id = chip.get("device_id")
        used, total, kind = _memory_pair(chip)
        devices.append({
            "index": logic_id if logic_id is not None else position,
            "name": chip["name"],
            "health": chip["health"] or "UNKNOWN",
            "bus_id": chip["bus_id"],
            "pci_address": normalize_pci_address(chip["bus_id"]),
            "memory_total_mb": total,
            "memory_used_mb": used,
            "memory_kind": kind,
            "npu_id": chip["npu_id"],
            "chip_id": chip["chip_id"],
            "logic_id": logic_id,
            "phy_id": chip["phy_id"],
            "hbm_total_mb": chip["hbm_total_mb"],
            "hbm_used_mb": chip["hbm_used_mb"],
            "aicore_pct": chip["aicore_pct"],
            "power_w": chip["power_w"],
            "temp_c": chip["temp_c"],
            "device_node": None,
        })
    return sorted(devices, key=lambda device: device["index"])


def _check_npu_nodes(devices, nodes, dev_root, errors):
    """Attach ``/dev/davinciN`` to each NPU and report nodes/devices without a partner."""
    by_number = dict(nodes)
    numbered = set()
    missing = []
    for device in devices:
        number = device["phy_id"] if device["phy_id"] is not None else device["index"]
        numbered.add(number)
        if number in by_number:
            device["device_node"] = by_number[number]
        else:
            node = os.path.join(dev_root, "davinci%d" % number)
            missing.append("NPU %s (%s) has no %s" % (device["index"], device["bus_id"], node))
    if missing:
        errors.append("missing device nodes: " + "; ".join(missing))
    extra = [path for number, path in nodes if number not in numbered]
    if extra:
        errors.append("device nodes without a device reported by npu-smi: " + ", ".join(extra))


def probe_npu(run, tool, ascend_root=versions.DEFAULT_ASCEND_ROOT, dev_root=DEFAULT_DEV_ROOT, errors=None):
    """Inventory of an Ascend host, probed with the ``npu-smi`` at ``tool``."""
    result = empty_inventory()
    if errors is not None:
        result["errors"] = errors
    errors = result["errors"]
    result.update(type="npu", tool=tool)

    info = None
    stdout = _call(run, [tool, "info"], errors)
    if stdout is not None:
        info = _parse(npu_smi.parse_info, stdout, errors)

    devices = []
    if info is not None:
        mapping = None
        if info["devices"]:
            stdout = _call(run, [tool, "info", "-m"], errors)
            if stdout is not None:
                mapping = _parse(npu_smi.parse_info_m, stdout, errors)
        devices = _npu_devices(info, mapping)
        result["driver_version"] = info["driver_version"]
    result["devices"] = devices
    result["count"] = len(devices)

    if not result["driver_version"]:
        result["driver_version"] = _read_version(
            os.path.join(ascend_root, "driver", "version.info"), versions.parse_driver_version_info, errors)

    board = None
    if devices:
        first = min(devices, key=lambda device: (device["npu_id"], device["chip_id"]))
        stdout = _call(run, [tool, "info", "-t", "board", "-i", str(first["npu_id"]), "-c", "0"], errors)
        if stdout is not None:
            board = _parse(npu_smi.parse_board, stdout, errors)
            if board is not None:
                result["firmware_version"] = board.get("firmware_version") or None
        result.update(npu_product(devices, board))
    if not result["firmware_version"]:
        result["firmware_version"] = _read_version(
            os.path.join(ascend_root, "firmware", "version.info"), versions.parse_firmware_version_info, errors)

    try:
        result["cann_version"] = versions.find_cann_version(ascend_root)[0]
    except (OSError, ValueError) as exc:
        errors.append("cannot read the CANN toolkit version: %s" % exc)

    nodes = list_device_nodes(dev_root, _NPU_NODE_RE)
    result["device_nodes"] = [path for dummy, path in nodes]
    if info is not None:
        _check_npu_nodes(devices, nodes, dev_root, errors)
    return result


def _gpu_device(row, errors):
    reported = []
    for field in NVIDIA_QUERY_FIELDS:
        problem = nvidia_smi.query_error(row.get(field))
        if problem:
            reported.append((field, problem))
            row[field] = None
    problems = ["%s: %s" % item for item in reported]
    try:
        index = int(row["index"])
    except (TypeError, ValueError):
        raise ValueError("nvidia-smi --query-gpu: GPU index %r is not a number" % (row.get("index"),)) from None

    def number(field, kind):
        value = row.get(field)
        if value is None:
            return None
        try:
            return kind(float(value)) if kind is int else kind(value)
        except ValueError:
            problems.append("%s: %r is not a number" % (field, value))
            return None

    bus_id = row.get("pci.bus_id")
    device = {
        "index": index,
        "name": row.get("name"),
        "health": "OK",
        "bus_id": bus_id,
        "pci_address": None,
        "memory_total_mb": number("memory.total", int),
        "memory_used_mb": number("memory.used", int),
        "uuid": row.get("uuid"),
        "temp_c": number("temperature.gpu", int),
        "power_w": number("power.draw", float),
    }
    try:
        device["pci_address"] = normalize_pci_address(bus_id)
    except ValueError as exc:
        problems.append(str(exc))
    if reported:
        device["health"] = reported[0][1]
    if problems:
        errors.append("GPU %d: nvidia-smi reports %s" % (index, "; ".join(problems)))
    return device


def probe_gpu(run, tool, dev_root=DEFAULT_DEV_ROOT, errors=None):
    """Inventory of an NVIDIA host, probed with the ``nvidia-smi`` at ``tool``."""
    result = empty_inventory()
    if errors is not None:
        result["errors"] = errors
    errors = result["errors"]
    result.update(type="gpu", tool=tool)

    argv = [tool, "--query-gpu=" + ",".join(NVIDIA_QUERY_FIELDS), "--format=csv,noheader,nounits"]
    stdout = _call(run, argv, errors)
    rows = None
    if stdout is not None:
        rows = _parse(nvidia_smi.parse_query_csv, stdout, errors, NVIDIA_QUERY_FIELDS)
    devices = []
    for row in rows or []:
        try:
            devices.append(_gpu_device(row, errors))
        except ValueError as exc:
            errors.append("unparseable output: %s" % exc)
    devices.sort(key=lambda device: device["index"])
    result["devices"] = devices
    result["count"] = len(devices)
    for row in rows or []:
        if row.get("driver_version") and not nvidia_smi.query_error(row["driver_version"]):
            result["driver_version"] = row["driver_version"]
            break

    nodes = list_device_nodes(dev_root, _GPU_NODE_RE)
    result["device_nodes"] = [path for dummy, path in nodes]
    if rows is not None and len(nodes) != len(devices):
        errors.append("%d %s device nodes found but nvidia-smi reports %d GPUs" % (
            len(nodes), os.path.join(dev_root, "nvidiaN"), len(devices)))
    return result


def gather_accelerators(run, npu_smi_path=None, nvidia_smi_path=None,
                        ascend_root=versions.DEFAULT_ASCEND_ROOT, dev_root=DEFAULT_DEV_ROOT, errors=None):
    """Build the accelerator inventory.

    ``npu_smi_path``/``nvidia_smi_path`` are the tools found on the host (None
    when absent). ``npu-smi`` wins over ``nvidia-smi``; without either the
    type is ``none``. ``errors`` may carry problems found before probing
    (e.g. while looking for the tools); it is extended in place.
    """
    errors = [] if errors is None else errors
    if npu_smi_path:
        return probe_npu(run, npu_smi_path, ascend_root, dev_root, errors)
    if nvidia_smi_path:
        return probe_gpu(run, nvidia_smi_path, dev_root, errors)
    result = empty_inventory()
    result["errors"] = errors
    nodes = list_device_nodes(dev_root, _NPU_NODE_RE) + list_device_nodes(dev_root, _GPU_NODE_RE)
    result["device_nodes"] = [path for dummy, path in nodes]
    if nodes:
        errors.append("device nodes %s exist but neither npu-smi nor nvidia-smi was found"
                      % ", ".join(result["device_nodes"]))
    return result
