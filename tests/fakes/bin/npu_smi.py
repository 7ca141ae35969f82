# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fake ``npu-smi`` (Ascend 910B / Atlas A2, driver 24.x-25.x output formats).

Test double for the container test harness (see tests/fakes/README.md).
Supports ``info`` (device and process tables), ``info -l``, ``info -m``,
``info -t topo``, ``info -t board|health -i N [-c C]`` and ``-v``. Like the
real tool it prints errors on stdout, and its exit status is the low byte of
the negative DCMI/NPU error code.
"""

from __future__ import annotations

import _fakelib as fl

# Error codes (exit status = code & 0xFF).
ERR_INVALID_PARAMETER = -9001
ERR_INNER = -9005
ERR_NOT_SUPPORT = -8255
DCMI_INNER_ERROR = -8005
DCMI_RESOURCE_OCCUPIED = -8020

TOP_RULE = "+" + "-" * 96 + "+"
RULE = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 52 + "+"
EQ_RULE = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 52 + "+"
DEVICE_HEADER = (
    "| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|",
    "| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |",
)
PROCESS_HEADER = "| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |"

# Driver 26.x: 116 columns and a fifth process column (real 26.0.rc1 / 26.1.0 captures).
TOP_RULE_26 = "+" + "-" * 114 + "+"
RULE_26 = "+" + "-" * 27 + "+" + "-" * 15 + "+" + "-" * 70 + "+"
EQ_RULE_26 = "+" + "=" * 27 + "+" + "=" * 15 + "+" + "=" * 70 + "+"
DEVICE_HEADER_26 = (
    "| NPU   Name                | Health        | Power(W)             Temp(C)                 Hugepages-Usage(page)   |",
    "| Chip                      | Bus-Id        | AICore(%)            Memory-Usage(MB)        HBM-Usage(MB)           |",
)
PROCESS_HEADER_26 = (
    "| NPU     Chip              | Process id    | Process name       | Process memory(MB)    | Process id in container |"
)

# Atlas 300I Duo (310P3): 104 columns, Memory-Usage only, two chips per card on one
# Bus-Id (real 25.0.rc1.b033 / 25.2.0 / 25.5.0 captures). No capture shows its
# process table: the one below uses the card's widths with the A2 column names.
TOP_RULE_310P = "+" + "-" * 104 + "+"
RULE_310P = "+" + "-" * 31 + "+" + "-" * 17 + "+" + "-" * 54 + "+"
EQ_RULE_310P = "+" + "=" * 31 + "+" + "=" * 17 + "+" + "=" * 54 + "+"
DEVICE_HEADER_310P = (
    "| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |",
    "| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |",
)
PROCESS_HEADER_310P = (
    f"| {'NPU     Chip':<30}| {'Process id':<16}| {'Process name':<26}| {'Process memory(MB)':<26}|"
)
LAYOUTS = ("a2", "a2-26", "310p")

TOPO_LEGEND = (
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Path traversing PCIe and NUMA nodes. Nodes are connected through SMP, such as QPI, UPI.",
    "  PHB  = Path traversing PCIe and the PCIe host bridge of a CPU.",
    "  PIX  = Path traversing a single PCIe switch",
    "  PXB  = Path traversing multiple PCIe switches",
    "  HCCS = Connection traversing HCCS.",
    "  NA   = Unknown relationship.",
)

# Types listed by `npu-smi info -h`; the fake implements board, health and topo.
KNOWN_TYPES = frozenset(
    "board flash memory usages sensors temp power volt mac-addr common health product ecc ip sys-time "
    "i2c_check work-mode ecc-enable p2p-enable ssh-enable license customized-info device-share nve-level "
    "aicpu-config pcie-err mcu-monitor err-count boot-area vnpu-mode info-vnpu vnpu-svm cpu-num-cfg "
    "first-power-on-date proc-mem phyid-remap vnpu-cfg-recover key-manage template-info pkcs-enable "
    "p2p-mem-cfg pwm-mode pwm-duty-ratio boot-select topo".split()
)

MAIN_HELP = fl.lines(
    "Usage: npu-smi <Command|-h|-v> [Options...]",
    "",
    "npu-smi Command:",
    f"\t{'-h':<12}  This command's help information",
    f"\t{'--help':<12}  This command's help information",
    f"\t{'-v':<12}  Show npu-smi version information",
    f"\t{'info':<12}  Show hardware details",
    f"\t{'set':<12}  Modify device configuration properties",
    f"\t{'clear':<12}  Clear device information",
    f"\t{'upgrade':<12}  Upgrade MCU firmware",
)

INFO_HELP = fl.lines(
    "Usage: npu-smi info <watch|proc|-h|-m|-l|-t type> [Options...]",
    "",
    "Commands:",
    "       watch          Show all device's status in scrolling format",
    "       proc           Show device's matrix process status in scrolling format",
    "       -h, --help     Show this help text and exit",
    "       -m             Show all device's mapping information",
    "       -l             Show all device's topology information",
    "       -t type        Show information for type",
    "                      type: board, flash, memory, usages, sensors, temp, power, volt, mac-addr,",
    "                            common, health, product, ecc, ip, sys-time, i2c_check, work-mode,",
    "                            ecc-enable, p2p-enable, ssh-enable, license, customized-info,",
    "                            device-share, nve-level, aicpu-config, pcie-err, mcu-monitor,",
    "                            err-count, boot-area, vnpu-mode, info-vnpu, vnpu-svm, cpu-num-cfg,",
    "                            first-power-on-date, proc-mem, phyid-remap, vnpu-cfg-recover, key-manage,",
    "                            template-info, pkcs-enable, p2p-mem-cfg, pwm-mode, pwm-duty-ratio,",
    "                            boot-select, topo.",
    "",
    "Options:",
    "       -i %d          Card ID",
    "       -c %d          Chip ID",
    "       -p %d          Chip Physical ID",
)


def fail(code: int, message: str) -> fl.Exit:
    return fl.Exit(code, out=message)


class Npu:
    """The NPU view of the state: visible devices with health applied."""

    def __init__(self, state: fl.State) -> None:
        self.state = state
        self.section = state.get("npu", {})
        self.version = state.get("driver_version", "")
        self.layout = self.section.get("table_layout", "a2")
        if self.layout not in LAYOUTS:
            raise fl.Exit(1, err=f"npu-smi (fake): unknown npu.table_layout {self.layout!r}\n")
        self.devices = state.devices("npu", "id")
        for dev in self.devices:
            dev["health"] = state.knob("health", dev["id"], dev.get("health", "OK"))
            # A device is one chip: `id` is its logic id (/dev/davinci<id>, hccn_tool -i),
            # `card` the NPU id npu-smi prints (-i), `chip` its chip id on the card (-c).
            dev.setdefault("card", dev["id"])
            dev.setdefault("chip", 0)

    def cards(self) -> list[tuple[int, list[dict]]]:
        """(card id, chips) in output order."""
        cards: dict[int, list[dict]] = {}
        for dev in self.devices:
            cards.setdefault(dev["card"], []).append(dev)
        return list(cards.items())

    def device(self, card: str | None, chip: str | None = None) -> dict:
        if card is None:
            raise fail(ERR_INVALID_PARAMETER, "\nThis command must input card id.\n\n")
        for number, chips in self.cards():
            if card.isdigit() and number == int(card):
                if chip is None:
                    return chips[0]
                for dev in chips:
                    if chip.isdigit() and dev["chip"] == int(chip):
                        return dev
                raise fail(ERR_INVALID_PARAMETER, "Invalid chip id.\n")
        raise fail(ERR_INVALID_PARAMETER, "Invalid card id.\n")

    def firmware(self, dev: dict) -> str:
        return dev.get("firmware_version") or self.section.get("firmware_version", "")

    def processes(self, card: int) -> list[dict]:
        return [p for p in self.state.get("processes", []) if p.get("npu") is not None and int(p["npu"]) == card]


def show_table(npu: Npu) -> str:
    if npu.layout == "a2-26":
        return show_table_26(npu)
    if npu.layout == "310p":
        return show_table_310p(npu)
    return show_table_a2(npu)


def _power(dev: dict) -> str:
    if dev.get("power") is None:
        return "-"
    if dev["power"] == "NA":
        return "NA"
    return f"{float(dev['power']):.1f}"


def show_table_26(npu: Npu) -> str:
    rows = [TOP_RULE_26, f"| npu-smi {npu.version:<36}Version: {npu.version:<60}|", RULE_26, *DEVICE_HEADER_26,
            EQ_RULE_26]
    for dev in npu.devices:
        rows.append(
            f"| {dev['card']:<5} {dev['name']:<20}| {dev['health']:<14}"
            f"| {_power(dev):<21}{dev['temp']:<24}{dev['hugepages_used']:<5}/ {dev['hugepages_total']:<17}|"
        )
        rows.append(
            f"| {dev['chip']:<26}| {dev['bus_id'].upper():<14}"
            f"| {dev['aicore']:<21}{dev['memory_used']:<5}/ {dev['memory_total']:<17}"
            f"{dev['hbm_used']:<5}/ {dev['hbm_total']:<17}|"
        )
        rows.append(EQ_RULE_26)
    rows += [RULE_26, PROCESS_HEADER_26, EQ_RULE_26]
    for card, _chips in npu.cards():
        procs = npu.processes(card)
        if not procs:
            rows.append(f"| {'No running processes found in NPU ' + str(card):<113}|")
        for proc in procs:
            rows.append(
                f"| {proc['npu']:<8}{proc.get('chip', 0):<18}| {proc['pid']:<14}"
                f"| {proc.get('name', ''):<19}| {proc.get('memory_mb', 0):<22}| {proc.get('container_pid', 'NA'):<24}|"
            )
        rows.append(EQ_RULE_26)
    return fl.lines(*rows)


def show_table_310p(npu: Npu) -> str:
    rows = [TOP_RULE_310P, f"| npu-smi {npu.version:<41}Version: {npu.version:<45}|", RULE_310P,
            *DEVICE_HEADER_310P, EQ_RULE_310P]
    for card, chips in npu.cards():
        for position, dev in enumerate(chips):
            rows.append(
                f"| {card:<8}{dev['name']:<22}| {dev['health']:<16}"
                f"| {_power(dev):<13}{dev['temp']:<18}{dev['hugepages_used']:<6}/ {dev['hugepages_total']:<14}|"
            )
            rows.append(
                f"| {dev['chip']:<8}{dev['id']:<22}| {dev['bus_id'].upper():<16}"
                f"| {dev['aicore']:<13}{dev['memory_used']:<5}/ {dev['memory_total']:<33}|"
            )
            rows.append(EQ_RULE_310P if position == len(chips) - 1 else RULE_310P)
    rows += [RULE_310P, PROCESS_HEADER_310P, EQ_RULE_310P]
    for card, _chips in npu.cards():
        procs = npu.processes(card)
        if not procs:
            rows.append(f"| {'No running processes found in NPU ' + str(card):<101}|")
        for proc in procs:
            rows.append(
                f"| {proc['npu']:<8}{proc.get('chip', 0):<22}| {proc['pid']:<16}"
                f"| {proc.get('name', ''):<26}| {proc.get('memory_mb', 0):<26}|"
            )
        rows.append(EQ_RULE_310P)
    return fl.lines(*rows)


def show_table_a2(npu: Npu) -> str:
    rows = [TOP_RULE, f"| npu-smi {npu.version:<24} Version: {npu.version:<53}|", RULE, *DEVICE_HEADER, EQ_RULE]
    for dev in npu.devices:
        power = "-" if dev.get("power") is None else f"{float(dev['power']):.1f}"
        rows.append(
            f"| {dev['id']:<5} {dev['name']:<20}| {dev['health']:<14}"
            f"| {power:<11} {dev['temp']:<17} {dev['hugepages_used']:<5}/ {dev['hugepages_total']:<14}|"
        )
        rows.append(
            f"| {dev.get('chip', 0):<26}| {dev['bus_id'].upper():<14}"
            f"| {dev['aicore']:<11} {dev['memory_used']:<5}/ {dev['memory_total']:<10} "
            f"{dev['hbm_used']:<5}/ {dev['hbm_total']:<14}|"
        )
        rows.append(EQ_RULE)
    rows += [RULE, PROCESS_HEADER, EQ_RULE]
    for dev in npu.devices:
        procs = npu.processes(dev["card"])
        if not procs:
            rows.append(f"| {'No running processes found in NPU ' + str(dev['card']):<95}|")
        for proc in procs:
            rows.append(
                f"| {proc['npu']:<8}{proc.get('chip', 0):<18}| {proc['pid']:<14}"
                f"| {proc.get('name', ''):<25}| {proc.get('memory_mb', 0):<24}|"
            )
        rows.append(EQ_RULE)
    return fl.lines(*rows)


def show_list(npu: Npu) -> str:
    cards = npu.cards()
    out = fl.lines(fl.kv("Total Count", len(cards)), "")
    for card, chips in cards:
        out += fl.lines(fl.kv("NPU ID", card), fl.kv("Chip Count", len(chips)), "")
    return out


def show_mapping(npu: Npu) -> str:
    rows = [f"\t{'NPU ID':<30} {'Chip ID':<30} {'Chip Logic ID':<30} {'Chip Name':<30}"]
    logic_id = 0
    for card, chips in npu.cards():
        for dev in chips:
            rows.append(f"\t{card:<30} {dev['chip']:<30} {logic_id:<30} {dev['chip_type']} {dev['name']}")
            logic_id += 1
        if chips[0].get("mcu"):
            rows.append(f"\t{card:<30} {len(chips):<30} {'-':<30} {'Mcu':<30}")
    return fl.lines(*rows)


def show_topo(npu: Npu) -> str:
    matrix = npu.section.get("topo_matrix")
    link = npu.section.get("topo_link", "HCCS")
    # One row per card, labelled with its NPU id, on the 300I Duo (inferred: no capture).
    devices = [chips[0] for _card, chips in npu.cards()] if npu.layout == "310p" else npu.devices
    key = "card" if npu.layout == "310p" else "id"
    ids = [dev[key] for dev in devices]
    rows = ["\t   " + "".join(f"NPU{i:<8}" for i in ids) + "CPU Affinity"]
    for dev in (dict(dev, id=dev[key]) for dev in devices):
        cells = [
            "X" if other == dev["id"] else (matrix[dev["id"]][other] if matrix else link)
            for other in ids
        ]
        rows.append(f"NPU{dev['id']:<8}" + "".join(f"{cell:<11}" for cell in cells) + dev.get("cpu_affinity", ""))
    return fl.lines(*rows, *TOPO_LEGEND)


def show_board(npu: Npu, dev: dict, chip: str | None) -> str:
    bus = dev["bus_id"].upper()
    if chip is not None:
        return fl.lines(
            fl.kv("NPU ID", dev["card"]),
            fl.kv("Chip ID", chip),
            fl.kv("Chip Type", dev["chip_type"]),
            fl.kv("Chip Name", dev["name"]),
            fl.kv("Chip Version", dev["chip_version"]),
            fl.kv("Board ID", dev["board_id"]),
            fl.kv("PCB ID", dev.get("chip_pcb_id", "NA")),
            fl.kv("BOM ID", dev["bom_id"]),
            fl.kv("VDie ID", dev.get("vdie_id", "NA")),
            fl.kv("NDie ID", dev.get("ndie_id", "NA")),
            fl.kv("Chip Position ID", dev.get("chip_position_id", dev["id"])),
            fl.kv("PCIe Bus Info", bus),
            fl.kv("Firmware Version", npu.firmware(dev)),
        )
    rows = [fl.kv("NPU ID", dev["card"])]
    if dev.get("product_name"):  # newer drivers and A2 servers print the product block
        rows += [
            fl.kv("Product Name", dev["product_name"]),
            fl.kv("Model", dev.get("model", "NA")),
            fl.kv("Manufacturer", dev.get("manufacturer", "Huawei")),
            fl.kv("Serial Number", dev.get("serial_number", "NA")),
        ]
    rows += [
        fl.kv("Software Version", npu.version),
        fl.kv("Firmware Version", npu.firmware(dev)),
        fl.kv("Compatibility", dev.get("compatibility", "OK")),
        fl.kv("Board ID", dev["board_id"]),
        fl.kv("PCB ID", dev["pcb_id"]),
        fl.kv("BOM ID", dev["bom_id"]),
        fl.kv("PCIe Bus Info", bus),
        fl.kv("Slot ID", dev.get("slot_id", dev["id"])),
        fl.kv("Class ID", dev.get("class_id", "NA")),
        fl.kv("PCI Vendor ID", dev["pci_vendor_id"]),
        fl.kv("PCI Device ID", dev["pci_device_id"]),
        fl.kv("Subsystem Vendor ID", dev["subsystem_vendor_id"]),
        fl.kv("Subsystem Device ID", dev["subsystem_device_id"]),
        fl.kv("Chip Count", len(dict(npu.cards())[dev["card"]])),
    ]
    return fl.lines(*rows)


def show_health(npu: Npu, dev: dict, chip: str | None) -> str:
    code = npu.state.knob("error_codes", dev["id"], "NA")
    tail = [fl.kv("Error Code", code), fl.kv("Error Information", "NA")]
    if chip is not None:
        return fl.lines(fl.kv("Health Status", dev["health"]), *tail)
    return fl.lines(fl.kv("NPU ID", dev["card"]), fl.kv("Health", dev["health"]), *tail)


def parse_info_options(args: list[str]) -> dict[str, str | None]:
    """Parse `info` options (order is free): -t TYPE, -i ID, -c ID, -l, -m, -h."""
    opts: dict[str, str | None] = {}
    pos = 0
    while pos < len(args):
        flag = args[pos]
        if flag in ("-l", "-m", "-h", "--help"):
            opts[flag] = ""
            pos += 1
            continue
        if flag not in ("-t", "-i", "-c", "-p") or pos + 1 >= len(args):
            if flag == "-i":
                raise fail(ERR_INVALID_PARAMETER, "Invalid card id.\n")
            raise fail(ERR_INVALID_PARAMETER, f"Error parameter of {flag}\n")
        opts[flag] = args[pos + 1]
        pos += 2
    return opts


def cmd_info(npu: Npu, args: list[str]) -> str:
    if not args:
        return show_table(npu)
    opts = parse_info_options(args)
    if "-h" in opts or "--help" in opts:
        return INFO_HELP
    card, chip, stype = opts.get("-i"), opts.get("-c"), opts.get("-t")
    if "-l" in opts or "-m" in opts or stype == "topo":
        if card is not None:
            raise fail(ERR_INVALID_PARAMETER, "This command does not support input card id.\n")
        if "-l" in opts:
            return show_list(npu)
        return show_mapping(npu) if "-m" in opts else show_topo(npu)
    if stype is None:
        raise fail(ERR_INVALID_PARAMETER, "\nInput parameter format error.\n")
    if stype not in KNOWN_TYPES:
        raise fail(ERR_INVALID_PARAMETER, "Error parameter of -t\n")
    if stype not in ("board", "health"):
        raise fail(ERR_NOT_SUPPORT, f"This device does not support querying {stype}.\n")
    dev = npu.device(card, chip)
    return show_board(npu, dev, chip) if stype == "board" else show_health(npu, dev, chip)


def main(argv: list[str]) -> fl.Exit:
    if not argv:
        return fl.Exit(ERR_INVALID_PARAMETER, out=MAIN_HELP)
    command, args = argv[0], argv[1:]
    if command in ("-h", "--help"):
        return fl.Exit(0, out=MAIN_HELP)
    if command not in ("-v", "info", "set", "clear", "upgrade"):
        return fl.Exit(ERR_INNER, out="Command or option is not found.\n" + MAIN_HELP)
    state = fl.State("npu-smi")
    npu = Npu(state)
    if command == "-v":
        return fl.Exit(0, out=f"npu-smi version: {npu.version}\n")
    fail_mode = state.get("fail_mode")
    if fail_mode in ("dcmi_init_failed", "device_busy") or not npu.section:
        busy = fail_mode == "device_busy"
        reason = "model initialized failed, because the device is used" if busy else "module initialize failed"
        code = DCMI_RESOURCE_OCCUPIED if busy else DCMI_INNER_ERROR
        return fl.Exit(
            code, out=fl.lines("DrvMngGetConsoleLogLevel failed. (g_conLogLevel=3)", f"dcmi {reason}. ret is {code}")
        )
    if command != "info":
        return fl.Exit(ERR_NOT_SUPPORT, out=f"Failed to execute npu-smi {command}. ret is {ERR_NOT_SUPPORT}.\n")
    return fl.Exit(0, out=cmd_info(npu, args))


if __name__ == "__main__":
    fl.run(main)
