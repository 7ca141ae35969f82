# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

import os

from unittest.mock import MagicMock

from ansible_collections.aihost.llm_cluster.plugins.modules import ray_node_info

SHOW = ("LoadState=loaded\nActiveState=active\nSubState=running\nMainPID=4242\nNRestarts=2\nUnitFileState=enabled\n"
        "ActiveEnterTimestampMonotonic=912345678\nResult=success\n")


def module_with(outputs):
    module = MagicMock()
    module.get_bin_path.side_effect = lambda name, *a, **k: "/usr/bin/" + name
    module.run_command.side_effect = lambda argv, **kwargs: outputs[argv[1]]
    return module


def test_service_facts_from_systemctl_show():
    facts = ray_node_info.service_facts(module_with({"show": (0, SHOW, "")}), "llm-cluster-ray-head")
    assert facts == {"name": "llm-cluster-ray-head", "exists": True, "active_state": "active", "sub_state": "running",
                     "result": "success", "main_pid": 4242, "restarts": 2, "unit_file_state": "enabled",
                     "active_enter_monotonic": 912345678, "error": None}


def test_unknown_unit_does_not_exist():
    show = "LoadState=not-found\nActiveState=inactive\nSubState=dead\nMainPID=0\nNRestarts=0\nUnitFileState=\n"
    facts = ray_node_info.service_facts(module_with({"show": (0, show, "")}), "llm-cluster-ray-worker")
    assert facts["exists"] is False and facts["main_pid"] is None and facts["unit_file_state"] is None


def test_journal_keeps_the_last_lines():
    module = module_with({"--unit": (0, "a\nb\nc\n", "")})
    assert ray_node_info.journal(module, "u", 2) == ["b", "c"]
    assert ray_node_info.journal(module, "u", 0) == []


def test_firewall_backend_prefers_a_running_firewalld():
    module = module_with({"is-active": (0, "active\n", "")})
    assert ray_node_info.firewall_facts(module) == {"firewalld": True, "nft": "/usr/bin/nft", "backend": "firewalld"}
    module = module_with({"is-active": (3, "inactive\n", "")})
    assert ray_node_info.firewall_facts(module)["backend"] == "nftables"
    module.get_bin_path.side_effect = lambda name, *a, **k: None
    assert ray_node_info.firewall_facts(module)["backend"] == "none"


def test_wanted_ports_expands_ranges():
    assert ray_node_info.wanted_ports([6379], ["20000-20002", "8000"], MagicMock()) == {6379, 8000, 20000, 20001, 20002}
    module = MagicMock()
    module.fail_json.side_effect = SystemExit
    try:
        ray_node_info.wanted_ports([], ["a-b"], module)
    except SystemExit:
        pass
    assert "is not first-last" in module.fail_json.call_args[1]["msg"]


def test_venv_processes_match_binary_or_interpreter(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    proc = tmp_path / "proc"
    for pid, exe, argv, comm in [("10", str(venv / "lib" / "raylet"), "raylet\0--x", "raylet"),
                                 ("11", "/usr/bin/python3.11", str(venv / "bin" / "python") + "\0-m\0ray", "python"),
                                 ("12", "/usr/sbin/sshd", "sshd\0", "sshd")]:
        (proc / pid).mkdir(parents=True)
        os.symlink(exe, str(proc / pid / "exe"))
        (proc / pid / "cmdline").write_text(argv)
        (proc / pid / "comm").write_text(comm + "\n")
    (proc / "self").mkdir()
    found = ray_node_info.venv_processes(str(venv), str(proc))
    assert [(p["pid"], p["comm"]) for p in found] == [(10, "raylet"), (11, "python")]
