# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""deploy.yml formed the Ray cluster: three nodes, one emulated NPU each (see molecule.yml), one enabled unit per node."""

from __future__ import annotations

import json

testinfra_hosts = ["ansible://all"]

# The answer on a line of its own after MARK: Ray's driver prints the cluster's own messages on standard output
# too, even after that line (molecule/ray/tests/test_ray.py).
MARK = "llm_cluster-result: "
READ = r'''
import json, ray
ray.init(address="%s:6379", logging_level="ERROR", log_to_driver=False)
alive = [n for n in ray.nodes() if n["Alive"]]
print("llm_cluster-result: " + json.dumps({"alive": len(alive), "npu": ray.cluster_resources().get("NPU", 0),
      "mine": [n["Resources"].get("NPU") for n in alive if n["NodeManagerAddress"] == "%s"]}))
'''


def test_node_joined_with_its_npu(host):
    env = dict(line.split("=", 1) for line in host.file("/etc/llm_cluster/env").content_string.splitlines()
               if line and not line.startswith("#"))
    code = READ % (env["LLM_CLUSTER_HEAD_ADDRESS"], env["LLM_CLUSTER_NODE_ADDRESS"])
    # With the cluster token settings the Ray units use (RAY_AUTH_MODE, RAY_AUTH_TOKEN_PATH), as the account Ray
    # runs as: a driver run as root could leave root's directories in Ray's session for the account's workers.
    out = host.run("set -a; . /etc/llm_cluster/ray-auth.env; set +a; "
                   "runuser -u llm-cluster -- /opt/llm_cluster/ray/bin/python - <<'EOF'\n%s\nEOF" % code)
    assert out.rc == 0, out.stderr
    answers = [line[len(MARK):] for line in out.stdout.splitlines() if line.startswith(MARK)]
    assert answers, out.stdout[-2000:]
    assert json.loads(answers[-1]) == {"alive": 3, "npu": 3.0, "mine": [1.0]}


def test_unit_active_and_enabled(host):
    name = "llm-cluster-ray-head" if host.backend.get_hostname() == "master1" else "llm-cluster-ray-worker"
    unit = host.service(name)
    assert unit.is_running and unit.is_enabled
