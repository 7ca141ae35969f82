# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Fake ``hccn_tool`` (Ascend 910B / Atlas A2 RoCE NIC tool, ``-i <id> -<cmd> -g|-s ...`` syntax).

Test double for the container test harness (see tests/fakes/README.md).
Query commands print only their data on stdout; set commands print
``Cmd executed successfully!``; errors go to stderr and the exit status is the
low byte of the tool's internal UDA_* code.

Set commands persist into /etc/hccn.conf (``key_<id>=value`` lines) and into
the runtime overlay of the state. Every invocation publishes this node's
device addresses and link states into ``<fabric>/<hostname>.json``; ``-ping``
consults all nodes' files there.
"""

from __future__ import annotations

import os

import _fakelib as fl

SUCCESS = "Cmd executed successfully!\n"
# UDA_* codes (ossl_user_linux.h); the exit status is their low byte.
MAJOR_CMD_TYPE_ERR = 0x1001
MAJOR_CMD_INVALID_ERR = 0x1003
MAJOR_CMD_DEV_ID_ERR = 0x1004
PARAM_INVALID_ERR = 0x2001
PARAM_OP_NOT_SUPPORT_ERR = 0x2003
PARAM_IP_INVALID_ERR = 0x2006
PARAM_CONFLICT_IP_ADDR_ERR = 0x2007
PARAM_DIFF_SEGMT_GTWY_ERR = 0x2008
PARAM_TLS_INVALID_ENABLE_ERR = 0x2010
TOOL_GATEWAY_NO_IP_CONF_ERR = 0x301A
DSMI_EXE_ERR = 0x4001
DSMI_GATEWAY_NOT_PRESET_ERR = 0x4002
DSMI_DEV_NOT_EXIST_ERR = 0x4004
DSMI_IPCONF_NOT_PRESET_ERR = 0x400D
DSMI_XSFP_ABSENT = 0x4014
DSMI_LINK_IS_DOWN_ERR = 0x4016
ENTER_HELP = "Enter [ hccn_tool -h ] for more details."

# Key order of a device's block in /etc/hccn.conf as seen in real files.
CONF_KEYS = ("address", "netmask", "netdetect", "gateway", "send_arp_status", "tls_enable")
HELP = fl.lines(
    "Usage: hccn_tool -i <devid> -<cmd> -g|-s [params]",
    "  -link -g | -link -s up|down",
    "  -ip -g | -ip -s address <ip> netmask <mask>",
    "  -gateway -g | -gateway -s gateway <ip>",
    "  -netdetect -g | -netdetect -s address <ip>",
    "  -tls -g | -tls -s enable 0|1 [host]",
    "  -net_health -g",
    "  -pfc -g",
    "  -ping -g address <ip> [pkt <len>]",
    "  -lldp -g",
    "  -optical -g",
)


def err(code: int, *messages: str) -> fl.Exit:
    return fl.Exit(code, err=fl.lines(*messages))


def valid_ipv4(text: str) -> bool:
    """What ipaddress.IPv4Address accepts: four ASCII decimal octets, none above 255, no leading zero.

    Without importing ipaddress: every ping checks its address, and this runs once per call.
    """
    octets = text.split(".")
    return len(octets) == 4 and all(
        octet.isascii() and octet.isdigit() and len(octet) <= 3 and (octet == "0" or octet[0] != "0") and int(octet) <= 255
        for octet in octets)


def valid_netmask(text: str) -> bool:
    import ipaddress  # pylint: disable=import-outside-toplevel

    try:
        ipaddress.IPv4Network(f"0.0.0.0/{text}")
    except ValueError:
        return False
    return valid_ipv4(text)


def parse_pairs(params: list[str], allowed: tuple[str, ...], required: tuple[str, ...]) -> dict[str, str]:
    """``key value`` pairs of a command line; unknown or missing keys are invalid parameters."""
    if len(params) % 2:
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    pairs = dict(zip(params[::2], params[1::2]))
    if any(key not in allowed for key in pairs) or any(key not in pairs for key in required):
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    return pairs


def parse_conf_row(row: str) -> tuple[str, str, str] | None:
    """(name, device id, value) of a ``<name>_<id>=<value>`` row of a known key, else None."""
    key, equals, value = row.partition("=")
    name, underscore, dev = key.rpartition("_")
    if equals and underscore and name in CONF_KEYS and dev.isdigit():
        return name, dev, value
    return None


class Conf:
    """/etc/hccn.conf: ``key_<id>=value`` lines, updated in place."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _lines(self) -> list[str]:
        try:
            with open(self.path, encoding="utf-8") as handle:
                return handle.read().splitlines()
        except FileNotFoundError:
            return []

    def read(self) -> dict[str, dict[str, str]]:
        devices: dict[str, dict[str, str]] = {}
        for parsed in filter(None, map(parse_conf_row, self._lines())):
            name, dev, value = parsed
            devices.setdefault(dev, {})[name] = value
        return devices

    def update(self, dev: int, values: dict[str, object]) -> None:
        """Set keys of device ``dev``: in place if present, else inside its block in CONF_KEYS order."""
        rows = self._lines()
        for name, value in values.items():
            entry = f"{name}_{dev}={value}"
            rank = CONF_KEYS.index(name)
            parsed = [parse_conf_row(row) for row in rows]
            ranks = [CONF_KEYS.index(p[0]) if p and p[1] == str(dev) else None for p in parsed]
            if rank in ranks:
                rows[ranks.index(rank)] = entry
                continue
            lower = [i for i, r in enumerate(ranks) if r is not None and r < rank]
            higher = [i for i, r in enumerate(ranks) if r is not None and r > rank]
            if lower:
                rows.insert(lower[-1] + 1, entry)
            elif higher:
                rows.insert(higher[0], entry)
            else:
                rows.append(entry)
        fl.write_atomic(self.path, fl.lines(*rows), mode=0o640)


class Node:
    """This node's NPU network view: devices, live config, link states, fabric."""

    def __init__(self, state: fl.State) -> None:
        self.state = state
        self.conf = Conf(state.hccn_conf)
        self.boot()
        self.ids = [dev["id"] for dev in state.devices("npu", "id")]

    def boot(self) -> None:
        """First run after the state was (re)written: load the persisted hccn.conf, as the driver does at boot."""
        if self.state.get("hccn_booted"):
            return
        persisted = self.conf.read()

        def mutate(runtime: dict) -> None:
            runtime["hccn_booted"] = True
            devices = runtime.setdefault("hccn", {}).setdefault("devices", {})
            for dev, values in persisted.items():
                devices[dev] = {**devices.get(dev, {}), **values}

        self.state.update_runtime(mutate)

    def config(self, dev: int) -> dict:
        hccn = self.state.get("hccn", {})
        return {**(hccn.get("defaults") or {}), **((hccn.get("devices") or {}).get(str(dev)) or {})}

    def link(self, dev: int) -> str:
        return str(self.state.knob("link", dev, "UP")).upper()

    def set_config(self, dev: int, values: dict[str, object]) -> None:
        """Apply settings to the device (runtime overlay) and persist them in hccn.conf, under one lock."""

        def mutate(runtime: dict) -> None:
            devices = runtime.setdefault("hccn", {}).setdefault("devices", {})
            devices.setdefault(str(dev), {}).update(values)
            self.conf.update(dev, values)

        self.state.update_runtime(mutate)
        self.publish()

    def set_link(self, dev: int, value: str) -> None:
        self.state.update_runtime(lambda runtime: runtime.setdefault("link", {}).update({str(dev): value}))
        self.publish()

    def publish(self) -> None:
        record = {
            "hostname": self.state.hostname,
            "devices": {
                str(dev): {"address": self.config(dev).get("address"), "link": self.link(dev)} for dev in self.ids
            },
        }
        fl.write_atomic(os.path.join(self.state.fabric_dir, f"{self.state.hostname}.json"), fl.dump_json(record))

    def peers_with(self, address: str) -> list[tuple[str, str]]:
        """(hostname, link) of every published device that owns ``address``."""
        found = []
        # glob.glob("*.json") without glob's imports (a fifth of a call's time): no dot files, sorted.
        try:
            names = sorted(n for n in os.listdir(self.state.fabric_dir) if n.endswith(".json") and not n.startswith("."))
        except OSError:
            names = []
        for path in (os.path.join(self.state.fabric_dir, name) for name in names):
            try:
                record = fl.read_json(path)
            except (OSError, ValueError):
                continue
            for info in (record.get("devices") or {}).values():
                if info.get("address") == address:
                    found.append((record.get("hostname", ""), info.get("link", "DOWN")))
        return found


def cmd_link(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    if op == "-g":
        return fl.Exit(0, out=f"link status: {node.link(dev)}\n")
    if len(params) != 1 or params[0] not in ("up", "down"):
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    node.set_link(dev, params[0].upper())
    return fl.Exit(0, out=SUCCESS)


def cmd_ip(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    cfg = node.config(dev)
    if op == "-g":
        if not cfg.get("address"):
            if node.state.get("quirks", {}).get("ip_unset") == "empty":
                return fl.Exit(0)
            raise err(DSMI_IPCONF_NOT_PRESET_ERR, "Get ipconf failed, because no ip was preset there!")
        return fl.Exit(0, out=fl.lines(f"ipaddr:{cfg['address']}", f"netmask:{cfg.get('netmask', '')}"))
    pairs = parse_pairs(params, ("address", "netmask"), ("address", "netmask"))
    if not valid_ipv4(pairs["address"]) or not valid_netmask(pairs["netmask"]):
        raise err(PARAM_IP_INVALID_ERR, "The ip address you configured is invalid!")
    if any(node.config(other).get("address") == pairs["address"] for other in node.ids if other != dev):
        raise err(PARAM_CONFLICT_IP_ADDR_ERR, "The ip address configured is conflicted!")
    node.set_config(dev, {"address": pairs["address"], "netmask": pairs["netmask"], "send_arp_status": 1})
    return fl.Exit(0, out=SUCCESS)


def cmd_gateway(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    cfg = node.config(dev)
    if op == "-g":
        if not cfg.get("gateway"):
            raise err(DSMI_GATEWAY_NOT_PRESET_ERR, "Get gateway failed, because no gateway was preset there!")
        return fl.Exit(0, out=f"default gateway:{cfg['gateway']}, Iface:eth{dev}\n")
    gateway = parse_pairs(params, ("gateway",), ("gateway",))["gateway"]
    if not valid_ipv4(gateway):
        raise err(PARAM_IP_INVALID_ERR, "The ip address you configured is invalid!")
    if not cfg.get("address"):
        raise err(TOOL_GATEWAY_NO_IP_CONF_ERR, "Unable to configure gateway, because ip is not configured!")
    import ipaddress  # pylint: disable=import-outside-toplevel

    subnet = ipaddress.IPv4Network(f"{cfg['address']}/{cfg['netmask']}", strict=False)
    if ipaddress.IPv4Address(gateway) not in subnet:
        raise err(
            PARAM_DIFF_SEGMT_GTWY_ERR,
            "The segment of configured gateway doesn't match that of the configured ip adress!",
        )
    node.set_config(dev, {"gateway": gateway})
    return fl.Exit(0, out=SUCCESS)


def cmd_netdetect(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    if op == "-g":
        label = "addr" if node.state.get("quirks", {}).get("netdetect_label") == "addr" else "address"
        return fl.Exit(0, out=f"netdetect {label}: {node.config(dev).get('netdetect') or '0.0.0.0'}\n")
    address = parse_pairs(params, ("address",), ("address",))["address"]
    if not valid_ipv4(address):
        raise err(PARAM_IP_INVALID_ERR, "The ip address you configured is invalid!")
    node.set_config(dev, {"netdetect": address})
    return fl.Exit(0, out=SUCCESS)


def cmd_tls(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    if op == "-g":
        switch = int(node.config(dev).get("tls_enable", 1))
        out = [
            f"dev_id:{dev}, tls switch[{switch}](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
            "tls alarm time threshold[60]days"
        ]
        for cert, issuer, stamp in (
            ("pub", "/C=CN/ST=GD/O=HUAWEI/OU=2012/CN=2_1thCA", "Wed Feb 19 03:19:21"),
            ("ca1", "/C=CN/ST=GD/L=SZ/O=HUAWEI/CN=1thCA", "Wed Feb 19 03:19:07"),
            ("ca2", "/C=CN/ST=GD/L=SZ/O=HUAWEI/CN=1thCA", "Wed Feb 19 03:19:10"),
        ):
            out += [
                f"dev_id:{dev}, [{cert} cert] info:",
                f"         issuer[{issuer}]",
                f"         start_time[{stamp} 2020 GMT]",
                f"         end_time[{stamp.replace('Wed Feb 19', 'Sat Feb 16')} 2030 GMT]",
            ]
        return fl.Exit(0, out=fl.lines(*out))
    if len(params) not in (2, 3) or params[0] != "enable" or params[2:] not in ([], ["host"]):
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    if params[1] not in ("0", "1"):
        raise err(PARAM_TLS_INVALID_ENABLE_ERR, "Get invalid enable value!")
    node.set_config(dev, {"tls_enable": int(params[1])})
    return fl.Exit(0, out=SUCCESS)


def cmd_pfc(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    """``-pfc -g`` as CANN's hixl troubleshooting guide prints it (tests/fixtures/vendor/hccn-pfc-g-hixl-doc.txt);
    the enabled priorities come from the ``pfc`` knob (default: 4, the guide's recommendation). A port
    without link answers as a public report shows: "Link status is down", exit 22."""
    if node.link(dev) != "UP":
        raise err(DSMI_LINK_IS_DOWN_ERR, "Execute failed: Link status is down.")
    enabled = {int(priority) for priority in node.state.knob("pfc", dev, [4])}
    row = " ".join("1" if priority in enabled else "0" for priority in range(8))
    return fl.Exit(0, out=f"PFC configuration:\npriority   0 1 2 3 4 5 6 7\nenabled    {row}\n")


def cmd_net_health(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    status = node.state.knob("net_health", dev)
    if status is None:
        if not node.config(dev).get("netdetect"):
            status = "Init"
        else:
            status = "Success" if node.link(dev) == "UP" else "Fault"
    return fl.Exit(0, out=f"net health status: {status}\n")


def ping_lost(node: Node, target: str, sent: int) -> int:
    """Packets (of ``sent``) the ``ping_lost`` knob drops to ``target``: keyed by address or peer node name."""
    knob = node.state.get("ping_lost", {}) or {}
    lost = knob.get(target)
    if lost is None:
        for host, _link in node.peers_with(target):
            if host in knob:
                lost = knob[host]
                break
    return max(0, min(int(lost or 0), sent - 1))


def cmd_ping(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    pairs = parse_pairs(params, ("address", "pkt"), ("address",))
    target = pairs["address"]
    if not valid_ipv4(target):
        raise err(PARAM_IP_INVALID_ERR, "The ip address you configured is invalid!")
    if "pkt" in pairs and not (pairs["pkt"].isdigit() and int(pairs["pkt"]) <= 65507):
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    if node.link(dev) != "UP":
        raise err(DSMI_LINK_IS_DOWN_ERR, "Execute failed: Link status is down.")
    blocked = set(node.state.get("ping_blocked", []))
    reachable = bool(node.config(dev).get("address")) and target not in blocked and any(
        link == "UP" and host not in blocked for host, link in node.peers_with(target)
    )
    head = f"device {dev} PING {target}"
    if reachable:
        rtts = node.state.get("ping_rtt_ms", [0.114, 0.067, 0.063])
        lost = ping_lost(node, target, len(rtts))
        if lost:
            # Partial loss as a public guide shows it: "recv time out seq=N" for each lost
            # packet, then "3 packets transmitted, 2 received, 33.33% packet loss". The exit
            # status of a partly answered ping is not known; 0, since replies came back.
            received = len(rtts) - lost
            return fl.Exit(
                0,
                out=fl.lines(
                    head,
                    *(f"recv time out seq={seq}" if seq < lost else f"recv seq={seq},time={rtt:.6f}ms"
                      for seq, rtt in enumerate(rtts)),
                    f"{len(rtts)} packets transmitted, {received} received, "
                    f"{100.0 * lost / len(rtts):.2f}% packet loss",
                ),
            )
        return fl.Exit(
            0,
            out=fl.lines(
                head,
                *(f"recv seq={seq},time={rtt:.6f}ms" for seq, rtt in enumerate(rtts)),
                f"{len(rtts)} packets transmitted, {len(rtts)} received, 0.00% packet loss",
            ),
        )
    # No real capture of a failed ping was found: the device text below is
    # inferred from the strings the tool checks for ("recv time out seq"); the
    # stderr line and status 1 (UDA_DSMI_EXE_ERR) follow the tool's source.
    return fl.Exit(
        DSMI_EXE_ERR,
        out=fl.lines(
            head,
            *(f"recv time out seq={seq}" for seq in range(3)),
            "3 packets transmitted, 0 received, 100.00% packet loss",
        ),
        err="Command execute failed!\n",
    )


def cmd_lldp(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    ifname = node.config(dev).get("lldp_ifname")
    if not ifname or node.link(dev) != "UP":
        return fl.Exit(0)  # no neighbour: nothing is printed (inferred)
    return fl.Exit(
        0,
        out=fl.lines(
            "Chassis ID TLV",
            f"\tMAC: {node.config(dev).get('lldp_chassis_mac', '38:ad:be:00:00:01')}",
            "Port ID TLV",
            f"\tIfname: {ifname}",
            "System Capabilities TLV",
            "\tEnabled capabilities: Bridge, Router",
            "Maximum Frame Size TLV",
            "\t9216",
            "End of LLDPDU TLV",
        ),
    )


def cmd_optical(node: Node, dev: int, op: str, params: list[str]) -> fl.Exit:
    if node.config(dev).get("optical_present") is False:
        return fl.Exit(DSMI_XSFP_ABSENT, out="Optical module is not present.\n")
    return fl.Exit(
        0,
        out=fl.lines(
            "optical info:",
            f"{'present':<21}: present",
            f"{'temperature':<21}: 47 C",
            f"{'vendor name':<21}: Hisense",
            f"{'xsfp identifier':<21}: QSFP+ or later",
            f"{'Vcc':<21}: 3262.90 mV",
            *(f"{f'Tx Power{lane}':<21}: 4.4035 mW" for lane in range(4)),
            *(f"{f'Rx Power{lane}':<21}: 1.0189 mW" for lane in range(4)),
        ),
    )


# command -> (handler, operations it accepts)
COMMANDS = {
    "-link": (cmd_link, ("-g", "-s")),
    "-ip": (cmd_ip, ("-g", "-s")),
    "-gateway": (cmd_gateway, ("-g", "-s")),
    "-netdetect": (cmd_netdetect, ("-g", "-s")),
    "-tls": (cmd_tls, ("-g", "-s")),
    "-net_health": (cmd_net_health, ("-g",)),
    "-pfc": (cmd_pfc, ("-g",)),
    "-ping": (cmd_ping, ("-g",)),
    "-lldp": (cmd_lldp, ("-g",)),
    "-optical": (cmd_optical, ("-g",)),
}


def main(argv: list[str]) -> fl.Exit:
    if argv[:1] in (["-h"], ["--help"]):
        return fl.Exit(0, out=HELP)
    if argv[:1] != ["-i"]:
        raise err(
            MAJOR_CMD_TYPE_ERR,
            'Get invalid major cmd type. The valid major cmd type should be "-a" or "-i".',
            ENTER_HELP,
        )
    if len(argv) < 2 or not argv[1].isdigit() or len(argv[1]) > 2:
        raise err(MAJOR_CMD_DEV_ID_ERR, "Get invalid device id.")
    node = Node(fl.State("hccn_tool"))
    node.publish()
    dev = int(argv[1])
    if dev not in node.ids:
        raise err(DSMI_DEV_NOT_EXIST_ERR, "The device is not exist!")
    if len(argv) < 3 or argv[2] not in COMMANDS:
        raise err(MAJOR_CMD_INVALID_ERR, "Get invalid major cmd.", ENTER_HELP)
    handler, operations = COMMANDS[argv[2]]
    op = argv[3] if len(argv) > 3 else ""
    if op not in operations:
        raise err(PARAM_OP_NOT_SUPPORT_ERR, "Get unknown option!")
    params = argv[4:]
    if op == "-g" and handler is not cmd_ping and params:
        raise err(PARAM_INVALID_ERR, "Get invalid parameters!")
    return handler(node, dev, op, params)


if __name__ == "__main__":
    fl.run(main)
