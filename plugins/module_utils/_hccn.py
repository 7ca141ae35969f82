# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
#
# Note that this module util is **PRIVATE** to the aihost.llm_cluster collection.
# It can have breaking changes at any time. Do not use it from other collections
# or standalone plugins/modules!
"""Parsers for the text printed by Huawei Ascend ``hccn_tool`` and for ``/etc/hccn.conf``.

Everything here is pure: each parser takes the captured stdout of one
``hccn_tool -i <id> -<cmd> -g`` invocation and returns plain Python data.
Unparseable input raises ``ValueError`` naming the command and the line.

Covered outputs (910B / Atlas A2 syntax, ``hccn_tool -i N -<cmd> -g|-s``):

* ``-link -g``: ``link status: UP`` / ``link status: DOWN``.
* ``-ip -g``: ``ipaddr:A`` + ``netmask:M``; older drivers print nothing for a
  device without an address (newer ones fail with exit 13, see
  ``NOT_PRESET_CODES``).
* ``-gateway -g``: ``default gateway:G, Iface:ethN``.
* ``-netdetect -g``: ``netdetect address: A`` (HDK 24.x) or ``netdetect addr: A``
  (newer source); ``0.0.0.0`` means unset.
* ``-tls -g``: the ``dev_id:N, tls switch[S](...)`` line with or without
  ``tls preconfigured[P]``, followed or not by certificate blocks.
* ``-net_health -g``: ``net health status: <word(s)>``.
* ``-ping -g address A``: ``device N PING A``, ``recv seq=K,time=Tms`` or
  ``recv time out seq=K`` lines, ``X packets transmitted, Y received, Z% packet loss``.
* ``/etc/hccn.conf``: ``<key>_<device id>=<value>`` lines; unknown keys,
  comments and line order are kept when rendering changes back.
"""

from __future__ import annotations

import os
import re

DEFAULT_TOOL_DIR = "/usr/local/Ascend/driver/tools"
DEFAULT_CONF = "/etc/hccn.conf"
SET_SUCCESS = "Cmd executed successfully!"

# Exit statuses of queries for a setting that was never made (low byte of the
# tool's UDA_* code): no IP preset (0x400d), no gateway preset (0x4002).
NOT_PRESET_CODES = {"ip": 13, "gateway": 2}
LINK_DOWN_CODE = 22

# Key order of a device block in real /etc/hccn.conf files.
CONF_KEY_ORDER = ("address", "netmask", "netdetect", "gateway", "arp", "send_arp_status", "tls_enable")

_LINK_RE = re.compile(r"^link status:\s*(?P<state>\S+)\s*$")
_IPADDR_RE = re.compile(r"^ipaddr:\s*(?P<value>\S*)\s*$")
_NETMASK_RE = re.compile(r"^netmask:\s*(?P<value>\S*)\s*$")
_GATEWAY_RE = re.compile(r"^default gateway:\s*(?P<gateway>[^,\s]+)\s*(?:,\s*Iface:\s*(?P<iface>\S+))?\s*$")
_NETDETECT_RE = re.compile(r"^netdetect addr(?:ess)?:\s*(?P<value>\S*)\s*$")
_TLS_RE = re.compile(
    r"^dev_id:\s*(?P<device>\d+),\s*tls switch\[(?P<switch>\d+)\]"
    r"(?:.*?tls preconfigured\[(?P<preconfigured>\d+)\])?"
    r"(?:.*?tls alarm time threshold\[(?P<alarm>\d+)\]days)?"
)
_HEALTH_RE = re.compile(r"^net health status:\s*(?P<status>\S.*?)\s*$")
_PING_HEAD_RE = re.compile(r"^device\s+(?P<device>\d+)\s+PING\s+(?P<address>\S+)\s*$")
_PING_RECV_RE = re.compile(r"^recv seq=(?P<seq>\d+),\s*time=(?P<time>[\d.]+)\s*ms\s*$")
_PING_TIMEOUT_RE = re.compile(r"^recv time out seq=(?P<seq>\S+)")
_PING_SUMMARY_RE = re.compile(
    r"^(?P<sent>\d+) packets transmitted,\s*(?P<received>\d+) received,\s*(?P<loss>[\d.]+)%\s*packets? loss"
)
_CONF_ROW_RE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z0-9_]*?)_(?P<device>\d+)=(?P<value>.*)$")
_IPV4_RE = re.compile(r"^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$")
UNSET_ADDRESSES = ("", "0.0.0.0")


def _lines(text):
    return [line.rstrip("\r") for line in (text or "").splitlines()]


def _content(text):
    return [line.strip() for line in _lines(text) if line.strip()]


def is_ipv4(value):
    """True when ``value`` is a dotted-quad IPv4 address."""
    return isinstance(value, str) and bool(_IPV4_RE.match(value))


# ---------------------------------------------------------------------------
# Command lines
# ---------------------------------------------------------------------------

def query_cmd(tool, device, cmd):
    """``hccn_tool -i <device> -<cmd> -g`` as an argument list."""
    return [tool, "-i", str(int(device)), "-" + cmd, "-g"]


def set_cmd(tool, device, cmd, *params):
    """``hccn_tool -i <device> -<cmd> -s <params...>`` as an argument list."""
    return [tool, "-i", str(int(device)), "-" + cmd, "-s"] + [str(param) for param in params]


def ping_cmd(tool, device, address, packet_size=None):
    """``hccn_tool -i <device> -ping -g address <address> [pkt N]`` as an argument list."""
    argv = [tool, "-i", str(int(device)), "-ping", "-g", "address", address]
    if packet_size is not None:
        argv += ["pkt", str(int(packet_size))]
    return argv


def ip_set_cmd(tool, device, address, netmask):
    return set_cmd(tool, device, "ip", "address", address, "netmask", netmask)


def gateway_set_cmd(tool, device, gateway):
    return set_cmd(tool, device, "gateway", "gateway", gateway)


def netdetect_set_cmd(tool, device, address):
    return set_cmd(tool, device, "netdetect", "address", address)


def tls_set_cmd(tool, device, enable):
    return set_cmd(tool, device, "tls", "enable", int(enable))


def not_preset(setting, rc, stderr):
    """True when a failed ``-ip -g`` / ``-gateway -g`` only means nothing was configured."""
    if rc == NOT_PRESET_CODES.get(setting):
        return True
    return "was preset there" in (stderr or "")


# ---------------------------------------------------------------------------
# Query outputs
# ---------------------------------------------------------------------------

def parse_link(text):
    """``-link -g`` -> ``'UP'`` or ``'DOWN'``."""
    for line in _content(text):
        match = _LINK_RE.match(line)
        if match:
            return match.group("state").upper()
    raise ValueError("hccn_tool -link -g: no 'link status:' line in %r" % (text or "")[:200])


def parse_ip(text):
    """``-ip -g`` -> ``{'address': A, 'netmask': M}``, or None when nothing is configured.

    Older drivers print nothing (or blank lines) for a device without an address.
    """
    address = netmask = None
    for line in _content(text):
        match = _IPADDR_RE.match(line)
        if match:
            address = match.group("value")
            continue
        match = _NETMASK_RE.match(line)
        if match:
            netmask = match.group("value")
            continue
        raise ValueError("hccn_tool -ip -g: unexpected line %r" % line)
    if address is None and netmask:
        raise ValueError("hccn_tool -ip -g: netmask without ipaddr in %r" % text)
    if address is None or address in UNSET_ADDRESSES:
        return None
    if not is_ipv4(address) or (netmask and not is_ipv4(netmask)):
        raise ValueError("hccn_tool -ip -g: invalid address or netmask in %r" % text)
    return {"address": address, "netmask": netmask or None}


def parse_gateway(text):
    """``-gateway -g`` -> ``{'gateway': G, 'iface': 'ethN'}``, or None when empty / ``0.0.0.0``."""
    lines = _content(text)
    if not lines:
        return None
    for line in lines:
        match = _GATEWAY_RE.match(line)
        if match:
            gateway = match.group("gateway")
            if gateway in UNSET_ADDRESSES:
                return None
            if not is_ipv4(gateway):
                raise ValueError("hccn_tool -gateway -g: invalid gateway in %r" % line)
            return {"gateway": gateway, "iface": match.group("iface")}
    raise ValueError("hccn_tool -gateway -g: no 'default gateway:' line in %r" % (text or "")[:200])


def parse_netdetect(text):
    """``-netdetect -g`` -> the address, or None when unset (``0.0.0.0`` or empty).

    Accepts both labels: ``netdetect address:`` (HDK 24.x) and ``netdetect addr:`` (newer).
    """
    lines = _content(text)
    if not lines:
        return None
    for line in lines:
        match = _NETDETECT_RE.match(line)
        if match:
            value = match.group("value")
            if value in UNSET_ADDRESSES:
                return None
            if not is_ipv4(value):
                raise ValueError("hccn_tool -netdetect -g: invalid address in %r" % line)
            return value
    raise ValueError("hccn_tool -netdetect -g: no 'netdetect addr(ess):' line in %r" % (text or "")[:200])


def parse_pfc(text):
    """``-pfc -g`` -> the priorities with PFC enabled, sorted (``[4]``; ``[]`` when none is).

    The output is a table of the eight priorities and a 0/1 under each::

        PFC configuration:
        priority   0 1 2 3 4 5 6 7
        enabled    0 0 0 0 1 0 0 0
    """
    priorities = enabled = None
    for line in _content(text):
        words = line.split()
        if words[0] == "priority":
            priorities = words[1:]
        elif words[0] == "enabled":
            enabled = words[1:]
    if priorities is None or enabled is None or len(priorities) != len(enabled) \
            or not all(p.isdigit() for p in priorities) or not all(e in ("0", "1") for e in enabled):
        raise ValueError("hccn_tool -pfc -g: no 'priority' and 'enabled' rows of the same length in %r" % (text or "")[:200])
    return sorted(int(p) for p, e in zip(priorities, enabled) if e == "1")


def parse_tls(text):
    """``-tls -g`` -> ``{'device', 'switch', 'preconfigured', 'alarm_days'}`` from its first line.

    ``preconfigured`` is None on older HDKs that do not print it. Certificate
    blocks that follow are ignored.
    """
    for line in _content(text):
        match = _TLS_RE.match(line)
        if match:
            return {
                "device": int(match.group("device")),
                "switch": int(match.group("switch")),
                "preconfigured": None if match.group("preconfigured") is None else int(match.group("preconfigured")),
                "alarm_days": None if match.group("alarm") is None else int(match.group("alarm")),
            }
    raise ValueError("hccn_tool -tls -g: no 'tls switch[' line in %r" % (text or "")[:200])


def parse_net_health(text):
    """``-net_health -g`` -> the status text (``Success``, ``Init``, ``Fault``, ``Socket fail(ed)``, ...)."""
    for line in _content(text):
        match = _HEALTH_RE.match(line)
        if match:
            return match.group("status")
    raise ValueError("hccn_tool -net_health -g: no 'net health status:' line in %r" % (text or "")[:200])


def parse_ping(text):
    """``-ping -g address A`` -> a dict describing the ping.

    Keys: ``device``, ``address`` (from the ``device N PING A`` header, None
    when absent), ``transmitted``, ``received``, ``loss_pct`` (from the
    summary; None when absent), ``rtt_ms`` (list of the answered round trips),
    ``timeouts`` (count of ``recv time out`` lines) and ``reachable``: true
    when at least one reply came back.
    """
    result = {"device": None, "address": None, "transmitted": None, "received": None, "loss_pct": None,
              "rtt_ms": [], "timeouts": 0, "reachable": False}
    for line in _content(text):
        match = _PING_HEAD_RE.match(line)
        if match:
            result["device"] = int(match.group("device"))
            result["address"] = match.group("address")
            continue
        match = _PING_RECV_RE.match(line)
        if match:
            result["rtt_ms"].append(float(match.group("time")))
            continue
        if _PING_TIMEOUT_RE.match(line):
            result["timeouts"] += 1
            continue
        match = _PING_SUMMARY_RE.match(line)
        if match:
            result["transmitted"] = int(match.group("sent"))
            result["received"] = int(match.group("received"))
            result["loss_pct"] = float(match.group("loss"))
    if result["received"] is None:
        result["received"] = len(result["rtt_ms"])
        if result["rtt_ms"] or result["timeouts"]:
            result["transmitted"] = len(result["rtt_ms"]) + result["timeouts"]
            result["loss_pct"] = round(100.0 * result["timeouts"] / result["transmitted"], 2)
    result["reachable"] = result["received"] > 0
    return result


def ping_average(ping):
    """Average round trip in ms of a parsed ping, None when nothing came back."""
    if not ping["rtt_ms"]:
        return None
    return round(sum(ping["rtt_ms"]) / len(ping["rtt_ms"]), 6)


# ---------------------------------------------------------------------------
# /etc/hccn.conf
# ---------------------------------------------------------------------------

def parse_conf_line(line):
    """``(key, device, value)`` of a ``<key>_<device>=<value>`` line, else None (comment, blank, other)."""
    stripped = line.strip()
    if not stripped or stripped.startswith("#"):
        return None
    match = _CONF_ROW_RE.match(stripped)
    if not match:
        return None
    return match.group("key"), int(match.group("device")), match.group("value").strip()


def parse_conf(text):
    """``/etc/hccn.conf`` -> ``{device: {key: value}}`` (every key, known or not; the last one wins)."""
    devices = {}
    for line in _lines(text):
        parsed = parse_conf_line(line)
        if parsed:
            key, device, value = parsed
            devices.setdefault(device, {})[key] = value
    return devices


def render_conf(text, updates):
    """Apply ``updates`` (``{device: {key: value or None}}``) to the text of ``/etc/hccn.conf``.

    Existing lines are changed in place (a value of None removes the line);
    every other line (unknown keys, comments, other devices) is kept, in order.
    A new key goes right after the device's last line of a key that comes
    before it in ``CONF_KEY_ORDER`` (else before the first that comes after it,
    else after the device's last line); a device with no line yet gets a
    block at the end, in ``CONF_KEY_ORDER``.
    """
    rows = _lines(text)
    for device in sorted(updates):
        for key, value in _ordered(updates[device].items()):
            rows = _apply_one(rows, int(device), key, value)
    return "".join(row + "\n" for row in rows)


def _rank(key):
    return CONF_KEY_ORDER.index(key) if key in CONF_KEY_ORDER else len(CONF_KEY_ORDER)


def _ordered(items):
    return sorted(items, key=lambda item: _rank(item[0]))


def _apply_one(rows, device, key, value):
    parsed = [parse_conf_line(row) for row in rows]
    mine = [(i, p[0]) for i, p in enumerate(parsed) if p and p[1] == device]
    same = [i for i, name in mine if name == key]
    if value is None:
        return [row for i, row in enumerate(rows) if i not in same]
    entry = "%s_%d=%s" % (key, device, value)
    if same:
        rows = list(rows)
        rows[same[0]] = entry
        return [row for i, row in enumerate(rows) if i not in same[1:]]
    rank = _rank(key)
    before = [i for i, name in mine if _rank(name) <= rank]
    after = [i for i, name in mine if _rank(name) > rank]
    if before:
        at = before[-1] + 1
    elif after:
        at = after[0]
    elif mine:
        at = mine[-1][0] + 1
    else:
        at = len(rows)
    return rows[:at] + [entry] + rows[at:]


def conf_view(values):
    """The settings of one device in ``/etc/hccn.conf`` in the module's vocabulary.

    ``{'address', 'netmask', 'gateway', 'netdetect', 'tls'}``; absent keys are
    None, ``tls`` is an int when ``tls_enable`` is a number.
    """
    values = values or {}
    tls = values.get("tls_enable")
    try:
        tls = None if tls in (None, "") else int(tls)
    except ValueError:
        pass
    view = {}
    for key in ("address", "netmask", "gateway", "netdetect"):
        value = values.get(key)
        view[key] = None if value in (None, "") or (key != "netmask" and value in UNSET_ADDRESSES) else value
    view["tls"] = tls
    return view


def find_tool(module):
    """Path of hccn_tool for an AnsibleModule with an ``hccn_tool`` option (empty: PATH, then the driver's tools)."""
    path = module.params["hccn_tool"]
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            module.fail_json(msg="hccn_tool=%s is not an executable file" % path)
        return path
    return module.get_bin_path("hccn_tool", required=True, opt_dirs=[DEFAULT_TOOL_DIR])
