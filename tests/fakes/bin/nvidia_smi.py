# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fake ``nvidia-smi`` (R550-era output formats).

Test double for the container test harness (see tests/fakes/README.md).
Supports the summary table (no arguments), ``-L``, ``topo -m``,
``--query-gpu=... --format=csv[,noheader][,nounits]`` (with ``-i``) and
``--version``. Like the real tool it prints errors on stdout; exit statuses
follow the man page's RETURN VALUE table.
"""

from __future__ import annotations

import time

import _fakelib as fl

RC_INVALID_ARGUMENT = 2
RC_NOT_FOUND = 6
RC_DRIVER_NOT_LOADED = 9
RC_GPU_LOST = 15
RC_VERSION_MISMATCH = 18  # reported in the wild; not in the man page table

INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
FAIL_MODES = {
    "driver_not_loaded": (
        RC_DRIVER_NOT_LOADED,
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n",
    ),
    "no_devices": (RC_NOT_FOUND, "No devices were found\n"),
    "version_mismatch": (RC_VERSION_MISMATCH, "Failed to initialize NVML: Driver/library version mismatch\n"),
}

TOPO_LEGEND = (
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
)

SUMMARY_RULE = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
SUMMARY_HEAD = (
    "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "|",
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
)
WIDE_RULE = "+" + "-" * 89 + "+"
PROCESS_HEAD = (
    "| Processes:" + " " * 78 + "|",
    "|  GPU   GI   CI        PID   Type   Process name                              GPU Memory |",
    "|        ID   ID                                                               Usage      |",
    "|" + "=" * 89 + "|",
)

# field -> (unit, value getter); the aliases map to canonical field names.
ALIASES = {"gpu_name": "name", "gpu_bus_id": "pci.bus_id", "gpu_uuid": "uuid", "gpu_serial": "serial"}
FIELDS = {
    "index": (None, lambda g, s: g["index"]),
    "count": (None, lambda g, s: len(s["gpus"])),
    "name": (None, lambda g, s: g["name"]),
    "uuid": (None, lambda g, s: g["uuid"]),
    "serial": (None, lambda g, s: g.get("serial", "[N/A]")),
    "pci.bus_id": (None, lambda g, s: g["bus_id"].upper()),
    "driver_version": (None, lambda g, s: s["driver_version"]),
    "vbios_version": (None, lambda g, s: g.get("vbios_version", "[N/A]")),
    "compute_cap": (None, lambda g, s: g.get("compute_cap", "[N/A]")),
    "pstate": (None, lambda g, s: g["pstate"]),
    "persistence_mode": (None, lambda g, s: "Enabled" if g["persistence"] == "On" else "Disabled"),
    "memory.total": ("MiB", lambda g, s: g["memory_total"]),
    "memory.used": ("MiB", lambda g, s: g["memory_used"]),
    "memory.free": ("MiB", lambda g, s: g["memory_total"] - g["memory_used"]),
    "temperature.gpu": (None, lambda g, s: g["temperature"]),
    "utilization.gpu": ("%", lambda g, s: g["utilization"]),
    "utilization.memory": ("%", lambda g, s: g.get("utilization_memory", 0)),
    "power.draw": ("W", lambda g, s: f"{float(g['power_draw']):.2f}"),
    "power.limit": ("W", lambda g, s: f"{float(g['power_limit']):.2f}"),
}


class Gpus:
    def __init__(self, state: fl.State) -> None:
        self.state = state
        self.section = state.get("gpu", {})
        self.driver = state.get("driver_version", "")
        self.gpus = state.devices("gpu", "index")

    def processes(self, gpu: dict) -> list[dict]:
        return [p for p in self.state.get("processes", []) if p.get("gpu") is not None and int(p["gpu"]) == gpu["index"]]


def show_summary(gpus: Gpus) -> str:
    cuda = gpus.section.get("cuda_version", "")
    rows = [
        time.strftime("%a %b %e %H:%M:%S %Y") + " " * 7,
        WIDE_RULE,
        f"| NVIDIA-SMI {gpus.driver:<23}Driver Version: {gpus.driver:<15}CUDA Version: {cuda:<9}|",
        *SUMMARY_HEAD,
    ]
    for gpu in gpus.gpus:
        name = gpu["name"] if len(gpu["name"]) <= 27 else gpu["name"][:24] + "..."
        power = f"{round(float(gpu['power_draw']))}W"
        rows += [
            f"| {gpu['index']:>3}  {name:<27}    {gpu['persistence']:<3} "
            f"|   {gpu['bus_id'].upper()} {gpu.get('display_active', 'Off'):>3} | {gpu['ecc']:>20} |",
            f"| {gpu['fan']:>3}   {str(gpu['temperature']) + 'C':>3}    {gpu['pstate']:<2}"
            f"{power:>16} / {str(gpu['power_limit']) + 'W':>5} "
            f"| {str(gpu['memory_used']) + 'MiB':>10} / {str(gpu['memory_total']) + 'MiB':>9} "
            f"| {str(gpu['utilization']) + '%':>7}{gpu['compute_mode']:>13} |",
            f"|{'':41}|{'':24}| {gpu['mig']:>20} |",
            SUMMARY_RULE,
        ]
    rows += [" " * 89, WIDE_RULE, *PROCESS_HEAD]
    procs = [p for gpu in gpus.gpus for p in gpus.processes(gpu)]
    for proc in procs:
        rows.append(
            f"|{proc['gpu']:>5}{'N/A':>6}{'N/A':>5}{proc['pid']:>10}{proc.get('type', 'C'):>7}   "
            f"{proc.get('name', '')[:41]:<41}{str(proc.get('memory_mib', 0)) + 'MiB':>11} |"
        )
    if not procs:
        rows.append(f"|  {'No running processes found':<87}|")
    rows.append(WIDE_RULE)
    return fl.lines(*rows)


def show_list(gpus: Gpus) -> str:
    return fl.lines(*(f"GPU {g['index']}: {g['name']} (UUID: {g['uuid']})" for g in gpus.gpus))


def show_topo(gpus: Gpus) -> str:
    """TAB-separated matrix; columns GPUs then NICs, then CPU/NUMA affinity (+ GPU NUMA ID)."""
    topo = gpus.section.get("topo") or {}
    nics = topo.get("nics") or []
    matrix = topo.get("matrix") or []
    link = topo.get("link", "SYS")
    newer = bool(topo.get("gpu_numa_id_column", True))
    nic_label = [f"NIC{i}" if newer else nic for i, nic in enumerate(nics)]
    total = len(gpus.section.get("devices") or [])
    # Matrix positions: GPU index i -> i, NIC j -> total + j.
    columns = [(f"GPU{g['index']}", g["index"], g) for g in gpus.gpus]
    columns += [(label, total + j, None) for j, label in enumerate(nic_label)]
    positions = [pos for _name, pos, _gpu in columns]

    def cell(row: int, col: int) -> str:
        if row == col:
            return " X "
        return matrix[row][col] if matrix else link

    affinity = ["CPU Affinity", "NUMA Affinity"] + (["GPU NUMA ID"] if newer else [])
    rows = ["\t" + "\t".join([name for name, _pos, _gpu in columns] + affinity)]
    for name, pos, gpu in columns:
        cells = [cell(pos, other) for other in positions]
        if gpu is not None:
            tail = [gpu.get("cpu_affinity", ""), str(gpu.get("numa_affinity", "N/A"))]
            tail += ["", str(gpu.get("gpu_numa_id", "N/A"))] if newer else []
        else:
            tail = ["", ""] + ([""] if newer else [])
        rows.append("\t".join([name, *cells, *tail]))
    rows += TOPO_LEGEND
    if newer and nics:
        rows += ["", "NIC Legend:", "", *(f"  NIC{i}: {nic}" for i, nic in enumerate(nics))]
    return fl.lines(*rows)


def query_gpu(gpus: Gpus, fields_arg: str, fmt_arg: str | None, ids: str | None) -> fl.Exit:
    if fmt_arg is None:
        return fl.Exit(RC_INVALID_ARGUMENT, out=INVALID_ARGS)
    fmt = fmt_arg.split(",")
    if fmt[0] != "csv" or any(opt not in ("noheader", "nounits") for opt in fmt[1:]):
        return fl.Exit(RC_INVALID_ARGUMENT, out=INVALID_ARGS)
    names = [ALIASES.get(f.strip(), f.strip()) for f in fields_arg.split(",") if f.strip()]
    for name in names:
        if name not in FIELDS:
            return fl.Exit(RC_INVALID_ARGUMENT, out=f'Field "{name}" is not a valid field to query.\n\n')
    selected = gpus.gpus
    if ids is not None:
        wanted = ids.split(",")
        selected = [g for g in gpus.gpus if str(g["index"]) in wanted or g["uuid"] in wanted]
        if not selected:
            return fl.Exit(RC_NOT_FOUND, out="No devices were found\n")
    units = "nounits" not in fmt
    context = {"gpus": gpus.gpus, "driver_version": gpus.driver}
    rows = []
    if "noheader" not in fmt:
        rows.append(
            ", ".join(f"{n} [{FIELDS[n][0]}]" if FIELDS[n][0] and units else n for n in names)
        )
    for gpu in selected:
        values = []
        for name in names:
            unit, getter = FIELDS[name]
            value = str(getter(gpu, context))
            values.append(f"{value} {unit}" if unit and units else value)
        rows.append(", ".join(values))
    return fl.Exit(0, out=fl.lines(*rows))


def parse_options(argv: list[str]) -> dict[str, str] | None:
    """Long options as ``--opt=value`` or ``--opt value``; returns None on anything unknown."""
    takes_value = {"--query-gpu": "query", "--format": "format", "-i": "id", "--id": "id"}
    flags = {"-L": "list", "--list-gpus": "list", "-h": "help", "--help": "help", "--version": "version"}
    opts: dict[str, str] = {}
    pos = 0
    while pos < len(argv):
        arg = argv[pos]
        key, sep, value = arg.partition("=")
        if key in takes_value:
            if not sep:
                if pos + 1 >= len(argv):
                    return None
                pos += 1
                value = argv[pos]
            opts[takes_value[key]] = value
        elif arg in flags:
            opts[flags[arg]] = ""
        else:
            return None
        pos += 1
    return opts


def main(argv: list[str]) -> fl.Exit:
    is_topo = argv[:1] == ["topo"]
    opts = None if is_topo else parse_options(argv)
    if is_topo and argv[1:] not in (["-m"], ["--matrix"]):
        return fl.Exit(RC_INVALID_ARGUMENT, out=INVALID_ARGS)
    if not is_topo and (opts is None or ("format" in opts and "query" not in opts)):
        return fl.Exit(RC_INVALID_ARGUMENT, out=INVALID_ARGS)
    if opts and "help" in opts:
        return fl.Exit(0, out=__doc__.lstrip())
    state = fl.State("nvidia-smi")
    gpus = Gpus(state)
    fail_mode = state.get("fail_mode")
    if not gpus.section:
        fail_mode = fail_mode or "driver_not_loaded"
    if fail_mode in FAIL_MODES:
        code, message = FAIL_MODES[fail_mode]
        return fl.Exit(code, out=message)
    if fail_mode == "gpu_lost":
        lost = state.get("lost_gpu", 0)
        bus = next((g["bus_id"] for g in gpus.section.get("devices", []) if g["index"] == lost), "00000000:00:00.0")
        return fl.Exit(
            RC_GPU_LOST,
            out=f"Unable to determine the device handle for GPU{bus.upper()[4:]}: GPU is lost.  "
            "Reboot the system to recover this GPU\n",
        )
    if is_topo:
        return fl.Exit(0, out=show_topo(gpus))
    if "version" in opts:
        return fl.Exit(
            0,
            out=fl.lines(
                f"{'NVIDIA-SMI version':<20}: {gpus.driver}",
                f"{'NVML version':<20}: {'.'.join(gpus.driver.split('.')[:2])}",
                f"{'DRIVER version':<20}: {gpus.driver}",
                f"{'CUDA Version':<20}: {gpus.section.get('cuda_version', '')}",
            ),
        )
    if not gpus.gpus:
        return fl.Exit(RC_NOT_FOUND, out="No devices were found\n")
    if "query" in opts:
        return query_gpu(gpus, opts["query"], opts.get("format"), opts.get("id"))
    if "list" in opts:
        return fl.Exit(0, out=show_list(gpus))
    return fl.Exit(0, out=show_summary(gpus))


if __name__ == "__main__":
    fl.run(main)
