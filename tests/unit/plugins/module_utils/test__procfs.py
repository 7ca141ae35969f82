# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""ProcTable on a fake procfs and on this process; thread affinities through the real kernel."""

from __future__ import annotations

import os

import pytest
from fake_procfs import fake_process

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _procfs
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError


def unused_pid():
    """A PID no process has (above pid_max's usual range and not in /proc)."""
    pid = 4194000
    while os.path.exists("/proc/%d" % pid):
        pid += 1
    return pid


@pytest.fixture
def proc(tmp_path):
    root = tmp_path / "proc"
    fake_process(root, 1, "systemd", ppid=0, cgroup="0::/init.scope\n")
    fake_process(root, 100, "python3", cmdline=b"python3\0-m\0vllm\0", environ=b"A=1\0B=x=y\0junk\0",
                 cgroup="12:cpuset:/system.slice/llm-cluster-serve.service\n0::/system.slice/llm-cluster-serve.service/payload\n")
    fake_process(root, 200, "VLLM::EngineCor", ppid=100, cmdline=b"VLLM::EngineCore_DP0\0")
    task = root / "200" / "task"
    (task / "201").mkdir()
    (task / "201" / "comm").write_text("acl_thread\n")
    (task / "201" / "stat").write_text("201 (acl_thread) S 100 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5555 0 0\n")
    (task / "201" / "status").write_text("Name:\tacl_thread\nCpus_allowed:\tf\nCpus_allowed_list:\t0-1,3\n")
    (root / "self").mkdir()
    (root / "interrupts").write_text("")
    return root


def test_pids_are_the_numeric_entries(proc):
    assert _procfs.ProcTable(str(proc)).pids() == [1, 100, 200]


def test_missing_root_is_a_change_error(tmp_path):
    with pytest.raises(ChangeError, match="cannot list"):
        _procfs.ProcTable(str(tmp_path / "absent")).pids()


def test_stat_comm_cmdline_environ_and_cgroup(proc):
    table = _procfs.ProcTable(str(proc))
    assert table.stat(200) == {"pid": 200, "comm": "VLLM::EngineCor", "state": "S", "ppid": 100, "start_time": 1200}
    assert table.comm(200) == "VLLM::EngineCor"
    assert table.cmdline(100) == "python3\0-m\0vllm"
    assert table.environ(100) == {"A": "1", "B": "x=y"}
    assert table.cgroup_parts(100) == {"system.slice", "llm-cluster-serve.service", "payload"}
    assert table.stat(999) is None and table.cmdline(999) == "" and table.environ(999) is None
    assert table.cgroup_parts(999) == set()


def test_comm_falls_back_to_stat_and_reads_are_cached(proc):
    table = _procfs.ProcTable(str(proc))
    (proc / "100" / "comm").unlink()
    assert table.comm(100) == "python3"
    (proc / "100" / "stat").write_text("100 (renamed) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 9 0 0\n")
    assert table.stat(100)["comm"] == "python3"


def test_malformed_stat_is_a_gone_process(proc):
    (proc / "100" / "stat").write_text("garbage")
    table = _procfs.ProcTable(str(proc))
    assert table.stat(100) is None
    assert table.ancestors(200) == [100]


def test_threads(proc):
    table = _procfs.ProcTable(str(proc))
    assert table.tids(200) == [200, 201]
    assert table.tids(999) == []
    assert table.thread_comm(200, 201) == "acl_thread"
    assert table.thread_comm(200, 999) is None
    assert table.thread_start(200, 201) == 5555
    assert table.thread_start(200, 200) is None
    assert table.allowed_list(200, 201) == [0, 1, 3]
    assert table.allowed_list(200, 200) is None


def test_ancestors_stop_at_pid_0_and_at_a_loop(proc):
    table = _procfs.ProcTable(str(proc))
    assert table.ancestors(200) == [100, 1]
    (proc / "1" / "stat").write_text("1 (systemd) S 200 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 1 0 0\n")
    assert _procfs.ProcTable(str(proc)).ancestors(200) == [100, 1, 200]


def test_real_thread_affinity_round_trip():
    tid = _procfs.ProcTable("/proc").tids(os.getpid())[0]
    current = sorted(os.sched_getaffinity(tid))
    assert _procfs.get_affinity(tid) == current
    assert _procfs.set_affinity(tid, current) is None
    assert _procfs.ProcTable("/proc").allowed_list(os.getpid(), tid) == current


def test_affinity_of_a_gone_thread():
    pid = unused_pid()
    assert _procfs.get_affinity(pid) is None
    assert _procfs.set_affinity(pid, [0]) == "gone"


def test_set_affinity_reports_a_refused_set():
    error = _procfs.set_affinity(os.getpid(), [4095])
    assert error is not None and error != "gone" and "Invalid argument" in error
    assert _procfs.get_affinity(os.getpid()) == sorted(os.sched_getaffinity(0))


def test_excluded_pids_are_this_process_and_its_ancestors():
    excluded = _procfs.excluded_pids(_procfs.ProcTable("/proc"))
    assert os.getpid() in excluded and os.getppid() in excluded


def test_excluded_pids_without_a_readable_procfs(tmp_path):
    assert _procfs.excluded_pids(_procfs.ProcTable(str(tmp_path))) == {os.getpid()}
