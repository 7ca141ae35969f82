# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Parsers for the text printed by Huawei Ascend ``npu-smi``.

Everything here is pure: each function takes the captured stdout of one
``npu-smi`` invocation and returns plain Python data. Unparseable input raises
``ValueError`` with a message that names the command and the offending line.

Covered outputs:

* ``npu-smi info`` - device table, process table and the version header
  (24.x/25.x 98-column layout, the narrower 23.0 layout, the A3 layout with a
  ``Chip  Phy-ID`` column and two chips per NPU, ``Process memory(B)``).
* ``npu-smi info -l`` / ``-m`` / ``-t board`` / ``-t health`` and the other
  TAB-indented ``Key : value`` queries.
* ``npu-smi info -t topo`` - link matrix plus the per-NPU CPU affinity.
"""

from __future__ import annotations

import re

_BUS_ID_RE = re.compile(r"^[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]$")
_VERSION_RE = re.compile(r"npu-smi\s+(?P<tool>\S+)\s+Version:\s*(?P<version>\S+)")
_NO_PROCESS_RE = re.compile(r"^No running processes found in NPU\s+(?P<npu>\d+)$")
_NAME_CELL_RE = re.compile(r"^(?P<npu>\d+)\s+(?P<name>\S.*)$")
_CHIP_CELL_RE = re.compile(r"^(?P<chip>\d+)(?:\s+(?P<phy>\d+|-))?$")
_PROC_ID_CELL_RE = re.compile(r"^(?P<npu>\d+)\s+(?P<chip>\d+)$")
_PAIR = r"(\S+?)\s*/\s*(\S+)"
_ROW1_USAGE_RE = re.compile(r"^(?P<power>\S+)\s+(?P<temp>\S+)\s+" + _PAIR + r"$")
_ROW2_USAGE_RE = re.compile(r"^(?P<aicore>\S+)\s+" + _PAIR + r"\s+" + _PAIR + r"$")
_KV_RE = re.compile(r"^(?P<key>[^:]*[^:\s])\s*:\s?(?P<value>.*)$")
_TOPO_LABEL_RE = re.compile(r"^(?P<kind>NPU|Phy-ID|NIC)(?P<id>\d+)$")
_CPULIST_RE = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
_MISSING = ("-", "NA", "N/A", "")


def _error(command, message, lineno=None, line=None):
    """Build the ValueError every parser raises, naming the command and the line."""
    text = "npu-smi %s: %s" % (command, message)
    if line is not None:
        text += " (line %d: %r)" % (lineno, line)
    return ValueError(text)


def _number(token, kind, command, lineno, line):
    """Convert a table token to int/float; ``-``/``NA`` become None."""
    token = token.strip()
    if token in _MISSING:
        return None
    try:
        return kind(token)
    except ValueError:
        raise _error(command, "expected a number, got %r" % token, lineno, line) from None


def normalize_key(key):
    """Turn an ``npu-smi`` label into a snake_case key.

    ``Firmware Version`` -> ``firmware_version``,
    ``HBM Capacity(MB)`` -> ``hbm_capacity_mb``,
    ``Aicore Usage Rate(%)`` -> ``aicore_usage_rate_pct``.
    """
    key = key.replace("%", "pct")
    key = re.sub(r"[^0-9A-Za-z]+", "_", key.strip())
    return key.strip("_").lower()


# ---------------------------------------------------------------------------
# npu-smi info (main table)
# ---------------------------------------------------------------------------

def _table_cells(command, lineno, line):
    body = line.strip()
    if not body.endswith("|") or len(body) < 2:
        raise _error(command, "truncated table row", lineno, line)
    return [cell.strip() for cell in body.split("|")[1:-1]]


def _parse_name_row(cells, lineno, line):
    command = "info"
    if len(cells) != 3:
        raise _error(command, "expected 3 columns in a device row", lineno, line)
    name_match = _NAME_CELL_RE.match(cells[0])
    usage = _ROW1_USAGE_RE.match(cells[2])
    if not name_match or not cells[1] or not usage:
        raise _error(command, "cannot parse device row", lineno, line)
    health = cells[1]
    if health.upper() == "OK":
        health = "OK"
    return {
        "npu_id": int(name_match.group("npu")),
        "name": name_match.group("name").strip(),
        "health": health,
        "power_w": _number(usage.group("power"), float, command, lineno, line),
        "temp_c": _number(usage.group("temp"), int, command, lineno, line),
        "hugepages_used": _number(usage.group(3), int, command, lineno, line),
        "hugepages_total": _number(usage.group(4), int, command, lineno, line),
    }


def _parse_chip_row(cells, lineno, line):
    command = "info"
    if len(cells) != 3:
        raise _error(command, "expected 3 columns in a chip row", lineno, line)
    chip = _CHIP_CELL_RE.match(cells[0])
    usage = _ROW2_USAGE_RE.match(cells[2])
    if not chip or not _BUS_ID_RE.match(cells[1]) or not usage:
        raise _error(command, "cannot parse chip row", lineno, line)
    phy = chip.group("phy")
    return {
        "chip_id": int(chip.group("chip")),
        "phy_id": int(phy) if phy not in (None, "-") else None,
        "bus_id": cells[1],
        "aicore_pct": _number(usage.group("aicore"), int, command, lineno, line),
        "memory_used_mb": _number(usage.group(2), int, command, lineno, line),
        "memory_total_mb": _number(usage.group(3), int, command, lineno, line),
        "hbm_used_mb": _number(usage.group(4), int, command, lineno, line),
        "hbm_total_mb": _number(usage.group(5), int, command, lineno, line),
    }


def _parse_process_row(cells, memory_unit, lineno, line):
    command = "info"
    if len(cells) != 4:
        raise _error(command, "expected 4 columns in a process row", lineno, line)
    ids = _PROC_ID_CELL_RE.match(cells[0])
    if not ids or not cells[1].isdigit():
        raise _error(command, "cannot parse process row", lineno, line)
    memory = _number(cells[3], int, command, lineno, line)
    if memory is not None and memory_unit == "B":
        memory = memory // (1024 * 1024)
    return {
        "npu_id": int(ids.group("npu")),
        "chip_id": int(ids.group("chip")),
        "pid": int(cells[1]),
        "name": cells[2] or None,
        "memory_mb": memory,
    }


def parse_info(text):
    """Parse ``npu-smi info``.

    Returns a dict with

    * ``npu_smi_version`` / ``driver_version``: the two versions of the header
      line (both are the driver package version), or None when the header is
      not part of the output;
    * ``devices``: one dict per chip row pair, in output order, with ``npu_id``,
      ``chip_id``, ``phy_id`` (A3 layout only, else None), ``name``, ``health``,
      ``power_w``, ``temp_c``, ``hugepages_used``, ``hugepages_total``,
      ``bus_id`` (as printed, upper-case hex), ``aicore_pct``,
      ``memory_used_mb``, ``memory_total_mb`` (DDR), ``hbm_used_mb`` and
      ``hbm_total_mb``; numbers printed as ``-`` are None;
    * ``processes``: one dict per process row with ``npu_id``, ``chip_id``,
      ``pid``, ``name`` (None when npu-smi prints it blank) and ``memory_mb``
      (converted from bytes when the header says ``Process memory(B)``).
    """
    command = "info"
    result = {"npu_smi_version": None, "driver_version": None, "devices": [], "processes": []}
    section = None
    pending = None
    memory_unit = "MB"
    seen_table = False

    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("+"):
            if set(line) - set("+-="):
                raise _error(command, "unexpected separator", lineno, raw)
            seen_table = True
            continue
        if not line.startswith("|"):
            raise _error(command, "unexpected line outside the table", lineno, raw)
        seen_table = True
        cells = _table_cells(command, lineno, raw)
        joined = " ".join(cells)

        version = _VERSION_RE.search(joined)
        if version:
            result["npu_smi_version"] = version.group("tool")
            result["driver_version"] = version.group("version")
            continue
        if "Process id" in joined:
            if pending is not None:
                raise _error(command, "device row without its chip row", pending[0], pending[1])
            section = "processes"
            unit = re.search(r"Process memory\((\w+)\)", joined)
            memory_unit = unit.group(1) if unit else "MB"
            continue
        if len(cells) == 3 and ("Health" in cells[1] or "Bus-Id" in cells[1]):
            section = "devices"
            continue
        if len(cells) == 1 and _NO_PROCESS_RE.match(cells[0]):
            section = "processes"
            continue

        if section == "processes" or (section is None and len(cells) == 4):
            result["processes"].append(_parse_process_row(cells, memory_unit, lineno, raw))
            continue

        # Device section, or a table excerpt that starts at a device row.
        if pending is None:
            if len(cells) == 3 and _BUS_ID_RE.match(cells[1]):
                raise _error(command, "chip row without a preceding device row", lineno, raw)
            pending = (lineno, raw, _parse_name_row(cells, lineno, raw))
        else:
            device = pending[2]
            device.update(_parse_chip_row(cells, lineno, raw))
            result["devices"].append(device)
            pending = None

    if pending is not None:
        raise _error(command, "device row without its chip row", pending[0], pending[1])
    if not seen_table:
        raise _error(command, "no device table in output")
    return result


# ---------------------------------------------------------------------------
# Key/value outputs (info -l, -t board, -t health, -t usages, -t common, ...)
# ---------------------------------------------------------------------------

def parse_key_value_blocks(text, command="info -t"):
    """Parse TAB-indented ``Key : value`` output into blocks.

    Blank lines separate blocks. Returns a list of lists of ``(key, value)``
    tuples (keys as printed, values stripped) so repeated keys such as the two
    ``Temperature(C)`` of ``-t common`` survive.
    """
    blocks = []
    current = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            if current:
                blocks.append(current)
                current = []
            continue
        match = _KV_RE.match(line)
        if not match:
            raise _error(command, "expected 'Key : value'", lineno, raw)
        current.append((match.group("key").strip(), match.group("value").strip()))
    if current:
        blocks.append(current)
    if not blocks:
        raise _error(command, "empty output")
    return blocks


def parse_key_value(text, command="info -t"):
    """Parse a ``Key : value`` output into one dict with snake_case keys.

    Later blocks do not overwrite keys of earlier ones (``-t common`` prints a
    second ``Temperature(C)`` for the MCU after a blank line).
    """
    result = {}
    for block in parse_key_value_blocks(text, command):
        for key, value in block:
            result.setdefault(normalize_key(key), value)
    return result


def parse_board(text):
    """Parse ``npu-smi info -t board -i N [-c C]``.

    Returns a dict with snake_case keys, e.g. ``npu_id``, ``software_version``,
    ``firmware_version``, ``pcie_bus_info``, ``chip_name``; values are strings.
    """
    return parse_key_value(text, "info -t board")


def parse_health(text):
    """Parse ``npu-smi info -t health -i N [-c C]`` and return the health word.

    The chip-level form prints ``Health Status``, the device-level form
    ``Health``. ``ok`` in any case is returned as ``OK``.
    """
    data = parse_key_value(text, "info -t health")
    for key in ("health_status", "health"):
        if data.get(key):
            value = data[key]
            return "OK" if value.upper() == "OK" else value
    raise _error("info -t health", "no 'Health Status' or 'Health' field in output")


def _int_or_none(value):
    value = value.strip()
    if value in _MISSING:
        return None
    return int(value)


def parse_info_l(text):
    """Parse ``npu-smi info -l``.

    Returns ``{"total_count": int or None, "npus": [...]}`` where each NPU is a
    dict with snake_case keys (``npu_id``, ``chip_count`` as ints; optional
    ``product_name``, ``serial_number`` as strings).
    """
    command = "info -l"
    total = None
    npus = []
    current = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _KV_RE.match(line)
        if not match:
            raise _error(command, "expected 'Key : value'", lineno, raw)
        key = normalize_key(match.group("key"))
        value = match.group("value").strip()
        if key in ("total_count", "npu_id", "chip_count") and not value.isdigit():
            raise _error(command, "expected an integer", lineno, raw)
        if key == "total_count":
            total = int(value)
        elif key == "npu_id":
            current = {"npu_id": int(value)}
            npus.append(current)
        elif current is None:
            raise _error(command, "field before the first 'NPU ID'", lineno, raw)
        elif key == "chip_count":
            current[key] = int(value)
        else:
            current[key] = value
    if total is None and not npus:
        raise _error(command, "no 'Total Count' or 'NPU ID' in output")
    return {"total_count": total, "npus": npus}


_MAP_COLUMNS = {
    "NPU ID": "npu_id",
    "Slot ID": "slot_id",
    "Chip ID": "chip_id",
    "Chip Logic ID": "chip_logic_id",
    "Chip Phy-ID": "chip_phy_id",
    "Chip Name": "chip_name",
}


def parse_info_m(text):
    """Parse ``npu-smi info -m`` (NPU ID / Chip ID / Chip Logic ID mapping).

    Handles the ``NPU ID, Chip ID, Chip Logic ID, Chip Name`` layout, the one
    with an extra ``Chip Phy-ID`` column and the ``NPU ID, Slot ID, Chip ID,
    Chip Phy-ID, Chip Name`` layout. Returns a list of dicts with the keys of
    the columns present (``npu_id``, ``slot_id``, ``chip_id``, ``chip_logic_id``,
    ``chip_phy_id`` as int or None for ``-``; ``chip_name`` as a string). MCU
    rows (``chip_logic_id`` None, ``chip_name`` ``Mcu``) are kept.
    """
    command = "info -m"
    columns = None
    rows = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if columns is None:
            names = re.split(r"\s{2,}|\t", line)
            if "NPU ID" not in names or "Chip ID" not in names or names[-1] != "Chip Name":
                raise _error(command, "expected a header with 'NPU ID', 'Chip ID' ... 'Chip Name'", lineno, raw)
            unknown = [name for name in names if name not in _MAP_COLUMNS]
            if unknown:
                raise _error(command, "unknown column %r" % unknown[0], lineno, raw)
            columns = [_MAP_COLUMNS[name] for name in names]
            continue
        values = line.split(None, len(columns) - 1)
        if len(values) != len(columns):
            raise _error(command, "expected %d columns" % len(columns), lineno, raw)
        row = {}
        for key, value in zip(columns, values):
            if key == "chip_name":
                row[key] = value.strip()
                continue
            if value not in _MISSING and not value.isdigit():
                raise _error(command, "expected an integer or '-' in column %s" % key, lineno, raw)
            row[key] = _int_or_none(value)
        rows.append(row)
    if columns is None:
        raise _error(command, "empty output")
    return rows


# ---------------------------------------------------------------------------
# npu-smi info -t topo
# ---------------------------------------------------------------------------

def parse_topo(text):
    """Parse ``npu-smi info -t topo``.

    Returns a dict with

    * ``labels``: the column labels (``NPU0``..., ``Phy-ID0``... on A3, plus
      any ``NICn`` columns);
    * ``matrix``: ``{row_label: {column_label: cell}}`` with cells as printed
      (``X``, ``HCCS``, ``PIX``, ``PXB``, ``PHB``, ``SYS``, ``SIO``, ``NA``...);
    * ``cpu_affinity``: ``{npu_number: cpulist string or None}`` for the NPU
      rows - the last field of each row; None when the tool prints no
      ``CPU Affinity`` column (A3 on ARM hosts) or ``NA``.

    Parsing stops at ``Legend:``.
    """
    command = "info -t topo"
    labels = None
    has_affinity = False
    matrix = {}
    affinity = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Legend"):
            break
        if labels is None:
            has_affinity = line.endswith("CPU Affinity")
            head = line[: -len("CPU Affinity")] if has_affinity else line
            labels = head.split()
            if not labels or not all(_TOPO_LABEL_RE.match(label) for label in labels):
                raise _error(command, "expected a header of NPUn/Phy-IDn columns", lineno, raw)
            continue
        tokens = line.split()
        label = _TOPO_LABEL_RE.match(tokens[0])
        if not label:
            raise _error(command, "expected a row starting with NPUn/Phy-IDn", lineno, raw)
        cells = tokens[1:1 + len(labels)]
        rest = tokens[1 + len(labels):]
        if len(cells) != len(labels):
            raise _error(command, "expected %d matrix cells" % len(labels), lineno, raw)
        if len(rest) > 1 or (rest and not has_affinity):
            raise _error(command, "unexpected trailing fields", lineno, raw)
        cpus = rest[0] if rest else None
        if cpus in _MISSING:
            cpus = None
        if cpus is not None and not _CPULIST_RE.match(cpus):
            raise _error(command, "CPU affinity %r is not a cpulist" % cpus, lineno, raw)
        matrix[tokens[0]] = dict(zip(labels, cells))
        if label.group("kind") != "NIC":
            affinity[int(label.group("id"))] = cpus
    if labels is None:
        raise _error(command, "empty output")
    if not matrix:
        raise _error(command, "header without matrix rows")
    return {"labels": labels, "matrix": matrix, "cpu_affinity": affinity}
