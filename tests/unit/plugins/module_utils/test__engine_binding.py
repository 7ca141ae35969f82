# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Detecting vllm-ascend's own CPU binding in command lines and environments, on a fake procfs."""

from __future__ import annotations

import pytest
from fake_procfs import fake_process

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _engine_binding
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import ProcTable


def test_engine_binding_detection(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 10, "vllm", cmdline=b"vllm\0serve\0m\0--additional-config={\"enable_cpu_binding\": true}\0")
    fake_process(proc, 11, "VLLM::Worker_TP", ppid=10, cmdline=b"VLLM::Worker_TP0\0")
    fake_process(proc, 20, "vllm", cmdline=b"vllm\0serve\0m\0--additional-config\0{\"enable_cpu_binding\": false}\0")
    fake_process(proc, 30, "vllm", cmdline=b"vllm\0serve\0--numa-bind\0")
    fake_process(proc, 40, "python3", environ=b"PATH=/bin\0VLLM_ASCEND_ENABLE_CPU_BINDING=1\0")
    fake_process(proc, 50, "python3", environ=b"EXTRA='{\"enable_cpu_binding\": True}'\0")
    fake_process(proc, 60, "python3", environ=b"ENABLE_CPU_BINDING=0\0")
    table = ProcTable(str(proc))
    assert "command line of PID 10" in _engine_binding.engine_binding(table, 11)
    assert _engine_binding.engine_binding(table, 20) is None
    assert "--numa-bind" in _engine_binding.engine_binding(table, 30)
    assert "VLLM_ASCEND_ENABLE_CPU_BINDING=1" in _engine_binding.engine_binding(table, 40)
    assert "EXTRA" in _engine_binding.engine_binding(table, 50)
    assert _engine_binding.engine_binding(table, 60) is None


@pytest.mark.parametrize("args, found", [
    (b"vllm\0--numa-bind=true\0", True),
    (b"vllm\0--numa-bind=false\0", False),
    (b"vllm\0--additional_config\0{\"enable_cpu_binding\": \"yes\"}\0", True),
    (b"vllm\0--additional-config\0{\"enable_cpu_binding\": 1}\0", True),
    (b"vllm\0--additional-config\0[true]\0", False),
    (b"vllm\0--additional-config\0{'enable_cpu_binding': true}\0", True),
    (b"vllm\0--additional-config\0", False),
])
def test_command_line_forms(tmp_path, args, found):
    proc = tmp_path / "proc"
    fake_process(proc, 10, "vllm", cmdline=args)
    assert (_engine_binding.engine_binding(ProcTable(str(proc)), 10) is not None) is found


@pytest.mark.parametrize("text, enabled", [
    ('{"enable_cpu_binding": true}', True),
    ('{"enable_cpu_binding": " On "}', True),
    ('{"enable_cpu_binding": false}', False),
    ('{"enable_cpu_binding": 2}', False),
    ('{"other": true}', False),
    ('"enable_cpu_binding"', False),
    ("{enable_cpu_binding: true}", True),
    ("{enable_cpu_binding: tr}", False),
])
def test_config_enables_binding(text, enabled):
    assert _engine_binding.config_enables_binding(text) is enabled


def test_refusal_names_every_process_and_the_fix(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 30, "vllm", cmdline=b"vllm\0serve\0--numa-bind\0")
    fake_process(proc, 31, "VLLM::EngineCor", ppid=30)
    fake_process(proc, 40, "python3")
    table = ProcTable(str(proc))
    matched = {31: dict(comm="VLLM::EngineCor"), 40: dict(comm="python3")}
    with pytest.raises(ChangeError) as raised:
        _engine_binding.refuse_engine_binding(table, matched)
    assert raised.value.msg.startswith("refusing to bind: vllm-ascend binds CPUs itself (enable_cpu_binding) in "
                                       "PID 31 (VLLM::EngineCor): --numa-bind in the command line of PID 30.")
    assert "force=true" in raised.value.msg and "PID 40" not in raised.value.msg
    assert _engine_binding.refuse_engine_binding(table, {40: dict(comm="python3")}) is None
