# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Parsers for the text printed by NVIDIA ``nvidia-smi``.

Pure functions over captured stdout; unparseable input raises ``ValueError``
naming the command and the offending line.

* ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``
* ``nvidia-smi topo -m`` (TAB-separated or with TABs expanded to spaces; with
  ``CPU Affinity`` only, with ``NUMA Affinity`` and with ``GPU NUMA ID``)
"""

from __future__ import annotations

import re

_HEADER_CELL_RE = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$")
_UNIT_TAG_RE = re.compile(r"^(?P<name>.*?)\s*\[(?P<unit>[^\]]+)\]$")
_VALUE_UNIT_RE = re.compile(r"^(?P<number>[-+]?\d+(?:\.\d+)?) (?P<unit>KiB|MiB|GiB|B|%|W|MHz|C)$")
_NOT_AVAILABLE = ("[N/A]", "N/A", "[Not Supported]", "Not Supported", "")
_AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_GPU_LABEL_RE = re.compile(r"^GPU(?P<index>\d+)$")
# Matrix cells: X, NVn, PIX, PXB, PHB, NODE, SYS, SOC, NA ... (unknown words tolerated).
_LINK_RE = re.compile(r"^(?:X|NV\d+|[A-Z]{2,5})$")
# Matrix columns: GPUn, NICn, and the RDMA device names of older drivers (mlx5_0, mlx4_0, ...).
_DEVICE_LABEL_RE = re.compile(r"^(?:GPU\d+|NIC\d+|[a-z][a-z0-9]*_\d+)$")
_NIC_LEGEND_RE = re.compile(r"^(?P<nic>NIC\d+):\s*(?P<name>\S+)$")
_CPULIST_RE = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")
# nvidia-smi underlines the topo -m header with SGR codes (ESC[4m ... ESC[0m), also when stdout is
# not a terminal; published copies often keep the codes without their ESC byte.
_SGR_RE = re.compile(r"\x1b?\[[0-9;]*m")


def _error(command, message, lineno=None, line=None):
    text = "nvidia-smi %s: %s" % (command, message)
    if line is not None:
        text += " (line %d: %r)" % (lineno, line)
    return ValueError(text)


def _is_header(cells):
    return all(_HEADER_CELL_RE.match(cell) for cell in cells)


def _clean_value(value):
    value = value.strip()
    if value in _NOT_AVAILABLE:
        return None
    match = _VALUE_UNIT_RE.match(value)
    if match:
        return match.group("number")
    return value


def query_error(value):
    """Return the error text of a bracketed query value, else None.

    nvidia-smi prints ``[N/A]``/``[Not Supported]`` for absent fields (not an
    error) and e.g. ``[Unknown Error]`` or ``[GPU requires reset]`` for a GPU it
    cannot talk to.
    """
    if isinstance(value, str) and value.startswith("[") and value.endswith("]"):
        if value in _NOT_AVAILABLE:
            return None
        return value[1:-1]
    return None


def parse_query_csv(text, fields=None):
    """Parse ``nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]``.

    ``fields`` is the list passed to ``--query-gpu``. Without it the output must
    carry its header line. A header line (``index, name, memory.total [MiB]``)
    is recognised and skipped whether or not ``fields`` is given.

    Returns one dict per GPU, keyed by the requested field names (or the header
    names without unit tags). Values are strings with units (`` MiB``, `` %``,
    `` W``...) removed; ``[N/A]`` and ``[Not Supported]`` become None; other
    bracketed values (errors) are kept as printed, see ``query_error``.
    """
    command = "--query-gpu"
    keys = list(fields) if fields else None
    rows = []
    header_seen = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        cells = [cell.strip() for cell in line.split(",")]
        if not header_seen and not rows and _is_header(cells):
            header_seen = True
            names = []
            for cell in cells:
                tag = _UNIT_TAG_RE.match(cell)
                names.append(tag.group("name") if tag else cell)
            if keys is None:
                keys = names
            elif len(names) != len(keys):
                raise _error(command, "header has %d fields, expected %d" % (len(names), len(keys)), lineno, raw)
            continue
        if keys is None:
            raise _error(command, "no header line and no field list", lineno, raw)
        if len(cells) != len(keys):
            raise _error(command, "expected %d comma-separated values, got %d" % (len(keys), len(cells)), lineno, raw)
        rows.append(dict(zip(keys, [_clean_value(cell) for cell in cells])))
    if not rows:
        raise _error(command, "no GPU rows in output")
    return rows


def pci_address(bus_id):
    """Map ``00000000:E3:00.0`` (nvidia-smi) to ``0000:e3:00.0`` (sysfs)."""
    if bus_id is None:
        return None
    domain, sep, rest = bus_id.strip().partition(":")
    if not sep:
        raise ValueError("nvidia-smi: %r is not a PCI bus id" % bus_id)
    if len(domain) > 4:
        domain = domain[-4:]
    return ("%s:%s" % (domain, rest)).lower()


def _numa_nodes(value, command, lineno, line):
    """``0`` -> [0], ``0-3`` -> [0, 1, 2, 3], ``0,2`` -> [0, 2]; None for ``N/A`` or empty."""
    if value is None or value in _NOT_AVAILABLE:
        return None
    if not _CPULIST_RE.match(value):
        raise _error(command, "NUMA affinity %r is neither a node number nor a range" % value, lineno, line)
    nodes = []
    for part in value.split(","):
        first, sep, last = part.partition("-")
        nodes.extend(range(int(first), int(last if sep else first) + 1))
    return nodes


def _header_fields(line, tabs):
    """Column names of the ``topo -m`` header, without the empty row-label cell."""
    if tabs:
        fields = [field.strip() for field in line.rstrip("\r\n").split("\t")]
    else:
        fields = re.split(r"\s{2,}", line.strip())
    if fields and fields[0] == "":
        fields = fields[1:]
    return fields


def _device_label(label):
    return bool(_DEVICE_LABEL_RE.match(label))


def parse_topo_matrix(text, version=None):
    """Parse ``nvidia-smi topo -m`` (and ``topo -mp``) by its header.

    The real tool separates cells with TABs and leaves cells empty (NIC rows
    have empty affinity cells, a process confined by a cgroup may get a
    blank ``CPU Affinity``); with ``GPU NUMA ID`` it pads the ``NUMA
    Affinity`` value with one more (empty) field. Every row is checked
    against the header's field count, so a row with a field too many or too
    few (two values run together, a cell lost) is reported by its line
    number instead of being read shifted. Copies whose TABs were expanded to
    spaces are read by whitespace; there an empty affinity cell cannot be
    placed and is an error. The SGR underline codes nvidia-smi puts around
    the header (``ESC[4m`` ... ``ESC[0m``, or without ESC in a pasted copy)
    are dropped. ``version`` (the driver version, when known) is named in
    error messages.

    Returns a dict with

    * ``labels``: the matrix columns in order (``GPU0``..., ``NIC0``... or
      ``mlx5_0``...);
    * ``columns``: the columns after the matrix, as printed (``CPU Affinity``,
      ``NUMA Affinity``, ``GPU NUMA ID`` and any the parser does not know);
    * ``matrix``: ``{row_label: {column_label: cell}}``, cells as printed
      (``X``, ``NV18``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``...);
    * ``cpu_affinity``: ``{gpu_index: cpulist string or None}`` (None when the
      cell is empty, ``N/A`` or the column is not printed);
    * ``numa_affinity``: ``{gpu_index: int}``, the NUMA node when the cell
      names exactly one, else None (``N/A``, empty, a range, no column);
    * ``numa_nodes``: ``{gpu_index: [int, ...] or None}``, every node of the
      ``NUMA Affinity`` cell (``0-3`` -> ``[0, 1, 2, 3]``);
    * ``gpu_numa_id``: ``{gpu_index: int or None}``;
    * ``nic_legend``: ``{"NIC0": "mlx5_0", ...}`` from the ``NIC Legend:`` block;
    * ``extra``: ``{gpu_index: {column: value}}`` for columns the parser does
      not know (tolerated, kept as printed).
    """
    command = "topo -m" + (" (driver %s)" % version if version else "")
    labels = None
    tail = []
    tabs = False
    matrix = {}
    result = {"cpu_affinity": {}, "numa_affinity": {}, "numa_nodes": {}, "gpu_numa_id": {}, "nic_legend": {},
              "extra": {}}
    in_legend = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Legend:") or line.startswith("NIC Legend:"):
            in_legend = True
            continue
        if in_legend:
            nic = _NIC_LEGEND_RE.match(line)
            if nic:
                result["nic_legend"][nic.group("nic")] = nic.group("name")
            continue
        if labels is None:
            raw = _SGR_RE.sub("", raw)
            tabs = "\t" in raw
            fields = _header_fields(raw, tabs)
            split = len(fields)
            for position, name in enumerate(fields):
                if not _device_label(name):
                    split = position
                    break
            labels, tail = fields[:split], fields[split:]
            if not any(_GPU_LABEL_RE.match(label) for label in labels):
                raise _error(command, "expected a header with GPUn columns", lineno, raw)
            if any(_device_label(name) for name in tail):
                raise _error(command, "header column %r sits between the device columns (two names run "
                             "together?)" % tail[0], lineno, raw)
            if "" in tail:
                raise _error(command, "empty header column after the device columns", lineno, raw)
            continue
        if tabs:
            cells = [cell.strip() for cell in raw.rstrip("\r\n").split("\t")]
        else:
            cells = line.split()
        label = cells[0]
        if label not in labels:
            raise _error(command, "row label %r is not a column of the header" % label, lineno, raw)
        values = cells[1:1 + len(labels)]
        rest = cells[1 + len(labels):]
        gpu = _GPU_LABEL_RE.match(label)
        if len(values) != len(labels):
            raise _error(command, "%d fields, the header has %d matrix columns; is a cell missing?" % (
                len(cells), len(labels)), lineno, raw)
        bad = [cell for cell in values if not _LINK_RE.match(cell)]
        if bad:
            raise _error(command, "%r is not a link type: are two values run together or a cell lost?" % bad[0],
                         lineno, raw)
        if tabs and "GPU NUMA ID" in tail and (gpu or any(rest)):
            # nvidia-smi pads the NUMA Affinity value with one empty field.
            pad = tail.index("GPU NUMA ID")
            if len(rest) != len(tail) + 1 or rest[pad] != "":
                raise _error(command, "%d fields, the header has %d; are two values run together or a cell "
                             "lost?" % (len(cells), 1 + len(labels) + len(tail) + 1), lineno, raw)
            rest = rest[:pad] + rest[pad + 1:]
        if not gpu and not any(rest):
            rest = []
        if rest and len(rest) != len(tail) or (gpu and len(rest) != len(tail)):
            if not tabs and gpu and len(rest) < len(tail):
                raise _error(command, "%d affinity values for %d columns in a copy without TABs: cannot tell "
                             "which cell is empty" % (len(rest), len(tail)), lineno, raw)
            raise _error(command, "%d fields, the header has %d; are two values run together or a cell "
                         "lost?" % (len(cells), 1 + len(labels) + len(tail)), lineno, raw)
        matrix[label] = dict(zip(labels, values))
        if not gpu:
            continue
        index = int(gpu.group("index"))
        row = dict(zip(tail, rest))
        cpus = row.get("CPU Affinity")
        if cpus in _NOT_AVAILABLE:
            cpus = None
        if cpus is not None and not _CPULIST_RE.match(cpus):
            raise _error(command, "CPU affinity %r is not a cpulist" % cpus, lineno, raw)
        nodes = _numa_nodes(row.get("NUMA Affinity"), command, lineno, raw)
        result["cpu_affinity"][index] = cpus
        result["numa_nodes"][index] = nodes
        result["numa_affinity"][index] = nodes[0] if nodes and len(nodes) == 1 else None
        numa_id = row.get("GPU NUMA ID")
        if numa_id not in _NOT_AVAILABLE and numa_id is not None and not numa_id.isdigit():
            raise _error(command, "GPU NUMA ID %r is not a number" % numa_id, lineno, raw)
        result["gpu_numa_id"][index] = int(numa_id) if numa_id and numa_id.isdigit() else None
        unknown = dict((name, value) for name, value in row.items() if name not in _AFFINITY_COLUMNS)
        if unknown:
            result["extra"][index] = unknown
    if labels is None:
        raise _error(command, "empty output")
    if not matrix:
        raise _error(command, "header without matrix rows")
    result["labels"] = labels
    result["columns"] = tail
    result["matrix"] = matrix
    return result
