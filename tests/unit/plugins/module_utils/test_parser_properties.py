# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Property tests: real captures re-spaced, with unknown columns added or optional columns
removed, parse to the same facts, or fail with an error naming the tool and the line."""

from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _npu_smi as npu_smi
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _nvidia_smi as nvidia_smi

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "vendor")
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NPU_FILES = [
    "npu-smi-info-800i-a2.txt",
    "npu-smi-info-910b3x8-26.1.0-procs.txt",
    "npu-smi-info-300iduo-25.2.0-excerpt.txt",
    "npu-smi-info-a3-26.0.rc2-excerpt.txt",
    "npu-smi-info-910b2x8-23.0.3.txt",
    "npu-smi-info-910a-23.0.rc1.b070-excerpt.txt",
    "npu-smi-info-a3x16-24.1.rc3.7.txt",
    "npu-smi-info-310p3-npu32896-25.5.2-bus-anonymized.txt",
]
TOPO_FILES = [
    "nvidia-smi-topo-m.txt",
    "nvidia-smi-topo-m-rtx4090x8-tabs.txt",
    "nvidia-smi-topo-m-4gpu-nv12-4numa.txt",
    "nvidia-smi-topo-mp-gpu1-nic10-empty-cells-excerpt.txt",
    "nvidia-smi-topo-m-2xa100-legend.txt",
    "nvidia-smi-topo-m-h100x8-dgx-12nic-tabs-excerpt.txt",
    "nvidia-smi-topo-m-h100x8-9nic-sgr-header.txt",
]


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8", newline="") as handle:
        return handle.read()


def npu_facts(info):
    """What the callers use, without ``extra`` (which holds added columns)."""
    devices = [dict((k, v) for k, v in d.items() if k != "extra") for d in info["devices"]]
    processes = [dict((k, v) for k, v in p.items() if k != "extra") for p in info["processes"]]
    return info["driver_version"], devices, processes


def topo_facts(topo):
    return topo["labels"], topo["matrix"], topo["cpu_affinity"], topo["numa_affinity"], topo["numa_nodes"]


# ---------------------------------------------------------------------------
# npu-smi info
# ---------------------------------------------------------------------------

def respace_table(text, draw):
    """Give every table row new padding and new gaps (spaces or TABs) between names and values."""
    out = []
    for line in text.splitlines():
        if not line.strip().startswith("|"):
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        cells = line.strip()[1:-1].split("|")
        rebuilt = []
        for cell in cells:
            parts = re.split(r"(\s{2,})", cell.strip())
            body = ""
            for index, part in enumerate(parts):
                if index % 2:
                    body += draw(st.sampled_from(["  ", "   ", "\t", " \t", "        "]))
                else:
                    body += part
            rebuilt.append(" " * draw(st.integers(1, 3)) + body + " " * draw(st.integers(1, 12)))
        out.append(lead + "|" + "|".join(rebuilt) + "|")
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", NPU_FILES)
@SETTINGS
@given(data=st.data())
def test_npu_info_respaced_reads_the_same(name, data):
    text = fixture(name)
    assert npu_facts(npu_smi.parse_info(respace_table(text, data.draw))) == npu_facts(npu_smi.parse_info(text))


def add_unknown_device_column(text, value):
    """Append a column 'Fan(RPM)' to the first device header row and to every first row of a chip."""
    out = []
    header_seen = False
    pair_row = 0
    for line in text.splitlines():
        stripped = line.rstrip()
        if "Health" in line and "Name" in line:
            stripped = stripped[:-1] + "  Fan(RPM) |"
            header_seen = True
        elif header_seen and re.match(r"^\|\s*\d+\s+\S+\s*\|\s*(OK|Warning|Alarm|Critical)", line):
            stripped = stripped[:-1] + "  %s |" % value
            pair_row += 1
        elif "Process id" in line:
            header_seen = False
        out.append(stripped)
    return "\n".join(out) + "\n", pair_row


@pytest.mark.parametrize("name", NPU_FILES)
@SETTINGS
@given(value=st.integers(0, 20000))
def test_npu_info_unknown_column_is_kept_aside(name, value):
    text = fixture(name)
    changed, rows = add_unknown_device_column(text, value)
    info = npu_smi.parse_info(changed)
    assert npu_facts(info) == npu_facts(npu_smi.parse_info(text))
    assert [d["extra"] for d in info["devices"]] == [{"Fan(RPM)": str(value)}] * rows


def drop_hbm_column(text):
    out = []
    for line in text.splitlines():
        if "HBM-Usage(MB)" in line:
            line = line.replace("HBM-Usage(MB)", "")
        elif re.match(r"^\|\s*\d+(\s+\d+)?\s*\|\s*[0-9A-F]{4}:", line):
            line = re.sub(r"\s\d+\s*/\s*\d+(\s*\|)$", r"\1", line.rstrip())
        out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", ["npu-smi-info-800i-a2.txt", "npu-smi-info-910b3x8-26.1.0-procs.txt",
                                  "npu-smi-info-910a-23.0.rc1.b070-excerpt.txt"])
def test_npu_info_without_the_optional_hbm_column(name):
    text = fixture(name)
    full = npu_smi.parse_info(text)
    info = npu_smi.parse_info(drop_hbm_column(text))
    assert [d["hbm_total_mb"] for d in info["devices"]] == [None] * len(full["devices"])
    for short, long in zip(info["devices"], full["devices"]):
        assert (short["memory_used_mb"], short["memory_total_mb"]) == (long["memory_used_mb"], long["memory_total_mb"])
        assert (short["npu_id"], short["chip_id"], short["bus_id"]) == (long["npu_id"], long["chip_id"], long["bus_id"])


def test_npu_info_without_the_container_process_column():
    text = fixture("npu-smi-info-910b3x8-26.1.0-procs.txt")
    lines = []
    for line in text.splitlines():
        if line.count("|") == 6:
            line = line[: line.rstrip().rstrip("|").rstrip().rfind("|") + 1]
        lines.append(line)
    info = npu_smi.parse_info("\n".join(lines) + "\n")
    assert info["processes"] == [{"npu_id": 0, "chip_id": 0, "pid": 485946, "name": "pytest", "memory_mb": 5175,
                                  "container_pid": None, "extra": {}}]


@SETTINGS
@given(cut=st.integers(1, 40), data=st.data())
def test_npu_info_damaged_row_is_an_error_or_the_same_facts(cut, data):
    """A chip row that lost its tail: an error naming npu-smi, its driver and the line, never new facts."""
    text = fixture("npu-smi-info-910b3x8-26.1.0-procs.txt")
    lines = text.splitlines()
    index = data.draw(st.sampled_from([i for i, line in enumerate(lines) if "0000:" in line]))
    lines[index] = lines[index][:-cut]
    try:
        info = npu_smi.parse_info("\n".join(lines) + "\n")
    except ValueError as exc:
        assert str(exc).startswith("npu-smi info (driver 26.1.0): ")
        assert "(line %d: " % (index + 1) in str(exc)
    else:
        assert npu_facts(info) == npu_facts(npu_smi.parse_info(text))


# ---------------------------------------------------------------------------
# nvidia-smi topo -m
# ---------------------------------------------------------------------------

def respace_tabs(text, draw):
    """Surround every TAB-separated cell with random spaces (the tool pads `X` with spaces too)."""
    out = []
    for line in text.splitlines():
        if "\t" not in line:
            out.append(line)
            continue
        cells = line.split("\t")
        out.append("\t".join((" " * draw(st.integers(0, 2)) + cell.strip() + " " * draw(st.integers(0, 2)))
                             if cell.strip() else cell for cell in cells))
    return "\n".join(out) + "\n"


def expand_tabs(text, draw):
    """What a web page makes of the output: TABs turned into runs of spaces; empty cells vanish."""
    out = []
    for line in text.splitlines():
        if "\t" not in line:
            out.append(line)
            continue
        cells = [cell.strip() for cell in line.split("\t")]
        body = ""
        for cell in cells:
            if cell:
                body += cell + " " * draw(st.integers(2, 9))
        out.append((" " * 8 if not cells[0] else "") + body.rstrip())
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", TOPO_FILES)
@SETTINGS
@given(data=st.data())
def test_topo_respaced_reads_the_same(name, data):
    text = fixture(name)
    assert topo_facts(nvidia_smi.parse_topo_matrix(respace_tabs(text, data.draw))) == \
        topo_facts(nvidia_smi.parse_topo_matrix(text))


@pytest.mark.parametrize("name", TOPO_FILES)
@SETTINGS
@given(data=st.data())
def test_topo_tabs_expanded_read_the_same(name, data):
    text = fixture(name)
    expected = topo_facts(nvidia_smi.parse_topo_matrix(text))
    assert topo_facts(nvidia_smi.parse_topo_matrix(expand_tabs(text, data.draw))) == expected


@pytest.mark.parametrize("name", [n for n in TOPO_FILES if "GPU NUMA ID" in fixture(n)])
@SETTINGS
@given(value=st.sampled_from(["7", "N/A", "on"]))
def test_topo_unknown_column_is_kept_aside(name, value):
    text = fixture(name)
    lines = []
    for line in text.splitlines():
        if "GPU NUMA ID" in line and not line.startswith("GPU"):
            # Before a closing SGR code, if the header has one.
            line = line.rstrip().replace("GPU NUMA ID", "GPU NUMA ID\tFabric State")
        elif line.startswith("GPU"):
            line += "\t" + value
        lines.append(line)
    topo = nvidia_smi.parse_topo_matrix("\n".join(lines) + "\n")
    assert topo_facts(topo) == topo_facts(nvidia_smi.parse_topo_matrix(text))
    assert topo["extra"] == dict((index, {"Fabric State": value}) for index in topo["cpu_affinity"])


@pytest.mark.parametrize("name", [n for n in TOPO_FILES if "GPU NUMA ID" in fixture(n)])
def test_topo_without_the_optional_gpu_numa_id_column(name):
    text = fixture(name)
    lines = []
    for line in text.splitlines():
        line = line.replace("\tGPU NUMA ID", "")
        if line.startswith("GPU"):
            line = re.sub(r"\t\t(N/A|\d+)$", "", line)
        elif line.startswith(("NIC", "mlx")) and line.endswith("\t\t\t\t"):
            line = line[:-1]
        lines.append(line)
    topo = nvidia_smi.parse_topo_matrix("\n".join(lines) + "\n")
    assert topo_facts(topo) == topo_facts(nvidia_smi.parse_topo_matrix(text))
    assert set(topo["gpu_numa_id"].values()) == {None}


@SETTINGS
@given(data=st.data())
def test_topo_lost_or_doubled_cell_is_an_error_with_its_line(data):
    """A GPU row with a TAB removed or added is reported by its line number, never read shifted."""
    text = fixture("nvidia-smi-topo-m-rtx4090x8-tabs.txt")
    lines = text.splitlines()
    index = data.draw(st.integers(1, 8))
    fields = lines[index].split("\t")
    position = data.draw(st.integers(1, len(fields) - 1))
    if data.draw(st.booleans()):
        fields[position - 1:position + 1] = [fields[position - 1] + fields[position]]
    else:
        fields.insert(position, data.draw(st.sampled_from(["", "SYS", "0"])))
    lines[index] = "\t".join(fields)
    with pytest.raises(ValueError) as error:
        nvidia_smi.parse_topo_matrix("\n".join(lines) + "\n")
    assert str(error.value).startswith("nvidia-smi topo -m")
    assert "(line %d: " % (index + 1) in str(error.value)
