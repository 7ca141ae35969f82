#!/usr/bin/python
# -*- coding: utf-8 -*-

# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: npu_network
short_description: Configure the RoCE address, gateway, netdetect address and TLS switch of Ascend NPUs with hccn_tool
version_added: 0.1.0
description:
  - Reads the live settings of every listed NPU with C(hccn_tool -i N -ip -g), C(-gateway -g), C(-netdetect -g) and, when
    O(tls) is set, C(-tls -g); changes only what differs (C(-ip -s address A netmask M), C(-gateway -s gateway G),
    C(-netdetect -s address A), C(-tls -s enable 0|1)); reads the changed devices again and fails when they did not converge.
  - Then checks that O(hccn_conf), where C(hccn_tool) persists the settings and from which the driver restores them at
    boot, agrees with the live values, and reports every disagreement with device, key, file value and live value
    (see O(conf_check)).
  - Addresses are set in an order that never gives one address to two devices of the host at the same time, since the
    tool refuses that; a set of devices that only swap addresses among themselves is refused.
  - Before the first change of a device, its original settings, and the lines O(hccn_conf) had for it, are recorded in
    C(npu_network.json) under O(state_dir).
  - With O(state=restored), sets the recorded originals again with C(hccn_tool), puts the device's lines of O(hccn_conf)
    back as they were (removing the lines it added), drops each record once the device reads its original again (the
    file goes with the last record) and reports in RV(not_restored) what could not be put back.
options:
  state:
    description:
      - V(present) configures O(devices); V(restored) puts back the settings recorded before the first change.
    type: str
    choices: [present, restored]
    default: present
  devices:
    description:
      - The devices to configure. Required with O(state=present).
      - With O(state=restored), limits the restore to these device indices (their other keys are ignored); when omitted
        every recorded device is restored.
    type: list
    elements: dict
    suboptions:
      index:
        description: Device id, the C(-i) argument of C(hccn_tool) (the physical device id, 0-7 on Atlas A2, 0-15 on A3).
        type: int
        required: true
      address:
        description: IPv4 address of the device's RoCE port. Required with O(state=present).
        type: str
      netmask:
        description: Netmask, dotted (V(255.255.0.0)) or as a prefix length (V(16)). Required with O(state=present).
        type: str
      gateway:
        description: Default gateway of the device; when omitted the gateway is not managed.
        type: str
      netdetect:
        description: Address the device probes for its C(net health status); when omitted it is not managed.
        type: str
  tls:
    description:
      - TLS switch to set on every listed device (V(0) disables, as the vendor guides recommend for HCCL).
      - When omitted the switch is neither read nor changed.
    type: int
    choices: [0, 1]
  hccn_tool:
    description: Path of C(hccn_tool). By default it is looked up on E(PATH) and in C(/usr/local/Ascend/driver/tools).
    type: path
  hccn_conf:
    description: The file in which C(hccn_tool) persists the settings.
    type: path
    default: /etc/hccn.conf
  conf_check:
    description:
      - What to do when O(hccn_conf) still disagrees with the live settings at the end of the run.
      - V(fail) fails the module, naming every disagreement. V(warn) returns them in RV(conf_mismatches) with a warning,
        so that the caller can collect them with other checks.
    type: str
    choices: [fail, warn]
    default: fail
  conf_repair:
    description:
      - Set the live value of every disagreeing key again with C(hccn_tool), which persists it in O(hccn_conf), then
        check the file again.
      - A key the device does not have (a gateway or netdetect address only in the file) cannot be removed with the tool
        and stays a disagreement.
    type: bool
    default: false
  state_dir:
    description: Directory of the state file C(npu_network.json) that records the original settings of changed devices.
    type: path
    default: /var/lib/llm_cluster
attributes:
  check_mode:
    description: Reads everything and reports what it would set; runs no C(-s) command and writes no state file.
    support: full
  diff_mode:
    description: Shows the settings of every listed device before and after (planned, in check mode).
    support: full
  platform:
    description: Linux hosts with the Ascend NPU driver and C(hccn_tool).
    support: full
    platforms: posix
notes:
  - An address, gateway or netdetect address cannot be removed with C(hccn_tool); the module only sets values. A device
    that had no address (or gateway, netdetect address) before the first change keeps the one it was given until the
    next boot after O(state=restored); the restore removes it from O(hccn_conf), from which the driver loads the
    settings at boot, and says so in RV(not_restored).
  - Older drivers print nothing for C(-ip -g) on a device without an address, newer ones fail with exit status 13; both
    mean "no address".
seealso:
  - module: aihost.llm_cluster.npu_network_info
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Give NPU 0 and 1 their RoCE addresses and disable TLS
  aihost.llm_cluster.npu_network:
    devices:
      - index: 0
        address: 10.10.1.1
        netmask: 255.255.0.0
      - index: 1
        address: 10.10.1.2
        netmask: 255.255.0.0
        gateway: 10.10.0.1
        netdetect: 10.10.0.1
    tls: 0

- name: Configure this host's part of a cluster plan (aihost.llm_cluster.npu_ip_plan filter)
  aihost.llm_cluster.npu_network:
    devices: "{{ npu_plan.hosts[inventory_hostname].devices }}"
    conf_check: warn
  register: npu_network_result

- name: Put back the settings every device had before the first change
  aihost.llm_cluster.npu_network:
    state: restored
"""

RETURN = r"""
devices:
  description: One entry per listed device, in O(devices) order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Device id.
      type: int
      sample: 0
    before:
      description:
        - Live settings before the run; C(address), C(netmask), C(gateway), C(netdetect) (V(null) when unset) and
          C(tls) (V(null) when O(tls) is omitted).
      type: dict
      sample: {"address": "10.10.0.10", "netmask": "255.255.0.0", "gateway": null, "netdetect": null, "tls": 1}
    planned:
      description: The settings the device should have.
      type: dict
      sample: {"address": "10.10.1.1", "netmask": "255.255.0.0", "gateway": null, "netdetect": null, "tls": 0}
    after:
      description: Live settings after the run, read again from the device when it was changed (the planned ones in check mode).
      type: dict
      sample: {"address": "10.10.1.1", "netmask": "255.255.0.0", "gateway": null, "netdetect": null, "tls": 0}
    changes:
      description: The settings that differed from the plan.
      type: list
      elements: str
      sample: [address, tls]
    live:
      description:
        - What the device holds at the end of the run, as this run read it. That is RV(devices[].after), except in check
          mode, where nothing was set and it is RV(devices[].before).
        - M(aihost.llm_cluster.npu_network_info) takes it as O(aihost.llm_cluster.npu_network_info#module:known) and does
          not query these settings again.
      type: dict
      sample: {"index": 0, "address": "10.10.1.1", "netmask": "255.255.0.0", "gateway": null, "netdetect": null, "tls": 0}
commands:
  description: Every C(hccn_tool ... -s ...) command run (or that would run, in check mode), as command lines.
  returned: always
  type: list
  elements: str
  sample: ["/usr/local/bin/hccn_tool -i 0 -ip -s address 10.10.1.1 netmask 255.255.0.0"]
conf_mismatches:
  description:
    - Disagreements between O(hccn_conf) and the live settings that remain after the run. V(null) values mean the key is
      absent from the file, or the setting is unset on the device.
  returned: always
  type: list
  elements: dict
  sample: [{"device": 2, "key": "address", "conf_key": "address", "file": "10.10.9.9", "live": "10.10.1.3"}]
hccn_conf:
  description: The configuration file that was checked.
  returned: always
  type: str
  sample: /etc/hccn.conf
hccn_tool:
  description: The C(hccn_tool) that was run.
  returned: always
  type: str
  sample: /usr/local/Ascend/driver/tools/hccn_tool
not_restored:
  description:
    - With O(state=restored), what could not be put back, one entry per device and reason. Always empty with
      O(state=present).
  returned: always
  type: list
  elements: dict
  sample: [{"device": 0, "reason": "hccn_tool cannot remove the address 10.20.0.1, which the device did not have before;
            /etc/hccn.conf no longer sets it, so it is gone after the next boot"}]
state_file:
  description: The state file that records the originals.
  returned: always
  type: str
  sample: /var/lib/llm_cluster/npu_network.json
"""

import ipaddress
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError, StateRecord, diff_of, run_change
from ansible_collections.aihost.llm_cluster.plugins.module_utils._fileio import atomic_write

KIND = "npu_network"
KEYS = ("address", "netmask", "gateway", "netdetect", "tls")
# The lines of hccn.conf a device's settings make: recorded before the first change, put back by the restore.
CONF_LINES = ("address", "netmask", "gateway", "netdetect", "send_arp_status", "tls_enable")
CONF_KEYS = {"address": "address", "netmask": "netmask", "gateway": "gateway", "netdetect": "netdetect",
             "tls": "tls_enable"}
LOCALE = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C", LANGUAGE="C")


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "restored"], default="present"),
            devices=dict(type="list", elements="dict", options=dict(
                index=dict(type="int", required=True),
                address=dict(type="str"),
                netmask=dict(type="str"),
                gateway=dict(type="str"),
                netdetect=dict(type="str"),
            )),
            tls=dict(type="int", choices=[0, 1]),
            hccn_tool=dict(type="path"),
            hccn_conf=dict(type="path", default=hccn.DEFAULT_CONF),
            conf_check=dict(type="str", choices=["fail", "warn"], default="fail"),
            conf_repair=dict(type="bool", default=False),
            state_dir=dict(type="path", default="/var/lib/llm_cluster"),
        ),
        required_if=[("state", "present", ["devices"])],
        supports_check_mode=True,
    )


def prefix_to_netmask(value):
    """'16' -> '255.255.0.0'; dotted netmasks are returned unchanged."""
    text = str(value).strip()
    if text.isdigit() and int(text) <= 32:
        return str(ipaddress.IPv4Network((0, int(text))).netmask)
    return text


def valid_netmask(text):
    """True for a dotted netmask (contiguous ones, 0.0.0.0 to 255.255.255.255), False for a host mask or other text."""
    if not hccn.is_ipv4(text):
        return False
    try:
        network = ipaddress.IPv4Network("0.0.0.0/%s" % text)
    except ValueError:
        return False
    return network.netmask == ipaddress.IPv4Address(text)


def desired_devices(module):
    """The O(devices) entries, checked and normalised; fails naming every bad value."""
    problems = []
    seen = set()
    wanted = []
    for entry in module.params["devices"]:
        index = entry["index"]
        if index < 0 or index in seen:
            problems.append("device %d is negative or listed twice" % index)
        seen.add(index)
        missing = [key for key in ("address", "netmask") if not (entry.get(key) or "").strip()]
        if missing:
            problems.append("device %d has no %s" % (index, " and no ".join(missing)))
            continue
        want = {"index": index, "address": entry["address"].strip(), "netmask": prefix_to_netmask(entry["netmask"]),
                "gateway": (entry.get("gateway") or "").strip() or None,
                "netdetect": (entry.get("netdetect") or "").strip() or None}
        for key in ("address", "gateway", "netdetect"):
            if want[key] is not None and not hccn.is_ipv4(want[key]):
                problems.append("device %d: %s %r is not an IPv4 address" % (index, key, want[key]))
        if not valid_netmask(want["netmask"]):
            problems.append("device %d: netmask %r is not a netmask" % (index, entry["netmask"]))
        wanted.append(want)
    addresses = [want["address"] for want in wanted]
    for address in sorted(set(a for a in addresses if addresses.count(a) > 1)):
        problems.append("address %s is given to devices %s" % (
            address, ", ".join(str(w["index"]) for w in wanted if w["address"] == address)))
    if problems:
        raise ChangeError("invalid devices: " + "; ".join(problems))
    return wanted


class Tool(object):
    """Runs hccn_tool; a failure raises ChangeError with cmd/rc/stdout/stderr."""

    def __init__(self, module, path, result):
        self.module = module
        self.path = path
        self.result = result

    def run(self, argv):
        rc, out, err = self.module.run_command(argv)
        return rc, out or "", err or ""

    def fail(self, msg, argv, rc, out, err):
        raise ChangeError(msg, dict(self.result, cmd=" ".join(argv), rc=rc, stdout=out, stderr=err))

    def query(self, index, cmd, parser, setting=None):
        argv = hccn.query_cmd(self.path, index, cmd)
        rc, out, err = self.run(argv)
        if rc != 0:
            if setting and hccn.not_preset(setting, rc, err):
                return None
            message = (err or out).strip()
            self.fail("%s failed on device %d (rc=%d): %s" % (" ".join(argv[1:]), index, rc, message), argv, rc, out, err)
        try:
            return parser(out)
        except ValueError as exc:
            self.fail("cannot read the output of %s: %s" % (" ".join(argv[1:]), to_native(exc)), argv, rc, out, err)

    def change(self, argv):
        rc, out, err = self.run(argv)
        if rc != 0:
            self.fail("%s failed (rc=%d): %s" % (" ".join(argv[1:]), rc, (err or out).strip()), argv, rc, out, err)


def read_live(tool, index, with_tls):
    """Live settings of one device in the module's vocabulary."""
    ip = tool.query(index, "ip", hccn.parse_ip, setting="ip") or {}
    gateway = tool.query(index, "gateway", hccn.parse_gateway, setting="gateway") or {}
    live = {
        "address": ip.get("address"),
        "netmask": ip.get("netmask"),
        "gateway": gateway.get("gateway"),
        "netdetect": tool.query(index, "netdetect", hccn.parse_netdetect),
        "tls": None,
    }
    if with_tls:
        live["tls"] = tool.query(index, "tls", hccn.parse_tls)["switch"]
    return live


def plan_device(want, before, tls):
    planned = dict(before)
    planned["address"] = want["address"]
    planned["netmask"] = want["netmask"]
    for key in ("gateway", "netdetect"):
        if want[key] is not None:
            planned[key] = want[key]
    if tls is not None:
        planned["tls"] = tls
    return planned


def changed_keys(before, planned):
    return [key for key in KEYS if before.get(key) != planned.get(key)]


def address_order(rows, result):
    """Rows whose address changes, in an order that never puts one address on two devices."""
    holding = dict((row["index"], row["before"]["address"]) for row in rows)
    pending = [row for row in rows if set(row["changes"]) & {"address", "netmask"}]
    ordered = []
    while pending:
        ready = [row for row in pending
                 if not any(owner != row["index"] and address == row["planned"]["address"]
                            for owner, address in holding.items())]
        if not ready:
            raise ChangeError("devices %s only swap addresses among themselves; give one of them a free address "
                              "first" % ", ".join(str(row["index"]) for row in pending), result)
        for row in ready:
            holding[row["index"]] = row["planned"]["address"]
            ordered.append(row)
            pending.remove(row)
    return ordered


def set_commands(tool_path, row, keys):
    """The -s commands that bring ``keys`` of a device to ``row['planned']``."""
    planned = row["planned"]
    index = row["index"]
    commands = []
    if "address" in keys or "netmask" in keys:
        commands.append(hccn.ip_set_cmd(tool_path, index, planned["address"], planned["netmask"]))
    if "gateway" in keys and planned["gateway"]:
        commands.append(hccn.gateway_set_cmd(tool_path, index, planned["gateway"]))
    if "netdetect" in keys and planned["netdetect"]:
        commands.append(hccn.netdetect_set_cmd(tool_path, index, planned["netdetect"]))
    if "tls" in keys and planned["tls"] is not None:
        commands.append(hccn.tls_set_cmd(tool_path, index, planned["tls"]))
    return commands


def read_conf(path, result):
    try:
        with open(path, encoding="utf-8") as handle:
            return hccn.parse_conf(handle.read())
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ChangeError("cannot read %s: %s" % (path, to_native(exc)), result)


def conf_mismatches(conf, rows, skip_keys=None):
    """Disagreements between the file and each row's ``after`` settings."""
    found = []
    for row in rows:
        view = hccn.conf_view(conf.get(row["index"]))
        for key in KEYS:
            if key in (skip_keys or {}).get(row["index"], ()):
                continue
            live = row["after"].get(key)
            if key == "tls" and (live is None or (view["tls"] is None and "tls" not in row["changes"])):
                continue  # not read, or never persisted: the driver default applies
            if view[key] != live:
                found.append({"device": row["index"], "key": key, "conf_key": CONF_KEYS[key], "file": view[key],
                              "live": live})
    return found


def describe_mismatch(item, path):
    return "device %d: %s has %s_%d=%s, the device has %s %s" % (
        item["device"], path, item["conf_key"], item["device"], "(absent)" if item["file"] is None else item["file"],
        item["key"], "(unset)" if item["live"] is None else item["live"])


def diff_text(rows, key):
    lines = []
    for row in rows:
        lines.append("device %d:" % row["index"])
        for name in KEYS:
            value = row[key].get(name)
            if name == "tls" and value is None:
                continue
            lines.append("  %s: %s" % (name, "-" if value is None else value))
    return "\n".join(lines) + "\n"


def read_conf_text(path, result, failure=""):
    """(text, exists) of the configuration file; a file that cannot be read raises ChangeError."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), True
    except FileNotFoundError:
        return "", False
    except (OSError, UnicodeDecodeError) as exc:
        raise ChangeError("%scannot read %s: %s" % (failure, path, to_native(exc)), result)


def record_originals(state_dir, rows, result, conf_path):
    """Record, before the first change of each device, its live settings and its lines of hccn.conf."""
    text, exists = read_conf_text(conf_path, result, "nothing was changed: ")
    conf = hccn.parse_conf(text)
    StateRecord(state_dir, KIND).record_originals(
        [("device%d" % row["index"], dict(row["before"], index=row["index"], conf_file=exists,
                                          conf=dict((key, conf.get(row["index"], {}).get(key)) for key in CONF_LINES)))
         for row in rows if row["changes"]],
        result, only_when_stored=True)


def change_commands(tool_path, rows, result):
    """Every -s command that brings ``rows`` to their ``planned`` settings, addresses first, in a safe order."""
    commands = []
    for row in address_order(rows, result):
        commands.extend(set_commands(tool_path, row, ["address"]))
    for row in rows:
        commands.extend(set_commands(tool_path, row, [key for key in row["changes"] if key not in ("address", "netmask")]))
    return commands


def public(rows, check_mode):
    """The rows as returned; ``live`` is what the device holds now (not yet the planned values in check mode)."""
    return [dict([(key, row[key]) for key in ("index", "before", "planned", "after", "changes")]
                 + [("live", dict(row["before"] if check_mode else row["after"], index=row["index"]))]) for row in rows]


def converge(module):
    """Read, plan, record, apply, re-read and compare; returns the result, raises ChangeError."""
    params = module.params
    wanted = desired_devices(module)
    tool_path = hccn.find_tool(module)
    result = dict(devices=[], commands=[], conf_mismatches=[], hccn_conf=params["hccn_conf"], hccn_tool=tool_path)
    tool = Tool(module, tool_path, result)
    with_tls = params["tls"] is not None

    rows = []
    for want in wanted:
        before = read_live(tool, want["index"], with_tls)
        planned = plan_device(want, before, params["tls"])
        rows.append({"index": want["index"], "before": before, "planned": planned, "after": dict(before),
                     "changes": changed_keys(before, planned)})
    result["devices"] = public(rows, module.check_mode)

    commands = change_commands(tool_path, rows, result)
    changed = bool(commands)

    if module.check_mode:
        for row in rows:
            row["after"] = dict(row["planned"])
    elif commands:
        record_originals(params["state_dir"], rows, result, params["hccn_conf"])
        for argv in commands:
            result["commands"].append(" ".join(argv))
            tool.change(argv)
        for row in rows:
            if row["changes"]:
                row["after"] = read_live(tool, row["index"], with_tls)
        result["devices"] = public(rows, module.check_mode)
        stuck = ["device %d %s is %s, expected %s" % (row["index"], key, row["after"].get(key), row["planned"].get(key))
                 for row in rows for key in row["changes"] if row["after"].get(key) != row["planned"].get(key)]
        if stuck:
            raise ChangeError("the NPU network did not converge: " + "; ".join(stuck), result)
    if module.check_mode:
        result["commands"] = [" ".join(argv) for argv in commands]
    result["devices"] = public(rows, module.check_mode)

    # In check mode the keys about to be set are rewritten in the file by the tool: compare the others only.
    skip = dict((row["index"], row["changes"]) for row in rows) if module.check_mode else None
    mismatches = conf_mismatches(read_conf(params["hccn_conf"], result), rows, skip)
    if mismatches and params["conf_repair"]:
        repairs = []
        for row in rows:
            keys = [item["key"] for item in mismatches if item["device"] == row["index"] and item["live"] is not None]
            repairs.extend(set_commands(tool_path, dict(row, planned=row["after"]), keys))
        changed = changed or bool(repairs)
        for argv in repairs:
            result["commands"].append(" ".join(argv))
            if not module.check_mode:
                tool.change(argv)
        if not module.check_mode:
            mismatches = conf_mismatches(read_conf(params["hccn_conf"], result), rows)
        else:
            mismatches = [item for item in mismatches if item["live"] is None]
    result["conf_mismatches"] = mismatches
    if module._diff:
        result["diff"] = diff_of(diff_text(rows, "before"), diff_text(rows, "after"), tool_path, module.check_mode)
    if mismatches and params["conf_check"] != "warn":
        raise ChangeError("%s disagrees with the live NPU settings: %s" % (
            params["hccn_conf"], "; ".join(describe_mismatch(item, params["hccn_conf"]) for item in mismatches)),
            result, changed=changed)
    for item in mismatches:
        module.warn(describe_mismatch(item, params["hccn_conf"]))
    return dict(result, changed=changed)


def restore_rows(tool, records):
    """One row per record: the live settings, the originals to set again, and what cannot be set again."""
    rows = []
    for key, entry in records:
        original = dict((name, entry.get(name)) for name in KEYS)
        before = read_live(tool, entry["index"], original["tls"] is not None)
        planned = dict(before)
        planned.update((name, value) for name, value in original.items() if value is not None)
        rows.append({"index": entry["index"], "key": key, "entry": entry, "before": before, "planned": planned,
                     "after": dict(before), "changes": changed_keys(before, planned),
                     # hccn_tool sets values but cannot remove one the device did not have.
                     "kept": [name for name in ("address", "gateway", "netdetect")
                              if original[name] is None and before[name] is not None]})
    return rows


def restored_conf(text, rows):
    """The text of hccn.conf with each restored device's lines as they were recorded (None removes a line)."""
    updates = dict((row["index"], row["entry"]["conf"]) for row in rows if isinstance(row["entry"].get("conf"), dict))
    return hccn.render_conf(text, updates) if updates else text


def write_conf(path, text, remove, result):
    try:
        if remove:
            os.unlink(path)
        else:
            atomic_write(path, text)
    except OSError as exc:
        raise ChangeError("the devices were restored but %s could not be written: %s; run the restore again" % (
            path, to_native(exc)), result)


def restore(module):
    """Set the recorded originals again, put hccn.conf's lines back and drop the records that were restored."""
    params = module.params
    tool_path = hccn.find_tool(module)
    state = StateRecord(params["state_dir"], KIND)
    result = dict(devices=[], commands=[], conf_mismatches=[], not_restored=[], hccn_conf=params["hccn_conf"],
                  hccn_tool=tool_path, state_file=state.path)
    doc = state.load("nothing was restored: ", result)
    wanted = set(entry["index"] for entry in params["devices"] or []) or None
    records = sorted(((key, entry) for key, entry in doc["entries"].items()
                      if isinstance(entry, dict) and isinstance(entry.get("index"), int)
                      and (wanted is None or entry["index"] in wanted)), key=lambda item: item[1]["index"])
    tool = Tool(module, tool_path, result)
    rows = restore_rows(tool, records)
    result["devices"] = public(rows, module.check_mode)
    commands = change_commands(tool_path, rows, result)
    text, exists = read_conf_text(params["hccn_conf"], result, "nothing was restored: ")

    if not module.check_mode:
        for argv in commands:
            result["commands"].append(" ".join(argv))
            tool.change(argv)
        if commands:
            text, exists = read_conf_text(params["hccn_conf"], result)
    else:
        result["commands"] = [" ".join(argv) for argv in commands]
    conf_after = restored_conf(text, rows)
    # The file did not exist before the first change and nothing else is in it now: it goes again.
    remove_conf = bool(exists and not conf_after.strip() and rows) and not any(row["entry"].get("conf_file", True) for row in rows)
    conf_changed = (conf_after != text and exists) or remove_conf
    result["changed"] = bool(commands) or conf_changed
    if conf_changed and not module.check_mode:
        write_conf(params["hccn_conf"], conf_after, remove_conf, result)

    for row in rows:
        if module.check_mode:
            row["after"] = dict(row["planned"])
        elif row["changes"]:
            row["after"] = read_live(tool, row["index"], row["entry"].get("tls") is not None)
        stuck = ["%s is %s, expected %s" % (key, row["after"].get(key), row["planned"].get(key))
                 for key in row["changes"] if row["after"].get(key) != row["planned"].get(key)]
        if stuck:
            result["not_restored"].append(dict(device=row["index"], reason="; ".join(stuck)))
            continue
        for name in row["kept"]:
            result["not_restored"].append(dict(device=row["index"], reason=(
                "hccn_tool cannot remove the %s %s, which the device did not have before; %s no longer sets it, so it "
                "is gone after the next boot" % (name, row["before"][name], params["hccn_conf"]))))
        if not module.check_mode:
            state.drop(row["key"])
    result["devices"] = public(rows, module.check_mode)
    if module._diff:
        result["diff"] = [diff_of(diff_text(rows, "before"), diff_text(rows, "after"), tool_path, module.check_mode)]
        if conf_changed:
            result["diff"].append(diff_of("" if not exists else text, "" if remove_conf else conf_after,
                                          params["hccn_conf"], module.check_mode))
    if state.dirty:
        state.save("the devices were restored but the state file was not updated: ", result)
    return result


def main():
    module = build_module()
    module.run_command_environ_update = LOCALE
    run_change(module, converge if module.params["state"] == "present" else restore, module)


if __name__ == "__main__":
    main()
