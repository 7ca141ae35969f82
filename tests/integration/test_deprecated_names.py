# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The old module names (``*_facts`` that return no facts) still run, as deprecated redirects.

``meta/runtime.yml`` routes ``preflight_facts`` and ``npu_network_facts`` to their ``_info`` names. A play on
the controller's own host (local connection, read-only modules) calls each old name and its new name and
compares the results; Ansible must print the deprecation with the removal version.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import yaml

BIN = os.path.dirname(sys.executable)

PLAY = [{
    "name": "Old and new names",
    "hosts": "localhost",
    "connection": "local",
    "gather_facts": False,
    "tasks": [
        {"name": "Old preflight name", "aihost.llm_cluster.preflight_facts": {"interface": "lo", "ports": [9]},
         "register": "old_preflight"},
        {"name": "New preflight name", "aihost.llm_cluster.preflight_info": {"interface": "lo", "ports": [9]},
         "register": "new_preflight"},
        # No device: hccn_tool is looked up (any executable will do) and never run.
        {"name": "Old NPU network name", "aihost.llm_cluster.npu_network_facts": {"devices": [], "hccn_tool": "/bin/true"},
         "register": "old_npu"},
        {"name": "New NPU network name", "aihost.llm_cluster.npu_network_info": {"devices": [], "hccn_tool": "/bin/true"},
         "register": "new_npu"},
        {"name": "Write the results", "ansible.builtin.copy": {
            "dest": "{{ out }}", "mode": "0600",
            "content": "{{ {'old_preflight': old_preflight, 'new_preflight': new_preflight, "
                       "'old_npu': old_npu, 'new_npu': new_npu} | to_json }}"}},
    ],
}]


def test_old_names_redirect_with_a_deprecation(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(PLAY))
    out = tmp_path / "results.json"
    env = dict(os.environ, ANSIBLE_DEPRECATION_WARNINGS="1", ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(playbook),
                           "-e", "out=%s" % out, "-e", "ansible_python_interpreter=%s" % sys.executable],
                          cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    text = " ".join((proc.stdout + proc.stderr).split())
    for old, new in (("preflight_facts", "preflight_info"), ("npu_network_facts", "npu_network_info")):
        assert "aihost.llm_cluster.%s has been deprecated" % old in text
        assert "use aihost.llm_cluster.%s instead" % new in text
    assert text.count("removed from collection 'aihost.llm_cluster' version 2.0.0") >= 2
    assert "preflight_info has been deprecated" not in text and "npu_network_info has been deprecated" not in text

    results = json.loads(out.read_text())
    old, new = results["old_preflight"], results["new_preflight"]
    assert old["interface"]["name"] == new["interface"]["name"] == "lo"
    assert old["interface"]["ipv4"] == new["interface"]["ipv4"] and "127.0.0.1" in new["interface"]["ipv4"]
    assert old["kernel"] == new["kernel"] and old["python_version"] == new["python_version"]
    assert [p["port"] for p in old["ports"]] == [p["port"] for p in new["ports"]] == [9]
    assert results["old_npu"]["devices"] == results["new_npu"]["devices"] == []
    assert results["old_npu"]["pings"] == results["new_npu"]["pings"] == []
