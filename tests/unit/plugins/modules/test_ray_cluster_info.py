# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""ray_cluster_info: the reader script against a stand-in ray package, and the waiting loop."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from unittest.mock import patch

from ansible_collections.aihost.llm_cluster.plugins.modules import ray_cluster_info

from utils import run_module

FAKE_RAY = textwrap.dedent('''
    import json, os
    __version__ = "2.60.0"
    _state = os.environ["FAKE_RAY_STATE"]

    def init(address=None, **kwargs):
        with open(_state) as handle:
            data = json.load(handle)
        if data.get("refuse"):
            raise ConnectionError("Could not find any running Ray instance.\\nlast line: %s" % address)

    def nodes():
        with open(_state) as handle:
            return json.load(handle)["nodes"]

    def shutdown():
        pass
''')


def node(address, alive=True, npu=8.0, head=False):
    resources = {"CPU": 2.0, "NPU": npu, "node:%s" % address: 1.0}
    if head:
        resources["node:__internal_head__"] = 1.0
    return {"NodeID": address.replace(".", ""), "Alive": alive, "NodeManagerAddress": address,
            "NodeManagerHostname": "h" + address[-1], "Resources": resources,
            "DeathReasonMessage": "" if alive else "health check failed"}


def run_reader(tmp_path, state, expect_nodes=3, expect=None, deadline=0):
    package = tmp_path / "site" / "ray"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(FAKE_RAY)
    (tmp_path / "state.json").write_text(json.dumps(state))
    args = {"address": "10.0.0.1:6379", "expect_nodes": expect_nodes, "expect": expect or {}, "deadline": deadline,
            "interval": 0.01}
    out = subprocess.run([sys.executable, "-c", ray_cluster_info.READER, json.dumps(args)], stdout=subprocess.PIPE,
                         universal_newlines=True, check=True,
                         env={"PYTHONPATH": str(tmp_path / "site"), "FAKE_RAY_STATE": str(tmp_path / "state.json")})
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_reader_reports_every_node_without_internal_resources(tmp_path):
    report = run_reader(tmp_path, {"nodes": [node("10.0.0.1", head=True), node("10.0.0.2", alive=False)]})
    assert report["connected"] and report["ray_version"] == "2.60.0"
    assert report["nodes"] == [
        {"node_id": "10001", "address": "10.0.0.1", "hostname": "h1", "alive": True, "is_head": True,
         "resources": {"CPU": 2.0, "NPU": 8.0}, "death_reason": ""},
        {"node_id": "10002", "address": "10.0.0.2", "hostname": "h2", "alive": False, "is_head": False,
         "resources": {"CPU": 2.0, "NPU": 8.0}, "death_reason": "health check failed"}]


def test_reader_says_why_it_could_not_connect(tmp_path):
    report = run_reader(tmp_path, {"refuse": True, "nodes": []})
    assert report == {"connected": False, "error": "ConnectionError: last line: 10.0.0.1:6379"}


def test_summarize_counts_alive_nodes_and_names_what_is_missing():
    report = {"connected": True, "nodes": [
        {"address": "a", "alive": True, "resources": {"NPU": 8.0}},
        {"address": "b", "alive": True, "resources": {"NPU": 8.0}},
        {"address": "c", "alive": False, "resources": {"NPU": 8.0}}]}
    result = ray_cluster_info.summarize(report, 3, {"NPU": 24.0})
    assert result["alive"] == 2 and result["resources"] == {"NPU": 16.0}
    assert result["missing"] == ["nodes: 2 of 3 alive", "NPU: 16 of 24"] and not result["complete"]
    assert ray_cluster_info.summarize(report, 2, {"NPU": 16})["complete"]
    down = ray_cluster_info.summarize({"connected": False, "error": "no GCS"}, 3, {})
    assert down["missing"] == ["cluster not reachable: no GCS", "nodes: 0 of 3 alive"]


def test_module_waits_until_complete():
    reads = iter([{"connected": False, "error": "ConnectionError: not yet"},
                  {"connected": True, "nodes": [{"address": "a", "alive": True, "resources": {"NPU": 8.0}}],
                   "ray_version": "2.60.0"},
                  {"connected": True, "nodes": [{"address": "a", "alive": True, "resources": {"NPU": 8.0}},
                                                {"address": "b", "alive": True, "resources": {"NPU": 8.0}}],
                   "ray_version": "2.60.0"}])
    with patch.object(ray_cluster_info, "read_once", side_effect=lambda module, deadline: next(reads)), \
            patch.object(ray_cluster_info.time, "sleep"):
        result = run_module(ray_cluster_info.main, {"python": "/opt/llm_cluster/ray/bin/python", "address": "a:6379",
                                                    "expect_nodes": 2, "expect_resources": {"NPU": 16}, "timeout": 60})
    assert result["complete"] and result["alive"] == 2 and result["changed"] is False


def test_module_stops_at_the_deadline_without_failing():
    with patch.object(ray_cluster_info, "read_once", return_value={"connected": False, "error": "refused"}):
        result = run_module(ray_cluster_info.main, {"python": "/x/python", "address": "a:6379", "expect_nodes": 2,
                                                    "timeout": 0})
    assert not result["complete"] and result.get("failed") is not True
    assert result["missing"] == ["cluster not reachable: refused", "nodes: 0 of 2 alive"]


def test_module_refuses_non_numeric_expectations():
    result = run_module(ray_cluster_info.main, {"python": "/x/python", "address": "a:6379",
                                                "expect_resources": {"NPU": "many"}})
    assert result["failed"] and "expect_resources must map resource names to numbers" in result["msg"]


def test_reader_runs_as_the_account_of_the_nodes_ray():
    calls = []

    def run_command(self, argv, environ_update=None, **kwargs):
        calls.append((argv, environ_update))
        return 0, '{"connected": true, "nodes": [], "ray_version": "2.60.0"}\n', ""

    with patch.object(ray_cluster_info.AnsibleModule, "run_command", run_command):
        run_module(ray_cluster_info.main, {"python": "/opt/llm_cluster/ray/bin/python", "address": "a:6379",
                                           "token_file": "/etc/llm_cluster/ray-auth-token", "run_as": "llm-cluster"})
        run_module(ray_cluster_info.main, {"python": "/opt/llm_cluster/ray/bin/python", "address": "a:6379"})
    assert calls[0][0][:5] == ["runuser", "-u", "llm-cluster", "--", "/opt/llm_cluster/ray/bin/python"]
    assert calls[0][1]["RAY_AUTH_TOKEN_PATH"] == "/etc/llm_cluster/ray-auth-token"
    assert calls[1][0][0] == "/opt/llm_cluster/ray/bin/python"
