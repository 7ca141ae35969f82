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
module: npu_network_info
short_description: Read the RoCE link, health, TLS switch and addresses of Ascend NPUs and ping peers from each device
version_added: 0.1.0
description:
  - For every listed NPU, reads with C(hccn_tool) the link status (C(-link -g)), the net health status (C(-net_health -g)),
    the TLS switch (C(-tls -g)), the address and netmask (C(-ip -g)), the gateway (C(-gateway -g)), the netdetect
    address (C(-netdetect -g)) and the priorities with PFC enabled (C(-pfc -g)).
  - Pings every address of O(ping) from its device with C(hccn_tool -i N -ping -g address A) and returns one result per
    (device, address).
  - All queries and pings run in parallel threads (O(parallel)). Nothing is changed. A query that fails is reported in
    the device's C(errors); the module itself fails only when C(hccn_tool) cannot be found.
options:
  devices:
    description: Device ids to read (the C(-i) argument of C(hccn_tool)).
    type: list
    elements: int
    required: true
  ping:
    description: Addresses to ping, each from one device.
    type: list
    elements: dict
    default: []
    suboptions:
      device:
        description: Device id that sends the ping.
        type: int
        required: true
      address:
        description: IPv4 address to ping.
        type: str
        required: true
      peer:
        description: Label of the peer (for example its inventory name), returned with the result.
        type: str
      peer_device:
        description: Device id of the peer, returned with the result.
        type: int
  known:
    description:
      - Settings of some of O(devices) that were read in this run already, as RV(aihost.llm_cluster.npu_network#module:devices[].live)
        returns them. For each listed device the module does not run C(-ip -g), C(-gateway -g) and C(-netdetect -g)
        again, nor C(-tls -g) when its C(tls) is set, and returns the given values.
      - Each query is one C(hccn_tool) run. The prepare step passes what its configuring task has just read, which
        leaves four of the seven queries of each NPU (three when that task enforced the TLS switch and so read it).
    type: list
    elements: dict
    default: []
    suboptions:
      index:
        description: Device id.
        type: int
        required: true
      address:
        description: IPv4 address of the RoCE port, V(null) when none is configured.
        type: str
      netmask:
        description: Its netmask.
        type: str
      gateway:
        description: Default gateway, V(null) when none is configured.
        type: str
      netdetect:
        description: Netdetect address, V(null) when none is configured.
        type: str
      tls:
        description: The TLS switch; V(null) when it was not read (then it is queried).
        type: int
  packet_size:
    description: Payload size of each ping packet (C(pkt)); the tool's default when omitted.
    type: int
  parallel:
    description: Number of C(hccn_tool) commands run at the same time.
    type: int
    default: 16
  hccn_tool:
    description: Path of C(hccn_tool). By default it is looked up on E(PATH) and in C(/usr/local/Ascend/driver/tools).
    type: path
attributes:
  check_mode:
    description: Runs the same queries and pings in check mode; they change nothing.
    support: full
  platform:
    description: Linux hosts with the Ascend NPU driver and C(hccn_tool).
seealso:
  - module: aihost.llm_cluster.npu_network
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Read the NPU network of this host and ping the same-index device of a peer
  aihost.llm_cluster.npu_network_info:
    devices: [0, 1]
    ping:
      - device: 0
        address: 10.10.2.1
        peer: worker1
        peer_device: 0
      - device: 1
        address: 10.10.2.2
        peer: worker1
        peer_device: 1
  register: npu_net

- name: Show the devices whose link is down
  ansible.builtin.debug:
    msg: "{{ npu_net.devices | rejectattr('link', 'equalto', 'UP') | map(attribute='index') | list }}"
"""

RETURN = r"""
devices:
  description: One entry per device of O(devices), in that order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Device id.
      type: int
      sample: 0
    link:
      description: V(UP) or V(DOWN), V(null) when it could not be read.
      type: str
      sample: UP
    net_health:
      description: The C(net health status) (V(Success), V(Init) when no netdetect address is set, V(Fault), ...).
      type: str
      sample: Success
    tls:
      description: The TLS switch (V(0) disabled, V(1) enabled), V(null) when it could not be read.
      type: int
      sample: 0
    address:
      description: IPv4 address of the RoCE port, V(null) when none is configured.
      type: str
      sample: 10.10.1.1
    netmask:
      description: Netmask, V(null) when no address is configured.
      type: str
      sample: 255.255.0.0
    gateway:
      description: Default gateway, V(null) when none is configured.
      type: str
      sample: null
    netdetect:
      description: Netdetect address, V(null) when none is configured.
      type: str
      sample: 10.10.0.1
    pfc:
      description: The priorities with PFC enabled, sorted (V([]) when none is); V(null) when they could not be read.
      type: list
      elements: int
      sample: [4]
    pfc_error:
      description:
        - Why O(devices) C(pfc) could not be read (a port without link answers C(-pfc -g) with exit status 22), else V(null).
        - Not one of RV(devices[].errors), because the link check names such a port already and a driver without C(-pfc)
          still deploys.
      type: str
      sample: null
    errors:
      description: Queries that failed or printed something unexpected, with exit status and message.
      type: list
      elements: str
      sample: ["-tls -g failed (rc=22): Execute failed: Link status is down."]
pings:
  description: One entry per item of O(ping), in that order.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: Device that sent the ping.
      type: int
      sample: 0
    address:
      description: Address pinged.
      type: str
      sample: 10.10.2.1
    peer:
      description: O(ping[].peer) as given.
      type: str
      sample: worker1
    peer_device:
      description: O(ping[].peer_device) as given.
      type: int
      sample: 0
    reachable:
      description: True when the tool succeeded and at least one reply came back.
      type: bool
      sample: true
    transmitted:
      description: Packets sent, V(null) when the tool printed no summary.
      type: int
      sample: 3
    received:
      description: Replies received.
      type: int
      sample: 3
    loss_pct:
      description: Packet loss in percent, V(null) when unknown.
      type: float
      sample: 0.0
    rtt_ms:
      description: Average round trip of the replies in milliseconds, V(null) without replies.
      type: float
      sample: 0.081333
    rc:
      description: Exit status of C(hccn_tool).
      type: int
      sample: 0
    error:
      description: Why the ping failed (the tool's message, or the packet summary), V(null) when it succeeded.
      type: str
      sample: null
hccn_tool:
  description: The C(hccn_tool) that was run.
  returned: always
  type: str
  sample: /usr/local/Ascend/driver/tools/hccn_tool
"""

from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _hccn as hccn

LOCALE = dict(LANG="C", LC_ALL="C", LC_MESSAGES="C", LC_CTYPE="C", LANGUAGE="C")
# query -> (parser, setting whose "not preset" failure means unset)
QUERIES = (
    ("link", hccn.parse_link, None),
    ("net_health", hccn.parse_net_health, None),
    ("tls", hccn.parse_tls, None),
    ("ip", hccn.parse_ip, "ip"),
    ("gateway", hccn.parse_gateway, "gateway"),
    ("netdetect", hccn.parse_netdetect, None),
    ("pfc", hccn.parse_pfc, None),
)
# Settings a device's entry in ``known`` answers: (query, the keys of the entry it fills).
KNOWN = (("ip", ("address", "netmask")), ("gateway", ("gateway",)), ("netdetect", ("netdetect",)), ("tls", ("tls",)))
# Queries whose failure is reported on its own (pfc_error), not as a device error: a port without link
# answers -pfc -g with exit 22, and the link check names that port already.
SOFT = ("pfc",)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            devices=dict(type="list", elements="int", required=True),
            ping=dict(type="list", elements="dict", default=[], options=dict(
                device=dict(type="int", required=True),
                address=dict(type="str", required=True),
                peer=dict(type="str"),
                peer_device=dict(type="int"),
            )),
            known=dict(type="list", elements="dict", default=[], options=dict(
                index=dict(type="int", required=True),
                address=dict(type="str"),
                netmask=dict(type="str"),
                gateway=dict(type="str"),
                netdetect=dict(type="str"),
                tls=dict(type="int"),
            )),
            packet_size=dict(type="int"),
            parallel=dict(type="int", default=16),
            hccn_tool=dict(type="path"),
        ),
        supports_check_mode=True,
    )


def first_line(text):
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[0] if lines else ""


def run_all(module, commands, parallel):
    """Run every argv of ``commands`` (at most ``parallel`` at a time); returns (rc, out, err) in order."""

    def run(argv):
        try:
            rc, out, err = module.run_command(argv)
        except Exception as exc:  # a thread must report, not die silently
            return 255, "", to_native(exc)
        return rc, out or "", err or ""

    if not commands:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(parallel, len(commands)))) as pool:
        return list(pool.map(run, commands))


def rerun_empty(module, commands, outputs):
    """Run again, once, each command that reported success but printed nothing.

    hccn_tool always prints the value it was asked for. AnsibleModule.run_command
    can lose the last output of a command that exits just after a quiet second,
    which happens when many queries run at once on a busy node; a second, lone
    call answers properly. What is still empty then is reported as it is.
    """
    for position, output in enumerate(outputs):
        if output[0] == 0 and not output[1].strip():
            outputs[position] = run_all(module, [commands[position]], 1)[0]
    return outputs


def known_queries(known):
    """{query: the entry's keys and values} of what ``known`` answers for one device (tls only when it was read)."""
    if not known:
        return {}
    return dict((name, dict((key, known.get(key)) for key in keys)) for name, keys in KNOWN
                if name != "tls" or known.get("tls") is not None)


def device_entry(index, outputs, answered=None):
    """Build one device's facts from ``{query: (rc, out, err)}`` and what ``answered`` (known_queries) holds."""
    entry = {"index": index, "link": None, "net_health": None, "tls": None, "address": None, "netmask": None,
             "gateway": None, "netdetect": None, "pfc": None, "pfc_error": None, "errors": []}
    answered = answered or {}
    for name, parser, setting in QUERIES:
        if name in answered:
            entry.update(answered[name])
            continue
        rc, out, err = outputs[name]
        if name in SOFT and rc != 0:
            entry[name + "_error"] = "-%s -g failed (rc=%d): %s" % (name, rc, first_line(err) or first_line(out))
            continue
        if rc != 0:
            if setting is None or not hccn.not_preset(setting, rc, err):
                entry["errors"].append("-%s -g failed (rc=%d): %s" % (name, rc, first_line(err) or first_line(out)))
            continue
        try:
            value = parser(out)
        except ValueError as exc:
            if name in SOFT:
                entry[name + "_error"] = to_native(exc)
            else:
                entry["errors"].append(to_native(exc))
            continue
        if name == "tls":
            entry["tls"] = value["switch"]
        elif name == "ip":
            entry.update(value or {})
        elif name == "gateway":
            entry["gateway"] = (value or {}).get("gateway")
        else:
            entry[name] = value
    return entry


def ping_entry(target, rc, out, err):
    parsed = hccn.parse_ping(out)
    reachable = rc == 0 and parsed["reachable"]
    error = None
    if not reachable:
        summary = [line.strip() for line in (out or "").splitlines() if "packets transmitted" in line]
        message = first_line(err)
        if summary and message:
            error = "%s (%s)" % (summary[-1], message)
        else:
            error = (summary[-1] if summary else message) or "no reply (rc=%d)" % rc
    return {"device": target["device"], "address": target["address"], "peer": target.get("peer"),
            "peer_device": target.get("peer_device"), "reachable": reachable, "transmitted": parsed["transmitted"],
            "received": parsed["received"], "loss_pct": parsed["loss_pct"], "rtt_ms": hccn.ping_average(parsed),
            "rc": rc, "error": error}


def main():
    module = build_module()
    module.run_command_environ_update = LOCALE
    params = module.params
    tool = hccn.find_tool(module)
    devices = []
    for index in params["devices"]:
        if index not in devices:
            devices.append(index)
    known = dict((entry["index"], entry) for entry in params["known"])
    answered = dict((index, known_queries(known.get(index))) for index in devices)
    queries = [(index, name) for index in devices for name, dummy, dummy in QUERIES if name not in answered[index]]
    commands = [hccn.query_cmd(tool, index, name) for index, name in queries]
    commands += [hccn.ping_cmd(tool, target["device"], target["address"], params["packet_size"])
                 for target in params["ping"]]
    outputs = rerun_empty(module, commands, run_all(module, commands, params["parallel"]))

    answers = dict(zip(queries, outputs))
    result_devices = [device_entry(index, dict((name, answers.get((index, name))) for name, dummy, dummy in QUERIES),
                                   answered[index]) for index in devices]
    pings = [ping_entry(target, *output) for target, output in zip(params["ping"], outputs[len(queries):])]
    module.exit_json(changed=False, devices=result_devices, pings=pings, hccn_tool=tool)


if __name__ == "__main__":
    main()
