#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight_info
short_description: Read what the preflight gates need from a node, changing nothing
version_added: 0.1.0
description:
  - Returns the node's kernel, Python version, available memory, the size of the model directory and the
    free space under it, the cluster interface (resolved from V(auto) by the route to the head), the owners
    of the given TCP ports, the firewall it has (a running firewalld, the nft command), and the node's clock.
  - Read-only; the verdicts are made on the controller by the P(aihost.llm_cluster.preflight_report#filter) filter.
options:
  model_path:
    description:
      - Model directory. When it exists its files are counted and summed; free space is measured on the
        nearest existing directory at or above it.
    type: str
    default: ""
  interface:
    description:
      - Cluster network interface. V(auto) or empty means the interface of the route to O(head_address),
        or of the default route when O(head_address) is empty.
    type: str
    default: auto
  head_address:
    description: Address of the head node on the cluster network, used to resolve O(interface=auto).
    type: str
    default: ""
  ports:
    description: TCP ports to report listeners for.
    type: list
    elements: int
    default: []
  firewalld_zone:
    description:
      - Where firewalld runs, the zone whose rich rules are read for the C(members) of RV(firewall) (the zone
        the Ray step writes its rules to); empty means firewalld's default zone.
    type: str
    default: ""
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Read the node's preflight facts
  aihost.llm_cluster.preflight_info:
    model_path: /data/models/DeepSeek-R1
    interface: enp67s0f0np0
    ports: [6379, 8000, 12570]
"""

RETURN = r"""
kernel:
  description: Kernel release.
  returned: always
  type: str
  sample: 6.6.0-72.0.0.76.oe2403sp1.aarch64
python_version:
  description: Version of the Python that ran the module (the node's Ansible interpreter).
  returned: always
  type: str
  sample: 3.11.2
memory:
  description: Memory in bytes from /proc/meminfo (C(total), C(available)).
  returned: always
  type: dict
  sample: {"total": 1621350481920, "available": 1580000000000}
model:
  description:
    - C(path), C(exists), C(files) and C(size) (bytes) of the model directory, and C(disk_path) /
      C(disk_free) (bytes) of the filesystem that holds (or will hold) it.
  returned: always
  type: dict
  sample: {"path": "/data/m", "exists": true, "files": 3, "size": 1024, "disk_path": "/data/m", "disk_free": 10737418240}
interface:
  description:
    - The cluster interface. C(requested) as given, C(name) as resolved, C(exists), C(up), C(ipv4) (list of
      addresses), C(address) (the first), C(error) when it could not be resolved.
  returned: always
  type: dict
  sample: {"requested": "auto", "name": "eth0", "exists": true, "up": true, "ipv4": ["172.18.0.2"], "address": "172.18.0.2", "error": null,
           "available": ["eth0"]}
ports:
  description: Per port, C(free) and the C(owners) (pid, comm, systemd unit) of its listeners.
  returned: always
  type: list
  elements: dict
  sample: [{"port": 6379, "free": true, "owners": []}]
firewall:
  description:
    - What can close the cluster interface. C(firewalld) is true when C(firewalld.service) is active; C(nft) is the
      path of the C(nft) command (searched in C(PATH), C(/usr/sbin) and C(/sbin)), empty when there is none.
    - C(members) lists the addresses (or networks) the node's firewall admits on every port, as the Ray step
      writes them. With firewalld running (C(members_from) is V(firewalld)), the source of each rich rule of
      O(firewalld_zone) that accepts an address or network with no other condition, read with
      C(firewall-cmd --list-rich-rules); otherwise (V(nftables)) the set C(members) of this collection's own
      table C(inet llm_cluster), read with C(nft -j list set). Null (and C(members_from) null) where neither
      can be read, that is no such table (a new node), no C(nft), or a zone firewalld does not have. The
      preflight reads it to tell the members' own rules, which admit a new node only once the Ray step
      writes them, from a site firewall when a new node cannot reach a member yet.
    - C(error) says why firewalld's rules could not be listed (a zone firewalld does not have, no
      C(firewall-cmd)), with firewall-cmd's message; null otherwise. The preflight fails on it, naming
      O(firewalld_zone)'s variable.
    - With firewalld running, C(zone) is the zone the rules go to (O(firewalld_zone), or firewalld's default
      zone) and C(interface_zone) the zone that takes the cluster interface's traffic (the zone it is bound
      to, or the default zone); both null without firewalld. The preflight fails a node where they differ,
      since the Ray step's rules would not apply to the cluster's traffic.
    - With firewalld running, C(source_zones) lists each zone that binds sources, read with C(firewall-cmd
      --list-all-zones), with its C(zone), C(target) and C(sources) as firewalld prints them, C(ipsets) the
      entries of each C(ipset:NAME) source (C(firewall-cmd --ipset=NAME --get-entries)), and C(error) why a
      listing failed; the running configuration's zones first, then the permanent configuration's (read with
      C(--permanent), C(permanent) true), which firewalld's next reload or the node's boot makes running.
      firewalld hands a packet to the zone of its source before the zone of its interface, so
      such a zone takes a member's or a stranger's traffic before the rules of the Ray step see it; the
      preflight judges them. Null without firewalld.
  returned: always
  type: dict
  sample: {"firewalld": false, "nft": "/usr/sbin/nft", "members": ["10.10.0.11", "10.10.0.12"], "members_from": "nftables",
           "error": null, "zone": null, "interface_zone": null, "source_zones": null}
clock:
  description: The node's clock in seconds since the epoch.
  returned: always
  type: float
  sample: 1764451200.5
"""

import json
import os
import platform
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _disk
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import listening_ports

LOCALE = {"LANGUAGE": "C", "LC_ALL": "C"}


def read_meminfo(path="/proc/meminfo"):
    values = {}
    with open(path) as handle:
        for line in handle:
            key, rest = line.partition(":")[::2]
            parts = rest.split()
            if parts:
                values[key] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
    return {"total": values.get("MemTotal", 0), "available": values.get("MemAvailable", values.get("MemFree", 0))}


def model_facts(path):
    facts = {"path": path, "exists": False, "files": 0, "size": 0, "disk_path": None, "disk_free": None}
    if not path:
        return facts
    if os.path.isdir(path):
        facts["exists"] = True
        for root, _dirs, files in os.walk(path):
            for name in files:
                try:
                    facts["size"] += os.stat(os.path.join(root, name)).st_size
                    facts["files"] += 1
                except OSError:
                    continue
    disk = _disk.filesystem(path)
    facts["disk_path"] = disk["checked"]
    facts["disk_free"] = disk["free"]
    return facts


def interface_facts(module, requested, head_address):
    ip_bin = module.get_bin_path("ip", required=True)
    facts = {"requested": requested, "name": None, "exists": False, "up": False, "ipv4": [], "address": None, "error": None,
             "available": sorted(n for n in os.listdir("/sys/class/net") if n != "lo")}
    name = requested
    if requested in ("", "auto"):
        cmd = [ip_bin, "-j", "route", "get", head_address] if head_address else [ip_bin, "-j", "route", "show", "default"]
        rc, out, err = module.run_command(cmd, environ_update=LOCALE)
        routes = json.loads(out) if rc == 0 and out.strip() else []
        if not routes or not routes[0].get("dev"):
            facts["error"] = "no route %s (%s)" % ("to " + head_address if head_address else "by default", err.strip() or "empty")
            return facts
        name = routes[0]["dev"]
    facts["name"] = name
    rc, out, err = module.run_command([ip_bin, "-j", "addr", "show", "dev", name], environ_update=LOCALE)
    if rc != 0:
        facts["error"] = err.strip() or "ip addr show dev %s failed" % name
        return facts
    links = json.loads(out) if out.strip() else []
    if not links:
        facts["error"] = "interface %s not found" % name
        return facts
    link = links[0]
    facts["exists"] = True
    facts["up"] = "UP" in link.get("flags", []) and link.get("operstate") in ("UP", "UNKNOWN")
    facts["ipv4"] = [a["local"] for a in link.get("addr_info", []) if a.get("family") == "inet"]
    facts["address"] = facts["ipv4"][0] if facts["ipv4"] else None
    return facts


def nft_set_elements(text):
    """The elements of the set in ``nft -j list set`` output, sorted: plain values, or an element object's
    ``val`` (a set with counters or timeouts lists objects); None when the text holds no set."""
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    for item in doc.get("nftables") or [] if isinstance(doc, dict) else []:
        found = item.get("set") if isinstance(item, dict) else None
        if not isinstance(found, dict):
            continue
        elements = []
        for element in found.get("elem") or []:
            if isinstance(element, dict) and isinstance(element.get("elem"), dict):
                element = element["elem"].get("val")
            if isinstance(element, str):
                elements.append(element)
        return sorted(elements)
    return None


def own_members(module, nft):
    """The addresses this collection's own table admits as members (the set ``members`` of ``inet llm_cluster``,
    which the Ray step writes); None when there is no nft command or no such table, as on a new node."""
    if not nft:
        return None
    rc, out, _err = module.run_command([nft, "-j", "list", "set", "inet", "llm_cluster", "members"], environ_update=LOCALE)
    return nft_set_elements(out) if rc == 0 else None


# A rich rule that accepts one source on every port, as the Ray step writes it for a member or an admin network
# (firewall-cmd prints rules in this canonical form; a priority, when set, comes first). A rule with any other
# condition (a port, a destination, NOT, an ipset, a log or limit) admits less, or what this cannot read: it
# does not count.
RICH_RULE_MEMBER = re.compile(r'^rule (?:priority="-?[0-9]+" )?family="ipv[46]" source address="([^"]+)" accept$')


def rich_rule_sources(text):
    """The sources that ``firewall-cmd --list-rich-rules`` output accepts on every port, sorted."""
    found = []
    for line in text.splitlines():
        match = RICH_RULE_MEMBER.match(line.strip())
        if match:
            found.append(match.group(1))
    return sorted(found)


def firewalld_members(module, zone):
    """(the sources the zone's rich rules accept on every port, None) or (None, why firewall-cmd could not list
    them)."""
    command = module.get_bin_path("firewall-cmd", opt_dirs=["/usr/bin", "/usr/sbin", "/bin", "/sbin"])
    if not command:
        return None, "firewalld runs but there is no firewall-cmd command"
    argv = [command] + (["--zone=%s" % zone] if zone else []) + ["--list-rich-rules"]
    rc, out, err = module.run_command(argv, environ_update=LOCALE)
    if rc != 0:
        return None, "%s: %s" % (" ".join(["firewall-cmd"] + argv[1:]), (err or out).strip() or "exit status %d" % rc)
    return rich_rule_sources(out), None


def firewalld_zones(module, zone, interface):
    """(the zone the rules go to, the zone of the interface's traffic): each resolved to firewalld's default zone
    where none is named or bound; None where firewall-cmd cannot say."""
    command = module.get_bin_path("firewall-cmd", opt_dirs=["/usr/bin", "/usr/sbin", "/bin", "/sbin"])
    if not command:
        return None, None
    rc, out, _err = module.run_command([command, "--get-default-zone"], environ_update=LOCALE)
    default = out.strip() if rc == 0 and out.strip() else None
    bound = None
    if interface:
        # Exit status 2 and "no zone" on stderr for an interface bound to none: the default zone takes its traffic.
        rc, out, _err = module.run_command([command, "--get-zone-of-interface=%s" % interface], environ_update=LOCALE)
        bound = out.strip() if rc == 0 and out.strip() else None
    return zone or default, bound or default


def list_all_zones_sources(text):
    """The zones of ``firewall-cmd --list-all-zones`` output that bind sources: [{zone, target, sources}], in
    firewalld's order. A zone's block starts with its name at the left margin (``block (active)``, ``public
    (default, active)``), its settings follow as indented ``key: value`` lines and its rich rules as tab-indented
    lines."""
    zones, current = [], None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line[0].isspace():
            current = {"zone": line.split()[0], "target": None, "sources": []}
            zones.append(current)
            continue
        key, sep, value = line.strip().partition(":")
        if current is None or not sep or line.startswith("\t"):
            continue
        if key == "target":
            current["target"] = value.strip()
        elif key == "sources":
            current["sources"] = value.split()
    return [entry for entry in zones if entry["sources"]]


def _source_zones(module, command, permanent):
    """The zones that bind sources in firewalld's running (or with ``permanent`` its permanent) configuration,
    each with its ipsets' entries read and ``error``; a one-entry list with ``error`` when the zones cannot be
    listed."""
    flag = ["--permanent"] if permanent else []
    shown = " ".join(["firewall-cmd"] + flag)
    rc, out, err = module.run_command([command] + flag + ["--list-all-zones"], environ_update=LOCALE)
    if rc != 0:
        return [{"zone": None, "target": None, "sources": [], "ipsets": {}, "permanent": permanent,
                 "error": "%s --list-all-zones: %s" % (shown, (err or out).strip() or "exit status %d" % rc)}]
    zones = list_all_zones_sources(out)
    for entry in zones:
        entry["ipsets"], entry["permanent"], problems = {}, permanent, []
        for source in entry["sources"]:
            if not source.startswith("ipset:"):
                continue
            name = source[len("ipset:"):]
            rc, out, err = module.run_command([command] + flag + ["--ipset=%s" % name, "--get-entries"],
                                              environ_update=LOCALE)
            if rc == 0:
                entry["ipsets"][name] = out.split()
            else:
                problems.append("%s --ipset=%s --get-entries: %s" % (shown, name, (err or out).strip() or "exit status %d" % rc))
        entry["error"] = "; ".join(problems) or None
    return zones


def firewalld_source_zones(module):
    """The zones that bind sources, running then permanent (``permanent``: what firewalld's next reload or the
    node's boot makes running), each with its ipsets' entries (``ipsets``) and ``error`` (why a listing failed,
    firewall-cmd's message)."""
    command = module.get_bin_path("firewall-cmd", opt_dirs=["/usr/bin", "/usr/sbin", "/bin", "/sbin"])
    if not command:
        return None
    return _source_zones(module, command, False) + _source_zones(module, command, True)


def firewall_facts(module, zone="", interface=""):
    """Whether firewalld runs, where the nft command is ("" when there is none), and the members the node's
    firewall admits: firewalld's rich rules where it runs, else this collection's own table (None without);
    ``error`` says why firewalld's rules could not be read. With firewalld, ``zone`` is the zone the rules go to,
    ``interface_zone`` the zone of the cluster interface's traffic and ``source_zones`` the zones that bind
    sources."""
    systemctl = module.get_bin_path("systemctl")
    firewalld = False
    if systemctl:
        rc, _out, _err = module.run_command([systemctl, "is-active", "--quiet", "firewalld.service"], environ_update=LOCALE)
        firewalld = rc == 0
    nft = module.get_bin_path("nft", opt_dirs=["/usr/sbin", "/sbin"]) or ""
    rules_zone = interface_zone = source_zones = None
    if firewalld:
        (members, error), members_from = firewalld_members(module, zone), "firewalld"
        rules_zone, interface_zone = firewalld_zones(module, zone, interface)
        source_zones = firewalld_source_zones(module)
    else:
        (members, error), members_from = (own_members(module, nft), None), "nftables"
    return {"firewalld": firewalld, "nft": nft, "members": members,
            "members_from": members_from if members is not None else None, "error": error,
            "zone": rules_zone, "interface_zone": interface_zone, "source_zones": source_zones}


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="str", default=""),
            interface=dict(type="str", default="auto"),
            head_address=dict(type="str", default=""),
            ports=dict(type="list", elements="int", default=[]),
            firewalld_zone=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    listeners = listening_ports()
    interface = interface_facts(module, module.params["interface"], module.params["head_address"])
    module.exit_json(
        changed=False,
        kernel=platform.release(),
        python_version=platform.python_version(),
        memory=read_meminfo(),
        model=model_facts(module.params["model_path"]),
        interface=interface,
        ports=[{"port": p, "free": p not in listeners, "owners": listeners.get(p, [])} for p in module.params["ports"]],
        firewall=firewall_facts(module, module.params["firewalld_zone"], interface.get("name") or ""),
        clock=time.time(),
    )


if __name__ == "__main__":
    main()
