#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_node_info
short_description: Read what a node needs for Ray and what its Ray unit is doing
version_added: 0.2.0
description:
  - Reports the Ray venv (Python, Ray and grpcio versions, read from C(pyvenv.cfg) and the wheel metadata without
    starting Python), the systemd unit's state, the memory limit, the size of C(/dev/shm), the free space
    under the temp directory, who listens on the given ports, which firewall is active, and the processes
    still running from the venv.
  - The P(aihost.llm_cluster.ray_cluster#role) role uses it to size the object store, to check that every
    node runs the same versions, to explain a node that did not join, and for status and teardown.
  - Read-only.
options:
  venv:
    description: Directory of the Ray virtual environment.
    type: path
    required: true
  unit:
    description: Name of the node's Ray systemd unit.
    type: str
    required: true
  temp_dir:
    description: Ray's temp directory; its filesystem's free space is reported.
    type: path
    default: /var/lib/llm_cluster/ray
  ports:
    description: TCP ports whose listeners are reported (owners with pid, command and systemd unit).
    type: list
    elements: int
    default: []
  port_ranges:
    description: Inclusive port ranges, as C(first-last), whose listeners are reported too.
    type: list
    elements: str
    default: []
  journal_lines:
    description: Last lines of the unit's journal to return; 0 returns none.
    type: int
    default: 0
attributes:
  platform:
    description: Linux hosts with systemd.
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Read the node's Ray facts
  aihost.llm_cluster.ray_node_info:
    venv: /opt/llm_cluster/ray
    unit: llm-cluster-ray-worker
    ports: [6379, 6380, 6381]
    port_ranges: ["20000-20999"]
    journal_lines: 20
  register: ray_node
"""

RETURN = r"""
venv:
  description: The Ray venv; C(grpcio_version) is set when grpcio, with which Ray starts its client server, is installed.
  returned: always
  type: dict
  sample: {"path": "/opt/llm_cluster/ray", "exists": true, "python": "/opt/llm_cluster/ray/bin/python",
           "python_version": "3.11.2", "ray_version": "2.60.0", "grpcio_version": "1.85.3"}
service:
  description: The unit's systemd properties; C(exists) is false when systemd does not know it.
  returned: always
  type: dict
  sample: {"name": "llm-cluster-ray-head", "exists": true, "active_state": "active", "sub_state": "running",
           "main_pid": 4242, "restarts": 0, "unit_file_state": "enabled", "active_enter_monotonic": 912345678}
journal:
  description: The unit's last journal lines.
  returned: always
  type: list
  elements: str
memory:
  description: Bytes this node's processes may use (MemTotal lowered by a cgroup limit).
  returned: always
  type: int
shm:
  description: Size and free bytes of C(/dev/shm).
  returned: always
  type: dict
temp_dir:
  description: Size and free bytes of the filesystem holding the temp directory.
  returned: always
  type: dict
listeners:
  description: For each asked port that has a listener, its owners.
  returned: always
  type: list
  elements: dict
  sample: [{"port": 6379, "owners": [{"pid": 4250, "comm": "gcs_server", "unit": "llm-cluster-ray-head.service"}]}]
firewall:
  description: Which firewall is active; C(backend) is firewalld, nftables (an C(nft) binary) or none.
  returned: always
  type: dict
  sample: {"firewalld": false, "nft": "/usr/sbin/nft", "backend": "nftables"}
processes:
  description: Processes whose executable or interpreter lives in the venv (Ray left running).
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _disk
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _procnet
from ansible_collections.aihost.llm_cluster.plugins.module_utils import _ray

UNIT_PROPERTIES = ("LoadState", "ActiveState", "SubState", "MainPID", "NRestarts", "UnitFileState",
                   "ActiveEnterTimestampMonotonic", "Result")


def parse_show(text):
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    return values


def to_int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def service_facts(module, unit):
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {"name": unit, "exists": False, "error": "systemctl not found"}
    rc, out, err = module.run_command([systemctl, "show", unit, "--property=" + ",".join(UNIT_PROPERTIES)])
    values = parse_show(out)
    return {
        "name": unit,
        "exists": rc == 0 and values.get("LoadState") not in (None, "not-found"),
        "active_state": values.get("ActiveState"),
        "sub_state": values.get("SubState"),
        "result": values.get("Result"),
        "main_pid": to_int(values.get("MainPID")) or None,
        "restarts": to_int(values.get("NRestarts")),
        "unit_file_state": values.get("UnitFileState") or None,
        "active_enter_monotonic": to_int(values.get("ActiveEnterTimestampMonotonic")),
        "error": err.strip() if rc else None,
    }


def journal(module, unit, lines):
    journalctl = module.get_bin_path("journalctl")
    if lines <= 0 or not journalctl:
        return []
    rc, out, err = module.run_command([journalctl, "--unit", unit, "--lines", str(lines), "--no-pager",
                                       "--output", "short-iso", "--quiet"])
    return out.splitlines()[-lines:] if rc == 0 else ["journalctl failed: %s" % err.strip()]


def wanted_ports(ports, ranges, module):
    wanted = set(ports)
    for text in ranges:
        first, sep, last = text.partition("-")
        try:
            low, high = int(first), int(last if sep else first)
        except ValueError:
            module.fail_json(msg="port_ranges entry %r is not first-last" % text)
        wanted.update(range(low, high + 1))
    return wanted


def firewall_facts(module):
    firewalld = False
    systemctl = module.get_bin_path("systemctl")
    if systemctl:
        rc, out, dummy = module.run_command([systemctl, "is-active", "firewalld"])
        firewalld = out.strip() == "active"
    nft = module.get_bin_path("nft", opt_dirs=["/usr/sbin", "/sbin"])
    backend = "firewalld" if firewalld else ("nftables" if nft else "none")
    return {"firewalld": firewalld, "nft": nft, "backend": backend}


def venv_processes(venv, proc_root="/proc"):
    """Processes running a binary from the venv, or the venv's Python (Ray's helpers)."""
    found = []
    prefix = os.path.realpath(venv).rstrip("/") + "/"
    for pid in os.listdir(proc_root):
        if not pid.isdigit():
            continue
        try:
            exe = os.readlink(os.path.join(proc_root, pid, "exe"))
        except OSError:
            exe = ""
        cmdline = (_ray.read_text(os.path.join(proc_root, pid, "cmdline")) or "").split("\0")
        argv0 = cmdline[0] if cmdline else ""
        if exe.startswith(prefix) or argv0.startswith(venv.rstrip("/") + "/"):
            found.append({"pid": int(pid), "comm": (_ray.read_text(os.path.join(proc_root, pid, "comm")) or "").strip(),
                          "exe": exe or argv0})
    return sorted(found, key=lambda entry: entry["pid"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            venv=dict(type="path", required=True),
            unit=dict(type="str", required=True),
            temp_dir=dict(type="path", default="/var/lib/llm_cluster/ray"),
            ports=dict(type="list", elements="int", default=[]),
            port_ranges=dict(type="list", elements="str", default=[]),
            journal_lines=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    wanted = wanted_ports(params["ports"], params["port_ranges"], module)
    listeners = [{"port": port, "owners": owners}
                 for port, owners in sorted(_procnet.listening_ports().items()) if port in wanted]
    shm = _disk.filesystem("/dev/shm") if os.path.isdir("/dev/shm") else {"path": "/dev/shm", "size": None, "free": None}
    module.exit_json(
        changed=False,
        venv=_ray.venv_facts(params["venv"]),
        service=service_facts(module, params["unit"]),
        journal=journal(module, params["unit"], params["journal_lines"]),
        memory=_ray.memory_limit("/"),
        shm=shm,
        temp_dir=_disk.filesystem(params["temp_dir"]),
        listeners=listeners,
        firewall=firewall_facts(module),
        processes=venv_processes(params["venv"]),
    )


if __name__ == "__main__":
    main()
