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


# Header names of the device table (lower case, as printed) -> key of the
# parsed chip. Pairs ("used / total") map to two keys. Names not listed here
# are kept, as printed, under ``extra``.
_DEVICE_COLUMNS = {
    "npu": "npu_id",
    "npu id": "npu_id",
    "name": "name",
    "health": "health",
    "power(w)": "power_w",
    "temp(c)": "temp_c",
    "hugepages-usage(page)": ("hugepages_used", "hugepages_total"),
    "chip": "chip_id",
    "phy-id": "phy_id",
    "device": "device_id",
    "bus-id": "bus_id",
    "aicore(%)": "aicore_pct",
    "npu util(%)": "aicore_pct",
    "memory-usage(mb)": ("memory_used_mb", "memory_total_mb"),
    "ddr-usage(mb)": ("memory_used_mb", "memory_total_mb"),
    "hbm-usage(mb)": ("hbm_used_mb", "hbm_total_mb"),
}
_PROCESS_COLUMNS = {
    "npu": "npu_id",
    "npu id": "npu_id",
    "chip": "chip_id",
    "process id": "pid",
    "process name": "name",
    "process memory(mb)": "memory_mb",
    "process memory(b)": "memory_mb",
    "process memory": "memory_mb",
    "process id in container": "container_pid",
}
_INT_KEYS = ("npu_id", "chip_id", "phy_id", "device_id", "temp_c", "aicore_pct", "hugepages_used",
             "hugepages_total", "memory_used_mb", "memory_total_mb", "hbm_used_mb", "hbm_total_mb", "pid",
             "memory_mb", "container_pid")
_CHIP_KEYS = ("npu_id", "chip_id", "phy_id", "device_id", "name", "health", "power_w", "temp_c",
              "hugepages_used", "hugepages_total", "bus_id", "aicore_pct", "memory_used_mb", "memory_total_mb",
              "hbm_used_mb", "hbm_total_mb")
_VALUE_TOKEN_RE = re.compile(r"[^\s/]+\s*/\s*[^\s/]+|\S+")
_PAIR_RE = re.compile(r"^(?P<used>[^\s/]+)\s*/\s*(?P<total>[^\s/]+)$")
# The layout every 24.x-26.x A2 table prints; used for excerpts that start
# below the header (the header rows are then not part of the output).
_DEFAULT_DEVICE_HEADER = [
    [["NPU", "Name"], ["Health"], ["Power(W)", "Temp(C)", "Hugepages-Usage(page)"]],
    [["Chip"], ["Bus-Id"], ["AICore(%)", "Memory-Usage(MB)", "HBM-Usage(MB)"]],
]
_DEFAULT_PROCESS_HEADER = [["NPU", "Chip"], ["Process id"], ["Process name"], ["Process memory(MB)"]]


def _header_names(cells):
    """Split each header cell into its column names (separated by 2+ spaces or a TAB)."""
    return [[name for name in re.split(r"\s{2,}|\t", cell.strip()) if name] for cell in cells]


def _split_cell(cell, names):
    """Values of one data cell for its header ``names``; None when they do not fit."""
    if len(names) <= 1:
        return [cell.strip()]
    if all(_DEVICE_COLUMNS.get(name.lower()) in ("npu_id", "name", "chip_id", "phy_id", "device_id")
           for name in names):
        # "0     910B3", "1     1": ids and a name that may hold spaces last.
        values = cell.split(None, len(names) - 1)
    else:
        values = _VALUE_TOKEN_RE.findall(cell)
    if len(values) != len(names):
        return None
    return values


def _convert(key, value, context):
    """Convert one printed value; ``-``/``NA`` become None."""
    command, lineno, line = context
    if key in ("name", "health", "bus_id"):
        return value or None
    if key == "power_w":
        return _number(value, float, command, lineno, line)
    if key in _INT_KEYS:
        return _number(value, int, command, lineno, line)
    return value


def _row_values(cells, header, mapping, context, what):
    """Map the cells of one data row onto the keys of its header row."""
    command, lineno, line = context
    if len(cells) != len(header):
        raise _error(command, "%s row has %d columns, its header %d" % (what, len(cells), len(header)),
                     lineno, line)
    result = {"extra": {}}
    for cell, names in zip(cells, header):
        if not names:
            if cell:
                raise _error(command, "value %r under an empty header cell" % cell, lineno, line)
            continue
        values = _split_cell(cell, names)
        if values is None:
            raise _error(command, "%s row: cannot split %r into %s" % (what, cell, ", ".join(names)), lineno, line)
        for name, value in zip(names, values):
            key = mapping.get(name.lower())
            if key is None:
                result["extra"][name] = value
            elif isinstance(key, tuple):
                pair = _PAIR_RE.match(value)
                if not pair:
                    if value.strip() in _MISSING:
                        result[key[0]] = result[key[1]] = None
                        continue
                    raise _error(command, "%s: expected 'used / total', got %r" % (name, value), lineno, line)
                result[key[0]] = _convert(key[0], pair.group("used"), context)
                result[key[1]] = _convert(key[1], pair.group("total"), context)
            else:
                result[key] = _convert(key, value, context)
    return result


def _chip(first, second, context):
    command, lineno, line = context
    chip = dict((key, None) for key in _CHIP_KEYS)
    extra = dict(first.pop("extra"))
    extra.update(second.pop("extra"))
    chip.update(first)
    for key, value in second.items():
        if key in first and first[key] is not None and value is not None and first[key] != value:
            raise _error(command, "%s differs between the two rows of a chip" % key, lineno, line)
        if value is not None or key not in first:
            chip[key] = value
    if chip["npu_id"] is None:
        raise _error(command, "no NPU id in the device rows", lineno, line)
    if chip["chip_id"] is None:
        chip["chip_id"] = 0
    if chip["bus_id"] is not None and not _BUS_ID_RE.match(chip["bus_id"]):
        raise _error(command, "Bus-Id %r is not a PCI address" % chip["bus_id"], lineno, line)
    health = chip["health"]
    if health and health.upper() == "OK":
        chip["health"] = "OK"
    chip["extra"] = extra
    return chip


def parse_info(text):
    """Parse ``npu-smi info`` by the names in its header rows.

    The device table is read column by column from its two header rows
    (``NPU Name | Health | Power(W) Temp(C) Hugepages-Usage(page)`` and
    ``Chip [Phy-ID|Device] | Bus-Id | AICore(%) Memory-Usage(MB) [HBM-Usage(MB)]``),
    so every width, the 310P/300I Duo layout (``Memory-Usage(MB)`` only, Power
    ``NA``, two chips of one card on one Bus-Id), sparse NPU ids and the A3
    layout read the same way; the process table likewise from its header
    (four columns, or five with ``Process id in container`` on 26.x).
    Columns the parser does not know are kept under ``extra``; a row that does
    not fit its header is an error naming the driver version and the line.

    Returns a dict with

    * ``npu_smi_version`` / ``driver_version``: the two versions of the header
      line (both are the driver package version), or None when the header is
      not part of the output;
    * ``devices``: one dict per chip (row pair), in output order, with
      ``npu_id``, ``chip_id``, ``phy_id`` (A3), ``device_id`` (310P
      ``Device`` column), ``name``, ``health``, ``power_w``, ``temp_c``,
      ``hugepages_used``, ``hugepages_total``, ``bus_id`` (as printed),
      ``aicore_pct``, ``memory_used_mb``, ``memory_total_mb`` (DDR),
      ``hbm_used_mb``, ``hbm_total_mb`` and ``extra``; values printed as
      ``-``/``NA`` and columns the layout lacks are None;
    * ``processes``: one dict per process row with ``npu_id``, ``chip_id``,
      ``pid``, ``name`` (None when printed blank), ``memory_mb`` (converted
      from bytes when the header says ``Process memory(B)``),
      ``container_pid`` (None for ``NA`` or without the column) and ``extra``.
    """
    result = {"npu_smi_version": None, "driver_version": None, "devices": [], "processes": []}
    command = "info"
    section = None
    device_header = []
    process_header = None
    memory_unit = "MB"
    pending = None
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
        context = (command, lineno, raw)

        version = _VERSION_RE.search(joined)
        if version:
            result["npu_smi_version"] = version.group("tool")
            result["driver_version"] = version.group("version")
            command = "info (driver %s)" % result["driver_version"]
            continue
        if "Process id" in joined or "Process name" in joined:
            if pending is not None:
                raise _error(command, "device row without its chip row", pending[0], pending[1])
            section = "processes"
            process_header = _header_names(cells)
            unit = re.search(r"Process memory\((\w+)\)", joined)
            memory_unit = unit.group(1) if unit else "MB"
            continue
        if "Health" in joined and "Name" in joined or "Bus-Id" in joined and ("AICore" in joined or "Chip" in joined):
            if section != "device_header":
                device_header = []
            section = "device_header"
            device_header.append(_header_names(cells))
            continue
        if len(cells) == 1 and _NO_PROCESS_RE.match(cells[0]):
            section = "processes"
            continue

        if section is None:
            # An excerpt that starts below the header rows.
            section = "processes" if len(cells) in (4, 5) else "devices"
            if section == "processes":
                process_header = list(_DEFAULT_PROCESS_HEADER)
                if len(cells) == 5:
                    process_header.append(["Process id in container"])
        if section == "device_header":
            if len(device_header) != 2:
                raise _error(command, "expected two device header rows, found %d" % len(device_header),
                             lineno, raw)
            section = "devices"
        if section == "processes":
            process = _row_values(cells, process_header, _PROCESS_COLUMNS, context, "process")
            for key in ("npu_id", "chip_id", "pid", "name", "memory_mb", "container_pid"):
                process.setdefault(key, None)
            if process["npu_id"] is None or process["pid"] is None:
                raise _error(command, "process row without NPU id or process id", lineno, raw)
            if process["memory_mb"] is not None and memory_unit == "B":
                process["memory_mb"] = process["memory_mb"] // (1024 * 1024)
            if process["chip_id"] is None:
                process["chip_id"] = 0
            result["processes"].append(process)
            continue

        header = device_header or _DEFAULT_DEVICE_HEADER
        if pending is None:
            bus_column = _bus_column(header[1])
            if bus_column is not None and bus_column < len(cells) and _BUS_ID_RE.match(cells[bus_column]):
                raise _error(command, "chip row without a preceding device row", lineno, raw)
            pending = (lineno, raw, _row_values(cells, header[0], _DEVICE_COLUMNS, context, "device"))
        else:
            second = _row_values(cells, header[1], _DEVICE_COLUMNS, context, "chip")
            result["devices"].append(_chip(pending[2], second, context))
            pending = None

    if pending is not None:
        raise _error(command, "device row without its chip row", pending[0], pending[1])
    if not seen_table:
        raise _error(command, "no device table in output")
    return result


def _bus_column(header_row):
    for position, names in enumerate(header_row):
        if any(name.lower() == "bus-id" for name in names):
            return position
    return None


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
