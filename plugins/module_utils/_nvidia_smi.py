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
_NIC_LEGEND_RE = re.compile(r"^(?P<nic>NIC\d+):\s*(?P<name>\S+)$")
_CPULIST_RE = re.compile(r"^\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*$")


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


def _split_header(line):
    """Split the topo header into device labels and trailing affinity columns."""
    rest = line.strip()
    tail = []
    while rest:
        for name in _AFFINITY_COLUMNS:
            if rest.endswith(name):
                tail.insert(0, name)
                rest = rest[: -len(name)].rstrip()
                break
        else:
            break
    return rest.split(), tail


def _numa_value(value):
    if value is None or value in _NOT_AVAILABLE:
        return None
    if value.isdigit():
        return int(value)
    return value


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict with

    * ``labels``: the matrix columns in order (``GPU0``..., ``NIC0``... or
      ``mlx5_0``...);
    * ``matrix``: ``{row_label: {column_label: cell}}``, cells as printed
      (``X``, ``NV18``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``...);
    * ``cpu_affinity``: ``{gpu_index: cpulist string or None}``;
    * ``numa_affinity``: ``{gpu_index: int, or None for N/A}`` (empty dict
      values are None when the column is not printed by the driver);
    * ``gpu_numa_id``: ``{gpu_index: int or None}``, same rules;
    * ``nic_legend``: ``{"NIC0": "mlx5_0", ...}`` from the ``NIC Legend:`` block.
    """
    command = "topo -m"
    labels = None
    tail = []
    matrix = {}
    result = {"cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}, "nic_legend": {}}
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
            labels, tail = _split_header(raw)
            if not any(_GPU_LABEL_RE.match(label) for label in labels):
                raise _error(command, "expected a header with GPUn columns", lineno, raw)
            if tail != list(_AFFINITY_COLUMNS[: len(tail)]):
                raise _error(command, "unexpected affinity columns %r" % tail, lineno, raw)
            continue
        tokens = line.split()
        if tokens[0] not in labels:
            raise _error(command, "row label %r is not a column of the header" % tokens[0], lineno, raw)
        cells = tokens[1:1 + len(labels)]
        rest = tokens[1 + len(labels):]
        if len(cells) != len(labels):
            raise _error(command, "expected %d matrix cells" % len(labels), lineno, raw)
        if len(rest) > len(tail):
            raise _error(command, "unexpected trailing fields", lineno, raw)
        matrix[tokens[0]] = dict(zip(labels, cells))
        gpu = _GPU_LABEL_RE.match(tokens[0])
        if not gpu:
            continue
        index = int(gpu.group("index"))
        values = dict(zip(tail, rest))
        cpus = values.get("CPU Affinity")
        if cpus in _NOT_AVAILABLE:
            cpus = None
        if cpus is not None and not _CPULIST_RE.match(cpus):
            raise _error(command, "CPU affinity %r is not a cpulist" % cpus, lineno, raw)
        result["cpu_affinity"][index] = cpus
        result["numa_affinity"][index] = _numa_value(values.get("NUMA Affinity"))
        result["gpu_numa_id"][index] = _numa_value(values.get("GPU NUMA ID"))
    if labels is None:
        raise _error(command, "empty output")
    if not matrix:
        raise _error(command, "header without matrix rows")
    result["labels"] = labels
    result["matrix"] = matrix
    return result
