#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: port_listener
short_description: Hold a free TCP port open for a short while so that peers can probe it
version_added: 0.1.0
description:
  - With O(state=started), checks whether O(port) is free. When it is, binds it, leaves a detached
    listener process that accepts connections, answers each with a greeting that carries the node's clock
    (so that M(aihost.llm_cluster.tcp_probe) can measure clock offsets) and closes them, until O(seconds) have passed or it is stopped,
    and returns at once. When the port is already taken, reports its owners and starts nothing.
  - With O(state=stopped), ends the listener started for O(port), if it still runs.
  - The listener is a transient probe aid that leaves nothing behind; it writes no files, so the module
    never reports a change and runs in check mode too.
options:
  port:
    description: TCP port to hold.
    type: int
    required: true
  address:
    description: Local address to bind (the cluster interface's address); V(0.0.0.0) binds all.
    type: str
    default: 0.0.0.0
  seconds:
    description: Longest time the listener stays up.
    type: int
    default: 60
  state:
    description: Start or stop the listener.
    type: str
    choices: [started, stopped]
    default: started
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Hold the Ray port for the reachability probe
  aihost.llm_cluster.port_listener:
    port: 6379
    seconds: 60

- name: Release it
  aihost.llm_cluster.port_listener:
    port: 6379
    state: stopped
"""

RETURN = r"""
listening:
  description: Whether a probe listener now holds the port.
  returned: always
  type: bool
  sample: true
pid:
  description: PID of the listener (started) or of the one that was stopped; null when none.
  returned: always
  type: int
  sample: 4242
owners:
  description: Processes that already listened on the port when it was not free.
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 812, "comm": "gcs_server", "unit": "llm-cluster-ray-head.service"}]
"""

import errno
import os
import select
import signal
import socket
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.aihost.llm_cluster.plugins.module_utils._procnet import listening_ports

GREETING = b"llm_cluster-probe"
STOP = b"llm_cluster-probe-stop\n"


def _serve(sock, deadline):
    """Accept and close connections until the deadline; runs in the detached child."""
    signal.signal(signal.SIGTERM, lambda signum, frame: os._exit(0))
    while time.time() < deadline:
        ready = select.select([sock], [], [], max(0.0, min(1.0, deadline - time.time())))[0]
        if ready:
            try:
                conn = sock.accept()[0]
                conn.settimeout(0.5)
                # The greeting carries this node's clock so peers can measure the offset.
                conn.sendall(GREETING + b" %.6f\n" % time.time())
                stop_asked = conn.recv(len(STOP)) == STOP
                conn.close()
            except OSError:
                continue
            if stop_asked:
                break
    os._exit(0)


def _detach(sock, deadline):
    """Fork a listener that outlives the module; return its PID."""
    read_end, write_end = os.pipe()
    if os.fork() == 0:
        os.close(read_end)
        os.setsid()
        child = os.fork()
        if child:
            os.write(write_end, str(child).encode())
            os._exit(0)
        os.close(write_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        _serve(sock, deadline)
    os.close(write_end)
    pid = int(os.read(read_end, 32) or 0)
    os.close(read_end)
    os.wait()
    return pid


def start(module):
    port = module.params["port"]
    owners = listening_ports().get(port, [])
    if owners:
        return dict(listening=False, pid=None, owners=owners)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((module.params["address"], port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            return dict(listening=False, pid=None, owners=listening_ports().get(port, []))
        module.fail_json(msg="cannot bind %s:%d: %s" % (module.params["address"], port, exc))
    sock.listen(64)
    pid = _detach(sock, time.time() + module.params["seconds"])
    sock.close()
    return dict(listening=True, pid=pid, owners=[])


def stop(module):
    port = module.params["port"]
    address = module.params["address"]
    owners = listening_ports().get(port, [])
    if not owners:
        return dict(listening=False, pid=None, owners=[])
    try:
        conn = socket.create_connection(("127.0.0.1" if address == "0.0.0.0" else address, port), timeout=2)
        try:
            greeting = conn.recv(64)
        except socket.timeout:
            greeting = b""
        if not greeting.startswith(GREETING):
            conn.close()
            # Not our listener: leave it alone.
            return dict(listening=False, pid=None, owners=owners)
        conn.sendall(STOP)
        conn.close()
    except OSError as exc:
        module.fail_json(msg="cannot reach the probe listener on port %d: %s" % (port, exc))
    pid = owners[0]["pid"]
    for _attempt in range(50):
        if not listening_ports().get(port):
            return dict(listening=False, pid=pid, owners=[])
        time.sleep(0.1)
    module.fail_json(msg="the probe listener on port %d (pid %d) did not stop" % (port, pid))


def build_module():
    return AnsibleModule(
        argument_spec=dict(
            port=dict(type="int", required=True),
            address=dict(type="str", default="0.0.0.0"),
            seconds=dict(type="int", default=60),
            state=dict(type="str", choices=["started", "stopped"], default="started"),
        ),
        supports_check_mode=True,
    )


def main():
    module = build_module()
    if module.params["state"] == "started":
        result = start(module)
    else:
        result = stop(module)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
