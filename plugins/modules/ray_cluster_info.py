#!/usr/bin/python
# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# As an Ansible module this file is also offered under the
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: Apache-2.0 OR GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: ray_cluster_info
short_description: Read the nodes and resources of a running Ray cluster, optionally waiting until it is complete
version_added: 0.2.0
description:
  - Connects to the cluster with Ray's Python API (C(ray.nodes()), C(ray.cluster_resources())) using the
    Python of the Ray venv, and returns every node with its address, state and resources. Nothing is parsed
    from C(ray status) text, and the dashboard (which C(ray list nodes) needs) is not required.
  - With O(timeout) above 0 it keeps reading until O(expect_nodes) nodes are alive and O(expect_resources)
    are visible, or the time is up. It does not fail when the cluster is incomplete; RV(complete) says so,
    and the caller explains the missing nodes.
  - Read-only.
options:
  python:
    description: Python interpreter of the Ray venv.
    type: path
    required: true
  address:
    description: Address of the head's GCS, C(ip:port).
    type: str
    required: true
  expect_nodes:
    description: Number of alive nodes that makes the cluster complete; 0 only reads.
    type: int
    default: 0
  expect_resources:
    description: 'Totals that must be visible across alive nodes, for example C({NPU: 24}).'
    type: dict
    default: {}
  timeout:
    description: Seconds to wait for a complete cluster; 0 reads once.
    type: int
    default: 0
  interval:
    description: Seconds between reads while waiting.
    type: float
    default: 1.0
  token_file:
    description:
      - File holding the cluster's authentication token. When set, the reader runs with C(RAY_AUTH_MODE=token) and
        C(RAY_AUTH_TOKEN_PATH) pointing at it; the token itself never reaches an argument or the environment.
    type: path
  run_as:
    description:
      - Account the reader runs as (with C(runuser)), the one the node's Ray runs as. A reader run as root on a node
        whose Ray runs as another account can create directories of Ray's session that the account's workers then
        cannot write, and they abort. Empty runs it as the module's user.
    type: str
    default: ""
attributes:
  platform:
    description: Linux hosts with Ray installed in a venv.
extends_documentation_fragment:
  - aihost.llm_cluster.attributes
author:
  - aihost.llm_cluster contributors (@aihost)
"""

EXAMPLES = r"""
- name: Wait until 3 nodes and 24 NPU are in the cluster
  aihost.llm_cluster.ray_cluster_info:
    python: /opt/llm_cluster/ray/bin/python
    address: 192.168.10.11:6379
    expect_nodes: 3
    expect_resources: {NPU: 24}
    timeout: 120
    token_file: /etc/llm_cluster/ray-auth-token
  register: ray_cluster
"""

RETURN = r"""
complete:
  description: Whether O(expect_nodes) and O(expect_resources) were met.
  returned: always
  type: bool
connected:
  description: Whether the last attempt reached the cluster.
  returned: always
  type: bool
error:
  description: Why the last attempt could not read the cluster, or null.
  returned: always
  type: str
nodes:
  description: Every node the GCS knows, alive or dead.
  returned: always
  type: list
  elements: dict
  sample: [{"node_id": "5405f6...", "address": "10.0.0.11", "hostname": "master1", "alive": true, "is_head": true,
            "resources": {"CPU": 192.0, "NPU": 8.0}, "death_reason": ""}]
alive:
  description: Number of alive nodes.
  returned: always
  type: int
resources:
  description: Resource totals over the alive nodes.
  returned: always
  type: dict
missing:
  description: 'What is still missing, for example C(["nodes: 2 of 3 alive", "NPU: 16 of 24"]).'
  returned: always
  type: list
  elements: str
ray_version:
  description: Ray version of the reading client.
  returned: always
  type: str
seconds:
  description: Time spent waiting.
  returned: always
  type: float
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule

# Runs under the Ray venv's Python. Reads until complete or the deadline, prints one JSON line.
READER = r'''
import json, sys, time
args = json.loads(sys.argv[1])
try:
    import ray
    ray.init(address=args["address"], logging_level="ERROR", log_to_driver=False)
except Exception as exc:
    print(json.dumps({"connected": False, "error": "%s: %s" % (type(exc).__name__, (str(exc).strip().splitlines() or [""])[-1])}))
    raise SystemExit(0)
while True:
    nodes = []
    for node in ray.nodes():
        resources = dict(node.get("Resources") or {})
        nodes.append({"node_id": node.get("NodeID"), "address": node.get("NodeManagerAddress"),
                      "hostname": node.get("NodeManagerHostname"), "alive": bool(node.get("Alive")),
                      "is_head": "node:__internal_head__" in resources,
                      "resources": {k: v for k, v in resources.items() if not k.startswith("node:")},
                      "death_reason": node.get("DeathReasonMessage") or ""})
    report = {"connected": True, "error": None, "nodes": nodes, "ray_version": ray.__version__}
    alive = [n for n in nodes if n["alive"]]
    totals = {}
    for node in alive:
        for name, value in node["resources"].items():
            totals[name] = totals.get(name, 0) + value
    done = len(alive) >= args["expect_nodes"] and all(totals.get(k, 0) >= v for k, v in args["expect"].items())
    if done or time.time() >= args["deadline"]:
        break
    time.sleep(args["interval"])
print(json.dumps(report))
ray.shutdown()
'''


def summarize(report, expect_nodes, expect_resources):
    """Add alive count, totals over alive nodes and what is missing to a reader report."""
    nodes = report.get("nodes") or []
    alive = [node for node in nodes if node.get("alive")]
    totals = {}
    for node in alive:
        for name, value in (node.get("resources") or {}).items():
            totals[name] = totals.get(name, 0) + value
    missing = []
    if not report.get("connected"):
        missing.append("cluster not reachable: %s" % report.get("error"))
    if len(alive) < expect_nodes:
        missing.append("nodes: %d of %d alive" % (len(alive), expect_nodes))
    for name, want in sorted(expect_resources.items()):
        if totals.get(name, 0) < float(want):
            missing.append("%s: %g of %g" % (name, totals.get(name, 0), float(want)))
    return dict(report, nodes=nodes, alive=len(alive), resources=totals, missing=missing, complete=not missing)


def read_once(module, deadline):
    params = module.params
    args = {"address": params["address"], "expect_nodes": params["expect_nodes"], "interval": params["interval"],
            "expect": {k: float(v) for k, v in params["expect_resources"].items()}, "deadline": deadline}
    environ = {"RAY_USAGE_STATS_ENABLED": "0"}
    if params.get("token_file"):
        environ.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": params["token_file"]})
    argv = [params["python"], "-c", READER, json.dumps(args)]
    if params["run_as"]:
        argv = ["runuser", "-u", params["run_as"], "--"] + argv
    rc, out, err = module.run_command(argv, environ_update=environ)
    for line in reversed(out.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    tail = (err.strip().splitlines() or ["no output"])[-1]
    return {"connected": False, "error": "reader exited %d: %s" % (rc, tail)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            address=dict(type="str", required=True),
            expect_nodes=dict(type="int", default=0),
            expect_resources=dict(type="dict", default={}),
            timeout=dict(type="int", default=0),
            interval=dict(type="float", default=1.0),
            token_file=dict(type="path"),
            run_as=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        expect = {str(k): float(v) for k, v in params["expect_resources"].items()}
    except (TypeError, ValueError):
        module.fail_json(msg="expect_resources must map resource names to numbers, got %r" % params["expect_resources"])
    started = time.time()
    deadline = started + max(params["timeout"], 0)
    while True:
        result = summarize(read_once(module, deadline), params["expect_nodes"], expect)
        if result["complete"] or time.time() >= deadline:
            break
        time.sleep(params["interval"])
    result.setdefault("ray_version", None)
    module.exit_json(changed=False, seconds=round(time.time() - started, 2), **result)


if __name__ == "__main__":
    main()
