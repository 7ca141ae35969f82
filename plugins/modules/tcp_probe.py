#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: tcp_probe
short_description: Open a TCP connection to each of a list of peers and report which answered
version_added: 0.1.0
description:
  - Connects from the managed node to every target and reports, per target, whether the TCP handshake
    completed, how long it took and the error otherwise. Nothing is sent and nothing is changed.
  - When the peer is a M(aihost.llm_cluster.port_listener), its greeting carries the peer's clock and the
    result includes the peer's clock offset from this node, with the measurement's uncertainty (half the
    round trip).
  - Used by the preflight gates to prove that every node reaches every other node on the Ray port over
    the cluster interface, before Ray is started.
options:
  targets:
    description: Peers to connect to.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Label of the peer in the result (usually its inventory name).
        type: str
        required: true
      address:
        description: IP address or name to connect to.
        type: str
        required: true
      port:
        description: TCP port.
        type: int
        required: true
  source:
    description: Local address to connect from (the cluster interface's address); empty lets the kernel choose.
    type: str
    default: ""
  timeout:
    description: Seconds each connection attempt may take.
    type: float
    default: 3.0
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Probe the Ray port of every other node
  aihost.llm_cluster.tcp_probe:
    targets:
      - name: worker1
        address: 192.168.10.12
        port: 6379
    timeout: 3
"""

RETURN = r"""
results:
  description: One entry per target, in the order given.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "worker1", "address": "192.168.10.12", "port": 6379, "reachable": true, "seconds": 0.001,
            "error": null, "clock_offset": 0.0004, "clock_uncertainty": 0.0001}]
failed_peers:
  description: Names of the targets that did not accept the connection.
  returned: always
  type: list
  elements: str
  sample: []
clock:
  description: The node's clock (seconds since the epoch) when the probes finished, for clock-offset checks.
  returned: always
  type: float
  sample: 1764451200.123
"""

import socket
import time

from ansible.module_utils.basic import AnsibleModule


GREETING = b"llm_cluster-probe "


def read_peer_clock(conn):
    """Return (peer clock offset, uncertainty) from a probe listener's greeting, or (None, None)."""
    conn.settimeout(0.5)
    sent_at = time.time()
    try:
        greeting = conn.recv(64)
    except (OSError, socket.timeout):
        return None, None
    received_at = time.time()
    if not greeting.startswith(GREETING):
        return None, None
    try:
        peer_clock = float(greeting[len(GREETING):].split()[0])
    except (ValueError, IndexError):
        return None, None
    half_trip = (received_at - sent_at) / 2
    return round(peer_clock - (sent_at + half_trip), 6), round(half_trip, 6)


def probe(target, source, timeout):
    started = time.time()
    error = None
    offset = uncertainty = None
    try:
        conn = socket.create_connection((target["address"], target["port"]), timeout=timeout,
                                        source_address=(source, 0) if source else None)
        offset, uncertainty = read_peer_clock(conn)
        conn.close()
    except (OSError, socket.timeout) as exc:
        error = str(exc) or exc.__class__.__name__
    return dict(target, reachable=error is None, seconds=round(time.time() - started, 4), error=error,
                clock_offset=offset, clock_uncertainty=uncertainty)


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            targets=dict(type="list", elements="dict", required=True, options=dict(
                name=dict(type="str", required=True),
                address=dict(type="str", required=True),
                port=dict(type="int", required=True),
            )),
            source=dict(type="str", default=""),
            timeout=dict(type="float", default=3.0),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    results = [probe(t, module.params["source"], module.params["timeout"]) for t in module.params["targets"]]
    module.exit_json(changed=False, results=results,
                     failed_peers=[r["name"] for r in results if not r["reachable"]], clock=time.time())


if __name__ == "__main__":
    main()
